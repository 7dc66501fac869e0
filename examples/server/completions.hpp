// POST /v1/chat/completions and /v1/completions: a request parsed, its grammar compiled,
// its prompt made, its choices submitted to the engine thread, and the reply answered in
// one piece or streamed (answer()).
#pragma once

#include <httplib.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client_watch.hpp"
#include "service.hpp"
#include "smol/serve/context_shift.hpp"
#include "smol/serve/reply_channel.hpp"
#include "streams.hpp"

namespace server {

inline std::int64_t unix_time() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

inline std::string next_reply_id(std::string_view prefix) {
  static std::atomic<std::uint64_t> counter{0};
  return std::string(prefix) + std::to_string(unix_time()) + "-" + std::to_string(++counter);
}

// The request's grammar compiled (TokenMaskCache: on this connection's thread, within
// the grammar's budgets), or null without one. A grammar over its budgets, or one no token
// can begin, is the client's error (400, naming the field it came from); the compilation
// stops when the client hangs up or the server stops.
inline std::shared_ptr<smol::TokenMaskTable> compile_grammar(
    State& state, Service& service, const smol::serve::CompletionParams& params,
    server::ClientWatch& client) {
  if (!params.output) return nullptr;
  const smol::CancelCheck cancel([&] { return state.stopping.load() || client.gone(); });
  try {
    return service.masks.table(*params.output, cancel);
  } catch (const smol::Cancelled&) {
    if (state.stopping) throw unavailable("the server is shutting down");
    log("a grammar's compilation stopped: its client went away");
    throw ApiError(499, "the client closed the connection", "invalid_request_error");
  } catch (const smol::Error& error) {
    throw smol::serve::invalid_request(params.output->param + ": " + error.what(),
                                       params.output->param);
  }
}

// What a completion request becomes: the prompt and the scheduler's settings.
inline smol::GenerationRequest generation_request(Service& service,
                                                  const smol::serve::CompletionParams& params,
                                                  std::vector<smol::TokenId> prompt,
                                                  std::shared_ptr<smol::TokenMaskTable> grammar) {
  smol::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling = params.sampling;
  try {
    smol::check_logit_bias(request.sampling, service.tokenizer.size());
  } catch (const smol::Error& error) {
    throw smol::serve::invalid_request(error.what(), "logit_bias");
  }
  if (request.sampling.penalty_window < 0) {  // -1: the whole context
    request.sampling.penalty_window =
        static_cast<int>(std::min<std::size_t>(service.context_length(), INT_MAX));
  }
  request.max_tokens = params.max_tokens;
  request.stop_strings = params.stop;
  request.ignore_eos = params.ignore_eos;
  request.logprobs = params.logprobs;
  request.post_sampling_probs = params.post_sampling_probs;
  request.draft = params.draft;
  // A grammar may take the template's tool markers (the mask table's trie spells them):
  // the reply shows them too, so that its text is the grammar's.
  if (grammar) request.spelled_tokens = service.tool_markers;
  request.grammar = std::move(grammar);
  request.grammar_trigger = params.output_trigger;
  return request;
}

// Submits; a prompt that can never fit is the client's error (400), named as such.
inline smol::RequestId submit(Service& service, smol::GenerationRequest request,
                              const char* param) {
  std::optional<smol::RequestId> id;
  try {
    id = service.engine_thread.submit(std::move(request));
  } catch (const smol::Error& error) {
    throw smol::serve::invalid_request(error.what(), param);
  }
  if (!id) throw unavailable("the server is shutting down");
  return *id;
}

// The requests of a reply's choices (n): the same, but that each samples on its own,
// choice i with seed + i when the request gave a seed (else each draws its own).
inline std::vector<smol::GenerationRequest> choice_requests(
    Service& service, const smol::serve::CompletionParams& params,
    std::vector<smol::TokenId> prompt, std::shared_ptr<smol::TokenMaskTable> grammar) {
  std::vector<smol::GenerationRequest> requests(
      params.n, generation_request(service, params, std::move(prompt), std::move(grammar)));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& seed = requests[i].sampling.seed;
    if (seed) *seed += i;
  }
  return requests;
}

// The common end of both endpoints: submits the choices' requests, waits for their
// replies and answers in one piece, or streams them. `Stream` turns pieces into SSE text
// (first(), logprob(), piece() and finish() per choice, close() after the last); `reply`
// builds the non-streaming body from each choice's pieces and result.
template <class Stream, class Reply>
inline void answer(State& state, Service& service, server::ClientWatch& client,
                   httplib::Response& res, std::shared_ptr<FlightTicket> ticket,
                   std::vector<smol::GenerationRequest> requests, const char* prompt_param,
                   std::optional<Stream> stream, Reply reply) {
  auto channel = std::make_shared<smol::serve::ReplyChannel>();
  const std::size_t n = requests.size();
  auto ids = std::make_shared<std::vector<smol::RequestId>>();
  const auto cancel_all = [&service](const std::vector<smol::RequestId>& running) {
    for (const smol::RequestId id : running) service.engine_thread.cancel(id);
  };
  for (std::size_t i = 0; i < n; ++i) {
    smol::GenerationRequest& request = requests[i];
    smol::serve::ReplyChannel::connect(channel, request, /*stream_logprobs=*/stream.has_value(), i);
    // Counted when the engine ends it, whether or not anyone still reads the channel.
    request.on_done =
        [&state, i, to_channel = std::move(request.on_done)](const smol::GenerationResult& result) {
          state.metrics.request_finished(result, /*first_choice=*/i == 0);
          to_channel(result);
        };
    try {
      ids->push_back(submit(service, std::move(request), prompt_param));
    } catch (...) {
      cancel_all(*ids);  // choices already queued: nobody will read them
      throw;
    }
  }
  state.metrics.request_started();

  if (!stream) {
    std::vector<std::vector<smol::serve::ReplyEvent>> pieces(n);
    std::vector<smol::GenerationResult> results(n);
    for (std::size_t done = 0; done < n;) {
      std::optional<smol::serve::ReplyEvent> event = channel->next(kPollInterval);
      // Nobody will read the reply: free its slots now (gone() looks every 20 ms at most).
      if (client.gone()) {
        cancel_all(*ids);
        throw ApiError(499, "the client closed the connection", "invalid_request_error");
      }
      if (!event) continue;
      if (event->done) {
        if (event->done->stop == smol::StopReason::cancelled) {
          cancel_all(*ids);
          throw cancelled_by_server(state);
        }
        results[event->choice] = std::move(*event->done);
        ++done;
        continue;
      }
      pieces[event->choice].push_back(std::move(*event));
    }
    send_json(res, reply(pieces, results));
    return;
  }

  // Streaming: the provider runs on the connection's thread, called again until it
  // says done. While it waits for pieces it sends an SSE comment every kPollInterval:
  // a write that fails is how a client that has gone is noticed, and its requests
  // cancelled at once rather than at their next token.
  struct Streaming {
    std::shared_ptr<smol::serve::ReplyChannel> channel;
    Stream stream;
    std::shared_ptr<FlightTicket> ticket;
    std::vector<smol::GenerationResult> results;
    std::size_t done = 0;
    bool finished = false;
  };
  auto shared = std::make_shared<Streaming>(Streaming{
      channel, std::move(*stream), std::move(ticket), std::vector<smol::GenerationResult>(n)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass each event on at once
  const std::string first = shared->stream.first();
  // SSE, pinged with a comment while the reply waits; a wire format of its own (ollama's
  // NDJSON) says its content type and keep-alive (none: its clients parse every line).
  const char* content_type = "text/event-stream";
  std::string keepalive = ": ping\n\n";
  if constexpr (requires { Stream::kContentType; }) {
    content_type = Stream::kContentType;
    keepalive = std::string(Stream::kKeepalive);
  }
  res.set_chunked_content_provider(
      content_type,
      [shared, first, keepalive, &state, ids, cancel_all](std::size_t offset,
                                                          httplib::DataSink& sink) {
        const auto write = [&](const std::string& text) {
          return text.empty() || sink.write(text.data(), text.size());
        };
        if (offset == 0 && !write(first)) return false;
        for (;;) {
          std::optional<smol::serve::ReplyEvent> event = shared->channel->next(kPollInterval);
          if (!event) {
            if (!write(keepalive)) return false;
            continue;
          }
          if (event->logprob) {
            shared->stream.logprob(event->choice, *event->logprob);
            continue;
          }
          if (!event->done) {
            if (!write(shared->stream.piece(event->choice, {event->text, event->kind}))) {
              return false;
            }
            continue;
          }
          if (event->done->stop == smol::StopReason::cancelled) {
            // Only the server cancels a request whose client is still there.
            shared->finished = true;
            cancel_all(*ids);
            const ApiError error = cancelled_by_server(state);
            if constexpr (requires { Stream::error(error); }) {  // a wire format's own shape
              write(Stream::error(error));
            } else {
              write(smol::serve::sse_event(smol::serve::error_body(error)));
              write(std::string(smol::serve::kSseDone));
            }
            sink.done();
            return true;
          }
          if (!write(shared->stream.finish(event->choice, *event->done))) return false;
          shared->results[event->choice] = std::move(*event->done);
          if (++shared->done < shared->results.size()) continue;
          shared->finished = true;
          write(shared->stream.close(shared->results));
          sink.done();
          return true;
        }
      },
      [shared, ids, cancel_all](bool) {
        if (!shared->finished) cancel_all(*ids);  // the client went away
      });
}

// What the request's tool grammar leaves unenforced (tool_calls.hpp's relax_parameters):
// said in the log, once per request.
inline void log_unenforced(const smol::serve::ChatCompletionRequest& chat) {
  if (!chat.tools) return;
  for (const smol::serve::ToolFunction& f : chat.tools->functions) {
    for (const std::string& why : f.unenforced) log("tool " + f.name + ": not enforced: " + why);
  }
}

// A chat request's choices (both wire formats': chat_completions, messages.hpp). A reply
// read in the template's tool syntax shows that syntax's marker tokens as text.
inline std::vector<smol::GenerationRequest> chat_choice_requests(
    Service& service, const smol::serve::ChatCompletionRequest& chat,
    std::vector<smol::TokenId> prompt, std::shared_ptr<smol::TokenMaskTable> grammar) {
  std::vector<smol::GenerationRequest> requests =
      choice_requests(service, chat.params, std::move(prompt), std::move(grammar));
  if (chat.tools && chat.tools->syntax != nullptr) {
    for (smol::GenerationRequest& request : requests) request.spelled_tokens = service.tool_markers;
  }
  return requests;
}

// What the template renders a chat request with.
inline smol::ChatOptions chat_options(const smol::serve::ChatCompletionRequest& chat) {
  return {.add_generation_prompt = true,
          .enable_thinking = chat.enable_thinking,
          .tools = chat.template_tools,
          .template_kwargs = chat.template_kwargs};
}

// A chat request's prompt (a template's refusal: the client's 400, naming `param`). With
// --context-shift, a conversation that leaves its reply too little room loses its oldest
// turns (serve/context_shift.hpp): `chat.messages` keeps what the prompt holds, `shift`
// what went, which the log says and the reply's header `X-Context-Shift` (and a chat
// reply's timings) repeat. `may_shift` false: the whole conversation's prompt (what
// count_tokens counts, so that a client sees its conversation grow).
inline std::vector<smol::TokenId> chat_prompt(State& state, Service& service,
                                              smol::serve::ChatCompletionRequest& chat,
                                              const char* param, smol::serve::ContextShift& shift,
                                              httplib::Response& res, bool may_shift = true) {
  const smol::ChatOptions options = chat_options(chat);
  const auto encode = [&](const std::vector<smol::ChatMessage>& messages) {
    return service.encoder.encode(service.chat_template, messages, options);
  };
  try {
    if (!state.options.context_shift || !may_shift) return encode(chat.messages);
    const std::size_t context = service.context_length();  // the pool holds a whole one
    const std::optional<std::size_t> max_tokens =
        chat.params.max_tokens > 0 ? std::optional(chat.params.max_tokens) : std::nullopt;
    std::vector<smol::TokenId> prompt = smol::serve::shift_context(
        chat.messages, smol::serve::prompt_budget(context, max_tokens), encode, shift);
    if (shift.shifted()) {
      const std::string said = std::to_string(shift.dropped_messages) + " messages, " +
                               std::to_string(shift.dropped_tokens) + " tokens";
      log("context shift: dropped the oldest " + said + " (the prompt now " +
          std::to_string(prompt.size()) + " of " + std::to_string(context) + ")");
      res.set_header("X-Context-Shift",
                     "dropped_messages=" + std::to_string(shift.dropped_messages) +
                         "; dropped_tokens=" + std::to_string(shift.dropped_tokens));
    }
    return prompt;
  } catch (const smol::ChatTemplateError& error) {  // a conversation the template refuses
    throw smol::serve::invalid_request(error.what(), param);
  }
}

// POST /apply-template (llama-server's): a chat request's prompt as the template renders
// it, without generating: {"prompt": "..."}.
inline void apply_template(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
  const smol::serve::ChatCompletionRequest chat =
      smol::serve::parse_chat_request(req.body, service.defaults);
  try {
    send_json(res, {{"prompt",
                     smol::render_chat(service.chat_template, chat.messages, chat_options(chat))}});
  } catch (const smol::ChatTemplateError& error) {
    throw smol::serve::invalid_request(error.what(), "messages");
  }
}

inline void chat_completions(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  smol::serve::ChatCompletionRequest chat =
      smol::serve::parse_chat_request(req.body, service.defaults);
  log_unenforced(chat);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, chat.params, client);
  smol::serve::ContextShift shift;
  std::vector<smol::TokenId> prompt = chat_prompt(state, service, chat, "messages", shift, res);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ReplyHeader header{next_reply_id("chatcmpl-"), unix_time(), state.model_name};
  std::optional<ChatStreams> stream;
  const bool logprobs = chat.params.logprobs.has_value();
  if (chat.params.stream) stream.emplace(header, chat, shift);
  const smol::serve::ReasoningFormat format = chat.params.reasoning;
  std::shared_ptr<const smol::serve::ToolRequest> tools = chat.tools;
  std::vector<smol::GenerationRequest> requests =
      chat_choice_requests(service, chat, std::move(prompt), std::move(grammar));
  answer(state, service, client, res, std::move(ticket), std::move(requests), "messages",
         std::move(stream),
         [header, format, logprobs, tools, shift](
             const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
             const std::vector<smol::GenerationResult>& results) {
           std::vector<smol::serve::ReplyText> texts(pieces.size(), smol::serve::ReplyText(format));
           for (std::size_t i = 0; i < pieces.size(); ++i) {
             for (const auto& piece : pieces[i]) texts[i].add({piece.text, piece.kind});
           }
           Json reply =
               smol::serve::chat_completion_json(header, texts, results, logprobs, tools.get());
           if (shift.shifted()) {
             reply["timings"]["context_shift"] = smol::serve::context_shift_json(shift);
           }
           return reply;
         });
}

inline void completions(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = generating_service(state);
  smol::serve::TextCompletionRequest completion =
      smol::serve::parse_completion_request(req.body, service.defaults);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, completion.params, client);
  std::vector<smol::TokenId> prompt = service.tokenizer.encode(completion.prompt);
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ReplyHeader header{next_reply_id("cmpl-"), unix_time(), state.model_name};
  const bool logprobs = completion.params.logprobs.has_value();
  std::optional<TextStreams> stream;
  if (completion.params.stream) stream.emplace(header, completion.params);
  answer(state, service, client, res, std::move(ticket),
         choice_requests(service, completion.params, std::move(prompt), std::move(grammar)),
         "prompt", std::move(stream),
         [header, logprobs](const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
                            const std::vector<smol::GenerationResult>& results) {
           std::vector<std::string> texts(pieces.size());
           std::vector<Json> lists(pieces.size());
           for (std::size_t i = 0; i < pieces.size(); ++i) {
             for (const auto& piece : pieces[i]) texts[i] += piece.text;
             std::size_t offset = 0;
             if (logprobs) {
               lists[i] = smol::serve::completion_logprobs_json(results[i].logprobs, offset);
             }
           }
           return smol::serve::text_completion_json(header, texts, results, lists);
         });
}

}  // namespace server
