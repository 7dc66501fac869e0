// The kernel table: one set of function pointers per instruction set, chosen at run time.
//
// kernels_for<Arch>() is defined in kernels_impl.hpp. With SMOL_DISPATCH (set by
// smol_add_dispatch in CMake) every set, the scalar one included, is declared `extern
// template` here and instantiated in dispatch/isa_*.cpp, each vector set compiled with
// its own -m flags; without it, only the scalar set and the best set the includer's own
// flags allow exist.
// See include/smol/simd/README.md.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/quant/weight_types.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/cpu_features.hpp"
#include "smol/simd/q8k_lanes.hpp"
#include "smol/simd/token_tiles.hpp"

namespace smol {

struct AttendBlock;  // simd/attention_kernels.hpp

// Eight interleaved rows (quant/rows8.hpp) times `n_tokens` Q8_K rows lying `x_stride`
// blocks apart: y[t * y_stride + r] = row r . token t, r < 8. Decode and prefill on
// repacked weights; `from` says whether the rows are streamed from memory.
template <class Rows8>
using Rows8Fn = void (*)(const Rows8*, std::size_t nblocks, const BlockQ8K* x, std::size_t x_stride,
                         std::size_t n_tokens, float* y, std::size_t y_stride, WeightsFrom from);
// Prefill tiles: y[t * y_stride + r] += row r . token t over `nblocks` blocks, for
// `n_rows` weight rows (`row_bytes` apart) and `n_tokens` tokens whose activations
// (packed with pack_q8k_lanes) lie `act_stride` blocks apart in `act`.
using TileFn = void (*)(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                        const BlockQ8KLanes* act, std::size_t act_stride, std::size_t nblocks,
                        std::size_t n_tokens, float* y, std::size_t y_stride);
// Prefill on packed token tiles (AMX's matrix unit, the AVX-512 tokens-in-lanes kernels):
// y[t * y_stride + r] = row r . token t for `n_rows` rows and every token of `act`
// (ops/matmul.hpp's packed_token_tiles). `scratch` holds
// matrix_scratch_bytes(cols) bytes for this call alone.
using MatrixFn = void (*)(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                          const TokenTiles& act, float* y, std::size_t y_stride,
                          std::byte* scratch);

// One weight type's kernels in one instruction set (W: an entry of WeightTypes). `dot` is
// required; every other entry is a faster path that a set may offer (nullptr: none), and
// matvec/matmul take the best one present.
template <class W>
struct WeightKernels {
  using Block = typename W::Block;
  using Activation = typename W::Activation;
  using Rows8 = typename Rows8Of<Block>::type;  // void: the type has no interleaved copy
  // One row of `count` blocks (values, for float rows) dotted with one activation row.
  float (*dot)(const Block*, const Activation*, std::size_t count) = nullptr;
  // A faster dot for plain decode, where `dot` must round as the matrix unit's prefill
  // (dot_rounds_like_matrix) and pays for it: Q2_K and Q3_K on AMX take the VNNI sets' dot
  // here, for a faster decode (bench/HISTORY.md, "Plain decode of Q2_K and Q3_K"). Taken by
  // a one-token step that asks for no batch invariance (ops/matvec.hpp's decode_dot); it
  // streams as `dot` does (dot_streams). Null: `dot` serves both.
  float (*dot_plain)(const Block*, const Activation*, std::size_t count) = nullptr;
  // The same value on lane-packed activations (pack_q8k_lanes<lanes>); where set, matvec
  // packs x once per call and uses it instead of `dot`.
  float (*dot_lanes)(const Block*, const BlockQ8KLanes*, std::size_t nblocks) = nullptr;
  // Whether `dot` asks for its row's weights ahead itself, block by block as it reaches
  // them (x86_avx2.hpp's stream_block_ahead); where not, matvec asks for a row's weights
  // a few rows ahead.
  bool dot_streams = false;
  // The activation packing `dot_lanes` and `tile` expect.
  LaneSums lanes = LaneSums::q4k_scaled_by_d;
  // Rows interleaved by eight (decode and prefill): the scalar set has the references.
  Rows8Fn<std::conditional_t<std::is_void_v<Rows8>, std::byte, Rows8>> rows8 = nullptr;
  // Sixteen interleaved rows of a 32-value type or IQ4_XS (quant/rows16.hpp) dotted with
  // `n_tokens` tokens `x_stride` blocks apart: y[t * y_stride + r] = row r . token t for
  // r < n_rows (n_rows <= 16), each token rounded like the AMX tiles' (decode on the copy,
  // and few tokens on AMX). `terms`: the token blocks' rows16_token_terms, as far apart
  // as the blocks (`x_stride`). The scalar set has the references.
  using Rows16 = typename Rows16Of<Block>::type;  // void: the type has no such copy
  void (*rows16)(const std::conditional_t<std::is_void_v<Rows16>, std::byte, Rows16>*,
                 std::size_t nblocks, std::size_t n_rows, const Activation* x, std::size_t x_stride,
                 std::size_t n_tokens, const Rows16Terms<Rows16>* terms, float* y,
                 std::size_t y_stride) = nullptr;
  TileFn tile = nullptr;      // prefill tiles on the file's rows
  MatrixFn matrix = nullptr;  // prefill on a matrix unit
  // Prefill on the interleaved copy (`rows8`'s layout, groups addressed as MatrixFn's rows
  // at a group's bytes / 8 apart) over the packed token tiles: AMX's matrix unit, with
  // `matrix`'s bits, and on the other AVX-512 sets the tokens in the lanes (Q3_K, Q5_K,
  // Q6_K; Q4_K with VNNI: x86_avx512_token_lanes.hpp), with `rows8`'s bits. Where a set has
  // it, prefill reads the copy that decode reads.
  MatrixFn packed_rows8 = nullptr;
  // Prefill tiles on the file's rows with the type's own activation blocks (the 32-value
  // types, IQ4_XS): y[t * y_stride + r] = row r . token t for `n_rows` rows `row_bytes` apart and
  // `n_tokens` activation rows `x_stride` blocks apart, each weight block unpacked once
  // for a tile of tokens. A token's float order depends on neither count.
  void (*tile_dots)(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                    const Activation* x, std::size_t x_stride, std::size_t nblocks,
                    std::size_t n_tokens, float* y, std::size_t y_stride) = nullptr;
  // The same with the tokens' blocks packed once per matmul as Block32Tiles
  // (pack_block32_token), where a set's tiles read them so (AMX, the 32-value types): the
  // file's rows, or below, the sixteen-row copy.
  void (*tile_dots_packed)(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                           const Block32Tiles& x, float* y, std::size_t y_stride) = nullptr;
  // On the sixteen-row copy (`rows16`'s layout), for `n_rows` rows from the first group of
  // `w`: where a set has it (AMX), prefill reads the copy that decode reads.
  void (*tile_dots_rows16)(const std::conditional_t<std::is_void_v<Rows16>, std::byte, Rows16>* w,
                           std::size_t n_rows, const Block32Tiles& x, float* y,
                           std::size_t y_stride) = nullptr;
  // Prefill on the sixteen-row copy over the packed token tiles (IQ4_XS), groups addressed
  // as MatrixFn's rows at a group's bytes / 16 apart: AMX's matrix unit, with the bits
  // `matrix` gives the file's rows, and with AVX-512 VNNI the tokens in the lanes
  // (x86_avx512_token_lanes.hpp); both with the bits `rows16` gives a token on the copy.
  MatrixFn packed_rows16 = nullptr;
  // Whether prefill on the sixteen-row copy takes `rows16` over all its tokens, where the
  // type has no packed_rows16 (every x86 set but AMX: four tokens per pass over each
  // group, or half group on AVX2, which stays in L1: faster than the tiles over the file's
  // rows, by much on the AVX-512 sets and less on AVX2; bench/HISTORY.md, "The AVX-512 sets
  // prefill on the sixteen-row copies", "AVX2 prefills on the sixteen-row copies"), so that
  // the copy serves decode and prefill alike.
  bool rows16_prefills = false;
  // Whether `dot` gives a token the bits `tile_dots` gives it (the same float order: the
  // 32-value types but IQ4_NL on AVX2, simd/x86_avx2.hpp's scaled_block_sums; Q2_K and
  // Q3_K on every x86 set but AMX; Q5_K on AVX2), so that a one-token
  // step of a batch-invariant path (speculative decoding, the server) may take matvec.
  bool dot_rounds_like_tile_dots = false;
  // The same for `matrix`, the matrix unit's prefill on the file's rows (Q2_K and Q3_K on
  // AMX: their dots there take the matrix kernel's float steps per block).
  bool dot_rounds_like_matrix = false;
  // The same for `rows8` and `packed_rows8` on the eight-row copy (Q4_K, Q5_K, Q6_K on AMX:
  // x86_avx512_rows8.hpp's kRows8MatrixOrder; wherever packed_rows8 is the tokens-in-lanes
  // kernel, which takes `rows8`'s float steps).
  bool rows8_rounds_like_packed = false;
};

namespace detail {
template <class... Ws>
std::tuple<WeightKernels<Ws>...> weight_kernel_tuple(TypeList<Ws...>);
}  // namespace detail

struct Kernels {
  Isa isa = Isa::scalar;
  // One WeightKernels per entry of WeightTypes: kernels.of<GgmlType::Q4_K>().dot, ...
  decltype(detail::weight_kernel_tuple(WeightTypes{})) weights;
  template <GgmlType Type>
  WeightKernels<weight_type_t<Type>>& of() noexcept {
    return std::get<WeightKernels<weight_type_t<Type>>>(weights);
  }
  template <GgmlType Type>
  const WeightKernels<weight_type_t<Type>>& of() const noexcept {
    return std::get<WeightKernels<weight_type_t<Type>>>(weights);
  }
  // The same for generic code that holds an entry W: kernels.of(W{}).
  template <class W>
  WeightKernels<W>& of(W) noexcept {
    return std::get<WeightKernels<W>>(weights);
  }
  template <class W>
  const WeightKernels<W>& of(W) const noexcept {
    return std::get<WeightKernels<W>>(weights);
  }
  // Whether this set runs faster on interleaved rows than on the file's (measured for
  // AVX2, AVX-512 and AMX; the AVX-512 sets' prefill reads the copy through packed_rows8).
  bool prefers_rows8 = false;
  // The SwiGLU gate: out[i] = silu(gate[i]) * up[i]; `out` may alias either input.
  void (*swiglu)(const float* gate, const float* up, float* out, std::size_t n) = nullptr;
  // Activation quantizers; `n` is a multiple of the block size. Bit-exact with ggml's.
  void (*quantize_row_q8k)(const float*, BlockQ8K*, std::size_t n) = nullptr;
  void (*quantize_row_q8_0)(const float*, BlockQ8_0*, std::size_t n) = nullptr;
  void (*quantize_row_q8_1)(const float*, BlockQ8_1*, std::size_t n) = nullptr;
  // Attention over one block of cached positions for one KV head's query heads, any
  // key and value types (see simd/attention_kernels.hpp).
  void (*attend_block)(const AttendBlock&) = nullptr;
};

// Each weight type's kernel unit (simd/kernels_<type>.hpp) specialises this with one
// wiring function per family of instruction sets, each filling in the entries of the
// type's WeightKernels that the family's sets have (the kernels themselves live in the
// family's files: scalar_kernels.hpp, x86_*.hpp, neon.hpp):
//   static void scalar(WeightKernels<W>&) noexcept;                      the references
//   template <class Arch> static void x86(WeightKernels<W>&) noexcept;   AVX2, AVX-512, AMX
//   template <class Arch> static void neon(WeightKernels<W>&) noexcept;  AArch64
// or, where one kernel written over xsimd serves every vector set, `vector` for both.
// The x86 and NEON ones exist only where their sets compile (SMOL_X86, SMOL_ARM64);
// kernels_impl.hpp's weight_kernels<W, Arch>() calls the one for Arch.
template <class W>
struct KernelUnit;

// Each ISA header specialises this; kernels_for<Arch>() caches its result.
template <class Arch>
Kernels make_isa_kernels() noexcept;

template <class Arch>
const Kernels& kernels_for() noexcept;

#if defined(SMOL_DISPATCH)
extern template const Kernels& kernels_for<scalar_arch>() noexcept;
#if defined(SMOL_X86)
#if !defined(SMOL_DISPATCH_WITHOUT_AVX2)
extern template const Kernels& kernels_for<avx2_arch>() noexcept;
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AVX512)
extern template const Kernels& kernels_for<avx512_arch>() noexcept;
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AVX512VNNI)
extern template const Kernels& kernels_for<avx512vnni_arch>() noexcept;
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AMX)
extern template const Kernels& kernels_for<amx_arch>() noexcept;
#endif
#elif defined(SMOL_ARM64)
extern template const Kernels& kernels_for<neon_arch>() noexcept;
#endif
#endif

// Which vector sets this translation unit can reach: those of the dispatch units
// (every one, unless SMOL_DISPATCH_ISAS=native left some out: SMOL_DISPATCH_WITHOUT_*),
// otherwise those the includer's own compile flags enable.
#if defined(SMOL_DISPATCH) && defined(SMOL_X86)
#if !defined(SMOL_DISPATCH_WITHOUT_AVX2)
#define SMOL_HAVE_AVX2_KERNELS 1
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AVX512)
#define SMOL_HAVE_AVX512_KERNELS 1
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AVX512VNNI)
#define SMOL_HAVE_AVX512VNNI_KERNELS 1
#endif
#if !defined(SMOL_DISPATCH_WITHOUT_AMX)
#define SMOL_HAVE_AMX_KERNELS 1
#endif
#elif defined(SMOL_X86)
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SMOL_HAVE_AVX2_KERNELS 1
#endif
#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define SMOL_HAVE_AVX512_KERNELS 1
#if defined(__AVX512VNNI__)
#define SMOL_HAVE_AVX512VNNI_KERNELS 1
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define SMOL_HAVE_AMX_KERNELS 1
#endif
#endif
#endif
#elif defined(SMOL_ARM64)
#define SMOL_HAVE_NEON_KERNELS 1
#endif

// Whether this binary holds kernels for `isa` (independent of the running CPU).
constexpr bool isa_compiled_in(Isa isa) noexcept {
  switch (isa) {
    case Isa::scalar:
      return true;
#if defined(SMOL_HAVE_AVX2_KERNELS)
    case Isa::avx2:
      return true;
#endif
#if defined(SMOL_HAVE_AVX512_KERNELS)
    case Isa::avx512:
      return true;
#endif
#if defined(SMOL_HAVE_AVX512VNNI_KERNELS)
    case Isa::avx512vnni:
      return true;
#endif
#if defined(SMOL_HAVE_AMX_KERNELS)
    case Isa::amx:
      return true;
#endif
#if defined(SMOL_HAVE_NEON_KERNELS)
    case Isa::neon:
      return true;
#endif
    default:
      return false;
  }
}

// Instruction sets this binary has kernels for AND this CPU can run.
inline std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (isa_compiled_in(isa) && cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

inline Isa best_isa() noexcept {
  for (Isa isa : {Isa::amx, Isa::avx512vnni, Isa::avx512, Isa::avx2, Isa::neon}) {
    if (isa_compiled_in(isa) && cpu_supports(isa)) return isa;
  }
  return Isa::scalar;
}

// Refuses (with smol::Error) an ISA the CPU cannot run or the binary lacks, so a bad
// request never becomes an illegal instruction.
inline void check_isa_usable(Isa isa) {
  if (!cpu_supports(isa)) {
    fail("instruction set ", isa_name(isa),
         " is not supported by this CPU (best: ", isa_name(best_cpu_isa()), ")");
  }
  if (!isa_compiled_in(isa)) {
    fail("instruction set ", isa_name(isa),
         " was not compiled into this binary (link with smol_add_dispatch or build with -m",
         isa_name(isa), " flags)");
  }
}

// The ISA a Context uses: an explicit request, else $SMOL_ISA, else the best available.
inline Isa select_isa(std::optional<Isa> requested) {
  if (!requested) {
    if (const char* env = std::getenv("SMOL_ISA"); env != nullptr && *env != '\0') {
      try {
        requested = parse_isa(env);
      } catch (const Error& e) {
        fail("SMOL_ISA: ", e.what());
      }
    }
  }
  const Isa isa = requested.value_or(best_isa());
  check_isa_usable(isa);
  return isa;
}

}  // namespace smol
