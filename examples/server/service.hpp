// What smol-server holds once it runs: the loaded model and everything made from it
// (Service), the state the threads share (State: the service, the stop flag, the
// requests in flight), the ticket that counts a request in flight, and the replies that
// every route sends (JSON, OpenAI's errors).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "options.hpp"
#include "smol/generate/batch_model_drafter.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/model_drafter.hpp"
#include "smol/generate/ngram_drafter.hpp"
#include "smol/model/embedder.hpp"
#include "smol/serve/anthropic_messages.hpp"
#include "smol/serve/engine_thread.hpp"
#include "smol/serve/metrics.hpp"
#include "smol/serve/ollama_api.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/serve/rerank.hpp"
#include "smol/serve/response_store.hpp"
#include "smol/serve/token_mask_cache.hpp"
#include "smol/smol.hpp"
#include "smol/template/chat_prompt.hpp"
#include "smol/template/known_chat_templates.hpp"

namespace server {

using smol::serve::ApiError;
using smol::serve::Json;
using Clock = std::chrono::steady_clock;

inline constexpr auto kPollInterval = std::chrono::milliseconds(200);

inline void log(const std::string& line) {
  std::fprintf(stderr, "smol-server: %s\n", line.c_str());
}

// Everything that exists once the model is loaded.
struct Service {
  Service(const server::Options& o, smol::Model opened)
      : options(o),
        model(std::move(opened)),
        tokenizer(smol::load_vocabulary(model.file())),
        chat_template(smol::file_chat_template(
            model.file(), tokenizer.vocabulary(),
            [](std::string_view warning) { log(std::string(warning)); },
            smol::cli::chat_template_choice(o.chat_template))),
        tool_markers(smol::serve::syntax_marker_tokens(
            tokenizer, smol::serve::tool_call_syntax_of(chat_template))),
        masks(tokenizer, {.limits = o.grammar, .spelled_tokens = tool_markers}),
        context(o.threads),
        engine(model, context,
               {.total_positions = o.slots * sequence_length(o, model),
                .kv_type = o.kv_type,
                .max_batch = o.batch}),
        embedder(o.embeddings
                     ? std::make_unique<smol::Embedder>(
                           model, context,
                           smol::EmbedderOptions{
                               .batch = o.batch, .kv_type = o.kv_type, .pooling = o.pooling})
                     : nullptr),
        rerank_template(smol::serve::rerank_template(model.file()).value_or("")),
        draft_model(open_draft_model(o, tokenizer)),
        draft_engine(draft_model
                         ? std::make_unique<smol::BatchTransformer>(
                               *draft_model, context,
                               smol::BatchOptions{
                                   .total_positions =
                                       o.slots * std::min(sequence_length(o, model),
                                                          draft_model->config().max_context()),
                                   .kv_type = o.kv_type,
                                   .max_batch = o.batch})
                         : nullptr),
        scheduler(engine, tokenizer,
                  {.max_sequences = o.slots,
                   .step_tokens = o.batch,
                   .context = sequence_length(o, model),
                   .host_cache_bytes = o.cache_ram_mib << 20},
                  batch_drafter(o)),
        encoder(tokenizer),
        engine_thread(scheduler) {
    defaults.sampling = o.sampling;
    smol::check_logit_bias(defaults.sampling, tokenizer.size());  // --logit-bias
    defaults.reasoning = *smol::serve::parse_reasoning_format(o.reasoning_format);
    defaults.enable_thinking = o.thinking;
    defaults.tool_syntax = smol::serve::tool_call_syntax_of(chat_template);
    log(defaults.tool_syntax != nullptr
            ? "tool calls: the template's own syntax (" +
                  std::string(defaults.tool_syntax->family) + ")"
            : std::string("tool calls: the generic JSON format (the template has no tool-call "
                          "syntax smol knows)"));
    if (o.speculation.enabled()) defaults.draft = o.speculation.length();
    if (!model.config().has_lm_head() && !embedder) {
      smol::fail("this ", model.config().architecture,
                 " model is an encoder: it generates no text; start the server with --embeddings "
                 "(or --reranking for a reranker)");
    }
    if (embedder) {
      log("embeddings: pooling " + std::string(smol::pooling_name(embedder->pooling())) + ", " +
          std::to_string(embedder->width()) + " values, inputs up to " +
          std::to_string(embedder->max_tokens()) + " tokens");
    }
  }

  // -md: the draft model, whose token ids must mean what the model's do; null without.
  static std::unique_ptr<smol::Model> open_draft_model(const server::Options& o,
                                                       const smol::Tokenizer& tokenizer) {
    if (o.speculation.chosen() != smol::cli::SpecType::draft) return nullptr;
    const std::string& path = *o.speculation.model_draft;
    try {
      auto draft = std::make_unique<smol::Model>(smol::Model::open(path, {.repack = o.repack}));
      smol::check_same_vocabulary(tokenizer.vocabulary(), smol::load_vocabulary(draft->file()));
      return draft;
    } catch (const smol::Error& error) {
      smol::fail("draft model ", path, ": ", error.what());
    }
  }

  // Where the guesses of requests that draft come from: the draft model (-md), else
  // prompt lookup with --spec-ngram-size-n.
  std::unique_ptr<smol::BatchDrafter> batch_drafter(const server::Options& o) const {
    if (draft_engine) {
      return std::make_unique<smol::BatchModelDrafter>(
          *draft_engine, std::min(tokenizer.size(), model.config().n_vocab));
    }
    return std::make_unique<smol::EachSequenceDrafter>(
        std::make_unique<smol::NgramDrafter>(o.speculation.ngram()));
  }

  static std::size_t sequence_length(const server::Options& o, const smol::Model& m) {
    if (o.context == 0) return m.config().n_ctx_train;
    smol::check_context_fits(m.config(), o.context);  // past the trained one: RoPE scaling
    return o.context;
  }

  std::size_t context_length() const { return sequence_length(options, model); }

  server::Options options;
  smol::Model model;
  smol::Tokenizer tokenizer;
  smol::ChatTemplate chat_template;
  // The control tokens that spell the template's tool-call markers: shown in replies
  // with tools, and matched by grammars (syntax_marker_tokens).
  std::vector<smol::TokenId> tool_markers;
  smol::serve::TokenMaskCache masks;  // structured output's grammars over this vocabulary
  smol::Context context;
  smol::BatchTransformer engine;
  // --embeddings: the model's embeddings, on a pool of its own, run on the engine thread
  // between the scheduler's steps (embeddings.hpp); null without.
  std::unique_ptr<smol::Embedder> embedder;
  std::string rerank_template;  // the file's tokenizer.chat_template.rerank, or empty
  // -md: the draft model and its own engine (its own KV pool), run on the engine thread
  // between the model's passes; null without.
  std::unique_ptr<smol::Model> draft_model;
  std::unique_ptr<smol::BatchTransformer> draft_engine;
  smol::Scheduler scheduler;
  smol::ChatPromptEncoder encoder;
  smol::serve::RequestDefaults defaults;
  smol::serve::EngineThread engine_thread;  // last: stops first
};

// The server's state across threads: the service once loaded, the requests in flight.
struct State {
  server::Options options;
  std::string model_name, model_path;
  std::unique_ptr<Service> service;  // set once, before `ready`
  std::atomic<bool> ready{false}, stopping{false};
  smol::serve::ServerMetrics metrics;
  // The Responses API's stored conversations (set once the options are read).
  std::optional<smol::serve::ResponseStore> responses;

  std::mutex flight_mutex;
  std::condition_variable flight_changed;
  std::size_t in_flight = 0;  // completion requests admitted and not yet answered
  // Requests from their headers to their response's last byte: routes.hpp counts each
  // from the pre-routing handler to httplib's logger, which runs once the response is
  // written. A connection with none is idle (main.cpp's end_idle_connections).
  std::size_t responding = 0;
};

// The two ends of a request's count. A connection's requests run one after another on one
// worker thread, so a thread-local flag pairs them: httplib answers a request it cannot
// parse without the pre-routing handler, and its logger call then counts nothing.
inline thread_local bool counted_request = false;

inline void count_request(State& state) {
  std::lock_guard lock(state.flight_mutex);
  ++state.responding;
  counted_request = true;
}

inline void response_written(State& state) {
  if (!counted_request) return;
  counted_request = false;
  {
    std::lock_guard lock(state.flight_mutex);
    --state.responding;
  }
  state.flight_changed.notify_all();
}

// Holds a place among the requests in flight for as long as it lives.
class FlightTicket {
 public:
  explicit FlightTicket(State& state) : state_(&state) {}
  FlightTicket(const FlightTicket&) = delete;
  FlightTicket& operator=(const FlightTicket&) = delete;
  ~FlightTicket() {
    {
      std::lock_guard lock(state_->flight_mutex);
      --state_->in_flight;
    }
    state_->flight_changed.notify_all();
  }

  // A ticket, or a 503 (counted) when the slots and the queue are full.
  static std::shared_ptr<FlightTicket> admit(State& state);

 private:
  static std::shared_ptr<FlightTicket> take(State& state) {
    std::lock_guard lock(state.flight_mutex);
    if (state.in_flight >= state.options.slots + state.options.queue_limit) return nullptr;
    ++state.in_flight;
    return std::make_shared<FlightTicket>(state);
  }

  State* state_;
};

inline ApiError unavailable(std::string message);

inline std::shared_ptr<FlightTicket> FlightTicket::admit(State& state) {
  auto ticket = take(state);
  if (!ticket) {
    state.metrics.request_rejected();
    throw unavailable("too many requests are waiting; try again shortly");
  }
  return ticket;
}

inline void send_json(httplib::Response& res, const Json& json, int status = 200) {
  res.status = status;
  res.set_content(smol::serve::dump(json), "application/json; charset=utf-8");
}

inline void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, smol::serve::error_body(error), error.status);
}

// Anthropic's routes (messages.hpp) answer in Anthropic's error shape, ollama's in its
// own, the others in OpenAI's.
inline bool anthropic_route(const httplib::Request& req) {
  return req.path.starts_with("/v1/messages");
}
// ollama's routes (ollama.hpp) in ollama's: {"error": message}.
inline bool ollama_route(const httplib::Request& req) {
  return req.path.starts_with("/api/");
}
inline void send_error(httplib::Response& res, const ApiError& error, const httplib::Request& req) {
  if (!anthropic_route(req) && !ollama_route(req)) return send_error(res, error);
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res,
            anthropic_route(req) ? smol::serve::anthropic::error_body(error)
                                 : smol::serve::ollama::error_body(error),
            error.status);
}

inline ApiError unavailable(std::string message) {
  return ApiError(503, std::move(message), "unavailable_error");
}

inline Service& ready_service(State& state) {
  if (state.stopping) throw unavailable("the server is shutting down");
  if (!state.ready) throw unavailable("the model is loading");
  return *state.service;
}

// The service for a route that generates text: refused (501) on an encoder, which has
// no LM head (it serves /v1/embeddings and /v1/rerank only).
inline Service& generating_service(State& state) {
  Service& service = ready_service(state);
  if (!service.model.config().has_lm_head()) {
    throw ApiError(501,
                   "this " + service.model.config().architecture +
                       " model is an encoder: it makes embeddings (/v1/embeddings) or scores "
                       "(/v1/rerank), and generates no text",
                   "not_supported_error");
  }
  return service;
}

// Why the server ended a reply its client still waited for: it is stopping (503), or a
// batch failed (500; the log says why).
inline ApiError cancelled_by_server(const State& state) {
  if (state.stopping) return unavailable("the server stopped before the reply was done");
  return ApiError(500, "the server could not finish the reply (see its log)", "server_error");
}

}  // namespace server
