// Reference dequantizers on hand-built blocks whose values are known in advance:
// every bit field of every layout is placed by hand here, independently of the
// packing helpers, so a layout mistake cannot cancel itself out.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "smol/quant/dequantize.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/quantize.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_quant_blocks {

namespace {

constexpr smol::f16_bits kHalfOne = 0x3C00;      // 1.0
constexpr smol::f16_bits kHalfHalf = 0x3800;     // 0.5
constexpr smol::f16_bits kHalfQuarter = 0x3400;  // 0.25

// The machine's own half conversions, the oracle for core/half.hpp's written-out ones:
// F16C's vcvtps2ph / vcvtph2ps (every x86 CI machine has F16C), AArch64's fcvt.
#if defined(__x86_64__)
bool has_hardware_half() {
  return __builtin_cpu_supports("f16c");
}
[[gnu::target("f16c")]] smol::f16_bits hardware_f32_to_f16(float value) {
  return static_cast<smol::f16_bits>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}
[[gnu::target("f16c")]] float hardware_f16_to_f32(smol::f16_bits half) {
  return _cvtsh_ss(half);
}
#elif defined(__aarch64__)
// __fp16, the ARM C language extension's half (GCC 12 has no _Float16 in C++): its
// conversions are fcvt.
bool has_hardware_half() {
  return true;
}
smol::f16_bits hardware_f32_to_f16(float value) {
  const __fp16 half = static_cast<__fp16>(value);
  smol::f16_bits bits;
  std::memcpy(&bits, &half, sizeof bits);
  return bits;
}
float hardware_f16_to_f32(smol::f16_bits bits) {
  __fp16 half;
  std::memcpy(&half, &bits, sizeof half);
  return static_cast<float>(half);
}
#else
bool has_hardware_half() {
  return false;
}
smol::f16_bits hardware_f32_to_f16(float) {
  return 0;
}
float hardware_f16_to_f32(smol::f16_bits) {
  return 0;
}
#endif

template <class Block>
std::vector<float> dequantize(const Block& block) {
  std::vector<float> out(smol::BlockTraits<Block>::values);
  std::array<std::byte, sizeof(Block)> bytes;
  std::memcpy(bytes.data(), &block, sizeof(Block));
  smol::dequantize_row(smol::BlockTraits<Block>::type, bytes.data(), out.data(), out.size());
  std::vector<float> direct(out.size());
  smol::dequantize_block(block, direct.data());
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == direct[i]);
  return out;
}

// Eight 6-bit scales and mins chosen so that sub-blocks 4-7 need their high bits.
constexpr std::uint8_t kScales[8] = {1, 5, 17, 63, 33, 48, 62, 20};
constexpr std::uint8_t kMins[8] = {3, 0, 63, 7, 40, 17, 1, 60};
// The same, packed by hand: bytes 0-3 = scale[j] | (scale[j+4] >> 4) << 6, bytes 4-7 =
// min[j] | (min[j+4] >> 4) << 6, bytes 8-11 = (scale[j+4] & 15) | (min[j+4] & 15) << 4.
constexpr std::uint8_t kPackedScales[12] = {
    1 | 2 << 6, 5 | 3 << 6, 17 | 3 << 6, 63 | 1 << 6,  // scales 0-3, top bits of scales 4-7
    3 | 2 << 6, 0 | 1 << 6, 63 | 0 << 6, 7 | 3 << 6,   // mins 0-3, top bits of mins 4-7
    1 | 8 << 4, 0 | 1 << 4, 14 | 1 << 4, 4 | 12 << 4,  // low nibbles of scale/min 4-7
};

int q4k_level(int sub_block, int l) {
  return (3 * sub_block + l) % 16;
}

}  // namespace

TEST_CASE("Q4_0: value = d * (q - 8); low nibbles first, then high nibbles") {
  smol::BlockQ4_0 block{};
  block.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[j] == 0.5f * static_cast<float>(j - 8));
    CHECK(out[j + 16] == 0.5f * static_cast<float>(7 - j));
  }
}

namespace {

constexpr smol::f16_bits kHalfMinusOne = 0xBC00;  // -1.0

// Qh bytes with bits 0, 15 and 24-31 set; read byte by byte, not as a word.
constexpr std::uint8_t kQh[4] = {0x01, 0x80, 0x00, 0xFF};
int fifth_bit(int j) {
  return (kQh[j / 8] >> (j % 8)) & 1;
}

}  // namespace

TEST_CASE("Q4_1: value = d * q + m; low nibbles first, then high nibbles") {
  smol::BlockQ4_1 block{};
  block.d = kHalfHalf;
  block.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[j] == 0.5f * static_cast<float>(j) - 1.0f);
    CHECK(out[j + 16] == 0.5f * static_cast<float>(15 - j) - 1.0f);
  }
}

TEST_CASE("Q5_0: bit j of qh lifts value j by 16; value = d * (q - 16)") {
  smol::BlockQ5_0 block{};
  block.d = kHalfQuarter;
  std::memcpy(block.qh, kQh, 4);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 32; ++j) {
    CAPTURE(j);
    const int low4 = j < 16 ? j : 15 - (j - 16);
    CHECK(out[j] == 0.25f * static_cast<float>(low4 + 16 * fifth_bit(j) - 16));
  }
}

TEST_CASE("Q5_1: bit j of qh lifts value j by 16; value = d * q + m") {
  smol::BlockQ5_1 block{};
  block.d = kHalfHalf;
  block.m = kHalfMinusOne;
  std::memcpy(block.qh, kQh, 4);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 32; ++j) {
    CAPTURE(j);
    const int low4 = j < 16 ? j : 15 - (j - 16);
    CHECK(out[j] == 0.5f * static_cast<float>(low4 + 16 * fifth_bit(j)) - 1.0f);
  }
}

TEST_CASE("Q4_1, Q5_0, Q5_1 quantizers: levels, scales and bits where they belong") {
  // A ramp from -1 to 2.1 in steps of 0.1: min -1 and max 2.1 give Q4_1 d = 3.1 / 15,
  // Q5_1 d = 0.1; value j is then level j for Q5_1 (and its fifth bit is set from 16).
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = -1.0f + 0.1f * static_cast<float>(j);
  smol::BlockQ5_1 q51;
  smol::quantize_block(x, q51);
  CHECK(smol::f16_to_f32(q51.d) == doctest::Approx(0.1).epsilon(1e-3));
  CHECK(q51.m == kHalfMinusOne);
  for (int j = 0; j < 32; ++j) CHECK(smol::legacy_q5_quant(q51, j) == j);
  const std::uint8_t fifth_bits[4] = {0, 0, 0xFF, 0xFF};
  CHECK(std::memcmp(q51.qh, fifth_bits, 4) == 0);

  smol::BlockQ4_1 q41;
  smol::quantize_block(x, q41);
  CHECK(q41.m == kHalfMinusOne);
  CHECK(smol::legacy_low4(q41, 0) == 0);
  CHECK(smol::legacy_low4(q41, 31) == 15);

  // Q5_0: the largest magnitude, 2.1, gets level 0 (d = -2.1 / 16 < 0); -1 rounds to
  // trunc(-1 / d + 16.5) = 24.
  smol::BlockQ5_0 q50;
  smol::quantize_block(x, q50);
  CHECK(smol::f16_to_f32(q50.d) < 0);
  CHECK(smol::legacy_q5_quant(q50, 31) == 0);
  CHECK(smol::legacy_q5_quant(q50, 0) == 24);
}

TEST_CASE("Q8_1 activations: Q8_0's quants and scale, and s = d * sum(q) in f16") {
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * 3;
  x[40] = -7.5f;  // the second block's largest magnitude is negative
  smol::BlockQ8_1 q81[2];
  smol::quantize_row_q8_1(x.data(), q81, x.size());
  std::array<std::byte, 2 * sizeof(smol::BlockQ8_0)> q80_bytes;
  smol::quantize_row(smol::GgmlType::Q8_0, x.data(), q80_bytes.data(), x.size());
  for (std::size_t b = 0; b < 2; ++b) {
    CAPTURE(b);
    smol::BlockQ8_0 q80;
    std::memcpy(&q80, q80_bytes.data() + b * sizeof(q80), sizeof(q80));
    CHECK(q81[b].d == q80.d);
    CHECK(std::memcmp(q81[b].qs, q80.qs, 32) == 0);
    float amax = 0;
    int sum = 0;
    for (std::size_t j = 0; j < 32; ++j) {
      amax = std::max(amax, std::abs(x[32 * b + j]));
      sum += q80.qs[j];
    }
    // ggml multiplies by d before its rounding to f16.
    CHECK(q81[b].s == smol::f32_to_f16(static_cast<float>(sum) * (amax / 127)));
  }
}

// ggml's kvalues_iq4nl, written out here rather than taken from the header.
constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

TEST_CASE("IQ4_NL: value = d * level[index]; low nibbles first, then high nibbles") {
  smol::BlockIQ4NL block{};
  block.d = kHalfQuarter;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[j] == 0.25f * static_cast<float>(kIq4Levels[j]));
    CHECK(out[j + 16] == 0.25f * static_cast<float>(kIq4Levels[15 - j]));
  }
}

TEST_CASE("IQ4_NL quantizer: the nearest level, the searched scale, and edge cases") {
  // Values already on the grid with d = 0.5 and every level used twice: the search
  // finds d = 0.5 exactly (the least-squares scale of an exact fit) and every index.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>(kIq4Levels[(5 * j) % 16]);
  smol::BlockIQ4NL block;
  smol::quantize_block(x, block);
  CHECK(block.d == kHalfHalf);
  for (int j = 0; j < 32; ++j) CHECK(smol::iq4_index(block.qs, j) == (5 * j) % 16);
  // Negated values: the scale takes the sign, the indices stay.
  for (float& v : x) v = -v;
  smol::quantize_block(x, block);
  CHECK(smol::f16_to_f32(block.d) == -0.5f);
  for (int j = 0; j < 32; ++j) CHECK(smol::iq4_index(block.qs, j) == (5 * j) % 16);
  // The nearest level: midpoints go up, as in ggml (2x against the sum of neighbours).
  CHECK(smol::detail::iq4_nearest_index(-200.0f) == 0);
  CHECK(smol::detail::iq4_nearest_index(-115.5f) == 1);
  CHECK(smol::detail::iq4_nearest_index(-115.6f) == 0);
  CHECK(smol::detail::iq4_nearest_index(-4.5f) == 8);
  CHECK(smol::detail::iq4_nearest_index(-4.51f) == 7);
  CHECK(smol::detail::iq4_nearest_index(101.0f) == 15);
  CHECK(smol::detail::iq4_nearest_index(1e9f) == 15);
  // An all-zero block: d = 0 and every index the one nearest 0 (level 1), as ggml.
  float zeros[32] = {};
  smol::quantize_block(zeros, block);
  CHECK(block.d == 0);
  for (int j = 0; j < 32; ++j) CHECK(smol::iq4_index(block.qs, j) == 8);
}

TEST_CASE("IQ4_XS: value = d * (s - 32) * level; 6-bit scales split over scales_l/scales_h") {
  // Stored scales 0, 1, 31, 32, 33, 47, 62, 63: low nibbles in scales_l (even sub-blocks
  // low, odd high), the top two bits in scales_h, two bits per sub-block.
  constexpr int kStored[8] = {0, 1, 31, 32, 33, 47, 62, 63};
  smol::BlockIQ4XS block{};
  block.d = kHalfHalf;
  for (int j = 0; j < 8; ++j) {
    block.scales_l[j / 2] =
        static_cast<std::uint8_t>(block.scales_l[j / 2] | ((kStored[j] & 0xF) << (4 * (j % 2))));
    block.scales_h = static_cast<std::uint16_t>(block.scales_h | ((kStored[j] >> 4) << (2 * j)));
  }
  CHECK(block.scales_l[0] == 0x10);
  CHECK(block.scales_h == 0xFA90);  // high bits 0, 0, 1, 2, 2, 2, 3, 3
  for (int j = 0; j < 128; ++j)
    block.qs[j] = static_cast<std::uint8_t>((j % 16) | (15 - j % 16) << 4);
  const auto out = dequantize(block);
  for (int j = 0; j < 8; ++j) {
    CAPTURE(j);
    CHECK(smol::iq4xs_scale(block, j) == kStored[j] - 32);
    const float dl = 0.5f * static_cast<float>(kStored[j] - 32);
    for (int l = 0; l < 16; ++l) {
      CHECK(out[32 * j + l] == dl * static_cast<float>(kIq4Levels[l]));
      CHECK(out[32 * j + 16 + l] == dl * static_cast<float>(kIq4Levels[15 - l]));
    }
  }
}

TEST_CASE("IQ4_XS quantizer: sub-block scales on d's grid, indices against d * s") {
  // Sub-block j on the grid with scale (j - 4) * 0.25 (sub-block 4 all zero): the largest
  // magnitude scale, -1, gives d = 1/32 and s_j - 32 = 8 * (j - 4); every index is found.
  std::vector<float> x(256);
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      x[32 * j + l] =
          0.25f * static_cast<float>(j - 4) * static_cast<float>(kIq4Levels[(3 * l + j) % 16]);
    }
  }
  smol::BlockIQ4XS block;
  smol::quantize_block(x.data(), block);
  CHECK(smol::f16_to_f32(block.d) == 1.0f / 32);
  for (int j = 0; j < 8; ++j) {
    CAPTURE(j);
    CHECK(smol::iq4xs_scale(block, j) == 8 * (j - 4));
    if (j == 4) continue;  // scale 0: every index the one nearest 0
    for (int l = 0; l < 32; ++l) CHECK(smol::iq4_index(block.qs + 16 * j, l) == (3 * l + j) % 16);
  }
  const auto restored = dequantize(block);
  for (int i = 0; i < 256; ++i) CHECK(restored[i] == x[i]);
}

TEST_CASE("Q8_0: value = d * q") {
  smol::BlockQ8_0 block{};
  block.d = kHalfQuarter;
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<std::int8_t>(j == 0 ? -128 : 127 - 8 * j);
  const auto out = dequantize(block);
  CHECK(out[0] == -32.0f);
  for (int j = 1; j < 32; ++j) CHECK(out[j] == 0.25f * static_cast<float>(127 - 8 * j));
}

TEST_CASE("Q4_K: scale packing of sub-blocks 0-7 and nibble order") {
  std::uint8_t scales[8];
  std::uint8_t mins[8];
  smol::unpack_q4k_scales(kPackedScales, scales, mins);
  for (int j = 0; j < 8; ++j) {
    CHECK(scales[j] == kScales[j]);
    CHECK(mins[j] == kMins[j]);
  }
  std::uint8_t packed[12];
  smol::pack_q4k_scales(kScales, kMins, packed);
  CHECK(std::memcmp(packed, kPackedScales, 12) == 0);

  smol::BlockQ4K block{};
  block.d = kHalfOne;
  block.dmin = kHalfHalf;
  std::memcpy(block.scales, kPackedScales, 12);
  // Chunk c holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      block.qs[32 * c + l] =
          static_cast<std::uint8_t>(q4k_level(2 * c, l) | q4k_level(2 * c + 1, l) << 4);
    }
  }
  const auto out = dequantize(block);
  for (int sub = 0; sub < 8; ++sub) {
    for (int l = 0; l < 32; ++l) {
      const float expected = static_cast<float>(kScales[sub] * q4k_level(sub, l)) -
                             0.5f * static_cast<float>(kMins[sub]);
      CHECK(out[32 * sub + l] == expected);
    }
  }
}

TEST_CASE("Q4_K: d = 1, dmin = 0 gives scale * q exactly") {
  smol::BlockQ4K block{};
  block.d = kHalfOne;
  block.dmin = 0;
  std::memcpy(block.scales, kPackedScales, 12);
  std::memset(block.qs, 0xFF, sizeof(block.qs));
  const auto out = dequantize(block);
  for (int sub = 0; sub < 8; ++sub) {
    for (int l = 0; l < 32; ++l) CHECK(out[32 * sub + l] == static_cast<float>(kScales[sub] * 15));
  }
}

TEST_CASE("Q5_K: qh bit 2c lifts value l of sub-block 2c by 16, bit 2c+1 sub-block 2c+1") {
  smol::BlockQ5K block{};
  block.d = kHalfOne;
  block.dmin = kHalfOne;
  std::memcpy(block.scales, kPackedScales, 12);
  for (int l = 0; l < 32; ++l) {
    block.qh[l] = static_cast<std::uint8_t>(1u << (l % 8));
    block.qs[32 * (l % 4) + l] = 0x21;  // low nibble 1, high nibble 2
  }
  const auto out = dequantize(block);
  for (int sub = 0; sub < 8; ++sub) {
    for (int l = 0; l < 32; ++l) {
      const bool in_this_chunk = l % 4 == sub / 2;
      int q = in_this_chunk ? (sub % 2 == 0 ? 1 : 2) : 0;
      if (l % 8 == sub) q += 16;
      const float expected = static_cast<float>(kScales[sub] * q) - static_cast<float>(kMins[sub]);
      CHECK(out[32 * sub + l] == expected);
    }
  }
}

// Sixteen Q3_K scale codes (scale + 32) reaching both ends and every high-bit pair.
constexpr std::uint8_t kQ3Codes[16] = {0, 63, 32, 31, 17, 48, 5, 60, 33, 1, 47, 16, 62, 2, 40, 23};

TEST_CASE("Q3_K: scale packing, 2-bit runs of 32, hmask bit i / 32 of byte i % 32") {
  // Packed by ggml's description: byte j < 8 holds code j's low nibble and code j + 8's
  // in its high nibble; byte 8 + k holds the top two bits of codes k, k + 4, k + 8,
  // k + 12 at bits 0, 2, 4, 6.
  std::uint8_t packed[12] = {};
  for (int j = 0; j < 8; ++j) {
    packed[j] = static_cast<std::uint8_t>((kQ3Codes[j] & 0xF) | (kQ3Codes[j + 8] & 0xF) << 4);
  }
  for (int k = 0; k < 4; ++k) {
    for (int t = 0; t < 4; ++t) {
      packed[8 + k] =
          static_cast<std::uint8_t>(packed[8 + k] | (kQ3Codes[k + 4 * t] >> 4) << 2 * t);
    }
  }
  std::int8_t scales[16];
  smol::unpack_q3k_scales(packed, scales);
  for (int j = 0; j < 16; ++j) CHECK(scales[j] == kQ3Codes[j] - 32);
  std::uint8_t repacked[12];
  smol::pack_q3k_scales(kQ3Codes, repacked);
  CHECK(std::memcmp(repacked, packed, 12) == 0);

  smol::BlockQ3K block{};
  block.d = kHalfHalf;
  std::memcpy(block.scales, packed, 12);
  for (int k = 0; k < 64; ++k) block.qs[k] = static_cast<std::uint8_t>(37 * k + 11);
  for (int k = 0; k < 32; ++k) block.hmask[k] = static_cast<std::uint8_t>(53 * k + 7);
  const auto out = dequantize(block);
  // ggml's loop: two halves of 128 values; in each, four shifts of the same 32 bytes,
  // the hmask bit moving on with the shift.
  int i = 0;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l, ++i) {
        const int low2 = (block.qs[32 * half + l] >> (2 * shift)) & 3;
        const bool high = (block.hmask[l] >> (4 * half + shift)) & 1;
        const int q = low2 - (high ? 0 : 4);
        const float expected = 0.5f * static_cast<float>((kQ3Codes[i / 16] - 32) * q);
        CHECK(out[i] == expected);
        CHECK(smol::q3k_quant(block, i) == q);
      }
    }
  }
}

TEST_CASE("Q3_K quantizer: values on a grid come back exactly, with the levels' bits in place") {
  // Sub-block j holds k_j * u * (l % 8 - 4) with u = 1/64 and k_j up to 32: the largest
  // scale becomes code 0 (scale -32) under d = -u, and every level is exact.
  constexpr int kMultiples[16] = {32, 1, 7, 16, 31, 2, 3, 9, 12, 20, 5, 27, 8, 4, 11, 30};
  float x[256];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) {
      x[16 * j + l] = static_cast<float>(kMultiples[j] * (l % 8 - 4)) / 64.0f;
    }
  }
  smol::BlockQ3K block;
  smol::quantize_block(x, block);
  CHECK(smol::f16_to_f32(block.d) == -1.0f / 64.0f);
  std::int8_t scales[16];
  smol::unpack_q3k_scales(block.scales, scales);
  for (int j = 0; j < 16; ++j) CHECK(scales[j] == -kMultiples[j]);
  const auto out = dequantize(block);
  for (int i = 0; i < 256; ++i) {
    CHECK(out[i] == x[i]);
    // Level q = l % 8 - 4 (d and the scales both negative), so the hmask bit (q >= 0)
    // is set for l % 8 >= 4.
    CHECK(smol::q3k_quant(block, i) == (i % 16) % 8 - 4);
    CHECK(((block.hmask[i % 32] >> (i / 32)) & 1) == ((i % 16) % 8 >= 4 ? 1 : 0));
  }
}

TEST_CASE("Q2_K: scale low nibble, min high nibble, 2-bit runs of 32 per 32 bytes") {
  smol::BlockQ2K block{};
  block.d = kHalfHalf;
  block.dmin = kHalfQuarter;
  // Scales and mins of every sub-block differ, and reach 0 and 15.
  for (int j = 0; j < 16; ++j) block.scales[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  for (int k = 0; k < 64; ++k) block.qs[k] = static_cast<std::uint8_t>(37 * k + 11);
  const auto out = dequantize(block);
  // ggml's loop: two halves of 128 values, four shifts of the same 32 bytes in each.
  int i = 0;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l, ++i) {
        const int q = (block.qs[32 * half + l] >> (2 * shift)) & 3;
        const int j = i / 16;
        const float expected =
            0.5f * static_cast<float>(j * q) - 0.25f * static_cast<float>(15 - j);
        CHECK(out[i] == expected);
        CHECK(smol::q2k_quant(block, i) == q);
      }
    }
  }
}

TEST_CASE("Q2_K quantizer: values on a grid come back exactly") {
  // Sub-block j holds s_j * u * L - m_j * v for L = l % 4 (every level present) with
  // u = 1/32, v = 1/64, s_j and m_j in 1..15 and both 15 somewhere: the codes are s_j and
  // m_j under d = u and dmin = v, and every level is exact.
  constexpr int kScales2[16] = {15, 1, 7, 3, 12, 2, 9, 14, 4, 6, 11, 5, 8, 13, 10, 1};
  constexpr int kMins2[16] = {1, 15, 3, 8, 2, 11, 6, 4, 13, 9, 7, 14, 5, 10, 12, 2};
  float x[256];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) {
      x[16 * j + l] =
          static_cast<float>(kScales2[j] * (l % 4)) / 32.0f - static_cast<float>(kMins2[j]) / 64.0f;
    }
  }
  smol::BlockQ2K block;
  smol::quantize_block(x, block);
  CHECK(smol::f16_to_f32(block.d) == 1.0f / 32.0f);
  CHECK(smol::f16_to_f32(block.dmin) == 1.0f / 64.0f);
  for (int j = 0; j < 16; ++j) {
    CHECK((block.scales[j] & 0xF) == kScales2[j]);
    CHECK((block.scales[j] >> 4) == kMins2[j]);
  }
  const auto out = dequantize(block);
  for (int i = 0; i < 256; ++i) {
    CHECK(out[i] == x[i]);
    CHECK(smol::q2k_quant(block, i) == (i % 16) % 4);
  }
}

TEST_CASE("Q6_K: ql/qh interleaving, one bit field at a time") {
  // With every group scale 1 and d = 1, an all-zero block is -32 everywhere and a
  // bit field that is set shows up at exactly one value.
  smol::BlockQ6K zero{};
  zero.d = kHalfOne;
  for (auto& s : zero.scales) s = 1;

  struct Case {
    const char* field;
    std::size_t byte;
    std::uint8_t bits;
    std::size_t value;
    int q;
  };
  const Case cases[] = {
      {"ql", 0, 0x0F, 0, 15},     {"ql", 0, 0xF0, 64, 15},   {"ql", 32, 0x0F, 32, 15},
      {"ql", 32, 0xF0, 96, 15},   {"ql", 5, 0x01, 5, 1},     {"ql", 64, 0x0F, 128, 15},
      {"ql", 127, 0xF0, 255, 15}, {"qh", 0, 0x03, 0, 48},    {"qh", 0, 0x0C, 32, 48},
      {"qh", 0, 0x30, 64, 48},    {"qh", 0, 0xC0, 96, 48},   {"qh", 31, 0x80, 127, 32},
      {"qh", 32, 0x01, 128, 16},  {"qh", 63, 0x40, 255, 16},
  };
  for (const auto& c : cases) {
    CAPTURE(c.field);
    CAPTURE(c.byte);
    CAPTURE(c.bits);
    smol::BlockQ6K block = zero;
    (std::string(c.field) == "ql" ? block.ql : block.qh)[c.byte] = c.bits;
    const auto out = dequantize(block);
    for (std::size_t i = 0; i < smol::QK_K; ++i) {
      CAPTURE(i);
      CHECK(out[i] == static_cast<float>(i == c.value ? c.q - 32 : -32));
    }
  }
}

TEST_CASE("Q6_K: value = d * scale[i / 16] * (q - 32) with signed scales") {
  smol::BlockQ6K block{};
  block.d = kHalfQuarter;
  for (int g = 0; g < 16; ++g)
    block.scales[g] = static_cast<std::int8_t>(g % 2 ? -8 * g : 8 * g - 128);
  std::array<int, smol::QK_K> q{};
  for (int i = 0; i < 256; ++i) q[i] = (7 * i + i / 64) % 64;
  // Hand interleave: in half h, ql[64h + l] = q[l] | q[l + 64] << 4,
  // ql[64h + 32 + l] = q[l + 32] | q[l + 96] << 4, qh[32h + l] = the top bits of
  // q[l], q[l + 32], q[l + 64], q[l + 96] in bit pairs 0, 2, 4, 6.
  for (int h = 0; h < 2; ++h) {
    const int* r = q.data() + 128 * h;
    for (int l = 0; l < 32; ++l) {
      block.ql[64 * h + l] = static_cast<std::uint8_t>((r[l] & 15) | (r[l + 64] & 15) << 4);
      block.ql[64 * h + 32 + l] =
          static_cast<std::uint8_t>((r[l + 32] & 15) | (r[l + 96] & 15) << 4);
      block.qh[32 * h + l] = static_cast<std::uint8_t>(
          r[l] >> 4 | (r[l + 32] >> 4) << 2 | (r[l + 64] >> 4) << 4 | (r[l + 96] >> 4) << 6);
    }
  }
  const auto out = dequantize(block);
  for (int i = 0; i < 256; ++i) {
    CAPTURE(i);
    CHECK(out[i] ==
          0.25f * static_cast<float>(block.scales[i / 16]) * static_cast<float>(q[i] - 32));
  }

  smol::BlockQ6K repacked{};
  std::array<std::uint8_t, smol::QK_K> levels{};
  for (int i = 0; i < 256; ++i) levels[i] = static_cast<std::uint8_t>(q[i]);
  smol::pack_q6k_levels(levels.data(), repacked);
  CHECK(std::memcmp(repacked.ql, block.ql, sizeof(block.ql)) == 0);
  CHECK(std::memcmp(repacked.qh, block.qh, sizeof(block.qh)) == 0);
}

TEST_CASE("F32, F16 and BF16 rows") {
  const std::uint16_t halves[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x3555};
  const float half_values[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, -0.0f, 0x1.554p-2f};
  std::vector<float> out(6);
  smol::dequantize_row(smol::GgmlType::F16, reinterpret_cast<const std::byte*>(halves), out.data(),
                       6);
  for (int i = 0; i < 6; ++i)
    CHECK(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(half_values[i]));

  const std::uint16_t brains[] = {0x3F80, 0xC040, 0x0000, 0x4049};
  const float brain_values[] = {1.0f, -3.0f, 0.0f, 3.140625f};
  smol::dequantize_row(smol::GgmlType::BF16, reinterpret_cast<const std::byte*>(brains), out.data(),
                       4);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == brain_values[i]);

  const float floats[] = {1.5f, -0.0f, 3e38f};
  smol::dequantize_row(smol::GgmlType::F32, reinterpret_cast<const std::byte*>(floats), out.data(),
                       3);
  for (int i = 0; i < 3; ++i)
    CHECK(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(floats[i]));
}

TEST_CASE("Rows of several blocks may start at any byte offset") {
  // Two Q6_K blocks at an odd offset, as a row inside an mmap'd file could be.
  std::vector<std::byte> bytes(1 + 2 * sizeof(smol::BlockQ6K));
  smol::BlockQ6K blocks[2]{};
  blocks[0].d = kHalfOne;
  blocks[1].d = kHalfHalf;
  for (auto& b : blocks)
    for (auto& s : b.scales) s = 2;
  std::memcpy(bytes.data() + 1, blocks, sizeof(blocks));
  std::vector<float> out(512);
  smol::dequantize_row(smol::GgmlType::Q6_K, bytes.data() + 1, out.data(), 512);
  CHECK(out[0] == -64.0f);
  CHECK(out[511] == -32.0f);
}

TEST_CASE("dequantize_row rejects unsupported types and partial blocks") {
  std::vector<std::byte> bytes(1024);
  std::vector<float> out(512);
  CHECK_THROWS_WITH_AS(smol::dequantize_row(smol::GgmlType::IQ2_XXS, bytes.data(), out.data(), 256),
                       doctest::Contains("IQ2_XXS"), smol::Error);
  CHECK_THROWS_WITH_AS(smol::dequantize_row(smol::GgmlType::Q4_K, bytes.data(), out.data(), 100),
                       doctest::Contains("Q4_K"), smol::Error);
  CHECK_THROWS_AS(
      smol::dequantize_row(static_cast<smol::GgmlType>(77), bytes.data(), out.data(), 1),
      smol::Error);
  CHECK_THROWS_WITH_AS(smol::quantize_row(smol::GgmlType::IQ2_XXS, out.data(), bytes.data(), 256),
                       doctest::Contains("IQ2_XXS"), smol::Error);
  CHECK(smol::is_weight_type(smol::GgmlType::Q2_K));
  CHECK(smol::is_weight_type(smol::GgmlType::Q3_K));
  CHECK(smol::is_weight_type(smol::GgmlType::Q5_K));
  for (auto type :
       {smol::GgmlType::Q4_1, smol::GgmlType::Q5_0, smol::GgmlType::Q5_1, smol::GgmlType::IQ4_NL}) {
    CHECK(smol::is_weight_type(type));
  }
  CHECK_FALSE(smol::is_weight_type(smol::GgmlType::IQ2_XXS));
}

TEST_CASE("f16 scales: the written-out conversions are the hardware's, bit for bit") {
  // Every half, and for each the floats around it and around the midpoint to the next
  // (the ties, rounded to even), then random bit patterns: every class of input
  // (zeros, subnormals, normals, overflow, infinities, NaNs of either sign).
  REQUIRE(has_hardware_half());
  const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  const auto check = [&](std::uint32_t pattern) {
    const float value = std::bit_cast<float>(pattern);
    CAPTURE(pattern);
    REQUIRE(smol::f32_to_f16(value) == hardware_f32_to_f16(value));
  };
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto half = static_cast<smol::f16_bits>(h);
    CAPTURE(h);
    REQUIRE(bits(smol::f16_to_f32(half)) == bits(hardware_f16_to_f32(half)));
    const std::uint32_t at = bits(smol::f16_to_f32(half));
    for (std::uint32_t d = 0; d <= 2; ++d) {
      check(at + d);
      check(at - d);
    }
    if ((h & 0x7C00) != 0x7C00 && (h & 0x7FFF) != 0x7BFF) {  // a finite next half
      const float next = smol::f16_to_f32(static_cast<smol::f16_bits>(h + 1));
      const std::uint32_t mid = bits(static_cast<float>(
          (static_cast<double>(smol::f16_to_f32(half)) + static_cast<double>(next)) / 2));
      for (std::uint32_t d = 0; d <= 1; ++d) {
        check(mid + d);
        check(mid - d);
      }
    }
  }
  std::mt19937 rng(16);
  for (int i = 0; i < 1 << 20; ++i) check(rng());
  // A NaN keeps its sign (the conversion before this test's did not).
  CHECK(smol::f32_to_f16(std::bit_cast<float>(0x7FC00000u)) == 0x7E00);
  CHECK(smol::f32_to_f16(std::bit_cast<float>(0xFFC00000u)) == 0xFE00);
}

TEST_CASE("MXFP4: ggml's layout, E8M0 half scales, dequantizer and quantizer") {
  CHECK(smol::ggml_type_info(smol::GgmlType::MXFP4).block_bytes == 17);
  CHECK(smol::ggml_type_name(smol::GgmlType::MXFP4) == "MXFP4");
  // Half of 2^(e - 127): the subnormals 2^-128 and 2^-127 for e = 0 and 1.
  CHECK(smol::e8m0_half(127) == 0.5f);
  CHECK(smol::e8m0_half(128) == 1.0f);
  CHECK(smol::e8m0_half(254) == std::ldexp(1.0f, 126));
  CHECK(smol::e8m0_half(1) == std::ldexp(1.0f, -127));
  CHECK(smol::e8m0_half(0) == std::ldexp(1.0f, -128));

  // Codes 0..15 in the low nibbles, 15..0 in the high ones, at e = 128 (half scale 1):
  // the doubled E2M1 values 0, 1, 2, 3, 4, 6, 8, 12 and their negatives.
  smol::BlockMXFP4 block{};
  block.e = 128;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  float values[32];
  smol::dequantize_block(block, values);
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int j = 0; j < 16; ++j) {
    CAPTURE(j);
    const float expected = (j < 8 ? 2 : -2) * e2m1[j % 8];
    CHECK(values[j] == expected);
    CHECK(values[16 + j] == (15 - j < 8 ? 2 : -2) * e2m1[(15 - j) % 8]);
  }

  // ggml's quantizer on the grid (j - 16) / 4: amax 4 puts e at floor(log2 4) - 2 + 127 =
  // 127 (half scale 0.5); each value takes the nearest code, the lower code on a tie (2.5
  // between 2 and 3 is code 4, value 2; -0.25 between 0 and -0.5 is code 0). Worked by
  // hand from ggml's quantize_row_mxfp4_ref and best_index_mxfp4.
  float grid[32];
  for (int j = 0; j < 32; ++j) grid[j] = static_cast<float>(j - 16) * 0.25f;
  smol::BlockMXFP4 quantized{};
  smol::quantize_block(grid, quantized);
  CHECK(quantized.e == 127);
  const std::uint8_t expected_qs[16] = {0x0E, 0x0E, 0x1D, 0x1D, 0x2D, 0x2D, 0x3C, 0x3C,
                                        0x4C, 0x4B, 0x4B, 0x5A, 0x5A, 0x59, 0x59, 0x60};
  for (int j = 0; j < 16; ++j) {
    CAPTURE(j);
    CHECK(quantized.qs[j] == expected_qs[j]);
  }
  // Zeros: e = 0 and code 0 everywhere; a block of subnormals wraps its exponent
  // byte as ggml's float-to-uint8_t cast does on x86 (floor(log2 1e-40) = -133: 248).
  const float zeros[32] = {};
  smol::quantize_block(zeros, quantized);
  CHECK(quantized.e == 0);
  CHECK(std::all_of(std::begin(quantized.qs), std::end(quantized.qs),
                    [](std::uint8_t q) { return q == 0; }));
  float tiny[32];
  std::fill(std::begin(tiny), std::end(tiny), 1e-40f);
  smol::quantize_block(tiny, quantized);
  CHECK(quantized.e == 248);

  // Random blocks through the row API: the largest magnitude in [8 d, 16 d) (d the half
  // scale: [4, 8) times the scale), and every value within half a step of the grid
  // 0, d, .., 4 d, 6 d, 8 d, 12 d (beyond 12 d, clamped: within 4 d).
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(256), back(256);
  for (float& v : row) v = normal(rng);
  std::vector<std::byte> encoded(smol::ggml_row_bytes(smol::GgmlType::MXFP4, 256));
  smol::quantize_row(smol::GgmlType::MXFP4, row.data(), encoded.data(), 256);
  smol::dequantize_row(smol::GgmlType::MXFP4, encoded.data(), back.data(), 256);
  for (std::size_t b = 0; b < 8; ++b) {
    smol::BlockMXFP4 one;
    std::memcpy(&one, encoded.data() + 17 * b, 17);
    const float d = smol::e8m0_half(one.e);
    float amax = 0;
    for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(row[32 * b + j]));
    CHECK(amax >= 8 * d);
    CHECK(amax < 16 * d);
    for (std::size_t j = 0; j < 32; ++j) {
      const float x = std::fabs(row[32 * b + j]);
      const float bound = x <= 4 * d ? d / 2 : x <= 8 * d ? d : x <= 12 * d ? 2 * d : 4 * d;
      CHECK(std::fabs(back[32 * b + j] - row[32 * b + j]) <= bound * 1.0001f);
    }
  }
}

}  // namespace test_quant_blocks
