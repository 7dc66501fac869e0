// smol-server against the official `openai` npm client (v4).
//
//   node openai_client.test.mjs SERVER_BINARY MODEL_GGUF
//
// The model is a tiny random-weights model: its text is gibberish, so the tests
// look at shapes, determinism and counters, never at what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath, chatBinary] = process.argv.slice(2);
if (!serverBinary || !modelPath) {
  console.error('usage: node openai_client.test.mjs SERVER_BINARY MODEL_GGUF CHAT_BINARY');
  process.exit(2);
}
const SERVER_ARGS = ['-m', modelPath, '-np', '2', '-c', '2048', '-t', '2'];

let server;      // the server every test uses
let keyServer;   // the one started with --api-key, test (g)
let client;
let modelId;

// maxRetries 0: the client would otherwise retry 5xx answers and hide them.
const makeClient = (url, apiKey = 'unused') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });

async function metrics() {
  const res = await fetch(`${server.url}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  const value = (name) => {
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)\\s*$`, 'm'));
    return m ? Number(m[1]) : undefined;
  };
  return { text, cancelled: value('smol_requests_cancelled_total'), busy: value('smol_slots_busy') };
}

const HELLO = [{ role: 'user', content: 'Hello! Say something.' }];
const greedy = (extra = {}) => ({ model: modelId, messages: HELLO, max_tokens: 8, temperature: 0, seed: 1, ...extra });
const joined = (msg) => (msg.reasoning_content ?? '') + (msg.content ?? '');

before(async () => {
  server = await startServer(serverBinary, SERVER_ARGS);
  client = makeClient(server.url);
});

after(async () => {
  // Only a safety net: the last test stops the servers and checks the exit codes.
  if (keyServer) await keyServer.stop();
  if (server) await server.stop();
});

test('(a) models.list() has the one model of /v1/models', async () => {
  const raw = await (await fetch(`${server.url}/v1/models`)).json();
  assert.equal(raw.object, 'list');
  assert.equal(raw.data.length, 1);
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].id, raw.data[0].id);
  assert.equal(models[0].object, 'model');
  modelId = models[0].id;
});

let nonStreaming; // the message of (b), compared with the stream in (c)

test('(b) chat.completions.create, not streaming', async () => {
  const r = await client.chat.completions.create(greedy());
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  const msg = r.choices[0].message;
  assert.equal(msg.role, 'assistant');
  assert.equal(typeof msg.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 0 && r.usage.completion_tokens <= 8, `${r.usage.completion_tokens}`);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  nonStreaming = msg;

  const again = await client.chat.completions.create(greedy());
  assert.equal(joined(again.choices[0].message), joined(msg), 'greedy decoding gives the same text twice');
  assert.equal(again.choices[0].message.content, msg.content);
});

test('(c) streaming with include_usage matches the non-streaming answer', async () => {
  const stream = await client.chat.completions.create(greedy({ stream: true, stream_options: { include_usage: true } }));
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 2, `${chunks.length} chunks`);

  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0]?.delta?.role, 'assistant');

  let text = '';
  for (const c of chunks) {
    const d = c.choices[0]?.delta;
    text += (d?.reasoning_content ?? '') + (d?.content ?? '');
  }
  // Reasoning precedes the answer in both, so the concatenations compare.
  assert.equal(text, joined(nonStreaming));

  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage, 'the last chunk has usage');
  assert.ok(last.usage.prompt_tokens > 0);
  assert.ok(last.usage.completion_tokens <= 8);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);

  const finished = chunks.filter((c) => c.choices[0]?.finish_reason != null);
  assert.equal(finished.length, 1, 'exactly one chunk has a finish_reason');
  assert.ok(['stop', 'length'].includes(finished[0].choices[0].finish_reason));
});

test('(d) aborting a stream cancels the request on the server', async () => {
  const before = (await metrics()).cancelled;
  assert.equal(typeof before, 'number', 'smol_requests_cancelled_total is in /metrics');

  // A long reply, aborted as soon as the first chunk arrives. A tiny model can
  // be quick; should a reply finish before the abort lands, try again.
  let after;
  for (let attempt = 0; attempt < 3; attempt++) {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: modelId,
        messages: [{ role: 'user', content: `Tell me a very long story, take ${attempt}.` }],
        max_tokens: 900, temperature: 1, seed: 7 + attempt, stream: true,
      },
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        assert.ok(chunk);
        chunks++;
        controller.abort();
      }
    } catch (e) {
      // The client either ends the loop quietly or throws an abort error.
      assert.ok(/abort/i.test(e.name) || /abort/i.test(e.message), `unexpected error: ${e}`);
    }
    assert.ok(chunks >= 1);

    const deadline = Date.now() + 5000;
    let m;
    do {
      await new Promise((r) => setTimeout(r, 100));
      m = await metrics();
    } while ((m.cancelled <= before || m.busy !== 0) && Date.now() < deadline);
    after = m;
    if (m.cancelled > before) break;
  }
  assert.ok(after.cancelled >= 1 && after.cancelled > before, `smol_requests_cancelled_total went ${before} -> ${after.cancelled}`);
  assert.equal(after.busy, 0, 'smol_slots_busy is 0 again');
});

test('(e) completions.create (legacy endpoint)', async () => {
  const r = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens <= 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('(f) invalid requests are 400', async () => {
  const is400 = (e) => {
    assert.ok(e instanceof OpenAI.APIError, `${e}`);
    assert.equal(e.status, 400);
    return true;
  };
  await assert.rejects(client.chat.completions.create({ model: modelId, messages: [], max_tokens: 4 }), is400);
  await assert.rejects(client.chat.completions.create({ ...greedy(), n: 17 }), is400);
});

test('(f2) n: 2 choices, indexed, their completions summed in usage', async () => {
  const r = await client.chat.completions.create(greedy({ n: 2, temperature: 1, seed: 3 }));
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const one = await client.chat.completions.create(greedy({ temperature: 1, seed: 3 }));
  assert.equal(joined(r.choices[0].message), joined(one.choices[0].message));
});

test('(g) --api-key: wrong key 401, right key works, /health is open', async () => {
  keyServer = await startServer(serverBinary, [...SERVER_ARGS, '--api-key', 'sekrit']);

  const wrong = makeClient(keyServer.url, 'wrong');
  await assert.rejects(wrong.models.list(), (e) => {
    assert.equal(e.status, 401);
    return true;
  });
  await assert.rejects(wrong.chat.completions.create(greedy({ max_tokens: 2 })), (e) => {
    assert.equal(e.status, 401);
    return true;
  });
  const noKey = await fetch(`${keyServer.url}/v1/models`);
  assert.equal(noKey.status, 401);

  const right = makeClient(keyServer.url, 'sekrit');
  const models = [];
  for await (const m of right.models.list()) models.push(m);
  assert.equal(models.length, 1);
  const r = await right.chat.completions.create(greedy({ model: models[0].id, max_tokens: 2 }));
  assert.equal(r.choices[0].message.role, 'assistant');

  const health = await fetch(`${keyServer.url}/health`);
  assert.equal(health.status, 200);

  const code = await keyServer.stop();
  keyServer = undefined;
  assert.equal(code, 0, 'the --api-key server exits 0 on SIGTERM');
});

test('(h) a body that is not JSON is 400 with an OpenAI-style error', async () => {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{',
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(typeof body.error?.message, 'string');
  assert.equal(typeof body.error?.type, 'string');
});

test('(i) chat_template_kwargs.enable_thinking is accepted', async () => {
  for (const enable_thinking of [false, true]) {
    // Not in the client's types; v4 sends the body object as it is.
    const r = await client.chat.completions.create(greedy({ chat_template_kwargs: { enable_thinking } }));
    const msg = r.choices[0].message;
    assert.equal(msg.role, 'assistant');
    assert.equal(typeof msg.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  }
});

test('(i2) thinking off changes the prompt: the template says /no_think', async () => {
  // The prompt's token count differs between the modes (SmolLM3's system block names
  // the mode), which shows the switch reached the template.
  const on = await client.chat.completions.create(greedy({ chat_template_kwargs: { enable_thinking: true } }));
  const off = await client.chat.completions.create(greedy({ chat_template_kwargs: { enable_thinking: false } }));
  assert.notEqual(on.usage.prompt_tokens, off.usage.prompt_tokens);
});

// ignore_eos (llama-server's field) keeps the random model from ending its turn, so
// the reply's length is what the test asks for.
const long = (extra = {}) => greedy({ max_tokens: 24, ignore_eos: true, chat_template_kwargs: { enable_thinking: false }, ...extra });

test('(j) max_tokens ends the reply with finish_reason "length"', async () => {
  const r = await client.chat.completions.create(long({ max_tokens: 5 }));
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 5);
});

test('(k) the same seed gives the same sampled reply, another seed another one', async () => {
  const sampled = (seed) => client.chat.completions.create(long({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed }));
  const [a, b, c] = [await sampled(42), await sampled(42), await sampled(43)];
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);
});

test('(l) a stop string ends the reply before it, with finish_reason "stop"', async () => {
  const full = (await client.chat.completions.create(long())).choices[0].message.content;
  // A piece of the reply that first occurs where it is taken from.
  let stop, at;
  for (at = 3; at + 3 <= full.length; at++) {
    const piece = full.slice(at, at + 3);
    if (full.indexOf(piece) === at && piece.trim() === piece && piece.length === 3) { stop = piece; break; }
  }
  assert.ok(stop, `no usable stop string in ${JSON.stringify(full)}`);
  const r = await client.chat.completions.create(long({ stop: [stop] }));
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.content, full.slice(0, at));
});

test('(m) the reply equals smol-chat\'s for the same conversation (greedy)', async () => {
  assert.ok(chatBinary, 'usage: node openai_client.test.mjs SERVER_BINARY MODEL_GGUF CHAT_BINARY');
  // The server decodes a lone token on the batch-invariant kernels (a sequence's bits are
  // the same alone or batched); smol-chat decodes on the decode kernels, which sum in
  // another order, except with speculation on, whose verified tokens are plain decoding's
  // on those same invariant kernels. So smol-chat runs with n-gram drafts here: without
  // them the two replies agreed only while the paths' rounding happened to pick the same
  // tokens on this random-weight model.
  for (const prompt of ['Hi there', 'What is the capital of France?', 'Count to ten']) {
    const { stdout } = await promisify(execFile)(chatBinary,
      ['-m', modelPath, '-t', '1', '--temp', '0', '--no-think', '-n', '24',
       '--spec-type', 'ngram-simple', '-p', prompt]);
    const r = await client.chat.completions.create({
      model: modelId, messages: [{ role: 'user', content: prompt }], max_tokens: 24, temperature: 0,
      chat_template_kwargs: { enable_thinking: false },
    });
    // smol-chat ends its answer with a newline of its own.
    assert.equal(r.choices[0].message.content, stdout.replace(/\n$/, ''), prompt);
  }
});

test('(n) logprobs: the client reads content[].logprob, bytes and top_logprobs, streamed alike', async () => {
  const ask = greedy({ max_tokens: 6, ignore_eos: true, logprobs: true, top_logprobs: 4 });
  const r = await client.chat.completions.create(ask);
  const { content, refusal } = r.choices[0].logprobs;
  assert.equal(refusal, null);
  assert.equal(content.length, r.usage.completion_tokens);
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0, `${entry.logprob}`);
    assert.ok(Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
    assert.equal(entry.top_logprobs.length, 4);
    const mass = entry.top_logprobs.reduce((sum, t) => sum + Math.exp(t.logprob), 0);
    assert.ok(mass <= 1 + 1e-6, `the top tokens' mass ${mass}`);
    // Greedy: the chosen token is the most likely one (ignore_eos aside, which only
    // matters where the end of turn is the best: then it is not chosen).
    assert.ok(entry.logprob <= entry.top_logprobs[0].logprob + 1e-6);
  }
  const stream = await client.chat.completions.create({ ...ask, stream: true });
  const streamed = [];
  for await (const chunk of stream) {
    for (const entry of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(entry);
  }
  // The same tokens; the logprobs equal but for the rounding a prompt's last row may take
  // when read from the prompt cache rather than in a prefill.
  assert.deepEqual(streamed.map((e) => e.bytes), content.map((e) => e.bytes));
  streamed.forEach((e, i) => assert.ok(Math.abs(e.logprob - content[i].logprob) < 1e-3, `${e.logprob} ${content[i].logprob}`));
  const legacy = await client.completions.create({ model: modelId, prompt: 'Once', max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = legacy.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.length, lp.text_offset.length);
  assert.ok(lp.top_logprobs.every((top) => Object.keys(top).length <= 2));
  await assert.rejects(client.chat.completions.create(greedy({ top_logprobs: 2 })), (e) => e.status === 400 && e.param === 'top_logprobs');
  await assert.rejects(client.chat.completions.create(greedy({ logprobs: true, top_logprobs: 21 })), (e) => e.status === 400);
});

test('the server exits 0 on SIGTERM', async () => {
  const code = await server.stop();
  server = undefined;
  assert.equal(code, 0);
});
