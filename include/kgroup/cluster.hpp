/// \file
/// A one-shot look at a Kafka cluster: brokers, the API versions kgroup negotiates with each,
/// topics and partitions. Useful for diagnostics ("can my application reach the cluster, and which
/// protocol versions will it speak?"); the Consumer keeps its own live view internally.
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
  std::int16_t api_key = 0;      ///< Kafka's API key (JoinGroup is 11)
  std::string name;              ///< e.g. "JoinGroup"
  std::int16_t broker_min = -1;  ///< lowest version the broker offers; -1: it does not offer this API
  std::int16_t broker_max = -1;  ///< highest version the broker offers; -1: it does not offer this API
  std::int16_t client_min = 0;   ///< lowest version kgroup speaks
  std::int16_t client_max = 0;   ///< highest version kgroup speaks
  std::int16_t chosen = -1;      ///< highest common version, -1 if none
};

/// A broker of the cluster (from the Metadata answer) and what describe_cluster() learned by
/// connecting to it.
struct KGROUP_EXPORT BrokerInfo {
  std::int32_t node_id = -1;                 ///< broker id (node.id / broker.id)
  std::string host;                          ///< advertised host name
  std::uint16_t port = 0;                    ///< advertised port
  std::optional<std::string> rack;           ///< broker.rack, if set
  bool reachable = false;                    ///< whether describe_cluster() connected to it in time
  std::vector<ApiVersionInfo> api_versions;  ///< the APIs kgroup uses (empty when not reachable)
};

/// A partition as the cluster's metadata describes it.
struct KGROUP_EXPORT PartitionInfo {
  std::int32_t partition = 0;          ///< partition number
  std::int32_t leader = -1;            ///< broker id of the leader, -1 when it has none
  std::int32_t leader_epoch = -1;      ///< the leader's epoch, -1 unknown (Metadata v7+)
  std::vector<std::int32_t> replicas;  ///< broker ids of all replicas
  std::vector<std::int32_t> isr;       ///< broker ids of the in-sync replicas
  std::int16_t error_code = 0;         ///< a kafka_errc value for this partition, 0 when none
};

/// A topic as the cluster's metadata describes it.
struct KGROUP_EXPORT TopicInfo {
  std::string name;                       ///< topic name
  std::string topic_id;                   ///< base64 form, empty if the broker does not send ids
  std::int16_t error_code = 0;            ///< a kafka_errc value for this topic, 0 when none
  bool is_internal = false;               ///< an internal topic (__consumer_offsets, ...)
  std::vector<PartitionInfo> partitions;  ///< its partitions
};

/// What describe_cluster() found.
struct KGROUP_EXPORT ClusterInfo {
  std::string cluster_id;           ///< the cluster's id, empty when the broker sends none
  std::int32_t controller_id = -1;  ///< broker id of the controller, -1 unknown
  std::vector<BrokerInfo> brokers;  ///< every broker the metadata lists
  std::vector<TopicInfo> topics;    ///< every topic, internal ones included
};

/// Connects to `config`'s bootstrap.servers, fetches metadata for all topics and negotiates API
/// versions with every broker. Blocks the calling thread (it runs its own event loop) for at most
/// `timeout`. Logs, on the calling thread, to `config`'s log sink (Config::set_log_sink), else
/// the default sink. Thread-safe: independent calls may run concurrently.
/// \param config the cluster to ask (bootstrap.servers, security settings)
/// \param timeout how long to wait for the metadata and the version negotiations
/// \returns the brokers, their API versions and the topics; a broker that could not be reached in
///   time has reachable false and no API versions
/// \throws kgroup::Error client_errc::invalid_config for a bad config (fatal: fix it);
///   client_errc::request_timed_out or no_brokers_available when the cluster cannot be reached in
///   time, or the Metadata request's error (retriable: call again)
KGROUP_EXPORT ClusterInfo describe_cluster(const Config& config, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace kgroup
