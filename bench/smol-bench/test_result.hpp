// One row of the report: a test (pp or tg at some depth), its timed samples, and for
// decode tests the roofline it is held to.
#pragma once

#include <cmath>
#include <cstddef>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace smol::bench {

struct Roofline {
  double memory_read_gbps = 0;
  double bytes_per_token = 0;
  double ceiling_tokens_per_second() const noexcept {
    return memory_read_gbps * 1e9 / bytes_per_token;
  }
};

struct TestResult {
  int threads = 0;
  std::string isa;
  std::size_t prompt_tokens = 0;     // > 0 for a prefill test
  std::size_t generated_tokens = 0;  // > 0 for a decode test
  std::size_t depth = 0;
  std::vector<double> seconds;  // one per timed repetition
  // --alternate-depth-0, decode tests at a depth: the depth-0 run timed right after
  // each repetition, on an empty cache.
  std::vector<double> depth0_seconds;
  std::optional<Roofline> roofline;  // decode tests only

  bool is_decode() const noexcept { return generated_tokens > 0; }
  std::size_t tokens() const noexcept { return is_decode() ? generated_tokens : prompt_tokens; }

  // llama-bench's names: "pp512", "tg128", "tg128 @ d4096".
  std::string name() const {
    std::string text = (is_decode() ? "tg" : "pp") + std::to_string(tokens());
    if (depth > 0) text += " @ d" + std::to_string(depth);
    return text;
  }

  std::vector<double> tokens_per_second() const { return rates(seconds); }
  std::vector<double> depth0_tokens_per_second() const { return rates(depth0_seconds); }
  // Each repetition's speed over that of the depth-0 run beside it.
  std::vector<double> depth0_ratios() const {
    std::vector<double> out;
    for (std::size_t i = 0; i < depth0_seconds.size() && i < seconds.size(); ++i) {
      out.push_back(depth0_seconds[i] / seconds[i]);
    }
    return out;
  }

 private:
  std::vector<double> rates(const std::vector<double>& runs) const {
    std::vector<double> out;
    for (const double s : runs) out.push_back(static_cast<double>(tokens()) / s);
    return out;
  }
};

// Mean and sample standard deviation (n - 1), as llama-bench reports them; a single
// sample has a deviation of 0.
struct SampleStats {
  double mean = 0;
  double stddev = 0;
};

inline SampleStats sample_stats(const std::vector<double>& samples) {
  SampleStats stats;
  if (samples.empty()) return stats;
  const double n = static_cast<double>(samples.size());
  stats.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  if (samples.size() > 1) {
    double squares = 0;
    for (const double x : samples) squares += (x - stats.mean) * (x - stats.mean);
    stats.stddev = std::sqrt(squares / (n - 1));
  }
  return stats;
}

}  // namespace smol::bench
