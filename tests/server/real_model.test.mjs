// smol-server on a real model (SmolLM2-135M-Instruct, Q4_1): the official `openai`
// client and the chat page in headless Chromium get real answers, with greedy
// decoding so that what the model says is repeatable.
//
//   node real_model.test.mjs SERVER_BINARY MODEL_GGUF CHROMIUM_PATH
//
// The page's screenshot lands beside this script (the build tree): real-model-page.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import puppeteer from 'puppeteer-core';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath, chromiumPath] = process.argv.slice(2);
if (!serverBinary || !modelPath || !chromiumPath) {
  console.error('usage: node real_model.test.mjs SERVER_BINARY MODEL_GGUF CHROMIUM_PATH');
  process.exit(2);
}

let server;
let client;
const ask = (messages, extra = {}) => client.chat.completions.create({
  model: 'smol', messages, max_tokens: 48, temperature: 0, ...extra });

before(async () => {
  server = await startServer(serverBinary, ['-m', modelPath, '-np', '2', '-c', '2048', '-t', '2']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});

after(async () => {
  if (server) await server.stop();
});

test('a factual question gets the fact', async () => {
  const r = await ask([{ role: 'user', content: 'Name the capital city of France.' }]);
  const text = r.choices[0].message.content;
  console.error(`reply: ${JSON.stringify(text)}`);
  assert.match(text, /Paris/);
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('a second turn remembers a name given in the first; the streamed reply is the same', async () => {
  const first = [{ role: 'user', content: "My friend's name is Alice." }];
  const r1 = await ask(first);
  const history = [...first, { role: 'assistant', content: r1.choices[0].message.content },
                   { role: 'user', content: "What is my friend's name?" }];
  const r2 = await ask(history);
  const text = r2.choices[0].message.content;
  console.error(`turn 1: ${JSON.stringify(r1.choices[0].message.content)}\nturn 2: ${JSON.stringify(text)}`);
  assert.match(text, /Alice/);
  // The follow-up reused the first turn's cached prefix.
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(r2.usage));
  let streamed = '';
  for await (const chunk of await ask(history, { stream: true })) {
    streamed += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(streamed, text);
});

test('the chat page shows a real answer (screenshot in the build tree)', async () => {
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'smol-real-model-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: chromiumPath, headless: true, userDataDir,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1000, height: 700 });
    await page.goto(server.url, { waitUntil: 'load' });
    // Greedy, as the tests above: the page's requests get temperature 0.
    await page.evaluate(() => {
      const native = window.fetch;
      window.fetch = (url, options) => {
        if (String(url).endsWith('v1/chat/completions') && options?.body) {
          options = { ...options, body: JSON.stringify({ ...JSON.parse(options.body), temperature: 0 }) };
        }
        return native(url, options);
      };
    });
    await page.type('#input', 'Name the capital city of France.');
    await page.click('#send');
    await page.waitForFunction(() => {
      const all = document.querySelectorAll('#messages .msg.assistant');
      const last = all[all.length - 1];
      return last && last.dataset.finish && !document.getElementById('send').disabled;
    }, { timeout: 120_000 });
    const content = await page.evaluate(() => {
      const all = document.querySelectorAll('#messages .msg.assistant');
      return all[all.length - 1].querySelector('.content').textContent;
    });
    console.error(`page shows: ${JSON.stringify(content)}`);
    assert.match(content, /Paris/);
    await page.screenshot({ path: fileURLToPath(new URL('real-model-page.png', import.meta.url)) });
  } finally {
    await browser.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
});
