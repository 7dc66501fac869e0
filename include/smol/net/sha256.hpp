// SHA-256 of files and byte strings, with OpenSSL's libcrypto (hardware-accelerated
// where the CPU has SHA extensions). Only the downloader uses it, so it lives outside
// the library proper: include it only where OpenSSL::Crypto is linked.
#pragma once

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::net {

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) {
      fail("sha256: OpenSSL could not start a digest");
    }
  }

  void update(const void* data, std::size_t size) {
    if (EVP_DigestUpdate(context_.get(), data, size) != 1) fail("sha256: digest update failed");
  }

  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex_digest() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1) {
      fail("sha256: digest final failed");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
      hex += kHex[digest[i] >> 4];
      hex += kHex[digest[i] & 15];
    }
    return hex;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

inline std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes.data(), bytes.size());
  return hash.hex_digest();
}

inline std::string sha256_file(const std::string& path) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file(std::fopen(path.c_str(), "rb"),
                                                          &std::fclose);
  if (!file) fail("sha256: cannot open ", path);
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    hash.update(buffer.data(), n);
  }
  if (std::ferror(file.get())) fail("sha256: cannot read ", path);
  return hash.hex_digest();
}

}  // namespace smol::net
