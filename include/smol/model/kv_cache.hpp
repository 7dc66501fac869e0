// KvCache: the keys and values of every block for the positions a session has seen.
//
// Per block and KV head, keys are stored in tiles of kKeyTile positions (dimension-
// major inside a tile) and values as rows of head_dim by position, the layout
// ops/attention.hpp streams once per group of query heads; everything one KV head's
// attention scans is contiguous. The whole capacity is reserved as address space
// only (an anonymous mapping without swap reservation); the OS commits a page when a
// position first writes into it. A short chat with a 64K-context session therefore
// uses memory for the positions it filled, not 4.5 GiB, and no row ever moves.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/model/kv_type.hpp"
#include "smol/ops/attention.hpp"

namespace smol {

namespace detail {

// Address space reserved up front, committed page by page on first touch.
class ReservedMemory {
 public:
  ReservedMemory() = default;
  explicit ReservedMemory(std::size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (address == MAP_FAILED) {
      fail("KV cache: cannot reserve ", bytes, " bytes of address space: ", std::strerror(errno));
    }
    data_ = static_cast<std::byte*>(address);
  }
  ReservedMemory(ReservedMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  ReservedMemory& operator=(ReservedMemory&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ReservedMemory(const ReservedMemory&) = delete;
  ReservedMemory& operator=(const ReservedMemory&) = delete;
  ~ReservedMemory() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }

  std::byte* data() const noexcept { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

class KvCache {
 public:
  KvCache() = default;
  KvCache(std::size_t n_layer, std::size_t n_head_kv, std::size_t head_dim, std::size_t capacity,
          KvType type)
      : n_layer_(n_layer),
        n_head_kv_(n_head_kv),
        head_dim_(head_dim),
        capacity_(capacity),
        // The last key tile is whole even when the capacity ends inside it.
        padded_(padded_positions(capacity)),
        type_(type),
        element_bytes_(type == KvType::f16 ? sizeof(f16_bits) : sizeof(float)),
        memory_(2 * n_layer * n_head_kv * padded_ * head_dim * element_bytes_) {}

  KvType type() const noexcept { return type_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // Bytes the cache holds once `positions` positions are filled.
  std::size_t bytes_for(std::size_t positions) const noexcept {
    return 2 * n_layer_ * n_head_kv_ * positions * head_dim_ * element_bytes_;
  }

  // Writes the K and V rows of all KV heads of block `layer` at `pos`; `keys` and
  // `values` hold n_head_kv * head_dim floats.
  void store(std::size_t layer, std::size_t pos, const float* keys, const float* values) {
    if (type_ == KvType::f16) {
      store_as<f16_bits>(layer, pos, keys, values);
    } else {
      store_as<float>(layer, pos, keys, values);
    }
  }

  // Bytes of block `layer`'s K and V rows for positions [0, positions) in the
  // tile-free layout of copy_rows_out.
  std::size_t layer_bytes_for(std::size_t positions) const noexcept {
    return 2 * n_head_kv_ * positions * head_dim_ * element_bytes_;
  }

  // Copies the rows of positions [0, positions) of block `layer` to `out`
  // (layer_bytes_for(positions) bytes): every KV head's keys, position by position,
  // then every KV head's values. Rows, not tiles: a saved session (session_file.hpp)
  // then keeps only the positions used and does not depend on kKeyTile.
  void copy_rows_out(std::size_t layer, std::size_t positions, std::byte* out) const noexcept {
    copy_rows<false>(layer, positions, out);
  }
  // The inverse of copy_rows_out; commits only the pages of those positions.
  void copy_rows_in(std::size_t layer, std::size_t positions, const std::byte* in) noexcept {
    copy_rows<true>(layer, positions, in);
  }

  // The attention view of block `layer`; Element must match type().
  template <class Element>
  KvHeads<Element> layer(std::size_t layer) const noexcept {
    const std::size_t head_stride = padded_ * head_dim_;
    return {base<Element>(layer, 0), head_stride, base<Element>(layer, 1), head_stride};
  }

 private:
  template <class Element>
  Element* base(std::size_t layer, std::size_t which) const noexcept {
    const std::size_t offset = (2 * layer + which) * n_head_kv_ * padded_ * head_dim_;
    return reinterpret_cast<Element*>(memory_.data()) + offset;
  }

  template <class Element>
  void store_as(std::size_t layer, std::size_t pos, const float* keys, const float* values) {
    const std::size_t head_stride = padded_ * head_dim_;
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      store_key(keys + g * head_dim_, base<Element>(layer, 0) + g * head_stride, pos, head_dim_);
      store_kv(values + g * head_dim_, base<Element>(layer, 1) + g * head_stride + pos * head_dim_,
               head_dim_);
    }
  }

  // kIntoCache: from `outside` into the cache; otherwise from the cache to `outside`.
  template <bool kIntoCache, class Outside>
  void copy_rows(std::size_t layer, std::size_t positions, Outside* outside) const noexcept {
    if (type_ == KvType::f16) {
      copy_rows_as<f16_bits, kIntoCache>(layer, positions, outside);
    } else {
      copy_rows_as<float, kIntoCache>(layer, positions, outside);
    }
  }

  // `outside` may be unaligned (it is a file's bytes): every access is a memcpy of a
  // constant size, which compiles to one load and one store.
  template <class Element, bool kIntoCache, class Outside>
  void copy_rows_as(std::size_t layer, std::size_t positions, Outside* outside) const noexcept {
    const auto copy = [&](std::byte* cache, std::size_t bytes) {
      if constexpr (kIntoCache) {
        std::memcpy(cache, outside, bytes);
      } else {
        std::memcpy(outside, cache, bytes);
      }
      outside += bytes;
    };
    constexpr std::size_t e = sizeof(Element);
    const std::size_t head_stride = padded_ * head_dim_ * e;
    std::byte* keys = reinterpret_cast<std::byte*>(base<Element>(layer, 0));
    std::byte* values = reinterpret_cast<std::byte*>(base<Element>(layer, 1));
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      for (std::size_t p = 0; p < positions; ++p) {
        std::byte* key = keys + g * head_stride + key_offset(p, 0, head_dim_) * e;
        for (std::size_t d = 0; d < head_dim_; ++d, key += kKeyTile * e) {
          if constexpr (kIntoCache) {
            std::memcpy(key, outside, e);
          } else {
            std::memcpy(outside, key, e);
          }
          outside += e;
        }
      }
    }
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      copy(values + g * head_stride, positions * head_dim_ * e);
    }
  }

  static std::size_t padded_positions(std::size_t capacity) noexcept {
    return (capacity + kKeyTile - 1) / kKeyTile * kKeyTile;
  }

  std::size_t n_layer_ = 0;
  std::size_t n_head_kv_ = 0;
  std::size_t head_dim_ = 0;
  std::size_t capacity_ = 0;
  std::size_t padded_ = 0;  // capacity rounded up to whole key tiles
  KvType type_ = KvType::f16;
  std::size_t element_bytes_ = sizeof(f16_bits);
  detail::ReservedMemory memory_;
};

}  // namespace smol
