// The interleaved Q4_K layout (quant/q4k_rows8.hpp): repacking keeps every integer, the
// reference dot on it equals the scalar dot on the file's rows bit for bit, and each
// ISA's kernel equals the reference to float rounding, for one token and for several.
#include <doctest/doctest.h>

#include <cstring>

#include "smol/quant/q4k_rows8.hpp"
#include "smol/simd/kernels_impl.hpp"
#include "test_simd_data.hpp"

using namespace smol;
using namespace smol::testing;

namespace {

struct Group {
  std::vector<BlockQ4K> rows;  // 8 rows of nblocks blocks, row-major
  std::vector<BlockQ4KRows8> packed;
};

Group make_group(std::size_t nblocks, Pattern pattern, std::mt19937& rng) {
  Group g{q4k_blocks(kRowsPerGroup * nblocks, pattern, rng), {}};
  g.packed.resize(nblocks);
  repack_q4k_rows8(reinterpret_cast<const std::byte*>(g.rows.data()), nblocks * sizeof(BlockQ4K),
                   nblocks, g.packed.data());
  return g;
}

}  // namespace

TEST_CASE("repack_q4k_rows8 keeps every quant, scale, min and f16 factor in its lane") {
  std::mt19937 rng(40);
  const Group g = make_group(3, Pattern::random, rng);
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    for (std::size_t b = 0; b < 3; ++b) {
      const BlockQ4K& in = g.rows[r * 3 + b];
      const BlockQ4KRows8& out = g.packed[b];
      std::uint8_t scales[8], mins[8];
      unpack_q4k_scales(in.scales, scales, mins);
      for (std::size_t j = 0; j < 8; ++j) {
        CHECK(out.scales[j][r] == scales[j]);
        CHECK(out.mins[j][r] == mins[j]);
      }
      CHECK(out.d[r] == in.d);
      CHECK(out.dmin[r] == in.dmin);
      for (std::size_t i = 0; i < QK_K / 2; ++i) {
        CHECK(out.qs[i / 32][(i % 32) / 4][r][i % 4] == in.qs[i]);
      }
    }
  }
}

TEST_CASE("rows8: the reference equals the scalar Q4_K dot on the file's rows bit for bit") {
  std::mt19937 rng(41);
  const Kernels& scalar = kernels_for_isa(Isa::scalar);
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 8, 43}) {
      const Group g = make_group(nblocks, pattern, rng);
      constexpr std::size_t kTokens = 3;
      const auto x = q8k_activations(kTokens * nblocks * QK_K, pattern, rng);
      float y[kTokens][kRowsPerGroup];
      rows8_q4k_q8k_reference(g.packed.data(), nblocks, x.data(), nblocks, kTokens, &y[0][0],
                              kRowsPerGroup);
      for (std::size_t t = 0; t < kTokens; ++t) {
        for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
          const float want =
              scalar.dot_q4k_q8k(g.rows.data() + r * nblocks, x.data() + t * nblocks, nblocks);
          CHECK(std::memcmp(&y[t][r], &want, sizeof want) == 0);
        }
      }
    }
  }
}

TEST_CASE("rows8: every ISA's kernel equals the reference, for 1 to 5 tokens") {
  std::mt19937 rng(42);
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 8, 43}) {
      const Group g = make_group(nblocks, pattern, rng);
      constexpr std::size_t kMaxTokens = 5;
      const auto x = q8k_activations(kMaxTokens * nblocks * QK_K, pattern, rng);
      // Tolerance scale: |w| . |x| per row and token, from dequantized values.
      std::vector<Reference> ref(kMaxTokens * kRowsPerGroup);
      for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
        const std::vector<BlockQ4K> row(g.rows.begin() + r * nblocks,
                                        g.rows.begin() + (r + 1) * nblocks);
        const auto w = dequantized(GgmlType::Q4_K, row, nblocks * QK_K);
        for (std::size_t t = 0; t < kMaxTokens; ++t) {
          const std::vector<BlockQ8K> xt(x.begin() + t * nblocks, x.begin() + (t + 1) * nblocks);
          ref[t * kRowsPerGroup + r] = reference_dot(w, dequantized_q8k(xt));
        }
      }
      std::vector<float> want(kMaxTokens * kRowsPerGroup);
      rows8_q4k_q8k_reference(g.packed.data(), nblocks, x.data(), nblocks, kMaxTokens, want.data(),
                              kRowsPerGroup);
      for (Isa isa : available_isas()) {
        for (std::size_t n_tokens = 1; n_tokens <= kMaxTokens; ++n_tokens) {
          std::vector<float> y(kMaxTokens * kRowsPerGroup, -7.0f);
          kernels_for_isa(isa).rows8_q4k_q8k(g.packed.data(), nblocks, x.data(), nblocks, n_tokens,
                                             y.data(), kRowsPerGroup);
          CAPTURE(isa_name(isa));
          CAPTURE(nblocks);
          CAPTURE(n_tokens);
          CAPTURE(static_cast<int>(pattern));
          std::size_t bad = 0;
          for (std::size_t i = 0; i < n_tokens * kRowsPerGroup; ++i) {
            bad += !(std::fabs(y[i] - want[i]) <= 2e-6 * ref[i].magnitude + 1e-30);
          }
          CHECK(bad == 0);
          // Tokens past n_tokens are not written.
          for (std::size_t i = n_tokens * kRowsPerGroup; i < y.size(); ++i) CHECK(y[i] == -7.0f);
        }
      }
    }
  }
}

TEST_CASE("every vector set has a rows8 kernel of its own, the scalar set the reference") {
  const auto reference = &rows8_q4k_q8k_reference;
  CHECK((kernels_for_isa(Isa::scalar).rows8_q4k_q8k == reference));
  for (Isa isa : available_isas()) {
    CAPTURE(isa_name(isa));
    const bool x86 =
        isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
    CHECK(((kernels_for_isa(isa).rows8_q4k_q8k != reference) == x86));
  }
}
