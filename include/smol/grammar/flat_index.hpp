// FlatIndex: a hash table from 64-bit keys to 32-bit values, in three flat arrays (open
// addressing, linear probing), emptied in constant time.
//
// Why hand-written: the recognizer (recognizer.hpp) interns a (position, parent) pair for
// every stack frame it makes and remembers every pair it has expanded in a step; an
// ambiguous grammar's step makes millions of them before its budget stops it. With
// std::unordered_map each entry is a heap node of its own (about 50 bytes and an
// allocation); here it is 16 bytes of arrays at most three quarters full, and a lookup
// touches one or two cache lines: an ambiguous grammar's step runs about three times as
// fast (bench/HISTORY.md, "A grammar's budgets and the recognizer's flat tables"). No library
// Debian packages offers such a map without a larger dependency than this page.
//
// clear() is a generation count: a slot belongs to the table only when its generation is
// the table's, so emptying a table that held a million pairs costs nothing, which the
// per-step set of expanded pairs relies on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace smol {

class FlatIndex {
 public:
  // The value for `key`; when absent, `value` is stored and returned. `second`: whether
  // it was stored.
  std::pair<std::uint32_t, bool> emplace(std::uint64_t key, std::uint32_t value) {
    if ((size_ + 1) * 4 > keys_.size() * 3) grow();
    std::size_t slot = home(key);
    while (generations_[slot] == generation_) {
      if (keys_[slot] == key) return {values_[slot], false};
      slot = (slot + 1) & mask_;
    }
    keys_[slot] = key;
    values_[slot] = value;
    generations_[slot] = generation_;
    ++size_;
    return {value, true};
  }

  // Forgets every entry, keeping the arrays.
  void clear() {
    size_ = 0;
    if (++generation_ == 0) {  // after 4 billion clears: start the count again
      std::fill(generations_.begin(), generations_.end(), 0u);
      generation_ = 1;
    }
  }

  std::size_t size() const { return size_; }
  std::size_t memory_bytes() const {
    return keys_.capacity() * sizeof(std::uint64_t) +
           (values_.capacity() + generations_.capacity()) * sizeof(std::uint32_t);
  }

 private:
  std::size_t home(std::uint64_t key) const {
    // splitmix64's finalizer: positions and parents are small, dense numbers.
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return static_cast<std::size_t>(key) & mask_;
  }

  void grow() {
    const std::size_t capacity = std::max<std::size_t>(64, keys_.size() * 2);
    std::vector<std::uint64_t> keys(capacity);
    std::vector<std::uint32_t> values(capacity), generations(capacity, 0u);
    std::swap(keys, keys_);
    std::swap(values, values_);
    std::swap(generations, generations_);
    const std::uint32_t live = generation_;
    mask_ = capacity - 1;
    generation_ = 1;
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (generations[i] == live) emplace(keys[i], values[i]);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> values_;
  std::vector<std::uint32_t> generations_;  // a slot is in use when it equals generation_
  std::uint32_t generation_ = 1;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace smol
