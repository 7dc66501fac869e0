// smol-server's command line, spelled like llama-server's where a flag exists there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat_template_flags.hpp"
#include "cli.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/pooling.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "speculation.hpp"

namespace server {

inline constexpr const char* kDescription = R"(usage: smol-server [options]

Serve a SmolLM3 or Llama-family GGUF model over HTTP: OpenAI's API
(/v1/chat/completions, /v1/completions, /v1/models), streamed with Server-Sent
Events, and a chat page at /. Without -m it uses SmolLM3-3B-Q4_K_M.gguf from
$SMOL_MODELS (default ~/.cache/smol) if it is there (get it with smol-chat --yes),
else a small demo model with random weights.)";

inline constexpr const char* kFooter =
    R"(endpoints: GET / (chat page), POST /v1/chat/completions, POST /v1/completions,
POST /v1/embeddings and /embedding (with --embeddings), POST /v1/rerank (with
--reranking), GET /v1/models, GET /health, GET /metrics, GET /props, POST /tokenize,
POST /detokenize. SIGTERM or Ctrl-C: stop accepting, let replies finish for
--grace seconds, cancel the rest, exit 0.)";

struct Options {
  std::optional<std::string> model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::size_t slots = 4;         // -np
  std::size_t context = 0;       // per sequence; 0: the model's
  std::size_t batch = 512;       // tokens per forward pass
  std::size_t queue_limit = 64;  // requests waiting beyond the slots before 503
  std::size_t max_body = 8u << 20;
  std::size_t stored_responses = 256;    // the Responses API's, for previous_response_id
  bool context_shift = false;            // drop a conversation's oldest turns rather than refuse it
  std::size_t cache_ram_mib = 0;         // host memory for prompts evicted from the KV pool
  std::string slot_save_path;            // where /slots saves and restores; empty: nowhere
  bool embeddings = false;               // serve /v1/embeddings and /embedding
  std::optional<smol::Pooling> pooling;  // --pooling; unset: the file's
  double grace_seconds = 10;
  int threads = 0;
  std::string api_key;
  std::string alias;
  smol::KvTypes kv_type = smol::KvType::f16;
  smol::Repack repack = smol::Repack::when_faster;
  smol::RopeOverrides rope;
  std::string reasoning_format = "deepseek";
  bool thinking = true;
  smol::cli::ChatTemplateFlags chat_template;
  smol::SamplerSettings sampling = smol::SamplerSettings::smollm3();
  smol::cli::SpeculationFlags speculation;  // --spec-type, -md: every request drafts
  smol::GrammarLimits grammar;              // each request's grammar or schema
  std::size_t grammar_memory_mib = smol::GrammarLimits{}.max_table_bytes >> 20;
};

inline std::optional<int> parse_options(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-server", kDescription);
  CLI::App& app = program.app;
  app.footer(kFooter);
  using smol::cli::integer;

  program.group("model");
  smol::cli::add_model(program, options.model, "GGUF model file", /*required=*/false);
  app.add_option("-a,--alias", options.alias,
                 "the model's name in the API (default: the file's name)")
      ->type_name("NAME");

  program.group("server");
  app.add_option("--host", options.host, "address to listen on (default 127.0.0.1)")
      ->type_name("ADDR");
  app.add_option("--port", options.port, "port to listen on; 0 = any free one (default 8080)")
      ->type_name("N")
      ->transform(integer(0, 65535));
  app.add_option("--parallel", options.slots, "conversations generating at once (default 4)")
      ->type_name("N")
      ->transform(integer(1, 256));
  app.add_option("--queue-limit", options.queue_limit,
                 "requests that may wait for a slot, up to 1000; more\nget 503 (default 64)")
      ->type_name("N")
      ->transform(integer(0, 1000));
  app.add_option("--api-key", options.api_key,
                 "require `Authorization: Bearer KEY` (not for / and /health)")
      ->type_name("KEY");
  app.add_option("--slot-save-path", options.slot_save_path,
                 "directory where POST /slots/ID?action=save|restore\nwrites and reads "
                 "session files")
      ->type_name("DIR")
      ->check(CLI::ExistingDirectory);
  app.add_option("--cache-ram", options.cache_ram_mib,
                 "MiB of host memory that keep the K/V of prompts\nevicted from the KV pool, "
                 "copied back when a\nconversation returns (default 0: none)")
      ->type_name("MIB")
      ->transform(integer(0, std::int64_t{1} << 20));
  app.add_flag("--embeddings,--embedding", options.embeddings,
               "serve POST /v1/embeddings and /embedding (the model's\nembeddings, beside chat)");
  app.add_flag_callback(
      "--reranking,--rerank",
      [&options] {
        options.embeddings = true;
        options.pooling = smol::Pooling::rank;
      },
      "serve POST /v1/rerank: a reranker's relevance scores\n(a file with a classifier head; "
      "implies --embeddings)");
  app.add_option_function<std::string>(
         "--pooling",
         [&options](const std::string& name) {
           const auto pooling = smol::pooling_named(name);
           if (!pooling || *pooling == smol::Pooling::rank) {
             smol::cli::usage_error("--pooling ", name, " is not none, mean, cls or last");
           }
           options.pooling = pooling;
         },
         "how --embeddings pools a sequence: none, mean, cls or\nlast (default: as the file says)")
      ->type_name("NAME");
  app.add_flag("--context-shift", options.context_shift,
               "a conversation that leaves its reply too little room\nloses its oldest turns "
               "(the system prompt and the\nlatest turn kept) instead of a 400");
  app.add_option("--store-responses", options.stored_responses,
                 "responses kept in memory for /v1/responses'\nprevious_response_id, up to 100000; "
                 "0: none\n(default 256, and 256 MiB at most)")
      ->type_name("N")
      ->transform(integer(0, 100000));
  app.add_option("--max-body", options.max_body, "largest request body in bytes (default 8 MiB)")
      ->type_name("N")
      ->transform(integer(1024, std::int64_t{1} << 30));
  app.add_option("--grace", options.grace_seconds,
                 "seconds replies may take to finish after SIGTERM\n(default 10)")
      ->type_name("S")
      ->transform(smol::cli::number(0, 3600));

  program.group("generation defaults (a request's fields override them)");
  smol::cli::add_sampling(program, options.sampling);
  // llama-server's -l / --logit-bias TOKEN_ID(+/-)BIAS, repeatable ("15043+1", "2-inf":
  // never token 2); a request's logit_bias replaces them.
  app.add_option_function<std::vector<std::string>>(
         "-l,--logit-bias",
         [&options](const std::vector<std::string>& values) {
           for (const std::string& value : values) {
             const std::size_t sign = value.find_first_of("+-", 1);
             std::int64_t token = -1;
             float bias = 0.0f;
             try {
               std::size_t used = 0;
               token = std::stoll(value.substr(0, sign), &used);
               if (used != sign || sign == std::string::npos) throw std::invalid_argument(value);
               const std::string amount = value.substr(sign + 1);
               bias = amount == "inf" ? std::numeric_limits<float>::infinity()
                                      : std::stof(amount, &used);
               if (amount != "inf" && used != amount.size()) throw std::invalid_argument(value);
             } catch (const std::exception&) {
               throw CLI::ValidationError(
                   "--logit-bias",
                   "expected TOKEN_ID+BIAS or TOKEN_ID-BIAS, got \"" + value + "\"");
             }
             if (token < 0 || token > std::numeric_limits<smol::TokenId>::max()) {
               throw CLI::ValidationError("--logit-bias", "no token id " + std::to_string(token));
             }
             options.sampling.logit_bias.emplace_back(static_cast<smol::TokenId>(token),
                                                      value[sign] == '-' ? -bias : bias);
           }
         },
         "add BIAS to a token's logit (TOKEN_ID+BIAS, TOKEN_ID-BIAS; -inf bans it);\nrepeatable")
      ->type_name("ID+BIAS")
      ->allow_extra_args(false);
  smol::cli::add_speculation_flags(program, options.speculation);
  app.add_flag("--think,!--no-think", options.thinking,
               "the reasoning mode of templates that have one (SmolLM3,\n"
               "Qwen3, ...) when a request does not say (default: on)");
  smol::cli::add_chat_template_flags(app, options.chat_template);
  smol::cli::add_choice(app, "--reasoning-format", options.reasoning_format,
                        {{"deepseek", std::string("deepseek")}, {"none", std::string("none")}},
                        "the reasoning in reasoning_content (deepseek, the\n"
                        "default) or left in content between <think> tags (none)");

  program.group("structured output (grammars, JSON schemas, tools)");
  app.add_option("--grammar-work", options.grammar.max_step_work,
                 "the recognizer's work for one step of a grammar, in\n"
                 "expansions; more is a 400 (default 4000000)")
      ->type_name("N")
      ->transform(integer(10000, std::int64_t{1} << 40));
  app.add_option("--grammar-memory", options.grammar_memory_mib,
                 "MiB one grammar's tables may take (default 256)")
      ->type_name("MIB")
      ->transform(integer(1, 1 << 20));
  app.add_option("--grammar-timeout", options.grammar.compile_seconds,
                 "seconds compiling one grammar may take (default 10)")
      ->type_name("S")
      ->transform(smol::cli::number(0.01, 3600));

  program.group("runtime");
  smol::cli::add_threads(program, options.threads);
  smol::cli::add_context(program, options.context, 0,
                         "context of each conversation in tokens; 0 = the\n"
                         "model's (default: the model's)");
  app.add_option("-b,--batch-size", options.batch,
                 "tokens per forward pass, prompts and replies together\n(default 512)")
      ->type_name("N")
      ->transform(integer(1, 65536));
  smol::cli::add_kv_types(program, options.kv_type);
  smol::cli::add_repack(program, options.repack);
  smol::cli::add_rope_flags(program, options.rope);
  program.alias("-np", "--parallel");
  program.check([&options] {
    if (options.batch < options.slots) {
      smol::cli::usage_error("-b ", options.batch, " is smaller than -np ", options.slots,
                             ": each pass must hold one token of every conversation");
    }
  });
  const std::optional<int> status = program.parse(argc, argv);
  options.grammar.max_table_bytes = options.grammar_memory_mib << 20;
  return status;
}

}  // namespace server
