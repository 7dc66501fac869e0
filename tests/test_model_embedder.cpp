// Embedder and pooling: llama.cpp's pooling and normalization arithmetic; a file's
// pooling_type and attention.causal read into the config; every pooling is the matching
// rows of Pooling::none's per-token states; inputs batched into one pass get the bits
// each gets alone; without a causal mask a token sees the tokens after it (and with one
// it does not); bad inputs are refused by index. (llama.cpp's own vectors for the same
// files: tests/real_model/embedding_check.py.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "smol/model/config.hpp"
#include "smol/model/embedder.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/pooling.hpp"
#include "smol/testing/synthetic.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "test_tokens.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_model_embedder {

namespace {

smol::SyntheticSpec small_spec(std::optional<smol::Pooling> pooling, bool causal,
                               smol::SyntheticWeights weights = smol::SyntheticWeights::q8_0) {
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3-tiny");
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = weights;
  spec.pooling = pooling;
  spec.causal = causal;
  return spec;
}

smol::Model model_of(const smol::SyntheticSpec& spec) {
  auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "embed.gguf");
  smol::ModelConfig config = smol::ModelConfig::from_gguf(file);
  return smol::Model(std::move(file), std::move(config));
}

std::vector<std::vector<std::int32_t>> some_inputs() {
  return {smol::test::some_tokens(7, 512, 1), smol::test::some_tokens(40, 512, 2),
          smol::test::some_tokens(1, 512, 3), smol::test::some_tokens(19, 512, 4)};
}

// some_inputs() embedded together in a batch of 48 tokens (the four inputs, 67 tokens,
// take two passes) give the bits each gets alone.
void check_batched_equals_alone(const smol::Model& model, smol::Context& context) {
  const auto inputs = some_inputs();
  smol::Embedder together(model, context, {.batch = 48});
  const auto batched = together.embed(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    smol::Embedder alone(model, context, {.batch = 48});
    CHECK(batched[i].values == alone.embed(std::span(inputs).subspan(i, 1))[0].values);
  }
}

// Row r of a Pooling::none result.
std::vector<float> row_of(const smol::Embedding& e, std::size_t r, std::size_t width) {
  return {e.values.begin() + static_cast<std::ptrdiff_t>(r * width),
          e.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * width)};
}

}  // namespace

TEST_CASE("pooling and normalization are llama.cpp's arithmetic") {
  const std::vector<float> states = {1, 2, -3, 3, 6, 9};  // two rows of three
  std::vector<float> out(3);
  smol::pool_states(smol::Pooling::mean, states, 2, 3, out);
  CHECK(out == std::vector<float>{2, 4, 3});
  smol::pool_states(smol::Pooling::cls, states, 2, 3, out);
  CHECK(out == std::vector<float>{1, 2, -3});
  smol::pool_states(smol::Pooling::last, states, 2, 3, out);
  CHECK(out == std::vector<float>{3, 6, 9});
  CHECK_THROWS_WITH_AS(smol::pool_states(smol::Pooling::none, states, 2, 3, out),
                       doctest::Contains("makes no single vector"), smol::Error);

  std::vector<float> v = {3, -4};
  smol::normalize_embedding(v, 2);  // unit length
  CHECK(v[0] == doctest::Approx(0.6));
  CHECK(v[1] == doctest::Approx(-0.8));
  v = {3, -4};
  smol::normalize_embedding(v, 1);  // taxicab
  CHECK(v[0] == doctest::Approx(3.0 / 7));
  v = {3, -4};
  smol::normalize_embedding(v, 0);  // the largest magnitude to 32760
  CHECK(v[1] == doctest::Approx(-32760));
  CHECK(v[0] == doctest::Approx(24570));
  v = {3, -4};
  smol::normalize_embedding(v, -1);
  CHECK(v == std::vector<float>{3, -4});
  v = {3, -4};
  smol::normalize_embedding(v, 3);
  CHECK(v[0] == doctest::Approx(3 / std::cbrt(91.0)));
  v = {0, 0};
  smol::normalize_embedding(v, 2);
  CHECK(v == std::vector<float>{0, 0});
  CHECK_THROWS_WITH_AS(smol::normalize_embedding(v, -2), doctest::Contains("-2"), smol::Error);

  CHECK(smol::pooling_named("last") == smol::Pooling::last);
  CHECK_FALSE(smol::pooling_named("max"));
}

TEST_CASE("a file's pooling_type and attention.causal reach the config; a bad one is named") {
  const smol::Model plain = model_of(small_spec(std::nullopt, true));
  CHECK(plain.config().pooling == smol::Pooling::none);
  CHECK(plain.config().causal_attention);
  const smol::Model embedder = model_of(small_spec(smol::Pooling::mean, false));
  CHECK(embedder.config().pooling == smol::Pooling::mean);
  CHECK_FALSE(embedder.config().causal_attention);

  smol::gguf::GgufWriter writer = smol::make_synthetic_writer(small_spec(std::nullopt, true));
  writer.set("qwen3.pooling_type", std::uint32_t{7});
  const auto file = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "bad.gguf");
  CHECK_THROWS_WITH_AS(smol::ModelConfig::from_gguf(file),
                       doctest::Contains("qwen3.pooling_type: pooling type 7"), smol::Error);
}

TEST_CASE("every pooling is the matching rows of the per-token states") {
  const smol::Model model = model_of(small_spec(std::nullopt, true));
  smol::Context context(2);
  const auto inputs = some_inputs();
  const std::size_t width = model.config().n_embd;
  smol::Embedder per_token(model, context, {.batch = 64, .pooling = smol::Pooling::none});
  const auto rows = per_token.embed(inputs);
  REQUIRE(rows.size() == inputs.size());
  for (const smol::Pooling pooling :
       {smol::Pooling::mean, smol::Pooling::cls, smol::Pooling::last}) {
    CAPTURE(smol::pooling_name(pooling));
    smol::Embedder embedder(model, context, {.batch = 64, .pooling = pooling});
    const auto pooled = embedder.embed(inputs);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      CAPTURE(i);
      REQUIRE(rows[i].rows == inputs[i].size());
      REQUIRE(pooled[i].rows == 1);
      std::vector<float> want(width);
      smol::pool_states(pooling, rows[i].values, rows[i].rows, width, want);
      CHECK(pooled[i].values == want);
    }
  }
}

TEST_CASE("inputs batched into one pass get the bits each gets alone, causal or not") {
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    const smol::Model model = model_of(small_spec(smol::Pooling::mean, causal));
    smol::Context context(2);
    check_batched_equals_alone(model, context);
  }
}

TEST_CASE("without a causal mask a token sees the tokens after it; with one it does not") {
  std::vector<std::int32_t> a = smol::test::some_tokens(12, 512, 5);
  std::vector<std::int32_t> b = a;
  b.back() = (b.back() + 1) % 512;  // the same input but its last token
  const std::vector<std::vector<std::int32_t>> inputs = {a, b};
  smol::Context context(2);
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    const smol::Model model = model_of(small_spec(smol::Pooling::none, causal));
    smol::Embedder embedder(model, context);
    const auto rows = embedder.embed(inputs);
    const std::size_t width = embedder.width();
    // The first token's state: the same under a causal mask, moved by the last token
    // without one.
    CHECK((row_of(rows[0], 0, width) == row_of(rows[1], 0, width)) == causal);
    CHECK(row_of(rows[0], 11, width) != row_of(rows[1], 11, width));
  }
}

// BERT (EncoderRule): the tiny encoder's shape, small.
smol::SyntheticSpec bert_spec(const char* preset, smol::SyntheticWeights weights) {
  smol::SyntheticSpec spec = smol::synthetic_preset(preset);
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = weights;
  return spec;
}

TEST_CASE("an encoder: batched equals alone, every token sees the whole input, no LM head") {
  for (const char* preset : {"bert-tiny", "nomic-bert-tiny"}) {
    CAPTURE(preset);
    const smol::Model model = model_of(bert_spec(preset, smol::SyntheticWeights::q8_0));
    CHECK(model.config().encoder);
    CHECK_FALSE(model.config().causal_attention);
    CHECK(model.config().pooling != smol::Pooling::none);
    smol::Context context(2);
    check_batched_equals_alone(model, context);
    const auto inputs = some_inputs();
    smol::Embedder together(model, context, {.batch = 48});
    // The pooled state moves with the input's last token.
    std::vector<std::int32_t> other = inputs[1];
    other.back() = (other.back() + 1) % 512;
    const std::vector<std::vector<std::int32_t>> pair = {inputs[1], other};
    const auto states = together.embed(pair);
    CHECK(states[0].values != states[1].values);

    smol::Transformer transformer(model, context, {.context = 64});
    const std::vector<std::int32_t> tokens = {1, 2, 3};
    CHECK_THROWS_WITH_AS(transformer.forward(tokens, 0), doctest::Contains("no LM head"),
                         smol::Error);
  }
}

TEST_CASE("a reranker's score is its head on [CLS]'s state: tanh(cls x + b), then cls.output") {
  const smol::Model model = model_of(bert_spec("bert-reranker-tiny", smol::SyntheticWeights::f32));
  REQUIRE(model.config().n_labels == 1);
  REQUIRE(model.config().pooling == smol::Pooling::rank);
  smol::Context context(2);
  const auto inputs = some_inputs();
  smol::Embedder ranker(model, context, {.batch = 128});
  smol::Embedder states(model, context, {.batch = 128, .pooling = smol::Pooling::cls});
  REQUIRE(ranker.width() == 1);
  const auto scores = ranker.embed(inputs);
  const auto cls = states.embed(inputs);
  const smol::ClassifierWeights& head = model.weights().classifier;
  REQUIRE(head.has_hidden);
  const std::size_t width = model.config().n_embd;
  const auto f32_row = [](const smol::WeightMatrix& m, std::size_t r) {
    return reinterpret_cast<const float*>(m.row(r));
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    double score = head.output_bias[0];
    for (std::size_t j = 0; j < width; ++j) {
      double hidden = head.hidden_bias[j];
      for (std::size_t k = 0; k < width; ++k) {
        hidden += double(f32_row(head.hidden, j)[k]) * cls[i].values[k];
      }
      score += std::tanh(hidden) * f32_row(head.output, 0)[j];
    }
    REQUIRE(scores[i].rows == 1);
    CHECK(scores[i].values[0] == doctest::Approx(score).epsilon(1e-4));
  }
}

TEST_CASE("a decoder reranker's scores: softmax of cls.output on the last token's state") {
  // Qwen3-Reranker as llama.cpp runs it: no cls, no biases; the causal model's last
  // token (the end of the rerank prompt) through cls.output's two rows ("yes", "no"),
  // softmaxed, so the first score is p(yes).
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3-reranker-tiny");
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::f32;
  const smol::Model model = model_of(spec);
  REQUIRE(model.config().n_labels == 2);
  REQUIRE(model.config().rank_softmax);
  REQUIRE(model.config().pooling == smol::Pooling::rank);
  const smol::ClassifierWeights& head = model.weights().classifier;
  CHECK_FALSE(head.has_hidden);
  CHECK(head.output_bias.empty());
  smol::Context context(2);
  const auto inputs = some_inputs();
  smol::Embedder ranker(model, context, {.batch = 128});
  smol::Embedder states(model, context, {.batch = 128, .pooling = smol::Pooling::last});
  REQUIRE(ranker.width() == 2);
  const auto scores = ranker.embed(inputs);
  const auto last = states.embed(inputs);
  const std::size_t width = model.config().n_embd;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    double logits[2] = {0, 0};
    for (std::size_t label = 0; label < 2; ++label) {
      const auto* row = reinterpret_cast<const float*>(head.output.row(label));
      for (std::size_t k = 0; k < width; ++k) logits[label] += double(row[k]) * last[i].values[k];
    }
    const double yes = 1 / (1 + std::exp(logits[1] - logits[0]));
    REQUIRE(scores[i].rows == 1);
    CHECK(scores[i].values[0] == doctest::Approx(yes).epsilon(1e-4));
    CHECK(scores[i].values[0] + scores[i].values[1] == doctest::Approx(1.0).epsilon(1e-6));
  }
  check_batched_equals_alone(model, context);
}

TEST_CASE("bad inputs are refused by index; rank pooling without a head is refused") {
  const smol::Model model = model_of(small_spec(smol::Pooling::last, true));
  smol::Context context(1);
  smol::Embedder embedder(model, context, {.batch = 16});
  CHECK(embedder.max_tokens() == 16);
  const std::vector<std::vector<std::int32_t>> long_input = {{1, 2},
                                                             std::vector<std::int32_t>(17, 3)};
  CHECK_THROWS_WITH_AS(embedder.embed(long_input),
                       doctest::Contains("input 1 has 17 tokens, over the 16"), smol::Error);
  const std::vector<std::vector<std::int32_t>> empty_input = {{1, 2}, {}};
  CHECK_THROWS_WITH_AS(embedder.embed(empty_input), doctest::Contains("input 1 has no tokens"),
                       smol::Error);
  CHECK_THROWS_WITH_AS(smol::Embedder(model, context, {.pooling = smol::Pooling::rank}),
                       doctest::Contains("rank pooling"), smol::Error);
}

TEST_CASE("a vocabulary with add_eos_token ends an embedding input in eos") {
  smol::SyntheticSpec spec = small_spec(smol::Pooling::last, true);
  spec.add_eos = true;
  const auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "eos.gguf");
  const smol::Tokenizer tokenizer(smol::load_vocabulary(file));
  REQUIRE(tokenizer.vocabulary().add_eos);
  const auto plain = tokenizer.encode("hello world");
  const auto ended = tokenizer.encode("hello world", {.add_eos = true});
  REQUIRE(ended.size() == plain.size() + 1);
  CHECK(ended.back() == *tokenizer.vocabulary().eos_id);
}

}  // namespace test_model_embedder
