// The user thread's data path. See data_reader.hpp.
#include "consumer/data_reader.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "base/sim_mutants.hpp"

namespace kgroup::detail {

void data_reader::publish_returned() {
  if (returned_.empty()) return;
  std::lock_guard lock(shared_.mutex);
  for (const auto& [tp, pos] : returned_) shared_.consumed[tp] = pos;
  returned_.clear();
}

void data_reader::finish_cursor() {
  if (!cursor_.open()) return;
  const std::size_t bytes = cursor_.finish();
  {
    std::lock_guard lock(shared_.mutex);
    shared_.buffered_bytes -= std::min(shared_.buffered_bytes, bytes);
  }
  fetcher_.wake();
}

bool data_reader::next_cursor() {
  for (;;) {
    fetched_data d;
    {
      std::lock_guard lock(shared_.mutex);
      if (shared_.fetched.empty()) return false;
      d = std::move(shared_.fetched.front());
      shared_.fetched.pop_front();
    }
    // Fetched before the fetcher received the application's last restart of this partition (a
    // seek, resume, ...): the fetcher follows a new chain from the restart, and reading this one
    // (even from the same offset) would leave the reader at an offset the new chain's data never
    // starts at. Stale for good, whatever events are queued.
    bool old_chain = d.chain < chains_.of(d.tp);
#ifdef KGROUP_SIM_MUTANTS
    // The fix of kgroup-sim's seed 40 reverted: data of an old chain is read when it fits.
    if (sim::mutant_enabled("read_old_chain")) old_chain = false;
#endif
    const auto fit = old_chain ? data::fetched_fit::other_offset : positions_.fit(d);
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
          !old_chain && std::any_of(shared_.events.begin(), shared_.events.end(), [](const user_event& e) {
            return std::holds_alternative<detail::position_event>(e) ||
                   std::holds_alternative<listener_call>(e);
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
      fetcher_.wake();
      continue;
    }
    positions_.note_fetched(d, read_committed_);
    stats_.data_opened(d.bytes);
    cursor_.start(std::make_shared<fetched_data>(std::move(d)));
    return true;
  }
}

data::poll_batch data_reader::drain() {
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
  return batch;
}

void data_reader::raise_data_error() {
  while (!pending_errors_.empty()) {
    auto e = std::move(pending_errors_.front());
    pending_errors_.pop_front();
    if (!positions_.owns(e.tp)) continue;  // given up since: nothing to report
    const auto truncation = make_error_code(client_errc::log_truncation);
    if (e.code != truncation) throw PartitionError(e.code, e.message, e.tp, e.offset);
    std::map<TopicPartition, OffsetAndMetadata> divergent;
    std::string message = e.message;
    auto add = [&](const data_error& d) {
      if (d.divergent_offset < 0) return;
      divergent[d.tp] = {
          d.divergent_offset, "",
          d.divergent_epoch >= 0 ? std::optional<std::int32_t>(d.divergent_epoch) : std::nullopt};
    };
    add(e);
    for (auto it = pending_errors_.begin(); it != pending_errors_.end();) {
      if (it->code != truncation || !positions_.owns(it->tp)) {
        ++it;
        continue;
      }
      add(*it);
      message += "; " + it->message;
      it = pending_errors_.erase(it);
    }
    throw LogTruncationError(message, std::move(divergent));
  }
}

void data_reader::corrupt_data(const TopicPartition& tp, std::error_code ec, const char* what) {
  const auto p = positions_.position(tp).value_or(epoch_offset{});
  const std::string message = "corrupt " + std::string(what) + " in " + tp.topic + "-" +
                              std::to_string(tp.partition) + " at offset " + std::to_string(p.offset) + ": " +
                              ec.message() + "; seek() past it to skip it";
  logger()->error("{}", message);
  pending_errors_.push_back({tp, make_error_code(client_errc::corrupt_record), message, p.offset});
  chains_.restart(tp);
  fetcher_.refetch(tp, p.offset, p.epoch);
}

void data_reader::assign(const std::set<TopicPartition>& tps) {
  for (const auto& tp : positions_.retain(tps)) drop_current(tp);
  for (const auto& tp : tps) positions_.own(tp);
  std::erase_if(returned_, [&](const auto& e) { return !tps.count(e.first); });
  std::lock_guard lock(shared_.mutex);
  std::erase_if(shared_.consumed, [&](const auto& e) { return !tps.count(e.first); });
}

void data_reader::ownership_changed(const listener_call& call) {
  if (call.kind == group::listener_kind::assigned) {
    for (const auto& tp : call.partitions) positions_.own(tp);
    return;
  }
  for (const auto& tp : call.partitions) {
    drop_current(tp);
    positions_.drop(tp);
    returned_.erase(tp);
  }
  std::lock_guard lock(shared_.mutex);
  for (const auto& tp : call.partitions) shared_.consumed.erase(tp);
}

void data_reader::consumed_is(const TopicPartition& tp, epoch_offset at) {
  if (shared_.consumed.count(tp) || returned_.count(tp)) shared_.consumed[tp] = at;
  returned_.erase(tp);
}

void data_reader::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  positions_.seek(tp, offset, epoch);
  drop_current(tp);
  {
    // What auto-commit commits is the seek target from now on (Java's allConsumed(): the
    // position): after a seek back, the records past the target are read again, never skipped.
    std::lock_guard lock(shared_.mutex);
    consumed_is(tp, {offset, epoch});
  }
  chains_.restart(tp);
  fetcher_.seek(tp, offset, epoch);
}

void data_reader::seek_to(const std::set<TopicPartition>& tps, bool beginning) {
  for (const auto& tp : tps) {
    positions_.seek_to(tp);
    drop_current(tp);
    chains_.restart(tp);
  }
  fetcher_.seek_to(tps, beginning);
}

void data_reader::pause(const std::set<TopicPartition>& tps) {
  for (const auto& tp : tps) {
    positions_.pause(tp);
    drop_current(tp);
  }
  fetcher_.pause(tps);
}

void data_reader::resume(const std::set<TopicPartition>& tps) {
  std::map<TopicPartition, epoch_offset> at;
  for (const auto& tp : tps) {
    if (auto p = positions_.resume(tp)) at[tp] = *p;
  }
  // The fetcher fetches again only from a known position (fetch_positions::refetch): both sides
  // count only those.
  for (const auto& [tp, p] : at) {
    if (p.offset >= 0) chains_.restart(tp);
  }
  fetcher_.resume(at);
}

void data_reader::publish_partitions(metrics_state& m, const std::set<TopicPartition>& assigned) const {
  // poll() publishes every 100 ms: with the same partitions as last time (the common case) the
  // entries are rewritten in place, not rebuilt (one node and one topic string per partition, each
  // time; issue 37, the idle member).
  const bool same = m.partitions.size() == assigned.size() &&
                    std::equal(assigned.begin(), assigned.end(), m.partitions.begin(),
                               [](const TopicPartition& tp, const auto& entry) { return tp == entry.first; });
  if (!same) {
    m.partitions.clear();
    for (const auto& tp : assigned)
      m.partitions.emplace_hint(m.partitions.end(), tp, metrics_state::partition{});
  }
  for (auto& [tp, out] : m.partitions) {
    out = metrics_state::partition{};
    if (const auto* p = positions_.find(tp)) {
      out.position = p->position;
      out.high_watermark = p->high_watermark;
      out.replica = p->replica;
      out.log_start_offset = p->log_start_offset;
      out.paused = p->paused;
    }
  }
}

// (Both walk the table itself: position_table::positions() would build a map to walk.)
OffsetMap data_reader::current_positions() const {
  OffsetMap out;
  for (const auto& [tp, p] : positions_.entries()) {
    if (p.position < 0) continue;
    out.emplace_hint(out.end(), tp,
                     OffsetAndMetadata{p.position, "",
                                       p.epoch >= 0 ? std::optional<std::int32_t>(p.epoch) : std::nullopt});
  }
  return out;
}

OffsetMap data_reader::positions_for_commit() {
  {
    std::lock_guard lock(shared_.mutex);
    for (const auto& [tp, p] : positions_.entries()) {
      if (p.position < 0) continue;
#ifdef KGROUP_SIM_MUTANTS
      if (sim::mutant_enabled("commit_behind_sync")) break;  // the fix of the --mix-commits finding reverted
#endif
      consumed_is(tp, {p.position, p.epoch});
    }
  }
  return current_positions();
}

void data_reader::offsets_committed(const OffsetMap& offsets) {
#ifdef KGROUP_SIM_MUTANTS
  if (sim::mutant_enabled("commit_behind_explicit")) return;  // the review's finding put back
#endif
  std::lock_guard lock(shared_.mutex);
  for (const auto& [tp, m] : offsets) {
    const auto at = positions_.position(tp);
    if (!at || m.offset < 0 || m.offset > at->offset) continue;  // not owned, or past what was returned
    // Nothing consumed yet: auto-commit leaves the partition alone until poll() publishes what it
    // returned (at least this offset then).
    auto it = shared_.consumed.find(tp);
    if (it == shared_.consumed.end() || it->second.offset >= m.offset) continue;
    it->second = {m.offset, m.leader_epoch.value_or(-1)};
  }
}

data::commit_map data_reader::commit_positions(const std::set<TopicPartition>& tps) {
  data::commit_map out;
  std::lock_guard lock(shared_.mutex);
  for (const auto& tp : tps) {
    const auto p = positions_.position(tp);
    if (!p) continue;
    out[tp] = {p->offset, "", p->epoch};
#ifdef KGROUP_SIM_MUTANTS
    if (sim::mutant_enabled("revoke_commit_behind")) continue;  // kgroup-sim --group's finding put back
#endif
    consumed_is(tp, *p);  // what the background auto-commit commits from now on (never below)
  }
  return out;
}

void data_reader::position_event(const detail::position_event& e, bool owned) {
  if (e.seek_applied) {
    positions_.seek_applied(e.tp);
    return;
  }
  if (!owned) return;
  if (e.cut != cut_kind::none) {
    apply_cut(e);
    return;
  }
  if (!positions_.position_found(e.tp, e.offset, e.epoch, e.forced)) return;
  drop_current(e.tp);
#ifdef KGROUP_SIM_MUTANTS
  // Commit 6f5a864 reverted: a resolved seek_to_*() or reset left auto-commit on the old position.
  if (sim::mutant_enabled("seek_to_consumed")) return;
#endif
  if (e.forced) {
    // A seek_to_*() or reset resolved: auto-commit commits the new position from now on, as after
    // a seek (Java commits the position once it is reset), never what was returned before it.
    std::lock_guard lock(shared_.mutex);
    consumed_is(e.tp, {e.offset, e.epoch});
  }
}

void data_reader::apply_cut(const detail::position_event& e) {
  const bool diverged = e.cut == cut_kind::diverged;
  const auto before = positions_.position(e.tp);
  switch (positions_.cut(e.tp, e.offset, e.epoch, /*move_back=*/diverged && !e.halted)) {
    case data::cut_verdict::stale:
      return;  // a seek is in flight: the fetcher follows it, and the seek decides
    case data::cut_verdict::before:
      // Nothing returned so far is past the cut: the data fetched before it is read up to it
      // (the fetcher limited the queued data; this is the data being read), then the new data.
      cursor_.cut(e.tp, e.offset, e.epoch);
      if (e.halted) fetcher_.cut_accepted(e.tp, e.offset);
      return;
    case data::cut_verdict::moved_back: {
      drop_current(e.tp);
      // Auto-commit commits the position from now on, not past the divergence (as after a seek).
      std::lock_guard lock(shared_.mutex);
      consumed_is(e.tp, {e.offset, e.epoch});
      return;
    }
    case data::cut_verdict::past:
      break;
  }
  drop_current(e.tp);
  const std::string name = e.tp.topic + "-" + std::to_string(e.tp.partition);
  const std::int64_t at = before ? before->offset : -1;
  const bool recreated = e.cut == cut_kind::recreated;
  if (recreated) {
    // Nothing the application consumed of the old topic is committed as the new one's: auto-commit
    // starts again with the first record returned from the new topic.
    returned_.erase(e.tp);
    std::lock_guard lock(shared_.mutex);
    shared_.consumed.erase(e.tp);
  }
  if (!e.halted) {
    // Past the log's end (or diverged where the leader cannot tell where, or in a topic deleted
    // since): the position itself is out of range, and the reset policy applies to it.
    if (recreated)
      logger()->warn(
          "{}: position {} belongs to a topic deleted since and created again under its name; applying "
          "auto.offset.reset",
          name, at);
    else if (diverged)
      logger()->warn(
          "{}: the leader cannot tell where its log diverged from position {}; applying "
          "auto.offset.reset",
          name, at);
    else
      logger()->warn("{}: position {} is past the log's end {}; applying auto.offset.reset", name, at,
                     e.offset);
    positions_.seek_to(e.tp);
    chains_.restart(e.tp);
    fetcher_.reset_position(e.tp);
    return;
  }
  // auto.offset.reset=none, and the application read past the cut: it decides (seek). The fetcher
  // waits, and no data it queued before is usable at this position.
  if (recreated) {
    const std::string message =
        "topic " + e.tp.topic + " was deleted and created again: position " + std::to_string(at) + " of " +
        name + " belongs to the old topic, and auto.offset.reset=none, so the partition waits for seek()";
    logger()->warn("{}", message);
    pending_errors_.push_back({e.tp, make_error_code(client_errc::offset_out_of_range), message, at});
  } else if (diverged) {
    std::string message =
        "log truncation detected for " + name + ": the position " + std::to_string(at) + " is ";
    message += e.offset < 0 ? "in a part of the log the leader cannot tell where its log diverged from"
                            : "past offset " + std::to_string(e.offset) + " (leader epoch " +
                                  std::to_string(e.epoch) + "), where the leader's log diverged";
    message += "; auto.offset.reset=none, so the partition waits for seek()";
    logger()->warn("{}", message);
    pending_errors_.push_back(
        {e.tp, make_error_code(client_errc::log_truncation), message, at, e.offset, e.epoch});
  } else {
    const std::string message = "offset " + std::to_string(at) + " of " + name +
                                " is out of range (the log ends at offset " + std::to_string(e.offset) +
                                ") and auto.offset.reset=none";
    logger()->warn("{}", message);
    pending_errors_.push_back({e.tp, make_error_code(client_errc::offset_out_of_range), message, at});
  }
}

}  // namespace kgroup::detail
