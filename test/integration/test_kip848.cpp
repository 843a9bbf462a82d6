// group.protocol=consumer (KIP-848, issue 16) end to end: on librdkafka 2.15.1's mock cluster
// (ConsumerGroupHeartbeat v1) a group of kgroup members splits and hands over partitions; on
// librdkafka 2.0.2's mock (no ConsumerGroupHeartbeat) the member fails with a clear fatal error.
//
// Each case needs one of the two clusters and is skipped (with a warning) on the other. Run both:
//   LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests "[kip848]"
//   kgroup-integration-tests "[kip848]"
#include <catch2/catch.hpp>


#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "net/consumer_group_driver.hpp"
#include "rdkafka_member.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::eventually;
using kgroup::test::mock_cluster;
using kgroup::test::recording_listener;
using kgroup::test::test_config;
using kgroup::test::timeline;

namespace {

kgroup::Config kip848_config(const mock_cluster& mc, const std::string& group) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .set("group.protocol", "consumer")
      .earliest()
      .manual_commit()
      .retry_backoff(50ms);
}

// A member polling on its own thread, remembering every record it saw.
struct reading_member {
  std::string name;
  std::shared_ptr<recording_listener> listener;
  kgroup::Consumer consumer;
  std::mutex& seen_mutex;
  std::set<std::pair<std::int32_t, std::int64_t>>& seen;
  std::atomic<bool> running{true};
  std::atomic<int> poll_errors{0};
  std::string first_error;
  std::map<std::string, std::size_t> topics_seen;  // guarded by seen_mutex
  std::thread thread;

  reading_member(std::string n, const kgroup::Config& cfg, timeline& t, std::mutex& m,
                 std::set<std::pair<std::int32_t, std::int64_t>>& s)
      : name(std::move(n)), listener(std::make_shared<recording_listener>(name, t)), consumer(cfg),
        seen_mutex(m), seen(s) {
    consumer.subscribe({"k"}, listener);
    start();
  }
  /// Subscribed with a pattern the broker matches instead; records seen are counted per topic.
  reading_member(std::string n, const kgroup::Config& cfg, timeline& t, std::mutex& m,
                 std::set<std::pair<std::int32_t, std::int64_t>>& s, const kgroup::SubscriptionPattern& pattern)
      : name(std::move(n)), listener(std::make_shared<recording_listener>(name, t)), consumer(cfg),
        seen_mutex(m), seen(s) {
    consumer.subscribe(pattern, listener);
    start();
  }
  std::map<std::string, std::size_t> per_topic() const {
    std::lock_guard lock(seen_mutex);
    return topics_seen;
  }
  ~reading_member() { stop(); }
  /// Polls on a thread of its own until stop().
  void start() {
    running = true;
    thread = std::thread([this] {
      while (running) {
        try {
          for (const auto& r : consumer.poll(50ms)) {
            std::lock_guard lock(seen_mutex);
            seen.emplace(r.partition, r.offset);
            ++topics_seen[std::string(r.topic)];
          }
        } catch (const std::exception& e) {
          if (poll_errors++ == 0) first_error = e.what();
          std::this_thread::sleep_for(50ms);
        }
      }
    });
  }
  void stop() {
    running = false;
    if (thread.joinable()) thread.join();
  }
};

// True (with a warning) on a cluster without ConsumerGroupHeartbeat: the case is skipped.
bool skipped_without_kip848() {
  if (mock_cluster::modern()) return false;
  WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                              << "'s mock has no ConsumerGroupHeartbeat (KIP-848); run with librdkafka 2.15.1");
  return true;
}

// A KIP-848 group's world: the cluster (heartbeat interval 500 ms, session 45 s), the timeline
// of ownership and the records its members saw. A test binds it: auto& [mc, tl, seen_mutex, seen].
struct kip848_group {
  mock_cluster mc;
  timeline tl;
  std::mutex seen_mutex;
  std::set<std::pair<std::int32_t, std::int64_t>> seen;
  explicit kip848_group(int brokers) : mc(brokers) { REQUIRE(mc.set_consumer_group_timers(500, 45000)); }
};

}  // namespace

TEST_CASE("kip848: two kgroup members split a topic, read every record, and one takes over when the other closes",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  // Listener callbacks inside poll() (the default) or on the background thread.
  const std::string listener_thread = GENERATE(as<std::string>{}, "poll", "heartbeat");
  CAPTURE(listener_thread);
  kip848_group group(3);  // the broker's session timeout
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("k", 6);
  mc.produce("k", 600);
  const auto all = kgroup::test::all_partitions("k", 6);

  auto cfg = kip848_config(mc, "g-kip848");
  cfg.set("rebalance.listener.thread", listener_thread);
  auto a = std::make_unique<reading_member>("a", cfg, tl, seen_mutex, seen);
  auto b = std::make_unique<reading_member>("b", cfg, tl, seen_mutex, seen);

  // Both join and the coordinator splits the partitions between them.
  const bool split = eventually(
      [&] {
        const auto oa = a->listener->owned();
        const auto ob = b->listener->owned();
        std::set<kgroup::TopicPartition> both(oa.begin(), oa.end());
        both.insert(ob.begin(), ob.end());
        return !oa.empty() && !ob.empty() && oa.size() + ob.size() == 6 && both == all;
      },
      30s);
  INFO("a owns " << a->listener->owned().size() << ", b owns " << b->listener->owned().size());
  CHECK(split);
  // The assign callbacks start before the assignment is acknowledged: stable a moment later.
  CHECK(eventually(
      [&] { return a->consumer.group_state() == "stable" && b->consumer.group_state() == "stable"; }, 10s));
  const auto ma = a->consumer.group_metadata();
  const auto mb = b->consumer.group_metadata();
  CHECK(ma.member_id.size() == 22);  // KIP-1082: the client's own UUID, base64url
  CHECK(mb.member_id.size() == 22);
  CHECK(ma.member_id != mb.member_id);
  CHECK(ma.generation_id > 0);  // the member epoch
  CHECK(a->consumer.metrics().protocol == "consumer");
  CHECK(b->consumer.assignment() == b->listener->owned());

  // Every record is read, by one member or the other.
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 600;
      },
      30s));
  {
    std::lock_guard lock(seen_mutex);
    CHECK(seen.size() == 600);
  }
  // Commits carry the member epoch and id (OffsetCommit v9 on this mock).
  a->stop();
  // A commit refused with STALE_MEMBER_EPOCH is retried (with the epoch of the latest heartbeat).
  mc.push_request_errors(8 /* OffsetCommit */, {113 /* STALE_MEMBER_EPOCH */});
  CHECK_NOTHROW(a->consumer.commit_sync());

  // a leaves cleanly (epoch -1 heartbeat): b takes every partition.
  const auto close_started = std::chrono::steady_clock::now();
  a->consumer.close(10s);
  CHECK(std::chrono::steady_clock::now() - close_started < 5s);
  CHECK(a->listener->owned().empty());
  CHECK(a->listener->lost_calls() == 0);
  const bool took_over = eventually([&] { return b->listener->owned() == all; }, 30s);
  CHECK(took_over);

  // And reads what is produced afterwards on all of them.
  mc.produce("k", 600);
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 1200;
      },
      30s));
  b->stop();
  CHECK(a->poll_errors == 0);
  CHECK(b->poll_errors == 0);
  INFO("a: " << a->first_error << " b: " << b->first_error);
  b->consumer.close(10s);
  CHECK(b->listener->lost_calls() == 0);

  const auto overlaps = tl.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("kip848: a member that stops polling past max.poll.interval.ms leaves; on its next poll() its partitions are lost and it rejoins",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  kip848_group group(1);  // the broker's session timeout
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("k", 4);
  mc.produce("k", 40);
  const auto all = kgroup::test::all_partitions("k", 4);
  auto cfg = kip848_config(mc, "g-kip848-stall");
  cfg.set("max.poll.interval.ms", "2000");
  auto a = std::make_unique<reading_member>("a", cfg, tl, seen_mutex, seen);
  auto b = std::make_unique<reading_member>("b", cfg, tl, seen_mutex, seen);
  REQUIRE(eventually(
      [&] {
        return !a->listener->owned().empty() && !b->listener->owned().empty() &&
               a->listener->owned().size() + b->listener->owned().size() == 4;
      },
      30s));

  // a stalls: its background thread leaves the group after 2 s; b gets everything.
  a->stop();
  CHECK(eventually([&] { return b->listener->owned() == all; }, 20s));
  CHECK(a->consumer.group_state() == "poll_timed_out");
  CHECK(a->listener->lost_calls() == 0);  // not until a polls again

  // a polls again: its partitions are reported lost, then it rejoins and gets a share back.
  a->start();
  CHECK(eventually([&] { return a->listener->lost_calls() == 1; }, 10s));
  CHECK(eventually(
      [&] {
        return !a->listener->owned().empty() &&
               a->listener->owned().size() + b->listener->owned().size() == 4;
      },
      30s));
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 40;
      },
      20s));
  a->stop();
  b->stop();
  CHECK(a->poll_errors == 0);
  CHECK(b->poll_errors == 0);
  a->consumer.close(10s);
  b->consumer.close(10s);
  // a's partitions went to b while a had not yet heard (it was not polling): a is the zombie here.
  const auto overlaps = tl.overlaps({"a"});
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("kip848: a mixed group of kgroup and librdkafka 2.15.1 members (group.protocol=consumer) shares a topic and hands over either way without overlaps",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  kip848_group group(3);  // the broker's session timeout
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("k", 6);
  mc.produce("k", 300);
  const auto all = kgroup::test::all_partitions("k", 6);
  auto a = std::make_unique<reading_member>("kgroup", kip848_config(mc, "g-kip848-mixed"), tl, seen_mutex, seen);
  auto r = std::make_unique<kgroup::test::rdkafka_member>("rdkafka", mc.bootstrap_servers(), "g-kip848-mixed", "",
                                                          std::vector<std::string>{"k"}, tl,
                                                          std::map<std::string, std::string>{{"group.protocol", "consumer"}});
  const bool split = eventually(
      [&] {
        const auto oa = a->listener->owned();
        const auto orr = r->owned();
        std::set<kgroup::TopicPartition> both(oa.begin(), oa.end());
        both.insert(orr.begin(), orr.end());
        return !oa.empty() && !orr.empty() && oa.size() + orr.size() == 6 && both == all;
      },
      30s);
  INFO("kgroup owns " << a->listener->owned().size() << ", librdkafka owns " << r->owned().size());
  CHECK(split);
  // Both directions: the kgroup member hands over to librdkafka's, or the other way round.
  const bool kgroup_leaves = GENERATE(false, true);
  CAPTURE(kgroup_leaves);
  if (kgroup_leaves) {
    a->stop();
    CHECK(a->poll_errors == 0);
    a->consumer.close(10s);
    CHECK(a->listener->owned().empty());
    CHECK(a->listener->lost_calls() == 0);
    CHECK(eventually([&] { return r->owned() == all; }, 30s));
    CHECK(r->lost_calls() == 0);
    r->stop();
    for (const auto& e : r->errors()) UNSCOPED_INFO("librdkafka: " << e);
    const auto overlaps = tl.overlaps();
    for (const auto& o : overlaps) UNSCOPED_INFO(o);
    CHECK(overlaps.empty());
    return;
  }
  // The librdkafka member leaves: kgroup takes everything.
  r->stop();
  CHECK(eventually([&] { return a->listener->owned() == all; }, 30s));
  // Nothing was committed: kgroup reads every partition from the start once it owns them all.
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 300;
      },
      30s));
  a->stop();
  CHECK(a->poll_errors == 0);
  a->consumer.close(10s);
  for (const auto& e : r->errors()) UNSCOPED_INFO("librdkafka: " << e);
  const auto overlaps = tl.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("kip848: the coordinator moves to another broker: members follow it without losing partitions",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  kip848_group group(3);  // the broker's session timeout
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("k", 6);
  mc.produce("k", 60);
  const auto all = kgroup::test::all_partitions("k", 6);
  mc.set_coordinator("g-kip848-move", 1);
  auto a = std::make_unique<reading_member>("a", kip848_config(mc, "g-kip848-move"), tl, seen_mutex, seen);
  auto b = std::make_unique<reading_member>("b", kip848_config(mc, "g-kip848-move"), tl, seen_mutex, seen);
  REQUIRE(eventually(
      [&] {
        return !a->listener->owned().empty() && !b->listener->owned().empty() &&
               a->listener->owned().size() + b->listener->owned().size() == 6 &&
               a->consumer.group_state() == "stable" && b->consumer.group_state() == "stable";
      },
      30s));
  const auto a_owned = a->listener->owned();
  const auto epoch_before = a->consumer.group_metadata().generation_id;

  mc.set_coordinator("g-kip848-move", 2);
  // Several heartbeat intervals: NOT_COORDINATOR, FindCoordinator, a full heartbeat to broker 2.
  std::this_thread::sleep_for(3s);
  CHECK(a->consumer.metrics().coordinator == 2);
  CHECK(b->consumer.metrics().coordinator == 2);
  CHECK(a->listener->owned() == a_owned);
  CHECK(a->listener->lost_calls() == 0);
  CHECK(b->listener->lost_calls() == 0);
  CHECK(a->consumer.group_metadata().generation_id >= epoch_before);

  // The new coordinator serves the group: a third member joins and gets a share.
  auto c = std::make_unique<reading_member>("c", kip848_config(mc, "g-kip848-move"), tl, seen_mutex, seen);
  CHECK(eventually(
      [&] {
        return !c->listener->owned().empty() &&
               a->listener->owned().size() + b->listener->owned().size() + c->listener->owned().size() == 6;
      },
      30s));
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 60;
      },
      20s));
  for (auto* m : {a.get(), b.get(), c.get()}) {
    m->stop();
    CHECK(m->poll_errors == 0);
    m->consumer.close(10s);
  }
  const auto overlaps = tl.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("kip848: a cluster without ConsumerGroupHeartbeat fails poll() with a clear fatal error, no fallback",
          "[kip848]") {
  if (mock_cluster::modern()) {
    WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                                << "'s mock offers ConsumerGroupHeartbeat; run with librdkafka 2.0.2");
    return;
  }
  mock_cluster mc(1);
  mc.create_topic("k", 2);
  mc.produce("k", 10);
  kgroup::Consumer c(kip848_config(mc, "g-old"));
  c.subscribe({"k"});
  std::string error;
  std::size_t records = 0;
  const bool failed = eventually(
      [&] {
        try {
          records += c.poll(100ms).size();
        } catch (const kgroup::Error& e) {
          error = e.what();
          return true;
        }
        return false;
      },
      20s, 1ms);
  REQUIRE(failed);
  CHECK(error.find("group.protocol=consumer needs a broker with ConsumerGroupHeartbeat (KIP-848, Kafka 4.0+)") !=
        std::string::npos);
  CHECK(records == 0);
  CHECK(c.assignment().empty());
  // Sticky, as every fatal group error.
  CHECK_THROWS_AS(c.poll(10ms), kgroup::Error);
  const auto start = std::chrono::steady_clock::now();
  c.close(5s);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("kip848: subscribe(std::regex) is refused with group.protocol=consumer (the broker evaluates RE2/J)",
          "[kip848]") {
  mock_cluster mc(1);
  kgroup::Consumer c(kip848_config(mc, "g-re"));
  try {
    c.subscribe(std::regex("k.*"));
    FAIL("subscribe(std::regex) was accepted");
  } catch (const kgroup::Error& e) {
    CHECK(std::string(e.what()).find("RE2/J") != std::string::npos);
  }
  CHECK(c.subscription().empty());
  c.close(5s);
}

TEST_CASE("kip848: subscribe(SubscriptionPattern) sends the pattern to the broker, which picks the topics",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  kip848_group group(3);  // the broker's session timeout
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("re-a", 3);
  mc.create_topic("re-b", 2);
  mc.create_topic("other", 2);
  mc.produce("re-a", 30);
  mc.produce("re-b", 20);
  mc.produce("other", 20);
  // Matches the whole name as RE2/J does on a broker (the mock's matcher is unanchored).
  auto a = std::make_unique<reading_member>("a", kip848_config(mc, "g-kip848-re"), tl, seen_mutex, seen,
                                            kgroup::SubscriptionPattern("re-.*"));
  auto expected = kgroup::test::all_partitions("re-a", 3);
  for (const auto& tp : kgroup::test::all_partitions("re-b", 2)) expected.insert(tp);
  CHECK(eventually([&] { return a->listener->owned() == expected; }, 30s));
  CHECK(eventually(
      [&] {
        const auto n = a->per_topic();
        return n.count("re-a") != 0 && n.at("re-a") >= 30 && n.count("re-b") != 0 && n.at("re-b") >= 20;
      },
      30s));
  a->stop();
  const auto n = a->per_topic();
  CHECK(n.count("other") == 0);
  CHECK(a->consumer.subscription() == std::vector<std::string>{"re-a", "re-b"});
  CHECK(a->poll_errors == 0);
  INFO(a->first_error);
  a->consumer.close(10s);
}

TEST_CASE("kip848: subscribe(SubscriptionPattern) is refused with group.protocol=classic and for an empty pattern",
          "[kip848]") {
  mock_cluster mc(1);
  auto classic = kip848_config(mc, "g-re-classic");
  classic.set("group.protocol", "classic");
  kgroup::Consumer c(classic);
  try {
    c.subscribe(kgroup::SubscriptionPattern("k.*"));
    FAIL("a broker pattern was accepted with group.protocol=classic");
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == kgroup::make_error_code(kgroup::client_errc::invalid_argument));
    CHECK(std::string(e.what()).find("group.protocol=consumer") != std::string::npos);
  }
  CHECK(c.subscription().empty());
  c.close(5s);
  kgroup::Consumer k(kip848_config(mc, "g-re-empty"));
  CHECK_THROWS_AS(k.subscribe(kgroup::SubscriptionPattern("")), kgroup::Error);
  CHECK(k.subscription().empty());
  k.close(5s);
}

TEST_CASE("kip848: every broker goes down for a while: members keep their partitions, read every record after, no overlaps",
          "[kip848]") {
  if (skipped_without_kip848()) return;
  kip848_group group(3);  // an outage shorter than the session
  auto& [mc, tl, seen_mutex, seen] = group;
  mc.create_topic("k", 6);
  mc.produce("k", 60);
  const auto all = kgroup::test::all_partitions("k", 6);
  auto a = std::make_unique<reading_member>("a", kip848_config(mc, "g-kip848-outage"), tl, seen_mutex, seen);
  auto b = std::make_unique<reading_member>("b", kip848_config(mc, "g-kip848-outage"), tl, seen_mutex, seen);
  REQUIRE(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 60 && a->listener->owned().size() + b->listener->owned().size() == 6 &&
               !a->listener->owned().empty() && !b->listener->owned().empty();
      },
      30s));
  const auto a_owned = a->listener->owned();
  const auto b_owned = b->listener->owned();

  mc.broker_down(-1);
  std::this_thread::sleep_for(4s);  // heartbeats and fetches fail for eight heartbeat intervals
  mc.broker_up(-1);
  mc.produce("k", 60);
  CHECK(eventually(
      [&] {
        std::lock_guard lock(seen_mutex);
        return seen.size() >= 120;
      },
      30s));
  // The session outlived the outage: nobody lost anything, nothing moved.
  CHECK(a->listener->lost_calls() == 0);
  CHECK(b->listener->lost_calls() == 0);
  CHECK(a->listener->owned() == a_owned);
  CHECK(b->listener->owned() == b_owned);
  for (auto* m : {a.get(), b.get()}) {
    m->stop();
    INFO(m->name << ": " << m->first_error);
    CHECK(m->poll_errors == 0);
    m->consumer.close(10s);
  }
  {
    std::lock_guard lock(seen_mutex);
    CHECK(seen.size() == 120);
  }
  const auto overlaps = tl.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

TEST_CASE("kip848: member ids are random UUIDs in Kafka's base64url form (KIP-1082)", "[kip848]") {
  std::set<std::string> ids;
  for (int i = 0; i < 2000; ++i) {
    const auto id = kgroup::net::make_member_id();
    REQUIRE(id.size() == 22);  // 16 bytes, base64 without padding
    CHECK(id.front() != '-');
    CHECK(id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
          std::string::npos);
    ids.insert(id);
  }
  CHECK(ids.size() == 2000);
}
