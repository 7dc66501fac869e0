#include <iostream>
#include <smol/smol.hpp>

// hello_chat MODEL.gguf [QUESTION]: streams the model's answer to stdout.
int main(int argc, char** argv) try {
  if (argc < 2) return std::cerr << "usage: hello_chat MODEL.gguf [QUESTION]\n", 2;
  smol::Chat chat(argv[1]);  // the file's own chat template, one thread per core
  chat.ask(argc > 2 ? argv[2] : "What is the capital of France?",
           [](std::string_view piece) { std::cout << piece << std::flush; });
  std::cout << '\n';
} catch (const std::exception& error) {
  std::cerr << "hello_chat: " << error.what() << '\n';
  return 1;
}
