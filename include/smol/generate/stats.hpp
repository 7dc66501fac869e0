// Timings of one reply, in the terms llama.cpp reports: prompt processing (prefill)
// and token generation (decode) speeds, plus the latency a person feels first.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace smol {

struct GenerationStats {
  std::size_t prompt_tokens = 0;  // evaluated for this reply: the new suffix only
  std::size_t reused_tokens = 0;  // already in the KV cache from earlier turns
  double prefill_seconds = 0;
  std::size_t generated_tokens = 0;
  // From the first generated token to the last one: generated_tokens - 1 steps.
  double decode_seconds = 0;
  double time_to_first_token = 0;  // seconds from the request to the first sampled token

  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1
               ? static_cast<double>(generated_tokens - 1) / decode_seconds
               : 0.0;
  }
};

// One line, e.g. "prompt 42 tokens (12 reused) 310.5 tok/s | reply 64 tokens 21.3 tok/s |
// first token 0.14 s".
inline std::string format_stats(const GenerationStats& stats) {
  char line[256];
  std::snprintf(line, sizeof line,
                "prompt %zu tokens (%zu reused) %.1f tok/s | reply %zu tokens %.1f tok/s | "
                "first token %.2f s",
                stats.prompt_tokens, stats.reused_tokens, stats.prefill_tokens_per_second(),
                stats.generated_tokens, stats.decode_tokens_per_second(),
                stats.time_to_first_token);
  return line;
}

}  // namespace smol
