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
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "group_harness.hpp"
#include "kgroup/share_consumer.hpp"
#include "log_capture.hpp"
#include "mock_cluster.hpp"
#include "rdkafka_share.hpp"
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
  // Catch2's assertions are not thread-safe: members poll on threads of their own, so every check
  // here runs under the journal's lock, and the test's own thread makes none while they run.
  void delivered(const std::string& member, const kgroup::ConsumerRecords& records) {
    std::vector<kgroup::test::rdkafka_delivery> ds;
    for (const auto& r : records) ds.push_back({r.partition, r.offset, r.delivery_count.value_or(-1)});
    delivered(member, ds);
  }
  // The same for a librdkafka member (a mixed group).
  void delivered(const std::string& member, const std::vector<kgroup::test::rdkafka_delivery>& records) {
    std::lock_guard lock(m_);
    std::map<std::int32_t, std::int64_t> last;  // per partition within this poll
    for (const auto& r : records) {
      const record_id id{r.partition, r.offset};
      INFO(member << " got " << r.partition << "@" << r.offset);
      CHECK(r.count >= 1);  // a share delivery always has its count
      const auto [it, fresh] = last.emplace(r.partition, r.offset);
      if (!fresh) {
        CHECK(r.offset > it->second);  // offsets per poll and partition ascend
        it->second = r.offset;
      }
      auto& n = count_[id];
      ++delivered_[id];
      if (r.count == n && failed_since_delivery_.count(id)) {
        // M2: the broker kept the record acquired by this member after its acknowledgement failed
        // at the top level without ending the session, and re-sends it with the same count.
        ++same_count_after_failure_;
      } else if (n == 0 && r.count > 1 && unseen_allowed_) {
        // Acquired before and released without reaching an application: a member's buffered
        // answer when the mock wiped its session (M1: another client's connection closed).
        ++first_seen_late_;
      } else {
        CHECK(r.count == n + 1);  // counts go 1, 2, 3 ...
      }
      failed_since_delivery_.erase(id);
      n = r.count;
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
        ++(res.error ? failed_ : succeeded_)[{tp.partition, o}];
        if (res.error) failed_since_delivery_.insert({tp.partition, o});
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
  // Records with a successful accept or reject (outcome() or settled()).
  std::set<record_id> done() const {
    std::lock_guard lock(m_);
    return done_;
  }
  // For members whose every outcome comes here (a callback on each) and that do not release:
  // once every delivery has its outcome, each record of `all` was accepted exactly once and
  // every further delivery follows a failed acknowledgement (its lock expired or its session
  // ended: the broker released it). Returns whether every delivery has its outcome yet.
  bool answered(const std::set<record_id>& all) const {
    std::lock_guard lock(m_);
    for (const auto& id : all) {
      const auto d = get(delivered_, id);
      if (d == 0 || get(succeeded_, id) + get(failed_, id) < d) return false;
    }
    return true;
  }
  void check_each_delivery_answered_once(const std::set<record_id>& all) const {
    std::lock_guard lock(m_);
    for (const auto& id : all) {
      INFO("record " << id.first << "@" << id.second << ": delivered " << get(delivered_, id) << " times, "
                     << get(failed_, id) << " acknowledgement(s) failed");
      CHECK(get(succeeded_, id) == 1);
      CHECK(get(succeeded_, id) + get(failed_, id) == get(delivered_, id));
    }
  }
  // Tests where M1 can wipe a session while a member holds an answer its application has not
  // seen: a record's first delivery may then carry a count above 1.
  void allow_unseen_acquisitions() {
    std::lock_guard lock(m_);
    unseen_allowed_ = true;
  }
  std::size_t first_seen_late() const {
    std::lock_guard lock(m_);
    return first_seen_late_;
  }
  std::size_t same_count_after_failure() const {
    std::lock_guard lock(m_);
    return same_count_after_failure_;
  }
  std::set<record_id> of(const std::string& member) const {
    std::lock_guard lock(m_);
    auto it = by_member_.find(member);
    return it == by_member_.end() ? std::set<record_id>{} : it->second;
  }

 private:
  mutable std::mutex m_;
  static int get(const std::map<record_id, int>& m, const record_id& id) {
    auto it = m.find(id);
    return it == m.end() ? 0 : it->second;
  }
  std::map<record_id, std::int16_t> count_;
  std::map<record_id, int> delivered_, succeeded_, failed_;
  std::set<record_id> failed_since_delivery_;
  std::size_t same_count_after_failure_ = 0;
  bool unseen_allowed_ = false;
  std::size_t first_seen_late_ = 0;
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

// A member's figures in one line, for INFO when a case fails (what its sessions did).
std::string figures(const ShareConsumer& c) {
  const auto m = c.metrics();
  std::string out =
      m.member_id + " state=" + m.state + " epoch=" + std::to_string(m.member_epoch) + " assigned=";
  for (const auto& tp : m.assignment) out += tp.topic + "-" + std::to_string(tp.partition) + ",";
  out += " delivered=" + std::to_string(m.records_delivered) + " fetches=" + std::to_string(m.share_fetches) +
         " acknowledges=" + std::to_string(m.share_acknowledges) +
         " released=" + std::to_string(m.acknowledged_release) +
         " failed=" + std::to_string(m.acknowledgements_failed) +
         " resets=" + std::to_string(m.session_resets) + " sessions=";
  for (const auto& [node, epoch] : m.session_epochs)
    out += std::to_string(node) + ":" + std::to_string(epoch) + ",";
  return out;
}

// A callback that gives every outcome of an implicit-mode member to the journal (all accepts).
kgroup::AcknowledgementCommitCallback to_journal(share_journal& j) {
  return [&j](const kgroup::AcknowledgementResults& r) { j.outcome(r, AcknowledgeType::accept); };
}

// The two-member setup of the cases where A holds records B is to get: B joins alone on the
// topic "idle" (and is assigned it), then a heartbeat interval later (the mock fences joins
// closer than that, M4) the caller makes A.
void b_alone_on_idle(ShareConsumer& b) {
  b.subscribe({"idle"});
  REQUIRE(eventually(
      [&] {
        b.poll(10ms);
        return b.assignment() == std::set<kgroup::TopicPartition>{{"idle", 0}};
      },
      20s));
  std::this_thread::sleep_for(700ms);
}

// A subscribes to "q" and polls until it holds records (B polls meanwhile); both are then in the
// mock's group.
struct two_members {
  std::string a_id, b_id;
  std::chrono::steady_clock::time_point a_last_poll;  // when A's poll() that returned `held` did
};
two_members a_holds(mock_cluster& mc, const std::string& group, ShareConsumer& a, ShareConsumer& b,
                    share_journal& j, kgroup::ConsumerRecords& held) {
  a.subscribe({"q"});
  REQUIRE(eventually(
      [&] {
        held = a.poll(100ms);
        j.delivered("a", held);
        b.poll(10ms);
        return !held.empty();
      },
      20s, 1ms));
  const auto a_last_poll = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  REQUIRE(eventually(
      [&] {
        ids = mc.share_group_member_ids(group);
        b.poll(10ms);
        return ids.size() == 2;
      },
      20s));
  const auto a_id = a.metrics().member_id;
  const auto b_id = b.metrics().member_id;
  REQUIRE(std::set<std::string>(ids.begin(), ids.end()) == std::set<std::string>{a_id, b_id});
  return {a_id, b_id, a_last_poll};
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

// Issue 34, close() in explicit mode: the acknowledgements made go out with the close and their
// outcomes reach the callback inside close(); the records given and not acknowledged are
// released (docs/share-groups.md, as Java and librdkafka do; their outcome reaches the callback
// too), so the next member gets them with count 2, and never the accepted or rejected ones.
TEST_CASE("share: close() in explicit mode applies what was acknowledged and releases the rest", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 20);
  share_journal j;
  kgroup::ConsumerRecords held;
  std::set<record_id> acknowledged, left, answered;
  std::size_t callbacks = 0, failed = 0;
  {
    ShareConsumer a(share_config(mc, "close-explicit")
                        .set("share.acknowledgement.mode", "explicit")
                        .set("max.poll.records", "10"));
    a.set_acknowledgement_commit_callback([&](const kgroup::AcknowledgementResults& r) {
      ++callbacks;
      for (const auto& [tp, res] : r) {
        if (res.error) ++failed;
        for (auto o : res.offsets) answered.insert({tp.partition, o});
      }
    });
    a.subscribe({"q"});
    REQUIRE(eventually(
        [&] {
          held = a.poll(100ms);
          j.delivered("a", held);
          return held.size() >= 4;
        },
        20s, 1ms));
    // The first half accepted, one rejected, the rest not acknowledged.
    std::size_t i = 0;
    for (const auto& r : held) {
      if (i < held.size() / 2) {
        a.acknowledge(r, AcknowledgeType::accept);
        acknowledged.insert({r.partition, r.offset});
      } else if (i == held.size() / 2) {
        a.acknowledge(r, AcknowledgeType::reject);
        acknowledged.insert({r.partition, r.offset});
      } else {
        left.insert({r.partition, r.offset});
      }
      ++i;
    }
    REQUIRE_FALSE(left.empty());
    a.close();
  }
  CHECK(callbacks >= 1);
  CHECK(failed == 0);
  // Inside close(): the accepts and the reject applied, and the releases of the rest.
  std::set<record_id> expected = acknowledged;
  expected.insert(left.begin(), left.end());
  CHECK(answered == expected);
  for (const auto& id : acknowledged) j.settled(id);
  ShareConsumer b(share_config(mc, "close-explicit"));
  b.subscribe({"q"});
  poll_until(
      b, "b", j, [&] { return j.seen().size() == 20 && j.of("b").size() == 20 - acknowledged.size(); }, 30s,
      [](const auto&) {});
  for (const auto& id : left) CHECK(j.count_of(id) == 2);
  for (const auto& id : acknowledged) CHECK(j.of("b").count(id) == 0);
  CHECK(j.seen() == all_records(1, 20));
  b.close();
}

// Issue 34: "a member that does not poll within max.poll.interval.ms leaves and rejoins on its
// next poll". Alone in its group, the member leaves (its sessions close, releasing what it held),
// then its next poll() rejoins it and it reads the queue to its end: the sessions it closed are
// opened again (the path where session 25's CI saw a fetcher stall after its own fence).
TEST_CASE("share: a member back from a poll timeout rejoins and reads the queue to its end", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 30);
  share_journal j;
  j.allow_unseen_acquisitions();  // what it fetched and had not handed out when it left
  ShareConsumer c(share_config(mc, "back").set("max.poll.records", "5").set("max.poll.interval.ms", "2000"));
  c.set_acknowledgement_commit_callback(to_journal(j));
  c.subscribe({"q"});
  poll_until(
      c, "c", j, [&] { return !j.of("c").empty(); }, 20s, [](const auto&) {});
  REQUIRE_FALSE(j.of("c").empty());
  const auto held = j.of("c");
  REQUIRE(eventually([&] { return c.metrics().state == "poll_timed_out"; }, 10s));
  CHECK(c.assignment().empty());
  poll_until(
      c, "c", j, [&] { return j.done() == all_records(1, 30); }, 30s, [](const auto&) {});
  INFO(figures(c));
  CHECK(j.done() == all_records(1, 30));
  CHECK(c.metrics().state == "stable");
  // What it held at the timeout was never accepted (implicit mode accepts at the next poll, and
  // the leave released it first): it came again, with count 2.
  for (const auto& id : held) CHECK(j.count_of(id) == 2);
  c.close();
}

// unsubscribe() drops the records fetched and not yet handed out (the sessions' close releases
// them); the leaders they came from must be fetched from again after subscribe(). Two leaders
// answer two records each before the first poll(), which takes three (max.poll.records), so one
// answer is left half taken when the member unsubscribes. A guard written in session 26 while
// looking for a stalled fetcher: it passes on the code before (the half-taken answer's leader is
// already marked as taken from, and the next poll() returns it to the fetcher). No journal: a
// record fetched and released without being handed out comes back with count 2 though the
// application never saw count 1.
TEST_CASE("share: unsubscribe() with records still buffered and subscribe() again: the member reads on",
          "[share]") {
  mock_cluster mc(2);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 2);
  mc.set_partition_leader("q", 0, 1);
  mc.set_partition_leader("q", 1, 2);
  mc.produce("q", 4);
  ShareConsumer c(share_config(mc, "resubscribe").set("max.poll.records", "3"));
  std::set<record_id> seen;
  const auto poll_for = [&](std::size_t want) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (seen.size() < want && std::chrono::steady_clock::now() < deadline) {
      for (const auto& r : c.poll(100ms)) seen.insert({r.partition, r.offset});
    }
  };
  c.subscribe({"q"});
  // Both answers arrive before the first poll (the member fetches once it is assigned).
  REQUIRE(eventually([&] { return c.metrics().share_fetches >= 2; }, 20s));
  std::this_thread::sleep_for(500ms);
  poll_for(1);
  REQUIRE_FALSE(seen.empty());
  c.unsubscribe();
  CHECK(c.assignment().empty());
  mc.produce("q", 4);
  c.subscribe({"q"});
  poll_for(8);
  INFO(figures(c));
  CHECK(seen == all_records(2, 4));
  c.close();
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
    // The member itself, not members[i]: the next push_back may move the vector's elements while
    // this thread reads them (a race TSan found).
    threads.emplace_back([&, m = members.back().get(), i] {
      const std::string name = "m" + std::to_string(i);
      while (running) j.delivered(name, m->poll(100ms));
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

TEST_CASE(
    "share: a group of a kgroup member and a librdkafka member, either joining first, shares one queue; "
    "every record delivered, both members work",
    "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  REQUIRE(kgroup::test::rdkafka_share().load());
  mc.create_topic("q", 6);
  mc.produce("q", 6000);
  share_journal j;
  // The second member's start can close a connection to the broker (librdkafka closes its
  // bootstrap one), which on the mock wipes the first member's session (M1): what it had fetched
  // and not yet handed out comes to someone with count 2 (failed so once under TSan, session 26).
  j.allow_unseen_acquisitions();
  const bool kgroup_first = GENERATE(true, false);
  std::unique_ptr<ShareConsumer> k;
  std::unique_ptr<kgroup::test::rdkafka_share_member> r;
  std::atomic<bool> running{true};
  std::vector<std::thread> threads;
  const auto start_kgroup = [&] {
    k = std::make_unique<ShareConsumer>(share_config(mc, "mixed"));
    k->set_acknowledgement_commit_callback(to_journal(j));
    k->subscribe({"q"});
    threads.emplace_back([&] {
      while (running) {
        j.delivered("kgroup", k->poll(100ms));
        std::this_thread::sleep_for(50ms);  // paced: the queue outlasts the second member's join
      }
    });
  };
  const auto start_rdkafka = [&] {
    r = std::make_unique<kgroup::test::rdkafka_share_member>(mc, "mixed", "q");
    threads.emplace_back([&] {
      while (running) {
        j.delivered("librdkafka", r->poll(100ms));
        std::this_thread::sleep_for(50ms);
      }
    });
  };
  // The second member joins while the first has records left to read.
  // No assertion on this thread while the members' threads run (see share_journal::delivered).
  bool first_read = false;
  if (kgroup_first) {
    start_kgroup();
    first_read = eventually([&] { return !j.of("kgroup").empty(); }, 20s);
    start_rdkafka();
  } else {
    start_rdkafka();
    first_read = eventually([&] { return !j.of("librdkafka").empty(); }, 20s);
    start_kgroup();
  }
  const bool all_read = eventually([&] { return j.seen().size() == 6000; }, 90s);
  // Let each member acknowledge what it holds (implicit mode: at its next poll).
  std::this_thread::sleep_for(500ms);
  running = false;
  for (auto& t : threads) t.join();
  INFO((kgroup_first ? "kgroup" : "librdkafka")
       << " joined first; first deliveries with count 2 or more: " << j.first_seen_late());
  CHECK(first_read);
  CHECK(all_read);
  CHECK(j.seen() == all_records(6, 1000));
  // Both took part: the second member got partitions (and records) from the first.
  const auto by_kgroup = j.of("kgroup"), by_rdkafka = j.of("librdkafka");
  CHECK_FALSE(by_kgroup.empty());
  CHECK_FALSE(by_rdkafka.empty());
  // Across the two clients the journal checked, at each delivery, that a record comes again only
  // with a higher delivery count and never after kgroup's accept of it succeeded.
  CHECK_FALSE(j.done().empty());
  k->close();
  r->close();
}

// Issue 34, a mixed group in explicit mode: what the kgroup member releases reaches the
// librdkafka member with count + 1. The librdkafka member starts first, on a topic of its own
// (its start closes its bootstrap connection, and on the mock that wipes every share session of
// the broker, M1); the kgroup member then takes records of q, and both are given q-0 by hand
// (M3). kgroup releases by commit_sync() (ShareAcknowledge) and does not poll again, so its
// fetcher, which fetches only once the application has taken an answer, does not take the records
// back first. (The other direction is not tested: on the 2.15.1 mock librdkafka's background
// fetcher takes back what its application released before another member fetches; DESIGN.md.)
// No journal: records fetched and dropped unseen by either client come back with a count the
// application never saw the one before of.
TEST_CASE("share: a kgroup member's releases reach a librdkafka member of its group with count + 1",
          "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  REQUIRE(kgroup::test::rdkafka_share().load());
  mc.create_topic("q", 1);
  mc.create_topic("idle", 1);
  mc.produce("q", 20);
  const std::string group = "mixed-release";
  kgroup::test::rdkafka_share_member r(mc, group, "idle");
  std::map<record_id, std::vector<std::int16_t>> r_got;  // librdkafka's deliveries' counts
  const auto poll_r = [&](auto until, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!until() && std::chrono::steady_clock::now() < deadline) {
      for (const auto& d : r.poll(50ms)) r_got[{d.partition, d.offset}].push_back(d.count);
    }
  };
  poll_r([&] { return mc.share_group_member_ids(group).size() == 1; }, 20s);
  REQUIRE(mc.share_group_member_ids(group).size() == 1);
  poll_r([] { return false; }, 3s);  // its start settles (the bootstrap connection closes)
  ShareConsumer k(
      share_config(mc, group).set("share.acknowledgement.mode", "explicit").set("max.poll.records", "10"));
  k.subscribe({"q"});
  kgroup::ConsumerRecords held;
  poll_r(
      [&] {
        held = k.poll(50ms);
        return !held.empty();
      },
      20s);
  REQUIRE_FALSE(held.empty());
  std::vector<std::string> ids = mc.share_group_member_ids(group);
  REQUIRE(ids.size() == 2);
  const auto k_id = k.metrics().member_id;
  const auto r_id = ids[0] == k_id ? ids[1] : ids[0];
  REQUIRE(mc.share_group_assign(group, {{k_id, {{"q", 0}}}, {r_id, {{"q", 0}, {"idle", 0}}}}));
  // librdkafka reads the rest of q; none of what kgroup holds.
  std::set<record_id> held_ids;
  for (const auto& rec : held) held_ids.insert({rec.partition, rec.offset});
  poll_r([&] { return r_got.size() + held_ids.size() >= 20; }, 30s);
  for (const auto& id : held_ids) CHECK(r_got.count(id) == 0);
  CHECK(r_got.size() + held_ids.size() == 20);
  // kgroup releases all it holds; librdkafka gets each again, with kgroup's count + 1.
  for (const auto& rec : held) k.acknowledge(rec, AcknowledgeType::release);
  const auto results = k.commit_sync(10s);
  REQUIRE(results.count({"q", 0}) == 1);
  CHECK_FALSE(results.at({"q", 0}).error);
  CHECK(results.at({"q", 0}).offsets.size() == held.size());
  poll_r(
      [&] {
        return std::all_of(held_ids.begin(), held_ids.end(),
                           [&](const auto& id) { return r_got.count(id) > 0; });
      },
      30s);
  for (const auto& rec : held) {
    INFO("offset " << rec.offset);
    const auto it = r_got.find({rec.partition, rec.offset});
    REQUIRE(it != r_got.end());
    CHECK(it->second ==
          std::vector<std::int16_t>{static_cast<std::int16_t>(rec.delivery_count.value_or(0) + 1)});
  }
  r.close();
  k.close();
}

// The other direction: what a librdkafka member in explicit mode releases reaches the kgroup
// member with count + 1. kgroup starts first on a topic of its own (librdkafka's start wipes the
// broker's sessions, M1), librdkafka alone on q takes a batch and holds it, both are then given
// q-0 by hand (M3) and kgroup reads the rest, and librdkafka releases its batch (commit_sync) and
// polls no more.
TEST_CASE("share: a librdkafka member's releases reach a kgroup member of its group with count + 1",
          "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  REQUIRE(kgroup::test::rdkafka_share().load());
  mc.create_topic("q", 1);
  mc.create_topic("idle", 1);
  mc.produce("q", 20);
  const std::string group = "mixed-release-back";
  ShareConsumer k(share_config(mc, group));
  b_alone_on_idle(k);
  std::map<record_id, std::vector<std::int16_t>> k_got;  // kgroup's deliveries' counts
  const auto poll_k = [&](auto until, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!until() && std::chrono::steady_clock::now() < deadline) {
      for (const auto& rec : k.poll(50ms)) k_got[{rec.partition, rec.offset}].push_back(*rec.delivery_count);
    }
  };
  kgroup::test::rdkafka_share_member r(mc, group, "q", /*explicit_mode=*/true);
  std::vector<std::string> ids;
  poll_k(
      [&] {
        ids = mc.share_group_member_ids(group);
        return ids.size() == 2;
      },
      20s);
  REQUIRE(ids.size() == 2);
  poll_k([] { return false; }, 3s);  // librdkafka's start settles (its bootstrap connection closes)
  // librdkafka, alone on q, takes a batch and holds it.
  std::vector<kgroup::test::rdkafka_delivery> batch;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (batch.empty() && std::chrono::steady_clock::now() < deadline) {
    batch = r.poll_hold(100ms);
    poll_k([] { return false; }, 10ms);
  }
  REQUIRE_FALSE(batch.empty());
  for (const auto& d : batch) CHECK(k_got.count({d.partition, d.offset}) == 0);
  // Both on q-0: kgroup reads what librdkafka does not hold.
  const auto k_id = k.metrics().member_id;
  const auto r_id = ids[0] == k_id ? ids[1] : ids[0];
  REQUIRE(mc.share_group_assign(group, {{k_id, {{"q", 0}, {"idle", 0}}}, {r_id, {{"q", 0}}}}));
  poll_k([&] { return k_got.size() + batch.size() >= 20; }, 20s);
  CHECK(k_got.size() + batch.size() == 20);
  for (const auto& d : batch) CHECK(k_got.count({d.partition, d.offset}) == 0);
  // librdkafka releases its batch; kgroup gets each record with librdkafka's count + 1.
  // Under TSan's timing librdkafka's session was sometimes gone by then (the commit answers
  // SHARE_SESSION_NOT_FOUND; the mock wipes sessions on a connection's close, M1, and on an epoch
  // mismatch, M6): its records were then released with the session, which gives them the same
  // count + 1, so the check below still holds. Any other problem fails.
  const auto problems = r.release_held();
  INFO("librdkafka's release: " << (problems.empty() ? "applied" : problems));
  CHECK((problems.empty() || problems.find("share session was not found") != std::string::npos));
  if (!problems.empty()) WARN("librdkafka's session was gone at its release: " << problems);
  poll_k(
      [&] {
        return std::all_of(batch.begin(), batch.end(), [&](const auto& d) {
          return k_got.count({d.partition, d.offset}) > 0;
        });
      },
      30s);
  for (const auto& d : batch) {
    INFO("offset " << d.offset << " count " << d.count);
    const auto it = k_got.find({d.partition, d.offset});
    REQUIRE(it != k_got.end());
    CHECK(it->second == std::vector<std::int16_t>{static_cast<std::int16_t>(d.count + 1)});
  }
  r.close();
  k.close();
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

// Issue 34, "a stalled member whose lock expires while its connection stays open": A (explicit
// mode) takes records of a partition it shares with B (target assignment, M3) and sits on them
// without acknowledging; its connection and heartbeats go on. After the lock (2 s, swept once a
// second, M10) B gets exactly those records with delivery count 2, never before the lock ran out;
// A's late acknowledgement then fails in its callback and commit_sync() with INVALID_RECORD_STATE,
// and every record is accepted once, by B.
// The mock fences the older members at a join (M4: it bumps their epochs without telling them),
// and a fenced member drops its records, so B joins first, subscribed to an empty topic of its
// own ("idle"): the fencing at A's join costs it nothing, and A, the newest member, keeps its
// epoch. The target assignment (which bumps epochs without fencing) then gives q-0 to both.
TEST_CASE(
    "share: a stalled member's lock expires: its records go to the other member with count 2, "
    "its late acknowledgement fails with INVALID_RECORD_STATE",
    "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mock_cluster::share_group_settings lock;
  lock.record_lock_duration_ms = 2000;
  REQUIRE(mc.set_share_groups(lock));
  mc.create_topic("q", 1);
  mc.create_topic("idle", 1);
  mc.produce("q", 50);
  share_journal j;
  ShareConsumer b(share_config(mc, "stall"));
  b.set_acknowledgement_commit_callback(to_journal(j));
  b_alone_on_idle(b);
  const auto a_joined = std::chrono::steady_clock::now();
  ShareConsumer a(
      share_config(mc, "stall").set("share.acknowledgement.mode", "explicit").set("max.poll.records", "10"));
  kgroup::AcknowledgementResults a_callback;
  a.set_acknowledgement_commit_callback([&](const kgroup::AcknowledgementResults& r) {
    for (const auto& [tp, res] : r) {
      a_callback[tp].offsets.insert(res.offsets.begin(), res.offsets.end());
      if (res.error) a_callback[tp].error = res.error;
    }
  });
  kgroup::ConsumerRecords held;
  const auto [a_id, b_id, a_last_poll] = a_holds(mc, "stall", a, b, j, held);
  std::set<record_id> held_ids;
  for (const auto& r : held) held_ids.insert({r.partition, r.offset});
  // A stalls from here on (no poll, no acknowledgement); B shares its partition.
  REQUIRE(mc.share_group_assign("stall", {{a_id, {{"q", 0}}}, {b_id, {{"idle", 0}, {"q", 0}}}}));
  std::optional<std::chrono::steady_clock::time_point> b_got_held;
  poll_until(
      b, "b", j, [&] { return j.of("b").size() == 50; }, 30s,
      [&](const kgroup::ConsumerRecords& records) {
        for (const auto& r : records) {
          if (held_ids.count({r.partition, r.offset}) && !b_got_held)
            b_got_held = std::chrono::steady_clock::now();
        }
      });
  REQUIRE(j.of("b") == all_records(1, 50));
  for (const auto& id : held_ids) CHECK(j.count_of(id) == 2);  // A's, after the lock
  for (const auto& id : all_records(1, 50)) {
    if (!held_ids.count(id)) CHECK(j.count_of(id) == 1);  // the others B got first
  }
  // Not before A's lock ran out: A acquired them after it subscribed.
  REQUIRE(b_got_held.has_value());
  CHECK(*b_got_held - a_joined >= 1900ms);
  CHECK(a.acquisition_lock_timeout() == std::optional<std::chrono::milliseconds>(2000ms));
  CHECK(a.metrics().member_epoch > 0);  // never fenced: its records stayed its own until the lock

  // A wakes up and accepts what it was given: too late.
  for (const auto& r : held) a.acknowledge(r);
  const auto results = a.commit_sync(10s);
  REQUIRE(results.count({"q", 0}) == 1);
  CHECK(results.at({"q", 0}).error == kgroup::kafka_errc::invalid_record_state);
  CHECK(results.at({"q", 0}).offsets.size() == held.size());
  j.outcome(results, AcknowledgeType::accept);  // failed: settles nothing
  REQUIRE(a_callback.count({"q", 0}) == 1);
  CHECK(a_callback[{"q", 0}].error == kgroup::kafka_errc::invalid_record_state);
  CHECK(a.metrics().acknowledgements_failed == held.size());
  // Counted apart as too late (a subset of the failed).
  CHECK(a.metrics().acknowledgements_lock_expired == held.size());
  CHECK(a.metrics().acknowledgements_failed >= a.metrics().acknowledgements_lock_expired);

  // Nothing is lost: B's accepts settle every record, each once (the journal checks "once").
  poll_until(
      b, "b", j, [&] { return j.done() == all_records(1, 50); }, 20s, [](const auto&) {});
  CHECK(j.done() == all_records(1, 50));
  CHECK(j.deliveries() == 50 + held.size());
  b.close();
  a.close();
}

// Issue 34: a partition that leaves a member's assignment while the application holds records of
// it. As Java's KafkaShareConsumer does, the member's acknowledgements of those records still go
// to the leader and apply (its session forgets the partition only after them), so the new owner
// gets only what was never delivered, each record once. Before, the member forgot the partition
// at once: the accepts failed with SHARE_SESSION_NOT_FOUND and the records went to B again.
// It failed once on CI when the mock's fence after the manual assignment (M4) hit A rather than
// B: a fenced member closed its sessions. Since session 26 a fenced member keeps them.
TEST_CASE(
    "share: a partition moves away while its records are held: their acknowledgements still apply, "
    "the new owner gets each other record once",
    "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.create_topic("idle", 1);
  mc.produce("q", 50);
  share_journal j;
  ShareConsumer b(share_config(mc, "move"));
  b.set_acknowledgement_commit_callback(to_journal(j));
  b_alone_on_idle(b);
  ShareConsumer a(
      share_config(mc, "move").set("share.acknowledgement.mode", "explicit").set("max.poll.records", "10"));
  std::vector<kgroup::AcknowledgementResults> a_callback;
  a.set_acknowledgement_commit_callback(
      [&](const kgroup::AcknowledgementResults& r) { a_callback.push_back(r); });
  kgroup::ConsumerRecords held;
  const auto [a_id, b_id, a_last_poll] = a_holds(mc, "move", a, b, j, held);
  REQUIRE(held.size() <= 10);
  // q-0 moves from A (which keeps idle-0, so it stays in the group) to B.
  REQUIRE(mc.share_group_assign("move", {{a_id, {{"idle", 0}}}, {b_id, {{"q", 0}}}}));
  // A does not poll (explicit mode refuses while the records are unacknowledged): its
  // membership runs on its background thread. B reads what A never had meanwhile.
  REQUIRE(eventually(
      [&] {
        j.delivered("b", b.poll(50ms));
        return a.assignment() == std::set<kgroup::TopicPartition>{{"idle", 0}};
      },
      20s));
  for (int i = 0; i < 5; ++i) j.delivered("b", b.poll(50ms));

  // A accepts what it holds: applied by the broker, in the result and in the callback.
  for (const auto& r : held) a.acknowledge(r);
  const auto results = a.commit_sync(10s);
  REQUIRE(results.count({"q", 0}) == 1);
  CHECK_FALSE(results.at({"q", 0}).error);
  CHECK(results.at({"q", 0}).offsets.size() == held.size());
  j.outcome(results, AcknowledgeType::accept);
  REQUIRE(a_callback.size() == 1);
  CHECK_FALSE(a_callback[0].at({"q", 0}).error);
  CHECK(a.metrics().acknowledgements_failed == 0);
  a.poll(10ms);  // A fetches again: its session forgets q-0 now (nothing of it is left)

  // B gets every other record, once; every record is accepted exactly once (the journal checks
  // "once" at each delivery and outcome).
  const auto all = all_records(1, 50);
  poll_until(
      b, "b", j, [&] { return j.done() == all; }, 30s, [&](const auto&) { a.poll(10ms); });
  CHECK(j.done() == all);
  CHECK(j.deliveries() == 50);
  std::set<record_id> held_ids;
  for (const auto& r : held) held_ids.insert({r.partition, r.offset});
  for (const auto& id : held_ids) CHECK_FALSE(j.of("b").count(id));
  b.close();
  a.close();
}

namespace {

// One implicit-mode member reads 60 records of one partition, 10 per poll, its callback giving
// every outcome to the journal (commit_sync after each poll when `sync`: every acknowledgement
// goes out as ShareAcknowledge). `inject` runs once the member has 20 records. Then every record
// must be accepted exactly once and every redelivery follow a failed acknowledgement.
void read_through_faults(const std::string& group, bool sync,
                         const std::function<void(mock_cluster&)>& inject, share_journal& j) {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mock_cluster::share_group_settings lock;
  lock.record_lock_duration_ms = 2000;  // records stranded by an error come back soon
  REQUIRE(mc.set_share_groups(lock));
  mc.create_topic("q", 1);
  mc.produce("q", 60);
  const auto all = all_records(1, 60);
  ShareConsumer c(share_config(mc, group).set("max.poll.records", "10"));
  c.set_acknowledgement_commit_callback(to_journal(j));
  c.subscribe({"q"});
  bool injected = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!(j.done() == all && j.answered(all)) && std::chrono::steady_clock::now() < deadline) {
    j.delivered("a", c.poll(100ms));
    if (sync) {
      try {
        c.commit_sync(10s);  // results reach the journal through the callback
      } catch (const kgroup::Error& e) {
        FAIL_CHECK("commit_sync: " << e.what());
      }
    }
    if (!injected && j.seen().size() >= 20) {
      inject(mc);
      injected = true;
    }
  }
  CHECK(injected);
  CHECK(j.done() == all);
  CHECK(j.answered(all));
  j.check_each_delivery_answered_once(all);
  const auto m = c.metrics();
  INFO("same-count redeliveries after a failed acknowledgement (M2): " << j.same_count_after_failure());
  INFO("fetches " << m.share_fetches << ", acknowledges " << m.share_acknowledges << ", resets "
                  << m.session_resets << ", redelivered " << m.records_redelivered);
  CHECK(m.acknowledged_accept >= 60);
  c.close();
}

}  // namespace

// Issue 34, injected errors on ShareFetch (78), the request that carries implicit mode's accepts:
// the session errors (122, 123, 133) and a lost connection (-195; the mock then drops every
// session of the broker, M1) reset the session to epoch 0, failing the accepts it carried, and the
// records come back with count + 1; INVALID_RECORD_STATE at the top level fails the accepts and
// keeps the session (the records come back after their lock).
TEST_CASE("share: injected ShareFetch errors: the member recovers, every record accepted exactly once",
          "[share]") {
  const std::int16_t code = GENERATE(122, 123, 133, 121, -195);
  INFO("ShareFetch error " << code);
  share_journal j;
  read_through_faults(
      "fetch-errors", false,
      [&](mock_cluster& mc) {
        mc.push_request_errors(78, {code, code});
      },
      j);
}

// The same for ShareAcknowledge (79): commit_sync() after each poll sends the accepts alone.
TEST_CASE("share: injected ShareAcknowledge errors: the member recovers, every record accepted exactly once",
          "[share]") {
  const std::int16_t code = GENERATE(122, 123, 133, 121, -195);
  INFO("ShareAcknowledge error " << code);
  share_journal j;
  read_through_faults(
      "ack-errors", true,
      [&](mock_cluster& mc) {
        mc.push_request_errors(79, {code, code});
      },
      j);
}

// ShareGroupHeartbeat (76) errors: fenced or unknown, the member rejoins with the same id and
// keeps its share sessions (the records it was given stay acknowledgeable); the coordinator
// unavailable, it finds it again. Either way it reads on.
TEST_CASE(
    "share: injected ShareGroupHeartbeat errors: the member rejoins, every record accepted exactly once",
    "[share]") {
  const std::int16_t code = GENERATE(110, 25, 15);
  INFO("ShareGroupHeartbeat error " << code);
  share_journal j;
  read_through_faults(
      "heartbeat-errors", false,
      [&](mock_cluster& mc) {
        mc.push_request_errors(76, {code, code});
      },
      j);
}

// A fenced member rejoins at once with the same member id: its share sessions and the records
// the application holds stay (as Java's member keeps them), so its acknowledgements of them still
// apply. Found on CI (session 25): the mock's manual assignment fences one member (M4), and a
// fenced A closed its sessions, so the broker released the records it held and its accepts
// failed with SHARE_SESSION_NOT_FOUND. Here the fence is injected (FENCED_MEMBER_EPOCH on a
// heartbeat) while the member holds a poll's records.
TEST_CASE("share: a fenced member keeps the records it holds; its acknowledgements still apply", "[share]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mc.create_topic("q", 1);
  mc.produce("q", 30);
  kgroup::test::log_capture log;
  share_journal j;
  ShareConsumer c(share_config(mc, "fenced-keeps")
                      .set("share.acknowledgement.mode", "explicit")
                      .set("max.poll.records", "10"));
  std::vector<kgroup::AcknowledgementResults> calls;
  c.set_acknowledgement_commit_callback([&](const kgroup::AcknowledgementResults& r) { calls.push_back(r); });
  c.subscribe({"q"});
  kgroup::ConsumerRecords held;
  REQUIRE(eventually(
      [&] {
        held = c.poll(100ms);
        j.delivered("c", held);
        return !held.empty();
      },
      20s, 1ms));
  // The next heartbeat is refused: fenced, the member rejoins with epoch 0 and gets q-0 again.
  mc.push_request_errors(76, {110});
  REQUIRE(eventually(
      [&] {
        return log.has(kgroup::LogLevel::warn, {"fenced", "FENCED_MEMBER_EPOCH"});
      },
      10s));
  REQUIRE(eventually(
      [&] {
        const auto m = c.metrics();
        return m.state == "stable" && m.assignment == std::set<kgroup::TopicPartition>{{"q", 0}};
      },
      10s));
  for (const auto& r : held) c.acknowledge(r);
  const auto results = c.commit_sync(10s);
  REQUIRE(results.count({"q", 0}) == 1);
  CHECK_FALSE(results.at({"q", 0}).error);
  CHECK(results.at({"q", 0}).offsets.size() == held.size());
  j.outcome(results, AcknowledgeType::accept);
  CHECK(c.metrics().acknowledgements_failed == 0);
  // The rest, each record once: none of the held ones again (their accepts applied), and none
  // of the others twice unless the member released it itself (fetched, not handed out, at the
  // fence: released with count + 1, which the journal allows).
  poll_until(
      c, "c", j, [&] { return j.done().size() == 30; }, 20s,
      [&](const kgroup::ConsumerRecords& records) {
        for (const auto& r : records) c.acknowledge(r);
        if (!records.empty()) j.outcome(c.commit_sync(10s), AcknowledgeType::accept);
      });
  CHECK(j.done() == all_records(1, 30));
  for (const auto& r : held) CHECK(j.count_of({r.partition, r.offset}) == 1);
  c.close();
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

// Issue 34, "a leader move": the partition's leader changes while a member reads; the answers'
// NOT_LEADER_OR_FOLLOWER sends the fetcher to the metadata and on to the new leader, where a new
// session starts. Every record is accepted exactly once and each redelivery follows a failed
// acknowledgement.
TEST_CASE("share: a leader move while a member reads: it follows the leader, every record accepted once",
          "[share]") {
  mock_cluster mc(3);
  if (!needs_share_groups(mc)) return;
  mock_cluster::share_group_settings lock;
  lock.record_lock_duration_ms = 2000;
  REQUIRE(mc.set_share_groups(lock));
  mc.create_topic("q", 1);
  mc.set_partition_leader("q", 0, 1);
  mc.produce("q", 60);
  const auto all = all_records(1, 60);
  share_journal j;
  ShareConsumer c(share_config(mc, "leader-move").set("max.poll.records", "10"));
  c.set_acknowledgement_commit_callback(to_journal(j));
  c.subscribe({"q"});
  bool moved = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!(j.done() == all && j.answered(all)) && std::chrono::steady_clock::now() < deadline) {
    j.delivered("a", c.poll(100ms));
    if (!moved && j.seen().size() >= 20) {
      mc.set_partition_leader("q", 0, 2);
      moved = true;
    }
  }
  CHECK(moved);
  CHECK(j.done() == all);
  j.check_each_delivery_answered_once(all);
  const auto m = c.metrics();
  INFO("same-count redeliveries after a failed acknowledgement (M2): " << j.same_count_after_failure());
  CHECK(m.session_epochs.count(2) == 1);  // it fetched from the new leader
  c.close();
}

// Issue 34, "a killed member", as a process that stops polling: past max.poll.interval.ms A
// leaves the group, and its records go back to the queue long before their lock (30 s) would
// expire: B gets them with count 2. B joins first on a topic of its own, as in the stalled
// member's test (M4).
// Failed before the fix (found by this test): A left (ShareGroupHeartbeat epoch -1) but its share
// session stayed open, holding the records, and librdkafka 2.15.1's mock does not release a
// leaving member's records, so B got them only at the lock's expiry. Now a member that leaves
// closes its share sessions (ShareAcknowledge epoch -1), which works on the mock and on Kafka.
// Under ASan this case failed on two of three CI runs in session 25 with B stuck after its own
// fence (stable, assigned q-0, nine fetches in 27 s, its session reset, nothing delivered: the
// figures below); since session 26 a fenced member keeps its sessions instead of closing them.
// [no-asan] again (session 26): on one of two CI runs under ASan B got A's records 2 s after A
// stopped, A still stable and B's session reset: the mock wiped the broker's sessions (M1, a
// connection closed; which one is not known), so the release was not A's leave. Sanitizer runs
// do not rerun a failure; the normal ctest (which reruns once) and TSan still run it.
TEST_CASE(
    "share: a member that stops polling leaves after max.poll.interval.ms; its records go on with count 2",
    "[share][no-asan]") {
  mock_cluster mc(1);
  if (!needs_share_groups(mc)) return;
  mock_cluster::share_group_settings lock;
  lock.record_lock_duration_ms = 30000;
  REQUIRE(mc.set_share_groups(lock));
  mc.create_topic("q", 1);
  mc.create_topic("idle", 1);
  mc.produce("q", 50);
  share_journal j;
  ShareConsumer b(share_config(mc, "gone"));
  b.set_acknowledgement_commit_callback(to_journal(j));
  b_alone_on_idle(b);
  ShareConsumer a(share_config(mc, "gone")
                      .set("share.acknowledgement.mode", "explicit")
                      .set("max.poll.records", "10")
                      .set("max.poll.interval.ms", "3000"));
  kgroup::ConsumerRecords held;
  const auto [a_id, b_id, a_stopped] = a_holds(mc, "gone", a, b, j, held);
  std::set<record_id> held_ids;
  for (const auto& r : held) held_ids.insert({r.partition, r.offset});
  REQUIRE(mc.share_group_assign("gone", {{a_id, {{"q", 0}}}, {b_id, {{"idle", 0}, {"q", 0}}}}));
  const std::string a_before = figures(a);
  poll_until(
      b, "b", j, [&] { return j.of("b").size() == 50; }, 25s, [](const auto&) {});
  const auto b_done = std::chrono::steady_clock::now();
  // Once failed under ASan on CI (B had not got A's records within 25 s; not reproduced here in
  // 20 runs, ASan and loaded ones included): what both members' sessions did, if it fails again.
  INFO("A when it stopped: " << a_before);
  INFO("A now: " << figures(a));
  INFO("B now: " << figures(b));
  REQUIRE(j.of("b") == all_records(1, 50));
  for (const auto& id : held_ids) CHECK(j.count_of(id) == 2);
  CHECK(b_done - a_stopped < 25s);  // released by A's leave, not by the 30 s lock
  CHECK(a.metrics().state != "stable");
  poll_until(
      b, "b", j, [&] { return j.done() == all_records(1, 50); }, 20s, [](const auto&) {});
  CHECK(j.done() == all_records(1, 50));
  b.close();
}
