// OpenAI's replies: the non-streamed JSON, and the streamed one as Server-Sent Events,
// built from the scheduler's pieces and result.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/generate/generation_request.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/token_logprobs.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_request.hpp"
#include "smol/serve/tool_call_reader.hpp"
#include "smol/serve/tool_calls.hpp"

namespace smol::serve {

// One Server-Sent Event carrying `json`.
inline std::string sse_event(const Json& json) {
  return "data: " + dump(json) + "\n\n";
}
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// OpenAI's finish_reason for a StopReason ("length" when a limit cut the reply). A
// grammar that left nothing to write has reasons of its own, so that such a reply is
// never taken for one the model finished: "grammar_dead_end" (no token of the
// vocabulary continues the grammar where the reply stands) and "grammar_budget" (the
// next step needs more than the grammar's budgets: grammar/grammar_limits.hpp).
inline std::string_view finish_reason(StopReason stop) {
  switch (stop) {
    case StopReason::max_tokens:
    case StopReason::context_full:
      return "length";
    case StopReason::cancelled:
      return "cancelled";  // never sent: the client has gone
    case StopReason::end_of_generation:
    case StopReason::stop_string:
      return "stop";
    case StopReason::grammar_dead_end:
      return "grammar_dead_end";
    case StopReason::grammar_budget:
      return "grammar_budget";
  }
  return "stop";
}

// usage: the whole prompt (cached part included, as OpenAI counts it), the reply.
inline Json usage_json(const GenerationResult& result) {
  const std::size_t prompt = result.stats.prompt_tokens + result.stats.reused_tokens;
  const std::size_t completion = result.stats.generated_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", result.stats.reused_tokens}}}};
}

// usage of a reply of several choices (n): the prompt once, as every choice reads the
// same one (the cached tokens are the first choice's: the others fork its K/V), the
// completions summed.
inline Json usage_json(std::span<const GenerationResult> results) {
  Json usage = usage_json(results.front());
  std::size_t completion = 0;
  for (const GenerationResult& r : results) completion += r.stats.generated_tokens;
  usage["completion_tokens"] = completion;
  usage["total_tokens"] = usage["prompt_tokens"].get<std::size_t>() + completion;
  return usage;
}

// The choices' timings added up: prompt_n counts every token each choice evaluated, so
// it shows the prompt read once (the other choices evaluate only its last token).
inline GenerationStats summed_stats(std::span<const GenerationResult> results) {
  GenerationStats total;
  for (const GenerationResult& r : results) {
    total.prompt_tokens += r.stats.prompt_tokens;
    total.reused_tokens += r.stats.reused_tokens;
    total.prefill_seconds += r.stats.prefill_seconds;
    total.generated_tokens += r.stats.generated_tokens;
    total.decode_seconds += r.stats.decode_seconds;
    total.drafted_tokens += r.stats.drafted_tokens;
    total.accepted_draft_tokens += r.stats.accepted_draft_tokens;
    total.verify_passes += r.stats.verify_passes;
  }
  return total;
}

// llama-server's timings object, which its web page and clients show.
// With drafting, llama-server's draft_n (guesses verified) and draft_n_accepted (kept),
// present, as there, only when something was drafted.
inline Json timings_json(const GenerationStats& stats) {
  const double prompt_ms = stats.prefill_seconds * 1e3;
  const double predicted_ms = stats.decode_seconds * 1e3;
  const auto per = [](double ms, std::size_t n) { return n > 0 ? ms / double(n) : 0.0; };
  Json timings = {{"cache_n", stats.reused_tokens},
                  {"prompt_n", stats.prompt_tokens},
                  {"prompt_ms", prompt_ms},
                  {"prompt_per_token_ms", per(prompt_ms, stats.prompt_tokens)},
                  {"prompt_per_second", stats.prefill_tokens_per_second()},
                  {"predicted_n", stats.generated_tokens},
                  {"predicted_ms", predicted_ms},
                  {"predicted_per_token_ms",
                   per(predicted_ms, stats.generated_tokens > 1 ? stats.generated_tokens - 1 : 0)},
                  {"predicted_per_second", stats.decode_tokens_per_second()}};
  if (stats.drafted_tokens > 0) {
    timings["draft_n"] = stats.drafted_tokens;
    timings["draft_n_accepted"] = stats.accepted_draft_tokens;
  }
  return timings;
}

// A log-probability as JSON: a token the model rules out entirely (-inf, which JSON cannot
// carry) gets OpenAI's -9999.0.
inline double logprob_value(float logprob) {
  return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0;
}

// A token's exact bytes, as OpenAI's `bytes` list of integers.
inline Json token_bytes_json(const std::string& bytes) {
  Json list = Json::array();
  for (const char c : bytes) list.push_back(static_cast<unsigned char>(c));
  return list;
}

// One token of the chat endpoint's logprobs. `token` is the text, which dump() writes
// lossily (U+FFFD) when the token alone is not valid UTF-8; `bytes` are exact.
inline Json chat_token_logprob_json(const TokenChoiceLogprob& choice) {
  return {{"token", choice.bytes},
          {"logprob", logprob_value(choice.logprob)},
          {"bytes", token_bytes_json(choice.bytes)}};
}

// The same after the sampler's steps (post_sampling_probs), as llama-server writes it: a
// probability, "prob", in place of "logprob".
inline Json chat_token_prob_json(const TokenChoiceLogprob& choice) {
  return {
      {"token", choice.bytes},
      {"prob", std::isfinite(choice.logprob) ? std::exp(static_cast<double>(choice.logprob)) : 0.0},
      {"bytes", token_bytes_json(choice.bytes)}};
}

// The chat endpoint's `logprobs` of a choice: {"content": [...], "refusal": null}; with
// post_sampling_probs each entry has "prob" and "top_probs" (llama-server's names).
inline Json chat_logprobs_json(std::span<const TokenLogprob> tokens) {
  Json content = Json::array();
  for (const TokenLogprob& t : tokens) {
    const auto one = t.post_sampling ? chat_token_prob_json : chat_token_logprob_json;
    Json entry = one(t.chosen);
    Json top = Json::array();
    for (const TokenChoiceLogprob& alternative : t.top) top.push_back(one(alternative));
    entry[t.post_sampling ? "top_probs" : "top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// The legacy completions endpoint's `logprobs`: parallel lists, the top ones as
// {token: logprob} objects, and each token's byte offset in the reply's text (`offset`:
// the bytes of the reply before `tokens`, advanced past them; a streamed reply carries
// it from chunk to chunk).
inline Json completion_logprobs_json(std::span<const TokenLogprob> tokens, std::size_t& offset) {
  Json text = Json::array(), logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const TokenLogprob& t : tokens) {
    text.push_back(t.chosen.bytes);
    logprobs.push_back(logprob_value(t.chosen.logprob));
    Json alternatives = Json::object();
    for (const TokenChoiceLogprob& a : t.top) alternatives[a.bytes] = logprob_value(a.logprob);
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += t.chosen.bytes.size();
  }
  return {{"tokens", std::move(text)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

// A reply's text as the client sees it, built piece by piece: the reasoning apart or
// folded into the content, the newlines between </think> and the answer dropped. The
// streamed deltas and the final message come from the same pieces, so they agree.
class ReplyText {
 public:
  explicit ReplyText(ReasoningFormat format) : format_(format) {}

  struct Delta {
    std::string content, reasoning;
  };

  Delta add(const TextPiece& piece) {
    Delta delta;
    if (piece.kind == PieceKind::thinking) {
      if (format_ == ReasoningFormat::separate) {
        delta.reasoning = piece.text;
      } else {
        if (!in_thinking_) delta.content = "<think>";
        delta.content += piece.text;
      }
      in_thinking_ = true;
    } else {
      if (in_thinking_ && format_ == ReasoningFormat::folded) delta.content = "</think>";
      in_thinking_ = false;
      std::string_view text = piece.text;
      if (!answer_started_) {
        while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
        answer_started_ = !text.empty();
      }
      delta.content += text;
    }
    content_ += delta.content;
    reasoning_ += delta.reasoning;
    return delta;
  }

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  ReasoningFormat format_;
  bool in_thinking_ = false, answer_started_ = false;
  std::string content_, reasoning_;
};

// Who a reply is from: the fields every response and chunk repeats.
struct ReplyHeader {
  std::string id;  // chatcmpl-..., cmpl-...
  std::int64_t created = 0;
  std::string model;
};

// A reply's tool calls in OpenAI's shape; `index` only in stream chunks.
inline Json tool_calls_json(const std::vector<ToolCall>& calls) {
  Json list = Json::array();
  for (const ToolCall& call : calls) {
    list.push_back({{"id", call.id},
                    {"type", "function"},
                    {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return list;
}

// The ids of a reply's calls: unique per reply id and choice.
inline std::string tool_call_id_prefix(const ReplyHeader& header, std::size_t choice = 0) {
  return "call_" + header.id + "_" + (choice == 0 ? "" : "c" + std::to_string(choice) + "_");
}

// finish_reason "tool_calls" when the reply calls tools and ended on its own.
inline std::string_view chat_finish_reason(StopReason stop, const ToolReply* tools) {
  if (tools != nullptr && !tools->calls.empty() &&
      (stop == StopReason::end_of_generation || stop == StopReason::stop_string)) {
    return "tool_calls";
  }
  return finish_reason(stop);
}

// One choice of the non-streaming chat reply.
inline Json chat_choice_json(const ReplyHeader& header, std::size_t index, const ReplyText& text,
                             const GenerationResult& result, bool logprobs,
                             const ToolRequest* tools) {
  Json message = {{"role", "assistant"}, {"content", text.content()}};
  std::optional<ToolReply> reply;
  if (tools != nullptr) {
    reply = read_tool_reply(text.content(), *tools, tool_call_id_prefix(header, index));
    message["content"] = reply->content ? Json(*reply->content) : Json(nullptr);
    if (!reply->calls.empty()) message["tool_calls"] = tool_calls_json(reply->calls);
  }
  if (!text.reasoning().empty()) message["reasoning_content"] = text.reasoning();
  return {{"index", index},
          {"message", std::move(message)},
          {"logprobs", logprobs ? chat_logprobs_json(result.logprobs) : Json(nullptr)},
          {"finish_reason", chat_finish_reason(result.stop, reply ? &*reply : nullptr)}};
}

// The non-streaming chat reply of one or more choices (texts[i] and results[i]: choice
// i); `logprobs`: the request asked for them; `tools`: the request's tools (each reply is
// then read as a tool reply, tool_calls.hpp).
inline Json chat_completion_json(const ReplyHeader& header, std::span<const ReplyText> texts,
                                 std::span<const GenerationResult> results, bool logprobs = false,
                                 const ToolRequest* tools = nullptr) {
  Json choices = Json::array();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    choices.push_back(chat_choice_json(header, i, texts[i], results[i], logprobs, tools));
  }
  return {{"id", header.id},
          {"object", "chat.completion"},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", "smol"},
          {"choices", std::move(choices)},
          {"usage", usage_json(results)},
          {"timings", timings_json(summed_stats(results))}};
}

inline Json chat_completion_json(const ReplyHeader& header, const ReplyText& text,
                                 const GenerationResult& result, bool logprobs = false,
                                 const ToolRequest* tools = nullptr) {
  return chat_completion_json(header, std::span(&text, 1), std::span(&result, 1), logprobs, tools);
}

// One streamed chat chunk; `choice` null gives the usage chunk's empty choices.
inline Json chat_chunk_json(const ReplyHeader& header, Json choices) {
  return {{"id", header.id},
          {"object", "chat.completion.chunk"},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", "smol"},
          {"choices", std::move(choices)}};
}

inline Json chat_delta_choice(Json delta, Json finish = nullptr, Json logprobs = nullptr,
                              std::size_t index = 0) {
  return Json::array({{{"index", index},
                       {"delta", std::move(delta)},
                       {"logprobs", std::move(logprobs)},
                       {"finish_reason", std::move(finish)}}});
}

// A streamed chat reply as SSE text: first(), then piece() per TextPiece (and
// logprob() per token when the request asked for logprobs), then end(). A chunk carries
// the logprobs of the tokens that came since the previous chunk: a token whose text is
// held back (a possible stop string, part of a character) is reported with the chunk
// that shows it, and whatever is left with the last chunk.
//
// With tools, the reply is read as it comes, in the template family's syntax
// (ToolCallReader: each call sent once complete) or the generic JSON format
// (ToolReplyScanner: arguments sent as they are written), the way OpenAI streams calls:
// per call, a chunk with its index, id,
// type and name (arguments ""), then chunks with pieces of its arguments; an answer as
// content.
//
// Several choices (n) stream as one ChatStream each, `index` theirs, their chunks
// interleaved as they come: each ends with finish(), and close() ends the reply.
class ChatStream {
 public:
  ChatStream(ReplyHeader header, ReasoningFormat format, bool include_usage, bool logprobs = false,
             std::shared_ptr<const ToolRequest> tools = nullptr, std::size_t index = 0)
      : header_(std::move(header)),
        text_(format),
        include_usage_(include_usage),
        logprobs_(logprobs),
        tools_(std::move(tools)),
        index_(index) {
    if (tools_ && tools_->syntax) reader_.emplace(*tools_->syntax, *tools_);
  }

  std::string first() const {
    return sse_event(chat_chunk_json(
        header_, choice({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)));
  }

  void logprob(const TokenLogprob& token) { pending_.push_back(token); }

  // Empty when the piece adds nothing the client sees.
  std::string piece(const TextPiece& piece) {
    const ReplyText::Delta delta = text_.add(piece);
    std::string out;
    if (!delta.reasoning.empty()) {
      out += sse_event(chat_chunk_json(
          header_, choice({{"reasoning_content", delta.reasoning}}, nullptr, take_logprobs())));
    }
    if (tools_) {  // the answer read as calls and content
      return out +
             tool_chunks(reader_ ? reader_->push(delta.content) : scanner_.push(delta.content));
    }
    if (!delta.content.empty()) {
      out += sse_event(
          chat_chunk_json(header_, choice({{"content", delta.content}}, nullptr, take_logprobs())));
    }
    return out;
  }

  // This choice's last chunk: its finish_reason and timings.
  std::string finish(const GenerationResult& result) {
    std::optional<ToolReply> reply;
    std::string out;
    if (tools_) {
      reply = read_tool_reply(text_.content(), *tools_, tool_call_id_prefix(header_, index_));
      if (reader_) out += tool_chunks(reader_->finish());
    }
    Json last = chat_chunk_json(
        header_, choice(Json::object(), chat_finish_reason(result.stop, reply ? &*reply : nullptr),
                        pending_.empty() ? Json(nullptr) : take_logprobs()));
    last["timings"] = timings_json(result.stats);
    last["timings"].update(more_timings_);
    return out + sse_event(last);
  }

  // A member the last chunk's timings carry beside the engine's (the server's context
  // shift: serve/context_shift.hpp).
  void add_to_timings(const std::string& key, Json value) { more_timings_[key] = std::move(value); }

  // The reply's end, once every choice has finished: the usage chunk when asked, [DONE].
  static std::string close(const ReplyHeader& header, bool include_usage,
                           std::span<const GenerationResult> results) {
    std::string out;
    if (include_usage) {
      Json usage = chat_chunk_json(header, Json::array());
      usage["usage"] = usage_json(results);
      out += sse_event(usage);
    }
    out += kSseDone;
    return out;
  }

  // The end of a reply of one choice.
  std::string end(const GenerationResult& result) {
    return finish(result) + close(header_, include_usage_, std::span(&result, 1));
  }

 private:
  // The chunks a piece of a tool reply adds.
  std::string tool_chunks(const std::vector<ToolReplyScanner::Event>& events) {
    std::string out;
    for (const ToolReplyScanner::Event& event : events) {
      Json delta;
      switch (event.kind) {
        case ToolReplyScanner::Kind::content:
          delta = {{"content", event.text}};
          break;
        case ToolReplyScanner::Kind::call:
          delta = {
              {"tool_calls",
               {{{"index", event.index},
                 {"id", tool_call_id(tool_call_id_prefix(header_, index_), event.index, *tools_)},
                 {"type", "function"},
                 {"function", {{"name", event.text}, {"arguments", ""}}}}}}};
          break;
        case ToolReplyScanner::Kind::arguments:
          delta = {{"tool_calls",
                    {{{"index", event.index}, {"function", {{"arguments", event.text}}}}}}};
          break;
      }
      out +=
          sse_event(chat_chunk_json(header_, choice(std::move(delta), nullptr, take_logprobs())));
    }
    return out;
  }

  Json choice(Json delta, Json finish, Json logprobs) const {
    return chat_delta_choice(std::move(delta), std::move(finish), std::move(logprobs), index_);
  }

  // The pending tokens' logprobs for the next chunk (null when none were asked for).
  Json take_logprobs() {
    if (!logprobs_) return nullptr;
    Json json = chat_logprobs_json(pending_);
    pending_.clear();
    return json;
  }

  ReplyHeader header_;
  ReplyText text_;
  bool include_usage_, logprobs_;
  std::shared_ptr<const ToolRequest> tools_;
  std::size_t index_;
  ToolReplyScanner scanner_;
  std::optional<ToolCallReader> reader_;  // with a template family's tool syntax
  std::vector<TokenLogprob> pending_;
  Json more_timings_ = Json::object();
};

// POST /v1/completions replies: the whole text, control tokens unshown; `logprobs` the
// choice's (completion_logprobs_json) or null; `index` the choice's (a stream chunk's).
inline Json text_completion_json(const ReplyHeader& header, const std::string& text, Json finish,
                                 const GenerationResult* result, Json logprobs = nullptr,
                                 std::size_t index = 0) {
  Json json = {{"id", header.id},
               {"object", "text_completion"},
               {"created", header.created},
               {"model", header.model},
               {"system_fingerprint", "smol"},
               {"choices",
                {{{"index", index},
                  {"text", text},
                  {"logprobs", std::move(logprobs)},
                  {"finish_reason", std::move(finish)}}}}};
  if (result != nullptr) {
    json["usage"] = usage_json(*result);
    json["timings"] = timings_json(result->stats);
  }
  return json;
}

// The non-streamed completions reply of several choices (texts[i], results[i] and
// logprobs[i], null or the choice's: choice i).
inline Json text_completion_json(const ReplyHeader& header, std::span<const std::string> texts,
                                 std::span<const GenerationResult> results,
                                 std::span<const Json> logprobs) {
  Json json =
      text_completion_json(header, texts[0], finish_reason(results[0].stop), nullptr, logprobs[0]);
  for (std::size_t i = 1; i < texts.size(); ++i) {
    json["choices"].push_back({{"index", i},
                               {"text", texts[i]},
                               {"logprobs", logprobs[i]},
                               {"finish_reason", finish_reason(results[i].stop)}});
  }
  json["usage"] = usage_json(results);
  json["timings"] = timings_json(summed_stats(results));
  return json;
}

}  // namespace smol::serve
