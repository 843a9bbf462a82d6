// The membership core, continued: what it records for metrics and the rebalance history, and
// the standing it shows the data path. Pure, like member.cpp.
#include <algorithm>

#include "base/sim_mutants.hpp"
#include "group/member.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group {

namespace {

void trim_to_last_hour(std::deque<time_point>& times, time_point now) {
  while (!times.empty() && now - times.front() > std::chrono::hours(1)) times.pop_front();
}

}  // namespace

report_error poll_timeout_error() {
  return report_error{make_error_code(client_errc::request_timed_out),
                      "max.poll.interval.ms exceeded: left the group", false};
}

bool member_stats::begin(time_point now, RebalanceCause cause, const std::string& detail) {
  if (open_entry()) return false;
  if (history.size() >= history_max) history.pop_front();
  rebalance_entry e;
  e.cause = cause;
  e.detail = detail;
  e.start = now;
  history.push_back(std::move(e));
  ++version;
  return true;
}

void member_stats::end(time_point now, bool completed, std::int32_t generation) {
  auto* e = open_entry();
  if (!e) return;
  e->end = now;
  e->completed = completed;
  e->generation = generation;
  if (completed) {
    const auto took = std::chrono::duration_cast<ms>(now - e->start);
    ++rebalances;
    rebalance_latency_total += took;
    rebalance_latency_max = std::max(rebalance_latency_max, took);
    rebalance_hist.observe(std::chrono::duration<double>(now - e->start).count());
    completed_at.push_back(now);
    trim_to_last_hour(completed_at, now);
  }
  trim_to_last_hour(failed_at, now);
  ++version;
}

void member_stats::failed(time_point now) {
  ++failed_rebalances;
  failed_at.push_back(now);
  trim_to_last_hour(failed_at, now);
  ++version;
}

void member_stats::listener_called(listener_kind kind, const partition_set& parts) {
  auto* e = open_entry();
  if (!e) return;
  auto& into = kind == listener_kind::revoked ? e->revoked : kind == listener_kind::assigned ? e->assigned : e->lost;
  into.insert(parts.begin(), parts.end());
  ++version;
}

void member_stats::heartbeat_answered(time_point now, time_point sent) {
  ++heartbeats;
  heartbeat_rtt_max = std::max(heartbeat_rtt_max, std::chrono::duration_cast<ms>(now - sent));
  heartbeat_hist.observe(std::chrono::duration<double>(now - sent).count());
  last_heartbeat_response = now;
  ++version;
}

void member::rebalance_begins(time_point now, RebalanceCause cause, const std::string& detail) {
  stats_.begin(now, cause, detail);
}

void member::rebalance_ends(time_point now, bool completed) { stats_.end(now, completed, generation_); }

void member::rebalance_failed(time_point now) { stats_.failed(now); }

void member::describe_rebalance(RebalanceCause cause, std::string detail) {
  if (stats_.history.empty() || stats_.history.back().end) return;
  auto& e = stats_.history.back();
  if (e.cause != RebalanceCause::group_rebalancing) return;  // this member's own cause is more precise
  e.cause = cause;
  e.detail = std::move(detail);
  ++stats_.version;
}

group::standing member::standing() const {
  group::standing s{.generation = generation_,
                    .member_id = member_id_,
                    .instance_id = opts_.group_instance_id,
                    .coordinator = coord_.node()};
  s.poll_timed_out = state_ == classic_state::poll_timed_out;
  s.fatal = state_ == classic_state::fatal;
  s.removed = removed_;
  // unsubscribe()/close(): once the revoke listener is done the leave is next, and a lost listener
  // (after a fatal error or a removal) means the partitions may have a new owner already. The
  // generation is still set meanwhile, but nothing may be committed with it any more.
  s.left =
      state_ == classic_state::leaving && (!listener_.pending() || listener_.pending_is(listener_kind::lost));
  // A generation is settled from SyncGroup's answer until the member leaves it: commits of the
  // previous owner's revoke (preparing, leaving) still belong to it. Not when a JoinGroup answer
  // moved the generation on and its SyncGroup was not answered (a close() or unsubscribe() while
  // syncing): the partitions owned are the earlier generation's, and the new one may have given
  // them to another member (kgroup-sim --group, fresh seed 796587710215: after a coordinator
  // failover the reloaded group made a generation of the same number, which accepted the
  // commit). Java's commits take the generation only while STABLE (generationIfStable()).
  s.stable = generation_ >= 0 && generation_ == synced_generation_ &&
             (state_ == classic_state::stable || state_ == classic_state::completing ||
              state_ == classic_state::preparing || state_ == classic_state::leaving);
#ifdef KGROUP_SIM_MUTANTS
  if (sim::mutant_enabled("commit_unsynced_generation"))  // the finding above, put back
    s.stable = generation_ >= 0 && (state_ == classic_state::stable || state_ == classic_state::completing ||
                                    state_ == classic_state::preparing || state_ == classic_state::leaving);
#endif
  s.owned = owned_;
  return s;
}

}  // namespace kgroup::group
