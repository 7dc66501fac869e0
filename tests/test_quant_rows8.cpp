// Rows interleaved by eight (quant/rows8.hpp), for Q4_K and Q6_K: repacking keeps every
// integer, the reference dot on the copy equals the scalar dot on the file's rows bit
// for bit, and each ISA's kernel equals the reference to float rounding, for one token
// and for several. The sixteen-row copy of Q4_1 (quant/rows16.hpp) is tested at the end.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/kernels_impl.hpp"
#include "test_simd_data.hpp"

using namespace smol;
using namespace smol::testing;

namespace {

struct Q4K {
  using Block = BlockQ4K;
  using Rows8 = BlockQ4KRows8;
  static constexpr GgmlType type = GgmlType::Q4_K;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q4k_blocks(n, p, rng);
  }
  static constexpr auto repack = repack_q4k_rows8;
  static constexpr auto reference = rows8_q4k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q4_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q4_K>().dot; }
};

struct Q6K {
  using Block = BlockQ6K;
  using Rows8 = BlockQ6KRows8;
  static constexpr GgmlType type = GgmlType::Q6_K;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q6k_blocks(n, p, rng);
  }
  static constexpr auto repack = repack_q6k_rows8;
  static constexpr auto reference = rows8_q6k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q6_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q6_K>().dot; }
};

template <class Layout>
struct Group {
  std::vector<typename Layout::Block> rows;  // 8 rows of nblocks blocks, row-major
  std::vector<typename Layout::Rows8> packed;
};

template <class Layout>
Group<Layout> make_group(std::size_t nblocks, Pattern pattern, std::mt19937& rng) {
  Group<Layout> g{Layout::blocks(kRowsPerGroup * nblocks, pattern, rng), {}};
  g.packed.resize(nblocks);
  Layout::repack(reinterpret_cast<const std::byte*>(g.rows.data()),
                 nblocks * sizeof(typename Layout::Block), nblocks, g.packed.data());
  return g;
}

}  // namespace

TEST_CASE("repack_q4k_rows8 keeps every quant, scale, min and f16 factor in its lane") {
  std::mt19937 rng(40);
  const auto g = make_group<Q4K>(3, Pattern::random, rng);
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

TEST_CASE("repack_q6k_rows8 keeps every 6-bit quant, scale and f16 factor in its lane") {
  std::mt19937 rng(43);
  const auto g = make_group<Q6K>(3, Pattern::random, rng);
  std::vector<float> file_values(QK_K), packed_values(QK_K);
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    for (std::size_t b = 0; b < 3; ++b) {
      const BlockQ6K& in = g.rows[r * 3 + b];
      const BlockQ6KRows8& out = g.packed[b];
      CHECK(out.d[r] == in.d);
      for (std::size_t group = 0; group < 16; ++group)
        CHECK(out.scales[group][r] == in.scales[group]);
      // The reference dequantizer on the file's block against the quants read back from
      // the copy: every value, through the same formula.
      dequantize_row(GgmlType::Q6_K, reinterpret_cast<const std::byte*>(&in), file_values.data(),
                     QK_K);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < QK_K; ++i) {
        const float value = f16_to_f32(out.d[r]) * static_cast<float>(out.scales[i / 16][r]) *
                            static_cast<float>(rows8_q6k_quant(out, r, i) - 32);
        bad += value != file_values[i];
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE_TEMPLATE("rows8: the reference equals the scalar dot on the file's rows bit for bit",
                   Layout, Q4K, Q6K) {
  std::mt19937 rng(41);
  const Kernels& scalar = kernels_for_isa(Isa::scalar);
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 8, 43}) {
      const auto g = make_group<Layout>(nblocks, pattern, rng);
      constexpr std::size_t kTokens = 3;
      const auto x = q8k_activations(kTokens * nblocks * QK_K, pattern, rng);
      float y[kTokens][kRowsPerGroup];
      Layout::reference(g.packed.data(), nblocks, x.data(), nblocks, kTokens, &y[0][0],
                        kRowsPerGroup, WeightsFrom::memory);
      for (std::size_t t = 0; t < kTokens; ++t) {
        for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
          const float want = Layout::scalar_dot(scalar)(g.rows.data() + r * nblocks,
                                                        x.data() + t * nblocks, nblocks);
          CHECK(std::memcmp(&y[t][r], &want, sizeof want) == 0);
        }
      }
    }
  }
}

TEST_CASE_TEMPLATE("rows8: every ISA's kernel equals the reference, for 1 to 15 tokens", Layout,
                   Q4K, Q6K) {
  std::mt19937 rng(42);
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 8, 43}) {
      const auto g = make_group<Layout>(nblocks, pattern, rng);
      constexpr std::size_t kMaxTokens = 15;
      const auto x = q8k_activations(kMaxTokens * nblocks * QK_K, pattern, rng);
      // Tolerance scale: |w| . |x| per row and token, from dequantized values.
      std::vector<Reference> ref(kMaxTokens * kRowsPerGroup);
      for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
        const std::vector<typename Layout::Block> row(g.rows.begin() + r * nblocks,
                                                      g.rows.begin() + (r + 1) * nblocks);
        const auto w = dequantized(Layout::type, row, nblocks * QK_K);
        for (std::size_t t = 0; t < kMaxTokens; ++t) {
          const std::vector<BlockQ8K> xt(x.begin() + t * nblocks, x.begin() + (t + 1) * nblocks);
          ref[t * kRowsPerGroup + r] = reference_dot(w, dequantized_q8k(xt));
        }
      }
      std::vector<float> want(kMaxTokens * kRowsPerGroup);
      Layout::reference(g.packed.data(), nblocks, x.data(), nblocks, kMaxTokens, want.data(),
                        kRowsPerGroup, WeightsFrom::memory);
      for (Isa isa : available_isas()) {
        for (std::size_t n_tokens = 1; n_tokens <= kMaxTokens; ++n_tokens) {
          // Prefetching or not (streamed or cached weights) leaves the results alone.
          for (WeightsFrom from : {WeightsFrom::memory, WeightsFrom::cache}) {
            std::vector<float> y(kMaxTokens * kRowsPerGroup, -7.0f);
            Layout::kernel(kernels_for_isa(isa))(g.packed.data(), nblocks, x.data(), nblocks,
                                                 n_tokens, y.data(), kRowsPerGroup, from);
            CAPTURE(isa_name(isa));
            CAPTURE(nblocks);
            CAPTURE(n_tokens);
            CAPTURE(static_cast<int>(pattern));
            CAPTURE(static_cast<int>(from));
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
}

TEST_CASE_TEMPLATE("every vector set has rows8 kernels of its own, the scalar set the references",
                   Layout, Q4K, Q6K) {
  const auto reference = Layout::reference;
  CHECK((Layout::kernel(kernels_for_isa(Isa::scalar)) == reference));
  for (Isa isa : available_isas()) {
    CAPTURE(isa_name(isa));
    const bool x86 =
        isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
    CHECK(((Layout::kernel(kernels_for_isa(isa)) != reference) == x86));
    // Only where measured faster: AVX2 and AVX-512. AMX keeps the file layout.
    CHECK(kernels_for_isa(isa).prefers_rows8 ==
          (isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni));
  }
}

// Rows interleaved by sixteen (quant/rows16.hpp), for Q4_1: repacking keeps every
// nibble and factor (a partial last group padded with zero rows), every ISA's kernel
// equals the reference bit for bit (the same float steps), the reference is the scalar
// dot on the file's rows to rounding, and on AMX both equal the prefill tiles' result
// for a single token bit for bit.
namespace {

// Equal bits, or both NaN (a NaN's payload is not the point).
bool same_float(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

// The rows16 copy of a rows x nblocks Q4_1 matrix, group after group.
std::vector<BlockQ4_1Rows16> repack_q4_1(const std::vector<BlockQ4_1>& rows, std::size_t n_rows,
                                         std::size_t nblocks) {
  const std::size_t groups = (n_rows + kRows16 - 1) / kRows16;
  std::vector<BlockQ4_1Rows16> packed(groups * nblocks);
  CHECK(packed.size() * sizeof(BlockQ4_1Rows16) == rows16_bytes(n_rows, 32 * nblocks));
  for (std::size_t g = 0; g < groups; ++g) {
    repack_q4_1_rows16(reinterpret_cast<const std::byte*>(rows.data() + g * kRows16 * nblocks),
                       nblocks * sizeof(BlockQ4_1), n_rows - g * kRows16, nblocks,
                       packed.data() + g * nblocks);
  }
  return packed;
}

}  // namespace

TEST_CASE("repack_q4_1_rows16 keeps every nibble and factor in its lane, pads with zero rows") {
  std::mt19937 rng(51);
  for (std::size_t n_rows : {16, 21}) {
    const std::size_t nblocks = 18;
    const auto rows = q4_1_blocks(n_rows * nblocks, Pattern::random, rng);
    const auto packed = repack_q4_1(rows, n_rows, nblocks);
    for (std::size_t row = 0; row < packed.size() / nblocks * kRows16; ++row) {
      const std::size_t g = row / kRows16, r = row % kRows16;
      for (std::size_t b = 0; b < nblocks; ++b) {
        const BlockQ4_1Rows16& p = packed[g * nblocks + b];
        // AMX's order: quad q of row r at byte 64 q + 4 r (high nibbles for q >= 4).
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(&p);
        CHECK(bytes[64 * 2 + 4 * r + 1] == p.qs[2][r][1]);
        if (row >= n_rows) {
          CHECK((p.d[r] == 0 && p.m[r] == 0));
          for (std::size_t i = 0; i < 32; ++i) CHECK(rows16_q4_1_quant(p, r, i) == 0);
          continue;
        }
        const BlockQ4_1& want = rows[row * nblocks + b];
        CHECK((p.d[r] == want.d && p.m[r] == want.m));
        for (std::size_t i = 0; i < 32; ++i) {
          const int q = i < 16 ? (want.qs[i] & 0xF) : (want.qs[i - 16] >> 4);
          CHECK(rows16_q4_1_quant(p, r, i) == q);
        }
      }
    }
  }
}

TEST_CASE(
    "rows16 Q4_1: every ISA's kernel equals the reference bit for bit, the reference the "
    "scalar dot to rounding, and AMX's single-token tiles bit for bit") {
  std::mt19937 rng(52);
  const Kernels& scalar = kernels_for_isa(Isa::scalar);
  CHECK((scalar.of<GgmlType::Q4_1>().rows16 == rows16_q4_1_reference));
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 18, 43}) {
      for (std::size_t n_rows : {16, 37}) {
        CAPTURE(static_cast<int>(pattern));
        CAPTURE(nblocks);
        CAPTURE(n_rows);
        const auto rows = q4_1_blocks(n_rows * nblocks, pattern, rng);
        const auto packed = repack_q4_1(rows, n_rows, nblocks);
        const auto x = q8_1_activations(32 * nblocks, pattern, rng);
        const std::size_t groups = packed.size() / nblocks;
        std::vector<float> want(n_rows);
        for (std::size_t g = 0; g < groups; ++g) {
          rows16_q4_1_reference(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16,
                                x.data(), want.data() + g * kRows16);
        }
        if (pattern != Pattern::huge_scales) {  // (huge scales overflow either way)
          for (std::size_t r = 0; r < n_rows; ++r) {
            const BlockQ4_1* row = rows.data() + r * nblocks;
            double magnitude = 0;
            for (std::size_t b = 0; b < nblocks; ++b) {
              double s = 0;
              for (std::size_t i = 0; i < 32; ++i) {
                const int q = i < 16 ? (row[b].qs[i] & 0xF) : (row[b].qs[i - 16] >> 4);
                s += std::abs(q * x[b].qs[i]);
              }
              magnitude += std::fabs(f16_to_f32(row[b].d) * f16_to_f32(x[b].d)) * s +
                           std::fabs(f16_to_f32(row[b].m) * f16_to_f32(x[b].s));
            }
            const float dot = scalar.of<GgmlType::Q4_1>().dot(row, x.data(), nblocks);
            CHECK(std::fabs(want[r] - dot) <= 1e-5 * magnitude + 1e-30);
          }
        }
        for (Isa isa : available_isas()) {
          CAPTURE(isa_name(isa));
          const auto& k = kernels_for_isa(isa).of<GgmlType::Q4_1>();
          // The x86 sets have a kernel of their own; the others fall back to the reference.
          const bool own =
              isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
          CHECK(((k.rows16 != rows16_q4_1_reference) == own));
          std::vector<float> y(groups * kRows16, -7.0f);
          for (std::size_t g = 0; g < groups; ++g) {
            k.rows16(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16, x.data(),
                     y.data() + g * kRows16);
          }
          std::size_t bad = 0;
          for (std::size_t r = 0; r < n_rows; ++r) bad += !same_float(y[r], want[r]);
          CHECK(bad == 0);
          // Rows past n_rows are not written.
          for (std::size_t r = n_rows; r < y.size(); ++r) CHECK(y[r] == -7.0f);
          if (isa == Isa::amx) {
            std::vector<float> tiles(n_rows, -7.0f);
            k.tile_dots(reinterpret_cast<const std::byte*>(rows.data()),
                        nblocks * sizeof(BlockQ4_1), n_rows, x.data(), nblocks, nblocks, 1,
                        tiles.data(), n_rows);
            std::size_t differ = 0;
            for (std::size_t r = 0; r < n_rows; ++r) differ += !same_float(tiles[r], y[r]);
            CHECK(differ == 0);
          }
        }
      }
    }
  }
}
