// The errors a client gets, in OpenAI's shape, and JSON text for the wire.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "smol/core/json_nesting.hpp"

namespace smol::serve {

using Json = nlohmann::json;

// How deep any JSON a client sends (or a model writes) may nest: deep enough for any
// real request (a schema's 64 levels take about 130), shallow enough that what is done
// with the value afterwards, much of it recursive, never runs out of stack.
inline constexpr std::size_t kMaxJsonDepth = 256;

// Whether `text` nests deeper than kMaxJsonDepth; the byte offset where it does.
inline std::optional<std::size_t> too_deep(std::string_view text) {
  return json_nesting_beyond(text, kMaxJsonDepth);
}

// An error the client gets as {"error": {"message", "type", "param", "code"}} with
// `status` as the HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string message, std::string type_, std::string param_ = {})
      : std::runtime_error(std::move(message)),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)) {}
  int status;
  std::string type;   // OpenAI's: invalid_request_error, authentication_error, ...
  std::string param;  // the request field at fault, e.g. "messages[1].content"
};

inline ApiError invalid_request(std::string message, std::string param = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param));
}

// The type names OpenAI's clients expect for each status.
inline std::string_view error_type_for(int status) {
  switch (status) {
    case 400:
    case 404:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

inline Json error_body(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? Json(nullptr) : Json(error.param)},
            {"code", error.status}}}};
}

// JSON text for the wire. Our own text is valid UTF-8 (ReplyStream guarantees it); the
// replacement handler only guards against a bug ever turning into a thrown exception.
inline std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace smol::serve
