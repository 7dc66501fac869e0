// smol::Chat: a model file in, streamed replies out, in a few lines.
//
//   smol::Chat chat("SmolLM3-3B-Q4_K_M.gguf");
//   chat.ask("Hi!", [](std::string_view piece) { std::cout << piece << std::flush; });
//
// It owns what a chat needs and wires it as smol-chat does by default: the model mapped
// with the interleaved weight copies where the kernels prefer them, a thread per core,
// the file's own chat template run by the Jinja engine, SmolLM3's recommended
// temperature, and the oldest turns dropped when the context fills. Everything it
// builds on stays public: session() is the ChatSession beneath, for stop strings,
// grammars, cancellation or speculation.
#pragma once

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "smol/generate/chat_session.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/warning.hpp"

namespace smol {

class Chat {
 public:
  struct Options {
    int threads = 0;          // 0: one per core
    std::size_t context = 0;  // positions the conversation may hold; 0: the file's own length
    Repack repack = Repack::when_faster;
    SamplerSettings sampling = SamplerSettings::smollm3();
    std::string system_prompt = {};  // empty: the template's default, if it has one
    bool thinking = true;            // the reasoning mode of templates that have one
    WhenContextFull when_full = WhenContextFull::drop_oldest_turns;
    std::size_t max_tokens = 0;  // per reply; 0: until the model ends its turn
    // Told when the file's template is not used as it is (none in the file: its family's
    // or ChatML). Unset: written to stderr, since a guessed prompt changes every answer.
    std::function<void(std::string_view)> on_warning = {};
  };

  using TextCallback = std::function<void(std::string_view)>;

  explicit Chat(const std::filesystem::path& model_file) : Chat(model_file, Options()) {}

  Chat(const std::filesystem::path& model_file, Options options)
      : options_(std::move(options)),
        model_(Model::open(model_file.string(), {.repack = options_.repack})),
        tokenizer_(load_vocabulary(model_.file(), warning_handler())),
        context_(options_.threads),
        transformer_(model_, context_, {.context = options_.context}),
        source_(transformer_),
        session_(source_, tokenizer_, file_template(), settings()) {
    if (!options_.system_prompt.empty()) session_.set_system_prompt(options_.system_prompt);
  }

  // The members point at each other (the session at the source, the source at the
  // transformer): a Chat stays where it was built.
  Chat(const Chat&) = delete;
  Chat& operator=(const Chat&) = delete;

  // Adds `message` as the user's turn and replies to it, streaming the answer's text to
  // `on_answer` and the reasoning's to `on_thinking` as they are decoded (each piece
  // whole UTF-8). The returned Reply holds both, why it stopped and its speed.
  Reply ask(std::string message, TextCallback on_answer = {}, TextCallback on_thinking = {}) {
    ReplyOptions reply{.max_tokens = options_.max_tokens};
    reply.on_piece = [&](const TextPiece& piece) {
      const TextCallback& to = piece.kind == PieceKind::answer ? on_answer : on_thinking;
      if (to) to(piece.text);
    };
    return session_.ask(std::move(message), reply);
  }

  // Forgets the conversation but its system prompt.
  void reset() { session_.reset(); }

  ChatSession& session() { return session_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Model& model() const { return model_; }

 private:
  WarningHandler warning_handler() const {
    return [this](std::string_view text) {
      if (options_.on_warning) {
        options_.on_warning(text);
      } else {
        std::fprintf(stderr, "smol: %.*s\n", static_cast<int>(text.size()), text.data());
      }
    };
  }

  ChatTemplate file_template() const {
    return file_chat_template(model_.file(), tokenizer_.vocabulary(), warning_handler());
  }

  ChatSettings settings() const {
    return {.sampling = options_.sampling,
            .thinking = options_.thinking,
            .when_full = options_.when_full};
  }

  Options options_;
  Model model_;
  Tokenizer tokenizer_;
  Context context_;
  Transformer transformer_;
  TransformerSource source_;
  ChatSession session_;
};

}  // namespace smol
