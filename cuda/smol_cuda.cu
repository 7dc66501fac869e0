// The CUDA translation unit: smol::cuda::GpuTransformer (include/smol/cuda/
// gpu_transformer.hpp) as ForwardEngine (forward_engine.cuh) over DeviceBackend,
// which owns device memory and one stream and launches the kernels below.
//
// The kernels only map threads onto the __host__ __device__ bodies of
// kernel_bodies.cuh and block_decode.cuh and add what needs a GPU: warp shuffles,
// shared memory, barriers. Everything runs on one stream; a forward call returns once
// the stream is idle, as the CPU forward returns when its work is done.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "forward_engine.cuh"
#include "kernel_bodies.cuh"
#include "smol/core/error.hpp"
#include "smol/cuda/gpu_transformer.hpp"

namespace smol::cuda {
namespace detail {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("smol cuda: ", what, ": ", cudaGetErrorString(status));
}

// Launches report bad configurations at once, faults only at the next synchronizing
// call; both end up as a smol::Error naming the kernel or the call.
void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

unsigned grid_size(std::size_t blocks, std::size_t limit, const char* what) {
  if (blocks == 0 || blocks > limit) {
    fail("smol cuda: ", what, " needs ", blocks, " blocks in one grid dimension (limit ", limit,
         ")");
  }
  return static_cast<unsigned>(blocks);
}

constexpr std::size_t kGridX = 2147483647;
constexpr std::size_t kGridYZ = 65535;

// ---- warp reductions --------------------------------------------------------------

template <class T>
__device__ __forceinline__ T warp_sum(T value) {
  SMOL_UNROLL
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  SMOL_UNROLL
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// ---- kernels ----------------------------------------------------------------------

constexpr unsigned kEachThreads = 256;

template <class Body>
__global__ void __launch_bounds__(kEachThreads) each_kernel(Body body, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) body(i);
}

// One block per row; the sum of squares in double, per warp, then across warps.
constexpr unsigned kNormThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_kernel(const float* x, const float* weight, float* out, std::size_t n, float eps) {
  __shared__ double warp_sums[kNormThreads / kWarp];
  const float* row = x + blockIdx.x * n;
  float* row_out = out + blockIdx.x * n;
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += kNormThreads) sum += square_as_double(row[i]);
  sum = warp_sum(sum);
  if (threadIdx.x % kWarp == 0) warp_sums[threadIdx.x / kWarp] = sum;
  __syncthreads();
  double total = 0.0;
  for (unsigned w = 0; w < kNormThreads / kWarp; ++w) total += warp_sums[w];
  const float scale = rms_scale(total, n, eps);
  for (std::size_t i = threadIdx.x; i < n; i += kNormThreads) {
    row_out[i] = rms_apply(row[i], scale, weight[i]);
  }
}

// One warp per weight row, kTokens tokens per block row (blockIdx.y): each lane
// decodes its groups once and dots them with every token of the tile.
struct MatmulArgs {
  const std::uint8_t* weights;
  std::size_t rows;
  std::size_t row_bytes;
  std::size_t groups;  // per row
  std::size_t cols;
  const float* x;  // n rows of cols
  std::size_t n;
  float* y;  // n rows of `rows`
};

template <GgmlType T, int kTokens>
__global__ void __launch_bounds__(kMatmulWarpsPerBlock* kWarp) matmul_kernel(MatmulArgs a) {
  const unsigned lane = threadIdx.x % kWarp;
  const std::size_t row =
      static_cast<std::size_t>(blockIdx.x) * kMatmulWarpsPerBlock + threadIdx.x / kWarp;
  if (row >= a.rows) return;  // the whole warp: `row` is the same for its lanes
  const std::size_t first = static_cast<std::size_t>(blockIdx.y) * kTokens;
  const int tokens = static_cast<int>(smaller(kTokens, a.n - first));
  float acc[kTokens] = {};
  lane_row_partials<T, kTokens>(a.weights + row * a.row_bytes, a.groups, lane, a.x + first * a.cols,
                                a.cols, tokens, acc);
  SMOL_UNROLL
  for (int t = 0; t < kTokens; ++t) {
    const float sum = warp_sum(acc[t]);
    if (lane == 0 && t < tokens) a.y[(first + t) * a.rows + row] = sum;
  }
}

// One block per (chunk, KV head, token): see kernel_bodies.cuh. Thread p scores
// position p of the tile against every query head of the group; warp j runs head j's
// online softmax; then each thread accumulates its (head, dim) pairs' values.
template <class Element>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_chunk_kernel(AttentionArgs<Element> a) {
  __shared__ float queries[kMaxGroup * kMaxHeadDim];
  __shared__ float weights[kMaxGroup * kAttentionTile];
  __shared__ float running_max[kMaxGroup];
  __shared__ float running_sum[kMaxGroup];
  __shared__ float rescale[kMaxGroup];

  const std::size_t chunk = blockIdx.x, g = blockIdx.y, t = blockIdx.z;
  const unsigned tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const std::size_t group = a.group(), dim = a.head_dim, pairs = group * dim;
  const std::size_t begin = chunk * a.chunk_len;
  const std::size_t end = smaller(begin + a.chunk_len, a.visible(t));
  const float* q = a.q + t * a.n_head * dim + g * group * dim;
  const Element* keys = a.keys + g * a.head_stride;
  const Element* values = a.values + g * a.head_stride;

  for (std::size_t e = tid; e < pairs; e += kAttentionThreads) queries[e] = q[e];
  if (tid < group) {
    running_max[tid] = negative_infinity();
    running_sum[tid] = 0.0f;
  }
  float acc[kMaxPairsPerThread] = {};
  __syncthreads();

  for (std::size_t first = begin; first < end; first += kAttentionTile) {
    const std::size_t count = smaller(kAttentionTile, end - first);
    if (tid < count) {
      const Element* key = keys + (first + tid) * dim;
      for (std::size_t j = 0; j < group; ++j) {
        weights[j * kAttentionTile + tid] = attention_score(queries + j * dim, key, dim, a.scale);
      }
    }
    __syncthreads();
    if (warp < group) {
      float* w = weights + warp * kAttentionTile;
      float tile_max = negative_infinity();
      for (std::size_t p = lane; p < count; p += kWarp) tile_max = fmaxf(tile_max, w[p]);
      tile_max = warp_max(tile_max);
      const OnlineStep step = online_step(running_max[warp], tile_max);
      float sum = 0.0f;
      for (std::size_t p = lane; p < count; p += kWarp) {
        const float e = expf(w[p] - step.max);
        w[p] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        running_sum[warp] = running_sum[warp] * step.rescale + sum;
        running_max[warp] = step.max;
        rescale[warp] = step.rescale;
      }
    }
    __syncthreads();
    SMOL_UNROLL
    for (std::size_t k = 0; k < kMaxPairsPerThread; ++k) {
      const std::size_t e = tid + k * kAttentionThreads;
      if (e < pairs) {
        const std::size_t j = e / dim, d = e % dim;
        acc[k] = attention_values(acc[k], rescale[j], weights + j * kAttentionTile, values, first,
                                  count, dim, d);
      }
    }
    __syncthreads();  // the next tile overwrites weights and rescale
  }

  SMOL_UNROLL
  for (std::size_t k = 0; k < kMaxPairsPerThread; ++k) {
    const std::size_t e = tid + k * kAttentionThreads;
    if (e < pairs) a.partial(t, g * group + e / dim, chunk)[2 + e % dim] = acc[k];
  }
  if (tid < group) {
    float* out = a.partial(t, g * group + tid, chunk);
    out[0] = running_max[tid];
    out[1] = running_sum[tid];
  }
}

}  // namespace

// ---- memory and the backend -------------------------------------------------------

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) : size_(count) {
    if (count == 0) return;
    const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T));
    if (status != cudaSuccess) {
      data_ = nullptr;
      fail("smol cuda: cannot allocate ", count * sizeof(T),
           " bytes on the GPU: ", cudaGetErrorString(status));
    }
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

class DeviceBackend {
 public:
  template <class T>
  using Array = DeviceArray<T>;

  DeviceBackend() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  DeviceBackend(DeviceBackend&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  DeviceBackend& operator=(DeviceBackend&&) = delete;
  ~DeviceBackend() {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  // From pageable host memory (the memory map, a std::vector): CUDA stages the bytes
  // before it returns, so the source may change right after.
  void copy_in(void* to, const void* from, std::size_t bytes) {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream_), "copy to the GPU");
  }
  void copy_out(void* to, const void* from, std::size_t bytes) {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream_), "copy from the GPU");
    synchronize();
  }
  void copy_rows(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch,
                 std::size_t width, std::size_t height) {
    check(cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, height, cudaMemcpyDeviceToDevice,
                            stream_),
          "copy of the KV cache");
  }
  void synchronize() { check(cudaStreamSynchronize(stream_), "GPU work"); }
  void synchronize_quietly() noexcept {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  }

  template <class Body>
  void for_each(std::size_t count, const Body& body) {
    const unsigned blocks =
        grid_size((count + kEachThreads - 1) / kEachThreads, kGridX, "a kernel");
    each_kernel<Body><<<blocks, kEachThreads, 0, stream_>>>(body, count);
    check_launch("element-wise kernel");
  }

  void rmsnorm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t n,
               float eps) {
    rmsnorm_kernel<<<grid_size(rows, kGridX, "rmsnorm"), kNormThreads, 0, stream_>>>(x, weight, out,
                                                                                     n, eps);
    check_launch("rmsnorm kernel");
  }

  void matmul(const DeviceMatrix& w, const float* x, std::size_t n, float* y) {
    const MatmulArgs args{w.data, w.rows, w.row_bytes, w.groups(), w.cols, x, n, y};
    const dim3 threads(kMatmulWarpsPerBlock * kWarp);
    const unsigned row_blocks =
        grid_size((w.rows + kMatmulWarpsPerBlock - 1) / kMatmulWarpsPerBlock, kGridX, "matmul");
    with_weight_type(w.type, [&](auto tag) {
      constexpr GgmlType T = decltype(tag)::value;
      if (n == 1) {
        matmul_kernel<T, 1><<<dim3(row_blocks, 1), threads, 0, stream_>>>(args);
      } else {
        const unsigned token_blocks =
            grid_size((n + kMatmulTile - 1) / kMatmulTile, kGridYZ, "matmul");
        matmul_kernel<T, kMatmulTile>
            <<<dim3(row_blocks, token_blocks), threads, 0, stream_>>>(args);
      }
    });
    check_launch("matmul kernel");
  }

  template <class Element>
  void attention(const AttentionArgs<Element>& a) {
    const dim3 grid(grid_size(a.n_chunks, kGridX, "attention"),
                    grid_size(a.n_kv, kGridYZ, "attention"),
                    grid_size(a.n_tokens, kGridYZ, "attention"));
    attention_chunk_kernel<Element><<<grid, kAttentionThreads, 0, stream_>>>(a);
    check_launch("attention kernel");
  }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace detail

// ---- the public API -----------------------------------------------------------------

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear it: the failure is the answer, not an error for later calls
    return 0;
  }
  return count;
}

std::string device_error() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(status);
  }
  return count == 0 ? "no CUDA-capable device is detected" : "";
}

std::string device_name(int device) {
  if (device < 0 || device >= device_count()) {
    fail("no CUDA device ", device, " (", device_count(), " present)");
  }
  cudaDeviceProp properties{};
  detail::check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return properties.name;
}

struct GpuTransformer::Impl {
  Impl(const Model& model, TransformerOptions options) : engine(model, options) {}
  detail::ForwardEngine<detail::DeviceBackend> engine;
};

GpuTransformer::GpuTransformer(const Model& model, TransformerOptions options) {
  if (device_count() == 0) fail("no CUDA device: ", device_error());
  impl_ = std::make_unique<Impl>(model, options);
}

GpuTransformer::~GpuTransformer() = default;
GpuTransformer::GpuTransformer(GpuTransformer&&) noexcept = default;
GpuTransformer& GpuTransformer::operator=(GpuTransformer&&) noexcept = default;

const Model& GpuTransformer::model() const noexcept {
  return impl_->engine.model();
}
std::size_t GpuTransformer::context_length() const noexcept {
  return impl_->engine.context_length();
}
std::size_t GpuTransformer::n_filled() const noexcept {
  return impl_->engine.n_filled();
}
std::size_t GpuTransformer::weight_bytes() const noexcept {
  return impl_->engine.weight_bytes();
}

std::span<const float> GpuTransformer::forward(std::span<const std::int32_t> tokens,
                                               std::size_t n_past, LogitsFor which) {
  return impl_->engine.forward(tokens, n_past, which);
}

}  // namespace smol::cuda
