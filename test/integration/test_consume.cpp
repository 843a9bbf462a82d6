// The data path against the mock cluster: every seeded record consumed once, in order, in every
// codec; commits and restarts; seek, pause, resume; offset reset policies.
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::test_config;

namespace {

kgroup::Config consumer_config(const kgroup::test::mock_cluster& mc, const std::string& group) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .short_session()
      .earliest()
      .manual_commit()
      .retry_backoff(50ms);
}

struct seen_records {
  std::map<kgroup::TopicPartition, std::vector<std::int64_t>> offsets;
  std::size_t total = 0;
  std::size_t bad_content = 0;
};

// Polls until `want` records arrived or `limit` passed, checking each record's content.
void consume(kgroup::Consumer& c, seen_records& seen, std::size_t want, std::chrono::milliseconds limit,
             std::size_t value_size = 100) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (seen.total < want && std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : c.poll(100ms)) {
      seen.offsets[{std::string(r.topic), r.partition}].push_back(r.offset);
      ++seen.total;
      const std::string key = kgroup::test::record_key(r.topic, r.partition, r.offset);
      if (!r.key || *r.key != key || !r.value || *r.value != kgroup::test::expected_value(key, value_size)) {
        ++seen.bad_content;
      }
    }
  }
}

}  // namespace

TEST_CASE("one consumer reads every seeded record exactly once, in order, in each codec", "[consume]") {
  const std::string codec = GENERATE("none", "gzip", "snappy", "lz4", "zstd");
  INFO("codec " << codec);
  kgroup::test::mock_cluster mc(3);
  const std::string topic = "data-" + codec;
  constexpr int partitions = 6;
  constexpr std::int64_t records = 6000;
  mc.create_topic(topic, partitions);
  const auto per_partition = mc.produce(topic, records, codec);
  kgroup::Consumer c(consumer_config(mc, "g-read-" + codec));
  c.subscribe({topic});
  seen_records seen;
  consume(c, seen, records, 30s);
  CHECK(seen.total == static_cast<std::size_t>(records));
  CHECK(seen.bad_content == 0);
  for (int p = 0; p < partitions; ++p) {
    const auto& offs = seen.offsets[{topic, p}];
    REQUIRE(offs.size() == static_cast<std::size_t>(per_partition[static_cast<std::size_t>(p)]));
    for (std::size_t i = 0; i < offs.size(); ++i) REQUIRE(offs[i] == static_cast<std::int64_t>(i));
    CHECK(c.position({topic, p}) == per_partition[static_cast<std::size_t>(p)]);
  }
  // Nothing more arrives.
  CHECK(c.poll(300ms).empty());
  c.close(5s);
}

// [no-tsan]: mostly waiting (a restart and a rejoin), little threading that the other cases do not cover.
TEST_CASE("commits survive a restart: the next member resumes after the committed offsets", "[consume][no-tsan]") {
  const std::string mode = GENERATE("sync", "async", "auto");
  INFO("commit mode " << mode);
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  mc.produce("orders", 2000);
  const std::string group = "g-commit-" + mode;
  seen_records first;
  std::map<int, std::int64_t> first_positions;
  {
    auto cfg = consumer_config(mc, group);
    if (mode == "auto") {
      cfg.set("enable.auto.commit", "true");
      cfg.set("auto.commit.interval.ms", "200");
    }
    kgroup::Consumer c(cfg);
    c.subscribe({"orders"});
    consume(c, first, 1000, 30s);
    REQUIRE(first.total >= 1000);
    kgroup::OffsetMap expected;
    if (mode == "sync") {
      for (int p = 0; p < 4; ++p) expected[{"orders", p}] = {c.position({"orders", p}), "", std::nullopt};
      c.commit_sync();
    } else if (mode == "async") {
      bool done = false;
      std::error_code result = make_error_code(kgroup::client_errc::illegal_state);
      c.commit_async([&](const kgroup::OffsetMap& offsets, std::error_code ec) {
        done = true;
        result = ec;
        expected = offsets;
      });
      // The callback runs inside a later poll(); pause so that poll() returns no more records.
      c.pause(c.assignment());
      for (int i = 0; i < 50 && !done; ++i) c.poll(50ms);
      REQUIRE(done);
      CHECK_FALSE(result);
      c.resume(c.assignment());
    }
    // auto: close() revokes, and auto-commit runs before the revoke.
    auto committed = c.committed({{"orders", 0}, {"orders", 1}, {"orders", 2}, {"orders", 3}});
    for (const auto& [tp, om] : expected) {
      REQUIRE(committed.count(tp) == 1);
      CHECK(committed.at(tp).offset == om.offset);
    }
    // What the second consumer must start from.
    for (int p = 0; p < 4; ++p) first_positions[p] = c.position({"orders", p});
    c.close(10s);
  }
  kgroup::Consumer c2(consumer_config(mc, group));
  c2.subscribe({"orders"});
  seen_records second;
  std::size_t remaining = 0;
  for (int p = 0; p < 4; ++p) remaining += static_cast<std::size_t>(500 - first_positions[p]);
  consume(c2, second, remaining, 30s);
  CHECK(second.total == remaining);
  // No gap: per partition, the second consumer starts exactly where the first one's position was
  // (sync/async commit it; auto commits it before the revoke in close()), and reads to the end.
  for (int p = 0; p < 4; ++p) {
    const auto& b = second.offsets[{"orders", p}];
    if (first_positions[p] == 500) {
      CHECK(b.empty());
    } else {
      REQUIRE_FALSE(b.empty());
      CHECK(b.front() == first_positions[p]);
      CHECK(b.back() == 499);
    }
  }
  c2.close(5s);
}

TEST_CASE("seek, pause and resume", "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 400);  // 200 per partition
  kgroup::Consumer c(consumer_config(mc, "g-seek"));
  c.subscribe({"t"});
  seen_records seen;
  consume(c, seen, 400, 30s);
  REQUIRE(seen.total == 400);

  c.seek({"t", 0}, 150);
  CHECK(c.position({"t", 0}) == 150);
  seen_records again;
  consume(c, again, 50, 10s);
  CHECK(again.total == 50);
  CHECK(again.offsets[{"t", 0}].front() == 150);

  c.pause({{"t", 1}});
  CHECK(c.paused() == std::set<kgroup::TopicPartition>{{"t", 1}});
  c.seek({"t", 1}, 0);
  seen_records paused;
  consume(c, paused, 1, 1s);
  CHECK(paused.offsets[{"t", 1}].empty());
  c.resume({{"t", 1}});
  seen_records resumed;
  consume(c, resumed, 200, 10s);
  CHECK(resumed.offsets[{"t", 1}].size() == 200);
  CHECK(resumed.offsets[{"t", 1}].front() == 0);

  c.seek_to_beginning({{"t", 0}});
  CHECK(c.position({"t", 0}) == 0);
  c.seek_to_end({{"t", 0}});
  CHECK(c.position({"t", 0}) == 200);
  c.close(5s);
}

TEST_CASE("auto.offset.reset: latest skips old records, none raises from poll()", "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 1);
  mc.produce("t", 100);
  SECTION("latest") {
    auto cfg = consumer_config(mc, "g-latest");
    cfg.set("auto.offset.reset", "latest");
    kgroup::Consumer c(cfg);
    c.subscribe({"t"});
    REQUIRE(kgroup::test::eventually(
        [&] {
          c.poll(50ms);
          return !c.assignment().empty();
        },
        20s));
    CHECK(c.position({"t", 0}) == 100);
    mc.produce("t", 10);
    seen_records seen;
    consume(c, seen, 10, 10s);
    CHECK(seen.total == 10);
    CHECK(seen.offsets[{"t", 0}].front() == 100);
    c.close(5s);
  }
  SECTION("none") {
    auto cfg = consumer_config(mc, "g-none");
    cfg.set("auto.offset.reset", "none");
    kgroup::Consumer c(cfg);
    c.subscribe({"t"});
    std::error_code code;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!code && std::chrono::steady_clock::now() < deadline) {
      try {
        c.poll(100ms);
      } catch (const kgroup::Error& e) {
        code = e.code();
      }
    }
    CHECK(code == make_error_code(kgroup::client_errc::offset_out_of_range));
    c.close(5s);
  }
}

TEST_CASE("a partition leader moving mid-consumption: fetching resumes at the same position", "[consume]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 3);
  mc.produce("t", 3000);  // 1000 per partition
  kgroup::Consumer c(consumer_config(mc, "g-leader"));
  c.subscribe({"t"});
  seen_records seen;
  consume(c, seen, 1200, 30s);
  REQUIRE(seen.total >= 1200);
  // Move every partition's leadership away from broker 1 and take broker 1 down.
  for (int p = 0; p < 3; ++p) mc.set_partition_leader("t", p, p == 2 ? 3 : 2);
  mc.broker_down(1);
  consume(c, seen, 3000, 60s);
  CHECK(seen.total == 3000);
  CHECK(seen.bad_content == 0);
  for (int p = 0; p < 3; ++p) {
    const auto& offs = seen.offsets[{"t", p}];
    REQUIRE(offs.size() == 1000);
    for (std::size_t i = 0; i < offs.size(); ++i) REQUIRE(offs[i] == static_cast<std::int64_t>(i));
  }
  mc.broker_up(1);
  c.close(10s);
}

// librdkafka's mock cluster keeps no fetch sessions (it echoes the request's session id, 0), so
// kgroup keeps sending full fetches there; the session errors still reach the fetcher when
// injected, and must only cost a full fetch.
TEST_CASE("Fetch session errors (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) only reset the session",
          "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("s", 2);
  mc.produce("s", 2000);
  kgroup::Consumer c(consumer_config(mc, "g-fetch-session"));
  c.subscribe({"s"});
  seen_records seen;
  consume(c, seen, 500, 30s);
  REQUIRE(seen.total >= 500);
  mc.push_request_errors(1, {70, 71, 70, 71});  // Fetch
  consume(c, seen, 2000, 30s);
  CHECK(seen.total == 2000);
  CHECK(seen.bad_content == 0);
  for (int p = 0; p < 2; ++p) {
    const auto& offs = seen.offsets[{"s", p}];
    REQUIRE(offs.size() == 1000);
    for (std::size_t i = 0; i < offs.size(); ++i) REQUIRE(offs[i] == static_cast<std::int64_t>(i));
  }
  c.close(5s);
}

namespace {

// Produces three transactions of `n` records each to partition 0 of `topic` through a librdkafka
// transactional producer: committed, aborted, committed. Values say which transaction they are in.
void produce_transactions(kgroup::test::mock_cluster& mc, const std::string& topic, int n) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  kgroup::test::apply_log_settings(conf);
  kgroup::test::set_config(conf, "bootstrap.servers", mc.bootstrap_servers());
  kgroup::test::set_config(conf, "transactional.id", "kgroup-test-txn");
  rd_kafka_t* p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  REQUIRE(p != nullptr);
  auto ok = [](rd_kafka_error_t* e) {
    if (e) {
      std::string m = rd_kafka_error_string(e);
      rd_kafka_error_destroy(e);
      FAIL("librdkafka transaction call failed: " << m);
    }
  };
  ok(rd_kafka_init_transactions(p, 10000));
  const char* kinds[] = {"committed-1", "aborted", "committed-2"};
  for (int t = 0; t < 3; ++t) {
    ok(rd_kafka_begin_transaction(p));
    for (int i = 0; i < n; ++i) {
      std::string v = kinds[t];
      REQUIRE(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
                                RD_KAFKA_V_VALUE(v.data(), v.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    // Deliver first: aborting purges messages still queued in the producer.
    REQUIRE(rd_kafka_flush(p, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR);
    if (t == 1) {
      ok(rd_kafka_abort_transaction(p, 10000));
    } else {
      ok(rd_kafka_commit_transaction(p, 10000));
    }
  }
  rd_kafka_destroy(p);
}

}  // namespace

// librdkafka's mock cluster (2.0.2) stores transactional data and markers but its Fetch reports no
// aborted transactions, so read_committed cannot drop aborted data there: the read_committed rule
// is tested on crafted batches in test/unit/test_txn_filter.cpp. Here: read_uncommitted returns the
// aborted data too, and control records never reach the application.
TEST_CASE("transactional data: read_uncommitted returns every data record and no control records", "[consume]") {
  const std::string level = "read_uncommitted";
  INFO("isolation.level " << level);
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("txn", 1);
  produce_transactions(mc, "txn", 10);
  auto cfg = consumer_config(mc, "g-txn-" + level);
  cfg.set("isolation.level", level);
  kgroup::Consumer c(cfg);
  c.subscribe({"txn"});
  std::map<std::string, int> by_value;
  std::int64_t last = -1;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : c.poll(100ms)) {
      REQUIRE(r.value);
      ++by_value[std::string(*r.value)];
      CHECK(r.offset > last);
      last = r.offset;
    }
    if (by_value["committed-2"] == 10) break;
  }
  CHECK(by_value["committed-1"] == 10);
  CHECK(by_value["committed-2"] == 10);
  CHECK(by_value["aborted"] == (level == "read_committed" ? 0 : 10));
  // Control records are never returned: only the 30 (or 20) data records arrived.
  std::size_t total = 0;
  for (const auto& [v, n] : by_value) total += static_cast<std::size_t>(n);
  CHECK(total == (level == "read_committed" ? 20u : 30u));
  c.close(5s);
}

namespace {

// Calls back into the consumer from its callbacks, as applications do.
struct committing_listener : kgroup::ConsumerRebalanceListener {
  kgroup::Consumer* c = nullptr;
  std::map<kgroup::TopicPartition, std::int64_t> positions_at_revoke;
  bool assignment_matched = true;
  bool positions_known = true;
  int assigned_calls = 0;
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& ps) override {
    for (const auto& tp : ps) positions_at_revoke[tp] = c->position(tp);
    c->commit_sync();  // covers the partitions being revoked
  }
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& ps) override {
    ++assigned_calls;
    const auto a = c->assignment();
    for (const auto& tp : ps) {
      if (!a.count(tp)) assignment_matched = false;
      if (c->position(tp) < 0) positions_known = false;
    }
  }
  void on_partitions_lost(const std::vector<kgroup::TopicPartition>&) override {}
};

}  // namespace

TEST_CASE("inside the listener: commit_sync() and position() cover revoked partitions; assignment() is current",
          "[consume]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  const auto per_partition = mc.produce("orders", 1000);
  auto cfg = consumer_config(mc, "g-listener-calls");
  // Cooperative: the revoke runs while the group is stable (the mock cluster, unlike Kafka, rejects
  // commits while a group prepares a rebalance, which is when an eager revoke runs).
  cfg.set("partition.assignment.strategy", "cooperative-sticky");
  kgroup::Consumer c1(cfg);
  auto l = std::make_shared<committing_listener>();
  l->c = &c1;
  c1.subscribe({"orders"}, l);
  seen_records seen;
  consume(c1, seen, 1000, 30s);
  REQUIRE(seen.total == 1000);
  CHECK(l->assigned_calls == 1);
  CHECK(l->assignment_matched);
  CHECK(l->positions_known);

  // A second member joins: c1 gives two partitions up and commits inside the callback.
  kgroup::Consumer c2(cfg);
  c2.subscribe({"orders"});
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until && (l->positions_at_revoke.empty() || c2.assignment().empty())) {
    c1.poll(50ms);
    c2.poll(50ms);
  }
  REQUIRE(l->positions_at_revoke.size() == 2);
  std::set<kgroup::TopicPartition> revoked;
  for (const auto& [tp, pos] : l->positions_at_revoke) {
    revoked.insert(tp);
    CHECK(pos == per_partition[static_cast<std::size_t>(tp.partition)]);
  }
  const auto committed = c2.committed(revoked);
  for (const auto& tp : revoked) {
    REQUIRE(committed.count(tp) == 1);
    CHECK(committed.at(tp).offset == per_partition[static_cast<std::size_t>(tp.partition)]);
  }
  CHECK(l->assignment_matched);
  CHECK(l->positions_known);
  // close() revokes the rest; the callback's commit_sync() still works inside close().
  c1.close(5s);
  CHECK(l->positions_at_revoke.size() == 4);
  std::set<kgroup::TopicPartition> all;
  for (int p = 0; p < 4; ++p) all.insert({"orders", p});
  const auto all_committed = c2.committed(all);
  for (const auto& tp : all) {
    REQUIRE(all_committed.count(tp) == 1);
    CHECK(all_committed.at(tp).offset == per_partition[static_cast<std::size_t>(tp.partition)]);
  }
  c2.close(5s);
}

TEST_CASE("auto-commit commits a poll's records only once the application polls again", "[consume]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 1);
  mc.produce("orders", 300);
  auto cfg = consumer_config(mc, "g-auto-commit-after-processing");
  cfg.set("enable.auto.commit", "true");
  cfg.set("auto.commit.interval.ms", "100");
  cfg.set("max.poll.records", "100");
  kgroup::Consumer c(cfg);
  c.subscribe({"orders"});
  const kgroup::TopicPartition tp{"orders", 0};
  std::size_t first = 0;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (first == 0 && std::chrono::steady_clock::now() < until) first = c.poll(100ms).size();
  REQUIRE(first > 0);
  // The application is still "processing" the batch: several auto-commit intervals pass.
  std::this_thread::sleep_for(600ms);
  auto committed = c.committed({tp});
  CHECK((committed.count(tp) == 0 || committed.at(tp).offset == 0));
  // The next poll() marks the batch as processed; the following auto-commit covers it.
  const auto second = c.poll(100ms).size();
  REQUIRE(kgroup::test::eventually(
      [&] {
        committed = c.committed({tp});
        return committed.count(tp) == 1 && committed.at(tp).offset > 0;
      },
      5s));
  CHECK(committed.at(tp).offset == static_cast<std::int64_t>(first));
  (void)second;
  c.close(5s);
}

TEST_CASE(
    "set_auto_commit_callback() reports every auto-commit: periodic ones, a failed one, the one before a "
    "revoke",
    "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 1);
  mc.produce("orders", 100);
  auto cfg = consumer_config(mc, "g-auto-commit-callback");
  cfg.set("enable.auto.commit", "true");
  cfg.set("auto.commit.interval.ms", "100");
  cfg.set("max.poll.records", "50");
  const kgroup::TopicPartition tp{"orders", 0};
  struct report {
    std::int64_t offset;
    std::error_code ec;
  };
  std::vector<report> reports;
  kgroup::Consumer c(cfg);
  c.set_auto_commit_callback([&](const kgroup::OffsetMap& offsets, std::error_code ec) {
    REQUIRE(offsets.size() == 1);  // one partition: every auto-commit is of it
    reports.push_back({offsets.begin()->second.offset, ec});
  });
  c.subscribe({"orders"});
  // Polls until a successful auto-commit of `offset` is reported (records polled on the way).
  std::size_t polled = 0;
  auto poll_until_reported = [&](std::int64_t offset) {
    return kgroup::test::eventually(
        [&] {
          polled += c.poll(50ms).size();
          return std::any_of(reports.begin(), reports.end(),
                             [&](const report& r) { return r.offset == offset && !r.ec; });
        },
        20s, 1ms);
  };
  REQUIRE(poll_until_reported(100));
  CHECK(polled == 100);
  for (std::size_t i = 0; i < reports.size(); ++i) {
    CHECK(!reports[i].ec);
    CHECK(reports[i].offset <= 100);
    if (i > 0) CHECK(reports[i].offset > reports[i - 1].offset);  // only changed positions are committed
  }
  auto committed = c.committed({tp});
  REQUIRE(committed.count(tp) == 1);
  CHECK(committed.at(tp).offset == 100);

  // The next periodic commit fails (not retried): the callback gets its error; the one after it
  // commits the newer position.
  const std::size_t before_failure = reports.size();
  mc.push_request_errors(8, {14});  // OffsetCommit: COORDINATOR_LOAD_IN_PROGRESS
  mc.produce("orders", 20);
  REQUIRE(poll_until_reported(120));
  REQUIRE(reports.size() > before_failure + 1);
  CHECK(reports[before_failure].ec == make_error_code(kgroup::kafka_errc::coordinator_load_in_progress));
  CHECK(reports[before_failure].offset > 100);
  CHECK(!reports.back().ec);

  // close() revokes: the auto-commit before the revoke is reported inside close(), with the
  // position after the last poll's records (processed once the partition is given back).
  mc.produce("orders", 10);
  REQUIRE(kgroup::test::eventually([&] { return (polled += c.poll(50ms).size()) == 130; }, 20s, 1ms));
  reports.clear();
  c.close(5s);
  REQUIRE(!reports.empty());
  CHECK(reports.back().offset == 130);
  CHECK(!reports.back().ec);
}

namespace {
// What the callback below sees, kept outside it (static): read and written inside the callback
// after it removed itself, without touching its own captures.
bool auto_commit_capture_destroyed = false;
int auto_commit_calls = 0;
bool auto_commit_alive_after_removal = false;
struct auto_commit_guard {
  ~auto_commit_guard() { auto_commit_capture_destroyed = true; }
};
}  // namespace

TEST_CASE("an auto-commit callback may remove itself while it runs", "[consume]") {
  // Found at review (session 32): the callback ran as the stored std::function, so removing it
  // from inside destroyed the function (and its captures) while it was still running.
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 1);
  mc.produce("orders", 10);
  auto cfg = consumer_config(mc, "g-auto-commit-callback-removed");
  cfg.set("enable.auto.commit", "true");
  cfg.set("auto.commit.interval.ms", "100");
  kgroup::Consumer c(cfg);
  static kgroup::Consumer* owner = nullptr;
  owner = &c;
  auto_commit_capture_destroyed = false;
  auto_commit_calls = 0;
  auto_commit_alive_after_removal = false;
  auto guard = std::make_shared<auto_commit_guard>();
  c.set_auto_commit_callback([guard](const kgroup::OffsetMap&, std::error_code) {
    ++auto_commit_calls;
    owner->set_auto_commit_callback(nullptr);  // one report is enough
    auto_commit_alive_after_removal = !auto_commit_capture_destroyed;
  });
  guard.reset();  // the callback's capture is the guard's only owner now
  c.subscribe({"orders"});
  REQUIRE(kgroup::test::eventually(
      [&] {
        c.poll(50ms);
        return auto_commit_calls > 0;
      },
      20s, 1ms));
  CHECK(auto_commit_alive_after_removal);
  CHECK(auto_commit_capture_destroyed);  // gone once the call returned
  c.close(5s);
  CHECK(auto_commit_calls == 1);
}

TEST_CASE("a batch by partition, owned copies that outlive it, current_lag(), and per-call timeouts", "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 2);
  mc.produce("t", 200);  // 100 per partition
  auto cfg = consumer_config(mc, "g-api");
  cfg.set("max.poll.records", "50");
  kgroup::Consumer c(cfg);
  c.assign({{"t", 0}, {"t", 1}});
  std::vector<kgroup::OwnedRecord> kept;
  std::size_t polled = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (polled < 60 && std::chrono::steady_clock::now() < deadline) {
    const auto batch = c.poll(100ms);
    polled += batch.size();
    std::size_t by_partition = 0;
    for (const auto& tp : batch.partitions()) {
      std::int64_t previous = -1;
      for (const kgroup::ConsumerRecord& r : batch.records(tp)) {
        CHECK(r.partition == tp.partition);
        CHECK(r.offset > previous);  // offset order within the partition
        previous = r.offset;
        ++by_partition;
      }
    }
    CHECK(by_partition == batch.size());
    for (const auto& r : batch) kept.push_back(r.owned());
  }  // every batch is gone here; the owned copies are not
  REQUIRE(kept.size() >= 60);
  for (const auto& r : kept) {
    const std::string key = kgroup::test::record_key(r.topic, r.partition, r.offset);
    CHECK(r.key == key);
    CHECK(r.value == kgroup::test::expected_value(key, 100));
    CHECK(r.topic == "t");
  }
  // Lag: what is left after the position, from the last fetched high watermark (100 each).
  for (std::int32_t p = 0; p < 2; ++p) {
    const kgroup::TopicPartition tp{"t", p};
    const auto lag = c.current_lag(tp);
    if (lag) CHECK(*lag == 100 - c.position(tp));
  }
  CHECK_FALSE(c.current_lag({"t", 7}).has_value());  // not owned

  // A per-call timeout bounds a call the coordinator cannot answer (default.api.timeout.ms is 60 s).
  mc.broker_down(1);  // the only broker: nobody answers
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(c.committed({{"t", 0}}, 500ms), kgroup::Error);
  CHECK_THROWS_AS(c.commit_sync(500ms), kgroup::Error);
  CHECK_THROWS_AS(c.end_offsets({{"t", 0}}, 500ms), kgroup::Error);
  CHECK(std::chrono::steady_clock::now() - started < 20s);
  mc.broker_up(1);
  c.close(5s);
}

// KIP-392: with client.rack set, Fetch v11+ carries the rack and the leader may name a replica to
// read from. librdkafka's mocks name the partition's follower whatever the rack, and serve
// fetches from it; a follower that stops following answers NOT_LEADER_OR_FOLLOWER.
TEST_CASE("client.rack: records are read from the replica the leader names, and from the leader when it fails",
          "[consume]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("t", 1);
  mc.set_partition_leader("t", 0, 1);
  mc.set_partition_follower("t", 0, 3);
  mc.produce("t", 500);
  auto cfg = consumer_config(mc, "g-rack");
  cfg.set("client.rack", "rack-3");
  kgroup::Consumer c(cfg);
  c.subscribe({"t"});
  seen_records seen;
  consume(c, seen, 500, 30s);
  REQUIRE(seen.total == 500);
  CHECK(seen.bad_content == 0);
  const auto read_replica = [&c] {
    const auto m = c.metrics();
    return m.partitions.size() == 1 ? m.partitions[0].read_replica : -2;
  };
  CHECK(read_replica() == 3);

  // The follower stops following: it answers NOT_LEADER_OR_FOLLOWER and the consumer goes back to
  // the leader, losing nothing and reading nothing twice.
  mc.set_partition_follower("t", 0, -1);
  mc.produce("t", 500);
  consume(c, seen, 1000, 30s);
  REQUIRE(seen.total == 1000);
  CHECK(seen.bad_content == 0);
  const auto& offs = seen.offsets[{"t", 0}];
  for (std::size_t i = 0; i < offs.size(); ++i) REQUIRE(offs[i] == static_cast<std::int64_t>(i));
  CHECK(read_replica() == 1);
  c.close(5s);
}

// A seek made while the consumer is still finding its starting position (the auto.offset.reset
// ListOffsets in flight) wins: the answer of the older request neither moves the fetcher nor the
// position poll() reads from. Found by kgroup-consume -o end, which read from the beginning, and
// -o N, which stalled. The delays sweep the window in which the first ListOffsets is in flight.
TEST_CASE("a seek while the initial offset reset is in flight wins over the reset's answer", "[consume]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("t", 1);
  mc.produce("t", 100);
  mc.set_rtt(-1, 150);
  const kgroup::TopicPartition tp{"t", 0};
  for (const int delay_ms : {0, 50, 150, 300, 450, 600}) {
    for (const bool to_end : {true, false}) {
      INFO("seek " << (to_end ? "to end" : "to 60") << " " << delay_ms << " ms after assign()");
      auto cfg = consumer_config(mc, "");
      kgroup::Consumer c(cfg);
      c.assign({tp});
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      if (to_end) {
        c.seek_to_end({tp});
      } else {
        c.seek(tp, 60);
      }
      std::vector<std::int64_t> got;
      const auto deadline = std::chrono::steady_clock::now() + (to_end ? 1500ms : 5s);
      while (std::chrono::steady_clock::now() < deadline && got.size() < 40) {
        for (const auto& r : c.poll(50ms)) got.push_back(r.offset);
      }
      if (to_end) {
        CHECK(got.empty());
        CHECK(c.position(tp) == 100);
      } else {
        REQUIRE(got.size() == 40);
        CHECK(got.front() == 60);
        CHECK(got.back() == 99);
      }
      c.close(2s);
    }
  }
}

TEST_CASE("a pattern subscription consumes the matching topics and picks up one created later", "[consume]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders-a", 2);
  mc.create_topic("orders-b", 2);
  mc.create_topic("other", 2);
  mc.produce("orders-a", 200);
  mc.produce("orders-b", 200);
  mc.produce("other", 200);
  auto cfg = consumer_config(mc, "g-pattern");
  cfg.set("metadata.max.age.ms", "500");  // the refresh that finds the new topic
  // The new topic changes the subscription: a rebalance, before which auto-commit commits what
  // was consumed, so nothing is read twice.
  cfg.set("enable.auto.commit", "true");
  kgroup::Consumer c(cfg);
  c.subscribe(std::regex("orders-.*"));
  seen_records seen;
  consume(c, seen, 400, 30s);
  CHECK(seen.total == 400);
  CHECK(seen.bad_content == 0);
  CHECK(c.subscription() == std::vector<std::string>{"orders-a", "orders-b"});

  mc.create_topic("orders-c", 2);
  mc.produce("orders-c", 100);
  consume(c, seen, 500, 30s);
  CHECK(seen.total == 500);
  CHECK(c.subscription() == std::vector<std::string>{"orders-a", "orders-b", "orders-c"});
  std::set<std::string> topics;
  for (const auto& [tp, offs] : seen.offsets) topics.insert(tp.topic);
  CHECK(topics == std::set<std::string>{"orders-a", "orders-b", "orders-c"});
  CHECK(c.poll(300ms).empty());
  c.close(5s);
}

TEST_CASE("full Fetch requests rotate partitions: with fetch.max.bytes below the backlog no partition starves",
          "[consume][fetch-rotation]") {
  // Issue 30 item 9. The mock keeps no fetch sessions (it echoes session id 0), so every Fetch is a
  // full one. It fills an answer in request order, one message set per listed partition, until
  // fetch.max.bytes is reached. Listing the partitions always sorted, the first two were served
  // until drained and the last ones waited behind them.
  kgroup::test::mock_cluster mc(1);  // one broker: one Fetch at a time, answers reach poll() in order
  const std::string topic = "rotate";
  constexpr int partitions = 60;
  // The seeding producer caps a batch at librdkafka's batch.size (1,000,000 bytes); two records of
  // this size do not fit, so every message set holds one record, and one answer of at most
  // fetch.max.bytes = 1 MiB carries two of them.
  constexpr std::size_t value_size = 520 * 1024;
  constexpr std::int64_t per_partition = 2;  // backlog: more than one answer's share per partition
  mc.create_topic(topic, partitions);
  const auto produced = mc.produce(topic, per_partition * partitions, "none", -1, value_size);
  for (const auto n : produced) REQUIRE(n == per_partition);

  kgroup::Consumer c(test_config(mc.bootstrap_servers())
                         .earliest()
                         .manual_commit()
                         .set("fetch.max.bytes", "1048576")  // max.partition.fetch.bytes: default (1 MiB)
                         .set("max.poll.records", "1")
                         .set("queued.max.messages.kbytes", "8192"));
  std::set<kgroup::TopicPartition> all;
  for (int p = 0; p < partitions; ++p) all.insert({topic, p});
  c.assign(all);  // no group: every position comes from one ListOffsets, so all start together

  // The bound. A partition whose answer carried records goes to the end of the next request, and
  // the broker serves the partitions with data in request order. So before partition P's first
  // records arrive no other partition is served twice: once served it is listed behind P, which
  // has backlog and is served first. With one record per message set, P's first record is among
  // the first `partitions` records polled, for every P: those are one record of each partition.
  // With max.poll.records = 1 that is one record per poll that returns records.
  const std::size_t bound = partitions;
  std::vector<std::size_t> first_at(partitions, 0);  // 1-based index of the partition's first record
  std::size_t polled = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (polled < bound && std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : c.poll(100ms)) {
      ++polled;
      REQUIRE(r.topic == topic);
      REQUIRE(r.key);
      CHECK(*r.key == kgroup::test::record_key(topic, r.partition, r.offset));
      auto& at = first_at[static_cast<std::size_t>(r.partition)];
      if (at == 0) at = polled;
    }
  }
  REQUIRE(polled == bound);
  std::string late;
  for (int p = 0; p < partitions; ++p) {
    if (first_at[static_cast<std::size_t>(p)] == 0) late += " " + std::to_string(p);
  }
  INFO("partitions without records in the first " << bound << " polls:" << late);
  CHECK(late.empty());
  c.close(5s);
}
