// matvec for every type and ISA against the scalar kernels (q8 mode) and against an
// independent double-precision product (f32 reference mode).
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "smol/ops/matvec.hpp"
#include "test_simd_data.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_matvec {

using namespace smol;
using namespace smol::testing;

namespace {

const std::vector<GgmlType> kTypes = all_weight_types();

}  // namespace

TEST_CASE("matvec: every type, ISA and thread count equals the scalar kernels") {
  std::mt19937 rng(10);
  struct Shape {
    std::size_t rows, cols;
  };
  for (GgmlType type : kTypes) {
    // 121 x 2048: a few 64 KB chunks of rows and a short last one, so the shared
    // chunk counter hands out uneven work to 2 and 3 threads.
    for (Shape s :
         {Shape{37, 256}, Shape{64, 768}, Shape{121, 2048}, Shape{512, 2048}, Shape{96, 11008}}) {
      const auto bytes = random_matrix(type, s.rows, s.cols, rng);
      const WeightMatrix w = view(type, bytes, s.rows, s.cols);
      const auto x = random_floats(s.cols, rng);
      const auto want = expected_q8(w, x.data());
      const auto ref = expected_f64(w, x.data());
      for (Isa isa : available_isas()) {
        for (int threads : {1, 2, 3}) {
          Context ctx(threads, isa);
          std::vector<float> y(s.rows, -1.0f);
          matvec(ctx, w, x.data(), y.data());
          CAPTURE(ggml_type_name(type));
          CAPTURE(isa_name(isa));
          CAPTURE(threads);
          CAPTURE(s.cols);
          // Same quantized activations, so the only difference is float summation order.
          for (std::size_t r = 0; r < s.rows; ++r) {
            CHECK(std::fabs(y[r] - want[r]) <=
                  2e-6 * (ref[r].magnitude + std::fabs(want[r])) + 1e-30);
          }
          ctx.activation_precision = ActivationPrecision::f32;
          matvec(ctx, w, x.data(), y.data());
          for (std::size_t r = 0; r < s.rows; ++r) {
            CHECK(std::fabs(y[r] - ref[r].value) <= 1e-5 * ref[r].magnitude + 1e-30);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "matvec on interleaved copies (Q4_K, Q5_K, Q6_K; Q4_1, Q8_0, Q4_0, IQ4_NL, IQ4_XS, Q5_0, "
    "Q5_1) equals the scalar kernels on the file") {
  std::mt19937 rng(12);
  struct Shape {
    std::size_t rows, cols;
    GgmlType type;
  };
  for (Shape s : {Shape{8, 256, GgmlType::Q4_K},      Shape{64, 768, GgmlType::Q4_K},
                  Shape{120, 2048, GgmlType::Q4_K},   Shape{512, 2048, GgmlType::Q4_K},
                  Shape{96, 11008, GgmlType::Q4_K},   Shape{8, 256, GgmlType::Q5_K},
                  Shape{120, 2048, GgmlType::Q5_K},   Shape{96, 11008, GgmlType::Q5_K},
                  Shape{8, 256, GgmlType::Q6_K},      Shape{120, 2048, GgmlType::Q6_K},
                  Shape{96, 11008, GgmlType::Q6_K},   Shape{16, 32, GgmlType::Q4_1},
                  Shape{37, 576, GgmlType::Q4_1},     Shape{1536, 576, GgmlType::Q4_1},
                  Shape{16, 32, GgmlType::Q8_0},      Shape{37, 576, GgmlType::Q8_0},
                  Shape{1536, 576, GgmlType::Q8_0},   Shape{37, 576, GgmlType::Q4_0},
                  Shape{1536, 576, GgmlType::Q4_0},   Shape{37, 576, GgmlType::IQ4_NL},
                  Shape{1536, 576, GgmlType::IQ4_NL}, Shape{37, 512, GgmlType::IQ4_XS},
                  Shape{264, 2304, GgmlType::IQ4_XS}, Shape{37, 576, GgmlType::Q5_0},
                  Shape{1536, 576, GgmlType::Q5_0},   Shape{37, 576, GgmlType::Q5_1},
                  Shape{1536, 576, GgmlType::Q5_1}}) {
    const auto bytes = random_matrix(s.type, s.rows, s.cols, rng);
    const WeightMatrix file_rows = view(s.type, bytes, s.rows, s.cols);
    const auto copy = rows8_copy(file_rows);
    const WeightMatrix w = with_rows8(file_rows, copy);
    const auto x = random_floats(s.cols, rng);
    const auto want = expected_q8(file_rows, x.data());
    const auto ref = expected_f64(file_rows, x.data());
    for (Isa isa : available_isas()) {
      for (int threads : {1, 2, 3}) {
        Context ctx(threads, isa);
        std::vector<float> y(s.rows, -1.0f);
        matvec(ctx, w, x.data(), y.data());
        CAPTURE(isa_name(isa));
        CAPTURE(ggml_type_name(s.type));
        CAPTURE(threads);
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        std::size_t bad = 0;
        for (std::size_t r = 0; r < s.rows; ++r) {
          bad += !(std::fabs(y[r] - want[r]) <=
                   2e-6 * (ref[r].magnitude + std::fabs(want[r])) + 1e-30);
        }
        CHECK(bad == 0);
        if (interleaved_group_rows(s.type) == kRows16) {
          // The sixteen-row copy rounds like the AMX tiles' single token, on every ISA
          // (the same float steps); on AMX the tiles themselves are the check, where they
          // read the copy (IQ4_XS's prefill there is the matrix unit, which test_matmul
          // compares with this decode bit for bit; here its reference is).
          std::vector<float> tiles(s.rows, -3.0f);
          const std::size_t nblocks = s.cols / ggml_type_info(s.type).block_values,
                            groups = (s.rows + 15) / 16;
          const auto& amx = kernels_for_isa(isa == Isa::amx ? Isa::amx : Isa::scalar);
          visit_block_with_copy<Rows16Of>(s.type, [&]<class Block>(std::type_identity<Block>) {
            using W = BlockWeight<Block>;
            using Act = typename W::Activation;
            // x quantized as matvec quantizes it (bit for bit).
            std::vector<Act> x1(nblocks);
            if constexpr (std::is_same_v<Act, BlockQ8_1>) {
              quantize_row_q8_1(x.data(), x1.data(), s.cols);
            } else if constexpr (std::is_same_v<Act, BlockQ8K>) {
              scalar::quantize_row_q8k(x.data(), x1.data(), s.cols);
            } else {
              scalar::quantize_row_q8_0(x.data(), x1.data(), s.cols);
            }
            if (isa == Isa::amx && amx.of(W{}).tile_dots_rows16 != nullptr) {
              if constexpr (W::values_per_block == 32) {
                const auto packed = pack_block32_tiles(x1.data(), nblocks, nblocks, 1);
                amx.of(W{}).tile_dots_packed(file_rows.data, file_rows.row_bytes, s.rows,
                                             packed.tiles, tiles.data(), s.rows);
              }
            } else {  // the scalar set's rows16 is the reference (test_quant_rows8)
              const auto reference = kernels_for_isa(Isa::scalar).of(W{}).rows16;
              using Rows16 = typename Rows16Of<Block>::type;
              for (std::size_t g = 0; g < groups; ++g) {
                reference(reinterpret_cast<const Rows16*>(copy.data()) + g * nblocks, nblocks,
                          s.rows - 16 * g, x1.data(), nblocks, 1, nullptr, tiles.data() + 16 * g,
                          0);
              }
            }
          });
          CHECK(std::memcmp(tiles.data(), y.data(), s.rows * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("matvec_shared_input equals one matvec per matrix, bit for bit") {
  // q, k, v-like shapes (uneven row counts, so chunks straddle the matrices) of every
  // type; Q4_K and Q6_K also through interleaved copies; a mixed group (other types or
  // widths) takes the separate matvecs.
  std::mt19937 rng(14);
  const auto check_group = [&](const std::vector<WeightMatrix>& ws, const std::vector<float>& x,
                               const char* what) {
    for (Isa isa : available_isas()) {
      for (int threads : {1, 2, 3}) {
        Context ctx(threads, isa);
        std::vector<std::vector<float>> want(ws.size()), got(ws.size());
        std::vector<const WeightMatrix*> pointers;
        std::vector<float*> outputs;
        for (std::size_t j = 0; j < ws.size(); ++j) {
          want[j].assign(ws[j].rows, -1.0f);
          got[j].assign(ws[j].rows, -2.0f);
          matvec(ctx, ws[j], x.data(), want[j].data());
          pointers.push_back(&ws[j]);
          outputs.push_back(got[j].data());
        }
        matvec_shared_input(ctx, pointers, x.data(), outputs);
        CAPTURE(what);
        CAPTURE(isa_name(isa));
        CAPTURE(threads);
        for (std::size_t j = 0; j < ws.size(); ++j) {
          CHECK(std::memcmp(got[j].data(), want[j].data(), want[j].size() * sizeof(float)) == 0);
        }
      }
    }
  };
  for (GgmlType type : kTypes) {
    const std::size_t cols = 768;
    std::vector<std::vector<std::byte>> bytes;  // moving it keeps each matrix's bytes
    std::vector<WeightMatrix> ws;
    for (std::size_t rows : {296, 104, 104}) {
      bytes.push_back(random_matrix(type, rows, cols, rng));
      ws.push_back(view(type, bytes.back(), rows, cols));
    }
    check_group(ws, random_floats(cols, rng), ggml_type_name(type).data());
    if (type == GgmlType::Q4_K || type == GgmlType::Q6_K || type == GgmlType::Q4_1) {
      std::vector<AlignedBuffer<std::byte>> copies;
      copies.reserve(ws.size());
      for (WeightMatrix& w : ws) {
        copies.push_back(rows8_copy(w));
        w = with_rows8(w, copies.back());
      }
      check_group(ws, random_floats(cols, rng), "interleaved");
    }
  }
  std::vector<std::vector<std::byte>> bytes;
  bytes.push_back(random_matrix(GgmlType::Q4_K, 64, 512, rng));
  bytes.push_back(random_matrix(GgmlType::Q6_K, 32, 512, rng));
  bytes.push_back(random_matrix(GgmlType::Q8_0, 40, 512, rng));
  check_group({view(GgmlType::Q4_K, bytes[0], 64, 512), view(GgmlType::Q6_K, bytes[1], 32, 512),
               view(GgmlType::Q8_0, bytes[2], 40, 512)},
              random_floats(512, rng), "mixed types");
  Context ctx(1);
  const WeightMatrix w = view(GgmlType::Q4_K, bytes[0], 64, 512);
  std::vector<const WeightMatrix*> five(5, &w);
  std::vector<float> y(64);
  std::vector<float*> outputs(5, y.data());
  const auto x = random_floats(512, rng);
  CHECK_THROWS_AS(matvec_shared_input(ctx, five, x.data(), outputs), Error);
}

TEST_CASE("matvec: an interleaved copy on a matrix that cannot have one is an error") {
  std::mt19937 rng(13);
  const auto bytes = random_matrix(GgmlType::Q4_K, 16, 256, rng);
  const auto copy = rows8_copy(view(GgmlType::Q4_K, bytes, 16, 256));
  WeightMatrix odd_rows = with_rows8(view(GgmlType::Q4_K, bytes, 12, 256), copy);
  Context ctx(1);
  std::vector<float> x(256, 1.0f), y(16);
  CHECK_THROWS_WITH_AS(matvec(ctx, odd_rows, x.data(), y.data()),
                       doctest::Contains("its 12 rows are not whole groups of 8"), Error);
  const auto f16 = random_matrix(GgmlType::F16, 16, 256, rng);
  WeightMatrix wrong_type = with_rows8(view(GgmlType::F16, f16, 16, 256), copy);
  CHECK_THROWS_WITH_AS(matvec(ctx, wrong_type, x.data(), y.data()),
                       doctest::Contains("F16 has no such layout"), Error);
}

TEST_CASE("matvec: SmolLM3 shapes") {
  std::mt19937 rng(11);
  struct Shape {
    std::size_t rows, cols;
    GgmlType type;
  };
  for (Shape s : {Shape{2048, 2048, GgmlType::Q4_K}, Shape{512, 2048, GgmlType::Q6_K},
                  Shape{11008, 2048, GgmlType::Q4_K}, Shape{2048, 11008, GgmlType::Q6_K}}) {
    const auto bytes = random_matrix(s.type, s.rows, s.cols, rng);
    const WeightMatrix w = view(s.type, bytes, s.rows, s.cols);
    const auto x = random_floats(s.cols, rng);
    const auto want = expected_q8(w, x.data());
    Context ctx(2);
    std::vector<float> y(s.rows);
    matvec(ctx, w, x.data(), y.data());
    const auto ref = expected_f64(w, x.data());
    for (std::size_t r = 0; r < s.rows; ++r) {
      CHECK(std::fabs(y[r] - want[r]) <= 2e-6 * ref[r].magnitude + 1e-30);
    }
  }
}

TEST_CASE("matvec: unsupported types and bad shapes are errors naming the tensor") {
  std::vector<std::byte> bytes(176 * 4);
  Context ctx(1);
  std::vector<float> x(256), y(4);
  const WeightMatrix iq2{GgmlType::IQ2_XXS, bytes.data(), 4, 256, 66, "blk.0.ffn_up.weight"};
  try {
    matvec(ctx, iq2, x.data(), y.data());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("blk.0.ffn_up.weight") != std::string::npos);
    CHECK(std::string(e.what()).find("IQ2_XXS") != std::string::npos);
    CHECK(std::string(e.what()).find("supported: " + weight_type_names()) != std::string::npos);
  }
  const WeightMatrix ragged{GgmlType::Q4_K, bytes.data(), 1, 100, 144, "ragged"};
  CHECK_THROWS_AS(matvec(ctx, ragged, x.data(), y.data()), Error);
}

TEST_CASE("plain decode takes a set's dot_plain; a batch-invariant step keeps to dot") {
  // Q2_K and Q3_K on AMX: `dot` rounds as the matrix unit (so that one token decoded is
  // its bits in a prefill), `dot_plain` is the faster VNNI dot. matvec must take each
  // where it belongs, row for row the kernel's own value.
  std::mt19937 rng(15);
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K}) {
    const auto bytes = random_matrix(type, 40, 2048, rng);
    const WeightMatrix w = view(type, bytes, 40, 2048);
    const auto x = random_floats(2048, rng);
    for (Isa isa : available_isas()) {
      Context ctx(2, isa);
      CAPTURE(ggml_type_name(type));
      CAPTURE(isa_name(isa));
      visit_weight_type(type, [&]<class W>(W) {
        if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
          const WeightKernels<W>& k = ctx.kernels().of(W{});
          CHECK((k.dot_plain != nullptr) == (isa == Isa::amx));
          std::vector<BlockQ8K> xq(w.cols / QK_K);
          ctx.kernels().quantize_row_q8k(x.data(), xq.data(), w.cols);
          for (OneToken one_token : {OneToken::matvec, OneToken::tiles}) {
            const auto dot =
                one_token == OneToken::matvec && k.dot_plain != nullptr ? k.dot_plain : k.dot;
            std::vector<float> y(w.rows);
            matvec(ctx, w, x.data(), y.data(), one_token);
            for (std::size_t r = 0; r < w.rows; ++r) {
              const float want = dot(reinterpret_cast<const typename W::Block*>(w.row(r)),
                                     xq.data(), w.cols / QK_K);
              CHECK(std::memcmp(&y[r], &want, sizeof(float)) == 0);
            }
          }
        }
      });
    }
  }
}

}  // namespace test_matvec
