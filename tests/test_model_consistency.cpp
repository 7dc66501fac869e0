// The Transformer against itself and against the Eigen reference forward:
// prefill == step-by-step decode, chunked prefill == one block, rewinding, session
// errors, lazily committed KV memory, the sliding-window blocks' ring against the full
// cache, and the quantized path vs the f32 reference on
// synthetic models of several shapes and families (SmolLM3, Llama, Qwen2's biases,
// Qwen3's Q/K norms, Gemma 3's block and sliding window) with the real Q4_K_M type mix.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "fewer_repeats.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/architecture.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_file.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/testing/reference_forward.hpp"
#include "smol/testing/synthetic.hpp"
#include "test_tokens.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_model_consistency {

namespace {

const std::string kQ4Model = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

using smol::test::some_tokens;

struct Agreement {
  double mean = 0, max = 0, top1 = 0;
};

Agreement compare(std::span<const float> ours, std::span<const float> expected, std::size_t vocab) {
  REQUIRE(ours.size() == expected.size());
  Agreement a;
  double sum = 0;
  std::size_t same = 0;
  const std::size_t rows = expected.size() / vocab;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = ours.subspan(r * vocab, vocab);
    const auto want = expected.subspan(r * vocab, vocab);
    for (std::size_t i = 0; i < vocab; ++i) {
      const double delta = std::abs(double{row[i]} - want[i]);
      sum += delta;
      a.max = std::max(a.max, delta);
    }
    same += std::max_element(row.begin(), row.end()) - row.begin() ==
                    std::max_element(want.begin(), want.end()) - want.begin()
                ? 1
                : 0;
  }
  a.mean = sum / static_cast<double>(expected.size());
  a.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return a;
}

std::vector<float> step_by_step(smol::Transformer& session, std::span<const std::int32_t> tokens) {
  std::vector<float> rows;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    const auto logits = session.forward(tokens.subspan(pos, 1), pos);
    rows.insert(rows.end(), logits.begin(), logits.end());
  }
  return rows;
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// The logits of all but the last four tokens in one prefill, then of those four decoded
// one at a time, in `precision` with an f32 KV cache.
std::vector<float> prefill_then_decode(const smol::Model& model,
                                       smol::ActivationPrecision precision,
                                       std::span<const std::int32_t> tokens) {
  smol::Context ctx;
  ctx.activation_precision = precision;
  smol::Transformer session(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
  const std::size_t prefilled = tokens.size() - 4;
  const auto prefill = session.forward(tokens.first(prefilled), 0, smol::LogitsFor::all);
  std::vector<float> rows(prefill.begin(), prefill.end());
  for (std::size_t pos = prefilled; pos < tokens.size(); ++pos) {
    const auto logits = session.forward(tokens.subspan(pos, 1), pos);
    rows.insert(rows.end(), logits.begin(), logits.end());
  }
  return rows;
}

}  // namespace

TEST_CASE("prefill of n tokens then one decode equals n+1 decode steps") {
  const smol::Model model = smol::Model::open(kQ4Model);
  const std::vector<std::int32_t> tokens = some_tokens(41, 1024, 7);
  const std::span<const std::int32_t> prompt = std::span(tokens).first(40);
  for (const auto precision : {smol::ActivationPrecision::f32, smol::ActivationPrecision::q8}) {
    smol::Context ctx;
    ctx.activation_precision = precision;
    smol::Transformer batched(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
    const auto prefill = batched.forward(prompt, 0, smol::LogitsFor::all);
    std::vector<float> rows(prefill.begin(), prefill.end());
    const auto last = batched.forward(std::span(tokens).subspan(40, 1), 40);
    rows.insert(rows.end(), last.begin(), last.end());

    smol::Transformer single(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
    const Agreement a = compare(rows, step_by_step(single, tokens), 1024);
    const bool exact = precision == smol::ActivationPrecision::f32;
    MESSAGE(std::string(exact ? "f32" : "q8")
            << " activations, prefill vs decode: mean |d| " << a.mean << ", max |d| " << a.max
            << ", top-1 " << 100 * a.top1 << "%");
    if (exact) {  // only the order of float sums differs
      CHECK(a.max <= 1e-4);
    } else {  // a different sum order can flip one Q8_K rounding step
      CHECK(a.mean <= 0.15);
      CHECK(a.max <= 1.5);
      CHECK(a.top1 >= 0.85);
    }
  }
}

TEST_CASE("repacked Q4_K / Q6_K weights: the mmap path's logits, prefill and decode") {
  const smol::Model mapped = smol::Model::open(kQ4Model);
  const smol::Model repacked = smol::Model::open(kQ4Model, {.repack = smol::Repack::always});
  std::size_t q4k = 0, q6k = 0;
  const auto count = [&](const smol::WeightMatrix& w) {
    if (w.rows % smol::kRowsPerGroup != 0) return;
    q4k += w.type == smol::GgmlType::Q4_K;
    q6k += w.type == smol::GgmlType::Q6_K;
  };
  for (const smol::LayerWeights& layer : mapped.weights().layers) {
    for (const smol::WeightMatrix* w :
         {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
          &layer.ffn_up, &layer.ffn_down}) {
      count(*w);
    }
  }
  count(mapped.weights().output);
  REQUIRE(q4k > 0);
  REQUIRE(q6k > 0);  // the Q4_K_M mix: ffn_down and attn_v in some layers, the LM head
  CHECK(repacked.repacked().matrices() == q4k + q6k);
  CHECK(repacked.weights().layers[0].ffn_gate.rows8 != nullptr);
  CHECK(repacked.weights().output.rows8 != nullptr);
  CHECK(repacked.weights().token_embd.rows8 == nullptr);  // embed() reads the map
  CHECK(mapped.weights().layers[0].ffn_gate.rows8 == nullptr);
  const smol::Model automatic = smol::Model::open(kQ4Model, {.repack = smol::Repack::when_faster});
  CHECK((automatic.repacked().matrices() > 0) == smol::repacking_pays());
  // The sixteen-row copies where every type that has one is read by the prefill too: AMX
  // (tiles or the matrix unit) and the other x86 sets (the copy's own kernel).
  for (smol::Isa isa : smol::available_isas()) {
    CAPTURE(smol::isa_name(isa));
    CHECK(smol::repacking_rows16_pays(isa) ==
          (isa == smol::Isa::amx || isa == smol::Isa::avx512 || isa == smol::Isa::avx512vnni ||
           isa == smol::Isa::avx2));
  }

  const std::vector<std::int32_t> tokens = some_tokens(24, 1024, 5);
  const auto run = [&](const smol::Model& model, smol::ActivationPrecision precision) {
    return prefill_then_decode(model, precision, tokens);
  };
  // Reference mode dequantizes the file's rows, whose pages the repacking released: they
  // must come back unchanged.
  CHECK(compare(run(repacked, smol::ActivationPrecision::f32),
                run(mapped, smol::ActivationPrecision::f32), 1024)
            .max == 0.0);
  // The same Q8_K activations and integers; only the float summation order differs, and
  // it may flip a Q8_K rounding step in a later layer.
  const Agreement a = compare(run(repacked, smol::ActivationPrecision::q8),
                              run(mapped, smol::ActivationPrecision::q8), 1024);
  MESSAGE("repacked vs mapped, q8: mean |d| " << a.mean << ", max |d| " << a.max << ", top-1 "
                                              << 100 * a.top1 << "%");
  CHECK(a.mean <= 0.05);
  CHECK(a.max <= 1.0);
  CHECK(a.top1 >= 0.9);
}

// The matrices that get no interleaved copy copied in the file's order into huge pages: the
// same bytes under the same kernels, so the same bits, in prefill and decode, f32 and Q8_K
// activations; the views point at the copy, and the interleaved types still get theirs.
// The F32 fixture's matrices (no type with a copy) everywhere; where the CPU runs AMX, also
// the Q2_K and Q3_K_M fixtures laid out as for AMX, which has no eight-row kernel for
// Q2_K and Q3_K and keeps their file rows (every other x86 set has one).
TEST_CASE(
    "file-order copies (F32, and Q2_K, Q3_K_M for AMX): the mapped rows' logits, bit for bit") {
  struct Case {
    std::string path;
    std::optional<smol::Isa> layouts_for;
  };
  std::vector<Case> cases = {{std::string(SMOL_TEST_DATA_DIR) + "/tiny-smollm3-a.f32.gguf", {}}};
  const std::vector<smol::Isa> isas = smol::available_isas();
  if (std::find(isas.begin(), isas.end(), smol::Isa::amx) != isas.end()) {
    REQUIRE(smol::rows8_types_without_kernels(smol::Isa::amx).size() == 2);  // Q2_K and Q3_K
    for (const char* kind : {"q2_k", "q3_k_m"}) {
      cases.push_back(
          {std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a." + kind + ".gguf", smol::Isa::amx});
    }
  }
  for (const Case& c : cases) {
    const std::string& path = c.path;
    CAPTURE(path);
    const auto with_layouts = [&](smol::ModelOptions options) {  // the case's layouts
      options.repack_for = c.layouts_for;
      return options;
    };
    const std::vector<smol::GgmlType> left_out = smol::rows8_types_without_kernels(c.layouts_for);
    const smol::Model mapped = smol::Model::open(path);
    const smol::Model copied =
        smol::Model::open(path, with_layouts({.repack = smol::Repack::always}));
    std::size_t interleaved = 0, file_order = 0;
    const auto bytes = copied.file().bytes();
    const auto in_map = [&](const smol::WeightMatrix& w) {
      return w.data >= bytes.data() && w.data < bytes.data() + bytes.size();
    };
    const auto count = [&](const smol::WeightMatrix& w) {
      if (smol::can_interleave(w.type, w.rows) &&
          std::find(left_out.begin(), left_out.end(), w.type) == left_out.end()) {
        ++interleaved;
        CHECK(w.rows8 != nullptr);
        CHECK(in_map(w));
      } else {
        ++file_order;
        CHECK(w.rows8 == nullptr);
        CHECK_FALSE(in_map(w));
      }
    };
    for (const smol::LayerWeights& layer : copied.weights().layers) {
      for (const smol::WeightMatrix* w :
           {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
            &layer.ffn_up, &layer.ffn_down}) {
        count(*w);
      }
    }
    count(copied.weights().output);
    CHECK(in_map(copied.weights().token_embd));  // embed() reads the map
    REQUIRE(file_order >= 32);  // F32: every matrix; Q2_K / Q3_K_M: the fixture README's Q2_K, Q3_K
    CHECK(copied.repacked().file_order_matrices() == file_order);
    CHECK(copied.repacked().matrices() == interleaved);

    const std::vector<std::int32_t> tokens = some_tokens(24, 1024, 7);
    const auto run = [&](const smol::Model& model, smol::ActivationPrecision precision) {
      return prefill_then_decode(model, precision, tokens);
    };
    // Repack::always interleaves the K-quant matrices too, whose sums run in another order
    // (the test above), so the bits are compared against a model with those copies only.
    const smol::Model interleaved_only = smol::Model::open(
        path, with_layouts({.repack = smol::Repack::always, .file_order_copies = false}));
    CHECK(interleaved_only.repacked().file_order_matrices() == 0);
    for (const auto precision : {smol::ActivationPrecision::f32, smol::ActivationPrecision::q8}) {
      CHECK(run(copied, precision) == run(interleaved_only, precision));
    }
    // Reference mode reads every matrix's `data`: the copies, and the released map pages.
    CHECK(run(copied, smol::ActivationPrecision::f32) ==
          run(mapped, smol::ActivationPrecision::f32));
  }
}

TEST_CASE("a prefill split into batches, or rewound and redone, gives the same logits") {
  const smol::Model model = smol::Model::open(kQ4Model);
  smol::Context ctx;
  ctx.activation_precision = smol::ActivationPrecision::f32;
  const std::vector<std::int32_t> tokens = some_tokens(30, 1024, 3);
  smol::Transformer whole(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
  const auto expected_span = whole.forward(tokens, 0, smol::LogitsFor::all);
  const std::vector<float> expected(expected_span.begin(), expected_span.end());

  smol::Transformer chunked(model, ctx,
                            {.context = 64, .kv_type = smol::KvType::f32, .max_batch = 7});
  const auto chunked_rows = chunked.forward(tokens, 0, smol::LogitsFor::all);
  CHECK(compare(chunked_rows, expected, 1024).max <= 1e-4);

  // Rewind to position 10 after a detour, then finish the sequence again.
  smol::Transformer rewound(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
  rewound.forward(std::span(tokens).first(20), 0, smol::LogitsFor::none);
  const std::vector<std::int32_t> detour = some_tokens(15, 1024, 99);
  rewound.forward(detour, 20, smol::LogitsFor::none);
  CHECK(rewound.n_filled() == 35);
  const auto redone = rewound.forward(std::span(tokens).subspan(10), 10, smol::LogitsFor::all);
  CHECK(compare(redone, std::span(expected).subspan(10 * 1024), 1024).max <= 1e-4);
  CHECK(rewound.n_filled() == 30);
}

// A cancel is polled four times per layer, so it stops a long prefill part-way through one
// internal pass: the call throws Cancelled, n_filled() ends at the last pass that
// completed, and going on from there gives the logits of an uncancelled run.
TEST_CASE("a cancelled prefill stops between layers and leaves the cache consistent") {
  const smol::Model model = smol::Model::open(kQ4Model);
  smol::Context ctx;
  ctx.activation_precision = smol::ActivationPrecision::f32;
  const std::vector<std::int32_t> tokens = some_tokens(40, 1024, 5);
  const smol::TransformerOptions options{
      .context = 64, .kv_type = smol::KvType::f32, .max_batch = 16};
  smol::Transformer whole(model, ctx, options);
  const auto expected_span = whole.forward(tokens, 0, smol::LogitsFor::all);
  const std::vector<float> expected(expected_span.begin(), expected_span.end());
  const std::size_t polls_per_pass = 4 * model.config().n_layer;

  // Cancelled in the second pass, in its second layer.
  std::size_t polls = 0;
  const smol::CancelCheck cancel_mid_pass([&] { return ++polls > polls_per_pass + 5; });
  smol::Transformer cancelled(model, ctx, options);
  CHECK_THROWS_AS(cancelled.forward(tokens, 0, smol::LogitsFor::all, cancel_mid_pass),
                  smol::Cancelled);
  CHECK(polls == polls_per_pass + 6);  // not one poll more: it stopped at once
  CHECK(cancelled.n_filled() == 16);
  const auto rest = cancelled.forward(std::span(tokens).subspan(16), 16, smol::LogitsFor::all);
  CHECK(compare(rest, std::span(expected).subspan(16 * 1024), 1024).max <= 1e-4);
  CHECK(cancelled.n_filled() == 40);

  // A flag set before the call stops it before any work; the cache keeps its 40.
  std::atomic<bool> flag{true};
  CHECK_THROWS_AS(cancelled.forward(some_tokens(8, 1024, 6), 40, smol::LogitsFor::last, &flag),
                  smol::Cancelled);
  CHECK(cancelled.n_filled() == 40);
}

TEST_CASE("session errors: overflow, gaps, bad token ids, oversized context") {
  const smol::Model model = smol::Model::open(kQ4Model);
  smol::Context ctx;
  smol::Transformer session(model, ctx, {.context = 16});
  const std::vector<std::int32_t> tokens = some_tokens(17, 1024, 1);
  CHECK_THROWS_WITH_AS(session.forward(tokens, 0), doctest::Contains("context overflow"),
                       smol::Error);
  session.forward(std::span(tokens).first(16), 0);
  CHECK_THROWS_WITH_AS(session.forward(std::span(tokens).first(1), 16),
                       doctest::Contains("context overflow"), smol::Error);
  smol::Transformer fresh(model, ctx, {.context = 16});
  CHECK_THROWS_WITH_AS(fresh.forward(std::span(tokens).first(1), 3),
                       doctest::Contains("past the 0 positions"), smol::Error);
  const std::vector<std::int32_t> bad{5, 1024};
  CHECK_THROWS_WITH_AS(fresh.forward(bad, 0), doctest::Contains("token id 1024"), smol::Error);
  CHECK_THROWS_AS(smol::Transformer(model, ctx, {.context = 4097}), smol::Error);
}

TEST_CASE("a long-context session commits KV memory only for the positions it fills") {
  smol::SyntheticSpec spec = smol::synthetic_preset("tiny");
  spec.context = 1u << 20;  // 1M positions: 2 GiB of f16 K/V if reserved eagerly
  spec.vocab = 512;
  spec.fast = true;
  auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "long.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  const smol::Model model(std::move(file), std::move(config));
  smol::Context ctx;
  const std::size_t before = resident_bytes();
  smol::Transformer session(model, ctx);
  CHECK(session.context_length() == (1u << 20));
  session.forward(some_tokens(100, spec.vocab, 5), 0);
  const std::size_t grown = resident_bytes() - std::min(before, resident_bytes());
  MESSAGE("resident growth for 100 positions of a 1M-position session: " << grown << " bytes");
  CHECK(grown < 64u << 20);
}

TEST_CASE("quantized path vs the f32 reference forward on synthetic Q4_K_M models") {
  struct Shape {
    const char* arch;
    std::size_t hidden, heads, kv_heads, head_dim;
    bool tied;
    // With q8 activations every expert is used: which experts a token takes is a
    // discontinuous function of its activations, and the order of float sums alone tips
    // near-ties (measured on the GPT-OSS shape: mean |d| 0.14-0.31, max 2-4 with 4 of 16
    // experts, 0.05 and 0.32 with all 16). The f32 run holds the choice to 1e-3.
    bool every_expert_in_q8 = false;
  };
  const Shape shapes[] = {
      {"smollm3", 256, 4, 4, 64, true},   // head_dim 64, no grouping
      {"smollm3", 256, 4, 2, 64, true},   // GQA 2
      {"smollm3", 256, 4, 1, 64, false},  // GQA 4, separate output.weight
      {"smollm3", 256, 4, 4, 128, true},  // head_dim 128 with q_dim 512 != hidden
      {"llama", 512, 4, 2, 128, true},    // RoPE in every block
      {"smollm3", 512, 4, 1, 128, true},  // GQA 4 at head_dim 128
      {"qwen2", 256, 4, 2, 64, true},     // QKV biases, rotate-half RoPE
      {"qwen2", 512, 8, 2, 64, false},    // GQA 4, separate output.weight
      {"qwen3", 256, 4, 2, 128, true},    // per-head Q/K norms, heads wider than 256 / 4
      {"qwen3", 512, 8, 4, 64, true},     // per-head Q/K norms at head_dim 64
      // Gemma 3: scaled embeddings, post norms, GeGLU, Q/K norms, and a window of 16
      // positions on five blocks of six (the 48 tokens cross it), with their own RoPE.
      {"gemma3", 256, 4, 2, 128, true},
      {"gemma3", 512, 8, 4, 64, true},
      // Qwen3-MoE: 16 experts of 256, 4 chosen per token; prefill groups the tokens by
      // expert, decode reads only a token's own experts.
      {"qwen3moe", 256, 4, 2, 128, false},
      // GPT-OSS: biases on Q, K, V and the output, a sink per head, every other block
      // windowed (16 positions) under the same YaRN RoPE, and 16 clamped-SwiGLU experts
      // with biases, the router's best 4 softmaxed among themselves.
      {"gpt-oss", 256, 8, 2, 64, false, true},
  };
  const std::vector<std::int32_t> tokens = some_tokens(48, 512, 11);
  std::size_t shape_index = 0;
  for (const Shape& s : shapes) {
    // With fewer repeats (fewer_repeats.hpp) each shape runs one of the two activation
    // precisions, in turn: every shape and both precisions still run (both on SmolLM3, Qwen2,
    // Qwen3 and Gemma 3 shapes), at half the cost.
    const bool odd_shape = shape_index++ % 2 == 1;
    smol::SyntheticSpec spec;
    smol::set_synthetic_family(spec, s.arch);  // its biases or Q/K norms
    // Six blocks hold every kind of block these shapes have (SmolLM3's NoPE block 3,
    // Gemma 3's five windowed blocks and its global sixth); the full run takes eight, and
    // with fewer repeats six (each block more is its share of the weights' generation
    // and of both forward passes, ten times dearer under the sanitizers).
    spec.layers = smol::test::fewer_repeats() ? 6 : 8;
    spec.hidden = s.hidden;
    spec.ffn = 512;
    spec.heads = s.heads;
    spec.kv_heads = s.kv_heads;
    spec.head_dim = s.head_dim;
    spec.vocab = 512;
    spec.tied = s.tied;
    spec.seed = s.hidden + s.kv_heads * 10 + s.head_dim;
    // Random valid blocks of Q4_K_M's mix, not quantized Gaussians: the reference
    // dequantizes the same blocks, so the comparison holds the forward pass either way,
    // and the quantizer is held to llama-quantize byte for byte elsewhere
    // (test_quant_fixture). Quantizing was two thirds of this case (its search and the
    // Gaussian draws; 98 s of it under the sanitizers, 14.6 s -> 3.3 s in Release), with
    // the same agreement: q8 mean |d| 0.03-0.08, max 0.23-0.58 either way.
    spec.fast = true;
    // The file, written again only where the q8 run uses every expert.
    const std::size_t experts_used = spec.experts_used;
    std::optional<smol::Model> written;
    const auto model_with = [&](std::size_t used) -> const smol::Model& {
      if (!written || written->config().n_expert_used != used) {
        spec.experts_used = used;
        auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                                     "synthetic.gguf");
        auto config = smol::ModelConfig::from_gguf(file);
        written.emplace(std::move(file), std::move(config));
      }
      return *written;
    };
    for (const auto precision : {smol::ActivationPrecision::q8, smol::ActivationPrecision::f32}) {
      const bool q8 = precision == smol::ActivationPrecision::q8;
      if (smol::test::fewer_repeats() && q8 == odd_shape) continue;
      const smol::Model& model =
          model_with(q8 && s.every_expert_in_q8 ? spec.experts : experts_used);
      REQUIRE(model.config().head_dim == s.head_dim);
      // q8: against a reference that rounds activations as ggml does, so only the
      // order of float sums differs; f32: against the exact-activation reference.
      const auto reference =
          smol::ReferenceForward(model, {.round_activations = q8}).logits(tokens);
      const std::span<const float> expected(reference.data(),
                                            static_cast<std::size_t>(reference.size()));
      smol::Context ctx;
      ctx.activation_precision = precision;
      smol::Transformer session(model, ctx, {.context = 128, .kv_type = smol::KvType::f32});
      // Half as one prefill, the rest decoded one token at a time (with fewer repeats
      // only the last 8: each decode step takes the same path again).
      const std::size_t prefilled = smol::test::fewer_repeats() ? 40 : 24;
      const auto prefill =
          session.forward(std::span(tokens).first(prefilled), 0, smol::LogitsFor::all);
      std::vector<float> rows(prefill.begin(), prefill.end());
      for (std::size_t pos = prefilled; pos < tokens.size(); ++pos) {
        const auto logits = session.forward(std::span(tokens).subspan(pos, 1), pos);
        rows.insert(rows.end(), logits.begin(), logits.end());
      }
      const Agreement a = compare(rows, expected, spec.vocab);
      MESSAGE(std::string(s.arch) << " hidden " << s.hidden << " heads " << s.heads << "/"
                                  << s.kv_heads << " head_dim " << s.head_dim
                                  << std::string(q8 ? " q8 activations" : " f32 activations")
                                  << " vs reference: mean |d| " << a.mean << ", max |d| " << a.max
                                  << ", top-1 " << 100 * a.top1 << "%");
      if (q8) {
        CHECK(a.mean <= 0.15);
        CHECK(a.max <= 1.5);
        CHECK(a.top1 >= 0.85);
      } else if (model.config().ffn_activation == smol::FfnActivation::gelu_tanh) {
        // GELU as ggml computes it goes through f16 (ops/activation.hpp): a gate value
        // a float rounding apart can land one f16 step (1e-3 relative) apart.
        CHECK(a.mean <= 1e-3);
        CHECK(a.max <= 1e-2);
        CHECK(a.top1 == 1.0);
      } else {
        CHECK(a.max <= 1e-3);
        CHECK(a.top1 == 1.0);
      }
    }
  }
}

// A mixture whose router scores every expert alike (its weights zeroed in the file):
// every token ties on all 16 experts, so each takes the lowest four (llama.cpp's top-k
// and the reference's stable sort agree there), all on the same experts at weight 1/4,
// and twelve experts go empty. Prefill (one expert over every token) and decode (one
// token) give the reference's logits.
TEST_CASE("a mixture of experts with tied scores: the lower experts, the others empty") {
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3moe-tiny");
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::f32;
  std::vector<std::byte> bytes = smol::make_synthetic_writer(spec).to_bytes();
  {
    const auto file = smol::gguf::GgufFile::from_bytes(bytes, "moe.gguf");
    for (const smol::gguf::TensorInfo& info : file.tensors()) {
      if (info.name.find("ffn_gate_inp") == std::string_view::npos) continue;
      const auto offset = static_cast<std::size_t>(info.data - file.bytes().data());
      std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), info.bytes, std::byte{0});
    }
  }
  auto file = smol::gguf::GgufFile::from_bytes(std::move(bytes), "moe.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  const smol::Model model(std::move(file), std::move(config));
  const std::vector<std::int32_t> tokens = some_tokens(16, 512, 5);
  const auto reference = smol::ReferenceForward(model).logits(tokens);
  const std::span<const float> expected(reference.data(),
                                        static_cast<std::size_t>(reference.size()));
  smol::Context ctx;
  ctx.activation_precision = smol::ActivationPrecision::f32;
  smol::Transformer session(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
  const auto prefill = session.forward(std::span(tokens).first(12), 0, smol::LogitsFor::all);
  std::vector<float> rows(prefill.begin(), prefill.end());
  for (std::size_t pos = 12; pos < tokens.size(); ++pos) {
    const auto logits = session.forward(std::span(tokens).subspan(pos, 1), pos);
    rows.insert(rows.end(), logits.begin(), logits.end());
  }
  const Agreement a = compare(rows, expected, spec.vocab);
  CHECK(a.max <= 1e-3);
  CHECK(a.top1 == 1.0);
}

// The sliding-window blocks' ring (KvCache's KvRing) gives the bits of the full cache:
// a Gemma-shaped model with a window of 8 and passes of up to 16 tokens keeps a ring of
// 512 positions (2 attention blocks) in its five local blocks; 1100 positions wrap it
// twice. Rewinds inside the ring reuse it; one past what it holds runs the earlier
// positions again; a saved session needs every position and is refused once it wraps.
TEST_CASE("sliding-window ring: the full cache's bits, rewinds, sessions") {
  smol::SyntheticSpec spec;
  smol::set_synthetic_family(spec, "gemma3");
  spec.sliding_window = 8;
  spec.layers = 6;  // blocks 0-4 local, block 5 global
  spec.hidden = 128;
  spec.ffn = 256;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 64;
  spec.vocab = 512;
  spec.context = 2048;
  auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                               "gemma3-window8.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  const smol::Model model(std::move(file), std::move(config));
  REQUIRE(model.config().sliding_window == 8);
  smol::Context ctx(2);
  const smol::TransformerOptions full_options{
      .context = 2048, .max_batch = 16, .window_ring = false};
  smol::TransformerOptions ring_options = full_options;
  ring_options.window_ring = true;
  smol::Transformer full(model, ctx, full_options);
  smol::Transformer ring(model, ctx, ring_options);
  REQUIRE(ring.kv_cache().ring_positions() == 512);
  CHECK(full.kv_cache().ring_positions() == 0);
  for (std::size_t layer = 0; layer < 6; ++layer)
    CHECK(ring.kv_cache().is_ring(layer) == (layer < 5));
  // 5 of 6 blocks stop at 512 positions: at 2048, (5 * 512 + 2048) / (6 * 2048).
  CHECK(ring.kv_cache().bytes_for(2048) * 6 * 2048 ==
        full.kv_cache().bytes_for(2048) * (5 * 512 + 2048));

  const std::size_t vocab = spec.vocab;
  const auto same = [&](std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  const std::vector<std::int32_t> tokens = some_tokens(1100, vocab, 5);
  const auto run = [&](std::span<const std::int32_t> part, std::size_t n_past,
                       smol::LogitsFor which) {
    const auto want = full.forward(part, n_past, which);
    const std::vector<float> expected(want.begin(), want.end());
    return same(ring.forward(part, n_past, which), expected);
  };
  // A prefill past the ring (every row), then one-token steps.
  CHECK(run(std::span(tokens).first(700), 0, smol::LogitsFor::all));
  CHECK(ring.ring_floor() == 256);  // 3 blocks written, the ring holds the last 2
  for (std::size_t pos = 700; pos < 740; ++pos) {
    CAPTURE(pos);
    CHECK(run(std::span(tokens).subspan(pos, 1), pos, smol::LogitsFor::last));
  }
  // A rewind inside the ring (a speculative rollback), then on past the second wrap.
  CHECK(run(std::span(tokens).subspan(735, 300), 735, smol::LogitsFor::all));
  CHECK(ring.ring_floor() == 768);
  CHECK(run(std::span(tokens).subspan(1030, 70), 1030, smol::LogitsFor::all));
  // A saved session holds every position: refused once the ring has wrapped.
  CHECK_THROWS_WITH_AS(smol::encode_session(ring, std::span(tokens).first(700)),
                       doctest::Contains("sliding-window"), smol::Error);
  // A rewind past what the ring holds (a prompt cache reusing an early prefix): the
  // positions before it run again from the kept tokens, the same bits.
  const std::vector<std::int32_t> other = some_tokens(20, vocab, 9);
  CHECK(run(other, 100, smol::LogitsFor::all));
  CHECK(ring.n_filled() == 120);
  CHECK(ring.ring_floor() == 0);

  // A session within the ring saves and restores into a ring session that goes on with
  // the same bits.
  (void)ring.forward(std::span(tokens).first(300), 0, smol::LogitsFor::none);
  const auto image_bytes = smol::encode_session(ring, std::span(tokens).first(300));
  smol::Transformer restored(model, ctx, ring_options);
  smol::restore_session(smol::decode_session(image_bytes, "ring.session"), restored,
                        "ring.session");
  (void)full.forward(std::span(tokens).first(300), 0, smol::LogitsFor::none);
  const auto want = full.forward(std::span(tokens).subspan(300, 600), 300, smol::LogitsFor::all);
  const std::vector<float> expected(want.begin(), want.end());
  CHECK(same(restored.forward(std::span(tokens).subspan(300, 600), 300, smol::LogitsFor::all),
             expected));
  // Its tokens came with it: a rewind past its ring runs them again.
  CHECK(same(restored.forward(other, 50, smol::LogitsFor::all),
             full.forward(other, 50, smol::LogitsFor::all)));

  // Restored without its tokens, such a rewind is refused, naming why; a start from
  // position 0 makes every token known again.
  const smol::SessionImage image = smol::decode_session(image_bytes, "ring.session");
  smol::Transformer blind(model, ctx, ring_options);
  blind.restore(300, [&](smol::KvCache& kv) {
    const std::size_t layer_bytes = kv.layer_bytes_for(300);
    for (std::size_t layer = 0; layer < 6; ++layer) {
      kv.copy_rows_in(layer, 300, image.kv.data() + layer * layer_bytes);
    }
  });
  (void)blind.forward(std::span(tokens).subspan(300, 600), 300, smol::LogitsFor::none);
  CHECK_THROWS_WITH_AS((void)blind.forward(other, 50), doctest::Contains("unknown (restored)"),
                       smol::Error);
  (void)blind.forward(std::span(tokens).first(900), 0, smol::LogitsFor::none);
  CHECK(same(blind.forward(other, 50, smol::LogitsFor::all),
             full.forward(other, 50, smol::LogitsFor::all)));
}

// What the ring saves on Gemma 3 270M (18 blocks, every sixth global, 1 KV head of 256,
// window 512) at its 32K context with an f16 cache and passes of 512 tokens: the 15
// local blocks keep 1280 positions instead of 32768.
TEST_CASE("sliding-window ring: Gemma 3 270M's KV cache at 32K") {
  const std::size_t layers = 18, context = 32768;
  const std::vector<bool> local =
      smol::find_architecture("gemma3").sliding_window.local_layers(layers);
  const smol::KvRing ring = smol::sliding_window_ring(512, 512, local);
  CHECK(ring.positions == 1280);
  const smol::KvCache before(layers, 1, 256, context, smol::KvType::f16);
  const smol::KvCache after(layers, 1, 256, context, smol::KvType::f16, ring);
  const double mib = 1024.0 * 1024.0;
  MESSAGE("Gemma 3 270M KV cache at 32K (f16): "
          << before.bytes_for(context) / mib << " MiB without the ring, "
          << after.bytes_for(context) / mib << " MiB with it");
  // 512 bytes a K row and a V row each: 18 * 32768 * 1024 = 576 MiB; 3 * 32768 * 1024
  // + 15 * 1280 * 1024 = 114.75 MiB.
  CHECK(before.bytes_for(context) == 18ull * 32768 * 1024);
  CHECK(after.bytes_for(context) == 3ull * 32768 * 1024 + 15ull * 1280 * 1024);
}

// The attention scale reaches the forward pass: a 62-block Gemma-shaped model (Gemma 3
// 27B's rule, n_embd / n_head = 32 against head_dim 64) matches the f32 reference with
// that scale, and is far from it with 1/sqrt(head_dim).
TEST_CASE("Gemma 3 27B's attention scale in the forward pass") {
  smol::SyntheticSpec spec;
  smol::set_synthetic_family(spec, "gemma3");
  spec.layers = 62;
  spec.hidden = 128;
  spec.ffn = 128;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 64;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::f32;
  const auto bytes = smol::make_synthetic_writer(spec).to_bytes();
  const auto load = [&](bool rule) {
    auto file = smol::gguf::GgufFile::from_bytes(bytes, "gemma3-62.gguf");
    auto config = smol::ModelConfig::from_gguf(file);
    if (!rule) config.attention_scale_dim = 0;
    return smol::Model(std::move(file), std::move(config));
  };
  const smol::Model model = load(true), plain = load(false);
  REQUIRE(model.config().attention_scale_dim == 32);
  const std::vector<std::int32_t> tokens = some_tokens(12, spec.vocab, 3);
  smol::Context ctx(2);
  ctx.activation_precision = smol::ActivationPrecision::f32;
  smol::Transformer session(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
  const auto logits = session.forward(tokens, 0, smol::LogitsFor::all);
  const std::vector<float> ours(logits.begin(), logits.end());
  const auto scaled = smol::ReferenceForward(model).logits(tokens);
  const auto unscaled = smol::ReferenceForward(plain).logits(tokens);
  const Agreement with =
      compare(ours, {scaled.data(), static_cast<std::size_t>(scaled.size())}, spec.vocab);
  const Agreement without =
      compare(ours, {unscaled.data(), static_cast<std::size_t>(unscaled.size())}, spec.vocab);
  MESSAGE("62 blocks: vs the reference with n_embd / n_head: max |d| "
          << with.max << "; with head_dim: " << without.max);
  CHECK(with.max <= 1e-2);
  CHECK(without.max > 10 * with.max);
}

}  // namespace test_model_consistency
