// The CUDA unit's code, run on the host: needs nvcc, not a GPU.
//
// The __host__ __device__ block decoders (cuda/block_decode.cuh) against the scalar
// reference dequantizer, bit for bit, on random blocks and on every tensor that
// llama-quantize wrote into the fixture; a warp's lane decomposition of a dot
// product; and the whole GPU forward pass (cuda/forward_engine.cuh) over
// HostBackend, which runs each kernel's body in loops, against smol::Transformer and
// llama.cpp's goldens. What this cannot cover is the CUDA mechanics (indexing,
// shared memory, shuffles); tests/cuda/test_cuda_device.cpp covers those on a GPU.
#include <doctest/doctest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "forward_engine.cuh"
#include "host_backend.cuh"
#include "logits_check.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/testing/synthetic.hpp"

namespace {

using namespace smol_cuda_test;
using smol::GgmlType;
namespace cd = smol::cuda::detail;
using HostEngine = cd::ForwardEngine<cd::HostBackend>;

// ---- the block decoders -------------------------------------------------------------

// Bytes with the device's alignment (HostBackend's arrays), so load() checks hold.
using Bytes = cd::HostBackend::Array<std::uint8_t>;

template <GgmlType T>
std::size_t groups_in(std::size_t n_values) {
  return n_values / static_cast<std::size_t>(cd::GroupFormat<T>::values);
}

// Every group of a row decoded by decode_group<T> equals dequantize_row, bit for bit.
// Returns the number of values that differ.
template <GgmlType T>
std::size_t decode_mismatches(const std::uint8_t* row, std::size_t n_values) {
  std::vector<float> expected(n_values);
  smol::dequantize_row(T, reinterpret_cast<const std::byte*>(row), expected.data(), n_values);
  constexpr int kValues = cd::GroupFormat<T>::values;
  std::size_t mismatches = 0;
  for (std::size_t g = 0; g < groups_in<T>(n_values); ++g) {
    float values[kValues];
    cd::decode_group<T>(row, g, values);
    for (int k = 0; k < kValues; ++k) {
      const float want = expected[g * kValues + static_cast<std::size_t>(k)];
      mismatches += std::bit_cast<std::uint32_t>(values[k]) != std::bit_cast<std::uint32_t>(want);
    }
  }
  return mismatches;
}

// A finite f16 with random sign, exponent (subnormals included) and mantissa.
std::uint16_t random_finite_half(std::mt19937& rng) {
  for (;;) {
    const auto bits = static_cast<std::uint16_t>(rng());
    if (((bits >> 10) & 0x1F) != 0x1F) return bits;
  }
}

// A row of `blocks` blocks of random bytes whose f16 scales are finite: every bit
// pattern of quants and packed scales occurs, not only what a quantizer writes.
template <GgmlType T>
Bytes random_blocks(std::size_t blocks, std::mt19937& rng) {
  constexpr auto bytes = static_cast<std::size_t>(cd::GroupFormat<T>::block_bytes);
  Bytes row(blocks * bytes);
  for (std::size_t i = 0; i < row.size(); ++i) row.data()[i] = static_cast<std::uint8_t>(rng());
  const auto put_half = [&](std::size_t at) {
    const std::uint16_t h = random_finite_half(rng);
    std::memcpy(row.data() + at, &h, 2);
  };
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t base = b * bytes;
    if constexpr (T == GgmlType::Q4_K) {
      put_half(base);
      put_half(base + 2);
    } else if constexpr (T == GgmlType::Q6_K) {
      put_half(base + 208);
    } else if constexpr (T == GgmlType::Q8_0 || T == GgmlType::Q4_0) {
      put_half(base);
    } else if constexpr (T == GgmlType::F16) {
      for (std::size_t i = 0; i < bytes; i += 2) put_half(base + i);
    } else if constexpr (T == GgmlType::F32) {
      std::uniform_real_distribution<float> value(-100.0f, 100.0f);
      for (std::size_t i = 0; i < bytes; i += 4) {
        const float v = value(rng);
        std::memcpy(row.data() + base + i, &v, 4);
      }
    } else if constexpr (T == GgmlType::BF16) {
      for (std::size_t i = 0; i < bytes; i += 2) {  // keep the exponent finite
        if ((row.data()[base + i + 1] & 0x7F) == 0x7F) row.data()[base + i + 1] &= 0xBF;
      }
    }
  }
  return row;
}

// A row that quantize_row wrote from Gaussian values: what real files hold.
template <GgmlType T>
Bytes quantized_row(std::size_t n_values, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> values(n_values);
  for (float& v : values) v = normal(rng);
  Bytes row(smol::ggml_row_bytes(T, n_values));
  smol::quantize_row(T, values.data(), reinterpret_cast<std::byte*>(row.data()), n_values);
  return row;
}

template <GgmlType T>
void check_decoder() {
  CAPTURE(smol::ggml_type_name(T));
  std::mt19937 rng(static_cast<unsigned>(T) + 17);
  const std::size_t block_values =
      static_cast<std::size_t>(cd::GroupFormat<T>::values * cd::GroupFormat<T>::per_block);
  for (int trial = 0; trial < 20; ++trial) {
    const Bytes random = random_blocks<T>(9, rng);
    CHECK(decode_mismatches<T>(random.data(), 9 * block_values) == 0);
    const std::size_t n = 4 * std::max<std::size_t>(block_values, 256);
    const Bytes quantized = quantized_row<T>(n, rng);
    CHECK(decode_mismatches<T>(quantized.data(), n) == 0);
  }
}

// ---- models and engines ------------------------------------------------------------

smol::Context& f32_context() {
  static smol::Context context = [] {
    smol::Context c(2);
    c.activation_precision = smol::ActivationPrecision::f32;
    return c;
  }();
  return context;
}

// A synthetic model file in the build tree, written once per test run.
std::string synthetic_model(const std::string& name, smol::SyntheticSpec spec) {
  const std::string path = std::string(SMOL_TEST_DATA_DIR) + "/cuda-host-" + name + ".gguf";
  spec.layers = 4;
  spec.context = 1024;
  smol::write_synthetic_model(spec, path);
  return path;
}

// The host-emulated GPU pass and the CPU path in reference mode, teacher-forced over
// `golden`'s tokens, compared row by row.
Agreement gpu_pass_vs_cpu(const smol::Model& model, const Golden& golden,
                          smol::TransformerOptions options) {
  HostEngine gpu(model, options);
  smol::Transformer cpu(model, f32_context(), options);
  const Agreement a =
      compare(teacher_forced(gpu, golden), teacher_forced(cpu, golden), model.config().n_vocab);
  MESSAGE("GPU pass on the host vs CPU, "
          << model.config().architecture << " "
          << smol::ggml_type_name(model.weights().layers[0].ffn_up.type) << ", " << golden.label
          << ", KV " << (options.kv_type == smol::KvType::f32 ? "f32" : "f16") << ": max |d| "
          << a.max << ", mean |d| " << a.mean << ", top-1 " << 100 * a.top1 << "%");
  return a;
}

}  // namespace

TEST_CASE("Group decoders match dequantize_row bit for bit on random and quantized blocks") {
  check_decoder<GgmlType::Q4_K>();
  check_decoder<GgmlType::Q6_K>();
  check_decoder<GgmlType::Q8_0>();
  check_decoder<GgmlType::Q4_0>();
  check_decoder<GgmlType::F16>();
  check_decoder<GgmlType::BF16>();
  check_decoder<GgmlType::F32>();
}

TEST_CASE("Group decoders match dequantize_row on every tensor of the Q4_K_M fixture") {
  const auto file = smol::gguf::GgufFile::open(kQ4Model);
  std::size_t checked = 0;
  for (const auto& tensor : file.tensors()) {
    CAPTURE(tensor.name);
    const std::size_t n = tensor.row_length();
    std::size_t mismatches = 0;
    for (std::size_t r = 0; r < tensor.rows(); ++r) {
      const auto* row = reinterpret_cast<const std::uint8_t*>(tensor.data + r * tensor.row_bytes);
      cd::with_weight_type(tensor.type, [&](auto tag) {
        mismatches += decode_mismatches<decltype(tag)::value>(row, n);
      });
    }
    CHECK(mismatches == 0);
    checked += tensor.elements();
  }
  CHECK(file.tensors().size() == 74);
  MESSAGE(checked << " values of " << file.tensors().size() << " tensors decoded");
}

TEST_CASE("A warp's lane partials add up to the row's dot product, for 1 and 8 tokens") {
  const smol::Model model = smol::Model::open(kQ4Model);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto check_matrix = [&](const smol::WeightMatrix& w) {
    CAPTURE(w.name);
    constexpr int kTokens = cd::kMatmulTile;
    cd::HostBackend::Array<float> x(kTokens * w.cols);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    std::vector<float> row(w.cols);
    double worst = 0;
    for (std::size_t r = 0; r < w.rows; ++r) {
      smol::dequantize_row(w.type, w.row(r), row.data(), w.cols);
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(w.row(r));
      cd::with_weight_type(w.type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        const std::size_t groups = w.cols / cd::GroupFormat<T>::values;
        for (const int tokens : {1, 5, kTokens}) {
          float total[kTokens] = {};
          for (unsigned lane = 0; lane < cd::kWarp; ++lane) {
            float acc[kTokens] = {};
            cd::lane_row_partials<T, kTokens>(bytes, groups, lane, x.data(), w.cols, tokens, acc);
            for (int t = 0; t < kTokens; ++t) total[t] += acc[t];
          }
          for (int t = 0; t < kTokens; ++t) {
            double expected = 0, magnitude = 0;
            for (std::size_t i = 0; i < w.cols; ++i) {
              const double product = static_cast<double>(row[i]) * x.data()[t * w.cols + i];
              expected += product;
              magnitude += std::abs(product);
            }
            if (t >= tokens) expected = 0;  // tokens past the tile's count stay untouched
            worst = std::max(worst, std::abs(total[t] - expected) / (magnitude + 1e-30));
          }
        }
      });
    }
    CHECK(worst < 1e-5);
  };
  const smol::ModelWeights& w = model.weights();
  check_matrix(w.token_embd);  // Q6_K
  for (const smol::LayerWeights& layer : w.layers) {
    for (const smol::WeightMatrix* m : {&layer.attn_q, &layer.attn_k, &layer.attn_v,
                                        &layer.attn_output, &layer.ffn_gate, &layer.ffn_down}) {
      check_matrix(*m);
    }
  }
}

TEST_CASE("The attention plan covers every position with whole tiles and no empty chunk") {
  for (const std::size_t tokens : {1, 2, 7, 64, 512, 4096}) {
    for (const std::size_t kv : {1, 4, 8}) {
      for (const std::size_t visible : {1, 255, 256, 257, 1000, 4096, 65536}) {
        if (tokens > visible) continue;
        const cd::AttentionPlan plan = cd::plan_attention(tokens, kv, visible);
        CAPTURE(tokens);
        CAPTURE(kv);
        CAPTURE(visible);
        CHECK(plan.chunk_len % cd::kAttentionTile == 0);
        CHECK(plan.n_chunks * plan.chunk_len >= visible);
        CHECK((plan.n_chunks - 1) * plan.chunk_len < visible);
        CHECK(plan.n_chunks * tokens * kv <=
              std::max<std::size_t>(2 * cd::kAttentionTargetBlocks, tokens * kv));
      }
    }
  }
}

TEST_CASE("GPU pass on the host: Q4_K_M fixture reproduces the F32 goldens and the CPU") {
  const smol::Model model = smol::Model::open(kQ4Model);
  for (const char* prompt : {"P1", "P2", "P3"}) {
    const Golden golden = load_golden("f32", prompt);
    // A small first cache (grown and copied at 256) and several passes per prompt.
    const smol::TransformerOptions options{
        .context = 512, .kv_type = smol::KvType::f32, .max_batch = 100};
    HostEngine gpu(model, options);
    const Agreement vs_golden = compare(teacher_forced(gpu, golden), golden.logits, 1024);
    MESSAGE("GPU pass on the host vs the F32 golden "
            << golden.label << ": max |d| " << vs_golden.max << ", top-1 " << 100 * vs_golden.top1
            << "%");
    CHECK(vs_golden.max <= 1e-3);  // the fixtures' tolerance for an f32 engine
    CHECK(vs_golden.top1 == 1.0);
    const Agreement vs_cpu = gpu_pass_vs_cpu(model, golden, options);
    CHECK(vs_cpu.max <= 1e-4);
    CHECK(vs_cpu.top1 == 1.0);
  }
}

TEST_CASE("GPU pass on the host: the F32 fixture model (F32 kernels) and an f16 KV cache") {
  const smol::Model f32_model = smol::Model::open(kF32Model);
  const Golden p1 = load_golden("f32", "P1");
  const Agreement f32_weights =
      gpu_pass_vs_cpu(f32_model, p1, {.context = 512, .kv_type = smol::KvType::f32});
  CHECK(f32_weights.max <= 1e-4);
  CHECK(f32_weights.top1 == 1.0);

  const smol::Model q4_model = smol::Model::open(kQ4Model);
  // Both round K and V to f16, but values a few ulp apart in f32 can round to
  // neighbouring f16 steps, which moves a logit by up to ~5e-3 (measured: 5.4e-3 on
  // P3, with one near-tie row of 356 flipping its argmax).
  const Agreement half_kv = gpu_pass_vs_cpu(q4_model, load_golden("f32", "P3"),
                                            {.context = 512, .kv_type = smol::KvType::f16});
  CHECK(half_kv.max <= 2e-2);
  CHECK(half_kv.mean <= 2e-3);
  CHECK(half_kv.top1 >= 0.99);
}

TEST_CASE("GPU pass on the host: F16, Q8_0, llama (untied output.weight), Qwen2 and Qwen3") {
  const Golden p2 = load_golden("f32", "P2");  // ids < 1024: any synthetic tiny vocabulary
  smol::SyntheticSpec f16 = smol::synthetic_preset("tiny");
  f16.weights = smol::SyntheticWeights::f16;
  smol::SyntheticSpec q8 = smol::synthetic_preset("tiny");
  q8.weights = smol::SyntheticWeights::q8_0;
  smol::SyntheticSpec llama = smol::synthetic_preset("tiny");
  llama.arch = "llama";
  llama.tied = false;
  llama.kv_heads = 2;
  // Qwen2's QKV biases and Qwen3's per-head Q/K norms (heads of 128 over 256 / 4),
  // both with rotate-half RoPE.
  const smol::SyntheticSpec qwen2 = smol::synthetic_preset("qwen2-tiny");
  const smol::SyntheticSpec qwen3 = smol::synthetic_preset("qwen3-tiny");
  for (const auto& [name, spec] :
       {std::pair{"f16", f16}, std::pair{"q8_0", q8}, std::pair{"llama-q4_k_m", llama},
        std::pair{"qwen2-q4_k_m", qwen2}, std::pair{"qwen3-q4_k_m", qwen3}}) {
    const std::string label = name;
    CAPTURE(label);
    const smol::Model model = smol::Model::open(synthetic_model(label, spec));
    const Agreement a = gpu_pass_vs_cpu(model, p2, {.context = 256, .kv_type = smol::KvType::f32});
    CHECK(a.max <= 1e-4);
    CHECK(a.top1 == 1.0);
  }
}

TEST_CASE("GPU pass on the host: rewinding, logits choices and errors as the CPU's") {
  const smol::Model model = smol::Model::open(kQ4Model);
  const Golden golden = load_golden("f32", "P1");
  const smol::TransformerOptions options{.context = 64, .kv_type = smol::KvType::f32};
  HostEngine gpu(model, options);
  smol::Transformer cpu(model, f32_context(), options);

  const auto run = [&](auto& engine, std::span<const std::int32_t> tokens, std::size_t n_past,
                       smol::LogitsFor which) {
    const auto logits = engine.forward(tokens, n_past, which);
    return std::vector<float>(logits.begin(), logits.end());
  };
  const std::span<const std::int32_t> prompt(golden.prompt);
  CHECK(run(gpu, prompt, 0, smol::LogitsFor::none).empty());
  CHECK(gpu.n_filled() == prompt.size());
  // Rewind to 5 and continue with other tokens: the positions after 5 are replaced.
  const std::span<const std::int32_t> other = std::span(golden.generated).first(7);
  cpu.forward(prompt, 0, smol::LogitsFor::none);
  const Agreement a = compare(run(gpu, other, 5, smol::LogitsFor::all),
                              run(cpu, other, 5, smol::LogitsFor::all), 1024);
  CHECK(a.max <= 1e-4);
  CHECK(gpu.n_filled() == 12);

  // The CPU's messages, word for word.
  const auto message = [](auto& engine, std::span<const std::int32_t> tokens, std::size_t n_past) {
    try {
      engine.forward(tokens, n_past, smol::LogitsFor::last);
    } catch (const smol::Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::int32_t bad[] = {1024};
  const std::int32_t one[] = {1};
  const std::vector<std::int32_t> too_many(60, 1);
  CHECK(message(gpu, {}, 0) == message(cpu, {}, 0));
  CHECK(message(gpu, one, 13) == message(cpu, one, 13));
  CHECK(message(gpu, bad, 0) == message(cpu, bad, 0));
  CHECK(message(gpu, too_many, 12) == message(cpu, too_many, 12));
  CHECK(message(gpu, too_many, 12).find("context overflow") != std::string::npos);
  CHECK_THROWS_AS(HostEngine(model, {.context = 5000}), smol::Error);
  CHECK_THROWS_AS(HostEngine(model, {.max_batch = 0}), smol::Error);
}

TEST_CASE("GPU pass on the host: a Gemma 3 model is refused, its missing mechanisms named") {
  const smol::Model model =
      smol::Model::open(synthetic_model("gemma3", smol::synthetic_preset("gemma3-tiny")));
  CHECK_THROWS_WITH_AS(
      HostEngine(model, {.context = 256}),
      "smol cuda: this gemma3 model needs scaled embeddings, post-attention and "
      "post-FFN norms, a feed-forward gate other than SwiGLU, sliding-window attention, which the "
      "GPU pass does not implement yet; run it on the CPU",
      smol::Error);
}
