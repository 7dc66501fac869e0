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
#include "smol/simd/float_kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_avx512_quantize.hpp"
// One kernel unit per weight type (quant/weight_types.hpp lists them).
#include "smol/simd/kernels_float.hpp"
#include "smol/simd/kernels_iq4.hpp"
#include "smol/simd/kernels_legacy.hpp"
#include "smol/simd/kernels_mxfp4.hpp"
#include "smol/simd/kernels_q2_k.hpp"
#include "smol/simd/kernels_q3_k.hpp"
#include "smol/simd/kernels_q4_k.hpp"
#include "smol/simd/kernels_q5_k.hpp"
#include "smol/simd/kernels_q6_k.hpp"
#include "smol/simd/kernels_q8_0.hpp"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace smol {

// One weight type's kernels in one instruction set: its kernel unit's wiring for the
// set's family (kernels.hpp's KernelUnit).
template <class W, class Arch>
WeightKernels<W> weight_kernels() noexcept {
  using Unit = KernelUnit<W>;
  WeightKernels<W> k;
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    Unit::scalar(k);
  } else if constexpr (requires { Unit::template vector<Arch>(k); }) {
    Unit::template vector<Arch>(k);
#if defined(SMOL_X86)
  } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
    Unit::template x86<Arch>(k);
#endif
#if defined(SMOL_ARM64)
  } else if constexpr (std::is_same_v<Arch, neon_arch>) {
    Unit::template neon<Arch>(k);
#endif
  }
  return k;
}

// An instruction set's table: each weight type's kernels from its kernel unit, then the
// kernels that do not depend on the weights. Instantiated only for the arch a
// translation unit is compiled for (see kernels.hpp).
template <class Arch>
Kernels make_isa_kernels() noexcept {
  Kernels k;
  k.isa = ArchInfo<Arch>::isa;
  for_each_weight_type([&]<class W>(W w) { k.of(w) = weight_kernels<W, Arch>(); });
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    k.quantize_row_q8k = scalar::quantize_row_q8k;
    k.quantize_row_q8_0 = scalar::quantize_row_q8_0;
    k.quantize_row_q8_1 = quantize_row_q8_1;  // quant/legacy_blocks.hpp
    k.swiglu = scalar::swiglu;
    k.attend_block = simd::attend_block_reference;
  } else {
    // The Q8_0 and Q8_1 quantizers: sixteen blocks at a time on the AVX-512 sets,
    // 256-bit on AVX2 (bit for bit the scalar ones, which cost a third of a small Q4_1
    // prefill matmul); NEON keeps the scalar ones (filled in below).
    k.quantize_row_q8k = simd::quantize_row_q8k<Arch>;
    k.swiglu = simd::swiglu<Arch>;
    k.attend_block = simd::attend_block<Arch>;
#if defined(SMOL_X86)
    // Where the interleaved copies pay: every x86 set decodes faster on them, the AVX2 and
    // AVX-512 sets prefill faster on them too, and AMX's matrix-unit prefill reads them
    // (packed_rows8) at the file rows' speed (bench/README.md, "Weight layout"; bench/
    // HISTORY.md, "Figures moved from code comments").
    k.prefers_rows8 = true;
    if constexpr (is_avx512_v<Arch>) {
      k.quantize_row_q8_0 = simd::x86::quantize_row_q8_512<Arch, BlockQ8_0>;
      k.quantize_row_q8_1 = simd::x86::quantize_row_q8_512<Arch, BlockQ8_1>;
    } else {
      k.quantize_row_q8_0 = simd::x86::quantize_row_q8_0<Arch>;
      k.quantize_row_q8_1 = simd::x86::quantize_row_q8_1<Arch>;
    }
#endif
  }
  return k;
}

template <class Arch>
const Kernels& kernels_for() noexcept {
  static const Kernels table = make_isa_kernels<Arch>();
  return table;
}

namespace detail {

// A vector set leaves an entry empty where the scalar kernel is good enough: every
// weight type's dot and interleaved-rows kernel, and the activation-side kernels.
// (The other fast paths stay empty: empty means "take another path".)
inline Kernels with_scalar_fallbacks(Kernels k) noexcept {
  const Kernels& s = kernels_for<scalar_arch>();
  for_each_weight_type([&]<class W>(W w) {
    auto& mine = k.of(w);
    const auto& reference = s.of(w);
    if (!mine.dot) mine.dot = reference.dot;
    if (!mine.rows8) mine.rows8 = reference.rows8;
    if (!mine.rows16) mine.rows16 = reference.rows16;
  });
  if (!k.quantize_row_q8k) k.quantize_row_q8k = s.quantize_row_q8k;
  if (!k.quantize_row_q8_0) k.quantize_row_q8_0 = s.quantize_row_q8_0;
  if (!k.quantize_row_q8_1) k.quantize_row_q8_1 = s.quantize_row_q8_1;
  if (!k.swiglu) k.swiglu = s.swiglu;
  if (!k.attend_block) k.attend_block = s.attend_block;
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
