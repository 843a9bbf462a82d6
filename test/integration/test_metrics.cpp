// Consumer::metrics() and the statistics callback against the mock cluster (issue 6): identity,
// assignment with positions and lag, consumption counters, commits, heartbeats and the rebalance
// history with its causes.
#include <algorithm>
#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;

namespace {

kgroup::Config metrics_config(const kgroup::test::mock_cluster& mc, const std::string& group) {
  return kgroup::test::test_config(mc.bootstrap_servers())
      .group(group)
      .client_id("metrics-test")
      .short_session(300ms)
      .earliest()
      .manual_commit()
      .strategy("range")
      .set("statistics.interval.ms", "200")
      .retry_backoff(50ms);
}

std::int64_t poll_for(kgroup::Consumer& c, std::chrono::milliseconds d) {
  std::int64_t n = 0;
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) n += static_cast<std::int64_t>(c.poll(50ms).size());
  return n;
}

}  // namespace

namespace {

// Takes 20 ms in each callback, so the listener-latency histograms have something to measure.
struct slow_listener : kgroup::ConsumerRebalanceListener {
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>&) override { std::this_thread::sleep_for(20ms); }
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>&) override { std::this_thread::sleep_for(20ms); }
};

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
  c1.subscribe({"orders"}, std::make_shared<slow_listener>());

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
  // Nothing was deleted: the lead of each partition is its position.
  std::int64_t lead_min = -1;
  for (const auto& p : m.partitions) {
    CHECK(p.log_start_offset == 0);
    CHECK(p.lead == p.position);
    lead_min = lead_min < 0 ? p.lead : std::min(lead_min, p.lead);
  }
  CHECK(m.records_lead_min == lead_min);
  // Distributions: one per completed rebalance, JoinGroup, SyncGroup, commit; fetches and polls;
  // the listener's one on_partitions_assigned (20 ms).
  CHECK(m.rebalance_latency.count == 1);
  CHECK(m.join_latency.count == static_cast<std::uint64_t>(m.join_total));
  CHECK(m.join_total >= 1);
  CHECK(m.sync_latency.count == static_cast<std::uint64_t>(m.sync_total));
  CHECK(m.sync_total >= 1);
  CHECK(m.commit_latency.count == static_cast<std::uint64_t>(m.commit_total));
  CHECK(m.heartbeat_latency.count >= 1);
  CHECK(m.fetch_latency.count >= 1);
  CHECK(m.fetch_size.count == m.fetch_latency.count);
  CHECK(m.fetch_size.sum >= 2000 * 100);
  CHECK(m.fetch_throttle_time.count == m.fetch_latency.count);
  CHECK(m.time_between_poll.count >= 1);
  CHECK(m.partitions_assigned_latency.count == 1);
  CHECK(m.partitions_assigned_latency.sum >= 0.02);
  CHECK(m.partitions_revoked_latency.count == 0);
  REQUIRE(m.rebalance_latency.bounds.size() == m.rebalance_latency.buckets.size());
  CHECK(m.rebalance_latency.buckets.back() == 1);  // cumulative: the last bound (300 s) holds it
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
  std::this_thread::sleep_for(3ms);
  CHECK(c1.metrics().rebalances[0].start_ms == m.rebalances[0].start_ms);  // stable across snapshots
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
  CHECK(m.partitions_revoked_latency.count == 1);  // eager: the second rebalance revoked everything
  CHECK(m.partitions_revoked_latency.sum >= 0.02);
  const auto m2 = c2.metrics();
  CHECK_FALSE(m2.leader);
  CHECK(m2.partitions.size() == 2);
  c2.close(5s);
  c1.close(5s);
}

namespace {

// A custom assignor that breaks the rules: it gives every member partition 0 of "orders", and
// also a topic nobody subscribed to.
struct broken_assignor : kgroup::PartitionAssignor {
  std::string name() const override { return "broken"; }
  kgroup::GroupAssignment assign(const kgroup::ClusterMetadata&, const kgroup::GroupSubscription& g) const override {
    kgroup::GroupAssignment out;
    for (const auto& m : g.members) out.members.push_back({m.member_id, {{"orders", {0}}, {"secret", {0}}}, {}});
    return out;
  }
};

}  // namespace

TEST_CASE("a leader refuses its own custom assignor's invalid assignment", "[metrics][group]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  mc.create_topic("secret", 1);
  auto cfg = metrics_config(mc, "g-broken-assignor");
  cfg.set("partition.assignment.strategy", "broken");
  kgroup::Consumer c(cfg, {std::make_shared<broken_assignor>()});
  c.subscribe({"orders"});
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until && c.metrics().failed_rebalance_total < 2) c.poll(50ms);
  const auto m = c.metrics();
  CHECK(m.failed_rebalance_total >= 2);  // refused, and refused again on the retry
  CHECK(m.rebalance_total == 0);
  CHECK(c.assignment().empty());
  c.close(5s);
}

TEST_CASE(
    "client.id left empty: each consumer is named consumer-<group.id>-<n>, unique in the process, as Java's",
    "[metrics]") {
  kgroup::test::mock_cluster mc(1);
  const auto cfg = [&](const std::string& group) {
    auto c = kgroup::test::test_config(mc.bootstrap_servers()).manual_commit();
    if (!group.empty()) c.group(group);
    return kgroup::Config(c);
  };
  kgroup::Consumer a(cfg("g-names"));
  kgroup::Consumer b(cfg("g-names"));
  kgroup::Consumer standalone(cfg(""));
  const auto id_a = a.metrics().client_id, id_b = b.metrics().client_id,
             id_s = standalone.metrics().client_id;
  INFO(id_a << " " << id_b << " " << id_s);
  CHECK(id_a.rfind("consumer-g-names-", 0) == 0);
  CHECK(id_b.rfind("consumer-g-names-", 0) == 0);
  CHECK(id_a != id_b);
  // The sequence counts on: the second one made gets the next number.
  CHECK(std::stoll(id_b.substr(std::string("consumer-g-names-").size())) ==
        std::stoll(id_a.substr(std::string("consumer-g-names-").size())) + 1);
  CHECK(id_s.rfind("consumer-", 0) == 0);
  CHECK(id_s.find("g-names") == std::string::npos);
  // An explicit client.id is kept as it is.
  auto named = cfg("g-names");
  named.set("client.id", "mine");
  kgroup::Consumer c(named);
  CHECK(c.metrics().client_id == "mine");
}
