// The consumer: joins a consumer group and (with the data path) returns the records of the
// partitions it owns.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kgroup/assignor.hpp"
#include "kgroup/config.hpp"
#include "kgroup/error.hpp"
#include "kgroup/rebalance_listener.hpp"
#include "kgroup/types.hpp"

namespace kgroup {

/// Who this consumer is in its group, for transactional producers and diagnostics.
struct ConsumerGroupMetadata {
  std::string group_id;
  std::string member_id;       // empty until the first JoinGroup answer
  std::int32_t generation_id = -1;
  std::optional<std::string> group_instance_id;
};

/// One record returned by poll().
struct ConsumerRecord {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp = -1;
  std::optional<std::string> key;
  std::optional<std::string> value;
};

/// The records of one poll() call.
class ConsumerRecords {
 public:
  ConsumerRecords() = default;
  explicit ConsumerRecords(std::vector<ConsumerRecord> records) : records_(std::move(records)) {}
  bool empty() const noexcept { return records_.empty(); }
  std::size_t size() const noexcept { return records_.size(); }
  auto begin() const noexcept { return records_.begin(); }
  auto end() const noexcept { return records_.end(); }

 private:
  std::vector<ConsumerRecord> records_;
};

/// A member of a Kafka consumer group.
///
/// Threads: one background thread per Consumer (the "heartbeat thread") does all network I/O,
/// heartbeats, rebalances and enforces max.poll.interval.ms. All methods are meant to be called
/// from one user thread, except wakeup(), which may be called from any thread. Listener callbacks
/// run on the user thread inside poll(), close() and unsubscribe().
class Consumer {
 public:
  /// Validates `config` (group.id and bootstrap.servers required) and starts the background
  /// thread. Throws kgroup::error(client_errc::invalid_config) naming the offending keys.
  explicit Consumer(const Config& config);
  /// As above, with custom assignors: partition.assignment.strategy may name them as well as the
  /// built-ins (range, roundrobin, sticky, cooperative-sticky).
  Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors);
  /// Closes (see close()) with the default timeout, swallowing errors.
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  /// Subscribes to `topics` (replacing any earlier subscription) and joins the group on the next
  /// poll(). `listener` may be null. Throws kgroup::error for an empty topic name or after close().
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
  /// Gives up all partitions (on_partitions_revoked runs here, or on_partitions_lost if the
  /// membership already expired) and leaves the group. Blocks until done or
  /// default.api.timeout.ms passes. Rethrows the first listener exception.
  void unsubscribe();

  /// Runs due listener callbacks and returns records of owned partitions (the data path arrives
  /// with its own issue; until then the batch is always empty). Waits up to `timeout` for
  /// something to happen. Throws kgroup::error for fatal group errors (fenced instance id,
  /// authorization, inconsistent protocols, group full), client_errc::woken_up after wakeup(), and
  /// rethrows the first exception a listener threw, after every callback of the rebalance ran.
  ConsumerRecords poll(std::chrono::milliseconds timeout);

  /// Partitions this consumer currently owns.
  std::set<topic_partition> assignment() const;
  /// The topics of the current subscription (for a pattern, the topics it matched last).
  std::vector<std::string> subscription() const;
  ConsumerGroupMetadata group_metadata() const;
  /// Asks for a rebalance now (for example after the application's own state changed). `reason`
  /// is sent to the coordinator with the JoinGroup (KIP-800).
  void enforce_rebalance(const std::string& reason = "");
  /// Makes a poll() blocked in another thread (or the next one) throw client_errc::woken_up.
  /// Thread-safe; the only method that may be called from any thread.
  void wakeup();
  /// Leaves the group (listener callbacks run here), then stops the background thread, within
  /// `timeout`. A static member (group.instance.id) does not send LeaveGroup, so a restart within
  /// session.timeout.ms keeps its partitions. Idempotent. Rethrows the first listener exception.
  void close(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// The membership state as text ("stable", "joining", ...), for diagnostics.
  std::string group_state() const;

  class impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup
