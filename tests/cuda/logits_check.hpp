// What the CUDA tests compare: logits rows from any engine with the forward() contract
// of smol::Transformer (the CPU Transformer, GpuTransformer, the host-emulated GPU
// pass), run with teacher forcing over the fixtures' golden token sequences.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "smol/model/transformer.hpp"

namespace smol_cuda_test {

inline const std::string kFixtures = SMOL_FIXTURES_DIR;
inline const std::string kQ4Model = kFixtures + "/tiny-smollm3-a.q4_k_m.gguf";
inline const std::string kF32Model = std::string(SMOL_TEST_DATA_DIR) + "/tiny-smollm3-a.f32.gguf";

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The integers of the array after "key": in a golden JSON (flat, known layout).
inline std::vector<std::int32_t> json_ints(const std::string& json, const std::string& key) {
  const std::size_t at = json.find("\"" + key + "\"");
  REQUIRE(at != std::string::npos);
  const std::size_t open = json.find('[', at);
  const std::size_t close = json.find(']', open);
  std::vector<std::int32_t> out;
  std::size_t i = open + 1;
  while (i < close) {
    std::size_t used = 0;
    out.push_back(std::stoi(json.substr(i, close - i), &used));
    i += used;
    while (i < close && (json[i] == ',' || json[i] == ' ' || json[i] == '\n')) ++i;
  }
  return out;
}

struct Golden {
  std::string label;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> generated;
  std::vector<float> logits;  // one row of n_vocab per fed token
};

// kind: "f32" or "q4_k_m"; prompt: "P1", "P2", "P3" (see shared/fixtures/README.md).
inline Golden load_golden(const std::string& kind, const std::string& prompt) {
  const std::string stem = kFixtures + "/tiny-smollm3-a." + kind + "." + prompt;
  const std::string json = read_file(stem + ".json");
  Golden golden{
      kind + "." + prompt, json_ints(json, "prompt_ids"), json_ints(json, "generated_ids"), {}};
  const std::string bin = read_file(stem + ".bin");
  golden.logits.resize(bin.size() / sizeof(float));
  std::memcpy(golden.logits.data(), bin.data(), golden.logits.size() * sizeof(float));
  return golden;
}

// The prompt as one forward call (rows for every position), then one call per
// generated token: the way the goldens were made.
template <class Engine>
std::vector<float> teacher_forced(Engine& engine, const Golden& golden) {
  const auto prefill = engine.forward(golden.prompt, 0, smol::LogitsFor::all);
  std::vector<float> rows(prefill.begin(), prefill.end());
  std::size_t pos = golden.prompt.size();
  for (const std::int32_t token : golden.generated) {
    const auto step = engine.forward(std::span(&token, 1), pos++, smol::LogitsFor::last);
    rows.insert(rows.end(), step.begin(), step.end());
  }
  return rows;
}

inline std::size_t argmax(const float* row, std::size_t n) {  // lowest id wins ties
  return static_cast<std::size_t>(std::max_element(row, row + n) - row);
}

struct Agreement {
  double max = 0, mean = 0, top1 = 0;  // max/mean |Δlogit|, share of rows with equal argmax
};

inline Agreement compare(const std::vector<float>& ours, const std::vector<float>& theirs,
                         std::size_t n_vocab) {
  REQUIRE(ours.size() == theirs.size());
  REQUIRE(ours.size() % n_vocab == 0);
  Agreement a;
  const std::size_t rows = ours.size() / n_vocab;
  double sum = 0;
  std::size_t same = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = r * n_vocab; i < (r + 1) * n_vocab; ++i) {
      const double delta = std::abs(static_cast<double>(ours[i]) - theirs[i]);
      // A NaN must fail every bound, not slip through std::max.
      a.max = std::isnan(delta) ? INFINITY : std::max(a.max, delta);
      sum += delta;
    }
    same += argmax(&ours[r * n_vocab], n_vocab) == argmax(&theirs[r * n_vocab], n_vocab) ? 1 : 0;
  }
  a.mean = sum / static_cast<double>(ours.size());
  a.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return a;
}

}  // namespace smol_cuda_test
