// KvCache: the keys and values of every block for the positions a session has seen.
//
// Per block and KV head, keys and values are regions in quant/kv_layout.hpp's layout
// for their types, the layout ops/attention.hpp streams once per group of query heads;
// everything one KV head's attention scans is contiguous. The whole capacity is reserved as address
// space only (an anonymous mapping without swap reservation); the OS commits a page when a position
// first writes into it. A short chat with a 64K-context session therefore uses memory for the
// positions it filled, not 4.5 GiB, and no row ever moves.
//
// Blocks with sliding-window attention (Gemma 3's local ones) can keep a ring instead
// (KvRing): the last `positions` positions only, position p in row p % positions, so
// their memory stops growing once the ring is full and a long context costs the global
// blocks alone. The ring is whole attention blocks, so the attention reads it block by
// block as it reads the rest (KvHeads::ring_blocks); its owner (model/transformer.hpp)
// sizes it to hold every position a pass of its tokens can see, and knows which
// positions it has overwritten.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

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

// Which blocks keep a ring of their last positions, and how many.
struct KvRing {
  std::size_t positions = 0;  // a multiple of detail::kAttentionBlock; 0: no ring
  std::vector<bool> layers;   // per block: whether it is a ring
};

// The ring sliding-window blocks need when passes run up to `max_batch` tokens: every
// position one pass's windows can see, in whole attention blocks. A pass from position p
// sees [p + 1 - window, p + max_batch), which spans at most
// ceil((window - 1 + max_batch) / B) + 1 blocks of B positions, so that many slots never
// overwrite a block the pass still reads. `local_layers` flags the windowed blocks.
inline KvRing sliding_window_ring(std::size_t window, std::size_t max_batch,
                                  std::vector<bool> local_layers) {
  if (window == 0 || max_batch == 0) return {};
  const std::size_t block = detail::kAttentionBlock;
  const std::size_t reach = window - 1 + max_batch;
  return {.positions = ((reach + block - 1) / block + 1) * block, .layers = std::move(local_layers)};
}

class KvCache {
 public:
  KvCache() = default;
  // A ring no shorter than the capacity is no ring: those blocks keep every position.
  KvCache(std::size_t n_layer, std::size_t n_head_kv, std::size_t head_dim, std::size_t capacity,
          KvTypes types, KvRing ring = {})
      : n_layer_(n_layer),
        n_head_kv_(n_head_kv),
        head_dim_(head_dim),
        capacity_(capacity),
        // The last key tile is whole even when the capacity ends inside it.
        padded_(padded_positions(capacity)),
        types_(types),
        key_row_(kv_row_bytes(types.key, head_dim)),
        value_row_(kv_row_bytes(types.value, head_dim)) {
    check_kv_types(types, head_dim);
    if (ring.positions % detail::kAttentionBlock != 0 ||
        (ring.positions != 0 && ring.layers.size() != n_layer)) {
      fail("KV cache: a ring of ", ring.positions, " positions over ", ring.layers.size(),
           " blocks (whole attention blocks of ", detail::kAttentionBlock, ", one flag a block)");
    }
    ring_ = ring.positions != 0 && ring.positions < padded_ ? ring.positions : 0;
    std::size_t offset = 0;
    for (std::size_t layer = 0; layer < n_layer; ++layer) {
      const std::size_t rows = ring_ != 0 && ring.layers[layer] ? ring_ : padded_;
      layers_.push_back({.offset = offset, .rows = rows});
      offset += n_head_kv * rows * (key_row_ + value_row_);
    }
    memory_ = detail::ReservedMemory(offset);
  }

  KvTypes types() const noexcept { return types_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // The positions a ring block keeps (0: no block is a ring).
  std::size_t ring_positions() const noexcept { return ring_; }
  bool is_ring(std::size_t layer) const noexcept { return layers_[layer].rows != padded_; }
  // Bytes the cache holds once `positions` positions are filled: every position of a
  // full block, at most ring_positions() of a ring block.
  std::size_t bytes_for(std::size_t positions) const noexcept {
    std::size_t bytes = 0;
    for (std::size_t layer = 0; layer < n_layer_; ++layer) {
      bytes += layer_bytes_for(is_ring(layer) ? std::min(positions, ring_) : positions);
    }
    return bytes;
  }

  // Writes the K and V rows of all KV heads of block `layer` at `pos`; `keys` and
  // `values` hold n_head_kv * head_dim floats. A ring block overwrites the position
  // ring_positions() before it.
  void store(std::size_t layer, std::size_t pos, const float* keys, const float* values) {
    const std::size_t row = is_ring(layer) ? pos % ring_ : pos;
    for (std::size_t g = 0; g < n_head_kv_; ++g) {
      store_key(types_.key, keys + g * head_dim_, key_region(layer, g), row, head_dim_);
      store_value(types_.value, values + g * head_dim_, value_region(layer, g), row, head_dim_);
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
  // then keeps only the positions used and does not depend on kKeyTile. A ring block
  // holds them only while positions <= ring_positions() (the caller checks).
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
      detail::ReservedMemory::populate(key_region(layer, g),
                                       padded_positions(positions) * key_row_);
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
    const std::size_t rows = layers_[layer].rows;
    return {.types = types_,
            .keys = key_region(layer, 0),
            .key_head_stride = rows * key_row_,
            .values = value_region(layer, 0),
            .value_head_stride = rows * value_row_,
            .ring_blocks = is_ring(layer) ? ring_ / detail::kAttentionBlock : 0};
  }

 private:
  // Per block: every KV head's keys, then every KV head's values, `rows` positions each.
  struct LayerRegion {
    std::size_t offset = 0;  // bytes from the start of the memory
    std::size_t rows = 0;    // padded_, or ring_ for a ring block
  };

  std::byte* key_region(std::size_t layer, std::size_t g) const noexcept {
    const LayerRegion& region = layers_[layer];
    return memory_.data() + region.offset + g * region.rows * key_row_;
  }
  std::byte* value_region(std::size_t layer, std::size_t g) const noexcept {
    const LayerRegion& region = layers_[layer];
    return memory_.data() + region.offset + n_head_kv_ * region.rows * key_row_ +
           g * region.rows * value_row_;
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
  std::size_t ring_ = 0;       // positions of a ring block; 0: none
  std::vector<LayerRegion> layers_;
  detail::ReservedMemory memory_;
};

}  // namespace smol
