// The membership core's leader and subscription decisions, standing and transition table
// (member_harness.hpp).
#include "member_harness.hpp"

// ================================================================================================
// The leader's decisions (issue 17: moved from the driver into the core)
// ================================================================================================

namespace {

// A JoinGroup member whose metadata is a real consumer-protocol subscription to `topics`.
protocol::join_group_response::join_group_response_member subscribed_member(
    const std::string& id, std::vector<std::string> topics, std::optional<std::string> instance = std::nullopt) {
  MemberSubscription sub;
  sub.topics = std::move(topics);
  protocol::bytes meta;
  REQUIRE_FALSE(assign::encode_subscription(sub, 1, meta));
  return {id, std::move(instance), std::move(meta)};
}

ClusterMetadata cluster_of(std::vector<std::pair<std::string, std::int32_t>> topics) {
  ClusterMetadata cm;
  cm.brokers.push_back({1, std::nullopt});
  for (const auto& [t, n] : topics) {
    TopicMetadata tm{t, n, {}};
    for (std::int32_t p = 0; p < n; ++p) tm.replicas.push_back({1});
    cm.topics.push_back(std::move(tm));
  }
  return cm;
}

// What the leader's SyncGroup gives each member, decoded.
std::map<std::string, partition_set> decoded(const send_sync_group& s) {
  std::map<std::string, partition_set> out;
  for (const auto& a : s.request.assignments) {
    partition_set parts;
    REQUIRE_FALSE(decode_parts(a.assignment, parts));
    out[a.member_id] = parts;
  }
  return out;
}

// An assignor that returns what the test tells it to, or throws.
struct scripted_assignor : PartitionAssignor {
  GroupAssignment result;
  bool throws = false;
  mutable int calls = 0;
  std::string name() const override { return "scripted"; }
  GroupAssignment assign(const ClusterMetadata&, const GroupSubscription&) const override {
    ++calls;
    if (throws) throw std::runtime_error("assignor exploded");
    return result;
  }
};

}  // namespace

TEST_CASE("member: the leader asks for the subscribed topics' metadata and runs the chosen assignor",
          "[member][leader]") {
  harness h;
  h.start();
  auto r = join_ok("m1", 1, "m1", "range");
  r.members = {subscribed_member("m1", {"t", "u"}), subscribed_member("m2", {"t"})};
  auto a = h.join(r);
  auto c = expect<compute_assignment>(a);
  expect_empty(a);
  CHECK(c.generation == 1);
  CHECK(c.topics == std::vector<std::string>{"t", "u"});
  // Metadata for another generation is stale.
  h.m.assignment_metadata(h.now, 0, {}, cluster_of({{"t", 2}, {"u", 1}}));
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::assigning);

  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}, {"u", 1}}));
  a = h.take();
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::syncing);
  // range: t0 -> m1, t1 -> m2, u0 -> m1.
  const auto got = decoded(s);
  CHECK(got.at("m1") == partition_set{{"t", 0}, {"u", 0}});
  CHECK(got.at("m2") == partition_set{{"t", 1}});
  // A second answer for the same generation is stale too.
  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}}));
  expect_empty(h.take());
}

TEST_CASE("member: a member with an unreadable subscription gets nothing, the others are assigned",
          "[member][leader]") {
  harness h;
  h.start();
  auto r = join_ok("m1", 1, "m1", "range");
  r.members = {subscribed_member("m1", {"t"}), {"m2", std::nullopt, {0xff, 0x01}}};
  auto a = h.join(r);
  CHECK(expect<compute_assignment>(a).topics == std::vector<std::string>{"t"});
  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}}));
  a = h.take();
  const auto got = decoded(expect<send_sync_group>(a));
  CHECK(got.at("m1") == partition_set{{"t", 0}, {"t", 1}});
  CHECK(got.at("m2").empty());
}

TEST_CASE("member: the leader refuses its assignor's invalid or failed result and rejoins", "[member][leader]") {
  auto assignor = std::make_shared<scripted_assignor>();
  auto o = make_options();
  o.assignors = {assignor};
  harness h(o);
  SECTION("a partition given twice") {
    assignor->result.members = {{"m1", {{"t", {0}}}, std::nullopt}, {"m2", {{"t", {0}}}, std::nullopt}};
  }
  SECTION("a topic the member did not subscribe to") {
    assignor->result.members = {{"m1", {{"t", {0}}, {"x", {0}}}, std::nullopt}};
  }
  SECTION("the assignor throws") { assignor->throws = true; }
  h.start();
  auto r = join_ok("m1", 1, "m1", "scripted");
  r.members = {subscribed_member("m1", {"t"}), subscribed_member("m2", {"t"})};
  auto a = h.join(r);
  expect<compute_assignment>(a);
  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 1}, {"x", 1}}));
  a = h.take();
  CHECK(assignor->calls == 1);
  expect_none<send_sync_group>(a);
  auto e = expect<report_error>(a);
  CHECK_FALSE(e.fatal);
  CHECK(e.code == make_error_code(client_errc::illegal_state));
  REQUIRE(h.m.state() == classic_state::joining);
  a = h.to_deadline();
  expect<send_join_group>(a);
}

TEST_CASE("member: metadata the leader could not fetch, or a protocol it did not offer, fails the assignment",
          "[member][leader]") {
  harness h;
  h.start();
  SECTION("metadata error") {
    auto a = h.join(join_ok("m1", 1, "m1", "range", {"m1"}));
    expect<compute_assignment>(a);
    h.m.assignment_metadata(h.now, 1, make_error_code(client_errc::request_timed_out), {});
    a = h.take();
    CHECK(expect<report_error>(a).code == make_error_code(client_errc::request_timed_out));
  }
  SECTION("unknown protocol") {
    auto a = h.join(join_ok("m1", 1, "m1", "no-such-assignor", {"m1"}));
    expect<compute_assignment>(a);
    h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 1}}));
    a = h.take();
    CHECK(expect<report_error>(a).code == make_error_code(kafka_errc::inconsistent_group_protocol));
  }
  REQUIRE(h.m.state() == classic_state::joining);
  CHECK(h.m.stats().failed_rebalances == 1);
}

TEST_CASE("member: the leader rebalances when a topic it assigned changes its partition count",
          "[member][leader]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.start();
  auto r = join_ok("m1", 1, "m1", "cooperative-sticky");
  r.members = {subscribed_member("m1", {"t", "u"})};
  auto a = h.join(r);
  expect<compute_assignment>(a);
  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}}));  // u does not exist yet
  a = h.take();
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}, {"t", 1}}));
  a = h.done(expect_listener(a, listener_kind::assigned, {{"t", 0}, {"t", 1}}));
  REQUIRE(h.m.state() == classic_state::stable);

  // Same counts, topics it did not assign, and a refresh that does not cover u: nothing.
  h.m.metadata_updated(h.now, {{"t", false, 0, 2}, {"other", false, 0, 9}});
  expect_empty(h.take());
  // u now exists with 3 partitions (it was assigned from 0).
  h.m.metadata_updated(h.now, {{"t", false, 0, 2}, {"u", false, 0, 3}});
  a = h.take();
  auto j = expect<send_join_group>(a);
  CHECK(j.request.reason == "metadata changed: topic 'u' now has 3 partitions");
  CHECK(h.m.stats().history.back().cause == RebalanceCause::metadata_change);

  // A follower ignores partition counts.
  harness f;
  f.make_stable(t01);
  f.m.metadata_updated(f.now, {{"t", false, 0, 7}});
  expect_empty(f.take());
}

TEST_CASE("member: a pattern subscription follows the matching topics in each metadata update",
          "[member][pattern]") {
  harness h;
  h.m.subscribe_pattern(h.now, std::regex("t.*"));
  CHECK(h.m.pattern_subscribed());
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  // Nothing matches yet: still not a member.
  h.m.metadata_updated(h.now, {{"x", false, 0, 1}});
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  // Internal topics, topics with an error and names matching only in part are not subscribed.
  h.m.metadata_updated(h.now, {{"t2", false, 0, 1},
                               {"t1", false, 0, 1},
                               {"tx", true, 0, 1},
                               {"tbroken", false, code(kafka_errc::leader_not_available), 0},
                               {"xt", false, 0, 1}});
  auto a = h.take();
  expect<find_coordinator>(a);
  CHECK(h.m.topics() == std::vector<std::string>{"t1", "t2"});
  REQUIRE(h.m.state() == classic_state::joining);
  CHECK(h.m.pattern_subscribed());
  a = h.found();
  auto j = expect<send_join_group>(a);
  REQUIRE_FALSE(h.snapshots->empty());
  CHECK(h.snapshots->back().topics == std::vector<std::string>{"t1", "t2"});
  // The same topics again: no rejoin request.
  h.m.metadata_updated(h.now, {{"t1", false, 0, 1}, {"t2", false, 0, 1}});
  expect_empty(h.take());

  SECTION("a new matching topic changes the subscription") {
    h.m.metadata_updated(h.now, {{"t1", false, 0, 1}, {"t2", false, 0, 1}, {"t3", false, 0, 1}});
    CHECK(h.m.topics() == std::vector<std::string>{"t1", "t2", "t3"});
  }
  SECTION("subscribe() with names ends the pattern") {
    h.m.subscribe(h.now, {"t1"});
    CHECK_FALSE(h.m.pattern_subscribed());
    h.m.metadata_updated(h.now, {{"t1", false, 0, 1}, {"t2", false, 0, 1}, {"t3", false, 0, 1}});
    CHECK(h.m.topics() == std::vector<std::string>{"t1"});
  }
  SECTION("unsubscribe() ends it too") {
    h.m.unsubscribe(h.now);
    CHECK_FALSE(h.m.pattern_subscribed());
  }
  SECTION("internal topics match when exclude.internal.topics is off") {
    auto o = make_options();
    o.exclude_internal_topics = false;
    harness g(o);
    g.m.subscribe_pattern(g.now, std::regex("t.*"));
    g.m.metadata_updated(g.now, {{"tx", true, 0, 1}});
    CHECK(g.m.topics() == std::vector<std::string>{"tx"});
  }
}

TEST_CASE("member: the leader names who joined and who left between consecutive generations",
          "[member][leader][stats]") {
  auto o = make_options();
  harness h(o);
  h.start();
  auto r = join_ok("a", 1, "a", "range");
  r.members = {subscribed_member("a", {"t"}), subscribed_member("b", {"t"})};
  auto a = h.join(r);
  expect<compute_assignment>(a);
  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}}));
  a = h.take();
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}}));
  a = h.done(expect_listener(a, listener_kind::assigned, {{"t", 0}}));
  // The coordinator rebalances (b left, c and static d joined).
  a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  a = h.done(expect_listener(a, listener_kind::revoked, {{"t", 0}}));
  expect<send_join_group>(a);
  r = join_ok("a", 2, "a", "range");
  r.members = {subscribed_member("a", {"t"}), subscribed_member("c", {"t"}), subscribed_member("c2", {"t"}, "d")};
  a = h.join(r);
  expect<compute_assignment>(a);
  CHECK(h.m.stats().history.back().cause == RebalanceCause::member_left);
  CHECK(h.m.stats().history.back().detail == "left: b; joined: c, d");
}

TEST_CASE("member: JoinGroup's timeout covers the rebalance; LeaveGroup fits the version sent",
          "[member]") {
  auto o = make_options();
  o.request_timeout = 30000ms;
  o.max_poll_interval = 60000ms;
  harness h(o);
  CHECK(h.start().timeout == 65000ms);
  auto small = make_options();
  small.request_timeout = 90000ms;
  small.max_poll_interval = 1000ms;
  harness g(small);
  CHECK(g.start().timeout == 90000ms);

  protocol::leave_group_request r;
  r.member_id = "m1";
  r.members.push_back({"m1", std::nullopt, "bye"});
  auto v2 = r;
  fit_leave_group(v2, 2);
  CHECK(v2.member_id == "m1");
  CHECK(v2.members.empty());
  auto v3 = r;
  fit_leave_group(v3, 3);
  CHECK(v3.member_id.empty());
  REQUIRE(v3.members.size() == 1);
  CHECK(v3.members[0].member_id == "m1");
}

TEST_CASE("member: the transition table", "[member]") {
  using st = classic_state;
  const st all[] = {st::unsubscribed, st::preparing, st::joining, st::assigning, st::syncing,  st::completing,
                    st::stable,       st::leaving,   st::poll_timed_out, st::fatal, st::closed};
  for (auto from : all) {
    CHECK(transition_allowed(from, from));
    CHECK(transition_allowed(from, st::closed));
    CHECK(transition_allowed(from, st::fatal) == (from != st::closed));
  }
  CHECK(transition_allowed(st::unsubscribed, st::joining));
  CHECK_FALSE(transition_allowed(st::unsubscribed, st::stable));
  CHECK_FALSE(transition_allowed(st::leaving, st::joining));
  CHECK(transition_allowed(st::leaving, st::unsubscribed));
  CHECK_FALSE(transition_allowed(st::stable, st::syncing));
  CHECK(transition_allowed(st::syncing, st::completing));
  CHECK_FALSE(transition_allowed(st::closed, st::joining));
  CHECK(transition_allowed(st::fatal, st::leaving));
  CHECK_FALSE(transition_allowed(st::fatal, st::joining));
}

TEST_CASE("member: standing() tells the data path when a commit may carry the generation", "[member]") {
  harness h(make_options(RebalanceProtocol::eager, "instance-1"));
  auto j = h.start();
  CHECK_FALSE(h.m.standing().stable);  // joining
  auto a = h.join(join_ok("m1", 3, "leader", h.proto));
  CHECK_FALSE(h.m.standing().stable);  // syncing
  a = h.sync(sync_ok(t01));
  auto st = h.m.standing();
  CHECK(st.stable);  // completing: the assigned callback may commit
  CHECK(st.generation == 3);
  CHECK(st.member_id == "m1");
  CHECK(st.instance_id == std::optional<std::string>("instance-1"));
  CHECK(st.coordinator == std::optional<std::int32_t>(1));
  a = h.done(expect_listener(a, listener_kind::assigned, t01));
  CHECK(h.m.standing().stable);
  // Removed by the coordinator: not stable, removed, until it rejoins.
  a = h.next_heartbeat(kafka_errc::illegal_generation);
  st = h.m.standing();
  CHECK_FALSE(st.stable);
  CHECK(st.removed);
  CHECK_FALSE(st.fatal);
  CHECK_FALSE(st.poll_timed_out);
}

TEST_CASE("coordinator_lookup: one lookup at a time, forgotten when unusable", "[member]") {
  coordinator_lookup c;
  CHECK(c.unknown());
  CHECK(c.start());
  CHECK_FALSE(c.start());  // one under way
  CHECK_FALSE(c.known());
  c.found(3);
  CHECK(c.known());
  CHECK(c.node() == std::optional<std::int32_t>(3));
  CHECK_FALSE(c.start());
  c.forget();
  CHECK(c.unknown());
  CHECK_FALSE(c.node().has_value());
  CHECK(c.start());
}

// ================================================================================================
// The consumer protocol's bytes (group/member_protocol.cpp; issue 17: moved from the driver)
// ================================================================================================

TEST_CASE("member protocol: one JoinGroup entry per assignor, in preference order, with the whole subscription",
          "[member][leader]") {
  const auto build = group::consumer_protocols(
      {kgroup::make_cooperative_sticky_assignor(), kgroup::make_range_assignor()});
  group::subscription_snapshot s;
  s.topics = {"a", "b"};
  s.owned = {{"a", 0}, {"a", 2}, {"b", 1}};
  s.generation = 7;
  s.rack = "r1";
  const auto list = build(s);
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "cooperative-sticky");
  CHECK(list[1].name == "range");
  for (const auto& p : list) {
    MemberSubscription d;
    std::int16_t version = -1;
    REQUIRE_FALSE(assign::decode_subscription(p.metadata, d, &version));
    CHECK(version == assign::subscription_version_max);
    CHECK(d.topics == s.topics);
    REQUIRE(d.owned_partitions.size() == 2);
    CHECK(d.owned_partitions[0].topic == "a");
    CHECK(d.owned_partitions[0].partitions == std::vector<std::int32_t>{0, 2});
    CHECK(d.owned_partitions[1].topic == "b");
    CHECK(d.owned_partitions[1].partitions == std::vector<std::int32_t>{1});
    CHECK(d.generation == 7);
    CHECK(d.rack == std::optional<std::string>("r1"));
  }
}

TEST_CASE("member protocol: a SyncGroup assignment decodes to its partitions; bad bytes are an error",
          "[member][leader]") {
  MemberAssignment a;
  a.partitions = {{"a", {3, 1}}, {"b", {0}}};
  protocol::bytes wire;
  REQUIRE_FALSE(assign::encode_assignment(a, assign::assignment_version_max, wire));
  group::partition_set out;
  REQUIRE_FALSE(group::decode_consumer_assignment(wire, out));
  CHECK(out == group::partition_set{{"a", 1}, {"a", 3}, {"b", 0}});
  group::partition_set none;
  CHECK_FALSE(group::decode_consumer_assignment({}, none));  // what a member left out gets
  CHECK(none.empty());
  const protocol::bytes bad{0, 1, 0, 0, 0, 5};
  group::partition_set junk;
  CHECK(group::decode_consumer_assignment(bad, junk));
}
