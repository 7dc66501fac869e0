// smol-server's tool calls in each model family's own syntax, through the official `openai`
// npm client: one server per real chat template of the corpus (tests/chat_template.cmake
// fetches it), one template per family that tool_call_formats.hpp knows and one it does
// not (the generic JSON format). For each:
//
//   1. the server's startup log names the family (or the generic format);
//   2. tool_choice "required" (two seeds, temperature 1), with parallel_tool_calls false,
//      and a named function: finish_reason "tool_calls", each call one of the tools with
//      arguments that validate (ajv) against its parameters;
//   3. the same requests streamed add up to the same calls (names and arguments);
//   4. tool_choice "auto": 200, any calls validate, streamed equals non-streamed;
//   5. the calls of (2) sent back with a tool message answering each: 200.
//
// The model has random weights: its free text is gibberish, so only what the grammar
// forces is checked. Every string the schemas allow is bounded, so calls end.
//
//   node tool_families.test.mjs SERVER_BINARY MODEL_GGUF CORPUS_DIR
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath, corpusDir] = process.argv.slice(2);
if (!serverBinary || !modelPath || !corpusDir) {
  console.error('usage: node tool_families.test.mjs SERVER_BINARY MODEL_GGUF CORPUS_DIR');
  process.exit(2);
}

// The template of each family, and the family the server must name (null: the generic
// JSON format).
const FAMILIES = [
  ['Qwen-Qwen3-0.6B.jinja', 'Hermes'],
  ['Qwen3.5-4B.jinja', 'Qwen3-Coder (XML parameters)'],
  ['meta-llama-Llama-3.1-8B-Instruct.jinja', 'Llama 3.x'],
  ['mistralai-Mistral-Nemo-Instruct-2407.jinja', 'Mistral Nemo'],
  ['Mistral-Small-3.2-24B-Instruct-2506.jinja', 'Mistral Small 3.2'],
  ['unsloth-mistral-Devstral-Small-2507.jinja', 'Mistral (Devstral, Ministral 3)'],
  ['deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja', 'DeepSeek R1'],
  ['deepseek-ai-DeepSeek-V3.1.jinja', 'DeepSeek V3.1'],
  ['CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja', 'Command R7B'],
  ['ibm-granite-granite-3.3-2B-Instruct.jinja', 'Granite 3'],
  ['moonshotai-Kimi-K2.jinja', 'Kimi K2'],
  ['meetkai-functionary-medium-v3.2.jinja', 'Functionary v3.2'],
  ['microsoft-Phi-3.5-mini-instruct.jinja', null],
];

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather in a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', minLength: 1, maxLength: 12 } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The current time in a time zone.',
      parameters: {
        type: 'object',
        properties: { tz: { type: 'string', enum: ['UTC', 'CET'] } },
        required: ['tz'],
        additionalProperties: false,
      },
    },
  },
];
const ajv = new Ajv({ allErrors: true, strict: false });
const VALIDATORS = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

const ASK = [{ role: 'user', content: 'What is the weather in Paris, and what time is it in CET?' }];
// With parallel calls allowed the number of calls is the random model's choice: after each
// call it writes the separator or the closing, and some seeds keep calling until max_tokens
// (Command R7B with seed 1 writes 13 calls in 1000 tokens). These seeds close within the
// budget in every family; the forced replies of the others are one call (parallel false).
const SEEDS = [2, 6];
// A forced reply's budget: the families' markers are many tokens in this model's vocabulary
// and the JSON grammar lets whitespace run on, so a call of a few characters' arguments
// takes 40 to 140 tokens, and a reply may hold several.
const request = (extra = {}) => ({ messages: ASK, tools: TOOLS, max_tokens: 1200, temperature: 1, ...extra });

// The server's output lines, as spawn_server.mjs copies them to our stderr.
const serverLines = [];
const writeStderr = process.stderr.write.bind(process.stderr);
process.stderr.write = (chunk, ...rest) => {
  for (const line of String(chunk).split('\n')) if (line.startsWith('[server] ')) serverLines.push(line.slice(9));
  return writeStderr(chunk, ...rest);
};

const show = (value) => JSON.stringify(value);

// A call as the tests compare them: name and arguments (the ids of most families are
// the server's own, not the model's).
const callKey = (c) => ({ name: c.function.name, arguments: c.function.arguments });

function assertCallsValid(calls, where, reply) {
  for (const c of calls) {
    assert.equal(c.type, 'function', `${where}: ${show(reply)}`);
    assert.ok(typeof c.id === 'string' && c.id.length > 0, `${where}: a call without an id: ${show(reply)}`);
    const validate = VALIDATORS[c.function.name];
    assert.ok(validate, `${where}: a call of ${show(c.function.name)}, not a tool: ${show(reply)}`);
    let args;
    try {
      args = JSON.parse(c.function.arguments);
    } catch (e) {
      assert.fail(`${where}: arguments are not JSON (${e.message}): ${show(reply)}`);
    }
    assert.ok(validate(args), `${where}: arguments fail ${c.function.name}'s parameters (${ajv.errorsText(validate.errors)}): ${show(reply)}`);
  }
}

// A forced reply: calls only, finish_reason "tool_calls".
function assertForced(reply, where) {
  const choice = reply.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls', `${where}: finish_reason: ${show(reply)}`);
  const calls = choice.message.tool_calls ?? [];
  assert.ok(calls.length >= 1, `${where}: no tool_calls: ${show(reply)}`);
  const content = choice.message.content;
  assert.ok(content == null || content.trim() === '', `${where}: content beside the calls: ${show(reply)}`);
  assertCallsValid(calls, where, reply);
  return calls;
}

// A streamed reply added up: content, reasoning, calls (by index: id, type and name from
// the first delta that has them, arguments concatenated) and the finish_reason.
async function streamed(client, params, where) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let content = '';
  let reasoning = '';
  const finishes = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    const d = choice.delta ?? {};
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const tc of d.tool_calls ?? []) {
      assert.ok(Number.isInteger(tc.index), `${where}: a tool_calls delta without an index: ${show(chunk)}`);
      const slot = (calls[tc.index] ??= { id: undefined, type: undefined, function: { name: undefined, arguments: '' } });
      slot.id ??= tc.id ?? undefined;
      slot.type ??= tc.type ?? undefined;
      slot.function.name ??= tc.function?.name ?? undefined;
      slot.function.arguments += tc.function?.arguments ?? '';
    }
    if (choice.finish_reason != null) finishes.push(choice.finish_reason);
  }
  assert.equal(finishes.length, 1, `${where}: finish_reasons ${show(finishes)}`);
  for (let i = 0; i < calls.length; i++) assert.ok(calls[i], `${where}: no call at index ${i} of ${calls.length}`);
  return { content, reasoning, calls, finish: finishes[0] };
}

// The client throws on a status other than 2xx; this names it.
async function create(client, params, where) {
  try {
    return await client.chat.completions.create(params);
  } catch (e) {
    assert.fail(`${where}: ${e.status ?? ''} ${e.message}\nrequest: ${show(params)}`);
  }
}

const started = Date.now();

for (const [file, family] of FAMILIES) {
  const label = family ?? 'generic';
  test(`${label} (${file})`, async (t) => {
    const from = serverLines.length;
    const server = await startServer(serverBinary, [
      '-m', modelPath, '-np', '1', '-c', '4096', '-t', '2',
      '--chat-template-file', path.join(corpusDir, file),
    ]);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
    const forced = {}; // seed -> the calls of (2), for (3) and (5)
    try {
      await t.test(`${label}: (1) the startup log names the tool-call syntax`, () => {
        const line = serverLines.slice(from).find((l) => l.includes('tool calls: '));
        assert.ok(line, `${label}: no "tool calls:" line in the server's output`);
        if (family) assert.ok(line.includes(`tool calls: the template's own syntax (${family})`), `${label}: ${line}`);
        else assert.ok(line.includes('tool calls: the generic JSON format'), `${label}: ${line}`);
      });

      await t.test(`${label}: (2) tool_choice "required", parallel_tool_calls false, a named function`, async () => {
        for (const seed of SEEDS) {
          const where = `${label}: (2) required, seed ${seed}`;
          const reply = await create(client, request({ tool_choice: 'required', seed }), where);
          forced[seed] = assertForced(reply, where);
        }
        {
          const where = `${label}: (2) required, parallel_tool_calls false`;
          const reply = await create(client, request({ tool_choice: 'required', parallel_tool_calls: false, seed: 3 }), where);
          const calls = assertForced(reply, where);
          assert.equal(calls.length, 1, `${where}: ${calls.length} calls: ${show(reply)}`);
        }
        for (const name of ['get_time', 'get_weather']) {
          const where = `${label}: (2) tool_choice names ${name}`;
          const reply = await create(client, request({ tool_choice: { type: 'function', function: { name } }, seed: 4 }), where);
          const calls = assertForced(reply, where);
          for (const c of calls) assert.equal(c.function.name, name, `${where}: ${show(reply)}`);
        }
      });

      await t.test(`${label}: (3) streamed "required" calls equal the non-streamed ones`, async () => {
        for (const seed of SEEDS) {
          const where = `${label}: (3) streamed required, seed ${seed}`;
          assert.ok(forced[seed], `${where}: no non-streamed reply to compare with (see (2))`);
          const s = await streamed(client, request({ tool_choice: 'required', seed }), where);
          assert.equal(s.finish, 'tool_calls', `${where}: finish_reason ${s.finish}`);
          assert.ok(s.content.trim() === '', `${where}: content ${show(s.content)}`);
          for (const c of s.calls) {
            assert.equal(c.type, 'function', `${where}: ${show(s.calls)}`);
            assert.ok(typeof c.id === 'string' && c.id.length > 0, `${where}: a call without an id: ${show(s.calls)}`);
          }
          assert.deepEqual(s.calls.map(callKey), forced[seed].map(callKey), `${where}: streamed ${show(s.calls)} vs ${show(forced[seed])}`);
        }
      });

      await t.test(`${label}: (4) tool_choice "auto", streamed and not`, async () => {
        for (const seed of SEEDS) {
          const where = `${label}: (4) auto, seed ${seed}`;
          const reply = await create(client, request({ tool_choice: 'auto', seed, max_tokens: 120 }), where);
          const choice = reply.choices[0];
          const calls = choice.message.tool_calls ?? [];
          assertCallsValid(calls, where, reply);
          if (calls.length > 0) assert.equal(choice.finish_reason, 'tool_calls', `${where}: ${show(reply)}`);
          const s = await streamed(client, request({ tool_choice: 'auto', seed, max_tokens: 120 }), `${where}, streamed`);
          assert.equal(s.finish, choice.finish_reason, `${where}: streamed finish_reason vs ${show(reply)}`);
          assert.equal(s.content, choice.message.content ?? '', `${where}: streamed content vs ${show(reply)}`);
          assert.equal(s.reasoning, choice.message.reasoning_content ?? '', `${where}: streamed reasoning vs ${show(reply)}`);
          assert.deepEqual(s.calls.map(callKey), calls.map(callKey), `${where}: streamed ${show(s.calls)} vs ${show(reply)}`);
        }
      });

      await t.test(`${label}: (5) the calls sent back with the tools' answers`, async () => {
        const calls = forced[SEEDS[0]];
        assert.ok(calls, `${label}: (5) no calls from (2) to send back`);
        const messages = [
          ...ASK,
          { role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: c.function })) },
          ...calls.map((c) => ({
            role: 'tool',
            tool_call_id: c.id,
            content: c.function.name === 'get_time' ? '{"time": "12:00"}' : '{"temperature_c": 21}',
          })),
        ];
        const where = `${label}: (5) follow-up with tool_call ids ${show(calls.map((c) => c.id))}`;
        const reply = await create(client, { messages, tools: TOOLS, max_tokens: 16, temperature: 1, seed: 5 }, where);
        assert.equal(reply.choices[0].message.role, 'assistant', `${where}: ${show(reply)}`);
      });
    } finally {
      const code = await server.stop();
      assert.equal(code, 0, `${label}: the server exits ${code} on SIGTERM`);
    }
  });
}

test('runtime', () => {
  writeStderr(`tool families: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
});
