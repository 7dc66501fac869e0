// The model columns of the report, computed as llama-bench computes them so that a row of
// each tool can be matched: size is the bytes of all tensors (not the file), params
// the number of values in them, and the type name follows llama.cpp's file types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "smol/model/model.hpp"

namespace smol::bench {

struct ModelSummary {
  std::string path;
  std::string description;  // e.g. "smollm3 3B Q4_K - Medium"
  std::uint64_t size_bytes = 0;
  std::uint64_t params = 0;
};

// llama.cpp's names for general.file_type.
inline std::string file_type_name(std::uint32_t file_type) {
  switch (file_type) {
    case 0:
      return "all F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K - Medium";
    case 11:
      return "Q3_K - Small";
    case 12:
      return "Q3_K - Medium";
    case 13:
      return "Q3_K - Large";
    case 14:
      return "Q4_K - Small";
    case 15:
      return "Q4_K - Medium";
    case 16:
      return "Q5_K - Small";
    case 17:
      return "Q5_K - Medium";
    case 18:
      return "Q6_K";
    case 21:
      return "Q2_K - Small";
    case 25:
      return "IQ4_NL - 4.5 bpw";
    case 30:
      return "IQ4_XS - 4.25 bpw";
    case 32:
      return "BF16";
    default:
      return "file type " + std::to_string(file_type);
  }
}

// "3B", "135M": the size class llama.cpp prints, rounded from the actual count.
inline std::string size_class(std::uint64_t params) {
  char text[32];
  const double count = static_cast<double>(params);
  if (count >= 1e9) {
    std::snprintf(text, sizeof text, "%.0fB", count / 1e9);
  } else if (count >= 1e6) {
    std::snprintf(text, sizeof text, "%.0fM", count / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.0fK", count / 1e3);
  }
  return text;
}

inline ModelSummary summarize_model(const Model& model, const std::string& path) {
  ModelSummary summary;
  summary.path = path;
  for (const gguf::TensorInfo& tensor : model.file().tensors()) {
    summary.size_bytes += tensor.bytes;
    summary.params += tensor.elements();
  }
  const auto file_type = model.file().get_optional<std::uint32_t>("general.file_type");
  summary.description = model.config().architecture + " " + size_class(summary.params) +
                        (file_type ? " " + file_type_name(*file_type) : "");
  return summary;
}

}  // namespace smol::bench
