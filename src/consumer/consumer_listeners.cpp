// Consumer::impl, the events poll() runs (listener calls through the listener mailbox,
// positions, data errors, commit results), the user thread's bookkeeping of ownership changes
// and the auto-commit before a revoke.
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
    listeners_.call_listener(call);
    bookkeep(call);
  } else {
    bookkeep(call);
    listeners_.call_listener(call);
  }
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
      if (!listeners_.start(*call)) continue;  // superseded
      post([this, seq = call->seq] { driver_->listener_started(seq); });
      if (call->kind != group::listener_kind::lost || !call->partitions.empty()) invoke(*call);
      if (auto lost = listeners_.finish(*call)) invoke(*lost);  // cancelled late (listener_mailbox::finish)
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

}  // namespace kgroup
