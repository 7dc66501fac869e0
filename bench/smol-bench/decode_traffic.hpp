// The bytes one decode token must bring in from memory: the numerator of the roofline.
//
// A decode step multiplies one activation vector by every matrix of every block and by
// the LM head, so each weight byte is read once per token and none stays in cache for
// the next (the weights are ~4x the LLC). Attention then reads every K and V row the
// cache holds. Everything else a token touches (one embedding row, the norm vectors,
// activations) is counted too, though it is under 0.1% of the total.
#pragma once

#include <cstddef>

#include "smol/core/half.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/model/repacked_weights.hpp"

namespace smol::bench {

struct DecodeTraffic {
  std::size_t weight_bytes = 0;           // read by every token whatever the depth
  std::size_t kv_bytes_per_position = 0;  // K and V of all blocks for one position

  // A decode test of `generated` tokens starting with `depth` positions cached: token i
  // attends over depth + i + 1 positions, so on average depth + (generated + 1) / 2.
  double bytes_per_token(std::size_t depth, std::size_t generated) const noexcept {
    const double mean_positions =
        static_cast<double>(depth) + (static_cast<double>(generated) + 1.0) / 2.0;
    return static_cast<double>(weight_bytes) +
           mean_positions * static_cast<double>(kv_bytes_per_position);
  }
};

// The bytes a matvec reads: the interleaved copy's when there is one (2.8 % more for
// Q4_K, 1.5 % more for IQ4_XS, the file's size for the other sixteen-row copies but a
// last group's padding).
inline std::size_t matrix_bytes(const WeightMatrix& matrix) noexcept {
  if (matrix.rows8 != nullptr) return repacked_bytes(matrix);
  return matrix.rows * matrix.row_bytes;
}

inline DecodeTraffic decode_traffic(const Model& model, KvTypes kv_type) {
  const ModelConfig& config = model.config();
  const ModelWeights& weights = model.weights();
  DecodeTraffic traffic;
  for (const LayerWeights& layer : weights.layers) {
    for (const WeightMatrix* matrix :
         {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
          &layer.ffn_up, &layer.ffn_down}) {
      traffic.weight_bytes += matrix_bytes(*matrix);
    }
    // A mixture of experts: the router, and the chosen experts' matrices of a token
    // (on average n_expert_used of n_expert; a step of one token reads no others).
    traffic.weight_bytes += matrix_bytes(layer.ffn_gate_inp);
    for (const auto* experts : {&layer.ffn_gate_exps, &layer.ffn_up_exps, &layer.ffn_down_exps}) {
      for (const WeightMatrix& matrix : *experts) {
        traffic.weight_bytes += matrix_bytes(matrix) * config.n_expert_used / config.n_expert;
      }
    }
  }
  // With tied embeddings the LM head is token_embd itself: read in full once, as the
  // head; the embedding lookup adds one row.
  traffic.weight_bytes += matrix_bytes(weights.output) + weights.token_embd.row_bytes;
  const std::size_t norm_vectors = 2 * config.n_layer + 1;
  traffic.weight_bytes += norm_vectors * config.n_embd * sizeof(float);

  traffic.kv_bytes_per_position =
      config.n_layer * config.n_head_kv *
      (kv_row_bytes(kv_type.key, config.head_dim) + kv_row_bytes(kv_type.value, config.head_dim));
  return traffic;
}

}  // namespace smol::bench
