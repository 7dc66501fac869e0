// LogitsSource: what a chat session needs from a model, and nothing more.
//
// A session only ever asks "run these tokens from position n_past and give me the
// next-token logits", so it is written against this small interface. The Transformer
// provides it for real models; tests script one to force exact token sequences
// (a <think> block, an eos) that a random model would never produce on demand.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/model/transformer.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;

  // Evaluates `tokens` at positions [n_past, n_past + size) and returns the logits
  // of the last one (n_vocab floats, valid until the next call). Positions at and
  // after n_past that were evaluated before are forgotten. A source that can stop
  // part-way polls `cancel` and throws Cancelled, holding a prefix of what it was
  // given (the caller re-evaluates from where its own bookkeeping ends).
  virtual std::span<const float> evaluate(std::span<const TokenId> tokens, std::size_t n_past,
                                          const CancelCheck& cancel = {}) = 0;
  // How many positions the source can hold.
  virtual std::size_t context_length() const = 0;

  // As evaluate(), but the logits of every token, one n_vocab row each in order (a
  // speculative verification pass needs the row after each drafted token). A source that
  // cannot run several tokens at once answers token by token.
  virtual std::span<const float> evaluate_all(std::span<const TokenId> tokens, std::size_t n_past) {
    all_rows_.clear();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::span<const float> row = evaluate(tokens.subspan(i, 1), n_past + i);
      all_rows_.insert(all_rows_.end(), row.begin(), row.end());
    }
    return all_rows_;
  }

 private:
  std::vector<float> all_rows_;  // evaluate_all's rows, token by token
};

// Any session with the Transformer's forward() and context_length(), seen as a
// LogitsSource: the CPU Transformer (TransformerSource below) and, in a build with
// the CUDA unit, smol::cuda::GpuTransformer (ForwardSource<cuda::GpuTransformer>).
template <class Session>
class ForwardSource final : public LogitsSource {
 public:
  explicit ForwardSource(Session& session) : session_(&session) {}

  std::span<const float> evaluate(std::span<const TokenId> tokens, std::size_t n_past,
                                  const CancelCheck& cancel = {}) override {
    // A session that cannot stop part-way (the GPU one) is polled between calls only.
    if constexpr (requires { session_->forward(tokens, n_past, LogitsFor::last, cancel); }) {
      return session_->forward(tokens, n_past, LogitsFor::last, cancel);
    } else {
      cancel.throw_if_requested();
      return session_->forward(tokens, n_past, LogitsFor::last);
    }
  }
  std::size_t context_length() const override { return session_->context_length(); }

  std::span<const float> evaluate_all(std::span<const TokenId> tokens,
                                      std::size_t n_past) override {
    return session_->forward(tokens, n_past, LogitsFor::all);
  }

 private:
  Session* session_;
};

using TransformerSource = ForwardSource<Transformer>;

}  // namespace smol
