// Speculative decoding for the programs (smol-chat, smol-bench, smol-server): llama.cpp's
// flags and, for the single-stream programs, the drafter they ask for.
//
//   --spec-type none|ngram-simple|draft   which drafter (default none; -md implies draft)
//   --draft-max N, --draft-min N          longest draft, shortest worth verifying
//   --spec-ngram-size-n N                 ngram-simple: the shortest repeat looked up
//   -md, --model-draft FILE               the draft model (same vocabulary)
//
// With a drafter, the model must run one token on its batch-invariant kernels
// (TransformerOptions::one_token), so that verifying a draft in one pass gives the bits
// of plain decoding: target_options() says so.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "cli.hpp"
#include "smol/generate/draft_length.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/model_drafter.hpp"
#include "smol/generate/ngram_drafter.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::cli {

enum class SpecType { none, ngram_simple, draft };

inline const char* spec_type_name(SpecType type) {
  switch (type) {
    case SpecType::none:
      return "none";
    case SpecType::ngram_simple:
      return "ngram-simple";
    case SpecType::draft:
      return "draft";
  }
  return "?";
}

struct SpeculationFlags {
  std::optional<SpecType> type;  // unset: draft with -md, else none
  // llama.cpp's defaults (common_params_speculative: n_max 16, n_min 0).
  std::size_t draft_max = 16;
  std::size_t draft_min = 0;
  // ngram-simple's shortest match (NgramSettings says why 3 and what N means);
  // llama.cpp's ngram-simple matches exactly N tokens, by default 12.
  std::size_t ngram_size = NgramSettings{}.min_ngram;
  std::optional<std::string> model_draft;

  SpecType chosen() const { return type.value_or(model_draft ? SpecType::draft : SpecType::none); }
  bool enabled() const { return chosen() != SpecType::none; }
  DraftLengthSettings length() const {
    DraftLengthSettings settings;
    settings.max = draft_max;
    settings.min = draft_min;
    return settings;
  }
  NgramSettings ngram() const { return NgramSettings::at_least(ngram_size); }
};

inline void add_speculation_flags(Program& program, SpeculationFlags& flags) {
  CLI::App& app = program.app;
  add_choice<std::optional<SpecType>>(
      app, "--spec-type", flags.type,
      {{"none", SpecType::none},
       {"ngram-simple", SpecType::ngram_simple},
       {"draft", SpecType::draft}},
      "speculative decoding: guess tokens and verify several per\n"
      "pass; ngram-simple: from repeats of the text so far (quoting,\n"
      "extracting, rewriting); draft: a draft model's guesses\n"
      "(default: draft with -md, else none). Replies are the same");
  app.add_option("--draft-max,--draft,--draft-n", flags.draft_max,
                 "guess at most N tokens per pass (default 16)")
      ->type_name("N")
      ->transform(integer(0, 1024));
  app.add_option("--draft-min,--draft-n-min", flags.draft_min,
                 "verify only drafts of at least N tokens (default 0)")
      ->type_name("N")
      ->transform(integer(0, 1024));
  app.add_option("--spec-ngram-size-n,--spec-ngram-simple-size-n", flags.ngram_size,
                 "ngram-simple: draft only after a repeat of at least the\n"
                 "last N tokens (default 3)")
      ->type_name("N")
      ->transform(integer(1, 64));
  app.add_option_function<std::string>(
         "--model-draft", [&flags](const std::string& path) { flags.model_draft = path; },
         "-md: the draft model, a small GGUF with the same vocabulary")
      ->type_name("FILE");
  program.alias("-md", "--model-draft");
  program.check([&flags] {
    if (flags.chosen() == SpecType::draft && !flags.model_draft) {
      usage_error("--spec-type draft needs a draft model (-md FILE)");
    }
    if (flags.model_draft && flags.chosen() != SpecType::draft) {
      usage_error("-md goes with --spec-type draft, not ", spec_type_name(flags.chosen()));
    }
  });
}

// The model's session options with speculation: one token on the block kernels.
inline TransformerOptions target_options(TransformerOptions options,
                                         const SpeculationFlags& flags) {
  if (flags.enabled()) options.one_token = OneToken::tiles;
  return options;
}

// The drafter the flags ask for, and the draft model's session behind it.
class DraftEngine {
 public:
  // `target`: the model whose tokens are guessed (its vocabulary must be the draft
  // model's); `context_length`: the target session's, the draft session's at most.
  DraftEngine(const SpeculationFlags& flags, const Tokenizer& target, Context& context,
              std::size_t context_length, KvTypes kv_type, Repack repack) {
    if (flags.chosen() != SpecType::draft) return;
    const std::string& path = *flags.model_draft;
    ModelOptions model_options;
    model_options.repack = repack;
    try {
      model_.emplace(Model::open(path, model_options));
      check_same_vocabulary(target.vocabulary(), load_vocabulary(model_->file()));
    } catch (const Error& error) {
      fail("draft model ", path, ": ", error.what());
    }
    // Its guesses need not be batch-invariant: the decode kernels, the fastest.
    TransformerOptions options;
    options.context = std::min(context_length, model_->config().max_context());
    options.kv_type = kv_type;
    session_.emplace(*model_, context, options);
    source_.emplace(*session_);
  }

  // A new drafter (null without speculation); the draft model's is borrowed from here.
  std::unique_ptr<Drafter> drafter(const SpeculationFlags& flags, const Tokenizer& target) {
    switch (flags.chosen()) {
      case SpecType::none:
        return nullptr;
      case SpecType::ngram_simple:
        return std::make_unique<NgramDrafter>(flags.ngram());
      case SpecType::draft:
        return std::make_unique<ModelDrafter>(*source_, target.size());
    }
    return nullptr;
  }

  const Model* model() const { return model_ ? &*model_ : nullptr; }

 private:
  std::optional<Model> model_;
  std::optional<Transformer> session_;
  std::optional<TransformerSource> source_;
};

}  // namespace smol::cli
