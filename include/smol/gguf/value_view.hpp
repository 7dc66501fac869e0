// Views of GGUF metadata values that stay inside the file's bytes.
//
// A ValueView is what the reader hands out for every key: the value's type and its
// encoded bytes (validated when the file was opened). Strings come back as string_views
// into the mapping, numbers are copied out with memcpy (file data is unaligned), and
// typed access converts between integer types only when the value fits.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/detail/bytes.hpp"
#include "smol/gguf/value_type.hpp"

namespace smol::gguf {

class ArrayView;

class ValueView {
 public:
  ValueView() = default;
  // `payload` is the encoded value without its type id; `offset` is where it starts in
  // the file (for messages).
  ValueView(ValueType type, std::span<const std::byte> payload, std::uint64_t offset) noexcept
      : type_(type), payload_(payload), offset_(offset) {}

  ValueType type() const noexcept { return type_; }
  std::span<const std::byte> payload() const noexcept { return payload_; }
  std::uint64_t offset() const noexcept { return offset_; }

  // The value as T, or smol::Error saying why not (without file context; GgufFile::get
  // adds the key and offset). T may be bool, any integer type (lossless only), float,
  // double, std::string_view, std::string, ArrayView, or a std::vector of any of those.
  template <class T>
  T as() const;

  // Whether as<T>() would succeed.
  template <class T>
  bool holds() const noexcept;

  // as<T>() without the exception: false (and the reason in *why, if given) when the
  // value cannot be represented as T.
  template <class T>
  bool try_as(T& out, std::string* why = nullptr) const;

  std::string_view string() const { return as<std::string_view>(); }
  ArrayView array() const;

 private:
  ValueType type_ = ValueType::U8;
  std::span<const std::byte> payload_;
  std::uint64_t offset_ = 0;
};

namespace detail {

// Encoded size of the value at the front of `bytes`, or 0 when it does not fit there.
// The reader has validated everything it hands out; this re-check only keeps a view
// that was built by hand from reading out of bounds.
inline std::size_t encoded_value_bytes(ValueType type, std::span<const std::byte> bytes,
                                       int depth = 0) noexcept {
  if (const std::size_t fixed = fixed_value_bytes(type); fixed != 0) {
    return fixed <= bytes.size() ? fixed : 0;
  }
  if (type == ValueType::String) {
    if (bytes.size() < kLengthBytes) return 0;
    const auto length = load<std::uint64_t>(bytes.data());
    return length <= bytes.size() - kLengthBytes ? kLengthBytes + length : 0;
  }
  if (depth >= kMaxArrayDepth || bytes.size() < kTypeIdBytes + kLengthBytes) return 0;
  const auto element_id = load<std::uint32_t>(bytes.data());
  const auto count = load<std::uint64_t>(bytes.data() + kTypeIdBytes);
  if (!is_valid_value_type(element_id)) return 0;
  const auto element_type = static_cast<ValueType>(element_id);
  std::size_t used = kTypeIdBytes + kLengthBytes;
  if (const std::size_t fixed = fixed_value_bytes(element_type); fixed != 0) {
    if (count > (bytes.size() - used) / fixed) return 0;
    return used + count * fixed;
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t element = encoded_value_bytes(element_type, bytes.subspan(used), depth + 1);
    if (element == 0) return 0;
    used += element;
  }
  return used;
}

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
constexpr std::string_view target_name() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_integral_v<T>) {
    constexpr std::string_view kSigned[] = {"i8", "i16", "", "i32", "", "", "", "i64"};
    constexpr std::string_view kUnsigned[] = {"u8", "u16", "", "u32", "", "", "", "u64"};
    return std::is_signed_v<T> ? kSigned[sizeof(T) - 1] : kUnsigned[sizeof(T) - 1];
  } else if constexpr (std::is_same_v<T, float>) {
    return "f32";
  } else if constexpr (std::is_same_v<T, double>) {
    return "f64";
  } else if constexpr (std::is_same_v<T, std::string_view> || std::is_same_v<T, std::string>) {
    return "string";
  } else {
    return "array";
  }
}

// The value type whose encoding is exactly T's bytes, for copying whole arrays at once.
template <class T>
constexpr bool same_encoding(ValueType type) {
  if constexpr (std::is_same_v<T, bool>) {
    return false;  // a stored bool byte may be any value the validator allowed; decode each
  } else if constexpr (std::is_integral_v<T>) {
    return is_integer_value_type(type) && fixed_value_bytes(type) == sizeof(T) &&
           is_signed_value_type(type) == std::is_signed_v<T>;
  } else if constexpr (std::is_same_v<T, float>) {
    return type == ValueType::F32;
  } else if constexpr (std::is_same_v<T, double>) {
    return type == ValueType::F64;
  } else {
    return false;
  }
}

// An integer value of `type` (at `data`) as the integer type T, when it fits; else false
// and the reason in *why (if given).
template <class T>
bool integer_value_as(ValueType type, const std::byte* data, T& out, std::string* why) {
  const auto fits = [&](auto value) {
    if (!std::in_range<T>(value)) {
      if (why != nullptr) {
        *why = cat("value ", +value, " (", value_type_name(type), ") does not fit in ",
                   target_name<T>());
      }
      return false;
    }
    out = static_cast<T>(value);
    return true;
  };
  switch (type) {
    case ValueType::U8:
      return fits(load<std::uint8_t>(data));
    case ValueType::I8:
      return fits(load<std::int8_t>(data));
    case ValueType::U16:
      return fits(load<std::uint16_t>(data));
    case ValueType::I16:
      return fits(load<std::int16_t>(data));
    case ValueType::U32:
      return fits(load<std::uint32_t>(data));
    case ValueType::I32:
      return fits(load<std::int32_t>(data));
    case ValueType::U64:
      return fits(load<std::uint64_t>(data));
    default:
      return fits(load<std::int64_t>(data));
  }
}

// An f32 or f64 value of `type` (at `data`) as the floating-point type T; else false and
// the reason in *why (if given).
template <class T>
bool float_value_as(ValueType type, const std::byte* data, T& out, std::string* why) {
  if (type == ValueType::F32) {
    out = static_cast<T>(load<float>(data));
    return true;
  }
  const double value = load<double>(data);
  if constexpr (sizeof(T) < sizeof(double)) {
    // Narrowing is allowed only when no information is lost.
    const bool in_range = std::isinf(value) || std::fabs(value) <= std::numeric_limits<T>::max();
    if (!std::isnan(value) && (!in_range || static_cast<double>(static_cast<T>(value)) != value)) {
      if (why != nullptr) *why = cat("f64 value ", value, " is not exactly representable as f32");
      return false;
    }
  }
  out = static_cast<T>(value);
  return true;
}

}  // namespace detail

// The elements of an array value, iterated in order as ValueViews.
class ArrayView {
 public:
  ArrayView() = default;
  ArrayView(ValueType element_type, std::uint64_t count, std::span<const std::byte> elements,
            std::uint64_t offset) noexcept
      : element_type_(element_type), count_(count), elements_(elements), offset_(offset) {}

  ValueType element_type() const noexcept { return element_type_; }
  std::uint64_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  // The encoded elements, back to back, and where they start in the file.
  std::span<const std::byte> element_bytes() const noexcept { return elements_; }
  std::uint64_t offset() const noexcept { return offset_; }

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = ValueView;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = ValueView;

    iterator() = default;
    iterator(const ArrayView* array, std::uint64_t index, std::size_t position)
        : array_(array), index_(index), position_(position) {}

    ValueView operator*() const {
      const auto rest = array_->elements_.subspan(position_);
      const std::size_t size = detail::encoded_value_bytes(array_->element_type_, rest);
      if (size == 0) fail("array element ", index_, " at offset ", where(), " is malformed");
      return ValueView(array_->element_type_, rest.first(size), where());
    }
    iterator& operator++() {
      position_ += (**this).payload().size();
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const iterator& other) const noexcept { return index_ == other.index_; }

   private:
    std::uint64_t where() const noexcept { return array_->offset_ + position_; }
    const ArrayView* array_ = nullptr;
    std::uint64_t index_ = 0;
    std::size_t position_ = 0;
  };

  iterator begin() const { return iterator(this, 0, 0); }
  iterator end() const { return iterator(this, count_, elements_.size()); }

  // The elements converted one by one with ValueView::as (a single memcpy when T is
  // exactly the stored type).
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  bool to_vector(std::vector<T>& out, std::string* why = nullptr) const;

 private:
  ValueType element_type_ = ValueType::U8;
  std::uint64_t count_ = 0;
  std::span<const std::byte> elements_;
  std::uint64_t offset_ = 0;
};

inline ArrayView ValueView::array() const {
  return as<ArrayView>();
}

template <class T>
T ValueView::as() const {
  T out{};
  std::string why;
  if (!try_as(out, &why)) throw Error(why);
  return out;
}

template <class T>
bool ValueView::holds() const noexcept {
  T out{};
  try {
    return try_as(out, nullptr);
  } catch (...) {  // vector growth can throw bad_alloc; that is not "holds"
    return false;
  }
}

template <class T>
bool ValueView::try_as(T& out, std::string* why) const {
  const auto refuse = [&](const auto&... parts) {
    if (why != nullptr) *why = cat(parts...);
    return false;
  };
  const auto wrong_type = [&] {
    return refuse("is ", value_type_name(type_), ", not ", detail::target_name<T>());
  };
  // Views from a GgufFile are validated; this only stops a view made by hand from
  // reading past its payload (array elements are bounds-checked as they are iterated).
  if (payload_.size() < min_value_bytes(type_) ||
      (type_ == ValueType::String &&
       detail::load<std::uint64_t>(payload_.data()) > payload_.size() - kLengthBytes)) {
    return refuse("the ", value_type_name(type_), " value is truncated");
  }
  const std::byte* data = payload_.data();
  if constexpr (std::is_same_v<T, bool>) {
    if (type_ != ValueType::Bool) return wrong_type();
    out = detail::load<std::uint8_t>(data) != 0;
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    if (!is_integer_value_type(type_)) return wrong_type();
    return detail::integer_value_as(type_, data, out, why);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (type_ != ValueType::F32 && type_ != ValueType::F64) return wrong_type();
    return detail::float_value_as(type_, data, out, why);
  } else if constexpr (std::is_same_v<T, std::string_view> || std::is_same_v<T, std::string>) {
    if (type_ != ValueType::String) return wrong_type();
    const auto length = detail::load<std::uint64_t>(data);
    out = T(reinterpret_cast<const char*>(data + kLengthBytes), static_cast<std::size_t>(length));
    return true;
  } else if constexpr (std::is_same_v<T, ArrayView>) {
    if (type_ != ValueType::Array) return wrong_type();
    const auto element_type = static_cast<ValueType>(detail::load<std::uint32_t>(data));
    const auto count = detail::load<std::uint64_t>(data + kTypeIdBytes);
    out = ArrayView(element_type, count, payload_.subspan(kTypeIdBytes + kLengthBytes),
                    offset_ + kTypeIdBytes + kLengthBytes);
    return true;
  } else if constexpr (detail::is_vector<T>::value) {
    if (type_ != ValueType::Array) return wrong_type();
    return as<ArrayView>().to_vector(out, why);
  } else {
    static_assert(sizeof(T) == 0, "unsupported target type for a GGUF value");
  }
}

template <class T>
std::vector<T> ArrayView::to_vector() const {
  std::vector<T> out;
  std::string why;
  if (!to_vector(out, &why)) throw Error(why);
  return out;
}

template <class T>
bool ArrayView::to_vector(std::vector<T>& out, std::string* why) const {
  out.clear();
  if constexpr (std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool>) {
    if (detail::same_encoding<T>(element_type_)) {
      out.resize(static_cast<std::size_t>(count_));
      if (!out.empty()) std::memcpy(out.data(), elements_.data(), out.size() * sizeof(T));
      return true;
    }
  }
  // Counts are bounded by the file size; the cap only matters for a view built by hand.
  out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(count_, elements_.size())));
  std::uint64_t index = 0;
  for (const ValueView element : *this) {
    T converted{};
    std::string element_why;
    if (!element.try_as(converted, why != nullptr ? &element_why : nullptr)) {
      if (why != nullptr) *why = cat("element ", index, ": ", element_why);
      return false;
    }
    out.push_back(std::move(converted));
    ++index;
  }
  return true;
}

// One key/value pair of the metadata, as it sits in the file.
struct MetadataEntry {
  std::string_view key;
  ValueView value;
  std::uint64_t offset = 0;  // file offset of the entry (its key length field)
};

}  // namespace smol::gguf
