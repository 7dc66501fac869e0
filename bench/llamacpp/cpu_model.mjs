// What baseline.mjs and batched.mjs share: llama.cpp's CPU build loaded the way the
// project times it, and the same random token ids on every run.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

// The model on the CPU with `threads` threads and mmap off, as llama-bench -mmp 0: on
// this VM decode from the map runs at a fifth of the speed, and a ratio against that
// would flatter smol. Returns the model and randomTokens(n), n ids from a small linear
// congruential generator seeded with `seed`.
export async function loadCpuModel(path, threads, seed) {
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.warn, maxThreads: threads });
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false });
  const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 32000;
  let state = BigInt(seed);
  const nextId = () => {
    state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    return Number((state >> 33n) % BigInt(vocab));
  };
  return { model, randomTokens: (n) => Array.from({ length: n }, nextId) };
}
