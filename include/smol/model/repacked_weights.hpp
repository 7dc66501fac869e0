// RepackedWeights: load-time interleaved copies of a model's Q4_K and Q6_K matrices.
//
// The memory map stays the source of truth: each copy is made from the file's blocks
// (quant/rows8.hpp) and hung on the matrix view as `rows8`, which the kernels
// prefer. The file's pages of a copied matrix are released afterwards, so resident
// memory holds the weights once, not twice; a path that still reads them (reference
// mode) faults them back in from the page cache.
#pragma once

#include <oneapi/tbb/parallel_for.h>

#include <cstddef>
#include <vector>

#include "smol/core/huge_page_buffer.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/weights.hpp"
#include "smol/quant/rows8.hpp"

namespace smol {

class RepackedWeights {
 public:
  RepackedWeights() = default;

  // Repacks every Q4_K and Q6_K matrix of `weights` whose rows come in whole groups of
  // 8 and points its view at the copy. Matrices of other types are left as they are.
  RepackedWeights(ModelWeights& weights, const gguf::GgufFile& file) {
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
  static bool repackable(const WeightMatrix& w) noexcept {
    return (w.type == GgmlType::Q4_K || w.type == GgmlType::Q6_K) && w.rows % kRowsPerGroup == 0 &&
           w.rows > 0;
  }
  // Each copy starts on a cache line (BlockQ4KRows8 wants 32 bytes; a Q6_K copy's size
  // is only a multiple of 16).
  static std::size_t copy_bytes(const WeightMatrix& w) noexcept {
    return (rows8_bytes(w.type, w.rows, w.cols) + 63) / 64 * 64;
  }

  static void repack(WeightMatrix& w, std::byte* out, const gguf::GgufFile& file) {
    tbb::parallel_for(std::size_t{0}, w.rows / kRowsPerGroup, [&](std::size_t g) {
      repack_rows8_group(w.type, w.data, w.row_bytes, w.cols, g, out);
    });
    file.release_pages(w.data, w.rows * w.row_bytes);
    w.rows8 = out;
  }

  HugePageBuffer buffer_;
  std::size_t matrices_ = 0;
};

}  // namespace smol
