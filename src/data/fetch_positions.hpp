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
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

/// auto.offset.reset.
enum class reset_policy { earliest, latest, none };
/// "earliest", "none"; anything else is latest (the configuration is validated before).
reset_policy parse_reset_policy(std::string_view s) noexcept;
/// The ListOffsets timestamp of the policy: -2 earliest, -1 latest (and none).
std::int64_t reset_timestamp(reset_policy p) noexcept;

/// What an OffsetForLeaderEpoch answer decided (fetch_positions::validated).
struct validation_outcome {
  enum class verdict {
    retry,          // an error: validated again (once metadata is fresh)
    valid,          // not truncated: ready
    reset,          // truncated where the leader cannot tell: the reset policy applies (forced)
    resumed,        // truncated: ready at the offset where the leader's log diverged
    awaiting_seek,  // truncated and auto.offset.reset=none: waits for seek()
  };
  verdict what = verdict::retry;
  bool divergence_unknown = false;  // the leader's end offset or epoch was -1
  std::int64_t position = -1;       // the position that was validated
  std::int32_t epoch = -1;          // and its leader epoch
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
  explicit fetch_positions(reset_policy policy = reset_policy::latest, refusal_sink on_refused = {})
      : policy_(policy), on_refused_(std::move(on_refused)) {}

  reset_policy policy() const noexcept { return policy_; }

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

  // ---- user events ----
  /// The owned set is `owned`: new partitions need their committed offset; the others are
  /// dropped, and returned.
  std::vector<TopicPartition> assign(const std::set<TopicPartition>& owned);
  /// seek(): fetch from `offset`, validated first when `epoch` (of the record before it) is known.
  /// False when `tp` is not owned.
  bool seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  /// seek_to_beginning/end(): a forced reset to the log's start or end.
  bool seek_to(const TopicPartition& tp, bool beginning);
  /// Fetch again from `offset` without validation; only while ready (else it moved on: seek, reset).
  bool refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  void pause(const TopicPartition& tp);
  /// Fetches again; from `offset` (the user thread's position) when known and ready.
  void resume(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);

  // ---- committed offsets (OffsetFetch) ----
  /// Without a group there is no committed offset: the reset policy applies.
  void no_group(const TopicPartition& tp, fetch_part& p);
  void committed_requested(const TopicPartition& tp, fetch_part& p);
  /// The committed offset (-1: none, the reset policy applies) and its leader epoch arrived.
  void committed(const TopicPartition& tp, fetch_part& p, std::int64_t offset, std::int32_t epoch);
  /// Not answered or failed: asked again (only while it was asked).
  void committed_failed(const TopicPartition& tp, fetch_part& p);

  // ---- resets (ListOffsets) ----
  /// A pending reset to the policy's latest offset with auto.offset.reset=none and no seek_to:
  /// the partition waits for a seek() (true; the driver reports it) instead of asking.
  bool reset_waits_for_seek(const TopicPartition& tp, fetch_part& p);
  /// A ListOffsets for the reset is sent; returns its sequence number (the last one counts).
  std::uint64_t reset_requested(const TopicPartition& tp, fetch_part& p);
  /// The partition `tp` when an answer to reset request `seq` still applies (not seeked,
  /// revoked, or reset again since); else nullptr (a stale answer, ignored).
  fetch_part* reset_current(const TopicPartition& tp, std::uint64_t seq);
  void reset_answered(const TopicPartition& tp, fetch_part& p, std::int64_t offset, std::int32_t epoch);
  /// Not answered (an error, or a stale answer was all there was): asked again.
  void reset_failed(const TopicPartition& tp, fetch_part& p);

  // ---- fetching and validation (KIP-320) ----
  /// OFFSET_OUT_OF_RANGE from the leader: the reset policy applies, forced unless it is none;
  /// with none the partition waits for a seek() (true; the driver reports it).
  bool offset_out_of_range(const TopicPartition& tp, fetch_part& p);
  /// FENCED/UNKNOWN_LEADER_EPOCH, or a new leader epoch in metadata: validated again when the
  /// position has an epoch (true), else fetched as it is.
  bool leader_changed(const TopicPartition& tp, fetch_part& p);
  void validation_requested(const TopicPartition& tp, fetch_part& p);
  /// Nothing to validate with (no epoch; metadata or broker without leader epochs): ready as it is.
  void validation_skipped(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch);
  /// Not answered: asked again.
  void validation_failed(const TopicPartition& tp, fetch_part& p);
  /// The OffsetForLeaderEpoch answer for `p`, asked with the leader's `leader_epoch`: where the
  /// position's epoch ends in the leader's log (`end_epoch`, `end_offset`; -1 unknown).
  validation_outcome validated(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch,
                               std::int16_t error_code, std::int32_t end_epoch, std::int64_t end_offset);

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
  reset_policy policy_;
  refusal_sink on_refused_;
  map parts_;
  std::uint64_t invalid_transitions_ = 0;
  std::string last_refusal_;
};

}  // namespace kgroup::data
