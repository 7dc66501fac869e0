// ReplyChannel: one request's pieces, handed from the engine thread to the thread that
// serves its connection.
//
// The scheduler calls back on the engine thread, which must never wait for a slow
// client; so the callbacks only queue copies here, and the connection's thread takes
// them at its own pace. Either side may outlive the other (a client that disconnects,
// a request that finishes while nobody reads): hold the channel by shared_ptr.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "smol/generate/generation_request.hpp"
#include "smol/generate/reply_stream.hpp"

namespace smol::serve {

// A piece of text, a token's logprobs (only for a request that asked for them and
// streams them), or (once, last) the end with the whole result; `choice`: whose, when
// the n choices of one reply share a channel.
struct ReplyEvent {
  std::string text;
  PieceKind kind = PieceKind::answer;
  std::optional<GenerationResult> done;
  std::optional<TokenLogprob> logprob = std::nullopt;
  std::size_t choice = 0;
};

class ReplyChannel {
 public:
  // The engine's side. on_piece and on_done of a GenerationRequest, ready to set, and
  // on_logprob when the request asks for logprobs and `stream_logprobs` (a reply sent in
  // one piece takes them from the result instead). Its events carry `choice`.
  static void connect(const std::shared_ptr<ReplyChannel>& channel, GenerationRequest& request,
                      bool stream_logprobs = false, std::size_t choice = 0) {
    if (stream_logprobs && request.logprobs) {
      request.on_logprob = [channel, choice](const TokenLogprob& token) {
        channel->push({{}, PieceKind::answer, std::nullopt, token, choice});
      };
    }
    request.on_piece = [channel, choice](const TextPiece& piece) {
      channel->push({std::string(piece.text), piece.kind, std::nullopt, std::nullopt, choice});
    };
    request.on_done = [channel, choice](const GenerationResult& result) {
      channel->push({{}, PieceKind::answer, result, std::nullopt, choice});
    };
  }

  // The connection's side: the next event, or nothing when `timeout` passed first (the
  // caller checks its client and waits again).
  std::optional<ReplyEvent> next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    ReplyEvent event = std::move(events_.front());
    events_.pop_front();
    return event;
  }

  void push(ReplyEvent event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ReplyEvent> events_;
};

}  // namespace smol::serve
