// A scratch directory that belongs to this test process alone.
//
// CTest runs the suites in parallel, and every suite once per instruction set, so two
// processes of the same suite can run at the same moment: a fixed path such as
// build/tests/data/download would let one delete the other's files. Every test that
// writes a file writes it under scratch_dir(), which is named after the process id
// and removed with everything in it when the process ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace smol::test {

class ScratchDirectory {
 public:
  ScratchDirectory()
      : path_(std::filesystem::path(SMOL_TEST_DATA_DIR) / "scratch" /
              ("pid-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);  // a stale one from a process long gone
    std::filesystem::create_directories(path_);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// Created on first use, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const ScratchDirectory directory;
  return directory.path();
}

}  // namespace smol::test
