// The user thread's half of the rebalance listener handshake (the core's half is the listener
// slot of group/membership.hpp; the calls cross in shared_state). It holds the application's
// listener and the first exception a callback (or an async commit's callback) threw, checks each
// listener call against the core's cancels before and after it runs, and runs the callback,
// timing it for metrics. What the facade does around a call (the auto-commit before a revoke,
// its own bookkeeping of the partitions, telling the driver a call started and finished) stays
// in the facade.
//
// Threads: the user thread, except run_inline() and what it calls, which run on the background
// thread with rebalance.listener.thread=heartbeat; the listener and the error are guarded by a
// mutex for that reason. late_revoked_ is the user thread's.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "kgroup/rebalance_listener.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::detail {

class listener_mailbox {
 public:
  explicit listener_mailbox(shared_state& shared) : shared_(shared) {}

  void set_listener(std::shared_ptr<ConsumerRebalanceListener> l) {
    std::lock_guard lock(mutex_);
    listener_ = std::move(l);
  }

  /// A listener call taken off the queue: false if the core has superseded it (skipped, never
  /// run). Otherwise it is marked started (a cancel from now on is late, see finish()), and a
  /// lost call loses the partitions a late-cancelled revoke already gave back.
  bool start(listener_call& call);

  /// The call (started) has run. If the core cancelled it meanwhile it counts it as never run: a
  /// revoke did run, so the lost call that follows leaves its partitions out; an assignment did
  /// run, of a generation that is gone, so its partitions are lost at once, as the core never
  /// reports them: the lost call to run now is returned.
  std::optional<listener_call> finish(const listener_call& call);

  /// Whether the call the user thread is running now (between start() and finish()) was
  /// cancelled after it started: the core gave its partitions up and went on (the member was
  /// removed, and may have rejoined, while the callback ran). A commit from inside it would go out
  /// with a later membership's identity for the earlier one's offsets, so commit_client refuses it
  /// (found by kgroup-sim --group).
  bool running_superseded() const;
  /// The seq of the call the user thread is running now, 0 outside any.
  std::uint64_t running_seq() const noexcept { return running_.value_or(0); }

  /// Runs the application's callback for `call` (none without a listener) and remembers the
  /// first exception; the group carries on regardless.
  void call_listener(const listener_call& call);

  /// Background thread (rebalance.listener.thread=heartbeat): only the callback runs here; the
  /// user thread applies the bookkeeping from the bookkeeping-only event this queues.
  void run_inline(const listener_call& call);

  /// Remembers the current exception unless one is remembered already.
  void keep_error();

  /// Rethrows the remembered exception, if any, forgetting it.
  void rethrow_error();

 private:
  shared_state& shared_;
  std::mutex mutex_;  // listener_ and error_ (inline callbacks run on the background thread)
  std::shared_ptr<ConsumerRebalanceListener> listener_;
  std::exception_ptr error_;
  std::set<TopicPartition> late_revoked_;  // see finish()
  std::optional<std::uint64_t> running_;   // the call between start() and finish() (user thread)
};

}  // namespace kgroup::detail
