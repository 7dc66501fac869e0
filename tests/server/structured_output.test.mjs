// smol-server's structured output through the official `openai` npm client: every reply
// to a response_format json_schema request parses as JSON and validates against its
// schema under a real validator (ajv, with ajv-formats for the string formats), over a
// table of schemas and several seeds at temperature 1. The model has random weights, so
// its JSON is odd, but the grammar must keep it valid all the same.
//
//   node structured_output.test.mjs SERVER_BINARY MODEL_GGUF
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath] = process.argv.slice(2);
if (!serverBinary || !modelPath) {
  console.error('usage: node structured_output.test.mjs SERVER_BINARY MODEL_GGUF');
  process.exit(2);
}

let server;
let client;
// strict: false lets ajv accept the annotation keywords schemas carry (title, ...).
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);

const ASK = [{ role: 'user', content: 'Describe something as JSON.' }];
const SEEDS = [1, 2, 3, 4];

// Each schema bounds every string and array, so that a reply always ends within
// max_tokens (an unbounded string from random weights could run on).
const SCHEMAS = {
  nested_objects: {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      address: {
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1, maxLength: 10 },
          zip: { type: 'string', pattern: '^[0-9]{5}$' },
        },
        required: ['city', 'zip'],
        additionalProperties: false,
      },
    },
    required: ['name', 'address'],
    additionalProperties: false,
  },
  bounded_array: {
    type: 'object',
    properties: {
      tags: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 },
      scores: { type: 'array', items: { type: 'number' }, maxItems: 2 },
    },
    required: ['tags', 'scores'],
    additionalProperties: false,
  },
  enum_and_any_of: {
    type: 'object',
    properties: {
      color: { enum: ['red', 'green', 'blue'] },
      value: { anyOf: [{ type: 'boolean' }, { type: 'null' }, { type: 'integer' }] },
      size: { type: 'string', enum: ['S', 'M', 'L'] },
    },
    required: ['color', 'value', 'size'],
    additionalProperties: false,
  },
  // Formats whose grammar is exact. Not "date", "time", "date-time" or "email": the
  // grammar's rules for them are looser than ajv-formats' (a 31st day in any month, a
  // leap second at any minute, a local part that starts with a dot), see json_schema.hpp.
  string_formats: {
    type: 'object',
    properties: {
      id: { type: 'string', format: 'uuid' },
      day: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' },
    },
    required: ['id', 'day'],
    additionalProperties: false,
  },
};

const jsonSchemaFormat = (name, schema) => ({
  type: 'json_schema',
  json_schema: { name, schema, strict: true },
});

function assertValid(schema, text, where) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${where}: not JSON (${e.message}): ${JSON.stringify(text)}`);
  }
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${where}: ${JSON.stringify(text)} fails its schema: ${ajv.errorsText(validate.errors)}`);
  return value;
}

before(async () => {
  server = await startServer(serverBinary, ['-m', modelPath, '-np', '2', '-c', '2048', '-t', '2']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});

after(async () => {
  if (server) assert.equal(await server.stop(), 0);
});

for (const [name, schema] of Object.entries(SCHEMAS)) {
  test(`response_format json_schema "${name}": every seed's reply validates`, async () => {
    for (const seed of SEEDS) {
      const reply = await client.chat.completions.create({
        messages: ASK,
        temperature: 1,
        seed,
        max_tokens: 400,
        response_format: jsonSchemaFormat(name, schema),
      });
      const choice = reply.choices[0];
      assert.equal(choice.finish_reason, 'stop', `seed ${seed}: ${JSON.stringify(choice.message.content)}`);
      assert.equal(choice.message.reasoning_content, undefined); // a constrained reply does not think
      assertValid(schema, choice.message.content, `seed ${seed}`);
    }
  });
}

test('properties come in the schema\'s order, not sorted', async () => {
  const schema = {
    type: 'object',
    properties: { zeta: { type: 'boolean' }, alpha: { type: 'boolean' } },
    required: ['zeta', 'alpha'],
    additionalProperties: false,
  };
  const reply = await client.chat.completions.create({
    messages: ASK, temperature: 1, seed: 5, max_tokens: 100, response_format: jsonSchemaFormat('order', schema),
  });
  const text = reply.choices[0].message.content;
  assertValid(schema, text, 'order');
  assert.ok(text.indexOf('"zeta"') < text.indexOf('"alpha"'), text);
});

test('a streamed reply adds up to JSON that validates', async () => {
  const schema = SCHEMAS.enum_and_any_of;
  const stream = await client.chat.completions.create({
    messages: ASK, temperature: 1, seed: 7, max_tokens: 400, stream: true,
    response_format: jsonSchemaFormat('streamed', schema),
  });
  let text = '';
  let finish;
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) continue;
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  assertValid(schema, text, 'streamed');
});

test('response_format json_object yields a JSON object', async () => {
  for (const seed of [1, 2, 3]) {
    const reply = await client.chat.completions.create({
      messages: ASK, temperature: 1, seed, max_tokens: 400, response_format: { type: 'json_object' },
    });
    const { content } = reply.choices[0].message;
    assert.equal(reply.choices[0].finish_reason, 'stop', `seed ${seed}: ${JSON.stringify(content)}`);
    const value = JSON.parse(content);
    assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), content);
  }
});

test('llama-server\'s grammar field: replies are in the grammar\'s language', async () => {
  const grammar = 'root ::= answer (", " answer){0,3}\nanswer ::= "yes" | "no" | "maybe"';
  for (const seed of [1, 2, 3]) {
    const reply = await client.chat.completions.create({
      messages: ASK, temperature: 1, seed, max_tokens: 100, grammar,
    });
    assert.match(reply.choices[0].message.content, /^(yes|no|maybe)(, (yes|no|maybe)){0,3}$/);
  }
});

test('llama-server\'s json_schema field on /v1/completions', async () => {
  const schema = SCHEMAS.bounded_array;
  for (const seed of [1, 2]) {
    const reply = await client.completions.create({
      prompt: 'JSON: ', temperature: 1, seed, max_tokens: 400, json_schema: schema,
    });
    assert.equal(reply.choices[0].finish_reason, 'stop');
    assertValid(schema, reply.choices[0].text, `completion seed ${seed}`);
  }
});

test('a broken grammar or schema is a 400 naming the field and the place', async () => {
  const refused = async (body, param, says) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: ASK, ...body }),
    });
    assert.equal(res.status, 400);
    const { error } = await res.json();
    assert.equal(error.param, param);
    assert.match(error.message, says);
  };
  await refused({ grammar: 'root ::= "a"\nb ::= [' }, 'grammar', /line 2, column/);
  await refused({ response_format: jsonSchemaFormat('x', { type: 'object', unevaluatedProperties: false }) },
    'response_format.json_schema.schema', /unevaluatedProperties/);
  await refused({ json_schema: { type: 'strange' } }, 'json_schema', /strange/);
});

// Tool calls: with tool_choice "required" or a named function the reply is a call whose
// arguments validate against the function's parameters, read by the openai client as
// message.tool_calls (and streamed as delta.tool_calls); with "auto" a call or an answer.
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1, maxLength: 12 },
          unit: { enum: ['celsius', 'fahrenheit'] },
          days: { type: 'integer' },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      parameters: {
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
];
const schemaOf = (name) => TOOLS.find((t) => t.function.name === name).function.parameters;
const WEATHER = [{ role: 'user', content: 'What is the weather in Oslo?' }];

function assertCall(call, where, only) {
  assert.equal(call.type, 'function', where);
  assert.match(call.id, /^call_/, where);
  if (only) assert.equal(call.function.name, only, where);
  assert.ok(schemaOf(call.function.name), `${where}: unknown function ${call.function.name}`);
  assertValid(schemaOf(call.function.name), call.function.arguments, `${where} ${call.function.name}`);
}

test('tools: tool_choice "required" gives calls whose arguments validate, every seed', async () => {
  // One call per reply (parallel_tool_calls false): the random model, allowed several,
  // lists calls until max_tokens (the list's grammar is tested in test_serve_protocol).
  const cases = SEEDS.map((seed) => ({ seed, temperature: 1, parallel: false }));
  for (const { seed, temperature, parallel } of cases) {
    const where = `seed ${seed} temperature ${temperature} parallel ${parallel}`;
    const reply = await client.chat.completions.create({
      messages: WEATHER, temperature, seed, max_tokens: 400, tools: TOOLS, tool_choice: 'required',
      parallel_tool_calls: parallel,
    });
    const choice = reply.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', `${where}: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.message.content, null);
    assert.ok(choice.message.tool_calls.length >= 1);
    if (!parallel) assert.equal(choice.message.tool_calls.length, 1);
    choice.message.tool_calls.forEach((call, i) => assertCall(call, `${where} call ${i}`));
    assert.equal(new Set(choice.message.tool_calls.map((c) => c.id)).size, choice.message.tool_calls.length);
  }
});

test('tools: a named function is the one called; the stream adds up to the same call', async () => {
  const ask = {
    messages: WEATHER, temperature: 0, max_tokens: 300, tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'add' } },
  };
  const reply = await client.chat.completions.create(ask);
  assert.equal(reply.choices[0].finish_reason, 'tool_calls');
  assert.equal(reply.choices[0].message.tool_calls.length, 1);
  const call = reply.choices[0].message.tool_calls[0];
  assertCall(call, 'named', 'add');

  const stream = await client.chat.completions.create({ ...ask, stream: true });
  const calls = [];
  let finish;
  let pieces = 0;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const piece of choice.delta.tool_calls ?? []) {
      pieces += 1;
      calls[piece.index] ??= { id: '', name: '', arguments: '' };
      if (piece.id) calls[piece.index].id = piece.id;
      if (piece.function?.name) calls[piece.index].name += piece.function.name;
      calls[piece.index].arguments += piece.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'add');
  assert.match(calls[0].id, /^call_/);
  // Sent as it is written: the name, then the arguments in several pieces that add up
  // to the arguments of the reply sent whole.
  assert.ok(pieces >= 3, `${pieces} tool_calls pieces`);
  assert.equal(calls[0].arguments, call.function.arguments);
  assert.notEqual(calls[0].id, call.id); // ids are per reply
});

test('tools: "auto" gives a call that validates or a text answer; a conversation with results goes on', async () => {
  for (const seed of SEEDS) {
    const reply = await client.chat.completions.create({
      messages: WEATHER, temperature: 1, seed, max_tokens: 300, tools: TOOLS, parallel_tool_calls: false,
    });
    const choice = reply.choices[0];
    if (choice.finish_reason === 'tool_calls') {
      assert.equal(choice.message.tool_calls.length, 1);
      assertCall(choice.message.tool_calls[0], `auto seed ${seed}`);
    } else {
      // An answer's string is unbounded: it may run to max_tokens.
      assert.ok(['stop', 'length'].includes(choice.finish_reason), JSON.stringify(choice.message));
      assert.equal(typeof choice.message.content, 'string');
      assert.equal(choice.message.tool_calls, undefined);
    }
  }
  const followUp = await client.chat.completions.create({
    messages: [
      ...WEATHER,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","unit":"celsius"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '12 degrees, rain' },
    ],
    temperature: 0, max_tokens: 20, tools: TOOLS, tool_choice: 'none',
  });
  assert.equal(typeof followUp.choices[0].message.content, 'string');
  assert.equal(followUp.choices[0].message.tool_calls, undefined);
});

test('tools: bad tools are a 400 naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({ messages: WEATHER, tools: [{ type: 'function', function: { name: 'bad name' } }] }),
    (e) => e.status === 400 && e.param === 'tools[0].function.name');
  await assert.rejects(
    client.chat.completions.create({ messages: WEATHER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
    (e) => e.status === 400 && e.param === 'tool_choice.function.name');
  await assert.rejects(
    client.chat.completions.create({ messages: [...WEATHER, { role: 'tool', content: 'x' }] }),
    (e) => e.status === 400 && e.param === 'messages[1].tool_call_id');
});
