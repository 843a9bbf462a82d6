// Shared helpers of the fuzz targets.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace kgroup::fuzz {

/// A finding that is not a memory error: print what was violated and abort, so libFuzzer saves
/// the input as a crash.
[[noreturn]] inline void finding(const char* what, const char* detail = "") {
  std::fprintf(stderr, "FUZZ FINDING: %s %s\n", what, detail);
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, const char* what, const char* detail = "") {
  if (!ok) finding(what, detail);
}

}  // namespace kgroup::fuzz
