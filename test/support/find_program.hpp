// Finding a program on PATH, as a shell would (for tests and benchmarks that run other tools).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kgroup::test {

/// The first executable `name` in the directories of $PATH (/usr/bin:/bin when unset); an empty
/// directory is the current one. Empty when none is found.
inline std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace kgroup::test
