// Transformer: one inference session over a Model, the fast path for one sequence.
//
// It owns what a conversation accumulates (the KV cache, RoPE table, scratch) and
// borrows the immutable Model and the Context that provides threads and the
// activation precision. Prefill runs the whole block of tokens through each matrix
// with one matmul and attends causally within the block; decode (one token) uses
// matvecs and attends over the cache. The blocks themselves are LayerPass's, shared
// with BatchTransformer (many sequences in one pass over the weights); this class
// keeps one contiguous cache, the simplest thing for one conversation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/layer_pass.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/attention.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

struct TransformerOptions {
  // Positions the session can hold; 0 means the model's context length. Memory is
  // committed only for positions actually filled (see KvCache).
  std::size_t context = 0;
  // The key and value caches' types (one KvType sets both; see quant/kv_layout.hpp).
  KvTypes kv_type = KvType::f16;
  // Tokens per internal pass; bounds the scratch memory of a long prefill.
  std::size_t max_batch = 512;
  // What a one-token forward runs on (ops/matmul.hpp): the decode kernels, the fastest,
  // or the block kernels, whose per-token float order is the same at any batch size, so
  // a k-token forward gives each token the same bits as k one-token forwards. Speculative
  // decoding (generate/speculative_decoder.hpp) verifies drafts in one pass and needs that
  // to match plain decoding exactly.
  OneToken one_token = OneToken::matvec;
  // Blocks with sliding-window attention keep a ring of the positions their windows can
  // reach (model/kv_cache.hpp's KvRing) rather than every position: a long context then
  // costs the global blocks alone. Off: every block keeps every position (the same
  // results, bit for bit; the tests compare them).
  bool window_ring = true;
};

// Which positions of a forward call get logits.
enum class LogitsFor { none, last, all };

class Transformer {
 public:
  Transformer(const Model& model, Context& context, TransformerOptions options = {})
      : model_(&model),
        context_(&context),
        options_(options),
        pass_(model, context, options.one_token) {
    const ModelConfig& config = model.config();
    if (options_.context == 0) options_.context = config.n_ctx_train;
    check_context_fits(config, options_.context);
    if (options_.max_batch == 0) fail("max_batch must be at least 1");
    kv_ = KvCache(config.n_layer, config.n_head_kv, config.head_dim, options_.context,
                  options_.kv_type, window_ring(config));
    rope_ = BlockRopes(model);
  }

  // The ring the sliding-window blocks keep (sliding_window_ring), when asked for.
  KvRing window_ring(const ModelConfig& config) const {
    if (!options_.window_ring) return {};
    return sliding_window_ring(config.sliding_window, options_.max_batch, config.local_layers);
  }

  const Model& model() const noexcept { return *model_; }
  std::size_t context_length() const noexcept { return options_.context; }
  // Positions [0, n_filled()) hold valid K/V.
  std::size_t n_filled() const noexcept { return n_filled_; }

  const KvCache& kv_cache() const noexcept { return kv_; }
  // The first position whose K/V every block still holds: 0, unless the sliding-window
  // blocks' ring has wrapped and overwritten the positions before it.
  std::size_t ring_floor() const noexcept { return ring_floor_; }

  // Replaces the session's positions with [0, positions) written by `write_rows(kv)`
  // (a saved session, see session_file.hpp); the next forward continues at
  // `positions`. `tokens`, the positions' tokens when known, let a later rewind past
  // what the ring holds run them again. If write_rows throws, the session is left empty.
  template <class WriteRows>
  void restore(std::size_t positions, WriteRows&& write_rows,
               std::span<const std::int32_t> tokens = {}) {
    if (positions > options_.context) {
      fail("restore: ", positions, " positions do not fit the session's context of ",
           options_.context);
    }
    if (kv_.ring_positions() != 0 && positions > kv_.ring_positions()) {
      fail("restore: ", positions, " positions, but the sliding-window blocks keep only the last ",
           kv_.ring_positions());
    }
    n_filled_ = 0;
    ring_floor_ = 0;
    write_rows(kv_);
    history_.assign(tokens.begin(), tokens.end());
    history_known_ = tokens.size() == positions;
    n_filled_ = positions;
  }

  // Runs `tokens` at positions [n_past, n_past + tokens.size()). n_past may be at most
  // n_filled(): rewinding drops the positions after it, skipping ahead is an error.
  // Returns the requested logits rows (n_vocab floats each, in position order),
  // valid until the next call.
  //
  // `cancel` is polled four times per layer (see LayerPass::run), so a cancel takes
  // effect within about a third of a layer, whatever the prompt's length. The call
  // then throws Cancelled with n_filled() at the end of the last internal pass that
  // completed (max_batch tokens each): the cache is consistent, and the caller resumes
  // from n_filled() or rewinds to any earlier position.
  std::span<const float> forward(std::span<const std::int32_t> tokens, std::size_t n_past,
                                 LogitsFor which = LogitsFor::last,
                                 const CancelCheck& cancel = {}) {
    const ModelConfig& config = model_->config();
    if (tokens.empty()) fail("forward: no tokens to run");
    if (n_past > n_filled_) {
      fail("forward: position ", n_past, " is past the ", n_filled_, " positions filled so far");
    }
    if (n_past + tokens.size() > options_.context) {
      fail("context overflow: positions ", n_past, "..", n_past + tokens.size() - 1,
           " do not fit the session's context of ", options_.context, " positions");
    }
    for (const std::int32_t token : tokens) {
      if (token < 0 || static_cast<std::size_t>(token) >= config.n_vocab) {
        fail("token id ", token, " is outside the vocabulary of ", config.n_vocab, " tokens");
      }
    }
    rope_.ensure(n_past + tokens.size());
    if (kv_.ring_positions() != 0) rewind_ring(n_past, cancel);
    n_filled_ = n_past;  // positions after n_past are about to be overwritten
    if (kv_.ring_positions() != 0) {
      if (n_past == 0) history_known_ = true;  // a fresh start: every token is seen here
      history_.resize(n_past);
      history_.insert(history_.end(), tokens.begin(), tokens.end());
    }
    return run(tokens, n_past, which, cancel);
  }

 private:
  // Before a forward from n_past: the ring blocks' windows must find their positions.
  // A rewind further back than the ring holds runs positions [0, n_past) again, from
  // the tokens kept for that (recomputed, never read stale).
  void rewind_ring(std::size_t n_past, const CancelCheck& cancel) {
    const std::size_t window = model_->config().sliding_window;
    const std::size_t window_start = n_past + 1 > window ? n_past + 1 - window : 0;
    if (n_past == 0) ring_floor_ = 0;
    if (window_start >= ring_floor_) return;
    if (!history_known_ || history_.size() < n_past) {
      fail("forward: position ", n_past, " sees positions from ", window_start,
           ", which the sliding-window blocks' ring no longer holds (it keeps from ", ring_floor_,
           "), and the session's tokens before them are unknown (restored)");
    }
    const std::vector<std::int32_t> replay(history_.begin(),
                                           history_.begin() + static_cast<std::ptrdiff_t>(n_past));
    n_filled_ = 0;
    ring_floor_ = 0;
    run(replay, 0, LogitsFor::none, cancel);
  }

  std::span<const float> run(std::span<const std::int32_t> tokens, std::size_t n_past,
                             LogitsFor which, const CancelCheck& cancel) {
    const ModelConfig& config = model_->config();
    const std::size_t n_rows =
        which == LogitsFor::all ? tokens.size() : (which == LogitsFor::last ? 1 : 0);
    logits_.resize(n_rows * config.n_vocab);
    std::vector<std::size_t> rows;
    for (std::size_t begin = 0; begin < tokens.size(); begin += options_.max_batch) {
      const std::size_t count = std::min(options_.max_batch, tokens.size() - begin);
      note_ring_writes(n_past + begin + count);
      Consecutive kv{this, n_past + begin};
      pass_.run(tokens.subspan(begin, count), rope_, kv, cancel);
      if (which == LogitsFor::all) {
        rows.resize(count);
        for (std::size_t r = 0; r < count; ++r) rows[r] = r;
        pass_.logits(rows, logits_.data() + begin * config.n_vocab);
      } else if (which == LogitsFor::last && begin + count == tokens.size()) {
        const std::size_t last[] = {count - 1};
        pass_.logits(last, logits_.data());
      }
      n_filled_ = n_past + begin + count;
    }
    return logits_;
  }

  // A pass that writes up to position `end` leaves the ring holding its last
  // ring_positions() / B blocks only: the floor moves up before the pass (a cancelled
  // one may have written part of them).
  void note_ring_writes(std::size_t end) {
    const std::size_t ring = kv_.ring_positions();
    if (ring == 0) return;
    const std::size_t block = detail::kAttentionBlock;
    const std::size_t blocks_written = (end - 1) / block + 1;
    const std::size_t ring_blocks = ring / block;
    if (blocks_written > ring_blocks) {
      ring_floor_ = std::max(ring_floor_, (blocks_written - ring_blocks) * block);
    }
  }

  // The batch's tokens are consecutive positions of this session's one sequence.
  struct Consecutive {
    Transformer* self;
    std::size_t first_position;

    std::size_t position(std::size_t t) const noexcept { return first_position + t; }
    void store(std::size_t layer, std::size_t t, const float* k, const float* v) {
      self->kv_.store(layer, first_position + t, k, v);
    }
    void attend(std::size_t layer, const float* q, std::size_t n, float* out) {
      const ModelConfig& c = self->model_->config();
      const AttentionShape shape = attention_shape(*self->model_, layer);
      attention(*self->context_, shape, q, n, first_position, self->kv_.layer(layer), out,
                c.attention_window(layer));
    }
  };

  const Model* model_;
  Context* context_;
  TransformerOptions options_;
  LayerPass pass_;
  KvCache kv_;
  BlockRopes rope_;
  std::size_t n_filled_ = 0;
  std::vector<float> logits_;
  // With a ring: positions below ring_floor_ are overwritten in the ring blocks, and
  // history_ holds the tokens of [0, n_filled_) to run them again on a rewind.
  std::size_t ring_floor_ = 0;
  std::vector<std::int32_t> history_;
  bool history_known_ = true;
};

}  // namespace smol
