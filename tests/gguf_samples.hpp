// Small GGUF files built with the writer, shared by the GGUF tests and the fuzz seeds.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "smol/core/ggml_type.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

namespace smol::gguf::samples {

// Deterministic filler bytes; the reader never looks at tensor data, so any will do.
inline std::vector<std::byte> pattern_bytes(std::size_t count, unsigned seed) {
  std::vector<std::byte> out(count);
  std::uint32_t state = seed * 2654435761u + 1;
  for (std::byte& b : out) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return out;
}

// One key of every value type, nested and empty arrays, and tensors of four types,
// each with a size that is not a multiple of the alignment (so padding shows).
inline GgufWriter small_writer() {
  GgufWriter writer;
  writer.set("general.architecture", "llama");
  writer.set("general.name", "sample");
  writer.set("test.u8", std::uint8_t{200});
  writer.set("test.i8", std::int8_t{-100});
  writer.set("test.u16", std::uint16_t{60000});
  writer.set("test.i16", std::int16_t{-30000});
  writer.set("test.u32", std::uint32_t{4000000000u});
  writer.set("test.i32", std::int32_t{-2000000000});
  writer.set("test.f32", 1.5f);
  writer.set("test.bool", true);
  writer.set("test.u64", std::uint64_t{1} << 40);
  writer.set("test.i64", std::int64_t{-1} << 40);
  writer.set("test.f64", 0.1);
  writer.set("test.strings", Value::strings(std::vector<std::string>{"alpha", "", "gamma"}));
  writer.set("test.i32s", Value::array(std::vector<std::int32_t>{1, -2, 3}));
  writer.set("test.bools", Value::array(std::vector<bool>{true, false, true}));
  writer.set("test.empty", Value::array(std::vector<float>{}));
  writer.set("test.nested", Value::array_of(ValueType::Array,
                                            {Value::array(std::vector<std::uint8_t>{1, 2}),
                                             Value::strings(std::vector<std::string>{"x", "yz"})}));
  writer.set("llama.block_count", std::uint32_t{1});
  writer.add_f32_tensor("norm.weight", {5}, std::vector<float>{1, 2, 3, 4, 5});
  writer.add_f32_tensor("embd.weight", {6, 3}, std::vector<float>(18, 0.25f), GgmlType::F16);
  writer.add_tensor_copy("q.weight", GgmlType::Q4_K, {256, 2}, pattern_bytes(2 * 144, 1));
  writer.add_tensor_copy("v.weight", GgmlType::Q8_0, {32, 1}, pattern_bytes(34, 2));
  return writer;
}

inline std::vector<std::byte> small_file() {
  return small_writer().to_bytes();
}

// Reads everything a parsed file offers, through every accessor and conversion, so
// sanitizers see any read the validation failed to bound. Returns a checksum so the
// work cannot be optimised away.
inline std::uint64_t exercise(const GgufFile& file) {
  std::uint64_t sum = 0;
  const auto visit = [&](const ValueView& value, const auto& self) -> void {
    std::uint64_t u = 0;
    std::int64_t i = 0;
    double d = 0;
    bool b = false;
    std::string_view s;
    if (value.try_as(u)) sum += u;
    if (value.try_as(i)) sum += static_cast<std::uint64_t>(i);
    if (value.try_as(d)) sum += std::isnan(d) ? 1 : 2;
    if (value.try_as(b)) sum += b;
    if (value.try_as(s)) sum += s.size() + (s.empty() ? 0 : static_cast<unsigned char>(s.back()));
    ArrayView array;
    if (value.try_as(array)) {
      std::vector<std::uint32_t> numbers;
      std::vector<std::string_view> strings;
      if (array.to_vector(numbers)) sum += numbers.size();
      if (value.try_as(strings)) sum += strings.size();
      for (const ValueView element : array) self(element, self);
    }
  };
  for (const MetadataEntry& entry : file.metadata()) {
    sum += entry.key.size() + entry.offset;
    if (file.find(entry.key) != &entry) sum += 1000;  // cannot happen: keys are unique
    visit(entry.value, visit);
  }
  for (const TensorInfo& info : file.tensors()) {
    sum += info.elements() + info.rows() + info.row_bytes;
    sum += static_cast<std::uint64_t>(info.data[0]) +
           static_cast<std::uint64_t>(info.data[info.bytes - 1]);
    if (file.find_tensor(info.name) != &info) sum += 1000;
  }
  return sum;
}

}  // namespace smol::gguf::samples
