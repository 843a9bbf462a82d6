// The Fetch path's decisions (background thread), sans-I/O: which owned partitions are fetched
// now and from which broker, the per-broker Fetch requests (one in flight per broker, each
// through its KIP-227 fetch_session), and what a Fetch answer means for each partition (the
// error ladder: leader changes, out of range, preferred replicas). No Asio, no threads, no clock
// reads (time is an argument), no logging: the driver (fetch/fetcher.cpp) sends, receives, arms
// its timer, logs the notes and hands the slices to the user thread.
//
//   plan(now, md)                    -> requests to send, and what else to do (refresh metadata,
//                                       validate, report missing partitions, plan again at a time)
//   not_sent(now, node, partitions)  the driver had no connection for a planned request: undone
//   fill(node, req, version, parts)  writes a request's partition lists once its version is chosen
//   on_answer(now, md, node, failure, answer, sent) -> slices of records, notes, plan again at a time
//
// The per-partition positions are data/fetch_positions.hpp's: the planner drives its Fetch events.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "data/cluster_metadata.hpp"
#include "data/fetch_positions.hpp"
#include "data/fetch_session.hpp"
#include "data/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data {

/// The Fetch parameters of the configuration.
struct fetch_planner_options {
  std::int32_t fetch_min_bytes = 1;
  std::int32_t fetch_max_bytes = 52428800;
  std::int32_t fetch_max_wait_ms = 500;
  std::int32_t max_partition_fetch_bytes = 1048576;
  std::int8_t isolation_level = 0;
  std::string client_rack;
  std::chrono::milliseconds retry_backoff{100};
};

/// One Fetch to send to `node`. Its partition lists depend on the version (sessions from v7):
/// fill() writes them once the connection has chosen it.
struct planned_fetch {
  std::int32_t node = -1;
  protocol::fetch_request request;
  std::shared_ptr<const data::fetch_set> partitions;
  /// The highest version to use: Fetch v13+ names topics by id only, so 12 when a topic has none.
  std::int16_t max_version = -1;
};

struct fetch_plan {
  std::vector<planned_fetch> requests;
  /// Absent from metadata since before the last refresh, with manual assignment: to be reported
  /// once (client_errc::partition_not_found).
  std::vector<TopicPartition> report_missing;
  /// A partition is absent from metadata or has no reachable leader.
  bool refresh_metadata = false;
  /// A new leader epoch in metadata: positions wait for validation (OffsetForLeaderEpoch).
  bool validate = false;
  /// Plan again then (a partition backs off, or waits for metadata).
  std::optional<std::chrono::steady_clock::time_point> retry_at;
};

/// What a Fetch answer did to one partition, for the driver to log and report.
struct fetch_note {
  enum class kind {
    replica_dropped,  // reads from the leader again instead of `replica` (error_code 0: its connection
                      // failed)
    replica_named,    // the leader (node) named `replica` to read from
    replica_unknown,  // the leader named `replica`, which metadata does not know
    log_end_cut,      // OFFSET_OUT_OF_RANGE below the position `offset`: the log ends at `end`
                      // (`halted`: auto.offset.reset=none, waits for the user thread's verdict)
    out_of_range,     // OFFSET_OUT_OF_RANGE at `offset`: reset policy applied (`halted`: none)
    leader_error,     // a leader or metadata error: metadata is refreshed
    other_error,      // any other partition error: retried
  };
  TopicPartition tp;
  kind what = kind::other_error;
  std::int16_t error_code = 0;
  std::int32_t replica = -1;
  std::int64_t offset = -1;
  std::int64_t end = -1;
  bool halted = false;
};

/// Records of one partition for the user thread: `data` fetched from `fetch_offset`.
struct fetched_slice {
  TopicPartition tp;
  std::int64_t fetch_offset = -1;
  const protocol::fetch_response::fetchable_topic_response::partition_data* data = nullptr;
};

/// What the user thread reads of `slice` (its offsets, aborted transactions and records, kept
/// alive by `frame`, the answer's bytes), read from broker `replica`. `slice.data` has records.
detail::fetched_data to_fetched(const fetched_slice& slice, std::shared_ptr<const void> frame,
                                std::int32_t replica);

struct fetch_answer {
  /// Every partition the answer names that belongs to the request (for tracing).
  std::vector<
      std::pair<TopicPartition, const protocol::fetch_response::fetchable_topic_response::partition_data*>>
      answered;
  std::vector<fetch_note> notes;  // in order, before the slices
  std::vector<fetched_slice> slices;
  /// The answer's top-level error (0 none; the session was reset).
  std::int16_t error_code = 0;
  /// Non-empty: the answer named partitions the request did not hold (this is the first); it was
  /// dropped whole.
  std::string unknown_partition;
  bool refresh_metadata = false;
  std::optional<std::chrono::steady_clock::time_point> retry_at;
  /// Plan again now (the answer was applied).
  bool plan_again = false;
};

/// Whether a partition can be located in metadata (fetch_planner::locate).
struct location {
  bool missing = false;  // absent, or its leader is not a known broker: refresh metadata
  bool report = false;   // absent long enough with manual assignment: report it once
};

class fetch_planner {
 public:
  fetch_planner(fetch_positions& positions, fetch_planner_options opts)
      : positions_(positions), opts_(std::move(opts)) {}

  /// assign() without a group: a partition missing from metadata is reported.
  void set_manual(bool manual) noexcept { manual_ = manual; }

  /// The Fetch requests to send at `now` with metadata `md`. Their partitions count as in
  /// flight, and their nodes as busy, until on_answer() or not_sent().
  fetch_plan plan(std::chrono::steady_clock::time_point now, const cluster_metadata& md);
  /// The request planned for `node` could not be sent (no connection): undone. Metadata is to be
  /// refreshed and the plan retried (the returned time).
  std::chrono::steady_clock::time_point not_sent(std::chrono::steady_clock::time_point now, std::int32_t node,
                                                 const data::fetch_set& partitions);
  /// Writes the partition lists of `req` (version `version`) for the planned `partitions` of `node`.
  void fill(std::int32_t node, protocol::fetch_request& req, std::int16_t version,
            const data::fetch_set& partitions);
  /// The answer (or, with `failure`, none) to the request planned for `node` with `sent`. The
  /// pointers in the result point into `r`.
  fetch_answer on_answer(std::chrono::steady_clock::time_point now, const cluster_metadata& md,
                         std::int32_t node, std::error_code failure, const protocol::fetch_response& r,
                         const data::fetch_set& sent);

  /// Where `tp` (entry `p`) stands in `md`: the metadata-missing rule (fetch_positions::missing)
  /// plus a leader the broker list does not name (a broker that is down).
  location locate(const cluster_metadata& md, const TopicPartition& tp, fetch_part& p);

  /// Brokers with a Fetch in flight.
  const std::set<std::int32_t>& busy_nodes() const noexcept { return fetching_nodes_; }
  data::fetch_session& session(std::int32_t node) { return sessions_.try_emplace(node, node).first->second; }

 private:
  void apply_error(fetch_answer& out, const TopicPartition& tp, fetch_part& p,
                   const protocol::fetch_response::fetchable_topic_response::partition_data& pd,
                   std::chrono::steady_clock::time_point now);

  fetch_positions& positions_;
  fetch_planner_options opts_;
  bool manual_ = false;
  std::set<std::int32_t> fetching_nodes_;                 // one Fetch in flight per broker
  std::map<std::int32_t, data::fetch_session> sessions_;  // KIP-227 session per broker
};

}  // namespace kgroup::data
