// llama-batched-bench's test: B sequences at once, each with a prompt of PP tokens,
// then TG tokens generated for each, one step per token for all B together
// (BatchTransformer: one pass over the weights per step for every sequence). Reports,
// per (PP, TG, B), prefill, decode and total tokens/s over all sequences in
// llama-batched-bench's table shape, and how a decode step's time splits into the
// weights (matrix products), attention and sampling.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "smol/generate/sampler.hpp"
#include "smol/model/batch_transformer.hpp"
#include "test_runner.hpp"

namespace smol::bench {

struct ParallelResult {
  std::size_t pp = 0, tg = 0, b = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  // Of decode_seconds: attention, and sampling (top-k/p sampling of each row).
  double decode_attention_seconds = 0, decode_sampling_seconds = 0;

  std::size_t n_kv() const { return b * (pp + tg); }
  double prefill_tps() const { return prefill_seconds > 0 ? double(b * pp) / prefill_seconds : 0; }
  double decode_tps() const { return decode_seconds > 0 ? double(b * tg) / decode_seconds : 0; }
  double total_seconds() const { return prefill_seconds + decode_seconds; }
  double total_tps() const { return double(n_kv()) / total_seconds(); }
};

inline ParallelResult run_parallel(const Model& model, Context& context, RandomTokens& tokens,
                                   std::size_t pp, std::size_t tg, std::size_t b, KvTypes kv_type) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  BatchTransformer engine(
      model, context,
      {.total_positions = b * (pp + tg + kKvPagePositions), .kv_type = kv_type, .max_batch = 512});
  std::vector<SequenceId> sequences;
  std::vector<Sampler> samplers;
  for (std::size_t s = 0; s < b; ++s) {
    sequences.push_back(engine.pool().add());
    SamplerSettings settings;  // llama.cpp's default chain: top-k 40, top-p 0.95, ...
    settings.seed = 1 + s;
    samplers.emplace_back(settings);
  }
  const std::size_t vocab = model.config().n_vocab;
  ParallelResult result{.pp = pp, .tg = tg, .b = b};

  // Warm-up: one token through every sequence touches every weight and scratch page.
  std::vector<BatchEntry> batch;
  for (std::size_t s = 0; s < b; ++s) {
    batch.push_back({.sequence = sequences[s], .token = tokens.draw(1)[0], .position = 0});
  }
  engine.forward(batch);

  // Every prompt in one batch, as llama-batched-bench submits them.
  batch.clear();
  for (std::size_t s = 0; s < b; ++s) {
    const std::vector<std::int32_t> prompt = tokens.draw(pp);
    for (std::size_t i = 0; i < pp; ++i) {
      batch.push_back(
          {.sequence = sequences[s], .token = prompt[i], .position = i, .logits = i + 1 == pp});
    }
  }
  auto started = Clock::now();
  std::span<const float> logits = engine.forward(batch);
  result.prefill_seconds = seconds(started);

  // Then TG steps of one sampled token per sequence.
  const double attention_before = engine.attention_seconds();
  started = Clock::now();
  std::vector<std::int32_t> next(b);
  for (std::size_t step = 0; step < tg; ++step) {
    const auto sampling_started = Clock::now();
    for (std::size_t s = 0; s < b; ++s) {
      next[s] = samplers[s].sample(logits.subspan(s * vocab, vocab));
      samplers[s].accept(next[s]);
    }
    result.decode_sampling_seconds += seconds(sampling_started);
    batch.clear();
    for (std::size_t s = 0; s < b; ++s) {
      batch.push_back(
          {.sequence = sequences[s], .token = next[s], .position = pp + step, .logits = true});
    }
    logits = engine.forward(batch);
  }
  result.decode_seconds = seconds(started);
  result.decode_attention_seconds = engine.attention_seconds() - attention_before;
  return result;
}

// llama-batched-bench's table, with the decode step's split beside it.
inline void print_parallel_table(const std::vector<ParallelResult>& results, std::FILE* out) {
  std::fprintf(out,
               "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |"
               "      T s |    S t/s | TG step: weights / attention / sampling |\n"
               "|-------|--------|------|--------|----------|----------|----------|----------|"
               "----------|----------|------------------------------------------|\n");
  for (const ParallelResult& r : results) {
    const double step = r.tg > 0 ? r.decode_seconds / double(r.tg) : 0;
    const double attention = r.tg > 0 ? r.decode_attention_seconds / double(r.tg) : 0;
    const double sampling = r.tg > 0 ? r.decode_sampling_seconds / double(r.tg) : 0;
    std::fprintf(out,
                 "| %5zu | %6zu | %4zu | %6zu | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |"
                 " %6.1f / %5.1f / %4.1f ms              |\n",
                 r.pp, r.tg, r.b, r.n_kv(), r.prefill_seconds, r.prefill_tps(), r.decode_seconds,
                 r.decode_tps(), r.total_seconds(), r.total_tps(),
                 1e3 * (step - attention - sampling), 1e3 * attention, 1e3 * sampling);
  }
}

}  // namespace smol::bench
