// Commits around rebalances on the mock cluster: while a second member joins (eager and
// cooperative) a commit either succeeds or fails with the retriable REBALANCE_IN_PROGRESS, and
// works again once poll() completed the rebalance; a member that exceeded max.poll.interval.ms
// gets commit_failed, and the offsets of partitions it lost are never committed by it.
#include <algorithm>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::eventually;
using kgroup::test::polling_member;
using kgroup::test::recording_listener;
using kgroup::test::test_config;
using kgroup::test::timeline;

namespace {

kgroup::Config commit_config(const kgroup::test::mock_cluster& mc, const std::string& group,
                             const std::string& strategy) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .short_session()
      .strategy(strategy)
      .earliest()
      .manual_commit()
      .set("max.poll.records", "50")
      .retry_backoff(50ms)
      .reconnect_backoff(20ms);
}

std::set<kgroup::TopicPartition> all_of(const std::string& topic, int n) {
  std::set<kgroup::TopicPartition> s;
  for (int i = 0; i < n; ++i) s.insert({topic, i});
  return s;
}

// Polls `c` until it owns `want` partitions and returned at least `records` records.
std::size_t poll_until_owning(kgroup::Consumer& c, const recording_listener& l, std::size_t want,
                              std::size_t records, std::chrono::milliseconds limit) {
  std::size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while ((l.owned().size() != want || seen < records) && std::chrono::steady_clock::now() < deadline) {
    seen += c.poll(50ms).size();
  }
  return seen;
}

}  // namespace

TEST_CASE("commit_sync while a member joins: success or REBALANCE_IN_PROGRESS, then success again",
          "[commit]") {
  const std::string strategy = GENERATE("range", "cooperative-sticky");
  INFO("strategy " << strategy);
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  mc.produce("orders", 4000);
  const auto all = all_of("orders", 4);
  const auto cfg = commit_config(mc, "g-commit-rebalance-" + strategy, strategy);
  timeline t;
  auto la = std::make_shared<recording_listener>("a", t);
  kgroup::Consumer a(cfg);
  a.subscribe({"orders"}, la);
  REQUIRE(poll_until_owning(a, *la, 4, 200, 30s) >= 200);
  a.commit_sync();

  polling_member b("b", cfg, {"orders"}, t);
  std::size_t ok = 0, in_progress = 0;
  std::vector<std::string> other;
  auto settled = [&] {
    const auto oa = la->owned(), ob = b.listener().owned();
    std::set<kgroup::TopicPartition> both(oa.begin(), oa.end());
    both.insert(ob.begin(), ob.end());
    return !oa.empty() && !ob.empty() && oa.size() + ob.size() == 4 && both == all &&
           a.group_state() == "stable" && b.consumer().group_state() == "stable";
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!settled() && std::chrono::steady_clock::now() < deadline) {
    a.poll(50ms);
    try {
      a.commit_sync();
      ++ok;
    } catch (const kgroup::Error& e) {
      if (e.code() == make_error_code(kgroup::kafka_errc::rebalance_in_progress)) {
        ++in_progress;
      } else {
        other.push_back(e.what());
      }
    }
  }
  INFO("commits during the rebalance: " << ok << " succeeded, " << in_progress << " REBALANCE_IN_PROGRESS");
  REQUIRE(settled());
  for (const auto& o : other) UNSCOPED_INFO(o);
  CHECK(other.empty());

  // The poll() that completed the rebalance is behind us: commits work again, and what they
  // commit is this member's position.
  for (int i = 0; i < 3; ++i) {
    a.poll(50ms);
    CHECK_NOTHROW(a.commit_sync());
  }
  const auto mine = a.assignment();
  const auto committed = a.committed(mine);
  for (const auto& tp : mine) {
    REQUIRE(committed.count(tp) == 1);
    CHECK(committed.at(tp).offset == a.position(tp));
  }
  b.stop();
  a.close(10s);
  CHECK(b.poll_error() == std::nullopt);
  CHECK(t.overlaps().empty());
}

TEST_CASE("a member past max.poll.interval.ms: commit_failed, and its lost partitions are never committed",
          "[commit]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  mc.produce("orders", 4000);  // 1000 per partition
  const auto all = all_of("orders", 4);
  auto cfg = commit_config(mc, "g-commit-lost", "range");
  cfg.set("max.poll.interval.ms", "3000");
  cfg.set("enable.auto.commit", "true");
  cfg.set("auto.commit.interval.ms", "100");
  timeline t;
  auto la = std::make_shared<recording_listener>("a", t);
  kgroup::Consumer a(cfg);
  a.subscribe({"orders"}, la);
  REQUIRE(poll_until_owning(a, *la, 4, 300, 30s) >= 300);
  a.commit_sync();
  std::map<kgroup::TopicPartition, std::int64_t> before;
  for (const auto& tp : all) before[tp] = a.position(tp);
  REQUIRE(std::any_of(before.begin(), before.end(), [](const auto& kv) { return kv.second < 1000; }));

  // a stops polling: its background thread leaves the group after max.poll.interval.ms.
  REQUIRE(eventually([&] { return a.group_state() == "poll_timed_out"; }, 20s));
  auto expect_commit_failed = [&](auto&& commit) {
    try {
      commit();
      FAIL("commit after max.poll.interval.ms succeeded");
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == make_error_code(kgroup::client_errc::commit_failed));
      CHECK_THAT(e.what(), Catch::Contains("max.poll.interval.ms"));
    }
  };
  expect_commit_failed([&] { a.commit_sync(); });
  expect_commit_failed([&] {
    a.commit_sync(kgroup::OffsetMap{{{"orders", 0}, {before[{"orders", 0}], "", {}}}});
  });

  // b takes every partition, reads to the end and auto-commits 1000 everywhere.
  auto cfg_b = cfg;
  cfg_b.set("max.poll.interval.ms", "300000");
  cfg_b.set("max.poll.records", "500");
  polling_member b("b", cfg_b, {"orders"}, t);
  auto all_committed_at_end = [&] {
    try {
      const auto c = a.committed(all);
      return c.size() == 4 &&
             std::all_of(c.begin(), c.end(), [](const auto& kv) { return kv.second.offset == 1000; });
    } catch (const kgroup::Error&) {
      return false;
    }
  };
  REQUIRE(eventually(all_committed_at_end, 40s, 200ms));

  // a's next poll() reports the partitions lost and rejoins; its auto-commit keeps running
  // throughout, and must never commit what it had consumed before (positions below 1000).
  const auto lost_deadline = std::chrono::steady_clock::now() + 10s;
  while (la->lost_calls() == 0 && std::chrono::steady_clock::now() < lost_deadline) a.poll(50ms);
  REQUIRE(la->lost_calls() == 1);
  const auto settle_deadline = std::chrono::steady_clock::now() + 40s;
  while (std::chrono::steady_clock::now() < settle_deadline &&
         !(a.group_state() == "stable" && !la->owned().empty() && b.consumer().group_state() == "stable")) {
    a.poll(50ms);
  }
  // A few more auto-commit intervals.
  for (int i = 0; i < 10; ++i) a.poll(50ms);
  CHECK(all_committed_at_end());
  b.stop();
  a.close(10s);
  CHECK(t.overlaps({"a"}).empty());
}
