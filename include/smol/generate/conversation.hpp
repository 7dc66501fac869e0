// Conversation: the messages of a chat, and the turns they form.
//
// A turn (an exchange) is a user message and the replies up to the next user message.
// The system prompt, when there is one, is the first message and outlives every turn:
// reset() and drop_oldest_turn() keep it, since it says who the model is to be.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "smol/template/chat_prompt.hpp"
#include "smol/template/chat_template.hpp"

namespace smol {

class Conversation {
 public:
  // Sets the system prompt (the first message); an empty text removes it.
  void set_system_prompt(std::string text) {
    if (text.empty()) {
      if (has_system_prompt()) messages_.erase(messages_.begin());
    } else if (has_system_prompt()) {
      messages_.front().content = std::move(text);
    } else {
      messages_.insert(messages_.begin(), ChatMessage{"system", std::move(text)});
    }
  }

  void add(std::string role, std::string content) {
    messages_.push_back(ChatMessage{std::move(role), std::move(content)});
  }

  // Takes the newest message back (one that could not be answered).
  void take_back_last() { messages_.pop_back(); }

  // Forgets every message but the system prompt.
  void reset() {
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first_turn()), messages_.end());
  }

  // Drops the oldest exchange after the system prompt: a user message and the replies
  // up to the next user message. The newest message is never dropped. Returns how many
  // messages went, 0 when nothing is left that may go.
  std::size_t drop_oldest_turn() {
    const std::size_t first = first_turn();
    if (messages_.size() <= first + 1) return 0;
    std::size_t end = first + 1;
    while (end + 1 < messages_.size() && messages_[end].role != "user") ++end;
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first),
                    messages_.begin() + static_cast<std::ptrdiff_t>(end));
    return end - first;
  }

  const std::vector<ChatMessage>& messages() const noexcept { return messages_; }

  // The conversation as prompt text, ending in the generation prompt, with where the
  // user's own text sits (never to become control tokens). `raw`: no template, the
  // messages' texts simply concatenated to be continued (for base models); nothing in
  // raw text is special.
  ChatPromptEncoder::Rendered render(const ChatPromptEncoder& encoder,
                                     const ChatTemplate& chat_template, bool raw,
                                     bool thinking) const {
    if (!raw) {
      return encoder.render(chat_template, messages_,
                            {.add_generation_prompt = true, .enable_thinking = thinking});
    }
    ChatPromptEncoder::Rendered rendered;
    for (const ChatMessage& message : messages_) rendered.text += message.content;
    rendered.plain.push_back({0, rendered.text.size()});
    return rendered;
  }

 private:
  bool has_system_prompt() const {
    return !messages_.empty() && messages_.front().role == "system";
  }
  std::size_t first_turn() const { return has_system_prompt() ? 1 : 0; }

  std::vector<ChatMessage> messages_;
};

}  // namespace smol
