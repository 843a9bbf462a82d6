// Manual partition assignment (assign()/unassign()): no group membership, commits through the
// coordinator with generation -1, exclusion with subscribe(), missing partitions reported.
#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"

using namespace std::chrono_literals;

namespace {

kgroup::Config manual_config(const kgroup::test::mock_cluster& mc, const std::string& group = "") {
  kgroup::Config cfg{{"bootstrap.servers", mc.bootstrap_servers()},
                     {"auto.offset.reset", "earliest"},
                     {"enable.auto.commit", "false"},
                     {"session.timeout.ms", "6000"},
                     {"heartbeat.interval.ms", "500"}};
  if (!group.empty()) cfg.set("group.id", group);
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
