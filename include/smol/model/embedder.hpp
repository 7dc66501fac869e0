// Embedder: token sequences in, embeddings out, many sequences per pass.
//
// An embedding is the model's final hidden states (after the output norm, what
// llama.cpp pools) pooled as the file says (ops/pooling.hpp): the mean, the first or
// the last token's, or every token's with Pooling::none; a reranker's (rank) first
// token's state (a cross-encoder's) or last (a decoder's) through its classifier head:
// its scores. The inputs go through a
// BatchTransformer of the Embedder's own, as many whole sequences per pass as its batch
// holds, each a sequence of its pool for the pass alone: a pass reads the weights once
// for all of them, as chat's batching does. A model without a causal mask (the file's
// attention.causal false) lets each token see its whole sequence.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/model/batch_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/pooling.hpp"

namespace smol {

struct EmbedderOptions {
  // Tokens per pass; an input longer than this is refused (llama-server's rule for its
  // physical batch), since a non-causal model must see a sequence whole.
  std::size_t batch = 2048;
  KvTypes kv_type = KvType::f16;
  // How to pool; unset: as the file says (config.pooling).
  std::optional<Pooling> pooling = std::nullopt;
};

// One input's embedding: one row of width() values, or with Pooling::none one per token.
struct Embedding {
  std::vector<float> values;
  std::size_t rows = 0;
};

class Embedder {
 public:
  Embedder(const Model& model, Context& context, EmbedderOptions options = {})
      : model_(&model),
        options_(options),
        pooling_(options.pooling.value_or(model.config().pooling)),
        transformer_(model, context,
                     BatchOptions{// Room for a full batch however its sequences fill their
                                  // last pages (a page per sequence at most, one position
                                  // each).
                                  .total_positions = 2 * options.batch,
                                  .kv_type = options.kv_type,
                                  .max_batch = options.batch}) {
    if (options_.batch == 0) fail("embedder: the batch must hold at least one token");
    if (pooling_ == Pooling::rank && model.config().n_labels == 0) {
      fail(model.file().name(),
           ": rank pooling needs a reranker's classifier head (cls.output), which this file has "
           "not");
    }
  }

  Pooling pooling() const noexcept { return pooling_; }
  // Values per embedding row: the hidden size, or with rank pooling the classifier's
  // labels (a reranker's scores: the first is the relevance llama-server reports).
  std::size_t width() const noexcept {
    return pooling_ == Pooling::rank ? model_->config().n_labels : model_->config().n_embd;
  }
  // The most tokens one input may have.
  std::size_t max_tokens() const noexcept {
    return std::min(options_.batch, model_->config().max_context());
  }

  // The embeddings of `inputs`, in order (unnormalized: normalize_embedding scales them).
  // An empty input, or one over max_tokens(), is an error naming its index. `cancel` is
  // polled as a forward pass polls it.
  std::vector<Embedding> embed(std::span<const std::vector<std::int32_t>> inputs,
                               const CancelCheck& cancel = {}) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].empty()) fail("input ", i, " has no tokens");
      if (inputs[i].size() > max_tokens()) {
        fail("input ", i, " has ", inputs[i].size(), " tokens, over the ", max_tokens(),
             " one pass of the embedder holds");
      }
    }
    std::vector<Embedding> out(inputs.size());
    for (std::size_t first = 0; first < inputs.size();) {
      std::size_t last = first, tokens = 0, pages = 0;
      while (last < inputs.size() && tokens + inputs[last].size() <= options_.batch &&
             pages + KvPool::pages_for(inputs[last].size()) <= transformer_.pool().total_pages()) {
        tokens += inputs[last].size();
        pages += KvPool::pages_for(inputs[last].size());
        ++last;
      }
      run_pass(inputs.subspan(first, last - first), std::span(out).subspan(first), cancel);
      first = last;
    }
    return out;
  }

 private:
  // The one row cls, last and rank pooling keep: rank's is the first token's where the
  // attention sees the whole input (a cross-encoder's [CLS]) and the last's where it is
  // causal (a decoder reranker's), as llama.cpp chooses.
  bool takes_first() const noexcept {
    return pooling_ == Pooling::cls ||
           (pooling_ == Pooling::rank && !model_->config().causal_attention);
  }
  bool takes_last() const noexcept {
    return pooling_ == Pooling::last ||
           (pooling_ == Pooling::rank && model_->config().causal_attention);
  }

  // Inputs that fit one pass, each its own sequence of the pool, removed after.
  void run_pass(std::span<const std::vector<std::int32_t>> inputs, std::span<Embedding> out,
                const CancelCheck& cancel) {
    KvPool& pool = transformer_.pool();
    std::vector<SequenceId> sequences;
    std::vector<BatchEntry> entries;
    const bool every_row = pooling_ == Pooling::none || pooling_ == Pooling::mean;
    for (const std::vector<std::int32_t>& input : inputs) {
      const SequenceId sequence = pool.add();
      sequences.push_back(sequence);
      for (std::size_t p = 0; p < input.size(); ++p) {
        const bool wanted =
            every_row || (takes_first() && p == 0) || (takes_last() && p + 1 == input.size());
        entries.push_back(
            {.sequence = sequence, .token = input[p], .position = p, .logits = wanted});
      }
    }
    struct Release {
      KvPool& pool;
      const std::vector<SequenceId>& sequences;
      ~Release() {
        for (const SequenceId s : sequences) pool.remove(s);
      }
    } release{pool, sequences};
    const std::span<const float> hidden = transformer_.forward(entries, cancel, RowOutput::hidden);
    std::span<const float> rows = hidden;
    if (pooling_ == Pooling::rank) {  // each input's one state through the head
      scores_.resize(inputs.size() * width());
      transformer_.classify(hidden.data(), inputs.size(), scores_.data());
      rows = scores_;
    }
    const std::size_t width = this->width();
    std::size_t row = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::size_t n = every_row ? inputs[i].size() : 1;
      const std::span<const float> own = rows.subspan(row * width, n * width);
      row += n;
      if (pooling_ == Pooling::none) {
        out[i].values.assign(own.begin(), own.end());
        out[i].rows = n;
      } else if (pooling_ == Pooling::mean) {
        out[i].values.resize(width);
        out[i].rows = 1;
        pool_states(Pooling::mean, own, n, width, out[i].values);
      } else {  // cls, last, rank: the one row the pass kept (rank: its scores)
        out[i].values.assign(own.begin(), own.end());
        out[i].rows = 1;
      }
    }
  }

  const Model* model_;
  EmbedderOptions options_;
  Pooling pooling_;
  BatchTransformer transformer_;
  std::vector<float> scores_;  // rank pooling's classifier outputs
};

}  // namespace smol
