// The per-thread work of the GPU forward pass, as __host__ __device__ code.
//
// Each kernel in smol_cuda.cu maps its thread index to a call of one of these
// bodies; host_backend.cuh calls the same bodies in plain loops. So everything but
// the thread mapping, shared memory and warp shuffles runs, and is tested, without a
// GPU (tests/cuda/test_cuda_host.cu runs the whole forward pass this way).
//
// The float expressions follow the CPU path's (ops/rmsnorm.hpp, ops/rope.hpp,
// ops/activation.hpp, ops/attention.hpp) in their order of operations, so the only
// differences left are the GPU's fused multiply-adds and summation order.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "block_decode.cuh"

namespace smol::cuda::detail {

// ---- K/V cache elements: f32, or f16 kept as its bits --------------------------

using KvHalf = std::uint16_t;

SMOL_HD float kv_to_float(float value) {
  return value;
}
SMOL_HD float kv_to_float(KvHalf bits) {
  return half_to_float(bits);
}

template <class Element>
SMOL_HD Element kv_from_float(float value) {
  if constexpr (sizeof(Element) == sizeof(float)) {
    return value;
  } else {
    return float_to_half(value);
  }
}

SMOL_HD std::size_t smaller(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}

SMOL_HD float negative_infinity() {
#ifdef __CUDA_ARCH__
  return __int_as_float(static_cast<int>(0xff800000u));
#else
  return -std::numeric_limits<float>::infinity();
#endif
}

// ---- element-wise bodies: body(i) for i in [0, count()) ------------------------

// Row tokens[t] of an embedding table, one group per index: x[t] = table[tokens[t]].
template <GgmlType T>
struct EmbedBody {
  const std::uint8_t* table;
  std::size_t row_bytes;
  std::size_t cols;
  const std::int32_t* tokens;  // checked against the vocabulary before upload
  float* out;                  // n_tokens rows of `cols`

  static constexpr int kValues = GroupFormat<T>::values;
  std::size_t groups() const { return cols / kValues; }

  SMOL_HD void operator()(std::size_t i) const {
    const std::size_t n_groups = cols / kValues;
    const std::size_t t = i / n_groups, g = i % n_groups;
    float values[kValues];
    decode_group<T>(table + static_cast<std::size_t>(tokens[t]) * row_bytes, g, values);
    float* row = out + t * cols + g * kValues;
    SMOL_UNROLL
    for (int k = 0; k < kValues; ++k) row[k] = values[k];
  }
};

// RoPE on one pair of one head of one token. The angle is computed in double, as
// smol::RopeTable does, from the same inverse frequencies (computed on the host with
// the table's own expression), so cos/sin agree with the CPU's to the last bit or so.
struct RopeBody {
  float* x;                // n_tokens rows of row_stride floats
  std::size_t row_stride;  // floats per token
  std::size_t n_heads;
  std::size_t head_dim;
  std::size_t pairs;                // rotary dims / 2
  std::size_t first_pos;            // position of token 0
  const double* inverse_frequency;  // [pairs]
  bool adjacent_pairs;              // RopeLayout::adjacent_pairs (GGUF) or rotate_half

  SMOL_HD void operator()(std::size_t i) const {
    const std::size_t pair = i % pairs;
    const std::size_t rest = i / pairs;
    const std::size_t head = rest % n_heads, t = rest / n_heads;
    float* v = x + t * row_stride + head * head_dim;
    const double angle = static_cast<double>(first_pos + t) * inverse_frequency[pair];
    const float cos_angle = static_cast<float>(::cos(angle));
    const float sin_angle = static_cast<float>(::sin(angle));
    const std::size_t first = adjacent_pairs ? 2 * pair : pair;
    const std::size_t second = adjacent_pairs ? 2 * pair + 1 : pair + pairs;
    const float a = v[first], b = v[second];
    v[first] = a * cos_angle - b * sin_angle;
    v[second] = a * sin_angle + b * cos_angle;
  }
};

// Writes K and V of n tokens into one layer of the cache. Per KV head the cache holds
// `capacity` positions of head_dim values: keys[g * head_stride + pos * head_dim + d].
template <class Element>
struct KvStoreBody {
  const float* k;  // n_tokens rows of n_kv * head_dim
  const float* v;
  Element* keys;
  Element* values;
  std::size_t n_kv;
  std::size_t head_dim;
  std::size_t head_stride;  // capacity * head_dim
  std::size_t first_pos;

  SMOL_HD void operator()(std::size_t i) const {
    const std::size_t d = i % head_dim;
    const std::size_t rest = i / head_dim;
    const std::size_t g = rest % n_kv, t = rest / n_kv;
    const std::size_t from = (t * n_kv + g) * head_dim + d;
    const std::size_t to = g * head_stride + (first_pos + t) * head_dim + d;
    keys[to] = kv_from_float<Element>(k[from]);
    values[to] = kv_from_float<Element>(v[from]);
  }
};

// out = silu(gate) * up, as smol::swiglu; out may be gate.
struct SwigluBody {
  const float* gate;
  const float* up;
  float* out;

  SMOL_HD void operator()(std::size_t i) const {
    const float g = gate[i];
    out[i] = g / (1.0f + ::expf(-g)) * up[i];
  }
};

// The residual: x += delta.
struct AddBody {
  float* x;
  const float* delta;

  SMOL_HD void operator()(std::size_t i) const { x[i] += delta[i]; }
};

// x[i] += bias[i % width]: one bias row added to each of the rows of x (Qwen2's QKV
// biases, added to every token's projection).
struct AddBiasBody {
  float* x;
  const float* bias;
  std::size_t width;

  SMOL_HD void operator()(std::size_t i) const { x[i] += bias[i % width]; }
};

// ---- RMSNorm: the sum of squares in double, as ops/rmsnorm.hpp -----------------

SMOL_HD double square_as_double(float x) {
  return static_cast<double>(x * x);
}

SMOL_HD float rms_scale(double sum_of_squares, std::size_t n, float eps) {
  const float mean = static_cast<float>(sum_of_squares / static_cast<double>(n));
  return 1.0f / ::sqrtf(mean + eps);
}

SMOL_HD float rms_apply(float x, float scale, float weight) {
  return (x * scale) * weight;
}

// ---- matmul ---------------------------------------------------------------------

// Tokens per weight decode: one for decode (a matvec), a tile of 8 for prefill, which
// decodes each weight group once for 8 tokens. Both backends choose with this.
constexpr int kMatmulTile = 8;
constexpr int kMatmulWarpsPerBlock = 4;  // one weight row per warp

// ---- attention ------------------------------------------------------------------
//
// A GPU block takes one (token, KV head, chunk of positions) and all the query heads
// of that KV head's group, so each K and V row is read once per group. It walks its
// chunk in tiles of kAttentionTile positions with an online softmax (running max m,
// sum l and weighted values acc, rescaled when the max grows) and writes the partial
// (m, l, acc) of every query head; a second pass merges the chunks exactly as
// ops/attention.hpp merges its blocks. Splitting positions into chunks keeps a decode
// step (one token) busy on many SMs.

constexpr std::size_t kAttentionTile = 256;  // positions per tile = threads per block
constexpr std::size_t kAttentionThreads = 256;
constexpr std::size_t kMaxGroup = 8;  // query heads per KV head
constexpr std::size_t kMaxHeadDim = 256;
constexpr std::size_t kMaxPairsPerThread = kMaxGroup * kMaxHeadDim / kAttentionThreads;
// Blocks a launch aims for, before splitting positions into more chunks stops paying.
constexpr std::size_t kAttentionTargetBlocks = 512;

template <class Element>
struct AttentionArgs {
  const float* q;           // n_tokens rows of n_head * head_dim (RoPE applied)
  const Element* keys;      // this layer's keys, KV head 0
  const Element* values;    // this layer's values, KV head 0
  std::size_t head_stride;  // elements between KV heads
  float* partials;          // [token][head][chunk][2 + head_dim]: m, l, acc
  std::size_t n_tokens;
  std::size_t n_head;
  std::size_t n_kv;
  std::size_t head_dim;
  std::size_t first_pos;  // position of token 0
  float scale;            // 1 / sqrt(head_dim)
  std::size_t chunk_len;  // positions per chunk, a multiple of kAttentionTile
  std::size_t n_chunks;

  SMOL_HD std::size_t group() const { return n_head / n_kv; }
  // Positions token t attends to: [0, first_pos + t], causal.
  SMOL_HD std::size_t visible(std::size_t t) const { return first_pos + t + 1; }
  SMOL_HD float* partial(std::size_t t, std::size_t head, std::size_t chunk) const {
    return partials + ((t * n_head + head) * n_chunks + chunk) * (head_dim + 2);
  }
};

// How many chunks, of how many positions, the attention of n_tokens tokens splits
// into when the last token sees `visible` positions: enough blocks to fill the GPU,
// never an empty trailing chunk, and a partials buffer that stays small.
struct AttentionPlan {
  std::size_t chunk_len;
  std::size_t n_chunks;
};

inline AttentionPlan plan_attention(std::size_t n_tokens, std::size_t n_kv, std::size_t visible) {
  const std::size_t tiles = (visible + kAttentionTile - 1) / kAttentionTile;
  const std::size_t per_chunk_blocks = n_tokens * n_kv;
  std::size_t chunks = (kAttentionTargetBlocks + per_chunk_blocks - 1) / per_chunk_blocks;
  chunks = chunks < 1 ? 1 : (chunks > tiles ? tiles : chunks);
  const std::size_t chunk_len = (tiles + chunks - 1) / chunks * kAttentionTile;
  return {chunk_len, (visible + chunk_len - 1) / chunk_len};
}

// Score of one cached key against one query: (sum_d k[d] q[d]) * scale, as the CPU.
template <class Element>
SMOL_HD float attention_score(const float* q, const Element* key, std::size_t dim, float scale) {
  float dot = 0.0f;
  for (std::size_t d = 0; d < dim; ++d) dot += kv_to_float(key[d]) * q[d];
  return dot * scale;
}

// The online softmax's step when a tile's maximum is known: the new running max and
// the factor that rescales what was summed under the old one (0 when nothing was).
struct OnlineStep {
  float max;
  float rescale;
};

SMOL_HD OnlineStep online_step(float running_max, float tile_max) {
  const float max = ::fmaxf(running_max, tile_max);
  return {max, ::expf(running_max - max)};
}

// acc * rescale + sum_p weights[p] * V[first + p][d] over `count` positions.
template <class Element>
SMOL_HD float attention_values(float acc, float rescale, const float* weights,
                               const Element* values, std::size_t first, std::size_t count,
                               std::size_t dim, std::size_t d) {
  float sum = acc * rescale;
  for (std::size_t p = 0; p < count; ++p) {
    sum += weights[p] * kv_to_float(values[(first + p) * dim + d]);
  }
  return sum;
}

// Merges the chunks' partials of one (token, head) into output value d, as
// ops/attention.hpp merges its blocks: rescale each to the global max, sum, divide.
struct AttentionMergeBody {
  const float* partials;
  float* out;  // n_tokens rows of n_head * head_dim
  std::size_t head_dim;
  std::size_t n_chunks;

  SMOL_HD void operator()(std::size_t i) const {
    const std::size_t d = i % head_dim;
    const std::size_t row = i / head_dim;  // token * n_head + head
    const std::size_t stride = head_dim + 2;
    const float* partial = partials + row * n_chunks * stride;
    float global_max = negative_infinity();
    for (std::size_t c = 0; c < n_chunks; ++c) {
      global_max = ::fmaxf(global_max, partial[c * stride]);
    }
    double total = 0.0;
    float sum = 0.0f;
    for (std::size_t c = 0; c < n_chunks; ++c) {
      const float rescale = ::expf(partial[c * stride] - global_max);
      total += static_cast<double>(partial[c * stride + 1]) * rescale;
      sum += rescale * partial[c * stride + 2 + d];
    }
    out[row * head_dim + d] = sum * static_cast<float>(1.0 / total);
  }
};

}  // namespace smol::cuda::detail
