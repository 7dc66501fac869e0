// smol-chat: talk to a SmolLM3 or Llama-family GGUF model in the terminal.
//
//   smol-chat                         the default model (see default_model.hpp)
//   smol-chat -m model.gguf           a REPL with streamed replies
//   smol-chat -m model.gguf -p "Hi"   one answer, then exit
//   echo "Hi" | smol-chat -m model.gguf --temp 0
//   smol-chat -m model.gguf --gpu     on the GPU (a build with -DSMOL_CUDA=ON)
//
// Exit codes: 0 done, 1 bad input (a file that is missing, not GGUF, or not a
// supported model; a prompt that cannot fit the context; a download that failed;
// --gpu without a CUDA device), 2 bad command line (also --gpu in a build without
// CUDA), 130 stopped with Ctrl-C.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "default_model.hpp"
#include "gpu/gpu_engine.hpp"
#include "options.hpp"
#include "smol/generate/chat_session.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_file.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "speculation.hpp"
#include "terminal.hpp"
#include "text_file.hpp"

namespace smol_chat {

constexpr std::string_view kCommands =
    "  /think        reasoning on (SmolLM3)\n"
    "  /no_think     reasoning off\n"
    "  /system TEXT  set the system prompt (empty: remove it, back to the template's\n"
    "                default, if it has one); clears nothing else\n"
    "  /reset        forget the conversation (the system prompt stays)\n"
    "  /stats        speed of the last reply and context use\n"
    "  /help         this list\n"
    "  /quit         leave (also Ctrl-D, or Ctrl-C twice)\n";

// How replies reach the screen: thinking dimmed on a terminal, between <think> tags
// in a pipe, or not at all.
class ReplyPrinter {
 public:
  ReplyPrinter(bool hide_thinking, bool color) : hide_thinking_(hide_thinking), color_(color) {}

  void operator()(const smol::TextPiece& piece) {
    const bool thinking = piece.kind == smol::PieceKind::thinking;
    if (thinking && hide_thinking_) {
      // A reasoning model can think for a while: say so, then wipe the note.
      if (color_ && !placeholder_shown_) {
        std::fputs("\x1b[2m(thinking...)\x1b[0m", stdout);
        std::fflush(stdout);
        placeholder_shown_ = true;
      }
      return;
    }
    if (placeholder_shown_) {
      std::fputs("\r\x1b[K", stdout);
      placeholder_shown_ = false;
    }
    if (thinking != in_thinking_) switch_to(thinking);
    std::string_view text = piece.text;
    if (!thinking && !answer_started_) {
      // The answer follows "</think>" with a newline or two; one is enough on screen.
      while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
      if (text.empty()) return;
      answer_started_ = true;
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    wrote_ = !text.empty() ? text.back() != '\n' : wrote_;
  }

  // Closes a dimmed block and ends the line.
  void finish() {
    if (placeholder_shown_) std::fputs("\r\x1b[K", stdout);
    if (in_thinking_) switch_to(false);
    if (wrote_) std::fputc('\n', stdout);
    std::fflush(stdout);
    in_thinking_ = answer_started_ = wrote_ = placeholder_shown_ = false;
  }

 private:
  void switch_to(bool thinking) {
    if (color_) {
      std::fputs(thinking ? chat::kDim.data() : chat::kReset.data(), stdout);
    } else {
      std::fputs(thinking ? "<think>" : "</think>\n", stdout);
    }
    in_thinking_ = thinking;
  }

  bool hide_thinking_, color_;
  bool in_thinking_ = false, answer_started_ = false, wrote_ = false;
  bool placeholder_shown_ = false;
};

void print_stats_line(const smol::GenerationStats& stats, smol::StopReason stop) {
  const bool color = chat::use_color(STDERR_FILENO);
  std::string line = "[" + smol::format_stats(stats);
  if (stop != smol::StopReason::end_of_generation) line += " | " + std::string(to_string(stop));
  line += "]";
  std::fprintf(stderr, "%s%s%s\n", color ? chat::kDim.data() : "", line.c_str(),
               color ? chat::kReset.data() : "");
}

struct Chat {
  chat::Options options;
  smol::Model model;
  smol::Tokenizer tokenizer;
  smol::Context context;
  // The model runs in one of these (--gpu: the GPU one); `source` shows it to the session.
  std::unique_ptr<smol::Transformer> cpu;
  std::unique_ptr<smol::LogitsSource> source;
  smol::cli::DraftEngine draft;  // -md: the draft model's session
  smol::ChatSession session;
  std::optional<smol::GenerationStats> last_stats;
  bool prompt_cache_saved = false;
  std::shared_ptr<smol::TokenMaskTable> grammar;  // --grammar, --json-schema: every reply's

  Chat(chat::Options opts, smol::Model opened)
      : options(std::move(opts)),
        model(std::move(opened)),
        tokenizer(smol::load_vocabulary(model.file())),
        context(options.threads),
        source(start_engine()),
        draft(options.speculation, tokenizer, context, source->context_length(), options.kv_type,
              options.repack),
        session(*source, tokenizer, chat_template(), settings()) {
    if (std::unique_ptr<smol::Drafter> drafter = draft.drafter(options.speculation, tokenizer)) {
      session.enable_speculation(std::move(drafter), options.speculation.length());
    }
    if (!options.system.empty()) session.set_system_prompt(options.system);
    if (options.prompt_cache) restore_prompt_cache(*options.prompt_cache);
  }

  // Every reply from now on follows `parsed` (null: free text again). One table for the
  // whole chat: the masks it computes for one reply serve the next ones too.
  // Compiling it (its first state and mask) has the grammar's default budgets and stops
  // on Ctrl-C.
  void constrain(std::shared_ptr<const smol::Grammar> parsed) {
    grammar = parsed ? smol::TokenMaskTable::compile(
                           std::move(parsed), std::make_shared<const smol::TokenTrie>(tokenizer),
                           {}, &chat::interrupt_requested)
                     : nullptr;
  }

  // --prompt-cache FILE, when FILE exists: its tokens and K/V go into the engine and
  // the session takes them as evaluated. A file of another model, or a corrupt one,
  // is an error (exit 1) rather than llama.cpp's warning: silently overwriting it
  // would throw away a long prefill the user meant to keep.
  void restore_prompt_cache(const std::string& path) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      std::fprintf(stderr, "smol-chat: %s does not exist yet; the prompt will be saved there\n",
                   path.c_str());
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    std::vector<smol::TokenId> tokens = smol::load_session(path, *cpu);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    std::fprintf(stderr, "smol-chat: restored %zu tokens from %s in %.1f ms\n", tokens.size(),
                 path.c_str(), ms);
    session.restore_cached_tokens(std::move(tokens));
  }

  // Saves the first prompt's tokens and K/V to --prompt-cache's file (once, as
  // llama.cpp does); the positions after it, the reply's, are not part of it.
  void save_prompt_cache(std::span<const smol::TokenId> prompt) {
    if (!options.prompt_cache || prompt_cache_saved || prompt.empty()) return;
    smol::save_session(*options.prompt_cache, *cpu, prompt);
    prompt_cache_saved = true;
    std::fprintf(stderr, "smol-chat: saved %zu prompt tokens to %s\n", prompt.size(),
                 options.prompt_cache->c_str());
  }

  std::unique_ptr<smol::LogitsSource> start_engine() {
    // A session file holds every position: with --prompt-cache the sliding-window blocks
    // keep every position too, rather than a ring (model/kv_cache.hpp's KvRing).
    const smol::TransformerOptions run{.context = options.context,
                                       .kv_type = options.kv_type,
                                       .window_ring = !options.prompt_cache};
    if (options.gpu) return chat::start_gpu_engine(model, run);
    // Speculation verifies drafts in one pass, on kernels that give one-token steps' bits.
    cpu = std::make_unique<smol::Transformer>(model, context,
                                              smol::cli::target_options(run, options.speculation));
    return std::make_unique<smol::TransformerSource>(*cpu);
  }

  smol::ChatTemplate chat_template() const {
    if (options.raw) return smol::ChatFormat::chatml;  // unused in raw mode
    return smol::file_chat_template(
        model.file(), tokenizer.vocabulary(),
        [](std::string_view warning) {
          std::fprintf(stderr, "smol-chat: %.*s\n", static_cast<int>(warning.size()),
                       warning.data());
        },
        smol::cli::chat_template_choice(options.chat_template));
  }

  smol::ChatSettings settings() const {
    smol::ChatSettings settings;
    settings.sampling = options.sampling;
    // --repeat-last-n -1 is llama.cpp's "the whole context".
    if (settings.sampling.penalty_window < 0) {
      settings.sampling.penalty_window =
          static_cast<int>(std::min<std::size_t>(source->context_length(), INT_MAX));
    }
    settings.thinking = options.thinking;
    settings.raw = options.raw;
    settings.when_full = options.context_shift ? smol::WhenContextFull::drop_oldest_turns
                                               : smol::WhenContextFull::fail;
    return settings;
  }

  // --verbose: the prompt as the model sees it, one token a line, control tokens
  // marked, on stderr.
  void show_prompt(std::span<const smol::TokenId> prompt) const {
    std::fprintf(stderr, "[prompt: %zu tokens]\n", prompt.size());
    for (const smol::TokenId id : prompt) {
      const std::string piece = tokenizer.token_to_piece(id, {.render_special = true});
      std::string shown;
      for (const char c : piece) {
        if (c == '\n') {
          shown += "\\n";
        } else if (c == '\t') {
          shown += "\\t";
        } else {
          shown += c;
        }
      }
      std::fprintf(stderr, "%7d '%s'%s\n", id, shown.c_str(),
                   tokenizer.is_control(id) ? " (control)" : "");
    }
  }

  enum class Outcome { done, cancelled, failed };

  // One turn: streams the reply and prints the stats line.
  Outcome answer(const std::string& text) {
    chat::clear_interrupts();
    ReplyPrinter printer(options.hide_thinking, chat::use_color(STDOUT_FILENO));
    smol::ReplyOptions reply_options;
    reply_options.max_tokens =
        options.max_tokens < 0 ? 0 : static_cast<std::size_t>(options.max_tokens);
    reply_options.stop_strings = options.stop_strings;
    reply_options.cancel = &chat::interrupt_requested;
    reply_options.ignore_eos = options.ignore_eos;
    reply_options.grammar = grammar;
    reply_options.on_piece = [&printer](const smol::TextPiece& piece) { printer(piece); };
    std::vector<smol::TokenId> prompt;
    reply_options.on_prompt = [this, &prompt](std::span<const smol::TokenId> p) {
      if (options.verbose) show_prompt(p);
      prompt.assign(p.begin(), p.end());
    };
    if (options.max_tokens == 0) {
      std::fputc('\n', stdout);
      return Outcome::done;
    }
    try {
      const smol::Reply reply = session.ask(text, reply_options);
      printer.finish();
      last_stats = reply.stats;
      // Cancelled before any reply token may mean the prompt is not all evaluated.
      if (!(reply.stop == smol::StopReason::cancelled && reply.stats.generated_tokens == 0)) {
        save_prompt_cache(prompt);
      }
      if (reply.dropped_messages > 0) {
        std::fprintf(stderr, "smol-chat: the context was full; forgot the %zu oldest messages\n",
                     reply.dropped_messages);
      }
      print_stats_line(reply.stats, reply.stop);
      if (reply.stop == smol::StopReason::context_full) {
        std::fprintf(stderr, "smol-chat: the context is full (%zu tokens); %s\n",
                     session.context_length(),
                     options.context_shift ? "the next turn forgets the oldest ones"
                                           : "use /reset, or a larger -c");
      }
      return reply.stop == smol::StopReason::cancelled ? Outcome::cancelled : Outcome::done;
    } catch (const smol::ContextFullError& error) {
      // A message that cannot fit: an error, not an answer (the REPL goes on).
      printer.finish();
      std::fprintf(stderr, "smol-chat: %s\n", error.what());
      return Outcome::failed;
    }
  }

  void print_stats() const {
    std::printf("model: %s (%s, %zu layers)\n", model.file().name().c_str(),
                model.config().architecture.c_str(), model.config().n_layer);
    std::printf("context: %zu of %zu positions used\n", session.cached_tokens(),
                session.context_length());
    if (options.gpu) {
      std::printf("device: %s, thinking: %s\n", chat::gpu_device_name().c_str(),
                  session.thinking() ? "on" : "off");
    } else {
      std::printf("threads: %d, thinking: %s\n", context.threads(),
                  session.thinking() ? "on" : "off");
    }
    if (last_stats) {
      std::printf("last reply: %s\n", smol::format_stats(*last_stats).c_str());
    } else {
      std::printf("no reply yet\n");
    }
    print_speculation_stats();
  }

  // --spec-type: what was drafted for the last reply and how much of it was kept.
  void print_speculation_stats() const {
    const smol::cli::SpeculationFlags& flags = options.speculation;
    if (!flags.enabled()) return;
    std::printf("speculative decoding: %s%s%s, draft-max %zu, draft-min %zu",
                smol::cli::spec_type_name(flags.chosen()), draft.model() ? " with " : "",
                draft.model() ? draft.model()->file().name().c_str() : "", flags.draft_max,
                flags.draft_min);
    if (flags.chosen() == smol::cli::SpecType::ngram_simple) {
      std::printf(", ngram-size-n %zu", flags.ngram_size);
    }
    std::printf("\n");
    if (!last_stats) return;
    std::printf(
        "  drafted %zu, accepted %zu, acceptance %.1f %%, %.2f accepted per pass (%zu passes)\n",
        last_stats->drafted_tokens, last_stats->accepted_draft_tokens,
        100.0 * last_stats->acceptance_rate(), last_stats->mean_accepted_length(),
        last_stats->verify_passes);
  }

  // Runs a /command; false means quit.
  bool command(const std::string& line) {
    const std::size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    const std::string argument = space == std::string::npos ? "" : line.substr(space + 1);
    if (name == "/quit" || name == "/exit" || name == "/bye") return false;
    if (name == "/think" || name == "/no_think") {
      session.set_thinking(name == "/think");
      std::printf("(reasoning %s)\n", name == "/think" ? "on" : "off");
    } else if (name == "/system") {
      session.set_system_prompt(argument);
      std::printf(argument.empty() ? "(system prompt removed)\n" : "(system prompt set)\n");
    } else if (name == "/reset" || name == "/clear") {
      session.reset();
      std::printf("(conversation cleared)\n");
    } else if (name == "/stats") {
      print_stats();
    } else if (name == "/help" || name == "/?") {
      std::printf("%s", kCommands.data());
    } else {
      std::printf("unknown command %s; /help lists them\n", name.c_str());
    }
    std::fflush(stdout);
    return true;
  }

  // The REPL, with line editing and history at a terminal, or one turn per line when
  // stdin is not a terminal (a turn that fails then ends the run with 1). Returns the
  // exit code.
  int loop() {
    const bool interactive = chat::is_terminal(STDIN_FILENO);
    const bool color = chat::use_color(STDOUT_FILENO);
    std::optional<chat::LineEditor> editor;
    if (interactive) {
      editor.emplace("smol-chat", color);
      if (!editor->ready()) editor.reset();  // plain reads, as from a pipe
      std::printf("smol-chat: %s. Type a message, /help for commands, Ctrl-C stops a reply.\n",
                  model.file().name().c_str());
    }
    bool interrupted_at_prompt = false;
    for (;;) {
      // A Ctrl-C from here on is one at the prompt. After one there, keep what came
      // since: a second Ctrl-C typed while the hint was printing must still quit.
      if (!interrupted_at_prompt) chat::clear_interrupts();
      if (interactive && !editor) {
        std::printf("%s> %s", color ? chat::kBold.data() : "", color ? chat::kReset.data() : "");
      }
      std::fflush(stdout);
      const chat::ReadLine input = editor ? editor->read() : chat::read_line();
      if (input.status == chat::LineStatus::interrupted) {
        if (interrupted_at_prompt || !interactive) {
          std::printf("\n");
          return 130;
        }
        chat::clear_interrupts();  // this one is answered; the next one quits
        interrupted_at_prompt = true;
        std::printf("\n(Ctrl-C again or /quit to leave)\n");
        continue;
      }
      interrupted_at_prompt = false;
      if (input.status == chat::LineStatus::end_of_input) {
        if (interactive) std::printf("\n");
        return 0;
      }
      if (input.text.empty()) continue;
      if (input.text.front() == '/') {
        if (!command(input.text)) return 0;
        continue;
      }
      const Outcome outcome = answer(input.text);
      if (!interactive && outcome == Outcome::cancelled) return 130;
      if (!interactive && outcome == Outcome::failed) return 1;
    }
  }
};

// The grammar of --grammar, --grammar-file, --json-schema or --json-schema-file, parsed
// before the model loads, so that a mistake costs no wait; null when none is given.
// Throws smol::Error naming the flag and the line and column (or the schema keyword).
std::shared_ptr<const smol::Grammar> output_grammar(const chat::Options& options) {
  const auto flagged = [](const char* flag, auto make) {
    try {
      return make();
    } catch (const smol::Error& error) {
      smol::fail(flag, ": ", error.what());
    }
  };
  if (options.grammar) {
    return flagged("--grammar", [&] { return smol::parse_gbnf(*options.grammar); });
  }
  if (options.grammar_file) {
    return flagged("--grammar-file", [&] {
      return smol::parse_gbnf(smol::cli::read_text_file(*options.grammar_file));
    });
  }
  if (options.json_schema) {
    return flagged("--json-schema",
                   [&] { return smol::json_schema_grammar(*options.json_schema); });
  }
  if (options.json_schema_file) {
    return flagged("--json-schema-file", [&] {
      return smol::json_schema_grammar(smol::cli::read_text_file(*options.json_schema_file));
    });
  }
  return nullptr;
}

// Opens a model the user named, with one clear line for each way that can go wrong. At
// a terminal it says that it is loading (a 3B model's copies take seconds, during which
// Ctrl-C stops it).
smol::Model open_model(const std::string& path, smol::ModelOptions model_options) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(path, error)) smol::fail(path, ": no such file");
  if (fs::is_directory(path, error)) smol::fail(path, " is a directory, not a GGUF file");
  if (chat::is_terminal(STDERR_FILENO)) {
    std::fprintf(stderr, "smol-chat: loading %s\n", path.c_str());
  }
  return smol::Model::open(path, model_options);
}

// smol-chat's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  chat::Options options;
  if (const std::optional<int> status = chat::parse_options(argc, argv, options)) return *status;
  if (options.gpu) {
    if (const std::optional<chat::GpuUnavailable> why = chat::gpu_unavailable()) {
      std::fprintf(stderr, "%s\n", why->message.c_str());
      return why->status;
    }
    if (options.prompt_cache) {
      std::fputs("smol-chat: --prompt-cache works with the CPU engine only, not --gpu\n", stderr);
      return 2;
    }
    if (options.speculation.enabled()) {
      std::fputs("smol-chat: speculative decoding works with the CPU engine only, not --gpu\n",
                 stderr);
      return 2;
    }
  }
  chat::catch_interrupts();
  try {
    std::shared_ptr<const smol::Grammar> grammar = output_grammar(options);
    // A constrained reply cannot think: the grammar admits no <think> block.
    if (grammar) options.thinking = false;
    const std::string path =
        options.model ? *options.model : chat::choose_default_model(options.yes).path;
    // The GPU uploads the file's blocks, so a CPU-side copy would only cost time.
    // Ctrl-C while the model loads (the copies of a 3B model take seconds) stops it.
    Chat chat(options,
              open_model(path, {.repack = options.gpu ? smol::Repack::never : options.repack,
                                .rope = options.rope,
                                .cancel = &chat::interrupt_requested}));
    chat.constrain(std::move(grammar));
    // A Ctrl-C after the copies, while the engine started: answered here, not forgotten by
    // the first reply (which starts by clearing the presses it has not seen).
    if (chat::interrupt_requested) return 130;
    if (options.prompt) {
      switch (chat.answer(*options.prompt)) {
        case Chat::Outcome::done:
          return 0;
        case Chat::Outcome::cancelled:
          return 130;
        case Chat::Outcome::failed:
          return 1;
      }
    }
    return chat.loop();
  } catch (const smol::Cancelled&) {
    return 130;  // Ctrl-C before the first prompt: while loading or compiling the grammar
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-chat: %s\n", error.what());
    return 1;
  }
}

}  // namespace smol_chat
