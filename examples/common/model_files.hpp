// Where the programs find models: $SMOL_MODELS (default ~/.cache/smol) holds the
// default SmolLM3-3B file when the user has it, and the small demo model with random
// weights that a first run falls back on, written once and reused.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <unistd.h>

#include "smol/testing/synthetic.hpp"

namespace smol::cli {

namespace fs = std::filesystem;

constexpr std::string_view kDefaultModelFile = "SmolLM3-3B-Q4_K_M.gguf";
constexpr std::string_view kDemoModelFile = "smol-demo-random.gguf";

inline fs::path models_directory() {
  if (const char* dir = std::getenv("SMOL_MODELS"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home != '\0' ? home : ".") / ".cache" / "smol";
}

// Writes the demo model once (a few seconds) and reuses it afterwards; `program` names
// the caller in the note it prints.
inline fs::path ensure_demo_model(const fs::path& directory, std::string_view program) {
  const fs::path demo = directory / kDemoModelFile;
  if (fs::exists(demo)) return demo;
  std::fprintf(stderr, "%.*s: writing a small demo model to %s\n", static_cast<int>(program.size()),
               program.data(), demo.c_str());
  const fs::path temporary = demo.string() + ".tmp." + std::to_string(::getpid());
  smol::SyntheticSpec spec = smol::synthetic_preset("tiny");
  spec.name = "smol-demo-random";
  smol::write_synthetic_model(spec, temporary.string());
  fs::rename(temporary, demo);
  return demo;
}

}  // namespace smol::cli
