// Mixed consumer groups on the librdkafka mock cluster: kgroup members and librdkafka high-level
// consumers in one group, with range (eager) and cooperative-sticky (cooperative), and each side as
// the group leader (the leader runs the assignor for everyone, so each side must read the other's
// subscriptions and the other side must read its assignments).
//
// Each case: the first member joins and settles alone; members of the other client join one at a
// time (one for range; two for cooperative-sticky, so that the leader must read the other client's
// owned partitions to keep the assignment sticky) and the group settles after each; then the first
// joiner leaves cleanly and the group settles again. Both sides record their rebalance callbacks in
// one timeline; no partition may ever have two owners.
//
// Leadership: the mock elects the first member of its member list (the first to join), and kgroup
// has no public API that says whether it leads. So the leader is checked from the librdkafka side:
// its JoinGroup response names the leader's member id, which is compared with the kgroup member's
// group_metadata() and librdkafka's own member id for the same generation.
#include <catch2/catch.hpp>

#include "group_harness.hpp"
#include "mock_cluster.hpp"
#include "rdkafka_member.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::eventually;
using kgroup::test::polling_member;
using kgroup::test::rdkafka_member;
using kgroup::test::test_config;
using kgroup::test::timeline;
using partition_set = std::set<kgroup::TopicPartition>;

namespace {

constexpr int partition_count = 12;
const std::string topic = "orders";

kgroup::Config kgroup_config(const kgroup::test::mock_cluster& mc, const std::string& group,
                             const std::string& strategy) {
  return test_config(mc.bootstrap_servers())
      .group(group)
      .short_session()
      .strategy(strategy)
      .retry_backoff(50ms)
      .reconnect_backoff(20ms);
}

partition_set all_partitions() {
  partition_set s;
  for (int i = 0; i < partition_count; ++i) s.insert({topic, i});
  return s;
}

// One member of either client, as the settle check sees it.
struct view {
  std::string name;
  std::function<partition_set()> owned;  // from its listener / rebalance callback
  std::function<bool()> consistent;      // its own state agrees with the callbacks and is settled
};

view of(polling_member& m) {
  return {m.name(), [&m] { return m.listener().owned(); },
          [&m] { return m.consumer().group_state() == "stable" && m.listener().owned() == m.consumer().assignment(); }};
}

view of(rdkafka_member& m) {
  return {m.name(), [&m] { return m.owned(); }, [&m] { return m.stable(); }};
}

// Every partition owned exactly once across `members`, balanced (sizes differ by at most one), and
// each member's own view consistent.
bool settled(const std::vector<view>& members) {
  partition_set all;
  std::size_t total = 0, lo = SIZE_MAX, hi = 0;
  for (const auto& m : members) {
    if (!m.consistent()) return false;
    const auto owned = m.owned();
    total += owned.size();
    lo = std::min(lo, owned.size());
    hi = std::max(hi, owned.size());
    all.insert(owned.begin(), owned.end());
  }
  return total == static_cast<std::size_t>(partition_count) && all == all_partitions() && hi - lo <= 1;
}

std::string describe(const std::vector<view>& members) {
  std::string out;
  for (const auto& m : members) {
    out += m.name + (m.consistent() ? " (consistent)" : " (not settled)") + ":";
    for (const auto& tp : m.owned()) out += " " + std::to_string(tp.partition);
    out += "\n";
  }
  return out;
}

void check_no_overlaps(const timeline& t) {
  const auto overlaps = t.overlaps();
  for (const auto& o : overlaps) UNSCOPED_INFO(o);
  CHECK(overlaps.empty());
}

// Eager: every revoke gives back everything its member owned. Cooperative: every assign callback
// adds only partitions the member did not own yet. Checked over the whole timeline, both clients.
void check_revokes(const timeline& t, bool cooperative) {
  std::map<std::string, partition_set> owned;
  int revokes = 0;
  int index = 0;
  for (const auto& e : t.events()) {
    auto& mine = owned[e.member];
    const partition_set parts(e.partitions.begin(), e.partitions.end());
    INFO(e.member << ", event " << index++);
    if (e.what == timeline::kind::assigned) {
      if (cooperative) {
        for (const auto& tp : parts) CHECK(mine.count(tp) == 0);
      } else {
        CHECK(mine.empty());  // an eager assignment follows a full revoke (or nothing owned)
      }
      mine.insert(parts.begin(), parts.end());
    } else {
      ++revokes;
      if (!cooperative) CHECK(parts == mine);
      for (const auto& tp : parts) CHECK(mine.erase(tp) == 1);
    }
  }
  CHECK(revokes > 0);
}

// A member of either client.
struct member {
  std::unique_ptr<polling_member> k;
  std::unique_ptr<rdkafka_member> r;

  std::string name() const { return k ? k->name() : r->name(); }
  view v() const { return k ? of(*k) : of(*r); }
  partition_set owned() const { return k ? k->listener().owned() : r->owned(); }
  std::size_t revoked_total() const { return k ? k->listener().revoked_total() : r->revoked_total(); }
  int lost_calls() const { return k ? k->listener().lost_calls() : r->lost_calls(); }
  // Stops it cleanly (close) and checks that went well.
  void stop() {
    if (k) {
      CHECK_FALSE(k->poll_error());
      k->stop();
      CHECK_FALSE(k->close_error());
      CHECK(k->listener().owned().empty());
    } else {
      r->stop();
      CHECK_FALSE(r->close_error());
      CHECK(r->owned().empty());
      for (const auto& e : r->errors()) UNSCOPED_INFO(r->name() << ": " << e);
      CHECK(r->errors().empty());
    }
    CHECK(lost_calls() == 0);
  }
};

std::vector<view> views(const std::vector<member*>& ms) {
  std::vector<view> out;
  for (auto* m : ms) out.push_back(m->v());
  return out;
}

// 60 s: a settle normally takes one or two mock rebalances (5 s each), but the mock's SyncGroup race
// (a follower whose SyncGroup arrives after the leader's is refused and rejoins) can repeat one.
void require_settled(const std::vector<member*>& ms) {
  const auto vs = views(ms);
  const bool ok = eventually([&] { return settled(vs); }, 60s);
  INFO(describe(vs));
  REQUIRE(ok);
}

// The leader, as the librdkafka members' last JoinGroup responses name it, is `expected`; every
// member is in the same generation; the protocol is the configured one.
void check_leader(const std::vector<member*>& ms, const member& expected, const std::string& strategy) {
  std::string expected_id;
  std::int32_t generation = -1;
  std::map<std::string, std::string> ids;  // member id -> name
  for (auto* m : ms) {
    std::string id;
    std::int32_t gen = -1;
    if (m->k) {
      const auto md = m->k->consumer().group_metadata();
      id = md.member_id;
      gen = md.generation_id;
    } else {
      const auto join = m->r->last_join();
      REQUIRE(join);
      id = m->r->member_id();
      CHECK(join->member_id == id);
      gen = join->generation;
    }
    CHECK_FALSE(id.empty());
    ids[id] = m->name();
    if (generation < 0) generation = gen;
    CHECK(gen == generation);
    if (m == &expected) expected_id = id;
  }
  CHECK(ids.size() == ms.size());  // distinct member ids
  bool checked = false;
  for (auto* m : ms) {
    if (!m->r) continue;
    const auto join = m->r->last_join();
    REQUIRE(join);
    INFO(m->name() << " sees leader " << join->leader_id << " (" << ids[join->leader_id] << ")");
    CHECK(join->leader_id == expected_id);
    CHECK(join->protocol == strategy);
    checked = true;
  }
  CHECK(checked);  // at least one librdkafka member could tell
}

// The whole scenario. `kgroup_first`: a kgroup member joins first and leads, then librdkafka
// members join; otherwise the other way round. Eager: one member joins, then leaves. Cooperative:
// two join one after the other (so the leader must read the other client's owned partitions to
// keep the assignment sticky), then the first of them leaves.
void run_mixed_group(const std::string& strategy, bool kgroup_first) {
  const bool cooperative = strategy == "cooperative-sticky";
  const std::string group = std::string("g-interop-") + (kgroup_first ? "k-" : "r-") + strategy;
  INFO("strategy " << strategy << ", leader " << (kgroup_first ? "kgroup" : "librdkafka"));
  kgroup::test::mock_cluster mc(3);
  mc.create_topic(topic, partition_count);
  // The mock completes a SyncGroup round when the leader's request arrives and refuses followers'
  // requests that come later (INVALID_REQUEST; real Kafka answers them), which costs a whole extra
  // rebalance. Delaying every response by 10 ms keeps the leader (one metadata round trip behind)
  // after its followers, so the test's length does not depend on that race.
  mc.set_rtt(-1, 10);
  timeline t;

  auto make = [&](bool kgroup, const std::string& name) {
    auto m = std::make_unique<member>();
    if (kgroup) {
      m->k = std::make_unique<polling_member>(name, kgroup_config(mc, group, strategy), std::vector<std::string>{topic}, t);
    } else {
      m->r = std::make_unique<rdkafka_member>(name, mc.bootstrap_servers(), group, strategy,
                                              std::vector<std::string>{topic}, t);
    }
    return m;
  };

  // 1. The first member settles alone with every partition.
  auto first = make(kgroup_first, kgroup_first ? "kgroup-1" : "librdkafka-1");
  std::vector<member*> group_members{first.get()};
  require_settled(group_members);
  if (!kgroup_first) check_leader(group_members, *first, strategy);

  // 2. Members of the other client join one at a time; the first stays the leader.
  std::vector<std::unique_ptr<member>> joiners;
  const int joiner_count = cooperative ? 2 : 1;
  for (int j = 0; j < joiner_count; ++j) {
    std::map<member*, partition_set> before;
    std::size_t revoked_before = 0;
    for (auto* m : group_members) {
      before[m] = m->owned();
      revoked_before += m->revoked_total();
    }
    joiners.push_back(make(!kgroup_first, std::string(kgroup_first ? "librdkafka-" : "kgroup-") + std::to_string(j + 2)));
    group_members.push_back(joiners.back().get());
    require_settled(group_members);
    check_leader(group_members, *first, strategy);
    for (auto* m : group_members) {
      if (m->r) CHECK(m->r->rebalance_protocol() == (cooperative ? "COOPERATIVE" : "EAGER"));
    }
    std::size_t revoked = 0;
    for (auto& [m, owned] : before) revoked += m->revoked_total();
    revoked -= revoked_before;
    if (cooperative) {
      // Only what moved to the newcomer was revoked, and everyone else kept a subset of what it had.
      CHECK(revoked == joiners.back()->owned().size());
      for (auto& [m, owned] : before) {
        INFO(m->name() << " after " << joiners.back()->name() << " joined");
        for (const auto& tp : m->owned()) CHECK(owned.count(tp) == 1);
      }
    } else {
      // Everyone gave back everything (at least once: a rebalance the mock repeats revokes again).
      CHECK(revoked >= static_cast<std::size_t>(partition_count));
    }
    check_no_overlaps(t);
  }

  // 3. The first joiner leaves cleanly; the others take its partitions.
  member& leaver = *joiners.front();
  std::map<member*, partition_set> before;
  std::size_t revoked_before = 0;
  std::vector<member*> remaining;
  for (auto* m : group_members) {
    if (m == &leaver) continue;
    remaining.push_back(m);
    before[m] = m->owned();
    revoked_before += m->revoked_total();
  }
  leaver.stop();
  require_settled(remaining);
  if (std::any_of(remaining.begin(), remaining.end(), [](member* m) { return m->r != nullptr; })) {
    check_leader(remaining, *first, strategy);
  }
  std::size_t revoked = 0;
  std::size_t owned_before = 0;
  for (auto& [m, owned] : before) {
    revoked += m->revoked_total();
    owned_before += owned.size();
  }
  revoked -= revoked_before;
  if (cooperative) {
    CHECK(revoked == 0);  // they keep what they had and gain the leaver's partitions
    for (auto& [m, owned] : before) {
      const auto now = m->owned();
      for (const auto& tp : owned) CHECK(now.count(tp) == 1);
    }
  } else {
    CHECK(revoked >= owned_before);
  }

  // 4. Everyone closes; nobody saw an error or lost a partition.
  for (auto it = remaining.rbegin(); it != remaining.rend(); ++it) (*it)->stop();
  check_no_overlaps(t);
  check_revokes(t, cooperative);
}

}  // namespace

TEST_CASE("interop range: kgroup leads; a librdkafka consumer joins and leaves", "[interop]") {
  run_mixed_group("range", true);
}

TEST_CASE("interop range: librdkafka leads; a kgroup consumer joins and leaves", "[interop]") {
  run_mixed_group("range", false);
}

TEST_CASE("interop cooperative-sticky: kgroup leads; two librdkafka consumers join and one leaves", "[interop]") {
  run_mixed_group("cooperative-sticky", true);
}

TEST_CASE("interop cooperative-sticky: librdkafka leads; two kgroup consumers join and one leaves", "[interop]") {
  run_mixed_group("cooperative-sticky", false);
}
