// Reading a text file named on the command line (-f), with one clear line for each way
// that can fail: an ifstream opens a directory without complaint and then throws
// "basic_filebuf::underflow error" from the first read.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>
#include <system_error>

#include "smol/core/error.hpp"

namespace smol::cli {

// The bytes of the file at `path`, exactly; throws smol::Error naming the path.
inline std::string read_text_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) smol::fail(path, ": no such file");
  if (fs::is_directory(status)) smol::fail(path, ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail(path, ": cannot open it (", std::strerror(errno), ")");
  try {
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) smol::fail(path, ": cannot read it");
    return text;
  } catch (const std::ios_base::failure& failure) {
    smol::fail(path, ": cannot read it (", failure.code().message(), ")");
  }
}

}  // namespace smol::cli
