// ServerMetrics: what a server has done, as Prometheus text (GET /metrics).
//
// Counters only grow; the gauges (slots busy, queue depth) are read when scraped. The
// speeds are averages over finished requests: prompt tokens per second of prefill and
// generated tokens per second of decode, each request timed on its own (requests that
// share a batch share its time, so the sum of their speeds is the server's throughput).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "smol/generate/generation_request.hpp"

namespace smol::serve {

struct Gauges {
  std::size_t slots_busy = 0, slots_total = 0, queue_depth = 0;
};

class ServerMetrics {
 public:
  void request_started() { add(&Totals::requests, 1); }
  void request_rejected() { add(&Totals::rejected, 1); }  // 503: the queue is full
  void request_invalid() { add(&Totals::invalid, 1); }    // 4xx

  // A request that reached the engine ended; `first_choice`: false for the other choices
  // of a reply of several (n), whose tokens count but whose cancellation is the reply's.
  void request_finished(const GenerationResult& result, bool first_choice = true) {
    std::lock_guard lock(mutex_);
    if (result.stop == StopReason::cancelled && first_choice) ++totals_.cancelled;
    totals_.prompt_tokens += result.stats.prompt_tokens;
    totals_.cached_tokens += result.stats.reused_tokens;
    totals_.generated_tokens += result.stats.generated_tokens;
    totals_.prompt_seconds += result.stats.prefill_seconds;
    totals_.drafted_tokens += result.stats.drafted_tokens;
    totals_.accepted_draft_tokens += result.stats.accepted_draft_tokens;
    if (result.stats.generated_tokens > 1) {
      totals_.decode_steps += result.stats.generated_tokens - 1;
      totals_.decode_seconds += result.stats.decode_seconds;
    }
  }

  std::string prometheus(const Gauges& gauges) const {
    Totals t;
    {
      std::lock_guard lock(mutex_);
      t = totals_;
    }
    std::string out;
    const auto metric = [&](std::string_view name, std::string_view type, std::string_view help,
                            double value) {
      out += "# HELP smol_" + std::string(name) + " " + std::string(help) + "\n";
      out += "# TYPE smol_" + std::string(name) + " " + std::string(type) + "\n";
      char number[64];
      std::snprintf(number, sizeof number, "%.17g", value);
      out += "smol_" + std::string(name) + " " + number + "\n";
    };
    metric("requests_total", "counter", "Completion requests accepted.", double(t.requests));
    metric("requests_cancelled_total", "counter",
           "Requests cancelled before their end (client gone, server stopping).",
           double(t.cancelled));
    metric("requests_rejected_total", "counter", "Requests refused with 503: the queue was full.",
           double(t.rejected));
    metric("requests_invalid_total", "counter", "Requests refused as malformed (4xx).",
           double(t.invalid));
    metric("prompt_tokens_total", "counter", "Prompt tokens evaluated.", double(t.prompt_tokens));
    metric("prompt_tokens_cached_total", "counter",
           "Prompt tokens reused from the prompt cache instead of evaluated.",
           double(t.cached_tokens));
    metric("tokens_generated_total", "counter", "Tokens generated.", double(t.generated_tokens));
    metric("draft_tokens_total", "counter",
           "Tokens guessed by speculative decoding (--spec-type) and verified.",
           double(t.drafted_tokens));
    metric("draft_tokens_accepted_total", "counter",
           "Guessed tokens the model kept: each a token without a step of its own.",
           double(t.accepted_draft_tokens));
    metric("prompt_seconds_total", "counter", "Seconds of prefill, summed over requests.",
           t.prompt_seconds);
    metric("decode_seconds_total", "counter", "Seconds of decode, summed over requests.",
           t.decode_seconds);
    metric("prompt_tokens_per_second", "gauge", "Average prefill speed of a request.",
           t.prompt_seconds > 0 ? double(t.prompt_tokens) / t.prompt_seconds : 0.0);
    metric("decode_tokens_per_second", "gauge", "Average decode speed of a request.",
           t.decode_seconds > 0 ? double(t.decode_steps) / t.decode_seconds : 0.0);
    metric("slots_busy", "gauge", "Sequences generating now.", double(gauges.slots_busy));
    metric("slots_total", "gauge", "Sequences that can generate at once (-np).",
           double(gauges.slots_total));
    metric("queue_depth", "gauge", "Requests waiting for a slot.", double(gauges.queue_depth));
    return out;
  }

 private:
  struct Totals {
    std::uint64_t requests = 0, cancelled = 0, rejected = 0, invalid = 0;
    std::uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0, decode_steps = 0;
    std::uint64_t drafted_tokens = 0, accepted_draft_tokens = 0;
    double prompt_seconds = 0, decode_seconds = 0;
  };

  void add(std::uint64_t Totals::*counter, std::uint64_t n) {
    std::lock_guard lock(mutex_);
    totals_.*counter += n;
  }

  mutable std::mutex mutex_;
  Totals totals_;
};

}  // namespace smol::serve
