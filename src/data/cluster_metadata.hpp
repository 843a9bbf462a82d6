// The client's view of the cluster's metadata (brokers, topics, partition leaders), as the
// runtime's cluster (net/cluster.hpp) keeps it. Plain data: the pure cores read it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/primitives.hpp"

namespace kgroup::data {

struct broker_address {
  std::int32_t node_id = -1;
  std::string host;
  std::uint16_t port = 0;
  std::optional<std::string> rack;
  bool operator==(const broker_address&) const = default;
};

struct partition_metadata {
  std::int32_t partition = 0;
  std::int16_t error_code = 0;
  std::int32_t leader = -1;
  std::int32_t leader_epoch = -1;
  std::vector<std::int32_t> replicas;
  std::vector<std::int32_t> isr;
};

struct topic_metadata {
  std::string name;
  protocol::uuid topic_id;
  std::int16_t error_code = 0;
  bool is_internal = false;
  std::vector<partition_metadata> partitions;  // sorted by partition index
};

struct cluster_metadata {
  std::string cluster_id;
  std::int32_t controller_id = -1;
  std::map<std::int32_t, broker_address> brokers;
  std::map<std::string, topic_metadata> topics;
  std::chrono::steady_clock::time_point updated{};
  std::uint64_t refreshes = 0;  // successful refreshes so far
};

}  // namespace kgroup::data
