// The avx512 kernel set, compiled with that instruction set's flags (cmake/SmolDispatch.cmake).

#include "smol/simd/kernels_impl.hpp"

template const smol::Kernels& smol::kernels_for<smol::avx512_arch>() noexcept;
