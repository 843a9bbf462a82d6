// A one-shot look at a Kafka cluster: brokers, the API versions kgroup negotiates with each,
// topics and partitions. Useful for diagnostics ("can my application reach the cluster, and which
// protocol versions will it speak?"); the Consumer keeps its own live view internally.
#pragma once

#include "kgroup/export.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kgroup/config.hpp"

namespace kgroup {

/// One API's version negotiation with one broker.
struct KGROUP_EXPORT ApiVersionInfo {
  std::int16_t api_key = 0;
  std::string name;             // e.g. "JoinGroup"
  std::int16_t broker_min = -1; // -1: the broker does not offer this API
  std::int16_t broker_max = -1;
  std::int16_t client_min = 0;
  std::int16_t client_max = 0;
  std::int16_t chosen = -1;     // highest common version, -1 if none
};

struct KGROUP_EXPORT BrokerInfo {
  std::int32_t node_id = -1;
  std::string host;
  std::uint16_t port = 0;
  std::optional<std::string> rack;
  bool reachable = false;
  std::vector<ApiVersionInfo> api_versions;  // the APIs kgroup uses
};

struct KGROUP_EXPORT PartitionInfo {
  std::int32_t partition = 0;
  std::int32_t leader = -1;
  std::int32_t leader_epoch = -1;
  std::vector<std::int32_t> replicas;
  std::vector<std::int32_t> isr;
  std::int16_t error_code = 0;
};

struct KGROUP_EXPORT TopicInfo {
  std::string name;
  std::string topic_id;  // base64 form, empty if the broker does not send ids
  std::int16_t error_code = 0;
  bool is_internal = false;
  std::vector<PartitionInfo> partitions;
};

struct KGROUP_EXPORT ClusterInfo {
  std::string cluster_id;
  std::int32_t controller_id = -1;
  std::vector<BrokerInfo> brokers;
  std::vector<TopicInfo> topics;
};

/// Connects to `config`'s bootstrap.servers, fetches metadata for all topics and negotiates API
/// versions with every broker. Blocks the calling thread (it runs its own event loop) for at most
/// `timeout`. Throws kgroup::Error: client_errc::invalid_config for a bad config,
/// no_brokers_available / request_timed_out when the cluster cannot be reached in time. Logs, on
/// the calling thread, to `config`'s log sink (Config::set_log_sink), else the default sink.
/// Thread-safe: independent calls may run concurrently.
KGROUP_EXPORT ClusterInfo describe_cluster(const Config& config, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace kgroup
