// Consumer groups of kgroup members on the librdkafka mock cluster: joins, leaves, eager and
// cooperative rebalances, poll timeouts, fatal errors, coordinator errors. Every test that runs
// a group checks from the listeners' timeline that no partition had two owners at once.
#include <fcntl.h>

#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::all_partitions;
using kgroup::test::eventually;
using kgroup::test::polling_member;
using kgroup::test::test_config;
using kgroup::test::timeline;

namespace {

kgroup::Config group_config(const kgroup::test::mock_cluster& mc, const std::string& group, const std::string& strategy) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .short_session()
      .strategy(strategy)
      .retry_backoff(50ms)
      .reconnect_backoff(20ms);
}

// True when the members' listener-reported ownerships are disjoint and cover `expected`, and each
// member's view agrees with its consumer's assignment().
bool settled(std::vector<polling_member*> members, const std::set<kgroup::TopicPartition>& expected,
             std::size_t max_spread = 1) {
  std::set<kgroup::TopicPartition> all;
  std::size_t total = 0, lo = SIZE_MAX, hi = 0;
  for (auto* m : members) {
    auto owned = m->listener().owned();
    if (owned != m->consumer().assignment()) return false;
    if (m->consumer().group_state() != "stable") return false;
    total += owned.size();
    lo = std::min(lo, owned.size());
    hi = std::max(hi, owned.size());
    all.insert(owned.begin(), owned.end());
  }
  return total == expected.size() && all == expected && hi - lo <= max_spread;
}

}  // namespace

TEST_CASE("a single member joins and owns every partition", "[group]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  timeline t;
  polling_member a("a", group_config(mc, "g-single", "range"), {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a}, all_partitions("orders", 6)); }, 20s));
  auto md = a.consumer().group_metadata();
  CHECK(md.group_id == "g-single");
  CHECK_FALSE(md.member_id.empty());
  CHECK(md.generation_id >= 1);
  CHECK(a.listener().assigned_calls() == 1);
  CHECK(a.listener().revoked_calls() == 0);
  a.stop();
  CHECK_FALSE(a.close_error());
  // close() revokes (eager: everything) on the user's thread before leaving.
  CHECK(a.listener().revoked_calls() == 1);
  CHECK(a.close_took() < 10s);
  CHECK(t.overlaps().empty());
}

TEST_CASE("members join and leave; partitions never have two owners", "[group]") {
  const std::string strategy = GENERATE(std::string("range"), std::string("cooperative-sticky"));
  const bool cooperative = strategy == "cooperative-sticky";
  INFO("strategy " << strategy);
  kgroup::test::mock_cluster mc(3);
  constexpr int partitions = 12;
  mc.create_topic("orders", partitions);
  const auto expected = all_partitions("orders", partitions);
  const std::string group = "g-churn-" + strategy;
  timeline t;
  auto a = std::make_unique<polling_member>("a", group_config(mc, group, strategy), std::vector<std::string>{"orders"}, t);
  auto b = std::make_unique<polling_member>("b", group_config(mc, group, strategy), std::vector<std::string>{"orders"}, t);
  auto c = std::make_unique<polling_member>("c", group_config(mc, group, strategy), std::vector<std::string>{"orders"}, t);
  REQUIRE(eventually([&] { return settled({a.get(), b.get(), c.get()}, expected); }, 40s));
  const auto revoked_before = a->listener().revoked_total() + b->listener().revoked_total() + c->listener().revoked_total();
  const auto before_a = a->listener().owned();

  // A fourth member joins.
  auto d = std::make_unique<polling_member>("d", group_config(mc, group, strategy), std::vector<std::string>{"orders"}, t);
  REQUIRE(eventually([&] { return settled({a.get(), b.get(), c.get(), d.get()}, expected); }, 40s));
  const auto revoked_join =
      a->listener().revoked_total() + b->listener().revoked_total() + c->listener().revoked_total() - revoked_before;
  if (cooperative) {
    // Only the partitions that moved to d were revoked (12 over 4 members: 3 move).
    CHECK(revoked_join == d->listener().owned().size());
    // a kept what it still owns: its new set is a subset of the old one.
    for (const auto& tp : a->listener().owned()) CHECK(before_a.count(tp) == 1);
  } else {
    // Eager revokes everything the three members owned (at least once: under load the mock's
    // join timer can close a round early and start another one, which revokes again).
    CHECK(revoked_join >= static_cast<std::size_t>(partitions));
  }

  // One member leaves cleanly.
  b->stop();
  CHECK_FALSE(b->close_error());
  REQUIRE(eventually([&] { return settled({a.get(), c.get(), d.get()}, expected); }, 40s));

  for (auto* m : {a.get(), c.get(), d.get()}) CHECK_FALSE(m->poll_error());
  a->stop();
  c->stop();
  d->stop();
  const auto overlaps = t.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("a member that stops polling leaves the group; its next poll reports lost and rejoins", "[group]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  const auto expected = all_partitions("orders", 4);
  timeline t;
  auto cfg = group_config(mc, "g-poll", "range");
  cfg.set("max.poll.interval.ms", "4000");
  polling_member a("a", cfg, {"orders"}, t);
  polling_member b("b", cfg, {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a, &b}, expected); }, 40s));

  a.stall();
  // a's background thread leaves after 4 s without poll(); b takes everything.
  REQUIRE(eventually([&] { return b.listener().owned() == expected && b.consumer().group_state() == "stable"; }, 40s));
  CHECK(a.consumer().group_state() == "poll_timed_out");
  CHECK(a.listener().lost_calls() == 0);  // reported only from the next poll()

  a.resume();
  REQUIRE(eventually([&] { return a.listener().lost_calls() == 1; }, 10s));
  REQUIRE(eventually([&] { return settled({&a, &b}, expected); }, 40s));
  a.stop();
  b.stop();
  // a's stale ownership ended with "lost"; b was assigned a's partitions while a was a zombie.
  CHECK(t.overlaps({"a"}).empty());
}

TEST_CASE("fatal group errors are raised from poll() with a clear message", "[group]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  mc.push_request_errors(11, {30});  // JoinGroup: GROUP_AUTHORIZATION_FAILED
  kgroup::Consumer consumer(group_config(mc, "g-fatal", "range"));
  consumer.subscribe({"orders"});
  std::string message;
  std::error_code code;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (message.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      consumer.poll(100ms);
    } catch (const kgroup::Error& e) {
      message = e.what();
      code = e.code();
    }
  }
  CHECK(code == make_error_code(kgroup::kafka_errc::group_authorization_failed));
  CHECK_THAT(message, Catch::Contains("not authorized") && Catch::Contains("g-fatal"));
  // It stays fatal.
  CHECK_THROWS_AS(consumer.poll(10ms), kgroup::Error);
  consumer.close(5s);
}

TEST_CASE("coordinator errors on group requests are retried; the group stays whole", "[group]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  const auto expected = all_partitions("orders", 6);
  timeline t;
  // FindCoordinator and JoinGroup fail a few times before the group forms.
  mc.push_request_errors(10, {15, 16});
  mc.push_request_errors(11, {14, 16, 15});
  polling_member a("a", group_config(mc, "g-errors", "range"), {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 40s));
  const int assigned_before = a.listener().assigned_calls();

  // Heartbeats meet NOT_COORDINATOR and a moved coordinator: the member rediscovers and stays.
  mc.push_request_errors(12, {16, 15, 14});
  mc.set_coordinator("g-errors", 2);
  // It rediscovers the coordinator (broker 2) through the errors, without leaving the group.
  CHECK(eventually([&] { return a.consumer().metrics().coordinator == 2; }, 20s));
  CHECK(a.consumer().group_state() == "stable");
  CHECK(a.listener().owned() == expected);
  CHECK(a.listener().assigned_calls() == assigned_before);
  CHECK_FALSE(a.poll_error());
  a.stop();
  CHECK(t.overlaps().empty());
}

TEST_CASE("a listener that throws does not stall the group; poll() rethrows afterwards", "[group]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  struct throwing : kgroup::ConsumerRebalanceListener {
    int assigned = 0;
    void on_partitions_assigned(const std::vector<kgroup::TopicPartition>&) override {
      ++assigned;
      throw std::runtime_error("listener boom");
    }
  };
  auto listener = std::make_shared<throwing>();
  kgroup::Consumer consumer(group_config(mc, "g-throw", "range"));
  consumer.subscribe({"orders"}, listener);
  std::string message;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (message.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      consumer.poll(100ms);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
  }
  CHECK(message == "listener boom");
  CHECK(listener->assigned == 1);
  // The rebalance completed regardless: the member is stable with both partitions.
  REQUIRE(eventually(
      [&] {
        consumer.poll(10ms);
        return consumer.group_state() == "stable";
      },
      10s));
  CHECK(consumer.assignment().size() == 2);
  consumer.close(5s);
}

TEST_CASE("configuration errors name the keys", "[group]") {
  {
    // group.id is optional (manual assignment), but subscribe() needs it and says so.
    kgroup::Consumer no_group(kgroup::Config{{"bootstrap.servers", "127.0.0.1:9"}});
    CHECK_THROWS_WITH(no_group.subscribe({"t"}), Catch::Contains("group.id"));
    no_group.close(1s);
  }
  CHECK_THROWS_WITH(kgroup::Consumer(kgroup::Config{{"bootstrap.servers", "127.0.0.1:9"},
                                                    {"group.id", "g"},
                                                    {"heartbeat.interval.ms", "10000"},
                                                    {"session.timeout.ms", "6000"}}),
                    Catch::Contains("heartbeat.interval.ms") && Catch::Contains("session.timeout.ms"));
  CHECK_THROWS_WITH(kgroup::Consumer(kgroup::Config{{"bootstrap.servers", "127.0.0.1:9"},
                                                    {"group.id", "g"},
                                                    {"partition.assignment.strategy", "rnage"}}),
                    Catch::Contains("rnage"));
  CHECK_THROWS_WITH(kgroup::Config({{"session.timeout", "6000"}}), Catch::Contains("session.timeout.ms"));
}

TEST_CASE("ten members split the partitions, then half of them leave", "[group]") {
  kgroup::test::mock_cluster mc(3);
  constexpr int partitions = 30;
  mc.create_topic("orders", partitions);
  const auto expected = all_partitions("orders", partitions);
  timeline t;
  std::vector<std::unique_ptr<polling_member>> members;
  for (int i = 0; i < 10; ++i) {
    members.push_back(std::make_unique<polling_member>("m" + std::to_string(i),
                                                       group_config(mc, "g-ten", "cooperative-sticky"),
                                                       std::vector<std::string>{"orders"}, t));
  }
  auto all = [&] {
    std::vector<polling_member*> v;
    for (auto& m : members) v.push_back(m.get());
    return v;
  };
  REQUIRE(eventually([&] { return settled(all(), expected); }, 60s));
  for (auto& m : members) CHECK(m->listener().owned().size() == 3);
  for (int i = 0; i < 5; ++i) members[static_cast<std::size_t>(i)]->stop();
  members.erase(members.begin(), members.begin() + 5);
  REQUIRE(eventually([&] { return settled(all(), expected); }, 60s));
  for (auto& m : members) CHECK(m->listener().owned().size() == 6);
  for (auto& m : members) m->stop();
  CHECK(t.overlaps().empty());
}

TEST_CASE("the coordinator's broker going down and coming back keeps the member", "[group]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  const auto expected = all_partitions("orders", 4);
  mc.set_coordinator("g-down", 2);
  timeline t;
  polling_member a("a", group_config(mc, "g-down", "range"), {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 30s));
  const int assigned = a.listener().assigned_calls();
  mc.broker_down(2);
  std::this_thread::sleep_for(2s);  // well inside session.timeout.ms (6 s)
  mc.broker_up(2);
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 30s));
  // It stayed a member: no lost partitions.
  CHECK(a.listener().lost_calls() == 0);
  CHECK(a.listener().assigned_calls() >= assigned);
  CHECK_FALSE(a.poll_error());
  a.stop();
  CHECK(t.overlaps().empty());
}

TEST_CASE("injected SyncGroup and LeaveGroup errors are recovered from", "[group]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 4);
  const auto expected = all_partitions("orders", 4);
  mc.push_request_errors(14, {27, 16, 14});  // SyncGroup: REBALANCE_IN_PROGRESS, NOT_COORDINATOR, LOAD_IN_PROGRESS
  timeline t;
  polling_member a("a", group_config(mc, "g-sync-errors", "cooperative-sticky"), {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 60s));
  mc.push_request_errors(13, {16});  // LeaveGroup: NOT_COORDINATOR — close still finishes
  a.stop(10s);
  CHECK_FALSE(a.close_error());
  CHECK(a.close_took() < 10s);
  CHECK(t.overlaps().empty());
}

TEST_CASE("rebalance.listener.thread=heartbeat runs callbacks on the background thread", "[group]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  struct thread_listener : kgroup::ConsumerRebalanceListener {
    std::mutex m;
    std::vector<std::thread::id> threads;
    void on_partitions_assigned(const std::vector<kgroup::TopicPartition>&) override {
      std::lock_guard lock(m);
      threads.push_back(std::this_thread::get_id());
    }
  };
  auto listener = std::make_shared<thread_listener>();
  auto cfg = group_config(mc, "g-inline", "range");
  cfg.set("rebalance.listener.thread", "heartbeat");
  kgroup::Consumer c(cfg);
  c.subscribe({"orders"}, listener);
  c.poll(10ms);
  // No further poll(): the assignment completes and the callback runs anyway.
  REQUIRE(eventually(
      [&] {
        std::lock_guard lock(listener->m);
        return !listener->threads.empty();
      },
      20s));
  {
    std::lock_guard lock(listener->m);
    CHECK(listener->threads.front() != std::this_thread::get_id());
  }
  CHECK(eventually([&] { return c.assignment().size() == 2 && c.group_state() == "stable"; }, 10s));
  c.close(5s);
}

#ifdef KGROUP_CONSUME_PATH
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

// [no-tsan]: mostly waiting for session.timeout.ms, little threading that the other cases do not cover.
TEST_CASE("a killed member's partitions move to the survivors after the session timeout", "[group][no-tsan]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  const auto expected = all_partitions("orders", 4);
  timeline t;
  polling_member a("a", group_config(mc, "g-kill", "cooperative-sticky"), {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 30s));

  // A second kgroup member in its own process (kgroup-consume), killed with SIGKILL later: no
  // LeaveGroup, no close, its heartbeats just stop.
  std::vector<std::string> args{KGROUP_CONSUME_PATH,
                                "-b", mc.bootstrap_servers(),
                                "-g", "g-kill",
                                "-X", "session.timeout.ms=6000",
                                "-X", "heartbeat.interval.ms=500",
                                "-X", "partition.assignment.strategy=cooperative-sticky",
                                "--duration-ms", "120000",
                                "orders"};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t child = -1;
  REQUIRE(posix_spawn(&child, KGROUP_CONSUME_PATH, &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);

  // The child takes half of the partitions.
  const bool shared = eventually([&] { return a.listener().owned().size() == 2 && a.consumer().group_state() == "stable"; }, 40s);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(shared);
  const auto killed_at = std::chrono::steady_clock::now();
  // After the session timeout (6 s) and the mock's rebalance delay, a owns everything again.
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 40s));
  CHECK(std::chrono::steady_clock::now() - killed_at >= 4s);
  CHECK(a.listener().lost_calls() == 0);
  a.stop();
}
#endif

TEST_CASE(
    "close(CloseOptions) (KIP-1092): a member that remains keeps its partitions until its session ends; "
    "a static member that leaves gives them up at once",
    "[group][close_options]") {
  using op = kgroup::CloseOptions::GroupMembershipOperation;
  const bool remain = GENERATE(true, false);
  CAPTURE(remain);
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 4);
  const auto expected = all_partitions("orders", 4);
  const std::string group = remain ? "g-remain" : "g-leave";
  timeline t;
  polling_member a("a", group_config(mc, group, "range"), {"orders"}, t);
  // remain: a dynamic member (by default it would leave); leave: a static one (it would remain).
  kgroup::Config cb = group_config(mc, group, "range");
  if (!remain) cb.set("group.instance.id", "b-1");
  polling_member b("b", cb, {"orders"}, t);
  REQUIRE(eventually([&] { return settled({&a, &b}, expected); }, 40s));
  const auto closed_at = std::chrono::steady_clock::now();
  b.stop(kgroup::CloseOptions{.group_membership_operation = remain ? op::remain_in_group : op::leave_group});
  CHECK_FALSE(b.close_error());
  // When the coordinator starts the rebalance that takes b out (short_session(): session.timeout.ms
  // 6 s, heartbeats every 500 ms).
  REQUIRE(eventually([&] { return a.consumer().group_state() != "stable"; }, 30s));
  const auto took = std::chrono::steady_clock::now() - closed_at;
  UNSCOPED_INFO("rebalance began " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                   << " ms after close");
  if (remain) {
    CHECK(took >= 5s);  // the coordinator kept b until its session timed out
  } else {
    CHECK(took < 3s);  // LeaveGroup: at a's next heartbeat
  }
  REQUIRE(eventually([&] { return settled({&a}, expected); }, 30s));
  a.stop();
  CHECK(t.overlaps().empty());
}
