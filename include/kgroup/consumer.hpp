/// \file
/// The consumer: joins a consumer group and (with the data path) returns the records of the
/// partitions it owns.
#pragma once

#include "kgroup/export.hpp"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kgroup/assignor.hpp"
#include "kgroup/cluster.hpp"
#include "kgroup/config.hpp"
#include "kgroup/error.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/rebalance_listener.hpp"
#include "kgroup/record.hpp"
#include "kgroup/types.hpp"

/// Everything kgroup offers an application. Start with Consumer (and Config to make one); errors
/// are kgroup::Error with a kafka_errc or client_errc code (error.hpp).
namespace kgroup {

/// Who this consumer is in its group, for transactional producers and diagnostics.
struct KGROUP_EXPORT ConsumerGroupMetadata {
  std::string group_id;                          ///< group.id
  std::string member_id;                         ///< empty until the first JoinGroup answer
  std::int32_t generation_id = -1;               ///< the group generation; -1 outside a group
  std::optional<std::string> group_instance_id;  ///< group.instance.id of a static member
};

/// An offset to commit (the offset of the next record to read) with optional metadata.
struct KGROUP_EXPORT OffsetAndMetadata {
  std::int64_t offset = -1;  ///< the next record to read (last processed + 1); never negative in a commit
  std::string metadata;      ///< free text stored with the commit (offset.metadata.max.bytes)
  /// The leader epoch of the last record processed (ConsumerRecord::leader_epoch); lets the next
  /// owner validate the position against a truncated log (KIP-320).
  std::optional<std::int32_t> leader_epoch;
  /// Field-wise equality.
  bool operator==(const OffsetAndMetadata&) const = default;
};

/// The records of one poll() call, in offset order per partition. Owns the fetched buffers the
/// records view: a ConsumerRecord (and any string_view taken from it) is valid as long as the
/// ConsumerRecords it came from. Movable and copyable (a copy shares the buffers).
class KGROUP_EXPORT ConsumerRecords {
 public:
  /// An empty batch.
  ConsumerRecords() = default;
  /// Whether the batch has no record (next_offsets() may still name partitions).
  bool empty() const noexcept { return records_.empty(); }
  /// Number of records.
  std::size_t size() const noexcept { return records_.size(); }
  /// Iterator to the first record (random access, over `const ConsumerRecord`).
  auto begin() const noexcept { return records_.begin(); }
  /// Iterator past the last record.
  auto end() const noexcept { return records_.end(); }
  /// The record at index `i` (unchecked: `i` must be below size()).
  const ConsumerRecord& operator[](std::size_t i) const { return records_[i]; }
  /// The records of one partition, in offset order (views into this batch, like the records).
  std::vector<std::reference_wrapper<const ConsumerRecord>> records(const TopicPartition& partition) const {
    std::vector<std::reference_wrapper<const ConsumerRecord>> out;
    for (const auto& r : records_) {
      if (r.partition == partition.partition && r.topic == partition.topic) out.emplace_back(r);
    }
    return out;
  }
  /// The records of one topic, in offset order per partition (views into this batch).
  std::vector<std::reference_wrapper<const ConsumerRecord>> records(std::string_view topic) const {
    std::vector<std::reference_wrapper<const ConsumerRecord>> out;
    for (const auto& r : records_) {
      if (r.topic == topic) out.emplace_back(r);
    }
    return out;
  }
  /// The partitions this batch has records of.
  std::set<TopicPartition> partitions() const {
    std::set<TopicPartition> out;
    for (const auto& r : records_) out.insert({std::string(r.topic), r.partition});
    return out;
  }
  /// Per partition whose position this poll() advanced: the offset of the next record to read and
  /// the leader epoch of the last one read (Java 4.0's nextOffsets(), KIP-1094). Committing it
  /// after processing the batch is at-least-once, epochs included. It can name a partition with no
  /// record in this batch (only transaction markers or aborted records were read), and a poll()
  /// that read only those returns an empty batch with next offsets.
  const std::map<TopicPartition, OffsetAndMetadata>& next_offsets() const noexcept { return next_offsets_; }

 private:
  friend class Consumer;  // only poll() fills a batch
  friend class ShareConsumer;
  ConsumerRecords(std::vector<ConsumerRecord> records, std::vector<std::shared_ptr<const void>> owners,
                  std::map<TopicPartition, OffsetAndMetadata> next_offsets)
      : records_(std::move(records)), owners_(std::move(owners)), next_offsets_(std::move(next_offsets)) {}
  std::vector<ConsumerRecord> records_;
  std::vector<std::shared_ptr<const void>> owners_;  // fetched frames and decompressed batches
  std::map<TopicPartition, OffsetAndMetadata> next_offsets_;
};

/// Offsets per partition: what commit_sync() and commit_async() take and committed() returns.
using OffsetMap = std::map<TopicPartition, OffsetAndMetadata>;

/// An offset found by time (Consumer::offsets_for_times) and the timestamp of its record.
struct KGROUP_EXPORT OffsetAndTimestamp {
  std::int64_t offset = -1;     ///< the offset found
  std::int64_t timestamp = -1;  ///< its record's timestamp, ms since the Unix epoch
  /// Field-wise equality.
  bool operator==(const OffsetAndTimestamp&) const = default;
};

/// What Consumer::close(const CloseOptions&) does (KIP-1092, Java 4.1's CloseOptions):
///
///     consumer.close({.group_membership_operation =
///     CloseOptions::GroupMembershipOperation::remain_in_group});
struct KGROUP_EXPORT CloseOptions {
  /// What happens to this member's place in the group. The revoke (or lost) listener runs before,
  /// and the offsets are committed, the same way for all three.
  enum class GroupMembershipOperation {
    /// Java's DEFAULT, what close(timeout) does: a dynamic member leaves (LeaveGroup; with
    /// group.protocol=consumer the leave heartbeat, epoch -1); a static member (group.instance.id)
    /// remains until session.timeout.ms passes, so a restart gets its partitions back (no
    /// LeaveGroup; the leave heartbeat with epoch -2).
    default_operation,
    /// Leaves now, static member or not (LeaveGroup naming the instance id; epoch -1): its
    /// partitions go to the others at once.
    leave_group,
    /// Remains until session.timeout.ms passes, dynamic member or not (no LeaveGroup; a dynamic
    /// member sends no leave heartbeat, a static one epoch -2). For a process that restarts at once
    /// under the same group.instance.id, or that hands over to the group's session timeout.
    remain_in_group,
  };
  /// What happens to the membership.
  GroupMembershipOperation group_membership_operation = GroupMembershipOperation::default_operation;
  /// How long close() may take, as close(timeout)'s argument.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
};

/// Thrown by poll() when the log of a partition was truncated below this consumer's position
/// (an unclean leader election, KIP-320) and auto.offset.reset is none: the records after
/// `divergent_offsets()` were lost or replaced. code() is client_errc::log_truncation. The
/// partitions stay where they are until the application seeks them (for example to the divergent
/// offset, or to a position of its own); with earliest or latest the consumer instead resumes at
/// the divergent offset by itself and logs a warning. A partition whose divergence point the
/// broker could not tell is absent from the map. Neither retriable nor fatal. See
/// docs/data-safety.md and [Handling errors](../../docs/errors.md).
class KGROUP_EXPORT LogTruncationError : public Error {
 public:
  /// An error with message `what` and the divergent offsets per partition.
  LogTruncationError(const std::string& what, OffsetMap divergent)
      : Error(make_error_code(client_errc::log_truncation), what), divergent_(std::move(divergent)) {}
  /// Per partition: the first offset known to diverge, with its leader epoch.
  const OffsetMap& divergent_offsets() const noexcept { return divergent_; }

 private:
  OffsetMap divergent_;
};
/// Thrown by poll() (and position()) for a problem of one partition, with the partition and offset
/// as fields a program can act on:
/// - client_errc::offset_out_of_range: auto.offset.reset is none and the partition has no valid
///   position (no committed offset, or `offset()` is outside the log); seek() it.
/// - client_errc::corrupt_record: the record data at `offset()` cannot be read (CRC mismatch,
///   unparsable); seek() to offset() + 1 to skip it, as the message says.
/// - client_errc::partition_not_found: the partition is gone from the cluster metadata (deleted
///   topic, or an assign() of a partition that never existed); offset() is -1.
/// Neither retriable nor fatal: the Consumer goes on with its other partitions.
class KGROUP_EXPORT PartitionError : public Error {
 public:
  /// An error with code `ec` (one of the three above) and message `what`, about `partition` at
  /// `offset` (-1 when none).
  PartitionError(std::error_code ec, const std::string& what, TopicPartition partition, std::int64_t offset)
      : Error(ec, what), partition_(std::move(partition)), offset_(offset) {}
  /// The partition concerned.
  const TopicPartition& partition() const noexcept { return partition_; }
  /// The offset concerned (the position out of range, the corrupt record's); -1 when none.
  std::int64_t offset() const noexcept { return offset_; }

 private:
  TopicPartition partition_;
  std::int64_t offset_ = -1;
};
/// Completion of commit_async(): the offsets and the outcome (empty error_code on success).
using CommitCallback = std::function<void(const OffsetMap&, std::error_code)>;
/// Receives a metrics snapshot every statistics.interval.ms (see Consumer::set_statistics_callback).
using StatisticsCallback = std::function<void(const ConsumerMetrics&)>;

/// A member of a Kafka consumer group.
///
/// Threads: one background thread per Consumer (the "heartbeat thread") does all network I/O,
/// heartbeats, rebalances and enforces max.poll.interval.ms. Not thread-safe: call it from one
/// thread at a time (callbacks it runs may call it back). A call from a second thread while one is
/// inside throws kgroup::Error(client_errc::concurrent_access), except wakeup() and the read-only
/// assignment(), subscription(), group_metadata(), group_state(), metrics() and http_endpoint(),
/// which any thread may call. Listener callbacks run on the user thread inside
/// poll(), close() and unsubscribe().
///
/// Errors: every failure is a kgroup::Error thrown on the calling thread (PartitionError and
/// LogTruncationError for a problem of one partition). Each method below names the codes it
/// throws and whether they are retriable (`e.is_retriable()`: the same call can succeed later) or
/// fatal (`e.is_fatal()`: this Consumer is unusable, close it); [Handling errors](../../docs/errors.md)
/// lists every code with what to do. Besides those: after close(), the methods that subscribe,
/// assign, poll, commit, seek, pause or ask the cluster throw client_errc::closed (fatal; the
/// read-only ones still answer); any method of a moved-from Consumer throws
/// client_errc::illegal_state, and a second thread's call client_errc::concurrent_access as above
/// (both neither retriable nor fatal: bugs of the calling program).
class KGROUP_EXPORT Consumer {
 public:
  /// Validates `config` (bootstrap.servers required; group.id is needed for subscribe() and
  /// commits) and starts the background thread.
  /// \throws kgroup::Error client_errc::invalid_config naming the offending keys (fatal: fix the
  ///   configuration).
  explicit Consumer(const Config& config);
  /// As above, with custom assignors: partition.assignment.strategy may name them as well as the
  /// built-ins (range, roundrobin, sticky, cooperative-sticky).
  /// \param config the configuration, as above
  /// \param custom_assignors assignors to choose from by their name()
  /// \throws kgroup::Error client_errc::invalid_config, also for a strategy that names no
  ///   built-in or custom assignor (fatal).
  Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors);
  /// Closes (see close()) with the default timeout, swallowing errors.
  ~Consumer();
  /// Not copyable: a Consumer is one group member.
  Consumer(const Consumer&) = delete;
  /// Not copyable.
  Consumer& operator=(const Consumer&) = delete;
  /// Movable (its background thread and state move along). A moved-from Consumer may only be
  /// destroyed or assigned to; any other call throws kgroup::Error(client_errc::illegal_state).
  /// Move assignment first closes the Consumer assigned to, as its destructor would.
  Consumer(Consumer&& other) noexcept;
  /// Closes this Consumer (as its destructor, swallowing errors), then takes over `other`.
  Consumer& operator=(Consumer&& other) noexcept;

  /// Subscribes to `topics` (replacing any earlier subscription) and joins the group on the next
  /// poll(). `listener` may be null.
  /// \param topics topic names, none empty
  /// \param listener called on partition changes (see ConsumerRebalanceListener); may be null
  /// \throws kgroup::Error client_errc::invalid_argument for an empty topic name and
  ///   client_errc::illegal_state after assign() (until unassign()), neither retriable nor fatal:
  ///   fix the call; client_errc::invalid_config without a group.id (fatal by its code: the
  ///   configuration must change). A refused subscribe() changes nothing.
  void subscribe(const std::vector<std::string>& topics, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// Same, for `consumer.subscribe({"orders", "audit"})` (which would otherwise be ambiguous
  /// with the pattern overload). Same errors.
  void subscribe(std::initializer_list<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr) {
    subscribe(std::vector<std::string>(topics), std::move(listener));
  }
  /// Subscribes to every topic whose name matches `pattern` (ECMAScript, whole name), re-evaluated
  /// whenever metadata is refreshed (metadata.max.age.ms). Internal topics are excluded while
  /// exclude.internal.topics is true.
  /// \throws kgroup::Error client_errc::invalid_argument with group.protocol=consumer (use a
  ///   SubscriptionPattern there) and client_errc::illegal_state after assign() (neither
  ///   retriable nor fatal); client_errc::invalid_config without a group.id (fatal).
  void subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// group.protocol=consumer (KIP-848) only: subscribes to every topic whose name the broker
  /// matches with `pattern` (RE2/J syntax, evaluated by the group coordinator, sent as
  /// ConsumerGroupHeartbeat's subscribed_topic_regex). A pattern the broker cannot compile ends the
  /// membership with kafka_errc::invalid_regular_expression, raised from poll() (fatal).
  /// \throws kgroup::Error client_errc::invalid_argument for an empty pattern or with
  ///   group.protocol=classic (whose patterns are std::regex, matched here) and
  ///   client_errc::illegal_state after assign() (neither retriable nor fatal);
  ///   client_errc::invalid_config without a group.id (fatal).
  void subscribe(const SubscriptionPattern& pattern, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// Gives up all partitions (on_partitions_revoked runs here, or on_partitions_lost if the
  /// membership already expired) and leaves the group. Blocks until done or
  /// default.api.timeout.ms passes. Rethrows the first listener exception (after every callback
  /// ran and the group was left).
  void unsubscribe();

  /// Manual assignment: consumes exactly these partitions, without joining a group (no
  /// heartbeats, no rebalances, no listener calls). Replaces any earlier manual assignment. With a
  /// group.id, commits and committed() still work (generation -1, no member id); without one they
  /// fail with client_errc::invalid_config. With enable.auto.commit, the positions of partitions
  /// a new assign() drops are committed (async; close() waits for it), as Java does.
  /// \throws kgroup::Error client_errc::illegal_state while subscribed (subscribe() and assign()
  ///   exclude each other until unsubscribe()/unassign()); client_errc::invalid_argument for an
  ///   empty topic name or a negative partition. Neither retriable nor fatal.
  void assign(const std::set<TopicPartition>& partitions);
  /// Stops consuming the manually assigned partitions (same as assign({})).
  void unassign();

  /// Runs due listener callbacks and returns up to max.poll.records records of owned, non-paused
  /// partitions, in offset order per partition. Waits up to `timeout` for records (0: returns
  /// what is buffered). Call it at least every max.poll.interval.ms, or the member leaves the
  /// group and its partitions are lost.
  /// \param timeout how long to wait when no record is buffered
  /// \returns the records, and in ConsumerRecords::next_offsets() the offsets to commit after them;
  ///   empty when none arrived in time
  /// \throws kgroup::Error the fatal group errors (fenced instance id, group authorization,
  ///   inconsistent protocols, group full, invalid session timeout, failed authentication or TLS,
  ///   no compatible API version; is_fatal() true, and every later poll() throws it again);
  ///   client_errc::woken_up after wakeup() (neither: shut down or go on).
  /// \throws kgroup::PartitionError client_errc::offset_out_of_range, corrupt_record or
  ///   partition_not_found for one partition (neither: seek() it, or drop it; the other
  ///   partitions go on).
  /// \throws kgroup::LogTruncationError client_errc::log_truncation with
  ///   auto.offset.reset=none (neither: seek() the partitions).
  /// \throws anything a listener callback threw: the first one, rethrown after every callback of
  ///   the rebalance ran.
  ConsumerRecords poll(std::chrono::milliseconds timeout);

  // ---- offsets and positions (the data path) ----

  /// Commits the position of every owned partition (the offset after the last record poll()
  /// returned) and waits for the answer (up to default.api.timeout.ms, retrying coordinator
  /// errors).
  /// \throws kgroup::Error kafka_errc::rebalance_in_progress (not retriable by is_retriable(),
  /// as in Kafka's table, yet the commit can succeed after the next poll(): poll() and commit
  /// what is still owned) while the group rebalances or this member joins it; client_errc::commit_failed
  /// (not retriable: the partitions may have a new owner, so do not commit these offsets again)
  /// when the membership that owned them is gone: it exceeded max.poll.interval.ms, the
  /// coordinator removed or fenced it (until it has rejoined), a fatal group error ended it, or it
  /// is leaving (unsubscribe()/close() after the revoke); the message says which.
  /// client_errc::request_timed_out (retriable) when no answer came in time, or the last
  /// retriable error; other Kafka codes of the OffsetCommit answer (e.g.
  /// kafka_errc::offset_metadata_too_large, group_authorization_failed) as they are;
  /// client_errc::invalid_config without a group.id (fatal by its code).
  void commit_sync();
  /// Same, waiting at most `timeout` instead of default.api.timeout.ms (then
  /// client_errc::request_timed_out, or the last retriable error).
  void commit_sync(std::chrono::milliseconds timeout);
  /// Commits exactly these offsets (same errors). Offsets are the next record to read: the last
  /// processed one + 1 (ConsumerRecords::next_offsets() has them).
  /// \throws kgroup::Error as commit_sync(); also client_errc::invalid_argument for a negative
  ///   offset (commits nothing), and client_errc::commit_failed for a partition this member does
  ///   not own now (a subscribed member; neither retriable nor fatal).
  void commit_sync(const OffsetMap& offsets);
  /// commit_sync(offsets) waiting at most `timeout` (then client_errc::request_timed_out, or the
  /// last retriable error).
  void commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout);
  /// Commits positions without waiting; `callback` (optional) runs inside a later poll(),
  /// commit_sync() or close() on this thread. commit_sync() waits (within its timeout) for the
  /// commit_async() calls made before it and runs their callbacks first, in order. A failed
  /// commit is not retried: the callback gets the error_code (the codes of commit_sync();
  /// classify it with kgroup::is_retriable() / is_fatal()).
  void commit_async(CommitCallback callback = nullptr);
  /// Commits exactly these offsets without waiting (as commit_async() and commit_sync(offsets)).
  /// \throws kgroup::Error client_errc::invalid_argument for a negative offset (commits nothing).
  void commit_async(const OffsetMap& offsets, CommitCallback callback = nullptr);
  /// Registers `callback` (null removes it) to receive the outcome of every auto-commit
  /// (enable.auto.commit=true): the periodic one, the one before a revoke, and those of a manual
  /// assignment (a narrower assign(), close()); with the offsets committed and an empty
  /// error_code, or the error it failed with (failed auto-commits are not retried; the next one
  /// commits the newer positions). It runs on this thread: inside poll() for the periodic
  /// commits; inside the call that waited for the others (the poll() or close() that runs a
  /// revoke, close() of a manual assignment), or, for the one a narrower assign() sends without waiting,
  /// inside a later poll(), commit_sync() or close(). What it throws is rethrown by the next poll(), as a
  /// listener's is. librdkafka reports auto-commits to its offset_commit_cb; Java has no equivalent besides
  /// interceptors (ConsumerInterceptor::onCommit sees successes only).
  void set_auto_commit_callback(CommitCallback callback);
  /// The last committed offsets of these partitions (absent: nothing committed). Blocks up to
  /// default.api.timeout.ms, retrying coordinator errors.
  /// \throws kgroup::Error client_errc::request_timed_out (retriable) or the last retriable
  ///   error when no answer came in time; a Kafka code of the OffsetFetch answer (e.g.
  ///   kafka_errc::group_authorization_failed); client_errc::invalid_config without a group.id
  ///   (fatal by its code).
  OffsetMap committed(const std::set<TopicPartition>& partitions);
  /// Same, waiting at most `timeout`.
  OffsetMap committed(const std::set<TopicPartition>& partitions, std::chrono::milliseconds timeout);

  /// The offset of the next record poll() returns for `partition` (an owned partition). Blocks
  /// until the position is known (committed offset or auto.offset.reset), up to
  /// default.api.timeout.ms.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not owned (neither);
  ///   client_errc::request_timed_out when not known in time (retriable).
  /// \throws kgroup::PartitionError client_errc::offset_out_of_range with
  ///   auto.offset.reset=none and no valid position (neither: seek() it).
  std::int64_t position(const TopicPartition& partition);
  /// Same, waiting at most `timeout` (then client_errc::request_timed_out).
  std::int64_t position(const TopicPartition& partition, std::chrono::milliseconds timeout);
  /// How many records of an owned partition are past its position: the last fetched high
  /// watermark (the last stable offset under read_committed) minus the position. Empty before
  /// the first fetch answer or the position is known, and for a partition not owned. Never
  /// blocks, never asks a broker.
  std::optional<std::int64_t> current_lag(const TopicPartition& partition) const;

  // ---- the cluster's view (asked of the brokers; any partitions, owned or not) ----

  /// The first offset of each partition (its log start). Blocks up to default.api.timeout.ms,
  /// retrying metadata and leader errors.
  /// \throws kgroup::Error client_errc::request_timed_out (retriable) when no answer came in
  ///   time, or the last broker error, e.g. kafka_errc::unknown_topic_or_partition (retriable in
  ///   Kafka's table: the topic may be being created).
  std::map<TopicPartition, std::int64_t> beginning_offsets(const std::set<TopicPartition>& partitions);
  /// Same, waiting at most `timeout`.
  std::map<TopicPartition, std::int64_t> beginning_offsets(const std::set<TopicPartition>& partitions,
                                                            std::chrono::milliseconds timeout);
  /// The end offset of each partition: the high watermark, or the last stable offset under
  /// isolation.level=read_committed. Same errors as beginning_offsets().
  std::map<TopicPartition, std::int64_t> end_offsets(const std::set<TopicPartition>& partitions);
  /// Same, waiting at most `timeout`.
  std::map<TopicPartition, std::int64_t> end_offsets(const std::set<TopicPartition>& partitions,
                                                      std::chrono::milliseconds timeout);
  /// Per partition, the earliest offset whose record timestamp is at or after the given one
  /// (milliseconds since the Unix epoch), with that timestamp; empty when no record is that
  /// recent.
  /// \throws kgroup::Error client_errc::invalid_argument for a negative timestamp (neither);
  ///   otherwise the errors of beginning_offsets().
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps);
  /// Same, waiting at most `timeout`.
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout);
  /// The partitions of `topic` from fresh metadata; empty when the topic does not exist. Blocks
  /// up to default.api.timeout.ms.
  /// \throws kgroup::Error client_errc::request_timed_out (retriable) when no metadata came in
  ///   time, or the last broker error.
  std::vector<PartitionInfo> partitions_for(const std::string& topic);
  /// Same, waiting at most `timeout`.
  std::vector<PartitionInfo> partitions_for(const std::string& topic, std::chrono::milliseconds timeout);
  /// Every topic the cluster reports (internal ones included) with its partitions. Same errors
  /// as partitions_for().
  std::map<std::string, std::vector<PartitionInfo>> list_topics();
  /// Same, waiting at most `timeout`.
  std::map<std::string, std::vector<PartitionInfo>> list_topics(std::chrono::milliseconds timeout);
  /// Next poll() returns records of `partition` from `offset`. Buffered records are dropped.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not assigned to this
  ///   consumer (as Java), client_errc::invalid_argument for a negative offset (neither).
  void seek(const TopicPartition& partition, std::int64_t offset);
  /// Same; with a leader epoch (a committed offset, a LogTruncationError's divergent offset)
  /// the position is first validated against the leader's log (KIP-320), as after a leader change.
  /// Same errors.
  void seek(const TopicPartition& partition, const OffsetAndMetadata& offset);
  /// Next poll() returns records from the log's start of these partitions; an empty set means
  /// every assigned partition.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not assigned (neither).
  void seek_to_beginning(const std::set<TopicPartition>& partitions);
  /// Next poll() returns records from the log's end of these partitions (only records appended
  /// after the end found); an empty set means every assigned partition.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not assigned (neither).
  void seek_to_end(const std::set<TopicPartition>& partitions);
  /// Stops returning (and fetching) records of these partitions until resume(). The partitions
  /// stay assigned, and the member stays in its group.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not assigned (and changes
  ///   nothing then; neither retriable nor fatal).
  void pause(const std::set<TopicPartition>& partitions);
  /// Returns records of these paused partitions again, from their position.
  /// \throws kgroup::Error client_errc::illegal_state for a partition not assigned (and changes
  ///   nothing then; neither retriable nor fatal).
  void resume(const std::set<TopicPartition>& partitions);
  /// The partitions pause() stopped and resume() has not resumed.
  std::set<TopicPartition> paused() const;

  /// Partitions this consumer currently owns. Any thread may call it.
  std::set<TopicPartition> assignment() const;
  /// The topics of the current subscription (for a pattern, the topics it matched last). Any
  /// thread may call it.
  std::vector<std::string> subscription() const;
  /// This member's identity in its group (for a transactional producer's
  /// sendOffsetsToTransaction, or diagnostics). Any thread may call it.
  ConsumerGroupMetadata group_metadata() const;
  /// Asks for a rebalance now (for example after the application's own state changed). `reason`
  /// is sent to the coordinator with the JoinGroup (KIP-800).
  void enforce_rebalance(const std::string& reason = "");
  /// Makes a poll() blocked in another thread (or the next one) throw client_errc::woken_up.
  /// Thread-safe: any thread may call it. Only poll() throws woken_up; the other blocking calls
  /// are not interrupted.
  void wakeup();
  /// Waits for commit_async() calls in flight (their callbacks run here), auto-commits a manual
  /// assignment's positions (enable.auto.commit), leaves the group (listener callbacks run here,
  /// and the auto-commit before the revoke), then stops the background thread, all within
  /// `timeout`. A static member (group.instance.id) does not send LeaveGroup, so a restart within
  /// session.timeout.ms keeps its partitions. Idempotent: later calls do nothing; any other
  /// method then throws client_errc::closed.
  /// \throws anything a listener callback threw: the first one, rethrown once the Consumer is
  ///   closed.
  void close(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// close(options.timeout), with what happens to the group membership as `options` says
  /// (KIP-1092: leave, remain until the session times out, or the default above). Without a
  /// subscription (assign() or nothing) the operation changes nothing. Same thread rules,
  /// idempotence and exceptions as close(timeout).
  void close(const CloseOptions& options);

  /// The membership state as text ("stable", "joining", ...), for diagnostics. Any thread may
  /// call it.
  std::string group_state() const;

  // ---- observability ----

  /// A snapshot of this consumer's metrics, identity, assignment and rebalance history (the same
  /// data the HTTP endpoint serves). Any thread may call it; from a thread other than the one
  /// polling, the poll-side figures (positions, rates) are those last published (every 100 ms).
  ConsumerMetrics metrics() const;
  /// Registers `callback` (null removes it) to receive metrics() every statistics.interval.ms
  /// (0, the default, means never). It runs on the polling thread, inside poll().
  void set_statistics_callback(StatisticsCallback callback);
  /// "host:port" where the HTTP endpoint (observability.http.listen) listens, empty when it is
  /// off. With port 0 in the configuration this is the port the system picked. Any thread may
  /// call it.
  std::string http_endpoint() const;

  /// The client instance id the broker assigned to this consumer for client telemetry (KIP-714,
  /// enable.metrics.push), in Kafka's base64url form (as Java's Uuid.toString() prints it): the
  /// id the cluster's metrics plugin files this consumer's pushed metrics under. Waits at most
  /// `timeout` for the broker's first GetTelemetrySubscriptions answer; returns immediately once
  /// the id is known, or once it is known that none will come.
  /// \returns the id; empty when not known within `timeout`, or never (the broker does not offer
  ///   the telemetry APIs, or refused them).
  /// \throws kgroup::Error client_errc::illegal_state with enable.metrics.push=false (Java's
  ///   IllegalStateException); client_errc::invalid_argument for a negative timeout;
  ///   client_errc::closed after close(). Neither retriable nor fatal.
  std::optional<std::string> client_instance_id(std::chrono::milliseconds timeout);

 private:
  class impl;
  class call;  // a public method's access to the impl (consumer.cpp)
  call self(bool any_thread = false) const;
  void close_quietly() noexcept;
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup
