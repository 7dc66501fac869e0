// SMOL_TEST_FEWER_REPEATS=1 (set by the sanitize stage of scripts/test.sh, and by
// tests/CMakeLists.txt on the copies of the model suites forced to a non-default
// instruction set): a suite that runs one code path many times over (more prompts, seeds
// or shapes of the same kind) runs it fewer times. Under AddressSanitizer +
// UndefinedBehaviorSanitizer each pass costs ten times its Release time, and what the
// sanitizers look for (a bad address, an overflow) shows on the first pass through a
// path; the Release stage's plain run still runs every repetition and holds the numbers
// to their full checks. A suite never skips a path this way: it takes one of the
// repetitions, not none.
#pragma once

#include <cstdlib>

namespace smol::test {

inline bool fewer_repeats() {
  static const bool fewer = [] {
    const char* env = std::getenv("SMOL_TEST_FEWER_REPEATS");
    return env != nullptr && *env != '\0' && *env != '0';
  }();
  return fewer;
}

}  // namespace smol::test
