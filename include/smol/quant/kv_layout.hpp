// The KV cache's layout: the one description of how keys and values are stored, per
// element type. The single-sequence cache (model/kv_cache.hpp), the paged pool of many
// sequences (model/kv_pool.hpp), the attention kernels (simd/attention_kernels.hpp) and
// saved sessions (model/session_file.hpp) all read it; visit_kv_type is the one place
// that turns a run-time KvType into the compile-time format the kernels are written on.
//
// Keys and values are chosen separately (llama.cpp's --cache-type-k / --cache-type-v):
//   f32   exact                        4 bytes a value
//   f16   llama.cpp's default          2 bytes
//   bf16  f32's range, f16's size      2 bytes
//   q8_0  ggml's BlockQ8_0 (32 values, one f16 scale): 34 bytes per 32 values
//   q4_0  ggml's BlockQ4_0 (32 values, one f16 scale): 18 bytes per 32 values
//
// Per KV head, a region of N positions holds N rows of `kv_row_bytes(type, head_dim)`
// bytes; what differs is the order inside it:
// - float keys are tiled: kKeyTile positions per tile, dimension-major inside a tile
//   (key (p, d) at key_offset(p, d, head_dim)), so the decode kernel computes a tile's
//   scores as FMAs of one tile row with a broadcast query element, positions in lanes;
// - quantized keys are rows of head_dim / 32 blocks by position, ggml's layout, so a
//   score is one integer block dot of the key row with the query quantized to Q8_0
//   (as llama.cpp's flash attention does);
// - values of every type are rows by position (the weighted sum streams rows).
// A region always spans whole key tiles, so the float and quantized layouts have the
// same size: positions * kv_row_bytes.
//
// A quantized cache stores its rows rotated, as llama.cpp does since its "rotate
// activations for better quantization" change (enabled by default for every quantized
// K or V type whose head size is a multiple of 64): an orthonormal Walsh-Hadamard
// transform spreads a head's outlier dimensions over the whole block before it is
// rounded. Keys are rotated in blocks of the largest power of two that divides the
// head (and the query with them, so every score is unchanged), values in blocks of
// 64 (and the attention output is turned back). Without it the quantization noise is
// larger, and it is a different noise from llama.cpp's.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/quantize.hpp"

namespace smol {

enum class KvType : std::uint8_t { f32, f16, bf16, q8_0, q4_0 };

inline constexpr std::array<KvType, 5> kAllKvTypes = {KvType::f32, KvType::f16, KvType::bf16,
                                                      KvType::q8_0, KvType::q4_0};

// llama.cpp's spellings (ggml's type names).
constexpr std::string_view kv_type_name(KvType type) noexcept {
  switch (type) {
    case KvType::f32:
      return "f32";
    case KvType::f16:
      return "f16";
    case KvType::bf16:
      return "bf16";
    case KvType::q8_0:
      return "q8_0";
    case KvType::q4_0:
      return "q4_0";
  }
  return "?";
}

inline std::optional<KvType> kv_type_from_name(std::string_view name) noexcept {
  for (const KvType type : kAllKvTypes) {
    if (kv_type_name(type) == name) return type;
  }
  return std::nullopt;
}

// The key and the value cache's types. Converts from one KvType (both the same), so
// `.kv_type = KvType::f32` reads as it always did.
struct KvTypes {
  KvType key = KvType::f16;
  KvType value = KvType::f16;

  constexpr KvTypes() = default;
  constexpr KvTypes(KvType both) noexcept : key(both), value(both) {}  // NOLINT: implicit
  constexpr KvTypes(KvType k, KvType v) noexcept : key(k), value(v) {}
  friend constexpr bool operator==(KvTypes, KvTypes) = default;
};

// ---- the formats: what each type stores, as compile-time tags ---------------------

// Element: the unit stored (a value, or a block of 32). kBlockValues: values per element.
template <KvType T>
struct KvFormat;
template <>
struct KvFormat<KvType::f32> {
  using Element = float;
  static constexpr std::size_t kBlockValues = 1;
};
template <>
struct KvFormat<KvType::f16> {
  using Element = f16_bits;
  static constexpr std::size_t kBlockValues = 1;
};
template <>
struct KvFormat<KvType::bf16> {
  using Element = bf16_bits;
  static constexpr std::size_t kBlockValues = 1;
};
template <>
struct KvFormat<KvType::q8_0> {
  using Element = BlockQ8_0;
  static constexpr std::size_t kBlockValues = 32;
};
template <>
struct KvFormat<KvType::q4_0> {
  using Element = BlockQ4_0;
  static constexpr std::size_t kBlockValues = 32;
};

template <KvType T>
inline constexpr bool kv_is_quantized_v = KvFormat<T>::kBlockValues > 1;

template <KvType T>
using KvElement = typename KvFormat<T>::Element;

// Calls f(std::integral_constant<KvType, T>{}) for the run-time `type`: the one branch
// on the element type.
template <class F>
constexpr decltype(auto) visit_kv_type(KvType type, F&& f) {
  switch (type) {
    case KvType::f32:
      return f(std::integral_constant<KvType, KvType::f32>{});
    case KvType::f16:
      return f(std::integral_constant<KvType, KvType::f16>{});
    case KvType::bf16:
      return f(std::integral_constant<KvType, KvType::bf16>{});
    case KvType::q8_0:
      return f(std::integral_constant<KvType, KvType::q8_0>{});
    case KvType::q4_0:
      return f(std::integral_constant<KvType, KvType::q4_0>{});
  }
  fail("unknown KV cache type ", static_cast<int>(type));
}

constexpr bool kv_is_quantized(KvType type) {
  return visit_kv_type(type, [](auto tag) { return kv_is_quantized_v<decltype(tag)::value>; });
}

// ---- sizes and offsets -------------------------------------------------------------

// Positions per key tile; a region (and an attention block) starts on a tile.
inline constexpr std::size_t kKeyTile = 16;

// Element offset of float key (position p, dimension d) inside one KV head's keys.
constexpr std::size_t key_offset(std::size_t p, std::size_t d, std::size_t head_dim) noexcept {
  return (p / kKeyTile) * kKeyTile * head_dim + d * kKeyTile + p % kKeyTile;
}

// Bytes one position takes in one KV head's region.
constexpr std::size_t kv_row_bytes(KvType type, std::size_t head_dim) {
  return visit_kv_type(type, [head_dim](auto tag) {
    using Format = KvFormat<decltype(tag)::value>;
    return head_dim / Format::kBlockValues * sizeof(typename Format::Element);
  });
}

// The largest head a quantized cache takes: the attention kernels keep a block's
// queries, quantized to Q8_0, on the stack.
inline constexpr std::size_t kMaxQuantizedHeadDim = 512;

// Refuses a type the head size cannot be stored in (blocks of 32 must tile a head).
inline void check_kv_type(KvType type, std::size_t head_dim, std::string_view which) {
  if (kv_is_quantized(type) && (head_dim % 32 != 0 || head_dim > kMaxQuantizedHeadDim)) {
    fail("a ", kv_type_name(type), " ", which,
         " cache needs a head size that is a multiple of 32, at most ", kMaxQuantizedHeadDim,
         " (this model's is ", head_dim, "); use f16, bf16 or f32");
  }
}
inline void check_kv_types(KvTypes types, std::size_t head_dim) {
  check_kv_type(types.key, head_dim, "K");
  check_kv_type(types.value, head_dim, "V");
}

// ---- the rotation of quantized rows -------------------------------------------------

// The Hadamard block a quantized key (value) cache rotates its rows in; 0: none.
constexpr std::size_t key_rotation(KvType type, std::size_t head_dim) {
  if (!kv_is_quantized(type) || head_dim % 64 != 0) return 0;
  std::size_t block = 64;
  while (head_dim % (2 * block) == 0 && 2 * block <= kMaxQuantizedHeadDim) block *= 2;
  return block;
}
constexpr std::size_t value_rotation(KvType type, std::size_t head_dim) {
  return kv_is_quantized(type) && head_dim % 64 == 0 ? 64 : 0;
}

// x <- H x on each run of `block` values (n a multiple of it): the orthonormal Walsh-
// Hadamard matrix in natural order, H[i][j] = (-1)^popcount(i & j) / sqrt(block), the
// matrix llama.cpp builds. It is symmetric and its own inverse, so the same call turns a
// row back. Written as the fast transform (block log2(block) additions), which rounds a
// little differently from llama.cpp's matrix product: a value near a quantization step
// may then round the other way, which the fixture tolerances absorb.
inline void hadamard_rotate(float* x, std::size_t n, std::size_t block) noexcept {
  const float scale = 1.0f / std::sqrt(static_cast<float>(block));
  for (std::size_t start = 0; start < n; start += block) {
    float* v = x + start;
    for (std::size_t half = 1; half < block; half *= 2) {
      for (std::size_t i = 0; i < block; i += 2 * half) {
        for (std::size_t j = i; j < i + half; ++j) {
          const float a = v[j], b = v[j + half];
          v[j] = a + b;
          v[j + half] = a - b;
        }
      }
    }
    for (std::size_t j = 0; j < block; ++j) v[j] *= scale;
  }
}

// ---- writing a position ------------------------------------------------------------

namespace detail {

template <KvType T>
void store_values(const float* in, KvElement<T>* out, std::size_t head_dim) noexcept {
  if constexpr (T == KvType::f32) {
    std::memcpy(out, in, head_dim * sizeof(float));
  } else if constexpr (T == KvType::f16) {
    for (std::size_t i = 0; i < head_dim; ++i) out[i] = f32_to_f16(in[i]);
  } else if constexpr (T == KvType::bf16) {
    for (std::size_t i = 0; i < head_dim; ++i) out[i] = f32_to_bf16(in[i]);
  } else {
    // ggml's reference quantizers, as llama.cpp's cache copy applies them.
    for (std::size_t b = 0; b < head_dim / 32; ++b) quantize_block(in + 32 * b, out[b]);
  }
}

// A quantized row: rotated in blocks of `rotation` (0: not at all), then quantized.
template <KvType T>
void store_rotated(const float* in, KvElement<T>* out, std::size_t head_dim,
                   std::size_t rotation) noexcept {
  if (rotation == 0) return store_values<T>(in, out, head_dim);
  float rotated[kMaxQuantizedHeadDim];
  std::memcpy(rotated, in, head_dim * sizeof(float));
  hadamard_rotate(rotated, head_dim, rotation);
  store_values<T>(rotated, out, head_dim);
}

}  // namespace detail

// Writes the key of position `pos` (head_dim floats) into one KV head's keys, `region`
// pointing at the region's first byte (position 0 of the region, a tile start).
inline void store_key(KvType type, const float* in, std::byte* region, std::size_t pos,
                      std::size_t head_dim) noexcept {
  visit_kv_type(type, [&](auto tag) {
    constexpr KvType T = decltype(tag)::value;
    auto* keys = reinterpret_cast<KvElement<T>*>(region);
    if constexpr (kv_is_quantized_v<T>) {
      detail::store_rotated<T>(in, keys + pos * (head_dim / 32), head_dim,
                               key_rotation(T, head_dim));
    } else {
      KvElement<T> row[1];
      for (std::size_t d = 0; d < head_dim; ++d) {
        detail::store_values<T>(in + d, row, 1);
        keys[key_offset(pos, d, head_dim)] = row[0];
      }
    }
  });
}

// Writes the value of position `pos` into one KV head's values.
inline void store_value(KvType type, const float* in, std::byte* region, std::size_t pos,
                        std::size_t head_dim) noexcept {
  visit_kv_type(type, [&](auto tag) {
    constexpr KvType T = decltype(tag)::value;
    auto* row = reinterpret_cast<KvElement<T>*>(region + pos * kv_row_bytes(T, head_dim));
    if constexpr (kv_is_quantized_v<T>) {
      detail::store_rotated<T>(in, row, head_dim, value_rotation(T, head_dim));
    } else {
      detail::store_values<T>(in, row, head_dim);
    }
  });
}

// ---- rows in and out (saved sessions) ------------------------------------------------

// Copies position `pos`'s key between a region and a plain row of kv_row_bytes bytes
// (the values in dimension order, or the blocks): the form a saved session keeps, which
// does not depend on kKeyTile. `row` may be unaligned (a file's bytes): every access is
// a memcpy.
template <bool kIntoRegion>
void copy_key_row(KvType type, std::byte* region, std::size_t pos, std::size_t head_dim,
                  std::conditional_t<kIntoRegion, const std::byte*, std::byte*> row) noexcept {
  const std::size_t row_bytes = kv_row_bytes(type, head_dim);
  const auto copy = [](std::byte* cache, auto* outside, std::size_t bytes) {
    if constexpr (kIntoRegion) {
      std::memcpy(cache, outside, bytes);
    } else {
      std::memcpy(outside, cache, bytes);
    }
  };
  if (kv_is_quantized(type)) {
    copy(region + pos * row_bytes, row, row_bytes);
    return;
  }
  // Float keys are tiled: each value moves alone, with its type's size known here so
  // that it is one load and one store (a restored session moves millions of them).
  visit_kv_type(type, [&](auto tag) {
    constexpr KvType T = decltype(tag)::value;
    if constexpr (!kv_is_quantized_v<T>) {
      auto* keys = reinterpret_cast<KvElement<T>*>(region);
      constexpr std::size_t e = sizeof(KvElement<T>);
      for (std::size_t d = 0; d < head_dim; ++d) {
        copy(reinterpret_cast<std::byte*>(keys + key_offset(pos, d, head_dim)), row + d * e, e);
      }
    }
  });
}

}  // namespace smol
