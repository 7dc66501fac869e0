// smol-server's Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens)
// through Anthropic's official npm client (@anthropic-ai/sdk, pinned in package.json),
// on the tiny SmolLM3 fixture, with --api-key (the client sends it as x-api-key):
//
//   1. a greedy message: Anthropic's shape (a text block, usage), and the same text
//      streamed (the client's own accumulation of Anthropic's events);
//   2. stop_sequences: a reply cut at a stop sequence taken from the greedy reply says
//      stop_reason "stop_sequence" and which one;
//   3. tools: tool_choice {type: "tool"} gives a tool_use block whose input validates
//      against the tool's input_schema (ajv), stop_reason "tool_use", and the same call
//      streamed (input_json_delta events, assembled by the client); the conversation goes
//      on with the call and a tool_result;
//   4. count_tokens counts the prompt the message read (its usage's input_tokens plus
//      cache reads);
//   5. errors in Anthropic's shape: a missing max_tokens, an image block, a wrong key.
//
// The weights are random, so only shapes, equalities and what a grammar forces are checked.
//
//   node anthropic.test.mjs SERVER_BINARY MODEL_GGUF
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model] = process.argv.slice(2);
if (!serverBinary || !model) {
  console.error('usage: node anthropic.test.mjs SERVER_BINARY MODEL_GGUF');
  process.exit(2);
}

const KEY = 'test-key-anthropic';
let server;
let client;

before(async () => {
  server = await startServer(serverBinary, ['-m', model, '-c', '4096', '-t', '2', '--api-key', KEY]);
  client = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const GREEDY = {
  model: 'smol',
  max_tokens: 24,
  temperature: 0,
  system: [{ type: 'text', text: 'You are terse.' }],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Say something.' }] }],
};

function text(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

test('a greedy message, whole and streamed', async () => {
  const whole = await client.messages.create(GREEDY);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.match(whole.id, /^msg_/);
  assert.equal(whole.stop_reason, 'max_tokens');
  assert.equal(whole.stop_sequence, null);
  assert.equal(whole.usage.output_tokens, 24);
  assert.ok(whole.usage.input_tokens + whole.usage.cache_read_input_tokens > 0);
  assert.ok(text(whole).length > 0);

  const stream = client.messages.stream(GREEDY);
  const kinds = [];
  stream.on('streamEvent', (event) => kinds.push(event.type));
  const streamed = await stream.finalMessage();
  assert.equal(text(streamed), text(whole));
  assert.equal(streamed.stop_reason, 'max_tokens');
  assert.equal(streamed.usage.output_tokens, 24);
  assert.equal(kinds[0], 'message_start');
  assert.equal(kinds.at(-1), 'message_stop');
  assert.ok(kinds.includes('content_block_start') && kinds.includes('content_block_delta'));
  assert.ok(kinds.includes('content_block_stop') && kinds.includes('message_delta'));
});

test('stop_sequences: the reply ends before the sequence, which the message names', async () => {
  const full = text(await client.messages.create(GREEDY));
  // A stop sequence from the middle of the greedy reply: the same reply stops there (a
  // run of letters: the random weights also write broken UTF-8, shown as U+FFFD).
  const runs = (full.match(/[A-Za-z]{3,}/g) ?? []).filter((r) => full.indexOf(r) > 0);
  assert.ok(runs.length > 0, `no run of letters to stop at in ${JSON.stringify(full)}`);
  const stop = runs[0];
  const cut = await client.messages.create({ ...GREEDY, stop_sequences: [stop, 'never-written'] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(text(cut), full.slice(0, full.indexOf(stop)).replace(/^\n+/, ''));
});

const WEATHER = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 12 },
      days: { type: 'integer', minimum: 1, maximum: 7 },
    },
    required: ['city', 'days'],
    additionalProperties: false,
  },
};

test('tools: a forced tool_use block validates, whole and streamed, and the turn goes on', async () => {
  const request = {
    ...GREEDY,
    max_tokens: 256,
    tools: [WEATHER],
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  };
  const whole = await client.messages.create(request);
  assert.equal(whole.stop_reason, 'tool_use');
  const uses = whole.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.equal(uses[0].name, 'get_weather');
  assert.match(uses[0].id, /^toolu_/);
  const validate = new Ajv().compile(WEATHER.input_schema);
  assert.ok(validate(uses[0].input), JSON.stringify(validate.errors));

  const streamed = await client.messages.stream(request).finalMessage();
  const streamedUses = streamed.content.filter((b) => b.type === 'tool_use');
  assert.equal(streamedUses.length, 1);
  assert.deepEqual(streamedUses[0].input, uses[0].input);
  assert.equal(streamedUses[0].id, uses[0].id.replace(whole.id, streamed.id));
  assert.equal(streamed.stop_reason, 'tool_use');

  // The call and its result go back: a reply in plain text (tool_choice none).
  const next = await client.messages.create({
    ...request,
    tool_choice: { type: 'none' },
    max_tokens: 8,
    messages: [
      ...request.messages,
      { role: 'assistant', content: whole.content },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: uses[0].id, content: [{ type: 'text', text: 'Sunny, 21 C' }] },
          { type: 'text', text: 'Thanks.' },
        ],
      },
    ],
  });
  assert.equal(next.type, 'message');
  assert.equal(next.content.filter((b) => b.type === 'tool_use').length, 0);
});

test('count_tokens counts the prompt a message reads', async () => {
  const { max_tokens, temperature, ...countable } = GREEDY;
  const counted = await client.messages.countTokens(countable);
  const message = await client.messages.create(GREEDY);
  assert.equal(counted.input_tokens, message.usage.input_tokens + message.usage.cache_read_input_tokens);
});

test('errors come in Anthropic\'s shape, with the right status', async () => {
  await assert.rejects(
    client.messages.create({ model: 'smol', messages: GREEDY.messages }),
    (e) => e.status === 400 && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error' &&
      /max_tokens/.test(e.error.error.message),
  );
  await assert.rejects(
    client.messages.create({
      ...GREEDY,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
    }),
    (e) => e.status === 400 && /messages\[0\]\.content\[0\]/.test(e.error.error.message),
  );
  const wrong = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create(GREEDY),
    (e) => e.status === 401 && e.error?.error?.type === 'authentication_error');
});
