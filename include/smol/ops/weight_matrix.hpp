// A weight matrix as the kernels see it: a view of `rows` rows of `cols` values
// in some ggml type, straight out of the memory map (nothing copied), and optionally
// an interleaved copy made at load time that the kernels prefer when it is there.
#pragma once

#include <cstddef>
#include <string_view>

#include "smol/core/ggml_type.hpp"

namespace smol {

struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const std::byte* data = nullptr;
  std::size_t rows = 0;       // output features (GGUF dims[1])
  std::size_t cols = 0;       // input features, the row length (GGUF dims[0])
  std::size_t row_bytes = 0;  // bytes of one row: ggml_row_bytes(type, cols)
  std::string_view name;      // for error messages
  // The same rows interleaved at load time, or nullptr; the layout is the type's. The
  // K-quants: groups of 8 (rows / 8 groups of cols / 256 blocks of its Rows8Of layout,
  // quant/rows8.hpp). The 32-value types and IQ4_XS: groups of 16, the last one padded
  // with zero rows (cols / the type's block values blocks of its Rows16Of layout per
  // group, quant/rows16.hpp). Decode and prefill read it where it is made (Model's
  // `repack` option).
  const std::byte* rows8 = nullptr;

  const std::byte* row(std::size_t r) const noexcept { return data + r * row_bytes; }
};

}  // namespace smol
