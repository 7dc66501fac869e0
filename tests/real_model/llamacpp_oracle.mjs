// llama.cpp itself, as the oracle of the real-model tests: node-llama-cpp's prebuilt
// CPU build of llama.cpp runs the same GGUF file smol runs, and this script prints
// what it computes as JSON, for real_model_check.py to compare with smol's answers.
//
//   node llamacpp_oracle.mjs tokenize   MODEL CORPUS.json        ids of each text
//   node llamacpp_oracle.mjs greedy     MODEL PROMPTS.json N [K] N greedy tokens per prompt,
//                                                                the top K logits (5) of each
//   node llamacpp_oracle.mjs perplexity MODEL TEXT CTX           llama-perplexity's protocol
//
// CORPUS.json and PROMPTS.json are lists of strings. Prompts are tokenized with
// special tokens parsed (a chat prompt's <|im_start|> is one token), corpus texts
// without, as smol-tokenize does by default. One thread and mmap off keep the runs
// repeatable; the model's own bos rule applies (SmolLM2: no bos).
//
// --exact (anywhere on the line): an F32 K/V cache and no flash attention instead of
// llama.cpp's defaults (F16 cache, flash attention where it pays), whose f16 rounding
// of Q, K and V moves logits by about 3e-3: with an F32 file, what is left is the
// order of float sums, the yardstick of smol's --f32-activations --kv-type f32.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const exact = process.argv.includes("--exact");
const [command, modelPath, ...rest] = process.argv.slice(2).filter((arg) => arg !== "--exact");
const exactCache = exact
  ? { flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" }
  : {};
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: 1 });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });

// The top `k` raw logits after `token` is fed, with the log-probability of `next`
// (from the logits of every token: log p = logit - max - log sum exp(logit - max)).
function scoreRequest(token, next, k) {
  return [token, { generateNext: {
    logits: { filter: { tokens: next === undefined ? [] : [next], includeTop: k, includeMax: true } },
    totalLogitWeight: true,
  } }];
}
function topOf(output, k) {
  return [...output.next.logits.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k);
}

async function withSequence(contextSize, body) {
  const context = await model.createContext({
    contextSize, batchSize: Math.min(contextSize, 512), threads: 1, ...exactCache,
  });
  try {
    return await body(context.getSequence());
  } finally {
    await context.dispose();
  }
}

if (command === "tokenize") {
  const corpus = JSON.parse(readFileSync(rest[0], "utf8"));
  console.log(JSON.stringify(corpus.map((text) => model.tokenize(text, false))));
} else if (command === "greedy") {
  const prompts = JSON.parse(readFileSync(rest[0], "utf8"));
  const steps = Number(rest[1]);
  const k = rest[2] === undefined ? 5 : Number(rest[2]);
  const runs = [];
  for (const text of prompts) {
    const prompt = model.tokenize(text, true);
    runs.push(await withSequence(1024, async (sequence) => {
      const generated = [];
      const top = [];
      // The prompt in one batch, logits on its last token; then one token per step.
      let input = [...prompt.slice(0, -1), scoreRequest(prompt[prompt.length - 1], undefined, k)];
      for (let step = 0; step < steps; ++step) {
        const outputs = await sequence.controlledEvaluate(input);
        const output = outputs[input.length - 1];
        const best = topOf(output, k);
        generated.push(best[0][0]);
        top.push(best);
        input = [scoreRequest(best[0][0], undefined, k)];
      }
      return { text, prompt, generated, top };
    }));
  }
  console.log(JSON.stringify(runs));
} else if (command === "perplexity") {
  // As llama-perplexity (and smol-perplexity): chunks of CTX tokens, each from an empty
  // cache, the second half of each scored.
  const tokens = model.tokenize(readFileSync(rest[0], "utf8"), false);
  const ctx = Number(rest[1]);
  const chunks = Math.floor(tokens.length / ctx);
  const first = ctx / 2;
  let nll = 0;
  let count = 0;
  for (let c = 0; c < chunks; ++c) {
    const window = tokens.slice(c * ctx, (c + 1) * ctx);
    await withSequence(ctx, async (sequence) => {
      const input = window.map((token, i) =>
        i >= first && i + 1 < ctx ? scoreRequest(token, window[i + 1], 0) : token);
      const outputs = await sequence.controlledEvaluate(input);
      for (let i = first; i + 1 < ctx; ++i) {
        const next = outputs[i].next;
        const max = Math.max(...next.logits.values());
        const logit = next.logits.get(window[i + 1]);
        nll -= logit - max - Math.log(next.totalLogitWeight);
        ++count;
      }
    });
  }
  console.log(JSON.stringify({ tokens: tokens.length, chunks, scored: count, ppl: Math.exp(nll / count) }));
} else {
  console.error("usage: llamacpp_oracle.mjs tokenize|greedy|perplexity MODEL ...");
  process.exit(2);
}
await model.dispose();
