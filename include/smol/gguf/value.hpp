// Value: an owned GGUF metadata value, kept in its file encoding, for the writer.
//
// Storing the encoding instead of a tree of variants makes every value type (nested
// arrays included) one representation, and makes copying a value from a GgufFile exact
// to the byte: its payload is taken as it is.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/detail/bytes.hpp"
#include "smol/gguf/value_type.hpp"
#include "smol/gguf/value_view.hpp"

namespace smol::gguf {

template <class T>
concept Arithmetic = std::is_arithmetic_v<T>;
template <class T>
concept TextLike = std::convertible_to<const T&, std::string_view>;

class Value {
 public:
  // Scalars take the GGUF type of their C++ type: uint32_t is u32, int is i32, float
  // is f32, bool is bool. Text of any kind is a string.
  template <Arithmetic T>
  Value(T scalar) : type_(type_of<T>()) {  // implicit, so set("key", 8u) reads naturally
    append_scalar(scalar);
  }
  Value(std::string_view text) : type_(ValueType::String) { append_string(text); }
  Value(const std::string& text) : Value(std::string_view(text)) {}
  Value(const char* text) : Value(std::string_view(text)) {}

  // Arrays of numbers or bools, of strings, or of Values (which must all have the type
  // given; use ValueType::Array for an array of arrays).
  template <Arithmetic T>
  static Value array(std::span<const T> elements) {
    Value out(ValueType::Array);
    out.append_array_header(type_of<T>(), elements.size());
    for (const T element : elements) out.append_scalar(element);
    return out;
  }
  template <Arithmetic T>
  static Value array(const std::vector<T>& elements) {
    if constexpr (std::is_same_v<T, bool>) {  // vector<bool> has no span
      Value out(ValueType::Array);
      out.append_array_header(ValueType::Bool, elements.size());
      for (const bool element : elements) out.append_scalar(element);
      return out;
    } else {
      return array(std::span<const T>(elements));
    }
  }
  template <TextLike Text>
  static Value strings(std::span<const Text> elements) {
    Value out(ValueType::Array);
    out.append_array_header(ValueType::String, elements.size());
    for (const Text& element : elements) out.append_string(element);
    return out;
  }
  template <TextLike Text>
  static Value strings(const std::vector<Text>& elements) {
    return strings(std::span<const Text>(elements));
  }
  static Value array_of(ValueType element_type, std::span<const Value> elements) {
    Value out(ValueType::Array);
    out.append_array_header(element_type, elements.size());
    for (const Value& element : elements) {
      if (element.type_ != element_type) {
        fail("array element of type ", value_type_name(element.type_), " in an array of ",
             value_type_name(element_type));
      }
      detail::append_bytes(out.payload_, element.payload_.data(), element.payload_.size());
    }
    return out;
  }
  static Value array_of(ValueType element_type, const std::vector<Value>& elements) {
    return array_of(element_type, std::span<const Value>(elements));
  }

  // An exact copy of a value read from a file.
  static Value copy_of(const ValueView& view) {
    Value out(view.type());
    out.payload_.assign(view.payload().begin(), view.payload().end());
    return out;
  }

  ValueType type() const noexcept { return type_; }
  // The encoding as it goes into the file, without the type id.
  std::span<const std::byte> payload() const noexcept { return payload_; }
  // A view for reading the value back with the same conversions as the reader.
  ValueView view() const noexcept { return ValueView(type_, payload_, 0); }

  friend bool operator==(const Value& a, const Value& b) {
    return a.type_ == b.type_ && a.payload_ == b.payload_;
  }

 private:
  explicit Value(ValueType type) : type_(type) {}

  template <class T>
  static constexpr ValueType type_of() {
    if constexpr (std::is_same_v<T, bool>) {
      return ValueType::Bool;
    } else if constexpr (std::is_floating_point_v<T>) {
      static_assert(sizeof(T) == 4 || sizeof(T) == 8, "GGUF has f32 and f64 only");
      return sizeof(T) == 4 ? ValueType::F32 : ValueType::F64;
    } else {
      constexpr ValueType kSigned[] = {ValueType::I8, ValueType::I16, ValueType::I32,
                                       ValueType::I64};
      constexpr ValueType kUnsigned[] = {ValueType::U8, ValueType::U16, ValueType::U32,
                                         ValueType::U64};
      constexpr int kIndex = std::bit_width(sizeof(T)) - 1;  // 1,2,4,8 bytes -> 0..3
      return std::is_signed_v<T> ? kSigned[kIndex] : kUnsigned[kIndex];
    }
  }

  template <class T>
  void append_scalar(T scalar) {
    if constexpr (std::is_same_v<T, bool>) {
      payload_.push_back(static_cast<std::byte>(scalar ? 1 : 0));
    } else {
      const std::size_t at = payload_.size();
      payload_.resize(at + sizeof(T));
      detail::store(payload_.data() + at, scalar);
    }
  }

  void append_string(std::string_view text) {
    append_scalar(static_cast<std::uint64_t>(text.size()));
    detail::append_bytes(payload_, text.data(), text.size());
  }

  void append_array_header(ValueType element_type, std::size_t count) {
    append_scalar(static_cast<std::uint32_t>(element_type));
    append_scalar(static_cast<std::uint64_t>(count));
  }

  ValueType type_;
  std::vector<std::byte> payload_;
};

}  // namespace smol::gguf
