// Proves a downstream project can include smol, link it and run its kernels.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <smol/smol.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer MODEL.gguf\n");
    return 2;
  }
  try {
    const smol::Model model = smol::Model::open(argv[1]);
    const auto architecture = model.file().get<std::string_view>("general.architecture");
    std::printf("architecture: %.*s, tensors: %zu\n", static_cast<int>(architecture.size()),
                architecture.data(), model.file().tensors().size());

    smol::Context context(1);
    smol::Transformer session(model, context);
    const std::vector<std::int32_t> prompt = {1, 2, 3};
    const auto logits = session.forward(prompt, 0);
    std::printf("isa: %.*s, logits: %zu\n", static_cast<int>(smol::isa_name(context.isa()).size()),
                smol::isa_name(context.isa()).data(), logits.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
