// Definitions behind kernels.hpp: every ISA's kernel headers, kernels_for<Arch>() and
// the run-time choice kernels_for_isa(). dispatch/isa_*.cpp include this file under
// their own -m flags and explicitly instantiate kernels_for<their arch>.
#pragma once

#include "smol/simd/kernels.hpp"

// GCC 12 warns inside its own avx512fintrin.h (the self-initialised _mm512_undefined_*
// values, GCC bug 105593) wherever those intrinsics are inlined; the warning is spurious,
// and it would break -Werror builds of anyone compiling these kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "smol/simd/attention_kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_lanes.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace smol {

// The one place that knows which kernels make up each ISA's set. Instantiated only
// for the arch a translation unit is compiled for (see kernels.hpp).
template <class Arch>
Kernels make_isa_kernels() noexcept {
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    Kernels k = scalar::make_kernels();
    k.attend_block_f32 = simd::attend_block_reference<float>;
    k.attend_block_f16 = simd::attend_block_reference<f16_bits>;
    return k;
#if defined(SMOL_X86)
  } else if constexpr (std::is_same_v<Arch, avx2_arch>) {
    Kernels k = simd::make_x86_kernels<Arch>();
    k.dot_q4k_lanes = simd::x86::dot_q4k_lanes_256<Arch>;
    k.rows8_q4k_q8k = simd::x86::rows8_q4k_q8k_256<Arch>;
    k.rows8_q6k_q8k = simd::x86::rows8_q6k_q8k_256<Arch>;
    k.prefers_rows8 = true;
    k.tile_q4k_q8k = simd::x86::tile_q4k_q8k_256<Arch>;
    k.tile_q6k_q8k = simd::x86::tile_q6k_q8k_256<Arch>;
    k.attend_block_f32 = simd::attend_block<Arch, float>;
    k.attend_block_f16 = simd::attend_block<Arch, f16_bits>;
    return k;
  } else if constexpr (std::is_same_v<Arch, avx512_arch> || std::is_same_v<Arch, avx512vnni_arch> ||
                       std::is_same_v<Arch, amx_arch>) {
    Kernels k = simd::make_x86_kernels<Arch>();
    if constexpr (has_vnni_v<Arch>) {
      k.dot_q4k_q8k = simd::x86::dot_q4k_q8k_512_vnni<Arch>;
      k.dot_q6k_q8k = simd::x86::dot_q6k_q8k_512_vnni<Arch>;
    } else {
      k.dot_q4k_q8k = simd::x86::dot_q4k_q8k_512<Arch>;
      k.dot_q6k_q8k = simd::x86::dot_q6k_q8k_512<Arch>;
    }
    k.tile_q4k_q8k = simd::x86::tile_q4k_q8k<Arch>;
    k.tile_q6k_q8k = simd::x86::tile_q6k_q8k<Arch>;
    k.rows8_q4k_q8k = simd::x86::rows8_q4k_q8k_512<Arch>;
    k.rows8_q6k_q8k = simd::x86::rows8_q6k_q8k_512<Arch>;
    // On a Zen 5 the interleaved copies decode about 15 % and prefill about 70 % faster
    // than the file's rows (bench/README.md). The AMX set keeps the file's rows, which
    // its matrix-unit prefill reads (unmeasured on the copies: no AMX machine since).
    k.prefers_rows8 = !std::is_same_v<Arch, amx_arch>;
    k.attend_block_f32 = simd::attend_block<Arch, float>;
    k.attend_block_f16 = simd::attend_block<Arch, f16_bits>;
    if constexpr (std::is_same_v<Arch, amx_arch>) {
      k.matrix_q4k_q8k = simd::x86::amx_matrix_q4k<Arch>;
      k.matrix_q6k_q8k = simd::x86::amx_matrix_q6k<Arch>;
    }
    return k;
#endif
#if defined(SMOL_ARM64)
  } else if constexpr (std::is_same_v<Arch, neon_arch>) {
    return simd::make_neon_kernels();
#endif
  } else {
    static_assert(!sizeof(Arch), "no kernels for this arch");
  }
}

template <class Arch>
const Kernels& kernels_for() noexcept {
  static const Kernels table = make_isa_kernels<Arch>();
  return table;
}

namespace detail {

// A vector set leaves an entry empty where the scalar kernel is good enough.
inline Kernels with_scalar_fallbacks(Kernels k) noexcept {
  const Kernels s = scalar::make_kernels();
  if (!k.dot_q4k_q8k) k.dot_q4k_q8k = s.dot_q4k_q8k;
  if (!k.dot_q6k_q8k) k.dot_q6k_q8k = s.dot_q6k_q8k;
  if (!k.dot_q4_0_q8_0) k.dot_q4_0_q8_0 = s.dot_q4_0_q8_0;
  if (!k.dot_q8_0_q8_0) k.dot_q8_0_q8_0 = s.dot_q8_0_q8_0;
  if (!k.dot_f32) k.dot_f32 = s.dot_f32;
  if (!k.dot_f16_f32) k.dot_f16_f32 = s.dot_f16_f32;
  if (!k.dot_bf16_f32) k.dot_bf16_f32 = s.dot_bf16_f32;
  if (!k.rows8_q4k_q8k) k.rows8_q4k_q8k = s.rows8_q4k_q8k;
  if (!k.rows8_q6k_q8k) k.rows8_q6k_q8k = s.rows8_q6k_q8k;
  if (!k.quantize_row_q8k) k.quantize_row_q8k = s.quantize_row_q8k;
  if (!k.quantize_row_q8_0) k.quantize_row_q8_0 = s.quantize_row_q8_0;
  if (!k.swiglu) k.swiglu = s.swiglu;
  if (!k.attend_block_f32) k.attend_block_f32 = simd::attend_block_reference<float>;
  if (!k.attend_block_f16) k.attend_block_f16 = simd::attend_block_reference<f16_bits>;
  return k;
}

}  // namespace detail

// The complete table for `isa`; throws smol::Error when the CPU cannot run it or the
// binary lacks it.
inline const Kernels& kernels_for_isa(Isa isa) {
  check_isa_usable(isa);
  switch (isa) {
#if defined(SMOL_HAVE_AVX2_KERNELS)
    case Isa::avx2: {
      static const Kernels k = detail::with_scalar_fallbacks(kernels_for<avx2_arch>());
      return k;
    }
#endif
#if defined(SMOL_HAVE_AVX512_KERNELS)
    case Isa::avx512: {
      static const Kernels k = detail::with_scalar_fallbacks(kernels_for<avx512_arch>());
      return k;
    }
#endif
#if defined(SMOL_HAVE_AVX512VNNI_KERNELS)
    case Isa::avx512vnni: {
      static const Kernels k = detail::with_scalar_fallbacks(kernels_for<avx512vnni_arch>());
      return k;
    }
#endif
#if defined(SMOL_HAVE_AMX_KERNELS)
    case Isa::amx: {
      static const Kernels k = detail::with_scalar_fallbacks(kernels_for<amx_arch>());
      return k;
    }
#endif
#if defined(SMOL_HAVE_NEON_KERNELS)
    case Isa::neon: {
      static const Kernels k = detail::with_scalar_fallbacks(kernels_for<neon_arch>());
      return k;
    }
#endif
    default:
      return kernels_for<scalar_arch>();
  }
}

}  // namespace smol
