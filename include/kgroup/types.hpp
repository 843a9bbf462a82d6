/// \file
/// Small value types shared by the public API.
#pragma once

#include "kgroup/export.hpp"

#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace kgroup {

/// A partition of a topic. Ordered by topic, then partition.
struct KGROUP_EXPORT TopicPartition {
  std::string topic;           ///< topic name
  std::int32_t partition = 0;  ///< partition number, from 0
  /// Orders by topic, then partition (for std::set and std::map keys).
  auto operator<=>(const TopicPartition&) const = default;
  /// Same topic and partition.
  bool operator==(const TopicPartition&) const = default;
};

/// Hash of a TopicPartition, for std::unordered_map and std::unordered_set keys.
struct KGROUP_EXPORT TopicPartitionHash {
  /// Combines the hashes of topic and partition.
  std::size_t operator()(const TopicPartition& tp) const noexcept {
    return std::hash<std::string>{}(tp.topic) * 31 + static_cast<std::size_t>(tp.partition);
  }
};

/// A topic pattern the group coordinator evaluates (KIP-848, group.protocol=consumer): RE2/J
/// syntax, matched against whole topic names by the broker, not by this client. Java's
/// SubscriptionPattern. Explicit, so a string is never taken for a pattern by accident.
struct KGROUP_EXPORT SubscriptionPattern {
  /// A pattern with RE2/J text `p` (not checked here: the broker compiles it).
  explicit SubscriptionPattern(std::string p) : pattern(std::move(p)) {}
  std::string pattern;  ///< the RE2/J expression, sent as is
  /// Same pattern text.
  bool operator==(const SubscriptionPattern&) const = default;
};

}  // namespace kgroup
