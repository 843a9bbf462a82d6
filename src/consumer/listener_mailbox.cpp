// listener_mailbox: the user thread's half of the listener handshake.
#include "consumer/listener_mailbox.hpp"

#include <chrono>

#include "base/log.hpp"

namespace kgroup::detail {

bool listener_mailbox::start(listener_call& call) {
  {
    // Checked and marked under one lock: a cancel that comes later finds it started and is
    // "late" (finish()) instead of racing with it.
    std::lock_guard lock(shared_.mutex);
    if (shared_.cancelled_listeners.erase(call.seq) > 0) return false;  // superseded (see cancel_listener)
    shared_.started_listeners.insert(call.seq);
  }
  running_ = call.seq;
  if (call.kind == group::listener_kind::lost) {
    // Partitions a late-cancelled revoke already gave back are not lost as well.
    std::erase_if(call.partitions, [&](const TopicPartition& tp) { return late_revoked_.count(tp) > 0; });
    late_revoked_.clear();
  } else if (call.kind == group::listener_kind::assigned) {
    for (const auto& tp : call.partitions) late_revoked_.erase(tp);  // ours again
  }
  return true;
}

bool listener_mailbox::running_superseded() const {
  if (!running_) return false;
  std::lock_guard lock(shared_.mutex);
  return shared_.late_cancels.count(*running_) > 0;
}

std::optional<listener_call> listener_mailbox::finish(const listener_call& call) {
  running_.reset();
  bool late = false;
  {
    std::lock_guard lock(shared_.mutex);
    shared_.started_listeners.erase(call.seq);
    late = shared_.late_cancels.erase(call.seq) > 0;
  }
  if (!late) return std::nullopt;
  if (call.kind == group::listener_kind::revoked) {
    late_revoked_.insert(call.partitions.begin(), call.partitions.end());
  } else if (call.kind == group::listener_kind::assigned && !call.partitions.empty()) {
    return listener_call{group::listener_kind::lost, call.partitions, 0};
  }
  return std::nullopt;
}

void listener_mailbox::call_listener(const listener_call& call) {
  using clock = std::chrono::steady_clock;
  std::shared_ptr<ConsumerRebalanceListener> l;
  {
    std::lock_guard lock(mutex_);
    l = listener_;
  }
  if (!l) return;
  const auto started = clock::now();
  // The callback's duration (Java's partition-assigned/revoked/lost latency), thrown or not.
  struct record_duration {
    shared_state& shared;
    group::listener_kind kind;
    clock::time_point started;
    ~record_duration() {
      const double s = std::chrono::duration<double>(clock::now() - started).count();
      std::lock_guard lock(shared.mutex);
      auto& m = shared.metrics;
      (kind == group::listener_kind::assigned  ? m.assigned_hist
       : kind == group::listener_kind::revoked ? m.revoked_hist
                                               : m.lost_hist)
          .observe(s);
    }
  } recorder{shared_, call.kind, started};
  try {
    switch (call.kind) {
      case group::listener_kind::revoked:
        l->on_partitions_revoked(call.partitions);
        break;
      case group::listener_kind::assigned:
        l->on_partitions_assigned(call.partitions);
        break;
      case group::listener_kind::lost:
        l->on_partitions_lost(call.partitions);
        break;
    }
  } catch (...) {
    logger()->error("rebalance listener threw from on_partitions_{}; the rebalance continues",
                    group::to_string(call.kind));
    keep_error();
  }
}

void listener_mailbox::run_inline(const listener_call& call) {
  call_listener(call);
  listener_call bk = call;
  bk.bookkeeping_only = true;
  shared_.push(std::move(bk));
}

void listener_mailbox::keep_error() {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = std::current_exception();
}

void listener_mailbox::rethrow_error() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace kgroup::detail
