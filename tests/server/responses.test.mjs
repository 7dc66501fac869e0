// smol-server's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id})
// through OpenAI's official npm client (openai, pinned in package.json), on the tiny
// SmolLM3 fixture:
//
//   1. a greedy response: the Responses shape (a message item of output_text, usage,
//      status "incomplete" at max_output_tokens), and the same text streamed (the
//      client's own accumulation of the events), the events in the API's order;
//   2. a function call: tool_choice {type: "function"} gives a function_call item whose
//      arguments validate against the tool's parameters (ajv), streamed as
//      function_call_arguments deltas that add up to the same call; the conversation goes
//      on with function_call_output, once through previous_response_id (its prompt
//      served from the cache: cached_tokens) and once stateless (store: false, the whole
//      conversation sent), the two prompts the same;
//   3. text.format json_schema: the output text parses and validates;
//   4. the store: retrieve() returns the stored response, del() removes it, and an id
//      not held is a 404 naming previous_response_id; store: false keeps nothing, and
//      with --store-responses 1 the older of two responses is evicted;
//   5. errors in OpenAI's shape: an image part, an unknown item type.
//
// The weights are random, so only shapes, equalities and what a grammar forces are checked.
//
//   node responses.test.mjs SERVER_BINARY MODEL_GGUF
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model] = process.argv.slice(2);
if (!serverBinary || !model) {
  console.error('usage: node responses.test.mjs SERVER_BINARY MODEL_GGUF');
  process.exit(2);
}

let server;
let client;

before(async () => {
  server = await startServer(serverBinary, ['-m', model, '-c', '4096', '-t', '2', '-np', '1',
                                            '--store-responses', '4']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const GREEDY = {
  model: 'smol',
  instructions: 'You are terse.',
  input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say something.' }] }],
  max_output_tokens: 24,
  temperature: 0,
};

async function events(request) {
  const stream = await client.responses.create({ ...request, stream: true });
  const all = [];
  for await (const event of stream) all.push(event);
  return all;
}

test('a greedy response, whole and streamed', async () => {
  const whole = await client.responses.create(GREEDY);
  assert.equal(whole.object, 'response');
  assert.match(whole.id, /^resp_/);
  assert.equal(whole.status, 'incomplete');
  assert.equal(whole.incomplete_details.reason, 'max_output_tokens');
  assert.equal(whole.usage.output_tokens, 24);
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + 24);
  assert.ok(whole.usage.input_tokens > 0);
  const messages = whole.output.filter((item) => item.type === 'message');
  assert.equal(messages.length, 1);
  assert.equal(messages[0].role, 'assistant');
  assert.ok(whole.output_text.length > 0);  // the client's own join of the output_text parts

  const all = await events(GREEDY);
  const types = all.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.equal(types.at(-1), 'response.incomplete');
  for (const kind of ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
                      'response.output_text.done', 'response.content_part.done', 'response.output_item.done']) {
    assert.ok(types.includes(kind), kind);
  }
  assert.deepEqual(all.map((e) => e.sequence_number), all.map((_, i) => i));
  const deltas = all.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(deltas, whole.output_text);
  const last = all.at(-1).response;
  assert.equal(last.output.find((item) => item.type === 'message').content[0].text, whole.output_text);
  assert.equal(last.usage.output_tokens, 24);

  // The client's stream helper assembles the same text from the events.
  const helper = client.responses.stream(GREEDY);
  let text = '';
  helper.on('response.output_text.delta', (e) => { text += e.delta; });
  await helper.done();
  assert.equal(text, whole.output_text);
});

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  strict: true,
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 12 },
      days: { type: 'integer', minimum: 1, maximum: 7 },
    },
    required: ['city', 'days'],
    additionalProperties: false,
  },
};

test('a function call, whole and streamed, and the turn goes on with and without the store', async () => {
  const request = {
    ...GREEDY,
    max_output_tokens: 256,
    input: 'What is the weather in Paris?',
    tools: [WEATHER],
    tool_choice: { type: 'function', name: 'get_weather' },
  };
  const whole = await client.responses.create(request);
  assert.equal(whole.status, 'completed');
  const calls = whole.output.filter((item) => item.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.match(calls[0].call_id, /^call_/);
  const validate = new Ajv().compile(WEATHER.parameters);
  const args = JSON.parse(calls[0].arguments);
  assert.ok(validate(args), JSON.stringify(validate.errors));

  const all = await events(request);
  const added = all.find((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
  assert.ok(added, 'no function_call item added');
  const streamedArgs = all.filter((e) => e.type === 'response.function_call_arguments.delta')
    .map((e) => e.delta).join('');
  assert.deepEqual(JSON.parse(streamedArgs), args);
  const done = all.find((e) => e.type === 'response.function_call_arguments.done');
  assert.equal(done.arguments, streamedArgs);
  assert.equal(all.at(-1).type, 'response.completed');

  // The call's result through the store: the prompt begins with the stored conversation,
  // which the server's prompt cache still holds.
  const result = { type: 'function_call_output', call_id: calls[0].call_id, output: 'Sunny, 21 C' };
  const continued = await client.responses.create({
    ...request, tool_choice: 'none', max_output_tokens: 8, previous_response_id: whole.id, input: [result],
  });
  assert.equal(continued.previous_response_id, whole.id);
  assert.equal(continued.output.filter((item) => item.type === 'function_call').length, 0);
  assert.ok(continued.usage.input_tokens_details.cached_tokens > 0,
            JSON.stringify(continued.usage));
  // Stateless, the whole conversation sent: the same prompt.
  const stateless = await client.responses.create({
    ...request, tool_choice: 'none', max_output_tokens: 8, store: false,
    input: [{ role: 'user', content: request.input }, ...whole.output, result],
  });
  assert.equal(stateless.usage.input_tokens, continued.usage.input_tokens);
});

test('text.format json_schema: the output validates', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const r = await client.responses.create({
    ...GREEDY, max_output_tokens: 128, text: { format: { type: 'json_schema', name: 'person', schema, strict: true } },
  });
  assert.equal(r.status, 'completed');
  const validate = new Ajv().compile(schema);
  const parsed = JSON.parse(r.output_text);
  assert.ok(validate(parsed), JSON.stringify(validate.errors));
});

test('the store: retrieve, delete, evict, and 404 for an id not held', async () => {
  const kept = await client.responses.create({ ...GREEDY, max_output_tokens: 4 });
  const retrieved = await client.responses.retrieve(kept.id);
  assert.equal(retrieved.id, kept.id);
  assert.deepEqual(retrieved.output, kept.output);
  await client.responses.del(kept.id);
  await assert.rejects(client.responses.retrieve(kept.id), (e) => e.status === 404);
  await assert.rejects(
    client.responses.create({ ...GREEDY, previous_response_id: kept.id }),
    (e) => e.status === 404 && e.error?.param === 'previous_response_id' && /evicted/.test(e.message),
  );
  const unstored = await client.responses.create({ ...GREEDY, max_output_tokens: 4, store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
  // The server keeps 4 (--store-responses 4): a fifth evicts the least recently used.
  const ids = [];
  for (let i = 0; i < 5; ++i) ids.push((await client.responses.create({ ...GREEDY, max_output_tokens: 1 })).id);
  await assert.rejects(client.responses.retrieve(ids[0]), (e) => e.status === 404);
  assert.equal((await client.responses.retrieve(ids[4])).id, ids[4]);
});

test('errors come in OpenAI\'s shape, with the right status', async () => {
  await assert.rejects(
    client.responses.create({
      ...GREEDY,
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }],
    }),
    (e) => e.status === 400 && e.error?.param === 'input[0].content[0].type',
  );
  await assert.rejects(
    client.responses.create({ ...GREEDY, input: [{ type: 'item_reference', id: 'msg_1' }] }),
    (e) => e.status === 400 && e.error?.param === 'input[0].type' && /item_reference/.test(e.message),
  );
});
