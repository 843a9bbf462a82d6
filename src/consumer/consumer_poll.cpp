// Consumer::impl, poll(): waiting for records or events, taking fetched data off the shared
// queue through the position table and the record cursor (src/data), raising data errors, and
// publishing the user thread's poll metrics (measured by poll_stats.hpp).
#include "consumer/consumer_impl.hpp"

namespace kgroup {

ConsumerRecords Consumer::impl::poll(std::chrono::milliseconds timeout) {
  check_open();
  const auto started = clock::now();
  poll_started(started);
  // However poll() ends (records, timeout, an exception), max.poll.interval.ms runs from then.
  struct returned_guard {
    impl* self;
    ~returned_guard() {
      self->last_poll_return_ = clock::now();
      self->post([s = self] { s->driver_->poll_returned(); });
    }
  } guard{this};
  ConsumerRecords out = poll_records(poll_deadline(started, timeout));
  poll_ended(started, out.size());
  return out;
}

bool Consumer::impl::may_have_left_group() {
  if (last_poll_return_ && clock::now() - *last_poll_return_ >= max_poll_interval_) return true;
  std::lock_guard lock(shared_.mutex);
  return shared_.standing.poll_timed_out;
}

bool Consumer::impl::wait_poll_acked(std::uint64_t seq, clock::time_point deadline) {
  deadline = std::max(deadline, clock::now() + std::chrono::seconds(1));
  std::unique_lock lock(shared_.mutex);
  return shared_.cv.wait_until(lock, deadline, [&] { return shared_.poll_acked >= seq; });
}

ConsumerRecords Consumer::impl::poll_records(clock::time_point deadline) {
  if (!returned_.empty()) {
    std::lock_guard lock(shared_.mutex);
    for (const auto& [tp, pos] : returned_) shared_.consumed[tp] = pos;
    returned_.clear();
  }
  const std::uint64_t seq = ++poll_seq_;
  post([this, seq] {
    driver_->poll_called();
    // Everything poll_called() queued (the loss after a poll timeout) is in `events` now.
    {
      std::lock_guard lock(shared_.mutex);
      shared_.poll_acked = seq;
    }
    shared_.cv.notify_all();
  });
  // After a poll timeout the partitions are lost before any record is returned (a loss the
  // application has not seen would otherwise be skipped): wait until the background thread has
  // queued the loss, then run it below. Only then, so that a busy poll loop does not pay a thread
  // round trip per call.
  if (may_have_left_group() && !wait_poll_acked(seq, deadline)) return ConsumerRecords{};
  for (;;) {
    run_events(/*throw_fatal=*/true);
    listeners_.rethrow_error();
    raise_data_error();
    {
      std::lock_guard lock(shared_.mutex);
      if (shared_.woken) {
        shared_.woken = false;
        throw Error(make_error_code(client_errc::woken_up));
      }
    }
    ConsumerRecords records = drain();
    if (!records.empty()) return records;
    std::unique_lock lock(shared_.mutex);
    if (!shared_.events.empty() || (!shared_.fetched.empty())) continue;
    if (clock::now() >= deadline) break;
    shared_.cv.wait_until(lock, deadline, [this] {
      return !shared_.events.empty() || !shared_.fetched.empty() || shared_.woken;
    });
  }
  return ConsumerRecords{};
}

void Consumer::impl::poll_started(clock::time_point now) {
  poll_stats_.poll_started(now);
  std::lock_guard lock(shared_.mutex);
  shared_.metrics.last_poll = now;
}

void Consumer::impl::poll_ended(clock::time_point started, std::size_t records) {
  const auto now = clock::now();
  poll_stats_.poll_ended(started, now, records);
  if (poll_stats_.publish_due(now)) {
    std::lock_guard lock(shared_.mutex);
    publish_user_metrics(now);
  }
  if (statistics_cb_ && statistics_interval_.count() > 0 && now >= next_statistics_) {
    next_statistics_ = now + statistics_interval_;
    auto snapshot = metrics();
    try {
      statistics_cb_(snapshot);
    } catch (const std::exception& e) {
      logger()->warn("statistics callback threw: {}", e.what());
    } catch (...) {
      logger()->warn("statistics callback threw");
    }
  }
}

void Consumer::impl::publish_user_metrics(clock::time_point now) {
  auto& m = shared_.metrics;
  m.partitions.clear();
  const bool manual = mode_ == mode::manual;
  for (const auto& tp : manual ? manual_ : shared_.owned) {
    auto& out = m.partitions[tp];
    if (const auto* p = positions_.find(tp)) {
      out.position = p->position;
      out.high_watermark = p->high_watermark;
      out.replica = p->replica;
      out.log_start_offset = p->log_start_offset;
      out.paused = p->paused;
    }
  }
  poll_stats_.publish(m, now);
}

void Consumer::impl::finish_cursor() {
  if (!cursor_.open()) return;
  const std::size_t bytes = cursor_.finish();
  {
    std::lock_guard lock(shared_.mutex);
    shared_.buffered_bytes -= std::min(shared_.buffered_bytes, bytes);
  }
  post([this] { fetcher_->wake(); });
}

bool Consumer::impl::next_cursor() {
  for (;;) {
    detail::fetched_data d;
    {
      std::lock_guard lock(shared_.mutex);
      if (shared_.fetched.empty()) return false;
      d = std::move(shared_.fetched.front());
      shared_.fetched.pop_front();
    }
    const auto fit = positions_.fit(d);
    if (fit != data::fetched_fit::usable) {
      std::lock_guard lock(shared_.mutex);
      // It may only look stale because the events that make it usable are still queued: the
      // background thread queues a partition's assignment (listener call) and its position
      // (position_event) before it fetches, but a Fetch answer can arrive after poll() ran the
      // events and before this drain() reaches it. Dropping it then stalled the partition for
      // good (the fetcher had moved past it; seen in the CLI tests as partitions never read).
      // So it goes back to the front and this drain() ends; poll() runs the events and drains
      // again. Data still unusable with no such event queued is stale (revoked, paused,
      // seeked) and dropped.
      const bool events_pending =
          std::any_of(shared_.events.begin(), shared_.events.end(), [](const detail::user_event& e) {
            return std::holds_alternative<detail::position_event>(e) ||
                   std::holds_alternative<detail::listener_call>(e);
          });
      if (events_pending) {
        shared_.fetched.push_front(std::move(d));
        return false;
      }
      shared_.buffered_bytes -= std::min(shared_.buffered_bytes, d.bytes);
      logger()->debug("{}-{}: fetched data from offset {} dropped ({})", d.tp.topic, d.tp.partition,
                      d.fetch_offset, data::to_string(fit));
      // The fetcher stops while the buffer is full and only the user thread wakes it: freeing
      // space by dropping must wake it too, as finish_cursor() does.
      post([this] { fetcher_->wake(); });
      continue;
    }
    positions_.note_fetched(d, read_committed_);
    poll_stats_.data_opened(d.bytes);
    cursor_.start(std::make_shared<detail::fetched_data>(std::move(d)));
    return true;
  }
}

ConsumerRecords Consumer::impl::drain() {
  data::poll_batch batch;
  while (batch.records.size() < max_poll_records_) {
    if (!cursor_.open() && !next_cursor()) break;
    const auto tp = *cursor_.partition();
    const auto stop = cursor_.read(batch, max_poll_records_, positions_);
    if (stop == data::record_cursor::stop::full) break;
    if (stop == data::record_cursor::stop::corrupt) corrupt_data(tp, cursor_.error(), cursor_.error_what());
    finish_cursor();
  }
  // Committable by auto-commit only from the next poll() on: the application processes these
  // records before it polls again (Java's at-least-once rule for auto-commit).
  for (const auto& [tp, pos] : batch.advanced) returned_[tp] = pos;
  return ConsumerRecords(std::move(batch.records), std::move(batch.owners));
}

void Consumer::impl::raise_data_error() {
  while (!pending_data_errors_.empty()) {
    auto e = std::move(pending_data_errors_.front());
    pending_data_errors_.pop_front();
    if (!positions_.owns(e.tp)) continue;  // given up since: nothing to report
    const auto truncation = make_error_code(client_errc::log_truncation);
    if (e.code != truncation) throw Error(e.code, e.message);
    std::map<TopicPartition, OffsetAndMetadata> divergent;
    std::string message = e.message;
    auto add = [&](const detail::data_error& d) {
      if (d.divergent_offset < 0) return;
      divergent[d.tp] = {
          d.divergent_offset, "",
          d.divergent_epoch >= 0 ? std::optional<std::int32_t>(d.divergent_epoch) : std::nullopt};
    };
    add(e);
    for (auto it = pending_data_errors_.begin(); it != pending_data_errors_.end();) {
      if (it->code != truncation || !positions_.owns(it->tp)) {
        ++it;
        continue;
      }
      add(*it);
      message += "; " + it->message;
      it = pending_data_errors_.erase(it);
    }
    throw LogTruncationError(message, std::move(divergent));
  }
}

void Consumer::impl::corrupt_data(const TopicPartition& tp, std::error_code ec, const char* what) {
  const auto p = positions_.position(tp).value_or(detail::epoch_offset{});
  const std::string message = "corrupt " + std::string(what) + " in " + tp.topic + "-" +
                              std::to_string(tp.partition) + " at offset " + std::to_string(p.offset) + ": " +
                              ec.message() + "; seek() past it to skip it";
  logger()->error("{}", message);
  pending_data_errors_.push_back({tp, make_error_code(client_errc::corrupt_record), message});
  post([this, tp, p] { fetcher_->refetch(tp, p.offset, p.epoch); });
}

}  // namespace kgroup
