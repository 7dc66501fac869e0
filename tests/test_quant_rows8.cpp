// Rows interleaved by eight (quant/rows8.hpp), for Q4_K, Q5_K, Q6_K, Q2_K and Q3_K: repacking
// keeps every integer, the reference dot on the copy equals the scalar dot on the file's
// rows bit for bit, and each ISA's kernel equals the reference to float rounding, for one
// token and for several. The sixteen-row copies (quant/rows16.hpp: Q4_1, Q8_0, Q4_0, IQ4_NL, Q5_0,
// Q5_1, IQ4_XS, MXFP4) are tested at the end.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "smol/model/model.hpp"
#include "smol/quant/interleaved_rows.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/kernels_impl.hpp"
#include "test_simd_data.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_quant_rows8 {

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
  static constexpr auto repack = repack_with_mins_rows8<BlockQ4KRows8>;
  static constexpr auto reference = rows8_q4k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q4_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q4_K>().dot; }
};

struct Q5K {
  using Block = BlockQ5K;
  using Rows8 = BlockQ5KRows8;
  static constexpr GgmlType type = GgmlType::Q5_K;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q5k_blocks(n, p, rng);
  }
  static constexpr auto repack = repack_with_mins_rows8<BlockQ5KRows8>;
  static constexpr auto reference = rows8_q5k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q5_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q5_K>().dot; }
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

struct Q2K {
  using Block = BlockQ2K;
  using Rows8 = BlockQ2KRows8;
  static constexpr GgmlType type = GgmlType::Q2_K;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q2k_blocks(n, p, rng);
  }
  static constexpr auto repack = repack_two_bit_rows8<BlockQ2KRows8>;
  static constexpr auto reference = rows8_q2k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q2_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q2_K>().dot; }
};

struct Q3K {
  using Block = BlockQ3K;
  using Rows8 = BlockQ3KRows8;
  static constexpr GgmlType type = GgmlType::Q3_K;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q3k_blocks(n, p, rng);
  }
  static constexpr auto repack = repack_two_bit_rows8<BlockQ3KRows8>;
  static constexpr auto reference = rows8_q3k_q8k_reference;
  static auto kernel(const Kernels& k) { return k.of<GgmlType::Q3_K>().rows8; }
  static auto scalar_dot(const Kernels& k) { return k.of<GgmlType::Q3_K>().dot; }
};

// The sets with an eight-row kernel of their own for a layout: every x86 set for Q4_K, Q5_K
// and Q6_K; for Q2_K and Q3_K every one but AMX (whose matrix unit reads their file rows),
// which keeps the file's rows (rows8_types_without_kernels).
template <class Layout>
bool has_own_rows8_kernel(Isa isa) {
  const bool not_amx = isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni;
  if constexpr (std::is_same_v<Layout, Q2K> || std::is_same_v<Layout, Q3K>) return not_amx;
  return not_amx || isa == Isa::amx;
}

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

TEST_CASE(
    "repack_with_mins_rows8 (Q4_K) keeps every quant, scale, min and f16 factor in its lane") {
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

TEST_CASE(
    "repack_with_mins_rows8 (Q5_K) keeps every 5-bit quant, scale, min and f16 factor in its "
    "lane") {
  std::mt19937 rng(45);
  const auto g = make_group<Q5K>(3, Pattern::random, rng);
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    for (std::size_t b = 0; b < 3; ++b) {
      const BlockQ5K& in = g.rows[r * 3 + b];
      const BlockQ5KRows8& out = g.packed[b];
      std::uint8_t scales[8], mins[8];
      unpack_q4k_scales(in.scales, scales, mins);
      for (std::size_t j = 0; j < 8; ++j) {
        CHECK(out.scales[j][r] == scales[j]);
        CHECK(out.mins[j][r] == mins[j]);
      }
      CHECK(out.d[r] == in.d);
      CHECK(out.dmin[r] == in.dmin);
      std::size_t bad = 0;
      for (std::size_t j = 0; j < 8; ++j) {
        for (std::size_t l = 0; l < 32; ++l)
          bad += rows8_quant(out, r, j, l) != q5k_quant(in, j, l);
      }
      CHECK(bad == 0);
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

TEST_CASE_TEMPLATE(
    "repack_two_bit_rows8 (Q2_K, Q3_K) keeps every quant, sub-block byte and f16 "
    "factor in its lane",
    Layout, Q2K, Q3K) {
  std::mt19937 rng(46);
  for (Pattern p : kPatterns) {
    const auto g = make_group<Layout>(3, p, rng);
    std::size_t bad = 0;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      for (std::size_t b = 0; b < 3; ++b) {
        const auto& in = g.rows[r * 3 + b];
        const auto& out = g.packed[b];
        CHECK(out.d[r] == in.d);
        if constexpr (std::is_same_v<Layout, Q2K>) {
          CHECK(out.dmin[r] == in.dmin);
          for (std::size_t j = 0; j < 16; ++j) {
            bad += rows8_sub_block_byte(out, r, j) != in.scales[j];
          }
          for (std::size_t i = 0; i < QK_K; ++i) bad += rows8_quant(out, r, i) != q2k_quant(in, i);
        } else {
          std::int8_t scales[16];
          unpack_q3k_scales(in.scales, scales);
          for (std::size_t j = 0; j < 16; ++j) bad += rows8_sub_block_byte(out, r, j) != scales[j];
          for (std::size_t i = 0; i < QK_K; ++i) bad += rows8_quant(out, r, i) != q3k_quant(in, i);
        }
      }
    }
    CHECK(bad == 0);
  }
  // Every slot of the sub-block bytes is some row's sub-block, each once.
  bool seen[4][16][2] = {};
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    for (std::size_t j = 0; j < 16; ++j) {
      const Rows8SubBlockSlot s = rows8_sub_block_slot(r, j);
      REQUIRE(s.v < 4);
      REQUIRE(s.lane < 16);
      REQUIRE(s.e < 2);
      CHECK_FALSE(seen[s.v][s.lane][s.e]);
      seen[s.v][s.lane][s.e] = true;
    }
  }
}

TEST_CASE_TEMPLATE("file_block_of takes each row's block back out of a group, byte for byte",
                   Layout, Q4K, Q5K, Q6K) {
  // AMX's prefill on the copy expands these blocks (expand_copy_row): they must be the
  // file's, packed scales included, for every pattern of the test data.
  std::mt19937 rng(44);
  for (Pattern p : kPatterns) {
    const auto g = make_group<Layout>(3, p, rng);
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      for (std::size_t b = 0; b < 3; ++b) {
        const auto back = file_block_of(g.packed[b], r);
        CHECK(std::memcmp(&back, &g.rows[r * 3 + b], sizeof back) == 0);
      }
    }
  }
}

TEST_CASE_TEMPLATE("rows8: the reference equals the scalar dot on the file's rows bit for bit",
                   Layout, Q4K, Q5K, Q6K, Q2K, Q3K) {
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
                   Q4K, Q5K, Q6K, Q2K, Q3K) {
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

TEST_CASE_TEMPLATE("the x86 sets have rows8 kernels of their own, the scalar set the references",
                   Layout, Q4K, Q5K, Q6K, Q2K, Q3K) {
  const auto reference = Layout::reference;
  CHECK((Layout::kernel(kernels_for_isa(Isa::scalar)) == reference));
  for (Isa isa : available_isas()) {
    CAPTURE(isa_name(isa));
    const bool x86 =
        isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
    const bool own = has_own_rows8_kernel<Layout>(isa);
    CHECK(((Layout::kernel(kernels_for_isa(isa)) != reference) == own));
    // Where measured faster: every x86 set (AMX's prefill reads the copy on its matrix unit).
    CHECK(kernels_for_isa(isa).prefers_rows8 == x86);
    // A set that prefers the copies leaves out the types it has no kernel for.
    const auto left_out = rows8_types_without_kernels(isa);
    const bool copied = std::find(left_out.begin(), left_out.end(), Layout::type) == left_out.end();
    CHECK(copied == (own || !x86));
  }
}

// Rows interleaved by sixteen (quant/rows16.hpp), for Q4_1, Q8_0, Q4_0, IQ4_NL, IQ4_XS, Q5_0,
// Q5_1 and MXFP4:
// repacking keeps
// every quant and factor (a partial last group padded with zero rows), every ISA's
// kernel equals the reference bit for bit (the same float steps), the reference is the
// scalar dot on the file's rows to rounding, and on AMX both equal the prefill tiles'
// result for a single token bit for bit, the tiles on the file's rows and on the copy.
namespace {

// Equal bits, or both NaN (a NaN's payload is not the point).
bool same_float(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

// |d_w d_x| sum |level x quant| over a 32-value block (and Q4_1's |m s|): what bounds
// the rounding of a block's float steps.
template <class T, class Block, class Act>
double block32_magnitude(const Block& w, const Act& x) {
  double s = 0;
  for (std::size_t i = 0; i < 32; ++i) s += std::abs(T::quant(w, i) * x.qs[i]);
  return std::fabs(f16_to_f32(w.d) * f16_to_f32(x.d)) * s + T::min_term(w, x);
}

struct Q4_1Copy {
  using W = weight_type_t<GgmlType::Q4_1>;
  using Block = BlockQ4_1;
  using Rows16 = BlockQ4_1Rows16;
  static constexpr GgmlType type = GgmlType::Q4_1;
  static constexpr auto repack = repack_q4_1_rows16;
  static constexpr auto reference = rows16_q4_1_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q4_1_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) {
    return i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4);
  }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return rows16_q4_1_quant(p, r, i);
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) {
    return p.d[r] == b.d && p.m[r] == b.m;
  }
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0 && p.m[r] == 0; }
  static double min_term(const Block& b, const BlockQ8_1& x) {
    return std::fabs(f16_to_f32(b.m) * f16_to_f32(x.s));
  }
  static double magnitude(const Block& b, const BlockQ8_1& x) {
    return block32_magnitude<Q4_1Copy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

struct Q8_0Copy {
  using W = weight_type_t<GgmlType::Q8_0>;
  using Block = BlockQ8_0;
  using Rows16 = BlockQ8_0Rows16;
  static constexpr GgmlType type = GgmlType::Q8_0;
  static constexpr auto repack = repack_q8_0_rows16;
  static constexpr auto reference = rows16_q8_0_reference;
  // ggml's quantizer never writes -128, but a file may hold it: some blocks get a few.
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    auto v = q8_0_blocks(n, p, rng);
    for (std::size_t b = 0; b < v.size(); b += 3) v[b].qs[rng() % 32] = -128;
    return v;
  }
  static int quant(const Block& b, std::size_t i) { return b.qs[i]; }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return rows16_q8_0_quant(p, r, i);
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) { return p.d[r] == b.d; }
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0; }
  static double min_term(const Block&, const BlockQ8_0&) { return 0; }
  static double magnitude(const Block& b, const BlockQ8_0& x) {
    return block32_magnitude<Q8_0Copy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

struct Q4_0Copy {
  using W = weight_type_t<GgmlType::Q4_0>;
  using Block = BlockQ4_0;
  using Rows16 = BlockQ4_0Rows16;
  static constexpr GgmlType type = GgmlType::Q4_0;
  static constexpr auto repack = repack_q4_0_rows16;
  static constexpr auto reference = rows16_q4_0_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q4_0_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) {
    return (i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)) - 8;
  }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return rows16_nibble(p, r, i) - 8;
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) { return p.d[r] == b.d; }
  // A padding row's nibbles are 0 (level -8) with d = 0: its results are 0 all the same.
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0; }
  static constexpr int kPaddingLevel = -8;
  static double min_term(const Block&, const BlockQ8_0&) { return 0; }
  static double magnitude(const Block& b, const BlockQ8_0& x) {
    return block32_magnitude<Q4_0Copy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

// IQ4_NL: Q4_0's nibbles, each an index into kIq4nlValues.
struct IQ4NLCopy {
  using W = weight_type_t<GgmlType::IQ4_NL>;
  using Block = BlockIQ4NL;
  using Rows16 = BlockIQ4NLRows16;
  static constexpr GgmlType type = GgmlType::IQ4_NL;
  static constexpr auto repack = repack_iq4nl_rows16;
  static constexpr auto reference = rows16_iq4nl_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return iq4nl_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) {
    return kIq4nlValues[i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)];
  }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return kIq4nlValues[rows16_nibble(p, r, i)];
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) { return p.d[r] == b.d; }
  // A padding row's nibbles are 0 (level -127) with d = 0: its results are 0 all the same.
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0; }
  static constexpr int kPaddingLevel = -127;
  static double min_term(const Block&, const BlockQ8_0&) { return 0; }
  static double magnitude(const Block& b, const BlockQ8_0& x) {
    return block32_magnitude<IQ4NLCopy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

// MXFP4: IQ4_NL's nibble order, each a code into kMxfp4Values, under a row's E8M0 byte.
struct MXFP4Copy {
  using W = weight_type_t<GgmlType::MXFP4>;
  using Block = BlockMXFP4;
  using Rows16 = BlockMXFP4Rows16;
  static constexpr GgmlType type = GgmlType::MXFP4;
  static constexpr auto repack = repack_mxfp4_rows16;
  static constexpr auto reference = rows16_mxfp4_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return mxfp4_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) {
    return kMxfp4Values[i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)];
  }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return kMxfp4Values[rows16_nibble(p, r, i)];
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) { return p.e[r] == b.e; }
  // A padding row's codes are 0, the value 0: its results are 0 whatever its scale.
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.e[r] == 0; }
  static double min_term(const Block&, const BlockQ8_0&) { return 0; }
  static double magnitude(const Block& b, const BlockQ8_0& x) {
    double s = 0;
    for (std::size_t i = 0; i < 32; ++i) s += std::abs(quant(b, i) * x.qs[i]);
    return std::fabs(e8m0_half(b.e) * f16_to_f32(x.d)) * s;
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

// Q5_0 and Q5_1: Q4_0's and Q4_1's nibbles, and fifth bits in the copy's order.
template <class B>
int q5_file_quant(const B& b, std::size_t i) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  return (i < 16 ? (b.qs[i] & 0xF) : (b.qs[i - 16] >> 4)) | static_cast<int>((qh >> i) & 1) << 4;
}

struct Q5_0Copy {
  using W = weight_type_t<GgmlType::Q5_0>;
  using Block = BlockQ5_0;
  using Rows16 = BlockQ5_0Rows16;
  static constexpr GgmlType type = GgmlType::Q5_0;
  static constexpr auto repack = repack_q5_0_rows16;
  static constexpr auto reference = rows16_q5_0_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q5_0_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) { return q5_file_quant(b, i) - 16; }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return rows16_q5_quant(p, r, i) - 16;
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) { return p.d[r] == b.d; }
  // A padding row's quants are 0 (level -16) with d = 0: its results are 0 all the same.
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0; }
  static constexpr int kPaddingLevel = -16;
  static double min_term(const Block&, const BlockQ8_0&) { return 0; }
  static double magnitude(const Block& b, const BlockQ8_0& x) {
    return block32_magnitude<Q5_0Copy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

struct Q5_1Copy {
  using W = weight_type_t<GgmlType::Q5_1>;
  using Block = BlockQ5_1;
  using Rows16 = BlockQ5_1Rows16;
  static constexpr GgmlType type = GgmlType::Q5_1;
  static constexpr auto repack = repack_q5_1_rows16;
  static constexpr auto reference = rows16_q5_1_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return q5_1_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) { return q5_file_quant(b, i); }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return rows16_q5_quant(p, r, i);
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) {
    return p.d[r] == b.d && p.m[r] == b.m;
  }
  static bool zero_factors(const Rows16& p, std::size_t r) { return p.d[r] == 0 && p.m[r] == 0; }
  static double min_term(const Block& b, const BlockQ8_1& x) {
    return std::fabs(f16_to_f32(b.m) * f16_to_f32(x.s));
  }
  static double magnitude(const Block& b, const BlockQ8_1& x) {
    return block32_magnitude<Q5_1Copy>(b, x);
  }
  static const auto& quads(const Rows16& p) { return p.qs; }
};

// IQ4_XS: eight IQ4_NL-like sub-blocks of 32 under integer scales, Q8_K tokens.
struct IQ4XSCopy {
  using W = weight_type_t<GgmlType::IQ4_XS>;
  using Block = BlockIQ4XS;
  using Rows16 = BlockIQ4XSRows16;
  static constexpr GgmlType type = GgmlType::IQ4_XS;
  static constexpr auto repack = repack_iq4xs_rows16;
  static constexpr auto reference = rows16_iq4xs_reference;
  static std::vector<Block> blocks(std::size_t n, Pattern p, std::mt19937& rng) {
    return iq4xs_blocks(n, p, rng);
  }
  static int quant(const Block& b, std::size_t i) {
    return kIq4nlValues[iq4_index(b.qs + 16 * (i / 32), i % 32)];
  }
  static int copy_quant(const Rows16& p, std::size_t r, std::size_t i) {
    return kIq4nlValues[rows16_iq4xs_nibble(p, i / 32, r, i % 32)];
  }
  static bool same_factors(const Rows16& p, std::size_t r, const Block& b) {
    for (std::size_t j = 0; j < 8; ++j) {
      if (p.scales[j][r] != iq4xs_scale(b, j)) return false;
    }
    return p.d[r] == b.d;
  }
  static bool zero_factors(const Rows16& p, std::size_t r) {
    for (std::size_t j = 0; j < 8; ++j) {
      if (p.scales[j][r] != 0) return false;
    }
    return p.d[r] == 0;
  }
  static constexpr int kPaddingLevel = -127;
  static double magnitude(const Block& b, const BlockQ8K& x) {
    double m = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      double s = 0;
      for (std::size_t i = 0; i < 32; ++i) s += std::abs(quant(b, 32 * j + i) * x.qs[32 * j + i]);
      m += std::fabs(f16_to_f32(b.d) * iq4xs_scale(b, j) * x.d) * s;
    }
    return m;
  }
  static const auto& quads(const Rows16& p) { return p.qs[0]; }
};

// Values of a group block: 32, or IQ4_XS's 256.
template <class T>
constexpr std::size_t kValues = T::W::values_per_block;

// The token blocks' terms (their factors as floats; the offset sums where the copy has an
// offset: Q8_0, Q4_0, IQ4_NL, Q5_0, IQ4_XS, one per 32 values), as matvec makes them. The
// references take neither (they read the token blocks), so a kernel that equals its
// reference bit for bit also proves the terms.
template <class T, class Act>
std::vector<Rows16Terms<typename T::Rows16>> token_terms_for(const std::vector<Act>& x) {
  std::vector<Rows16Terms<typename T::Rows16>> terms(x.size());
  rows16_token_terms(x.data(), x.size(), T::Rows16::kOffset, terms.data());
  return terms;
}

// The rows16 copy of a rows x nblocks matrix, group after group.
template <class T>
std::vector<typename T::Rows16> repack_rows16(const std::vector<typename T::Block>& rows,
                                              std::size_t n_rows, std::size_t nblocks) {
  const std::size_t groups = (n_rows + kRows16 - 1) / kRows16;
  std::vector<typename T::Rows16> packed(groups * nblocks);
  CHECK(packed.size() * sizeof(typename T::Rows16) ==
        interleaved_bytes(T::type, n_rows, kValues<T> * nblocks));
  for (std::size_t g = 0; g < groups; ++g) {
    T::repack(reinterpret_cast<const std::byte*>(rows.data() + g * kRows16 * nblocks),
              nblocks * sizeof(typename T::Block), n_rows - g * kRows16, nblocks,
              packed.data() + g * nblocks);
  }
  return packed;
}

// The level a padding row holds: 0, or Q4_0's nibble 0.
template <class T>
constexpr int padding_level() {
  if constexpr (requires { T::kPaddingLevel; }) {
    return T::kPaddingLevel;
  } else {
    return 0;
  }
}

template <class T>
void check_rows16_repack() {
  std::mt19937 rng(51);
  for (std::size_t n_rows : {16, 21}) {
    const std::size_t nblocks = 18;
    const auto rows = T::blocks(n_rows * nblocks, Pattern::random, rng);
    const auto packed = repack_rows16<T>(rows, n_rows, nblocks);
    for (std::size_t row = 0; row < packed.size() / nblocks * kRows16; ++row) {
      const std::size_t g = row / kRows16, r = row % kRows16;
      for (std::size_t b = 0; b < nblocks; ++b) {
        const auto& p = packed[g * nblocks + b];
        // AMX's order: quad q of row r at byte 64 q + 4 r.
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(&p);
        CHECK(bytes[64 * 2 + 4 * r + 1] == T::quads(p)[2][r][1]);
        if (row >= n_rows) {
          CHECK(T::zero_factors(p, r));
          for (std::size_t i = 0; i < kValues<T>; ++i) {
            CHECK(T::copy_quant(p, r, i) == padding_level<T>());
          }
          continue;
        }
        const auto& want = rows[row * nblocks + b];
        CHECK(T::same_factors(p, r, want));
        for (std::size_t i = 0; i < kValues<T>; ++i) {
          CHECK(T::copy_quant(p, r, i) == T::quant(want, i));
        }
      }
    }
  }
}

template <class T>
void check_rows16_kernels() {
  std::mt19937 rng(52);
  const Kernels& scalar = kernels_for_isa(Isa::scalar);
  const auto& scalar_k = scalar.of<T::type>();
  CHECK((scalar_k.rows16 == T::reference));
  for (Pattern pattern : kPatterns) {
    for (std::size_t nblocks : {1, 18, 43}) {
      for (std::size_t n_rows : {16, 37}) {
        CAPTURE(static_cast<int>(pattern));
        CAPTURE(nblocks);
        CAPTURE(n_rows);
        const auto rows = T::blocks(n_rows * nblocks, pattern, rng);
        const auto packed = repack_rows16<T>(rows, n_rows, nblocks);
        const auto x = weight_activations<typename T::W>(kValues<T> * nblocks, pattern, rng);
        const auto terms = token_terms_for<T>(x);
        const std::size_t groups = packed.size() / nblocks;
        std::vector<float> want(n_rows);
        for (std::size_t g = 0; g < groups; ++g) {
          T::reference(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16, x.data(),
                       nblocks, 1, nullptr, want.data() + g * kRows16, 0);
        }
        if (pattern != Pattern::huge_scales) {  // (huge scales overflow either way)
          for (std::size_t r = 0; r < n_rows; ++r) {
            const auto* row = rows.data() + r * nblocks;
            double magnitude = 0;
            for (std::size_t b = 0; b < nblocks; ++b) magnitude += T::magnitude(row[b], x[b]);
            const float dot = scalar_k.dot(row, x.data(), nblocks);
            CHECK(std::fabs(want[r] - dot) <= 1e-5 * magnitude + 1e-30);
          }
        }
        for (Isa isa : available_isas()) {
          CAPTURE(isa_name(isa));
          const auto& k = kernels_for_isa(isa).of<T::type>();
          // The x86 sets have a kernel of their own; the others fall back to the reference.
          const bool own =
              isa == Isa::avx2 || isa == Isa::avx512 || isa == Isa::avx512vnni || isa == Isa::amx;
          CHECK(((k.rows16 != T::reference) == own));
          std::vector<float> y(groups * kRows16, -7.0f);
          for (std::size_t g = 0; g < groups; ++g) {
            k.rows16(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16, x.data(), nblocks,
                     1, terms.data(), y.data() + g * kRows16, 0);
          }
          std::size_t bad = 0;
          for (std::size_t r = 0; r < n_rows; ++r) bad += !same_float(y[r], want[r]);
          CHECK(bad == 0);
          // Rows past n_rows are not written.
          for (std::size_t r = n_rows; r < y.size(); ++r) CHECK(y[r] == -7.0f);
          // AMX's prefill reads the copy with tiles (the 32-value types) or with its matrix
          // unit (IQ4_XS), AVX-512 VNNI IQ4_XS's with the tokens in the lanes (test_matmul
          // compares those, on the copy and the file's rows, with this kernel bit for bit).
          // MXFP4 has no AMX tiles: its prefill there takes this kernel (rows16_prefills).
          const bool iq4xs = T::type == GgmlType::IQ4_XS;
          const bool amx_tiles = isa == Isa::amx && !iq4xs && T::type != GgmlType::MXFP4;
          const bool vnni = isa == Isa::avx512vnni || isa == Isa::amx;
          CHECK(((k.tile_dots_rows16 != nullptr) == amx_tiles));
          CHECK(((k.packed_rows16 != nullptr) == (vnni && iq4xs)));
          if constexpr (T::W::values_per_block == 32) {  // (IQ4_XS has no tiles)
            if (amx_tiles) {
              std::vector<float> tiles(n_rows, -7.0f), copy_tiles(n_rows, -7.0f);
              // The token packed as the tiles take it, one token padded to a tile of 16.
              const auto token = pack_block32_tiles(x.data(), nblocks, nblocks, 1);
              k.tile_dots_packed(reinterpret_cast<const std::byte*>(rows.data()),
                                 nblocks * sizeof(typename T::Block), n_rows, token.tiles,
                                 tiles.data(), n_rows);
              k.tile_dots_rows16(packed.data(), n_rows, token.tiles, copy_tiles.data(), n_rows);
              std::size_t differ = 0;
              for (std::size_t r = 0; r < n_rows; ++r) {
                differ += !same_float(tiles[r], y[r]) + !same_float(copy_tiles[r], y[r]);
              }
              CHECK(differ == 0);
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("rows16 repacking keeps every quant and factor in its lane, pads with zero rows") {
  SUBCASE("Q4_1") {
    check_rows16_repack<Q4_1Copy>();
  }
  SUBCASE("Q8_0") {
    check_rows16_repack<Q8_0Copy>();
  }
  SUBCASE("Q4_0") {
    check_rows16_repack<Q4_0Copy>();
  }
  SUBCASE("IQ4_NL") {
    check_rows16_repack<IQ4NLCopy>();
  }
  SUBCASE("IQ4_XS") {
    check_rows16_repack<IQ4XSCopy>();
  }
  SUBCASE("Q5_0") {
    check_rows16_repack<Q5_0Copy>();
  }
  SUBCASE("Q5_1") {
    check_rows16_repack<Q5_1Copy>();
  }
  SUBCASE("MXFP4") {
    check_rows16_repack<MXFP4Copy>();
  }
}

TEST_CASE(
    "rows16: every ISA's kernel equals the reference bit for bit, the reference the scalar "
    "dot to rounding, and AMX's single-token tiles (file rows and copy) bit for bit") {
  SUBCASE("Q4_1") {
    check_rows16_kernels<Q4_1Copy>();
  }
  SUBCASE("Q8_0") {
    check_rows16_kernels<Q8_0Copy>();
  }
  SUBCASE("Q4_0") {
    check_rows16_kernels<Q4_0Copy>();
  }
  SUBCASE("IQ4_NL") {
    check_rows16_kernels<IQ4NLCopy>();
  }
  SUBCASE("IQ4_XS") {
    check_rows16_kernels<IQ4XSCopy>();
  }
  SUBCASE("Q5_0") {
    check_rows16_kernels<Q5_0Copy>();
  }
  SUBCASE("Q5_1") {
    check_rows16_kernels<Q5_1Copy>();
  }
  SUBCASE("MXFP4") {
    check_rows16_kernels<MXFP4Copy>();
  }
}

TEST_CASE("rows16 over several tokens: each token's bits as alone, on every ISA") {
  // The few-token passes on AMX (stream_rows16 over a few tokens) and the prefill on the
  // copy elsewhere rely on it: 1 to 9 tokens, so the four-token steps and every remainder
  // run, tokens and outputs strided; 29 rows, so the last group's second half (AVX2's
  // kernels take a group half by half) is partial; every pattern, so AVX2's 16-bit sums of
  // Q4_1's and Q4_0's nibble products meet the largest quants.
  std::mt19937 rng(53);
  const auto check = [&]<class T>(T) {
    const std::size_t nblocks = 18, n_rows = 29, groups = 2, x_stride = nblocks + 3;
    for (Pattern pattern : kPatterns) {
      CAPTURE(static_cast<int>(pattern));
      const auto rows = T::blocks(n_rows * nblocks, pattern, rng);
      const auto packed = repack_rows16<T>(rows, n_rows, nblocks);
      for (std::size_t n_tokens = 1; n_tokens <= 9; ++n_tokens) {
        const auto x =
            weight_activations<typename T::W>(kValues<T> * x_stride * n_tokens, pattern, rng);
        const auto terms = token_terms_for<T>(x);
        for (Isa isa : available_isas()) {
          CAPTURE(isa_name(isa));
          CAPTURE(n_tokens);
          const auto& k = kernels_for_isa(isa).of<T::type>();
          const std::size_t y_stride = groups * kRows16 + 5;
          std::vector<float> many(n_tokens * y_stride, -7.0f), one(groups * kRows16, -7.0f);
          for (std::size_t g = 0; g < groups; ++g) {
            k.rows16(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16, x.data(), x_stride,
                     n_tokens, terms.data(), many.data() + g * kRows16, y_stride);
          }
          std::size_t differ = 0;
          for (std::size_t t = 0; t < n_tokens; ++t) {
            for (std::size_t g = 0; g < groups; ++g) {
              k.rows16(packed.data() + g * nblocks, nblocks, n_rows - g * kRows16,
                       x.data() + t * x_stride, x_stride, 1, terms.data() + t * x_stride,
                       one.data() + g * kRows16, 0);
            }
            for (std::size_t r = 0; r < n_rows; ++r)
              differ += !same_float(one[r], many[t * y_stride + r]);
            for (std::size_t r = n_rows; r < y_stride; ++r)
              differ += many[t * y_stride + r] != -7.0f;
          }
          CHECK(differ == 0);
        }
      }
    }
  };
  SUBCASE("Q4_1") {
    check(Q4_1Copy{});
  }
  SUBCASE("Q8_0") {
    check(Q8_0Copy{});
  }
  SUBCASE("Q4_0") {
    check(Q4_0Copy{});
  }
  SUBCASE("IQ4_NL") {
    check(IQ4NLCopy{});
  }
  SUBCASE("IQ4_XS") {
    check(IQ4XSCopy{});
  }
  SUBCASE("Q5_0") {
    check(Q5_0Copy{});
  }
  SUBCASE("Q5_1") {
    check(Q5_1Copy{});
  }
  SUBCASE("MXFP4") {
    check(MXFP4Copy{});
  }
}

TEST_CASE("interleaved rows: one mechanism for both group sizes") {
  // The K-quants take groups of eight, whole groups only; the 32-value types and IQ4_XS
  // groups of sixteen, the last one padded; float types none.
  for (GgmlType type :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    CAPTURE(ggml_type_name(type));
    CHECK(interleaved_group_rows(type) == 8);
    CHECK(can_interleave(type, 24));
    CHECK_FALSE(can_interleave(type, 20));
    CHECK(interleaved_groups(type, 24) == 3);
    CHECK(interleaved_bytes(type, 24, 512) == 3 * interleaved_bytes(type, 8, 512));
  }
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    CAPTURE(ggml_type_name(type));
    CHECK(interleaved_group_rows(type) == 16);
    CHECK(can_interleave(type, 20));
    CHECK(interleaved_groups(type, 20) == 2);
    CHECK(interleaved_bytes(type, 20, 512) == interleaved_bytes(type, 32, 512));
  }
  CHECK(interleaved_bytes(GgmlType::Q4_K, 8, 512) == 2 * sizeof(BlockQ4KRows8));
  CHECK(interleaved_bytes(GgmlType::Q4_0, 16, 512) == 16 * sizeof(BlockQ4_0Rows16));
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    CHECK_FALSE(has_interleaved_copy(type));
    CHECK_FALSE(can_interleave(type, 16));
    CHECK(interleaved_bytes(type, 16, 512) == 0);
  }
}

}  // namespace test_quant_rows8
