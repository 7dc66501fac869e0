// HugePageBuffer: zero-filled anonymous memory for large arrays that live as long as a
// model, backed by transparent huge pages where the kernel grants them.
//
// Why not AlignedBuffer: for a gigabyte of repacked weights, 2 MB pages cut the page
// faults while it is filled and the TLB misses while decode streams it, and the memory
// comes zeroed from the kernel instead of being written twice.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "smol/core/error.hpp"

namespace smol {

class HugePageBuffer {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HugePageBuffer() = default;
  explicit HugePageBuffer(std::size_t bytes) {
    if (bytes == 0) return;
    // Over-allocate by one huge page so the start can be aligned to one.
    const std::size_t mapped = bytes + kHugePage;
    void* address =
        ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) fail("cannot allocate ", bytes, " bytes of memory");
    mapping_ = static_cast<std::byte*>(address);
    mapped_ = mapped;
    const auto start = reinterpret_cast<std::uintptr_t>(mapping_);
    data_ = mapping_ + ((kHugePage - start % kHugePage) % kHugePage);
    size_ = bytes;
#if defined(MADV_HUGEPAGE)
    ::madvise(data_, (size_ + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint
#endif
  }
  HugePageBuffer(HugePageBuffer&& other) noexcept {
    swap(other);
  }
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept {
    HugePageBuffer(std::move(other)).swap(*this);
    return *this;
  }
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer() {
    if (mapping_ != nullptr) ::munmap(mapping_, mapped_);
  }

  std::byte* data() noexcept {
    return data_;
  }
  const std::byte* data() const noexcept {
    return data_;
  }
  std::size_t size() const noexcept {
    return size_;
  }

 private:
  void swap(HugePageBuffer& other) noexcept {
    std::swap(mapping_, other.mapping_);
    std::swap(mapped_, other.mapped_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  std::byte* mapping_ = nullptr;
  std::size_t mapped_ = 0;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace smol
