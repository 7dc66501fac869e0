// HostBackend: ForwardEngine's backend for machines without a GPU.
//
// It runs every kernel of smol_cuda.cu as loops over the same __host__ __device__
// bodies, in the same decomposition: a matmul row is 32 lanes' partial sums added
// up, attention walks the same chunks and tiles with the same online softmax. What it
// cannot stand in for is only the CUDA mechanics: thread indexing, shared memory,
// barriers and shuffles. Memory is host memory with the device's alignment (256
// bytes), so the alignment checks in block_decode.cuh's load() hold it to the same
// promises. For tests (tests/cuda/test_cuda_host.cu); it is slow and meant to be.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "forward_engine.cuh"
#include "kernel_bodies.cuh"

namespace smol::cuda::detail {

class HostBackend {
 public:
  template <class T>
  class Array {
   public:
    Array() = default;
    explicit Array(std::size_t count) : size_(count) {
      const std::size_t bytes = (std::max<std::size_t>(count, 1) * sizeof(T) + 255) / 256 * 256;
      data_.reset(static_cast<T*>(std::aligned_alloc(256, bytes)));
      if (!data_) throw std::bad_alloc();
    }
    T* data() const noexcept { return data_.get(); }
    std::size_t size() const noexcept { return size_; }

   private:
    struct Free {
      void operator()(T* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<T, Free> data_;
    std::size_t size_ = 0;
  };

  void copy_in(void* to, const void* from, std::size_t bytes) { std::memcpy(to, from, bytes); }
  void copy_out(void* to, const void* from, std::size_t bytes) { std::memcpy(to, from, bytes); }
  void copy_rows(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch,
                 std::size_t width, std::size_t height) {
    for (std::size_t r = 0; r < height; ++r) {
      std::memcpy(static_cast<std::byte*>(to) + r * to_pitch,
                  static_cast<const std::byte*>(from) + r * from_pitch, width);
    }
  }
  void synchronize() {}
  void synchronize_quietly() noexcept {}

  template <class Body>
  void for_each(std::size_t count, const Body& body) {
    for (std::size_t i = 0; i < count; ++i) body(i);
  }

  void rmsnorm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t n,
               float eps) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = x + r * n;
      double sum = 0.0;
      for (std::size_t i = 0; i < n; ++i) sum += square_as_double(row[i]);
      const float scale = rms_scale(sum, n, eps);
      for (std::size_t i = 0; i < n; ++i) out[r * n + i] = rms_apply(row[i], scale, weight[i]);
    }
  }

  void matmul(const DeviceMatrix& w, const float* x, std::size_t n, float* y) {
    with_weight_type(w.type, [&](auto tag) {
      constexpr GgmlType T = decltype(tag)::value;
      if (n == 1) {
        matmul_tiles<T, 1>(w, x, n, y);
      } else {
        matmul_tiles<T, kMatmulTile>(w, x, n, y);
      }
    });
  }

  // The chunk kernel, one (token, KV head, chunk) at a time; the phases between the
  // kernel's barriers become consecutive loops.
  template <class Element>
  void attention(const AttentionArgs<Element>& a) {
    const std::size_t group = a.group(), dim = a.head_dim;
    std::vector<float> weights(group * kAttentionTile);
    std::vector<float> acc(group * dim), running_max(group), running_sum(group), rescale(group);
    for (std::size_t t = 0; t < a.n_tokens; ++t) {
      for (std::size_t g = 0; g < a.n_kv; ++g) {
        const float* q = a.q + t * a.n_head * dim + g * group * dim;
        const Element* keys = a.keys + g * a.head_stride;
        const Element* values = a.values + g * a.head_stride;
        for (std::size_t chunk = 0; chunk < a.n_chunks; ++chunk) {
          const std::size_t begin = chunk * a.chunk_len;
          const std::size_t end = std::min(begin + a.chunk_len, a.visible(t));
          std::fill(acc.begin(), acc.end(), 0.0f);
          std::fill(running_max.begin(), running_max.end(), negative_infinity());
          std::fill(running_sum.begin(), running_sum.end(), 0.0f);
          for (std::size_t first = begin; first < end; first += kAttentionTile) {
            const std::size_t count = std::min(kAttentionTile, end - first);
            for (std::size_t j = 0; j < group; ++j) {
              float* w = weights.data() + j * kAttentionTile;
              float tile_max = negative_infinity();
              for (std::size_t p = 0; p < count; ++p) {
                w[p] = attention_score(q + j * dim, keys + (first + p) * dim, dim, a.scale);
                tile_max = ::fmaxf(tile_max, w[p]);
              }
              const OnlineStep step = online_step(running_max[j], tile_max);
              float sum = 0.0f;
              for (std::size_t p = 0; p < count; ++p) sum += (w[p] = ::expf(w[p] - step.max));
              running_sum[j] = running_sum[j] * step.rescale + sum;
              running_max[j] = step.max;
              rescale[j] = step.rescale;
            }
            for (std::size_t e = 0; e < group * dim; ++e) {
              const std::size_t j = e / dim, d = e % dim;
              acc[e] = attention_values(acc[e], rescale[j], weights.data() + j * kAttentionTile,
                                        values, first, count, dim, d);
            }
          }
          for (std::size_t j = 0; j < group; ++j) {
            float* out = a.partial(t, g * group + j, chunk);
            out[0] = running_max[j];
            out[1] = running_sum[j];
            std::copy_n(acc.data() + j * dim, dim, out + 2);
          }
        }
      }
    }
  }

 private:
  // One warp per weight row: 32 lanes' partial sums, added as the warp's shuffles do.
  template <GgmlType T, int kTokens>
  void matmul_tiles(const DeviceMatrix& w, const float* x, std::size_t n, float* y) {
    const std::size_t groups = w.groups();
    for (std::size_t first = 0; first < n; first += kTokens) {
      const int tokens = static_cast<int>(std::min<std::size_t>(kTokens, n - first));
      for (std::size_t r = 0; r < w.rows; ++r) {
        float lanes[kWarp][kTokens] = {};
        for (int lane = 0; lane < kWarp; ++lane) {
          lane_row_partials<T, kTokens>(w.data + r * w.row_bytes, groups, lane, x + first * w.cols,
                                        w.cols, tokens, lanes[lane]);
        }
        for (int t = 0; t < tokens; ++t) {
          // The butterfly of __shfl_xor_sync: lane l adds lane l ^ offset.
          for (int offset = kWarp / 2; offset > 0; offset /= 2) {
            float next[kWarp];
            for (int l = 0; l < kWarp; ++l) next[l] = lanes[l][t] + lanes[l ^ offset][t];
            for (int l = 0; l < kWarp; ++l) lanes[l][t] = next[l];
          }
          y[(first + t) * w.rows + r] = lanes[0][t];
        }
      }
    }
  }
};

}  // namespace smol::cuda::detail
