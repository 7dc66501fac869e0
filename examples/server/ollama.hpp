// ollama's API (serve/ollama_api.hpp) on smol-server's one model: /api/chat and
// /api/generate run as chat_completions and completions run their requests
// (completions.hpp), their replies in ollama's shapes, streamed as NDJSON by default;
// /api/embed as /v1/embeddings (with --embeddings), and the legacy /api/embeddings; /api/tags,
// /api/show, /api/ps and /api/version describe the model and the server. The request's `model` is
// not checked: this server has one model, as for OpenAI's routes.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "completions.hpp"
#include "embeddings.hpp"
#include "service.hpp"
#include "smol/serve/ollama_api.hpp"

namespace server {

// answer()'s Stream for one reply in NDJSON (ollama's streaming).
class OllamaStreams {
 public:
  static constexpr const char* kContentType = "application/x-ndjson";
  // No keep-alive lines: ollama's clients parse every line as JSON.
  static constexpr std::string_view kKeepalive = "";

  OllamaStreams(smol::serve::ollama::ReplyInfo info,
                std::shared_ptr<const smol::serve::ToolRequest> tools,
                std::chrono::steady_clock::time_point started)
      : stream_(std::move(info), std::move(tools), started) {}
  std::string first() const { return {}; }
  void logprob(std::size_t, const smol::TokenLogprob&) {}
  std::string piece(std::size_t, const smol::TextPiece& piece) { return stream_.piece(piece); }
  std::string finish(std::size_t, const smol::GenerationResult& result) {
    return stream_.finish(result);
  }
  std::string close(const std::vector<smol::GenerationResult>&) const { return {}; }
  static std::string error(const ApiError& error) {
    return smol::serve::ollama::NdjsonStream::error(error);
  }

 private:
  smol::serve::ollama::NdjsonStream stream_;
};

// A chat request (from /api/chat, or /api/generate without raw) run and answered in
// ollama's shape: a message (chat) or a response (generate).
inline void ollama_chat(State& state, Service& service, const httplib::Request& req,
                        httplib::Response& res, const std::string& openai, bool chat_reply) {
  const auto started = std::chrono::steady_clock::now();
  smol::serve::ChatCompletionRequest chat =
      smol::serve::parse_chat_request(openai, service.defaults);
  log_unenforced(chat);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, chat.params, client);
  smol::serve::ContextShift shift;
  std::vector<smol::TokenId> prompt = chat_prompt(state, service, chat, "messages", shift, res);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ollama::ReplyInfo info{
      state.model_name, smol::serve::ollama::timestamp(std::chrono::system_clock::now()),
      chat_reply};
  std::shared_ptr<const smol::serve::ToolRequest> tools = chat.tools;
  std::optional<OllamaStreams> stream;
  if (chat.params.stream) stream.emplace(info, tools, started);
  std::vector<smol::GenerationRequest> requests =
      chat_choice_requests(service, chat, std::move(prompt), std::move(grammar));
  answer(state, service, client, res, std::move(ticket), std::move(requests), "messages",
         std::move(stream),
         [info, tools, started](const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
                                const std::vector<smol::GenerationResult>& results) {
           smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
           for (const auto& piece : pieces[0]) text.add({piece.text, piece.kind});
           const double seconds =
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
           return smol::serve::ollama::reply_json(info, text, results[0], tools.get(), seconds);
         });
}

// POST /api/chat.
inline void ollama_chat_route(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  ollama_chat(state, service, req, res, smol::serve::ollama::chat_request_text(req.body), true);
}

// POST /api/generate: the prompt through the chat template, or with raw: true as it is.
inline void ollama_generate(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  const smol::serve::ollama::GenerateRequest request =
      smol::serve::ollama::generate_request(req.body);
  if (!request.raw) return ollama_chat(state, service, req, res, request.openai, false);
  const auto started = std::chrono::steady_clock::now();
  smol::serve::TextCompletionRequest completion =
      smol::serve::parse_completion_request(request.openai, service.defaults);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, completion.params, client);
  std::vector<smol::TokenId> prompt = service.tokenizer.encode(completion.prompt);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ollama::ReplyInfo info{
      state.model_name, smol::serve::ollama::timestamp(std::chrono::system_clock::now()), false};
  std::optional<OllamaStreams> stream;
  if (completion.params.stream) stream.emplace(info, nullptr, started);
  answer(state, service, client, res, std::move(ticket),
         choice_requests(service, completion.params, std::move(prompt), std::move(grammar)),
         "prompt", std::move(stream),
         [info, started](const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
                         const std::vector<smol::GenerationResult>& results) {
           smol::serve::ReplyText text(smol::serve::ReasoningFormat::folded);
           for (const auto& piece : pieces[0]) text.add({piece.text, piece.kind});
           const double seconds =
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
           return smol::serve::ollama::reply_json(info, text, results[0], nullptr, seconds);
         });
}

// POST /api/embed: one unit-length vector per input, as ollama gives them.
inline void ollama_embed(State& state, const httplib::Request& req, httplib::Response& res) {
  const auto started = std::chrono::steady_clock::now();
  smol::Embedder& embedder = ready_embedder(state);
  require_reranker(embedder, false);
  if (embedder.pooling() == smol::Pooling::none) {
    throw smol::serve::invalid_request(
        "this model pools nothing (--pooling none): /api/embed needs one vector per input");
  }
  const smol::serve::ollama::EmbedRequest request = smol::serve::ollama::embed_request(req.body);
  if (request.dimensions && *request.dimensions > embedder.width()) {
    throw smol::serve::invalid_request(
        "dimensions is over the model's " + std::to_string(embedder.width()) + " values",
        "dimensions");
  }
  const Service& service = ready_service(state);
  std::vector<std::vector<smol::TokenId>> inputs;
  std::size_t tokens = 0;
  for (const std::string& text : request.inputs) {
    inputs.push_back(smol::serve::detail::embedding_tokens(service.tokenizer, text));
    tokens += inputs.back().size();
  }
  Json vectors = Json::array();
  for (smol::Embedding& result : run_embeddings(state, inputs)) {
    std::vector<float>& values = result.values;
    if (request.dimensions) values.resize(*request.dimensions);
    smol::normalize_embedding(values, 2);  // ollama's vectors have unit length
    vectors.push_back(std::move(values));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  send_json(res, {{"model", state.model_name},
                  {"embeddings", std::move(vectors)},
                  {"total_duration", static_cast<std::int64_t>(seconds * 1e9)},
                  {"load_duration", 0},
                  {"prompt_eval_count", tokens}});
}

// POST /api/embeddings (ollama's legacy endpoint): {"embedding": [...]}, unnormalized.
inline void ollama_legacy_embeddings(State& state, const httplib::Request& req,
                                     httplib::Response& res) {
  smol::Embedder& embedder = ready_embedder(state);
  require_reranker(embedder, false);
  if (embedder.pooling() == smol::Pooling::none) {
    throw smol::serve::invalid_request(
        "this model pools nothing (--pooling none): /api/embeddings needs one vector");
  }
  const std::string prompt = smol::serve::ollama::legacy_embedding_prompt(req.body);
  const std::vector<std::vector<smol::TokenId>> inputs = {
      smol::serve::detail::embedding_tokens(ready_service(state).tokenizer, prompt)};
  send_json(res, {{"embedding", run_embeddings(state, inputs).at(0).values}});
}

// The model as ollama describes one: its family, size in parameters and main weight type.
inline Json ollama_details(const Service& service) {
  const smol::gguf::GgufFile& file = service.model.file();
  std::uint64_t parameters = 0;
  std::map<std::string, std::uint64_t> bytes_by_type;
  for (const smol::gguf::TensorInfo& tensor : file.tensors()) {
    parameters += tensor.elements();
    if (tensor.n_dims >= 2)
      bytes_by_type[std::string(smol::ggml_type_name(tensor.type))] += tensor.bytes;
  }
  std::string main_type = "F32";
  std::uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) most = bytes, main_type = type;
  }
  char size[32];
  if (parameters >= 1'000'000'000) {
    std::snprintf(size, sizeof(size), "%.1fB", static_cast<double>(parameters) / 1e9);
  } else {
    std::snprintf(size, sizeof(size), "%.1fM", static_cast<double>(parameters) / 1e6);
  }
  const std::string family = service.model.config().architecture;
  return {{"parent_model", ""},   {"format", "gguf"},       {"family", family},
          {"families", {family}}, {"parameter_size", size}, {"quantization_level", main_type}};
}

// ollama's entry for the model in /api/tags and /api/ps. The digest is left empty:
// ollama's is the SHA-256 of its blob store's copy, and smol does not hash model files.
inline Json ollama_model_entry(const State& state, const Service& service) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(state.model_path, error);
  const auto modified = std::filesystem::last_write_time(state.model_path, error);
  // The file clock's time as the system clock's (libstdc++ 12 has no clock_cast).
  const auto now = std::chrono::system_clock::now();
  const auto when = error ? now
                          : now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                      modified - std::filesystem::file_time_type::clock::now());
  return {{"name", state.model_name},
          {"model", state.model_name},
          {"modified_at", smol::serve::ollama::timestamp(when)},
          {"size", error ? std::uintmax_t{0} : bytes},
          {"digest", ""},
          {"details", ollama_details(service)}};
}

// What the model can do, in ollama's words.
inline Json ollama_capabilities(const Service& service) {
  Json out = Json::array();
  if (service.model.config().has_lm_head()) {
    out.push_back("completion");
    out.push_back("tools");  // in the template's syntax, or smol's generic JSON format
  }
  if (service.embedder) out.push_back("embedding");
  return out;
}

// GET /api/version.
inline void ollama_version(State&, const httplib::Request&, httplib::Response& res) {
  send_json(res, {{"version", smol::serve::ollama::kApiVersion}});
}

// GET /api/tags: the one model.
inline void ollama_tags(State& state, const httplib::Request&, httplib::Response& res) {
  send_json(res, {{"models", {ollama_model_entry(state, ready_service(state))}}});
}

// GET /api/ps: the one model, loaded until the server stops.
inline void ollama_ps(State& state, const httplib::Request&, httplib::Response& res) {
  Json entry = ollama_model_entry(state, ready_service(state));
  entry["expires_at"] = "0001-01-01T00:00:00Z";
  entry["size_vram"] = 0;
  send_json(res, {{"models", {std::move(entry)}}});
}

// POST /api/show: the model's details, template and hyperparameters.
inline void ollama_show(State& state, const httplib::Request&, httplib::Response& res) {
  const Service& service = ready_service(state);
  const smol::ModelConfig& c = service.model.config();
  const std::string arch = c.architecture;
  send_json(
      res,
      {{"modelfile", "FROM " + state.model_path + "\n"},
       {"parameters", ""},
       {"template",
        service.model.file().get_optional<std::string>("tokenizer.chat_template").value_or("")},
       {"details", ollama_details(service)},
       {"model_info",
        {{"general.architecture", arch},
         {arch + ".block_count", c.n_layer},
         {arch + ".embedding_length", c.n_embd},
         {arch + ".context_length", c.n_ctx_train},
         {arch + ".attention.head_count", c.n_head},
         {arch + ".attention.head_count_kv", c.n_head_kv}}},
       {"capabilities", ollama_capabilities(service)}});
}

}  // namespace server
