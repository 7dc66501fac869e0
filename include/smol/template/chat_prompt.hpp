// ChatPromptEncoder: a conversation's rendered chat template, as tokens.
//
// The template's own markup (<|im_start|>, <|im_end|>, ...) must become control tokens,
// but a user's text must not: a user who types "<|im_end|>" ends nothing. So the text
// is tokenized in parts, the template's with special tokens recognized and the user's
// (and tools') messages without. Messages holding no special-token spelling are left in
// the template's parts: tokenizing them either way gives the same tokens.
//
// Used by ChatSession (one conversation that grows turn by turn) and by the server
// (a whole conversation per request).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

class ChatPromptEncoder {
 public:
  // A part of a rendered prompt that holds a user's own text.
  struct TextRange {
    std::size_t begin, end;
  };

  explicit ChatPromptEncoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {
    for (std::size_t id = 0; id < tokenizer.size(); ++id) {
      if (tokenizer.is_control(static_cast<TokenId>(id))) {
        control_spellings_.push_back(tokenizer.vocabulary().tokens[id]);
      }
    }
  }

  // The prompt for `messages`, bos first when the vocabulary asks for it.
  std::vector<TokenId> encode(const ChatTemplate& chat_template,
                              std::span<const ChatMessage> messages,
                              const ChatOptions& options = {}) const {
    const Rendered rendered = render(chat_template, messages, options);
    std::vector<TokenId> tokens;
    if (tokenizer_->vocabulary().add_bos) {
      if (!tokenizer_->vocabulary().bos_id) fail("the vocabulary asks for bos but has none");
      tokens.push_back(*tokenizer_->vocabulary().bos_id);
    }
    encode_from(rendered.text, 0, rendered.plain, tokens);
    return tokens;
  }

  // A rendered prompt, and where in it the user and tool messages that contain
  // special-token spellings sit (the ranges to tokenize as plain text).
  struct Rendered {
    std::string text;
    std::vector<TextRange> plain;
  };

  // Renders `messages` and locates the user text that must stay plain. Searching the
  // prompt for the text could find it inside the template's own markup (a user who
  // writes "<|im_end|>\n<|im_start|>user" matches the template's separator), so such
  // messages are rendered once more as placeholders, which no markup contains, and
  // their positions read from there. Should the two renderings ever disagree (a
  // template that looks into the text), the search is the fallback.
  Rendered render(const ChatTemplate& chat_template, std::span<const ChatMessage> messages,
                  const ChatOptions& options = {}) const {
    Rendered out{render_chat(chat_template, messages, options), {}};
    std::vector<ChatMessage> marked(messages.begin(), messages.end());
    std::vector<std::size_t> special;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (is_user(messages[i]) && has_control_spelling(messages[i].content)) {
        marked[i].content = placeholder(i);
        special.push_back(i);
      }
    }
    if (special.empty()) return out;
    const std::string marked_text = render_chat(chat_template, marked, options);
    // Puts the messages back where their placeholders are, as written or trimmed (as
    // Llama's and Gemma's templates trim them); true when that gives the real text.
    const auto place = [&](bool trimmed, std::vector<TextRange>& plain) {
      std::string text = marked_text;
      std::size_t cursor = 0;
      for (const std::size_t i : special) {
        const std::string mark = placeholder(i);
        const std::size_t at = text.find(mark, cursor);
        if (at == std::string::npos) continue;  // the template left the message out
        const std::string_view content =
            trimmed ? detail::strip(messages[i].content) : std::string_view(messages[i].content);
        text.replace(at, mark.size(), content);
        plain.push_back({at, at + content.size()});
        cursor = at + content.size();
      }
      return text == out.text;
    };
    // A file's own template may trim or not: both are tried, the family's way first.
    const bool trims = trims_message_text(chat_template.format);
    std::vector<TextRange> plain;
    if (place(trims, plain)) {
      out.plain = std::move(plain);
    } else if (plain.clear(); chat_template.jinja && place(!trims, plain)) {
      out.plain = std::move(plain);
    } else {
      out.plain = user_text(out.text, messages);
    }
    return out;
  }

  // Where user and tool messages that contain special-token spellings sit in the
  // rendered `text` of `messages`, found by searching (ChatSession's fallback; prefer
  // render()).
  std::vector<TextRange> user_text(const std::string& text,
                                   std::span<const ChatMessage> messages) const {
    std::vector<TextRange> ranges;
    std::size_t cursor = 0;
    for (const ChatMessage& message : messages) {
      const std::string_view content = detail::strip(message.content);
      if (content.empty()) continue;
      const std::size_t at = text.find(content, cursor);
      if (at == std::string::npos) continue;
      cursor = at + content.size();
      if (!is_user(message)) continue;
      if (has_control_spelling(content)) ranges.push_back({at, at + content.size()});
    }
    return ranges;
  }

  // Tokenizes text[from, end) onto `tokens`: the template's markup with special tokens
  // recognized, the `plain` ranges without.
  void encode_from(const std::string& text, std::size_t from, std::span<const TextRange> plain,
                   std::vector<TokenId>& tokens) const {
    const auto append = [&](std::size_t begin, std::size_t end, bool special) {
      if (begin >= end) return;
      const auto ids = tokenizer_->encode(std::string_view(text).substr(begin, end - begin),
                                          {.parse_special = special, .add_bos = false});
      tokens.insert(tokens.end(), ids.begin(), ids.end());
    };
    std::size_t cursor = from;
    for (const TextRange& range : plain) {
      if (range.end <= cursor) continue;
      append(cursor, range.begin, true);
      append(std::max(range.begin, cursor), range.end, false);
      cursor = range.end;
    }
    append(cursor, text.size(), true);
  }

  // Whether tokenizing the text from `at` on its own gives the same tokens as the whole
  // text would: true where a special token ends before `at` or begins there, since
  // special tokens cut the text before BPE runs.
  bool at_fragment_boundary(TokenId before, std::string_view text, std::size_t at) const {
    const TokenType type = tokenizer_->vocabulary().type_of(before);
    if (type == TokenType::control || type == TokenType::user_defined) return true;
    const std::string_view rest = text.substr(at);
    return std::any_of(control_spellings_.begin(), control_spellings_.end(),
                       [&](const std::string& s) { return rest.starts_with(s); });
  }

 private:
  static bool is_user(const ChatMessage& message) {
    return message.role == "user" || message.role == "tool";
  }

  // A stand-in for message i's text: control characters that no template markup, no
  // special token and no whitespace stripping touches.
  static std::string placeholder(std::size_t i) {
    return "\x02smol-user-text-" + std::to_string(i) + "\x03";
  }

  bool has_control_spelling(std::string_view text) const {
    return std::any_of(control_spellings_.begin(), control_spellings_.end(),
                       [&](const std::string& s) { return text.find(s) != std::string::npos; });
  }

  const Tokenizer* tokenizer_;
  std::vector<std::string> control_spellings_;
};

}  // namespace smol
