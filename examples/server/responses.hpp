// POST /v1/responses (OpenAI's Responses API: serve/openai_responses.hpp), and GET and
// DELETE /v1/responses/{id}: a request translated into the chat request it means (after
// the conversation stored under its previous_response_id) and run as chat_completions runs
// one (completions.hpp), its reply written back as a response object or its events, and
// kept, unless `store: false`, for the next request that names it (State::responses).
#pragma once

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "completions.hpp"
#include "service.hpp"
#include "smol/serve/openai_responses.hpp"
#include "smol/serve/response_store.hpp"

namespace server {

namespace responses = smol::serve::responses;

// Keeps a finished response and its conversation for previous_response_id.
struct ResponseKeeper {
  smol::serve::ResponseStore* store = nullptr;  // null: `store: false`
  std::shared_ptr<const responses::ResponsesRequest> request;
  std::shared_ptr<const responses::Ordered> earlier;

  void keep(const Json& response) const {
    if (store == nullptr) return;
    store->put(response["id"].get<std::string>(),
               {responses::conversation_items(*earlier, *request, response), response});
  }
};

// answer()'s Stream for one streamed response.
class ResponseStreams {
 public:
  ResponseStreams(const smol::serve::ReplyHeader& header, ResponseKeeper keeper,
                  std::shared_ptr<const smol::serve::ToolRequest> tools)
      : stream_(header, keeper.request, std::move(tools)), keeper_(std::move(keeper)) {}
  std::string first() { return stream_.first(); }
  void logprob(std::size_t, const smol::TokenLogprob&) {}
  std::string piece(std::size_t, const smol::TextPiece& piece) { return stream_.piece(piece); }
  std::string finish(std::size_t, const smol::GenerationResult& result) {
    Json response;
    std::string events = stream_.finish(result, response);
    keeper_.keep(response);
    return events;
  }
  std::string close(const std::vector<smol::GenerationResult>&) const { return {}; }
  static std::string error(const ApiError& error) {
    return responses::ResponseStream::error(error);
  }

 private:
  responses::ResponseStream stream_;
  ResponseKeeper keeper_;
};

// The stored response `id` names, or the client's 404.
inline smol::serve::ResponseStore::Entry stored_response(State& state, const std::string& id,
                                                         const char* param) {
  std::optional<smol::serve::ResponseStore::Entry> entry = state.responses->get(id);
  if (!entry) {
    throw ApiError(404,
                   "no stored response has the id '" + id +
                       "': it was never stored (store: false), or was evicted (the server "
                       "keeps the last --store-responses), or the server restarted",
                   "invalid_request_error", param);
  }
  return std::move(*entry);
}

inline void create_response(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  auto request =
      std::make_shared<const responses::ResponsesRequest>(responses::read_request(req.body));
  auto earlier = std::make_shared<responses::Ordered>(responses::Ordered::array());
  if (request->previous_response_id) {
    *earlier = stored_response(state, *request->previous_response_id, "previous_response_id").items;
  }
  const responses::Translation translation = responses::translate(*request, *earlier);
  for (const std::string& tool : translation.dropped_tools) {
    log("/v1/responses: " + tool + " is a tool the API's host runs; smol has none: not offered");
  }
  smol::serve::ChatCompletionRequest chat =
      smol::serve::parse_chat_request(translation.chat, service.defaults);
  log_unenforced(chat);
  smol::serve::ContextShift shift;
  std::vector<smol::TokenId> prompt = chat_prompt(state, service, chat, "input", shift, res);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, chat.params, client);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ReplyHeader header{next_reply_id("resp_"), unix_time(), state.model_name};
  const ResponseKeeper keeper{request->store ? &*state.responses : nullptr, request, earlier};
  std::shared_ptr<const smol::serve::ToolRequest> tools = chat.tools;
  std::optional<ResponseStreams> stream;
  if (chat.params.stream) stream.emplace(header, keeper, tools);
  std::vector<smol::GenerationRequest> requests =
      chat_choice_requests(service, chat, std::move(prompt), std::move(grammar));
  answer(state, service, client, res, std::move(ticket), std::move(requests), "input",
         std::move(stream),
         [header, keeper, tools](const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
                                 const std::vector<smol::GenerationResult>& results) {
           smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
           std::size_t reasoning_tokens = 0;
           for (const auto& piece : pieces[0]) {
             text.add({piece.text, piece.kind});
             if (piece.kind == smol::PieceKind::thinking) ++reasoning_tokens;
           }
           Json response = responses::finished_response(header, *keeper.request, text, results[0],
                                                        tools.get(), reasoning_tokens);
           keeper.keep(response);
           return response;
         });
}

// GET /v1/responses/{id}: a stored response as it was returned.
inline void get_response(State& state, const httplib::Request& req, httplib::Response& res) {
  send_json(res, stored_response(state, std::string(req.matches[1]), "response_id").response);
}

// DELETE /v1/responses/{id}.
inline void delete_response(State& state, const httplib::Request& req, httplib::Response& res) {
  const std::string id = std::string(req.matches[1]);
  stored_response(state, id, "response_id");
  state.responses->erase(id);
  send_json(res, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace server
