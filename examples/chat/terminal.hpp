// The terminal side of smol-chat: Ctrl-C, reading lines, and ANSI styling.
#pragma once

#include <fcntl.h>
#include <poll.h>
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

// ...and writes a byte into this pipe, which the line reader polls beside stdin. A flag
// alone cannot wake a reader: the signal may come just before it blocks in read(), or
// land on a oneTBB worker thread, where no read is interrupted. A byte cannot be missed.
inline int interrupt_pipe[2] = {-1, -1};

inline void on_interrupt(int) {
  interrupt_requested.store(true);
  if (interrupt_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(interrupt_pipe[1], &byte, 1);
  }
}

// Ctrl-C then stops a reply or wakes the prompt instead of killing the process.
inline void catch_interrupts() {
  if (::pipe2(interrupt_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
    interrupt_pipe[0] = interrupt_pipe[1] = -1;
  struct sigaction action {};
  action.sa_handler = &on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
}

// Forgets the Ctrl-C presses so far (a reply's, already acted on).
inline void clear_interrupts() {
  interrupt_requested.store(false);
  char bytes[64];
  while (interrupt_pipe[0] >= 0 && ::read(interrupt_pipe[0], bytes, sizeof bytes) > 0) {
  }
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

// One line of standard input, read with read(2) rather than stdio so that poll() sees
// every byte not yet returned; a Ctrl-C (since the last clear_interrupts) returns
// `interrupted` and drops the unfinished line, as the terminal itself does.
inline ReadLine read_line() {
  static std::string pending;  // bytes read past the last line returned
  for (;;) {
    if (const std::size_t end = pending.find('\n'); end != std::string::npos) {
      ReadLine result{LineStatus::line, pending.substr(0, end)};
      pending.erase(0, end + 1);
      if (!result.text.empty() && result.text.back() == '\r') result.text.pop_back();
      return result;
    }
    pollfd watched[2] = {{STDIN_FILENO, POLLIN, 0}, {interrupt_pipe[0], POLLIN, 0}};
    if (::poll(watched, interrupt_pipe[0] >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;  // the handler has written to the pipe
      return {LineStatus::end_of_input, {}};
    }
    if ((watched[1].revents & POLLIN) != 0) {
      clear_interrupts();
      pending.clear();
      return {LineStatus::interrupted, {}};
    }
    if ((watched[0].revents & POLLNVAL) != 0) return {LineStatus::end_of_input, {}};
    if ((watched[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    char bytes[4096];
    const ssize_t got = ::read(STDIN_FILENO, bytes, sizeof bytes);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {  // end of input: a last line without a newline still counts
      if (pending.empty()) return {LineStatus::end_of_input, {}};
      ReadLine result{LineStatus::line, std::move(pending)};
      pending.clear();
      return result;
    }
    pending.append(bytes, static_cast<std::size_t>(got));
  }
}

}  // namespace chat
