// How long GgufFile::open takes on a file shaped like SmolLM3-3B Q4_K_M (326 tensors,
// ~1.9 GB, a 128256-token vocabulary with its merges), and proof that it leaves the
// tensor data alone.
//
// The file is written once with GgufWriter's header and then extended with ftruncate,
// so its data section is a sparse hole: it costs no disk, and any page of it that is
// read shows up as a page fault. Two benchmarks in the same run compare:
//   open             - map + validate; page faults stay at the header's few pages
//   open_touch_data  - the same, then one read per page of every tensor
// The "faults" counter is minor page faults per iteration; "header_MB" is what open
// parses; "data_pages_cached" counts data-section pages in the page cache afterwards
// (0 after `open`, which runs first, on a file nothing has read). Compare the two
// rows; the absolute times depend on the machine.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"

namespace bench_gguf_open {

using smol::GgmlType;
using smol::gguf::GgufFile;
using smol::gguf::GgufWriter;
using smol::gguf::Value;

constexpr std::uint64_t kHidden = 2048, kFfn = 11008, kKv = 512, kVocab = 128256;
constexpr int kBlocks = 36;
constexpr std::size_t kMerges = 280000;

GgufWriter model_writer() {
  GgufWriter writer;
  writer.set("general.architecture", "smollm3");
  writer.set("general.name", "bench-smollm3-3b-shape");
  writer.set("general.file_type", std::uint32_t{15});
  writer.set("smollm3.block_count", std::uint32_t{kBlocks});
  writer.set("smollm3.embedding_length", std::uint32_t{kHidden});
  writer.set("smollm3.feed_forward_length", std::uint32_t{kFfn});
  writer.set("smollm3.attention.head_count", std::uint32_t{16});
  writer.set("smollm3.attention.head_count_kv", std::uint32_t{4});
  writer.set("smollm3.rope.freq_base", 5e6f);
  std::vector<std::string> tokens(kVocab);
  // smol::cat rather than "tok" + std::to_string(i): GCC 12 warns falsely (-Wrestrict,
  // its bug 105329) on string concatenation with a literal at -O2.
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = smol::cat("tok", i);
  std::vector<std::string> merges(kMerges);
  for (std::size_t i = 0; i < merges.size(); ++i) merges[i] = smol::cat("m", i, " x");
  writer.set("tokenizer.ggml.model", "gpt2");
  writer.set("tokenizer.ggml.tokens", Value::strings(tokens));
  writer.set("tokenizer.ggml.token_type", Value::array(std::vector<std::int32_t>(kVocab, 1)));
  writer.set("tokenizer.ggml.merges", Value::strings(merges));
  writer.set("tokenizer.chat_template", std::string(3795, 'x'));

  // Never called: the data section is a hole made by ftruncate.
  const auto hole = [](std::span<std::byte>) { smol::fail("tensor data is not generated"); };
  const auto add = [&](const std::string& name, GgmlType type, smol::gguf::Shape shape) {
    writer.add_tensor_generated(name, type, shape, hole);
  };
  add("token_embd.weight", GgmlType::Q6_K, {kHidden, kVocab});
  add("output_norm.weight", GgmlType::F32, {kHidden});
  for (int b = 0; b < kBlocks; ++b) {
    const std::string p = "blk." + std::to_string(b) + ".";
    const GgmlType heavy = (b < 4 || b > 29 || b % 3 == 0) ? GgmlType::Q6_K : GgmlType::Q4_K;
    add(p + "attn_norm.weight", GgmlType::F32, {kHidden});
    add(p + "attn_q.weight", GgmlType::Q4_K, {kHidden, kHidden});
    add(p + "attn_k.weight", GgmlType::Q4_K, {kHidden, kKv});
    add(p + "attn_v.weight", heavy, {kHidden, kKv});
    add(p + "attn_output.weight", GgmlType::Q4_K, {kHidden, kHidden});
    add(p + "ffn_norm.weight", GgmlType::F32, {kHidden});
    add(p + "ffn_gate.weight", GgmlType::Q4_K, {kHidden, kFfn});
    add(p + "ffn_up.weight", GgmlType::Q4_K, {kHidden, kFfn});
    add(p + "ffn_down.weight", heavy, {kFfn, kHidden});
  }
  return writer;
}

// The sparse model file, written on first use and removed at exit.
class SparseModel {
 public:
  static const SparseModel& get() {
    static const SparseModel model;
    return model;
  }
  const std::string& path() const { return path_; }
  std::uint64_t header_bytes() const { return header_bytes_; }

  SparseModel(const SparseModel&) = delete;
  SparseModel& operator=(const SparseModel&) = delete;
  ~SparseModel() { std::remove(path_.c_str()); }

 private:
  SparseModel()
      : path_((std::filesystem::temp_directory_path() /
               ("smol-bench-gguf-open-" + std::to_string(::getpid()) + ".gguf"))
                  .string()) {
    const GgufWriter writer = model_writer();
    const std::vector<std::byte> header = writer.header_bytes();
    header_bytes_ = header.size();
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) smol::fail(path_, ": cannot create");
    const bool ok =
        ::write(fd, header.data(), header.size()) == static_cast<ssize_t>(header.size()) &&
        ::ftruncate(fd, static_cast<off_t>(writer.file_size())) == 0;
    ::close(fd);
    if (!ok) smol::fail(path_, ": cannot write the sparse model");
  }

  std::string path_;
  std::uint64_t header_bytes_ = 0;
};

long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Pages of the data section that are in the page cache. The file is new and sparse, so
// a page is there only if something read it.
double cached_data_pages(const GgufFile& file) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t first = (file.data_offset() + page - 1) / page * page;
  if (first >= file.bytes().size()) return 0;
  const std::size_t length = file.bytes().size() - first;
  std::vector<unsigned char> resident((length + page - 1) / page);
  auto* start = const_cast<std::byte*>(file.bytes().data() + first);
  if (::mincore(start, length, resident.data()) != 0) return -1;
  std::size_t count = 0;
  for (const unsigned char flag : resident) count += flag & 1u;
  return static_cast<double>(count);
}

// Counters shared by both rows; `faults` is the total over the timed loop.
void report(benchmark::State& state, long faults) {
  const auto& model = SparseModel::get();
  const GgufFile file = GgufFile::open(model.path());
  state.counters["data_pages_cached"] = cached_data_pages(file);
  state.counters["tensors"] = static_cast<double>(file.tensors().size());
  state.counters["file_GB"] = static_cast<double>(file.bytes().size()) / 1e9;
  state.counters["header_MB"] = static_cast<double>(model.header_bytes()) / 1e6;
  state.counters["faults"] =
      benchmark::Counter(static_cast<double>(faults), benchmark::Counter::kAvgIterations);
}

void open(benchmark::State& state) {
  const auto& model = SparseModel::get();
  long faults = 0;
  for (auto _ : state) {
    const long before = minor_faults();
    const GgufFile file = GgufFile::open(model.path());
    benchmark::DoNotOptimize(file.tensors().data());
    faults += minor_faults() - before;
  }
  report(state, faults);
}
BENCHMARK(open)->Unit(benchmark::kMillisecond);

void open_touch_data(benchmark::State& state) {
  const auto& model = SparseModel::get();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  long faults = 0;
  for (auto _ : state) {
    const long before = minor_faults();
    const GgufFile file = GgufFile::open(model.path());
    unsigned sum = 0;
    for (const auto& tensor : file.tensors()) {
      for (std::size_t i = 0; i < tensor.bytes; i += page)
        sum += static_cast<unsigned>(tensor.data[i]);
    }
    benchmark::DoNotOptimize(sum);
    faults += minor_faults() - before;
  }
  report(state, faults);
}
BENCHMARK(open_touch_data)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace bench_gguf_open
