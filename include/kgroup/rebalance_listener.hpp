/// \file
/// Callbacks for partition ownership changes in a consumer group.
#pragma once

#include "kgroup/export.hpp"

#include <vector>

#include "kgroup/types.hpp"

namespace kgroup {

/// Implement to learn when this consumer gains or gives up partitions.
///
/// By default the callbacks run on the thread that calls Consumer::poll(), close() or
/// unsubscribe(), inside that call, never concurrently with each other. (The opt-in
/// `rebalance.listener.thread=heartbeat` runs them on the consumer's background thread instead;
/// see its hazards in docs/listener.md, "Which thread".)
///
/// An exception thrown by a callback does not stall the group: the rebalance completes, every
/// callback still runs, and the call that ran them (poll(), close(), unsubscribe()) rethrows the
/// first exception afterwards.
class KGROUP_EXPORT ConsumerRebalanceListener {
 public:
  virtual ~ConsumerRebalanceListener() = default;

  /// These partitions are being taken away in an orderly rebalance. Commit their offsets here if
  /// you commit manually: their new owner starts from the committed offset, and it is given the
  /// partitions only after this callback returns. Eager rebalances revoke everything; cooperative
  /// rebalances revoke only the partitions that move. Not called with an empty list. Inside it
  /// the partitions are still this consumer's: commit_sync() without arguments and position()
  /// cover them.
  virtual void on_partitions_revoked(const std::vector<TopicPartition>& partitions) { (void)partitions; }

  /// These partitions were added to this consumer's assignment. Cooperative rebalances pass only
  /// the newly added partitions, and call it even when none were added.
  virtual void on_partitions_assigned(const std::vector<TopicPartition>& partitions) { (void)partitions; }

  /// These partitions were lost: this consumer's membership expired (session timeout, poll
  /// timeout, fenced generation), so other members may already own them. Do NOT commit their
  /// offsets. This is not followed by on_partitions_revoked for the same partitions. Not called
  /// with an empty list. A revoke or assign callback that had not run yet when the membership
  /// expired is dropped: its partitions are reported here (revoke) or never announced (assign).
  virtual void on_partitions_lost(const std::vector<TopicPartition>& partitions) { (void)partitions; }
};

}  // namespace kgroup
