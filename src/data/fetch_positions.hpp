// The fetcher's position table (background thread): for each owned partition, where the next
// Fetch starts and what must happen before it can (committed offset, reset, KIP-320 validation).
// A pure class: the fetcher (fetch/fetcher.hpp) asks it which partitions need what, sends the
// requests, and feeds the answers back. Every state change goes through transition(), which
// refuses (and reports) a change the table below does not list. No Asio, no threads, no logging.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "kgroup/types.hpp"

namespace kgroup::data {

/// Where a partition's position stands. Exactly one at a time; transitions in
/// fetch_transition_allowed().
enum class fetch_state {
  needs_committed,     // new: its committed offset is to be asked for (OffsetFetch)
  fetching_committed,  // an OffsetFetch for it is in flight
  needs_reset,         // the reset policy (or seek_to_*) applies: ListOffsets to be sent
  resetting,           // a ListOffsets is in flight, or auto.offset.reset=none left it without a position
  needs_validation,    // position to be checked against the leader's log (OffsetForLeaderEpoch, KIP-320)
  validating,          // an OffsetForLeaderEpoch for it is in flight
  awaiting_seek,       // the log was truncated below it and auto.offset.reset=none: waits for seek()
  ready,               // fetched from fetch_pos
};
inline constexpr std::size_t fetch_state_count = 8;
const char* to_string(fetch_state s) noexcept;

/// Whether `from -> to` is one of the documented transitions. A user seek (ready,
/// needs_validation) or seek_to_* (needs_reset) may come in any state; the in-flight states are
/// entered only from their "needs" state, and left only by their answer.
bool fetch_transition_allowed(fetch_state from, fetch_state to) noexcept;

/// One owned partition. The state is changed only through fetch_positions::transition().
class fetch_part {
 public:
  fetch_state state() const noexcept { return state_; }

  std::int64_t fetch_pos = -1;
  std::int32_t epoch = -1;         // leader epoch of the record before fetch_pos; -1 unknown
  std::int32_t leader_epoch = -1;  // the leader's epoch (metadata) when last fetched or validated
  bool paused = false;
  bool in_flight = false;
  bool reset_forced = false;          // announce the reset position as forced (seek_to_*, out of range)
  std::int64_t reset_timestamp = -1;  // -2 earliest, -1 latest
  std::uint64_t reset_seq = 0;        // ListOffsets requests sent for resets (the last one counts)
  std::uint64_t missing_since = 0;    // metadata refresh count when first seen missing (0: not missing)
  bool reported_missing = false;
  // KIP-392: the replica the leader told this member to read from, until `replica_until`; -1
  // reads from the leader.
  std::int32_t preferred_replica = -1;
  std::chrono::steady_clock::time_point replica_until{};
  // Not fetched before this time: after a replica failed it, or named a replica this client
  // cannot use (the leader then sends no data, and asking again at once would spin).
  std::chrono::steady_clock::time_point backoff_until{};

 private:
  friend class fetch_positions;
  fetch_state state_ = fetch_state::needs_committed;
};

/// Whether a partition absent from metadata is to be reported now (see fetch_positions::missing).
enum class missing_verdict {
  present,         // in metadata
  missing,         // absent, not (or no longer) to be reported
  report_missing,  // absent since before the last refresh, manual assignment: report it once
};

class fetch_positions {
 public:
  using map = std::map<TopicPartition, fetch_part>;

  /// Receives the description of each refused transition (the driver logs it).
  using refusal_sink = std::function<void(const std::string&)>;
  explicit fetch_positions(refusal_sink on_refused = {}) : on_refused_(std::move(on_refused)) {}

  map& parts() noexcept { return parts_; }
  const map& parts() const noexcept { return parts_; }

  /// Moves `p` (the entry of `tp`) to `to`; true when it is there. Same state: nothing happens.
  /// A transition the table does not list is a bug in the caller: it is not applied, but counted
  /// and described to the refusal sink (false).
  bool transition(const TopicPartition& tp, fetch_part& p, fetch_state to, const char* reason);
  /// The description of the last refused transition.
  const std::string& last_refusal() const noexcept { return last_refusal_; }

  /// Transitions refused so far (a bug if ever non-zero; tests check it).
  std::uint64_t invalid_transitions() const noexcept { return invalid_transitions_; }

  /// The broker to fetch `p` from at `now`: its preferred read replica while that is valid and
  /// `replica_known` (metadata names it), else `leader`. An expired or unknown replica is
  /// dropped (asked of the leader again, as Java does after metadata.max.age.ms).
  static std::int32_t fetch_node(fetch_part& p, std::int32_t leader, bool replica_known,
                                 std::chrono::steady_clock::time_point now);

  /// The metadata-missing rule for `p`: `absent` from metadata refreshed `refreshes` times so
  /// far. A partition first seen missing is reported (manual assignment only) once a refresh made
  /// after that still lacks it; back in metadata, it may be reported again later.
  static missing_verdict missing(fetch_part& p, bool absent, std::uint64_t refreshes, bool manual);

 private:
  refusal_sink on_refused_;
  map parts_;
  std::uint64_t invalid_transitions_ = 0;
  std::string last_refusal_;
};

}  // namespace kgroup::data
