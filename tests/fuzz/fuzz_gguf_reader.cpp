// libFuzzer target for the GGUF reader.
//
// Any input must either parse or throw smol::Error; sanitizers catch every read the
// validation failed to bound. What parses must also hold up to every accessor and
// survive a copy through the writer that parses again with the same contents.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "gguf_samples.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

namespace {

[[noreturn]] void invariant_broken() {
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::optional<smol::gguf::GgufFile> file;
  try {
    file.emplace(smol::gguf::GgufFile::from_borrowed_bytes(bytes, "fuzz.gguf"));
  } catch (const smol::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  smol::gguf::samples::exercise(*file);

  // A valid file may declare any power-of-two alignment up to 2^31, and its faithful copy
  // is then padded that far: a few input bytes can ask for gigabytes. The round trip is
  // checked for copies up to 64 MiB (file_size() is computed, not allocated).
  constexpr std::uint64_t kMaxCopyBytes = std::uint64_t{64} << 20;
  std::vector<std::byte> copy;
  try {
    const auto writer = smol::gguf::GgufWriter::copy_of(*file);
    if (writer.file_size() > kMaxCopyBytes) return 0;
    copy = writer.to_bytes();
  } catch (const smol::Error&) {
    invariant_broken();  // the writer refused something the reader accepted
  }
  try {
    const auto reread = smol::gguf::GgufFile::from_bytes(std::move(copy), "copy.gguf");
    if (reread.metadata().size() != file->metadata().size() ||
        reread.tensors().size() != file->tensors().size()) {
      invariant_broken();
    }
    for (std::size_t i = 0; i < file->metadata().size(); ++i) {
      const auto& before = file->metadata()[i];
      const auto& after = reread.metadata()[i];
      if (before.key != after.key || before.value.type() != after.value.type() ||
          before.value.payload().size() != after.value.payload().size() ||
          std::memcmp(before.value.payload().data(), after.value.payload().data(),
                      before.value.payload().size()) != 0) {
        invariant_broken();
      }
    }
    for (std::size_t i = 0; i < file->tensors().size(); ++i) {
      const auto& before = file->tensors()[i];
      const auto& after = reread.tensors()[i];
      if (before.name != after.name || before.type != after.type || before.dims != after.dims ||
          std::memcmp(before.data, after.data, before.bytes) != 0) {
        invariant_broken();
      }
    }
  } catch (const smol::Error&) {
    invariant_broken();  // the writer produced a file the reader rejects
  }
  return 0;
}
