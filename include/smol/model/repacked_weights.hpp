// RepackedWeights: load-time interleaved copies of a model's Q4_K, Q5_K and Q6_K matrices
// (eight rows per group) and Q4_0, Q4_1, IQ4_NL, IQ4_XS and Q8_0 matrices (sixteen).
//
// The memory map stays the source of truth: each copy is made from the file's blocks
// (quant/rows8.hpp, quant/rows16.hpp) and hung on the matrix view as `rows8`, which the
// kernels prefer. The file's pages of a copied matrix are released afterwards, so resident
// memory holds the weights once, not twice; a path that still reads them (reference
// mode) faults them back in from the page cache.
#pragma once

#include <oneapi/tbb/parallel_for.h>

#include <cstddef>
#include <vector>

#include "smol/core/huge_page_buffer.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/weights.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"

namespace smol {

// The bytes of `w`'s interleaved copy: eight-row groups for Q4_K, Q5_K and Q6_K, sixteen-row
// ones for Q4_0, Q4_1, IQ4_NL, IQ4_XS and Q8_0 (what decode reads instead of the file's
// rows).
inline std::size_t repacked_bytes(const WeightMatrix& w) noexcept {
  return has_rows16_copy(w.type) ? rows16_bytes(w.type, w.rows, w.cols)
                                 : rows8_bytes(w.type, w.rows, w.cols);
}

// Which layouts to make: the K-quants' eight-row copies (quant/rows8.hpp's Rows8Of:
// Q4_K, Q5_K, Q6_K), the sixteen-row ones
// (quant/rows16.hpp's Rows16Of: Q4_0, Q4_1, IQ4_NL, IQ4_XS, Q8_0).
struct RepackLayouts {
  bool rows8 = true;
  bool rows16 = true;
};

class RepackedWeights {
 public:
  RepackedWeights() = default;

  // Repacks every Q4_K, Q5_K and Q6_K matrix of `weights` whose rows come in whole groups of
  // 8 (layouts.rows8) and every Q4_0, Q4_1, IQ4_NL, IQ4_XS and Q8_0 matrix
  // (layouts.rows16; a partial last group is padded), and points its view at the copy. Matrices of
  // other types are left as they are.
  RepackedWeights(ModelWeights& weights, const gguf::GgufFile& file, RepackLayouts layouts = {})
      : layouts_(layouts) {
    std::vector<WeightMatrix*> matrices;
    for (LayerWeights& layer : weights.layers) {
      for (WeightMatrix* w : {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output,
                              &layer.ffn_gate, &layer.ffn_up, &layer.ffn_down}) {
        if (repackable(*w)) matrices.push_back(w);
      }
    }
    // A tied LM head is a view of the embedding table: the head gets the copy, and
    // embed() goes on reading one row per token from the map.
    if (repackable(weights.output)) matrices.push_back(&weights.output);

    std::size_t total = 0;
    for (const WeightMatrix* w : matrices) total += copy_bytes(*w);
    buffer_ = HugePageBuffer(total);
    std::byte* next = buffer_.data();
    for (WeightMatrix* w : matrices) {
      repack(*w, next, file);
      next += copy_bytes(*w);
    }
    matrices_ = matrices.size();
  }

  std::size_t matrices() const noexcept { return matrices_; }
  std::size_t bytes() const noexcept { return buffer_.size(); }

 private:
  bool repackable(const WeightMatrix& w) const noexcept {
    if (has_rows16_copy(w.type)) return layouts_.rows16 && w.rows > 0;
    return layouts_.rows8 && has_rows8_copy(w.type) && w.rows % kRowsPerGroup == 0 && w.rows > 0;
  }
  // Each copy starts on a cache line (BlockQ4KRows8 wants 32 bytes; a Q6_K copy's size
  // is only a multiple of 16).
  static std::size_t copy_bytes(const WeightMatrix& w) noexcept {
    return (repacked_bytes(w) + 63) / 64 * 64;
  }

  static void repack(WeightMatrix& w, std::byte* out, const gguf::GgufFile& file) {
    if (has_rows16_copy(w.type)) {
      tbb::parallel_for(std::size_t{0}, (w.rows + kRows16 - 1) / kRows16, [&](std::size_t g) {
        repack_rows16_group(w.type, w.data, w.row_bytes, w.rows, w.cols, g, out);
      });
    } else {
      tbb::parallel_for(std::size_t{0}, w.rows / kRowsPerGroup, [&](std::size_t g) {
        repack_rows8_group(w.type, w.data, w.row_bytes, w.cols, g, out);
      });
    }
    file.release_pages(w.data, w.rows * w.row_bytes);
    w.rows8 = out;
  }

  RepackLayouts layouts_;
  HugePageBuffer buffer_;
  std::size_t matrices_ = 0;
};

}  // namespace smol
