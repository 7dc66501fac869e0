// smol-server's embeddings (POST /v1/embeddings, llama-server's /embedding) through
// OpenAI's official npm client (openai, pinned in package.json), on the tiny SmolLM3
// fixture run with --embeddings --pooling mean (its file has no pooling key):
//
//   1. embeddings.create with encoding_format float and with the client's default,
//      base64 (decoded by the client): the same vectors, bit for bit, each of unit length,
//      usage counting the tokens /tokenize gives;
//   2. a token-list input embeds as its text does; many inputs in one request (one pass)
//      give what each gives alone; `dimensions` keeps the first N values, renormalized;
//      embd_normalize -1 leaves the vector as pooled;
//   3. chat and embeddings on one server at once: both answer;
//   4. errors in OpenAI's shape, each naming its field: an empty list, an empty string, a
//      token id outside the vocabulary, an input over the batch (-b), a bad
//      encoding_format, too many dimensions; a server without --embeddings answers 501;
//      with --pooling none, /v1/embeddings is a 400 and /embedding gives a row per token;
//   5. reranking (--reranking) on smol-make-model's tiny BERT reranker, through curl as
//      its users call it: one score per document, sorted best first, equal to the pair's
//      score alone, top_n and return_documents; its bad requests named; an embedder
//      refuses /v1/rerank (501) and a reranker /v1/embeddings (400).
//
// The weights are random: only shapes, norms and equalities are checked (the vectors
// themselves are held to llama.cpp's in tests/real_model/embedding_check.py).
//
//   node embeddings.test.mjs SERVER_BINARY MODEL_GGUF MAKE_MODEL_BINARY
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model, makeModel] = process.argv.slice(2);
if (!serverBinary || !model || !makeModel) {
  console.error('usage: node embeddings.test.mjs SERVER_BINARY MODEL_GGUF MAKE_MODEL_BINARY');
  process.exit(2);
}

let server;
let client;

before(async () => {
  server = await startServer(serverBinary, ['-m', model, '-c', '1024', '-t', '2', '-np', '2',
                                            '-b', '128', '--embeddings', '--pooling', 'mean']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const TEXTS = ['The quick brown fox jumps over the lazy dog.', 'Embeddings map text to vectors.', 'a'];

const norm = (v) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));

async function post(url, path, body) {
  const response = await fetch(`${url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

async function tokens(text) {
  return (await post(server.url, '/tokenize', { content: text })).body.tokens;
}

test('float and base64 give the same unit vectors; usage counts the tokens', async () => {
  const floats = await client.embeddings.create({ model: 'smol', input: TEXTS, encoding_format: 'float' });
  const base64 = await client.embeddings.create({ model: 'smol', input: TEXTS });  // the SDK asks for base64
  assert.equal(floats.object, 'list');
  assert.equal(floats.data.length, TEXTS.length);
  let count = 0;
  for (const [i, text] of TEXTS.entries()) {
    assert.equal(floats.data[i].object, 'embedding');
    assert.equal(floats.data[i].index, i);
    assert.equal(floats.data[i].embedding.length, 256);
    assert.ok(Math.abs(norm(floats.data[i].embedding) - 1) < 1e-5);
    assert.deepEqual(base64.data[i].embedding, floats.data[i].embedding);
    count += (await tokens(text)).length;
  }
  assert.deepEqual(floats.usage, { prompt_tokens: count, total_tokens: count });
  assert.notDeepEqual(floats.data[0].embedding, floats.data[1].embedding);
});

test('token lists, many inputs in one pass, dimensions and embd_normalize', async () => {
  const text = await client.embeddings.create({ model: 'smol', input: TEXTS[0], encoding_format: 'float' });
  const ids = await client.embeddings.create({ model: 'smol', input: await tokens(TEXTS[0]), encoding_format: 'float' });
  assert.deepEqual(ids.data[0].embedding, text.data[0].embedding);

  const many = Array.from({ length: 12 }, (_, i) => `input number ${i}: ${'word '.repeat(i)}`);
  const together = await client.embeddings.create({ model: 'smol', input: many, encoding_format: 'float' });
  for (const [i, input] of many.entries()) {
    const alone = await client.embeddings.create({ model: 'smol', input, encoding_format: 'float' });
    assert.deepEqual(together.data[i].embedding, alone.data[0].embedding, `input ${i}`);
  }

  const raw = (await post(server.url, '/v1/embeddings', { input: TEXTS[1], embd_normalize: -1 })).body;
  const full = raw.data[0].embedding;
  assert.ok(Math.abs(norm(full) - 1) > 1e-3, 'unnormalized');
  const short = await client.embeddings.create({ model: 'smol', input: TEXTS[1], dimensions: 64, encoding_format: 'float' });
  assert.equal(short.data[0].embedding.length, 64);
  const head = full.slice(0, 64);
  const scale = norm(head);
  for (let i = 0; i < 64; ++i) assert.ok(Math.abs(short.data[0].embedding[i] - head[i] / scale) < 1e-6);
});

test('chat and embeddings on one server at once', async () => {
  const [chat, embedding] = await Promise.all([
    client.chat.completions.create({ model: 'smol', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 16, temperature: 0 }),
    client.embeddings.create({ model: 'smol', input: TEXTS, encoding_format: 'float' }),
  ]);
  assert.ok(chat.choices[0].message.content !== undefined);
  assert.equal(embedding.data.length, TEXTS.length);
});

test('bad requests are named 400s in OpenAI\'s shape', async () => {
  const cases = [
    [{ input: [] }, 'input', /empty list/],
    [{ input: '' }, 'input', /empty string/],
    [{ input: ['ok', ''] }, 'input', /input\[1\] is an empty string/],
    [{ input: [1, 2, 99999] }, 'input', /input\[2\] is not a token id/],
    [{ input: 'word '.repeat(300) }, 'input', /over the 128 one pass holds/],
    [{ input: 'x', encoding_format: 'hex' }, 'encoding_format', /float.*base64/],
    [{ input: 'x', dimensions: 257 }, 'dimensions', /more than the model's 256/],
    [{ input: 'x', dimensions: 0 }, 'dimensions', /dimensions/],
    [{}, 'input', /input is required/],
  ];
  for (const [body, param, message] of cases) {
    const { status, body: reply } = await post(server.url, '/v1/embeddings', body);
    assert.equal(status, 400, JSON.stringify(body));
    assert.equal(reply.error.type, 'invalid_request_error');
    assert.equal(reply.error.param, param, JSON.stringify(body));
    assert.match(reply.error.message, message);
  }
});

test('without --embeddings: 501; with --pooling none: /embedding gives each token\'s row', async () => {
  const plain = await startServer(serverBinary, ['-m', model, '-c', '512', '-t', '1', '-np', '1']);
  try {
    const { status, body } = await post(plain.url, '/v1/embeddings', { input: 'x' });
    assert.equal(status, 501);
    assert.match(body.error.message, /--embeddings/);
  } finally {
    assert.equal(await plain.stop(), 0);
  }
  const none = await startServer(serverBinary, ['-m', model, '-c', '512', '-t', '1', '-np', '1',
                                                '--embeddings', '--pooling', 'none']);
  try {
    const refused = await post(none.url, '/v1/embeddings', { input: 'x' });
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /pooling none/);
    const { status, body } = await post(none.url, '/embedding', { content: TEXTS });
    assert.equal(status, 200);
    assert.equal(body.length, TEXTS.length);
    for (const [i, text] of TEXTS.entries()) {
      assert.equal(body[i].index, i);
      assert.equal(body[i].embedding.length, (await tokens(text)).length);
      for (const row of body[i].embedding) assert.equal(row.length, 256);
    }
  } finally {
    assert.equal(await none.stop(), 0);
  }
});

// curl, as a user calls the endpoint: the reply's status and JSON body.
function curl(url, body) {
  const out = execFileSync('curl', ['-s', '-w', '\n%{http_code}', '-H', 'Content-Type: application/json',
                                    '-d', JSON.stringify(body), url], { encoding: 'utf8' });
  const at = out.lastIndexOf('\n');
  return { status: Number(out.slice(at + 1)), body: JSON.parse(out.slice(0, at)) };
}

test('reranking: a score per document, best first, through curl', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'smol-rerank-'));
  const reranker = join(dir, 'reranker.gguf');
  execFileSync(makeModel, ['--preset', 'bert-reranker-tiny', '--type', 'q8_0', '-o', reranker]);
  const ranking = await startServer(serverBinary, ['-m', reranker, '-t', '2', '-np', '1', '--reranking']);
  try {
    const query = 'where is the lighthouse';
    const documents = ['The lighthouse stands at the end of the road.', 'Bread needs flour.', 'a', 'Tides turn twice a day.'];
    const { status, body } = curl(`${ranking.url}/v1/rerank`, { model: 'smol', query, documents });
    assert.equal(status, 200);
    assert.equal(body.object, 'list');
    assert.equal(body.results.length, documents.length);
    assert.deepEqual(body.results.map((r) => r.index).sort(), [0, 1, 2, 3]);
    for (let i = 1; i < body.results.length; ++i) {
      assert.ok(body.results[i - 1].relevance_score >= body.results[i].relevance_score);
    }
    assert.ok(body.usage.prompt_tokens > 0);
    // Each pair scores alone as it does among the others (they share one pass).
    for (const result of body.results) {
      const alone = curl(`${ranking.url}/rerank`, { query, documents: [documents[result.index]] });
      assert.equal(alone.body.results[0].relevance_score, result.relevance_score);
    }
    const top = curl(`${ranking.url}/v1/rerank`, { query, documents, top_n: 2, return_documents: true });
    assert.deepEqual(top.body.results.map((r) => r.index), body.results.slice(0, 2).map((r) => r.index));
    for (const r of top.body.results) assert.equal(r.document.text, documents[r.index]);

    for (const [bad, param] of [[{ documents }, 'query'], [{ query }, 'documents'],
                                [{ query, documents: [] }, 'documents'], [{ query, documents: [1] }, 'documents'],
                                [{ query, documents, top_n: 0 }, 'top_n']]) {
      const refused = curl(`${ranking.url}/v1/rerank`, bad);
      assert.equal(refused.status, 400, JSON.stringify(bad));
      assert.equal(refused.body.error.param, param, JSON.stringify(bad));
    }
    const embedding = await post(ranking.url, '/v1/embeddings', { input: 'x' });
    assert.equal(embedding.status, 400);
    assert.match(embedding.body.error.message, /reranker/);
  } finally {
    assert.equal(await ranking.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  }
  const refused = curl(`${server.url}/v1/rerank`, { query: 'q', documents: ['d'] });
  assert.equal(refused.status, 501);
  assert.match(refused.body.error.message, /--reranking/);
});
