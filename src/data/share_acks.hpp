// The acknowledgement tracker of one share-group member (KIP-932): which records this member
// holds acquired, in which state, and what to acknowledge next. Pure: no Asio, no threads, no
// clock.
//
// A record's life here, per partition and offset:
//
//   acquired   in a ShareFetch answer's AcquiredRecords with a data record; not yet given to the
//              application (still in the facade's buffer)
//   delivered  returned by poll(); the application acknowledges it (or implicit mode does)
//   pending    acknowledged (ACCEPT, RELEASE, REJECT, RENEW), not yet taken for a request
//   in_flight  taken into a ShareFetch or ShareAcknowledge, awaiting its answer
//   lost       delivered, but the session it was acquired in is gone (reset, lost assignment):
//              the broker released it; acknowledging it completes at once with that error
//
// An acquired offset without a data record (compacted away, a control record, an aborted
// transaction's record under read_committed) is acknowledged GAP at once, as a range: GAPs are
// kept as ranges, never per offset, so a hostile AcquiredRecords range of 2^62 offsets costs one
// entry. Records are kept per offset, but only offsets with a data record in the answer, which
// the answer's bytes bound.
//
// Outcomes: every acknowledgement of a record the application saw ends in exactly one outcome
// (ack_outcome: partition, offsets, error; empty error: applied), taken by take_outcomes() for
// the acknowledgement commit callback and commit_sync's result. GAPs have none (the application
// never saw those offsets). A successful RENEW has one and leaves the record delivered: the
// application acknowledges it again later (a second outcome for the same offset).
//
// Decisions (docs/DESIGN.md, "Share sessions and acknowledgements"):
// - malformed AcquiredRecords (last < first, a negative offset, INT64_MAX, ranges overlapping one
//   another; out of order alone is fine) refuse the partition's whole answer: nothing delivered,
//   nothing tracked; the broker's locks expire and the records are delivered again, to us or
//   another member. Nothing is lost, and we never acknowledge offsets we cannot place.
// - an acquired offset this member already holds (librdkafka's mock re-sends every record a
//   member holds, its fault M2) is not delivered again and keeps its state and delivery count.
// - forget(): what the broker released with a session keeps its application-visible trace:
//   delivered records become lost (their acknowledgement fails with the session's error, in
//   the callback, as Java fails them), pending and in-flight acknowledgements fail now with it.
// - drop_undelivered(): a partition leaving the assignment loses only what the application was
//   not given yet; what it was given keeps its state, so its acknowledgements still go to the
//   partition's leader and get the broker's outcome (Java's KafkaShareConsumer does the same).
//   The fetcher keeps the partition in its session until unresolved() says nothing of it is
//   left to acknowledge (docs/DESIGN.md, "A partition that leaves the assignment").
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "data/share_types.hpp"
#include "kgroup/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data::share {

using acquired_range =
    protocol::share_fetch_response::share_fetchable_topic_response::partition_data::acquired_records_t;

/// An acquired offset with a data record: what the application is given, in offset order.
struct acquired_record {
  std::int64_t offset = 0;
  std::int16_t delivery_count = 0;
  bool operator==(const acquired_record&) const = default;
};

/// The outcome of acknowledgements of one partition.
struct ack_outcome {
  TopicPartition tp;
  std::vector<std::int64_t> offsets;  // ascending; records the application saw (no GAPs)
  std::error_code error;              // empty: applied by the broker
};

/// Whether an outcome's error says the acknowledgement came too late: the broker answered
/// INVALID_RECORD_STATE, the record's acquisition lock had expired or the record had moved on
/// (delivered to another member, archived). A session's end (the records released with it) is
/// not one: those fail with the session's error.
bool lock_expired(std::error_code ec) noexcept;

/// share.acknowledgement.mode.
enum class ack_mode { implicit_mode, explicit_mode };

class ack_tracker {
 public:
  /// `renew_supported`: the brokers speak ShareFetch/ShareAcknowledge v2 (RENEW allowed).
  explicit ack_tracker(bool renew_supported = false) : renew_supported_(renew_supported) {}
  void set_renew_supported(bool v) noexcept { renew_supported_ = v; }

  struct acquire_result {
    /// share_errc::malformed_acquired_records: nothing below is set, nothing is tracked.
    std::error_code error;
    /// The records to give the application, ascending: data records inside acquired ranges and
    /// not held already.
    std::vector<acquired_record> deliver;
    std::uint64_t gap_offsets = 0;        // acquired offsets without a data record (GAP)
    std::uint64_t duplicate_offsets = 0;  // acquired offsets this member held already (ignored)
    std::size_t outside = 0;              // data records outside every acquired range (dropped)
  };

  /// A ShareFetch answer's partition: its AcquiredRecords (any order) and the offsets of the
  /// data records decoded from its Records (any order; control records excluded, and under
  /// read_committed aborted records too).
  acquire_result on_acquired(const TopicPartition& tp, std::span<const acquired_range> ranges,
                             std::span<const std::int64_t> record_offsets);

  /// At the start of poll(). implicit_mode: every record the previous poll returned that is not
  /// acknowledged becomes ACCEPT (a lost one gets its error as outcome), a new poll starts, and
  /// the result is empty. explicit_mode: the records of the previous poll not acknowledged yet
  /// (lost ones included: they need an acknowledgement too), ascending per partition; when there
  /// are none a new poll starts, otherwise nothing changes and the poll must fail (Java throws
  /// IllegalStateException).
  std::vector<std::pair<TopicPartition, std::int64_t>> begin_poll(ack_mode mode);

  /// poll() returns these records (acquired, not yet delivered). Returns how many of `offsets`
  /// were not in that state (ignored).
  std::size_t on_polled(const TopicPartition& tp, std::span<const std::int64_t> offsets);

  /// The application acknowledges a delivered record. Errors (nothing changes): invalid_ack_type
  /// (not 1..4), renew_not_supported, not_acquired, not_delivered, already_acknowledged. A lost
  /// record's acknowledgement succeeds here and its outcome is the session's error.
  std::error_code acknowledge(const TopicPartition& tp, std::int64_t offset, ack_type type);

  /// Partitions with acknowledgements to send (pending, none in flight).
  std::vector<TopicPartition> pending_partitions() const;
  bool has_pending(const TopicPartition& tp) const;

  /// Takes the partition's pending acknowledgements (GAPs included) for one request as batches:
  /// ascending, non-overlapping; a run of one type is one batch with one type; adjacent runs of
  /// different types join one batch with a type per offset while it spans at most `max_mixed`
  /// offsets. Empty when nothing is pending or a take of the partition is still in flight
  /// (complete() first).
  std::vector<ack_batch> take(const TopicPartition& tp, std::int64_t max_mixed = 512);

  /// The answer to the request that carried the partition's last take(): `ec` empty means
  /// applied. Outcomes for the records; a successful RENEW leaves the record delivered (part of
  /// the current poll). No-op when nothing is in flight.
  void complete(const TopicPartition& tp, std::error_code ec);

  /// The partition's records are gone at the broker (session reset or closed, assignment lost):
  /// acquired records vanish (the facade drops what it buffered of `tp`), delivered ones become
  /// lost with `why`, pending and in-flight acknowledgements get `why` as outcome, GAPs vanish.
  void forget(const TopicPartition& tp, std::error_code why);

  /// The partition left the assignment, its session still holds it: records acquired but not
  /// yet returned by poll vanish (the facade drops what it buffered of `tp`; the broker releases
  /// them when the session forgets the partition, or their locks expire). Delivered, pending and
  /// in-flight records and GAPs keep their state: their acknowledgements are still sent and get
  /// real outcomes. Returns how many records were dropped.
  std::size_t drop_undelivered(const TopicPartition& tp);

  /// The member was fenced and rejoins; its session keeps `tp`: records acquired but not yet
  /// returned by poll become RELEASE acknowledgements to send (the facade drops its buffered
  /// copies), so the broker hands them on now instead of at their locks' expiry. The application
  /// never saw them, so their outcomes do not reach the callback. Delivered, pending and in-flight
  /// records keep their state. Returns how many records were released.
  std::size_t release_undelivered(const TopicPartition& tp);

  /// Whether `tp` still has records the application was given and whose acknowledgement has no
  /// outcome yet (delivered, pending, in flight), or GAPs not yet answered: while it has, its
  /// session should not forget it (the broker would release those records). Lost records do not
  /// count (their session is gone already).
  bool unresolved(const TopicPartition& tp) const;

  /// close(): every acquired or delivered record becomes RELEASE (in implicit mode too: the last
  /// poll's records are released, not accepted, as Java and librdkafka do); lost ones get their
  /// error as outcome. Pending acknowledgements keep their type.
  void release_all();

  /// The outcomes known since the last call, in the order they became known.
  std::vector<ack_outcome> take_outcomes();

  /// Records held for `tp` in any state (GAP ranges not counted).
  std::size_t held(const TopicPartition& tp) const;
  /// The delivery count of a held record, or 0.
  std::int16_t delivery_count(const TopicPartition& tp, std::int64_t offset) const;

  /// Running totals, for metrics.
  struct counters {
    std::uint64_t acquired = 0;    // records with data acquired (delivered to the buffer)
    std::uint64_t gaps = 0;        // GAP offsets
    std::uint64_t duplicates = 0;  // acquired offsets already held
    std::uint64_t accepted = 0;    // acknowledgements taken, per type
    std::uint64_t released = 0;
    std::uint64_t rejected = 0;
    std::uint64_t renewed = 0;
    std::uint64_t redelivered = 0;   // acquired with a delivery count above 1
    std::uint64_t failed = 0;        // record outcomes with an error
    std::uint64_t lock_expired = 0;  // of those, refused as too late (lock_expired(): INVALID_RECORD_STATE)
    std::uint64_t lost = 0;          // delivered records lost to forget()
    std::uint64_t malformed = 0;     // answers refused as malformed
  };
  const counters& stats() const noexcept { return stats_; }

 private:
  enum class state : std::uint8_t { acquired, delivered, pending, in_flight, lost };
  struct held_record {
    std::int16_t delivery_count = 0;
    state st = state::acquired;
    ack_type type = ack_type::accept;  // pending, in_flight
    bool silent = false;               // released by the member itself, never delivered: no outcome
  };
  struct partition_state {
    std::map<std::int64_t, held_record> records;
    std::map<std::int64_t, std::int64_t> gaps;                      // pending GAP ranges first -> last
    std::vector<std::pair<std::int64_t, std::int64_t>> gaps_taken;  // GAP ranges in flight
    bool in_flight = false;
    std::error_code lost_error;  // of the records in state lost
    bool empty() const noexcept { return records.empty() && gaps.empty() && gaps_taken.empty(); }
  };

  void add_outcome(const TopicPartition& tp, std::int64_t offset, std::error_code ec);
  void count_ack(ack_type t);

  bool renew_supported_;
  std::map<TopicPartition, partition_state> parts_;
  std::vector<std::pair<TopicPartition, std::int64_t>> poll_;  // what the current poll returned
  std::vector<ack_outcome> outcomes_;
  counters stats_;
};

}  // namespace kgroup::data::share
