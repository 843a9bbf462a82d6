/// \file
/// A point-in-time snapshot of one Consumer: who it is in its group, what it owns, how its
/// rebalances went, and the Java client's consumer-coordinator and fetch-manager metrics.
/// Returned by Consumer::metrics(), passed to the statistics callback, and served by the embedded
/// HTTP endpoint (/metrics, /status, the dashboard).
#pragma once

#include "kgroup/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kgroup/types.hpp"

namespace kgroup {

/// A distribution, as a Prometheus histogram carries it: latencies in seconds, sizes in bytes.
struct KGROUP_EXPORT Histogram {
  std::vector<double> bounds;          ///< upper bounds, ascending; +Inf is implied
  std::vector<std::uint64_t> buckets;  ///< observations <= bounds[i] (cumulative), one per bound
  std::uint64_t count = 0;             ///< all observations (the +Inf bucket)
  double sum = 0;                      ///< sum of all observations
};

/// One owned partition.
struct KGROUP_EXPORT PartitionMetrics {
  TopicPartition partition;     ///< the partition
  std::int64_t position = -1;   ///< offset of the next record poll() returns; -1 unknown
  std::int64_t committed = -1;  ///< last offset this consumer committed (or fetched as committed); -1 none
  std::int64_t high_watermark = -1;  ///< from the last fetch response; -1 unknown
  std::int64_t lag = -1;             ///< high_watermark - position; -1 unknown
  bool paused = false;               ///< paused by Consumer::pause()
  /// The broker the last records came from: the leader, or with client.rack set the replica the
  /// leader named (KIP-392). -1 before any record.
  std::int32_t read_replica = -1;
  std::int64_t log_start_offset = -1;  ///< from the last fetch response (Fetch v5+); -1 unknown
  std::int64_t lead = -1;              ///< position - log_start_offset (Java's records-lead); -1 unknown
};

/// Why a rebalance started, as this member saw it.
enum class RebalanceCause {
  member_joined,        ///< this member subscribed (its first join), or the leader saw new members
  member_left,          ///< the leader saw members leave (detail names them)
  group_rebalancing,    ///< the coordinator asked for a rebalance (another member joined or left)
  poll_timeout,         ///< this member exceeded max.poll.interval.ms and left
  session_timeout,      ///< this member was removed (session timed out, unknown member, fenced generation)
  metadata_change,      ///< the leader saw the partition count of a subscribed topic change
  subscription_change,  ///< subscribe() changed the topics, or a pattern now matches other topics
  enforced,             ///< enforce_rebalance()
  cooperative_round,    ///< the second round of a cooperative rebalance (revoked partitions move)
  error,                ///< a rejected assignment or a group error forced a rejoin
};
/// The enumerator's name ("member_joined", ...), as the HTTP endpoint and logs show it.
KGROUP_EXPORT const char* to_string(RebalanceCause c) noexcept;

/// One rebalance this member took part in, from the moment it stopped being a stable member (or
/// first joined) until it was stable again.
struct KGROUP_EXPORT RebalanceRecord {
  RebalanceCause cause = RebalanceCause::group_rebalancing;  ///< why it started
  std::string detail;                                        ///< human-readable reason
  std::int64_t start_ms = 0;             ///< wall clock, milliseconds since the Unix epoch
  std::int64_t duration_ms = -1;         ///< -1 while in progress
  std::int32_t generation = -1;          ///< generation it ended in
  bool completed = false;                ///< false: still in progress, or abandoned (left, fatal error)
  std::vector<TopicPartition> revoked;   ///< partitions revoked in it
  std::vector<TopicPartition> assigned;  ///< partitions assigned in it
  std::vector<TopicPartition> lost;      ///< partitions lost in it
};

/// Everything Consumer::metrics() reports: identity, assignment, the Java client's
/// consumer-coordinator and fetch-manager metrics (same names and meanings, in snake_case),
/// distributions, oddities of the wire and the rebalance history. `_ms` fields are milliseconds,
/// `_seconds_ago` and histograms seconds; -1 means unknown or never.
struct KGROUP_EXPORT ConsumerMetrics {
  std::int64_t timestamp_ms = 0;  ///< when the snapshot was taken, ms since the Unix epoch

  // ---- identity ----
  std::string client_id;                         ///< client.id
  std::string group_id;                          ///< group.id
  std::string member_id;                         ///< given by the coordinator; empty before joining
  std::optional<std::string> group_instance_id;  ///< group.instance.id of a static member
  std::int32_t generation = -1;                  ///< generation (KIP-848: member epoch); -1 none
  std::string state;                             ///< membership state ("stable", "joining", ...)
  std::int32_t coordinator = -1;                 ///< broker id, -1 unknown
  /// "eager" or "cooperative" (group.protocol=classic), "consumer" (KIP-848)
  std::string protocol;
  std::string assignor;       ///< the assignor the group chose (empty before the first join)
  bool leader = false;        ///< whether this member leads the group (runs the assignor)
  std::string http_endpoint;  ///< "host:port" of the embedded HTTP endpoint, empty when off

  // ---- assignment ----
  std::vector<PartitionMetrics> partitions;  ///< owned partitions, sorted
  std::int64_t assigned_partitions = 0;      ///< how many partitions it owns

  // ---- consumer-coordinator metrics (Java meanings) ----
  std::int64_t rebalance_total = 0;           ///< rebalances completed
  std::int64_t failed_rebalance_total = 0;    ///< JoinGroup/SyncGroup attempts that failed
  double rebalance_latency_avg_ms = 0;        ///< mean duration of a completed rebalance
  double rebalance_latency_max_ms = 0;        ///< longest completed rebalance
  double rebalance_latency_total_ms = 0;      ///< time spent in completed rebalances, in all
  double rebalance_rate_per_hour = 0;         ///< rebalances completed in the last hour
  double last_rebalance_seconds_ago = -1;     ///< -1: none yet
  double join_time_avg_ms = 0;                ///< mean JoinGroup round trip
  double join_time_max_ms = 0;                ///< longest JoinGroup round trip
  double sync_time_avg_ms = 0;                ///< mean SyncGroup round trip
  double sync_time_max_ms = 0;                ///< longest SyncGroup round trip
  double heartbeat_response_time_max_ms = 0;  ///< longest heartbeat round trip
  std::int64_t heartbeat_total = 0;           ///< heartbeats answered
  double last_heartbeat_seconds_ago = -1;     ///< -1: none yet
  double commit_latency_avg_ms = 0;           ///< mean OffsetCommit round trip
  double commit_latency_max_ms = 0;           ///< longest OffsetCommit round trip
  std::int64_t commit_total = 0;              ///< commits answered
  std::int64_t join_total = 0;                ///< successful JoinGroups
  std::int64_t sync_total = 0;                ///< successful SyncGroups
  double failed_rebalance_rate_per_hour = 0;  ///< failed attempts in the last hour
  // Distributions (seconds): whole rebalances, JoinGroup and SyncGroup round trips, heartbeat
  // responses, commits, and the listener's callbacks (Java's partition-assigned/revoked/lost
  // latency).
  Histogram rebalance_latency;            ///< seconds per whole rebalance
  Histogram join_latency;                 ///< seconds per JoinGroup round trip
  Histogram sync_latency;                 ///< seconds per SyncGroup round trip
  Histogram heartbeat_latency;            ///< seconds per heartbeat round trip
  Histogram commit_latency;               ///< seconds per OffsetCommit round trip
  Histogram partitions_assigned_latency;  ///< seconds per on_partitions_assigned() call
  Histogram partitions_revoked_latency;   ///< seconds per on_partitions_revoked() call
  Histogram partitions_lost_latency;      ///< seconds per on_partitions_lost() call

  // ---- fetch-manager and poll metrics ----
  std::int64_t records_consumed_total = 0;  ///< records returned by poll()
  std::int64_t bytes_consumed_total = 0;    ///< record batch bytes returned by poll()
  double records_consumed_rate = 0;         ///< per second, over the last 30 s
  double bytes_consumed_rate = 0;           ///< bytes per second, over the last 30 s
  /// Positions checked against the leader's log (OffsetForLeaderEpoch, KIP-320) after a leader
  /// change or when restored from a committed offset with its epoch.
  std::int64_t offset_validations_total = 0;
  /// Of those validations, the ones whose log had been truncated below the position (an unclean
  /// leader election).
  std::int64_t log_truncations_total = 0;
  /// Owned partitions whose topic was found deleted and created again under its name (a new
  /// topic id, KIP-516): their positions were reset by auto.offset.reset.
  std::int64_t topic_recreations_total = 0;
  std::int64_t records_lag_max = -1;      ///< largest lag of an owned partition, -1 unknown
  std::int64_t records_lead_min = -1;     ///< smallest lead of an owned partition, -1 unknown
  Histogram fetch_latency;                ///< seconds from a Fetch request to its answer
  double fetch_latency_max_ms = 0;        ///< longest Fetch round trip (Java's fetch-latency-max)
  Histogram fetch_size;                   ///< record bytes per Fetch answer
  Histogram fetch_throttle_time;          ///< seconds the broker throttled a Fetch (throttle_time_ms)
  Histogram time_between_poll;            ///< seconds between poll() calls
  double time_between_poll_avg_ms = 0;    ///< mean time between poll() calls
  double time_between_poll_max_ms = 0;    ///< longest time between poll() calls
  double last_poll_seconds_ago = -1;      ///< -1: poll() never called
  double poll_idle_ratio_avg = 0;         ///< share of time spent waiting inside poll()
  std::int64_t max_poll_interval_ms = 0;  ///< max.poll.interval.ms

  // ---- the wire ----
  /// Responses that decoded completely with bytes left after their last field: accepted (as Java
  /// does), logged once per broker and API. Non-zero means a broker (or proxy) writes more than
  /// the protocol defines.
  std::int64_t responses_with_trailing_bytes_total = 0;
  /// Responses dropped whole because they named a topic, partition, group or key their request
  /// did not ask for (a broker writing a field too wide shifts every later entry): never applied,
  /// the request is retried. Logged once per broker and API.
  std::int64_t responses_mismatched_total = 0;
  std::int64_t authentications_total = 0;    ///< SASL authentications completed
  std::int64_t reauthentications_total = 0;  ///< SASL re-authentications (KIP-368)
  /// Connections ended for good because a broker refused the credentials (SASL) or its TLS
  /// certificate was not trusted.
  std::int64_t authentication_failures_total = 0;
  /// Times the consumer went back to bootstrap.servers (metadata.recovery.strategy=rebootstrap):
  /// no broker it knew could be reached, metadata was missing for
  /// metadata.recovery.rebootstrap.trigger.ms, or a broker asked (REBOOTSTRAP_REQUIRED).
  std::int64_t rebootstraps_total = 0;

  // ---- history ----
  /// The last 50 rebalances, oldest first (the last may be in progress).
  std::vector<RebalanceRecord> rebalances;
};

}  // namespace kgroup
