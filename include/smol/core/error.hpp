// smol::Error: the one exception type of the library.
//
// Every failure caused by input (a file, a flag, a prompt) is reported by throwing
// smol::Error with a message that names what is wrong and where (file offset,
// key, tensor name). Programming errors inside smol are asserts, not Errors.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace smol {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable into one string: the message builder for Error.
// (GCC 12's libstdc++ has no std::format yet.)
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(cat(parts...));
}

}  // namespace smol
