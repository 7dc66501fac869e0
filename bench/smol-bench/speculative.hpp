// smol-bench --spec-type: what speculative decoding gains, and what its passes cost.
//
// Two tables per thread count:
//   1. A forward pass of k tokens (k = 1, 2, 4, 8, 16) at depth 64, all k rows of logits,
//      on the kernels speculation runs on (one token on the tiles), beside the plain
//      one-token step (matvec): what verifying a draft of k - 1 tokens costs against one
//      decode step. Speculation pays when the tokens a pass yields outgrow that ratio.
//   2. Greedy replies of -n tokens (ignore_eos) to six chat prompts, with the model's
//      template: three grounded ones (copy a passage, extract fields from a letter, edit
//      code: the reply repeats spans of the prompt, which n-gram drafts find) and three
//      open ones (a story, an explanation, advice: few repeats). Each is
//      decoded plainly (matvec, smol's default), plainly on the tiles (speculation's
//      kernels, without drafts) and with the drafter; the table gives decode t/s (median
//      of -r runs), the speed-up over plain decoding, the acceptance rate and the mean
//      guesses kept per pass, and whether the text equals the plain tiles reply (it
//      must, bit for bit).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "smol/generate/chat_session.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "speculation.hpp"
#include "test_runner.hpp"

namespace smol::bench {

struct SpeculativeTask {
  const char* name;  // "grounded: ..." or "open: ..."
  const char* prompt;
};

inline constexpr SpeculativeTask kSpeculativeTasks[] = {
    {"grounded: copy",
     "Repeat the following passage exactly, word for word.\n\n"
     "The lighthouse stood at the end of a narrow spit of rock, where the sea came in from "
     "three sides. Every evening the keeper climbed the one hundred and twelve steps, "
     "trimmed the wick, wound the clockwork that turned the lens, and wrote the time and "
     "the weather in a book with a green cover. Ships passed far out in the dark, and none "
     "of their crews ever knew his name, but every one of them knew his light."},
    {"grounded: extract",
     "From the letter below, list the sender name, the date, the city and the amount owed, "
     "one per line.\n\n"
     "Dear Mr. Hallam, on the 3rd of March 2024 our office in Leeds sent you invoice 4471 "
     "for the repair of the roof at 12 Carter Street. The amount owed, 1,240 pounds, was "
     "due on the 1st of April and has not been paid. Please settle it within fourteen days. "
     "Yours sincerely, Margaret Olsen, Olsen and Daughters Roofing, Leeds."},
    {"grounded: code",
     "Rename the variable total to result in this Python code and show the whole code "
     "again.\n\n"
     "def summarize(orders):\n"
     "    total = 0\n"
     "    for order in orders:\n"
     "        if order.paid:\n"
     "            total += order.amount * order.quantity\n"
     "    average = total / len(orders) if orders else 0\n"
     "    print(\"total:\", total, \"average:\", average)\n"
     "    return total, average"},
    {"open: story", "Write a short story about a girl who finds a map in her grandmother's attic."},
    {"open: explain", "Explain why the sky is blue, in simple words for a child."},
    {"open: advice", "Give me five tips for learning a new language."},
};

inline std::size_t largest_of(const std::vector<std::size_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

// Table 1: the cost of a k-token pass against a one-token decode step.
inline void print_pass_costs(const Model& model, Context& context, const BenchOptions& options) {
  RandomTokens random(options.seed, model.config().n_vocab);
  constexpr std::size_t kDepth = 64;
  const std::vector<std::int32_t> prefix = random.draw(kDepth);
  const std::vector<std::int32_t> batch = random.draw(16);
  const auto time_pass = [&](Transformer& session, std::size_t k, LogitsFor which) {
    std::vector<double> seconds;
    session.forward(std::span(batch).first(k), kDepth, which);  // warm-up
    for (std::size_t r = 0; r < std::max<std::size_t>(options.repetitions, 3); ++r) {
      const auto start = std::chrono::steady_clock::now();
      session.forward(std::span(batch).first(k), kDepth, which);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return median(seconds);
  };
  TransformerOptions plain_options;
  plain_options.context = kDepth + 16;
  plain_options.kv_type = options.kv_type;
  Transformer plain(model, context, plain_options);
  TransformerOptions tiles_options = plain_options;
  tiles_options.one_token = OneToken::tiles;
  Transformer tiles(model, context, tiles_options);
  plain.forward(prefix, 0, LogitsFor::none);
  tiles.forward(prefix, 0, LogitsFor::none);
  const double step = time_pass(plain, 1, LogitsFor::last);
  std::printf("| pass @ d%zu | kernels | ms | x one decode step | ms per token |\n", kDepth);
  std::printf("|---|---|---:|---:|---:|\n");
  std::printf("| 1 token | matvec (plain decode) | %.2f | 1.00 | %.2f |\n", step * 1e3, step * 1e3);
  for (const std::size_t k : {1, 2, 4, 8, 16}) {
    const double seconds = time_pass(tiles, k, LogitsFor::all);
    std::printf("| %zu tokens | tiles (verification) | %.2f | %.2f | %.2f |\n", k, seconds * 1e3,
                seconds / step, seconds * 1e3 / static_cast<double>(k));
  }
  std::printf("\n");
}

struct SpeculativeRun {
  double tokens_per_second = 0;
  GenerationStats stats;
  std::string text;
};

// Table 2: replies with and without drafts.
inline void print_reply_speeds(const Model& model, Context& context, const BenchOptions& options,
                               const cli::SpeculationFlags& flags) {
  const Tokenizer tokenizer(load_vocabulary(model.file()));
  const ChatTemplate chat_template = detect_template(
      model.file().get_optional<std::string>("tokenizer.chat_template").value_or(""));
  const std::size_t n = std::max<std::size_t>(largest_of(options.generated_tokens), 2);
  TransformerOptions session_options;
  session_options.context = std::min<std::size_t>(model.config().max_context(), 4096);
  session_options.kv_type = options.kv_type;
  cli::DraftEngine draft(flags, tokenizer, context, session_options.context, options.kv_type,
                         options.repack);

  enum class Mode { plain, plain_tiles, speculative };
  const auto reply = [&](const char* prompt, Mode mode) {
    TransformerOptions run = session_options;
    if (mode != Mode::plain) run.one_token = OneToken::tiles;
    Transformer transformer(model, context, run);
    TransformerSource source(transformer);
    ChatSettings settings;
    settings.sampling = SamplerSettings::greedy();
    settings.thinking = false;
    ChatSession session(source, tokenizer, chat_template, settings);
    if (mode == Mode::speculative) {
      session.enable_speculation(draft.drafter(flags, tokenizer), flags.length());
    }
    ReplyOptions reply_options;
    reply_options.max_tokens = n;
    reply_options.ignore_eos = true;
    const Reply answer = session.ask(prompt, reply_options);
    return SpeculativeRun{answer.stats.decode_tokens_per_second(), answer.stats, answer.text};
  };

  std::printf(
      "| task | decode | t/s | x plain | drafted | accepted | acceptance | kept per pass | "
      "same text |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& [task, prompt] : kSpeculativeTasks) {
    std::vector<double> speeds[3];
    SpeculativeRun last[3];
    // Modes alternate within each repetition, so a shared machine's slow minute hits all.
    for (std::size_t r = 0; r < options.repetitions; ++r) {
      for (const Mode mode : {Mode::plain, Mode::plain_tiles, Mode::speculative}) {
        if (options.progress) {
          std::fprintf(stderr, "smol-bench: %s reply, mode %d, run %zu\n", task,
                       static_cast<int>(mode), r + 1);
        }
        last[static_cast<int>(mode)] = reply(prompt, mode);
        speeds[static_cast<int>(mode)].push_back(last[static_cast<int>(mode)].tokens_per_second);
      }
    }
    const double plain = median(speeds[0]);
    const char* names[] = {"plain (matvec)", "plain (tiles)", cli::spec_type_name(flags.chosen())};
    for (int m = 0; m < 3; ++m) {
      const double speed = median(speeds[m]);
      const GenerationStats& s = last[m].stats;
      if (m < 2) {
        std::printf("| %s | %s | %.2f | %.2f | | | | | |\n", task, names[m], speed, speed / plain);
      } else {
        std::printf("| %s | %s | %.2f | %.2f | %zu | %zu | %.1f %% | %.2f | %s |\n", task, names[m],
                    speed, speed / plain, s.drafted_tokens, s.accepted_draft_tokens,
                    100.0 * s.acceptance_rate(), s.mean_accepted_length(),
                    last[2].text == last[1].text ? "yes" : "NO");
      }
    }
  }
  std::printf("\n");
}

inline int run_speculative_tests(const Model& model, const BenchOptions& options) {
  for (const int threads : options.threads) {
    Context context(threads, options.isa);
    const cli::SpeculationFlags& flags = options.speculation;
    std::printf("threads %d, isa %s%s, kv %s, %s, draft-max %zu, draft-min %zu", context.threads(),
                std::string(isa_name(context.isa())).c_str(),
                model.repacked().matrices() > 0 ? "+repack" : "",
                kv_types_text(options.kv_type).c_str(), cli::spec_type_name(flags.chosen()),
                flags.draft_max, flags.draft_min);
    if (flags.chosen() == cli::SpecType::ngram_simple) {
      std::printf(", ngram-size-n %zu", flags.ngram_size);
    }
    std::printf(", %zu tokens\n\n", largest_of(options.generated_tokens));
    print_pass_costs(model, context, options);
    print_reply_speeds(model, context, options, options.speculation);
  }
  return 0;
}

}  // namespace smol::bench
