// Consumer::impl, poll(): waiting for records or events, the events it runs (listener calls
// through the listener mailbox, positions and data errors through the data reader, commit
// results), and the user thread's poll metrics.
#include "consumer/consumer_impl.hpp"

namespace kgroup {

ConsumerRecords Consumer::impl::poll(std::chrono::milliseconds timeout) {
  check_open();
  const auto started = clock::now();
  poll_stats_.poll_started(started);
  {
    std::lock_guard lock(shared_.mutex);
    shared_.metrics.last_poll = started;
    shared_.poll_began(started);
  }
  // However poll() ends (records, timeout, an exception), max.poll.interval.ms runs from then.
  // Written to the poll board, not posted: the background thread reads it before its membership
  // core judges anything (driver_base::sync_poll()).
  struct returned_guard {
    impl* self;
    ~returned_guard() {
      const auto now = clock::now();
      self->last_poll_return_ = now;
      std::lock_guard lock(self->shared_.mutex);
      self->shared_.poll_ended(now);
    }
  } guard{this};
  ConsumerRecords out = poll_records(deadline_after(timeout, started));
  poll_ended(started, out.size());
  return out;
}

bool Consumer::impl::may_have_left_group() {
  if (last_poll_return_ && clock::now() - *last_poll_return_ >= max_poll_interval_) return true;
  std::lock_guard lock(shared_.mutex);
  return shared_.standing.poll_timed_out;
}

ConsumerRecords Consumer::impl::poll_records(clock::time_point deadline) {
  reader_.publish_returned();
  // After a poll timeout the partitions are lost before any record is returned (a loss the
  // application has not seen would otherwise be skipped): tell the background thread at once
  // (it rejoins), wait until it has queued the loss (at least a second: the round trip is fast,
  // poll(0) must not skip it), then run it below. Only then: otherwise the call is on the poll
  // board (poll() above), and a busy poll loop pays no thread round trip per call (issue 37).
  // may_have_left_group() is asked after the board was written, so a timeout judged before the
  // core saw this call is one this test sees too.
  if (may_have_left_group()) {
    const std::uint64_t seq = ++poll_seq_;
    post([d = driver_, s = &shared_, seq] {
      d->poll_called();
      // Everything poll_called() queued (the loss after a poll timeout) is in `events` now.
      {
        std::lock_guard lock(s->mutex);
        s->poll_acked = seq;
      }
      s->cv.notify_all();
    });
    std::unique_lock lock(shared_.mutex);
    const bool acked = shared_.cv.wait_until(lock, std::max(deadline, clock::now() + std::chrono::seconds(1)),
                                             [&] { return shared_.poll_acked >= seq; });
    if (!acked) return ConsumerRecords{};
  }
  for (;;) {
    run_events(/*throw_fatal=*/true);
    listeners_.rethrow_error();
    reader_.raise_data_error();
    {
      std::lock_guard lock(shared_.mutex);
      if (shared_.woken) {
        shared_.woken = false;
        throw Error(make_error_code(client_errc::woken_up));
      }
    }
    auto batch = reader_.drain();
    // Also a batch of no records whose positions advanced (only transaction markers or aborted
    // records read): its next_offsets() are committable, as Java 4.0's poll() returns them.
    if (!batch.records.empty() || !batch.advanced.empty()) {
      std::map<TopicPartition, OffsetAndMetadata> next;
      for (const auto& [tp, pos] : batch.advanced)
        next[tp] = {pos.offset, "", pos.epoch >= 0 ? std::optional<std::int32_t>(pos.epoch) : std::nullopt};
      return ConsumerRecords(std::move(batch.records), std::move(batch.owners), std::move(next));
    }
    std::unique_lock lock(shared_.mutex);
    if (!shared_.events.empty() || !shared_.fetched.empty()) continue;
    if (clock::now() >= deadline) break;
    shared_.cv.wait_until(lock, deadline, [this] {
      return !shared_.events.empty() || !shared_.fetched.empty() || shared_.woken;
    });
  }
  return ConsumerRecords{};
}

void Consumer::impl::wakeup() {
  {
    std::lock_guard lock(shared_.mutex);
    shared_.woken = true;
  }
  shared_.cv.notify_all();
}

void Consumer::impl::poll_ended(clock::time_point started, std::size_t records) {
  const auto now = clock::now();
  poll_stats_.poll_ended(started, now, records);
  if (poll_stats_.publish_due(now)) {
    std::lock_guard lock(shared_.mutex);
    publish_user_metrics(now);
  }
  poll_stats_.report_statistics(now, [this] { return metrics(); });
}

void Consumer::impl::publish_user_metrics(clock::time_point now) {
  reader_.publish_partitions(shared_.metrics, who_->current() == mode::manual ? manual_ : shared_.owned);
  poll_stats_.publish(shared_.metrics, now);
}

void Consumer::impl::invoke(const detail::listener_call& call) {
  if (call.kind == group::listener_kind::revoked && !call.partitions.empty() && auto_commit_ &&
      !inline_listener_) {
    if (call.stale_claim) {
      // This member missed a generation: the partitions may be another member's already, so what
      // it consumed of them is not committed (their next owner reads it again: at-least-once).
      logger()->info(
          "revoking {} partition(s) claimed from an older generation: not auto-committing them, "
          "another member may own them already",
          call.partitions.size());
    } else {
      // Auto-commit what was consumed before giving the partitions back, so their next owner
      // starts where this one stopped (within what is left of close()'s timeout when close()
      // revokes).
      auto deadline = clock::now() + default_timeout_;
      if (close_deadline_) deadline = std::min(deadline, *close_deadline_);
      commits_.auto_commit(reader_.commit_positions({call.partitions.begin(), call.partitions.end()}),
                           deadline, "auto-commit before revoking partitions");
    }
  }
  // Revoked: the callback runs while the partitions are still this consumer's, so
  // commit_sync() and position() inside it cover them (as in Java); no record of theirs is
  // returned after it. Lost: the bookkeeping comes first, so nothing inside the callback can
  // commit them. Assigned: the new partitions are known to position() inside the callback.
  if (call.kind == group::listener_kind::revoked) {
    listeners_.call_listener(call);
    reader_.ownership_changed(call);
  } else {
    reader_.ownership_changed(call);
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
        reader_.ownership_changed(*call);  // the callback already ran on the background thread
        continue;
      }
      if (!listeners_.start(*call)) continue;  // superseded
      post([d = driver_, seq = call->seq] { d->listener_started(seq); });
      if (call->kind != group::listener_kind::lost || !call->partitions.empty()) invoke(*call);
      if (auto lost = listeners_.finish(*call)) invoke(*lost);  // cancelled late (listener_mailbox::finish)
      post([d = driver_, seq = call->seq] { d->listener_done(seq); });
    } else if (auto* f = std::get_if<detail::fatal_error>(&e)) {
      std::lock_guard lock(shared_.mutex);
      shared_.fatal = *f;
    } else if (auto* pe = std::get_if<detail::position_event>(&e)) {
      reader_.position_event(*pe, assigned_now(pe->tp));
    } else if (auto* de = std::get_if<detail::data_error>(&e)) {
      reader_.push_error(*de);
    } else if (auto* cd = std::get_if<detail::commit_done>(&e)) {
      commits_.complete(*cd);
    }
  }
  if (throw_fatal) {
    std::lock_guard lock(shared_.mutex);
    if (shared_.fatal) throw Error(shared_.fatal->code, shared_.fatal->message, /*fatal=*/true);
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
