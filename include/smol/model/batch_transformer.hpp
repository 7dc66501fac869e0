// BatchTransformer: many sequences through one pass over the weights.
//
// Decode is memory-bound: a step streams every weight (1.9 GB for SmolLM3-3B Q4_K_M)
// to produce one token. With several conversations, each step runs one token of each
// (and any prompt chunks waiting) through the same pass, so the weights are read once
// for all of them: continuous batching, as llama.cpp's server and vLLM do. A batch is
// a list of entries (sequence, token, position); the matrices see all of them at once
// (LayerPass, shared with the single-sequence Transformer), and attention runs per
// token over its own sequence's pages in the shared KvPool.
//
// Batch invariance: a token's logits do not depend on what else is in its batch or
// where in the batch it sits. The integer dot products of the matmul kernels are exact
// and each token's float work keeps a fixed order whatever the batch's size; attention
// depends only on the token's own sequence. So a batch of one token runs on the block
// kernels too (`BatchOptions::invariant`): the decode kernels sum in another order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/model/kv_pool.hpp"
#include "smol/model/layer_pass.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/attention.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

using SequenceId = KvPool::SequenceId;

struct BatchEntry {
  SequenceId sequence = 0;
  std::int32_t token = 0;
  std::size_t position = 0;
  bool logits = false;  // whether this entry's row is wanted (logits, or its hidden state)
};

// What forward() returns for each entry that asks: its next-token logits (n_vocab), or
// its final hidden state (n_embd, after the output norm: what embeddings pool).
enum class RowOutput { logits, hidden };

struct BatchOptions {
  // Positions the pool holds over all sequences; 0 means the model's context length.
  std::size_t total_positions = 0;
  // The key and value caches' types (one KvType sets both; see quant/kv_layout.hpp).
  KvTypes kv_type = KvType::f16;
  // Entries per internal pass; bounds the scratch memory of a large batch.
  std::size_t max_batch = 512;
  // A batch of one token on the block kernels, so that a sequence's logits are the
  // same bits alone or beside others (false: the decode kernels, see bench figures).
  bool invariant = true;
};

class BatchTransformer {
 public:
  BatchTransformer(const Model& model, Context& context, BatchOptions options = {})
      : model_(&model),
        context_(&context),
        options_(options),
        pass_(model, context, options.invariant ? OneToken::tiles : OneToken::matvec) {
    const ModelConfig& c = model.config();
    if (options_.total_positions == 0) options_.total_positions = c.n_ctx_train;
    if (options_.max_batch == 0) fail("max_batch must be at least 1");
    pool_ =
        KvPool({c.n_layer, c.n_head_kv, c.head_dim}, options_.total_positions, options_.kv_type);
    rope_ = BlockRopes(model);
  }

  const Model& model() const noexcept { return *model_; }
  // The longest sequence a position may belong to: the model's context (trained, or
  // stretched by RoPE scaling).
  std::size_t max_sequence_length() const noexcept { return model_->config().max_context(); }
  // Seconds of all forward calls so far spent in attention (the rest is the weights).
  double attention_seconds() const noexcept { return pass_.attention_seconds(); }
  KvPool& pool() noexcept { return pool_; }
  const KvPool& pool() const noexcept { return pool_; }

  // Runs a batch. The entries of one sequence must be consecutive positions in order,
  // the first at most the sequence's length (a smaller one rewinds it); sequences may
  // come in any order and interleave. Returns one row per entry that asked for one (of
  // n_vocab logits, or n_embd hidden values as `output` says), in entry order, valid
  // until the next call.
  //
  // A model whose attention is not causal (config.causal_attention false: encoders,
  // bidirectional embedders) lets every token see its whole sequence, so each sequence
  // must come whole, from position 0, in a batch of at most max_batch entries.
  //
  // Throws KvPoolFull, changing nothing, when the pool has too few free pages (check
  // pages_needed first), and Cancelled when `cancel` fires (polled as LayerPass does);
  // every sequence of the batch is then as it was before the call.
  std::span<const float> forward(std::span<const BatchEntry> entries,
                                 const CancelCheck& cancel = {},
                                 RowOutput output = RowOutput::logits) {
    const ModelConfig& c = model_->config();
    output_ = output;
    const std::size_t width = output == RowOutput::logits ? c.n_vocab : c.n_embd;
    if (!c.causal_attention) check_whole_sequences(entries);
    std::size_t n_rows = 0;
    for (const BatchEntry& e : entries) {
      if (e.token < 0 || static_cast<std::size_t>(e.token) >= c.n_vocab) {
        fail("token id ", e.token, " is outside the vocabulary of ", c.n_vocab, " tokens");
      }
      if (e.position >= max_sequence_length()) {
        fail("position ", e.position, " is past the model's context of ", max_sequence_length());
      }
      n_rows += e.logits ? 1 : 0;
    }
    logits_.resize(n_rows * width);
    float* out = logits_.data();
    for (std::size_t begin = 0; begin < entries.size(); begin += options_.max_batch) {
      const auto chunk =
          entries.subspan(begin, std::min(options_.max_batch, entries.size() - begin));
      out = run_chunk(chunk, out, cancel);
    }
    return logits_;
  }

  // A reranker's classifier head on n states (n_embd each, from forward()'s hidden rows):
  // n_labels scores each into `out` (LayerPass::classify).
  void classify(const float* states, std::size_t n, float* out) { pass_.classify(states, n, out); }

  // Pool pages a forward of `entries` would take (0 when they fit what is held).
  std::size_t pages_needed(std::span<const BatchEntry> entries) const {
    std::size_t needed = 0;
    for (const Span& s : spans_of(entries))
      needed += pool_.pages_needed(s.sequence, s.first, s.count);
    return needed;
  }

 private:
  // The run of one sequence's entries inside a batch.
  struct Span {
    SequenceId sequence;
    std::size_t first, count;
  };

  // Without a causal mask a token sees its sequence's later tokens, so they must all be
  // in the one pass: whole sequences, from position 0, at most max_batch entries.
  void check_whole_sequences(std::span<const BatchEntry> entries) const {
    if (entries.size() > options_.max_batch) {
      fail("a model without a causal mask runs its sequences in one pass: ", entries.size(),
           " tokens exceed the batch of ", options_.max_batch);
    }
    for (const Span& s : spans_of(entries)) {
      if (s.first != 0) {
        fail("sequence ", s.sequence, " starts at position ", s.first,
             ": a model without a causal mask runs each sequence whole, from position 0");
      }
    }
  }

  // One span per sequence; checks that each sequence's positions are consecutive.
  std::vector<Span> spans_of(std::span<const BatchEntry> entries) const {
    std::vector<Span> spans;
    for (const BatchEntry& e : entries) {
      auto found = std::find_if(spans.begin(), spans.end(),
                                [&](const Span& s) { return s.sequence == e.sequence; });
      if (found == spans.end()) {
        if (e.position > pool_.length(e.sequence)) {
          fail("sequence ", e.sequence, ": position ", e.position, " is past its ",
               pool_.length(e.sequence), " positions");
        }
        spans.push_back({e.sequence, e.position, 1});
      } else if (e.position != found->first + found->count) {
        fail("sequence ", e.sequence, ": position ", e.position, " follows position ",
             found->first + found->count - 1, " in the batch; positions must be consecutive");
      } else {
        ++found->count;
      }
    }
    return spans;
  }

  float* run_chunk(std::span<const BatchEntry> entries, float* out, const CancelCheck& cancel) {
    const std::vector<Span> spans = spans_of(entries);
    std::size_t needed = 0;
    for (const Span& s : spans) needed += pool_.pages_needed(s.sequence, s.first, s.count);
    if (needed > pool_.free_pages()) {
      throw KvPoolFull(cat("KV pool: the batch needs ", needed, " pages, ", pool_.free_pages(),
                           " of ", pool_.total_pages(), " are free"));
    }
    std::vector<std::size_t> old_length;
    std::size_t max_position = 0;
    for (const Span& s : spans) {
      old_length.push_back(pool_.length(s.sequence));
      pool_.prepare(s.sequence, s.first, s.count);
      max_position = std::max(max_position, s.first + s.count);
    }
    rope_.ensure(max_position);

    tokens_.resize(entries.size());
    slot_.resize(entries.size());
    visible_.resize(entries.size());
    rows_.clear();
    for (std::size_t t = 0; t < entries.size(); ++t) {
      tokens_[t] = entries[t].token;
      slot_[t] = static_cast<std::size_t>(
          std::find_if(spans.begin(), spans.end(),
                       [&](const Span& s) { return s.sequence == entries[t].sequence; }) -
          spans.begin());
      if (entries[t].logits) rows_.push_back(t);
      // Causal: the positions up to its own; else its whole sequence (the span).
      const Span& span = spans[slot_[t]];
      visible_[t] =
          model_->config().causal_attention ? entries[t].position + 1 : span.first + span.count;
    }
    Paged kv{this, entries, spans};
    try {
      pass_.run(tokens_, rope_, kv, cancel);
    } catch (const Cancelled&) {
      // The batch's positions hold partial K/V: back to where each sequence was.
      for (std::size_t i = 0; i < spans.size(); ++i) {
        pool_.truncate(spans[i].sequence, std::min(spans[i].first, old_length[i]));
      }
      throw;
    }
    if (output_ == RowOutput::hidden) {
      pass_.final_norm(rows_, out);
      return out + rows_.size() * model_->config().n_embd;
    }
    pass_.logits(rows_, out);
    return out + rows_.size() * model_->config().n_vocab;
  }

  // The batch's tokens in the pool's pages: token t is entries[t] of sequence slot_[t].
  struct Paged {
    BatchTransformer* self;
    std::span<const BatchEntry> entries;
    const std::vector<Span>& spans;

    std::size_t position(std::size_t t) const noexcept { return entries[t].position; }
    void store(std::size_t layer, std::size_t t, const float* k, const float* v) {
      self->pool_.store(entries[t].sequence, layer, entries[t].position, k, v);
    }
    void attend(std::size_t layer, const float* q, std::size_t n, float* out) {
      const ModelConfig& c = self->model_->config();
      const AttentionShape shape = attention_shape(*self->model_, layer);
      std::vector<PagedKv> views;
      views.reserve(spans.size());
      for (const Span& s : spans) views.push_back(self->pool_.view(s.sequence, layer));
      const Rows rows{self->visible_, self->slot_, views};
      detail::attention_rows(*self->context_, shape, q, n, rows, out, c.attention_window(layer));
    }
  };

  struct Rows {
    const std::vector<std::size_t>& visible_count;
    const std::vector<std::size_t>& slot;
    const std::vector<PagedKv>& views;
    std::size_t visible(std::size_t t) const noexcept { return visible_count[t]; }
    const PagedKv& kv(std::size_t t) const noexcept { return views[slot[t]]; }
  };

  const Model* model_;
  Context* context_;
  BatchOptions options_;
  LayerPass pass_;
  KvPool pool_;
  BlockRopes rope_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::size_t> slot_, rows_, visible_;
  RowOutput output_ = RowOutput::logits;
  std::vector<float> logits_;  // the rows forward() returns: logits or hidden states
};

}  // namespace smol
