// Where each owned partition starts fetching, the requests' side (background thread), sans-I/O:
// which partitions ask the group coordinator for their committed offset (OffsetFetch), which ask
// their leader where the reset policy puts them (ListOffsets) or whether their position is still
// in its log (OffsetForLeaderEpoch, KIP-320), the requests themselves, and what each answer, or a
// failure to get one, means. No Asio, no threads, no clock reads, no logging: the driver
// (fetch/fetcher_offsets.cpp) finds connections, sends, logs, counts and tells the user thread;
// the simulation (test/sim) runs the same calls against its brokers.
//
//   committed_wanted() -> request_committed(tps) -> on_committed(failure, answer)
//   resets_wanted(md)  -> request_resets(node, tps, md, now_ms) -> on_resets(sent, failure, answer)
//   validations_wanted(md) -> request_validations(node, tps, md) -> on_validations(sent, failure, answer)
//
// A partition is marked asked (fetch_positions' *_requested) only by request_*(): the driver asks
// for a connection between wanted and request, and one it cannot get leaves the partition waiting.
// The per-partition states are data/fetch_positions.hpp's; metadata lookups are the planner's
// (fetch_planner::locate: a partition absent from metadata, or whose leader is not a known broker).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "data/cluster_metadata.hpp"
#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data {

/// A partition the driver reports to the user thread (a data_error from poll()).
struct position_report {
  enum class kind {
    missing,          // absent from metadata long enough with manual assignment (fetch_planner::locate):
                      // client_errc::partition_not_found
    no_reset_policy,  // a reset with auto.offset.reset=none and nothing committed: waits for a seek();
                      // client_errc::offset_out_of_range, each time it is asked
  };
  TopicPartition tp;
  kind what = kind::missing;
};

/// Partitions that want a request now, by the broker to ask (their leader in metadata).
struct position_wants {
  std::map<std::int32_t, std::vector<TopicPartition>> by_leader;
  /// What to report, in partition order.
  std::vector<position_report> reports;
  /// Some partition is absent from metadata or its leader is unknown: refresh metadata and try
  /// again after the backoff.
  bool missing = false;
};

/// The OffsetFetch answer for the fetcher's committed offsets.
struct committed_result {
  struct found {
    TopicPartition tp;
    std::int64_t offset = -1;
    std::int32_t epoch = -1;
  };
  /// Partitions with a committed offset (each told to the user thread as a position_event), in
  /// the answer's order. A partition without one goes to the reset policy (not listed).
  std::vector<found> offsets;
  /// The group's error code (0 none), for the log.
  std::int16_t error_code = 0;
  /// The coordinator failed (its connection, or NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
  /// rediscover it.
  bool coordinator_failed = false;
  /// A failure, or a partition's error: asked again after the backoff (a partition the answer
  /// leaves out is asked again at once).
  bool retry = false;
};

/// A ListOffsets for resets, to `node`. Version < 2 has no isolation level (adjust_list_offsets).
struct sent_resets {
  std::int32_t node = -1;
  protocol::list_offsets_request request;
  /// Each partition's reset sequence number (fetch_positions::reset_requested): an answer applies
  /// only while it is the partition's latest (a seek_to_*() may have started another meanwhile).
  std::map<TopicPartition, std::uint64_t> seqs;
};

struct reset_result {
  struct reset {
    TopicPartition tp;
    std::int64_t offset = -1;
    std::int32_t epoch = -1;  // -1 before ListOffsets v4
  };
  /// Positions set by the answer (each told to the user thread as a forced position_event).
  std::vector<reset> positions;
  /// auto.offset.reset=by_duration found no record that recent: reset to the log's end, asked at
  /// once (for the log).
  std::vector<TopicPartition> found_nothing;
  /// The request failed (its broker may be gone for good) or a partition's error asks for it.
  bool refresh_metadata = false;
  /// Some reset was not answered (a failure, an error, a partition left out, or an answer a newer
  /// reset made stale): the retry timer is armed (the pump after the answer asks for a stale one's
  /// newer reset at once).
  bool retry = false;
};

/// An OffsetForLeaderEpoch to `node`, for the positions in `sent`.
struct sent_validations {
  struct part {
    std::int64_t position = -1;
    std::int32_t epoch = -1;         // the position's (the epoch of the record before it)
    std::int32_t leader_epoch = -1;  // the leader's, from metadata (current_leader_epoch)
  };
  std::int32_t node = -1;
  protocol::offset_for_leader_epoch_request request;
  std::map<TopicPartition, part> sent;
};

struct validation_result {
  struct validated {
    TopicPartition tp;
    std::int16_t error_code = 0;
    std::int32_t end_epoch = -1;
    std::int64_t end_offset = -1;
    validation_outcome outcome;  // its cut, if any, goes to the user thread (cut_kind::diverged)
  };
  /// Each partition the answer validated or refused, in the answer's order.
  std::vector<validated> results;
  /// The leader is older than OffsetForLeaderEpoch v2 (Kafka 2.1): positions are fetched as they
  /// are, without validation.
  bool unsupported = false;
  bool refresh_metadata = false;
  bool retry = false;
};

class position_requests {
 public:
  position_requests(fetch_positions& positions, fetch_planner& planner, std::string group_id,
                    std::int8_t isolation_level)
      : positions_(positions),
        planner_(planner),
        group_id_(std::move(group_id)),
        isolation_(isolation_level) {}

  // ---- committed offsets (OffsetFetch, to the group coordinator) ----
  /// Partitions waiting for their committed offset; none while an OffsetFetch is in flight.
  std::set<TopicPartition> committed_wanted() const;
  /// Not in a group: they start from the reset policy instead.
  void no_group(const std::set<TopicPartition>& tps);
  /// The OffsetFetch for `tps` (from committed_wanted()); they count as asked, and it as in flight.
  protocol::offset_fetch_request request_committed(const std::set<TopicPartition>& tps);
  /// Its answer, or `failure` (no answer).
  committed_result on_committed(std::error_code failure, const protocol::offset_fetch_response& r);

  // ---- resets (ListOffsets, to each partition's leader) ----
  position_wants resets_wanted(const cluster_metadata& md);
  /// The ListOffsets to `node` for `tps` (from resets_wanted()), at Unix time `now_ms`
  /// (auto.offset.reset=by_duration's timestamps are relative to it).
  sent_resets request_resets(std::int32_t node, const std::vector<TopicPartition>& tps,
                             const cluster_metadata& md, std::int64_t now_ms);
  reset_result on_resets(const sent_resets& sent, std::error_code failure,
                         const protocol::list_offsets_response& r);

  // ---- validation (OffsetForLeaderEpoch, KIP-320) ----
  /// Positions waiting for validation. One with nothing to check with (no epoch of its own, or
  /// metadata without leader epochs) is fetched as it is, as Java does (not listed).
  position_wants validations_wanted(const cluster_metadata& md);
  sent_validations request_validations(std::int32_t node, const std::vector<TopicPartition>& tps,
                                       const cluster_metadata& md);
  /// The answer, or `failure`; client_errc::no_compatible_version: the leader cannot validate.
  validation_result on_validations(const sent_validations& sent, std::error_code failure,
                                   const protocol::offset_for_leader_epoch_response& r);

 private:
  fetch_positions& positions_;
  fetch_planner& planner_;
  std::string group_id_;
  std::int8_t isolation_;
  bool committed_in_flight_ = false;
};

/// ListOffsets before v2 has no isolation level.
inline void adjust_list_offsets(protocol::list_offsets_request& r, std::int16_t version) {
  if (version < 2) r.isolation_level = 0;
}

}  // namespace kgroup::data
