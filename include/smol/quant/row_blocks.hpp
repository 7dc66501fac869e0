// The checks every whole-row (de)quantizer makes before touching memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"

namespace smol {

// Blocks in a row of `n` values of `type`. Throws smol::Error, naming `caller`, for an
// unknown type, one the caller does not handle (`handled` false), or an `n` that is not
// a whole number of blocks.
inline std::size_t row_blocks(std::string_view caller, GgmlType type, bool handled, std::size_t n) {
  const auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (!info) fail(caller, ": unknown ggml type id ", static_cast<std::uint32_t>(type));
  if (!handled) fail(caller, ": type ", info->name, " is not supported");
  if (n % info->block_values != 0) {
    fail(caller, ": ", n, " values are not a whole number of ", info->name, " blocks of ",
         info->block_values);
  }
  return n / info->block_values;
}

}  // namespace smol
