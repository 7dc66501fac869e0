// Rows interleaved at load time: one mechanism, two group sizes. A block type has at most
// one interleaved layout, its group (InterleavedOf<Block>::type): eight rows side by side
// for the K-quants (quant/rows8.hpp's Rows8Of), sixteen for the 32-value types and IQ4_XS
// (quant/rows16.hpp's Rows16Of). Those two headers hold what differs per type: the group
// structs, how rows become groups, and the scalar references of the kernels that read
// them. What follows from a group's type and size lives here, once: which ggml types have
// a copy, which matrices may take it, its bytes, and the repack of one group (independent
// of the others, so model/repacked_weights.hpp runs them over the threads).
#pragma once

#include <cstddef>
#include <type_traits>

#include "smol/core/ggml_type.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

// The interleaved group of a block type (void: none) and its rows per group.
template <class Block>
struct InterleavedOf {
  static constexpr bool kEight = !std::is_void_v<typename Rows8Of<Block>::type>;
  using type =
      std::conditional_t<kEight, typename Rows8Of<Block>::type, typename Rows16Of<Block>::type>;
  static constexpr std::size_t kGroupRows = kEight ? kRowsPerGroup : kRows16;
};

// Calls f(std::type_identity<Block>{}) when `type`'s block has an interleaved layout;
// whether it has.
template <class F>
constexpr bool visit_interleaved_block(GgmlType type, F&& f) {
  return visit_block_with_copy<InterleavedOf>(type, f);
}

// Rows per group of `type`'s copy; 0 where it has none.
constexpr std::size_t interleaved_group_rows(GgmlType type) noexcept {
  std::size_t rows = 0;
  visit_interleaved_block(type, [&]<class Block>(std::type_identity<Block>) {
    rows = InterleavedOf<Block>::kGroupRows;
  });
  return rows;
}

constexpr bool has_interleaved_copy(GgmlType type) noexcept {
  return interleaved_group_rows(type) != 0;
}

// Whether a matrix of `rows` rows of `type` can be copied: the sixteen-row groups pad a
// partial last group (its missing rows' results are dropped), while the eight-row
// kernels write all eight rows of a group, so those copies take whole groups only.
constexpr bool can_interleave(GgmlType type, std::size_t rows) noexcept {
  const std::size_t group = interleaved_group_rows(type);
  return group == kRows16 || (group == kRowsPerGroup && rows % kRowsPerGroup == 0);
}

// Groups in the copy of a `rows`-row matrix of `type`, the last one padded.
constexpr std::size_t interleaved_groups(GgmlType type, std::size_t rows) noexcept {
  const std::size_t group = interleaved_group_rows(type);
  return group == 0 ? 0 : (rows + group - 1) / group;
}

// Bytes of the copy of a rows x cols matrix of `type` (can_interleave): the file's size
// for Q6_K, Q2_K and the 32-value types, a little more where a group unpacks its scales
// (Q4_K 2.8 %, Q5_K 2.3 %, Q3_K 3.6 %, IQ4_XS 1.5 %).
inline std::size_t interleaved_bytes(GgmlType type, std::size_t rows, std::size_t cols) noexcept {
  std::size_t bytes = 0;
  visit_interleaved_block(type, [&]<class Block>(std::type_identity<Block>) {
    bytes = interleaved_groups(type, rows) * (cols / BlockTraits<Block>::values) *
            sizeof(typename InterleavedOf<Block>::type);
  });
  return bytes;
}

// Interleaves group g of a matrix of `type` of `n_rows` rows starting at `rows`,
// `row_bytes` apart, into the copy starting at `copy` (interleaved_bytes bytes).
inline void repack_interleaved_group(GgmlType type, const std::byte* rows, std::size_t row_bytes,
                                     std::size_t n_rows, std::size_t cols, std::size_t g,
                                     std::byte* copy) noexcept {
  visit_interleaved_block(type, [&]<class Block>(std::type_identity<Block>) {
    using Of = InterleavedOf<Block>;
    using Group = typename Of::type;
    const std::size_t nblocks = cols / BlockTraits<Block>::values;
    const std::byte* first_row = rows + g * Of::kGroupRows * row_bytes;
    Group* out = reinterpret_cast<Group*>(copy) + g * nblocks;
    if constexpr (Of::kEight) {
      repack_rows8<Block>(first_row, row_bytes, nblocks, out);
    } else {
      repack_rows16<Block>(first_row, row_bytes, n_rows - g * kRows16, nblocks, out);
    }
  });
}

}  // namespace smol
