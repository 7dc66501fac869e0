// libFuzzer target for the session file reader (smol/model/session_file.hpp).
//
// Any input must either decode or throw smol::Error; the sanitizers catch every read
// the validation failed to bound. What decodes must be exactly what its counts say:
// a KV block of the declared size that ends the input, and token ids in the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "smol/model/session_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  smol::SessionImage image;
  try {
    image = smol::decode_session(bytes, "fuzz.session");
  } catch (const smol::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  const smol::SessionFingerprint& f = image.fingerprint;
  const std::uint64_t row_bytes = smol::kv_row_bytes(f.kv_type.key, f.head_dim) +
                                  smol::kv_row_bytes(f.kv_type.value, f.head_dim);
  const std::uint64_t kv_bytes = f.n_layer * f.n_head_kv * image.tokens.size() * row_bytes;
  if (image.kv.size() != kv_bytes) std::abort();
  if (image.kv.data() + image.kv.size() != bytes.data() + bytes.size()) std::abort();
  for (const std::int32_t token : image.tokens) {
    if (token < 0 || static_cast<std::uint64_t>(token) >= f.n_vocab) std::abort();
  }
  return 0;
}
