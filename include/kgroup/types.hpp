// Small value types shared by the public API.
#pragma once

#include "kgroup/export.hpp"

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace kgroup {

/// A partition of a topic. Ordered by topic, then partition.
struct KGROUP_EXPORT TopicPartition {
  std::string topic;
  std::int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;
  bool operator==(const TopicPartition&) const = default;
};

struct KGROUP_EXPORT TopicPartitionHash {
  std::size_t operator()(const TopicPartition& tp) const noexcept {
    return std::hash<std::string>{}(tp.topic) * 31 + static_cast<std::size_t>(tp.partition);
  }
};

}  // namespace kgroup
