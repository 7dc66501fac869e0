// The amx kernel set (avx512vnni plus AMX-INT8 prefill), compiled with that instruction
// set's flags (cmake/SmolDispatch.cmake).

#include "smol/simd/kernels_impl.hpp"

template const smol::Kernels& smol::kernels_for<smol::amx_arch>() noexcept;
