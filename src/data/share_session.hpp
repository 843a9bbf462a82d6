// One share session (KIP-932) of one member with one broker (the leader of the partitions it
// fetches there). Pure: no Asio, no threads, no clock.
//
// The broker keeps, per (member, broker), the share partitions of the session and an epoch. Both
// ShareFetch and ShareAcknowledge carry that one epoch, so at most one of them is outstanding per
// broker (this core refuses a second: share_errc::request_in_flight).
//
//   epoch   meaning
//   0       open a session (a new one, or one replacing a session the broker still holds, which
//           it closes, releasing every record still acquired in it). Lists every wanted
//           partition. Carries no acknowledgements (the broker refuses them: the records they
//           name belong to the old session). A ShareAcknowledge cannot open a session.
//   1..     incremental: lists the partitions added (or whose topic id changed) and those with
//           acknowledgements, and forgets the ones removed (`forgotten_topics_data`).
//           Acknowledgements are applied before fetching. The epoch grows by one per answered
//           request, INT32_MAX wraps to 1.
//   -1      close (ShareAcknowledge here): acknowledgements are applied, then everything still
//           acquired is released and the session ends.
//
// Epoch and errors (decisions in docs/DESIGN.md, "Share sessions and acknowledgements"):
// - the epoch advances only when the request succeeded as a whole (top-level ErrorCode 0);
//   partition errors do not stop it. Java's client advances it after any other top-level error
//   too; a broker that rejects a request at the top level (authorization, a bad request) has not
//   touched the session, and librdkafka's mock does not advance either (its fault M6), so we keep
//   it: were the broker's epoch moved after all, the next answer is INVALID_SHARE_SESSION_EPOCH
//   and the session resets.
// - back to epoch 0 ("reset") after SHARE_SESSION_NOT_FOUND (122), INVALID_SHARE_SESSION_EPOCH
//   (123), SHARE_SESSION_LIMIT_REACHED (133, the session was not created) and a request without
//   an answer (connection lost, timeout: the broker may or may not have applied it, and it drops
//   the sessions of a closed connection). A reset reports the partitions whose acquired records
//   are gone (`lost`) and why (`reset_cause()`); the acknowledgement tracker forgets them.
// - a top-level error that does not reset puts the session's partition list back as it was
//   before the request: the broker did not apply the additions and removals it carried.
//
// Use (the network share fetcher, one session per broker):
//   if (!s.busy()) { acks = tracker.take(...) if s.acks_allowed(); s.build_fetch(req, ...) }
//   ... s.on_fetch_answer(resp) / s.on_request_failed(ec), then apply the result to the tracker:
//   complete(tp, ec) for each entry of `acks`, forget(tp, reset_cause()) for each `lost`.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "data/share_types.hpp"
#include "kgroup/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data::share {

/// ShareFetch parameters from the configuration (the same for every broker).
struct fetch_params {
  std::string group_id;
  std::string member_id;
  std::int32_t max_wait_ms = 500;
  std::int32_t min_bytes = 1;
  std::int32_t max_bytes = 52428800;
  std::int32_t max_records = 500;  // max.poll.records, as Java sends it
  std::int32_t batch_size = 500;   // Java sends max.poll.records here too
  std::int8_t acquire_mode = 0;    // v2 only (ignorable): 0 batch-optimized, 1 record-limit
};

/// The complete set of partitions wanted from this broker, with their topic ids (share requests
/// name topics only by id).
using partition_ids = std::map<TopicPartition, protocol::uuid>;

/// The acknowledgements of one partition for one request (from ack_tracker::take).
struct partition_acks {
  protocol::uuid topic_id{};
  std::vector<ack_batch> batches;  // ascending, non-overlapping
};
using ack_map = std::map<TopicPartition, partition_acks>;

/// The epoch after `epoch` in a live session (INT32_MAX wraps to 1, never 0 or -1).
std::int32_t next_share_epoch(std::int32_t epoch) noexcept;

class share_session {
 public:
  using fetch_partition_data = protocol::share_fetch_response::share_fetchable_topic_response::partition_data;
  using ack_partition_data =
      protocol::share_acknowledge_response::share_acknowledge_topic_response::partition_data;

  explicit share_session(std::int32_t node = -1) : node_(node) {}

  /// What building a request did.
  struct build_result {
    /// request_in_flight (nothing written); for a ShareAcknowledge that cannot go out (nothing
    /// written, no request outstanding): reset_cause() or no_session at epoch 0 (every partition
    /// refused), renew_not_supported (every partition refused), nothing_to_send (no
    /// acknowledgements given and not a close).
    std::error_code error;
    /// Partitions whose acknowledgements the request does not carry, with the error their
    /// outcome gets (ack_tracker::complete): at epoch 0 reset_cause() (share_errc::no_session when
    /// the session was never open); RENEW below v2 renew_not_supported; a ShareFetch carries
    /// acknowledgements only for partitions it also fetches (send the others with a
    /// ShareAcknowledge): no_session.
    std::vector<std::pair<TopicPartition, std::error_code>> refused;
  };

  /// Writes a ShareFetch at `version` (1-2) for exactly the partitions `wanted`, carrying `acks`
  /// for those of them in the session (none at epoch 0). Afterwards the session assumes the
  /// broker holds `wanted`, and the request is outstanding.
  build_result build_fetch(protocol::share_fetch_request& req, std::int16_t version, const fetch_params& p,
                           const partition_ids& wanted, const ack_map& acks);

  /// The partitions a ShareFetch for `wanted` would forget (`forgotten_topics_data`): in the
  /// session and not wanted, or wanted under another topic id. Empty at epoch 0 (a new session
  /// forgets nothing). The broker releases what the member still holds of a forgotten partition,
  /// so the fetcher sends the acknowledgements of such a partition first (deferred_forgets()).
  std::vector<TopicPartition> leaving(const partition_ids& wanted) const;

  /// Of the partitions a ShareFetch for `wanted` would forget, those whose records the
  /// application still holds unacknowledged or whose acknowledgements have no answer yet
  /// (`unresolved`, the tracker's view): while any is left, the fetcher sends no ShareFetch here
  /// (it sends their acknowledgements with ShareAcknowledge), unless `overdue` names them (their
  /// acquisition locks have expired anyway, or the consumer closes). Busy or at epoch 0: empty.
  std::vector<TopicPartition> deferred_forgets(const partition_ids& wanted,
                                               const std::set<TopicPartition>& unresolved,
                                               const std::set<TopicPartition>& overdue = {}) const;

  /// Writes a ShareAcknowledge at `version` (1-2) carrying `acks`; with `close`, epoch -1: the
  /// broker applies them, releases everything else this member holds there and ends the session
  /// (`acks` may be empty then). Refused at epoch 0 (share_errc::no_session: there is no session
  /// to acknowledge in or to close).
  build_result build_acknowledge(protocol::share_acknowledge_request& req, std::int16_t version,
                                 const fetch_params& p, const ack_map& acks, bool close = false);

  /// The outcome of the outstanding request.
  struct answer_result {
    /// The top-level error (kafka_category), the transport error given to on_request_failed, or
    /// share_errc::unexpected_answer (nothing else in the result is set then).
    std::error_code error;
    /// The session went back to epoch 0 (reset, or closed by a close request): every partition
    /// of `lost` has no acquired records any more (ack_tracker::forget with reset_cause()).
    bool reset = false;
    std::vector<TopicPartition> lost;
    /// One entry per partition whose acknowledgements the request carried: the outcome of all of
    /// them (empty: applied). From AcknowledgeErrorCode (ShareFetch) or ErrorCode
    /// (ShareAcknowledge); the top-level or transport error when the request failed as a whole;
    /// share_errc::acknowledgement_unanswered when the answer does not name the partition.
    std::vector<std::pair<TopicPartition, std::error_code>> acks;
    /// The partitions the answer names, resolved to names (pointers into the answer).
    std::vector<std::pair<TopicPartition, const fetch_partition_data*>> fetched;
    std::vector<std::pair<TopicPartition, const ack_partition_data*>> acknowledged;
    /// Partitions named by the answer that the request did not carry (ignored).
    std::size_t unknown_partitions = 0;
    /// AcquisitionLockTimeoutMs of the answer (ShareFetch v1+, ShareAcknowledge v2+), or -1.
    std::int32_t acquisition_lock_timeout_ms = -1;
  };

  answer_result on_fetch_answer(const protocol::share_fetch_response& r);
  answer_result on_acknowledge_answer(const protocol::share_acknowledge_response& r);
  /// The outstanding request got no answer (connection lost, timeout): `why` is its error.
  answer_result on_request_failed(std::error_code why);

  std::int32_t node() const noexcept { return node_; }
  /// The epoch the next request carries (0: opens a session).
  std::int32_t next_epoch() const noexcept { return epoch_; }
  /// A request is outstanding.
  bool busy() const noexcept { return pending_ != kind::none; }
  /// Whether the next request may carry acknowledgements (an open session).
  bool acks_allowed() const noexcept { return epoch_ > 0; }
  /// Why the session was last reset to epoch 0 (empty if it never was): the error that
  /// acknowledgements of records acquired in the old session get.
  std::error_code reset_cause() const noexcept { return reset_cause_; }
  /// The partitions the broker is assumed to hold (after the last request built).
  const partition_ids& partitions() const noexcept { return partitions_; }
  /// Sessions opened (requests at epoch 0 answered without error) and resets, for metrics.
  std::uint64_t opens() const noexcept { return opens_; }
  std::uint64_t resets() const noexcept { return resets_; }

 private:
  enum class kind { none, fetch, acknowledge };

  template <class Data, class Response>
  answer_result on_answer(kind k, const Response& r);
  void reset(answer_result& out, std::error_code why, bool closed = false);
  std::error_code refused_epoch0_error() const;

  std::int32_t node_;
  std::int32_t epoch_ = 0;  // the next request's epoch
  partition_ids partitions_;
  std::error_code reset_cause_;
  std::uint64_t opens_ = 0;
  std::uint64_t resets_ = 0;

  // The outstanding request.
  kind pending_ = kind::none;
  std::int32_t pending_epoch_ = 0;
  partition_ids pending_prev_;  // partitions_ before it (restored when it fails without a reset)
  partition_ids pending_acks_;  // partitions whose acknowledgements it carries, with topic ids
};

}  // namespace kgroup::data::share
