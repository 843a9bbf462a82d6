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
  std::string group_id;
  std::string member_id;  ///< empty until the first JoinGroup answer
  std::int32_t generation_id = -1;
  std::optional<std::string> group_instance_id;
};

/// An offset to commit (the offset of the next record to read) with optional metadata.
struct KGROUP_EXPORT OffsetAndMetadata {
  std::int64_t offset = -1;
  std::string metadata;
  std::optional<std::int32_t> leader_epoch;
  bool operator==(const OffsetAndMetadata&) const = default;
};

/// The records of one poll() call, in offset order per partition. Owns the fetched buffers the
/// records view.
class KGROUP_EXPORT ConsumerRecords {
 public:
  ConsumerRecords() = default;
  bool empty() const noexcept { return records_.empty(); }
  std::size_t size() const noexcept { return records_.size(); }
  auto begin() const noexcept { return records_.begin(); }
  auto end() const noexcept { return records_.end(); }
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
  ConsumerRecords(std::vector<ConsumerRecord> records, std::vector<std::shared_ptr<const void>> owners,
                  std::map<TopicPartition, OffsetAndMetadata> next_offsets)
      : records_(std::move(records)), owners_(std::move(owners)), next_offsets_(std::move(next_offsets)) {}
  std::vector<ConsumerRecord> records_;
  std::vector<std::shared_ptr<const void>> owners_;  // fetched frames and decompressed batches
  std::map<TopicPartition, OffsetAndMetadata> next_offsets_;
};

using OffsetMap = std::map<TopicPartition, OffsetAndMetadata>;

/// An offset found by time (Consumer::offsets_for_times) and the timestamp of its record.
struct KGROUP_EXPORT OffsetAndTimestamp {
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;
  bool operator==(const OffsetAndTimestamp&) const = default;
};

/// Thrown by poll() when the log of a partition was truncated below this consumer's position
/// (an unclean leader election, KIP-320) and auto.offset.reset is none: the records after
/// `divergent_offsets()` were lost or replaced. code() is client_errc::log_truncation. The
/// partitions stay where they are until the application seeks them (for example to the divergent
/// offset, or to a position of its own); with earliest or latest the consumer instead resumes at
/// the divergent offset by itself and logs a warning. A partition whose divergence point the
/// broker could not tell is absent from the map.
class KGROUP_EXPORT LogTruncationError : public Error {
 public:
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
class KGROUP_EXPORT Consumer {
 public:
  /// Validates `config` (bootstrap.servers required; group.id is needed for subscribe() and
  /// commits) and starts the background thread. Throws kgroup::Error(client_errc::invalid_config) naming the offending keys.
  explicit Consumer(const Config& config);
  /// As above, with custom assignors: partition.assignment.strategy may name them as well as the
  /// built-ins (range, roundrobin, sticky, cooperative-sticky).
  Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors);
  /// Closes (see close()) with the default timeout, swallowing errors.
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;
  /// Movable (its background thread and state move along). A moved-from Consumer may only be
  /// destroyed or assigned to; any other call throws kgroup::Error(client_errc::illegal_state).
  /// Move assignment first closes the Consumer assigned to, as its destructor would.
  Consumer(Consumer&& other) noexcept;
  Consumer& operator=(Consumer&& other) noexcept;

  /// Subscribes to `topics` (replacing any earlier subscription) and joins the group on the next
  /// poll(). `listener` may be null. Throws kgroup::Error for an empty topic name or after close().
  void subscribe(const std::vector<std::string>& topics, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// Same, for `consumer.subscribe({"orders", "audit"})` (which would otherwise be ambiguous
  /// with the pattern overload).
  void subscribe(std::initializer_list<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr) {
    subscribe(std::vector<std::string>(topics), std::move(listener));
  }
  /// Subscribes to every topic whose name matches `pattern` (ECMAScript, whole name), re-evaluated
  /// whenever metadata is refreshed (metadata.max.age.ms). Internal topics are excluded while
  /// exclude.internal.topics is true.
  void subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// group.protocol=consumer (KIP-848) only: subscribes to every topic whose name the broker
  /// matches with `pattern` (RE2/J syntax, evaluated by the group coordinator, sent as
  /// ConsumerGroupHeartbeat's subscribed_topic_regex). A pattern the broker cannot compile ends the
  /// membership with kafka_errc::invalid_regular_expression, raised from poll(). Throws
  /// kgroup::Error(client_errc::invalid_argument) for an empty pattern or with
  /// group.protocol=classic (whose patterns are std::regex, matched here).
  void subscribe(const SubscriptionPattern& pattern, std::shared_ptr<ConsumerRebalanceListener> listener = nullptr);
  /// Gives up all partitions (on_partitions_revoked runs here, or on_partitions_lost if the
  /// membership already expired) and leaves the group. Blocks until done or
  /// default.api.timeout.ms passes. Rethrows the first listener exception.
  void unsubscribe();

  /// Manual assignment: consumes exactly these partitions, without joining a group (no
  /// heartbeats, no rebalances, no listener calls). Replaces any earlier manual assignment. With a
  /// group.id, commits and committed() still work (generation -1, no member id); without one they
  /// fail with client_errc::invalid_config. Throws client_errc::illegal_state while subscribed
  /// (subscribe() and assign() exclude each other until unsubscribe()/unassign()). With
  /// enable.auto.commit, the positions of partitions a new assign() drops are committed (async;
  /// close() waits for it), as Java does.
  void assign(const std::set<TopicPartition>& partitions);
  /// Stops consuming the manually assigned partitions (same as assign({})).
  void unassign();

  /// Runs due listener callbacks and returns up to max.poll.records records of owned, non-paused
  /// partitions, in offset order per partition. Waits up to `timeout` for records. Throws kgroup::Error for fatal group errors (fenced instance id,
  /// authorization, inconsistent protocols, group full), client_errc::woken_up after wakeup(), and
  /// rethrows the first exception a listener threw, after every callback of the rebalance ran.
  ConsumerRecords poll(std::chrono::milliseconds timeout);

  // ---- offsets and positions (the data path) ----

  /// Commits the position of every owned partition (the offset after the last record poll()
  /// returned) and waits for the answer (up to default.api.timeout.ms, retrying coordinator
  /// errors). Throws kgroup::Error: kafka_errc::rebalance_in_progress (retriable: poll() and
  /// commit again) while the group rebalances or this member joins it; client_errc::commit_failed
  /// (not retriable: the partitions may have a new owner, so do not commit these offsets again)
  /// when the membership that owned them is gone: it exceeded max.poll.interval.ms, the
  /// coordinator removed or fenced it (until it has rejoined), a fatal group error ended it, or it
  /// is leaving (unsubscribe()/close() after the revoke); the message says which.
  void commit_sync();
  /// Same, waiting at most `timeout` instead of default.api.timeout.ms (then
  /// client_errc::request_timed_out, or the last retriable error).
  void commit_sync(std::chrono::milliseconds timeout);
  /// Commits exactly these offsets (same errors). A negative offset throws
  /// client_errc::invalid_argument and commits nothing.
  void commit_sync(const OffsetMap& offsets);
  void commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout);
  /// Commits positions without waiting; `callback` (optional) runs inside a later poll(),
  /// commit_sync() or close() on this thread. commit_sync() waits (within its timeout) for the
  /// commit_async() calls made before it and runs their callbacks first, in order.
  void commit_async(CommitCallback callback = nullptr);
  void commit_async(const OffsetMap& offsets, CommitCallback callback = nullptr);
  /// The last committed offsets of these partitions (absent: nothing committed). Blocks up to
  /// default.api.timeout.ms. Throws kgroup::Error on failure.
  OffsetMap committed(const std::set<TopicPartition>& partitions);
  /// Same, waiting at most `timeout`.
  OffsetMap committed(const std::set<TopicPartition>& partitions, std::chrono::milliseconds timeout);

  /// The offset of the next record poll() returns for `partition` (an owned partition). Blocks
  /// until the position is known (committed offset or auto.offset.reset), up to
  /// default.api.timeout.ms. Throws client_errc::illegal_state for a partition not owned.
  std::int64_t position(const TopicPartition& partition);
  /// Same, waiting at most `timeout` (then client_errc::request_timed_out).
  std::int64_t position(const TopicPartition& partition, std::chrono::milliseconds timeout);
  /// How many records of an owned partition are past its position: the last fetched high
  /// watermark (the last stable offset under read_committed) minus the position. Empty before
  /// the first fetch answer or the position is known. Never blocks, never asks a broker.
  std::optional<std::int64_t> current_lag(const TopicPartition& partition) const;

  // ---- the cluster's view (asked of the brokers; any partitions, owned or not) ----

  /// The first offset of each partition (its log start). Blocks up to `timeout`
  /// (default.api.timeout.ms without one), retrying metadata and leader errors; throws
  /// kgroup::Error (client_errc::request_timed_out, or the last broker error, e.g.
  /// UNKNOWN_TOPIC_OR_PARTITION).
  std::map<TopicPartition, std::int64_t> beginning_offsets(const std::set<TopicPartition>& partitions);
  std::map<TopicPartition, std::int64_t> beginning_offsets(const std::set<TopicPartition>& partitions,
                                                            std::chrono::milliseconds timeout);
  /// The end offset of each partition: the high watermark, or the last stable offset under
  /// isolation.level=read_committed. Same errors.
  std::map<TopicPartition, std::int64_t> end_offsets(const std::set<TopicPartition>& partitions);
  std::map<TopicPartition, std::int64_t> end_offsets(const std::set<TopicPartition>& partitions,
                                                      std::chrono::milliseconds timeout);
  /// Per partition, the earliest offset whose record timestamp is at or after the given one
  /// (milliseconds since the Unix epoch), with that timestamp; empty when no record is that
  /// recent. A negative timestamp throws client_errc::invalid_argument. Same errors.
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps);
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout);
  /// The partitions of `topic` from fresh metadata; empty when the topic does not exist.
  std::vector<PartitionInfo> partitions_for(const std::string& topic);
  std::vector<PartitionInfo> partitions_for(const std::string& topic, std::chrono::milliseconds timeout);
  /// Every topic the cluster reports (internal ones included) with its partitions.
  std::map<std::string, std::vector<PartitionInfo>> list_topics();
  std::map<std::string, std::vector<PartitionInfo>> list_topics(std::chrono::milliseconds timeout);
  /// Next poll() returns records of `partition` from `offset`. Buffered records are dropped.
  /// Throws client_errc::illegal_state for a partition not assigned to this consumer (as Java), and
  /// client_errc::invalid_argument for a negative offset.
  void seek(const TopicPartition& partition, std::int64_t offset);
  /// Same; with a leader epoch (a committed offset, a LogTruncationError's divergent offset)
  /// the position is first validated against the leader's log (KIP-320), as after a leader change.
  void seek(const TopicPartition& partition, const OffsetAndMetadata& offset);
  /// Next poll() returns records from the log's start (end) of these partitions; an empty set means
  /// every assigned partition. Throws client_errc::illegal_state for a partition not assigned.
  void seek_to_beginning(const std::set<TopicPartition>& partitions);
  void seek_to_end(const std::set<TopicPartition>& partitions);
  /// Stops returning (and fetching) records of these partitions until resume(). pause() and resume()
  /// throw client_errc::illegal_state for a partition not assigned (and change nothing then).
  void pause(const std::set<TopicPartition>& partitions);
  void resume(const std::set<TopicPartition>& partitions);
  std::set<TopicPartition> paused() const;

  /// Partitions this consumer currently owns.
  std::set<TopicPartition> assignment() const;
  /// The topics of the current subscription (for a pattern, the topics it matched last).
  std::vector<std::string> subscription() const;
  ConsumerGroupMetadata group_metadata() const;
  /// Asks for a rebalance now (for example after the application's own state changed). `reason`
  /// is sent to the coordinator with the JoinGroup (KIP-800).
  void enforce_rebalance(const std::string& reason = "");
  /// Makes a poll() blocked in another thread (or the next one) throw client_errc::woken_up.
  /// Thread-safe; the only method that may be called from any thread.
  void wakeup();
  /// Waits for commit_async() calls in flight (their callbacks run here), auto-commits a manual
  /// assignment's positions (enable.auto.commit), leaves the group (listener callbacks run here,
  /// and the auto-commit before the revoke), then stops the background thread, all within
  /// `timeout`. A static member (group.instance.id) does not send LeaveGroup, so a restart within
  /// session.timeout.ms keeps its partitions. Idempotent. Rethrows the first listener exception.
  void close(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// The membership state as text ("stable", "joining", ...), for diagnostics.
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
  /// off. With port 0 in the configuration this is the port the system picked.
  std::string http_endpoint() const;

 private:
  class impl;
  class call;  // a public method's access to the impl (consumer.cpp)
  call self(bool any_thread = false) const;
  void close_quietly() noexcept;
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup
