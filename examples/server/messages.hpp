// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API
// (serve/anthropic_messages.hpp), translated into the chat request it means and run as
// chat_completions runs one (completions.hpp), its reply written back in Anthropic's
// shapes. One choice per request, as Anthropic's API has.
#pragma once

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "completions.hpp"
#include "service.hpp"
#include "smol/serve/anthropic_messages.hpp"

namespace server {

// answer()'s Stream for one streamed message.
class MessageStreams {
 public:
  MessageStreams(const smol::serve::ReplyHeader& header, std::size_t prompt_tokens,
                 std::shared_ptr<const smol::serve::ToolRequest> tools)
      : stream_(header, prompt_tokens, std::move(tools)) {}
  std::string first() const { return stream_.first(); }
  void logprob(std::size_t, const smol::TokenLogprob&) {}
  std::string piece(std::size_t, const smol::TextPiece& piece) { return stream_.piece(piece); }
  std::string finish(std::size_t, const smol::GenerationResult& result) {
    return stream_.finish(result);
  }
  std::string close(const std::vector<smol::GenerationResult>&) const { return {}; }
  static std::string error(const ApiError& error) {
    return smol::serve::anthropic::MessageStream::error(error);
  }

 private:
  smol::serve::anthropic::MessageStream stream_;
};

// The chat request a Messages request means, its prompt encoded.
struct TranslatedMessages {
  smol::serve::ChatCompletionRequest chat;
  std::vector<smol::TokenId> prompt;
};

inline TranslatedMessages translate_messages(State& state, Service& service,
                                             const httplib::Request& req, httplib::Response& res,
                                             bool count_only) {
  TranslatedMessages out;
  out.chat = smol::serve::parse_chat_request(
      smol::serve::anthropic::chat_request_text(req.body, count_only), service.defaults);
  smol::serve::ContextShift shift;
  out.prompt = chat_prompt(state, service, out.chat, "messages", shift, res, !count_only);
  return out;
}

inline void messages(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  TranslatedMessages request = translate_messages(state, service, req, res, /*count_only=*/false);
  smol::serve::ChatCompletionRequest& chat = request.chat;
  log_unenforced(chat);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, chat.params, client);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ReplyHeader header{next_reply_id("msg_"), unix_time(), state.model_name};
  std::shared_ptr<const smol::serve::ToolRequest> tools = chat.tools;
  std::optional<MessageStreams> stream;
  if (chat.params.stream) stream.emplace(header, request.prompt.size(), tools);
  std::vector<smol::GenerationRequest> requests =
      chat_choice_requests(service, chat, std::move(request.prompt), std::move(grammar));
  answer(state, service, client, res, std::move(ticket), std::move(requests), "messages",
         std::move(stream),
         [header, tools](const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
                         const std::vector<smol::GenerationResult>& results) {
           smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
           for (const auto& piece : pieces[0]) text.add({piece.text, piece.kind});
           return smol::serve::anthropic::message_json(header, text, results[0], tools.get());
         });
}

// The prompt's tokens as /v1/messages would read them: {"input_tokens": N}.
inline void count_message_tokens(State& state, const httplib::Request& req,
                                 httplib::Response& res) {
  Service& service = ready_service(state);
  const TranslatedMessages request =
      translate_messages(state, service, req, res, /*count_only=*/true);
  send_json(res, {{"input_tokens", request.prompt.size()}});
}

}  // namespace server
