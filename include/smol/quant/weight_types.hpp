// The weight types smol runs, in one list: the table that every per-type mechanism (the
// kernel table, matvec/matmul, the reference (de)quantizers, the loader's check) is
// generated from. A new block type is a header of its own (layout, reference
// dequantizer and quantizer: see quant/q5_k.hpp), a kernel unit in simd/ (see
// simd/kernels_q5_k.hpp), and one entry in WeightTypes below.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"

namespace smol {

// What a kernel for weights of ggml type `Type` is written against: the stored element
// (`Block`: a ggml block, or one value for float rows) and the element of the
// activation row it is dotted with (`Activation`: a Q8 block, or float). Keyed by the
// ggml type, not the C++ type, since f16 and bf16 are both 16-bit integers.
template <GgmlType Type, class BlockType, class ActivationType>
struct WeightType {
  static constexpr GgmlType type = Type;
  using Block = BlockType;
  using Activation = ActivationType;
  static constexpr std::size_t values_per_block = ggml_type_info(Type).block_values;
  static_assert(ggml_type_info(Type).block_bytes == sizeof(Block));
};

template <class Block>
using BlockWeight =
    WeightType<BlockTraits<Block>::type, Block, typename BlockTraits<Block>::Activation>;

template <class... Types>
struct TypeList {};

using WeightTypes = TypeList<WeightType<GgmlType::F32, float, float>,           //
                             WeightType<GgmlType::F16, f16_bits, float>,        //
                             WeightType<GgmlType::BF16, bf16_bits, float>,      //
                             BlockWeight<BlockQ4_0>, BlockWeight<BlockQ4_1>,    //
                             BlockWeight<BlockQ5_0>, BlockWeight<BlockQ5_1>,    //
                             BlockWeight<BlockQ8_0>,                            //
                             BlockWeight<BlockQ2K>, BlockWeight<BlockQ3K>,      //
                             BlockWeight<BlockQ4K>, BlockWeight<BlockQ5K>,      //
                             BlockWeight<BlockQ6K>,                             //
                             BlockWeight<BlockIQ4NL>, BlockWeight<BlockIQ4XS>,  //
                             BlockWeight<BlockMXFP4>>;

// Calls f(W{}) for every W in WeightTypes.
template <class F>
constexpr void for_each_weight_type(F&& f) {
  [&]<class... Ws>(TypeList<Ws...>) { (f(Ws{}), ...); }(WeightTypes{});
}

// Calls f(W{}) for the W whose ggml type is `type`; false if there is none.
template <class F>
constexpr bool visit_weight_type(GgmlType type, F&& f) {
  return [&]<class... Ws>(TypeList<Ws...>) {
    return ((Ws::type == type ? (f(Ws{}), true) : false) || ...);
  }(WeightTypes{});
}

// Calls f(std::type_identity<Block>{}) when `type`'s block has the load-time layout that
// the trait CopyOf names (CopyOf<Block>::type not void: Rows8Of, Rows16Of); whether it has.
template <template <class> class CopyOf, class F>
constexpr bool visit_block_with_copy(GgmlType type, F&& f) {
  bool has = false;
  visit_weight_type(type, [&]<class W>(W) {
    if constexpr (!std::is_void_v<typename CopyOf<typename W::Block>::type>) {
      f(std::type_identity<typename W::Block>{});
      has = true;
    }
  });
  return has;
}

constexpr bool is_weight_type(GgmlType type) {
  return visit_weight_type(type, [](auto) {});
}

// The WeightTypes entry of ggml type `Type`.
template <GgmlType Type, class List = WeightTypes>
struct WeightTypeOf;
template <GgmlType Type, class First, class... Rest>
struct WeightTypeOf<Type, TypeList<First, Rest...>>
    : std::conditional_t<First::type == Type, std::type_identity<First>,
                         WeightTypeOf<Type, TypeList<Rest...>>> {};
template <GgmlType Type>
using weight_type_t = typename WeightTypeOf<Type>::type;

// Names of the types in the list, "F32, F16, ...", for error messages.
inline std::string weight_type_names() {
  std::string names;
  for_each_weight_type([&](auto w) {
    if (!names.empty()) names += ", ";
    names += ggml_type_info(decltype(w)::type).name;
  });
  return names;
}

}  // namespace smol
