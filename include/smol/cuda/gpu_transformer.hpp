// smol::cuda::GpuTransformer: the forward pass on an NVIDIA GPU, behind the same API
// as smol::Transformer.
//
// A plain C++ header (no CUDA types), for programs compiled by any C++20 compiler; the
// code is in the optional translation unit cuda/smol_cuda.cu, built when smol is
// configured with -DSMOL_CUDA=ON and linked as smol::cuda (which defines SMOL_CUDA=1
// for its users). The weights are uploaded once, straight from the memory map, and
// the KV cache lives on the device; every matrix is decoded on the fly from its
// quantized blocks (Q4_K, Q6_K, Q8_0, Q4_0, F16, BF16, F32) and multiplied with f32
// activations, so results match the CPU path's reference mode
// (ActivationPrecision::f32), not its Q8 activation rounding.
//
// To chat on the GPU, wrap it as a LogitsSource: smol::ForwardSource<GpuTransformer>
// (generate/logits_source.hpp), as TransformerSource wraps the CPU Transformer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"

namespace smol::cuda {

// CUDA devices this process can use: 0 when there is none, or no driver.
int device_count() noexcept;
// Why device_count() is 0, in CUDA's words ("no CUDA-capable device is detected",
// "CUDA driver version is insufficient for CUDA runtime version", ...); empty when a
// device is there.
std::string device_error();
// The name of device `device` ("NVIDIA H100 80GB HBM3"); throws smol::Error when
// there is no such device.
std::string device_name(int device = 0);

class GpuTransformer {
 public:
  // Uploads the model's weights to the current CUDA device (device 0 unless the
  // program chose another). Throws smol::Error when there is no device, the model
  // does not fit, or a shape is beyond the kernels (more than 8 query heads per KV
  // head, heads of more than 256 values). options.max_batch bounds the tokens of one
  // internal pass (at most 4096 on the GPU).
  explicit GpuTransformer(const Model& model, TransformerOptions options = {});
  ~GpuTransformer();
  GpuTransformer(GpuTransformer&&) noexcept;
  GpuTransformer& operator=(GpuTransformer&&) noexcept;

  const Model& model() const noexcept;
  std::size_t context_length() const noexcept;
  // Positions [0, n_filled()) hold valid K/V.
  std::size_t n_filled() const noexcept;
  // Bytes of weights on the device (token_embd once when the embeddings are tied).
  std::size_t weight_bytes() const noexcept;

  // Transformer::forward's contract: runs `tokens` at positions [n_past, n_past +
  // tokens.size()), n_past <= n_filled(); returns the requested logits rows (n_vocab
  // floats each, in position order), valid until the next call. Returns when the GPU
  // has finished.
  std::span<const float> forward(std::span<const std::int32_t> tokens, std::size_t n_past,
                                 LogitsFor which = LogitsFor::last);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace smol::cuda
