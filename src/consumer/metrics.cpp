#include "kgroup/metrics.hpp"

#include <algorithm>

#include "consumer/make_metrics.hpp"

namespace kgroup {

const char* to_string(RebalanceCause c) noexcept {
  switch (c) {
    case RebalanceCause::member_joined: return "member joined";
    case RebalanceCause::member_left: return "member left";
    case RebalanceCause::group_rebalancing: return "group rebalancing";
    case RebalanceCause::poll_timeout: return "poll timeout";
    case RebalanceCause::session_timeout: return "session timeout";
    case RebalanceCause::metadata_change: return "metadata change";
    case RebalanceCause::subscription_change: return "subscription change";
    case RebalanceCause::enforced: return "enforce_rebalance";
    case RebalanceCause::cooperative_round: return "cooperative round";
    case RebalanceCause::error: return "error";
  }
  return "unknown";
}

namespace detail {

namespace {

double ms_of(std::chrono::milliseconds d) { return static_cast<double>(d.count()); }

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

ConsumerMetrics make_metrics(const shared_state& shared, const metrics_identity& id,
                             std::chrono::steady_clock::time_point steady_now,
                             std::chrono::system_clock::time_point wall_now) {
  using namespace std::chrono;
  const auto wall_ms = [&](steady_clock::time_point t) {
    return id.wall_minus_steady_ms + duration_cast<milliseconds>(t.time_since_epoch()).count();
  };
  const metrics_state& m = shared.metrics;
  const group::member_stats& g = m.group;
  ConsumerMetrics out;
  out.timestamp_ms = duration_cast<milliseconds>(wall_now.time_since_epoch()).count();
  out.client_id = id.client_id;
  out.group_id = id.group_id;
  out.group_instance_id = id.group_instance_id;
  out.protocol = id.protocol;
  out.max_poll_interval_ms = id.max_poll_interval_ms;
  out.member_id = shared.member_id;
  out.generation = shared.generation;
  out.state = shared.state;
  out.coordinator = m.coordinator;
  out.assignor = m.assignor;
  out.leader = m.leader;
  out.http_endpoint = m.http_endpoint;

  // Owned partitions: the group's (or the manual) assignment as the user thread sees it.
  for (const auto& [tp, p] : m.partitions) {
    PartitionMetrics pm;
    pm.partition = tp;
    pm.position = p.position;
    pm.high_watermark = p.high_watermark;
    pm.read_replica = p.replica;
    pm.log_start_offset = p.log_start_offset;
    if (p.position >= 0 && p.log_start_offset >= 0) {
      pm.lead = std::max<std::int64_t>(0, p.position - p.log_start_offset);
      out.records_lead_min = out.records_lead_min < 0 ? pm.lead : std::min(out.records_lead_min, pm.lead);
    }
    pm.paused = p.paused;
    if (auto c = m.committed.find(tp); c != m.committed.end()) pm.committed = c->second;
    if (p.position >= 0 && p.high_watermark >= 0) pm.lag = std::max<std::int64_t>(0, p.high_watermark - p.position);
    if (pm.lag >= 0) out.records_lag_max = std::max(out.records_lag_max, pm.lag);
    out.partitions.push_back(pm);
  }
  out.assigned_partitions = static_cast<std::int64_t>(out.partitions.size());

  out.rebalance_total = g.rebalances;
  out.failed_rebalance_total = g.failed_rebalances;
  out.rebalance_latency_total_ms = ms_of(g.rebalance_latency_total);
  out.rebalance_latency_max_ms = ms_of(g.rebalance_latency_max);
  out.rebalance_latency_avg_ms = g.rebalances ? out.rebalance_latency_total_ms / static_cast<double>(g.rebalances) : 0;
  const auto in_last_hour = [&](const auto& times) {
    return static_cast<double>(
        std::count_if(times.begin(), times.end(), [&](auto t) { return steady_now - t <= hours(1); }));
  };
  out.rebalance_rate_per_hour = in_last_hour(g.completed_at);
  if (!g.completed_at.empty()) out.last_rebalance_seconds_ago = seconds_between(g.completed_at.back(), steady_now);
  out.join_time_max_ms = ms_of(g.join_time_max);
  out.join_time_avg_ms = g.joins ? ms_of(g.join_time_total) / static_cast<double>(g.joins) : 0;
  out.sync_time_max_ms = ms_of(g.sync_time_max);
  out.sync_time_avg_ms = g.syncs ? ms_of(g.sync_time_total) / static_cast<double>(g.syncs) : 0;
  out.heartbeat_response_time_max_ms = ms_of(g.heartbeat_rtt_max);
  out.heartbeat_total = g.heartbeats;
  out.join_total = g.joins;
  out.sync_total = g.syncs;
  out.failed_rebalance_rate_per_hour = in_last_hour(g.failed_at);
  out.rebalance_latency = g.rebalance_hist.snapshot();
  out.join_latency = g.join_hist.snapshot();
  out.sync_latency = g.sync_hist.snapshot();
  out.heartbeat_latency = g.heartbeat_hist.snapshot();
  out.commit_latency = m.commit_hist.snapshot();
  out.partitions_assigned_latency = m.assigned_hist.snapshot();
  out.partitions_revoked_latency = m.revoked_hist.snapshot();
  out.partitions_lost_latency = m.lost_hist.snapshot();
  out.fetch_latency = m.fetch_latency_hist.snapshot();
  out.fetch_latency_max_ms = m.fetch_latency_max_ms;
  out.fetch_size = m.fetch_size_hist.snapshot();
  out.fetch_throttle_time = m.fetch_throttle_hist.snapshot();
  out.time_between_poll = m.between_poll_hist.snapshot();
  if (m.wire) {
    out.responses_with_trailing_bytes_total =
        static_cast<std::int64_t>(m.wire->responses_with_trailing_bytes.load(std::memory_order_relaxed));
    out.responses_mismatched_total =
        static_cast<std::int64_t>(m.wire->responses_mismatched.load(std::memory_order_relaxed));
    out.authentications_total = static_cast<std::int64_t>(m.wire->authentications.load(std::memory_order_relaxed));
    out.reauthentications_total =
        static_cast<std::int64_t>(m.wire->reauthentications.load(std::memory_order_relaxed));
    out.authentication_failures_total =
        static_cast<std::int64_t>(m.wire->authentication_failures.load(std::memory_order_relaxed));
    out.rebootstraps_total = static_cast<std::int64_t>(m.wire->rebootstraps.load(std::memory_order_relaxed));
  }
  if (g.last_heartbeat_response) out.last_heartbeat_seconds_ago = seconds_between(*g.last_heartbeat_response, steady_now);
  out.commit_total = m.commits;
  out.offset_validations_total = m.offset_validations;
  out.log_truncations_total = m.log_truncations;
  out.topic_recreations_total = m.topic_recreations;
  out.commit_latency_max_ms = m.commit_latency_max_ms;
  out.commit_latency_avg_ms = m.commits ? m.commit_latency_total_ms / static_cast<double>(m.commits) : 0;

  out.records_consumed_total = m.records_total;
  out.bytes_consumed_total = m.bytes_total;
  out.records_consumed_rate = m.records_rate;
  out.bytes_consumed_rate = m.bytes_rate;
  out.time_between_poll_avg_ms = m.between_poll_avg_ms;
  out.time_between_poll_max_ms = m.between_poll_max_ms;
  out.poll_idle_ratio_avg = m.idle_ratio_avg;
  if (m.last_poll) out.last_poll_seconds_ago = seconds_between(*m.last_poll, steady_now);

  for (const auto& e : g.history) {
    RebalanceRecord r;
    r.cause = e.cause;
    r.detail = e.detail;
    r.start_ms = wall_ms(e.start);
    r.duration_ms = e.end ? duration_cast<milliseconds>(*e.end - e.start).count() : -1;
    r.generation = e.generation;
    r.completed = e.completed;
    r.revoked.assign(e.revoked.begin(), e.revoked.end());
    r.assigned.assign(e.assigned.begin(), e.assigned.end());
    r.lost.assign(e.lost.begin(), e.lost.end());
    out.rebalances.push_back(std::move(r));
  }
  return out;
}

}  // namespace detail
}  // namespace kgroup
