// Context: the threads, instruction set and scratch memory every op runs with.
//
// No globals and no hidden thread pool: parallel work runs in this context's oneTBB
// task_arena, and the buffers ops need between calls (quantized activations,
// dequantized rows) belong to it and only grow, so hot loops never allocate.
// A Context serves one caller at a time.
#pragma once

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/error.hpp"
#include "smol/simd/kernels_impl.hpp"

namespace smol {

enum class ActivationPrecision {
  q8,   // activations rounded to Q8_K / Q8_0 before quantized dots, as ggml does
  f32,  // reference mode: weights dequantized on the fly and dotted in f32
};

// Independent scratch buffers an op may hold at the same time.
enum class Scratch : std::size_t {
  activations,
  packed_activations,
  activation_scales,
  token_pair_sums,  // TokenTiles::pair_sums
  token_terms,      // the tokens' rows16_token_terms, for the sixteen-row copies (quant/rows16.hpp)
  rows,
  count
};

class Context {
 public:
  // threads: 0 = every hardware thread this process may use. isa: default is $SMOL_ISA,
  // else the best the CPU and the binary support; an unusable choice throws smol::Error.
  explicit Context(int threads = 0, std::optional<Isa> isa = std::nullopt)
      : isa_(select_isa(isa)), kernels_(&kernels_for_isa(isa_)) {
    if (threads < 0) fail("Context: thread count must be >= 0, got ", threads);
    threads_ = threads == 0 ? tbb::info::default_concurrency() : threads;
    arena_ = std::make_unique<tbb::task_arena>(threads_);
  }

  int threads() const noexcept { return threads_; }
  Isa isa() const noexcept { return isa_; }
  const Kernels& kernels() const noexcept { return *kernels_; }
  tbb::task_arena& arena() noexcept { return *arena_; }

  ActivationPrecision activation_precision = ActivationPrecision::q8;

  // At least `bytes` bytes of 64-byte aligned memory, kept for the next call. The
  // contents are undefined; asking for more replaces the buffer.
  std::byte* scratch(Scratch slot, std::size_t bytes) {
    auto& buffer = scratch_[static_cast<std::size_t>(slot)];
    if (buffer.size() < bytes) buffer = AlignedBuffer<std::byte>(bytes + bytes / 4);
    return buffer.data();
  }
  template <class T>
  T* scratch_as(Scratch slot, std::size_t count) {
    return reinterpret_cast<T*>(scratch(slot, count * sizeof(T)));
  }

 private:
  Isa isa_;
  const Kernels* kernels_;
  int threads_ = 1;
  std::unique_ptr<tbb::task_arena> arena_;
  std::array<AlignedBuffer<std::byte>, static_cast<std::size_t>(Scratch::count)> scratch_;
};

}  // namespace smol
