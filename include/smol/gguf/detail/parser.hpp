// The validating GGUF parser: header, metadata and tensor-info table, never tensor data.
//
// Every count, length and offset is checked against the bytes that are actually there
// before it is used, so a hostile or truncated file ends in a smol::Error that says
// what is wrong and at which file offset, never in an out-of-bounds read. The work is
// linear in the size of the header: a 2 GB model opens in milliseconds.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/gguf/detail/bytes.hpp"
#include "smol/gguf/tensor_info.hpp"
#include "smol/gguf/value_type.hpp"
#include "smol/gguf/value_view.hpp"

namespace smol::gguf::detail {

inline constexpr std::uint64_t kDefaultAlignment = 32;
inline constexpr std::string_view kAlignmentKey = "general.alignment";
inline constexpr std::size_t kMagicBytes = 4;
inline constexpr std::size_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, two counts
// The smallest a record can be: a one-byte key with a u8 value, and a tensor info with
// an empty name and one dimension. They bound the counts before anything is reserved.
inline constexpr std::uint64_t kMinMetadataEntryBytes = kLengthBytes + 1 + kTypeIdBytes + 1;
inline constexpr std::uint64_t kMinTensorInfoBytes = kLengthBytes + 4 + 8 + 4 + 8;
// Reserving for a count a file claims is fine only up to a point: beyond it the
// containers grow as records actually parse.
inline constexpr std::uint64_t kMaxReserve = 1u << 16;

struct ParsedGguf {
  std::uint32_t version = 0;
  std::uint64_t alignment = kDefaultAlignment;
  std::uint64_t data_offset = 0;
  std::vector<MetadataEntry> metadata;
  std::unordered_map<std::string_view, std::size_t> key_index;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string_view, std::size_t> tensor_index;
};

class Parser {
 public:
  Parser(std::span<const std::byte> bytes, std::string_view file_name)
      : bytes_(bytes), file_name_(file_name) {}

  ParsedGguf parse() {
    ParsedGguf out;
    const auto [tensor_count, key_count] = parse_header(out);
    parse_metadata(out, key_count);
    out.alignment = resolve_alignment(out);
    parse_tensor_infos(out, tensor_count);
    out.data_offset = data_offset(out.alignment);
    place_tensors(out);
    check_overlaps(out);
    return out;
  }

 private:
  enum class Section { Header, Metadata, TensorInfo };

  struct Counts {
    std::uint64_t tensors;
    std::uint64_t keys;
  };

  // --- errors -----------------------------------------------------------------

  std::string where() const {
    switch (section_) {
      case Section::Header:
        return "header";
      case Section::Metadata:
        if (!item_) return cat("metadata entry #", index_, " (at offset ", item_offset_, ")");
        return cat("metadata key ", quoted(*item_), " (entry at offset ", item_offset_, ")");
      case Section::TensorInfo:
        if (!item_) return cat("tensor info #", index_, " (at offset ", item_offset_, ")");
        return cat("tensor ", quoted(*item_), " (tensor info at offset ", item_offset_, ")");
    }
    return "?";
  }

  template <class... Parts>
  [[noreturn]] void fail_here(const Parts&... parts) const {
    fail(file_name_, ": ", where(), ": ", parts...);
  }

  void enter(Section section, std::uint64_t index) {
    section_ = section;
    index_ = index;
    item_.reset();
    item_offset_ = position_;
  }

  // --- bounded reads ----------------------------------------------------------

  std::uint64_t remaining() const noexcept { return bytes_.size() - position_; }

  const std::byte* take(std::uint64_t count, std::string_view what) {
    if (count > remaining()) {
      fail_here(what, " (", count, " bytes at offset ", position_,
                ") runs past the end of the file (", bytes_.size(), " bytes)");
    }
    const std::byte* at = bytes_.data() + position_;
    position_ += static_cast<std::size_t>(count);
    return at;
  }

  template <class T>
  T read(std::string_view what) {
    return load<T>(take(sizeof(T), what));
  }

  std::string_view read_string(std::string_view what) {
    const std::uint64_t length_offset = position_;
    const auto length = read<std::uint64_t>(what);
    if (length > remaining()) {
      fail_here(what, " length ", length, " at offset ", length_offset,
                " runs past the end of the file (", bytes_.size(), " bytes)");
    }
    return {reinterpret_cast<const char*>(take(length, what)), static_cast<std::size_t>(length)};
  }

  // --- metadata ---------------------------------------------------------------

  Counts parse_header(ParsedGguf& out) {
    enter(Section::Header, 0);
    const std::byte* magic = take(kMagicBytes, "magic");
    if (std::string_view(reinterpret_cast<const char*>(magic), kMagicBytes) != "GGUF") {
      fail_here("not a GGUF file: the magic at offset 0 is ",
                quoted({reinterpret_cast<const char*>(magic), kMagicBytes}), ", not 'GGUF'");
    }
    const std::uint64_t version_offset = position_;
    out.version = read<std::uint32_t>("version");
    if (out.version == 2 || out.version == 3) {
      // supported; v2 and v3 share the layout (v1 had 32-bit counts)
    } else if (out.version >= 0x10000 && swap_bytes(out.version) <= 3) {
      fail_here("big-endian GGUF files are not supported (the version at offset ", version_offset,
                " reads ", swap_bytes(out.version), " byte-swapped)");
    } else if (out.version == 1) {
      fail_here("GGUF version 1 (at offset ", version_offset,
                ") is not supported; only versions 2 and 3 are");
    } else {
      fail_here("unsupported GGUF version ", out.version, " at offset ", version_offset,
                "; only versions 2 and 3 are supported");
    }
    const std::uint64_t tensor_count_offset = position_;
    const auto tensor_count = read<std::uint64_t>("tensor count");
    const std::uint64_t key_count_offset = position_;
    const auto key_count = read<std::uint64_t>("metadata key count");
    if (key_count > remaining() / kMinMetadataEntryBytes) {
      fail_here("metadata key count ", key_count, " at offset ", key_count_offset,
                " cannot fit in a file of ", bytes_.size(), " bytes");
    }
    if (tensor_count > (remaining() - key_count * kMinMetadataEntryBytes) / kMinTensorInfoBytes) {
      fail_here("tensor count ", tensor_count, " at offset ", tensor_count_offset,
                " cannot fit in a file of ", bytes_.size(), " bytes");
    }
    return {tensor_count, key_count};
  }

  void parse_metadata(ParsedGguf& out, std::uint64_t key_count) {
    out.metadata.reserve(static_cast<std::size_t>(std::min(key_count, kMaxReserve)));
    out.key_index.reserve(static_cast<std::size_t>(std::min(key_count, kMaxReserve)));
    for (std::uint64_t i = 0; i < key_count; ++i) {
      enter(Section::Metadata, i);
      const std::uint64_t entry_offset = position_;
      const std::string_view key = read_string("key");
      item_ = key;
      const auto [existing, inserted] = out.key_index.emplace(key, out.metadata.size());
      if (!inserted) {
        fail_here("duplicate key; first defined by the entry at offset ",
                  out.metadata[existing->second].offset);
      }
      const ValueView value = read_value(read_value_type("value type"), 0);
      out.metadata.push_back({key, value, entry_offset});
    }
  }

  ValueType read_value_type(std::string_view what) {
    const std::uint64_t at = position_;
    const auto id = read<std::uint32_t>(what);
    if (!is_valid_value_type(id)) fail_here(what, " id ", id, " at offset ", at, " is unknown");
    return static_cast<ValueType>(id);
  }

  // Validates one encoded value at the cursor and returns a view of it.
  ValueView read_value(ValueType type, int depth) {
    const std::uint64_t start = position_;
    switch (type) {
      case ValueType::String:
        read_string("string");
        break;
      case ValueType::Array:
        read_array(depth);
        break;
      case ValueType::Bool: {
        const auto flag = read<std::uint8_t>("bool value");
        if (flag > 1) fail_here("bool value ", +flag, " at offset ", start, " is neither 0 nor 1");
        break;
      }
      default:
        take(fixed_value_bytes(type), value_type_name(type));
        break;
    }
    return ValueView(type, bytes_.subspan(start, position_ - start), start);
  }

  void read_array(int depth) {
    const std::uint64_t start = position_;
    if (depth >= kMaxArrayDepth) {
      fail_here("arrays nested more than ", kMaxArrayDepth, " deep at offset ", start);
    }
    const ValueType element_type = read_value_type("array element type");
    const std::uint64_t count_offset = position_;
    const auto count = read<std::uint64_t>("array length");
    if (count > remaining() / min_value_bytes(element_type)) {
      fail_here("array of ", count, " ", value_type_name(element_type), " elements at offset ",
                count_offset, " runs past the end of the file (", bytes_.size(), " bytes)");
    }
    if (const std::size_t fixed = fixed_value_bytes(element_type);
        fixed != 0 && element_type != ValueType::Bool) {
      take(count * fixed, "array elements");
      return;
    }
    for (std::uint64_t i = 0; i < count; ++i) read_value(element_type, depth + 1);
  }

  std::uint64_t resolve_alignment(const ParsedGguf& out) {
    const auto found = out.key_index.find(kAlignmentKey);
    if (found == out.key_index.end()) return kDefaultAlignment;
    const MetadataEntry& entry = out.metadata[found->second];
    section_ = Section::Metadata;
    item_ = entry.key;
    item_offset_ = entry.offset;
    if (entry.value.type() != ValueType::U32) {
      fail_here("the alignment must be a u32, not ", value_type_name(entry.value.type()));
    }
    const auto alignment = entry.value.as<std::uint32_t>();
    if (!std::has_single_bit(alignment)) {
      fail_here("alignment ", alignment, " at offset ", entry.value.offset(),
                " is not a nonzero power of two");
    }
    return alignment;
  }

  // --- tensors ----------------------------------------------------------------

  void parse_tensor_infos(ParsedGguf& out, std::uint64_t tensor_count) {
    out.tensors.reserve(static_cast<std::size_t>(std::min(tensor_count, kMaxReserve)));
    out.tensor_index.reserve(static_cast<std::size_t>(std::min(tensor_count, kMaxReserve)));
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
      enter(Section::TensorInfo, i);
      TensorInfo info;
      info.info_offset = position_;
      info.name = read_string("name");
      item_ = info.name;
      const auto [existing, inserted] = out.tensor_index.emplace(info.name, out.tensors.size());
      if (!inserted) {
        fail_here("duplicate tensor name; first defined by the tensor info at offset ",
                  out.tensors[existing->second].info_offset);
      }
      read_shape(info);
      const std::uint64_t type_offset = position_;
      const auto type_id = read<std::uint32_t>("ggml type");
      const auto type_info = ggml_type_info(type_id);
      if (!type_info) fail_here("unknown ggml type id ", type_id, " at offset ", type_offset);
      info.type = type_info->type;
      check_size(info, *type_info);
      const std::uint64_t offset_offset = position_;
      info.offset = read<std::uint64_t>("data offset");
      if (info.offset % out.alignment != 0) {
        fail_here("data offset ", info.offset, " at offset ", offset_offset,
                  " is not a multiple of the alignment (", out.alignment, ")");
      }
      out.tensors.push_back(info);
    }
  }

  void read_shape(TensorInfo& info) {
    const std::uint64_t n_dims_offset = position_;
    const auto n_dims = read<std::uint32_t>("n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) {
      fail_here("n_dims ", n_dims, " at offset ", n_dims_offset, " is not in 1..", kMaxDims);
    }
    info.n_dims = static_cast<int>(n_dims);
    // ggml counts elements in int64_t.
    constexpr auto kMaxElements =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim_offset = position_;
      const auto dim = read<std::uint64_t>("dimension");
      if (dim == 0 || dim > kMaxElements) {
        fail_here("dimension ", d, " at offset ", dim_offset, " is ", dim,
                  dim == 0 ? "; dimensions must be positive" : ", too large");
      }
      if (dim > kMaxElements / elements) {
        fail_here("the element count overflows at dimension ", d, " (offset ", dim_offset, ")");
      }
      elements *= dim;
      info.dims[d] = dim;
    }
  }

  void check_size(TensorInfo& info, const GgmlTypeInfo& type) {
    const std::uint64_t row_length = info.dims[0];
    if (row_length % type.block_values != 0) {
      fail_here("row length ", row_length, " is not a multiple of the ", type.name, " block size (",
                type.block_values, " values)");
    }
    const std::uint64_t blocks = row_length / type.block_values;
    const std::uint64_t max = std::numeric_limits<std::size_t>::max();
    if (blocks > max / type.block_bytes) fail_here("a row of ", row_length, " values overflows");
    info.row_bytes = static_cast<std::size_t>(blocks * type.block_bytes);
    if (info.rows() > max / info.row_bytes) fail_here("the tensor's byte size overflows");
    info.bytes = static_cast<std::size_t>(info.rows() * info.row_bytes);
  }

  std::uint64_t data_offset(std::uint64_t alignment) const {
    // The counts were bounded by the file size, so this cannot overflow.
    return (position_ + alignment - 1) / alignment * alignment;
  }

  void place_tensors(ParsedGguf& out) {
    const std::uint64_t file_size = bytes_.size();
    for (TensorInfo& info : out.tensors) {
      section_ = Section::TensorInfo;
      item_ = info.name;
      item_offset_ = info.info_offset;
      if (info.offset > file_size) {
        fail_here("data offset ", info.offset, " (from the data section at ", out.data_offset,
                  ") is past the end of the file (", file_size, " bytes)");
      }
      const std::uint64_t start = out.data_offset + info.offset;
      if (start > file_size || info.bytes > file_size - start) {
        if (info.bytes > std::numeric_limits<std::uint64_t>::max() - start) {
          fail_here("data [", start, ", ", start, " + ", info.bytes,
                    ") runs past the end of the file (", file_size, " bytes)");
        }
        fail_here("data [", start, ", ", start + info.bytes, ") runs past the end of the file (",
                  file_size, " bytes)");
      }
      info.file_offset = out.data_offset + info.offset;
      info.data = bytes_.data() + info.file_offset;
    }
  }

  void check_overlaps(const ParsedGguf& out) {
    if (out.tensors.size() < 2) return;
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(out.tensors.size());
    for (const TensorInfo& info : out.tensors) by_offset.push_back(&info);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& before = *by_offset[i - 1];
      const TensorInfo& after = *by_offset[i];
      if (before.file_offset + before.bytes > after.file_offset) {
        section_ = Section::TensorInfo;
        item_ = after.name;
        item_offset_ = after.info_offset;
        fail_here("data [", after.file_offset, ", ", after.file_offset + after.bytes,
                  ") overlaps tensor ", quoted(before.name), " at [", before.file_offset, ", ",
                  before.file_offset + before.bytes, ")");
      }
    }
  }

  std::span<const std::byte> bytes_;
  std::string_view file_name_;
  std::size_t position_ = 0;
  Section section_ = Section::Header;
  std::optional<std::string_view> item_;  // the key or tensor name, once read
  std::uint64_t index_ = 0;
  std::uint64_t item_offset_ = 0;
};

}  // namespace smol::gguf::detail
