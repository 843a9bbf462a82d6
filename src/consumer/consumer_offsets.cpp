// Consumer::impl, offsets: commits and committed() (through the commit client), position(),
// seeks and pause/resume (through the data reader), each checked against the assignment first.
#include "consumer/consumer_impl.hpp"

namespace kgroup {

void Consumer::impl::commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout) {
  check_open();
  reader_.offsets_committed(offsets);
  commits_.commit_sync(detail::commit_client::to_commit_map(offsets), deadline_after(timeout));
}

void Consumer::impl::commit_async(const OffsetMap& offsets, CommitCallback cb) {
  check_open();
  reader_.offsets_committed(offsets);
  commits_.commit_async(detail::commit_client::to_commit_map(offsets), offsets, std::move(cb));
}

OffsetMap Consumer::impl::committed(const std::set<TopicPartition>& tps, std::chrono::milliseconds timeout) {
  check_open();
  OffsetMap out;
  for (const auto& [tp, om] : commits_.committed(tps, deadline_after(timeout)))
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
    reader_.raise_data_error();
    if (auto p = reader_.positions().position(tp)) return p->offset;
    if (!assigned_now(tp)) {
      throw Error(make_error_code(client_errc::illegal_state), "position(): " + tp.topic + "-" +
                                                                   std::to_string(tp.partition) +
                                                                   " is not assigned to this consumer");
    }
    std::unique_lock lock(shared_.mutex);
    if (clock::now() >= deadline)
      throw Error(make_error_code(client_errc::request_timed_out), "position(): not known in time");
    shared_.cv.wait_until(lock, std::min(deadline, clock::now() + std::chrono::milliseconds(100)),
                          [this] { return next_event(/*run_listeners=*/false) != shared_.events.end(); });
  }
}

bool Consumer::impl::assigned_now(const TopicPartition& tp) const {
  std::lock_guard lock(shared_.mutex);
  return shared_.owned.count(tp) > 0 || manual_.count(tp) > 0;
}

void Consumer::impl::require_assigned(const TopicPartition& tp, const char* what) const {
  if (reader_.positions().owns(tp)) return;
  {
    // Assigned to this consumer but not yet announced on this thread (its on_partitions_assigned
    // is still queued): allowed, the call applies to the coming ownership.
    std::lock_guard lock(shared_.mutex);
    if (who_->current() == mode::manual ? manual_.count(tp) > 0 : shared_.owned.count(tp) > 0) return;
  }
  // As Java's IllegalStateException ("No current assignment for partition"): a seek or pause of a
  // partition not owned would outlive the call and apply to a later assignment.
  throw Error(make_error_code(client_errc::illegal_state), std::string(what) + ": " + tp.topic + "-" +
                                                               std::to_string(tp.partition) +
                                                               " is not assigned to this consumer");
}

void Consumer::impl::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  check_open();
  if (offset < 0)
    throw Error(make_error_code(client_errc::invalid_argument),
                "seek(): negative offset " + std::to_string(offset));
  require_assigned(tp, "seek()");
  reader_.seek(tp, offset, epoch);
}

void Consumer::impl::seek_to(const std::set<TopicPartition>& requested, bool beginning) {
  check_open();
  const char* what = beginning ? "seek_to_beginning()" : "seek_to_end()";
  // As Java: no partitions means every assigned partition.
  std::set<TopicPartition> tps = requested;
  if (tps.empty()) {
    tps = assignment();
    for (const auto& [tp, p] : reader_.positions().entries()) tps.insert(tp);
  }
  for (const auto& tp : tps) require_assigned(tp, what);
  reader_.seek_to(tps, beginning);
}

void Consumer::impl::pause(const std::set<TopicPartition>& tps) {
  check_open();
  for (const auto& tp : tps) require_assigned(tp, "pause()");
  reader_.pause(tps);
}

void Consumer::impl::resume(const std::set<TopicPartition>& tps) {
  check_open();
  for (const auto& tp : tps) require_assigned(tp, "resume()");
  reader_.resume(tps);
}

}  // namespace kgroup
