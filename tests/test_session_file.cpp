// Session files (smol/model/session_file.hpp): a session saved after a prompt and
// loaded into a fresh Transformer continues exactly as the uninterrupted one, and
// every malformed or foreign file is refused with an error naming it.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "scratch_dir.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_file.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_session_file {

namespace {

const std::string kQ4Model = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";
const std::string kF32Model = std::string(SMOL_TEST_DATA_DIR) + "/tiny-smollm3-a.f32.gguf";

const std::vector<std::int32_t> kPrompt = {1,  17,  42, 300, 7,  99, 5,  250, 61, 8,
                                           33, 120, 4,  77,  19, 2,  90, 64,  11, 3};
const std::vector<std::int32_t> kNext = {45, 46};

std::vector<float> copy(std::span<const float> logits) {
  return {logits.begin(), logits.end()};
}

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::filesystem::path& path, smol::Transformer& session) {
  try {
    smol::load_session(path, session);
  } catch (const smol::Error& error) {
    return error.what();
  }
  return "";
}

// Offset of the n_layer field: magic, version, architecture length and name.
std::size_t n_layer_offset(const std::string& architecture) {
  return smol::kSessionMagic.size() + 4 + 4 + architecture.size();
}

// Offset of the K cache type: after n_layer, n_head_kv, head_dim, n_vocab (u64 each).
std::size_t kv_type_offset(const std::string& architecture) {
  return n_layer_offset(architecture) + 4 * 8;
}

// Offset of the token count: after the K and V types (u32 each), the model's size,
// header hash and RoPE hash (u64 each).
std::size_t token_count_offset(const std::string& architecture) {
  return kv_type_offset(architecture) + 2 * 4 + 3 * 8;
}

}  // namespace

TEST_CASE("a loaded session continues bit for bit like the uninterrupted one") {
  const smol::Model model = smol::Model::open(kQ4Model);
  smol::Context ctx(2);
  for (const smol::KvTypes kv_type :
       {smol::KvTypes(smol::KvType::f16), smol::KvTypes(smol::KvType::f32),
        smol::KvTypes(smol::KvType::bf16), smol::KvTypes(smol::KvType::q8_0),
        smol::KvTypes(smol::KvType::q8_0, smol::KvType::q4_0),
        smol::KvTypes(smol::KvType::f16, smol::KvType::q4_0)}) {
    CAPTURE(smol::kv_type_name(kv_type.key));
    CAPTURE(smol::kv_type_name(kv_type.value));
    const smol::TransformerOptions options{.context = 64, .kv_type = kv_type};
    smol::Transformer original(model, ctx, options);
    original.forward(kPrompt, 0);
    const auto path = smol::test::scratch_dir() / "session.bin";
    smol::save_session(path, original, kPrompt);
    // The file keeps only the used positions, not the 64 reserved.
    CHECK(std::filesystem::file_size(path) == smol::encode_session(original, kPrompt).size());
    CHECK(std::filesystem::file_size(path) < original.kv_cache().bytes_for(kPrompt.size()) + 1024);
    const std::vector<float> want =
        copy(original.forward(kNext, kPrompt.size(), smol::LogitsFor::all));

    smol::Transformer restored(model, ctx, options);
    const std::vector<std::int32_t> tokens = smol::load_session(path, restored);
    CHECK(tokens == kPrompt);
    CHECK(restored.n_filled() == kPrompt.size());
    const std::vector<float> got =
        copy(restored.forward(kNext, kPrompt.size(), smol::LogitsFor::all));
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);

    // A prefix of the saved tokens is reused too: rewind into it and go on.
    const std::vector<float> rewound = copy(restored.forward(kNext, 10, smol::LogitsFor::all));
    smol::Transformer fresh(model, ctx, options);
    fresh.forward(std::span(kPrompt).first(10), 0);
    const std::vector<float> direct = copy(fresh.forward(kNext, 10, smol::LogitsFor::all));
    CHECK(std::memcmp(rewound.data(), direct.data(), direct.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("session files that are corrupt or foreign are refused with the file named") {
  const smol::Model model = smol::Model::open(kQ4Model);
  smol::Context ctx(2);
  smol::Transformer original(model, ctx, {.context = 64});
  original.forward(kPrompt, 0);
  const std::vector<std::byte> good = smol::encode_session(original, kPrompt);
  const auto path = smol::test::scratch_dir() / "corrupt.bin";
  smol::Transformer target(model, ctx, {.context = 64});

  SUBCASE("truncated at every sixteenth") {
    for (std::size_t k = 0; k < 16; ++k) {
      const std::size_t size = good.size() * k / 16;
      CAPTURE(size);
      write_file(path, std::span(good).first(size));
      const std::string error = error_of(path, target);
      CHECK(error.find(path.string()) != std::string::npos);
      CHECK((error.find("truncated") != std::string::npos ||
             (size < 8 && error.find("magic") != std::string::npos)));
    }
  }
  SUBCASE("trailing garbage") {
    std::vector<std::byte> longer = good;
    longer.push_back(std::byte{0});
    write_file(path, longer);
    CHECK(error_of(path, target).find("trailing garbage") != std::string::npos);
  }
  SUBCASE("bad magic") {
    std::vector<std::byte> bad = good;
    bad[0] = std::byte{'X'};
    write_file(path, bad);
    CHECK(error_of(path, target).find("bad magic") != std::string::npos);
  }
  SUBCASE("another version") {
    std::vector<std::byte> bad = good;
    bad[smol::kSessionMagic.size()] = std::byte{9};
    write_file(path, bad);
    CHECK(error_of(path, target).find("version 9 is not supported") != std::string::npos);
  }
  SUBCASE("another shape") {
    std::vector<std::byte> bad = good;
    bad[n_layer_offset(model.config().architecture)] ^= std::byte{1};
    write_file(path, bad);
    CHECK(error_of(path, target).find("saved for another model: n_layer") != std::string::npos);
  }
  SUBCASE("another KV type") {
    smol::Transformer f32(model, ctx, {.context = 64, .kv_type = smol::KvType::f32});
    write_file(path, good);
    CHECK(error_of(path, f32).find(
              "the KV cache type (-ctk/-ctv) is K f16, V f16 in the file, K f32, V f32 here") !=
          std::string::npos);
    smol::Transformer q8(model, ctx,
                         {.context = 64, .kv_type = {smol::KvType::f16, smol::KvType::q8_0}});
    CHECK(error_of(path, q8).find("K f16, V f16 in the file, K f16, V q8_0 here") !=
          std::string::npos);
  }
  SUBCASE("an unknown KV type") {
    std::vector<std::byte> bad = good;
    bad[kv_type_offset(model.config().architecture) + 4] = std::byte{7};
    write_file(path, bad);
    CHECK(error_of(path, target).find("unknown V cache type 7") != std::string::npos);
  }
  SUBCASE("a version 1 file (one KV type, 0 for f16) still loads") {
    // Version 1 wrote one u32 for both types where version 2 writes two.
    std::vector<std::byte> old = good;
    old[smol::kSessionMagic.size()] = std::byte{1};
    const auto types_at =
        old.begin() + static_cast<std::ptrdiff_t>(kv_type_offset(model.config().architecture));
    old.erase(types_at, types_at + 4);
    const std::uint32_t v1_f16 = 0;
    std::memcpy(&*types_at, &v1_f16, sizeof(v1_f16));
    write_file(path, old);
    smol::Transformer loader(model, ctx, {.context = 64});
    CHECK(error_of(path, loader).empty());
    CHECK(loader.n_filled() == kPrompt.size());
  }
  SUBCASE("another model of the same shape") {
    const smol::Model other = smol::Model::open(kF32Model);
    smol::Transformer elsewhere(other, ctx, {.context = 64});
    write_file(path, good);
    CHECK(error_of(path, elsewhere).find("saved for another model") != std::string::npos);
  }
  SUBCASE("the same model with other RoPE settings (the cached keys are rotated)") {
    const smol::Model yarn = smol::Model::open(
        kQ4Model, {.rope = {.type = smol::RopeScalingType::yarn, .factor = 2.0f}});
    smol::Transformer stretched(yarn, ctx, {.context = 64});
    write_file(path, good);
    CHECK(error_of(path, stretched).find("the hash of the RoPE settings") != std::string::npos);
  }
  SUBCASE("more tokens than the context") {
    smol::Transformer small(model, ctx, {.context = 8});
    write_file(path, good);
    CHECK(error_of(path, small).find("more than the session's context of 8") != std::string::npos);
  }
  SUBCASE("a token count beyond the file") {
    std::vector<std::byte> bad = good;
    const std::size_t count_at = token_count_offset(model.config().architecture);
    const std::uint64_t huge = std::uint64_t{1} << 62;
    std::memcpy(bad.data() + count_at, &huge, sizeof(huge));
    write_file(path, bad);
    CHECK(error_of(path, target).find("tokens declared") != std::string::npos);
  }
  SUBCASE("a token outside the vocabulary") {
    std::vector<std::byte> bad = good;
    const std::size_t first_token = token_count_offset(model.config().architecture) + 8;
    const std::int32_t minus = -5;
    std::memcpy(bad.data() + first_token, &minus, sizeof(minus));
    write_file(path, bad);
    CHECK(error_of(path, target).find("token 0 is -5") != std::string::npos);
  }
  SUBCASE("a directory") {
    CHECK(error_of(smol::test::scratch_dir(), target).find("not a regular file") !=
          std::string::npos);
  }
  SUBCASE("a missing file") {
    CHECK(error_of(smol::test::scratch_dir() / "nope.bin", target).find("cannot open") !=
          std::string::npos);
  }
  // A refused file leaves the target as it was: nothing filled.
  CHECK(target.n_filled() == 0);
}

}  // namespace test_session_file
