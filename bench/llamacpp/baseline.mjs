// Same-run baseline for smol-bench: llama.cpp's prefill and decode speed on one GGUF
// file, timed like llama-bench's pp / tg tests, through node-llama-cpp's prebuilt CPU
// build of llama.cpp (the npm registry is the one place this project's machines can get
// a llama.cpp binary from; no source of it is copied here).
//
//   node baseline.mjs -m FILE [-p 512] [-n 128] [-d 0,4096] [-t 2] [-r 3] [--fa auto|on|off]
//                     [--kv-type T | --cache-type-k T --cache-type-v T]
//
// T is f32, f16 (the default), bf16, q8_0 or q4_0, as smol-bench's flags; a quantized V
// cache needs llama.cpp's flash attention, so it turns --fa on.
//
// Each test runs once untimed, then -r times on a cleared sequence: pp = one prompt of
// -p random token ids in one batch; tg = -n tokens generated one at a time (greedy),
// after -d random tokens already in the KV cache (filled once per depth, not timed).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

import { loadCpuModel } from "./cpu_model.mjs";

const list = (s) => s.split(",").map((v) => Number.parseInt(v, 10));
const { values: opts } = parseArgs({
  options: {
    model: { type: "string", short: "m" },
    "n-prompt": { type: "string", short: "p", default: "512" },
    "n-gen": { type: "string", short: "n", default: "128" },
    "n-depth": { type: "string", short: "d", default: "0" },
    threads: { type: "string", short: "t", default: "2" },
    repetitions: { type: "string", short: "r", default: "3" },
    fa: { type: "string", default: "auto" },
    "kv-type": { type: "string" },
    "cache-type-k": { type: "string" },
    "cache-type-v": { type: "string" },
    seed: { type: "string", short: "s", default: "1234" },
  },
});
if (!opts.model) {
  console.error("usage: node baseline.mjs -m FILE [-p 512] [-n 128] [-d 0,4096] [-t 2] [-r 3] [--fa auto|on|off]");
  process.exit(2);
}
const threads = Number.parseInt(opts.threads, 10);
const repetitions = Number.parseInt(opts.repetitions, 10);
const prompts = list(opts["n-prompt"]).filter((n) => n > 0);
const gens = list(opts["n-gen"]).filter((n) => n > 0);
const depths = list(opts["n-depth"]);
const cacheTypes = { f32: "F32", f16: "F16", bf16: "BF16", q8_0: "Q8_0", q4_0: "Q4_0" };
const keyType = opts["cache-type-k"] ?? opts["kv-type"] ?? "f16";
const valueType = opts["cache-type-v"] ?? opts["kv-type"] ?? "f16";
for (const type of [keyType, valueType]) {
  if (!(type in cacheTypes)) {
    console.error(`unknown KV cache type '${type}' (${Object.keys(cacheTypes).join(", ")})`);
    process.exit(2);
  }
}
const quantizedValues = valueType.startsWith("q");
const flashAttention = quantizedValues ? true : { auto: "auto", on: true, off: false }[opts.fa];

const { model, randomTokens } = await loadCpuModel(opts.model, threads, Number.parseInt(opts.seed, 10));

const maxDepth = Math.max(...depths);
const contextSize = maxDepth + Math.max(0, ...prompts, ...gens) + 16;
const context = await model.createContext({
  contextSize,
  batchSize: Math.max(512, ...prompts),
  threads: { ideal: threads, min: threads },
  flashAttention,
  sequences: 1,
  experimentalKvCacheKeyType: cacheTypes[keyType],
  experimentalKvCacheValueType: cacheTypes[valueType],
});
const sequence = context.getSequence();

// Fills the cache with `depth` random tokens once per depth; later runs at the same depth
// erase what the previous run added, as smol-bench rewinds its session.
let filled = -1;
async function fill(depth) {
  if (filled === depth) {
    const end = sequence.nextTokenIndex;
    if (end > depth) await sequence.eraseContextTokenRanges([{ start: depth, end }]);
    return;
  }
  await sequence.clearHistory();
  if (depth > 0) await sequence.evaluateWithoutGeneratingNewTokens(randomTokens(depth));
  filled = depth;
}
async function prefill(n, depth) {
  await fill(depth);
  const tokens = randomTokens(n);
  const start = performance.now();
  await sequence.evaluateWithoutGeneratingNewTokens(tokens);
  return n / ((performance.now() - start) / 1000);
}
async function decode(n, depth) {
  await fill(depth);
  // The first token's logits come from a one-token prompt, as in llama-bench's tg test;
  // greedy sampling, so no sampler work beyond an argmax.
  let generated = 0;
  const start = performance.now();
  for await (const token of sequence.evaluate(randomTokens(1), { temperature: 0 })) {
    void token;
    if (++generated === n) break;
  }
  return n / ((performance.now() - start) / 1000);
}

const stats = (xs) => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = xs.length > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1)) : 0;
  return `${mean.toFixed(2)} ± ${sd.toFixed(2)}`;
};

const tests = [];
for (const depth of depths) {
  for (const n of prompts) tests.push({ name: `pp${n}`, depth, run: () => prefill(n, depth) });
  for (const n of gens) tests.push({ name: `tg${n}`, depth, run: () => decode(n, depth) });
}
const faLabel = quantizedValues ? "on" : opts.fa;
console.log(`llama.cpp via node-llama-cpp 3.22.1, CPU, ${threads} threads, flash attention ${faLabel}, KV cache K ${keyType} V ${valueType}`);
console.log("| test | llama.cpp t/s |");
console.log("| --- | ---: |");
for (const test of tests) {
  await test.run();  // warm-up
  const speeds = [];
  for (let r = 0; r < repetitions; ++r) speeds.push(await test.run());
  const label = test.depth > 0 ? `${test.name} @ d${test.depth}` : test.name;
  console.log(`| ${label} | ${stats(speeds)} |`);
}
await context.dispose();
await model.dispose();
