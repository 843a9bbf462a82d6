// Partition assignors: the seed examples, then randomized properties over many generated
// groups (coverage, balance, stickiness, cooperative safety, determinism), rack awareness, the old
// sticky user-data format, generation conflicts and malformed consumer-protocol bytes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "assign/consumer_protocol.hpp"
#include "assign/model.hpp"
#include "assign/sticky_user_data.hpp"
#include "assign/validate.hpp"
#include "kgroup/assignor.hpp"

using namespace kgroup;

namespace {

using bytes = std::vector<std::uint8_t>;

ClusterMetadata cluster_of(std::vector<std::pair<std::string, int>> topics) {
  ClusterMetadata c;
  for (auto& [name, n] : topics) c.topics.push_back({name, n, {}});
  return c;
}

MemberSubscription member(std::string id, std::vector<std::string> topics) {
  MemberSubscription m;
  m.member_id = std::move(id);
  m.topics = std::move(topics);
  return m;
}

// "t0p1" style names.
std::vector<TopicPartitions> parse(std::vector<std::string> names) {
  std::map<std::string, std::vector<std::int32_t>> by_topic;
  for (const auto& n : names) {
    const auto p = n.rfind('p');
    by_topic[n.substr(0, p)].push_back(std::stoi(n.substr(p + 1)));
  }
  std::vector<TopicPartitions> out;
  for (auto& [t, ps] : by_topic) {
    std::sort(ps.begin(), ps.end());
    out.push_back({t, ps});
  }
  return out;
}

std::vector<std::string> names(const std::vector<TopicPartitions>& tps) {
  std::vector<std::string> out;
  for (const auto& tp : tps) {
    for (auto p : tp.partitions) out.push_back(tp.topic + "p" + std::to_string(p));
  }
  std::sort(out.begin(), out.end());
  return out;
}

const MemberAssignment& of(const GroupAssignment& a, const std::string& id) {
  for (const auto& m : a.members) {
    if (m.member_id == id) return m;
  }
  throw std::logic_error("no assignment for " + id);
}

std::vector<std::string> got(const GroupAssignment& a, const std::string& id) { return names(of(a, id).partitions); }

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool contains_all(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  return std::includes(have.begin(), have.end(), want.begin(), want.end());
}

using partition_key = std::pair<std::string, std::int32_t>;

std::map<partition_key, std::string> owners(const GroupAssignment& a) {
  std::map<partition_key, std::string> out;
  for (const auto& m : a.members) {
    for (const auto& tp : m.partitions) {
      for (auto p : tp.partitions) out[{tp.topic, p}] = m.member_id;
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Seed examples

TEST_CASE("range: Kafka's example", "[assign]") {
  const auto cluster = cluster_of({{"t0", 3}, {"t1", 3}});
  GroupSubscription g{{member("C0", {"t0", "t1"}), member("C1", {"t0", "t1"})}};
  const auto result = make_range_assignor()->assign(cluster, g);
  CHECK(got(result, "C0") == sorted({"t0p0", "t0p1", "t1p0", "t1p1"}));
  CHECK(got(result, "C1") == sorted({"t0p2", "t1p2"}));
  // One entry per member, in input order, grouped per topic.
  REQUIRE(result.members.size() == 2);
  CHECK(result.members[0].member_id == "C0");
  CHECK(result.members[0].partitions == std::vector<TopicPartitions>{{"t0", {0, 1}}, {"t1", {0, 1}}});
}

TEST_CASE("range: static members are ordered by group.instance.id", "[assign]") {
  const auto cluster = cluster_of({{"t0", 3}});
  auto a = member("zzz", {"t0"});
  a.group_instance_id = "I0";
  auto b = member("aaa", {"t0"});
  b.group_instance_id = "I1";
  const auto result = make_range_assignor()->assign(cluster, {{b, a}});
  CHECK(got(result, "zzz") == sorted({"t0p0", "t0p1"}));
  CHECK(got(result, "aaa") == sorted({"t0p2"}));
}

TEST_CASE("roundrobin: unequal subscriptions (Kafka's example)", "[assign]") {
  const auto cluster = cluster_of({{"t0", 1}, {"t1", 2}, {"t2", 3}});
  GroupSubscription g{{member("C0", {"t0"}), member("C1", {"t0", "t1"}), member("C2", {"t0", "t1", "t2"})}};
  const auto result = make_roundrobin_assignor()->assign(cluster, g);
  CHECK(got(result, "C0") == sorted({"t0p0"}));
  CHECK(got(result, "C1") == sorted({"t1p0"}));
  CHECK(got(result, "C2") == sorted({"t1p1", "t2p0", "t2p1", "t2p2"}));
}

TEST_CASE("roundrobin: equal subscriptions deal sorted partitions to sorted members in turn", "[assign]") {
  const auto cluster = cluster_of({{"t0", 2}, {"t1", 2}, {"t2", 2}, {"t3", 2}});
  const std::vector<std::string> all{"t0", "t1", "t2", "t3"};
  GroupSubscription g{{member("C2", all), member("C0", all), member("C1", all)}};
  const auto result = make_roundrobin_assignor()->assign(cluster, g);
  CHECK(got(result, "C0") == sorted({"t0p0", "t1p1", "t3p0"}));
  CHECK(got(result, "C1") == sorted({"t0p1", "t2p0", "t3p1"}));
  CHECK(got(result, "C2") == sorted({"t1p0", "t2p1"}));
}

namespace {

// Kafka's sticky example: C0 owns t0p0 t1p1 t3p0, C1 owns t0p1 t2p0 t3p1, C2 owns t1p0 t2p1.
void check_sticky_seed(const PartitionAssignor& assignor, bool eager) {
  const auto cluster = cluster_of({{"t0", 2}, {"t1", 2}, {"t2", 2}, {"t3", 2}});
  const std::vector<std::string> all{"t0", "t1", "t2", "t3"};
  const std::map<std::string, std::vector<std::string>> before{
      {"C0", {"t0p0", "t1p1", "t3p0"}}, {"C1", {"t0p1", "t2p0", "t3p1"}}, {"C2", {"t1p0", "t2p1"}}};
  auto subscribe = [&](const std::string& id) {
    MemberState state{all, parse(before.at(id)), 7, std::nullopt};
    auto m = member(id, all);
    m.user_data = assignor.user_data(state);
    if (!eager) m.owned_partitions = state.owned_partitions;
    m.generation = 7;
    return m;
  };

  // Everyone present: nothing moves.
  const auto same = assignor.assign(cluster, {{subscribe("C0"), subscribe("C1"), subscribe("C2")}});
  for (const auto& [id, ps] : before) CHECK(got(same, id) == sorted(ps));

  // C1 leaves: C0 and C2 keep what they had and split C1's three partitions, four each.
  const auto result = assignor.assign(cluster, {{subscribe("C2"), subscribe("C0")}});
  const auto c0 = got(result, "C0"), c2 = got(result, "C2");
  CHECK(contains_all(c0, sorted(before.at("C0"))));
  CHECK(contains_all(c2, sorted(before.at("C2"))));
  CHECK(c0.size() == 4);
  CHECK(c2.size() == 4);
  std::vector<std::string> all_got = c0;
  all_got.insert(all_got.end(), c2.begin(), c2.end());
  CHECK(sorted(all_got).size() == 8);
}

}  // namespace

TEST_CASE("sticky: Kafka's example, a member leaves", "[assign]") {
  check_sticky_seed(*make_sticky_assignor(), true);
  check_sticky_seed(*make_cooperative_sticky_assignor(), false);
}

TEST_CASE("sticky: fresh assignment is balanced", "[assign]") {
  const auto cluster = cluster_of({{"t0", 2}, {"t1", 2}, {"t2", 2}, {"t3", 2}});
  const std::vector<std::string> all{"t0", "t1", "t2", "t3"};
  for (auto assignor : {make_sticky_assignor(), make_cooperative_sticky_assignor()}) {
    const auto result = assignor->assign(cluster, {{member("C0", all), member("C1", all), member("C2", all)}});
    std::multiset<std::size_t> sizes;
    for (const auto& m : result.members) sizes.insert(names(m.partitions).size());
    CHECK(sizes == std::multiset<std::size_t>{2, 3, 3});
    CHECK(owners(result).size() == 8);
  }
}

// ---------------------------------------------------------------------------------------------
// Interface

TEST_CASE("assignor names, protocols and lookup", "[assign]") {
  CHECK(make_assignor("range")->name() == "range");
  CHECK(make_assignor("roundrobin")->name() == "roundrobin");
  CHECK(make_assignor("sticky")->name() == "sticky");
  CHECK(make_assignor("cooperative-sticky")->name() == "cooperative-sticky");
  CHECK(make_assignor("uniform") == nullptr);
  CHECK(make_assignor("") == nullptr);
  using P = RebalanceProtocol;
  CHECK(make_range_assignor()->supported_protocols() == std::vector<P>{P::eager});
  CHECK(make_sticky_assignor()->supported_protocols() == std::vector<P>{P::eager});
  CHECK(make_cooperative_sticky_assignor()->supported_protocols() == std::vector<P>{P::cooperative, P::eager});
  CHECK_FALSE(make_range_assignor()->user_data({}).has_value());
  CHECK_FALSE(make_sticky_assignor()->user_data({}).has_value());  // no assignment yet
  CHECK(make_cooperative_sticky_assignor()->user_data({{}, {}, 5, {}}) == bytes{0, 0, 0, 5});
}

TEST_CASE("a user-defined assignor plugs in", "[assign]") {
  // Everything to the first member in member order.
  class all_to_first final : public PartitionAssignor {
   public:
    std::string name() const override { return "all-to-first"; }
    GroupAssignment assign(const ClusterMetadata& cluster, const GroupSubscription& group) const override {
      GroupAssignment out;
      const MemberSubscription* first = nullptr;
      for (const auto& m : group.members) {
        if (first == nullptr || m.member_id < first->member_id) first = &m;
      }
      if (first == nullptr) return out;
      auto& a = out.members.emplace_back();
      a.member_id = first->member_id;
      for (const auto& t : cluster.topics) {
        TopicPartitions tp{t.topic, {}};
        for (std::int32_t p = 0; p < t.partition_count; ++p) tp.partitions.push_back(p);
        a.partitions.push_back(tp);
      }
      return out;
    }
  };
  const std::shared_ptr<PartitionAssignor> custom = std::make_shared<all_to_first>();
  CHECK(custom->supported_protocols() == std::vector<RebalanceProtocol>{RebalanceProtocol::eager});
  CHECK_FALSE(custom->user_data({}).has_value());
  const auto cluster = cluster_of({{"t0", 2}});
  const GroupSubscription g{{member("b", {"t0"}), member("a", {"t0"})}};
  const auto result = custom->assign(cluster, g);
  CHECK(assign::check_assignment(cluster, g, result, RebalanceProtocol::eager).empty());
  // The checker catches a bad custom result.
  GroupAssignment bad = result;
  bad.members.push_back({"b", {{"t0", {1}}}, std::nullopt});
  CHECK_FALSE(assign::check_assignment(cluster, g, bad, RebalanceProtocol::eager).empty());
  bad.members.back() = {"ghost", {}, std::nullopt};
  CHECK_FALSE(assign::check_assignment(cluster, g, bad, RebalanceProtocol::eager).empty());
  bad.members.back() = {"b", {{"t0", {2}}}, std::nullopt};
  CHECK_FALSE(assign::check_assignment(cluster, g, bad, RebalanceProtocol::eager).empty());
}

TEST_CASE("caller errors throw; member input is tolerated", "[assign]") {
  for (auto assignor : {make_range_assignor(), make_roundrobin_assignor(), make_sticky_assignor(),
                        make_cooperative_sticky_assignor()}) {
    INFO(assignor->name());
    const auto cluster = cluster_of({{"t0", 4}});
    CHECK_THROWS_AS(assignor->assign(cluster, {{member("a", {"t0"}), member("a", {"t0"})}}), std::invalid_argument);
    CHECK_THROWS_AS(assignor->assign(cluster_of({{"t0", 1}, {"t0", 2}}), {{member("a", {"t0"})}}),
                    std::invalid_argument);
    CHECK_THROWS_AS(assignor->assign(cluster_of({{"t0", -1}}), {{member("a", {"t0"})}}), std::invalid_argument);
    auto bad_replicas = cluster;
    bad_replicas.topics[0].replicas = {{1}, {2}};
    CHECK_THROWS_AS(assignor->assign(bad_replicas, {{member("a", {"t0"})}}), std::invalid_argument);

    // No members, no topics, unknown topics, empty topics: empty results, no throw.
    CHECK(assignor->assign(cluster, {}).members.empty());
    auto r = assignor->assign(cluster_of({{"t0", 0}}), {{member("a", {"t0", "nope", "t0"})}});
    REQUIRE(r.members.size() == 1);
    CHECK(r.members[0].partitions.empty());

    // Garbage from members: bad owned partitions, garbage user data, odd generations.
    auto m = member("a", {"t0", "t0"});
    m.owned_partitions = {{"t0", {-1, 4, 99, 0, 0}}, {"nope", {0}}, {"", {}}};
    m.user_data = bytes{0xff, 0xff, 0xff, 0xff, 0xff, 1, 2};
    m.generation = std::numeric_limits<std::int32_t>::min();
    auto n = member("b", {"t0"});
    n.user_data = bytes{0, 0, 0, 1, 0, 2, 't'};
    n.generation = std::numeric_limits<std::int32_t>::max();
    r = assignor->assign(cluster, {{m, n}});
    CHECK(owners(r).size() == 4);
  }
}

// ---------------------------------------------------------------------------------------------
// Randomized properties

namespace {

struct sim_member {
  std::string id;
  std::optional<std::string> instance;
  std::vector<std::string> topics;
  std::optional<std::string> rack;
  std::vector<TopicPartitions> owned;  // what it holds now
  std::int32_t generation = -1;
};

struct world {
  ClusterMetadata cluster;
  std::vector<sim_member> members;
  bool uniform = true;
};

const std::vector<std::string> rack_names{"a", "b", "c"};

std::vector<std::string> random_subset(std::mt19937& rng, const ClusterMetadata& c) {
  std::vector<std::string> out;
  for (const auto& t : c.topics) {
    if (rng() % 2 == 0) out.push_back(t.topic);
  }
  if (out.empty()) out.push_back(c.topics[rng() % c.topics.size()].topic);
  if (rng() % 8 == 0) out.push_back("unknown-topic");
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

std::vector<std::string> all_topics(const ClusterMetadata& c) {
  std::vector<std::string> out;
  for (const auto& t : c.topics) out.push_back(t.topic);
  return out;
}

sim_member random_member(std::mt19937& rng, const world& w, int serial) {
  sim_member m;
  // Ids whose order differs from creation order.
  m.id = "m" + std::to_string(rng() % 1000) + "-" + std::to_string(serial);
  if (rng() % 4 == 0) m.instance = "i" + std::to_string(rng() % 1000) + "-" + std::to_string(serial);
  m.topics = w.uniform ? all_topics(w.cluster) : random_subset(rng, w.cluster);
  if (rng() % 3 != 0) m.rack = rack_names[rng() % rack_names.size()];
  return m;
}

world random_world(std::mt19937& rng, bool uniform, bool racks) {
  world w;
  w.uniform = uniform;
  const int topics = 1 + static_cast<int>(rng() % 6);
  for (int t = 0; t < topics; ++t) {
    TopicMetadata tm{"topic" + std::to_string(t), static_cast<std::int32_t>(rng() % 13), {}};
    if (racks) {
      for (int p = 0; p < tm.partition_count; ++p) {
        std::vector<std::int32_t> replicas;
        const int rf = 1 + static_cast<int>(rng() % 2);
        for (int r = 0; r < rf; ++r) replicas.push_back(static_cast<std::int32_t>(rng() % 6));
        tm.replicas.push_back(replicas);
      }
    }
    w.cluster.topics.push_back(tm);
  }
  if (racks) {
    for (std::int32_t b = 0; b < 6; ++b) {
      w.cluster.brokers.push_back({b, b == 5 ? std::nullopt : std::optional<std::string>(rack_names[b % 3])});
    }
  }
  const int members = 1 + static_cast<int>(rng() % 9);
  for (int i = 0; i < members; ++i) w.members.push_back(random_member(rng, w, i));
  return w;
}

GroupSubscription subscriptions(const PartitionAssignor& a, const world& w, bool eager) {
  GroupSubscription g;
  for (const auto& m : w.members) {
    MemberSubscription s;
    s.member_id = m.id;
    s.group_instance_id = m.instance;
    s.topics = m.topics;
    s.rack = m.rack;
    s.generation = m.generation;
    s.user_data = a.user_data({m.topics, m.owned, m.generation, m.rack});
    if (!eager) s.owned_partitions = m.owned;  // eager members revoked everything to rejoin
    g.members.push_back(std::move(s));
  }
  return g;
}

// Every partition of a topic someone subscribes to.
std::set<partition_key> subscribed_partitions(const world& w) {
  std::set<std::string> wanted;
  for (const auto& m : w.members) wanted.insert(m.topics.begin(), m.topics.end());
  std::set<partition_key> out;
  for (const auto& t : w.cluster.topics) {
    if (!wanted.count(t.topic)) continue;
    for (std::int32_t p = 0; p < t.partition_count; ++p) out.insert({t.topic, p});
  }
  return out;
}

std::map<std::string, std::size_t> loads(const GroupAssignment& a) {
  std::map<std::string, std::size_t> out;
  for (const auto& m : a.members) out[m.member_id] = names(m.partitions).size();
  return out;
}

// Balance as Kafka defines it: with identical subscriptions sizes differ by at most one; with
// mixed ones no partition could move to a subscriber of its topic with two or more fewer.
std::string balance_error(const world& w, const GroupAssignment& a) {
  const auto load = loads(a);
  if (w.uniform) {
    std::size_t lo = SIZE_MAX, hi = 0;
    for (const auto& [id, n] : load) {
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    if (!load.empty() && hi - lo > 1) return "uniform spread " + std::to_string(hi - lo);
    return {};
  }
  for (const auto& m : a.members) {
    for (const auto& tp : m.partitions) {
      for (const auto& other : w.members) {
        if (std::find(other.topics.begin(), other.topics.end(), tp.topic) == other.topics.end()) continue;
        if (load.at(m.member_id) > load.at(other.id) + 1) {
          return "moving " + tp.topic + " from " + m.member_id + " to " + other.id + " would improve balance";
        }
      }
    }
  }
  return {};
}

std::map<std::string, std::set<partition_key>> holdings(const world& w) {
  std::map<std::string, std::set<partition_key>> out;
  for (const auto& m : w.members) {
    auto& s = out[m.id];
    for (const auto& tp : m.owned) {
      for (auto p : tp.partitions) s.insert({tp.topic, p});
    }
  }
  return out;
}

// The fewest partitions that must leave current members when all subscribe to the same topics:
// quotas are floor(P/M) or floor(P/M)+1 (P mod M of them), and each member owning more than
// floor(P/M) can keep one more while such quotas last.
std::size_t minimal_moves(const world& w, const std::set<partition_key>& universe) {
  if (w.members.empty() || universe.empty()) return 0;
  const std::size_t floor = universe.size() / w.members.size();
  std::size_t extra = universe.size() % w.members.size();
  std::size_t moves = 0;
  for (const auto& [id, held] : holdings(w)) {
    std::size_t valid = 0;
    for (const auto& tp : held) valid += universe.count(tp);
    if (valid > floor) {
      moves += valid - floor;
      if (extra > 0) {
        --extra;
        --moves;
      }
    }
  }
  return moves;
}

// Partitions some member holds and is not assigned now.
std::size_t revoked_count(const world& w, const GroupAssignment& a) {
  const auto now = owners(a);
  std::size_t n = 0;
  for (const auto& [id, held] : holdings(w)) {
    for (const auto& tp : held) {
      auto it = now.find(tp);
      if (it == now.end() || it->second != id) ++n;
    }
  }
  return n;
}

void apply(world& w, const GroupAssignment& a, std::int32_t generation) {
  for (auto& m : w.members) {
    m.owned = of(a, m.id).partitions;
    m.generation = generation;
  }
}

std::string determinism_error(const PartitionAssignor& a, const world& w, const GroupSubscription& g,
                              const GroupAssignment& expected, std::mt19937& rng) {
  GroupSubscription shuffled = g;
  std::shuffle(shuffled.members.begin(), shuffled.members.end(), rng);
  auto cluster = w.cluster;
  std::shuffle(cluster.topics.begin(), cluster.topics.end(), rng);
  const auto again = a.assign(cluster, shuffled);
  for (const auto& m : shuffled.members) {
    if (of(again, m.member_id).partitions != of(expected, m.member_id).partitions) {
      return "member order changed the result of " + m.member_id;
    }
  }
  // Entries come back in input order.
  for (std::size_t i = 0; i < shuffled.members.size(); ++i) {
    if (again.members[i].member_id != shuffled.members[i].member_id) return "result not in input order";
  }
  return {};
}

// Returns whether the group changed.
bool mutate(std::mt19937& rng, world& w, int& serial) {
  switch (rng() % 6) {
    case 0:  // a member leaves
      if (w.members.size() <= 1) return false;
      w.members.erase(w.members.begin() + static_cast<std::ptrdiff_t>(rng() % w.members.size()));
      return true;
    case 1:  // a member joins
      w.members.push_back(random_member(rng, w, ++serial));
      return true;
    case 2:  // partitions added
      w.cluster.topics[rng() % w.cluster.topics.size()].partition_count += static_cast<std::int32_t>(1 + rng() % 4);
      for (auto& t : w.cluster.topics) {
        if (!t.replicas.empty()) t.replicas.resize(static_cast<std::size_t>(t.partition_count), {0});
      }
      return true;
    case 3:  // a subscription changes
      if (w.uniform) return false;
      w.members[rng() % w.members.size()].topics = random_subset(rng, w.cluster);
      return true;
    default:  // nothing changes: a rebalance for no reason must move nothing
      return false;
  }
}

struct sim_stats {
  int groups = 0, rebalances = 0, follow_ups = 0, moves = 0;
};

// Runs a group through several generations with `assignor`, checking every property each time.
void simulate(const PartitionAssignor& assignor, std::uint32_t seed, bool uniform, bool racks, sim_stats& stats) {
  std::mt19937 rng(seed);
  world w = random_world(rng, uniform, racks);
  const bool cooperative = assignor.name() == "cooperative-sticky";
  const bool sticky = assignor.name() == "sticky" || cooperative;
  const bool eager = !cooperative;
  const auto protocol = cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager;
  int serial = 100;
  std::int32_t generation = 0;
  ++stats.groups;
  for (int step = 0; step < 8; ++step) {
    INFO("seed " << seed << " step " << step << " uniform " << uniform << " racks " << racks);
    const bool steady = step > 0 && !mutate(rng, w, serial);
    const auto universe = subscribed_partitions(w);
    const std::size_t least_moves = minimal_moves(w, universe);

    auto group = subscriptions(assignor, w, eager);
    auto result = assignor.assign(w.cluster, group);
    ++stats.rebalances;
    auto err = assign::check_assignment(w.cluster, group, result, protocol);
    REQUIRE(err.empty());
    REQUIRE(result.members.size() == w.members.size());
    err = determinism_error(assignor, w, group, result, rng);
    REQUIRE(err.empty());
    const std::size_t revoked = revoked_count(w, result);
    stats.moves += static_cast<int>(revoked);
    if (sticky && uniform) {
      // Stickiness: exactly the moves balance requires.
      INFO("revoked " << revoked << " minimal " << least_moves);
      REQUIRE(revoked == least_moves);
    }
    if (sticky && steady) REQUIRE(revoked == 0);

    // Cooperative: members revoke what they lost, then the follow-up round hands out what was
    // withheld; it must revoke nothing more and leave nothing unassigned.
    ++generation;
    apply(w, result, generation);
    int rounds = 0;
    while (cooperative && owners(result).size() < universe.size()) {
      // Uniform groups settle in one follow-up; mixed ones may need another when balancing
      // moves a partition again.
      REQUIRE(++rounds <= (uniform ? 1 : 3));
      group = subscriptions(assignor, w, eager);
      result = assignor.assign(w.cluster, group);
      ++stats.follow_ups;
      err = assign::check_assignment(w.cluster, group, result, protocol);
      REQUIRE(err.empty());
      if (uniform) REQUIRE(revoked_count(w, result) == 0);
      ++generation;
      apply(w, result, generation);
    }

    // Coverage: every subscribed partition exactly once (check_assignment proved at most once).
    REQUIRE(owners(result).size() == universe.size());
    if (sticky) {
      err = balance_error(w, result);
      REQUIRE(err.empty());
    }
    if (assignor.name() == "range" || assignor.name() == "roundrobin") {
      // Not sticky, but a rebalance with nothing changed reproduces the same result.
      if (steady) REQUIRE(revoked == 0);
    }
  }
}

}  // namespace

TEST_CASE("properties over random groups: sticky assignors", "[assign]") {
  sim_stats stats;
  for (auto assignor : {make_cooperative_sticky_assignor(), make_sticky_assignor()}) {
    for (std::uint32_t seed = 1; seed <= 1000; ++seed) {
      simulate(*assignor, seed, true, false, stats);
      simulate(*assignor, seed, false, false, stats);
      simulate(*assignor, seed, true, true, stats);
      simulate(*assignor, seed, false, true, stats);
    }
  }
  CHECK(stats.groups == 8000);
  CHECK(stats.follow_ups > 100);  // the cooperative two-phase hand-over was exercised
  CHECK(stats.moves > 100);
}

TEST_CASE("properties over random groups: range and roundrobin", "[assign]") {
  sim_stats stats;
  for (auto assignor : {make_range_assignor(), make_roundrobin_assignor()}) {
    for (std::uint32_t seed = 1; seed <= 500; ++seed) {
      simulate(*assignor, seed, true, false, stats);
      simulate(*assignor, seed, false, seed % 2 == 0, stats);
    }
  }
  CHECK(stats.groups == 2000);
}

TEST_CASE("range and roundrobin balance identical subscriptions", "[assign]") {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    world w = random_world(rng, true, false);
    for (auto assignor : {make_range_assignor(), make_roundrobin_assignor()}) {
      const auto result = assignor->assign(w.cluster, subscriptions(*assignor, w, true));
      if (assignor->name() == "roundrobin") {
        REQUIRE(balance_error(w, result).empty());
        continue;
      }
      // Range balances each topic separately.
      for (const auto& t : w.cluster.topics) {
        std::size_t lo = SIZE_MAX, hi = 0;
        for (const auto& m : result.members) {
          std::size_t n = 0;
          for (const auto& tp : m.partitions) n += tp.topic == t.topic ? tp.partitions.size() : 0;
          lo = std::min(lo, n);
          hi = std::max(hi, n);
        }
        REQUIRE(hi - lo <= 1);
      }
    }
  }
}

TEST_CASE("sticky: larger mixed groups stay balanced and sticky", "[assign]") {
  // 60 topics x 1-400 partitions, 150 members subscribed to random thirds of the topics.
  std::mt19937 rng(42);
  world w;
  w.uniform = false;
  for (int t = 0; t < 60; ++t) {
    w.cluster.topics.push_back({"topic-" + std::to_string(t), static_cast<std::int32_t>(1 + rng() % 400), {}});
  }
  auto third = [&] {
    std::vector<std::string> s;
    for (const auto& t : w.cluster.topics) {
      if (rng() % 3 == 0) s.push_back(t.topic);
    }
    if (s.empty()) s.push_back(w.cluster.topics[0].topic);
    return s;
  };
  for (int i = 0; i < 150; ++i) w.members.push_back({"member-" + std::to_string(i), {}, third(), {}, {}, -1});
  const auto assignor = make_cooperative_sticky_assignor();
  auto result = assignor->assign(w.cluster, subscriptions(*assignor, w, false));
  REQUIRE(balance_error(w, result).empty());
  REQUIRE(owners(result).size() == subscribed_partitions(w).size());
  apply(w, result, 1);

  // Same group again: nothing moves.
  result = assignor->assign(w.cluster, subscriptions(*assignor, w, false));
  REQUIRE(revoked_count(w, result) == 0);

  // A member joins: it gets about its share, and moves stay of that order (with mixed
  // subscriptions balance can cascade: a member that gave a partition may in turn take one from a
  // neighbour that now has two more).
  w.members.push_back({"member-new", {}, third(), {}, {}, -1});
  result = assignor->assign(w.cluster, subscriptions(*assignor, w, false));
  const auto moved = revoked_count(w, result);
  const auto share = subscribed_partitions(w).size() / w.members.size();
  CHECK(moved > 0);
  CHECK(moved <= 2 * share);
  REQUIRE(assign::check_assignment(w.cluster, subscriptions(*assignor, w, false), result,
                                   RebalanceProtocol::cooperative)
              .empty());
  apply(w, result, 2);
  result = assignor->assign(w.cluster, subscriptions(*assignor, w, false));
  REQUIRE(revoked_count(w, result) == 0);
  REQUIRE(balance_error(w, result).empty());
  REQUIRE(owners(result).size() == subscribed_partitions(w).size());
}

TEST_CASE("sticky: rebalancing a huge topic with mixed subscriptions stays fast", "[assign]") {
  // A owns all 300,000 partitions of t0; B (also subscribed to a small t1) and C join. Moving
  // ~200,000 partitions must not rescan the topic per move.
  ClusterMetadata cluster = cluster_of({{"t0", 300000}, {"t1", 2}});
  auto a = member("A", {"t0"});
  a.owned_partitions = {{"t0", {}}};
  for (std::int32_t p = 0; p < 300000; ++p) a.owned_partitions[0].partitions.push_back(p);
  a.generation = 1;
  const GroupSubscription g{{a, member("B", {"t0", "t1"}), member("C", {"t0"})}};
  for (auto assignor : {make_sticky_assignor(), make_cooperative_sticky_assignor()}) {
    const auto r = assignor->assign(cluster, g);
    const auto a_size = names(of(r, "A").partitions).size();
    const auto b_got = names(of(r, "B").partitions);
    CHECK(std::count_if(b_got.begin(), b_got.end(), [](const std::string& n) { return n.rfind("t1", 0) == 0; }) == 2);
    if (assignor->name() == "sticky") {
      std::multiset<std::size_t> sizes{a_size, b_got.size(), names(of(r, "C").partitions).size()};
      CHECK(sizes == std::multiset<std::size_t>{100000, 100001, 100001});
    } else {
      // The moved partitions wait for A to revoke them.
      CHECK((a_size == 100000 || a_size == 100001));
      CHECK(b_got.size() == 2);
      CHECK(of(r, "C").partitions.empty());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Cooperative two-phase hand-over

TEST_CASE("cooperative-sticky: a joining member gets moved partitions in the follow-up round", "[assign]") {
  const auto assignor = make_cooperative_sticky_assignor();
  const auto cluster = cluster_of({{"t0", 4}});
  auto a = member("A", {"t0"});
  a.owned_partitions = parse({"t0p0", "t0p1", "t0p2", "t0p3"});
  a.generation = 3;
  auto b = member("B", {"t0"});
  GroupSubscription g{{a, b}};
  auto round1 = assignor->assign(cluster, g);
  CHECK(got(round1, "A").size() == 2);
  CHECK(got(round1, "B").empty());  // withheld until A revoked them
  CHECK(assign::check_assignment(cluster, g, round1, RebalanceProtocol::cooperative).empty());

  g.members[0].owned_partitions = of(round1, "A").partitions;
  g.members[0].generation = 4;
  auto round2 = assignor->assign(cluster, g);
  CHECK(got(round2, "A") == got(round1, "A"));
  CHECK(got(round2, "B").size() == 2);

  // The eager sticky assignor hands them over at once (members revoked everything already).
  const auto eager = make_sticky_assignor();
  GroupSubscription ge{{member("A", {"t0"}), member("B", {"t0"})}};
  ge.members[0].user_data = eager->user_data({{"t0"}, parse({"t0p0", "t0p1", "t0p2", "t0p3"}), 3, {}});
  const auto r = eager->assign(cluster, ge);
  CHECK(got(r, "A").size() == 2);
  CHECK(got(r, "B").size() == 2);
  CHECK(contains_all(sorted({"t0p0", "t0p1", "t0p2", "t0p3"}), got(r, "A")));
}

TEST_CASE("cooperative-sticky: a partition of a topic its owner dropped is withheld", "[assign]") {
  const auto assignor = make_cooperative_sticky_assignor();
  const auto cluster = cluster_of({{"t0", 2}, {"t1", 2}});
  auto a = member("A", {"t1"});  // used to subscribe to t0 too
  a.owned_partitions = parse({"t0p0", "t0p1", "t1p0"});
  a.generation = 2;
  auto b = member("B", {"t0", "t1"});
  b.owned_partitions = parse({"t1p1"});
  b.generation = 2;
  GroupSubscription g{{a, b}};
  // The balanced target is A: t1p0 t1p1, B: t0p0 t0p1. Every partition changing owner waits:
  // t0 for A to revoke it, t1p1 for B to revoke it.
  auto r = assignor->assign(cluster, g);
  CHECK(got(r, "A") == sorted({"t1p0"}));
  CHECK(got(r, "B").empty());
  CHECK(assign::check_assignment(cluster, g, r, RebalanceProtocol::cooperative).empty());
  for (auto& m : g.members) {
    m.owned_partitions = of(r, m.member_id).partitions;
    m.generation = 3;
  }
  r = assignor->assign(cluster, g);
  CHECK(got(r, "A") == sorted({"t1p0", "t1p1"}));
  CHECK(got(r, "B") == sorted({"t0p0", "t0p1"}));
}

// ---------------------------------------------------------------------------------------------
// Generations

TEST_CASE("conflicting claims: the higher generation wins", "[assign]") {
  const auto cluster = cluster_of({{"t0", 2}});
  for (auto assignor : {make_cooperative_sticky_assignor(), make_sticky_assignor()}) {
    INFO(assignor->name());
    const bool eager = assignor->name() == "sticky";
    auto claim = [&](std::string id, std::vector<std::string> owned, std::int32_t generation) {
      auto m = member(std::move(id), {"t0"});
      MemberState state{{"t0"}, parse(std::move(owned)), generation, std::nullopt};
      m.user_data = assignor->user_data(state);
      if (!eager) m.owned_partitions = state.owned_partitions;
      m.generation = generation;
      return m;
    };
    // B is a zombie from generation 4 still claiming t0p0, which A got in generation 5.
    for (bool swap : {false, true}) {
      GroupSubscription g{{claim("B", {"t0p0", "t0p1"}, 4), claim("A", {"t0p0"}, 5)}};
      if (swap) std::swap(g.members[0], g.members[1]);
      const auto r = assignor->assign(cluster, g);
      CHECK(got(r, "A") == sorted({"t0p0"}));
      CHECK(got(r, "B") == sorted({"t0p1"}));
    }
    // Same generation: neither claim is trusted. Cooperative withholds the partition this round
    // (either member may still hold it); eager assigns it.
    GroupSubscription g{{claim("A", {"t0p0"}, 5), claim("B", {"t0p0", "t0p1"}, 5)}};
    const auto r = assignor->assign(cluster, g);
    CHECK(got(r, "B") == sorted({"t0p1"}));
    if (eager) {
      CHECK(got(r, "A") == sorted({"t0p0"}));
    } else {
      CHECK(got(r, "A").empty());
      CHECK(assign::check_assignment(cluster, g, r, RebalanceProtocol::cooperative).empty());
    }
  }
}

TEST_CASE("cooperative-sticky reads the generation from user data when the subscription has none", "[assign]") {
  // Subscription v1 members (no generation field), Java-style 4-byte generation user data.
  const auto assignor = make_cooperative_sticky_assignor();
  const auto cluster = cluster_of({{"t0", 2}});
  auto a = member("A", {"t0"});
  a.owned_partitions = parse({"t0p0"});
  a.user_data = bytes{0, 0, 0, 9};
  auto b = member("B", {"t0"});
  b.owned_partitions = parse({"t0p0", "t0p1"});
  b.user_data = bytes{0, 0, 0, 8};
  const auto r = assignor->assign(cluster, {{a, b}});
  CHECK(got(r, "A") == sorted({"t0p0"}));
  CHECK(got(r, "B") == sorted({"t0p1"}));

  // librdkafka/franz-go style: StickyAssignorUserData v1 under cooperative-sticky.
  a.user_data = assign::encode_sticky_user_data(parse({"t0p0"}), 9);
  b.user_data = assign::encode_sticky_user_data(parse({"t0p0", "t0p1"}), 8);
  const auto r2 = assignor->assign(cluster, {{a, b}});
  CHECK(got(r2, "A") == sorted({"t0p0"}));
}

// ---------------------------------------------------------------------------------------------
// Racks (KIP-881)

namespace {

// `partitions` partitions of t0, partition p with its single replica on broker p % 3 (rack a, b, c).
ClusterMetadata racked_cluster(int partitions) {
  ClusterMetadata c;
  TopicMetadata t{"t0", partitions, {}};
  for (int p = 0; p < partitions; ++p) t.replicas.push_back({p % 3});
  c.topics.push_back(t);
  c.brokers = {{0, "a"}, {1, "b"}, {2, "c"}};
  return c;
}

MemberSubscription racked(std::string id, std::string rack) {
  auto m = member(std::move(id), {"t0"});
  m.rack = std::move(rack);
  return m;
}

int rack_of_partition(int p) { return p % 3; }

std::size_t misaligned(const GroupAssignment& r, const GroupSubscription& g) {
  std::size_t n = 0;
  for (const auto& m : g.members) {
    const int rack = m.rack ? (*m.rack)[0] - 'a' : -1;
    for (const auto& tp : of(r, m.member_id).partitions) {
      for (auto p : tp.partitions) n += rack_of_partition(p) == rack ? 0 : 1;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("rack-aware: members get same-rack partitions when balance allows", "[assign]") {
  const auto cluster = racked_cluster(30);
  // Members ordered so that plain range/sticky would mix racks.
  const GroupSubscription g{{racked("m1", "c"), racked("m2", "b"), racked("m3", "a"), racked("m4", "c"),
                             racked("m5", "b"), racked("m6", "a")}};
  for (auto assignor : {make_range_assignor(), make_sticky_assignor(), make_cooperative_sticky_assignor()}) {
    INFO(assignor->name());
    const auto r = assignor->assign(cluster, g);
    CHECK(misaligned(r, g) == 0);
    for (const auto& m : r.members) CHECK(names(m.partitions).size() == 5);
  }
  // Without member racks, the plain algorithms: range gives consecutive ranges.
  GroupSubscription plain = g;
  for (auto& m : plain.members) m.rack.reset();
  const auto r = make_range_assignor()->assign(cluster, plain);
  CHECK(of(r, "m1").partitions == std::vector<TopicPartitions>{{"t0", {0, 1, 2, 3, 4}}});
}

TEST_CASE("rack-aware: balance wins over locality", "[assign]") {
  // Every replica in rack b; two members in rack a, one in b: 3 partitions each regardless.
  ClusterMetadata cluster;
  TopicMetadata t{"t0", 9, {}};
  for (int p = 0; p < 9; ++p) t.replicas.push_back({1});
  cluster.topics.push_back(t);
  cluster.brokers = {{0, "a"}, {1, "b"}};
  const GroupSubscription g{{racked("x", "a"), racked("y", "a"), racked("z", "b")}};
  for (auto assignor : {make_range_assignor(), make_sticky_assignor(), make_cooperative_sticky_assignor()}) {
    INFO(assignor->name());
    const auto r = assignor->assign(cluster, g);
    for (const auto& m : r.members) CHECK(names(m.partitions).size() == 3);
    CHECK(owners(r).size() == 9);
  }
}

TEST_CASE("rack-aware sticky: cross-rack partitions move first, and only when balance needs it", "[assign]") {
  const auto cluster = racked_cluster(12);
  const auto assignor = make_cooperative_sticky_assignor();
  // A (rack a) owns everything: 4 aligned (p0 p3 p6 p9), 8 not.
  auto a = racked("A", "a");
  a.owned_partitions = {{"t0", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}};
  a.generation = 1;
  GroupSubscription g{{a, racked("B", "b"), racked("C", "c")}};
  auto r = assignor->assign(cluster, g);
  // A keeps its 4 same-rack partitions; the other 8 are withheld for B and C.
  CHECK(of(r, "A").partitions == std::vector<TopicPartitions>{{"t0", {0, 3, 6, 9}}});
  g.members[0].owned_partitions = of(r, "A").partitions;
  g.members[0].generation = 2;
  r = assignor->assign(cluster, g);
  CHECK(misaligned(r, g) == 0);

  // Stickiness is not traded for locality: a balanced, misaligned group stays as it is.
  GroupSubscription settled{{racked("A", "a"), racked("B", "b"), racked("C", "c")}};
  const std::vector<std::vector<std::int32_t>> held{{1, 2, 4, 5}, {0, 3, 6, 7}, {8, 9, 10, 11}};
  for (std::size_t i = 0; i < 3; ++i) {
    settled.members[i].owned_partitions = {{"t0", held[i]}};
    settled.members[i].generation = 5;
  }
  r = assignor->assign(cluster, settled);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(of(r, settled.members[i].member_id).partitions == std::vector<TopicPartitions>{{"t0", held[i]}});
  }
}

TEST_CASE("rack-aware: random groups get far fewer cross-rack partitions, same balance", "[assign]") {
  // Fresh groups, identical subscriptions, one replica per partition on a random rack, members on
  // random racks: compare with the same group without member racks.
  std::mt19937 rng(11);
  for (auto assignor : {make_range_assignor(), make_sticky_assignor(), make_cooperative_sticky_assignor()}) {
    INFO(assignor->name());
    std::size_t with_racks = 0, without = 0;
    for (int i = 0; i < 200; ++i) {
      ClusterMetadata cluster;
      cluster.brokers = {{0, "a"}, {1, "b"}, {2, "c"}};
      const int topics = 1 + static_cast<int>(rng() % 4);
      for (int t = 0; t < topics; ++t) {
        TopicMetadata tm{"t" + std::to_string(t), static_cast<std::int32_t>(1 + rng() % 30), {}};
        for (int p = 0; p < tm.partition_count; ++p) tm.replicas.push_back({static_cast<std::int32_t>(rng() % 3)});
        cluster.topics.push_back(tm);
      }
      std::vector<std::string> all;
      for (const auto& t : cluster.topics) all.push_back(t.topic);
      GroupSubscription g;
      const int members = 1 + static_cast<int>(rng() % 8);
      for (int m = 0; m < members; ++m) {
        auto s = member("m" + std::to_string(m), all);
        s.rack = rack_names[rng() % 3];
        g.members.push_back(s);
      }
      auto cross_rack = [&](const GroupAssignment& r) {
        std::size_t n = 0;
        for (const auto& m : g.members) {
          const std::int32_t broker = (*m.rack)[0] - 'a';
          for (const auto& tp : of(r, m.member_id).partitions) {
            const auto& meta = *std::find_if(cluster.topics.begin(), cluster.topics.end(),
                                             [&](const TopicMetadata& t) { return t.topic == tp.topic; });
            for (auto p : tp.partitions) n += meta.replicas[static_cast<std::size_t>(p)][0] == broker ? 0 : 1;
          }
        }
        return n;
      };
      const auto aware = assignor->assign(cluster, g);
      GroupSubscription plain = g;
      for (auto& m : plain.members) m.rack.reset();
      const auto blind = assignor->assign(cluster, plain);
      // Racks never cost balance: the same sizes (range: per member; the sticky assignors may
      // give the one-extra quotas to other members).
      std::multiset<std::size_t> aware_sizes, blind_sizes;
      for (const auto& m : g.members) {
        const auto a = names(of(aware, m.member_id).partitions).size();
        const auto b = names(of(blind, m.member_id).partitions).size();
        if (assignor->name() == "range") REQUIRE(a == b);
        aware_sizes.insert(a);
        blind_sizes.insert(b);
      }
      REQUIRE(aware_sizes == blind_sizes);
      REQUIRE(owners(aware).size() == owners(blind).size());
      with_racks += cross_rack(aware);
      without += cross_rack(blind);
    }
    INFO("cross-rack " << with_racks << " with member racks, " << without << " without");
    CHECK(with_racks * 3 < without * 2);
  }
}

// ---------------------------------------------------------------------------------------------
// StickyAssignorUserData (Kafka's format, read and written)

TEST_CASE("sticky user data: Kafka's v0/v1 layout", "[assign]") {
  const auto partitions = parse({"tp0", "tp1"});
  const bytes v1{0, 0, 0, 1,  0, 1, 't',  0, 0, 0, 2,  0, 0, 0, 0,  0, 0, 0, 1,  0, 0, 0, 5};
  CHECK(assign::encode_sticky_user_data(partitions, 5) == v1);
  const bytes v0(v1.begin(), v1.end() - 4);
  CHECK(assign::encode_sticky_user_data(partitions, std::nullopt) == v0);

  assign::sticky_user_data d;
  REQUIRE_FALSE(assign::decode_sticky_user_data(v1, d));
  CHECK(d.partitions == partitions);
  CHECK(d.generation == 5);
  REQUIRE_FALSE(assign::decode_sticky_user_data(v0, d));
  CHECK(d.partitions == partitions);
  CHECK_FALSE(d.generation.has_value());
  // Up to three stray bytes after the array: v0. Extra bytes after the generation: ignored.
  bytes odd = v0;
  odd.push_back(1);
  odd.push_back(2);
  REQUIRE_FALSE(assign::decode_sticky_user_data(odd, d));
  CHECK_FALSE(d.generation.has_value());
  bytes longer = v1;
  longer.push_back(9);
  REQUIRE_FALSE(assign::decode_sticky_user_data(longer, d));
  CHECK(d.generation == 5);

  // Every truncation inside the array is an error, never a crash.
  for (std::size_t n = 0; n < v0.size(); ++n) {
    INFO("length " << n);
    CHECK(assign::decode_sticky_user_data(std::span(v0.data(), n), d));
    CHECK(d.partitions.empty());
  }
  // Hostile counts.
  CHECK(assign::decode_sticky_user_data(bytes{0x7f, 0xff, 0xff, 0xff, 0, 0}, d));
  CHECK(assign::decode_sticky_user_data(bytes{0xff, 0xff, 0xff, 0xfe}, d) ==
        make_error_code(protocol::codec_errc::negative_length));
  CHECK(assign::decode_sticky_user_data(bytes{0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff}, d));
}

TEST_CASE("sticky user data: round trip through the assignor", "[assign]") {
  const auto assignor = make_sticky_assignor();
  const MemberState state{{"t0", "t1"}, {{"t0", {2, 0}}, {"t1", {7}}}, 42, std::nullopt};
  const auto data = assignor->user_data(state);
  REQUIRE(data.has_value());
  assign::sticky_user_data d;
  REQUIRE_FALSE(assign::decode_sticky_user_data(*data, d));
  CHECK(d.partitions == state.owned_partitions);
  CHECK(d.generation == 42);

  // A Java StickyAssignor member's user data (v1) and an old member's (v0) are understood.
  const auto cluster = cluster_of({{"t0", 4}});
  auto java = member("java", {"t0"});
  java.user_data = assign::encode_sticky_user_data(parse({"t0p1", "t0p3"}), 6);
  auto old = member("old", {"t0"});
  old.user_data = assign::encode_sticky_user_data(parse({"t0p0", "t0p2"}), std::nullopt);
  const auto r = assignor->assign(cluster, {{java, old}});
  CHECK(got(r, "java") == sorted({"t0p1", "t0p3"}));
  CHECK(got(r, "old") == sorted({"t0p0", "t0p2"}));
}

// ---------------------------------------------------------------------------------------------
// Consumer protocol bytes

TEST_CASE("consumer protocol: subscription versions 0-3 round trip", "[assign]") {
  MemberSubscription s = member("ignored", {"t0", "t1"});
  s.user_data = bytes{1, 2, 3};
  s.owned_partitions = {{"t0", {0, 5}}};
  s.generation = 11;
  s.rack = "rack-a";
  for (std::int16_t v = 0; v <= 3; ++v) {
    INFO("version " << v);
    protocol::bytes wire;
    REQUIRE_FALSE(assign::encode_subscription(s, v, wire));
    CHECK(wire[0] == 0);
    CHECK(wire[1] == v);
    MemberSubscription d;
    d.member_id = "kept";
    std::int16_t version = -1;
    REQUIRE_FALSE(assign::decode_subscription(wire, d, &version));
    CHECK(version == v);
    CHECK(d.member_id == "kept");
    CHECK(d.topics == s.topics);
    CHECK(d.user_data == s.user_data);
    CHECK(d.owned_partitions == (v >= 1 ? s.owned_partitions : std::vector<TopicPartitions>{}));
    CHECK(d.generation == (v >= 2 ? 11 : -1));
    CHECK(d.rack == (v >= 3 ? s.rack : std::nullopt));
  }
  protocol::bytes wire;
  CHECK(assign::encode_subscription(s, 4, wire) == make_error_code(protocol::codec_errc::unsupported_version));
  CHECK(wire.empty());

  // Version 0, literal: version, topics ["t"], null user data.
  wire.clear();
  REQUIRE_FALSE(assign::encode_subscription(member("x", {"t"}), 0, wire));
  CHECK(wire == protocol::bytes{0, 0, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff});
}

TEST_CASE("consumer protocol: newer subscription versions are read by their known prefix", "[assign]") {
  MemberSubscription s = member("x", {"t0"});
  s.owned_partitions = {{"t0", {3}}};
  s.generation = 4;
  s.rack = "r";
  protocol::bytes wire;
  REQUIRE_FALSE(assign::encode_subscription(s, 3, wire));
  wire[1] = 7;  // a future version that appends a field
  wire.insert(wire.end(), {0, 0, 0, 42, 0xab});
  MemberSubscription d;
  std::int16_t version = 0;
  REQUIRE_FALSE(assign::decode_subscription(wire, d, &version));
  CHECK(version == 7);
  CHECK(d.topics == s.topics);
  CHECK(d.owned_partitions == s.owned_partitions);
  CHECK(d.generation == 4);
  CHECK(d.rack == s.rack);
  // ...but a known version with trailing bytes is malformed.
  wire[1] = 3;
  CHECK(assign::decode_subscription(wire, d) == make_error_code(protocol::codec_errc::trailing_bytes));
}

TEST_CASE("consumer protocol: malformed subscription and assignment bytes give errors", "[assign]") {
  MemberSubscription s = member("x", {"topic-a", "topic-b"});
  s.user_data = bytes{9, 9};
  s.owned_partitions = {{"topic-a", {0, 1, 2}}};
  s.generation = 3;
  s.rack = "r1";
  protocol::bytes good;
  REQUIRE_FALSE(assign::encode_subscription(s, 3, good));
  MemberSubscription d;
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n);
    CHECK(assign::decode_subscription(std::span(good.data(), n), d));
    CHECK(d.topics.empty());
  }
  // The same truncations as a future version (prefix reader) also fail cleanly.
  protocol::bytes future = good;
  future[1] = 9;
  for (std::size_t n = 0; n < future.size(); ++n) CHECK(assign::decode_subscription(std::span(future.data(), n), d));

  CHECK(assign::decode_subscription(protocol::bytes{0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, d) ==
        make_error_code(protocol::codec_errc::unsupported_version));
  // Topic count far beyond the input.
  CHECK(assign::decode_subscription(protocol::bytes{0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1, 'a'}, d));
  CHECK(assign::decode_subscription(protocol::bytes{0, 9, 0x7f, 0xff, 0xff, 0xff, 0, 1, 'a'}, d));
  // Negative string length in the owned partitions.
  CHECK(assign::decode_subscription(protocol::bytes{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0}, d));

  MemberAssignment a{"m", {{"topic-a", {4, 5}}}, bytes{7}};
  for (std::int16_t v = 0; v <= 3; ++v) {
    protocol::bytes wire;
    REQUIRE_FALSE(assign::encode_assignment(a, v, wire));
    MemberAssignment back;
    REQUIRE_FALSE(assign::decode_assignment(wire, back));
    CHECK(back.partitions == a.partitions);
    CHECK(back.user_data == a.user_data);
    for (std::size_t n = 1; n < wire.size(); ++n) CHECK(assign::decode_assignment(std::span(wire.data(), n), back));
    wire[1] = 5;
    wire.push_back(1);
    REQUIRE_FALSE(assign::decode_assignment(wire, back));
    CHECK(back.partitions == a.partitions);
  }
  // Version 0, literal: version, [("t", [1])], null user data.
  protocol::bytes literal;
  REQUIRE_FALSE(assign::encode_assignment({"m", {{"t", {1}}}, std::nullopt}, 0, literal));
  CHECK(literal == protocol::bytes{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff});

  MemberAssignment empty;
  REQUIRE_FALSE(assign::decode_assignment({}, empty));  // SyncGroup's empty assignment
  CHECK(empty.partitions.empty());

  // Random bytes: errors or values, never a crash, never a huge allocation.
  std::mt19937 rng(3);
  MemberAssignment junk_assignment;
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    protocol::bytes junk(rng() % 40);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng() % 4 == 0 ? 0xff : rng() % 3);
    if (!junk.empty()) junk[0] = 0;
    decoded += assign::decode_subscription(junk, d) ? 0 : 1;
    decoded += assign::decode_assignment(junk, junk_assignment) ? 0 : 1;
  }
  CHECK(decoded > 0);
}

// The dense model stores each distinct subscription and each distinct subscriber list once
// (issue 37: a million partitions' first assignment); what it answers must not depend on that.
TEST_CASE("model: shared and distinct subscriptions answer as per member", "[assign]") {
  std::mt19937 rng(37);
  for (int round = 0; round < 300; ++round) {
    ClusterMetadata c;
    const int topics = 1 + static_cast<int>(rng() % 7);
    for (int t = 0; t < topics; ++t)
      c.topics.push_back({"t" + std::to_string(t), static_cast<int>(rng() % 4), {}});
    std::shuffle(c.topics.begin(), c.topics.end(), rng);
    // A few subscriptions, dealt to members in runs and at random, with unknown topics and
    // duplicates that resolve to the same list.
    std::vector<std::vector<std::string>> kinds(1 + rng() % 4);
    for (auto& k : kinds) {
      for (const auto& t : c.topics) {
        if (rng() % 2 == 0) k.push_back(t.topic);
      }
      if (rng() % 3 == 0) k.push_back("unknown");
      if (!k.empty() && rng() % 3 == 0) k.push_back(k.front());
      std::shuffle(k.begin(), k.end(), rng);
    }
    GroupSubscription g;
    const int members = static_cast<int>(rng() % 12);
    for (int i = 0; i < members; ++i) {
      const auto& k =
          kinds[rng() % 3 == 0 ? rng() % kinds.size() : static_cast<std::size_t>(i) * kinds.size() / 12];
      g.members.push_back(member("m" + std::to_string(rng() % 100) + "-" + std::to_string(i), k));
    }
    const auto model = assign::build_model(c, g, false);
    // Per member: the known topics with partitions, as sorted dense ids.
    std::set<std::vector<std::uint32_t>> distinct;
    for (std::uint32_t m = 0; m < model.member_count(); ++m) {
      std::set<std::uint32_t> want;
      for (const auto& name : model.member(m).topics) {
        const auto it = model.topic_id.find(name);
        if (it != model.topic_id.end()) want.insert(it->second);
      }
      for (const auto& t : c.topics) {
        if (t.partition_count > 0 &&
            std::count(model.member(m).topics.begin(), model.member(m).topics.end(), t.topic) > 0) {
          REQUIRE(model.topic_id.count(t.topic) == 1);
        }
      }
      const auto have = model.topics_of(m);
      CHECK(std::vector<std::uint32_t>(have.begin(), have.end()) ==
            std::vector<std::uint32_t>(want.begin(), want.end()));
      distinct.insert(std::vector<std::uint32_t>(want.begin(), want.end()));
    }
    CHECK(model.uniform == (distinct.size() <= 1));
    for (std::uint32_t t = 0; t < model.topic_count(); ++t) {
      std::vector<std::uint32_t> want;
      for (std::uint32_t m = 0; m < model.member_count(); ++m) {
        if (model.subscribes(m, t)) want.push_back(m);
      }
      const auto have = model.subscribers_of(t);
      CHECK(std::vector<std::uint32_t>(have.begin(), have.end()) == want);
    }
  }
}

// build_assignment fills long runs in partition order and short ones member by member; both
// must give every member its partitions by topic name, ascending, one entry per topic.
TEST_CASE("model: the result lists each member's partitions by topic, ascending, for long and short runs",
          "[assign]") {
  std::mt19937 rng(3737);
  for (int round = 0; round < 400; ++round) {
    ClusterMetadata c;
    const int topics = 1 + static_cast<int>(rng() % 5);
    for (int t = 0; t < topics; ++t)
      c.topics.push_back({"t" + std::to_string(t), 1 + static_cast<int>(rng() % 40), {}});
    GroupSubscription g;
    const int members = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < members; ++i)
      g.members.push_back(member("m" + std::to_string(members - i), all_topics(c)));
    const auto model = assign::build_model(c, g, false);
    std::vector<std::uint32_t> owner(model.partition_count(), assign::no_member);
    // Long runs (whole ranges per member), short runs (dealt in turn) or a mix, some unowned.
    const auto style = rng() % 3;
    std::uint32_t current = 0;
    for (std::uint32_t p = 0; p < owner.size(); ++p) {
      if (style == 0 && rng() % 12 == 0) current = static_cast<std::uint32_t>(rng() % model.member_count());
      if (style == 1) current = static_cast<std::uint32_t>(rng() % model.member_count());
      if (style == 2 && rng() % 3 == 0) current = static_cast<std::uint32_t>(rng() % model.member_count());
      owner[p] = rng() % 10 == 0 ? assign::no_member : current;
    }
    const auto out = assign::build_assignment(model, owner);
    REQUIRE(out.members.size() == g.members.size());
    for (std::uint32_t m = 0; m < model.member_count(); ++m) {
      std::map<std::string, std::vector<std::int32_t>> want;
      for (std::uint32_t p = 0; p < owner.size(); ++p) {
        if (owner[p] != m) continue;
        const auto t = model.topic_of(p);
        want[std::string(model.topic_name[t])].push_back(static_cast<std::int32_t>(p - model.topic_base[t]));
      }
      const auto& a = out.members[model.member_input[m]];
      CHECK(a.member_id == model.member(m).member_id);
      std::map<std::string, std::vector<std::int32_t>> have;
      std::vector<std::string> order;
      for (const auto& tp : a.partitions) {
        CHECK(have.count(tp.topic) == 0);
        have[tp.topic] = tp.partitions;
        order.push_back(tp.topic);
      }
      CHECK(std::is_sorted(order.begin(), order.end()));
      CHECK(have == want);
    }
  }
}
