// LogitsSource: what a chat session needs from a model, and nothing more.
//
// A session only ever asks "run these tokens from position n_past and give me the
// next-token logits", so it is written against this small interface. The Transformer
// provides it for real models; tests script one to force exact token sequences
// (a <think> block, an eos) that a random model would never produce on demand.
#pragma once

#include <cstddef>
#include <span>

#include "smol/model/transformer.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;

  // Evaluates `tokens` at positions [n_past, n_past + size) and returns the logits
  // of the last one (n_vocab floats, valid until the next call). Positions at and
  // after n_past that were evaluated before are forgotten.
  virtual std::span<const float> evaluate(std::span<const TokenId> tokens, std::size_t n_past) = 0;
  // How many positions the source can hold.
  virtual std::size_t context_length() const = 0;
};

class TransformerSource final : public LogitsSource {
 public:
  explicit TransformerSource(Transformer& transformer) : transformer_(&transformer) {}

  std::span<const float> evaluate(std::span<const TokenId> tokens, std::size_t n_past) override {
    return transformer_->forward(tokens, n_past, LogitsFor::last);
  }
  std::size_t context_length() const override { return transformer_->context_length(); }

 private:
  Transformer* transformer_;
};

}  // namespace smol
