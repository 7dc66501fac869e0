// llama.cpp itself, as the oracle of the real-model tests: node-llama-cpp's prebuilt
// CPU build of llama.cpp runs the same GGUF file smol runs, and this script prints
// what it computes as JSON, for real_model_check.py to compare with smol's answers.
//
//   node llamacpp_oracle.mjs tokenize   MODEL CORPUS.json        ids of each text
//   node llamacpp_oracle.mjs greedy     MODEL PROMPTS.json N [K] N greedy tokens per prompt,
//                                                                the top K logits (5) of each
//   node llamacpp_oracle.mjs score      MODEL RUNS.json          greedy's tokens fed back: the
//                                                                logits of greedy's ids per step
//   node llamacpp_oracle.mjs perplexity MODEL TEXT CTX           llama-perplexity's protocol
//   node llamacpp_oracle.mjs embed      MODEL TEXTS.json         each text's embedding, pooled
//                                                                as the file says, unnormalized
//                                                                (pooling none: the last token's)
//   node llamacpp_oracle.mjs rank       MODEL INPUTS.json        a reranker's score of each
//                                                                token list (pair) as given
//
// RUNS.json is greedy's output; `score --flash on` after `greedy --flash off` runs the
// same tokens through llama.cpp's other attention path, a second valid way to compute
// the model, and so measures how far llama.cpp moves from itself (real_model_check.py
// holds smol to that).
// CORPUS.json and PROMPTS.json are lists of strings. Prompts are tokenized with
// special tokens parsed (a chat prompt's <|im_start|> is one token), corpus texts
// without, as smol-tokenize does by default; tokenize adds no bos, so a prompt for a
// model that wants one spells it (gemma3_prompts.json: "<bos>..."), and perplexity adds
// it as llama-perplexity does. One thread and mmap off keep the runs repeatable.
//
// --exact (anywhere on the line): an F32 K/V cache and no flash attention instead of
// llama.cpp's defaults (F16 cache, flash attention where it pays), whose f16 rounding
// of Q, K and V moves logits by about 3e-3: with an F32 file, what is left is the
// order of float sums, the yardstick of smol's --f32-activations --kv-type f32.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

// --flash on|off (anywhere on the line): llama.cpp's flash attention, instead of
// node-llama-cpp's default.
const argv = process.argv.slice(2);
const flashAt = argv.indexOf("--flash");
const flash = flashAt >= 0 ? { flashAttention: argv.splice(flashAt, 2)[1] === "on" } : {};
const exact = argv.includes("--exact");
const [command, modelPath, ...rest] = argv.filter((arg) => arg !== "--exact");
const exactCache = exact
  ? { flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" }
  : flash;
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: 1 });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });

// After `token` is fed: the top max(k, 1) raw logits, the logit of `next`, and the sum
// of exp(logit - max) over the vocabulary, so that log p(next) = logit - max - log sum.
// (includeTop, not includeMax: node-llama-cpp 3.22.1 adds the maximum only when the
// filter already holds it.)
function scoreRequest(token, next, k) {
  return [token, { generateNext: {
    logits: { filter: { tokens: next === undefined ? [] : [next], includeTop: Math.max(k, 1) } },
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
} else if (command === "score") {
  const runs = JSON.parse(readFileSync(rest[0], "utf8"));
  const scored = [];
  for (const run of runs) {
    scored.push(await withSequence(1024, async (sequence) => {
      const tokens = [...run.prompt, ...run.generated];
      const first = run.prompt.length - 1;
      const input = tokens.slice(0, -1).map((token, i) => i < first ? token : [token, { generateNext: {
        logits: { filter: { tokens: run.top[i - first].map(([id]) => id) } } } }]);
      const outputs = await sequence.controlledEvaluate(input);
      return run.top.map((top, step) => top.map(([id]) => [id, outputs[first + step].next.logits.get(id)]));
    }));
  }
  console.log(JSON.stringify(scored));
} else if (command === "embed" || command === "rank") {
  // An embedding context (rank: a ranking context, llama.cpp's rank pooling) on each
  // input, as node-llama-cpp's getEmbeddingFor runs one, with --exact's cache if asked:
  // embed's texts tokenized without special tokens, bos (WordPiece: [CLS]) and eos
  // (WordPiece: [SEP]) added as the vocabulary says; rank's token lists as they are, its
  // texts tokenized with their special tokens.
  // The vectors unnormalized (pooling none: the last token's); rank's raw scores.
  const ranking = command === "rank";
  const inputs = JSON.parse(readFileSync(rest[0], "utf8"));
  const context = await model.createContext({
    contextSize: 1024, batchSize: 1024, threads: 1, _embeddings: true,
    ...(ranking ? { _ranking: true } : {}), ...exactCache,
  });
  const sequence = context.getSequence();
  const wordpiece = model.vocabularyType === "wpm";
  const first = wordpiece || model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  const last = wordpiece ? model.tokens.sep : (model.tokens.shouldAppendEosToken ? model.tokens.eos : null);
  const out = [];
  for (const input of inputs) {
    // rank: a token list, or a prompt text tokenized with its special tokens and nothing
    // added (llama-server's tokenize_input_subprompt of a rerank template's prompt).
    const tokens = ranking ? (typeof input === "string" ? model.tokenize(input, true) : input) : [
      ...(first === null ? [] : [first]), ...model.tokenize(input, false), ...(last === null ? [] : [last])];
    await sequence.eraseContextTokenRanges([{ start: 0, end: sequence.nextTokenIndex }]);
    for await (const _ of sequence.evaluate(tokens, { _noSampling: true })) break;
    const values = [...context._ctx.getEmbedding(tokens.length, ranking ? 1 : 0)];
    out.push(ranking ? values[0] : values);
  }
  await context.dispose();
  console.log(JSON.stringify(out));
} else if (command === "perplexity") {
  // As llama-perplexity (and smol-perplexity): chunks of CTX tokens, each from an empty
  // cache, the second half of each scored. A model that adds bos (Gemma) gets it before
  // the text, and as the first token of every chunk, as llama-perplexity gives it.
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  const text = model.tokenize(readFileSync(rest[0], "utf8"), false);
  const tokens = bos === null ? text : [bos, ...text];
  const ctx = Number(rest[1]);
  const chunks = Math.floor(tokens.length / ctx);
  const first = ctx / 2;
  let nll = 0;
  let count = 0;
  for (let c = 0; c < chunks; ++c) {
    const window = tokens.slice(c * ctx, (c + 1) * ctx);
    if (bos !== null) window[0] = bos;
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
