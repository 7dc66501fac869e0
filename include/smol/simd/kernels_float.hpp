// The kernel units of the float weight types (F32, F16, BF16): dots of a float row with
// float activations, written once over xsimd (float_kernels.hpp) for every vector set, and
// their prefill tiles (float_tiles.hpp).
#pragma once

#include "smol/simd/float_kernels.hpp"
#include "smol/simd/float_tiles.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"

namespace smol {

template <GgmlType Type, class Element>
struct KernelUnit<WeightType<Type, Element, float>> {
  using Table = WeightKernels<WeightType<Type, Element, float>>;
  static void scalar(Table& k) noexcept {
    if constexpr (Type == GgmlType::F32) {
      k.dot = scalar::dot_f32;
    } else if constexpr (Type == GgmlType::F16) {
      k.dot = scalar::dot_f16_f32;
    } else {
      static_assert(Type == GgmlType::BF16);
      k.dot = scalar::dot_bf16_f32;
    }
  }
  template <class Arch>
  static void vector(Table& k) noexcept {
    if constexpr (Type == GgmlType::F32) {
      k.dot = simd::dot_f32<Arch>;
    } else if constexpr (Type == GgmlType::F16) {
      k.dot = simd::dot_f16_f32<Arch>;
    } else {
      k.dot = simd::dot_bf16_f32<Arch>;
    }
    k.tile_dots = simd::tile_dots_float<Arch, Type>;
  }
};

}  // namespace smol
