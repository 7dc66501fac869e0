// The scalar kernel set (the references every vector set falls back to), compiled once
// here instead of in every translation unit that reaches the kernel table: it is a
// large share of a model suite's compile (every weight type's reference kernels and
// the attention references for each pair of cache types).

#include "smol/simd/kernels_impl.hpp"

template const smol::Kernels& smol::kernels_for<smol::scalar_arch>() noexcept;
