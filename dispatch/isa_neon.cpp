// The NEON kernel set (AArch64 only; see cmake/SmolDispatch.cmake).
#include "smol/simd/kernels_impl.hpp"

template const smol::Kernels& smol::kernels_for<smol::neon_arch>() noexcept;
