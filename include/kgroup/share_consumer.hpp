/// \file
/// The share consumer (KIP-932, "queues for Kafka"): a member of a share group. Many members read
/// the same partitions; the broker hands each record to one member at a time under an acquisition
/// lock, and the member acknowledges each record (accept, release for another try, or reject).
#pragma once

#include "kgroup/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "kgroup/record.hpp"
#include "kgroup/types.hpp"

namespace kgroup {

/// What a share consumer says about a record it was given (KIP-932's acknowledgement types).
enum class AcknowledgeType : std::int8_t {
  accept = 1,   ///< processed: the record is done for the group
  release = 2,  ///< not processed: available again, to any member, with its delivery count + 1
  reject = 3,   ///< unprocessable: archived, never delivered again
  renew = 4,    ///< still working on it: the acquisition lock starts again (brokers with ShareAcknowledge v2)
};
/// "accept", "release", "reject", "renew".
KGROUP_EXPORT const char* to_string(AcknowledgeType t) noexcept;

/// The outcome of acknowledgements of one partition: the offsets acknowledged, and the error that
/// failed them (empty on success). kafka_errc::invalid_record_state: the lock had expired, or the
/// record was acknowledged already; kafka_errc::share_session_not_found or
/// invalid_share_session_epoch, or a connection error: the records were released when the
/// member's session with the broker ended before the acknowledgement went out.
struct KGROUP_EXPORT AcknowledgementResult {
  std::set<std::int64_t> offsets;  ///< the offsets this result covers
  std::error_code error;           ///< empty: the broker applied them
};
/// Results per partition.
using AcknowledgementResults = std::map<TopicPartition, AcknowledgementResult>;

/// Called with the outcome of acknowledgements, on the application's thread, inside poll(),
/// commit_sync(), commit_async()'s later calls or close() (as Java's AcknowledgementCommitCallback).
/// One call's result for a partition has one outcome for all its offsets: acknowledgements of a
/// partition with different outcomes come in separate calls.
using AcknowledgementCommitCallback = std::function<void(const AcknowledgementResults&)>;

/// Figures of a share consumer (ShareConsumer::metrics()).
struct KGROUP_EXPORT ShareConsumerMetrics {
  std::string client_id;                      ///< client.id
  std::string group_id;                       ///< group.id
  std::string member_id;                      ///< this member's id (made by the client, kept for its life)
  std::int32_t member_epoch = 0;              ///< 0 while joining
  std::string state;                          ///< the membership state ("stable", "joining", ...)
  std::set<TopicPartition> assignment;        ///< partitions this member may fetch from
  std::uint64_t records_delivered = 0;        ///< records poll() returned
  std::uint64_t records_redelivered = 0;      ///< of those, with a delivery count above 1
  std::uint64_t acknowledged_accept = 0;      ///< acknowledgements sent to brokers: accept
  std::uint64_t acknowledged_release = 0;     ///< ... release (close() releases what is left)
  std::uint64_t acknowledged_reject = 0;      ///< ... reject
  std::uint64_t acknowledgements_failed = 0;  ///< records whose acknowledgement failed (callback errors)
  /// Of acknowledgements_failed, the records whose acknowledgement came too late: the broker
  /// answered kafka_errc::invalid_record_state, the record's acquisition lock had expired (the
  /// member held it past acquisition_lock_timeout()) or the record had moved on (delivered to
  /// another member, archived). Records released with a share session that ended are not counted
  /// here (their error is the session's).
  std::uint64_t acknowledgements_lock_expired = 0;
  std::uint64_t gaps_acknowledged = 0;   ///< acquired offsets without a record (compacted, markers)
  std::uint64_t share_fetches = 0;       ///< ShareFetch requests sent
  std::uint64_t share_acknowledges = 0;  ///< ShareAcknowledge requests sent
  std::uint64_t session_resets = 0;      ///< share sessions that started over at epoch 0
  std::map<std::int32_t, std::int32_t> session_epochs;  ///< per broker: the share session's next epoch
  std::uint64_t rebootstraps_total = 0;  ///< times it went back to bootstrap.servers (as a Consumer)
  std::string http_endpoint;             ///< "host:port" of observability.http.listen's endpoint; empty: off
};

/// A member of a share group (group.id): subscribe(), then poll() for records and acknowledge
/// them. With share.acknowledgement.mode=implicit (the default) every record a poll() returned is
/// accepted at the next poll(), commit_sync(), commit_async() or close(); with explicit, each
/// record must be acknowledged before the next poll(). As Java's KafkaShareConsumer.
///
/// With observability.http.listen set, the member serves GET /metrics (Prometheus text) and
/// GET /status (JSON) of metrics() there, as a Consumer does, and at GET / a dashboard of them
/// (docs/observability.md); there is no /group for a share member.
///
/// Not thread-safe: call it from one thread, except wakeup() and metrics(). Errors are
/// kgroup::Error; is_fatal() ones make it unusable (close it).
class KGROUP_EXPORT ShareConsumer {
 public:
  /// Validates `config` (bootstrap.servers and group.id required; keys that only mean something
  /// to consumer groups, such as auto.offset.reset or enable.auto.commit, are refused by name)
  /// and starts the background thread. Nothing is sent until subscribe().
  /// \throws kgroup::Error client_errc::invalid_config
  explicit ShareConsumer(const Config& config);
  /// Closes (see close()) with the default timeout, swallowing errors.
  ~ShareConsumer();
  ShareConsumer(const ShareConsumer&) = delete;
  ShareConsumer& operator=(const ShareConsumer&) = delete;

  /// Joins the share group for `topics` (replacing an earlier subscription); an empty list is
  /// unsubscribe().
  void subscribe(const std::vector<std::string>& topics);
  /// Leaves the group. Records acquired and not acknowledged are released.
  void unsubscribe();
  /// The topics subscribed to.
  std::vector<std::string> subscription() const;
  /// The partitions the group gave this member (other members may share them).
  std::set<TopicPartition> assignment() const;

  /// Acknowledges as share.acknowledgement.mode says (see the class), sends acknowledgements
  /// due, runs acknowledgement callbacks, then returns up to max.poll.records records acquired
  /// for this member, waiting up to `timeout` for some. Each record's delivery_count says how
  /// many times it was handed out (1 the first time). Call it at least every
  /// max.poll.interval.ms, or the member leaves the group (and rejoins at the next poll()).
  /// \throws kgroup::Error client_errc::illegal_state in explicit mode when a record of the last
  ///   poll() was not acknowledged; client_errc::woken_up after wakeup(); fatal group errors.
  ConsumerRecords poll(std::chrono::milliseconds timeout);

  /// Acknowledges `record` (one the last poll() returned) as `type`. Sent with the next
  /// poll(), commit_sync() or commit_async(). Explicit mode, or implicit mode to override the
  /// default accept of one record.
  /// \throws kgroup::Error client_errc::illegal_state when the record is not one the last poll()
  ///   returned or was already acknowledged, or `type` is renew and the broker cannot renew.
  void acknowledge(const ConsumerRecord& record, AcknowledgeType type = AcknowledgeType::accept);
  /// The same, by partition and offset.
  void acknowledge(const std::string& topic, std::int32_t partition, std::int64_t offset,
                   AcknowledgeType type = AcknowledgeType::accept);

  /// Sends the acknowledgements made so far and waits for their outcome, up to `timeout`.
  /// \returns the outcome per partition (also given to the callback): all the partition's offsets,
  ///   with an error if any of them failed (the callback tells applied and failed ones apart)
  /// \throws kgroup::Error client_errc::timed_out when some did not complete in time
  AcknowledgementResults commit_sync(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// Sends the acknowledgements made so far without waiting; their outcome goes to the callback.
  void commit_async();
  /// The callback for acknowledgement outcomes (null removes it).
  void set_acknowledgement_commit_callback(AcknowledgementCommitCallback callback);

  /// The broker's acquisition lock duration, once a ShareFetch answer has said it.
  std::optional<std::chrono::milliseconds> acquisition_lock_timeout() const;

  /// Makes a blocked (or the next) poll() throw client_errc::woken_up. Any thread.
  void wakeup();

  /// Sends pending acknowledgements (in implicit mode the records of the last poll() are
  /// released, not accepted, as Java does), closes the share sessions (releasing what is still
  /// acquired) and leaves the group, waiting up to `timeout`. Idempotent.
  void close(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// A snapshot of this member's figures. Any thread.
  ShareConsumerMetrics metrics() const;

  class impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup
