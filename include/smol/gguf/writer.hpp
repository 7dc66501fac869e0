// GgufWriter: builds GGUF v3 files, for tests, fuzz seeds and model-making tools.
//
// The layout is the one llama.cpp and gguf-py produce, so a file read with GgufFile and
// copied through copy_of() comes back byte for byte: header, metadata, tensor infos,
// zero padding to the alignment, then each tensor's bytes followed by zero padding to
// the alignment. Tensor data is streamed: tensors may be borrowed spans or callbacks
// that produce their bytes at write time, so a 2 GB model is never held twice.
#pragma once

#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/gguf/detail/bytes.hpp"
#include "smol/gguf/detail/parser.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/tensor_info.hpp"
#include "smol/gguf/value.hpp"
#include "smol/gguf/value_type.hpp"

namespace smol::gguf {

// A tensor shape as GGUF lists it: innermost (row length) first, 1 to 4 dims.
struct Shape {
  std::array<std::uint64_t, kMaxDims> dims{1, 1, 1, 1};
  int n_dims = 0;

  Shape(std::initializer_list<std::uint64_t> list) : Shape(std::span(list.begin(), list.size())) {}
  explicit Shape(std::span<const std::uint64_t> list) {
    if (list.empty() || list.size() > kMaxDims) {
      fail("a tensor shape has 1 to ", kMaxDims, " dims, not ", list.size());
    }
    n_dims = static_cast<int>(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) dims[i] = list[i];
  }
  std::span<const std::uint64_t> view() const noexcept {
    return std::span<const std::uint64_t>(dims).first(static_cast<std::size_t>(n_dims));
  }
};

class GgufWriter {
 public:
  // Writes a tensor's bytes into the buffer it is given (exactly the tensor's size).
  using Filler = std::function<void(std::span<std::byte>)>;

  // ---- metadata -------------------------------------------------------------

  // Adds a key, or replaces the value of an existing one in its place. Setting
  // `general.alignment` (a u32 power of two) also sets the alignment the file uses.
  void set(std::string_view key, Value value) {
    if (key == detail::kAlignmentKey) check_alignment(value);
    const auto found = key_index_.find(std::string(key));
    if (found != key_index_.end()) {
      metadata_[found->second].second = std::move(value);
      return;
    }
    key_index_.emplace(std::string(key), metadata_.size());
    metadata_.emplace_back(std::string(key), std::move(value));
  }
  const Value* find(std::string_view key) const {
    const auto found = key_index_.find(std::string(key));
    return found == key_index_.end() ? nullptr : &metadata_[found->second].second;
  }
  std::size_t key_count() const noexcept { return metadata_.size(); }

  // ---- tensors --------------------------------------------------------------

  // Raw bytes in the file's encoding (ggml blocks for quantized types), borrowed: the
  // caller keeps them alive until the last write.
  void add_tensor(std::string name, GgmlType type, Shape shape, std::span<const std::byte> data) {
    Pending tensor = make(std::move(name), type, shape);
    check_data_size(tensor, data.size());
    tensor.borrowed = data;
    commit(std::move(tensor));
  }
  // The same, with the writer keeping its own copy.
  void add_tensor_copy(std::string name, GgmlType type, Shape shape,
                       std::span<const std::byte> data) {
    Pending tensor = make(std::move(name), type, shape);
    check_data_size(tensor, data.size());
    tensor.owned.assign(data.begin(), data.end());
    commit(std::move(tensor));
  }
  // Bytes produced at write time, one tensor at a time.
  void add_tensor_generated(std::string name, GgmlType type, Shape shape, Filler fill) {
    Pending tensor = make(std::move(name), type, shape);
    tensor.fill = std::move(fill);
    commit(std::move(tensor));
  }
  // Float values stored as F32, F16 or BF16 (rounded to nearest even).
  void add_f32_tensor(std::string name, Shape shape, std::span<const float> values,
                      GgmlType stored_as = GgmlType::F32) {
    if (stored_as != GgmlType::F32 && stored_as != GgmlType::F16 && stored_as != GgmlType::BF16) {
      fail("tensor ", detail::quoted(name), ": float data is stored as F32, F16 or BF16, not ",
           ggml_type_name(stored_as));
    }
    Pending tensor = make(std::move(name), stored_as, shape);
    if (values.size() != tensor.bytes / ggml_type_info(stored_as).block_bytes) {
      fail("tensor ", detail::quoted(tensor.name), ": ", values.size(), " values for a shape of ",
           tensor.bytes / ggml_type_info(stored_as).block_bytes, " elements");
    }
    tensor.owned.resize(tensor.bytes);
    std::byte* out = tensor.owned.data();
    for (const float value : values) {
      if (stored_as == GgmlType::F32) {
        detail::store(out, value);
        out += sizeof(float);
      } else {
        detail::store(out, stored_as == GgmlType::F16 ? f32_to_f16(value) : f32_to_bf16(value));
        out += sizeof(std::uint16_t);
      }
    }
    commit(std::move(tensor));
  }
  std::size_t tensor_count() const noexcept { return tensors_.size(); }

  // ---- layout and output ----------------------------------------------------

  std::uint64_t alignment() const {
    const Value* value = find(detail::kAlignmentKey);
    return value == nullptr ? detail::kDefaultAlignment : value->view().as<std::uint32_t>();
  }
  // Where the data section begins: the end of the tensor-info table, aligned.
  std::uint64_t data_offset() const { return align(header_size()); }
  // Offset of tensor `index` relative to the data section.
  std::uint64_t tensor_offset(std::size_t index) const {
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < index; ++i) offset = align(offset + tensors_[i].bytes);
    return offset;
  }
  std::uint64_t file_size() const {
    std::uint64_t data = 0;
    for (const Pending& tensor : tensors_) data = align(data + tensor.bytes);
    return data_offset() + data;
  }

  // Everything before the data section: header, metadata, tensor infos and padding.
  std::vector<std::byte> header_bytes() const {
    std::vector<std::byte> out;
    out.reserve(header_size());
    const auto put = [&out](auto value) {
      const std::size_t at = out.size();
      out.resize(at + sizeof value);
      detail::store(out.data() + at, value);
    };
    const auto put_string = [&](std::string_view text) {
      put(static_cast<std::uint64_t>(text.size()));
      detail::append_bytes(out, text.data(), text.size());
    };
    detail::append_bytes(out, "GGUF", 4);
    put(std::uint32_t{3});
    put(static_cast<std::uint64_t>(tensors_.size()));
    put(static_cast<std::uint64_t>(metadata_.size()));
    for (const auto& [key, value] : metadata_) {
      put_string(key);
      put(static_cast<std::uint32_t>(value.type()));
      detail::append_bytes(out, value.payload().data(), value.payload().size());
    }
    std::uint64_t offset = 0;
    for (const Pending& tensor : tensors_) {
      put_string(tensor.name);
      put(static_cast<std::uint32_t>(tensor.shape.n_dims));
      for (const std::uint64_t dim : tensor.shape.view()) put(dim);
      put(static_cast<std::uint32_t>(tensor.type));
      put(offset);
      offset = align(offset + tensor.bytes);
    }
    out.resize(static_cast<std::size_t>(align(out.size())), std::byte{0});
    return out;
  }

  // Streams the whole file into `sink`, called with consecutive std::span<const std::byte>.
  template <class Sink>
  void write_to(Sink&& sink) const {
    sink(std::span<const std::byte>(header_bytes()));
    const std::vector<std::byte> zeros(static_cast<std::size_t>(alignment()), std::byte{0});
    std::vector<std::byte> generated;
    for (const Pending& tensor : tensors_) {
      std::span<const std::byte> data = tensor.borrowed;
      if (!tensor.owned.empty()) data = tensor.owned;
      if (tensor.fill) {
        generated.assign(tensor.bytes, std::byte{0});
        tensor.fill(std::span<std::byte>(generated));
        data = generated;
      }
      sink(data);
      const std::uint64_t padding = align(tensor.bytes) - tensor.bytes;
      sink(std::span<const std::byte>(zeros).first(static_cast<std::size_t>(padding)));
    }
  }

  std::vector<std::byte> to_bytes() const {
    std::vector<std::byte> out;
    out.reserve(static_cast<std::size_t>(file_size()));
    write_to([&out](std::span<const std::byte> part) {
      detail::append_bytes(out, part.data(), part.size());
    });
    return out;
  }

  void write(const std::string& path) const {
    struct Close {
      void operator()(std::FILE* file) const noexcept { std::fclose(file); }
    };
    std::unique_ptr<std::FILE, Close> file(std::fopen(path.c_str(), "wb"));
    if (!file) fail(path, ": cannot create: ", std::strerror(errno));
    write_to([&](std::span<const std::byte> part) {
      if (!part.empty() && std::fwrite(part.data(), 1, part.size(), file.get()) != part.size()) {
        fail(path, ": write failed: ", std::strerror(errno));
      }
    });
    if (std::fclose(file.release()) != 0) fail(path, ": write failed: ", std::strerror(errno));
  }

  // Every key and tensor of `file`, in order. The tensors borrow the file's bytes, so
  // `file` must outlive the writes.
  static GgufWriter copy_of(const GgufFile& file) {
    GgufWriter writer;
    for (const MetadataEntry& entry : file.metadata()) {
      writer.set(entry.key, Value::copy_of(entry.value));
    }
    for (const TensorInfo& info : file.tensors()) {
      writer.add_tensor(std::string(info.name), info.type, Shape(info.shape()), info.span());
    }
    return writer;
  }

 private:
  struct Pending {
    std::string name;
    GgmlType type;
    Shape shape;
    std::size_t bytes;
    std::span<const std::byte> borrowed;
    std::vector<std::byte> owned;
    Filler fill;
  };

  static void check_alignment(const Value& value) {
    std::uint32_t alignment = 0;
    if (value.type() != ValueType::U32 || !value.view().try_as(alignment) ||
        !std::has_single_bit(alignment)) {
      fail("general.alignment must be a u32 power of two");
    }
  }

  std::uint64_t align(std::uint64_t offset) const {
    const std::uint64_t alignment = this->alignment();
    return (offset + alignment - 1) / alignment * alignment;
  }

  std::uint64_t header_size() const {
    std::uint64_t size = detail::kHeaderBytes;
    for (const auto& [key, value] : metadata_) {
      size += kLengthBytes + key.size() + kTypeIdBytes + value.payload().size();
    }
    for (const Pending& tensor : tensors_) {
      size += kLengthBytes + tensor.name.size() + 4 + 8 * tensor.shape.view().size() + 4 + 8;
    }
    return size;
  }

  // Validates a new tensor; it joins the file only through commit().
  static Pending make(std::string name, GgmlType type, const Shape& shape) {
    const auto info = ggml_type_info(static_cast<std::uint32_t>(type));
    if (!info) {
      fail("tensor ", detail::quoted(name), ": unknown ggml type id ",
           static_cast<std::uint32_t>(type));
    }
    constexpr auto kMaxElements =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t elements = 1;
    for (const std::uint64_t dim : shape.view()) {
      if (dim == 0 || dim > kMaxElements / elements) {
        fail("tensor ", detail::quoted(name), ": dimension ", dim, " is zero or overflows");
      }
      elements *= dim;
    }
    if (shape.dims[0] % info->block_values != 0) {
      fail("tensor ", detail::quoted(name), ": row length ", shape.dims[0],
           " is not a multiple of the ", info->name, " block size (", info->block_values, ")");
    }
    const std::uint64_t blocks = elements / info->block_values;
    if (blocks > std::numeric_limits<std::size_t>::max() / info->block_bytes) {
      fail("tensor ", detail::quoted(name), ": byte size overflows");
    }
    return {std::move(name),
            type,
            shape,
            static_cast<std::size_t>(blocks * info->block_bytes),
            {},
            {},
            {}};
  }

  void commit(Pending tensor) {
    if (tensor_index_.count(tensor.name) != 0) {
      fail("tensor ", detail::quoted(tensor.name), " is added twice");
    }
    tensor_index_.emplace(tensor.name, tensors_.size());
    tensors_.push_back(std::move(tensor));
  }

  static void check_data_size(const Pending& tensor, std::size_t given) {
    if (given != tensor.bytes) {
      fail("tensor ", detail::quoted(tensor.name), ": ", given, " bytes of data for a ",
           ggml_type_name(tensor.type), " tensor of ", tensor.bytes, " bytes");
    }
  }

  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, std::size_t> key_index_;
  std::vector<Pending> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace smol::gguf
