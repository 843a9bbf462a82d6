#include "data/positions.hpp"

#include <algorithm>

#include "base/sim_mutants.hpp"

namespace kgroup::data {

const char* to_string(fetched_fit f) noexcept {
  switch (f) {
    case fetched_fit::usable: return "usable";
    case fetched_fit::not_owned: return "not owned";
    case fetched_fit::paused: return "paused";
    case fetched_fit::position_unknown: return "position unknown";
    case fetched_fit::other_offset: return "fetched from another offset";
  }
  return "?";
}

std::set<TopicPartition> position_table::retain(const std::set<TopicPartition>& keep) {
  std::set<TopicPartition> dropped;
  for (auto it = parts_.begin(); it != parts_.end();) {
    if (keep.count(it->first)) {
      ++it;
    } else {
      dropped.insert(it->first);
      it = parts_.erase(it);
    }
  }
  return dropped;
}

const partition_position* position_table::find(const TopicPartition& tp) const {
  auto it = parts_.find(tp);
  return it == parts_.end() ? nullptr : &it->second;
}

partition_position* position_table::find(const TopicPartition& tp) {
  auto it = parts_.find(tp);
  return it == parts_.end() ? nullptr : &it->second;
}

std::optional<detail::epoch_offset> position_table::position(const TopicPartition& tp) const {
  const auto* p = find(tp);
  if (!p || p->position < 0) return std::nullopt;
  return detail::epoch_offset{p->position, p->epoch};
}

std::map<TopicPartition, detail::epoch_offset> position_table::positions() const {
  std::map<TopicPartition, detail::epoch_offset> out;
  for (const auto& [tp, p] : parts_) {
    if (p.position >= 0) out.emplace_hint(out.end(), tp, detail::epoch_offset{p.position, p.epoch});
  }
  return out;
}

std::optional<std::int64_t> position_table::lag(const TopicPartition& tp) const {
  const auto* p = find(tp);
  if (!p || p->position < 0 || p->high_watermark < 0) return std::nullopt;
  return std::max<std::int64_t>(0, p->high_watermark - p->position);
}

void position_table::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  auto& p = parts_[tp];
  p.position = offset;
  p.epoch = epoch;
  p.user_seeked = true;
  ++p.seeks_in_flight;
}

void position_table::seek_to(const TopicPartition& tp) {
  auto& p = parts_[tp];
  p.position = -1;
  p.epoch = -1;
  p.user_seeked = false;
  ++p.seeks_in_flight;
}

std::optional<detail::epoch_offset> position_table::resume(const TopicPartition& tp) {
  auto* p = find(tp);
  if (!p || !p->paused) return std::nullopt;
  p->paused = false;
  return detail::epoch_offset{p->position, p->epoch};
}

std::set<TopicPartition> position_table::paused() const {
  std::set<TopicPartition> out;
  for (const auto& [tp, p] : parts_) {
    if (p.paused) out.insert(out.end(), tp);
  }
  return out;
}

void position_table::seek_applied(const TopicPartition& tp) {
  if (auto* p = find(tp); p && p->seeks_in_flight > 0) --p->seeks_in_flight;
}

bool position_table::seek_in_flight(const TopicPartition& tp) const {
  const auto* p = find(tp);
  return p && p->seeks_in_flight > 0;
}

bool position_table::position_found(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch,
                                    bool forced) {
  // Only a partition owned now: a position computed for an earlier ownership (an answer queued
  // behind the revoke or loss that dropped it) must not bring it back.
  auto* found = find(tp);
  if (!found || found->seeks_in_flight > 0) return false;
  auto& p = *found;
  if (!forced && p.user_seeked) return false;
  const bool moved = p.position != offset;
  p.position = offset;
  p.epoch = epoch;
  return moved;
}

cut_verdict position_table::cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch,
                                 bool move_back) {
  auto* p = find(tp);
  if (!p || p->seeks_in_flight > 0) return cut_verdict::stale;
  if (offset >= 0 && p->position < 0) {
    p->position = offset;
    p->epoch = epoch;
    return cut_verdict::before;
  }
#ifdef KGROUP_SIM_MUTANTS
  // Commit f6c7448 (issue 30 item 1) reverted: a cut found at the prefetch position moved the
  // application's position to it, skipping the records between.
  if (sim::mutant_enabled("truncation_at_prefetch") && offset >= 0 && p->position < offset) {
    p->position = offset;
    p->epoch = epoch;
    return cut_verdict::before;
  }
#endif
  if (offset >= 0 && p->position <= offset) return cut_verdict::before;
  if (!move_back || offset < 0) return cut_verdict::past;
  p->position = offset;
  p->epoch = epoch;
  return cut_verdict::moved_back;
}

fetched_fit position_table::fit(const detail::fetched_data& d) const {
  const auto* p = find(d.tp);
  if (!p) return fetched_fit::not_owned;
  if (p->paused) return fetched_fit::paused;
  if (p->position < 0) return fetched_fit::position_unknown;
  return d.fetch_offset == p->position ? fetched_fit::usable : fetched_fit::other_offset;
}

void position_table::note_fetched(const detail::fetched_data& d, bool read_committed) {
  auto* p = find(d.tp);
  if (!p) return;
  const std::int64_t end = read_committed && d.last_stable_offset >= 0 ? d.last_stable_offset : d.high_watermark;
  if (end >= 0) p->high_watermark = end;
  p->replica = d.replica;
  if (d.log_start_offset >= 0) p->log_start_offset = d.log_start_offset;
}

}  // namespace kgroup::data
