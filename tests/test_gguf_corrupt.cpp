// Broken GGUF files, made here from a small valid one: every one must either parse or
// throw smol::Error (never crash or read out of bounds; this suite runs under ASan and
// UBSan too), and the messages must say what is wrong and where.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_samples.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_gguf_corrupt {

using smol::gguf::GgufFile;
using smol::gguf::GgufWriter;
using smol::gguf::Value;
using smol::gguf::ValueType;
using Bytes = std::vector<std::byte>;

namespace {

// The error message, or nothing when the bytes parse (and then hold up to every accessor).
std::optional<std::string> parse_error(const Bytes& bytes) {
  try {
    const GgufFile file = GgufFile::from_borrowed_bytes(bytes, "broken.gguf");
    smol::gguf::samples::exercise(file);
    // Whatever parses must also survive a copy through the writer.
    const Bytes copy = GgufWriter::copy_of(file).to_bytes();
    const GgufFile reread = GgufFile::from_bytes(copy, "copy.gguf");
    CHECK(reread.metadata().size() == file.metadata().size());
    CHECK(reread.tensors().size() == file.tensors().size());
    return std::nullopt;
  } catch (const smol::Error& e) {
    return std::string(e.what());
  }
}

std::string error_for(const Bytes& bytes) {
  const auto error = parse_error(bytes);
  REQUIRE_MESSAGE(error.has_value(), "expected the broken file to be rejected");
  return *error;
}

template <class T>
Bytes patched(Bytes bytes, std::uint64_t offset, T value) {
  REQUIRE(offset + sizeof value <= bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof value);
  return bytes;
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::string at(std::uint64_t offset) {
  return "at offset " + std::to_string(offset);
}

// Where the fields of the sample file sit, found with the reader itself.
struct SampleLayout {
  Bytes bytes = smol::gguf::samples::small_file();
  GgufFile file = GgufFile::from_bytes(bytes, "sample.gguf");

  const smol::gguf::MetadataEntry& entry(std::string_view key) const {
    const auto* found = file.find(key);
    REQUIRE(found != nullptr);
    return *found;
  }
  std::uint64_t value_type_offset(std::string_view key) const {
    const auto& e = entry(key);
    return e.offset + 8 + e.key.size();
  }
  const smol::gguf::TensorInfo& tensor(std::string_view name) const { return file.tensor(name); }
  std::uint64_t n_dims_offset(std::string_view name) const {
    return tensor(name).info_offset + 8 + name.size();
  }
  std::uint64_t dim_offset(std::string_view name, int d) const {
    return n_dims_offset(name) + 4 + 8 * static_cast<std::uint64_t>(d);
  }
  std::uint64_t type_offset(std::string_view name) const {
    return dim_offset(name, tensor(name).n_dims);
  }
  std::uint64_t data_offset_field(std::string_view name) const { return type_offset(name) + 4; }
};

}  // namespace

TEST_CASE("the sample file itself is valid") {
  const SampleLayout sample;
  CHECK_FALSE(parse_error(sample.bytes).has_value());
  CHECK(sample.file.tensors().size() == 4);
}

TEST_CASE("a file truncated at every byte offset is rejected cleanly") {
  const SampleLayout sample;
  std::uint64_t data_end = 0;
  for (const auto& info : sample.file.tensors()) {
    data_end = std::max<std::uint64_t>(data_end, info.file_offset + info.bytes);
  }
  for (std::size_t size = 0; size < sample.bytes.size(); ++size) {
    const Bytes prefix(sample.bytes.begin(),
                       sample.bytes.begin() + static_cast<std::ptrdiff_t>(size));
    const auto error = parse_error(prefix);
    if (size < data_end) {
      CAPTURE(size);
      REQUIRE(error.has_value());
      CHECK(contains(*error, "broken.gguf: "));
    }
  }
  // Cutting into the data section names the tensor and its byte range.
  const Bytes cut(sample.bytes.begin(), sample.bytes.end() - 40);
  const std::string error = error_for(cut);
  CHECK(contains(error, "tensor 'v.weight' (tensor info at offset " +
                            std::to_string(sample.tensor("v.weight").info_offset) + "): data ["));
  CHECK(
      contains(error, "runs past the end of the file (" + std::to_string(cut.size()) + " bytes)"));
}

TEST_CASE("the header is checked") {
  const SampleLayout sample;
  CHECK(contains(error_for(patched(sample.bytes, 0, 'X')), "not a GGUF file"));
  CHECK(contains(error_for(patched(sample.bytes, 4, std::uint32_t{1})), "version 1"));
  CHECK(contains(error_for(patched(sample.bytes, 4, std::uint32_t{4})),
                 "unsupported GGUF version 4"));
  CHECK(contains(error_for(patched(sample.bytes, 4, std::uint32_t{0x03000000})), "big-endian"));
  CHECK_FALSE(parse_error(patched(sample.bytes, 4, std::uint32_t{2})).has_value());  // v2 reads

  const std::string tensors = error_for(patched(sample.bytes, 8, std::uint64_t{1} << 60));
  CHECK(contains(tensors, "header: tensor count 1152921504606846976 at offset 8 cannot fit"));
  const std::string keys = error_for(patched(sample.bytes, 16, ~std::uint64_t{0}));
  CHECK(contains(keys, "metadata key count 18446744073709551615 at offset 16"));
  // Counts that fit the size bound but not the actual records.
  CHECK(parse_error(patched(sample.bytes, 8, std::uint64_t{5})).has_value());
  CHECK(parse_error(patched(sample.bytes, 16, std::uint64_t{25})).has_value());
  CHECK(contains(error_for(Bytes(3, std::byte{'G'})), "magic (4 bytes at offset 0) runs past"));
}

TEST_CASE("metadata strings, arrays and types are bounded") {
  const SampleLayout sample;
  // The first key's length.
  const std::string key = error_for(patched(sample.bytes, 24, std::uint64_t{1} << 50));
  CHECK(contains(key,
                 "metadata entry #0 (at offset 24): key length 1125899906842624 at offset 24 runs "
                 "past the end"));

  const auto& name = sample.entry("general.name");
  const std::string text =
      error_for(patched(sample.bytes, name.value.offset(), std::uint64_t{1000000}));
  CHECK(contains(text,
                 "metadata key 'general.name' (entry at offset " + std::to_string(name.offset)));
  CHECK(contains(text, "string length 1000000 " + at(name.value.offset())));

  const auto& ints = sample.entry("test.i32s");
  const std::string array =
      error_for(patched(sample.bytes, ints.value.offset() + 4, std::uint64_t{1} << 61));
  CHECK(contains(array, "'test.i32s'"));
  CHECK(
      contains(array, "array of 2305843009213693952 i32 elements " + at(ints.value.offset() + 4)));

  const auto& strings = sample.entry("test.strings");
  CHECK(
      contains(error_for(patched(sample.bytes, strings.value.offset() + 4, std::uint64_t{1} << 40)),
               "metadata key 'test.strings' (entry at offset " + std::to_string(strings.offset) +
                   "): array of 1099511627776 string elements"));
  CHECK(contains(error_for(patched(sample.bytes, strings.value.offset(), std::uint32_t{77})),
                 "array element type id 77 " + at(strings.value.offset()) + " is unknown"));

  const std::string type =
      error_for(patched(sample.bytes, sample.value_type_offset("test.u8"), std::uint32_t{13}));
  CHECK(contains(type, "metadata key 'test.u8'"));
  CHECK(contains(type,
                 "value type id 13 " + at(sample.value_type_offset("test.u8")) + " is unknown"));

  const auto& flag = sample.entry("test.bool");
  CHECK(contains(error_for(patched(sample.bytes, flag.value.offset(), std::uint8_t{2})),
                 "bool value 2 " + at(flag.value.offset()) + " is neither 0 nor 1"));
  const auto& flags = sample.entry("test.bools");
  CHECK(contains(error_for(patched(sample.bytes, flags.value.offset() + 13, std::uint8_t{9})),
                 "bool value 9"));
}

TEST_CASE("duplicate keys and tensor names are rejected") {
  const SampleLayout sample;
  const auto& i8 = sample.entry("test.i8");
  const std::string key =
      error_for(patched(sample.bytes, i8.offset + 8 + 5, 'u'));  // test.i8 -> test.u8
  CHECK(contains(key, "metadata key 'test.u8' (entry at offset " + std::to_string(i8.offset) +
                          "): duplicate key; first defined by the entry at offset " +
                          std::to_string(sample.entry("test.u8").offset)));

  const auto& v = sample.tensor("v.weight");
  const std::string tensor =
      error_for(patched(sample.bytes, v.info_offset + 8, 'q'));  // v.weight -> q.weight
  CHECK(
      contains(tensor, "tensor 'q.weight' (tensor info at offset " + std::to_string(v.info_offset) +
                           "): duplicate tensor name; first defined by the tensor info at offset " +
                           std::to_string(sample.tensor("q.weight").info_offset)));
}

TEST_CASE("tensor shapes are checked") {
  const SampleLayout sample;
  const std::string q = "tensor 'q.weight' (tensor info at offset " +
                        std::to_string(sample.tensor("q.weight").info_offset) + "): ";
  const auto n_dims = sample.n_dims_offset("q.weight");
  CHECK(contains(error_for(patched(sample.bytes, n_dims, std::uint32_t{0})),
                 q + "n_dims 0 " + at(n_dims) + " is not in 1..4"));
  CHECK(contains(error_for(patched(sample.bytes, n_dims, std::uint32_t{5})),
                 q + "n_dims 5 " + at(n_dims) + " is not in 1..4"));
  CHECK(
      contains(error_for(patched(sample.bytes, sample.dim_offset("q.weight", 1), std::uint64_t{0})),
               q + "dimension 1 " + at(sample.dim_offset("q.weight", 1)) + " is 0"));
  // 2^62 * 4 overflows int64.
  const Bytes huge =
      patched(sample.bytes, sample.dim_offset("q.weight", 0), std::uint64_t{1} << 62);
  CHECK(contains(error_for(patched(huge, sample.dim_offset("q.weight", 1), std::uint64_t{4})),
                 q + "the element count overflows at dimension 1"));
  CHECK(contains(
      error_for(patched(sample.bytes, sample.dim_offset("q.weight", 0), ~std::uint64_t{0})),
      "too large"));
  // Huge but not overflowing: the data cannot be in the file.
  CHECK(contains(
      error_for(patched(sample.bytes, sample.dim_offset("q.weight", 1), std::uint64_t{1} << 40)),
      "runs past the end of the file"));
  CHECK(contains(
      error_for(patched(sample.bytes, sample.dim_offset("q.weight", 0), std::uint64_t{128})),
      q + "row length 128 is not a multiple of the Q4_K block size (256 values)"));
  const auto type = sample.type_offset("q.weight");
  CHECK(contains(error_for(patched(sample.bytes, type, std::uint32_t{99})),
                 q + "unknown ggml type id 99 " + at(type)));
  CHECK(contains(error_for(patched(sample.bytes, type, std::uint32_t{4})),
                 q + "unknown ggml type id 4"));
}

TEST_CASE("tensor offsets are aligned, inside the file and disjoint") {
  const SampleLayout sample;
  const auto& v = sample.tensor("v.weight");
  const std::string prefix =
      "tensor 'v.weight' (tensor info at offset " + std::to_string(v.info_offset) + "): ";
  const auto field = sample.data_offset_field("v.weight");
  CHECK(contains(error_for(patched(sample.bytes, field, v.offset + 1)),
                 prefix + "data offset " + std::to_string(v.offset + 1) + " " + at(field) +
                     " is not a multiple of the alignment (32)"));
  CHECK(contains(error_for(patched(sample.bytes, field, std::uint64_t{1} << 40)),
                 prefix + "data offset 1099511627776 (from the data section"));
  CHECK(contains(error_for(patched(sample.bytes, field, ~std::uint64_t{31})),
                 prefix + "data offset"));
  const std::uint64_t late = v.offset + 32;
  CHECK(contains(error_for(patched(sample.bytes, field, late)),
                 prefix + "data [" + std::to_string(sample.file.data_offset() + late) + ", " +
                     std::to_string(sample.file.data_offset() + late + v.bytes) +
                     ") runs past the end of the file (" + std::to_string(sample.bytes.size()) +
                     " bytes)"));
  const std::string overlap =
      error_for(patched(sample.bytes, field, sample.tensor("q.weight").offset));
  CHECK(contains(overlap, "overlaps tensor"));
}

TEST_CASE("general.alignment must be a nonzero power-of-two u32") {
  GgufWriter writer = smol::gguf::samples::small_writer();
  writer.set("general.alignment", std::uint32_t{64});
  const Bytes bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_bytes(bytes);
  CHECK(file.alignment() == 64);
  const auto& entry = *file.find("general.alignment");
  const std::string where =
      "metadata key 'general.alignment' (entry at offset " + std::to_string(entry.offset) + "): ";
  CHECK(contains(
      error_for(patched(bytes, entry.value.offset(), std::uint32_t{0})),
      where + "alignment 0 " + at(entry.value.offset()) + " is not a nonzero power of two"));
  CHECK(
      contains(error_for(patched(bytes, entry.value.offset(), std::uint32_t{48})), "alignment 48"));
  CHECK(contains(error_for(patched(bytes, entry.offset + 8 + entry.key.size(), std::uint32_t{5})),
                 where + "the alignment must be a u32, not i32"));
  // A smaller power of two still parses: every offset stays a multiple of it.
  CHECK_FALSE(parse_error(patched(bytes, entry.value.offset(), std::uint32_t{16})).has_value());
  // A larger one moves the data section, which the tensors then no longer fit.
  CHECK(parse_error(patched(bytes, entry.value.offset(), std::uint32_t{1} << 20)).has_value());
}

TEST_CASE("arrays nested too deep are rejected") {
  Value nested = Value::array(std::vector<std::uint8_t>{7});
  for (int depth = 1; depth <= smol::gguf::kMaxArrayDepth; ++depth) {
    nested = Value::array_of(ValueType::Array, {nested});
  }
  GgufWriter writer;
  writer.set("deep", nested);
  const std::string error = error_for(writer.to_bytes());
  CHECK(contains(error, "metadata key 'deep'"));
  CHECK(contains(error, "arrays nested more than 8 deep at offset"));
}

TEST_CASE("names with odd bytes are quoted safely in messages") {
  GgufWriter writer;
  writer.set("bad\nkey\x01", 1);
  writer.set("bad\nkey\x02", 2);
  const Bytes bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_bytes(bytes);
  const auto& second = file.metadata()[1];
  const std::string error = error_for(patched(bytes, second.offset + 8 + 7, std::uint8_t{1}));
  CHECK(error.find('\n') == std::string::npos);
  CHECK(contains(error, "metadata key 'bad\\x0akey\\x01' (entry at offset " +
                            std::to_string(second.offset) + "): duplicate key"));
}

TEST_CASE("random bit flips and byte stomps never crash") {
  const SampleLayout sample;
  std::mt19937_64 random(20240611);
  const std::uint64_t header = sample.file.data_offset();
  int rejected = 0;
  constexpr int kRounds = 4000;
  for (int round = 0; round < kRounds; ++round) {
    Bytes bytes = sample.bytes;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t where = random() % header;  // data bytes are never parsed
      if (round % 2 == 0) {
        bytes[where] ^= static_cast<std::byte>(1u << (random() % 8));
      } else {
        constexpr std::uint8_t kInteresting[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x20, 0x09};
        bytes[where] = static_cast<std::byte>(kInteresting[random() % std::size(kInteresting)]);
      }
    }
    if (parse_error(bytes)) ++rejected;
  }
  MESSAGE(rejected, " of ", kRounds, " mutated files rejected");
  CHECK(rejected > kRounds / 4);
}

TEST_CASE("the Q4_K_M fixture truncated inside its header is rejected cleanly") {
  const GgufFile fixture = GgufFile::open(SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf");
  const auto all = fixture.bytes();
  for (std::size_t size = 0; size < fixture.data_offset() + 64; size += 61) {
    CAPTURE(size);
    const Bytes prefix(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(size));
    CHECK(parse_error(prefix).has_value());
  }
}

}  // namespace test_gguf_corrupt
