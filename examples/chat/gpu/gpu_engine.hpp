// smol-chat's --gpu, behind a small interface: with_cuda.cpp implements it on the optional
// CUDA unit (smol::cuda::GpuTransformer, a build with -DSMOL_CUDA=ON) and without_cuda.cpp
// says what --gpu needs. CMake compiles one of the two (examples/CMakeLists.txt), so
// main.cpp compiles the same in both builds and turning the unit on compiles only this.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "smol/generate/logits_source.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"

namespace chat {

// Why --gpu cannot run here: the line to print and the exit status (2: this build has no
// CUDA unit, a usage error; 1: no device).
struct GpuUnavailable {
  int status;
  std::string message;
};

// Empty when --gpu can run.
std::optional<GpuUnavailable> gpu_unavailable();

// The model on the GPU, as the session's LogitsSource.
std::unique_ptr<smol::LogitsSource> start_gpu_engine(const smol::Model& model,
                                                     const smol::TransformerOptions& options);

// The device's name, for /stats.
std::string gpu_device_name();

}  // namespace chat
