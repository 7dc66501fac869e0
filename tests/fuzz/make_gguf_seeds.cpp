// Writes the seed corpus for fuzz_gguf_reader: small valid GGUF files that between
// them use every value type, nested arrays, a custom alignment, several tensor types,
// and the metadata of the SmolLM3 fixture (with its long arrays cut short).
//
//   make_gguf_seeds OUT_DIR [FIXTURE.gguf]
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gguf_samples.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

namespace {

using smol::GgmlType;
using smol::gguf::GgufWriter;
using smol::gguf::Value;
using smol::gguf::ValueType;

// Keeps seeds small: libFuzzer mutates short inputs far faster.
constexpr std::size_t kKeptElements = 12;

GgufWriter fixture_like(const std::string& fixture_path) {
  const auto fixture = smol::gguf::GgufFile::open(fixture_path);
  GgufWriter writer;
  for (const auto& entry : fixture.metadata()) {
    if (entry.value.type() != ValueType::Array) {
      if (entry.key == "tokenizer.chat_template") {
        writer.set(entry.key, entry.value.string().substr(0, 200));
      } else {
        writer.set(entry.key, Value::copy_of(entry.value));
      }
      continue;
    }
    const auto array = entry.value.array();
    std::vector<Value> kept;
    for (const auto element : array) {
      if (kept.size() == kKeptElements) break;
      kept.push_back(Value::copy_of(element));
    }
    writer.set(entry.key, Value::array_of(array.element_type(), kept));
  }
  using smol::gguf::samples::pattern_bytes;
  writer.add_f32_tensor("output_norm.weight", {8}, std::vector<float>(8, 1.0f));
  writer.add_tensor_copy("token_embd.weight", GgmlType::Q6_K, {256, 1}, pattern_bytes(210, 1));
  writer.add_tensor_copy("blk.0.attn_q.weight", GgmlType::Q4_K, {256, 1}, pattern_bytes(144, 2));
  writer.add_f32_tensor("blk.0.attn_norm.weight", {4, 2}, std::vector<float>(8, 0.5f),
                        GgmlType::BF16);
  return writer;
}

void write_seed(const std::string& dir, const std::string& name, const GgufWriter& writer) {
  writer.write(dir + "/" + name + ".gguf");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_gguf_seeds OUT_DIR [FIXTURE.gguf]\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    write_seed(dir, "sample", smol::gguf::samples::small_writer());

    GgufWriter aligned = smol::gguf::samples::small_writer();
    aligned.set("general.alignment", std::uint32_t{64});
    write_seed(dir, "aligned64", aligned);

    write_seed(dir, "empty", GgufWriter());

    GgufWriter nested;
    Value deep = Value::array(std::vector<std::int16_t>{-1, 2});
    for (int depth = 1; depth < smol::gguf::kMaxArrayDepth; ++depth) {
      deep = Value::array_of(ValueType::Array,
                             {deep, Value::array_of(ValueType::Array, std::vector<Value>{})});
    }
    nested.set("nested", deep);
    nested.add_f32_tensor("t", {3}, std::vector<float>{1, 2, 3}, GgmlType::F16);
    write_seed(dir, "nested", nested);

    if (argc > 2) write_seed(dir, "fixture_like", fixture_like(argv[2]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_gguf_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
