// Reads the JSON files the tests compare against (llama.cpp's goldens, Hugging Face's
// tokenizer.json, the conformance corpus) with nlohmann-json, the project's one JSON
// library. A file that is missing or not JSON fails with its path in the message.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "smol/core/error.hpp"

namespace smol::test {

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail(path, ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& error) {
    smol::fail(path, ": ", error.what());
  }
}

}  // namespace smol::test
