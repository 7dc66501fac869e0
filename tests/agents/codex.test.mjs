// Codex CLI (@openai/codex, pinned in package.json) against smol-server, headless and
// offline: `codex exec --json` with a model provider whose base_url is a server on the
// tiny random-weight SmolLM3 fixture and whose wire API is OpenAI's Responses API. The
// turn must complete with exit 0, Codex must print the model's text as its message, and
// the usage must show Codex's instructions read (thousands of tokens).
//
// Codex sends its own tools (exec_command, write_stdin and the like, a namespace of
// sub-agent tools, and web_search, which smol-server has no service for and does not
// offer: docs/SERVER.md). A random model would call them at random, and Codex would run
// what it wrote. So the server reads tool calls in the Hermes syntax (Qwen2.5's template,
// from the template corpus), where a reply is free text until it writes `<tool_call>`,
// and bans the token that text begins with in this vocabulary (`<`, `--logit-bias ID-inf`):
// the model answers in text. It also biases the end-of-turn token (+3: less than the
// Claude Code test's +6, which often ends the reply before its first token), so that the
// answer ends within some tens of tokens (tests/server/responses.test.mjs
// covers tools and a function call round trip through OpenAI's own SDK).
//
// CODEX_HOME, HOME and the working directory are fresh temporary directories: no
// configuration of this machine's user, and no repository, is read or written.
//
//   node codex.test.mjs SERVER_BINARY MODEL_GGUF CODEX_BINARY QWEN25_TEMPLATE
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runProgram } from './run_program.mjs';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model, codex, template] = process.argv.slice(2);
if (!serverBinary || !model || !codex || !template) {
  console.error('usage: node codex.test.mjs SERVER_BINARY MODEL_GGUF CODEX_BINARY QWEN25_TEMPLATE');
  process.exit(2);
}

// Tokens of the fixture, each one text as the server's own tokenizer reads it.
async function tokenIds(texts) {
  const server = await startServer(serverBinary, ['-m', model]);
  try {
    const ids = [];
    for (const content of texts) {
      const response = await fetch(`${server.url}/tokenize`, {
        method: 'POST',
        body: JSON.stringify({ content, parse_special: true }),
      });
      const { tokens } = await response.json();
      assert.equal(tokens.length, 1, `${content} is not one token`);
      ids.push(tokens[0]);
    }
    return ids;
  } finally {
    assert.equal(await server.stop(), 0);
  }
}

test('Codex CLI completes a turn against smol-server', async () => {
  const [end, angle] = await tokenIds(['<|im_end|>', '<']);
  const server = await startServer(serverBinary, [
    '-m', model, '-c', '32768', '--rope-scaling', 'yarn', '--rope-scale', '8', '-t', '2', '-np', '1',
    '--api-key', 'agent-key', '--logit-bias', `${end}+3`, '--logit-bias', `${angle}-inf`,
    '--chat-template-file', template,
  ]);
  const home = await mkdtemp(path.join(tmpdir(), 'smol-codex-home-'));
  const work = await mkdtemp(path.join(tmpdir(), 'smol-codex-work-'));
  try {
    await writeFile(path.join(home, 'config.toml'), [
      'model = "smol"',
      'model_provider = "smol"',
      '[model_providers.smol]',
      'name = "smol-server"',
      `base_url = "${server.url}/v1"`,
      'wire_api = "responses"',
      'env_key = "SMOL_API_KEY"',
      '',
    ].join('\n'));
    const { code, stdout, stderr } = await runProgram(
      codex, ['exec', '--json', '--skip-git-repo-check', 'Say hi in one short sentence.'],
      {
        cwd: work,
        timeout: 240_000,
        env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, SMOL_API_KEY: 'agent-key' },
      });
    assert.equal(code, 0, `codex exited ${code}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`);
    const events = stdout.trim().split('\n').map((line) => JSON.parse(line));
    console.error(`codex: ${JSON.stringify(events.filter((e) => e.type !== 'thread.started'))}`);
    const failed = events.find((e) => e.type === 'turn.failed' || e.type === 'error');
    assert.equal(failed, undefined, JSON.stringify(failed));
    const completed = events.find((e) => e.type === 'turn.completed');
    assert.ok(completed, 'the turn did not complete');
    assert.ok(completed.usage.input_tokens > 2000, `the prompt read was only ${completed.usage.input_tokens} tokens`);
    // The model's text, printed as Codex's message: a random model's reply may also be
    // empty (its first token the end of turn: output_tokens 1), and then Codex has none.
    const message = events.find((e) => e.type === 'item.completed' && e.item.type === 'agent_message');
    if (completed.usage.output_tokens > 1) {
      assert.ok(message, 'Codex printed no agent message for a reply of text');
      assert.ok(message.item.text.length > 0);
    } else {
      assert.equal(message, undefined);
    }
  } finally {
    await rm(home, { recursive: true, force: true });
    await rm(work, { recursive: true, force: true });
    assert.equal(await server.stop(), 0);
  }
});
