// smol-server's ollama API (/api/chat, /api/generate, /api/embed, /api/tags, /api/show,
// /api/ps, /api/version) through ollama's official npm client (ollama, pinned in
// package.json), on the tiny SmolLM3 fixture run with --embeddings --pooling mean:
//
//   1. the model's descriptions: version, tags, ps and show in ollama's shapes;
//   2. a greedy chat, whole and streamed (NDJSON, the client's own reading): the same
//      text, done_reason and counts; num_predict caps it ("length");
//   3. generate: through the template, and raw, whole and streamed alike;
//   4. format: a JSON schema's reply parses and validates; a conversation with an
//      earlier tool call and its result is read;
//   5. embed: unit-length vectors, equal to /v1/embeddings' for the same texts; the
//      legacy embeddings: the pooled vector, unnormalized;
//   6. errors in ollama's shape ({"error": ...}, the client's ResponseError): images, a
//      bad format, a tool message that answers no call, an empty input.
//
// The weights are random: only shapes, equalities and what a grammar forces are checked.
//
//   node ollama.test.mjs SERVER_BINARY MODEL_GGUF
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model] = process.argv.slice(2);
if (!serverBinary || !model) {
  console.error('usage: node ollama.test.mjs SERVER_BINARY MODEL_GGUF');
  process.exit(2);
}

let server;
let client;

before(async () => {
  server = await startServer(serverBinary,
    ['-m', model, '-c', '2048', '-t', '2', '--embeddings', '--pooling', 'mean']);
  client = new Ollama({ host: server.url });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const GREEDY = { temperature: 0, num_predict: 16, seed: 1 };
const MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say something.' },
];

function checkStats(reply) {
  assert.equal(reply.done, true);
  assert.ok(['stop', 'length'].includes(reply.done_reason), reply.done_reason);
  assert.ok(reply.prompt_eval_count > 0);
  assert.ok(reply.eval_count > 0 && reply.eval_count <= 16);
  for (const d of ['total_duration', 'prompt_eval_duration', 'eval_duration']) {
    assert.ok(Number.isInteger(reply[d]) && reply[d] >= 0, d);
  }
  assert.match(reply.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
}

test('the model described: version, tags, ps, show', async () => {
  const version = await client.version();
  assert.match(version.version, /^\d+\.\d+\.\d+$/);
  const tags = await client.list();
  assert.equal(tags.models.length, 1);
  const entry = tags.models[0];
  assert.equal(entry.details.format, 'gguf');
  assert.equal(entry.details.family, 'smollm3');
  assert.match(entry.details.parameter_size, /^\d+\.\dM$/);
  assert.ok(entry.size > 0);
  const ps = await client.ps();
  assert.equal(ps.models[0].name, entry.name);
  const show = await client.show({ model: entry.name });
  assert.equal(show.model_info['general.architecture'], 'smollm3');
  assert.ok(show.template.includes('im_start'));
  assert.deepEqual(show.capabilities, ['completion', 'tools', 'embedding']);
});

test('a greedy chat, whole and streamed, and num_predict', async () => {
  const whole = await client.chat({ model: 'smol', messages: MESSAGES, options: GREEDY, stream: false });
  assert.equal(whole.message.role, 'assistant');
  assert.equal(typeof whole.message.content, 'string');
  checkStats(whole);
  let streamed = '';
  let last;
  let chunks = 0;
  for await (const part of await client.chat({ model: 'smol', messages: MESSAGES, options: GREEDY, stream: true })) {
    streamed += part.message.content;
    last = part;
    ++chunks;
  }
  assert.ok(chunks > 1);
  assert.equal(streamed, whole.message.content);
  checkStats(last);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(last.eval_count, whole.eval_count);
  const short = await client.chat({ model: 'smol', messages: MESSAGES, stream: false,
    options: { temperature: 0, num_predict: 2 } });
  assert.equal(short.eval_count, 2);
  assert.equal(short.done_reason, 'length');
});

test('generate: through the template and raw, whole and streamed', async () => {
  for (const raw of [false, true]) {
    const request = { model: 'smol', prompt: 'Once upon a time', system: raw ? undefined : 'Be brief.',
      raw, options: GREEDY };
    const whole = await client.generate({ ...request, stream: false });
    assert.equal(typeof whole.response, 'string');
    checkStats(whole);
    let streamed = '';
    for await (const part of await client.generate({ ...request, stream: true })) streamed += part.response;
    assert.equal(streamed, whole.response, `raw ${raw}`);
  }
});

test('format: a JSON schema forces the reply; tool calls in the history are read', async () => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'],
    additionalProperties: false };
  const reply = await client.chat({ model: 'smol', messages: MESSAGES, format: schema, stream: false,
    options: { temperature: 0, num_predict: 64 } });
  assert.equal(reply.done_reason, 'stop');
  const validate = new Ajv().compile(schema);
  assert.ok(validate(JSON.parse(reply.message.content)), reply.message.content);
  const tools = [{ type: 'function', function: { name: 'get_time', description: 'The time',
    parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] } } }];
  const history = await client.chat({ model: 'smol', tools, stream: false, options: GREEDY, messages: [
    { role: 'user', content: 'What time is it in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_time', arguments: { zone: 'Europe/Paris' } } }] },
    { role: 'tool', content: '12:00' },
  ] });
  checkStats(history);
  for (const call of history.message.tool_calls ?? []) {
    assert.equal(call.function.name, 'get_time');
    assert.equal(typeof call.function.arguments, 'object');
  }
});

test('embed: unit vectors, the same as /v1/embeddings gives', async () => {
  const texts = ['The quick brown fox', 'jumps over the lazy dog'];
  const reply = await client.embed({ model: 'smol', input: texts });
  assert.equal(reply.embeddings.length, 2);
  assert.ok(reply.prompt_eval_count > 0);
  const openai = await (await fetch(`${server.url}/v1/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ input: texts }),
  })).json();
  for (let i = 0; i < texts.length; ++i) {
    const v = reply.embeddings[i];
    const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    const w = openai.data[i].embedding;
    assert.equal(v.length, w.length);
    for (let j = 0; j < v.length; ++j) assert.ok(Math.abs(v[j] - w[j]) < 1e-6);
  }
  const single = await client.embed({ model: 'smol', input: texts[0] });
  assert.deepEqual(single.embeddings[0], reply.embeddings[0]);
  // The legacy endpoint: one prompt, the vector as pooled (unnormalized).
  const legacy = await client.embeddings({ model: 'smol', prompt: texts[0] });
  const pooled = await (await fetch(`${server.url}/v1/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ input: texts[0], embd_normalize: -1 }),
  })).json();
  assert.deepEqual(legacy.embedding, pooled.data[0].embedding);
});

test("errors in ollama's shape", async () => {
  const expectError = async (promise, pattern) => {
    await assert.rejects(promise, (error) => {
      assert.equal(error.name, 'ResponseError');
      assert.equal(error.status_code, 400);
      assert.match(error.error, pattern);
      return true;
    });
  };
  await expectError(client.chat({ model: 'smol', stream: false,
    messages: [{ role: 'user', content: 'hi', images: ['aGVsbG8='] }] }), /images/);
  await expectError(client.chat({ model: 'smol', stream: false, format: 'yaml', messages: MESSAGES }),
    /format/);
  await expectError(client.chat({ model: 'smol', stream: false,
    messages: [{ role: 'tool', content: '12:00' }] }), /answers no tool call/);
  await expectError(client.embed({ model: 'smol', input: [] }), /input/);
  const raw = await fetch(`${server.url}/api/chat`, { method: 'POST', body: '{"messages": 3}' });
  assert.equal(raw.status, 400);
  assert.match((await raw.json()).error, /messages/);
});
