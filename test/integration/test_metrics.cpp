// Consumer::metrics() and the statistics callback against the mock cluster (issue 6): identity,
// assignment with positions and lag, consumption counters, commits, heartbeats and the rebalance
// history with its causes.
#include <algorithm>
#include <atomic>

#include <catch2/catch.hpp>

#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"

using namespace std::chrono_literals;

namespace {

kgroup::Config metrics_config(const kgroup::test::mock_cluster& mc, const std::string& group) {
  return kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()},
                        {"group.id", group},
                        {"client.id", "metrics-test"},
                        {"session.timeout.ms", "6000"},
                        {"heartbeat.interval.ms", "300"},
                        {"auto.offset.reset", "earliest"},
                        {"enable.auto.commit", "false"},
                        {"partition.assignment.strategy", "range"},
                        {"statistics.interval.ms", "200"},
                        {"retry.backoff.ms", "50"}};
}

std::int64_t poll_for(kgroup::Consumer& c, std::chrono::milliseconds d) {
  std::int64_t n = 0;
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) n += static_cast<std::int64_t>(c.poll(50ms).size());
  return n;
}

}  // namespace

TEST_CASE("metrics() reports identity, assignment, lag, consumption, commits and rebalances", "[metrics]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  mc.produce("orders", 2000);
  kgroup::Consumer c1(metrics_config(mc, "g-metrics"));
  std::atomic<int> stats_calls{0};
  std::int64_t last_stats_records = -1;
  c1.set_statistics_callback([&](const kgroup::ConsumerMetrics& m) {
    ++stats_calls;
    last_stats_records = m.records_consumed_total;
  });
  c1.subscribe({"orders"});

  std::int64_t consumed = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (consumed < 2000 && std::chrono::steady_clock::now() < deadline) consumed += poll_for(c1, 100ms);
  REQUIRE(consumed == 2000);
  c1.commit_sync();
  poll_for(c1, 700ms);  // a few heartbeats and statistics callbacks

  auto m = c1.metrics();
  CHECK(m.client_id == "metrics-test");
  CHECK(m.group_id == "g-metrics");
  CHECK_FALSE(m.member_id.empty());
  CHECK(m.generation >= 1);
  CHECK(m.state == "stable");
  CHECK(m.coordinator >= 1);
  CHECK(m.protocol == "eager");
  CHECK(m.assignor == "range");
  CHECK(m.leader);
  REQUIRE(m.assigned_partitions == 4);
  REQUIRE(m.partitions.size() == 4);
  std::int64_t positions = 0;
  for (const auto& p : m.partitions) {
    INFO(p.partition.topic << "-" << p.partition.partition);
    CHECK(p.partition.topic == "orders");
    CHECK(p.position >= 0);
    CHECK(p.high_watermark == p.position);  // everything read
    CHECK(p.lag == 0);
    CHECK(p.committed == p.position);
    CHECK_FALSE(p.paused);
    positions += p.position;
  }
  CHECK(positions == 2000);
  CHECK(m.records_lag_max == 0);
  CHECK(m.records_consumed_total == 2000);
  CHECK(m.bytes_consumed_total > 2000 * 100);  // 100-byte values plus keys and framing
  CHECK(m.records_consumed_rate > 0);
  CHECK(m.commit_total >= 1);
  CHECK(m.commit_latency_max_ms >= m.commit_latency_avg_ms);
  CHECK(m.heartbeat_total >= 1);
  CHECK(m.last_heartbeat_seconds_ago >= 0);
  CHECK(m.last_heartbeat_seconds_ago < 5);
  CHECK(m.time_between_poll_avg_ms > 0);
  CHECK(m.time_between_poll_max_ms >= m.time_between_poll_avg_ms);
  CHECK(m.poll_idle_ratio_avg > 0);
  CHECK(m.poll_idle_ratio_avg <= 1.0);
  CHECK(m.last_poll_seconds_ago >= 0);
  CHECK(m.max_poll_interval_ms == 300000);
  CHECK(m.rebalance_total == 1);
  CHECK(m.rebalance_rate_per_hour == 1);
  CHECK(m.last_rebalance_seconds_ago >= 0);
  CHECK(m.join_time_max_ms >= m.join_time_avg_ms);
  REQUIRE(m.rebalances.size() == 1);
  CHECK(m.rebalances[0].cause == kgroup::RebalanceCause::member_joined);
  CHECK(m.rebalances[0].completed);
  CHECK(m.rebalances[0].duration_ms >= 0);
  CHECK(m.rebalances[0].assigned.size() == 4);
  CHECK(m.rebalances[0].start_ms <= m.timestamp_ms);
  CHECK(m.rebalances[0].start_ms > m.timestamp_ms - 60000);
  CHECK(stats_calls.load() >= 2);
  CHECK(last_stats_records == 2000);

  // A second member joins: the leader explains the rebalance by the member that joined.
  kgroup::Consumer c2(metrics_config(mc, "g-metrics"));
  c2.subscribe({"orders"});
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until &&
         (c1.metrics().rebalance_total < 2 || c2.metrics().rebalance_total < 1)) {
    c1.poll(50ms);
    c2.poll(50ms);
  }
  m = c1.metrics();
  REQUIRE(m.rebalance_total >= 2);
  REQUIRE(m.rebalances.size() >= 2);
  const auto& r = m.rebalances[1];
  CHECK(r.cause == kgroup::RebalanceCause::member_joined);
  CHECK(r.detail.find("joined") != std::string::npos);
  CHECK(r.revoked.size() == 4);  // eager: everything goes back first
  CHECK(r.assigned.size() == 2);
  CHECK(m.partitions.size() == 2);
  const auto m2 = c2.metrics();
  CHECK_FALSE(m2.leader);
  CHECK(m2.partitions.size() == 2);
  c2.close(5s);
  c1.close(5s);
}
