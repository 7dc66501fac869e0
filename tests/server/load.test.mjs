// smol-server under a bounded load: 16 concurrent clients, 200 streaming chat
// requests, a queue small enough that some of them are turned away with 503.
//
//   node load.test.mjs SERVER_BINARY MODEL_GGUF
//
// Not a benchmark: nothing here asserts a speed. It checks that every request
// ends cleanly (a whole stream, or a 503 that the client retries), that none
// hangs, that /metrics agrees with what the clients saw, that the server is
// idle afterwards, and that its memory does not grow with the number of
// requests served. The speeds it prints are for a human reading the log.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer } from './spawn_server.mjs';

const [serverBinary, modelPath] = process.argv.slice(2);
if (!serverBinary || !modelPath) {
  console.error('usage: node load.test.mjs SERVER_BINARY MODEL_GGUF');
  process.exit(2);
}
// 4 slots and 8 waiting: 16 clients are more than the server takes at once.
const SERVER_ARGS = ['-m', modelPath, '-np', '4', '-c', '2048', '-t', '2', '--queue-limit', '8'];

const CLIENTS = 16;
const REQUESTS = 200;
const WARMUP = 8;
const REQUEST_TIMEOUT_MS = 120_000; // a request that takes longer has hung
const MAX_ATTEMPTS = 60;            // 503s a request may meet before it counts as failed
const RSS_SLACK_MIB = 64;

let server;

before(async () => {
  server = await startServer(serverBinary, SERVER_ARGS);
});

after(async () => {
  // Only a safety net: the last test stops the server and checks the exit code.
  if (server) await server.stop();
});

function rssMiB(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)\s+kB/m);
  assert.ok(m, `VmRSS in /proc/${pid}/status`);
  return Number(m[1]) / 1024;
}

async function metrics() {
  const res = await fetch(`${server.url}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  const value = (name) => {
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)\\s*$`, 'm'));
    assert.ok(m, `${name} is in /metrics`);
    return Number(m[1]);
  };
  return {
    requests: value('smol_requests_total'),
    rejected: value('smol_requests_rejected_total'),
    cancelled: value('smol_requests_cancelled_total'),
    generated: value('smol_tokens_generated_total'),
    busy: value('smol_slots_busy'),
    queued: value('smol_queue_depth'),
  };
}

// The server may account a request a moment after its last byte; poll until
// the gauges are back to zero (or the deadline passes; the caller asserts).
async function settledMetrics() {
  const deadline = Date.now() + 5000;
  let m = await metrics();
  while ((m.busy !== 0 || m.queued !== 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    m = await metrics();
  }
  return m;
}

// Request i: a distinct short prompt, 8 to 32 tokens, sampled with a seed.
const requestBody = (i) => ({
  messages: [{ role: 'user', content: `Request number ${i}: tell me something about the number ${i * 37 % 101}.` }],
  max_tokens: 8 + ((i * 7) % 25),
  temperature: 0.7,
  seed: 1000 + i,
  ignore_eos: true,
  stream: true,
});

// One streaming request, retried after a 503 as Retry-After says. Resolves to
// { rejected, ttftMs, predictedN } or throws with what went wrong.
async function runRequest(i) {
  const body = requestBody(i);
  let rejected = 0;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const sent = performance.now();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });

    if (res.status === 503) {
      rejected++;
      const retryAfter = res.headers.get('retry-after');
      assert.ok(retryAfter !== null && /^\d+$/.test(retryAfter), `request ${i}: a 503 without a numeric Retry-After (${retryAfter})`);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/, `request ${i}: 503 content-type`);
      const err = await res.json();
      assert.equal(typeof err.error?.message, 'string', `request ${i}: 503 body ${JSON.stringify(err)}`);
      await new Promise((r) => setTimeout(r, Number(retryAfter) * 1000));
      continue;
    }
    assert.equal(res.status, 200, `request ${i}: HTTP ${res.status}: ${res.status === 200 ? '' : await res.text()}`);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/, `request ${i}: content-type`);

    // Server-Sent Events by hand: events end with a blank line; a line that
    // starts with ':' is a comment (keep-alive); we only need the data lines.
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let ttftMs;
    let finish;     // the chunk with a finish_reason
    let finishes = 0;
    let done = false;
    let afterDone = '';
    const onData = (data) => {
      if (done) {
        afterDone += data;
        return;
      }
      if (data === '[DONE]') {
        done = true;
        return;
      }
      const chunk = JSON.parse(data);
      const choice = chunk.choices?.[0];
      assert.ok(chunk.error === undefined, `request ${i}: error in the stream: ${data}`);
      const delta = choice?.delta ?? {};
      if (ttftMs === undefined && ((delta.content ?? '') !== '' || (delta.reasoning_content ?? '') !== '')) {
        ttftMs = performance.now() - sent;
      }
      if (choice?.finish_reason != null) {
        finishes++;
        finish = chunk;
      }
    };
    for (;;) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
        if (data.length) onData(data.join('\n'));
      }
    }
    buffer += decoder.decode();
    assert.equal(buffer.trim(), '', `request ${i}: the stream ends inside an event: ${JSON.stringify(buffer)}`);
    assert.ok(done, `request ${i}: the stream ends without data: [DONE]`);
    assert.equal(afterDone, '', `request ${i}: data after [DONE]`);
    assert.equal(finishes, 1, `request ${i}: ${finishes} chunks with a finish_reason`);
    assert.equal(finish.choices[0].finish_reason, 'length', `request ${i}: ignore_eos runs to max_tokens`);
    const t = finish.timings;
    assert.ok(t, `request ${i}: the finishing chunk has timings`);
    assert.equal(t.predicted_n, body.max_tokens, `request ${i}: predicted_n`);
    assert.ok(t.prompt_n + t.cache_n > 0, `request ${i}: prompt_n ${t.prompt_n} cache_n ${t.cache_n}`);
    assert.ok(ttftMs !== undefined, `request ${i}: no content or reasoning in the stream`);
    return { rejected, ttftMs, predictedN: t.predicted_n };
  }
  throw new Error(`request ${i}: still 503 after ${MAX_ATTEMPTS} attempts`);
}

// `count` requests numbered from `first`, by `clients` clients taking the next one.
async function runAll(first, count, clients) {
  let next = first;
  const results = [];
  const failures = [];
  const client = async () => {
    while (next < first + count) {
      const i = next++;
      try {
        results.push(await runRequest(i));
      } catch (e) {
        failures.push(e);
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return { results, failures };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

let rssStart;
let warmMetrics;

test(`warm-up: ${WARMUP} requests`, async () => {
  const { results, failures } = await runAll(REQUESTS, WARMUP, WARMUP);
  assert.deepEqual(failures, []);
  assert.equal(results.length, WARMUP);
  warmMetrics = await settledMetrics();
  assert.equal(warmMetrics.busy, 0);
  assert.equal(warmMetrics.queued, 0);
  rssStart = rssMiB(server.process.pid);
});

test(`${CLIENTS} clients, ${REQUESTS} streaming requests`, async () => {
  assert.ok(warmMetrics, 'the warm-up ran');
  const start = performance.now();
  const { results, failures } = await runAll(0, REQUESTS, CLIENTS);
  const wallS = (performance.now() - start) / 1000;

  const rejected = results.reduce((s, r) => s + r.rejected, 0);
  const generated = results.reduce((s, r) => s + r.predictedN, 0);
  const ttft = results.map((r) => r.ttftMs).sort((a, b) => a - b);

  const m = await settledMetrics();
  const rssEnd = rssMiB(server.process.pid);

  // Printed before the assertions, so that a failing run shows its figures too.
  console.log(
    `load: ${REQUESTS} requests by ${CLIENTS} clients in ${wallS.toFixed(1)} s, ${failures.length} failed, ${rejected} x 503; ` +
      `TTFT p50 ${percentile(ttft, 50)?.toFixed(0)} ms, p99 ${percentile(ttft, 99)?.toFixed(0)} ms; ` +
      `${generated} tokens generated, ${(generated / wallS).toFixed(0)} tok/s; ` +
      `RSS ${rssStart.toFixed(1)} -> ${rssEnd.toFixed(1)} MiB`,
  );
  for (const f of failures.slice(0, 5)) console.error(f);
  assert.equal(failures.length, 0, `${failures.length} of ${REQUESTS} requests failed; the first: ${failures[0]}`);
  assert.equal(results.length, REQUESTS);

  assert.equal(m.busy, 0, 'smol_slots_busy is 0 at the end');
  assert.equal(m.queued, 0, 'smol_queue_depth is 0 at the end');
  assert.equal(m.generated - warmMetrics.generated, generated, 'smol_tokens_generated_total grew by the sum of predicted_n');
  assert.equal(m.requests - warmMetrics.requests, REQUESTS, 'smol_requests_total grew by the requests served');
  assert.equal(m.rejected - warmMetrics.rejected, rejected, 'smol_requests_rejected_total grew by the 503s the clients saw');
  assert.equal(m.cancelled - warmMetrics.cancelled, 0, 'no request was cancelled');
  assert.ok(rssEnd <= rssStart + RSS_SLACK_MIB, `RSS grew from ${rssStart.toFixed(1)} to ${rssEnd.toFixed(1)} MiB`);
});

test('the server exits 0 on SIGTERM', async () => {
  const code = await server.stop();
  server = undefined;
  assert.equal(code, 0);
});
