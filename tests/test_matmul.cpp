// matmul (prefill) for every type and ISA against the scalar kernels, odd token counts,
// both thread counts; matmul of one token equals matvec exactly.
#include <doctest/doctest.h>

#include <cstring>

#include "smol/ops/matmul.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "test_simd_data.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_matmul {

using namespace smol;
using namespace smol::testing;

namespace {

const std::vector<GgmlType> kTypes = all_weight_types();

void check_matmul(const WeightMatrix& w, std::size_t n_tokens, std::mt19937& rng,
                  std::initializer_list<int> thread_counts, bool check_f32_mode) {
  const auto x = random_floats(n_tokens * w.cols, rng);
  std::vector<std::vector<float>> want(n_tokens);
  std::vector<std::vector<Reference>> ref(n_tokens);
  for (std::size_t t = 0; t < n_tokens; ++t) {
    want[t] = expected_q8(w, x.data() + t * w.cols);
    ref[t] = expected_f64(w, x.data() + t * w.cols);
  }
  for (Isa isa : available_isas()) {
    for (int threads : thread_counts) {
      Context ctx(threads, isa);
      std::vector<float> y(n_tokens * w.rows, -1.0f);
      matmul(ctx, w, x.data(), n_tokens, y.data());
      CAPTURE(ggml_type_name(w.type));
      CAPTURE(isa_name(isa));
      CAPTURE(threads);
      CAPTURE(n_tokens);
      CAPTURE(w.cols);
      std::size_t bad = 0;
      for (std::size_t t = 0; t < n_tokens; ++t) {
        for (std::size_t r = 0; r < w.rows; ++r) {
          const double tol = 4e-6 * (ref[t][r].magnitude + std::fabs(want[t][r])) + 1e-30;
          bad += std::fabs(y[t * w.rows + r] - want[t][r]) > tol;
        }
      }
      CHECK(bad == 0);
      if (check_f32_mode) {
        ctx.activation_precision = ActivationPrecision::f32;
        matmul(ctx, w, x.data(), n_tokens, y.data());
        bad = 0;
        for (std::size_t t = 0; t < n_tokens; ++t) {
          for (std::size_t r = 0; r < w.rows; ++r) {
            bad +=
                std::fabs(y[t * w.rows + r] - ref[t][r].value) > 1e-5 * ref[t][r].magnitude + 1e-30;
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul: every type, ISA, token count and thread count") {
  std::mt19937 rng(20);
  for (GgmlType type : kTypes) {
    for (std::size_t cols : {256, 2304}) {
      const std::size_t rows = 45;
      const auto bytes = random_matrix(type, rows, cols, rng);
      const WeightMatrix w = view(type, bytes, rows, cols);
      for (std::size_t n : {1, 3, 7, 8, 13, 64}) check_matmul(w, n, rng, {1, 2}, n <= 8);
    }
  }
}

TEST_CASE("matmul: SmolLM3 shapes") {
  std::mt19937 rng(21);
  struct Shape {
    std::size_t rows, cols;
    GgmlType type;
  };
  for (Shape s : {Shape{2048, 2048, GgmlType::Q4_K}, Shape{512, 2048, GgmlType::Q6_K},
                  Shape{11008, 2048, GgmlType::Q4_K}, Shape{2048, 11008, GgmlType::Q6_K},
                  Shape{2048, 11008, GgmlType::Q4_K}}) {
    const auto bytes = random_matrix(s.type, s.rows, s.cols, rng);
    const WeightMatrix w = view(s.type, bytes, s.rows, s.cols);
    check_matmul(w, 9, rng, {2}, false);
  }
}

TEST_CASE("matmul: adversarial Q4_K / Q5_K / Q6_K blocks, partial row groups and token tiles") {
  // On AMX these are the matrix unit's kernels (s*q split into byte planes): extreme
  // scales and quants reach the planes' limits.
  std::mt19937 rng(24);
  const auto as_bytes = [](const auto& blocks) {
    std::vector<std::byte> bytes(blocks.size() * sizeof(blocks[0]));
    std::memcpy(bytes.data(), blocks.data(), bytes.size());
    return bytes;
  };
  for (Pattern p : kPatterns) {
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      const std::size_t rows = 20, cols = 512, n = rows * cols / QK_K;
      const std::vector<std::byte> bytes = type == GgmlType::Q4_K ? as_bytes(q4k_blocks(n, p, rng))
                                           : type == GgmlType::Q5_K
                                               ? as_bytes(q5k_blocks(n, p, rng))
                                               : as_bytes(q6k_blocks(n, p, rng));
      CAPTURE(static_cast<int>(p));
      check_matmul(view(type, bytes, rows, cols), 17, rng, {1, 2}, false);
    }
  }
}

TEST_CASE("matmul on interleaved Q4_K / Q5_K / Q6_K copies, odd token counts, 1 to 3 threads") {
  std::mt19937 rng(24);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (std::size_t rows : {8, 72, 264}) {
      for (std::size_t cols : {256, 2048, 11008}) {
        const auto bytes = random_matrix(type, rows, cols, rng);
        const WeightMatrix file_rows = view(type, bytes, rows, cols);
        const auto copy = rows8_copy(file_rows);
        for (std::size_t n_tokens : {2, 3, 17}) {
          check_matmul(with_rows8(file_rows, copy), n_tokens, rng, {1, 2, 3}, rows == 72);
        }
      }
    }
  }
}

TEST_CASE("AMX prefill on an interleaved Q4_K / Q5_K / Q6_K copy: the file rows' bits") {
  // packed_rows8 expands the copy's blocks back to the file's before the tiles, so every
  // token's every value is what the matrix unit gives on the file's rows; row counts that
  // end in half a slab of 16 (24, 72) and token counts that end in a partial tile. A single
  // token on the copy takes the decode kernel (matvec_rounds_like_tiles: AMX's eight-row
  // kernels round as the matrix unit), and so do up to kRows8FewTokens tokens (2 to 16);
  // more take the tiles: each token must still have the matrix unit's bits.
  std::mt19937 rng(27);
  for (Isa isa : available_isas()) {
    Context ctx(2, isa);
    CAPTURE(isa_name(isa));
    const Kernels& k = ctx.kernels();
    // On the other AVX-512 sets: the tokens-in-lanes kernels (test below).
    // Q4_K's only with VNNI.
    const bool avx512 = isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
    const bool vnni = isa == Isa::avx512vnni || isa == Isa::amx;
    CHECK((k.of<GgmlType::Q4_K>().packed_rows8 != nullptr) == vnni);
    CHECK((k.of<GgmlType::Q5_K>().packed_rows8 != nullptr) == avx512);
    CHECK((k.of<GgmlType::Q6_K>().packed_rows8 != nullptr) == avx512);
    // Q3_K's not on AMX, which reads its file rows.
    CHECK((k.of<GgmlType::Q3_K>().packed_rows8 != nullptr) == (avx512 && isa != Isa::amx));
    CHECK(k.of<GgmlType::Q4_K>().rows8_rounds_like_packed == vnni);
    CHECK(k.of<GgmlType::Q5_K>().rows8_rounds_like_packed == avx512);
    CHECK(k.of<GgmlType::Q6_K>().rows8_rounds_like_packed == avx512);
    // IQ4_XS's sixteen-row copy: the matrix unit on AMX, the tokens in the lanes with VNNI.
    CHECK((k.of<GgmlType::IQ4_XS>().packed_rows16 != nullptr) == vnni);
    if (isa != Isa::amx) continue;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      for (std::size_t rows : {24, 72}) {
        for (std::size_t cols : {256, 2048}) {
          CAPTURE(ggml_type_name(type));
          CAPTURE(rows);
          CAPTURE(cols);
          const auto bytes = random_matrix(type, rows, cols, rng);
          const WeightMatrix file_rows = view(type, bytes, rows, cols);
          const auto copy = rows8_copy(file_rows);
          const WeightMatrix w = with_rows8(file_rows, copy);
          CHECK(matvec_rounds_like_tiles(ctx, w));
          CHECK_FALSE(matvec_rounds_like_tiles(ctx, file_rows));
          for (std::size_t n_tokens : {1, 2, 5, 8, 9, 16, 17, 40}) {
            CAPTURE(n_tokens);
            const auto x = random_floats(n_tokens * cols, rng);
            std::vector<float> want(n_tokens * rows), got(n_tokens * rows);
            matmul(ctx, file_rows, x.data(), n_tokens, want.data(), OneToken::tiles);
            matmul(ctx, w, x.data(), n_tokens, got.data(), OneToken::tiles);
            CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "AVX-512 prefill on an interleaved Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS copy, tokens in the "
    "lanes: decode's bits") {
  // packed_rows8 and packed_rows16 on the AVX-512 sets without AMX
  // (x86_avx512_token_lanes.hpp) form the eight- or sixteen-row kernel's integers and take
  // its float steps, so every token of a prefill past kRows8FewTokens / kRows16FewTokens
  // (whole tiles of 16 and a partial one) must get the bits that the copy's kernel gives it
  // decoded alone; calls of 16 rows and one of 8 (IQ4_XS: and part-padding groups of
  // sixteen, 24 and 37 rows), one block and 43 (the 3B down projection's), one thread and
  // three (Q4_K's and IQ4_XS's on AVX-512 without VNNI take the copy's kernel itself). Q4_K's and
  // Q5_K's min terms come from the tokens' pair sums (TokenTiles::pair_sums), so both signs
  // of activations and the largest mins are met.
#if defined(SMOL_X86)
  for (std::size_t cols : {256, 2048, 11008}) {  // what a call unpacks fits its scratch
    using simd::x86::token_lanes_scratch_bytes;
    CHECK(token_lanes_scratch_bytes<BlockQ3KRows8>(cols) <= matrix_scratch_bytes(cols));
    CHECK(token_lanes_scratch_bytes<BlockQ4KRows8>(cols) <= matrix_scratch_bytes(cols));
    CHECK(token_lanes_scratch_bytes<BlockQ6KRows8>(cols) <= matrix_scratch_bytes(cols));
    CHECK(token_lanes_scratch_bytes<BlockIQ4XSRows16>(cols) <= matrix_scratch_bytes(cols));
  }
#endif
  std::mt19937 rng(29);
  for (GgmlType type :
       {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    const bool sixteen_rows = type == GgmlType::IQ4_XS;
    for (std::size_t rows :
         {std::size_t{8}, std::size_t{24}, sixteen_rows ? std::size_t{37} : 72}) {
      for (std::size_t cols : {256, 11008}) {
        const auto bytes = random_matrix(type, rows, cols, rng);
        const WeightMatrix file_rows = view(type, bytes, rows, cols);
        const auto copy = rows8_copy(file_rows);
        const WeightMatrix w = with_rows8(file_rows, copy);
        for (std::size_t n_tokens : {17, 32, 40}) {
          auto x = random_floats(n_tokens * cols, rng);
          if (n_tokens == 32) {  // one sign per sub-block of 32: the pair sums' extremes
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = ((i / 32) % 3 == 0 ? -1.0f : 1.0f);
          }
          for (Isa isa : available_isas()) {
            if (isa != Isa::avx512 && isa != Isa::avx512vnni) continue;
            for (int threads : {1, 3}) {
              Context ctx(threads, isa);
              CAPTURE(ggml_type_name(type));
              CAPTURE(isa_name(isa));
              CAPTURE(threads);
              CAPTURE(rows);
              CAPTURE(cols);
              CAPTURE(n_tokens);
              CHECK(matvec_rounds_like_tiles(ctx, w) ==
                    (type != GgmlType::Q4_K || isa == Isa::avx512vnni));
              std::vector<float> want(n_tokens * rows, -1.0f), got(n_tokens * rows, -2.0f);
              for (std::size_t t = 0; t < n_tokens; ++t) {
                matvec(ctx, w, x.data() + t * cols, want.data() + t * rows);
              }
              matmul(ctx, w, x.data(), n_tokens, got.data());
              CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
            }
          }
        }
      }
    }
  }
}

TEST_CASE(
    "matmul on a sixteen-row Q4_1, Q8_0, Q4_0, IQ4_NL, IQ4_XS, Q5_0 or Q5_1 copy: as the file's "
    "rows, bit for bit") {
  // On AMX the tiles read the copy (amx_tile_dots_nibbles_rows16, _q8_0_rows16) and must
  // round like the tiles on the file. The other x86 sets prefill through the copy's
  // decode kernel (WeightKernels::rows16_prefills; IQ4_XS's past kRows16FewTokens the
  // tokens in the lanes on the AVX-512 sets, with its bits), whose float order is its own:
  // there each token's row must be that kernel's, matvec's on the copy. Elsewhere (the scalar
  // set, NEON) prefill reads the file's rows either way.
  std::mt19937 rng(25);
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::IQ4_NL,
                        GgmlType::IQ4_XS, GgmlType::Q5_0, GgmlType::Q5_1})
    for (std::size_t rows : {16, 37, 264}) {
      for (std::size_t cols : {32, 576}) {
        if (type == GgmlType::IQ4_XS) cols *= 8;  // 256-value blocks: 1 and 18
        CAPTURE(ggml_type_name(type));
        const auto bytes = random_matrix(type, rows, cols, rng);
        const WeightMatrix file_rows = view(type, bytes, rows, cols);
        const auto copy = rows8_copy(file_rows);
        const WeightMatrix w = with_rows8(file_rows, copy);
        for (std::size_t n_tokens : {2, 8, 17}) {
          const auto x = random_floats(n_tokens * cols, rng);
          for (Isa isa : available_isas()) {
            for (int threads : {1, 3}) {
              Context ctx(threads, isa);
              bool copy_kernel = false;
              visit_weight_type(
                  type, [&]<class W>(W) { copy_kernel = ctx.kernels().of(W{}).rows16_prefills; });
              std::vector<float> want(n_tokens * rows, -1.0f), got(n_tokens * rows, -2.0f);
              if (copy_kernel) {
                for (std::size_t t = 0; t < n_tokens; ++t) {
                  matvec(ctx, w, x.data() + t * cols, want.data() + t * rows);
                }
              } else {
                matmul(ctx, file_rows, x.data(), n_tokens, want.data());
              }
              matmul(ctx, w, x.data(), n_tokens, got.data());
              CAPTURE(isa_name(isa));
              CAPTURE(threads);
              CAPTURE(rows);
              CAPTURE(cols);
              CAPTURE(n_tokens);
              CHECK(copy_kernel ==
                    (isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni));
              CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
            }
          }
        }
      }
    }
}

TEST_CASE("matmul_shared_input equals one matmul per matrix, bit for bit") {
  // q, k, v-like groups (uneven row counts) of every type, also on their copies (on AMX
  // x is then quantized and packed once for the group: the 32-value types' tiles, the
  // matrix unit of the 256-value types); token counts below a tile, a tile and a
  // remainder, and whole tiles; a mixed group of 32-value types (another type, or one
  // matrix on its copy and one not) takes separate matmuls.
  std::mt19937 rng(27);
  const auto check_group = [&](const std::vector<WeightMatrix>& ws, const char* what) {
    for (std::size_t n_tokens : {3, 21, 32}) {
      const auto x = random_floats(n_tokens * ws[0].cols, rng);
      for (Isa isa : available_isas()) {
        Context ctx(2, isa);
        std::vector<std::vector<float>> want(ws.size()), got(ws.size());
        std::vector<const WeightMatrix*> pointers;
        std::vector<float*> outputs;
        for (std::size_t j = 0; j < ws.size(); ++j) {
          want[j].assign(n_tokens * ws[j].rows, -1.0f);
          got[j].assign(n_tokens * ws[j].rows, -2.0f);
          matmul(ctx, ws[j], x.data(), n_tokens, want[j].data());
          pointers.push_back(&ws[j]);
          outputs.push_back(got[j].data());
        }
        std::size_t calls = 0;
        matmul_shared_input(ctx, pointers, x.data(), n_tokens, outputs, OneToken::matvec,
                            [&] { ++calls; });
        CAPTURE(what);
        CAPTURE(isa_name(isa));
        CAPTURE(n_tokens);
        CHECK(calls == ws.size());
        for (std::size_t j = 0; j < ws.size(); ++j) {
          CHECK(std::memcmp(got[j].data(), want[j].data(), want[j].size() * sizeof(float)) == 0);
        }
      }
    }
  };
  for (GgmlType type : kTypes) {
    const bool k_quant = ggml_type_info(type).block_values == QK_K;
    const std::size_t cols = k_quant ? 512 : 576;
    std::vector<std::vector<std::byte>> bytes;
    std::vector<WeightMatrix> ws;
    for (std::size_t rows : {72, 24, 24}) {
      bytes.push_back(random_matrix(type, rows, cols, rng));
      ws.push_back(view(type, bytes.back(), rows, cols));
    }
    check_group(ws, ggml_type_name(type).data());
    if (has_interleaved_copy(type)) {
      std::vector<AlignedBuffer<std::byte>> copies;
      copies.reserve(ws.size());
      for (WeightMatrix& w : ws) {
        copies.push_back(rows8_copy(w));
        w = with_rows8(w, copies.back());
      }
      check_group(ws, "copies");
      // The file's rows: another path on AMX for a 32-value type (separate matmuls), the
      // matrix unit on other rows for a 256-value one (shared tokens).
      ws[1] = view(type, bytes[1], 24, cols);
      check_group(ws, "copies and file rows");
    }
  }
  const std::size_t cols = 576, k_cols = 512;
  std::vector<std::vector<std::byte>> bytes;
  bytes.push_back(random_matrix(GgmlType::Q4_0, 40, cols, rng));
  bytes.push_back(random_matrix(GgmlType::Q8_0, 24, cols, rng));
  check_group({view(GgmlType::Q4_0, bytes[0], 40, cols), view(GgmlType::Q8_0, bytes[1], 24, cols)},
              "mixed types");
  // A Q4_K_M file's q, k and v (Q4_K, Q4_K, Q6_K), one without its copy: on AMX each takes
  // the matrix unit above a few tokens, and x is quantized and packed once for all.
  std::vector<std::vector<std::byte>> mix;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K}) {
    mix.push_back(random_matrix(type, 24, k_cols, rng));
  }
  std::vector<WeightMatrix> ws = {view(GgmlType::Q4_K, mix[0], 24, k_cols),
                                  view(GgmlType::Q4_K, mix[1], 24, k_cols),
                                  view(GgmlType::Q6_K, mix[2], 24, k_cols)};
  const auto copy0 = rows8_copy(ws[0]), copy2 = rows8_copy(ws[2]);
  ws[0] = with_rows8(ws[0], copy0);
  ws[2] = with_rows8(ws[2], copy2);
  check_group(ws, "Q4_K, Q4_K and Q6_K, two on copies");
}

TEST_CASE(
    "OneToken::tiles: one token gets the bits it has among many, on matvec where they agree") {
  // Where matvec rounds like the tiles, one token takes the decode kernel; it must still
  // equal that token's row of a many-token call. Every x86 set on a Q4_1, Q8_0, Q4_0,
  // IQ4_NL, IQ4_XS, Q5_0 or Q5_1 copy (AMX's tiles round as its decode kernel, the others prefill
  // through that kernel; the file's rows keep the tiles there); AVX2 on the file's rows of every
  // 32-value type but IQ4_NL (its dots sum as its tiles: scaled_block_sums), and on Q5_K's
  // (its 256-bit dot is its tiles' operations; the AVX-512 sets decode it with a 512-bit dot); Q2_K
  // and Q3_K on every x86 set (their dots are their tiles' operations, on AMX the matrix unit's
  // float steps). Two and three tokens too (the few-token paths: the decode kernel over them on a
  // copy, Q2_K's and Q3_K's dots on AMX) must have the bits they have among five. 18 blocks a row,
  // and 45: a segment of 32 and one of 13, whose last five blocks' min terms are summed one by one.
  std::mt19937 rng(26);
  const std::size_t rows = 37, n_tokens = 5;
  for (GgmlType type :
       {GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1,
        GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::Q5_K, GgmlType::Q3_K, GgmlType::Q2_K}) {
    const bool k_quant = ggml_type_info(type).block_values == QK_K;
    const bool every_x86 = type == GgmlType::Q3_K || type == GgmlType::Q2_K;
    for (std::size_t cols : {k_quant ? 512 : 576, k_quant ? 2304 : 1440}) {
      CAPTURE(ggml_type_name(type));
      CAPTURE(cols);
      const auto bytes = random_matrix(type, rows, cols, rng);
      const WeightMatrix file_rows = view(type, bytes, rows, cols);
      const bool has_copy = interleaved_group_rows(type) == kRows16;
      const auto copy = has_copy ? rows8_copy(file_rows) : AlignedBuffer<std::byte>(0);
      const WeightMatrix w = has_copy ? with_rows8(file_rows, copy) : file_rows;
      const auto x = random_floats(n_tokens * cols, rng);
      for (Isa isa : available_isas()) {
        Context ctx(2, isa);
        CAPTURE(isa_name(isa));
        CHECK(matvec_rounds_like_tiles(ctx, file_rows) ==
              ((isa == Isa::avx2 && type != GgmlType::IQ4_NL && type != GgmlType::IQ4_XS) ||
               (every_x86 && isa != Isa::scalar && isa != Isa::neon)));
        if (has_copy) {
          CHECK(matvec_rounds_like_tiles(ctx, w) == (isa != Isa::scalar && isa != Isa::neon));
        }
        for (const WeightMatrix* m : {&file_rows, &w}) {
          std::vector<float> many(n_tokens * rows), one(rows), decoded(rows);
          matmul(ctx, *m, x.data(), n_tokens, many.data(), OneToken::tiles);
          for (std::size_t few : {2, 3}) {  // few-token paths (kDotsFewTokens, kRows16FewTokens)
            std::vector<float> first(few * rows);
            matmul(ctx, *m, x.data(), few, first.data(), OneToken::tiles);
            CAPTURE(few);
            CHECK(std::memcmp(first.data(), many.data(), first.size() * sizeof(float)) == 0);
          }
          for (std::size_t t = 0; t < n_tokens; ++t) {
            matmul(ctx, *m, x.data() + t * cols, 1, one.data(), OneToken::tiles);
            CAPTURE(t);
            CHECK(std::memcmp(one.data(), many.data() + t * rows, rows * sizeof(float)) == 0);
            if (matvec_rounds_like_tiles(ctx, *m)) {  // and that is matvec's own result
              matvec(ctx, *m, x.data() + t * cols, decoded.data(), OneToken::tiles);
              CHECK(std::memcmp(decoded.data(), one.data(), rows * sizeof(float)) == 0);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the vector sets carry their prefill and lane-packed kernels") {
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    CAPTURE(isa_name(isa));
    const bool x86 =
        isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
    CHECK((k.of<GgmlType::Q4_K>().tile != nullptr) == x86);
    CHECK((k.of<GgmlType::Q6_K>().tile != nullptr) == x86);
    CHECK((k.of<GgmlType::Q4_K>().dot_lanes != nullptr) == (isa == Isa::avx2));
    CHECK((k.of<GgmlType::Q4_K>().matrix != nullptr) == (isa == Isa::amx));
    CHECK((k.of<GgmlType::Q6_K>().matrix != nullptr) == (isa == Isa::amx));
    CHECK((k.of<GgmlType::Q5_K>().matrix != nullptr) == (isa == Isa::amx));
    CHECK((k.of<GgmlType::Q2_K>().matrix != nullptr) == (isa == Isa::amx));
    CHECK((k.of<GgmlType::Q3_K>().matrix != nullptr) == (isa == Isa::amx));
    CHECK((k.of<GgmlType::Q2_K>().tile_dots != nullptr) == x86);
    CHECK((k.of<GgmlType::Q3_K>().tile_dots != nullptr) == x86);
    CHECK((k.of<GgmlType::Q5_K>().tile_dots != nullptr) == x86);
    CHECK((k.of<GgmlType::F16>().tile_dots != nullptr) == (isa != Isa::scalar));
    CHECK((k.of<GgmlType::BF16>().tile_dots != nullptr) == (isa != Isa::scalar));
    CHECK((k.of<GgmlType::F32>().tile_dots != nullptr) == (isa != Isa::scalar));
  }
}

TEST_CASE("float rows' tiles: a token's bits depend on neither the token count nor the rows") {
  // float_tiles.hpp: each (row, token) sum in one order whatever the tile's shape. Rows and
  // tokens past whole tiles (37 rows, 1 to 9 tokens), lengths with a tail past whole batches.
  std::mt19937 rng(27);
  const std::size_t rows = 37, n_tokens = 9;
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    for (std::size_t cols : {64, 771}) {
      CAPTURE(ggml_type_name(type));
      CAPTURE(cols);
      const auto bytes = random_matrix(type, rows, cols, rng);
      const WeightMatrix w = view(type, bytes, rows, cols);
      const auto x = random_floats(n_tokens * cols, rng);
      for (Isa isa : available_isas()) {
        CAPTURE(isa_name(isa));
        Context ctx(2, isa);
        CHECK_FALSE(matvec_rounds_like_tiles(ctx, w));
        std::vector<float> many(n_tokens * rows);
        matmul(ctx, w, x.data(), n_tokens, many.data(), OneToken::tiles);
        for (std::size_t few = 1; few < n_tokens; ++few) {
          for (std::size_t t0 : {std::size_t{0}, n_tokens - few}) {
            std::vector<float> part(few * rows);
            matmul(ctx, w, x.data() + t0 * cols, few, part.data(), OneToken::tiles);
            CAPTURE(few);
            CAPTURE(t0);
            CHECK(std::memcmp(part.data(), many.data() + t0 * rows, part.size() * sizeof(float)) ==
                  0);
          }
        }
        // Rows 1..36 alone: each row in another place of its tile.
        const WeightMatrix shifted{
            type, bytes.data() + w.row_bytes, rows - 1, cols, w.row_bytes, "test.shifted"};
        std::vector<float> rest(n_tokens * (rows - 1));
        matmul(ctx, shifted, x.data(), n_tokens, rest.data(), OneToken::tiles);
        std::size_t differ = 0;
        for (std::size_t t = 0; t < n_tokens; ++t) {
          for (std::size_t r = 1; r < rows; ++r) {
            differ += rest[t * (rows - 1) + r - 1] != many[t * rows + r];
          }
        }
        CHECK(differ == 0);
      }
    }
  }
}

TEST_CASE("matmul of one token equals matvec bit for bit") {
  std::mt19937 rng(22);
  for (GgmlType type : kTypes) {
    const auto bytes = random_matrix(type, 300, 2048, rng);
    const WeightMatrix w = view(type, bytes, 300, 2048);
    const auto x = random_floats(2048, rng);
    for (Isa isa : available_isas()) {
      Context ctx(2, isa);
      std::vector<float> a(300), b(300);
      matvec(ctx, w, x.data(), a.data());
      matmul(ctx, w, x.data(), 1, b.data());
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("matmul: lane packing keeps every quant (scalar check of the layouts)") {
  std::mt19937 rng(23);
  auto act = q8k_activations(QK_K, Pattern::random, rng);
  BlockQ8KLanes q4{}, q6{};
  pack_q8k_lanes<LaneSums::q4k_scaled_by_d>(act.data(), &q4, 1);
  pack_q8k_lanes<LaneSums::q6k_minus_32>(act.data(), &q6, 1);
  std::vector<int> seen4(QK_K, 0), seen6(QK_K, 0);
  for (std::size_t p = 0; p < QK_K; ++p) {
    ++seen4[kLanePermutationQ4K[p]];
    ++seen6[kLanePermutationQ6K[p]];
    CHECK(q4.qs[p] == act[0].qs[kLanePermutationQ4K[p]]);
    CHECK(q6.qs[p] == act[0].qs[kLanePermutationQ6K[p]]);
  }
  for (std::size_t i = 0; i < QK_K; ++i) CHECK((seen4[i] == 1 && seen6[i] == 1));
  int total = 0;
  for (int s : q6.minus32_sums) total += s;
  int bsum = 0;
  for (auto b : act[0].bsums) bsum += b;
  CHECK(total == -32 * bsum);
}

}  // namespace test_matmul
