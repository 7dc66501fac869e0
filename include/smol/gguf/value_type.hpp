// The GGUF metadata value types and the facts about them the reader and writer share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace smol::gguf {

// Ids as stored in the file; the numbering is part of the format.
enum class ValueType : std::uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

inline constexpr std::uint32_t kValueTypeCount = 13;

// Arrays may hold arrays; a bound keeps a hostile file from recursing the parser
// into a stack overflow. Real files never nest at all.
inline constexpr int kMaxArrayDepth = 8;

// Size of a string's or an array's length field, and of an array's element-type field.
inline constexpr std::size_t kLengthBytes = 8;
inline constexpr std::size_t kTypeIdBytes = 4;

constexpr bool is_valid_value_type(std::uint32_t id) noexcept {
  return id < kValueTypeCount;
}

constexpr std::string_view value_type_name(ValueType type) noexcept {
  switch (type) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::Bool:
      return "bool";
    case ValueType::String:
      return "string";
    case ValueType::Array:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "?";
}

// Bytes of a fixed-size value, or 0 for strings and arrays (whose size is in the data).
constexpr std::size_t fixed_value_bytes(ValueType type) noexcept {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::String:
    case ValueType::Array:
      return 0;
  }
  return 0;
}

// The fewest bytes one element of this type can occupy; bounds array counts by the
// bytes left in the file before anything is allocated or walked.
constexpr std::size_t min_value_bytes(ValueType type) noexcept {
  if (type == ValueType::String) return kLengthBytes;
  if (type == ValueType::Array) return kTypeIdBytes + kLengthBytes;
  return fixed_value_bytes(type);
}

constexpr bool is_integer_value_type(ValueType type) noexcept {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

constexpr bool is_signed_value_type(ValueType type) noexcept {
  return type == ValueType::I8 || type == ValueType::I16 || type == ValueType::I32 ||
         type == ValueType::I64;
}

}  // namespace smol::gguf
