// The terminal side of smol-chat: Ctrl-C, reading lines (edited, with history, at a
// terminal), and ANSI styling.
#pragma once

#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cwchar>
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

// The prompt at a terminal: line editing (arrows, Home/End, Ctrl-A/E/W/U/K, Emacs
// bindings) and history (Up/Down) from libedit, a well-kept library, rather than
// escape sequences decoded here by hand. Its input goes through next_char() below,
// which waits on stdin and the Ctrl-C pipe together, so Ctrl-C at the prompt still
// returns at once instead of being lost inside libedit's read().
class LineEditor {
 public:
  LineEditor(const char* program, bool color) : color_(color) {
    std::setlocale(LC_CTYPE, "");  // so UTF-8 input is decoded as characters
    editor_ = el_init(program, stdin, stdout, stderr);
    history_ = history_init();
    if (editor_ == nullptr || history_ == nullptr) return;
    HistEvent event;
    history(history_, &event, H_SETSIZE, 1000);
    history(history_, &event, H_SETUNIQUE, 1);
    el_set(editor_, EL_EDITOR, "emacs");
    el_set(editor_, EL_HIST, history, history_);
    el_set(editor_, EL_CLIENTDATA, this);
    el_set(editor_, EL_PROMPT_ESC, &LineEditor::prompt, '\1');
    el_set(editor_, EL_GETCFN, &LineEditor::next_char);
    el_source(editor_, nullptr);  // the user's ~/.editrc, as every libedit program reads
  }
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;
  ~LineEditor() {
    if (editor_ != nullptr) el_end(editor_);
    if (history_ != nullptr) history_end(history_);
  }

  bool ready() const { return editor_ != nullptr && history_ != nullptr; }

  // One edited line; a line worth recalling is added to the history.
  ReadLine read() {
    interrupted_ = false;
    int count = 0;
    const char* line = el_gets(editor_, &count);
    if (interrupted_) {
      clear_interrupts();
      return {LineStatus::interrupted, {}};
    }
    if (line == nullptr || count <= 0) return {LineStatus::end_of_input, {}};
    std::string text(line, static_cast<std::size_t>(count));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (!text.empty()) {
      HistEvent event;
      history(history_, &event, H_ENTER, text.c_str());
    }
    return {LineStatus::line, std::move(text)};
  }

 private:
  // "> " in bold; \1 brackets the escape codes so libedit does not count them as
  // columns.
  static char* prompt(EditLine* editor) {
    LineEditor* self = owner(editor);
    static char plain[] = "> ";
    static char bold[] = "\1\x1b[1m\1> \1\x1b[0m\1";
    return self->color_ ? bold : plain;
  }

  // libedit's character source: one wide character decoded from stdin's UTF-8 bytes,
  // or -1 (ending el_gets) when Ctrl-C was pressed or stdin failed, 0 at its end.
  static int next_char(EditLine* editor, wchar_t* out) {
    LineEditor* self = owner(editor);
    std::mbstate_t state{};
    for (;;) {
      pollfd watched[2] = {{STDIN_FILENO, POLLIN, 0}, {interrupt_pipe[0], POLLIN, 0}};
      if (::poll(watched, interrupt_pipe[0] >= 0 ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;  // the handler has written to the pipe
        return -1;
      }
      if ((watched[1].revents & POLLIN) != 0) {
        self->interrupted_ = true;
        return -1;
      }
      char byte = 0;
      const ssize_t got = ::read(STDIN_FILENO, &byte, 1);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return got == 0 ? 0 : -1;
      wchar_t wide = 0;
      const std::size_t used = std::mbrtowc(&wide, &byte, 1, &state);
      if (used == static_cast<std::size_t>(-2)) continue;  // more bytes of this character
      if (used == static_cast<std::size_t>(-1)) {          // not UTF-8: take the byte
        state = {};
        wide = static_cast<unsigned char>(byte);
      }
      *out = wide;
      return 1;
    }
  }

  static LineEditor* owner(EditLine* editor) {
    void* self = nullptr;
    el_get(editor, EL_CLIENTDATA, &self);
    return static_cast<LineEditor*>(self);
  }

  EditLine* editor_ = nullptr;
  History* history_ = nullptr;
  bool color_ = false;
  bool interrupted_ = false;
};

}  // namespace chat
