// The membership core, continued: what it records for metrics and the rebalance history, and
// the standing it shows the data path. Pure, like member.cpp.
#include <algorithm>

#include "group/member.hpp"

namespace kgroup::group {

void member::rebalance_begins(time_point now, RebalanceCause cause, const std::string& detail) {
  if (!stats_.history.empty() && !stats_.history.back().end) return;  // one already under way keeps its cause
  if (stats_.history.size() >= member_stats::history_max) stats_.history.pop_front();
  rebalance_entry e;
  e.cause = cause;
  e.detail = detail;
  e.start = now;
  stats_.history.push_back(std::move(e));
  ++stats_.version;
}

void member::rebalance_ends(time_point now, bool completed) {
  if (stats_.history.empty() || stats_.history.back().end) return;
  auto& e = stats_.history.back();
  e.end = now;
  e.completed = completed;
  e.generation = generation_;
  if (completed) {
    const auto took = std::chrono::duration_cast<ms>(now - e.start);
    ++stats_.rebalances;
    stats_.rebalance_latency_total += took;
    stats_.rebalance_latency_max = std::max(stats_.rebalance_latency_max, took);
    stats_.rebalance_hist.observe(std::chrono::duration<double>(now - e.start).count());
    stats_.completed_at.push_back(now);
    while (!stats_.completed_at.empty() && now - stats_.completed_at.front() > std::chrono::hours(1)) {
      stats_.completed_at.pop_front();
    }
  }
  ++stats_.version;
}

void member::rebalance_failed(time_point now) {
  ++stats_.failed_rebalances;
  stats_.failed_at.push_back(now);
  while (!stats_.failed_at.empty() && now - stats_.failed_at.front() > std::chrono::hours(1)) stats_.failed_at.pop_front();
  ++stats_.version;
}

void member::describe_rebalance(RebalanceCause cause, std::string detail) {
  if (stats_.history.empty() || stats_.history.back().end) return;
  auto& e = stats_.history.back();
  if (e.cause != RebalanceCause::group_rebalancing) return;  // this member's own cause is more precise
  e.cause = cause;
  e.detail = std::move(detail);
  ++stats_.version;
}

group::standing member::standing() const {
  group::standing s;
  s.generation = generation_;
  s.member_id = member_id_;
  s.instance_id = opts_.group_instance_id;
  s.coordinator = coord_.node();
  s.poll_timed_out = state_ == member_state::poll_timed_out;
  s.fatal = state_ == member_state::fatal;
  s.removed = removed_;
  // A generation is settled from SyncGroup's answer until the member leaves it: commits of the
  // previous owner's revoke (preparing, leaving) still belong to it.
  s.stable = generation_ >= 0 && (state_ == member_state::stable || state_ == member_state::completing ||
                                  state_ == member_state::preparing || state_ == member_state::leaving);
  return s;
}

}  // namespace kgroup::group
