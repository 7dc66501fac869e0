// The conversations the Responses API keeps for previous_response_id: each stored
// response's whole conversation (every earlier item, its input, its output) under its id,
// and the response object itself (GET /v1/responses/{id}). Held in memory, bounded by a
// count and by bytes; the least recently used go first, and an id no longer held is the
// client's 404, said as such. A server restart forgets them all, as OpenAI's store does
// not: clients that must survive one send `store: false` and the whole conversation.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

namespace smol::serve {

class ResponseStore {
 public:
  struct Entry {
    nlohmann::ordered_json items;  // the conversation up to and including this response
    nlohmann::json response;
  };

  ResponseStore(std::size_t max_responses, std::size_t max_bytes)
      : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `entry` under `id` (an entry larger than the whole budget is not kept).
  void put(const std::string& id, Entry entry) {
    const std::size_t bytes = entry.items.dump().size() + entry.response.dump().size();
    std::lock_guard lock(mutex_);
    erase_locked(id);
    if (bytes > max_bytes_ || max_responses_ == 0) return;
    order_.push_front(id);
    entries_.emplace(id, Held{std::move(entry), bytes, order_.begin()});
    bytes_ += bytes;
    while (entries_.size() > max_responses_ || bytes_ > max_bytes_) erase_locked(order_.back());
  }

  // A copy of the entry under `id`, now the most recently used; nullopt when not held.
  std::optional<Entry> get(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second.position);
    return it->second.entry;
  }

  bool erase(const std::string& id) {
    std::lock_guard lock(mutex_);
    return erase_locked(id);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Held {
    Entry entry;
    std::size_t bytes;
    std::list<std::string>::iterator position;
  };

  bool erase_locked(const std::string& id) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    bytes_ -= it->second.bytes;
    order_.erase(it->second.position);
    entries_.erase(it);
    return true;
  }

  std::size_t max_responses_, max_bytes_, bytes_ = 0;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // most recently used first
  std::unordered_map<std::string, Held> entries_;
};

}  // namespace smol::serve
