// Pooling: a sequence's hidden states made into one embedding, and the norms that
// scale it. An embedding model's file says how it pools (llama.cpp's
// <arch>.pooling_type); the values and the arithmetic are llama.cpp's, so a vector here
// is the vector llama-embedding and llama-server give for the same file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"

namespace smol {

// llama.cpp's llama_pooling_type, with its numbers (the file's pooling_type key).
enum class Pooling : std::uint32_t {
  none = 0,  // every token's hidden state, as it is
  mean = 1,  // the average of the sequence's states (BGE-M3, nomic, E5, GTE)
  cls = 2,   // the first token's state (BGE: the [CLS] token)
  last = 3,  // the last token's state (Qwen3-Embedding, with the eos the tokenizer adds)
  rank = 4,  // the first token's state through the classifier head: a relevance score
};

inline std::string_view pooling_name(Pooling pooling) noexcept {
  switch (pooling) {
    case Pooling::none:
      return "none";
    case Pooling::mean:
      return "mean";
    case Pooling::cls:
      return "cls";
    case Pooling::last:
      return "last";
    case Pooling::rank:
      return "rank";
  }
  return "unknown";
}

// "mean" -> Pooling::mean; nullopt for a name llama.cpp does not have.
inline std::optional<Pooling> pooling_named(std::string_view name) noexcept {
  for (const Pooling pooling :
       {Pooling::none, Pooling::mean, Pooling::cls, Pooling::last, Pooling::rank}) {
    if (pooling_name(pooling) == name) return pooling;
  }
  return std::nullopt;
}

// The file's pooling_type number as a Pooling; an unknown one is an error naming it.
inline Pooling pooling_from_number(std::uint64_t number, std::string_view where) {
  if (number > static_cast<std::uint64_t>(Pooling::rank)) {
    fail(where, ": pooling type ", number,
         " is not one llama.cpp defines (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
  }
  return static_cast<Pooling>(number);
}

// One vector of `width` from the n_tokens rows of `states` (row-major, n_tokens x width):
// their mean, the first or the last. Pooling::none and Pooling::rank have no such vector
// (every row is kept; the rank head reads the first row), so they are an error here.
inline void pool_states(Pooling pooling, std::span<const float> states, std::size_t n_tokens,
                        std::size_t width, std::span<float> out) {
  if (n_tokens == 0 || states.size() < n_tokens * width || out.size() < width) {
    fail("pool_states: ", n_tokens, " rows of ", width, " do not fit the buffers given");
  }
  switch (pooling) {
    case Pooling::mean: {
      std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(width), 0.0f);
      for (std::size_t t = 0; t < n_tokens; ++t) {
        for (std::size_t i = 0; i < width; ++i) out[i] += states[t * width + i];
      }
      const float inverse = 1.0f / static_cast<float>(n_tokens);
      for (std::size_t i = 0; i < width; ++i) out[i] *= inverse;
      return;
    }
    case Pooling::cls:
      std::copy_n(states.begin(), width, out.begin());
      return;
    case Pooling::last:
      std::copy_n(states.begin() + static_cast<std::ptrdiff_t>((n_tokens - 1) * width), width,
                  out.begin());
      return;
    case Pooling::none:
    case Pooling::rank:
      break;
  }
  fail("pool_states: pooling ", pooling_name(pooling), " makes no single vector");
}

// llama.cpp's common_embd_normalize, in place: -1 none, 0 the largest magnitude scaled
// to 32760 (an int16 range), 2 Euclidean (unit length, the default of llama-embedding and
// llama-server), any other p the p-norm (1: taxicab). A zero vector stays zero.
inline void normalize_embedding(std::span<float> vector, int norm) {
  double sum = 0.0;
  if (norm == -1) {
    sum = 1.0;
  } else if (norm == 0) {
    for (const float v : vector) sum = std::max(sum, static_cast<double>(std::abs(v)));
    sum /= 32760.0;
  } else if (norm == 2) {
    for (const float v : vector) sum += static_cast<double>(v) * v;
    sum = std::sqrt(sum);
  } else if (norm > 0) {
    for (const float v : vector) sum += std::pow(std::abs(static_cast<double>(v)), norm);
    sum = std::pow(sum, 1.0 / norm);
  } else {
    fail("embedding normalization ", norm, " is not -1 (none), 0 (int16 range), or a p-norm p > 0");
  }
  const float scale = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (float& v : vector) v *= scale;
}

}  // namespace smol
