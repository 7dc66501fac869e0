// KvCache: the keys and values of every block for the positions a session has seen.
//
// Per block and KV head, keys and values are regions in quant/kv_layout.hpp's layout
// for their types, the layout ops/attention.hpp streams once per group of query heads;
// everything one KV head's attention scans is contiguous. The whole capacity is reserved as address
// space only (an anonymous mapping without swap reservation); the OS commits a page when a position
// first writes into it. A short chat with a 64K-context session therefore uses memory for the
// positions it filled, not 4.5 GiB, and no row ever moves.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "smol/core/error.hpp"
#include "smol/ops/attention.hpp"
#include "smol/quant/kv_layout.hpp"

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

  // Commits [begin, begin + bytes) at once, before a bulk write: one call instead of a
  // page fault per 4 KiB page. Only a hint: where the kernel lacks MADV_POPULATE_WRITE
  // (before Linux 5.14), the writes commit the pages as usual.
  static void populate(std::byte* begin, std::size_t bytes) noexcept {
#if defined(MADV_POPULATE_WRITE)
    const auto page = static_cast<std::uintptr_t>(4096);
    const auto first = reinterpret_cast<std::uintptr_t>(begin) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(begin + bytes);
    if (bytes != 0) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);
#else
    (void)begin;
    (void)bytes;
#endif
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

class KvCache {
 public:
  KvCache() = default;
  KvCache(std::size_t n_layer, std::size_t n_head_kv, std::size_t head_dim, std::size_t capacity,
          KvTypes types)
      : n_layer_(n_layer),
        n_head_kv_(n_head_kv),
        head_dim_(head_dim),
        capacity_(capacity),
        // The last key tile is whole even when the capacity ends inside it.
        padded_(padded_positions(capacity)),
        types_(types),
        key_row_(kv_row_bytes(types.key, head_dim)),
        value_row_(kv_row_bytes(types.value, head_dim)),
        memory_((check_kv_types(types, head_dim), n_layer * layer_stride())) {}

  KvTypes types() const noexcept { return types_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // Bytes the cache holds once `positions` positions are filled.
  std::size_t bytes_for(std::size_t positions) const noexcept {
    return n_layer_ * layer_bytes_for(positions);
  }

  // Writes the K and V rows of all KV heads of block `layer` at `pos`; `keys` and
  // `values` hold n_head_kv * head_dim floats.
  void store(std::size_t layer, std::size_t pos, const float* keys, const float* values) {
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      store_key(types_.key, keys + g * head_dim_, key_region(layer, g), pos, head_dim_);
      store_value(types_.value, values + g * head_dim_, value_region(layer, g), pos, head_dim_);
    }
  }

  // Bytes of block `layer`'s K and V rows for positions [0, positions) in the
  // tile-free layout of copy_rows_out.
  std::size_t layer_bytes_for(std::size_t positions) const noexcept {
    return n_head_kv_ * positions * (key_row_ + value_row_);
  }

  // Copies the rows of positions [0, positions) of block `layer` to `out`
  // (layer_bytes_for(positions) bytes): every KV head's keys, position by position,
  // then every KV head's values. Rows, not tiles: a saved session (session_file.hpp)
  // then keeps only the positions used and does not depend on kKeyTile.
  void copy_rows_out(std::size_t layer, std::size_t positions, std::byte* out) const noexcept {
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      for (std::size_t p = 0; p < positions; ++p, out += key_row_) {
        copy_key_row<false>(types_.key, key_region(layer, g), p, head_dim_, out);
      }
    }
    for (std::size_t g = 0; g < n_head_kv_; ++g, out += positions * value_row_) {
      std::memcpy(out, value_region(layer, g), positions * value_row_);
    }
  }
  // The inverse of copy_rows_out; commits only the pages of those positions. `in` may
  // be unaligned (a file's bytes).
  void copy_rows_in(std::size_t layer, std::size_t positions, const std::byte* in) noexcept {
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      detail::ReservedMemory::populate(key_region(layer, g), padded_positions(positions) * key_row_);
      detail::ReservedMemory::populate(value_region(layer, g), positions * value_row_);
    }
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      for (std::size_t p = 0; p < positions; ++p, in += key_row_) {
        copy_key_row<true>(types_.key, key_region(layer, g), p, head_dim_, in);
      }
    }
    for (std::size_t g = 0; g < n_head_kv_; ++g, in += positions * value_row_) {
      std::memcpy(value_region(layer, g), in, positions * value_row_);
    }
  }

  // The attention view of block `layer`.
  KvHeads layer(std::size_t layer) const noexcept {
    return {.types = types_,
            .keys = key_region(layer, 0),
            .key_head_stride = padded_ * key_row_,
            .values = value_region(layer, 0),
            .value_head_stride = padded_ * value_row_};
  }

 private:
  // Per block: every KV head's keys, then every KV head's values.
  std::size_t layer_stride() const noexcept {
    return n_head_kv_ * padded_ * (key_row_ + value_row_);
  }
  std::byte* key_region(std::size_t layer, std::size_t g) const noexcept {
    return memory_.data() + layer * layer_stride() + g * padded_ * key_row_;
  }
  std::byte* value_region(std::size_t layer, std::size_t g) const noexcept {
    return memory_.data() + layer * layer_stride() + n_head_kv_ * padded_ * key_row_ +
           g * padded_ * value_row_;
  }

  static std::size_t padded_positions(std::size_t capacity) noexcept {
    return (capacity + kKeyTile - 1) / kKeyTile * kKeyTile;
  }

  std::size_t n_layer_ = 0;
  std::size_t n_head_kv_ = 0;
  std::size_t head_dim_ = 0;
  std::size_t capacity_ = 0;
  std::size_t padded_ = 0;  // capacity rounded up to whole key tiles
  KvTypes types_{};
  std::size_t key_row_ = 0;    // bytes of one position's key of one KV head
  std::size_t value_row_ = 0;  // ... and of its value
  detail::ReservedMemory memory_;
};

}  // namespace smol
