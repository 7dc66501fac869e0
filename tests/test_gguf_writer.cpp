// The GGUF writer: byte-identical round trips, every value type, float storage, layout.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "gguf_samples.hpp"
#include "scratch_dir.hpp"
#include "smol/core/half.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_gguf_writer {

using smol::GgmlType;
using smol::gguf::GgufFile;
using smol::gguf::GgufWriter;
using smol::gguf::Value;
using smol::gguf::ValueType;

namespace {

const std::string kQ4File = SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf";
const std::string kF32File = SMOL_TEST_DATA_DIR "/tiny-smollm3-a.f32.gguf";

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// A scratch file that removes itself.
struct TempPath {
  std::filesystem::path path;
  explicit TempPath(const std::string& stem) : path(smol::test::scratch_dir() / (stem + ".gguf")) {}
  ~TempPath() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

std::string error_of(const auto& action) {
  try {
    action();
  } catch (const smol::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("copying a fixture through the writer is byte-identical") {
  for (const std::string& path : {kQ4File, kF32File}) {
    CAPTURE(path);
    const GgufFile file = GgufFile::open(path);
    const GgufWriter writer = GgufWriter::copy_of(file);
    CHECK(writer.key_count() == file.metadata().size());
    CHECK(writer.tensor_count() == file.tensors().size());
    CHECK(writer.file_size() == file.bytes().size());
    CHECK(writer.data_offset() == file.data_offset());
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
      CHECK(writer.tensor_offset(i) == file.tensors()[i].offset);
    }
    CHECK(same_bytes(writer.to_bytes(), file.bytes()));

    // The streaming path to a file gives the same bytes.
    const TempPath out("smol-gguf-roundtrip");
    writer.write(out.path.string());
    const GgufFile written = GgufFile::open(out.path.string());
    CHECK(same_bytes(written.bytes(), file.bytes()));
  }
}

TEST_CASE("write -> read -> write is byte-identical for every value type") {
  const std::vector<std::byte> first = smol::gguf::samples::small_file();
  const GgufFile file = GgufFile::from_bytes(first, "first");
  const std::vector<std::byte> second = GgufWriter::copy_of(file).to_bytes();
  CHECK(same_bytes(first, second));

  const ValueType expected[] = {
      ValueType::String, ValueType::String, ValueType::U8,    ValueType::I8,    ValueType::U16,
      ValueType::I16,    ValueType::U32,    ValueType::I32,   ValueType::F32,   ValueType::Bool,
      ValueType::U64,    ValueType::I64,    ValueType::F64,   ValueType::Array, ValueType::Array,
      ValueType::Array,  ValueType::Array,  ValueType::Array, ValueType::U32};
  REQUIRE(file.metadata().size() == std::size(expected));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    CAPTURE(file.metadata()[i].key);
    CHECK(file.metadata()[i].value.type() == expected[i]);
  }
  CHECK(file.get<smol::gguf::ArrayView>("test.bools").element_type() == ValueType::Bool);
  CHECK(file.get<smol::gguf::ArrayView>("test.empty").element_type() == ValueType::F32);
}

TEST_CASE("C++ types map to the GGUF types they name") {
  CHECK(Value(std::uint8_t{1}).type() == ValueType::U8);
  CHECK(Value(std::int8_t{1}).type() == ValueType::I8);
  CHECK(Value(std::uint16_t{1}).type() == ValueType::U16);
  CHECK(Value(std::int16_t{1}).type() == ValueType::I16);
  CHECK(Value(1u).type() == ValueType::U32);
  CHECK(Value(1).type() == ValueType::I32);
  CHECK(Value(1.0f).type() == ValueType::F32);
  CHECK(Value(true).type() == ValueType::Bool);
  CHECK(Value(std::uint64_t{1}).type() == ValueType::U64);
  CHECK(Value(std::int64_t{1}).type() == ValueType::I64);
  CHECK(Value(1.0).type() == ValueType::F64);
  CHECK(Value("text").type() == ValueType::String);
  CHECK(Value(std::string("text")).view().string() == "text");
  CHECK(Value(-7).view().as<int>() == -7);
  CHECK_THROWS_AS(Value::array_of(ValueType::U8, {Value(1)}), smol::Error);
  // Narrowing f64 to f32 only when exact, never past the f32 range.
  CHECK(Value(0.5).view().as<float>() == 0.5f);
  CHECK(std::isinf(Value(std::numeric_limits<double>::infinity()).view().as<float>()));
  CHECK_FALSE(Value(1e300).view().holds<float>());
  CHECK_FALSE(Value(0.1).view().holds<float>());
  // A view made by hand that is too short is refused, not read past.
  const std::byte two_bytes[2] = {};
  CHECK_FALSE(smol::gguf::ValueView(ValueType::U32, two_bytes, 0).holds<std::uint32_t>());
  std::byte short_string[12] = {std::byte{100}};
  CHECK_FALSE(smol::gguf::ValueView(ValueType::String, short_string, 0).holds<std::string_view>());
}

TEST_CASE("nested arrays round-trip up to the depth limit") {
  Value nested = Value::array(std::vector<std::int16_t>{-1, 2});
  for (int depth = 1; depth < smol::gguf::kMaxArrayDepth; ++depth) {
    nested = Value::array_of(ValueType::Array, {nested, nested});
  }
  GgufWriter writer;
  writer.set("deep", nested);
  writer.set("empty_of_arrays", Value::array_of(ValueType::Array, std::vector<Value>{}));
  const auto bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_bytes(bytes);
  CHECK(Value::copy_of(file.find("deep")->value) == nested);
  smol::gguf::ArrayView level = file.get<smol::gguf::ArrayView>("deep");
  for (int depth = 1; depth < smol::gguf::kMaxArrayDepth; ++depth) {
    REQUIRE(level.element_type() == ValueType::Array);
    CHECK(level.size() == 2);
    level = (*level.begin()).array();
  }
  CHECK(level.to_vector<int>() == std::vector<int>{-1, 2});
  CHECK(file.get<smol::gguf::ArrayView>("empty_of_arrays").empty());
  CHECK(same_bytes(GgufWriter::copy_of(file).to_bytes(), bytes));
}

TEST_CASE("float tensors are stored as F32, F16 or BF16 with round to nearest even") {
  const std::vector<float> values = {
      0.0f,     -0.0f, 1.0f / 3.0f, 65504.0f,
      70000.0f, 1e-8f, -2.5f,       std::numeric_limits<float>::infinity()};
  GgufWriter writer;
  writer.add_f32_tensor("f32", {8}, values);
  writer.add_f32_tensor("f16", {4, 2}, values, GgmlType::F16);
  writer.add_f32_tensor("bf16", {2, 2, 2}, values, GgmlType::BF16);
  const GgufFile file = GgufFile::from_bytes(writer.to_bytes());
  const auto& f32 = file.tensor("f32");
  const auto& f16 = file.tensor("f16");
  const auto& bf16 = file.tensor("bf16");
  CHECK(f32.bytes == 32);
  CHECK(f16.bytes == 16);
  CHECK(bf16.n_dims == 3);
  for (std::size_t i = 0; i < values.size(); ++i) {
    float stored_f32;
    std::uint16_t stored_f16, stored_bf16;
    std::memcpy(&stored_f32, f32.data + 4 * i, 4);
    std::memcpy(&stored_f16, f16.data + 2 * i, 2);
    std::memcpy(&stored_bf16, bf16.data + 2 * i, 2);
    CHECK(std::memcmp(&stored_f32, &values[i], 4) == 0);
    CHECK(stored_f16 == smol::f32_to_f16(values[i]));
    CHECK(stored_bf16 == smol::f32_to_bf16(values[i]));
  }
  CHECK(smol::f16_to_f32(smol::f32_to_f16(1.0f / 3.0f)) ==
        doctest::Approx(1.0 / 3.0).epsilon(1e-3));
  CHECK(std::isinf(smol::f16_to_f32(smol::f32_to_f16(70000.0f))));
  CHECK_THROWS_AS(writer.add_f32_tensor("q", {256}, std::vector<float>(256), GgmlType::Q4_K),
                  smol::Error);
  CHECK_THROWS_AS(writer.add_f32_tensor("short", {4}, std::vector<float>(3)), smol::Error);
}

TEST_CASE("the layout pads the header and every tensor with zeros to the alignment") {
  for (const std::uint32_t alignment : {0u, 64u, 1u}) {
    CAPTURE(alignment);
    GgufWriter writer;
    if (alignment != 0) writer.set("general.alignment", alignment);
    writer.set("k", "v");
    writer.add_tensor_copy("a", GgmlType::F32, {3}, smol::gguf::samples::pattern_bytes(12, 1));
    writer.add_tensor_copy("b", GgmlType::I8, {5}, smol::gguf::samples::pattern_bytes(5, 2));
    const std::uint64_t align = alignment == 0 ? 32 : alignment;
    CHECK(writer.alignment() == align);
    const auto bytes = writer.to_bytes();
    CHECK(bytes.size() == writer.file_size());
    CHECK(writer.header_bytes().size() == writer.data_offset());
    const GgufFile file = GgufFile::from_bytes(bytes);
    CHECK(file.alignment() == align);
    CHECK(file.has("general.alignment") == (alignment != 0));
    CHECK(file.data_offset() == writer.data_offset());
    CHECK(file.data_offset() % align == 0);
    const auto& a = file.tensor("a");
    const auto& b = file.tensor("b");
    CHECK(a.offset == 0);
    CHECK(b.offset == (12 + align - 1) / align * align);
    CHECK(bytes.size() == file.data_offset() + b.offset + (5 + align - 1) / align * align);
    for (std::size_t i = a.file_offset + a.bytes; i < b.file_offset; ++i) {
      CHECK(bytes[i] == std::byte{0});
    }
    for (std::size_t i = b.file_offset + b.bytes; i < bytes.size(); ++i) {
      CHECK(bytes[i] == std::byte{0});
    }
  }
}

TEST_CASE("generated and borrowed tensors stream to a file") {
  const auto borrowed = smol::gguf::samples::pattern_bytes(4 * 144, 3);
  int calls = 0;
  GgufWriter writer;
  writer.set("general.architecture", "llama");
  writer.add_tensor("borrowed", GgmlType::Q4_K, {512, 2}, borrowed);
  writer.add_tensor_generated("generated", GgmlType::F32, {7, 3}, [&](std::span<std::byte> out) {
    ++calls;
    CHECK(out.size() == 84);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i);
  });
  const TempPath out("smol-gguf-stream");
  writer.write(out.path.string());
  CHECK(calls == 1);
  const GgufFile file = GgufFile::open(out.path.string());
  CHECK(same_bytes(file.tensor("borrowed").span(), borrowed));
  const auto& generated = file.tensor("generated");
  for (std::size_t i = 0; i < generated.bytes; ++i) {
    CHECK(generated.data[i] == static_cast<std::byte>(i));
  }
  CHECK(std::filesystem::file_size(out.path) == writer.file_size());
}

TEST_CASE("setting a key again replaces it in place") {
  GgufWriter writer;
  writer.set("a", 1);
  writer.set("b", 2);
  writer.set("a", "three");
  const GgufFile file = GgufFile::from_bytes(writer.to_bytes());
  REQUIRE(file.metadata().size() == 2);
  CHECK(file.metadata()[0].key == "a");
  CHECK(file.get<std::string_view>("a") == "three");
  CHECK(writer.find("b")->view().as<int>() == 2);
  CHECK(writer.find("c") == nullptr);
}

TEST_CASE("the writer refuses what the reader would reject") {
  GgufWriter writer;
  const auto bytes = smol::gguf::samples::pattern_bytes(144, 1);
  writer.add_tensor("t", GgmlType::Q4_K, {256}, bytes);
  CHECK(error_of([&] {
          writer.add_tensor("t", GgmlType::Q4_K, {256}, bytes);
        }).find("'t' is added twice") != std::string::npos);
  CHECK(error_of([&] {
          writer.add_tensor("u", GgmlType::Q4_K, {256, 2}, bytes);
        }).find("144 bytes of data for a Q4_K tensor of 288 bytes") != std::string::npos);
  CHECK(error_of([&] {
          writer.add_tensor("u", GgmlType::Q4_K, {128, 2}, bytes);
        }).find("not a multiple of the Q4_K block size") != std::string::npos);
  CHECK_THROWS_AS(writer.add_tensor("u", GgmlType::F32, {0}, {}), smol::Error);
  CHECK_THROWS_AS(writer.add_tensor("u", GgmlType::F32, {1, 1, 1, 1, 1}, {}), smol::Error);
  CHECK_THROWS_AS(writer.add_tensor("u", GgmlType::F32, {std::uint64_t{1} << 40, 1u << 30}, {}),
                  smol::Error);
  CHECK_THROWS_AS(writer.add_tensor("u", static_cast<GgmlType>(99), {1}, {}), smol::Error);
  CHECK_THROWS_AS(writer.set("general.alignment", 0u), smol::Error);
  CHECK_THROWS_AS(writer.set("general.alignment", 48u), smol::Error);
  CHECK_THROWS_AS(writer.set("general.alignment", 64), smol::Error);  // i32, not u32
  CHECK(writer.tensor_count() == 1);                                  // nothing half-added
  CHECK(writer.alignment() == 32);
  CHECK_THROWS_AS(writer.write("/nonexistent/dir/x.gguf"), smol::Error);
}

}  // namespace test_gguf_writer
