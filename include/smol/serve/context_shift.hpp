// Conversations that outgrow the context (smol-server's --context-shift, llama-server's
// flag): a chat whose prompt leaves the reply too little room loses its oldest turns
// first, the system prompt and the latest user turn kept, instead of being refused.
//
// Whole turns go, not tokens: a turn is a user message and everything after it up to the
// next user message (the assistant's reply, its tool calls and their results), so what
// is left is still a conversation every template renders (it starts at a user message,
// and no tool result loses the call it answers), and the prompt is the template's own
// rendering of it. llama-server drops tokens from the middle of its cache instead, which
// keeps more text but may cut a message, a tool call or a template's markers in half.
//
// How much room the reply needs: its max_tokens when the request gives one (at most half
// the context), else a quarter of the context. The fewest turns that make the prompt fit
// are found by bisection, each try the whole conversation encoded: O(log turns) encodes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/template/chat_template.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol::serve {

// What a shift dropped (nothing: the prompt fitted).
struct ContextShift {
  std::size_t dropped_messages = 0;
  std::size_t dropped_tokens = 0;  // the prompt's tokens before, less after
  bool shifted() const { return dropped_messages > 0; }
};

inline nlohmann::json context_shift_json(const ContextShift& shift) {
  return {{"dropped_messages", shift.dropped_messages}, {"dropped_tokens", shift.dropped_tokens}};
}

// The prompt's budget in a context of `context` tokens, the reply's room set aside.
inline std::size_t prompt_budget(std::size_t context, std::optional<std::size_t> max_tokens) {
  const std::size_t room = max_tokens ? std::min(*max_tokens, context / 2) : context / 4;
  return context - std::max<std::size_t>(room, 1);
}

// Where each droppable turn ends: dropping turns 0..k removes the messages from the first
// that is not a system message up to ends[k]. The last user message's turn is never
// among them.
inline std::vector<std::size_t> droppable_turn_ends(const std::vector<ChatMessage>& messages) {
  std::size_t first = 0;
  while (first < messages.size() && messages[first].role == "system") ++first;
  std::vector<std::size_t> ends;
  for (std::size_t i = first + 1; i < messages.size(); ++i) {
    if (messages[i].role == "user") ends.push_back(i);
  }
  return ends;
}

// The prompt of `messages` (encoded by `encode`, a function of a message list), after
// dropping the fewest oldest turns that bring it within `budget` tokens; `messages` is
// left as the prompt renders it. When even the latest turn alone is over the budget,
// every droppable turn is dropped and the caller refuses what is left as before.
template <class Encode>
std::vector<TokenId> shift_context(std::vector<ChatMessage>& messages, std::size_t budget,
                                   Encode encode, ContextShift& shift) {
  std::vector<TokenId> whole = encode(messages);
  const std::vector<std::size_t> ends = droppable_turn_ends(messages);
  if (whole.size() <= budget || ends.empty()) return whole;
  std::size_t first = 0;
  while (messages[first].role == "system") ++first;
  const auto without = [&](std::size_t turns) {
    std::vector<ChatMessage> kept(messages.begin(), messages.begin() + first);
    kept.insert(kept.end(), messages.begin() + ends[turns - 1], messages.end());
    return kept;
  };
  // The fewest turns dropped (1..ends.size()) whose prompt fits; the most when none does.
  std::size_t low = 1, high = ends.size();
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    if (encode(without(mid)).size() <= budget) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  std::vector<ChatMessage> kept = without(low);
  std::vector<TokenId> best = encode(kept);
  shift.dropped_messages = messages.size() - kept.size();
  shift.dropped_tokens = whole.size() > best.size() ? whole.size() - best.size() : 0;
  messages = std::move(kept);
  return best;
}

}  // namespace smol::serve
