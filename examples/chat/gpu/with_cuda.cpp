// --gpu on the CUDA unit (gpu_engine.hpp).
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "gpu_engine.hpp"
#include "smol/cuda/gpu_transformer.hpp"

namespace chat {

namespace {

// The GPU transformer and its LogitsSource view, owned together.
class GpuEngine final : public smol::LogitsSource {
 public:
  GpuEngine(const smol::Model& model, const smol::TransformerOptions& options)
      : transformer_(model, options) {}

  std::span<const float> evaluate(std::span<const smol::TokenId> tokens, std::size_t n_past,
                                  const smol::CancelCheck& cancel = {}) override {
    return source_.evaluate(tokens, n_past, cancel);
  }
  std::size_t context_length() const override { return source_.context_length(); }
  std::span<const float> evaluate_all(std::span<const smol::TokenId> tokens,
                                      std::size_t n_past) override {
    return source_.evaluate_all(tokens, n_past);
  }

 private:
  smol::cuda::GpuTransformer transformer_;
  smol::ForwardSource<smol::cuda::GpuTransformer> source_{transformer_};
};

}  // namespace

std::optional<GpuUnavailable> gpu_unavailable() {
  if (smol::cuda::device_count() > 0) return std::nullopt;
  return GpuUnavailable{1, "smol-chat: --gpu: no CUDA device (" + smol::cuda::device_error() + ")"};
}

std::unique_ptr<smol::LogitsSource> start_gpu_engine(const smol::Model& model,
                                                     const smol::TransformerOptions& options) {
  return std::make_unique<GpuEngine>(model, options);
}

std::string gpu_device_name() {
  return smol::cuda::device_name();
}

}  // namespace chat
