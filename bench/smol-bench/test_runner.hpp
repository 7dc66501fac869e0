// Runs the timed tests of one session: prefill of a prompt and decode of one token at
// a time, each starting from a KV cache that holds `depth` positions, as llama-bench's
// pp and tg tests do.
//
// The cache is filled once per depth and every run rewinds to it (forward() accepts
// n_past <= n_filled and drops what follows), so repetitions at depth 4096 do not pay
// for a 4096-token prefill each time, yet each run attends over exactly `depth` cached
// positions plus its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "smol/model/transformer.hpp"
#include "test_result.hpp"

namespace smol::bench {

// Uniformly random token ids: the weights read do not depend on the ids, but random ids
// keep the embedding rows and logits from being a degenerate repeat of one token.
class RandomTokens {
 public:
  RandomTokens(unsigned seed, std::size_t vocabulary)
      : rng_(seed), ids_(0, static_cast<std::int32_t>(vocabulary - 1)) {}

  std::vector<std::int32_t> draw(std::size_t count) {
    std::vector<std::int32_t> tokens(count);
    for (std::int32_t& token : tokens) token = ids_(rng_);
    return tokens;
  }

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<std::int32_t> ids_;
};

class TestRunner {
 public:
  // `depth0`, if given: a second session on the same model whose decode runs at depth 0
  // alternate with the decode repetitions at a depth.
  TestRunner(Transformer& transformer, RandomTokens& tokens, std::size_t repetitions, bool progress,
             Transformer* depth0 = nullptr)
      : transformer_(&transformer),
        depth0_(depth0),
        tokens_(&tokens),
        repetitions_(repetitions),
        progress_(progress) {}

  // Leaves the first `depth` positions of the cache filled; untimed.
  void fill(std::size_t depth) {
    depth_ = depth;
    if (depth == 0) return;
    if (progress_) std::fprintf(stderr, "smol-bench: filling the KV cache to %zu tokens\n", depth);
    const std::vector<std::int32_t> prompt = tokens_->draw(depth);
    transformer_->forward(prompt, 0, LogitsFor::none);
  }

  // One prompt of `n` tokens in one forward call, logits for the last position only,
  // as a chat prompt is processed.
  void prefill(std::size_t n, TestResult& result) {
    result.prompt_tokens = n;
    result.depth = depth_;
    run(result, /*warm_up_tokens=*/n, [&](std::size_t count) {
      const std::vector<std::int32_t> prompt = tokens_->draw(count);
      return timed([&] { transformer_->forward(prompt, depth_, LogitsFor::last); });
    });
  }

  // `n` forward calls of one token each, every one producing logits, as generation does.
  void decode(std::size_t n, TestResult& result) {
    result.generated_tokens = n;
    result.depth = depth_;
    const auto decode_on = [&](Transformer& session, std::size_t depth, std::size_t count) {
      const std::vector<std::int32_t> ids = tokens_->draw(count);
      return timed([&] {
        for (std::size_t i = 0; i < count; ++i) {
          session.forward(std::span(ids).subspan(i, 1), depth + i, LogitsFor::last);
        }
      });
    };
    const bool alternate = depth0_ != nullptr && depth_ > 0;
    if (alternate) decode_on(*depth0_, 0, 1);  // its warm-up
    // One token reads every weight once, which is all a decode warm-up needs.
    bool warmed_up = false;
    run(result, /*warm_up_tokens=*/1, [&](std::size_t count) {
      const double seconds = decode_on(*transformer_, depth_, count);
      if (alternate && warmed_up) result.depth0_seconds.push_back(decode_on(*depth0_, 0, count));
      warmed_up = true;
      return seconds;
    });
  }

 private:
  template <class Work>
  static double timed(const Work& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // An untimed warm-up (first touch of scratch buffers and of any weight pages not yet
  // resident), then the timed repetitions.
  void run(TestResult& result, std::size_t warm_up_tokens,
           const std::function<double(std::size_t)>& one_run) {
    if (progress_) {
      std::fprintf(stderr, "smol-bench: %s, %d threads: warm-up + %zu runs\n",
                   result.name().c_str(), result.threads, repetitions_);
    }
    one_run(warm_up_tokens);
    for (std::size_t r = 0; r < repetitions_; ++r)
      result.seconds.push_back(one_run(result.tokens()));
  }

  Transformer* transformer_;
  Transformer* depth0_;
  RandomTokens* tokens_;
  std::size_t repetitions_;
  bool progress_;
  std::size_t depth_ = 0;
};

}  // namespace smol::bench
