// smol-chat's command line, spelled like llama.cpp's where a flag exists there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat_template_flags.hpp"
#include "cli.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "speculation.hpp"

namespace chat {

inline constexpr const char* kDescription = R"(usage: smol-chat [options]

Chat with a SmolLM3 or Llama-family GGUF model. Without -m it uses
SmolLM3-3B-Q4_K_M.gguf from $SMOL_MODELS (default ~/.cache/smol), offering to
download it, or a small demo model with random weights.)";

inline constexpr const char* kFooter =
    R"(in the chat: /think, /no_think, /system TEXT, /reset, /stats, /help, /quit.
Ctrl-C stops the current reply; Ctrl-C twice at the prompt quits.)";

struct Options {
  std::optional<std::string> model;
  std::optional<std::string> prompt;
  std::string system;
  bool raw = false;
  bool yes = false;
  long max_tokens = -1;
  smol::SamplerSettings sampling = smol::SamplerSettings::smollm3();
  std::vector<std::string> stop_strings;
  bool thinking = true;
  bool hide_thinking = false;
  smol::cli::ChatTemplateFlags chat_template;
  bool verbose = false;  // -v: the prompt as tokens before each reply
  bool ignore_eos = false;
  int threads = 0;
  std::size_t context = 0;
  smol::KvTypes kv_type = smol::KvType::f16;
  bool context_shift = true;
  bool gpu = false;
  smol::Repack repack = smol::Repack::when_faster;
  smol::RopeOverrides rope;
  std::optional<std::string> prompt_cache;  // --prompt-cache FILE
  smol::cli::SpeculationFlags speculation;
  // Structured output, llama.cpp's flags: every reply follows a GBNF grammar or a JSON
  // schema, given as text or as a file (read when the chat starts, see main.cpp).
  std::optional<std::string> grammar, grammar_file, json_schema, json_schema_file;
};

// Fills `options` from the command line. Returns the exit status when the program should
// stop there: 0 after --help, 2 after a bad command line (reported on stderr).
inline std::optional<int> parse_options(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-chat", kDescription);
  CLI::App& app = program.app;
  app.footer(kFooter);

  program.group("model and input");
  smol::cli::add_model(program, options.model, "GGUF model file", /*required=*/false);
  app.add_option_function<std::string>(
         "-p,--prompt", [&options](const std::string& text) { options.prompt = text; },
         "answer TEXT and exit; without -p, a REPL (or, when stdin\n"
         "is not a terminal, one turn per line of stdin)")
      ->type_name("TEXT");
  app.add_option("--system,--system-prompt", options.system,
                 "system prompt, in place of the template's default one (also -sys)")
      ->type_name("TEXT");
  program.alias("-sys", "--system");
  app.add_flag("--raw", options.raw,
               "no chat template: continue the text as written (base models)");
  app.add_option_function<std::string>(
         "--prompt-cache", [&options](const std::string& path) { options.prompt_cache = path; },
         "start from the session saved in FILE (the longest common\n"
         "prefix of its tokens with the prompt is not evaluated again);\n"
         "the first prompt is saved there once evaluated")
      ->type_name("FILE");
  app.add_flag("-y,--yes", options.yes,
               "download the default model without asking (or SMOL_DOWNLOAD=1)");

  program.group("generation");
  app.add_option("-n,--n-predict", options.max_tokens,
                 "at most N tokens per reply (default -1: until the model stops)")
      ->type_name("N")
      ->transform(smol::cli::integer(-1, smol::cli::kMaxTokens));
  smol::cli::add_sampling(program, options.sampling);
  app.add_option("-r,--stop,--reverse-prompt", options.stop_strings,
                 "stop a reply at TEXT (repeatable)")
      ->type_name("TEXT")
      ->allow_extra_args(false)  // one TEXT per flag; the next argument is not a second
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--ignore-eos", options.ignore_eos,
               "keep generating past the end of the turn (benchmarks)");
  CLI::Option* grammar =
      app.add_option_function<std::string>(
             "--grammar", [&options](const std::string& text) { options.grammar = text; },
             "every reply follows this GBNF grammar (llama.cpp's syntax)")
          ->type_name("TEXT");
  CLI::Option* grammar_file =
      app.add_option_function<std::string>(
             "--grammar-file", [&options](const std::string& path) { options.grammar_file = path; },
             "every reply follows the GBNF grammar in FILE")
          ->type_name("FILE");
  CLI::Option* schema = app.add_option_function<std::string>(
                               "-j,--json-schema",
                               [&options](const std::string& text) { options.json_schema = text; },
                               "every reply is JSON valid under this JSON schema (e.g.\n"
                               "'{}' for any JSON value); turns the reasoning off")
                            ->type_name("SCHEMA");
  CLI::Option* schema_file =
      app.add_option_function<std::string>(
             "--json-schema-file",
             [&options](const std::string& path) { options.json_schema_file = path; },
             "every reply is JSON valid under the schema in FILE")
          ->type_name("FILE");
  // One constraint at a time: naming two is a mistake, not a combination.
  for (CLI::Option* a : {grammar, grammar_file, schema, schema_file}) {
    for (CLI::Option* b : {grammar, grammar_file, schema, schema_file}) {
      if (a != b) a->excludes(b);
    }
  }
  app.add_flag("--think,!--no-think", options.thinking,
               "the reasoning mode of templates that have one\n(SmolLM3, Qwen3, ...; default: on)");
  smol::cli::add_chat_template_flags(app, options.chat_template);
  app.add_flag("--hide-thinking", options.hide_thinking,
               "do not print the reasoning, only the answer");
  app.add_flag("-v,--verbose", options.verbose,
               "show the prompt as tokens (ids and pieces) before each\n"
               "reply, so you can see which text became control tokens");

  program.group("speculative decoding");
  smol::cli::add_speculation_flags(program, options.speculation);

  program.group("runtime");
  smol::cli::add_threads(program, options.threads);
  smol::cli::add_context(program, options.context, 0,
                         "context in tokens, at most 16777216; 0 = the model's\n"
                         "(default: the model's)");
  smol::cli::add_kv_types(program, options.kv_type);
  app.add_flag("--gpu", options.gpu, "run the model on the GPU (a build with -DSMOL_CUDA=ON)");
  smol::cli::add_repack(program, options.repack);
  smol::cli::add_rope_flags(program, options.rope);
  app.add_flag_callback(
      "--no-context-shift", [&options] { options.context_shift = false; },
      "when the context is full, stop instead of forgetting the\n"
      "oldest turns");
  return program.parse(argc, argv);
}

}  // namespace chat
