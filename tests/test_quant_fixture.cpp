// The reference dequantizers and quantizers against blocks that the real
// llama-quantize wrote: the F32 fixture equals the dequantized Q4_K_M fixture bit
// for bit (see shared/fixtures/README.md), and it is a fixed point of quantization.
#include <doctest/doctest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/quantize.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_quant_fixture {

namespace {

const smol::gguf::GgufFile& quantized_fixture() {
  static const auto file =
      smol::gguf::GgufFile::open(SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf");
  return file;
}

const smol::gguf::GgufFile& f32_fixture() {
  static const auto file =
      smol::gguf::GgufFile::open(SMOL_TEST_DATA_DIR "/tiny-smollm3-a.f32.gguf");
  return file;
}

std::vector<float> f32_values(const smol::gguf::TensorInfo& tensor) {
  REQUIRE(tensor.type == smol::GgmlType::F32);
  std::vector<float> values(tensor.elements());
  REQUIRE(tensor.bytes == values.size() * sizeof(float));
  std::memcpy(values.data(), tensor.data, tensor.bytes);
  return values;
}

}  // namespace

TEST_CASE("Every tensor of the Q4_K_M fixture dequantizes to the F32 fixture, bit for bit") {
  std::map<smol::GgmlType, int> count;
  for (const auto& tensor : quantized_fixture().tensors()) {
    CAPTURE(tensor.name);
    const auto& reference = f32_fixture().tensor(tensor.name);
    REQUIRE(reference.dims == tensor.dims);
    const auto expected = f32_values(reference);

    // Row by row, as a kernel or an embedding lookup would read it.
    std::vector<float> actual(tensor.elements());
    const std::size_t row_length = tensor.row_length();
    for (std::size_t r = 0; r < tensor.rows(); ++r) {
      smol::dequantize_row(tensor.type, tensor.data + r * tensor.row_bytes,
                           actual.data() + r * row_length, row_length);
    }
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      mismatches +=
          std::bit_cast<std::uint32_t>(actual[i]) != std::bit_cast<std::uint32_t>(expected[i]);
    }
    CHECK(mismatches == 0);
    ++count[tensor.type];
  }
  CHECK(count[smol::GgmlType::Q4_K] == 48);
  CHECK(count[smol::GgmlType::Q6_K] == 9);
  CHECK(count[smol::GgmlType::F32] == 17);
}

TEST_CASE("Quantizing the F32 fixture reproduces llama-quantize's blocks") {
  // The F32 weights are a fixed point of llama-quantize, so a quantizer that follows
  // ggml's reference algorithm must write the same blocks, byte for byte, and at the
  // very least the same values.
  std::map<smol::GgmlType, std::size_t> blocks;
  std::map<smol::GgmlType, std::size_t> identical_blocks;
  for (const auto& tensor : quantized_fixture().tensors()) {
    if (tensor.type != smol::GgmlType::Q4_K && tensor.type != smol::GgmlType::Q6_K) continue;
    CAPTURE(tensor.name);
    const auto values = f32_values(f32_fixture().tensor(tensor.name));
    std::vector<std::byte> bytes(tensor.bytes);
    smol::quantize_row(tensor.type, values.data(), bytes.data(), values.size());

    const std::size_t block_bytes = smol::ggml_type_info(tensor.type).block_bytes;
    for (std::size_t b = 0; b < tensor.bytes / block_bytes; ++b) {
      ++blocks[tensor.type];
      identical_blocks[tensor.type] += std::memcmp(bytes.data() + b * block_bytes,
                                                   tensor.data + b * block_bytes, block_bytes) == 0;
    }
    std::vector<float> restored(values.size());
    smol::dequantize_row(tensor.type, bytes.data(), restored.data(), values.size());
    std::size_t changed = 0;
    for (std::size_t i = 0; i < values.size(); ++i) changed += restored[i] != values[i];
    CHECK(changed == 0);
  }
  for (auto type : {smol::GgmlType::Q4_K, smol::GgmlType::Q6_K}) {
    MESSAGE(smol::ggml_type_name(type), ": ", identical_blocks[type], " of ", blocks[type],
            " blocks identical to llama-quantize's");
    CHECK(identical_blocks[type] == blocks[type]);
  }
}

TEST_CASE(
    "Quantizing the F32 fixture as the legacy, K-quant and IQ4 files reproduces llama-quantize's "
    "blocks") {
  // llama-quantize wrote the Q4_1, Q5_0 and Q5_1 files with ggml's reference quantizers
  // (no importance matrix), and ran the imatrix-free quantize_q2_K, quantize_q3_K, quantize_q4_K,
  // ..., which call ggml's reference quantizers (quantize_row_q2_K_ref, ...), and for IQ4_NL and
  // IQ4_XS ggml's scale search without an importance matrix, so every such tensor of these files
  // must come back byte for byte from the same floats.
  struct Case {
    const char* file;
    smol::GgmlType type;
    std::size_t tensors;
  };
  for (const Case c :
       {Case{"q4_1", smol::GgmlType::Q4_1, 56}, Case{"q5_0", smol::GgmlType::Q5_0, 56},
        Case{"q5_1", smol::GgmlType::Q5_1, 56}, Case{"q3_k_m", smol::GgmlType::Q3_K, 32},
        Case{"q3_k_m", smol::GgmlType::Q4_K, 22}, Case{"q3_k_m", smol::GgmlType::Q5_K, 2},
        Case{"q3_k_m", smol::GgmlType::Q6_K, 1}, Case{"q2_k", smol::GgmlType::Q2_K, 32},
        Case{"q2_k", smol::GgmlType::Q3_K, 16}, Case{"q2_k", smol::GgmlType::Q4_K, 8},
        Case{"q2_k", smol::GgmlType::Q6_K, 1}, Case{"iq4_nl", smol::GgmlType::IQ4_NL, 47},
        Case{"iq4_nl", smol::GgmlType::Q5_K, 9}, Case{"iq4_xs", smol::GgmlType::IQ4_XS, 47},
        Case{"iq4_xs", smol::GgmlType::Q5_K, 9}}) {
    CAPTURE(c.file);
    CAPTURE(smol::ggml_type_name(c.type));
    const auto file = smol::gguf::GgufFile::open(std::string(SMOL_FIXTURES_DIR) +
                                                 "/tiny-smollm3-a." + c.file + ".gguf");
    std::size_t tensors = 0, blocks = 0, identical_blocks = 0;
    for (const auto& tensor : file.tensors()) {
      if (tensor.type != c.type) continue;
      CAPTURE(tensor.name);
      ++tensors;
      const auto values = f32_values(f32_fixture().tensor(tensor.name));
      std::vector<std::byte> bytes(tensor.bytes);
      smol::quantize_row(tensor.type, values.data(), bytes.data(), values.size());
      const std::size_t block_bytes = smol::ggml_type_info(tensor.type).block_bytes;
      for (std::size_t b = 0; b < tensor.bytes / block_bytes; ++b) {
        ++blocks;
        identical_blocks += std::memcmp(bytes.data() + b * block_bytes,
                                        tensor.data + b * block_bytes, block_bytes) == 0;
      }
    }
    MESSAGE(std::string(c.file), " ", smol::ggml_type_name(c.type), ": ", identical_blocks, " of ",
            blocks, " blocks in ", tensors, " tensors identical to llama-quantize's");
    CHECK(tensors == c.tensors);
    CHECK(identical_blocks == blocks);
  }
}

}  // namespace test_quant_fixture
