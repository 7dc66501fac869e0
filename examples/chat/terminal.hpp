// The terminal side of smol-chat: Ctrl-C, reading lines, and ANSI styling.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace chat {

// Ctrl-C sets this flag; whatever runs (a reply, a download) polls it and stops.
// A signal handler can only reach a global, and a lock-free atomic is safe there.
inline std::atomic<bool> interrupt_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

inline void on_interrupt(int) {
  interrupt_requested.store(true);
}

// Without SA_RESTART, so a blocking read at the prompt returns EINTR and the prompt
// can react to Ctrl-C instead of the process dying.
inline void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = &on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
}

inline bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

// Styling only for a terminal, and never when NO_COLOR is set (no-color.org).
inline bool use_color(int fd) {
  return is_terminal(fd) && std::getenv("NO_COLOR") == nullptr;
}

constexpr std::string_view kDim = "\x1b[2m";
constexpr std::string_view kBold = "\x1b[1m";
constexpr std::string_view kReset = "\x1b[0m";

enum class LineStatus { line, end_of_input, interrupted };

struct ReadLine {
  LineStatus status;
  std::string text;  // without the newline
};

inline ReadLine read_line(std::FILE* in) {
  char* buffer = nullptr;
  std::size_t capacity = 0;
  errno = 0;
  const ssize_t length = ::getline(&buffer, &capacity, in);
  ReadLine result{LineStatus::line, {}};
  if (length < 0) {
    const bool interrupted = errno == EINTR || interrupt_requested.load();
    std::clearerr(in);
    result.status = interrupted ? LineStatus::interrupted : LineStatus::end_of_input;
  } else {
    result.text.assign(buffer, static_cast<std::size_t>(length));
    while (!result.text.empty() && (result.text.back() == '\n' || result.text.back() == '\r')) {
      result.text.pop_back();
    }
  }
  std::free(buffer);
  return result;
}

}  // namespace chat
