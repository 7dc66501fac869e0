// Whether the client of the request being handled has hung up.
//
// cpp-httplib 0.11 (Debian 12's) tells a handler neither its socket nor whether the peer
// has closed it; only a failed write shows it, and a handler that computes before it
// answers (a grammar compiling, a reply generated in one piece) writes nothing until it
// is done. So the watch finds the connection's socket itself: the open socket of this
// process whose two ends are the request's addresses (Linux's /proc/self/fd), found once,
// then peeked at without blocking. A peer that closed its end reads as end-of-file. The
// handler runs on the connection's own thread, which owns the socket until the handler
// returns, so the descriptor cannot be closed and reused under the watch.
//
// A client that shuts down only its sending half after the request (`nc -N`, some
// proxies) reads the same as one that left: its reply is cancelled. HTTP clients keep
// their connection open for the answer, and a server cannot tell the two apart without
// writing, which an unstreamed reply cannot do before it is ready.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>

#include <httplib.h>

namespace server {

class ClientWatch {
 public:
  explicit ClientWatch(const httplib::Request& request) : request_(&request) {}

  // True once the client has closed its end. At most one system call per `kEvery`,
  // however often it is asked (a compilation asks every few milliseconds).
  bool gone() {
    if (gone_) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < kEvery) return false;
    last_ = now;
    if (!searched_) {
      fd_ = find_socket();
      searched_ = true;
    }
    if (fd_ < 0) return false;
    char byte = 0;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    gone_ = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    return gone_;
  }

 private:
  static constexpr auto kEvery = std::chrono::milliseconds(20);

  // An address and port as text, the way httplib writes them into the request.
  static bool same_end(const sockaddr_storage& address, const std::string& host, int port) {
    char text[INET6_ADDRSTRLEN] = {};
    int found_port = -1;
    if (address.ss_family == AF_INET) {
      const auto& a = reinterpret_cast<const sockaddr_in&>(address);
      ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
      found_port = ntohs(a.sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
      ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
      found_port = ntohs(a.sin6_port);
    } else {
      return false;
    }
    return found_port == port && host == text;
  }

  int find_socket() const {
    DIR* fds = ::opendir("/proc/self/fd");
    if (fds == nullptr) return -1;
    int found = -1;
    while (const dirent* entry = ::readdir(fds)) {
      char* end = nullptr;
      const long fd = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0') continue;
      struct stat status {};
      if (::fstat(static_cast<int>(fd), &status) != 0 || !S_ISSOCK(status.st_mode)) continue;
      sockaddr_storage peer{}, local{};
      socklen_t peer_size = sizeof peer, local_size = sizeof local;
      if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_size) !=
              0 ||
          ::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) !=
              0) {
        continue;
      }
      if (same_end(peer, request_->remote_addr, request_->remote_port) &&
          same_end(local, request_->local_addr, request_->local_port)) {
        found = static_cast<int>(fd);
        break;
      }
    }
    ::closedir(fds);
    return found;
  }

  const httplib::Request* request_;
  int fd_ = -1;
  bool searched_ = false;
  bool gone_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace server
