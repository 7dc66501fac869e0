// Token ids for tests that need many of them: a fixed linear congruential sequence,
// so every run and every ISA sees the same prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smol::test {

inline std::vector<std::int32_t> some_tokens(std::size_t n, std::size_t vocab, unsigned seed) {
  std::vector<std::int32_t> tokens(n);
  std::uint32_t state = seed;
  for (auto& token : tokens) {
    state = state * 1664525u + 1013904223u;
    token = static_cast<std::int32_t>((state >> 8) % vocab);
  }
  return tokens;
}

}  // namespace smol::test
