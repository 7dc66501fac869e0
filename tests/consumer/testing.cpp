// Proves a downstream project can link smol::testing: the f32 reference forward (Eigen)
// and the synthetic-model generator compile, link and run.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <smol/smol.hpp>
#include <smol/testing/reference_forward.hpp>
#include <smol/testing/synthetic.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_testing MODEL.gguf\n");
    return 2;
  }
  try {
    const smol::Model model = smol::Model::open(argv[1]);
    const smol::ReferenceForward reference(model);
    const std::vector<std::int32_t> prompt = {1, 2, 3};
    const auto logits = reference.logits(prompt);
    std::printf("reference logits: %td x %td\n", logits.rows(), logits.cols());

    const auto synthetic = smol::plan_synthetic_tensors(smol::synthetic_preset("tiny"));
    std::printf("synthetic tiny tensors: %zu\n", synthetic.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_testing: %s\n", e.what());
    return 1;
  }
  return 0;
}
