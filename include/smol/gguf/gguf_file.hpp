// GgufFile: a validated, read-only view of a GGUF model file.
//
// open() maps the file and parses only the header, the metadata and the tensor-info
// table; tensor data stays untouched until a kernel reads it. Every string, array and
// tensor handed out points into the mapping, so the GgufFile must outlive them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/mapped_file.hpp"
#include "smol/gguf/detail/bytes.hpp"
#include "smol/gguf/detail/parser.hpp"
#include "smol/gguf/tensor_info.hpp"
#include "smol/gguf/value_view.hpp"

namespace smol::gguf {

class GgufFile {
 public:
  // Maps `path` read-only and validates it; throws smol::Error naming the problem.
  static GgufFile open(const std::string& path) {
    GgufFile file;
    file.name_ = path;
    file.mapping_ = MappedFile(path);
    file.bytes_ = file.mapping_.bytes();
    file.parse();
    return file;
  }

  // Parses bytes the GgufFile keeps; `name` stands for the file name in messages.
  static GgufFile from_bytes(std::vector<std::byte> bytes, std::string name = "<memory>") {
    GgufFile file;
    file.name_ = std::move(name);
    file.owned_ = std::move(bytes);
    file.bytes_ = file.owned_;
    file.parse();
    return file;
  }

  // Parses bytes the caller keeps alive and unchanged for the GgufFile's lifetime.
  static GgufFile from_borrowed_bytes(std::span<const std::byte> bytes,
                                      std::string name = "<memory>") {
    GgufFile file;
    file.name_ = std::move(name);
    file.bytes_ = bytes;
    file.parse();
    return file;
  }

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  // Releases the resident pages of a range of a memory-mapped file (see MappedFile);
  // does nothing for bytes held in memory, which have no file to come back from.
  void release_pages(const std::byte* p, std::size_t n) const noexcept {
    mapping_.release_pages(p, n);
  }
  std::uint32_t version() const noexcept { return parsed_.version; }
  std::uint64_t alignment() const noexcept { return parsed_.alignment; }
  // File offset where the data section (and the first tensor offset) begins.
  std::uint64_t data_offset() const noexcept { return parsed_.data_offset; }

  // ---- metadata -------------------------------------------------------------

  // Every key/value pair, in file order.
  std::span<const MetadataEntry> metadata() const noexcept { return parsed_.metadata; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const MetadataEntry* find(std::string_view key) const {
    const auto found = parsed_.key_index.find(key);
    return found == parsed_.key_index.end() ? nullptr : &parsed_.metadata[found->second];
  }

  // The value of `key` as T (see ValueView::as for the allowed T and conversions).
  // Throws smol::Error naming the key when it is missing or does not convert.
  template <class T>
  T get(std::string_view key) const {
    const MetadataEntry* entry = find(key);
    if (entry == nullptr) fail(name_, ": metadata key ", detail::quoted(key), " is missing");
    return convert<T>(*entry);
  }

  // Like get, but nothing when the key is absent. A key that is present with a value
  // that does not convert still throws: that is a broken file, not a missing option.
  template <class T>
  std::optional<T> get_optional(std::string_view key) const {
    const MetadataEntry* entry = find(key);
    if (entry == nullptr) return std::nullopt;
    return convert<T>(*entry);
  }

  // ---- tensors --------------------------------------------------------------

  // Every tensor, in the order of the tensor-info table.
  std::span<const TensorInfo> tensors() const noexcept { return parsed_.tensors; }
  const TensorInfo* find_tensor(std::string_view name) const {
    const auto found = parsed_.tensor_index.find(name);
    return found == parsed_.tensor_index.end() ? nullptr : &parsed_.tensors[found->second];
  }
  const TensorInfo& tensor(std::string_view name) const {
    const TensorInfo* info = find_tensor(name);
    if (info == nullptr) fail(name_, ": tensor ", detail::quoted(name), " is missing");
    return *info;
  }

 private:
  GgufFile() = default;

  void parse() { parsed_ = detail::Parser(bytes_, name_).parse(); }

  template <class T>
  T convert(const MetadataEntry& entry) const {
    T out{};
    std::string why;
    if (!entry.value.try_as(out, &why)) {
      fail(name_, ": metadata key ", detail::quoted(entry.key), " (entry at offset ", entry.offset,
           "): ", why);
    }
    return out;
  }

  std::string name_;
  MappedFile mapping_;
  std::vector<std::byte> owned_;  // moving a vector keeps its buffer, so views stay valid
  std::span<const std::byte> bytes_;
  detail::ParsedGguf parsed_;
};

}  // namespace smol::gguf
