// Downloading a model file over HTTP(S) with libcurl: resumable, verified.
//
// Bytes go to "<destination>.part"; an interrupted transfer leaves it there, and the
// next call asks the server for the rest with an HTTP Range request. Only a file
// whose SHA-256 matches is renamed into place. The expected digest comes from the
// caller (a pinned value) and from the server: Hugging Face sends the LFS object's
// SHA-256 as the ETag (x-linked-etag on the redirect to its CDN). A file that fails
// the check is deleted, since resuming it could never repair it.
//
// This is the only code in smol that touches the network, so it sits outside the
// library's layers: include it only where CURL::libcurl and OpenSSL::Crypto are linked.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/net/sha256.hpp"

namespace smol::net {

// A download that failed; `resumable` says whether the .part file was kept.
class DownloadError : public Error {
 public:
  DownloadError(const std::string& message, bool resumable)
      : Error(message), resumable_(resumable) {}
  bool resumable() const noexcept { return resumable_; }

 private:
  bool resumable_;
};

struct DownloadProgress {
  std::uint64_t done = 0;          // bytes in the .part file so far
  std::uint64_t total = 0;         // 0 while unknown
  std::uint64_t resumed_from = 0;  // bytes that were already there when this call began
};

struct DownloadRequest {
  std::string url;
  std::filesystem::path destination;
  std::optional<std::string> expected_sha256 = std::nullopt;  // pinned; lowercase hex
  std::function<void(const DownloadProgress&)> on_progress = {};
  const std::atomic<bool>* cancel = nullptr;
  long connect_timeout_seconds = 20;
  // A transfer slower than 1 KB/s for this long counts as stalled and is abandoned.
  long stall_seconds = 60;
};

struct DownloadResult {
  std::string sha256;
  std::uint64_t bytes = 0;
  std::uint64_t resumed_from = 0;  // 0 when the file was fetched from the start
  bool verified = false;           // a digest was known and matched
};

inline std::filesystem::path partial_path(const std::filesystem::path& destination) {
  return std::filesystem::path(destination.string() + ".part");
}

namespace detail {

// A SHA-256 written as an HTTP entity tag: 64 hex digits, maybe quoted, maybe weak.
inline std::optional<std::string> sha256_from_etag(std::string_view value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
    value.remove_suffix(1);
  }
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) {
    value.remove_prefix(1);
  }
  if (value.starts_with("W/")) value.remove_prefix(2);
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    value = value.substr(1, value.size() - 2);
  }
  if (value.size() != 64) return std::nullopt;
  std::string hex;
  for (const char c : value) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return hex;
}

struct Transfer {
  std::FILE* file = nullptr;
  std::uint64_t start = 0;  // the offset asked for
  std::uint64_t written = 0;
  std::uint64_t total = 0;
  std::optional<std::string> linked_sha256, etag_sha256;
  std::string error;  // why a callback stopped the transfer
  bool offer_mismatch = false;
  const DownloadRequest* request = nullptr;
  std::filesystem::path part;
};

inline std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view value = line.substr(colon + 1);
  // Hugging Face names the LFS object on the redirect; the CDN's own ETag is not a
  // SHA-256, so it is only taken when it looks like one.
  if (name == "x-linked-etag") {
    if (auto sha = sha256_from_etag(value)) transfer.linked_sha256 = std::move(sha);
  } else if (name == "etag") {
    if (auto sha = sha256_from_etag(value)) transfer.etag_sha256 = std::move(sha);
  }
  return size * count;
}

inline std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  if (transfer.written == 0 && transfer.request->expected_sha256) {
    // The server names its file before sending it: a different file than the pinned
    // one is refused now rather than after gigabytes.
    const auto& offered = transfer.linked_sha256 ? transfer.linked_sha256 : transfer.etag_sha256;
    if (offered && *offered != *transfer.request->expected_sha256) {
      transfer.error = "the server offers a file with sha256 " + *offered + ", not the expected " +
                       *transfer.request->expected_sha256;
      transfer.offer_mismatch = true;
      return 0;
    }
  }
  const std::size_t bytes = size * count;
  if (std::fwrite(data, 1, bytes, transfer.file) != bytes) {
    transfer.error = "cannot write " + transfer.part.string() + " (disk full?)";
    return 0;
  }
  transfer.written += bytes;
  return bytes;
}

inline int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto& transfer = *static_cast<Transfer*>(user);
  const DownloadRequest& request = *transfer.request;
  if (request.cancel != nullptr && request.cancel->load()) {
    transfer.error = "cancelled";
    return 1;
  }
  if (total > 0) transfer.total = transfer.start + static_cast<std::uint64_t>(total);
  if (request.on_progress) {
    request.on_progress(DownloadProgress{transfer.start + static_cast<std::uint64_t>(now),
                                         transfer.total, transfer.start});
  }
  return 0;
}

// Points `handle` at request.url, resuming after the `existing` bytes of the .part file,
// with `transfer` taking the headers, the body and the progress; curl_error receives
// libcurl's message.
inline void set_transfer_options(CURL* handle, const DownloadRequest& request, Transfer& transfer,
                                 std::uint64_t existing, char* curl_error) {
  curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(handle, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "smol/0.1");
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_seconds);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, request.stall_seconds);
  curl_easy_setopt(handle, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(existing));
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, &on_progress);
  curl_easy_setopt(handle, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}

// A failed transfer (libcurl's `code`, the HTTP `status`) as a DownloadError, resumable
// when the .part file holds bytes; an empty .part is removed.
[[noreturn]] inline void throw_transfer_failure(const DownloadRequest& request,
                                                const Transfer& transfer, CURLcode code,
                                                long status, const char* curl_error) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  std::string why = !transfer.error.empty() ? transfer.error
                    : curl_error[0] != '\0' ? std::string(curl_error)
                                            : std::string(curl_easy_strerror(code));
  const std::uint64_t have = fs::exists(transfer.part) ? fs::file_size(transfer.part) : 0;
  if (have == 0) fs::remove(transfer.part, ignored);  // nothing to resume: leave no empty .part
  if (code == CURLE_HTTP_RETURNED_ERROR && status >= 400 && status != 416) {
    // An error page, not the file: nothing worth resuming was received this time.
    throw DownloadError(cat("download of ", request.url, " failed: ", why), have > 0);
  }
  throw DownloadError(cat("download interrupted after ", have, " bytes: ", why,
                          have > 0 ? " (run again to resume)" : ""),
                      have > 0);
}

// The whole .part file checked against every sha256 known for it (the pinned one, and the
// server's), then moved to request.destination; a mismatch deletes it.
inline DownloadResult verify_and_keep(const DownloadRequest& request, const Transfer& transfer,
                                      std::uint64_t existing) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path& part = transfer.part;
  DownloadResult result;
  result.resumed_from = existing;
  result.bytes = fs::file_size(part);
  result.sha256 = sha256_file(part.string());
  std::vector<std::string> expected;
  if (request.expected_sha256) expected.push_back(*request.expected_sha256);
  if (transfer.linked_sha256)
    expected.push_back(*transfer.linked_sha256);
  else if (transfer.etag_sha256)
    expected.push_back(*transfer.etag_sha256);
  for (const std::string& digest : expected) {
    if (digest != result.sha256) {
      fs::remove(part, ignored);
      throw DownloadError(cat("checksum mismatch for ", request.url, ": expected sha256 ", digest,
                              ", got ", result.sha256, "; the download was deleted"),
                          false);
    }
  }
  result.verified = !expected.empty();
  fs::rename(part, request.destination);
  return result;
}

}  // namespace detail

// Fetches request.url into request.destination (see the top of this file). Throws
// DownloadError: resumable() when the .part file was kept for the next attempt.
inline DownloadResult download_file(const DownloadRequest& request) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path part = partial_path(request.destination);
  if (request.destination.has_parent_path()) {
    fs::create_directories(request.destination.parent_path(), ignored);
  }
  const std::uint64_t existing = fs::exists(part) ? fs::file_size(part) : 0;
  const auto start_over = [&] {
    fs::remove(part, ignored);
    return download_file(request);
  };

  detail::Transfer transfer;
  transfer.start = existing;
  transfer.request = &request;
  transfer.part = part;
  transfer.file = std::fopen(part.c_str(), "ab");
  if (transfer.file == nullptr) {
    throw DownloadError("cannot write " + part.string(), false);
  }
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    std::fclose(transfer.file);
    throw DownloadError("libcurl could not start", false);
  }
  char curl_error[CURL_ERROR_SIZE] = {};
  detail::set_transfer_options(curl.get(), request, transfer, existing, curl_error);
  const CURLcode code = curl_easy_perform(curl.get());
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  const bool closed = std::fclose(transfer.file) == 0;

  // 416: nothing is left to send after the offset; the .part is already whole.
  const bool already_complete = code == CURLE_HTTP_RETURNED_ERROR && status == 416 && existing > 0;
  // A server without Range support: libcurl refuses to append the whole file.
  if (code == CURLE_RANGE_ERROR && existing > 0) return start_over();
  if (transfer.offer_mismatch) {
    if (existing == 0) fs::remove(part, ignored);
    throw DownloadError(cat("download of ", request.url, " refused: ", transfer.error), false);
  }
  if (code != CURLE_OK && !already_complete) {
    detail::throw_transfer_failure(request, transfer, code, status, curl_error);
  }
  if (!closed) throw DownloadError("cannot write " + part.string(), false);
  return detail::verify_and_keep(request, transfer, existing);
}

}  // namespace smol::net
