// Fitting a conversation into the context: what is dropped, and what is kept, when
// the conversation outgrows the positions the model's session holds.
//
// Either the caller decides (an error, e.g. smol-chat's "/reset or -c"), or the
// oldest exchanges go, one at a time, until the prompt fits with room for a reply.
// The system prompt and the newest message are always kept: without them there is
// nothing sensible to answer.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/conversation.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

// The conversation no longer fits the session's context.
class ContextFullError : public Error {
 public:
  using Error::Error;
};

enum class WhenContextFull {
  fail,               // throw ContextFullError; the caller decides (e.g. /reset)
  drop_oldest_turns,  // forget the oldest exchanges, keep the system prompt, re-prefill
};

struct FittedPrompt {
  std::vector<TokenId> tokens;
  std::size_t dropped_messages = 0;  // forgotten to make room (drop_oldest_turns)
};

// Positions to keep free for the reply. Failing, one is enough (the reply stops when
// the context is full); when turns may be dropped, a reply deserves more than one
// token: its budget, or a quarter of the context, whichever is smaller.
inline std::size_t reply_room(WhenContextFull when_full, std::size_t context,
                              std::size_t max_tokens) {
  if (when_full == WhenContextFull::fail) return 1;
  const std::size_t quarter = std::max<std::size_t>(context / 4, 1);
  return std::clamp<std::size_t>(max_tokens != 0 ? max_tokens : context / 4, 1, quarter);
}

// The prompt for the next reply: `tokenize()` gives the conversation's prompt as it is
// now, and is asked again after each exchange dropped. Throws ContextFullError when
// the conversation cannot fit (dropping was not allowed, or the newest message alone
// is too long); what was dropped by then stays dropped.
template <std::invocable Tokenize>
FittedPrompt fit_to_context(Conversation& conversation, std::size_t context,
                            WhenContextFull when_full, std::size_t max_tokens,
                            const Tokenize& tokenize) {
  const std::size_t room = reply_room(when_full, context, max_tokens);
  FittedPrompt fitted{tokenize(), 0};
  if (fitted.tokens.size() + room <= context) return fitted;
  if (when_full == WhenContextFull::fail) {
    throw ContextFullError(cat("the conversation needs ", fitted.tokens.size(),
                               " tokens but the context holds ", context,
                               "; start over (/reset) or use a larger context (-c)"));
  }
  while (fitted.tokens.size() + room > context) {
    const std::size_t dropped = conversation.drop_oldest_turn();
    if (dropped == 0) break;
    fitted.dropped_messages += dropped;
    fitted.tokens = tokenize();
  }
  if (fitted.tokens.size() >= context) {
    throw ContextFullError(cat("the last message alone needs ", fitted.tokens.size(),
                               " tokens but the context holds ", context));
  }
  return fitted;
}

}  // namespace smol
