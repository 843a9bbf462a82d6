// The fetcher's position table (background thread): for each owned partition, where the next
// Fetch starts and what must happen before it can (committed offset, reset, KIP-320 validation).
// A pure class: the fetcher (fetch/fetcher.hpp) asks it which partitions need what, sends the
// requests, and feeds the answers back. Every state change goes through transition(), which
// refuses (and reports) a change the table below does not list. No Asio, no threads, no logging.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kgroup/types.hpp"
#include "protocol/primitives.hpp"

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

/// One owned partition. Read-only outside fetch_positions: its state and fields change only
/// through fetch_positions' events, so every decision on them is made (and tested) there.
class fetch_part {
 public:
  fetch_state state() const noexcept { return state_; }

  std::int64_t fetch_pos() const noexcept { return fetch_pos_; }
  /// Leader epoch of the record before fetch_pos; -1 unknown.
  std::int32_t epoch() const noexcept { return epoch_; }
  /// The leader's epoch (metadata) when last fetched or validated.
  std::int32_t leader_epoch() const noexcept { return leader_epoch_; }
  bool paused() const noexcept { return paused_; }
  /// A Fetch that covers it is in flight.
  bool in_flight() const noexcept { return in_flight_; }
  /// The reset position is announced as forced (seek_to_*, out of range).
  bool reset_forced() const noexcept { return reset_forced_; }
  /// The topic's id when first seen in metadata (zero: not yet, or a broker without topic ids).
  const protocol::uuid& topic_id() const noexcept { return topic_id_; }
  /// -2 earliest, -1 latest, reset_by_duration (fetch_positions::list_offsets_timestamp() turns it
  /// into a time).
  std::int64_t reset_timestamp() const noexcept { return reset_timestamp_; }
  /// KIP-392: the replica the leader told this member to read from, until replica_until(); -1
  /// reads from the leader.
  std::int32_t preferred_replica() const noexcept { return preferred_replica_; }
  std::chrono::steady_clock::time_point replica_until() const noexcept { return replica_until_; }
  /// Not fetched before this time: after a replica failed it, or named a replica this client
  /// cannot use (the leader then sends no data, and asking again at once would spin).

 private:
  friend class fetch_positions;
  fetch_state state_ = fetch_state::needs_committed;
  std::int64_t fetch_pos_ = -1;
  std::int32_t epoch_ = -1;
  std::int32_t leader_epoch_ = -1;
  // The last divergence a validation found: leader epoch `diverged_epoch_` (and every one before
  // it) ends at `diverged_at_` in the leader's log. A position the user thread sends later with
  // such an epoch past that offset was computed before it applied the cut (refetch()).
  std::int32_t diverged_epoch_ = -1;
  std::int64_t diverged_at_ = -1;
  bool paused_ = false;
  bool in_flight_ = false;
  bool reset_forced_ = false;
  std::int64_t reset_timestamp_ = -1;
  protocol::uuid topic_id_{};        // the topic's id when first seen in metadata (zero: none yet)
  std::uint64_t reset_seq_ = 0;      // ListOffsets requests sent for resets (the last one counts)
  std::uint64_t missing_since_ = 0;  // metadata refresh count when first seen missing (0: not missing)
  bool reported_missing_ = false;
  std::int32_t preferred_replica_ = -1;
  std::chrono::steady_clock::time_point replica_until_{};
  std::chrono::steady_clock::time_point backoff_until_{};
};

/// Whether a partition is fetched now (fetch_positions::fetchable).
enum class fetch_check {
  skip,         // not ready, paused, or a Fetch for it is in flight
  backing_off,  // ready, but its backoff has not passed (try again later)
  fetch,
};

/// What a Fetch answer's KIP-392 part decided (fetch_positions::replica_answer).
struct replica_outcome {
  enum class verdict {
    none,             // nothing about replicas
    replica_failed,   // the preferred replica answered with an error: back to the leader, after
                      // the backoff; the rest of the answer for this partition is ignored
    replica_named,    // the leader named a replica (known to metadata): read from it until the TTL
    replica_unknown,  // the leader named a replica metadata does not know: backoff, refresh metadata
  };
  verdict what = verdict::none;
  bool changed = false;       // replica_named: a different replica than before
  std::int32_t replica = -1;  // replica_failed: the one dropped; else the one named
};

/// Timing the table applies (the fetcher's configuration).
struct fetch_timing {
  /// Backoff after a replica failed a partition or named an unusable replica (retry.backoff.ms).
  std::chrono::milliseconds retry_backoff{100};
  /// How long a preferred read replica is followed before asking the leader again.
  std::chrono::milliseconds replica_ttl{300000};
};

/// auto.offset.reset.
enum class reset_policy { earliest, latest, none, by_duration };
/// The policy with by_duration's duration (KIP-1106: the first record at most that long ago).
struct reset_strategy {
  reset_strategy(reset_policy p = reset_policy::latest, std::chrono::milliseconds d = {})
      : policy(p), duration(d) {}
  reset_policy policy;
  std::chrono::milliseconds duration;
};
/// "earliest", "none", "by_duration:<ISO-8601>"; anything else is latest (the configuration is
/// validated before).
reset_policy parse_reset_policy(std::string_view s) noexcept;
reset_strategy parse_reset_strategy(std::string_view s) noexcept;
/// A reset timestamp that stands for by_duration's "now minus the duration", taken when the
/// ListOffsets is sent (never sent as it is).
inline constexpr std::int64_t reset_by_duration = std::numeric_limits<std::int64_t>::min();
/// The ListOffsets timestamp of the policy: -2 earliest, -1 latest (and none), reset_by_duration.
std::int64_t reset_timestamp(reset_policy p) noexcept;

/// What an OffsetForLeaderEpoch answer decided (fetch_positions::validated).
struct validation_outcome {
  enum class verdict {
    retry,          // an error: validated again (once metadata is fresh)
    valid,          // not truncated: ready
    reset,          // truncated where the leader cannot tell: the reset policy applies (forced)
    resumed,        // truncated: ready at the offset where the leader's log diverged
    awaiting_seek,  // truncated and auto.offset.reset=none: waits at the divergence (when known)
                    // for the user thread's verdict (cut_accepted) or a seek()
  };
  verdict what = verdict::retry;
  bool divergence_unknown = false;  // the leader's end offset or epoch was -1
  std::int64_t position = -1;       // the position that was validated
  std::int32_t epoch = -1;          // and its leader epoch
  // What the user thread is told (shared_state::push_cut, kind diverged) when the log was found
  // truncated (resumed, reset, awaiting_seek): where the leader's log diverged (-1: unknown where,
  // and then every queued record of the partition is suspect) and whether the fetcher waits.
  struct published_cut {
    std::int64_t offset = -1;
    std::int32_t epoch = -1;
    bool halted = false;
  };
  std::optional<published_cut> cut;
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
  explicit fetch_positions(reset_strategy policy = reset_policy::latest, refusal_sink on_refused = {},
                           fetch_timing timing = {})
      : policy_(policy.policy),
        duration_(policy.duration),
        on_refused_(std::move(on_refused)),
        timing_(timing) {}

  /// Every owned partition, read-only: changed only through the events below.
  const map& parts() const noexcept { return parts_; }
  /// The entry of `tp` for the events below; nullptr when not owned.
  fetch_part* find(const TopicPartition& tp) noexcept;
  /// Calls `f(tp, part)` for every owned partition, in order, to pass them to the events below
  /// (the set of partitions changes only through assign()).
  template <class F>
  void for_each(F&& f) {
    for (auto& [tp, p] : parts_) f(tp, p);
  }

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
  /// Fetch again from `offset` (the user thread's position) without validation while ready. While
  /// its position is being validated, that validation is for a position the user thread has left:
  /// `offset` is validated instead (not dropped: the partition would be fetched from a position
  /// no data of which is usable, and fall silent). False in the other states (it moved on: seek,
  /// reset, or it waits for a seek).
  bool refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  void pause(const TopicPartition& tp);
  /// Fetches again; from `offset` (the user thread's position) when known, as refetch() does.
  void resume(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  /// The user thread found the application's position at or below the cut where `tp` waits
  /// (validated() or log_ended() with auto.offset.reset=none, at `offset`): fetched from there.
  /// False when it no longer waits there (a seek came first).
  bool cut_accepted(const TopicPartition& tp, std::int64_t offset);

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
  /// The ListOffsets timestamp for `p`'s reset sent at `now_ms` (Unix time): by_duration's is
  /// `now_ms` minus the duration, the others as they are.
  std::int64_t list_offsets_timestamp(const fetch_part& p, std::int64_t now_ms) const noexcept;
  /// The answer to `p`'s by_duration reset found no record that recent (offset -1): the reset
  /// goes to the log's end instead, asked at once (true). False for any other reset (a -1 there
  /// is a failure, asked again after the backoff).
  bool reset_found_nothing(const TopicPartition& tp, fetch_part& p);

  /// What topic_id_seen() found.
  enum class topic_id_verdict {
    same,             // the id first seen (or the broker has none)
    recreated,        // a new id: the reset policy applies (forced)
    recreated_waits,  // a new id with auto.offset.reset=none: waits for a seek (the driver reports it)
  };
  /// Metadata names `tp`'s topic with `id` (zero: the broker has no topic ids, Metadata before
  /// v10). The first id seen is kept; another one later means the topic was deleted and created
  /// again under its name (KIP-516), and a position of the old topic means nothing in the new one:
  /// the reset policy applies, forced, as for OFFSET_OUT_OF_RANGE (Java's behaviour). A partition
  /// still fetching its committed offset only takes the new id (the offset it gets is the new
  /// topic's: the broker deletes a topic's committed offsets with it).
  topic_id_verdict topic_id_seen(const TopicPartition& tp, fetch_part& p, const protocol::uuid& id);

  // ---- fetching and validation (KIP-320) ----
  /// OFFSET_OUT_OF_RANGE from the leader: the reset policy applies, forced unless it is none;
  /// with none the partition waits for a seek() (true; the driver reports it). Also the user
  /// thread's verdict when the application's own position is past a log_ended() cut.
  bool offset_out_of_range(const TopicPartition& tp, fetch_part& p);
  /// OFFSET_OUT_OF_RANGE whose answer shows the log ending at `end` (its high watermark), below
  /// the position but not below the log's start: the log was cut under the prefetch position, not
  /// necessarily under the application's. Treated as a cut at `end` (the user thread decides with
  /// the application's position): `resumed` (fetched from `end`), or with auto.offset.reset=none
  /// `awaiting_seek` at `end` until cut_accepted() or a seek.
  validation_outcome::verdict log_ended(const TopicPartition& tp, fetch_part& p, std::int64_t end);
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

  /// Whether `p` is fetched at `now` (ready, not paused, none in flight, its backoff passed).
  static fetch_check fetchable(const fetch_part& p, std::chrono::steady_clock::time_point now) noexcept;
  /// Before a Fetch: metadata names the leader epoch `leader_epoch` (-1 none). A new one sends
  /// the position to validation first (true: not fetched now), as Java does after every leader
  /// change, since an unclean election may have truncated the log below it (KIP-320); else the
  /// epoch is recorded and the partition fetched.
  bool leader_epoch_seen(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch);
  /// A Fetch covering `p` was sent / its answer (or failure) arrived.
  void fetch_sent(fetch_part& p) noexcept { p.in_flight_ = true; }
  void fetch_ended(const TopicPartition& tp) noexcept;
  /// Whether an answer to a Fetch sent from `sent_offset` still applies to `p` (not seeked or
  /// reset meanwhile).
  static bool answer_applies(const fetch_part& p, std::int64_t sent_offset) noexcept;
  /// The KIP-392 part of a Fetch answer for `p` from broker `node`: its `error_code` and the
  /// `preferred_read_replica` it names (-1 none), `replica_known` when metadata knows that broker.
  /// Any error from the preferred replica sends the partition back to its leader (an offset out
  /// of range on a follower is no reset), as Java and librdkafka do.
  replica_outcome replica_answer(fetch_part& p, std::int32_t node, std::int16_t error_code,
                                 std::int32_t preferred_read_replica, bool replica_known,
                                 std::chrono::steady_clock::time_point now);
  /// The connection to broker `node` failed: a partition that read from it as its preferred
  /// replica goes back to the leader. Returns the replica dropped (-1: none).
  std::int32_t replica_unreachable(const TopicPartition& tp, std::int32_t node);
  /// Fetched data ends before `next` (its last batch of leader epoch `last_epoch`): the next
  /// Fetch starts there. False when it does not move the position (only a partial batch).
  bool fetched(fetch_part& p, std::int64_t next, std::int32_t last_epoch) noexcept;

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
  std::chrono::milliseconds duration_;
  refusal_sink on_refused_;
  fetch_timing timing_;
  map parts_;
  std::uint64_t invalid_transitions_ = 0;
  std::string last_refusal_;
};

}  // namespace kgroup::data
