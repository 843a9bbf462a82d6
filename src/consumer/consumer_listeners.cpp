// Consumer::impl, the rebalance listener handshake: the events poll() runs (listener calls,
// positions, data errors, commit results), the user thread's bookkeeping of ownership changes,
// the auto-commit before a revoke, and listener errors.
#include "consumer/consumer_impl.hpp"

namespace kgroup {

void Consumer::impl::bookkeep(const detail::listener_call& call) {
  if (call.kind != group::listener_kind::assigned) {
    // Revoked or lost: no record of these partitions is returned after this point, and lost
    // ones are never committed.
    for (const auto& tp : call.partitions) {
      drop_current(tp);
      positions_.drop(tp);
    }
    std::lock_guard lock(shared_.mutex);
    for (const auto& tp : call.partitions) {
      shared_.consumed.erase(tp);
      returned_.erase(tp);
    }
  } else {
    for (const auto& tp : call.partitions) positions_.own(tp);
  }
}

void Consumer::impl::invoke(const detail::listener_call& call) {
  if (call.kind == group::listener_kind::revoked && !call.partitions.empty()) {
    // Auto-commit what was consumed before giving the partitions back, so their next owner
    // starts where this one stopped.
    if (auto_commit_ && !inline_listener_) {
      fetch::commit_map offsets;
      for (const auto& tp : call.partitions) {
        if (auto p = positions_.position(tp)) offsets[tp] = {p->offset, "", p->epoch};
      }
      if (!offsets.empty()) {
        try {
          // Within what is left of close()'s timeout when close() revokes.
          auto deadline = clock::now() + default_timeout_;
          if (close_deadline_) deadline = std::min(deadline, *close_deadline_);
          commit_and_wait(offsets, deadline);
        } catch (const std::exception& e) {
          logger()->warn("auto-commit before revoking partitions failed: {}", e.what());
        }
      }
    }
  }
  // Revoked: the callback runs while the partitions are still this consumer's, so
  // commit_sync() and position() inside it cover them (as in Java); no record of theirs is
  // returned after it. Lost: the bookkeeping comes first, so nothing inside the callback can
  // commit them. Assigned: the new partitions are known to position() inside the callback.
  if (call.kind == group::listener_kind::revoked) {
    call_listener(call);
    bookkeep(call);
  } else {
    bookkeep(call);
    call_listener(call);
  }
}

void Consumer::impl::settle_late_cancel(const detail::listener_call& call) {
  if (call.kind == group::listener_kind::revoked) {
    late_revoked_.insert(call.partitions.begin(), call.partitions.end());
  } else if (call.kind == group::listener_kind::assigned && !call.partitions.empty()) {
    detail::listener_call lost{group::listener_kind::lost, call.partitions, 0};
    invoke(lost);
  }
}

void Consumer::impl::call_listener(const detail::listener_call& call) {
  std::shared_ptr<ConsumerRebalanceListener> l;
  {
    std::lock_guard lock(listener_mutex_);
    l = listener_;
  }
  if (!l) return;
  const auto started = clock::now();
  // The callback's duration (Java's partition-assigned/revoked/lost latency), thrown or not.
  struct record_duration {
    impl& self;
    group::listener_kind kind;
    clock::time_point started;
    ~record_duration() {
      const double s = std::chrono::duration<double>(clock::now() - started).count();
      std::lock_guard lock(self.shared_.mutex);
      auto& m = self.shared_.metrics;
      (kind == group::listener_kind::assigned  ? m.assigned_hist
       : kind == group::listener_kind::revoked ? m.revoked_hist
                                               : m.lost_hist)
          .observe(s);
    }
  } recorder{*this, call.kind, started};
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
    std::lock_guard lock(listener_mutex_);
    if (!listener_error_) listener_error_ = std::current_exception();
  }
}

void Consumer::impl::run_inline(const detail::listener_call& call) {
  call_listener(call);
  detail::listener_call bk = call;
  bk.bookkeeping_only = true;
  shared_.push(std::move(bk));
}

void Consumer::impl::run_events(bool throw_fatal, bool run_listeners) {
  for (;;) {
    detail::user_event e;
    {
      std::lock_guard lock(shared_.mutex);
      auto it = next_event(run_listeners);
      if (it == shared_.events.end()) break;
      e = std::move(*it);
      shared_.events.erase(it);
    }
    if (auto* call = std::get_if<detail::listener_call>(&e)) {
      if (call->bookkeeping_only) {
        bookkeep(*call);  // the callback already ran (and was acknowledged) on the background thread
        continue;
      }
      {
        // Checked and marked under one lock: a cancel that comes later finds it started and is
        // "late" (below) instead of racing with it.
        std::lock_guard lock(shared_.mutex);
        if (shared_.cancelled_listeners.erase(call->seq) > 0) continue;  // superseded (see cancel_listener)
        shared_.started_listeners.insert(call->seq);
      }
      post([this, seq = call->seq] { driver_->listener_started(seq); });
      if (call->kind == group::listener_kind::lost) {
        // Partitions a late-cancelled revoke already gave back are not lost as well.
        std::erase_if(call->partitions,
                      [&](const TopicPartition& tp) { return late_revoked_.count(tp) > 0; });
        late_revoked_.clear();
      } else if (call->kind == group::listener_kind::assigned) {
        for (const auto& tp : call->partitions) late_revoked_.erase(tp);  // ours again
      }
      if (call->kind != group::listener_kind::lost || !call->partitions.empty()) invoke(*call);
      bool late = false;
      {
        std::lock_guard lock(shared_.mutex);
        shared_.started_listeners.erase(call->seq);
        late = shared_.late_cancels.erase(call->seq) > 0;
      }
      if (late) settle_late_cancel(*call);
      post([this, seq = call->seq] { driver_->listener_done(seq); });
    } else if (auto* f = std::get_if<detail::fatal_error>(&e)) {
      std::lock_guard lock(shared_.mutex);
      shared_.fatal = *f;
    } else if (auto* pe = std::get_if<detail::position_event>(&e)) {
      if (pe->seek_applied) {
        positions_.seek_applied(pe->tp);
        continue;
      }
      bool owned;
      {
        std::lock_guard lock(shared_.mutex);
        owned = shared_.owned.count(pe->tp) > 0 || manual_.count(pe->tp) > 0;
      }
      if (pe->cut != detail::cut_kind::none) {
        if (owned) apply_cut(*pe);
        continue;
      }
      if (owned && positions_.position_found(pe->tp, pe->offset, pe->epoch, pe->forced)) drop_current(pe->tp);
    } else if (auto* de = std::get_if<detail::data_error>(&e)) {
      pending_data_errors_.push_back(*de);
    } else if (auto* cd = std::get_if<detail::commit_done>(&e)) {
      complete_async_commit(*cd);
    }
  }
  if (throw_fatal) {
    std::lock_guard lock(shared_.mutex);
    if (shared_.fatal) throw Error(shared_.fatal->code, shared_.fatal->message);
  }
}

std::deque<detail::user_event>::iterator Consumer::impl::next_event(bool run_listeners) {
  auto& q = shared_.events;
  if (run_listeners) return q.begin();
  // Listener calls stay queued. So do position events queued behind a listener call of their
  // partition: they belong to the ownership that call starts (or were computed for the one it
  // ends), and applied before it they would land on the wrong one.
  std::set<TopicPartition> behind_call;
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (const auto* call = std::get_if<detail::listener_call>(&*it)) {
      behind_call.insert(call->partitions.begin(), call->partitions.end());
      continue;
    }
    if (const auto* pe = std::get_if<detail::position_event>(&*it); pe && behind_call.count(pe->tp)) continue;
    return it;
  }
  return q.end();
}

void Consumer::impl::apply_cut(const detail::position_event& e) {
  const bool diverged = e.cut == detail::cut_kind::diverged;
  const auto before = positions_.position(e.tp);
  switch (positions_.cut(e.tp, e.offset, e.epoch, /*move_back=*/diverged && !e.halted)) {
    case data::cut_verdict::stale:
      return;  // a seek is in flight: the fetcher follows it, and the seek decides
    case data::cut_verdict::before:
      // Nothing returned so far is past the cut: the data fetched before it is read up to it
      // (the fetcher limited the queued data; this is the data being read), then the new data.
      cursor_.cut(e.tp, e.offset, e.epoch);
      if (e.halted) post([this, tp = e.tp, at = e.offset] { fetcher_->cut_accepted(tp, at); });
      return;
    case data::cut_verdict::moved_back: {
      drop_current(e.tp);
      // Auto-commit commits the position from now on, not past the divergence (as after a seek).
      std::lock_guard lock(shared_.mutex);
      if (shared_.consumed.count(e.tp) || returned_.count(e.tp)) shared_.consumed[e.tp] = {e.offset, e.epoch};
      returned_.erase(e.tp);
      return;
    }
    case data::cut_verdict::past:
      break;
  }
  drop_current(e.tp);
  const std::string name = e.tp.topic + "-" + std::to_string(e.tp.partition);
  const std::int64_t at = before ? before->offset : -1;
  if (!e.halted) {
    // Past the log's end: the position itself is out of range, and the reset policy applies to it.
    logger()->warn("{}: position {} is past the log's end {}; applying auto.offset.reset", name, at, e.offset);
    positions_.seek_to(e.tp);
    post([this, tp = e.tp] { fetcher_->reset_position(tp); });
    return;
  }
  // auto.offset.reset=none, and the application read past the cut: it decides (seek). The fetcher
  // waits, and no data it queued before is usable at this position.
  if (diverged) {
    std::string message = "log truncation detected for " + name + ": the position " + std::to_string(at) + " is ";
    message += e.offset < 0 ? "in a part of the log the leader cannot tell where its log diverged from"
                            : "past offset " + std::to_string(e.offset) + " (leader epoch " + std::to_string(e.epoch) +
                                  "), where the leader's log diverged";
    message += "; auto.offset.reset=none, so the partition waits for seek()";
    logger()->warn("{}", message);
    pending_data_errors_.push_back({e.tp, make_error_code(client_errc::log_truncation), message, e.offset, e.epoch});
  } else {
    const std::string message = "offset " + std::to_string(at) + " of " + name +
                                " is out of range (the log ends at offset " + std::to_string(e.offset) +
                                ") and auto.offset.reset=none";
    logger()->warn("{}", message);
    pending_data_errors_.push_back({e.tp, make_error_code(client_errc::offset_out_of_range), message});
  }
}

bool Consumer::impl::wait_left(std::uint64_t left_before, clock::time_point deadline) {
  for (;;) {
    run_events(/*throw_fatal=*/false);
    std::unique_lock lock(shared_.mutex);
    if (shared_.left_count > left_before) return true;
    if (!shared_.events.empty()) continue;
    if (clock::now() >= deadline) return false;
    shared_.cv.wait_until(lock, deadline,
                          [&] { return !shared_.events.empty() || shared_.left_count > left_before; });
  }
}

void Consumer::impl::rethrow_listener_error() {
  std::exception_ptr e;
  {
    std::lock_guard lock(listener_mutex_);
    e = std::exchange(listener_error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace kgroup
