// KvPool: the keys and values of many sequences in one pool of fixed-size pages.
//
// A server with eight conversations cannot give each one a whole context of K/V: most
// chats are short. So memory is one pool of pages of kKvPagePositions positions, sized
// by the total number of positions all sequences may hold, and each sequence keeps a
// page table (vLLM's paged KV). A page holds its positions for every block and KV
// head, [layer][K, V][head][position], in quant/kv_layout.hpp's layout for the key and
// value types; a page is exactly one attention block, so the attention kernels read a
// page as they read a block of the contiguous cache.
//
// Pages are handed out as sequences grow and return to the free list when a sequence
// is truncated or removed; their memory is committed on first write (the reservation
// is address space only) and given back to the OS when they are freed. A fork shares
// the pages of a prefix (a long system prompt is computed once); a page shared by two
// sequences is copied before either writes into it (copy on write), so the prefix
// never changes under the other one.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/ops/attention.hpp"
#include "smol/quant/kv_layout.hpp"

namespace smol {

inline constexpr std::size_t kKvPagePositions = detail::kAttentionBlock;
static_assert(kKvPagePositions % kKeyTile == 0, "a page holds whole key tiles");

// The pool has no free page for a sequence's growth; nothing was changed.
class KvPoolFull : public Error {
 public:
  using Error::Error;
};

struct KvShape {
  std::size_t n_layer = 0;
  std::size_t n_head_kv = 0;
  std::size_t head_dim = 0;
};

// One block's K/V for attention, read through a sequence's page table: block b of KV
// head g is page pages[b] (ops/attention.hpp reads any view with types(), keys(g, b)
// and values(g, b)).
struct PagedKv {
  const std::byte* base = nullptr;
  std::size_t page_bytes = 0;
  const std::uint32_t* pages = nullptr;
  KvTypes kv_types{};
  std::size_t key_offset = 0;        // bytes from a page's start to this layer's K
  std::size_t value_offset = 0;      // ... and to its V
  std::size_t key_head_bytes = 0;    // kKvPagePositions rows of keys
  std::size_t value_head_bytes = 0;  // ... and of values

  KvTypes types() const noexcept { return kv_types; }
  const std::byte* keys(std::size_t g, std::size_t block) const noexcept {
    return page(block) + key_offset + g * key_head_bytes;
  }
  const std::byte* values(std::size_t g, std::size_t block) const noexcept {
    return page(block) + value_offset + g * value_head_bytes;
  }

 private:
  const std::byte* page(std::size_t block) const noexcept {
    return base + pages[block] * page_bytes;
  }
};

class KvPool {
 public:
  using SequenceId = std::uint32_t;

  KvPool() = default;
  // Room for `total_positions` positions over all sequences, in whole pages.
  KvPool(KvShape shape, std::size_t total_positions, KvTypes types)
      : shape_(shape),
        types_(types),
        key_head_bytes_(kKvPagePositions * kv_row_bytes(types.key, shape.head_dim)),
        value_head_bytes_(kKvPagePositions * kv_row_bytes(types.value, shape.head_dim)),
        page_bytes_(round_to_os_page(shape.n_layer * layer_bytes())),
        n_pages_((total_positions + kKvPagePositions - 1) / kKvPagePositions),
        memory_(n_pages_ * page_bytes_),
        references_(n_pages_, 0) {
    if (shape.n_layer == 0 || shape.n_head_kv == 0 || shape.head_dim == 0) {
      fail("KV pool: every dimension must be positive");
    }
    check_kv_types(types, shape.head_dim);
    free_.reserve(n_pages_);
    for (std::size_t p = n_pages_; p-- > 0;) free_.push_back(static_cast<std::uint32_t>(p));
  }

  KvTypes types() const noexcept { return types_; }
  const KvShape& shape() const noexcept { return shape_; }
  std::size_t total_pages() const noexcept { return n_pages_; }
  std::size_t free_pages() const noexcept { return free_.size(); }
  std::size_t capacity() const noexcept { return n_pages_ * kKvPagePositions; }
  std::size_t page_bytes() const noexcept { return page_bytes_; }
  static constexpr std::size_t pages_for(std::size_t positions) noexcept {
    return (positions + kKvPagePositions - 1) / kKvPagePositions;
  }

  // A new, empty sequence.
  SequenceId add() {
    for (std::size_t i = 0; i < sequences_.size(); ++i) {
      if (!sequences_[i].live) {
        sequences_[i] = Sequence{.live = true, .length = 0, .pages = {}};
        return static_cast<SequenceId>(i);
      }
    }
    sequences_.push_back(Sequence{.live = true, .length = 0, .pages = {}});
    return static_cast<SequenceId>(sequences_.size() - 1);
  }

  // A new sequence whose first `length` positions are `from`'s, sharing its pages.
  SequenceId fork(SequenceId from, std::size_t length) {
    if (length > sequence(from).length) {
      fail("KV pool: cannot fork ", length, " positions of a sequence of ", sequence(from).length);
    }
    const SequenceId id = add();
    Sequence& source = sequences_[from];  // add() may have moved the vector
    Sequence& copy = sequences_[id];
    copy.pages.assign(source.pages.begin(),
                      source.pages.begin() + static_cast<std::ptrdiff_t>(pages_for(length)));
    for (const std::uint32_t page : copy.pages) ++references_[page];
    copy.length = length;
    return id;
  }

  void remove(SequenceId id) {
    truncate(id, 0);
    sequences_[id].live = false;
  }

  bool contains(SequenceId id) const noexcept {
    return id < sequences_.size() && sequences_[id].live;
  }
  std::size_t length(SequenceId id) const { return sequence(id).length; }

  // Forgets the positions from `length` on; pages no sequence uses any more are freed.
  void truncate(SequenceId id, std::size_t length) {
    Sequence& s = sequence(id);
    if (length >= s.length) return;
    const std::size_t keep = pages_for(length);
    for (std::size_t i = keep; i < s.pages.size(); ++i) release(s.pages[i]);
    s.pages.resize(keep);
    s.length = length;
  }

  // Pages that prepare(id, first, count) would take from the free list, less those its
  // rewind to `first` gives back (0 when it fits what the sequence holds).
  std::size_t pages_needed(SequenceId id, std::size_t first, std::size_t count) const {
    const Sequence& s = sequence(id);
    const std::size_t kept = std::min(s.pages.size(), pages_for(std::min(first, s.length)));
    std::size_t needed = pages_for(first + count) - std::min(kept, pages_for(first + count));
    // The page that holds `first` is written into: a shared one is copied.
    const std::size_t first_page = first / kKvPagePositions;
    if (first_page < kept && references_[s.pages[first_page]] > 1) ++needed;
    std::size_t released = 0;
    for (std::size_t i = kept; i < s.pages.size(); ++i) released += references_[s.pages[i]] == 1;
    return needed > released ? needed - released : 0;
  }

  // Makes positions [first, first + count) writable for `id`: drops what lies after
  // `first` (it is about to be overwritten), copies a shared page that will be written,
  // takes new pages. The sequence's length becomes first + count. Throws KvPoolFull,
  // changing nothing, when the free pages do not suffice.
  void prepare(SequenceId id, std::size_t first, std::size_t count) {
    Sequence& s = sequence(id);
    if (first > s.length) {
      fail("KV pool: position ", first, " is past the ", s.length, " positions of the sequence");
    }
    const std::size_t needed = pages_needed(id, first, count);
    if (needed > free_.size()) {
      throw KvPoolFull(
          cat("KV pool: ", needed, " pages needed, ", free_.size(), " of ", n_pages_, " free"));
    }
    truncate(id, first);
    const std::size_t first_page = first / kKvPagePositions;
    if (first_page < s.pages.size() && references_[s.pages[first_page]] > 1) {
      const std::uint32_t copy = take();
      std::memcpy(page_address(copy), page_address(s.pages[first_page]), page_bytes_);
      release(s.pages[first_page]);
      s.pages[first_page] = copy;
    }
    while (s.pages.size() < pages_for(first + count)) s.pages.push_back(take());
    s.length = first + count;
  }

  // Writes the K and V rows of every KV head of block `layer` at `pos` (< length).
  void store(SequenceId id, std::size_t layer, std::size_t pos, const float* keys,
             const float* values) {
    const Sequence& s = sequence(id);
    const std::size_t page = pos / kKvPagePositions, offset = pos % kKvPagePositions;
    std::byte* k = page_address(s.pages[page]) + layer * layer_bytes();
    std::byte* v = k + shape_.n_head_kv * key_head_bytes_;
    const std::size_t dim = shape_.head_dim;
    for (std::size_t g = 0; g < shape_.n_head_kv; ++g) {
      store_key(types_.key, keys + g * dim, k + g * key_head_bytes_, offset, dim);
      store_value(types_.value, values + g * dim, v + g * value_head_bytes_, offset, dim);
    }
  }

  // The K/V of a sequence's positions, page by page as the pool stores them (its key and
  // value types, every block): what copy_in() takes back. A host-memory prompt cache keeps
  // an evicted sequence's K/V so (generate/host_prompt_cache.hpp).
  std::size_t used_page_bytes() const noexcept { return shape_.n_layer * layer_bytes(); }
  std::vector<std::byte> copy_out(SequenceId id) const {
    const Sequence& s = sequence(id);
    const std::size_t used = used_page_bytes();
    std::vector<std::byte> bytes(s.pages.size() * used);
    for (std::size_t i = 0; i < s.pages.size(); ++i) {
      std::memcpy(bytes.data() + i * used, page_address(s.pages[i]), used);
    }
    return bytes;
  }

  // A new sequence of `length` positions holding `bytes` (copy_out()'s of a sequence as
  // long). Throws KvPoolFull, changing nothing, when the free pages do not suffice.
  SequenceId copy_in(std::size_t length, std::span<const std::byte> bytes) {
    const std::size_t used = used_page_bytes();
    if (bytes.size() != pages_for(length) * used) {
      fail("KV pool: ", bytes.size(), " bytes are not the pages of ", length, " positions");
    }
    if (pages_for(length) > free_.size()) {
      throw KvPoolFull(cat("KV pool: ", pages_for(length), " pages needed, ", free_.size(), " of ",
                           n_pages_, " free"));
    }
    const SequenceId id = add();
    prepare(id, 0, length);
    const Sequence& s = sequences_[id];
    for (std::size_t i = 0; i < s.pages.size(); ++i) {
      std::memcpy(page_address(s.pages[i]), bytes.data() + i * used, used);
    }
    return id;
  }

  // Bytes of one block's rows of `positions` positions, as KvCache::layer_bytes_for:
  // the tile-free layout of a saved session (session_file.hpp).
  std::size_t layer_rows_bytes(std::size_t positions) const noexcept {
    return shape_.n_head_kv * positions *
           (kv_row_bytes(types_.key, shape_.head_dim) +
            kv_row_bytes(types_.value, shape_.head_dim));
  }

  // Copies the rows of positions [0, positions) of block `layer` of a sequence to `out`
  // in KvCache::copy_rows_out's layout (every KV head's keys, position by position, then
  // every KV head's values), page by page: a pool's sequence saves as a session file.
  void copy_rows_out(SequenceId id, std::size_t layer, std::size_t positions,
                     std::byte* out) const {
    rows(id, layer, positions,
         [&](std::byte* key, std::byte* value, std::size_t pos, std::size_t value_row,
             std::size_t key_at, std::size_t value_at) {
           copy_key_row<false>(types_.key, key, pos, shape_.head_dim, out + key_at);
           std::memcpy(out + value_at, value + pos * value_row, value_row);
         });
  }
  // The inverse of copy_rows_out, into positions the sequence holds; `in` may be
  // unaligned (a file's bytes).
  void copy_rows_in(SequenceId id, std::size_t layer, std::size_t positions, const std::byte* in) {
    rows(id, layer, positions,
         [&](std::byte* key, std::byte* value, std::size_t pos, std::size_t value_row,
             std::size_t key_at, std::size_t value_at) {
           copy_key_row<true>(types_.key, key, pos, shape_.head_dim, in + key_at);
           std::memcpy(value + pos * value_row, in + value_at, value_row);
         });
  }

  // The attention view of block `layer` of a sequence.
  PagedKv view(SequenceId id, std::size_t layer) const {
    const Sequence& s = sequence(id);
    return {.base = memory_.data(),
            .page_bytes = page_bytes_,
            .pages = s.pages.data(),
            .kv_types = types_,
            .key_offset = layer * layer_bytes(),
            .value_offset = layer * layer_bytes() + shape_.n_head_kv * key_head_bytes_,
            .key_head_bytes = key_head_bytes_,
            .value_head_bytes = value_head_bytes_};
  }

 private:
  struct Sequence {
    bool live = false;
    std::size_t length = 0;
    std::vector<std::uint32_t> pages;
  };

  static std::size_t round_to_os_page(std::size_t bytes) {
    const auto os_page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (bytes + os_page - 1) / os_page * os_page;
  }

  Sequence& sequence(SequenceId id) {
    if (!contains(id)) fail("KV pool: no sequence ", id);
    return sequences_[id];
  }
  const Sequence& sequence(SequenceId id) const {
    if (!contains(id)) fail("KV pool: no sequence ", id);
    return sequences_[id];
  }

  // Calls `each(key_region, value_region, pos_in_page, value_row, key_at, value_at)` for
  // every KV head and position below `positions` of block `layer`: the
  // head's key and value regions in the position's page, and where the position's rows
  // sit in copy_rows_out's layout.
  template <class Each>
  void rows(SequenceId id, std::size_t layer, std::size_t positions, Each each) const {
    const Sequence& s = sequence(id);
    if (positions > s.length) {
      fail("KV pool: ", positions, " positions asked of a sequence of ", s.length);
    }
    const std::size_t key_row = kv_row_bytes(types_.key, shape_.head_dim);
    const std::size_t value_row = kv_row_bytes(types_.value, shape_.head_dim);
    const std::size_t heads = shape_.n_head_kv;
    for (std::size_t g = 0; g < heads; ++g) {
      for (std::size_t p = 0; p < positions; ++p) {
        std::byte* k = page_address(s.pages[p / kKvPagePositions]) + layer * layer_bytes();
        std::byte* v = k + heads * key_head_bytes_;
        each(k + g * key_head_bytes_, v + g * value_head_bytes_, p % kKvPagePositions, value_row,
             (g * positions + p) * key_row,
             heads * positions * key_row + (g * positions + p) * value_row);
      }
    }
  }

  std::byte* page_address(std::uint32_t page) const noexcept {
    return memory_.data() + page * page_bytes_;
  }

  std::uint32_t take() {
    const std::uint32_t page = free_.back();
    free_.pop_back();
    references_[page] = 1;
    return page;
  }

  // Drops one reference; the last one returns the page and its memory.
  void release(std::uint32_t page) {
    if (--references_[page] > 0) return;
    ::madvise(page_address(page), page_bytes_, MADV_DONTNEED);
    free_.push_back(page);
  }

  // One block's K and V of every KV head, inside a page.
  std::size_t layer_bytes() const noexcept {
    return shape_.n_head_kv * (key_head_bytes_ + value_head_bytes_);
  }

  KvShape shape_;
  KvTypes types_{};
  std::size_t key_head_bytes_ = 0;    // one KV head's keys in a page
  std::size_t value_head_bytes_ = 0;  // ... and its values
  std::size_t page_bytes_ = 0;
  std::size_t n_pages_ = 0;
  detail::ReservedMemory memory_;
  std::vector<std::uint32_t> references_;  // per page: the sequences that use it
  std::vector<std::uint32_t> free_;        // pages nobody uses, the next one last
  std::vector<Sequence> sequences_;
};

}  // namespace smol
