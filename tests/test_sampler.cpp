// Sampler tests on hand-made logit rows.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "smol/generate/sampler.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_sampler {

namespace {

using smol::Sampler;
using smol::SamplerSettings;
using smol::TokenId;

// Logits whose softmax is exactly `probabilities`.
std::vector<float> logits_for(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (const double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

SamplerSettings unfiltered(std::uint64_t seed) {
  SamplerSettings settings;
  settings.temperature = 1.0f;
  settings.top_k = 0;
  settings.top_p = 1.0f;
  settings.min_p = 0.0f;
  settings.seed = seed;
  return settings;
}

std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<std::size_t>(sampler.sample(logits))];
  return counts;
}

}  // namespace

TEST_CASE("defaults are llama.cpp's") {
  const SamplerSettings defaults;
  CHECK(defaults.temperature == 0.8f);
  CHECK(defaults.top_k == 40);
  CHECK(defaults.top_p == 0.95f);
  CHECK(defaults.min_p == 0.05f);
  CHECK(defaults.repeat_penalty == 1.0f);
  CHECK(defaults.penalty_window == 64);
  CHECK(defaults.presence_penalty == 0.0f);
}

TEST_CASE("greedy: argmax, the lowest id wins a tie") {
  CHECK(smol::greedy_token(std::vector<float>{0.1f, 2.0f, -1.0f, 2.0f}) == 1);
  CHECK(smol::greedy_token(std::vector<float>{-3.0f}) == 0);
  Sampler greedy(SamplerSettings::greedy());
  CHECK(greedy.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 0.5f}) == 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(greedy.sample(std::vector<float>{nan, 0.5f, nan}) == 1);
  CHECK_THROWS_AS(greedy.sample(std::vector<float>{}), smol::Error);
  CHECK_THROWS_AS(smol::greedy_token(std::vector<float>{}), smol::Error);
}

TEST_CASE("top-k 1 is greedy at any temperature") {
  SamplerSettings settings = unfiltered(7);
  settings.top_k = 1;
  settings.temperature = 5.0f;
  Sampler sampler(settings);
  const std::vector<float> logits = {0.0f, 0.3f, 0.2f, 0.3f};
  for (int i = 0; i < 100; ++i) CHECK(sampler.sample(logits) == 1);
}

TEST_CASE("the same seed gives the same choices") {
  const std::vector<float> flat(50, 0.0f);
  const auto run = [&](std::uint64_t seed) {
    Sampler sampler(unfiltered(seed));
    std::vector<TokenId> tokens;
    for (int i = 0; i < 40; ++i) tokens.push_back(sampler.sample_and_accept(flat));
    return tokens;
  };
  CHECK(run(42) == run(42));
  CHECK(run(42) != run(43));
}

TEST_CASE("draws follow the softmax") {
  Sampler sampler(unfiltered(1));
  const auto counts = histogram(sampler, logits_for({0.7, 0.2, 0.1}), 20000);
  CHECK(counts[0] / 20000.0 == doctest::Approx(0.7).epsilon(0.03));
  CHECK(counts[1] / 20000.0 == doctest::Approx(0.2).epsilon(0.06));
  CHECK(counts[2] / 20000.0 == doctest::Approx(0.1).epsilon(0.1));
}

TEST_CASE("temperature sharpens and flattens") {
  const auto logits = logits_for({0.6, 0.3, 0.1});
  SamplerSettings cold = unfiltered(3);
  cold.temperature = 0.1f;
  Sampler cold_sampler(cold);
  CHECK(histogram(cold_sampler, logits, 2000)[0] > 1990);
  SamplerSettings hot = unfiltered(3);
  hot.temperature = 100.0f;
  Sampler hot_sampler(hot);
  const auto counts = histogram(hot_sampler, logits, 6000);
  for (const int count : counts) CHECK(count == doctest::Approx(2000).epsilon(0.1));
}

TEST_CASE("top-k, top-p and min-p keep the right tokens") {
  const auto logits = logits_for({0.05, 0.5, 0.15, 0.3});  // ranks: 1, 3, 2, 0
  const auto survivors = [&](SamplerSettings settings) {
    Sampler sampler(settings);
    const auto counts = histogram(sampler, logits, 3000);
    std::set<TokenId> seen;
    for (std::size_t id = 0; id < counts.size(); ++id) {
      if (counts[id] > 0) seen.insert(static_cast<TokenId>(id));
    }
    return seen;
  };
  SamplerSettings top_k = unfiltered(5);
  top_k.top_k = 2;
  CHECK(survivors(top_k) == std::set<TokenId>{1, 3});
  SamplerSettings top_p = unfiltered(5);
  top_p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.5 + 0.3
  CHECK(survivors(top_p) == std::set<TokenId>{1, 3});
  top_p.top_p = 0.85f;
  CHECK(survivors(top_p) == std::set<TokenId>{1, 2, 3});
  SamplerSettings min_p = unfiltered(5);
  min_p.min_p = 0.2f;  // keeps p >= 0.1
  CHECK(survivors(min_p) == std::set<TokenId>{1, 2, 3});
  min_p.min_p = 0.5f;  // keeps p >= 0.25
  CHECK(survivors(min_p) == std::set<TokenId>{1, 3});
}

TEST_CASE("repetition penalty divides positive logits and multiplies negative ones") {
  SamplerSettings settings = SamplerSettings::greedy();
  settings.repeat_penalty = 1.5f;
  Sampler sampler(settings);
  CHECK(sampler.sample(std::vector<float>{2.0f, 1.9f}) == 0);
  sampler.accept(0);
  CHECK(sampler.sample(std::vector<float>{2.0f, 1.9f}) == 1);    // 2.0 / 1.5 < 1.9
  CHECK(sampler.sample(std::vector<float>{-1.0f, -1.2f}) == 1);  // -1.0 * 1.5 < -1.2
  CHECK(sampler.sample(std::vector<float>{2.0f, 1.0f}) == 0);    // 1.33 still wins
}

TEST_CASE("penalties only see the last penalty_window tokens") {
  SamplerSettings settings = SamplerSettings::greedy();
  settings.repeat_penalty = 2.0f;
  settings.penalty_window = 4;
  Sampler sampler(settings);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  sampler.accept(0);
  CHECK(sampler.sample(logits) == 1);
  for (int i = 0; i < 3; ++i) sampler.accept(2);
  CHECK(sampler.sample(logits) == 1);  // token 0 is still in the window
  sampler.accept(2);
  CHECK(sampler.sample(logits) == 0);  // now it has left
  sampler.accept(0);
  sampler.reset_history();
  CHECK(sampler.sample(logits) == 0);
}

TEST_CASE("presence and frequency penalties") {
  SamplerSettings presence = SamplerSettings::greedy();
  presence.presence_penalty = 0.5f;
  Sampler by_presence(presence);
  by_presence.accept(0);
  by_presence.accept(0);
  CHECK(by_presence.sample(std::vector<float>{1.0f, 0.6f}) == 1);  // 1.0 - 0.5 < 0.6
  CHECK(by_presence.sample(std::vector<float>{1.0f, 0.4f}) == 0);  // counted once: 0.5 > 0.4

  SamplerSettings frequency = SamplerSettings::greedy();
  frequency.frequency_penalty = 0.3f;
  Sampler by_frequency(frequency);
  by_frequency.accept(0);
  CHECK(by_frequency.sample(std::vector<float>{1.0f, 0.6f}) == 0);  // 0.7 > 0.6
  by_frequency.accept(0);
  CHECK(by_frequency.sample(std::vector<float>{1.0f, 0.6f}) == 1);  // 0.4 < 0.6
}

TEST_CASE("logit bias: added first, -infinity bans, a masked token stays masked") {
  SamplerSettings settings = SamplerSettings::greedy();
  settings.logit_bias = {{1, 0.5f}};
  CHECK(Sampler(settings).sample(std::vector<float>{1.0f, 0.6f}) == 1);  // 1.1 > 1.0
  settings.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  CHECK(Sampler(settings).sample(std::vector<float>{1.0f, 0.6f}) == 1);
  settings.logit_bias = {{1, 100.0f}};
  const float masked = -std::numeric_limits<float>::infinity();
  CHECK(Sampler(settings).sample(std::vector<float>{1.0f, masked}) == 0);
  // Before the penalties, as llama.cpp orders them: 0.6 + 0.5 = 1.1, then / 2 = 0.55.
  settings.logit_bias = {{1, 0.5f}};
  settings.repeat_penalty = 2.0f;
  Sampler penalized(settings);
  penalized.accept(1);
  CHECK(penalized.sample(std::vector<float>{0.6f, 0.6f}) == 0);
  // Sampling sees it too: a banned token is never drawn.
  SamplerSettings sampled;
  sampled.seed = 7;
  sampled.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  Sampler drawing(sampled);
  for (int i = 0; i < 200; ++i) CHECK(drawing.sample(std::vector<float>{5.0f, 0.0f, 0.0f}) != 0);
  // Ids the vocabulary lacks are refused, named.
  settings.logit_bias = {{3, 1.0f}};
  CHECK_THROWS_WITH(smol::check_logit_bias(settings, 3),
                    doctest::Contains("token 3 is not in this model's vocabulary (0 to 2)"));
  CHECK_NOTHROW(smol::check_logit_bias(settings, 4));
}

}  // namespace test_sampler
