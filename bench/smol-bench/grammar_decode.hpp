// smol-bench --json-schema FILE / --grammar-file FILE: what constrained decoding costs.
//
// For each thread count and decode length n, greedy decode runs of n tokens alternate:
// one plain (argmax of the logits), one under the grammar, their order swapped every
// other repetition. Under the grammar each step does what TokenConstraints does for
// smol-chat's --json-schema: the matcher's allowed tokens, the logits copied with the
// others at -inf, then argmax and the matcher moved past the token. Both runs of a pair
// start from the same random token on an empty cache, so their difference is the
// grammar's work.
//
// "Mask build" times, with steady_clock, only GrammarMatcher::allowed_tokens() and
// GrammarMatcher::accept() of each token: producing the allowed set and advancing the
// matcher. The copy of the logits and the -inf writes are timed apart ("apply"). The
// warm-up run is the first to meet each grammar state, so its masks are computed rather
// than found in the TokenMaskTable's cache; it is reported apart as "cold".
//
// A grammar that ends (the JSON is complete and the model chose to end, or only ending
// is left) does not end the run: a new matcher starts from the grammar's beginning and
// the restart is counted. The end-of-generation token it chose is fed to the model as
// any other token.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "smol/grammar/grammar_matcher.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "test_runner.hpp"

namespace smol::bench {

struct GrammarDecodeResult {
  int threads = 0;
  std::size_t generated_tokens = 0;
  std::vector<double> plain_seconds;    // one per repetition
  std::vector<double> grammar_seconds;  // the grammar run right after each plain one
  std::vector<double> mask_us;          // allowed_tokens() + accept(), per timed token
  std::vector<double> apply_us;         // copy of the logits + -inf writes, per timed token
  std::vector<double> cold_mask_us;     // the same in the warm-up run
  std::size_t restarts = 0;             // grammars completed (timed runs)
  std::size_t refusals = 0;             // tokens the matcher refused (should stay 0)

  // Each repetition's grammar t/s over its plain t/s.
  std::vector<double> ratios() const {
    std::vector<double> out;
    for (std::size_t i = 0; i < plain_seconds.size() && i < grammar_seconds.size(); ++i) {
      out.push_back(plain_seconds[i] / grammar_seconds[i]);
    }
    return out;
  }
};

// The q-quantile (0..1) of `values`, nearest rank; 0 when empty.
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

inline double median_of(std::vector<double> values) {
  return quantile(std::move(values), 0.5);
}

class GrammarDecoder {
 public:
  GrammarDecoder(const Model& model, std::shared_ptr<const Grammar> grammar)
      : tokenizer_(load_vocabulary(model.file())),
        table_(std::make_shared<TokenMaskTable>(std::move(grammar),
                                                std::make_shared<const TokenTrie>(tokenizer_))) {}

  std::size_t vocabulary_size() const { return tokenizer_.size(); }

  GrammarDecodeResult run(const Model& model, Context& context, RandomTokens& tokens, std::size_t n,
                          std::size_t repetitions, KvTypes kv_type, bool progress) {
    GrammarDecodeResult result;
    result.threads = context.threads();
    result.generated_tokens = n;
    TransformerOptions options;
    options.context = n + 1;
    options.kv_type = kv_type;
    Transformer transformer(model, context, options);
    if (progress) {
      std::fprintf(stderr, "smol-bench: tg%zu with and without the grammar, %d threads\n", n,
                   result.threads);
    }
    // Warm-up: one plain run, one grammar run whose masks are mostly computed anew.
    {
      const std::int32_t first = tokens.draw(1)[0];
      decode(transformer, first, n, nullptr);
      Timings cold;
      decode(transformer, first, n, &cold);
      result.cold_mask_us = std::move(cold.mask_us);
    }
    for (std::size_t r = 0; r < repetitions; ++r) {
      // Plain first on even repetitions, the grammar first on odd ones, so that an order
      // effect (the second run of a pair finding warmer caches) does not bias the ratio.
      const std::int32_t first = tokens.draw(1)[0];
      Timings timings;
      if (r % 2 == 0) {
        result.plain_seconds.push_back(decode(transformer, first, n, nullptr));
        result.grammar_seconds.push_back(decode(transformer, first, n, &timings));
      } else {
        result.grammar_seconds.push_back(decode(transformer, first, n, &timings));
        result.plain_seconds.push_back(decode(transformer, first, n, nullptr));
      }
      result.mask_us.insert(result.mask_us.end(), timings.mask_us.begin(), timings.mask_us.end());
      result.apply_us.insert(result.apply_us.end(), timings.apply_us.begin(),
                             timings.apply_us.end());
      result.restarts += timings.restarts;
      result.refusals += timings.refusals;
    }
    return result;
  }

 private:
  struct Timings {
    std::vector<double> mask_us;
    std::vector<double> apply_us;
    std::size_t restarts = 0;
    std::size_t refusals = 0;
  };

  using Clock = std::chrono::steady_clock;
  static double microseconds(Clock::time_point start, Clock::time_point end) {
    return std::chrono::duration<double, std::micro>(end - start).count();
  }

  static std::int32_t argmax(std::span<const float> logits) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
  }

  // n greedy tokens after `first`, under the grammar when `timings` is given; seconds.
  double decode(Transformer& transformer, std::int32_t first, std::size_t n, Timings* timings) {
    std::unique_ptr<GrammarMatcher> matcher;
    if (timings) matcher = std::make_unique<GrammarMatcher>(table_);
    std::int32_t token = first;
    const Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      const std::span<const float> logits =
          transformer.forward(std::span(&token, 1), i, LogitsFor::last);
      if (!timings) {
        token = argmax(logits);
        continue;
      }
      const Clock::time_point t0 = Clock::now();
      const std::shared_ptr<const TokenSet> allowed = matcher->allowed_tokens();
      const Clock::time_point t1 = Clock::now();
      scratch_.assign(logits.begin(), logits.end());
      allowed->apply(scratch_);
      const Clock::time_point t2 = Clock::now();
      token = argmax(scratch_);
      const Clock::time_point t3 = Clock::now();
      const bool accepted = matcher->accept(token);
      const Clock::time_point t4 = Clock::now();
      timings->mask_us.push_back(microseconds(t0, t1) + microseconds(t3, t4));
      timings->apply_us.push_back(microseconds(t1, t2));
      if (!accepted) ++timings->refusals;
      if (!accepted || matcher->ended()) {
        // The JSON is complete (or, never expected, refused): begin the next one.
        if (accepted) ++timings->restarts;
        matcher = std::make_unique<GrammarMatcher>(table_);
      }
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  Tokenizer tokenizer_;
  std::shared_ptr<TokenMaskTable> table_;
  std::vector<float> scratch_;
};

}  // namespace smol::bench
