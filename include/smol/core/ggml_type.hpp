// The ggml tensor type ids that GGUF files use, and the size of their blocks.
//
// This table is the only place that knows how many bytes a row of a given type
// takes; the GGUF reader validates tensor sizes with it and the quant layer
// checks its block structs against it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace smol {

enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,  // OCP microscaling FP4 (gpt-oss's experts)
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  std::size_t block_values;  // values per block (1 for plain scalar types)
  std::size_t block_bytes;   // bytes per block
};

inline constexpr std::array<GgmlTypeInfo, 32> kGgmlTypes{{
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},
    {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},
    {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},
    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},
    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},
    {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},
    {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},
    {GgmlType::MXFP4, "MXFP4", 32, 17},
}};

// Info for a raw type id from a file, or nothing when the id is unknown.
constexpr std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t id) noexcept {
  for (const auto& info : kGgmlTypes) {
    if (static_cast<std::uint32_t>(info.type) == id) return info;
  }
  return std::nullopt;
}

constexpr GgmlTypeInfo ggml_type_info(GgmlType type) noexcept {
  return *ggml_type_info(static_cast<std::uint32_t>(type));
}

constexpr std::string_view ggml_type_name(GgmlType type) noexcept {
  return ggml_type_info(type).name;
}

// Bytes of one row of `values` elements; the caller checks divisibility first.
constexpr std::size_t ggml_row_bytes(GgmlType type, std::size_t values) noexcept {
  const auto info = ggml_type_info(type);
  return values / info.block_values * info.block_bytes;
}

}  // namespace smol
