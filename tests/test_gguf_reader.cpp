// The GGUF reader against the two fixture files and their documented metadata.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_samples.hpp"
#include "scratch_dir.hpp"
#include "smol/gguf/gguf_file.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_gguf_reader {

using smol::GgmlType;
using smol::gguf::ArrayView;
using smol::gguf::GgufFile;
using smol::gguf::TensorInfo;
using smol::gguf::ValueType;

namespace {

const std::string kQ4File = SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf";
const std::string kF32File = SMOL_TEST_DATA_DIR "/tiny-smollm3-a.f32.gguf";

std::string error_of(const auto& action) {
  try {
    action();
  } catch (const smol::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> block_tensor_names(int block) {
  std::vector<std::string> names;
  for (const char* part : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                           "ffn_gate", "ffn_up", "ffn_down"}) {
    names.push_back("blk." + std::to_string(block) + "." + part + ".weight");
  }
  return names;
}

std::vector<std::uint64_t> expected_shape(const std::string& name) {
  const auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  if (name == "token_embd.weight") return {256, 1024};
  if (ends_with("norm.weight")) return {256};
  if (ends_with("attn_q.weight") || ends_with("attn_output.weight")) return {256, 256};
  if (ends_with("attn_k.weight") || ends_with("attn_v.weight")) return {256, 64};
  if (ends_with("ffn_gate.weight") || ends_with("ffn_up.weight")) return {256, 768};
  if (ends_with("ffn_down.weight")) return {768, 256};
  return {};
}

// Checks that hold for both fixture files (they share every key but the file type).
void check_common_fixture_facts(const GgufFile& file) {
  CHECK(file.version() == 3);
  CHECK(file.alignment() == 32);
  CHECK(file.data_offset() % 32 == 0);
  CHECK_FALSE(file.has("general.alignment"));

  CHECK(file.get<std::string_view>("general.architecture") == "smollm3");
  CHECK(file.get<std::string>("general.name") == "tiny-smollm3-a");
  CHECK(file.get<std::uint32_t>("smollm3.block_count") == 8);
  CHECK(file.get<std::uint32_t>("smollm3.context_length") == 4096);
  CHECK(file.get<std::uint32_t>("smollm3.embedding_length") == 256);
  CHECK(file.get<std::uint32_t>("smollm3.feed_forward_length") == 768);
  CHECK(file.get<std::uint32_t>("smollm3.attention.head_count") == 4);
  CHECK(file.get<std::uint32_t>("smollm3.attention.head_count_kv") == 1);
  CHECK(file.get<float>("smollm3.rope.freq_base") == 5000000.0f);
  CHECK(file.get<float>("smollm3.attention.layer_norm_rms_epsilon") == 1e-6f);
  CHECK(file.get<std::uint32_t>("smollm3.rope.dimension_count") == 64);
  CHECK(file.get<std::uint32_t>("smollm3.vocab_size") == 1024);

  CHECK(file.get<std::string_view>("tokenizer.ggml.model") == "gpt2");
  CHECK(file.get<std::string_view>("tokenizer.ggml.pre") == "llama-bpe");
  CHECK(file.get<std::uint32_t>("tokenizer.ggml.bos_token_id") == 992);
  CHECK(file.get<std::uint32_t>("tokenizer.ggml.eos_token_id") == 997);
  CHECK(file.get<bool>("tokenizer.ggml.add_bos_token") == false);
  CHECK_FALSE(file.has("tokenizer.ggml.padding_token_id"));
  CHECK(file.get<std::string_view>("tokenizer.chat_template").size() == 3795);

  const auto tokens = file.get<std::vector<std::string_view>>("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 1024);
  CHECK(tokens[0] == "!");
  CHECK(tokens[198] == "\xC4\x8A");  // "Ċ", the GPT-2 byte-level newline
  CHECK(tokens[220] == "\xC4\xA0");  // "Ġ", space
  CHECK(tokens[992] == "<|begin_of_text|>");
  CHECK(tokens[997] == "<|im_end|>");
  CHECK(tokens[1023] == "<|reserved_special_token_25|>");
  // The strings point into the file, not into copies.
  const auto* begin = reinterpret_cast<const char*>(file.bytes().data());
  CHECK(tokens[5].data() >= begin);
  CHECK(tokens[5].data() < begin + file.bytes().size());

  const auto types = file.get<std::vector<std::int32_t>>("tokenizer.ggml.token_type");
  REQUIRE(types.size() == 1024);
  CHECK(std::count(types.begin(), types.begin() + 992, 1) == 992);
  CHECK(std::count(types.begin() + 992, types.end(), 3) == 32);

  const auto merges = file.get<std::vector<std::string_view>>("tokenizer.ggml.merges");
  CHECK(merges.size() == 736);
  CHECK(merges[0].find(' ') != std::string_view::npos);

  // Tensors: the documented names and shapes, tied embeddings.
  CHECK(file.tensors().size() == 74);
  CHECK(file.find_tensor("output.weight") == nullptr);
  std::vector<std::string> names = {"token_embd.weight", "output_norm.weight"};
  for (int block = 0; block < 8; ++block) {
    for (const std::string& name : block_tensor_names(block)) names.push_back(name);
  }
  for (const std::string& name : names) {
    CAPTURE(name);
    const TensorInfo* info = file.find_tensor(name);
    REQUIRE(info != nullptr);
    const auto shape = expected_shape(name);
    CHECK(std::vector<std::uint64_t>(info->shape().begin(), info->shape().end()) == shape);
    CHECK(info->row_length() == shape[0]);
    CHECK(info->rows() == (shape.size() == 2 ? shape[1] : 1));
    CHECK(info->file_offset == file.data_offset() + info->offset);
    CHECK(info->data == file.bytes().data() + info->file_offset);
    CHECK(info->offset % file.alignment() == 0);
    const auto type = smol::ggml_type_info(info->type);
    CHECK(info->row_bytes == info->row_length() / type.block_values * type.block_bytes);
    CHECK(info->bytes == info->row_bytes * info->rows());
    CHECK(info->file_offset + info->bytes <= file.bytes().size());
  }
  CHECK(&file.tensor("token_embd.weight") == file.find_tensor("token_embd.weight"));
}

}  // namespace

TEST_CASE("reads the Q4_K_M fixture") {
  const GgufFile file = GgufFile::open(kQ4File);
  CHECK(file.name() == kQ4File);
  CHECK(file.bytes().size() == 3879840);
  check_common_fixture_facts(file);
  CHECK(file.get<std::uint32_t>("general.file_type") == 15);
  CHECK(file.get<std::uint32_t>("general.quantization_version") == 2);

  // llama-quantize's order: output_norm, token_embd, then each block sorted by name.
  REQUIRE(file.tensors().size() >= 3);
  CHECK(file.tensors()[0].name == "output_norm.weight");
  CHECK(file.tensors()[1].name == "token_embd.weight");
  CHECK(file.tensors()[2].name == "blk.0.attn_k.weight");

  std::map<GgmlType, int> counts;
  for (const TensorInfo& info : file.tensors()) ++counts[info.type];
  CHECK(counts.size() == 3);
  CHECK(counts[GgmlType::Q6_K] == 9);
  CHECK(counts[GgmlType::Q4_K] == 48);
  CHECK(counts[GgmlType::F32] == 17);

  CHECK(file.tensor("token_embd.weight").type == GgmlType::Q6_K);
  CHECK(file.tensor("token_embd.weight").row_bytes == 210);
  CHECK(file.tensor("output_norm.weight").type == GgmlType::F32);
  for (int block = 0; block < 8; ++block) {
    const std::string prefix = "blk." + std::to_string(block) + ".";
    const bool q6 = block == 0 || block == 3 || block == 6 || block == 7;
    const GgmlType heavy = q6 ? GgmlType::Q6_K : GgmlType::Q4_K;
    CAPTURE(block);
    CHECK(file.tensor(prefix + "attn_v.weight").type == heavy);
    CHECK(file.tensor(prefix + "ffn_down.weight").type == heavy);
    CHECK(file.tensor(prefix + "attn_q.weight").type == GgmlType::Q4_K);
    CHECK(file.tensor(prefix + "ffn_up.weight").type == GgmlType::Q4_K);
    CHECK(file.tensor(prefix + "ffn_norm.weight").type == GgmlType::F32);
  }

  // llama-quantize moves file_type to the end.
  CHECK(file.metadata().back().key == "general.file_type");
  CHECK(file.metadata()[0].key == "general.architecture");
}

TEST_CASE("reads the F32 fixture") {
  const GgufFile file = GgufFile::open(kF32File);
  CHECK(file.bytes().size() == 25219424);
  check_common_fixture_facts(file);
  CHECK(file.get<std::uint32_t>("general.file_type") == 0);
  CHECK_FALSE(file.has("general.quantization_version"));
  for (const TensorInfo& info : file.tensors()) CHECK(info.type == GgmlType::F32);
  // Stored in block order.
  CHECK(file.tensors().front().name == "token_embd.weight");
  CHECK(file.tensors()[1].name == "blk.0.attn_norm.weight");
  CHECK(file.tensors().back().name == "output_norm.weight");
  std::uint64_t parameters = 0;
  for (const TensorInfo& info : file.tensors()) parameters += info.elements();
  CHECK(parameters * 4 == file.bytes().size() - file.data_offset());
}

TEST_CASE("metadata is enumerable in file order with offsets") {
  const GgufFile file = GgufFile::open(kQ4File);
  REQUIRE(file.metadata().size() == 23);
  std::uint64_t previous = 0;
  for (const auto& entry : file.metadata()) {
    CHECK(entry.offset > previous);
    previous = entry.offset;
    CHECK(file.find(entry.key) == &entry);
    // The key's length field sits at the entry offset.
    std::uint64_t length = 0;
    std::memcpy(&length, file.bytes().data() + entry.offset, sizeof length);
    CHECK(length == entry.key.size());
  }
  const auto* tokens = file.find("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->value.type() == ValueType::Array);
  const ArrayView array = tokens->value.array();
  CHECK(array.element_type() == ValueType::String);
  CHECK(array.size() == 1024);
  std::uint64_t seen = 0;
  for (const auto element : array) {
    if (seen == 996) CHECK(element.string() == "<|im_start|>");
    ++seen;
  }
  CHECK(seen == 1024);
  CHECK(std::distance(array.begin(), array.end()) == 1024);
}

TEST_CASE("typed access converts integers losslessly and names the key otherwise") {
  const GgufFile file = GgufFile::open(kQ4File);
  CHECK(file.get<std::uint64_t>("smollm3.block_count") == 8);
  CHECK(file.get<int>("smollm3.block_count") == 8);
  CHECK(file.get<std::int64_t>("smollm3.context_length") == 4096);
  CHECK(file.get<std::uint16_t>("smollm3.context_length") == 4096);
  CHECK(file.get<double>("smollm3.rope.freq_base") == 5000000.0);
  CHECK(file.get<std::vector<std::int64_t>>("tokenizer.ggml.token_type").size() == 1024);
  CHECK(file.get<std::vector<std::uint8_t>>("tokenizer.ggml.token_type")[1000] == 3);

  const std::string lossy = error_of([&] { file.get<std::uint8_t>("smollm3.context_length"); });
  CHECK(lossy.find("smollm3.context_length") != std::string::npos);
  CHECK(lossy.find("4096") != std::string::npos);
  CHECK(lossy.find("does not fit in u8") != std::string::npos);

  const std::string wrong = error_of([&] { file.get<std::string_view>("smollm3.block_count"); });
  CHECK(wrong.find("'smollm3.block_count'") != std::string::npos);
  CHECK(wrong.find("is u32, not string") != std::string::npos);
  CHECK(wrong.find("at offset") != std::string::npos);

  CHECK(error_of([&] { file.get<float>("smollm3.block_count"); }).find("not f32") !=
        std::string::npos);
  CHECK(error_of([&] { file.get<bool>("smollm3.block_count"); }).find("not bool") !=
        std::string::npos);
  CHECK(error_of([&] {
          file.get<std::vector<std::string_view>>("tokenizer.ggml.token_type");
        }).find("element 0: is i32, not string") != std::string::npos);

  const std::string missing = error_of([&] { file.get<std::uint32_t>("smollm3.nope"); });
  CHECK(missing.find("'smollm3.nope' is missing") != std::string::npos);
  CHECK(missing.find(kQ4File) != std::string::npos);

  CHECK(file.get_optional<std::uint32_t>("smollm3.nope") == std::nullopt);
  CHECK(file.get_optional<std::uint32_t>("smollm3.block_count") == 8u);
  CHECK_THROWS_AS(file.get_optional<std::string_view>("smollm3.block_count"), smol::Error);

  const std::string absent = error_of([&] { file.tensor("output.weight"); });
  CHECK(absent.find("tensor 'output.weight' is missing") != std::string::npos);
}

TEST_CASE("every value type reads back from a written file") {
  const GgufFile file = GgufFile::from_bytes(smol::gguf::samples::small_file(), "sample.gguf");
  CHECK(file.name() == "sample.gguf");
  CHECK(file.get<std::uint8_t>("test.u8") == 200);
  CHECK(file.get<std::int8_t>("test.i8") == -100);
  CHECK(file.get<std::uint16_t>("test.u16") == 60000);
  CHECK(file.get<std::int16_t>("test.i16") == -30000);
  CHECK(file.get<std::uint32_t>("test.u32") == 4000000000u);
  CHECK(file.get<std::int32_t>("test.i32") == -2000000000);
  CHECK(file.get<float>("test.f32") == 1.5f);
  CHECK(file.get<bool>("test.bool"));
  CHECK(file.get<std::uint64_t>("test.u64") == std::uint64_t{1} << 40);
  CHECK(file.get<std::int64_t>("test.i64") == std::int64_t{-1} << 40);
  CHECK(file.get<double>("test.f64") == 0.1);
  CHECK_THROWS_AS(file.get<float>("test.f64"), smol::Error);  // 0.1 is not an exact f32
  CHECK(file.get<std::int64_t>("test.u32") == 4000000000);
  CHECK_THROWS_AS(file.get<std::int32_t>("test.u32"), smol::Error);
  CHECK_THROWS_AS(file.get<std::uint8_t>("test.i8"), smol::Error);
  CHECK(file.get<int>("test.i8") == -100);

  CHECK(file.get<std::vector<std::string>>("test.strings") ==
        std::vector<std::string>{"alpha", "", "gamma"});
  CHECK(file.get<std::vector<int>>("test.i32s") == std::vector<int>{1, -2, 3});
  CHECK(file.get<std::vector<bool>>("test.bools") == std::vector<bool>{true, false, true});
  CHECK(file.get<std::vector<float>>("test.empty").empty());
  CHECK_THROWS_AS(file.get<std::vector<std::uint32_t>>("test.i32s"), smol::Error);  // -2

  const ArrayView nested = file.get<ArrayView>("test.nested");
  CHECK(nested.element_type() == ValueType::Array);
  REQUIRE(nested.size() == 2);
  auto it = nested.begin();
  CHECK((*it).as<std::vector<std::uint8_t>>() == std::vector<std::uint8_t>{1, 2});
  ++it;
  CHECK((*it).as<std::vector<std::string_view>>() == std::vector<std::string_view>{"x", "yz"});
  CHECK(++it == nested.end());
  CHECK(file.get<std::vector<ArrayView>>("test.nested").size() == 2);

  CHECK(file.tensor("embd.weight").type == GgmlType::F16);
  CHECK(file.tensor("embd.weight").bytes == 36);
  CHECK(file.tensor("q.weight").bytes == 288);
  CHECK(file.tensor("v.weight").type == GgmlType::Q8_0);
}

TEST_CASE("from_bytes and open agree") {
  std::ifstream in(kQ4File, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  const GgufFile mapped = GgufFile::open(kQ4File);
  GgufFile owned = GgufFile::from_bytes(bytes, "copy");
  GgufFile moved = std::move(owned);  // views survive a move
  const GgufFile borrowed = GgufFile::from_borrowed_bytes(bytes, "borrowed");
  for (const GgufFile* file : std::vector<const GgufFile*>{&moved, &borrowed}) {
    REQUIRE(file->tensors().size() == mapped.tensors().size());
    for (std::size_t i = 0; i < mapped.tensors().size(); ++i) {
      CHECK(file->tensors()[i].name == mapped.tensors()[i].name);
      CHECK(file->tensors()[i].file_offset == mapped.tensors()[i].file_offset);
    }
    CHECK(file->get<std::string_view>("tokenizer.chat_template") ==
          mapped.get<std::string_view>("tokenizer.chat_template"));
  }
}

TEST_CASE("open reports files that cannot be read") {
  const std::string missing = error_of([] { GgufFile::open("/nonexistent/model.gguf"); });
  CHECK(missing.find("/nonexistent/model.gguf") != std::string::npos);
  const std::string folder = error_of([] { GgufFile::open(SMOL_FIXTURES_DIR); });
  CHECK(folder.find("not a regular file") != std::string::npos);
}

// A FIFO, a directory or a device given as a model must be refused at once: opening a
// FIFO for reading would otherwise wait for a writer that never comes.
TEST_CASE("a path that is not a regular file is refused before it is read") {
  const std::string fifo = (smol::test::scratch_dir() / "model.fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_error = error_of([&] { (void)GgufFile::open(fifo); });
  CHECK(fifo_error == fifo + ": not a regular file (it is a FIFO)");
  const std::string dir = smol::test::scratch_dir().string();
  CHECK(error_of([&] { (void)GgufFile::open(dir); }) ==
        dir + ": not a regular file (it is a directory)");
  CHECK(error_of([] { (void)GgufFile::open("/dev/null"); }) ==
        "/dev/null: not a regular file (it is a character device)");
}

}  // namespace test_gguf_reader
