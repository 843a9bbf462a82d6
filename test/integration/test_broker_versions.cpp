// The protocol versions of newer brokers: flexible versions end to end against librdkafka
// 2.15.1's mock cluster, and the version floors of Kafka 4.0 (KIP-896) on both clusters.
//
// [modern] cases need the flexible cluster: ctest runs them only in the "@2.15" entries (the
// process loads librdkafka 2.15.1 through LD_LIBRARY_PATH, see test/CMakeLists.txt). Run by hand
// with `LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests "[modern]"`.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "group_harness.hpp"
#include "kgroup/cluster.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::eventually;
using kgroup::test::mock_cluster;
using kgroup::test::test_config;

namespace {

kgroup::Config member_config(const mock_cluster& mc, const std::string& group) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .short_session()
      .earliest()
      .manual_commit()
      .retry_backoff(50ms);
}

// Joins, reads all `expected` records of `topic`, commits them and closes (LeaveGroup); returns
// the member's metrics just before close() and checks what was read.
kgroup::ConsumerMetrics consume_all(const mock_cluster& mc, const std::string& group,
                                    const std::string& topic, std::int64_t expected) {
  kgroup::Consumer c(member_config(mc, group));
  c.subscribe({topic});
  std::set<std::pair<std::int32_t, std::int64_t>> seen;
  std::size_t bad_values = 0;
  const bool all = eventually(
      [&] {
        for (const auto& r : c.poll(100ms)) {
          seen.emplace(r.partition, r.offset);
          const std::string key(r.key.value_or(""));
          if (std::string(r.value.value_or("")) != kgroup::test::expected_value(key, 100)) ++bad_values;
        }
        return static_cast<std::int64_t>(seen.size()) >= expected;
      },
      60s, 1ms);
  CHECK(all);
  CHECK(static_cast<std::int64_t>(seen.size()) == expected);
  CHECK(bad_values == 0);
  c.commit_sync();
  auto m = c.metrics();
  c.close(10s);
  return m;
}

}  // namespace

TEST_CASE("flexible versions are negotiated with librdkafka 2.15's mock (only its own faults capped)",
          "[modern]") {
  REQUIRE(mock_cluster::modern());
  mock_cluster mc(1);
  mc.create_topic("t", 2);
  const auto info =
      kgroup::describe_cluster(kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()}}, 10s);
  REQUIRE(info.brokers.size() == 1);
  std::map<std::string, std::int16_t> chosen;
  for (const auto& v : info.brokers[0].api_versions) chosen[v.name] = v.chosen;
  // The mock's own ranges (src/rdkafka_mock_handlers.c), less the four caps of mock_cluster.
  CHECK(chosen["Metadata"] == 12);
  CHECK(chosen["FindCoordinator"] == 3);
  CHECK(chosen["JoinGroup"] == 5);   // capped: the mock misreads v6
  CHECK(chosen["SyncGroup"] == 3);   // capped: the mock misreads v4
  CHECK(chosen["LeaveGroup"] == 2);  // capped: the mock misreads v3-4
  CHECK(chosen["Heartbeat"] == 4);
  CHECK(chosen["OffsetCommit"] == 9);
  CHECK(chosen["OffsetFetch"] == 4);  // capped: the mock answers v5-6 with a wrong committed epoch
  CHECK(chosen["ListOffsets"] == 7);
  CHECK(chosen["Fetch"] == 16);
}

TEST_CASE("a member joins, consumes every record, commits and leaves on librdkafka 2.15's mock", "[modern]") {
  // The scenario of issue 14: kgroup never joined this cluster before (JoinGroup v6), rejected
  // every Metadata v12 answer (its extra byte) and failed its LeaveGroup.
  REQUIRE(mock_cluster::modern());
  mock_cluster mc(3);
  mc.create_topic("orders", 6);
  mc.produce("orders", 1000);
  const auto m = consume_all(mc, "g-modern", "orders", 1000);
  CHECK(m.assigned_partitions == 6);
  // The mock ends every flexible Metadata answer with one byte too many: read, counted, kept.
  CHECK(m.responses_with_trailing_bytes_total > 0);

  // The commits (flexible OffsetCommit) hold, and the leave was clean: a second member takes
  // every partition from the committed offsets and reads nothing again.
  kgroup::Consumer next(member_config(mc, "g-modern"));
  std::set<kgroup::TopicPartition> all;
  for (std::int32_t p = 0; p < 6; ++p) all.insert({"orders", p});
  const auto committed = next.committed(all);
  std::int64_t total = 0;
  for (const auto& [tp, om] : committed) total += om.offset;
  CHECK(total == 1000);
  next.subscribe({"orders"});
  std::size_t again = 0;
  CHECK(eventually(
      [&] {
        again += next.poll(100ms).size();
        return next.group_state() == "stable" && next.assignment().size() == 6;
      },
      30s, 1ms));
  again += next.poll(500ms).size();
  CHECK(again == 0);
  next.close(10s);
}

TEST_CASE("a member works when brokers offer only the versions Kafka 4.0 still accepts (KIP-896)",
          "[group]") {
  // Kafka 4.0 removed the oldest versions of several APIs (KIP-896; 4.0.1 restored JoinGroup
  // v0-1, 4.0.0 refused them). Each API's minimum is raised to that floor on this mock; its
  // maximum stays what the mock offers (2.0.2 and 2.15.1 differ, the caps of mock_cluster kept).
  mock_cluster mc(1);
  const bool modern = mock_cluster::modern();
  struct floor {
    std::int16_t api_key, min, max_202, max_215;
  };
  const floor floors[] = {
      {11, 2, 5, 5},   // JoinGroup: v0-1 removed in 4.0.0
      {8, 2, 7, 9},    // OffsetCommit: v0-1
      {9, 1, 5, 4},    // OffsetFetch: v0 (2.15.1: v5-6 capped, see mock_cluster::version_caps)
      {2, 1, 3, 7},    // ListOffsets: v0 (2.0.2: v4-5 capped, see mock_cluster::version_caps)
      {1, 4, 11, 16},  // Fetch: v0-3
  };
  for (const auto& f : floors) mc.set_api_version(f.api_key, f.min, modern ? f.max_215 : f.max_202);
  const auto info =
      kgroup::describe_cluster(kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()}}, 10s);
  REQUIRE(info.brokers.size() == 1);
  for (const auto& v : info.brokers[0].api_versions) {
    for (const auto& f : floors) {
      if (v.api_key == f.api_key) {
        CHECK(v.broker_min == f.min);
        CHECK(v.chosen >= f.min);
      }
    }
  }
  mc.create_topic("t", 3);
  mc.produce("t", 300);
  const auto m = consume_all(mc, "g-kip896", "t", 300);
  CHECK(m.assigned_partitions == 3);
  kgroup::Consumer check(member_config(mc, "g-kip896"));
  std::int64_t total = 0;
  for (const auto& [tp, om] : check.committed({{"t", 0}, {"t", 1}, {"t", 2}})) total += om.offset;
  CHECK(total == 300);
  check.close(5s);
}

TEST_CASE(
    "positions are validated after leader changes and nothing is skipped or read twice (librdkafka 2.15's "
    "mock)",
    "[modern]") {
  // The second cluster's Metadata (v12) has leader epochs and its OffsetForLeaderEpoch (v2)
  // answers validations (KIP-320). Its OffsetFetch v5-6 would return the partition's current epoch
  // as the committed one (capped to v4 by mock_cluster), so committed offsets come back without
  // an epoch here; the fake leader of test_data_safety.cpp covers committed epochs.
  REQUIRE(mock_cluster::modern());
  mock_cluster mc(3);
  mc.create_topic("ep", 2);
  mc.produce("ep", 200);
  consume_all(mc, "g-epochs", "ep", 200);
  mc.produce("ep", 200);

  kgroup::Consumer next(member_config(mc, "g-epochs"));
  const auto committed = next.committed({{"ep", 0}, {"ep", 1}});
  REQUIRE(committed.size() == 2);
  next.assign({{"ep", 0}, {"ep", 1}});
  std::set<std::pair<std::int32_t, std::int64_t>> seen;
  auto read_until = [&](std::size_t n) {
    return eventually(
        [&] {
          for (const auto& r : next.poll(100ms)) seen.emplace(r.partition, r.offset);
          return seen.size() >= n;
        },
        30s, 1ms);
  };
  CHECK(read_until(200));
  // A leader change while reading: the position (with the epoch of its last record) is validated
  // with the new leader, which has the whole log.
  mc.set_partition_leader("ep", 0, 3);
  mc.set_partition_leader("ep", 1, 3);
  mc.produce("ep", 200);
  CHECK(read_until(400));
  next.poll(300ms);
  CHECK(seen.size() == 400);  // the last 400, each once: none skipped, none read again
  for (const auto& [p, offset] : seen) CHECK(offset >= committed.at({"ep", p}).offset);
  const auto m = next.metrics();
  CHECK(m.offset_validations_total >= 2);
  CHECK(m.log_truncations_total == 0);
  next.close(5s);
}

TEST_CASE(
    "a topic deleted and created again under its name is read from the new topic's start, never from the old "
    "topic's position (KIP-516, librdkafka 2.15's mock)",
    "[modern]") {
  REQUIRE(mock_cluster::modern());
  mock_cluster mc(1);
  mc.create_topic("recreated", 1);
  mc.produce("recreated", 100, "none", 0);
  kgroup::Config config;
  SECTION("classic group") {
    config = member_config(mc, "g-recreated");
  }
  SECTION("KIP-848 group: its assignment names topics by id") {
    REQUIRE(mc.set_consumer_group_timers(500, 45000));
    config = test_config(mc.bootstrap_servers())
                 .group("g-recreated-848")
                 .set("group.protocol", "consumer")
                 .earliest()
                 .manual_commit()
                 .retry_backoff(50ms);
  }
  kgroup::Consumer c(config);
  c.subscribe({"recreated"});
  std::int64_t old_read = 0;
  REQUIRE(eventually(
      [&] {
        old_read += static_cast<std::int64_t>(c.poll(100ms).size());
        return old_read >= 100;
      },
      30s, 1ms));
  c.commit_sync();
  const kgroup::TopicPartition tp{"recreated", 0};
  REQUIRE(c.position(tp) == 100);

  // Deleted and created again at once (the member never sees it missing), with more records than
  // the old position: fetching on from 100 would return 100-149 of the new topic and skip 0-99.
  REQUIRE(mc.delete_topic("recreated"));
  mc.create_topic("recreated", 1);
  std::vector<mock_cluster::seed_record> fresh;
  for (int i = 0; i < 150; ++i) fresh.push_back({std::string("k"), "new-" + std::to_string(i), {}, 0});
  mc.produce_records("recreated", 0, fresh);

  std::vector<std::pair<std::int64_t, std::string>> got;
  eventually(
      [&] {
        for (const auto& r : c.poll(100ms)) got.emplace_back(r.offset, std::string(r.value.value_or("")));
        return got.size() >= 150;
      },
      30s, 1ms);
  REQUIRE(got.size() == 150);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(i);
    CHECK(got[i].first == static_cast<std::int64_t>(i));
    CHECK(got[i].second == "new-" + std::to_string(i));
  }
  CHECK(c.metrics().topic_recreations_total == 1);
  // The commit is the new topic's position, not the old one's.
  c.commit_sync();
  CHECK(c.committed({tp}).at(tp).offset == 150);
  c.close(10s);
}
