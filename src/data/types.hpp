// The data path's vocabulary, shared by its pure cores (src/data), the runtime's cross-thread
// state and the facade. Plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kgroup/types.hpp"

namespace kgroup::detail {

/// An offset with its metadata and leader epoch (-1: none), as committed or read back.
struct offset_meta {
  std::int64_t offset = -1;
  std::string metadata;
  std::int32_t epoch = -1;
};
/// A position: the next offset and the leader epoch of the record before it (-1: unknown).
struct epoch_offset {
  std::int64_t offset = -1;
  std::int32_t epoch = -1;
  bool operator==(const epoch_offset&) const = default;
};

}  // namespace kgroup::detail
