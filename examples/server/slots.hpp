// llama-server's /slots, on smol's cached conversations: GET /slots lists them, and
// POST /slots/{id}?action=save|restore|erase saves one to a session file under
// --slot-save-path, restores one, or frees its pages.
//
// smol has no slot a conversation stays in: each request takes whichever sequence is
// free, and a finished conversation's K/V stays in the KV pool as a prompt cache
// (generate/scheduler.hpp). So slot N names the N-th most recently used cached
// conversation (0: the one that just finished), and a restored file becomes slot 0, which
// the next request that starts with its tokens continues (its cached_tokens count them).
// The file is smol's session format (model/session_file.hpp), the one smol-chat's
// --prompt-cache writes: a file saved for another model, KV type or RoPE setting is
// refused by name.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <utility>

#include "service.hpp"
#include "smol/core/mapped_file.hpp"
#include "smol/model/session_file.hpp"

namespace server {

// A file name under --slot-save-path: one name, no directories, nothing hidden.
inline std::filesystem::path slot_file(const State& state, const Json& body) {
  if (state.options.slot_save_path.empty()) {
    throw ApiError(501, "slot save and restore need --slot-save-path DIR", "not_supported_error");
  }
  const Json* name = smol::serve::detail::field(body, "filename");
  if (name == nullptr || !name->is_string()) {
    throw smol::serve::invalid_request("filename must be a string", "filename");
  }
  const std::string text = name->get<std::string>();
  const bool plain = !text.empty() && text.size() <= 255 && text.front() != '.' &&
                     text.find_first_of("/\\") == std::string::npos &&
                     std::all_of(text.begin(), text.end(),
                                 [](char c) { return static_cast<unsigned char>(c) >= 0x20; });
  if (!plain) {
    throw smol::serve::invalid_request(
        "filename must be a plain file name (no directories, not starting with a dot)", "filename");
  }
  return std::filesystem::path(state.options.slot_save_path) / text;
}

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// GET /slots: the cached conversations, most recently used first.
inline void list_slots(State& state, const httplib::Request&, httplib::Response& res) {
  Service& service = ready_service(state);
  const std::size_t context = service.context_length();
  const Json slots = service.engine_thread.call([&](smol::Scheduler& scheduler) {
    Json list = Json::array();
    for (std::size_t i = 0; i < scheduler.cached_sequences(); ++i) {
      list.push_back({{"id", i},
                      {"n_ctx", context},
                      {"is_processing", false},
                      {"n_tokens", scheduler.cached_tokens(i).size()}});
    }
    return list;
  });
  send_json(res, slots);
}

// POST /slots/{id}?action=save|restore|erase, llama-server's replies.
inline void slot_action(State& state, const httplib::Request& req, httplib::Response& res) {
  Service& service = ready_service(state);
  const std::size_t id = std::stoul(std::string(req.matches[1]));
  const std::string action = req.get_param_value("action");
  const Json body = req.body.empty() ? Json::object() : smol::serve::detail::parse_body(req.body);
  const smol::SessionFingerprint fingerprint =
      smol::session_fingerprint(service.model, service.engine.pool().types());
  const auto started = std::chrono::steady_clock::now();
  const auto on_engine = [&](auto task) {
    try {
      return service.engine_thread.call(task);
    } catch (const smol::KvPoolFull& error) {
      throw ApiError(503, std::string("the KV pool has no room now: ") + error.what(),
                     "unavailable_error");
    } catch (const smol::Error& error) {
      throw smol::serve::invalid_request(error.what(), "id_slot");
    }
  };
  if (action == "save") {
    const std::filesystem::path path = slot_file(state, body);
    const auto [tokens, bytes] = on_engine([&](smol::Scheduler& scheduler) {
      return std::pair(scheduler.cached_tokens(id).size(), scheduler.save_cached(id, fingerprint));
    });
    try {
      smol::write_session_file(path, bytes);
    } catch (const smol::Error& error) {
      throw ApiError(500, error.what(), "server_error");
    }
    send_json(res, {{"id_slot", id},
                    {"filename", path.filename().string()},
                    {"n_saved", tokens},
                    {"n_written", bytes.size()},
                    {"timings", {{"save_ms", milliseconds_since(started)}}}});
  } else if (action == "restore") {
    const std::filesystem::path path = slot_file(state, body);
    if (!std::filesystem::is_regular_file(path)) {
      throw ApiError(404, "no saved slot " + path.filename().string() + " in --slot-save-path",
                     "invalid_request_error", "filename");
    }
    std::size_t restored = 0, read = 0;
    try {
      const smol::MappedFile file(path.string());
      read = file.bytes().size();
      const smol::SessionImage image =
          smol::decode_session(file.bytes(), path.filename().string(), &fingerprint);
      restored = on_engine([&](smol::Scheduler& scheduler) {
        return scheduler.restore_cached(image, fingerprint, path.filename().string());
      });
    } catch (const ApiError&) {
      throw;
    } catch (const smol::Error& error) {
      throw smol::serve::invalid_request(error.what(), "filename");
    }
    send_json(res, {{"id_slot", id},
                    {"filename", path.filename().string()},
                    {"n_restored", restored},
                    {"n_read", read},
                    {"timings", {{"restore_ms", milliseconds_since(started)}}}});
  } else if (action == "erase") {
    const std::size_t erased =
        on_engine([&](smol::Scheduler& scheduler) { return scheduler.erase_cached(id); });
    send_json(res, {{"id_slot", id}, {"n_erased", erased}});
  } else {
    throw smol::serve::invalid_request(
        "action must be save, restore or erase (?action=...), not \"" + action + "\"", "action");
  }
}

}  // namespace server
