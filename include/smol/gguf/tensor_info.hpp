// One tensor of a GGUF file: its name, type and shape, and a view of its bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "smol/core/ggml_type.hpp"

namespace smol::gguf {

inline constexpr int kMaxDims = 4;

struct TensorInfo {
  std::string_view name;  // points into the file
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  // Innermost (row length) first, as GGUF stores them; unused trailing dims are 1.
  std::array<std::uint64_t, kMaxDims> dims{1, 1, 1, 1};
  std::uint64_t offset = 0;       // relative to the start of the data section
  std::uint64_t file_offset = 0;  // absolute, in the file
  std::uint64_t info_offset = 0;  // where this tensor's record sits in the tensor-info table
  const std::byte* data = nullptr;
  std::size_t bytes = 0;
  std::size_t row_bytes = 0;

  std::uint64_t elements() const noexcept { return dims[0] * dims[1] * dims[2] * dims[3]; }
  std::uint64_t rows() const noexcept { return dims[1] * dims[2] * dims[3]; }
  std::uint64_t row_length() const noexcept { return dims[0]; }
  std::span<const std::byte> span() const noexcept { return {data, bytes}; }
  std::span<const std::uint64_t> shape() const noexcept {
    return std::span<const std::uint64_t>(dims).first(static_cast<std::size_t>(n_dims));
  }
};

}  // namespace smol::gguf
