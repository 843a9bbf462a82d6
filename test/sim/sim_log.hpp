// What both simulations' brokers share (sim_world.cpp, the data path; sim_group_data.cpp, each
// group member's real data path with --group --real-data): a partition's leader log, and the
// record batches a Fetch answer carries from it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/types.hpp"
#include "kgroup/kafka_errc.hpp"
#include "protocol/messages.hpp"
#include "protocol/records.hpp"

namespace kgroup::sim {

struct log_entry {
  std::int64_t id;
  std::int32_t epoch;
  bool compacted = false;  // removed by the log cleaner: its batch keeps the offset, not the record
};

// The leader's log of one partition. Offsets are dense: entries[o] is offset o (the ones below
// log_start are kept for the checks but never served).
struct partition_log {
  std::vector<log_entry> entries;
  std::int64_t log_start = 0;
  std::int32_t epoch = 0;
  std::int32_t leader = 1;
  std::map<std::int32_t, std::int64_t> epoch_start;  // the leader epoch cache: epoch -> first offset
  std::set<std::int64_t> batch_starts;               // each produced batch's base offset
  detail::epoch_offset committed;                    // the group's committed offset (-1: none)
  // Every record ever appended at each offset (branches diverge after unclean elections), by
  // offset: the first at o is first_id_at[o] (-1: none yet), the ones appended there later (after
  // a truncation) are later_ids_at's entries of o, oldest first. (Most offsets hold one record: no
  // allocation of its own.)
  std::vector<std::int64_t> first_id_at;
  std::multimap<std::int64_t, std::int64_t> later_ids_at;  // offset -> id
  void appended_at(std::int64_t offset, std::int64_t id) {
    const auto o = static_cast<std::size_t>(offset);
    if (first_id_at.size() == o) {
      first_id_at.push_back(id);  // (the usual case: an append at the log's end)
      return;
    }
    if (first_id_at.size() < o) first_id_at.resize(o + 1, -1);
    if (first_id_at[o] < 0) {
      first_id_at[o] = id;
    } else {
      later_ids_at.emplace(offset, id);
    }
  }
  // Calls f(id) for every id appended at `offset`, oldest first; false when there is none.
  template <class F>
  bool for_each_id_at(std::int64_t offset, F&& f) const {
    const auto o = static_cast<std::size_t>(offset);
    if (offset < 0 || o >= first_id_at.size() || first_id_at[o] < 0) return false;
    f(first_id_at[o]);
    const auto [from, to] = later_ids_at.equal_range(offset);
    for (auto i = from; i != to; ++i) f(i->second);
    return true;
  }

  std::int64_t end() const { return static_cast<std::int64_t>(entries.size()); }
  // The epoch of the record at `offset` (or the latest, at the end).
  std::int32_t epoch_for(std::int64_t offset) const {
    for (auto i = epoch_start.rbegin(); i != epoch_start.rend(); ++i) {
      if (i->second <= offset) return i->first;
    }
    return epoch;
  }
  // OffsetForLeaderEpoch: the largest epoch at or below `requested` and where it ends (the start
  // of the next higher epoch, or the log's end); -1/-1 when the cache has no such epoch.
  std::pair<std::int32_t, std::int64_t> end_of_epoch(std::int32_t requested) const {
    auto it = epoch_start.upper_bound(requested);
    if (it == epoch_start.begin()) return {-1, -1};
    const std::int64_t end_offset = it == epoch_start.end() ? end() : it->second;
    --it;
    return {it->first, end_offset};
  }
  // The broker's OffsetForLeaderEpoch answer asked of broker `node` with the member's view of the
  // leader epoch: the partition error, and end_of_epoch(epoch) when there is none.
  std::int16_t offset_for_leader_epoch(std::int32_t node, std::int32_t leader_epoch, std::int32_t epoch,
                                       std::pair<std::int32_t, std::int64_t>& end_out) const {
    end_out = {-1, -1};
    if (node != leader) return static_cast<std::int16_t>(kafka_errc::not_leader_or_follower);
    if (leader_epoch < this->epoch) return static_cast<std::int16_t>(kafka_errc::fenced_leader_epoch);
    if (leader_epoch > this->epoch) return static_cast<std::int16_t>(kafka_errc::unknown_leader_epoch);
    end_out = end_of_epoch(epoch);
    return 0;
  }
  // ListOffsets as the leader answers it for a reset (timestamp -2 earliest, -1 latest), asked of
  // `node` with the client's `leader_epoch`: the error code (0: `offset_out` and `epoch_out` set).
  std::int16_t list_offsets(std::int32_t node, std::int32_t leader_epoch, std::int64_t timestamp,
                            std::int64_t& offset_out, std::int32_t& epoch_out) const {
    offset_out = -1;
    epoch_out = -1;
    if (node != leader) return static_cast<std::int16_t>(kafka_errc::not_leader_or_follower);
    if (leader_epoch < this->epoch) return static_cast<std::int16_t>(kafka_errc::fenced_leader_epoch);
    if (leader_epoch > this->epoch) return static_cast<std::int16_t>(kafka_errc::unknown_leader_epoch);
    const bool earliest = timestamp == -2;
    offset_out = earliest ? log_start : end();
    epoch_out = earliest ? epoch_for(offset_out) : epoch_start.rbegin()->first;
    return 0;
  }
};

// An unclean election (both worlds): the new leader, `leader`, has the log only up to `cut` (at or
// below the old leader's end) and a new leader epoch starting there, so later appends diverge from
// what members fetched past it. Returns the ids of the records truncated, in offset order.
std::vector<std::int64_t> unclean_election(partition_log& l, std::int64_t cut, std::int32_t leader);

// Retention (both worlds): the log's start moves forward to `to` (at or below its end); the
// leader epoch cache is cut from the start too.
void delete_records_before(partition_log& l, std::int64_t to);

// What broker `node` answers (both worlds) to the client's ListOffsets for resets and its
// OffsetForLeaderEpoch (the requests data::position_requests builds), from the partitions' logs.
protocol::list_offsets_response answer_list_offsets(const std::map<TopicPartition, partition_log>& logs,
                                                    std::int32_t node,
                                                    const protocol::list_offsets_request& req);
protocol::offset_for_leader_epoch_response answer_offset_for_leader_epoch(
    const std::map<TopicPartition, partition_log>& logs, std::int32_t node,
    const protocol::offset_for_leader_epoch_request& req);

// Invariant 3 of both worlds, "nothing from a truncated branch after the divergence was applied":
// when each record was truncated (the world's), and, per reader, the answer time of each diverged
// cut its fetcher pushed (in order) and of the last one its user thread applied.
using sim_time = std::chrono::steady_clock::time_point;
struct truncated_records {
  std::map<std::int64_t, sim_time> died;  // id -> when an unclean election truncated it
  void truncated(const std::vector<std::int64_t>& ids, sim_time now) {
    for (const auto id : ids) died[id] = now;
  }
};
struct divergences {
  std::map<TopicPartition, std::deque<sim_time>> cut_times;  // diverged cuts pushed, not yet applied
  std::map<TopicPartition, sim_time> seen;                   // answer time of the last cut applied
  void pushed(const TopicPartition& tp, sim_time now) { cut_times[tp].push_back(now); }
  // The user thread takes the next diverged cut of `tp`: its answer time (none: not pushed here).
  std::optional<sim_time> take(const TopicPartition& tp) {
    auto& q = cut_times[tp];
    if (q.empty()) return std::nullopt;
    const auto t = q.front();
    q.pop_front();
    return t;
  }
  void applied(const TopicPartition& tp, sim_time cut_time) { seen[tp] = std::max(seen[tp], cut_time); }
  // Whether a record of `tp` that `dead` truncated (at that time) comes after a divergence the
  // user thread applied: the time of that divergence.
  std::optional<sim_time> returned_past(const TopicPartition& tp, const truncated_records& dead,
                                        std::int64_t id) const {
    const auto d = dead.died.find(id);
    if (d == dead.died.end()) return std::nullopt;
    const auto s = seen.find(tp);
    if (s == seen.end() || d->second > s->second) return std::nullopt;
    return s->second;
  }
  void forget(const TopicPartition& tp) {
    cut_times.erase(tp);
    seen.erase(tp);
  }
};

// The leader epoch of each record an application was returned, by offset (both worlds; the last
// returned at an offset counts): a vector sorted by offset, as records come mostly in offset
// order (no allocation per record).
class offset_epochs {
 public:
  void set(std::int64_t offset, std::int32_t epoch) {
    if (v_.empty() || v_.back().first < offset) {
      v_.emplace_back(offset, epoch);
      return;
    }
    const auto it = lower(offset);
    if (it != v_.end() && it->first == offset) {
      it->second = epoch;
    } else {
      v_.insert(it, {offset, epoch});
    }
  }
  // The epoch of the record returned at `offset` (nullptr: none).
  const std::int32_t* find(std::int64_t offset) const {
    const auto it = std::lower_bound(v_.begin(), v_.end(), offset,
                                     [](const auto& e, std::int64_t o) { return e.first < o; });
    return it != v_.end() && it->first == offset ? &it->second : nullptr;
  }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  // The `i`th offset, in offset order.
  std::int64_t offset_at(std::size_t i) const { return v_[i].first; }

 private:
  std::vector<std::pair<std::int64_t, std::int32_t>>::iterator lower(std::int64_t offset) {
    return std::lower_bound(v_.begin(), v_.end(), offset,
                            [](const auto& e, std::int64_t o) { return e.first < o; });
  }
  std::vector<std::pair<std::int64_t, std::int32_t>> v_;
};

// What write_batches() wrote: the offset after its last batch, or what failed to encode.
struct batches_written {
  std::int64_t stop = 0;
  const char* error = nullptr;
};

// A Fetch answer's records of `l` from `fetch_offset` (below the log's end): whole batches as they
// were produced, from the one holding the fetch offset (so an answer may begin below it, as
// Kafka's do), up to about `want` records past the fetch offset, appended to `buf`. A record's
// value is its id (in decimal). Batches ending at or below `legacy_until` are written as magic-0
// gzip wrappers (-1: none).
batches_written write_batches(const partition_log& l, std::int64_t fetch_offset, std::int64_t want,
                              std::int64_t legacy_until, protocol::bytes& buf);

// The partition error a broker answers a Fetch of `l` with (0: none), in Kafka's order: not the
// leader, a fenced or unknown leader epoch, then `inject()` (a transient error the world's schedule
// may inject, 0 for none; called only when the checks before it pass, so the world's PRNG draws
// stay where they were), then an offset outside the log.
template <class Inject>
std::int16_t fetch_error(const partition_log& l, std::int32_t node, std::int32_t current_leader_epoch,
                         std::int64_t fetch_offset, Inject&& inject) {
  const auto code = [](kafka_errc e) { return static_cast<std::int16_t>(e); };
  if (l.leader != node) return code(kafka_errc::not_leader_or_follower);
  if (current_leader_epoch >= 0 && current_leader_epoch < l.epoch)
    return code(kafka_errc::fenced_leader_epoch);
  if (current_leader_epoch > l.epoch) return code(kafka_errc::unknown_leader_epoch);
  if (const std::int16_t injected = inject(); injected != 0) return injected;
  if (fetch_offset < l.log_start || fetch_offset > l.end()) return code(kafka_errc::offset_out_of_range);
  return 0;
}

}  // namespace kgroup::sim
