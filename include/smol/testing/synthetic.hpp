// Synthetic SmolLM3 / Llama / Qwen2 / Qwen3 GGUF models: random weights with a real
// file layout.
//
// Tests and benchmarks need models of any shape with the exact tensor names, type
// mix and metadata of a real SmolLM3 Q4_K_M file, without shipping gigabytes. Weights
// follow the tiny fixture's recipe (shared/fixtures/README.md) so that even a small
// model gives non-degenerate logits: embeddings N(0, 0.02^2), projections
// N(0, g^2 / fan_in) with g = 1.5 for Q and K, 2 for the attention output and FFN
// down, 1 elsewhere; norms 1 + 0.1 N(0, 1); the final norm scaled so that the tied
// output layer gives logits with a spread of about 3.
//
// Every tensor draws its values from its own stream, seeded by (seed, tensor name),
// so the F32 and Q4_K_M files made with one seed hold the same weights up to
// quantization. A family's optional tensors follow its real files (SyntheticFamily):
// Qwen2's QKV biases are N(0, 0.1^2), Qwen3's per-head Q/K norms are drawn like the
// other norms. With `fast`, quantized tensors are instead filled with random valid
// blocks of the same scale: no quantizer search, for multi-gigabyte benchmark files.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/gguf/writer.hpp"
#include "smol/model/architecture.hpp"
#include "smol/ops/pooling.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/template/smollm3_template.hpp"
#include "smol/testing/synthetic_vocabulary.hpp"

namespace smol {

// The weight formats of llama.cpp's common file types.
enum class SyntheticWeights {
  f32,        // everything F32 (general.file_type 0)
  f16,        // matrices F16, norms F32 (1)
  q8_0,       // matrices Q8_0, norms F32 (7)
  q4_0,       // llama-quantize's Q4_0: matrices Q4_0, the LM head Q6_K, norms F32 (2)
  q4_1,       // llama-quantize's Q4_1: matrices Q4_1, the LM head Q6_K, norms F32 (3)
  q5_0,       // llama-quantize's Q5_0: matrices Q5_0, the LM head Q6_K, norms F32 (8)
  q5_1,       // llama-quantize's Q5_1: matrices Q5_1, the LM head Q6_K, norms F32 (9)
  q4_k_m,     // llama-quantize's Q4_K_M mix of Q4_K and Q6_K, norms F32 (15)
  q5_k_m,     // llama-quantize's Q5_K_M: Q4_K_M's mix with Q5_K in Q4_K's place (17)
  iq4_xs,     // llama-quantize's IQ4_XS mix: IQ4_XS, attn_v Q5_K with 4+ query heads a KV
              // head, ffn_down Q5_K in the first eighth of the layers, the LM head Q6_K, norms
              // F32 (30)
  iq4_nl,     // llama-quantize's IQ4_NL: IQ4_XS's mix with IQ4_NL in IQ4_XS's place (25)
  q3_k_m,     // llama-quantize's Q3_K_M: Q3_K; attn_v Q5_K in the first two layers, Q4_K
              // after; attn_output Q4_K; ffn_down Q5_K in the first sixteenth, Q4_K after;
              // the LM head Q6_K (12)
  q2_k,       // llama-quantize's Q2_K: Q2_K; attn_v Q4_K with 4+ query heads a KV head (Q3_K
              // without); attn_output and ffn_down Q3_K; the LM head Q6_K (10)
  mxfp4_moe,  // gpt-oss's published files: a mixture's expert tensors MXFP4, every other
              // matrix Q8_0, norms and routers F32 (38)
};

struct SyntheticSpec {
  std::string arch = "smollm3";  // an entry of model/architecture.hpp
  std::string name = "smol-synthetic";
  std::size_t layers = 8;
  std::size_t hidden = 256;
  std::size_t ffn = 768;
  std::size_t heads = 4;
  std::size_t kv_heads = 1;
  std::size_t head_dim = 0;  // 0: hidden / heads
  std::size_t vocab = 1024;
  std::size_t context = 4096;
  float rope_base = 5e6f;
  float rms_eps = 1e-6f;
  std::uint64_t seed = 1;
  SyntheticWeights weights = SyntheticWeights::q4_k_m;
  bool tied = true;   // no output.weight: the LM head is token_embd
  bool fast = false;  // random valid quantized blocks instead of quantized Gaussians
  // The family's optional tensors and tokenizer.ggml.pre (synthetic_family sets them
  // as the family's real files have them).
  bool attention_biases = false;   // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;            // blk.N.attn_{q,k}_norm.weight
  bool post_norms = false;         // blk.N.post_attention_norm, post_ffw_norm (Gemma 3)
  std::size_t sliding_window = 0;  // <arch>.attention.sliding_window; 0: no key
  bool output_bias = false;        // blk.N.attn_output.bias (GPT-OSS)
  bool attention_sinks = false;    // blk.N.attn_sinks.weight (GPT-OSS)
  bool expert_biases = false;      // blk.N.ffn_gate_inp.bias, ffn_*_exps.bias (GPT-OSS)
  std::string pre_tokenizer = "llama-bpe";
  // YaRN: rope.scaling.type "yarn" with this factor over this original context (GPT-OSS:
  // 32 over 4096); a factor of 1 writes no scaling keys.
  float yarn_factor = 1.0f;
  std::size_t yarn_original_context = 0;
  // A mixture of experts in every block's feed-forward (the family's MixtureRule): the
  // router and 3-D expert tensors instead of ffn_gate/up/down. 0 experts: dense.
  std::size_t experts = 0;
  std::size_t experts_used = 0;
  std::size_t expert_ffn = 0;
  // An embedding model's keys (ops/pooling.hpp): <arch>.pooling_type when set,
  // <arch>.attention.causal = false when not causal, and tokenizer.ggml.add_eos_token,
  // so that inputs end in eos (Qwen3-Embedding pools that token's state).
  std::optional<Pooling> pooling = std::nullopt;
  bool causal = true;
  bool add_eos = false;
  // A reranker's head with this many labels (0: none): an encoder's cls and cls.output
  // with biases; a decoder's cls.output alone (Qwen3-Reranker's "yes" and "no" rows).
  std::size_t labels = 0;
  // tokenizer.chat_template.rerank, where not empty (a decoder reranker's prompt).
  std::string rerank_template;

  std::size_t effective_head_dim() const { return head_dim != 0 ? head_dim : hidden / heads; }

  void validate() const {
    find_architecture(arch, "synthetic model");  // any entry of model/architecture.hpp
    if (layers == 0 || hidden == 0 || ffn == 0 || heads == 0 || kv_heads == 0 || context == 0) {
      fail("synthetic model: layers, hidden, ffn, heads, kv-heads and context must be positive");
    }
    if (heads % kv_heads != 0) {
      fail("synthetic model: ", heads, " query heads cannot share ", kv_heads, " KV heads evenly");
    }
    if (head_dim == 0 && hidden % heads != 0) {
      fail("synthetic model: hidden ", hidden, " is not a multiple of ", heads, " heads");
    }
    if (effective_head_dim() % 2 != 0) {
      fail("synthetic model: head_dim ", effective_head_dim(), " must be even for RoPE");
    }
    const Architecture& family = find_architecture(arch);
    const std::pair<bool, std::string_view> mechanisms[] = {
        {attention_biases && !family.optional.qkv_bias, "QKV biases"},
        {qk_norm && !family.optional.qk_norm, "per-head Q/K norms"},
        {post_norms && !family.block.post_norms, "post-attention norms"},
        {sliding_window != 0 && family.sliding_window.pattern == 0, "sliding window"},
        {output_bias && !family.optional.output_bias, "attention output bias"},
        {attention_sinks && !family.optional.attention_sinks, "attention sinks"},
        {expert_biases && !family.optional.expert_biases, "expert biases"},
    };
    for (const auto& [foreign, what] : mechanisms) {
      if (foreign) fail("synthetic model: a ", arch, " file carries no ", what);
    }
    if (family.mixture.experts != (experts != 0)) {
      fail("synthetic model: a ", arch, " file ",
           family.mixture.experts ? "needs experts" : "carries no experts");
    }
    if (experts != 0 && (experts_used == 0 || experts_used > experts || expert_ffn == 0)) {
      fail("synthetic model: ", experts_used, " of ", experts, " experts of ", expert_ffn,
           " do not make a mixture");
    }
    if (vocab < 256 + std::size(kSmolLM3ControlTokens)) {
      fail("synthetic model: vocab must be at least ", 256 + std::size(kSmolLM3ControlTokens));
    }
  }
};

// What a family's real files carry beyond the Llama block, for the generator to
// write: the optional tensors every file of the family has, its pre-tokenizer, and
// whether its small models tie the LM head to the embeddings.
struct SyntheticFamily {
  std::string_view arch;
  bool attention_biases = false;
  bool qk_norm = false;
  bool post_norms = false;
  std::size_t sliding_window = 0;
  bool output_bias = false, attention_sinks = false, expert_biases = false;
  std::string_view pre_tokenizer = "llama-bpe";
  bool tied = false;
  std::size_t experts = 0, experts_used = 0;  // a mixture's default shape
  float yarn_factor = 1.0f;                   // with yarn_original_context, as SyntheticSpec's
  std::size_t yarn_original_context = 0;
};

inline constexpr SyntheticFamily kSyntheticFamilies[] = {
    {.arch = "llama"},
    {.arch = "smollm3", .tied = true},
    {.arch = "bert"},
    {.arch = "nomic-bert"},
    {.arch = "qwen2", .attention_biases = true, .pre_tokenizer = "qwen2", .tied = true},
    {.arch = "qwen3", .qk_norm = true, .pre_tokenizer = "qwen2", .tied = true},
    {.arch = "qwen3moe",
     .qk_norm = true,
     .pre_tokenizer = "qwen2",
     .experts = 16,
     .experts_used = 4},
    // A window far shorter than Gemma 3's 512, so short tests cross it.
    {.arch = "gemma3", .qk_norm = true, .post_norms = true, .sliding_window = 16, .tied = true},
    // GPT-OSS: every bias and sink its files have, YaRN by 32 over 4096 positions, a
    // window of 16 (the real 128 would not be crossed by short tests) and o200k's
    // pre-tokenizer.
    {.arch = "gpt-oss",
     .attention_biases = true,
     .sliding_window = 16,
     .output_bias = true,
     .attention_sinks = true,
     .expert_biases = true,
     .pre_tokenizer = "gpt-4o",
     .experts = 16,
     .experts_used = 4,
     .yarn_factor = 32.0f,
     .yarn_original_context = 4096},
};

// Makes `spec` a file of family `arch`: its optional tensors, pre-tokenizer and LM head.
inline void set_synthetic_family(SyntheticSpec& spec, std::string_view arch) {
  for (const SyntheticFamily& family : kSyntheticFamilies) {
    if (family.arch != arch) continue;
    spec.attention_biases = family.attention_biases;
    spec.qk_norm = family.qk_norm;
    spec.post_norms = family.post_norms;
    spec.sliding_window = family.sliding_window;
    spec.output_bias = family.output_bias;
    spec.attention_sinks = family.attention_sinks;
    spec.expert_biases = family.expert_biases;
    spec.yarn_factor = family.yarn_factor;
    spec.yarn_original_context = family.yarn_original_context;
    spec.pre_tokenizer = std::string(family.pre_tokenizer);
    spec.tied = family.tied;
    // A mixture keeps the shape a preset gave it; another family's takes the default.
    if (spec.arch != arch || spec.experts == 0 || family.experts == 0) {
      spec.experts = family.experts;
      spec.experts_used = family.experts_used;
      spec.expert_ffn = family.experts != 0 ? spec.ffn / 3 : 0;
    }
    spec.arch = std::string(arch);
    return;
  }
  fail("synthetic model: no family \"", arch, "\"");
}

// A decoder reranker's prompt in Qwen3-Reranker's manner (our own words): the chat
// format around an instruction, the query and the document, ending where the model's
// answer ("yes" or "no") would begin; {query} and {document} are filled in per pair.
inline constexpr std::string_view kSyntheticRerankTemplate =
    "<|im_start|>system\nJudge whether the Document answers the Query. Answer only \"yes\" or "
    "\"no\".<|im_end|>\n<|im_start|>user\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n";

// Named shapes: "tiny" (like the fixture: 8 layers, 256 hidden, 4/1 heads, 768 FFN,
// 1024 vocab), "smollm3-3b" (the real SmolLM3-3B shape, Q4_K_M, fast blocks), and
// "qwen2-tiny" / "qwen3-tiny" / "gemma3-tiny": the tiny shape in those families'
// layouts (4/2 heads; Qwen3's and Gemma 3's heads of 128, wider than 256 / 4, as
// Qwen3-0.6B's and Gemma 3 270M's are; Gemma 3's window of 16 positions).
inline SyntheticSpec synthetic_preset(std::string_view name) {
  SyntheticSpec spec;
  if (name == "tiny") {
    spec.name = "smol-synthetic-tiny";
    return spec;  // the defaults are the tiny shape
  }
  if (name == "qwen2-tiny" || name == "qwen3-tiny" || name == "gemma3-tiny" ||
      name == "qwen3moe-tiny" || name == "qwen3-moe-tiny") {
    const std::string_view family =
        name == "qwen3-moe-tiny" ? "qwen3moe" : name.substr(0, name.find('-'));
    set_synthetic_family(spec, family);
    spec.name = "smol-synthetic-" + std::string(name);
    spec.kv_heads = 2;
    spec.head_dim = family == "qwen2" ? 0 : 128;
    spec.rope_base = 1e6f;
    return spec;
  }
  if (name == "qwen3-embedding-tiny") {  // Qwen3-Embedding's habits on the qwen3-tiny shape
    SyntheticSpec spec = synthetic_preset("qwen3-tiny");
    spec.name = "smol-synthetic-qwen3-embedding-tiny";
    spec.pooling = Pooling::last;
    spec.add_eos = true;
    return spec;
  }
  if (name == "qwen3-reranker-tiny") {  // Qwen3-Reranker's habits on the qwen3-tiny shape
    SyntheticSpec spec = synthetic_preset("qwen3-tiny");
    spec.name = "smol-synthetic-qwen3-reranker-tiny";
    spec.pooling = Pooling::rank;
    spec.labels = 2;  // "yes", "no"
    spec.rerank_template = std::string(kSyntheticRerankTemplate);
    return spec;
  }
  if (name == "qwen3-embedding-0.6b") {  // Qwen3-Embedding-0.6B's shape, Q8_0 as it ships
    set_synthetic_family(spec, "qwen3");
    spec.name = "smol-synthetic-qwen3-embedding-0.6b";
    spec.layers = 28;
    spec.hidden = 1024;
    spec.ffn = 3072;
    spec.heads = 16;
    spec.kv_heads = 8;
    spec.head_dim = 128;
    spec.vocab = 151669;
    spec.context = 32768;
    spec.rope_base = 1e6f;
    spec.weights = SyntheticWeights::q8_0;
    spec.fast = true;
    spec.pooling = Pooling::last;
    spec.add_eos = true;
    return spec;
  }
  if (name == "bert-tiny" || name == "bert-reranker-tiny") {  // BGE's habits, 4 small blocks
    set_synthetic_family(spec, "bert");
    spec.name = "smol-synthetic-" + std::string(name);
    spec.layers = 4;
    spec.ffn = 1024;
    spec.kv_heads = 4;
    spec.context = 512;
    spec.rms_eps = 1e-12f;
    spec.causal = false;
    spec.pooling = name == "bert-tiny" ? Pooling::cls : Pooling::rank;
    spec.labels = name == "bert-tiny" ? 0 : 1;
    return spec;
  }
  if (name == "nomic-bert-tiny") {  // nomic-embed-text's habits, 4 small blocks
    set_synthetic_family(spec, "nomic-bert");
    spec.name = "smol-synthetic-nomic-bert-tiny";
    spec.layers = 4;
    spec.kv_heads = 4;
    spec.context = 2048;
    spec.rope_base = 1000.0f;
    spec.rms_eps = 1e-12f;
    spec.causal = false;
    spec.pooling = Pooling::mean;
    return spec;
  }
  if (name == "bge-base") {  // BGE-base-en-v1.5's shape, F16 as it ships
    set_synthetic_family(spec, "bert");
    spec.name = "smol-synthetic-bge-base";
    spec.layers = 12;
    spec.hidden = 768;
    spec.ffn = 3072;
    spec.heads = 12;
    spec.kv_heads = 12;
    spec.context = 512;
    spec.vocab = 30522;
    spec.rms_eps = 1e-12f;
    spec.causal = false;
    spec.pooling = Pooling::cls;
    spec.weights = SyntheticWeights::f16;
    return spec;
  }
  if (name == "gpt-oss-tiny") {  // 8 heads of 64 over 256 (gpt-oss: 64 of 64 over 2880)
    set_synthetic_family(spec, "gpt-oss");
    spec.name = "smol-synthetic-gpt-oss-tiny";
    spec.heads = 8;
    spec.kv_heads = 2;
    spec.head_dim = 64;
    spec.context = 131072;
    spec.rope_base = 150000.0f;
    spec.rms_eps = 1e-5f;
    return spec;
  }
  if (name == "gpt-oss-20b") {  // gpt-oss-20b's shape and MXFP4 experts (--layers N for a part)
    set_synthetic_family(spec, "gpt-oss");
    spec.name = "smol-synthetic-gpt-oss-20b";
    spec.layers = 24;
    spec.hidden = 2880;
    spec.ffn = 2880;
    spec.heads = 64;
    spec.kv_heads = 8;
    spec.head_dim = 64;
    spec.experts = 32;
    spec.experts_used = 4;
    spec.expert_ffn = 2880;
    spec.sliding_window = 128;
    spec.vocab = 201088;
    spec.context = 131072;
    spec.rope_base = 150000.0f;
    spec.rms_eps = 1e-5f;
    spec.weights = SyntheticWeights::mxfp4_moe;
    spec.fast = true;
    return spec;
  }
  if (name == "qwen3-30b-a3b") {  // Qwen3-30B-A3B's shape (--layers N for a part of it)
    set_synthetic_family(spec, "qwen3moe");
    spec.name = "smol-synthetic-qwen3-30b-a3b";
    spec.layers = 48;
    spec.hidden = 2048;
    spec.ffn = 6144;
    spec.heads = 32;
    spec.kv_heads = 4;
    spec.head_dim = 128;
    spec.experts = 128;
    spec.experts_used = 8;
    spec.expert_ffn = 768;
    spec.vocab = 151936;
    spec.context = 40960;
    spec.rope_base = 1e6f;
    spec.tied = false;
    spec.weights = SyntheticWeights::q4_k_m;
    spec.fast = true;
    return spec;
  }
  if (name == "smollm3-3b") {
    spec.name = "smol-synthetic-smollm3-3b";
    spec.layers = 36;
    spec.hidden = 2048;
    spec.ffn = 11008;
    spec.heads = 16;
    spec.kv_heads = 4;
    spec.head_dim = 128;
    spec.vocab = 128256;
    spec.context = 65536;
    spec.rope_base = 5e6f;
    spec.rms_eps = 1e-6f;
    spec.weights = SyntheticWeights::q4_k_m;
    spec.fast = true;
    return spec;
  }
  fail("unknown synthetic model preset \"", name,
       "\" (known: tiny, smollm3-3b, qwen3-30b-a3b, gpt-oss-20b, qwen2-tiny, qwen3-tiny, "
       "qwen3moe-tiny (or qwen3-moe-tiny), gemma3-tiny, gpt-oss-tiny, qwen3-embedding-tiny, "
       "qwen3-embedding-0.6b, qwen3-reranker-tiny, bert-tiny, bert-reranker-tiny, nomic-bert-tiny, "
       "bge-base)");
}

// llama-quantize gives attn_v and ffn_down more bits (Q6_K in Q4_K_M) in the first
// and last eighth of the blocks and in every third block in between.
constexpr bool uses_more_bits(std::size_t layer, std::size_t n_layers) noexcept {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 ||
         (layer >= n_layers / 8 && (layer - n_layers / 8) % 3 == 2);
}

// One tensor of a synthetic model: where it goes and how its values are drawn.
struct SyntheticTensor {
  enum class Init { gaussian, norm };
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<std::uint64_t> dims;  // innermost first
  Init init = Init::gaussian;
  float scale = 1;  // gaussian: the standard deviation; norm: the centre

  std::size_t elements() const {
    std::size_t n = 1;
    for (const auto dim : dims) n *= static_cast<std::size_t>(dim);
    return n;
  }
};

namespace detail {

// What llama-quantize falls back to when a row does not split into 256-value blocks
// (llama_tensor_get_type): a 32-value type of at least the bits, IQ4_XS, Q3_K and Q2_K to
// IQ4_NL, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0.
inline GgmlType fit_row(GgmlType wanted, std::uint64_t row_length) {
  if (row_length % ggml_type_info(wanted).block_values == 0) return wanted;
  if (row_length % 32 != 0) return GgmlType::F16;
  switch (wanted) {
    case GgmlType::IQ4_XS:
    case GgmlType::Q3_K:
    case GgmlType::Q2_K:
      return GgmlType::IQ4_NL;
    case GgmlType::Q4_K:
      return GgmlType::Q5_0;
    case GgmlType::Q5_K:
      return GgmlType::Q5_1;
    default:
      return GgmlType::Q8_0;
  }
}

inline GgmlType synthetic_matrix_type(const SyntheticSpec& spec, std::string_view role,
                                      std::size_t layer, std::uint64_t row_length) {
  switch (spec.weights) {
    case SyntheticWeights::f32:
      return GgmlType::F32;
    case SyntheticWeights::f16:
      return GgmlType::F16;
    case SyntheticWeights::q8_0:
    case SyntheticWeights::mxfp4_moe:  // its experts: plan_synthetic_tensors
      return fit_row(GgmlType::Q8_0, row_length);
    case SyntheticWeights::q4_0:
    case SyntheticWeights::q4_1:
    case SyntheticWeights::q5_0:
    case SyntheticWeights::q5_1:
    case SyntheticWeights::q4_k_m:
    case SyntheticWeights::q5_k_m:
    case SyntheticWeights::iq4_xs:
    case SyntheticWeights::iq4_nl:
    case SyntheticWeights::q3_k_m:
    case SyntheticWeights::q2_k:
      break;
  }
  // The LM head (output, or token_embd when tied) is Q6_K.
  const bool lm_head = role == "output" || (role == "token_embd" && spec.tied);
  // The legacy 32-value types: every matrix of the type but the LM head.
  for (const auto& [weights, type] : {std::pair{SyntheticWeights::q4_0, GgmlType::Q4_0},
                                      std::pair{SyntheticWeights::q4_1, GgmlType::Q4_1},
                                      std::pair{SyntheticWeights::q5_0, GgmlType::Q5_0},
                                      std::pair{SyntheticWeights::q5_1, GgmlType::Q5_1}}) {
    if (spec.weights == weights) return fit_row(lm_head ? GgmlType::Q6_K : type, row_length);
  }
  if (lm_head) return fit_row(GgmlType::Q6_K, row_length);
  const bool grouped = spec.kv_heads != 0 && spec.heads / spec.kv_heads >= 4;
  if (spec.weights == SyntheticWeights::iq4_xs || spec.weights == SyntheticWeights::iq4_nl) {
    const bool first_eighth = role == "ffn_down" && layer < spec.layers / 8;  // no imatrix
    const GgmlType type =
        spec.weights == SyntheticWeights::iq4_xs ? GgmlType::IQ4_XS : GgmlType::IQ4_NL;
    return fit_row((role == "attn_v" && grouped) || first_eighth ? GgmlType::Q5_K : type,
                   row_length);
  }
  if (spec.weights == SyntheticWeights::q3_k_m) {
    GgmlType type = GgmlType::Q3_K;
    if (role == "attn_v") type = layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (role == "attn_output") type = GgmlType::Q4_K;
    if (role == "ffn_down") type = layer < spec.layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    return fit_row(type, row_length);
  }
  if (spec.weights == SyntheticWeights::q2_k) {
    GgmlType type = GgmlType::Q2_K;
    if (role == "attn_v") type = grouped ? GgmlType::Q4_K : GgmlType::Q3_K;
    if (role == "attn_output" || role == "ffn_down") type = GgmlType::Q3_K;
    return fit_row(type, row_length);
  }
  const bool more_bits =
      (role == "attn_v" || role == "ffn_down") && uses_more_bits(layer, spec.layers);
  const GgmlType base = spec.weights == SyntheticWeights::q5_k_m ? GgmlType::Q5_K : GgmlType::Q4_K;
  return fit_row(more_bits ? GgmlType::Q6_K : base, row_length);
}

}  // namespace detail

// The tensors of a synthetic model in file order, with their types.
inline std::vector<SyntheticTensor> plan_synthetic_tensors(const SyntheticSpec& spec) {
  spec.validate();
  const std::uint64_t hidden = spec.hidden;
  const std::uint64_t q_dim = spec.heads * spec.effective_head_dim();
  const std::uint64_t kv_dim = spec.kv_heads * spec.effective_head_dim();
  const std::uint64_t ffn = spec.ffn;
  // Logits are token_embd . (RMSNorm(x) * w): with unit-RMS normalised activations
  // their spread is about 0.02 * w * sqrt(hidden); aim for 3, as in the fixture.
  const float output_norm_centre = 3.0f / (0.02f * std::sqrt(static_cast<float>(hidden)));
  const Architecture& family = find_architecture(spec.arch);

  std::vector<SyntheticTensor> tensors;
  const auto matrix = [&](std::string name, std::string_view role, std::size_t layer,
                          std::uint64_t in, std::uint64_t out, float gain) {
    const GgmlType type = detail::synthetic_matrix_type(spec, role, layer, in);
    const float stddev =
        role == "token_embd" || role == "output" ? 0.02f : gain / std::sqrt(static_cast<float>(in));
    tensors.push_back({std::move(name), type, {in, out}, SyntheticTensor::Init::gaussian, stddev});
  };
  // One 3-D tensor [in, out, experts]: every expert a matrix of the role's type.
  const auto experts = [&](std::string name, std::string_view role, std::size_t layer,
                           std::uint64_t in, std::uint64_t out, float gain) {
    const GgmlType type = spec.weights == SyntheticWeights::mxfp4_moe
                              ? GgmlType::MXFP4
                              : detail::synthetic_matrix_type(spec, role, layer, in);
    tensors.push_back({std::move(name),
                       type,
                       {in, out, spec.experts},
                       SyntheticTensor::Init::gaussian,
                       gain / std::sqrt(static_cast<float>(in))});
  };
  const auto norm = [&](std::string name, float centre, std::uint64_t size) {
    tensors.push_back(
        {std::move(name), GgmlType::F32, {size}, SyntheticTensor::Init::norm, centre});
  };
  // Biases stay F32, as llama-quantize leaves every 1-D tensor.
  const auto bias = [&](std::string name, std::uint64_t size) {
    tensors.push_back(
        {std::move(name), GgmlType::F32, {size}, SyntheticTensor::Init::gaussian, 0.1f});
  };

  if (family.encoder.encoder) {
    // BERT's layout (EncoderRule): embeddings with position and type rows and their
    // LayerNorm; per block Q, K, V and the output with biases, a LayerNorm after the
    // attention's sum, up and down with biases, a LayerNorm after the FFN's sum.
    // nomic-bert's instead: RoPE for positions, Q, K and V fused, a SwiGLU feed-forward,
    // no biases on the projections.
    const bool nomic = !family.encoder.learned_positions;
    const auto layer_norm = [&](const std::string& name, std::uint64_t size) {
      norm(name + ".weight", 1, size);
      bias(name + ".bias", size);
    };
    const auto table = [&](std::string name, std::uint64_t rows) {
      tensors.push_back(
          {std::move(name), GgmlType::F32, {hidden, rows}, SyntheticTensor::Init::gaussian, 0.02f});
    };
    matrix("token_embd.weight", "token_embd", 0, hidden, spec.vocab, 1);
    table("token_types.weight", 2);
    if (!nomic) table("position_embd.weight", spec.context);
    layer_norm("token_embd_norm", hidden);
    for (std::size_t il = 0; il < spec.layers; ++il) {
      const std::string prefix = "blk." + std::to_string(il) + ".";
      if (nomic) {
        matrix(prefix + "attn_qkv.weight", "attn_v", il, hidden, q_dim + 2 * kv_dim, 1.5f);
        matrix(prefix + "attn_output.weight", "attn_output", il, q_dim, hidden, 1);
      } else {
        matrix(prefix + "attn_q.weight", "attn_q", il, hidden, q_dim, 1.5f);
        bias(prefix + "attn_q.bias", q_dim);
        matrix(prefix + "attn_k.weight", "attn_k", il, hidden, kv_dim, 1.5f);
        bias(prefix + "attn_k.bias", kv_dim);
        matrix(prefix + "attn_v.weight", "attn_v", il, hidden, kv_dim, 1);
        bias(prefix + "attn_v.bias", kv_dim);
        matrix(prefix + "attn_output.weight", "attn_output", il, q_dim, hidden, 1);
        bias(prefix + "attn_output.bias", hidden);
      }
      layer_norm(prefix + "attn_output_norm", hidden);
      if (nomic) matrix(prefix + "ffn_gate.weight", "ffn_gate", il, hidden, ffn, 1);
      matrix(prefix + "ffn_up.weight", "ffn_up", il, hidden, ffn, 1);
      if (!nomic) bias(prefix + "ffn_up.bias", ffn);
      matrix(prefix + "ffn_down.weight", "ffn_down", il, ffn, hidden, 1);
      if (!nomic) bias(prefix + "ffn_down.bias", hidden);
      layer_norm(prefix + "layer_output_norm", hidden);
    }
    if (spec.labels != 0) {
      matrix("cls.weight", "cls", 0, hidden, hidden, 1);
      bias("cls.bias", hidden);
      matrix("cls.output.weight", "cls_output", 0, hidden, spec.labels, 1);
      bias("cls.output.bias", spec.labels);
    }
    return tensors;
  }

  matrix("token_embd.weight", "token_embd", 0, hidden, spec.vocab, 1);
  norm("output_norm.weight", output_norm_centre, hidden);
  if (!spec.tied) matrix("output.weight", "output", 0, hidden, spec.vocab, 1);
  if (spec.labels != 0) matrix("cls.output.weight", "cls_output", 0, hidden, spec.labels, 1);
  for (std::size_t il = 0; il < spec.layers; ++il) {
    const std::string prefix = "blk." + std::to_string(il) + ".";
    norm(prefix + "attn_norm.weight", 1, hidden);
    matrix(prefix + "attn_q.weight", "attn_q", il, hidden, q_dim, 1.5f);
    matrix(prefix + "attn_k.weight", "attn_k", il, hidden, kv_dim, 1.5f);
    matrix(prefix + "attn_v.weight", "attn_v", il, hidden, kv_dim, 1);
    if (spec.attention_biases) {
      bias(prefix + "attn_q.bias", q_dim);
      bias(prefix + "attn_k.bias", kv_dim);
      bias(prefix + "attn_v.bias", kv_dim);
    }
    if (spec.qk_norm) {
      norm(prefix + "attn_q_norm.weight", 1, spec.effective_head_dim());
      norm(prefix + "attn_k_norm.weight", 1, spec.effective_head_dim());
    }
    matrix(prefix + "attn_output.weight", "attn_output", il, q_dim, hidden, 2);
    if (spec.output_bias) bias(prefix + "attn_output.bias", hidden);
    // Sinks of about the scores' own size, so that some heads give them much weight.
    if (spec.attention_sinks) {
      tensors.push_back({prefix + "attn_sinks.weight",
                         GgmlType::F32,
                         {spec.heads},
                         SyntheticTensor::Init::gaussian,
                         1.0f});
    }
    if (spec.post_norms) norm(prefix + "post_attention_norm.weight", 1, hidden);
    norm(prefix + std::string(family.tensors.ffn_norm) + ".weight", 1, hidden);
    if (spec.experts != 0) {
      // The router stays F32, as llama-quantize leaves ffn_gate_inp; the experts take
      // the dense matrices' types (ffn_down_exps gets ffn_down's extra bits), or MXFP4.
      tensors.push_back({prefix + "ffn_gate_inp.weight",
                         GgmlType::F32,
                         {hidden, spec.experts},
                         SyntheticTensor::Init::gaussian,
                         1 / std::sqrt(static_cast<float>(hidden))});
      if (spec.expert_biases) {
        bias(prefix + "ffn_gate_inp.bias", spec.experts);
        tensors.push_back({prefix + "ffn_gate_exps.bias",
                           GgmlType::F32,
                           {spec.expert_ffn, spec.experts},
                           SyntheticTensor::Init::gaussian,
                           0.1f});
        tensors.push_back({prefix + "ffn_up_exps.bias",
                           GgmlType::F32,
                           {spec.expert_ffn, spec.experts},
                           SyntheticTensor::Init::gaussian,
                           0.1f});
        tensors.push_back({prefix + "ffn_down_exps.bias",
                           GgmlType::F32,
                           {hidden, spec.experts},
                           SyntheticTensor::Init::gaussian,
                           0.1f});
      }
      experts(prefix + "ffn_gate_exps.weight", "ffn_gate", il, hidden, spec.expert_ffn, 1);
      experts(prefix + "ffn_up_exps.weight", "ffn_up", il, hidden, spec.expert_ffn, 1);
      experts(prefix + "ffn_down_exps.weight", "ffn_down", il, spec.expert_ffn, hidden, 2);
    } else {
      matrix(prefix + "ffn_gate.weight", "ffn_gate", il, hidden, ffn, 1);
      matrix(prefix + "ffn_up.weight", "ffn_up", il, hidden, ffn, 1);
      matrix(prefix + "ffn_down.weight", "ffn_down", il, ffn, hidden, 2);
    }
    if (spec.post_norms) norm(prefix + "post_ffw_norm.weight", 1, hidden);
  }
  return tensors;
}

namespace detail {

// splitmix64: tiny, fast, and the same numbers on every platform (unlike
// std::normal_distribution, whose algorithm is up to the standard library).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so its logarithm is finite.
  double uniform() { return static_cast<double>((next() >> 11) + 1) * 0x1p-53; }
  // Standard normal values by the Box-Muller transform, one pair at a time.
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    const double angle = 2.0 * 3.14159265358979323846 * uniform();
    spare_ = static_cast<float>(radius * std::sin(angle));
    has_spare_ = true;
    return static_cast<float>(radius * std::cos(angle));
  }
  void fill(std::span<std::byte> out) {
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
      const std::uint64_t bits = next();
      std::memcpy(out.data() + i, &bits, 8);
    }
    if (i < out.size()) {
      const std::uint64_t bits = next();
      std::memcpy(out.data() + i, &bits, out.size() - i);
    }
  }
  int uniform_int(int low, int high) {  // inclusive; the modulo bias is irrelevant here
    return low + static_cast<int>(next() % static_cast<std::uint64_t>(high - low + 1));
  }

 private:
  std::uint64_t state_;
  float spare_ = 0;
  bool has_spare_ = false;
};

// FNV-1a of the tensor name mixed with the seed: a stream per tensor.
inline std::uint64_t tensor_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (const char c : name) {
    hash ^= static_cast<std::uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

inline std::vector<float> synthetic_values(const SyntheticTensor& tensor, std::uint64_t seed) {
  SplitMix64 rng(tensor_seed(seed, tensor.name));
  std::vector<float> values(tensor.elements());
  for (float& v : values) {
    v = tensor.init == SyntheticTensor::Init::norm ? tensor.scale * (1 + 0.1f * rng.normal())
                                                   : tensor.scale * rng.normal();
  }
  return values;
}

// Each block of `out` in turn: copied out (the bytes need not be aligned for Block), given
// its scales by `set_scales`, copied back.
template <class Block, class SetScales>
void set_each_block(std::span<std::byte> out, SetScales&& set_scales) {
  for (std::size_t at = 0; at + sizeof(Block) <= out.size(); at += sizeof(Block)) {
    Block block;
    std::memcpy(&block, out.data() + at, sizeof(Block));
    set_scales(block);
    std::memcpy(out.data() + at, &block, sizeof(Block));
  }
}

// value = d * sc * q - dmin * m with dmin = d * half and m = sc: d * sc * (q - half), q
// uniform in 0..2 half (Q4_K: half 7.5, std 4.6; Q5_K: 15.5, 9.23), sc in 32..63 (rms 48.8).
template <class Block>
void set_q4k_q5k_scales(float stddev, SplitMix64& rng, std::span<std::byte> out) {
  constexpr bool five_bits = std::is_same_v<Block, BlockQ5K>;
  const float half = five_bits ? 15.5f : 7.5f, q_std = five_bits ? 9.23f : 4.6f;
  set_each_block<Block>(out, [&](Block& block) {
    std::uint8_t scales[8];
    for (auto& s : scales) s = static_cast<std::uint8_t>(rng.uniform_int(32, 63));
    pack_q4k_scales(scales, scales, block.scales);
    const float d = stddev / (48.8f * q_std);
    block.d = f32_to_f16(d);
    block.dmin = f32_to_f16(half * d);
  });
}

// The scales of the 256-value super-block types (K-quants, IQ4_XS) and of IQ4_NL; false
// for any other type.
inline bool set_k_quant_scales(GgmlType type, float stddev, SplitMix64& rng,
                               std::span<std::byte> out) {
  switch (type) {
    case GgmlType::Q4_K:
      set_q4k_q5k_scales<BlockQ4K>(stddev, rng, out);
      return true;
    case GgmlType::Q5_K:
      set_q4k_q5k_scales<BlockQ5K>(stddev, rng, out);
      return true;
    case GgmlType::Q6_K:
      // value = d * sc * (q - 32), q uniform in 0..63 (std 18.5), sc in 48..127 (rms 90).
      set_each_block<BlockQ6K>(out, [&](BlockQ6K& block) {
        for (auto& s : block.scales) s = static_cast<std::int8_t>(rng.uniform_int(48, 127));
        block.d = f32_to_f16(stddev / (90.0f * 18.5f));
      });
      return true;
    case GgmlType::IQ4_XS:
      // value = d * (s - 32) * level, levels kIq4nlValues (rms 67.4 over random indices,
      // mean -5.9: a scale of one sign would bias every block), s - 32 in 16..31 or
      // -32..-17 (the high two bits of s both set or both clear; rms 24.4).
      set_each_block<BlockIQ4XS>(out, [&](BlockIQ4XS& block) {
        std::uint16_t high = 0;
        for (unsigned j = 0; j < 8; ++j) high |= (rng.next() & 1) ? 3u << (2 * j) : 0u;
        block.scales_h = high;
        block.d = f32_to_f16(stddev / (24.4f * 67.4f));
      });
      return true;
    case GgmlType::IQ4_NL:
      // value = d * level: d of either sign, for IQ4_XS's reason.
      set_each_block<BlockIQ4NL>(out, [&](BlockIQ4NL& block) {
        block.d = f32_to_f16((rng.next() & 1 ? stddev : -stddev) / 67.4f);
      });
      return true;
    case GgmlType::Q3_K:
      // value = d * (sc - 32) * (q - 4): every 6-bit scale and 3-bit quant as drawn, sc - 32
      // in -32..31 (rms 18.5), q - 4 in -4..3 (rms 2.35; the means' product is small).
      set_each_block<BlockQ3K>(
          out, [&](BlockQ3K& block) { block.d = f32_to_f16(stddev / (18.5f * 2.35f)); });
      return true;
    case GgmlType::Q2_K:
      // value = d * sc * q - dmin * m with m = sc and dmin = 1.5 d: d * sc * (q - 1.5), q
      // uniform in 0..3 (rms 1.12), sc in 8..15 (rms 11.7).
      set_each_block<BlockQ2K>(out, [&](BlockQ2K& block) {
        for (auto& s : block.scales) {
          const auto sc = static_cast<std::uint8_t>(rng.uniform_int(8, 15));
          s = static_cast<std::uint8_t>(sc | sc << 4);
        }
        const float d = stddev / (11.7f * 1.12f);
        block.d = f32_to_f16(d);
        block.dmin = f32_to_f16(1.5f * d);
      });
      return true;
    default:
      return false;
  }
}

// The scales of the 32-value legacy types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1); false for any
// other type.
inline bool set_legacy_scales(GgmlType type, float stddev, SplitMix64& rng,
                              std::span<std::byte> out) {
  switch (type) {
    case GgmlType::Q8_0:
      // q uniform in -128..127 (std 73.9).
      set_each_block<BlockQ8_0>(out,
                                [&](BlockQ8_0& block) { block.d = f32_to_f16(stddev / 73.9f); });
      return true;
    case GgmlType::Q4_0:
      // value = d * (q - 8), q uniform in 0..15 (std 4.61, mean -0.5): d of either sign, so
      // that the blocks' means cancel (llama-quantize's d = -max / 8 takes either too).
      set_each_block<BlockQ4_0>(out, [&](BlockQ4_0& block) {
        block.d = f32_to_f16((rng.next() & 1 ? stddev : -stddev) / 4.61f);
      });
      return true;
    case GgmlType::Q4_1:
      // value = d * q + m with m = -7.5 d: centred as Q4_0's.
      set_each_block<BlockQ4_1>(out, [&](BlockQ4_1& block) {
        block.d = f32_to_f16(stddev / 4.61f);
        block.m = f32_to_f16(-7.5f * stddev / 4.61f);
      });
      return true;
    case GgmlType::Q5_0:
      // value = d * (q - 16), q uniform in 0..31 (std 9.23, mean -0.5): d of either sign,
      // as Q4_0's.
      set_each_block<BlockQ5_0>(out, [&](BlockQ5_0& block) {
        block.d = f32_to_f16((rng.next() & 1 ? stddev : -stddev) / 9.23f);
      });
      return true;
    case GgmlType::Q5_1:
      // value = d * q + m with m = -15.5 d: centred as Q5_0's.
      set_each_block<BlockQ5_1>(out, [&](BlockQ5_1& block) {
        block.d = f32_to_f16(stddev / 9.23f);
        block.m = f32_to_f16(-15.5f * stddev / 9.23f);
      });
      return true;
    default:
      return false;
  }
}

// Random blocks whose values have about the standard deviation `stddev`: random
// quants under scales drawn from the upper part of their range, as a quantizer
// would produce for Gaussian data. Only the statistics matter; speed is the point.
inline void fill_random_blocks(GgmlType type, float stddev, std::uint64_t seed,
                               std::span<std::byte> out) {
  SplitMix64 rng(seed);
  rng.fill(out);  // every quant bit random; scales are overwritten block by block
  if (!set_k_quant_scales(type, stddev, rng, out) && !set_legacy_scales(type, stddev, rng, out)) {
    fail("fill_random_blocks: no random blocks for ", ggml_type_name(type));
  }
}

inline bool is_block_quantized(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K ||
         type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::Q4_1 ||
         type == GgmlType::Q5_0 || type == GgmlType::Q5_1 || type == GgmlType::IQ4_XS ||
         type == GgmlType::IQ4_NL || type == GgmlType::Q3_K || type == GgmlType::Q2_K;
}

inline std::uint32_t file_type_id(SyntheticWeights weights) {
  switch (weights) {
    case SyntheticWeights::f32:
      return 0;
    case SyntheticWeights::f16:
      return 1;
    case SyntheticWeights::q8_0:
      return 7;
    case SyntheticWeights::q4_0:
      return 2;
    case SyntheticWeights::q4_1:
      return 3;
    case SyntheticWeights::q5_0:
      return 8;
    case SyntheticWeights::q5_1:
      return 9;
    case SyntheticWeights::q4_k_m:
      return 15;
    case SyntheticWeights::q5_k_m:
      return 17;
    case SyntheticWeights::iq4_xs:
      return 30;
    case SyntheticWeights::iq4_nl:
      return 25;
    case SyntheticWeights::q3_k_m:
      return 12;
    case SyntheticWeights::q2_k:
      return 10;
    case SyntheticWeights::mxfp4_moe:
      return 38;
  }
  return 0;
}

}  // namespace detail

// The tensors' bytes, produced one tensor at a time as the writer writes them.
inline void add_synthetic_tensors(gguf::GgufWriter& writer, const SyntheticSpec& spec,
                                  const std::vector<SyntheticTensor>& tensors) {
  for (const SyntheticTensor& tensor : tensors) {
    const gguf::Shape shape(std::span<const std::uint64_t>(tensor.dims));
    const std::uint64_t seed = detail::tensor_seed(spec.seed, tensor.name);
    if (spec.fast && detail::is_block_quantized(tensor.type)) {
      writer.add_tensor_generated(
          tensor.name, tensor.type, shape,
          [type = tensor.type, stddev = tensor.scale, seed](std::span<std::byte> out) {
            detail::fill_random_blocks(type, stddev, seed, out);
          });
    } else {
      writer.add_tensor_generated(
          tensor.name, tensor.type, shape, [tensor, seed = spec.seed](std::span<std::byte> out) {
            const auto values = detail::synthetic_values(tensor, seed);
            quantize_row(tensor.type, values.data(), out.data(), values.size());
          });
    }
  }
}

// A writer holding the whole synthetic model; tensor bytes are produced one tensor
// at a time while it writes, so even a multi-gigabyte model needs little memory.
inline gguf::GgufWriter make_synthetic_writer(const SyntheticSpec& spec) {
  const auto tensors = plan_synthetic_tensors(spec);  // validates spec
  const Architecture& family = find_architecture(spec.arch);
  const bool encoder = family.encoder.encoder;
  const Vocabulary vocab =
      encoder ? build_wordpiece_vocabulary(spec.vocab) : build_synthetic_vocabulary(spec.vocab);
  const auto u32 = [](std::size_t value) { return static_cast<std::uint32_t>(value); };

  gguf::GgufWriter writer;
  const std::string& arch = spec.arch;
  writer.set("general.architecture", arch);
  writer.set("general.name", spec.name);
  writer.set(arch + ".block_count", u32(spec.layers));
  writer.set(arch + ".context_length", u32(spec.context));
  writer.set(arch + ".embedding_length", u32(spec.hidden));
  writer.set(arch + ".feed_forward_length", u32(spec.ffn));
  writer.set(arch + ".attention.head_count", u32(spec.heads));
  writer.set(arch + ".attention.head_count_kv", u32(spec.kv_heads));
  writer.set(family.key(family.keys.rms_epsilon), spec.rms_eps);  // an encoder's LayerNorm's
  if (!encoder || !family.encoder.learned_positions) {            // BERT's positions are learned
    writer.set(arch + ".rope.freq_base", spec.rope_base);
    writer.set(arch + ".rope.dimension_count", u32(spec.effective_head_dim()));
  }
  if (spec.head_dim != 0 && spec.head_dim * spec.heads != spec.hidden) {
    writer.set(arch + ".attention.key_length", u32(spec.head_dim));
    writer.set(arch + ".attention.value_length", u32(spec.head_dim));
  }
  writer.set(arch + ".vocab_size", u32(spec.vocab));
  if (spec.sliding_window != 0) {
    writer.set(arch + ".attention.sliding_window", u32(spec.sliding_window));
  }
  if (spec.yarn_factor != 1.0f) {
    writer.set(arch + ".rope.scaling.type", std::string("yarn"));
    writer.set(arch + ".rope.scaling.factor", spec.yarn_factor);
    writer.set(arch + ".rope.scaling.original_context_length", u32(spec.yarn_original_context));
  }
  if (spec.experts != 0) {
    writer.set(arch + ".expert_count", u32(spec.experts));
    writer.set(arch + ".expert_used_count", u32(spec.experts_used));
    writer.set(arch + ".expert_feed_forward_length", u32(spec.expert_ffn));
  }

  if (spec.pooling) writer.set(arch + ".pooling_type", static_cast<std::uint32_t>(*spec.pooling));
  if (spec.labels != 0) {  // llama.cpp sizes cls.output by the labels' count
    std::vector<std::string> labels;
    for (std::size_t i = 0; i < spec.labels; ++i) {
      labels.push_back(spec.labels == 2 && !encoder ? (i == 0 ? "yes" : "no")
                                                    : "LABEL_" + std::to_string(i));
    }
    writer.set(arch + ".classifier.output_labels", gguf::Value::strings(labels));
  }
  if (!spec.causal) writer.set(arch + ".attention.causal", false);

  writer.set("tokenizer.ggml.model", vocab.model);
  if (encoder) {  // WordPiece: no merges, no chat template; [CLS] and [SEP] frame inputs
    writer.set("tokenizer.ggml.tokens", gguf::Value::strings(vocab.tokens));
    std::vector<std::int32_t> types;
    for (const TokenType type : vocab.token_types) types.push_back(static_cast<std::int32_t>(type));
    writer.set("tokenizer.ggml.token_type", gguf::Value::array(types));
    writer.set("tokenizer.ggml.token_type_count", 2u);
    writer.set("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(*vocab.bos_id));
    writer.set("tokenizer.ggml.cls_token_id", static_cast<std::uint32_t>(*vocab.bos_id));
    writer.set("tokenizer.ggml.seperator_token_id",
               static_cast<std::uint32_t>(*vocab.separator_id));
    writer.set("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(*vocab.unknown_id));
    writer.set("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(*vocab.padding_id));
    writer.set("general.file_type", detail::file_type_id(spec.weights));
    if (spec.weights != SyntheticWeights::f32) writer.set("general.quantization_version", 2u);
    add_synthetic_tensors(writer, spec, tensors);
    return writer;
  }
  writer.set("tokenizer.ggml.pre", spec.pre_tokenizer);
  writer.set("tokenizer.ggml.tokens", gguf::Value::strings(vocab.tokens));
  std::vector<std::int32_t> token_types;
  for (const TokenType type : vocab.token_types) {
    token_types.push_back(static_cast<std::int32_t>(type));
  }
  writer.set("tokenizer.ggml.token_type", gguf::Value::array(token_types));
  writer.set("tokenizer.ggml.merges", gguf::Value::strings(vocab.merges));
  writer.set("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(*vocab.bos_id));
  writer.set("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(*vocab.eos_id));
  writer.set("tokenizer.ggml.add_bos_token", false);
  if (spec.add_eos) writer.set("tokenizer.ggml.add_eos_token", true);
  writer.set("tokenizer.chat_template", kSmolLM3ChatTemplate);
  if (!spec.rerank_template.empty()) {
    writer.set("tokenizer.chat_template.rerank", spec.rerank_template);
  }
  writer.set("general.file_type", detail::file_type_id(spec.weights));
  if (spec.weights != SyntheticWeights::f32) writer.set("general.quantization_version", 2u);

  add_synthetic_tensors(writer, spec, tensors);
  return writer;
}

inline void write_synthetic_model(const SyntheticSpec& spec, const std::string& path) {
  make_synthetic_writer(spec).write(path);
}

}  // namespace smol
