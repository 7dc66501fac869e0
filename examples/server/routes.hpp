// Every route of smol-server, and the two wrappers each handler goes through: guarded()
// turns exceptions into OpenAI's errors, posted() reads a POST body as JSON whatever its
// Content-Type, under --max-body.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "completions.hpp"
#include "embeddings.hpp"
#include "messages.hpp"
#include "ollama.hpp"
#include "responses.hpp"
#include "service.hpp"
#include "slots.hpp"
#include "web_page.hpp"

namespace server {

inline void tokenize(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
  const Json body = smol::serve::detail::parse_body(req.body);
  const Json* content = smol::serve::detail::field(body, "content");
  if (content == nullptr || !content->is_string()) {
    throw smol::serve::invalid_request("content must be a string", "content");
  }
  const bool add_special = smol::serve::detail::boolean(body, "add_special", false);
  const bool parse_special = smol::serve::detail::boolean(body, "parse_special", true);
  const bool with_pieces = smol::serve::detail::boolean(body, "with_pieces", false);
  const auto ids = service.tokenizer.encode(
      content->get<std::string>(), {.parse_special = parse_special, .add_bos = add_special});
  Json tokens = Json::array();
  for (const smol::TokenId id : ids) {
    if (with_pieces) {
      tokens.push_back(
          {{"id", id}, {"piece", service.tokenizer.token_to_piece(id, {.render_special = true})}});
    } else {
      tokens.push_back(id);
    }
  }
  send_json(res, {{"tokens", std::move(tokens)}});
}

inline void detokenize(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
  const Json body = smol::serve::detail::parse_body(req.body);
  const Json* tokens = smol::serve::detail::field(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    throw smol::serve::invalid_request("tokens must be a list of token ids", "tokens");
  }
  std::vector<smol::TokenId> ids;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const Json& token = (*tokens)[i];
    if (!token.is_number_integer() || token.get<std::int64_t>() < 0 ||
        token.get<std::int64_t>() >= static_cast<std::int64_t>(service.tokenizer.size())) {
      throw smol::serve::invalid_request("tokens[" + std::to_string(i) +
                                             "] is not a token id of this model (0 to " +
                                             std::to_string(service.tokenizer.size() - 1) + ")",
                                         "tokens");
    }
    ids.push_back(static_cast<smol::TokenId>(token.get<std::int64_t>()));
  }
  send_json(res, {{"content", service.tokenizer.decode(ids, {.render_special = true})}});
}

inline Json models_json(const State& state) {
  return {
      {"object", "list"},
      {"data",
       {{{"id", state.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "smol"}}}}};
}

inline Json props_json(State& state) {
  const Service& service = ready_service(state);
  const smol::SamplerSettings& s = service.defaults.sampling;
  // llama-server's names for the drafting defaults (0 and "none" without drafting).
  const std::optional<smol::DraftLengthSettings>& draft = service.defaults.draft;
  return {{"model_alias", state.model_name},
          {"model_path", state.model_path},
          {"n_ctx", service.context_length()},
          {"total_slots", state.options.slots},
          {"default_generation_settings",
           {{"temperature", s.temperature},
            {"top_k", s.top_k},
            {"top_p", s.top_p},
            {"min_p", s.min_p},
            {"repeat_penalty", s.repeat_penalty},
            {"enable_thinking", service.defaults.enable_thinking},
            {"speculative.type", smol::cli::spec_type_name(state.options.speculation.chosen())},
            {"speculative.n_max", draft ? draft->max : 0},
            {"speculative.n_min", draft ? draft->min : 0},
            {"speculative.ngram_size_n",
             state.options.speculation.chosen() == smol::cli::SpecType::ngram_simple
                 ? state.options.speculation.ngram_size
                 : 0}}},
          {"build_info", "smol"}};
}

// Routes every handler through one place that turns exceptions into OpenAI errors.
template <class Handler>
inline httplib::Server::Handler guarded(State& state, Handler handler) {
  return [&state, handler](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(state, req, res);
    } catch (const ApiError& error) {
      // 499: the client went away (nginx's code; nobody reads it), not a bad request.
      if (error.status >= 400 && error.status < 499) state.metrics.request_invalid();
      send_error(res, error, req);
    } catch (const std::exception& error) {
      send_error(res, ApiError(500, error.what(), "server_error"), req);
    }
  };
}

// A POST handler that takes the body as JSON whatever its Content-Type, as llama-server
// does: curl -d sends application/x-www-form-urlencoded by default, and cpp-httplib (a
// compiled library in Debian, so its limit cannot be raised from here) answers such a
// body over 8 KiB with 413 before a plain handler runs. A content-reader handler reads
// the body itself, under the server's --max-body (set_payload_max_length).
template <class Handler>
inline httplib::Server::HandlerWithContentReader posted(State& state, Handler handler) {
  return [&state, handler](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& read) {
    httplib::Request with_body = req;
    const bool complete = read([&with_body](const char* data, std::size_t size) {
      with_body.body.append(data, size);
      return true;
    });
    if (!complete) {  // over --max-body (httplib set 413), or the client went away
      const int status = res.status == 413 ? 413 : 400;
      state.metrics.request_invalid();
      send_error(res,
                 ApiError(status,
                          status == 413 ? "the request body is larger than the server accepts"
                                        : "the request body could not be read",
                          std::string(smol::serve::error_type_for(status))),
                 req);
      return;
    }
    guarded(state, handler)(with_body, res);
  };
}

inline void add_routes(httplib::Server& server, State& state) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(server::kWebPage), "text/html; charset=utf-8");
  });
  server.Get("/health", [&state](const httplib::Request&, httplib::Response& res) {
    if (state.ready && !state.stopping) {
      send_json(res, {{"status", "ok"}});
    } else {
      send_error(res, unavailable(state.stopping ? "the server is shutting down"
                                                 : "the model is loading"));
    }
  });
  for (const char* path : {"/v1/models", "/models"}) {
    server.Get(path, guarded(state, [](State& s, const httplib::Request&, httplib::Response& res) {
                 ready_service(s);
                 send_json(res, models_json(s));
               }));
  }
  server.Get("/props",
             guarded(state, [](State& s, const httplib::Request&, httplib::Response& res) {
               send_json(res, props_json(s));
             }));
  server.Get("/metrics", [&state](const httplib::Request&, httplib::Response& res) {
    smol::serve::Gauges gauges{.slots_total = state.options.slots};
    if (state.ready) {
      gauges.slots_busy = state.service->engine_thread.slots_busy();
      gauges.queue_depth = state.service->engine_thread.queue_depth();
    }
    res.set_content(state.metrics.prometheus(gauges), "text/plain; version=0.0.4");
  });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    server.Post(path, posted(state, chat_completions));
  }
  for (const char* path : {"/v1/completions", "/completions"}) {
    server.Post(path, posted(state, completions));
  }
  server.Post("/v1/messages", posted(state, messages));
  // ollama's API (ollama.hpp).
  server.Post("/api/chat", posted(state, ollama_chat_route));
  server.Post("/api/generate", posted(state, ollama_generate));
  server.Post("/api/embed", posted(state, ollama_embed));
  server.Post("/api/embeddings", posted(state, ollama_legacy_embeddings));
  server.Post("/api/show", posted(state, ollama_show));
  server.Get("/api/version", guarded(state, ollama_version));
  server.Get("/api/tags", guarded(state, ollama_tags));
  server.Get("/api/ps", guarded(state, ollama_ps));
  server.Post("/v1/messages/count_tokens", posted(state, count_message_tokens));
  for (const char* path : {"/v1/responses", "/responses"}) {
    server.Post(path, posted(state, create_response));
  }
  server.Get(R"(/v1/responses/([A-Za-z0-9_.-]+))", guarded(state, get_response));
  server.Delete(R"(/v1/responses/([A-Za-z0-9_.-]+))", guarded(state, delete_response));
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    server.Post(path, posted(state, embeddings));
  }
  server.Post("/embedding", posted(state, native_embedding));
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"}) {
    server.Post(path, posted(state, rerank));
  }
  server.Get("/slots", guarded(state, list_slots));
  server.Post(R"(/slots/(\d{1,9}))", posted(state, slot_action));
  server.Post("/apply-template", posted(state, apply_template));
  server.Post("/tokenize", posted(state, tokenize));
  server.Post("/detokenize", posted(state, detokenize));

  // Every request is counted until its response is written (service.hpp's responding).
  server.set_logger(
      [&state](const httplib::Request&, const httplib::Response&) { response_written(state); });
  // The API key guards everything but the page and the health check: as a bearer token,
  // or in x-api-key (Anthropic's header, which its clients send).
  server.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    count_request(state);
    if (state.options.api_key.empty() || req.path == "/" || req.path == "/health") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (req.get_header_value("Authorization") == "Bearer " + state.options.api_key ||
        req.get_header_value("x-api-key") == state.options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    state.metrics.request_invalid();
    send_error(res,
               ApiError(401, "invalid API key: send Authorization: Bearer KEY (or x-api-key: KEY)",
                        "authentication_error"),
               req);
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (404, 413 for a body over --max-body, 400 for bad HTTP) get
  // OpenAI's error body too.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 404) message = "no such endpoint: " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is larger than the server accepts";
    send_error(res,
               ApiError(res.status, message, std::string(smol::serve::error_type_for(res.status))),
               req);
  });
}

}  // namespace server
