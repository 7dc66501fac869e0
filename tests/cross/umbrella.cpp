// Compiled for aarch64 by tests/cross_aarch64.cmake and by clang by tests/clang_syntax.cmake:
// the whole public API must build there.
#include <smol/smol.hpp>

int main() {
  return 0;
}
