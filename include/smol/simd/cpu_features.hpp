// What the running CPU (and the operating system) can execute.
//
// Written with cpuid/xgetbv directly rather than taken from xsimd: Debian's xsimd 8.1
// detection knows nothing of AVX-512 VNNI, and it reads the AVX bit from the wrong
// cpuid leaf. An instruction set counts only when the CPU has it AND the OS saves its
// register state on context switches (XCR0), otherwise using it faults.
#pragma once

#include <cstdint>

#include "smol/simd/isa.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SMOL_X86 1
#elif defined(__aarch64__)
#define SMOL_ARM64 1
#endif

namespace smol {

struct CpuFeatures {
  bool avx2 = false;    // with FMA, F16C and BMI2, which the avx2 kernels are compiled for
  bool avx512 = false;  // F, BW, VL, DQ, CD
  bool avx512vnni = false;
  bool amx = false;  // AMX-TILE + AMX-INT8, with the OS's permission to use tile data
  bool neon = false;
};

#if defined(SMOL_X86)
namespace detail {

struct CpuidRegs {
  std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

inline CpuidRegs cpuid(std::uint32_t leaf, std::uint32_t subleaf) noexcept {
  CpuidRegs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// XCR0: which register states the OS saves. Only valid when OSXSAVE is set.
inline std::uint64_t read_xcr0() noexcept {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

constexpr bool bit(std::uint32_t reg, int n) noexcept {
  return ((reg >> n) & 1u) != 0;
}

// Linux hands out the (8 KB) AMX tile state only on request; without it the first tile
// instruction faults. The permission is per process and cannot be dropped again.
inline bool request_amx_permission() noexcept {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace detail
#endif

inline CpuFeatures detect_cpu_features() noexcept {
  CpuFeatures f;
#if defined(SMOL_X86)
  using detail::bit;
  const std::uint32_t max_leaf = detail::cpuid(0, 0).eax;
  if (max_leaf < 7) return f;
  const auto leaf1 = detail::cpuid(1, 0);
  const auto leaf7 = detail::cpuid(7, 0);
  if (!bit(leaf1.ecx, 27)) return f;  // OSXSAVE: without it xgetbv is undefined
  const std::uint64_t xcr0 = detail::read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;       // XMM and YMM state
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;  // plus opmask, ZMM_Hi256, Hi16_ZMM
  const bool avx = bit(leaf1.ecx, 28);
  const bool fma = bit(leaf1.ecx, 12);
  const bool f16c = bit(leaf1.ecx, 29);
  const bool avx2 = bit(leaf7.ebx, 5);
  const bool bmi2 = bit(leaf7.ebx, 8);
  f.avx2 = os_avx && avx && avx2 && fma && f16c && bmi2;
  const bool avx512f = bit(leaf7.ebx, 16), avx512dq = bit(leaf7.ebx, 17);
  const bool avx512cd = bit(leaf7.ebx, 28), avx512bw = bit(leaf7.ebx, 30);
  const bool avx512vl = bit(leaf7.ebx, 31);
  f.avx512 = f.avx2 && os_avx512 && avx512f && avx512dq && avx512cd && avx512bw && avx512vl;
  f.avx512vnni = f.avx512 && bit(leaf7.ecx, 11);
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  f.amx = f.avx512vnni && os_amx && bit(leaf7.edx, 24) && bit(leaf7.edx, 25) &&
          detail::request_amx_permission();
#elif defined(SMOL_ARM64)
  f.neon = true;  // Advanced SIMD is mandatory on AArch64
#endif
  return f;
}

inline bool cpu_supports(Isa isa) noexcept {
  static const CpuFeatures features = detect_cpu_features();
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return features.avx2;
    case Isa::avx512:
      return features.avx512;
    case Isa::avx512vnni:
      return features.avx512vnni;
    case Isa::neon:
      return features.neon;
    case Isa::amx:
      return features.amx;
  }
  return false;
}

// The most capable instruction set this CPU runs (whether kernels for it were compiled
// in is a separate question: see available_isas() in kernels.hpp).
inline Isa best_cpu_isa() noexcept {
  for (Isa isa : {Isa::amx, Isa::avx512vnni, Isa::avx512, Isa::avx2, Isa::neon}) {
    if (cpu_supports(isa)) return isa;
  }
  return Isa::scalar;
}

}  // namespace smol
