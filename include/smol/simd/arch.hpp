// Arch tags: the compile-time names kernels are templated on.
//
// xsimd's own tags for the vector ISAs, plus two of ours: `scalar_arch` for the plain
// C++ reference kernels and `avx512vnni`, which xsimd 8.1 lacks. Every kernel is a
// template on its tag, so the copies compiled with different -m flags in the dispatch
// units have different symbol names and the linker can never mix them up.
#pragma once

#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "smol/simd/isa.hpp"

namespace smol {

struct scalar_arch {
  static constexpr char const* name() noexcept { return "scalar"; }
};

// AVX-512 BW plus VNNI (vpdpbusd/vpdpwssd). Derives from xsimd's avx512bw so that
// xsimd code written for avx512bw accepts it; batches use xsimd_arch_t (below).
struct avx512vnni : xsimd::avx512bw {
  static constexpr char const* name() noexcept { return "avx512vnni"; }
};

// avx512vnni plus AMX-INT8 tiles (used by the prefill kernels only).
struct amx : avx512vnni {
  static constexpr char const* name() noexcept { return "amx"; }
};

using avx2_arch = xsimd::fma3<xsimd::avx2>;
using avx512_arch = xsimd::avx512bw;
using avx512vnni_arch = avx512vnni;
using amx_arch = amx;
#if defined(__aarch64__)
using neon_arch = xsimd::neon64;
#else
struct neon_arch {};  // never instantiated off AArch64; keeps the Isa table uniform
#endif

template <class Arch>
struct ArchInfo;
template <>
struct ArchInfo<scalar_arch> {
  static constexpr Isa isa = Isa::scalar;
};
template <>
struct ArchInfo<avx2_arch> {
  static constexpr Isa isa = Isa::avx2;
  using xsimd_arch = avx2_arch;
};
template <>
struct ArchInfo<avx512_arch> {
  static constexpr Isa isa = Isa::avx512;
  using xsimd_arch = avx512_arch;
};
template <>
struct ArchInfo<avx512vnni_arch> {
  static constexpr Isa isa = Isa::avx512vnni;
  using xsimd_arch = xsimd::avx512bw;  // xsimd registers no batch types for our tag
};
template <>
struct ArchInfo<amx_arch> {
  static constexpr Isa isa = Isa::amx;
  using xsimd_arch = xsimd::avx512bw;
};
#if defined(__aarch64__)
template <>
struct ArchInfo<neon_arch> {
  static constexpr Isa isa = Isa::neon;
  using xsimd_arch = neon_arch;
};
#endif

// The xsimd arch whose batch<T, A> types a kernel for Arch uses.
template <class Arch>
using xsimd_arch_t = typename ArchInfo<Arch>::xsimd_arch;

template <class Arch>
inline constexpr bool has_vnni_v = std::is_base_of_v<avx512vnni_arch, Arch>;

// The AVX-512 sets: avx512, avx512vnni and amx.
template <class Arch>
inline constexpr bool is_avx512_v = std::is_base_of_v<avx512_arch, Arch>;

}  // namespace smol
