// smol-server on mixture-of-experts files (issue 72), through the official `openai` npm
// client: for each file (smol-make-model's qwen3moe-tiny and gpt-oss-tiny, written by
// tests/server.cmake),
//
//   1. a greedy reply streamed adds up to the same reply not streamed;
//   2. a second server with ngram-simple speculation (drafting after a repeat of one
//      token, so that the 64-token gibberish reply is drafted at all; /metrics says it
//      was) gives the same greedy reply: a verifying step passes several tokens through
//      the experts, grouped by expert;
//   3. a response_format json_schema reply parses and validates (ajv): the grammar
//      masks the mixture's logits like any model's.
//
// The weights are random, so the text is gibberish: only equalities and what the grammar
// forces are checked.
//
//   node mixture.test.mjs SERVER_BINARY MODEL_GGUF...
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer } from './spawn_server.mjs';

const [serverBinary, ...models] = process.argv.slice(2);
if (!serverBinary || models.length === 0) {
  console.error('usage: node mixture.test.mjs SERVER_BINARY MODEL_GGUF...');
  process.exit(2);
}

// A prompt that repeats itself, so that ngram-simple finds drafts.
const MESSAGES = [
  { role: 'user', content: 'Repeat after me: one two three, one two three, one two three.' },
];
const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    count: { type: 'integer', minimum: 0, maximum: 99 },
  },
  required: ['name', 'count'],
  additionalProperties: false,
};

async function withServer(model, extra, body) {
  const server = await startServer(serverBinary, ['-m', model, '-c', '2048', '-t', '2', ...extra]);
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused' });
    return await body(client, server.url);
  } finally {
    assert.equal(await server.stop(), 0);
  }
}

async function greedy(client, stream) {
  const request = { model: 'smol', messages: MESSAGES, max_tokens: 64, temperature: 0 };
  if (!stream) return (await client.chat.completions.create(request)).choices[0].message.content;
  let text = '';
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  return text;
}

for (const model of models) {
  const name = path.basename(model);
  test(`${name}: streamed, speculative and grammar-constrained replies`, async () => {
    const plain = await withServer(model, ['--spec-type', 'none'], async (client) => {
      const whole = await greedy(client, false);
      assert.ok(whole.length > 0, 'an empty reply');
      assert.equal(await greedy(client, true), whole, 'streamed differs from whole');

      const validate = new Ajv().compile(SCHEMA);
      const reply = await client.chat.completions.create({
        model: 'smol',
        messages: [{ role: 'user', content: 'Give a name and a count as JSON.' }],
        max_tokens: 64,
        temperature: 1,
        seed: 7,
        response_format: { type: 'json_schema', json_schema: { name: 'item', schema: SCHEMA, strict: true } },
      });
      const parsed = JSON.parse(reply.choices[0].message.content);
      assert.ok(validate(parsed), JSON.stringify(validate.errors));
      return whole;
    });
    const speculative = await withServer(model, ['--spec-type', 'ngram-simple', '--spec-ngram-size-n', '1'], async (client, url) => {
      const reply = await greedy(client, false);
      // Drafts were verified: passes of several tokens went through the experts.
      const metrics = await (await fetch(`${url}/metrics`)).text();
      const drafted = Number(metrics.match(/draft_tokens_total\S* (\d+)/)?.[1] ?? 0);
      assert.ok(drafted > 0, `no tokens drafted:\n${metrics}`);
      return reply;
    });
    assert.equal(speculative, plain, 'speculation changed the greedy reply');
  });
}
