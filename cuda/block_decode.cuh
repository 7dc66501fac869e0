// Decoding of ggml weight rows, one group of values at a time, for the GPU kernels
// and (the same functions) on the host.
//
// A *group* is the run of values that shares one scale: a Q4_K sub-block (32), a Q6_K
// group (16), a whole Q8_0/Q4_0 block (32), or 32 plain F32/F16/BF16 values. A kernel
// lane decodes one group at a time into registers, so every scale is read once per
// group and no lane ever needs its neighbours' data. The decoded floats are bit for
// bit those of smol::dequantize_row (quant/dequantize.hpp): same integer unpacking,
// same float expressions in the same order; the k-quant products are exact in f32, so
// a fused multiply-add cannot change them either. tests/cuda/test_cuda_host.cu
// checks this on the host, where these functions run unchanged.
//
// Loads are as wide as the block layout allows (see load()): the weights live in
// device buffers whose tensors start 256-byte aligned, so Q4_K quants can be read 16
// bytes at a time, while Q6_K (210-byte blocks) and Q8_0/Q4_0 (34/18) only allow
// 2-byte loads. On the host every load checks that alignment, so a host test proves
// the address arithmetic that the device relies on.
#pragma once

#include <cuda_fp16.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"

// Every helper here is compiled for both sides; inlined, since each is a few
// instructions inside a kernel's inner loop.
#define SMOL_HD __host__ __device__ __forceinline__

// `#pragma unroll` is for nvcc's device pass only: g++ would warn about it.
#ifdef __CUDA_ARCH__
#define SMOL_UNROLL _Pragma("unroll")
#else
#define SMOL_UNROLL
#endif

namespace smol::cuda::detail {

// The lanes of a warp, among which the matmul kernels share a weight row
// (lane_row_partials).
constexpr int kWarp = 32;

// A load of T at `p`, which the caller guarantees is aligned to alignof(T). The device
// issues one wide load; the host copies the bytes, and stops the program when the
// promise is broken, since the same address on a GPU would fault.
template <class T>
SMOL_HD T load(const void* p) {
#ifdef __CUDA_ARCH__
  return *static_cast<const T*>(p);
#else
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) {
    std::fprintf(stderr, "smol cuda: misaligned %zu-byte load at %p\n", sizeof(T), p);
    std::abort();
  }
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
#endif
}

SMOL_HD float half_to_float(std::uint16_t bits) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(bits));  // exact, subnormals included
#else
  return smol::f16_to_f32(bits);
#endif
}

// Round to nearest even, as smol::f32_to_f16 (the CPU KV cache) does.
SMOL_HD std::uint16_t float_to_half(float value) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(value));
#else
  return smol::f32_to_f16(value);
#endif
}

SMOL_HD float bf16_to_float(std::uint16_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
#else
  return smol::bf16_to_f32(bits);
#endif
}

// Byte k (little-endian) of a word.
SMOL_HD unsigned byte_of(std::uint32_t word, unsigned k) {
  return (word >> (8 * k)) & 0xFFu;
}

// ---- group formats --------------------------------------------------------------

template <GgmlType T>
struct GroupFormat;

template <>
struct GroupFormat<GgmlType::Q4_K> {
  static constexpr int values = 32;    // one sub-block
  static constexpr int per_block = 8;  // sub-blocks per 256-value super-block
  static constexpr int block_bytes = 144;
  static constexpr int row_alignment = 16;  // uint4 loads of the quants
};
template <>
struct GroupFormat<GgmlType::Q6_K> {
  static constexpr int values = 16;
  static constexpr int per_block = 16;
  static constexpr int block_bytes = 210;
  static constexpr int row_alignment = 2;
};
template <>
struct GroupFormat<GgmlType::Q8_0> {
  static constexpr int values = 32;
  static constexpr int per_block = 1;
  static constexpr int block_bytes = 34;
  static constexpr int row_alignment = 2;
};
template <>
struct GroupFormat<GgmlType::Q4_0> {
  static constexpr int values = 32;
  static constexpr int per_block = 1;
  static constexpr int block_bytes = 18;
  static constexpr int row_alignment = 2;
};
template <>
struct GroupFormat<GgmlType::F16> {
  static constexpr int values = 32;
  static constexpr int per_block = 1;
  static constexpr int block_bytes = 64;
  static constexpr int row_alignment = 16;
};
template <>
struct GroupFormat<GgmlType::BF16> {
  static constexpr int values = 32;
  static constexpr int per_block = 1;
  static constexpr int block_bytes = 64;
  static constexpr int row_alignment = 16;
};
template <>
struct GroupFormat<GgmlType::F32> {
  static constexpr int values = 32;
  static constexpr int per_block = 1;
  static constexpr int block_bytes = 128;
  static constexpr int row_alignment = 16;
};

// ---- one group -> values[GroupFormat<T>::values] -------------------------------

// Sub-block j's d * scale and dmin * min, from a Q4_K super-block's header.
struct Q4kScales {
  float d_scale, d_min;
};
// Sub-blocks i and i + 4 (i < 4) from one reading of the header: the low one's 6-bit
// scale and min are bytes i of the first and second words; the high one's, nibbles of
// byte i of the third word topped by those bytes' two high bits.
struct Q4kScalePair {
  Q4kScales low, high;
};
SMOL_HD Q4kScalePair q4k_sub_block_scale_pair(const std::uint8_t* block, unsigned i) {
  const std::uint32_t d_dmin = load<std::uint32_t>(block);
  const float d = half_to_float(static_cast<std::uint16_t>(d_dmin & 0xFFFFu));
  const float dmin = half_to_float(static_cast<std::uint16_t>(d_dmin >> 16));
  const unsigned b0 = byte_of(load<std::uint32_t>(block + 4), i);
  const unsigned b1 = byte_of(load<std::uint32_t>(block + 8), i);
  const unsigned b2 = byte_of(load<std::uint32_t>(block + 12), i);
  const auto scaled = [](float by, unsigned six_bits) {
    return by * static_cast<float>(static_cast<std::uint8_t>(six_bits));
  };
  return {{scaled(d, b0 & 63u), scaled(dmin, b1 & 63u)},
          {scaled(d, (b2 & 0xFu) | ((b0 >> 6) << 4)), scaled(dmin, (b2 >> 4) | ((b1 >> 6) << 4))}};
}
// Sub-block j's alone.
SMOL_HD Q4kScales q4k_sub_block_scales(const std::uint8_t* block, unsigned j) {
  const Q4kScalePair pair = q4k_sub_block_scale_pair(block, j % 4);
  return j < 4 ? pair.low : pair.high;
}

// Q4_K: sub-block j of a super-block: d * scale[j] * q - dmin * min[j]. The 6-bit
// scale and min are unpacked as smol::unpack_q4k_scales does; sub-block j's quants are
// the low (even j) or high (odd j) nibbles of the 32 bytes qs[32 * (j / 2) ...].
SMOL_HD void decode_group_q4k(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* block = row + GroupFormat<GgmlType::Q4_K>::block_bytes * (group / 8);
  const unsigned j = static_cast<unsigned>(group % 8);
  const auto [d_scale, d_min] = q4k_sub_block_scales(block, j);

  const std::uint8_t* qs = block + 16 + 32 * (j / 2);
  const uint4 first = load<uint4>(qs);
  const uint4 second = load<uint4>(qs + 16);
  const std::uint32_t quants[8] = {first.x,  first.y,  first.z,  first.w,
                                   second.x, second.y, second.z, second.w};
  const unsigned shift = 4 * (j & 1u);
  SMOL_UNROLL
  for (int l = 0; l < 32; ++l) {
    const unsigned q = (byte_of(quants[l / 4], l % 4) >> shift) & 0xFu;
    out[l] = d_scale * static_cast<float>(q) - d_min;
  }
}

// Q4_K, a warp's lane's share of one super-block: values 4 lane .. 4 lane + 3 and 128 +
// 4 lane .. 128 + 4 lane + 3 (lane < kWarp = 32), out[0, 8): sub-blocks lane / 8 and
// lane / 8 + 4, whose scales one reading of the header gives. So a warp's lanes read the
// quants as two runs of 64 bytes and each token's activations as two runs of 512 bytes,
// one wide load a lane each, where a lane per whole sub-block strode 128 bytes apart (32
// cache lines a load instruction).
SMOL_HD void decode_lane_q4k(const std::uint8_t* block, unsigned lane, float (&out)[8]) {
  const Q4kScalePair scales = q4k_sub_block_scale_pair(block, lane / 8);
  SMOL_UNROLL
  for (unsigned h = 0; h < 2; ++h) {
    const unsigned j = 4 * h + lane / 8;  // the sub-block; value 4 (lane % 8) of it
    const auto [d_scale, d_min] = h == 0 ? scales.low : scales.high;
    const std::uint32_t quants = load<std::uint32_t>(block + 16 + 32 * (j / 2) + 4 * (lane % 8));
    const unsigned shift = 4 * (j & 1u);
    SMOL_UNROLL
    for (unsigned k = 0; k < 4; ++k) {
      const unsigned q = (byte_of(quants, k) >> shift) & 0xFu;
      out[4 * h + k] = d_scale * static_cast<float>(q) - d_min;
    }
  }
}

// Q6_K: group s (0-15) of a super-block: d * scales[s] * (q - 32). Group s = 8h + 2r + u
// covers values 128h + 32r + 16u + i (i < 16) of half h, run r: the low 4 bits come
// from ql[64h + 32(r & 1) + 16u + i] (low nibble for r < 2, high for r >= 2), the high
// 2 bits from qh[32h + 16u + i] >> 2r. See smol::dequantize_block(BlockQ6K).
SMOL_HD void decode_group_q6k(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* block = row + GroupFormat<GgmlType::Q6_K>::block_bytes * (group / 16);
  const unsigned s = static_cast<unsigned>(group % 16);
  const unsigned h = s / 8, r = (s % 8) / 2, u = s % 2;
  const float d = half_to_float(load<std::uint16_t>(block + 208));
  const auto scale = static_cast<std::int8_t>(block[192 + s]);
  const float d_scale = d * static_cast<float>(scale);
  const std::uint8_t* ql = block + 64 * h + 32 * (r & 1u) + 16 * u;
  const std::uint8_t* qh = block + 128 + 32 * h + 16 * u;
  const unsigned low_shift = r >= 2 ? 4 : 0;
  const unsigned high_shift = 2 * r;
  SMOL_UNROLL
  for (int i = 0; i < 16; i += 2) {
    const std::uint16_t low = load<std::uint16_t>(ql + i);
    const std::uint16_t high = load<std::uint16_t>(qh + i);
    SMOL_UNROLL
    for (int k = 0; k < 2; ++k) {
      const unsigned lq = ((low >> (8 * k)) >> low_shift) & 0xFu;
      const unsigned hq = ((high >> (8 * k)) >> high_shift) & 3u;
      const int q = static_cast<int>(lq | (hq << 4)) - 32;
      out[i + k] = d_scale * static_cast<float>(q);
    }
  }
}

// Q8_0: one 34-byte block, d * q.
SMOL_HD void decode_group_q8_0(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* block = row + GroupFormat<GgmlType::Q8_0>::block_bytes * group;
  const float d = half_to_float(load<std::uint16_t>(block));
  SMOL_UNROLL
  for (int i = 0; i < 32; i += 2) {
    const std::uint16_t pair = load<std::uint16_t>(block + 2 + i);
    out[i] = static_cast<float>(static_cast<std::int8_t>(pair & 0xFFu)) * d;
    out[i + 1] = static_cast<float>(static_cast<std::int8_t>(pair >> 8)) * d;
  }
}

// Q4_0: one 18-byte block, d * (q - 8); low nibbles are values 0-15, high 16-31.
SMOL_HD void decode_group_q4_0(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* block = row + GroupFormat<GgmlType::Q4_0>::block_bytes * group;
  const float d = half_to_float(load<std::uint16_t>(block));
  SMOL_UNROLL
  for (int i = 0; i < 16; i += 2) {
    const std::uint16_t pair = load<std::uint16_t>(block + 2 + i);
    SMOL_UNROLL
    for (int k = 0; k < 2; ++k) {
      const unsigned byte = (pair >> (8 * k)) & 0xFFu;
      out[i + k] = static_cast<float>(static_cast<int>(byte & 0xFu) - 8) * d;
      out[i + k + 16] = static_cast<float>(static_cast<int>(byte >> 4) - 8) * d;
    }
  }
}

template <bool kBrain>
SMOL_HD void decode_group_16bit(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* values = row + 64 * group;
  SMOL_UNROLL
  for (int v = 0; v < 4; ++v) {
    const uint4 chunk = load<uint4>(values + 16 * v);
    const std::uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
    SMOL_UNROLL
    for (int w = 0; w < 4; ++w) {
      SMOL_UNROLL
      for (int k = 0; k < 2; ++k) {
        const auto bits = static_cast<std::uint16_t>(words[w] >> (16 * k));
        out[8 * v + 2 * w + k] = kBrain ? bf16_to_float(bits) : half_to_float(bits);
      }
    }
  }
}

SMOL_HD void decode_group_f32(const std::uint8_t* row, std::size_t group, float* out) {
  const std::uint8_t* values = row + 128 * group;
  SMOL_UNROLL
  for (int v = 0; v < 8; ++v) {
    const float4 chunk = load<float4>(values + 16 * v);
    out[4 * v] = chunk.x;
    out[4 * v + 1] = chunk.y;
    out[4 * v + 2] = chunk.z;
    out[4 * v + 3] = chunk.w;
  }
}

// Group `group` of a row (groups count from the row's start) into out[values].
template <GgmlType T>
SMOL_HD void decode_group(const std::uint8_t* row, std::size_t group, float* out) {
  if constexpr (T == GgmlType::Q4_K) {
    decode_group_q4k(row, group, out);
  } else if constexpr (T == GgmlType::Q6_K) {
    decode_group_q6k(row, group, out);
  } else if constexpr (T == GgmlType::Q8_0) {
    decode_group_q8_0(row, group, out);
  } else if constexpr (T == GgmlType::Q4_0) {
    decode_group_q4_0(row, group, out);
  } else if constexpr (T == GgmlType::F16) {
    decode_group_16bit<false>(row, group, out);
  } else if constexpr (T == GgmlType::BF16) {
    decode_group_16bit<true>(row, group, out);
  } else {
    static_assert(T == GgmlType::F32, "no group decoder for this type");
    decode_group_f32(row, group, out);
  }
}

// ---- dots -----------------------------------------------------------------------

// sum_i w[i] * x[i] over one group, in order; x is 16-byte aligned (activation rows
// start on multiples of 32 floats).
template <int N>
SMOL_HD float dot_group(const float* w, const float* x) {
  static_assert(N % 4 == 0);
  float sum = 0.0f;
  SMOL_UNROLL
  for (int i = 0; i < N; i += 4) {
    const float4 v = load<float4>(x + i);
    sum += w[i] * v.x;
    sum += w[i + 1] * v.y;
    sum += w[i + 2] * v.z;
    sum += w[i + 3] * v.w;
  }
  return sum;
}

// One lane's share (lane < kWarp) of `n_tokens` (<= kTokens) dot products with one weight
// row: for Q4_K its eight values of every super-block (decode_lane_q4k); otherwise the
// groups lane, lane + kWarp, ... of the row, each decoded once and dotted with every
// token's activations (row t of x starts at x + t * cols). A warp sums its lanes' acc[t]
// to get y[t]; decoding once for kTokens tokens is what makes prefill cheaper per token
// than decode.
template <GgmlType T, int kTokens>
SMOL_HD void lane_row_partials(const std::uint8_t* row, std::size_t n_groups, unsigned lane,
                               const float* x, std::size_t cols, int n_tokens,
                               float (&acc)[kTokens]) {
  if constexpr (T == GgmlType::Q4_K) {  // the warp's lanes share each super-block
    static_assert(kWarp == 32, "decode_lane_q4k splits a super-block in 32 shares");
    constexpr std::size_t kBlockBytes = GroupFormat<T>::block_bytes;
    for (std::size_t b = 0; b < n_groups / 8; ++b) {
      float w[8];
      decode_lane_q4k(row + kBlockBytes * b, lane, w);
      SMOL_UNROLL
      for (int t = 0; t < kTokens; ++t) {
        if (t >= n_tokens) continue;
        const float* xt = x + static_cast<std::size_t>(t) * cols + 256 * b + 4 * lane;
        acc[t] += dot_group<4>(w, xt) + dot_group<4>(w + 4, xt + 128);
      }
    }
  } else {
    constexpr int N = GroupFormat<T>::values;
    for (std::size_t g = lane; g < n_groups; g += kWarp) {
      float w[N];
      decode_group<T>(row, g, w);
      SMOL_UNROLL
      for (int t = 0; t < kTokens; ++t) {
        if (t < n_tokens) {
          acc[t] += dot_group<N>(w, x + static_cast<std::size_t>(t) * cols + g * N);
        }
      }
    }
  }
}

}  // namespace smol::cuda::detail
