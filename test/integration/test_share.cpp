// Share groups (KIP-932, issue 34) end to end: kgroup::ShareConsumer members on librdkafka
// 2.15.1's mock cluster (ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v1), and a clear
// error on librdkafka 2.0.2's mock, which has no share groups.
//
// The mock's faults (SHARE-GROUPS.md) shape these tests: closing any connection to a broker wipes
// every share session there (M1), so records are produced before members start and no test pokes
// the mock in a way that opens connections while members read; automatic assignment gives each
// partition to one member (M3); two joins within a heartbeat interval fence (M4), so members join
// a little apart. Every test checks its deliveries on a journal (share_journal): offsets per poll
// ascend, counts start at 1 and go up by one, nothing rejected or accepted comes back.
//
//   LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests "[share]"
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "group_harness.hpp"
#include "kgroup/share_consumer.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::AcknowledgeType;
using kgroup::ShareConsumer;
using kgroup::test::eventually;
using kgroup::test::mock_cluster;
using kgroup::test::test_config;

namespace {

using record_id = std::pair<std::int32_t, std::int64_t>;  // partition, offset

// Every delivery and every acknowledgement outcome of a test, from any member, with the checks of
// SHARE-GROUPS.md's invariants that hold whatever the test does.
class share_journal {
 public:
  void delivered(const std::string& member, const kgroup::ConsumerRecords& records) {
    std::lock_guard lock(m_);
    std::map<std::int32_t, std::int64_t> last;  // per partition within this poll
    for (const auto& r : records) {
      const record_id id{r.partition, r.offset};
      INFO(member << " got " << r.partition << "@" << r.offset);
      REQUIRE(r.delivery_count.has_value());
      const auto [it, fresh] = last.emplace(r.partition, r.offset);
      if (!fresh) {
        CHECK(r.offset > it->second);  // offsets per poll and partition ascend
        it->second = r.offset;
      }
      auto& n = count_[id];
      CHECK(*r.delivery_count == n + 1);  // counts go 1, 2, 3 ...
      n = *r.delivery_count;
      CHECK(done_.count(id) == 0);  // nothing accepted or rejected is delivered again
      ++deliveries_;
      by_member_[member].insert(id);
    }
  }
  // The outcome of acknowledgements (callback or commit_sync result).
  void outcome(const kgroup::AcknowledgementResults& results, AcknowledgeType type_for_all) {
    std::lock_guard lock(m_);
    for (const auto& [tp, res] : results) {
      for (auto o : res.offsets) {
        if (!res.error && type_for_all != AcknowledgeType::release) {
          const record_id id{tp.partition, o};
          CHECK(done_.count(id) == 0);  // at most one successful accept or reject per record
          done_.insert(id);
        }
      }
    }
  }
  void settled(const record_id& id) {
    std::lock_guard lock(m_);
    done_.insert(id);
  }
  std::size_t deliveries() const {
    std::lock_guard lock(m_);
    return deliveries_;
  }
  std::set<record_id> seen() const {
    std::lock_guard lock(m_);
    std::set<record_id> out;
    for (const auto& [id, n] : count_) out.insert(id);
    return out;
  }
  std::int16_t count_of(const record_id& id) const {
    std::lock_guard lock(m_);
    auto it = count_.find(id);
    return it == count_.end() ? 0 : it->second;
  }
  std::set<record_id> of(const std::string& member) const {
    std::lock_guard lock(m_);
    auto it = by_member_.find(member);
    return it == by_member_.end() ? std::set<record_id>{} : it->second;
  }

 private:
  mutable std::mutex m_;
  std::map<record_id, std::int16_t> count_;
  std::set<record_id> done_;
  std::map<std::string, std::set<record_id>> by_member_;
  std::size_t deliveries_ = 0;
};

bool needs_share_groups(mock_cluster& mc) {
  mock_cluster::share_group_settings s;
  s.heartbeat_interval_ms = 500;
  s.earliest = true;
  if (!mc.set_share_groups(s)) {
    WARN("this librdkafka's mock has no share groups (run with librdkafka 2.15.1)");
    return false;
  }
  return true;
}

kgroup::Config share_config(const mock_cluster& mc, const std::string& group) {
  return test_config(mc.bootstrap_servers()).group(group).retry_backoff(50ms).set("max.poll.records", "100");
}

std::set<record_id> all_records(std::int32_t partitions, std::int64_t per_partition) {
  std::set<record_id> out;
  for (std::int32_t p = 0; p < partitions; ++p)
    for (std::int64_t o = 0; o < per_partition; ++o) out.insert({p, o});
  return out;
}

// Polls until `until` holds or `limit` passes; every batch goes to the journal (and `each`).
template <class Until, class Each>
void poll_until(ShareConsumer& c, const std::string& name, share_journal& j, Until until,
                std::chrono::milliseconds limit, Each each) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!until() && std::chrono::steady_clock::now() < deadline) {
    auto records = c.poll(100ms);
    j.delivered(name, records);
    each(records);
  }
}

}  // namespace

TEST_CASE("share: one member, implicit acknowledgement: every record once, then nothing", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 2);
  mc.produce("q", 200);
  share_journal j;
  ShareConsumer c(share_config(mc, "implicit-one"));
  c.subscribe({"q"});
  poll_until(
      c, "a", j, [&] { return j.seen().size() == 200; }, 30s, [](const auto&) {});
  CHECK(j.seen() == all_records(2, 100));
  CHECK(j.deliveries() == 200);  // each once: count 1, implicitly accepted
  // The accepts go out with the next polls: nothing comes back.
  poll_until(
      c, "a", j, [] { return false; }, 2s, [](const auto&) {});
  CHECK(j.deliveries() == 200);
  const auto m = c.metrics();
  CHECK(m.records_delivered == 200);
  CHECK(m.records_redelivered == 0);
  CHECK(eventually([&] { return c.metrics().acknowledged_accept == 200; }, 5s));
  CHECK(c.assignment() == std::set<kgroup::TopicPartition>{{"q", 0}, {"q", 1}});
  CHECK(c.acquisition_lock_timeout().has_value());
  c.close();
}

TEST_CASE(
    "share: explicit acknowledgement: released records return with count + 1, rejected and accepted never",
    "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 30);
  share_journal j;
  ShareConsumer c(test_config(mc.bootstrap_servers())
                      .group("explicit-mix")
                      .retry_backoff(50ms)
                      .set("share.acknowledgement.mode", "explicit"));
  kgroup::AcknowledgementResults from_callback;
  c.set_acknowledgement_commit_callback([&](const kgroup::AcknowledgementResults& r) {
    for (const auto& [tp, res] : r) {
      auto& mine = from_callback[tp];
      mine.offsets.insert(res.offsets.begin(), res.offsets.end());
      if (res.error) mine.error = res.error;
    }
  });
  c.subscribe({"q"});
  std::set<std::int64_t> released, rejected, accepted;
  // First round: offset % 3 == 0 accepted, 1 released, 2 rejected.
  poll_until(
      c, "a", j, [&] { return accepted.size() + released.size() + rejected.size() == 30; }, 30s,
      [&](const kgroup::ConsumerRecords& records) {
        for (const auto& r : records) {
          REQUIRE(r.delivery_count == std::optional<std::int16_t>(1));
          const auto type = r.offset % 3 == 0   ? AcknowledgeType::accept
                            : r.offset % 3 == 1 ? AcknowledgeType::release
                                                : AcknowledgeType::reject;
          c.acknowledge(r, type);
          (type == AcknowledgeType::accept    ? accepted
           : type == AcknowledgeType::release ? released
                                              : rejected)
              .insert(r.offset);
        }
      });
  REQUIRE(accepted.size() == 10);
  const auto results = c.commit_sync(10s);
  REQUIRE(results.count({"q", 0}) == 1);
  CHECK_FALSE(results.at({"q", 0}).error);
  // Second round: only the released ones come back, with count 2; accept them.
  std::set<std::int64_t> again;
  poll_until(
      c, "a", j, [&] { return again.size() == released.size(); }, 20s,
      [&](const kgroup::ConsumerRecords& records) {
        for (const auto& r : records) {
          CHECK(released.count(r.offset) == 1);
          CHECK(r.delivery_count == std::optional<std::int16_t>(2));
          again.insert(r.offset);
          c.acknowledge(r);
        }
      });
  CHECK(again == released);
  c.commit_sync(10s);
  poll_until(
      c, "a", j, [] { return false; }, 2s, [&](const auto& records) { CHECK(records.empty()); });
  // Every offset's outcome reached the callback, without error.
  REQUIRE(from_callback.count({"q", 0}) == 1);
  CHECK_FALSE(from_callback[{"q", 0}].error);
  CHECK(from_callback[{"q", 0}].offsets.size() == 30);
  const auto m = c.metrics();
  CHECK(m.acknowledged_accept == 20);
  CHECK(m.acknowledged_release == 10);
  CHECK(m.acknowledged_reject == 10);
  c.close();
}

TEST_CASE("share: explicit mode refuses a poll() while a record of the last one is unacknowledged",
          "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 5);
  ShareConsumer c(test_config(mc.bootstrap_servers())
                      .group("explicit-strict")
                      .set("share.acknowledgement.mode", "explicit"));
  c.subscribe({"q"});
  kgroup::ConsumerRecords got;
  REQUIRE(eventually(
      [&] {
        got = c.poll(100ms);
        return !got.empty();
      },
      20s, 1ms));
  for (std::size_t i = 0; i + 1 < got.size(); ++i) c.acknowledge(got[i]);
  try {
    c.poll(10ms);
    FAIL("poll() went on with a record unacknowledged");
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == kgroup::client_errc::illegal_state);
    CHECK_THAT(e.what(), Catch::Contains("acknowledge"));
  }
  // Acknowledging twice is refused too, by name.
  CHECK_THROWS_AS(c.acknowledge(got[0]), kgroup::Error);
  c.acknowledge(got[got.size() - 1], AcknowledgeType::release);
  CHECK_NOTHROW(c.poll(10ms));
  c.close();
}

TEST_CASE("share: a record released up to the delivery limit is archived", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mock_cluster::share_group_settings limit;
  limit.max_delivery_attempts = 3;
  REQUIRE(mc.set_share_groups(limit));
  mc.create_topic("q", 1);
  mc.produce("q", 1);
  share_journal j;
  ShareConsumer c(
      test_config(mc.bootstrap_servers()).group("limit").set("share.acknowledgement.mode", "explicit"));
  c.subscribe({"q"});
  std::vector<std::int16_t> counts;
  poll_until(
      c, "a", j, [&] { return counts.size() == 3; }, 30s,
      [&](const kgroup::ConsumerRecords& records) {
        for (const auto& r : records) {
          counts.push_back(r.delivery_count.value_or(0));
          c.acknowledge(r, AcknowledgeType::release);
        }
      });
  CHECK(counts == std::vector<std::int16_t>{1, 2, 3});
  poll_until(
      c, "a", j, [] { return false; }, 3s, [](const auto& records) { CHECK(records.empty()); });
  c.close();
}

TEST_CASE("share: close() in implicit mode releases the last poll's records to the next member", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 20);
  share_journal j;
  std::set<record_id> first;
  {
    ShareConsumer a(share_config(mc, "close-release").set("max.poll.records", "5"));
    a.subscribe({"q"});
    poll_until(
        a, "a", j, [&] { return !first.empty(); }, 20s,
        [&](const kgroup::ConsumerRecords& records) {
          for (const auto& r : records) first.insert({r.partition, r.offset});
        });
    a.close();
  }
  REQUIRE_FALSE(first.empty());
  ShareConsumer b(share_config(mc, "close-release"));
  b.subscribe({"q"});
  poll_until(
      b, "b", j, [&] { return j.of("b").size() + j.of("a").size() >= 20 + first.size(); }, 30s,
      [](const auto&) {});
  // B got everything; what A held at close came back to B with count 2.
  for (const auto& id : first) CHECK(j.count_of(id) == 2);
  CHECK(j.of("b") == all_records(1, 20));
  b.close();
}

TEST_CASE("share: three members work one queue; every record is delivered and accepted once", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 6);
  mc.produce("q", 600);
  share_journal j;
  std::vector<std::unique_ptr<ShareConsumer>> members;
  std::vector<std::thread> threads;
  std::atomic<bool> running{true};
  for (int i = 0; i < 3; ++i) {
    members.push_back(std::make_unique<ShareConsumer>(share_config(mc, "three")));
    members.back()->subscribe({"q"});
    threads.emplace_back([&, i] {
      const std::string name = "m" + std::to_string(i);
      while (running) j.delivered(name, members[i]->poll(100ms));
    });
    std::this_thread::sleep_for(700ms);  // joins a heartbeat interval apart (M4)
  }
  CHECK(eventually([&] { return j.seen().size() == 600; }, 60s));
  running = false;
  for (auto& t : threads) t.join();
  CHECK(j.seen() == all_records(6, 100));
  CHECK(j.deliveries() == 600);
  for (auto& m : members) m->close();
}

// On librdkafka 2.0.2's mock, which has no share-group APIs ([share-any]: the first cluster).
TEST_CASE("share: a broker without share groups is a clear fatal error", "[share-any]") {
  mock_cluster mc(1);
  if (mc.set_share_groups({})) {
    WARN("this librdkafka's mock has share groups: the case is for librdkafka 2.0.2's");
    return;
  }
  ShareConsumer c(share_config(mc, "none"));
  c.subscribe({"q"});
  bool thrown = false;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!thrown && std::chrono::steady_clock::now() < deadline) {
    try {
      c.poll(100ms);
    } catch (const kgroup::Error& e) {
      thrown = true;
      CHECK(e.is_fatal());
      CHECK_THAT(e.what(), Catch::Contains("share groups"));
    }
  }
  CHECK(thrown);
}

TEST_CASE("share: classic-only keys are refused by name", "[share-any]") {
  for (const char* key : {"auto.offset.reset", "enable.auto.commit", "group.instance.id", "isolation.level",
                          "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
                          "group.protocol", "group.remote.assignor"}) {
    INFO(key);
    kgroup::Config cfg{{"bootstrap.servers", "127.0.0.1:9"}, {"group.id", "g"}};
    const auto& keys = kgroup::Config::keys();
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.name == key; });
    REQUIRE(it != keys.end());
    std::string value = std::string(it->default_value);
    if (value.empty()) value = "x";
    if (std::string(key) == "partition.assignment.strategy") value = "range";
    cfg.set(key, value);
    try {
      ShareConsumer c(cfg);
      FAIL("accepted");
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == kgroup::client_errc::invalid_config);
      CHECK_THAT(e.what(), Catch::Contains(key));
    }
  }
}

// Found by the injected-error tests: outcomes of one partition with different errors (an accept
// applied, then one that failed) reached the callback merged into one AcknowledgementResult with
// the failure's error, so the applied accepts read as failed. The callback gets them apart.
TEST_CASE("share: applied and failed acknowledgements of one partition reach the callback apart", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 20);
  ShareConsumer c(share_config(mc, "mixed-outcomes")
                      .set("share.acknowledgement.mode", "explicit")
                      .set("max.poll.records", "10"));
  std::vector<kgroup::AcknowledgementResults> calls;
  c.set_acknowledgement_commit_callback([&](const kgroup::AcknowledgementResults& r) { calls.push_back(r); });
  c.subscribe({"q"});
  kgroup::ConsumerRecords got;
  REQUIRE(eventually(
      [&] {
        got = c.poll(100ms);
        return got.size() >= 4;
      },
      20s, 1ms));
  const auto half = got.size() / 2;
  for (std::size_t i = 0; i < half; ++i) c.acknowledge(got[i]);
  c.commit_async();  // applied
  REQUIRE(eventually([&] { return c.metrics().share_acknowledges == 1; }, 10s));
  mc.push_request_errors(79, {122});
  for (std::size_t i = half; i < got.size(); ++i) c.acknowledge(got[i]);
  c.commit_async();  // fails: SHARE_SESSION_NOT_FOUND
  REQUIRE(eventually([&] { return c.metrics().share_acknowledges == 2; }, 10s));
  std::this_thread::sleep_for(100ms);  // the answer applied (not an assertion)
  c.poll(10ms);                        // runs the callback with both outcomes
  std::set<std::int64_t> ok, failed;
  for (const auto& r : calls) {
    for (const auto& [tp, res] : r) (res.error ? failed : ok).insert(res.offsets.begin(), res.offsets.end());
  }
  std::set<std::int64_t> first, second;
  for (std::size_t i = 0; i < got.size(); ++i) (i < half ? first : second).insert(got[i].offset);
  CHECK(ok == first);
  CHECK(failed == second);
  c.close();
}
