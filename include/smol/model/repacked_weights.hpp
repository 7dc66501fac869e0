// RepackedWeights: load-time copies of a model's weight matrices in huge pages, which the
// kernels read instead of the memory map. The K-quants' matrices interleaved by eight
// rows, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q8_0 and MXFP4 by sixteen; every other matrix
// (floats, and those whose interleaved copy is not made) copied in the file's order.
//
// Why the plain copy: a file's page cache comes in 4 KB pages, so a weight pass over the map
// misses the TLB every 4 KB; in huge pages the same kernels decode and prefill the 3B Q2_K
// and Q3_K_M files faster (bench/HISTORY.md, "Matrices without an interleaved copy copied
// into huge pages").
//
// The memory map stays the source of truth: each copy is made from the file's blocks
// (quant/interleaved_rows.hpp, or the bytes as they are) and hung on the matrix view
// (`rows8` for an interleaved copy, `data` for a plain one). The file's pages of a copied
// matrix are released afterwards, so resident memory holds the weights once, not twice; a
// path that still reads them (reference mode, embed() on a tied LM head) faults them back
// in from the page cache.
#pragma once

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/huge_page_buffer.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/weights.hpp"
#include "smol/quant/interleaved_rows.hpp"

namespace smol {

// The bytes of `w`'s interleaved copy: eight-row groups for the K-quants, sixteen-row
// ones for the 32-value types and IQ4_XS (what decode reads instead of the file's rows).
inline std::size_t repacked_bytes(const WeightMatrix& w) noexcept {
  return interleaved_bytes(w.type, w.rows, w.cols);
}

// Which layouts to make: the K-quants' eight-row copies (quant/rows8.hpp's Rows8Of:
// Q4_K, Q5_K, Q6_K, Q2_K, Q3_K), the sixteen-row ones
// (quant/rows16.hpp's Rows16Of: the 32-value types, IQ4_XS), and the file's order
// in huge pages for every matrix that gets neither.
struct RepackLayouts {
  bool rows8 = true;
  bool rows16 = true;
  bool file_order = true;
  // Types with an eight-row layout left in the file's order all the same (the chosen
  // set has no kernel of its own for their copy: model/model.hpp's
  // rows8_types_without_kernels).
  std::vector<GgmlType> rows8_left_out{};
};

class RepackedWeights {
 public:
  RepackedWeights() = default;

  // Repacks every K-quant matrix of `weights` whose rows come in whole groups of 8
  // (layouts.rows8, but the types it leaves out) and every 32-value-type or IQ4_XS
  // matrix (layouts.rows16; a partial last group is padded), copies every other one as
  // it is (layouts.file_order), and points its view at the copy.
  // `cancel` is polled between matrices (throws Cancelled).
  RepackedWeights(ModelWeights& weights, const gguf::GgufFile& file, RepackLayouts layouts = {},
                  const CancelCheck& cancel = {})
      : layouts_(layouts) {
    std::vector<WeightMatrix*> matrices;
    for (LayerWeights& layer : weights.layers) {
      for (WeightMatrix* w :
           {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
            &layer.ffn_up, &layer.ffn_down, &layer.ffn_gate_inp}) {
        if (copy_of(*w) != Copy::none) matrices.push_back(w);
      }
      // Each expert's matrices are copied on their own, as the views they are.
      for (auto* experts : {&layer.ffn_gate_exps, &layer.ffn_up_exps, &layer.ffn_down_exps}) {
        for (WeightMatrix& w : *experts) {
          if (copy_of(w) != Copy::none) matrices.push_back(&w);
        }
      }
    }
    // A tied LM head is a view of the embedding table: the head gets the copy, and
    // embed() goes on reading one row per token from the map.
    if (copy_of(weights.output) != Copy::none) matrices.push_back(&weights.output);

    std::size_t total = 0;
    for (const WeightMatrix* w : matrices) total += copy_bytes(*w);
    buffer_ = HugePageBuffer(total);
    std::byte* next = buffer_.data();
    for (WeightMatrix* w : matrices) {
      cancel.throw_if_requested();
      if (copy_of(*w) == Copy::file_order) {
        copy_file_order(*w, next, file);
        ++file_order_matrices_;
      } else {
        repack(*w, next, file);
        ++interleaved_matrices_;
      }
      next += copy_bytes(*w);
    }
  }

  // Matrices copied interleaved (eight or sixteen rows per group), and in the file's order.
  std::size_t matrices() const noexcept { return interleaved_matrices_; }
  std::size_t file_order_matrices() const noexcept { return file_order_matrices_; }
  std::size_t bytes() const noexcept { return buffer_.size(); }

 private:
  enum class Copy { none, interleaved, file_order };

  Copy copy_of(const WeightMatrix& w) const noexcept {
    if (w.rows == 0) return Copy::none;
    const std::size_t group = interleaved_group_rows(w.type);
    const bool wanted = group == kRows16 ? layouts_.rows16
                                         : group == kRowsPerGroup && layouts_.rows8 &&
                                               std::find(layouts_.rows8_left_out.begin(),
                                                         layouts_.rows8_left_out.end(),
                                                         w.type) == layouts_.rows8_left_out.end();
    if (wanted && can_interleave(w.type, w.rows)) return Copy::interleaved;
    return layouts_.file_order ? Copy::file_order : Copy::none;
  }
  // Each copy starts on a cache line (BlockQ4KRows8 wants 32 bytes; a Q6_K copy's size
  // is only a multiple of 16).
  std::size_t copy_bytes(const WeightMatrix& w) const noexcept {
    const std::size_t bytes =
        copy_of(w) == Copy::file_order ? w.rows * w.row_bytes : repacked_bytes(w);
    return (bytes + 63) / 64 * 64;
  }

  // The rows as they are, in slices of about 1 MiB over the threads.
  static void copy_file_order(WeightMatrix& w, std::byte* out, const gguf::GgufFile& file) {
    const std::size_t slice_rows = std::max<std::size_t>(1, (std::size_t{1} << 20) / w.row_bytes);
    tbb::parallel_for(std::size_t{0}, (w.rows + slice_rows - 1) / slice_rows, [&](std::size_t s) {
      const std::size_t first = s * slice_rows, rows = std::min(slice_rows, w.rows - first);
      std::memcpy(out + first * w.row_bytes, w.row(first), rows * w.row_bytes);
    });
    file.release_pages(w.data, w.rows * w.row_bytes);
    w.data = out;
  }

  static void repack(WeightMatrix& w, std::byte* out, const gguf::GgufFile& file) {
    tbb::parallel_for(std::size_t{0}, interleaved_groups(w.type, w.rows), [&](std::size_t g) {
      repack_interleaved_group(w.type, w.data, w.row_bytes, w.rows, w.cols, g, out);
    });
    file.release_pages(w.data, w.rows * w.row_bytes);
    w.rows8 = out;
  }

  RepackLayouts layouts_;
  HugePageBuffer buffer_;
  std::size_t interleaved_matrices_ = 0, file_order_matrices_ = 0;
};

}  // namespace smol
