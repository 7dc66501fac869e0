// smol-server's web page (examples/server/web/index.html) in headless Chromium.
//
//   node browser.test.mjs SERVER_BINARY MODEL_GGUF CHROMIUM_PATH
//
// The model is a tiny random-weights model: its text is gibberish, so these
// tests look at what the page does (streaming, storage, stop, thinking switch)
// and not at what the text says. Where the text matters (HTML in a reply) the
// page's POST is answered with a canned stream through request interception.
//
// Elements and globals of the page that the tests rely on:
//   #input #send #stop #new-chat #conversations (li[data-id] > .open .rename .delete)
//   #thinking-toggle #max-tokens #sidebar #sidebar-toggle #messages
//   .msg.user / .msg.assistant > details.thinking > .thinking-body, .content, .stats
//   .msg.assistant[data-finish]  'stop' | 'length' | 'aborted' | 'error', once done
//   .msg.assistant .tool-call > .tool-name, pre   .msg.tool > .tool-label, .tool-name, pre
//   window.smolRenderMarkdown(text) -> HTML string, window.smolLastRequest
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath, chromiumPath] = process.argv.slice(2);
if (!serverBinary || !modelPath || !chromiumPath) {
  console.error('usage: node browser.test.mjs SERVER_BINARY MODEL_GGUF CHROMIUM_PATH');
  process.exit(2);
}

let server;
let browser;
let page;
let userDataDir;
let origin;
const consoleErrors = [];   // console errors and uncaught page errors, all along
const foreignRequests = []; // requests to anywhere but the server
const failedRequests = [];  // 'url: reason'
const dialogs = [];         // {type, message}
let promptAnswer = '';      // what the next prompt() dialog is answered with

/* ---------------- helpers ---------------- */

async function metric(name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)\\s*$`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
}

// Sets a settings field the way a person's edit would (input + change events).
async function setField(selector, value) {
  await page.$eval(selector, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, String(value));
}

// Runs fn while the page's chat requests go to the server with `extra` fields added
// to their JSON body. The page's fetch is wrapped rather than the request intercepted:
// an intercepted request's answer reaches the page only once it is complete, which
// would hide the streaming this is used to test.
async function withRequestFields(extra, fn) {
  await page.evaluate((fields) => {
    window.__smolFetch = window.fetch;
    window.fetch = (url, options) => {
      if (String(url).endsWith('v1/chat/completions') && options?.body) {
        options = { ...options, body: JSON.stringify({ ...JSON.parse(options.body), ...fields }) };
      }
      return window.__smolFetch(url, options);
    };
  }, extra);
  try {
    await fn();
  } finally {
    await page.evaluate(() => { window.fetch = window.__smolFetch; });
  }
}

async function typeAndSend(text) {
  await page.$eval('#input', (el) => { el.value = ''; });
  await page.type('#input', text);
  await page.click('#send');
}

// Waits until the newest assistant message is finished and the page idle again.
async function waitForReplyDone(timeout = 120_000) {
  await page.waitForFunction(() => {
    const all = document.querySelectorAll('#messages .msg.assistant');
    const last = all[all.length - 1];
    return last && last.dataset.finish && document.getElementById('stop').disabled
      && !document.getElementById('send').disabled;
  }, { timeout });
  return page.evaluate(() => {
    const all = document.querySelectorAll('#messages .msg.assistant');
    const last = all[all.length - 1];
    return {
      finish: last.dataset.finish,
      content: last.querySelector('.content').textContent,
      thinking: last.querySelector('.thinking-body').textContent,
      stats: last.querySelector('.stats').textContent,
    };
  });
}

const conversationTitles = () => page.$$eval('#conversations li .open', (els) => els.map((e) => e.textContent));

// A chunk of an OpenAI chat-completion stream.
const chunk = (delta, finishReason = null, extra = {}) => ({
  id: 'chatcmpl-canned', object: 'chat.completion.chunk', created: 0, model: 'canned',
  choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra,
});
const TIMINGS = {
  prompt_n: 5, prompt_ms: 10, prompt_per_second: 500, predicted_n: 3, predicted_ms: 30,
  predicted_per_second: 100, cache_n: 0,
};
function cannedStream(reasoning, content) {
  const events = [
    chunk({ role: 'assistant' }),
    ...(reasoning ? [chunk({ reasoning_content: reasoning })] : []),
    chunk({ content }),
    chunk({}, 'stop', { timings: TIMINGS }),
    { id: 'chatcmpl-canned', object: 'chat.completion.chunk', created: 0, model: 'canned', choices: [],
      usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, prompt_tokens_details: { cached_tokens: 0 } } },
  ];
  // A keep-alive comment first: the page must skip it.
  return ': keep-alive\n\n' + events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
}

// Runs fn while the page's POST /v1/chat/completions is answered with `body`
// (an SSE text); returns the JSON bodies that the page posted.
async function withCannedReply(body, fn) {
  const posted = [];
  const handler = async (req) => {
    if (req.isInterceptResolutionHandled()) return;
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat/completions') {
      posted.push(JSON.parse(req.postData() ?? (await req.fetchPostData())));
      await req.respond({ status: 200, contentType: 'text/event-stream', body });
    } else {
      await req.continue();
    }
  };
  await page.setRequestInterception(true);
  page.on('request', handler);
  try {
    await fn();
  } finally {
    page.off('request', handler);
    await page.setRequestInterception(false);
  }
  return posted;
}

/* ---------------- setup ---------------- */

before(async () => {
  server = await startServer(serverBinary, ['-m', modelPath, '-np', '2', '-c', '4096', '-t', '2']);
  origin = new URL(server.url).origin;
  userDataDir = await mkdtemp(path.join(os.tmpdir(), 'smol-chromium-'));
  browser = await puppeteer.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', `--user-data-dir=${userDataDir}`],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 800 });
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`console: ${msg.text()} (${msg.location()?.url ?? ''})`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith('data:') && new URL(url).origin !== origin) foreignRequests.push(url);
  });
  page.on('requestfailed', (req) => failedRequests.push(`${req.url()}: ${req.failure()?.errorText}`));
  page.on('dialog', async (d) => {
    dialogs.push({ type: d.type(), message: d.message() });
    await (d.type() === 'prompt' ? d.accept(promptAnswer) : d.accept());
  });
});

after(async () => {
  if (browser) await browser.close();
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
  if (server) await server.stop();
});

/* ---------------- tests ---------------- */

test('the page loads with no errors and asks nothing of other origins', async () => {
  const res = await page.goto(`${server.url}/`, { waitUntil: 'networkidle0' });
  assert.equal(res.status(), 200);
  assert.equal(await page.title(), 'smol');
  for (const id of ['input', 'send', 'stop', 'new-chat', 'conversations', 'thinking-toggle', 'messages']) {
    assert.ok(await page.$(`#${id}`), `#${id} exists`);
  }
  assert.equal(await page.$eval('#stop', (b) => b.disabled), true, 'stop is disabled while idle');
  assert.equal(await page.$eval('#send', (b) => b.disabled), false);
  // The model name comes from /v1/models.
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0, { timeout: 10_000 });
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(foreignRequests, []);
  assert.deepEqual(failedRequests, []);
});

let firstReply; // what test 2 saw, compared after the reload

test('sending a message streams a reply, then shows tokens/s', async () => {
  await setField('#max-tokens', 24);
  // Records each render of the reply while it streams: the page replaces the
  // content (innerHTML) and reasoning (textContent) of the message as chunks come.
  await page.evaluate(() => {
    window.__renders = [];
    new MutationObserver((records) => {
      for (const r of records) {
        const t = r.target;
        if (t.nodeType !== 1 || !t.closest('.msg.assistant')) continue;
        const kind = t.classList.contains('content') ? 'content' : t.classList.contains('thinking-body') ? 'thinking' : null;
        if (!kind || !r.addedNodes.length) continue;
        const len = [...r.addedNodes].reduce((n, x) => n + (x.textContent || '').length, 0);
        window.__renders.push({
          kind, len,
          open: t.closest('.msg').querySelector('details.thinking').open,
          busy: !document.getElementById('stop').disabled && document.getElementById('send').disabled,
        });
      }
    }).observe(document.getElementById('messages'), { childList: true, subtree: true });
  });
  // Long enough to span many frames (the page redraws at most once a frame), whatever
  // the random model does with its end-of-turn token.
  await withRequestFields({ ignore_eos: true, max_tokens: 800 }, async () => {
    await typeAndSend('Hello there');
    firstReply = await waitForReplyDone();
  });
  assert.ok(['stop', 'length'].includes(firstReply.finish), firstReply.finish);
  assert.match(firstReply.stats, /tok\/s/, `stats: "${firstReply.stats}"`);
  assert.equal(await page.$eval('#messages .msg.user .content', (e) => e.textContent), 'Hello there');

  // The text grew over several renders, with the reasoning open meanwhile.
  const renders = await page.evaluate(() => window.__renders);
  const sizes = { content: 0, thinking: 0 };
  const totals = renders.map((r) => {
    sizes[r.kind] = r.len;
    return sizes.content + sizes.thinking;
  });
  assert.ok(totals.length >= 2, `the reply came in ${totals.length} render(s)`);
  assert.ok(totals.at(-1) > 0, 'the reply has text');
  assert.ok(totals[0] < totals.at(-1), `the text grew: ${totals.join(',')}`);
  for (let i = 1; i < totals.length; i++) assert.ok(totals[i] >= totals[i - 1], `never shrinks: ${totals.join(',')}`);
  assert.ok(renders.every((r) => r.busy), 'stop is enabled and send disabled while streaming');
  assert.ok(renders.filter((r) => r.kind === 'thinking').every((r) => r.open), 'reasoning is open while streaming');
  assert.equal(await page.$eval('#messages .msg.assistant details.thinking', (d) => d.open), false,
    'reasoning is collapsed once done');

  // The conversation is in the list, titled after the message.
  assert.deepEqual(await conversationTitles(), ['Hello there']);
  assert.equal(await page.$$eval('#conversations li.active', (els) => els.length), 1);
});

test('the conversation survives a reload', async () => {
  await page.reload({ waitUntil: 'networkidle0' });
  assert.deepEqual(await conversationTitles(), ['Hello there']);
  assert.equal(await page.$eval('#messages .msg.user .content', (e) => e.textContent), 'Hello there');
  const after = await page.$eval('#messages .msg.assistant', (m) => ({
    content: m.querySelector('.content').textContent,
    thinking: m.querySelector('.thinking-body').textContent,
    stats: m.querySelector('.stats').textContent,
  }));
  assert.equal(after.content, firstReply.content);
  assert.equal(after.thinking, firstReply.thinking);
  assert.equal(after.stats, firstReply.stats);
  assert.equal(await page.$eval('#max-tokens', (e) => e.value), '24', 'settings are kept too');
});

test('rename and delete conversations', async () => {
  promptAnswer = 'Renamed chat';
  await page.click('#conversations li.active .rename');
  await page.waitForFunction(() => document.querySelector('#conversations li.active .open').textContent === 'Renamed chat');
  assert.equal(dialogs.at(-1).type, 'prompt');

  // A second conversation.
  await page.click('#new-chat');
  assert.equal(await page.$$eval('#messages .msg', (els) => els.length), 0, 'a new chat is empty');
  await typeAndSend('Second chat');
  await waitForReplyDone();
  assert.deepEqual((await conversationTitles()).sort(), ['Renamed chat', 'Second chat']);

  // Switching between them.
  const firstId = await page.$$eval('#conversations li', (els) => els.find((li) => li.textContent.includes('Renamed chat')).dataset.id);
  await page.click(`#conversations li[data-id="${firstId}"] .open`);
  assert.equal(await page.$eval('#messages .msg.user .content', (e) => e.textContent), 'Hello there');
  const secondId = await page.$$eval('#conversations li', (els) => els.find((li) => li.textContent.includes('Second chat')).dataset.id);
  await page.click(`#conversations li[data-id="${secondId}"] .open`);
  assert.equal(await page.$eval('#messages .msg.user .content', (e) => e.textContent), 'Second chat');

  await page.click(`#conversations li[data-id="${secondId}"] .delete`);
  await page.waitForFunction(() => document.querySelectorAll('#conversations li').length === 1);
  assert.equal(dialogs.at(-1).type, 'confirm');
  assert.deepEqual(await conversationTitles(), ['Renamed chat']);

  await page.reload({ waitUntil: 'networkidle0' });
  assert.deepEqual(await conversationTitles(), ['Renamed chat']);
});

test('stop ends a long stream, and the server counts a cancelled request', async () => {
  await page.click('#new-chat');
  const cancelledBefore = await metric('smol_requests_cancelled_total');
  // The random model may end its turn at once: the request is sent with ignore_eos
  // (llama-server's field) and no token limit, so the reply runs until the context is
  // full, seconds away; the stop button must end it first.
  await setField('#max-tokens', 0);
  let done;
  try {
    await withRequestFields({ ignore_eos: true, max_tokens: null }, async () => {
      await typeAndSend('Write a very long story.');
      await page.waitForFunction(() => {
        const all = document.querySelectorAll('#messages .msg.assistant');
        const last = all[all.length - 1];
        return last && (last.querySelector('.content').textContent.length > 0
          || last.querySelector('.thinking-body').textContent.length > 0 || last.dataset.finish);
      }, { timeout: 120_000, polling: 'mutation' });
      const state = await page.$eval('#messages .msg.assistant:last-child', (m) =>
        `finish=${m.dataset.finish} stats=${m.querySelector(".stats")?.textContent} request=${JSON.stringify(window.smolLastRequest)}`);
      assert.equal(await page.$eval('#stop', (b) => b.disabled), false, state);
      await page.click('#stop');
      done = await waitForReplyDone();
    });
  } finally {
    await setField('#max-tokens', 24);
  }
  assert.equal(done.finish, 'aborted');
  assert.match(done.stats, /stopped/);
  assert.equal(await page.$eval('#stop', (b) => b.disabled), true);
  assert.equal(await page.$eval('#send', (b) => b.disabled), false);

  let cancelled = cancelledBefore;
  for (const deadline = Date.now() + 5000; cancelled <= cancelledBefore && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 100));
    cancelled = await metric('smol_requests_cancelled_total');
  }
  assert.ok(cancelled > cancelledBefore, `smol_requests_cancelled_total went ${cancelledBefore} -> ${cancelled}`);
});

test('after a stopped reply in a second conversation, a reload lists both; a screenshot', async () => {
  await page.reload({ waitUntil: 'networkidle0' });
  const titles = await conversationTitles();
  assert.equal(titles.length, 2, titles.join(' | '));
  assert.ok(titles.includes('Renamed chat'), titles.join(' | '));
  assert.ok(titles.some((t) => t.startsWith('Write a very long story')), titles.join(' | '));
  // The stopped reply was kept, marked as stopped.
  assert.match(await page.$eval('#messages .msg.assistant .stats', (e) => e.textContent), /stopped/);
  await page.screenshot({ path: fileURLToPath(new URL('chat-page.png', import.meta.url)) });
});

test('the thinking switch sets chat_template_kwargs.enable_thinking', async () => {
  await page.click('#new-chat');
  const setThinking = async (on) => {
    if ((await page.$eval('#thinking-toggle', (c) => c.checked)) !== on) await page.click('#thinking-toggle');
  };
  const posted = await withCannedReply(cannedStream('some reasoning', 'An answer.'), async () => {
    await setThinking(false);
    await typeAndSend('No thinking please');
    await waitForReplyDone();
    await setThinking(true);
    await typeAndSend('Now think');
    await waitForReplyDone();
  });
  assert.equal(posted.length, 2);
  assert.equal(posted[0].chat_template_kwargs?.enable_thinking, false);
  assert.equal(posted[1].chat_template_kwargs?.enable_thinking, true);
  for (const body of posted) {
    assert.equal(body.stream, true);
    assert.equal(body.stream_options?.include_usage, true);
    assert.equal(body.max_tokens, 24);
  }
  // The history sent back holds the answer, not the reasoning.
  assert.deepEqual(posted[1].messages.filter((m) => m.role !== 'system'), [
    { role: 'user', content: 'No thinking please' },
    { role: 'assistant', content: 'An answer.' },
    { role: 'user', content: 'Now think' },
  ]);
  assert.deepEqual(await page.evaluate(() => window.smolLastRequest), posted[1]);

  // The switch is a setting: it survives a reload.
  await setThinking(false);
  await page.reload({ waitUntil: 'networkidle0' });
  assert.equal(await page.$eval('#thinking-toggle', (c) => c.checked), false);
  await setThinking(true);
});

test('the markdown renderer lets no HTML or script through', async () => {
  const inputs = [
    '<img src=x onerror=alert(1)>',
    '[x](javascript:alert(1))',
    '[x](JaVaScRiPt:alert(1))',
    '[x](data:text/html,<script>alert(1)</script>)',
    '```\n<script>alert(1)</script>\n```',
    '`<img src=x onerror=alert(1)>`',
    '**<svg onload=alert(1)>**',
    '[a](https://example.com/" onmouseover="alert(1))',
    '[<img src=x onerror=alert(1)>](https://example.com/)',
    '# <iframe src=javascript:alert(1)>',
    '- <a href="javascript:alert(1)">x</a>\n- _<b onclick=alert(1)>y</b>_',
    '<script>alert(1)</script>',
    '<<script>script>alert(1)<</script>/script>',
    '"\'><img src=x onerror=alert(1)>',
    '<details open ontoggle=alert(1)>',
    '```\n' + 'unclosed fence <img src=x onerror=alert(1)>',
  ];
  const results = await page.evaluate((inputs) => inputs.map((input) => {
    const html = window.smolRenderMarkdown(input);
    const t = document.createElement('template'); // inert: nothing loads or runs
    t.innerHTML = html;
    const all = [...t.content.querySelectorAll('*')];
    return {
      input,
      html,
      bad: all.filter((el) => ['IMG', 'SCRIPT', 'IFRAME', 'SVG', 'OBJECT', 'EMBED', 'STYLE', 'DETAILS', 'svg'].includes(el.tagName)).map((el) => el.tagName),
      onAttrs: all.flatMap((el) => [...el.attributes].filter((a) => a.name.toLowerCase().startsWith('on')).map((a) => a.name)),
      badHrefs: all.filter((el) => el.hasAttribute('href'))
        .map((el) => el.getAttribute('href')).filter((h) => !/^https?:\/\//i.test(h.trim())),
      text: t.content.textContent,
    };
  }), inputs);
  for (const r of results) {
    assert.deepEqual(r.bad, [], `no active elements for ${JSON.stringify(r.input)}: ${r.html}`);
    assert.deepEqual(r.onAttrs, [], `no on* attributes for ${JSON.stringify(r.input)}: ${r.html}`);
    assert.deepEqual(r.badHrefs, [], `only http(s) links for ${JSON.stringify(r.input)}: ${r.html}`);
  }
  // The code block shows the script as text.
  assert.ok(results[4].html.includes('<pre><code>'), results[4].html);
  assert.ok(results[4].text.includes('<script>alert(1)</script>'), results[4].text);

  // And the constructs it does build.
  const built = await page.evaluate(() => {
    const t = document.createElement('template');
    t.innerHTML = window.smolRenderMarkdown(
      '# Title\n\nSome **bold**, *it*, `code` and [a link](https://example.com/a_b?x=1&y=2).\n\n- one\n- two\n\n1. first\n2. second\n\n```js\nlet x = 1 < 2;\n```');
    const a = t.content.querySelector('a');
    return {
      h1: t.content.querySelector('h1')?.textContent,
      strong: t.content.querySelector('strong')?.textContent,
      em: t.content.querySelector('em')?.textContent,
      code: t.content.querySelector('p code')?.textContent,
      href: a?.getAttribute('href'),
      rel: a?.getAttribute('rel'),
      ul: t.content.querySelectorAll('ul > li').length,
      ol: t.content.querySelectorAll('ol > li').length,
      pre: t.content.querySelector('pre code')?.textContent,
    };
  });
  assert.deepEqual(built, {
    h1: 'Title', strong: 'bold', em: 'it', code: 'code', href: 'https://example.com/a_b?x=1&y=2',
    rel: 'noopener noreferrer', ul: 2, ol: 2, pre: 'let x = 1 < 2;',
  });
});

test('HTML in a streamed reply is shown as text, the reasoning apart', async () => {
  await page.click('#new-chat');
  const reasoning = 'Thinking about <b>tags</b> <img src=y onerror="window.pwned=2">';
  const content = '<img src=x onerror="window.pwned=1">**bold**';
  const posted = await withCannedReply(cannedStream(reasoning, content), async () => {
    await typeAndSend('Show me some HTML');
    await waitForReplyDone();
  });
  assert.equal(posted.length, 1);
  await new Promise((r) => setTimeout(r, 500)); // time for an image error to fire, were there one
  const seen = await page.evaluate(() => {
    const all = document.querySelectorAll('#messages .msg.assistant');
    const m = all[all.length - 1];
    const details = m.querySelector('details.thinking');
    return {
      pwned: window.pwned,
      imgs: document.querySelectorAll('#messages img').length,
      bTags: document.querySelectorAll('#messages b').length,
      strong: [...m.querySelectorAll('.content strong')].map((e) => e.textContent),
      contentText: m.querySelector('.content').textContent,
      detailsTag: details?.tagName,
      detailsOpen: details?.open,
      detailsHidden: details?.hidden,
      thinkingText: details?.querySelector('.thinking-body')?.textContent,
      contentHasReasoning: m.querySelector('.content').textContent.includes('Thinking about'),
      stats: m.querySelector('.stats').textContent,
    };
  });
  assert.equal(seen.pwned, undefined);
  assert.equal(seen.imgs, 0);
  assert.equal(seen.bTags, 0);
  assert.deepEqual(seen.strong, ['bold']);
  assert.equal(seen.contentText, '<img src=x onerror="window.pwned=1">bold');
  assert.equal(seen.detailsTag, 'DETAILS');
  assert.equal(seen.detailsHidden, false);
  assert.equal(seen.detailsOpen, false, 'collapsed once done');
  assert.equal(seen.thinkingText, reasoning);
  assert.equal(seen.contentHasReasoning, false);
  assert.match(seen.stats, /100\.0 tok\/s/);
  assert.match(seen.stats, /500\.0 tok\/s/);

  // The same after a reload, from localStorage.
  await page.reload({ waitUntil: 'networkidle0' });
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await page.$$eval('#messages img', (els) => els.length), 0);
  assert.deepEqual(await page.$$eval('#messages .msg.assistant .content strong', (els) => els.map((e) => e.textContent)), ['bold']);
});

test('tool calls and tool results in the history render readably and go back to the server', async () => {
  // A conversation as a client that sends tools stores it (OpenAI's message shapes).
  const args = '{"city":"Paris <b>x</b>","days":[1,2]}';
  const conv = {
    id: 'tools-conv', title: 'Weather', updated: Date.now() + 1e6, messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp":21}' },
      { role: 'assistant', content: 'It is 21 degrees.' },
    ],
  };
  await page.evaluate((c) => {
    localStorage.setItem('smol.conversations', JSON.stringify([...JSON.parse(localStorage.getItem('smol.conversations') || '[]'), c]));
    localStorage.setItem('smol.current', JSON.stringify(c.id));
  }, conv);
  await page.reload({ waitUntil: 'networkidle0' });
  const shown = await page.evaluate(() => ({
    calls: [...document.querySelectorAll('#messages .msg.assistant .tool-call')].map((c) => ({
      name: c.querySelector('.tool-name').textContent, args: c.querySelector('pre').textContent })),
    tool: [...document.querySelectorAll('#messages .msg.tool')].map((t) => ({
      label: t.querySelector('.tool-label').textContent + t.querySelector('.tool-name').textContent,
      content: t.querySelector('pre').textContent })),
    bTags: document.querySelectorAll('#messages b').length,
  }));
  assert.deepEqual(shown.calls, [{ name: 'get_weather', args: JSON.stringify(JSON.parse(args), null, 2) }]);
  assert.deepEqual(shown.tool, [{ label: 'Tool result of get_weather', content: '{\n  "temp": 21\n}' }]);
  assert.equal(shown.bTags, 0, 'arguments are text, never HTML');

  // A streamed call is put together from its pieces; the history sent keeps the calls.
  const events = [
    chunk({ role: 'assistant', content: '' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"zone":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"CET"}' } }] }),
    chunk({}, 'tool_calls', { timings: TIMINGS }),
  ];
  const body = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
  const posted = await withCannedReply(body, async () => {
    await typeAndSend('And the time?');
    await waitForReplyDone();
  });
  assert.equal(posted.length, 1);
  const history = posted[0].messages;
  assert.deepEqual(history[1].tool_calls, conv.messages[1].tool_calls);
  assert.equal(history[2].role, 'tool');
  assert.equal(history[2].tool_call_id, 'call_1');
  const last = await page.evaluate(() => {
    const all = document.querySelectorAll('#messages .msg.assistant');
    const m = all[all.length - 1];
    return { finish: m.dataset.finish, name: m.querySelector('.tool-name')?.textContent, args: m.querySelector('.tool-call pre')?.textContent };
  });
  assert.deepEqual(last, { finish: 'tool_calls', name: 'get_time', args: '{\n  "zone": "CET"\n}' });
});

test('server errors are shown in the page', async () => {
  await page.click('#new-chat');
  const errorBody = JSON.stringify({ error: { message: 'the queue is full', type: 'unavailable_error', param: null, code: 503 } });
  await page.setRequestInterception(true);
  const handler = async (req) => {
    if (req.isInterceptResolutionHandled()) return;
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat/completions') {
      await req.respond({ status: 503, contentType: 'application/json', headers: { 'Retry-After': '2' }, body: errorBody });
    } else {
      await req.continue();
    }
  };
  page.on('request', handler);
  // Chromium reports any non-2xx answer as a console error; this one is expected.
  const errorsBefore = consoleErrors.length;
  try {
    await typeAndSend('This will fail');
    await page.waitForSelector('#messages .error:not([hidden])', { timeout: 10_000 });
  } finally {
    page.off('request', handler);
    await page.setRequestInterception(false);
  }
  const shown = await page.$eval('#messages .error:not([hidden])', (e) => e.textContent);
  assert.match(shown, /the queue is full/);
  assert.match(shown, /503/);
  assert.equal(await page.$eval('#input', (e) => e.value), 'This will fail', 'the text is given back');
  assert.equal(await page.$eval('#send', (b) => b.disabled), false);
  consoleErrors.push(...consoleErrors.splice(errorsBefore).filter((e) => !/\b503\b/.test(e)));
  await page.$eval('#input', (el) => { el.value = ''; });
});

test('phone width: no sideways scrolling, input and send visible', async () => {
  await page.click('#new-chat'); // in the ☰ list at phone width
  await page.setViewport({ width: 375, height: 740 });
  // A reply with a long line of code and a long word, the usual overflow culprits.
  const long = 'x'.repeat(300);
  await withCannedReply(cannedStream('', `A ${long} word.\n\n\`\`\`\n${long}\n\`\`\``), async () => {
    await typeAndSend(`Long ${long}`);
    await waitForReplyDone();
  });
  await page.reload({ waitUntil: 'networkidle0' });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 375,
    `scrollWidth ${await page.evaluate(() => document.documentElement.scrollWidth)}`);
  for (const sel of ['#input', '#send']) {
    const box = await page.$eval(sel, (e) => {
      const r = e.getBoundingClientRect();
      const s = getComputedStyle(e);
      return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height, visibility: s.visibility, display: s.display };
    });
    assert.ok(box.width > 0 && box.height > 0 && box.visibility === 'visible' && box.display !== 'none', `${sel} shown: ${JSON.stringify(box)}`);
    assert.ok(box.left >= 0 && box.right <= 375 && box.top >= 0 && box.bottom <= 740, `${sel} on screen: ${JSON.stringify(box)}`);
  }
  // The conversation list is behind the ☰ toggle.
  assert.equal(await page.$eval('#sidebar', (e) => getComputedStyle(e).display), 'none');
  await page.click('#sidebar-toggle');
  assert.notEqual(await page.$eval('#sidebar', (e) => getComputedStyle(e).display), 'none');
  await page.mouse.click(360, 400); // beside the list: closes it
  assert.equal(await page.$eval('#sidebar', (e) => getComputedStyle(e).display), 'none');
  await page.click('#sidebar-toggle');
  assert.ok(await page.$eval('#conversations li .open', (e) => e.getBoundingClientRect().width > 0));
  await page.click('#conversations li .open'); // choosing one closes the list
  assert.equal(await page.$eval('#sidebar', (e) => getComputedStyle(e).display), 'none');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 375);
  await page.screenshot({ path: fileURLToPath(new URL('chat-page-phone.png', import.meta.url)) });
  await page.setViewport({ width: 1200, height: 800 });
});

test('no console errors and no other origins over the whole session', async () => {
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(foreignRequests, []);
});

test('the server exits 0 on SIGTERM', async () => {
  const code = await server.stop();
  server = undefined;
  assert.equal(code, 0);
});
