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
  // Not evaluated because the reply was cancelled during the prompt (0 otherwise).
  std::size_t prompt_tokens_left = 0;
  double prefill_seconds = 0;
  std::size_t generated_tokens = 0;
  // From the first generated token to the last one: generated_tokens - 1 steps.
  double decode_seconds = 0;
  double time_to_first_token = 0;  // seconds from the request to the first sampled token
  // Speculative decoding (speculative_decoder.hpp): guesses verified, guesses the model
  // kept, and the passes that verified them. All 0 without a drafter.
  std::size_t drafted_tokens = 0;
  std::size_t accepted_draft_tokens = 0;
  std::size_t verify_passes = 0;

  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
  }
  // The share of guesses kept (0 when nothing was drafted).
  double acceptance_rate() const {
    return drafted_tokens > 0
               ? static_cast<double>(accepted_draft_tokens) / static_cast<double>(drafted_tokens)
               : 0.0;
  }
  // Guesses kept per verification pass (each pass also yields one token of its own).
  double mean_accepted_length() const {
    return verify_passes > 0
               ? static_cast<double>(accepted_draft_tokens) / static_cast<double>(verify_passes)
               : 0.0;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1
               ? static_cast<double>(generated_tokens - 1) / decode_seconds
               : 0.0;
  }
};

// One line, e.g. "prompt 42 tokens (12 reused) 310.5 tok/s | reply 64 tokens 21.3 tok/s |
// first token 0.14 s" (with speculative decoding, "| drafted 120, accepted 84 (70.0 %)"
// after it), or for a reply cancelled during its prompt "prompt 512 tokens
// (0 reused) 150.2 tok/s, cancelled with 90 left | no reply". Only what was measured
// is shown: a reply that never started has no speed and no first token.
inline std::string format_stats(const GenerationStats& stats) {
  char prompt[160];
  std::snprintf(prompt, sizeof prompt, "prompt %zu tokens (%zu reused) %.1f tok/s",
                stats.prompt_tokens, stats.reused_tokens, stats.prefill_tokens_per_second());
  std::string line = prompt;
  if (stats.prompt_tokens_left > 0) {
    line += ", cancelled with " + std::to_string(stats.prompt_tokens_left) + " left";
  }
  if (stats.generated_tokens == 0) return line + " | no reply";
  char reply[160];
  if (stats.generated_tokens == 1) {
    std::snprintf(reply, sizeof reply, " | reply 1 token | first token %.2f s",
                  stats.time_to_first_token);
  } else {
    std::snprintf(reply, sizeof reply, " | reply %zu tokens %.1f tok/s | first token %.2f s",
                  stats.generated_tokens, stats.decode_tokens_per_second(),
                  stats.time_to_first_token);
  }
  line += reply;
  if (stats.drafted_tokens > 0) {
    char drafts[160];
    std::snprintf(drafts, sizeof drafts, " | drafted %zu, accepted %zu (%.1f %%)",
                  stats.drafted_tokens, stats.accepted_draft_tokens,
                  100.0 * stats.acceptance_rate());
    line += drafts;
  }
  return line;
}

}  // namespace smol
