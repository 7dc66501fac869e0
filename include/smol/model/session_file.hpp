// Session files: a Transformer's tokens and KV cache saved to disk and loaded back,
// so that a long system prompt or document is evaluated once and a later run starts
// from it in milliseconds (llama.cpp's --prompt-cache). The format, the model's
// fingerprint and the validation are session_format.hpp's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/mapped_file.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/kv_pool.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_format.hpp"
#include "smol/model/transformer.hpp"

namespace smol {

// A hash of everything that sets the cached keys' rotation.
inline std::uint64_t rope_settings_hash(const RopeFrequencies& rope) {
  const RopeScaling& s = rope.scaling;
  std::vector<float> values = {rope.base,    static_cast<float>(s.type),
                               s.factor,     static_cast<float>(s.original_context),
                               s.ext_factor, s.attn_factor,
                               s.beta_fast,  s.beta_slow};
  values.insert(values.end(), rope.factors.begin(), rope.factors.end());
  return detail::fnv1a(std::as_bytes(std::span<const float>(values)));
}

// The fingerprint of `model` with a KV cache of `kv_type`.
inline SessionFingerprint session_fingerprint(const Model& model, KvTypes kv_type) {
  const ModelConfig& config = model.config();
  const std::span<const std::byte> bytes = model.file().bytes();
  const std::size_t header = std::min<std::size_t>(model.file().data_offset(), bytes.size());
  return {.architecture = config.architecture,
          .n_layer = config.n_layer,
          .n_head_kv = config.n_head_kv,
          .head_dim = config.head_dim,
          .n_vocab = config.n_vocab,
          .kv_type = kv_type,
          .model_file_size = bytes.size(),
          .model_header_hash = detail::fnv1a(bytes.first(header)),
          .rope_hash = rope_settings_hash(rope_frequencies(model))};
}

inline SessionFingerprint session_fingerprint(const Transformer& transformer) {
  return session_fingerprint(transformer.model(), transformer.kv_cache().types());
}

// The bytes of a session file holding `tokens` and the transformer's K/V rows for
// positions [0, tokens.size()), which must be filled.
inline std::vector<std::byte> encode_session(const Transformer& transformer,
                                             std::span<const std::int32_t> tokens) {
  if (tokens.size() > transformer.n_filled()) {
    fail("save session: ", tokens.size(), " tokens, but only ", transformer.n_filled(),
         " positions are filled");
  }
  if (transformer.ring_floor() != 0) {
    fail("save session: the sliding-window blocks keep only the last ",
         transformer.kv_cache().ring_positions(), " positions and no longer hold positions 0..",
         transformer.ring_floor() - 1, "; a session file needs them all");
  }
  const SessionFingerprint f = session_fingerprint(transformer);
  std::vector<std::byte> out = encode_session_header(f, tokens);
  const KvCache& kv = transformer.kv_cache();
  const std::size_t layer_bytes = kv.layer_bytes_for(tokens.size());
  std::size_t at = out.size();
  out.resize(at + f.n_layer * layer_bytes);
  for (std::size_t layer = 0; layer < f.n_layer; ++layer, at += layer_bytes) {
    kv.copy_rows_out(layer, tokens.size(), out.data() + at);
  }
  return out;
}

// Restores a decoded session into `transformer`: the next forward continues at
// image.tokens.size(). Returns the tokens.
inline std::vector<std::int32_t> restore_session(const SessionImage& image,
                                                 Transformer& transformer, std::string_view name) {
  check_fingerprint(image.fingerprint, session_fingerprint(transformer), name);
  const std::size_t n = image.tokens.size();
  if (n > transformer.context_length()) {
    fail(name, ": holds ", n, " tokens, more than the session's context of ",
         transformer.context_length(), " positions");
  }
  transformer.restore(
      n,
      [&](KvCache& kv) {
        const std::size_t layer_bytes = kv.layer_bytes_for(n);
        for (std::size_t layer = 0; layer < image.fingerprint.n_layer; ++layer) {
          kv.copy_rows_in(layer, n, image.kv.data() + layer * layer_bytes);
        }
      },
      image.tokens);
  return image.tokens;
}

// A KV pool's sequence (a server's cached conversation) as a session file's bytes:
// `tokens` and the rows of their positions, the same file a Transformer saves.
inline std::vector<std::byte> encode_pool_session(const KvPool& pool, KvPool::SequenceId id,
                                                  const SessionFingerprint& f,
                                                  std::span<const std::int32_t> tokens) {
  std::vector<std::byte> out = encode_session_header(f, tokens);
  const std::size_t layer_bytes = pool.layer_rows_bytes(tokens.size());
  std::size_t at = out.size();
  out.resize(at + f.n_layer * layer_bytes);
  for (std::size_t layer = 0; layer < f.n_layer; ++layer, at += layer_bytes) {
    pool.copy_rows_out(id, layer, tokens.size(), out.data() + at);
  }
  return out;
}

// A decoded session as a new sequence of the pool (its fingerprint checked against
// `expected`). Throws KvPoolFull, changing nothing, when the free pages do not suffice.
inline KvPool::SequenceId restore_pool_session(const SessionImage& image, KvPool& pool,
                                               const SessionFingerprint& expected,
                                               std::string_view name) {
  check_fingerprint(image.fingerprint, expected, name);
  const std::size_t n = image.tokens.size();
  if (n == 0) fail(name, ": holds no tokens");
  if (KvPool::pages_for(n) > pool.free_pages()) {
    throw KvPoolFull(
        cat(name, ": ", KvPool::pages_for(n), " pages needed, ", pool.free_pages(), " free"));
  }
  const KvPool::SequenceId id = pool.add();
  pool.prepare(id, 0, n);
  const std::size_t layer_bytes = pool.layer_rows_bytes(n);
  for (std::size_t layer = 0; layer < image.fingerprint.n_layer; ++layer) {
    pool.copy_rows_in(id, layer, n, image.kv.data() + layer * layer_bytes);
  }
  return id;
}

// Writes the session to `path` through a temporary file renamed into place, so a
// crash or a full disk never leaves a half-written session under that name.
inline void write_session_file(const std::filesystem::path& path,
                               std::span<const std::byte> bytes) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(temporary.string(), ": cannot open for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) fail(temporary.string(), ": cannot write the session");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) fail(path.string(), ": cannot write the session: ", error.message());
}

inline void save_session(const std::filesystem::path& path, const Transformer& transformer,
                         std::span<const std::int32_t> tokens) {
  write_session_file(path, encode_session(transformer, tokens));
}

// Loads the session at `path` into `transformer`; returns its tokens.
inline std::vector<std::int32_t> load_session(const std::filesystem::path& path,
                                              Transformer& transformer) {
  const std::string name = path.string();
  // Mapped, not read: a 3B model's session is tens of megabytes, and a copy would
  // first be zeroed page by page.
  const MappedFile file(name);
  const std::span<const std::byte> bytes = file.bytes();
  const SessionFingerprint expected = session_fingerprint(transformer);
  return restore_session(decode_session(bytes, name, &expected), transformer, name);
}

}  // namespace smol
