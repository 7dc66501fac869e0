// The block attention kernel of every ISA against the scalar reference: head sizes
// 64, 128 and one that is not a multiple of a vector, groups of 1 to 5 query heads,
// position counts that end inside a key tile, every pair of key and value cache types
// (f32, f16, bf16, q8_0, q4_0), and key slots past the visible positions holding NaN
// (they must not leak into the result).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "smol/ops/attention.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/simd/attention_kernels.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/kernels_impl.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_simd_attention {

namespace {

// Largest |simd - reference| relative to the largest reference magnitude of each part.
double max_error(const smol::Kernels& kernels, smol::KvTypes types, std::size_t group,
                 std::size_t dim, std::size_t count) {
  std::mt19937 rng(static_cast<unsigned>(group * 1000 + dim * 7 + count));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t padded = smol::simd::score_stride(count);
  std::vector<std::byte> keys(padded * smol::kv_row_bytes(types.key, dim));
  std::vector<std::byte> values(count * smol::kv_row_bytes(types.value, dim));
  // Key slots past the visible positions hold NaN: they must not leak into the result.
  // Float keys share a tile with visible keys; quantized keys are rows, whose blocks'
  // scale d is set to an f16 NaN (NaN has no Q8_0 form), so a kernel that reads a row
  // past `count` (a 16-row step, a pair of blocks) is caught.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool quantized_keys = smol::kv_is_quantized(types.key);
  const std::size_t key_row = smol::kv_row_bytes(types.key, dim);
  const std::size_t key_block = key_row / (dim / 32);
  std::vector<float> row(dim);
  for (std::size_t p = 0; p < padded; ++p) {
    for (float& x : row) x = p < count || quantized_keys ? normal(rng) : nan;
    smol::store_key(types.key, row.data(), keys.data(), p, dim);
    for (std::size_t b = 0; quantized_keys && p >= count && b < dim / 32; ++b) {
      const std::uint16_t f16_nan = 0x7E00;  // d is each block's first field
      std::memcpy(keys.data() + p * key_row + b * key_block, &f16_nan, sizeof f16_nan);
    }
  }
  for (std::size_t p = 0; p < count; ++p) {
    for (float& x : row) x = normal(rng);
    smol::store_value(types.value, row.data(), values.data(), p, dim);
  }
  std::vector<float> q(group * dim);
  for (float& x : q) x = 3.0f * normal(rng);  // scores spanning tens of units

  const std::size_t out_size = group * (dim + 2);
  std::vector<float> scores(group * padded), out(out_size), expected(out_size);
  smol::AttendBlock args{.queries = q.data(),
                         .group = group,
                         .head_dim = dim,
                         .types = types,
                         .keys = keys.data(),
                         .values = values.data(),
                         .count = count,
                         .scale = 1.0f / std::sqrt(static_cast<float>(dim)),
                         .scores = scores.data(),
                         .out = expected.data()};
  smol::simd::attend_block_reference(args);
  args.out = out.data();
  kernels.attend_block(args);
  if (smol::kv_is_quantized(types.key)) {
    // Queries the caller quantized once (as ops/attention.hpp does) give the same bits.
    std::vector<smol::BlockQ8_0> query_blocks(group * dim / 32);
    smol::simd::quantize_queries_for(types.key, q.data(), group, dim, query_blocks.data());
    std::vector<float> again(out_size);
    args.out = again.data();
    args.query_blocks = query_blocks.data();
    kernels.attend_block(args);
    CHECK(std::memcmp(again.data(), out.data(), out_size * sizeof(float)) == 0);
  }

  double worst = 0;
  bool finite = true;
  for (std::size_t j = 0; j < group; ++j) {
    // The max is exact up to the dot's summation order; the sum and weighted values
    // are scaled by the max's exp, so compare them relative to their own size.
    worst = std::max(worst, std::abs(double{out[j]} - expected[j]) / (1.0 + std::abs(expected[j])));
    worst = std::max(worst, std::abs(double{out[group + j]} - expected[group + j]) /
                                std::abs(double{expected[group + j]}));
    double magnitude = 0;
    for (std::size_t d = 0; d < dim; ++d) {
      magnitude = std::max(magnitude, std::abs(double{expected[2 * group + j * dim + d]}));
    }
    for (std::size_t d = 0; d < dim; ++d) {
      const std::size_t i = 2 * group + j * dim + d;
      finite = finite && std::isfinite(out[i]);
      worst = std::max(worst, std::abs(double{out[i]} - expected[i]) / magnitude);
    }
  }
  // One check per call, not per value: 25 type pairs make millions of values, and
  // doctest's per-assertion cost dominated the suite under the sanitizers.
  CHECK(finite);
  return worst;
}

}  // namespace

TEST_CASE("block attention kernels match the scalar reference on every ISA, every K/V type") {
  for (const smol::Isa isa : smol::available_isas()) {
    const smol::Kernels& kernels = smol::kernels_for_isa(isa);
    CAPTURE(smol::isa_name(isa));
    for (const smol::KvType key : smol::kAllKvTypes) {
      for (const smol::KvType value : smol::kAllKvTypes) {
        CAPTURE(smol::kv_type_name(key));
        CAPTURE(smol::kv_type_name(value));
        const bool quantized = smol::kv_is_quantized(key) || smol::kv_is_quantized(value);
        // The float-only pairs on every head size; the quantized ones on those that are
        // whole blocks of 32 (a size that is not is refused when the cache is made), an
        // odd count of blocks (96) among them: AVX-512 without VNNI scores keys two blocks
        // at a time, else one. With VNNI, 16 rows per step: the counts below take the
        // steps alone (16, 256), steps and a tail (17, 33, 100), the tail alone (1, 15),
        // whose rows go through the two- or one-block row kernels.
        const std::vector<std::size_t> dims = quantized ? std::vector<std::size_t>{64, 128, 96}
                                                        : std::vector<std::size_t>{64, 128, 80};
        for (const std::size_t dim : dims) {
          for (const std::size_t group : {1, 2, 3, 4, 5}) {
            for (const std::size_t count : {1, 15, 16, 17, 33, 100, 256}) {
              CAPTURE(dim);
              CAPTURE(group);
              CAPTURE(count);
              // The vector sets sum the same products in another order.
              CHECK(max_error(kernels, {key, value}, group, dim, count) < 1e-5);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the tiled key layout places each tile row contiguously") {
  CHECK(smol::key_offset(0, 0, 128) == 0);
  CHECK(smol::key_offset(1, 0, 128) == 1);
  CHECK(smol::key_offset(0, 1, 128) == smol::kKeyTile);
  CHECK(smol::key_offset(smol::kKeyTile, 0, 128) == smol::kKeyTile * 128);
  CHECK(smol::key_offset(smol::kKeyTile + 3, 5, 64) ==
        smol::kKeyTile * 64 + 5 * smol::kKeyTile + 3);
}

}  // namespace test_simd_attention
