// --gpu in a build without the CUDA unit (gpu_engine.hpp): a usage error that says how to
// get one. main() asks gpu_unavailable() before anything else, so the other two are never
// reached; they fail loudly if a change ever lets them be.
#include <memory>
#include <optional>
#include <string>

#include "gpu_engine.hpp"
#include "smol/core/error.hpp"

namespace chat {

std::optional<GpuUnavailable> gpu_unavailable() {
  return GpuUnavailable{2, "smol-chat: --gpu needs a build with -DSMOL_CUDA=ON"};
}

std::unique_ptr<smol::LogitsSource> start_gpu_engine(const smol::Model&,
                                                     const smol::TransformerOptions&) {
  smol::fail("--gpu needs a build with -DSMOL_CUDA=ON");
}

std::string gpu_device_name() {
  smol::fail("--gpu needs a build with -DSMOL_CUDA=ON");
}

}  // namespace chat
