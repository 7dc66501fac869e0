// A fixed-size, zero-initialised heap array aligned for the widest SIMD loads.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <type_traits>

namespace smol {

inline constexpr std::size_t kSimdAlignment = 64;  // one AVX-512 register, one cache line

template <class T>
class AlignedBuffer {
  static_assert(std::is_trivially_destructible_v<T>, "elements are never destroyed one by one");

 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count)
      : data_(count == 0 ? nullptr
                         : static_cast<T*>(::operator new[](count * sizeof(T),
                                                            std::align_val_t{kSimdAlignment}))),
        size_(count) {
    for (std::size_t i = 0; i < count; ++i) new (data_.get() + i) T{};
  }

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  std::span<T> span() noexcept { return {data_.get(), size_}; }
  std::span<const T> span() const noexcept { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(T* p) const noexcept {
      ::operator delete[](p, std::align_val_t{kSimdAlignment});
    }
  };
  std::unique_ptr<T[], Free> data_;
  std::size_t size_ = 0;
};

}  // namespace smol
