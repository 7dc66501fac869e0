// Reranking (POST /v1/rerank, /rerank): a query and documents in, each document's
// relevance out, in the Jina/Cohere shape llama-server answers in.
//
// Each (query, document) pair is one input of the reranker, made as llama-server's
// format_prompt_rerank makes it: where the file has a rerank template
// (tokenizer.chat_template.rerank: Qwen3-Reranker's instruction, query and document in
// its chat format), that text with {query} and {document} put in, its special tokens
// read as such; else [CLS] query [SEP] document [SEP] for a WordPiece vocabulary (what
// BERT cross-encoders were trained on), or bos, the query, eos, the document, eos, each
// as the vocabulary adds them. The score is the classifier's first output as it comes
// (a cross-encoder's logit; a Qwen3-Reranker's p(yes)), llama-server's relevance_score,
// the results sorted best first and cut to top_n.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_embeddings.hpp"
#include "smol/serve/openai_request.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::serve {

struct RerankRequest {
  std::string query;
  std::vector<std::string> documents;
  std::vector<std::vector<TokenId>> inputs;  // one per document: the pair's tokens
  std::optional<std::size_t> top_n;
  bool return_documents = false;
  std::size_t tokens() const {
    std::size_t total = 0;
    for (const auto& input : inputs) total += input.size();
    return total;
  }
};

// The file's rerank template (the named chat template "rerank"), if it has one.
inline std::optional<std::string> rerank_template(const gguf::GgufFile& file) {
  return file.get_optional<std::string>("tokenizer.chat_template.rerank");
}

// Every `from` in `text` replaced by `to`, left to right, the replacement not searched
// again (llama.cpp's string_replace_all).
inline std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The reranker's input for one pair (see the top of this file). `prompt_template`: the
// file's rerank template, empty if it has none.
inline std::vector<TokenId> rerank_input(const Tokenizer& tokenizer, std::string_view query,
                                         std::string_view document,
                                         std::string_view prompt_template = {}) {
  if (!prompt_template.empty()) {  // {query} first, then {document}, as llama-server
    const std::string prompt = replace_all(
        replace_all(std::string(prompt_template), "{query}", query), "{document}", document);
    return tokenizer.encode(prompt, {.parse_special = true, .add_bos = false});
  }
  const Vocabulary& vocab = tokenizer.vocabulary();
  const EncodeOptions plain{.parse_special = false, .add_bos = false};
  std::vector<TokenId> ids;
  if (vocab.add_bos && vocab.bos_id) ids.push_back(*vocab.bos_id);
  const std::vector<TokenId> q = tokenizer.encode(query, plain);
  ids.insert(ids.end(), q.begin(), q.end());
  // WordPiece's separator, else eos (llama-server falls back to the separator too).
  const std::optional<TokenId> end = vocab.model == "bert"
                                         ? vocab.separator_id
                                         : (vocab.eos_id ? vocab.eos_id : vocab.separator_id);
  const bool ends = vocab.model == "bert" || vocab.add_eos;
  if (ends && end) ids.push_back(*end);
  const std::vector<TokenId> d = tokenizer.encode(document, plain);
  ids.insert(ids.end(), d.begin(), d.end());
  if (ends && end) ids.push_back(*end);
  return ids;
}

// Throws ApiError (400) naming the field at fault. `prompt_template`: as rerank_input's.
inline RerankRequest parse_rerank_request(std::string_view body, const Tokenizer& tokenizer,
                                          std::string_view prompt_template = {}) {
  return detail::reading_json([&] {
    const Json json = detail::parse_body(body);
    RerankRequest request;
    const Json* query = detail::field(json, "query");
    if (query == nullptr || !query->is_string() || query->get_ref<const std::string&>().empty()) {
      throw invalid_request("query must be a non-empty string", "query");
    }
    request.query = query->get<std::string>();
    // llama-server takes "texts" (TEI's name) for the documents too.
    const char* name = detail::field(json, "documents") != nullptr ? "documents" : "texts";
    const Json* documents = detail::field(json, name);
    if (documents == nullptr || !documents->is_array() || documents->empty()) {
      throw invalid_request("documents must be a non-empty list of strings", "documents");
    }
    if (documents->size() > kMaxEmbeddingInputs) {
      throw invalid_request("documents holds " + std::to_string(documents->size()) +
                                " documents, over the " + std::to_string(kMaxEmbeddingInputs) +
                                " one request may have",
                            "documents");
    }
    for (std::size_t i = 0; i < documents->size(); ++i) {
      const Json& document = (*documents)[i];
      // Cohere's clients may send {"text": ...} objects.
      const Json* text = document.is_object() ? detail::field(document, "text") : &document;
      if (text == nullptr || !text->is_string()) {
        throw invalid_request("documents[" + std::to_string(i) + "] must be a string", "documents");
      }
      request.documents.push_back(text->get<std::string>());
      request.inputs.push_back(
          rerank_input(tokenizer, request.query, request.documents.back(), prompt_template));
      if (request.tokens() > kMaxEmbeddingTokens) {
        throw invalid_request(
            "the pairs hold over " + std::to_string(kMaxEmbeddingTokens) + " tokens", "documents");
      }
    }
    if (detail::field(json, "top_n") != nullptr) {
      request.top_n = static_cast<std::size_t>(
          detail::integer_in(json, "top_n", 1, static_cast<std::int64_t>(kMaxEmbeddingInputs), 1));
    }
    request.return_documents = detail::boolean(json, "return_documents", false);
    return request;
  });
}

// The results, best first: {index, relevance_score} (and the document's text when
// asked), cut to top_n; usage counts every pair's tokens.
inline Json rerank_reply(const std::string& model, std::span<const float> scores,
                         const RerankRequest& request) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  if (request.top_n && *request.top_n < order.size()) order.resize(*request.top_n);
  Json results = Json::array();
  for (const std::size_t i : order) {
    Json result = {{"index", i}, {"relevance_score", scores[i]}};
    if (request.return_documents) result["document"] = {{"text", request.documents[i]}};
    results.push_back(std::move(result));
  }
  const std::size_t tokens = request.tokens();
  return {{"model", model},
          {"object", "list"},
          {"results", std::move(results)},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

}  // namespace smol::serve
