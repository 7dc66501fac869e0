// The instruction sets smol has kernels for, and their names on the command line and
// in SMOL_ISA.
#pragma once

#include <array>
#include <string_view>

#include "smol/core/error.hpp"

namespace smol {

// x86 sets from least to most capable, then NEON. `amx` is avx512vnni plus AMX-INT8
// tiles for prefill (Sapphire Rapids and later).
enum class Isa { scalar, avx2, avx512, avx512vnni, neon, amx };

inline constexpr std::array<Isa, 6> kAllIsas{Isa::scalar,     Isa::avx2, Isa::avx512,
                                             Isa::avx512vnni, Isa::amx,  Isa::neon};

constexpr std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
    case Isa::avx512vnni:
      return "avx512vnni";
    case Isa::neon:
      return "neon";
    case Isa::amx:
      return "amx";
  }
  return "?";
}

// Accepts exactly the names isa_name() prints.
inline Isa parse_isa(std::string_view text) {
  for (Isa isa : kAllIsas) {
    if (isa_name(isa) == text) return isa;
  }
  fail("unknown instruction set '", text,
       "' (expected scalar, avx2, avx512, avx512vnni, amx or neon)");
}

}  // namespace smol
