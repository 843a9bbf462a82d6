// Manual partition assignment (assign()/unassign()): no group membership, commits through the
// coordinator with generation -1, exclusion with subscribe(), missing partitions reported.
#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;

namespace {

kgroup::Config manual_config(const kgroup::test::mock_cluster& mc, const std::string& group = "") {
  auto cfg = kgroup::test::test_config(mc.bootstrap_servers()).earliest().manual_commit().short_session();
  if (!group.empty()) cfg.group(group);
  return cfg;
}

std::map<kgroup::TopicPartition, std::vector<std::int64_t>> read(kgroup::Consumer& c, std::size_t want,
                                                                  std::chrono::milliseconds limit) {
  std::map<kgroup::TopicPartition, std::vector<std::int64_t>> seen;
  std::size_t n = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (n < want && std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : c.poll(100ms)) {
      seen[{std::string(r.topic), r.partition}].push_back(r.offset);
      ++n;
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("assign() consumes exactly the named partitions without joining a group", "[manual]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 4);
  mc.produce("t", 400);  // 100 per partition
  kgroup::Consumer c(manual_config(mc));  // no group.id at all
  c.assign({{"t", 1}, {"t", 3}});
  CHECK(c.assignment() == std::set<kgroup::TopicPartition>{{"t", 1}, {"t", 3}});
  auto seen = read(c, 200, 20s);
  CHECK(seen.size() == 2);
  CHECK(seen[{"t", 1}].size() == 100);
  CHECK(seen[{"t", 3}].size() == 100);
  CHECK(c.group_state() == "unsubscribed");
  CHECK(c.group_metadata().member_id.empty());
  CHECK(c.position({"t", 1}) == 100);
  // Without a group.id, commits are an error that says why.
  CHECK_THROWS_WITH(c.commit_sync(), Catch::Contains("group.id"));
  // subscribe() is refused while assigned, and needs a group.id anyway.
  CHECK_THROWS_WITH(c.subscribe({"t"}), Catch::Contains("exclude each other"));
  c.unassign();
  CHECK(c.assignment().empty());
  CHECK_THROWS_WITH(c.subscribe({"t"}), Catch::Contains("group.id"));
  c.close(5s);
}

TEST_CASE("two consumers assigned the same partition both receive its records", "[manual]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 100, "none", 0);
  kgroup::Consumer a(manual_config(mc, "shared-group"));
  kgroup::Consumer b(manual_config(mc, "shared-group"));
  a.assign({{"t", 0}});
  b.assign({{"t", 0}});
  auto sa = read(a, 100, 20s);
  auto sb = read(b, 100, 20s);
  CHECK(sa[{"t", 0}].size() == 100);
  CHECK(sb[{"t", 0}].size() == 100);
  a.close(5s);
  b.close(5s);
}

TEST_CASE("commits of a manual consumer are seen by a later subscribe() member of the group", "[manual]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 2);
  mc.produce("t", 200);  // 100 per partition
  {
    kgroup::Consumer m(manual_config(mc, "g-manual"));
    m.assign({{"t", 0}, {"t", 1}});
    auto seen = read(m, 200, 20s);
    REQUIRE(seen[{"t", 0}].size() == 100);
    m.seek({"t", 0}, 60);  // pretend the work up to 60 on partition 0 is done
    m.commit_sync({{{"t", 0}, {60, "manual", std::nullopt}}, {{"t", 1}, {100, "", std::nullopt}}});
    auto committed = m.committed({{"t", 0}, {"t", 1}});
    CHECK(committed.at({"t", 0}).offset == 60);
    CHECK(committed.at({"t", 0}).metadata == "manual");
    CHECK(committed.at({"t", 1}).offset == 100);
    // assign() and subscribe() exclude each other.
    CHECK_THROWS_AS(m.subscribe({"t"}), kgroup::Error);
    m.close(5s);
  }
  kgroup::Consumer g(manual_config(mc, "g-manual"));
  g.subscribe({"t"});
  auto seen = read(g, 40, 30s);
  REQUIRE(seen[{"t", 0}].size() == 40);
  CHECK(seen[{"t", 0}].front() == 60);
  CHECK(seen[{"t", 1}].empty());
  CHECK_THROWS_WITH(g.assign({{"t", 0}}), Catch::Contains("exclude each other"));
  g.close(5s);
}

TEST_CASE("a manually assigned partition that is not in the metadata is reported by poll()", "[manual]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  kgroup::Consumer c(manual_config(mc));
  c.assign({{"t", 0}, {"t", 7}});
  std::error_code code;
  std::string message;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!code && std::chrono::steady_clock::now() < deadline) {
    try {
      c.poll(100ms);
    } catch (const kgroup::Error& e) {
      code = e.code();
      message = e.what();
    }
  }
  CHECK(code == make_error_code(kgroup::client_errc::partition_not_found));
  CHECK_THAT(message, Catch::Contains("t-7"));
  c.close(5s);
}

TEST_CASE("committed() and commits without a subscription find the coordinator, and find it again after it moves",
          "[manual]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 2);
  mc.produce("t", 20);
  mc.set_coordinator("g-standalone", 1);
  // Neither subscribe() nor assign(): committed() and commit_sync() still work (as in Java).
  kgroup::Consumer c(manual_config(mc, "g-standalone"));
  c.commit_sync({{{"t", 0}, {5, "", std::nullopt}}});
  CHECK(c.committed({{"t", 0}}).at({"t", 0}).offset == 5);
  // Manual assignment; then the coordinator moves to another broker.
  c.assign({{"t", 0}, {"t", 1}});
  auto seen = read(c, 15, 20s);  // partition 0 starts at its committed offset 5
  CHECK(seen[{"t", 0}].front() == 5);
  mc.set_coordinator("g-standalone", 2);
  c.commit_sync({{{"t", 0}, {7, "", std::nullopt}}, {{"t", 1}, {3, "", std::nullopt}}});
  const auto committed = c.committed({{"t", 0}, {"t", 1}});
  CHECK(committed.at({"t", 0}).offset == 7);
  CHECK(committed.at({"t", 1}).offset == 3);
  c.close(5s);
}

// Issue 30, item 3: seek() and pause() of a partition not assigned created position entries that
// survived into the later assignment: the partition stayed paused (or at the stale seek) and
// commit_sync() committed a partition the consumer never owned. Java throws IllegalStateException.
TEST_CASE("seek(), pause() and resume() of a partition not assigned throw illegal_state and leave no trace",
          "[manual]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 100);  // 50 per partition
  kgroup::Consumer c(manual_config(mc, "g-unowned"));
  c.assign({{"t", 0}});
  const auto illegal = kgroup::make_error_code(kgroup::client_errc::illegal_state);
  auto code_of = [](auto&& call) {
    try {
      call();
    } catch (const kgroup::Error& e) {
      return e.code();
    }
    return std::error_code{};
  };
  CHECK(code_of([&] { c.seek({"t", 1}, 7); }) == illegal);
  CHECK(code_of([&] { c.pause({{"t", 1}}); }) == illegal);
  CHECK(code_of([&] { c.resume({{"t", 1}}); }) == illegal);
  CHECK(code_of([&] { c.seek_to_beginning({{"t", 1}}); }) == illegal);
  CHECK(code_of([&] { c.seek_to_end({{"t", 1}}); }) == illegal);
  CHECK(c.paused().empty());
  auto seen = read(c, 50, 20s);
  REQUIRE(seen[{"t", 0}].size() == 50);
  // What commit_sync() commits: only the owned partition's position.
  c.commit_sync();
  auto committed = c.committed({{"t", 0}, {"t", 1}});
  CHECK(committed.at({"t", 0}).offset == 50);
  CHECK_FALSE(committed.count({"t", 1}));
  // Once assigned, the partition starts where a fresh one starts (no stale seek, not paused).
  c.assign({{"t", 0}, {"t", 1}});
  seen = read(c, 50, 20s);
  REQUIRE(seen[{"t", 1}].size() == 50);
  CHECK(seen[{"t", 1}].front() == 0);
  c.close(5s);
}

// Issue 30, item 3: as Java, seek_to_beginning({}) and seek_to_end({}) mean every assigned
// partition (they did nothing).
TEST_CASE("seek_to_beginning() and seek_to_end() with no partitions mean every assigned partition", "[manual]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 40);  // 20 per partition
  kgroup::Consumer c(manual_config(mc));
  c.assign({{"t", 0}, {"t", 1}});
  auto seen = read(c, 40, 20s);
  REQUIRE(seen[{"t", 0}].size() == 20);
  REQUIRE(seen[{"t", 1}].size() == 20);
  c.seek_to_beginning({});
  seen = read(c, 40, 20s);
  CHECK(seen[{"t", 0}].size() == 20);
  CHECK(seen[{"t", 1}].size() == 20);
  CHECK(c.position({"t", 0}) == 20);
  c.seek({"t", 0}, 3);
  c.seek({"t", 1}, 4);
  c.seek_to_end({});
  CHECK(c.position({"t", 0}) == 20);
  CHECK(c.position({"t", 1}) == 20);
  c.close(5s);
}

// Issue 30, item 5: with assign() and enable.auto.commit, close() and a narrower assign() commit
// nothing; Java auto-commits the positions then.
TEST_CASE("a manual consumer with auto-commit commits its positions on close() and when assign() drops partitions",
          "[manual]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 40);  // 20 per partition
  auto cfg = manual_config(mc, "g-manual-auto");
  cfg.set("enable.auto.commit", "true");
  cfg.set("auto.commit.interval.ms", "60000");  // the periodic commit never comes in this test
  cfg.set("max.poll.records", "10");
  kgroup::OffsetMap reported;  // what set_auto_commit_callback() was told was committed
  {
    kgroup::Consumer c(cfg);
    c.set_auto_commit_callback([&](const kgroup::OffsetMap& offsets, std::error_code ec) {
      CHECK(!ec);
      for (const auto& [tp, om] : offsets) reported[tp] = om;
    });
    c.assign({{"t", 0}, {"t", 1}});
    auto seen = read(c, 40, 20s);
    REQUIRE(seen[{"t", 1}].size() == 20);
    REQUIRE(seen[{"t", 0}].size() == 20);
    c.seek({"t", 1}, 15);
    c.assign({{"t", 0}});  // drops t-1: its position (15) is committed
    c.seek({"t", 0}, 10);
    c.close(5s);  // t-0's position (10) is committed
  }
  // Both auto-commits were reported: the one assign() sent without waiting (inside close()) and
  // close()'s own.
  REQUIRE(reported.count({"t", 0}));
  REQUIRE(reported.count({"t", 1}));
  CHECK(reported.at({"t", 0}).offset == 10);
  CHECK(reported.at({"t", 1}).offset == 15);
  kgroup::Consumer check(manual_config(mc, "g-manual-auto"));
  auto committed = check.committed({{"t", 0}, {"t", 1}});
  REQUIRE(committed.count({"t", 0}));
  REQUIRE(committed.count({"t", 1}));
  CHECK(committed.at({"t", 0}).offset == 10);
  CHECK(committed.at({"t", 1}).offset == 15);
  check.close(5s);
}

TEST_CASE("a reset whose leader's broker is down follows the leader when it moves to another broker",
          "[manual]") {
  // Found by kgroup-sim's broker crashes (session 29): a ListOffsets that failed on its connection
  // was retried against the same broker with the same metadata, so a partition waiting for its
  // reset while its leader's broker was gone for good stayed there until metadata.max.age.ms
  // refreshed the metadata (5 minutes by default). Java asks for fresh metadata on a disconnect,
  // as kgroup's Fetch and OffsetForLeaderEpoch already did.
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 1);
  mc.set_partition_leader("t", 0, 1);
  mc.produce("t", 50, "none", 0);
  mc.broker_down(1);
  kgroup::Config cfg = kgroup::test::test_config(mc.bootstrap_servers())
                           .earliest()
                           .manual_commit()
                           .set("metadata.max.age.ms", "300000");
  kgroup::Consumer c(cfg);
  c.assign({{"t", 0}});
  // The consumer's metadata names broker 1, which refuses connections: nothing can be read.
  CHECK(read(c, 1, 2s).empty());
  mc.set_partition_leader("t", 0, 2);
  auto seen = read(c, 50, 20s);
  CHECK(seen[{"t", 0}].size() == 50);
  c.close(5s);
}
