// The session file format: a saved session's layout, its model fingerprint, and the
// validating decoder (session_file.hpp saves and loads a Transformer with it).
//
// Layout (little-endian, nothing padded):
//   "smolsess"  u32 version
//   fingerprint: u32 length + architecture bytes, u64 n_layer, n_head_kv, head_dim,
//                n_vocab, u32 K type, u32 V type (KvType's values: 0 f32, 1 f16,
//                2 bf16, 3 q8_0, 4 q4_0), u64 model file size,
//                u64 FNV-1a hash of the model file's bytes before its tensor data,
//                u64 FNV-1a hash of the RoPE settings (base, scaling, rope_freqs)
//   u64 n_tokens, i32 token ids[n_tokens]
//   per block: its K and V rows of positions [0, n_tokens) (KvCache::copy_rows_out)
// Version 1 (f16 and f32 caches only) had one u32 for both types, 0 f16 and 1 f32;
// such files still load.
//
// The fingerprint refuses the cache of another model. The shape fields say what
// differs in plain words; the hash covers everything else the GGUF declares (every
// metadata value and the name, type, shape and offset of every tensor) without
// reading gigabytes of weights, and the file size catches a file whose data was
// rewritten in place. The RoPE hash covers what the file does not fix: the cached keys
// are rotated, so a session saved with other RoPE overrides (--rope-scaling and
// friends) would continue with keys rotated for another model.
//
// Decoding validates like the GGUF reader: any malformed, truncated or over-long
// input is a smol::Error naming the file and what is wrong, never a read out of
// bounds. This header needs no model or kernels, so the fuzz build compiles it alone.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/quant/kv_layout.hpp"

namespace smol {

static_assert(std::endian::native == std::endian::little,
              "session files are read and written as little-endian memory");

inline constexpr std::string_view kSessionMagic = "smolsess";
inline constexpr std::uint32_t kSessionVersion = 2;

struct SessionFingerprint {
  std::string architecture{};
  std::uint64_t n_layer = 0;
  std::uint64_t n_head_kv = 0;
  std::uint64_t head_dim = 0;
  std::uint64_t n_vocab = 0;
  KvTypes kv_type{};
  std::uint64_t model_file_size = 0;
  std::uint64_t model_header_hash = 0;
  std::uint64_t rope_hash = 0;

  bool operator==(const SessionFingerprint&) const = default;
};

// A decoded session file; `kv` points into the bytes it was decoded from.
struct SessionImage {
  SessionFingerprint fingerprint{};
  std::vector<std::int32_t> tokens{};
  std::span<const std::byte> kv{};
};

namespace detail {

inline std::uint64_t fnv1a(std::span<const std::byte> bytes) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

inline std::string kv_types_name(KvTypes types) {
  return cat("K ", kv_type_name(types.key), ", V ", kv_type_name(types.value));
}

// Bounds-checked reads from a session file's bytes.
class SessionReader {
 public:
  SessionReader(std::span<const std::byte> bytes, std::string_view name)
      : bytes_(bytes), name_(name) {}

  std::span<const std::byte> take(std::size_t n, std::string_view what) {
    if (n > bytes_.size() - at_) {
      fail(name_, ": truncated: ", what, " at offset ", at_, " needs ", n, " bytes, ",
           bytes_.size() - at_, " left");
    }
    const std::span<const std::byte> part = bytes_.subspan(at_, n);
    at_ += n;
    return part;
  }
  template <class T>
  T read(std::string_view what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what).data(), sizeof(T));
    return value;
  }
  std::size_t offset() const noexcept { return at_; }
  std::size_t left() const noexcept { return bytes_.size() - at_; }
  const std::string& name() const noexcept { return name_; }

 private:
  std::span<const std::byte> bytes_;
  std::string name_;
  std::size_t at_ = 0;
};

template <class T>
void append(std::vector<std::byte>& out, const T& value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

// Resize and copy rather than vector::insert: GCC 12 at -O3 sees a false overflow in an
// inlined insert of a byte range (-Wstringop-overflow; a known false positive there).
inline void append_bytes(std::vector<std::byte>& out, std::string_view bytes) {
  const std::size_t at = out.size();
  out.resize(at + bytes.size());
  if (!bytes.empty()) std::memcpy(out.data() + at, bytes.data(), bytes.size());
}

// a * b, or an error when it does not fit 64 bits.
inline std::uint64_t checked_product(std::uint64_t a, std::uint64_t b, const std::string& name) {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) fail(name, ": the KV cache's size overflows");
  return product;
}

// Bytes of one position of one KV head in a cache of `type`, or an error when the
// (file's) head size makes it overflow.
inline std::uint64_t row_bytes(KvType type, std::uint64_t head_dim, const std::string& name) {
  const std::uint64_t per_element = kv_is_quantized(type) ? 32 : 1;
  return checked_product(head_dim / per_element, kv_row_bytes(type, per_element), name);
}

}  // namespace detail

// The start of a session file: everything before the KV rows, which follow it as
// n_layer blocks of KvCache::copy_rows_out's layout.
inline std::vector<std::byte> encode_session_header(const SessionFingerprint& f,
                                                    std::span<const std::int32_t> tokens) {
  std::vector<std::byte> out;
  detail::append_bytes(out, kSessionMagic);
  detail::append(out, kSessionVersion);
  detail::append(out, static_cast<std::uint32_t>(f.architecture.size()));
  detail::append_bytes(out, f.architecture);
  for (const std::uint64_t value : {f.n_layer, f.n_head_kv, f.head_dim, f.n_vocab}) {
    detail::append(out, value);
  }
  detail::append(out, static_cast<std::uint32_t>(f.kv_type.key));
  detail::append(out, static_cast<std::uint32_t>(f.kv_type.value));
  detail::append(out, f.model_file_size);
  detail::append(out, f.model_header_hash);
  detail::append(out, f.rope_hash);
  detail::append(out, static_cast<std::uint64_t>(tokens.size()));
  for (const std::int32_t token : tokens) detail::append(out, token);
  return out;
}

// Fails naming the first field in which a session file's fingerprint differs.
inline void check_fingerprint(const SessionFingerprint& file, const SessionFingerprint& model,
                              std::string_view name) {
  const auto differs = [&](std::string_view field, const auto& saved, const auto& ours) {
    fail(name, ": saved for another model: ", field, " is ", saved, " in the file, ", ours,
         " here");
  };
  if (file.architecture != model.architecture) {
    differs("the architecture", file.architecture, model.architecture);
  }
  if (file.n_layer != model.n_layer) differs("n_layer", file.n_layer, model.n_layer);
  if (file.n_head_kv != model.n_head_kv) differs("n_head_kv", file.n_head_kv, model.n_head_kv);
  if (file.head_dim != model.head_dim) differs("head_dim", file.head_dim, model.head_dim);
  if (file.n_vocab != model.n_vocab) differs("n_vocab", file.n_vocab, model.n_vocab);
  if (file.kv_type != model.kv_type) {
    differs("the KV cache type (-ctk/-ctv)", detail::kv_types_name(file.kv_type),
            detail::kv_types_name(model.kv_type));
  }
  if (file.model_file_size != model.model_file_size) {
    differs("the model file's size", file.model_file_size, model.model_file_size);
  }
  if (file.model_header_hash != model.model_header_hash) {
    differs("the hash of the model's metadata and tensor list", file.model_header_hash,
            model.model_header_hash);
  }
  if (file.rope_hash != model.rope_hash) {
    differs(
        "the hash of the RoPE settings (--rope-scaling, --rope-scale, --rope-freq-base, "
        "--yarn-*)",
        file.rope_hash, model.rope_hash);
  }
}

// Decodes and checks a session file's structure on its own (no model needed): magic,
// version, fields, token ids below n_vocab, and a size that is exactly what the
// counts say. `name` names the file in errors. With `expected`, a fingerprint that
// differs is refused as soon as it is read, before the counts it would explain.
inline SessionImage decode_session(std::span<const std::byte> bytes, std::string_view name,
                                   const SessionFingerprint* expected = nullptr) {
  detail::SessionReader in(bytes, name);
  const std::string& n = in.name();
  const std::span<const std::byte> magic = in.take(kSessionMagic.size(), "the magic");
  if (std::memcmp(magic.data(), kSessionMagic.data(), kSessionMagic.size()) != 0) {
    fail(n, ": not a smol session file (bad magic)");
  }
  const auto version = in.read<std::uint32_t>("the version");
  if (version != 1 && version != kSessionVersion) {
    fail(n, ": session file version ", version, " is not supported (this build reads version ",
         kSessionVersion, ")");
  }
  SessionImage image;
  SessionFingerprint& f = image.fingerprint;
  const auto arch_length = in.read<std::uint32_t>("the architecture's length");
  if (arch_length > 256) fail(n, ": the architecture name is ", arch_length, " bytes long");
  const std::span<const std::byte> arch = in.take(arch_length, "the architecture");
  f.architecture.assign(reinterpret_cast<const char*>(arch.data()), arch.size());
  const auto positive = [&](std::string_view what) {
    const auto value = in.read<std::uint64_t>(what);
    if (value == 0) fail(n, ": ", what, " is 0");
    return value;
  };
  f.n_layer = positive("n_layer");
  f.n_head_kv = positive("n_head_kv");
  f.head_dim = positive("head_dim");
  f.n_vocab = positive("n_vocab");
  if (version == 1) {
    const auto both = in.read<std::uint32_t>("the KV type");
    if (both > 1) fail(n, ": unknown KV type ", both, " (0 is f16, 1 is f32)");
    f.kv_type = both == 0 ? KvType::f16 : KvType::f32;
  } else {
    const auto kv_type = [&](std::string_view what) {
      const auto code = in.read<std::uint32_t>(what);
      if (code >= kAllKvTypes.size()) fail(n, ": unknown ", what, " ", code);
      return static_cast<KvType>(code);
    };
    f.kv_type.key = kv_type("K cache type");
    f.kv_type.value = kv_type("V cache type");
    try {
      check_kv_types(f.kv_type, f.head_dim);
    } catch (const Error& e) {
      fail(n, ": ", e.what());
    }
  }
  f.model_file_size = in.read<std::uint64_t>("the model's file size");
  f.model_header_hash = in.read<std::uint64_t>("the model's hash");
  f.rope_hash = in.read<std::uint64_t>("the RoPE settings' hash");
  if (expected) check_fingerprint(f, *expected, name);
  const auto n_tokens = in.read<std::uint64_t>("the token count");
  if (n_tokens > in.left() / sizeof(std::int32_t)) {
    fail(n, ": truncated: ", n_tokens, " tokens declared, the file has room for ",
         in.left() / sizeof(std::int32_t));
  }
  image.tokens.resize(n_tokens);
  const std::span<const std::byte> ids = in.take(n_tokens * sizeof(std::int32_t), "the tokens");
  if (n_tokens > 0) std::memcpy(image.tokens.data(), ids.data(), ids.size());
  for (std::size_t i = 0; i < n_tokens; ++i) {
    const std::int32_t token = image.tokens[i];
    if (token < 0 || static_cast<std::uint64_t>(token) >= f.n_vocab) {
      fail(n, ": token ", i, " is ", token, ", outside the vocabulary of ", f.n_vocab);
    }
  }
  std::uint64_t row_bytes = 0;  // one position of one KV head, K and V
  if (__builtin_add_overflow(detail::row_bytes(f.kv_type.key, f.head_dim, n),
                             detail::row_bytes(f.kv_type.value, f.head_dim, n), &row_bytes)) {
    fail(n, ": the KV cache's size overflows");
  }
  std::uint64_t kv_bytes = detail::checked_product(f.n_layer, f.n_head_kv, n);
  kv_bytes = detail::checked_product(kv_bytes, n_tokens, n);
  kv_bytes = detail::checked_product(kv_bytes, row_bytes, n);
  image.kv = in.take(kv_bytes, "the KV cache");
  if (in.left() != 0) {
    fail(n, ": ", in.left(), " bytes of trailing garbage after the KV cache at offset ",
         in.offset());
  }
  return image;
}

}  // namespace smol
