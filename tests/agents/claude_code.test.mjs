// Claude Code (@anthropic-ai/claude-code, pinned in package.json) against smol-server,
// headless and offline: `claude -p ... --output-format json` with ANTHROPIC_BASE_URL
// pointing at a server on the tiny random-weight SmolLM3 fixture. The turn must complete
// with exit 0, its result the model's text, and the usage must show Claude Code's
// system prompt read (thousands of tokens).
//
// Why `--tools ""`: with its 21 tools (which smol-server takes: docs/SERVER.md), a random
// model picks tool calls at random, which Claude Code then runs (an Agent tool spawns
// more turns), and a reply in the tool format ends only where the model happens to close
// its JSON: neither is a test that ends. Without tools the reply is free text, and the
// server's `--logit-bias` on the end-of-turn token makes it end within a few tokens at
// any sampling, as a real model's short answer would (tests/server/anthropic.test.mjs
// covers tools and a tool round trip through Anthropic's own SDK).
//
// HOME and the working directory are fresh temporary directories: no configuration of
// this machine's user, and no repository, is read or written.
//
//   node claude_code.test.mjs SERVER_BINARY MODEL_GGUF CLAUDE_BINARY
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runProgram } from './run_program.mjs';
import { startServer } from './spawn_server.mjs';

const [serverBinary, model, claude] = process.argv.slice(2);
if (!serverBinary || !model || !claude) {
  console.error('usage: node claude_code.test.mjs SERVER_BINARY MODEL_GGUF CLAUDE_BINARY');
  process.exit(2);
}

// The fixture's end-of-turn token, as the server's own tokenizer reads it.
async function endOfTurnToken() {
  const server = await startServer(serverBinary, ['-m', model]);
  try {
    const response = await fetch(`${server.url}/tokenize`, {
      method: 'POST',
      body: JSON.stringify({ content: '<|im_end|>', parse_special: true }),
    });
    const { tokens } = await response.json();
    assert.equal(tokens.length, 1);
    return tokens[0];
  } finally {
    assert.equal(await server.stop(), 0);
  }
}

test('Claude Code completes a turn against smol-server', async () => {
  const end = await endOfTurnToken();
  const server = await startServer(serverBinary, [
    '-m', model, '-c', '32768', '--rope-scaling', 'yarn', '--rope-scale', '8', '-t', '2', '-np', '1',
    '--api-key', 'agent-key', '--logit-bias', `${end}+6`,
  ]);
  const home = await mkdtemp(path.join(tmpdir(), 'smol-claude-home-'));
  const work = await mkdtemp(path.join(tmpdir(), 'smol-claude-work-'));
  try {
    const { code, stdout, stderr } = await runProgram(
      claude, ['-p', 'Say hi in one short sentence.', '--output-format', 'json', '--tools', ''],
      {
        cwd: work,
        timeout: 240_000,
        env: {
          PATH: process.env.PATH,
          HOME: home,
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_AUTH_TOKEN: 'agent-key',
          DISABLE_TELEMETRY: '1',
          DISABLE_AUTOUPDATER: '1',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        },
      });
    assert.equal(code, 0, `claude exited ${code}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`);
    const result = JSON.parse(stdout);
    console.error(`claude: ${JSON.stringify({ result: result.result, usage: result.usage })}`);
    assert.equal(result.type, 'result');
    assert.equal(result.is_error, false, `Claude Code reported an error: ${result.result}`);
    assert.equal(result.terminal_reason, 'completed');
    assert.equal(result.num_turns, 1);
    assert.equal(typeof result.result, 'string');
    const read = result.usage.input_tokens + result.usage.cache_read_input_tokens;
    assert.ok(read > 2000, `the prompt read was only ${read} tokens`);
    assert.ok(result.usage.output_tokens > 0);
  } finally {
    await rm(home, { recursive: true, force: true });
    await rm(work, { recursive: true, force: true });
    assert.equal(await server.stop(), 0);
  }
});
