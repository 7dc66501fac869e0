// POST /v1/embeddings (OpenAI's shape) and /embedding (llama-server's): the model's
// embeddings (model/embedder.hpp) of the request's inputs, with --embeddings; and
// POST /v1/rerank (Jina's and Cohere's shape, as llama-server answers it): a reranker's
// scores of (query, document) pairs, with --reranking.
//
// The inputs run on the engine thread between the scheduler's steps (EngineThread::call):
// one model, its weights and threads, serves chat and embeddings, and no pass of one
// runs beside a pass of the other. A request's inputs go through in as few passes as
// the batch (-b) holds; an input longer than one pass is refused by index, as
// llama-server refuses one longer than its physical batch.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "service.hpp"
#include "smol/model/embedder.hpp"
#include "smol/serve/openai_embeddings.hpp"
#include "smol/serve/rerank.hpp"

namespace server {

inline smol::Embedder& ready_embedder(State& state) {
  Service& service = ready_service(state);
  if (!service.embedder) {
    throw ApiError(501, "this server does not compute embeddings: start it with --embeddings",
                   "not_supported_error");
  }
  return *service.embedder;
}

// The inputs' embeddings, as the Embedder gives them (pooled, per token, or scores).
inline std::vector<smol::Embedding> run_embeddings(
    State& state, const std::vector<std::vector<smol::TokenId>>& inputs) {
  Service& service = ready_service(state);
  smol::Embedder& embedder = ready_embedder(state);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() > embedder.max_tokens()) {
      throw smol::serve::invalid_request(
          "input " + std::to_string(i) + " has " + std::to_string(inputs[i].size()) +
              " tokens, over the " + std::to_string(embedder.max_tokens()) +
              " one pass holds (the server's -b, and the model's context)",
          "input");
    }
  }
  auto ticket = FlightTicket::admit(state);
  return service.engine_thread.call([&](smol::Scheduler&) { return embedder.embed(inputs); });
}

// A reranker (rank pooling) has scores, not embeddings; an embedder has no scores.
inline void require_reranker(const smol::Embedder& embedder, bool wanted) {
  if ((embedder.pooling() == smol::Pooling::rank) == wanted) return;
  if (wanted) {
    throw ApiError(501,
                   "this server does not rerank: start it with --reranking on a reranker's file "
                   "(one with a classifier head)",
                   "not_supported_error");
  }
  throw smol::serve::invalid_request(
      "this server runs a reranker (--reranking): it scores pairs at /v1/rerank and makes no "
      "embeddings");
}

// POST /v1/embeddings: one vector per input, pooled as the model pools.
inline void embeddings(State& state, const httplib::Request& req, httplib::Response& res) {
  smol::Embedder& embedder = ready_embedder(state);
  require_reranker(embedder, false);
  if (embedder.pooling() == smol::Pooling::none) {
    throw smol::serve::invalid_request(
        "the model pools nothing (pooling none: a vector per token), which OpenAI's embeddings "
        "have no shape for; use /embedding, or start the server with --pooling mean|cls|last");
  }
  const smol::serve::EmbeddingRequest request =
      smol::serve::parse_embedding_request(req.body, ready_service(state).tokenizer);
  std::vector<std::vector<float>> vectors;
  for (smol::Embedding& embedding : run_embeddings(state, request.inputs)) {
    vectors.push_back(smol::serve::finish_embedding(std::move(embedding.values), request));
  }
  send_json(res, smol::serve::embeddings_reply(state.model_name, vectors, request));
}

// POST /embedding, llama-server's own: `content` (or `input`), and for each input
// {index, embedding: [rows]}: one row when the model pools (normalized as embd_normalize
// says), every token's row, as the model computes it, with pooling none.
inline void native_embedding(State& state, const httplib::Request& req, httplib::Response& res) {
  smol::Embedder& embedder = ready_embedder(state);
  require_reranker(embedder, false);
  const Json body = smol::serve::detail::parse_body(req.body);
  const char* input = smol::serve::detail::field(body, "content") != nullptr ? "content" : "input";
  const smol::serve::EmbeddingRequest request =
      smol::serve::parse_embedding_request(req.body, ready_service(state).tokenizer, input);
  const std::size_t width = embedder.width();
  Json reply = Json::array();
  const std::vector<smol::Embedding> results = run_embeddings(state, request.inputs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    Json rows = Json::array();
    if (embedder.pooling() == smol::Pooling::none) {
      for (std::size_t r = 0; r < results[i].rows; ++r) {
        rows.push_back(std::vector<float>(results[i].values.begin() + r * width,
                                          results[i].values.begin() + (r + 1) * width));
      }
    } else {
      rows.push_back(smol::serve::finish_embedding(results[i].values, request));
    }
    reply.push_back({{"index", i}, {"embedding", std::move(rows)}});
  }
  send_json(res, reply);
}

// POST /v1/rerank: each document's relevance to the query, best first.
inline void rerank(State& state, const httplib::Request& req, httplib::Response& res) {
  require_reranker(ready_embedder(state), true);
  const Service& service = ready_service(state);
  const smol::serve::RerankRequest request =
      smol::serve::parse_rerank_request(req.body, service.tokenizer, service.rerank_template);
  std::vector<float> scores;
  for (const smol::Embedding& result : run_embeddings(state, request.inputs)) {
    scores.push_back(result.values.at(0));
  }
  send_json(res, smol::serve::rerank_reply(state.model_name, scores, request));
}

}  // namespace server
