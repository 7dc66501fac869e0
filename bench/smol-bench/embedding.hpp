// --embedding: embedding throughput, as a retrieval index is built: D documents of PP
// random tokens each, through the Embedder (model/embedder.hpp) with a batch of BATCH
// tokens per pass, timed whole after one untimed warm-up pass. Reports tokens/s and
// documents/s per repetition and their mean, for the same sitting's llama.cpp figure
// (llama-embedding with the same batch: bench/README.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "smol/model/embedder.hpp"
#include "test_runner.hpp"

namespace smol::bench {

struct EmbeddingSettings {
  std::size_t documents = 256;
  std::size_t document_tokens = 200;
  std::size_t batch = 2048;
};

inline int run_embedding_test(const Model& model, Context& context, RandomTokens& tokens,
                              const EmbeddingSettings& settings, std::size_t repetitions,
                              KvTypes kv_type) {
  using Clock = std::chrono::steady_clock;
  Embedder embedder(model, context, {.batch = settings.batch, .kv_type = kv_type});
  std::vector<std::vector<std::int32_t>> documents;
  for (std::size_t d = 0; d < settings.documents; ++d) {
    documents.push_back(tokens.draw(settings.document_tokens));
  }
  embedder.embed(std::span(documents).first(1));  // warm-up: every weight and scratch page
  std::printf(
      "| documents | tokens each | batch | pooling | repetition |   seconds |   tokens/s |"
      "  docs/s |\n|-----------|-------------|-------|---------|------------|-----------|"
      "------------|---------|\n");
  double total_seconds = 0;
  for (std::size_t r = 0; r < repetitions; ++r) {
    const auto started = Clock::now();
    const auto vectors = embedder.embed(documents);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    total_seconds += seconds;
    const double n_tokens = double(settings.documents * settings.document_tokens);
    std::printf("| %9zu | %11zu | %5zu | %7s | %10zu | %9.3f | %10.1f | %7.2f |\n",
                settings.documents, settings.document_tokens, settings.batch,
                std::string(pooling_name(embedder.pooling())).c_str(), r + 1, seconds,
                n_tokens / seconds, double(settings.documents) / seconds);
    if (vectors.size() != documents.size()) return 1;
  }
  const double mean = total_seconds / double(repetitions);
  std::printf("\nmean: %.1f tokens/s, %.2f documents/s\n",
              double(settings.documents * settings.document_tokens) / mean,
              double(settings.documents) / mean);
  return 0;
}

}  // namespace smol::bench
