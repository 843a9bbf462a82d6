// Consumer::impl, offsets: commits, committed(), position(), seeks, pause/resume, and the
// cluster queries (offsets by time or position, topics and partitions), each a request posted to
// the background thread and waited for.
#include "consumer/consumer_impl.hpp"

namespace kgroup {

void Consumer::impl::commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout) {
  check_open();
  const fetch::commit_map m = to_commit_map(offsets);
  const auto deadline = deadline_after(timeout);
  // As the header promises (and Java's commitSync): the callbacks of earlier commit_async() calls
  // run in here, in order, once their answers are in. Commits share one
  // coordinator connection, so those answers come before this commit's.
  const std::uint64_t before = next_request_id_;
  try {
    commit_and_wait(m, deadline);
  } catch (...) {
    finish_async_commits(before, clock::now());
    throw;
  }
  finish_async_commits(before, deadline);
}

void Consumer::impl::commit_async(const OffsetMap& offsets, CommitCallback cb) {
  check_open();
  send_async_commit(to_commit_map(offsets), offsets, std::move(cb));
}

void Consumer::impl::send_async_commit(fetch::commit_map m, const OffsetMap& offsets, CommitCallback cb) {
  const std::uint64_t id = ++next_request_id_;
  async_commits_[id] = {offsets, std::move(cb)};
  post([this, id, m = std::move(m)]() mutable { fetcher_->commit(id, std::move(m)); });
}

void Consumer::impl::complete_async_commit(const detail::commit_done& done) {
  auto it = async_commits_.find(done.id);
  if (it == async_commits_.end()) return;
  auto [offsets, cb] = std::move(it->second);
  async_commits_.erase(it);
  if (!cb) return;
  try {
    cb(offsets, done.code);
  } catch (...) {
    listeners_.keep_error();
  }
}

void Consumer::impl::finish_async_commits(std::uint64_t up_to, clock::time_point deadline) {
  for (;;) {
    std::vector<detail::commit_done> done;
    {
      std::unique_lock lock(shared_.mutex);
      auto pending = [&] {
        return !async_commits_.empty() && async_commits_.begin()->first <= up_to;
      };
      auto take = [&] {
        for (auto it = shared_.events.begin(); it != shared_.events.end();) {
          auto* d = std::get_if<detail::commit_done>(&*it);
          if (d && d->id <= up_to && async_commits_.count(d->id)) {
            done.push_back(std::move(*d));
            it = shared_.events.erase(it);
          } else {
            ++it;
          }
        }
        return !done.empty();
      };
      if (!pending()) return;
      if (!take()) {
        if (clock::now() >= deadline) return;
        shared_.cv.wait_until(lock, deadline);
        take();
      }
    }
    // Callbacks run without the lock, in the order the commits were made.
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (const auto& d : done) complete_async_commit(d);
  }
}

OffsetMap Consumer::impl::committed(const std::set<TopicPartition>& tps, std::chrono::milliseconds timeout) {
  check_open();
  const auto done = coordinator_request([this, tps](std::uint64_t id) { fetcher_->fetch_committed(id, tps); },
                                        deadline_after(timeout), "committed()");
  OffsetMap out;
  for (const auto& [tp, om] : done.offsets)
    out[tp] = {om.offset, om.metadata, om.epoch >= 0 ? std::optional<std::int32_t>(om.epoch) : std::nullopt};
  return out;
}

std::int64_t Consumer::impl::position(const TopicPartition& tp, std::chrono::milliseconds timeout) {
  check_open();
  const auto deadline = deadline_after(timeout);
  for (;;) {
    // Positions, errors and commit results only: listener callbacks (and the auto-commit before
    // a revoke) run inside poll(), close() and unsubscribe(), never in the middle of the
    // application's batch.
    run_events(/*throw_fatal=*/true, /*run_listeners=*/false);
    raise_data_error();
    if (auto p = positions_.position(tp)) return p->offset;
    {
      std::lock_guard lock(shared_.mutex);
      if (!shared_.owned.count(tp) && !manual_.count(tp)) {
        throw Error(make_error_code(client_errc::illegal_state), "position(): " + tp.topic + "-" +
                                                                     std::to_string(tp.partition) +
                                                                     " is not assigned to this consumer");
      }
    }
    std::unique_lock lock(shared_.mutex);
    if (clock::now() >= deadline)
      throw Error(make_error_code(client_errc::request_timed_out), "position(): not known in time");
    shared_.cv.wait_until(lock, std::min(deadline, clock::now() + std::chrono::milliseconds(100)),
                          [this] { return next_event(/*run_listeners=*/false) != shared_.events.end(); });
  }
}

void Consumer::impl::require_assigned(const TopicPartition& tp, const char* what) const {
  if (positions_.owns(tp)) return;
  {
    // Assigned to this consumer but not yet announced on this thread (its on_partitions_assigned
    // is still queued): allowed, the call applies to the coming ownership.
    std::lock_guard lock(shared_.mutex);
    if (mode_ == mode::manual ? manual_.count(tp) > 0 : shared_.owned.count(tp) > 0) return;
  }
  // As Java's IllegalStateException ("No current assignment for partition"): a seek or pause of a
  // partition not owned would outlive the call and apply to a later assignment.
  throw Error(make_error_code(client_errc::illegal_state), std::string(what) + ": " + tp.topic + "-" +
                                                               std::to_string(tp.partition) +
                                                               " is not assigned to this consumer");
}

std::set<TopicPartition> Consumer::impl::or_all_assigned(const std::set<TopicPartition>& tps) const {
  if (!tps.empty()) return tps;
  std::set<TopicPartition> all = assignment();
  for (const auto& [tp, p] : positions_.entries()) all.insert(tp);
  return all;
}

void Consumer::impl::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  check_open();
  if (offset < 0)
    throw Error(make_error_code(client_errc::invalid_argument),
                "seek(): negative offset " + std::to_string(offset));
  require_assigned(tp, "seek()");
  positions_.seek(tp, offset, epoch);
  drop_current(tp);
  {
    // What auto-commit commits is the seek target from now on (Java's allConsumed(): the
    // position): after a seek back, the records past the target are read again, never skipped.
    std::lock_guard lock(shared_.mutex);
    if (shared_.consumed.count(tp) || returned_.count(tp)) shared_.consumed[tp] = {offset, epoch};
    returned_.erase(tp);
  }
  post([this, tp, offset, epoch] { fetcher_->seek(tp, offset, epoch); });
}

void Consumer::impl::seek_to(const std::set<TopicPartition>& requested, bool beginning) {
  check_open();
  const char* what = beginning ? "seek_to_beginning()" : "seek_to_end()";
  // As Java: no partitions means every assigned partition.
  const std::set<TopicPartition> tps = or_all_assigned(requested);
  for (const auto& tp : tps) require_assigned(tp, what);
  for (const auto& tp : tps) {
    positions_.seek_to(tp);
    drop_current(tp);
  }
  post([this, tps, beginning] { fetcher_->seek_to(tps, beginning); });
}

void Consumer::impl::pause(const std::set<TopicPartition>& tps) {
  check_open();
  for (const auto& tp : tps) require_assigned(tp, "pause()");
  for (const auto& tp : tps) {
    positions_.pause(tp);
    drop_current(tp);
  }
  post([this, tps] { fetcher_->pause(tps); });
}

void Consumer::impl::resume(const std::set<TopicPartition>& tps) {
  check_open();
  for (const auto& tp : tps) require_assigned(tp, "resume()");
  std::map<TopicPartition, detail::epoch_offset> positions;
  for (const auto& tp : tps) {
    if (auto p = positions_.resume(tp)) positions[tp] = *p;
  }
  post([this, positions] { fetcher_->resume(positions); });
}

OffsetMap Consumer::impl::current_positions() const {
  OffsetMap out;
  for (const auto& [tp, p] : positions_.positions())
    out[tp] = {p.offset, "", p.epoch >= 0 ? std::optional<std::int32_t>(p.epoch) : std::nullopt};
  return out;
}

fetch::fetcher::offsets_result Consumer::impl::query_offsets(
    std::map<TopicPartition, std::int64_t> timestamps, std::chrono::milliseconds timeout,
    const std::string& what) {
  if (timestamps.empty()) return {};
  const auto deadline = deadline_after(timeout);
  return background_query<fetch::fetcher::offsets_result>(
      [this, timestamps = std::move(timestamps), deadline, what](auto promise) mutable {
        fetcher_->query_offsets(
            std::move(timestamps), deadline,
            [promise, what](std::error_code ec, const std::string& message,
                            fetch::fetcher::offsets_result r) {
              if (ec)
                promise->set_exception(std::make_exception_ptr(Error(ec, what + ": " + message)));
              else
                promise->set_value(std::move(r));
            });
      },
      deadline, what);
}

std::map<TopicPartition, std::int64_t> Consumer::impl::offsets_at(const std::set<TopicPartition>& tps,
                                                                  std::int64_t which,
                                                                  std::chrono::milliseconds timeout,
                                                                  const std::string& what) {
  std::map<TopicPartition, std::int64_t> want;
  for (const auto& tp : tps) want[tp] = which;
  std::map<TopicPartition, std::int64_t> out;
  for (const auto& [tp, r] : query_offsets(std::move(want), timeout, what)) out[tp] = r.first;
  return out;
}

std::map<TopicPartition, std::optional<OffsetAndTimestamp>> Consumer::impl::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout) {
  for (const auto& [tp, ts] : timestamps) {
    if (ts < 0)
      throw Error(make_error_code(client_errc::invalid_argument),
                  "offsets_for_times(): negative timestamp " + std::to_string(ts) + " for " + tp.topic + "-" +
                      std::to_string(tp.partition));
  }
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> out;
  for (const auto& [tp, r] : query_offsets(timestamps, timeout, "offsets_for_times()")) {
    out[tp] = r.first >= 0 ? std::optional<OffsetAndTimestamp>(OffsetAndTimestamp{r.first, r.second})
                           : std::nullopt;
  }
  return out;
}

std::map<std::string, std::vector<PartitionInfo>> Consumer::impl::topic_partitions(
    std::optional<std::vector<std::string>> topics, std::chrono::milliseconds timeout,
    const std::string& what) {
  using result = std::map<std::string, std::vector<PartitionInfo>>;
  const auto deadline = deadline_after(timeout);
  const auto request_timeout =
      std::max(std::chrono::milliseconds(1), std::min(config_.get_ms("request.timeout.ms"), timeout));
  return background_query<result>(
      [this, topics, request_timeout, what](auto promise) {
        cluster_->refresh_metadata(
            topics, request_timeout, [this, topics, promise, what](std::error_code ec) {
              if (ec) {
                promise->set_exception(
                    std::make_exception_ptr(Error(ec, what + ": metadata: " + ec.message())));
                return;
              }
              result out;
              for (const auto& [name, t] : cluster_->metadata().topics) {
                if (t.error_code != 0) continue;  // unknown (or unauthorized) topic: absent
                if (topics && std::find(topics->begin(), topics->end(), name) == topics->end()) continue;
                auto& parts = out[name];
                for (const auto& p : t.partitions)
                  parts.push_back({p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.error_code});
              }
              promise->set_value(std::move(out));
            });
      },
      deadline, what);
}

fetch::commit_map Consumer::impl::to_commit_map(const OffsetMap& offsets) {
  fetch::commit_map m;
  for (const auto& [tp, om] : offsets) {
    // As Java's OffsetAndMetadata: a negative offset (the default -1 included) is the caller's
    // mistake, refused before anything is sent.
    if (om.offset < 0)
      throw Error(make_error_code(client_errc::invalid_argument),
                  "commit: negative offset " + std::to_string(om.offset) + " for " + tp.topic + "-" +
                      std::to_string(tp.partition));
    m[tp] = {om.offset, om.metadata, om.leader_epoch.value_or(-1)};
  }
  return m;
}

std::optional<detail::commit_done> Consumer::impl::wait_request(std::uint64_t id,
                                                                clock::time_point deadline) {
  std::unique_lock lock(shared_.mutex);
  for (;;) {
    for (auto it = shared_.events.begin(); it != shared_.events.end(); ++it) {
      if (auto* d = std::get_if<detail::commit_done>(&*it); d && d->id == id) {
        detail::commit_done out = std::move(*d);
        shared_.events.erase(it);
        return out;
      }
    }
    if (clock::now() >= deadline) return std::nullopt;
    shared_.cv.wait_until(lock, deadline);
  }
}

}  // namespace kgroup
