// Writes the seed corpus for fuzz_session_file: small valid session files of a
// made-up model shape (no tokens, a few; f16 and f32 caches), their K/V a byte
// pattern. No model runs: the fuzz build compiles no kernels.
//
//   make_session_seeds OUT_DIR
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "smol/model/session_format.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_session_seeds OUT_DIR\n");
    return 2;
  }
  const std::vector<std::int32_t> tokens = {1, 17, 42, 300};
  int written = 0;
  for (const smol::KvTypes kv_type :
       {smol::KvTypes(smol::KvType::f16), smol::KvTypes(smol::KvType::f32),
        smol::KvTypes(smol::KvType::q8_0, smol::KvType::q4_0)}) {
    const smol::SessionFingerprint fingerprint{.architecture = "smollm3",
                                               .n_layer = 2,
                                               .n_head_kv = 1,
                                               .head_dim = 32,
                                               .n_vocab = 512,
                                               .kv_type = kv_type,
                                               .model_file_size = 123456,
                                               .model_header_hash = 0x0123456789abcdefull};
    const std::size_t row_bytes =
        smol::kv_row_bytes(kv_type.key, 32) + smol::kv_row_bytes(kv_type.value, 32);
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, tokens.size()}) {
      std::vector<std::byte> bytes =
          smol::encode_session_header(fingerprint, std::span(tokens).first(n));
      const std::size_t kv_bytes = 2 * 1 * n * row_bytes;
      for (std::size_t i = 0; i < kv_bytes; ++i) bytes.push_back(static_cast<std::byte>(i * 7));
      const std::string path = std::string(argv[1]) + "/seed-" + std::to_string(written++);
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "make_session_seeds: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}
