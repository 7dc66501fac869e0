// The SwiGLU gate of Llama-family feed-forward blocks: silu(gate) * up, through the
// context's kernel table (vectorised exp); the scalar set holds the reference.
#pragma once

#include <cstddef>

#include "smol/ops/context.hpp"

namespace smol {

// out[i] = silu(gate[i]) * up[i]; `out` may alias either input.
inline void swiglu(const Context& ctx, const float* gate, const float* up, float* out,
                   std::size_t n) noexcept {
  ctx.kernels().swiglu(gate, up, out, n);
}

}  // namespace smol
