// The fetcher's side of the data reader's calls (detail::fetcher_port: seek, seek_to_*, refetch,
// pause, resume, cut_accepted, reset_position), on the background thread: what each does to the
// position table, to the count of restarts of each partition's chain of Fetches, and to the user
// thread's queue. Each returns whether the fetcher sends what is now due (pump()). No Asio: the
// fetcher (fetcher.cpp) and the simulation (test/sim/sim_fetcher.hpp) both apply the calls here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "data/committer.hpp"
#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/types.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::fetch {

struct position_calls {
  data::fetch_positions& positions;
  detail::fetch_chains& chains;
  detail::shared_state& shared;

  /// The owned set changed: what stays owned keeps its position, what is gone is forgotten (its
  /// queued data, auto-commit's memory of it), and what is new asks for its start. Always pumps.
  bool assign(const std::set<TopicPartition>& owned, data::auto_committer& auto_committer) {
    const auto dropped = positions.assign(owned);
    for (const auto& tp : dropped) auto_committer.forget(tp);
    shared.drop_fetched(dropped);
    return true;
  }
  /// A Fetch answer's record slices (read from `node`, kept alive by `frame`) for the user thread,
  /// each marked with its partition's chain of Fetches.
  void deliver(const std::vector<data::fetched_slice>& slices, const std::shared_ptr<const void>& frame,
               std::int32_t node) {
    if (slices.empty()) return;
    std::size_t bytes = 0;
    std::vector<detail::fetched_data> out;
    out.reserve(slices.size());
    for (const auto& sl : slices) {
      auto d = data::to_fetched(sl, frame, node);
      d.chain = chains.of(sl.tp);
      bytes += d.bytes;
      out.push_back(std::move(d));
    }
    {
      std::lock_guard lock(shared.mutex);
      for (auto& d : out) shared.fetched.push_back(std::move(d));
      shared.buffered_bytes += bytes;
    }
    shared.cv.notify_all();
  }

  /// With `epoch` (the leader epoch of the record before `offset`) the position is validated
  /// against the leader's log before fetching (KIP-320).
  bool seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
    chains.restart(tp);
    shared.push(detail::position_event{tp, offset, false, epoch, true});
    return positions.seek(tp, offset, epoch);
  }
  bool seek_to(const std::set<TopicPartition>& tps, bool beginning) {
    for (const auto& tp : tps) {
      chains.restart(tp);
      shared.push(detail::position_event{tp, -1, false, -1, true});
      positions.seek_to(tp, beginning);
    }
    return true;
  }
  bool refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
    chains.restart(tp);  // counted even when not applied: the user thread counted the call
    return positions.refetch(tp, offset, epoch);  // false: moved on meanwhile (reset, seek)
  }
  bool cut_accepted(const TopicPartition& tp, std::int64_t offset) {
    return positions.cut_accepted(tp, offset);
  }
  bool reset_position(const TopicPartition& tp) {
    chains.restart(tp);
    shared.push(detail::position_event{tp, -1, false, -1, true});
    if (auto* p = positions.find(tp)) positions.offset_out_of_range(tp, *p);
    return true;
  }
  bool pause(const std::set<TopicPartition>& tps) {
    for (const auto& tp : tps) positions.pause(tp);
    return false;
  }
  bool resume(const std::map<TopicPartition, detail::epoch_offset>& at) {
    for (const auto& [tp, pos] : at) {
      if (pos.offset >= 0) chains.restart(tp);  // as the user thread counted it (data_reader::resume)
      positions.resume(tp, pos.offset, pos.epoch);
    }
    return true;
  }
};

}  // namespace kgroup::fetch
