// A read-only memory map of a whole file, the storage behind every model.
//
// Weights are never copied: tensors are views into this mapping, and the OS pages
// them in on first touch. Opening a file therefore costs one mmap, not a read.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "smol/core/error.hpp"

namespace smol {

class MappedFile {
 public:
  MappedFile() = default;

  explicit MappedFile(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
    // forever; with it the open returns at once and the check below refuses it.
    // (Regular files ignore the flag.)
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      const int err = errno;
      ::close(fd);
      fail(path, ": cannot stat: ", std::strerror(err));
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      fail(path, ": not a regular file (it is ", kind_of(info.st_mode), ")");
    }
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ > 0) {
      void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (address == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail(path, ": cannot mmap ", size_, " bytes: ", std::strerror(err));
      }
      data_ = static_cast<const std::byte*>(address);
    }
    ::close(fd);  // the mapping keeps the file alive
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept { swap(other); }
  MappedFile& operator=(MappedFile&& other) noexcept {
    MappedFile(std::move(other)).swap(*this);
    return *this;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const std::string& path() const noexcept { return path_; }

  // Tells the kernel that a range will be read soon and in order (decode streams
  // every weight once per token); purely a hint.
  void advise_sequential() const noexcept {
    if (data_ != nullptr) ::madvise(const_cast<std::byte*>(data_), size_, MADV_WILLNEED);
  }

  // Drops this process's mapping of the whole pages inside [p, p + n) (a range of this
  // mapping) from its resident memory. The mapping is read-only and private, so the
  // bytes stay the file's: a later read faults them back in. Purely a hint.
  void release_pages(const std::byte* p, std::size_t n) const noexcept {
    if (data_ == nullptr || p < data_ || n > size_ || p > data_ + (size_ - n)) return;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }

 private:
  static const char* kind_of(mode_t mode) noexcept {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a plain file";
  }

  void swap(MappedFile& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace smol
