// The membership core (src/group/member*), driven step by step with a fake clock
// (member_harness.hpp): happy paths, heartbeats and deadlines, each request's error codes,
// closing from any state.
#include "member_harness.hpp"

#include "data/committer.hpp"

// ================================================================================================
// Happy paths
// ================================================================================================

TEST_CASE("member: eager follower joins with MEMBER_ID_REQUIRED, a reason, then SyncGroup", "[member]") {
  harness h;
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  REQUIRE_FALSE(h.m.next_deadline().has_value());

  auto a = h.subscribe({"t", "t"});
  expect<find_coordinator>(a);
  expect_empty(a);
  REQUIRE(h.m.topics() == std::vector<std::string>{"t"});
  a = h.found(7);
  REQUIRE(h.m.coordinator() == 7);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.group_id == "g");
  CHECK(j.request.member_id.empty());
  CHECK(j.request.protocol_type == "consumer");
  CHECK(j.request.session_timeout_ms == 10000);
  CHECK(j.request.rebalance_timeout_ms == 60000);
  CHECK_FALSE(j.request.group_instance_id.has_value());
  REQUIRE(j.request.protocols.size() == 2);  // one per assignor, in preference order
  CHECK(j.request.protocols[0].name == "range");
  CHECK(j.request.protocols[1].name == "roundrobin");
  REQUIRE(j.request.reason.has_value());  // KIP-800
  CHECK_FALSE(j.request.reason->empty());
  REQUIRE(h.snapshots->size() == 1);
  CHECK(h.snapshots->back().topics == std::vector<std::string>{"t"});
  CHECK(h.snapshots->back().owned.empty());

  // KIP-394: the coordinator hands out the member id; the member rejoins with it at once.
  a = h.join(join_err(kafka_errc::member_id_required, "m-1"));
  j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id == "m-1");
  REQUIRE(j.request.reason.has_value());
  CHECK_FALSE(j.request.reason->empty());
  CHECK(h.m.member_id() == "m-1");

  a = h.join(join_ok("m-1", 4, "other", "range", {"other", "m-1"}));
  REQUIRE(h.m.state() == classic_state::syncing);
  CHECK_FALSE(h.m.is_leader());
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  CHECK(s.request.group_id == "g");
  CHECK(s.request.generation_id == 4);
  CHECK(s.request.member_id == "m-1");
  CHECK(s.request.protocol_type == "consumer");
  CHECK(s.request.protocol_name == "range");
  CHECK(s.request.assignments.empty());  // followers send none

  a = h.sync(sync_ok(t01, "range"));
  REQUIRE(expect<assignment_changed>(a).owned == t01);
  auto l = expect_listener(a, listener_kind::assigned, t01);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::completing);
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
  CHECK(h.m.owned() == t01);
  CHECK(h.m.generation() == 4);
  CHECK(h.m.protocol_name() == "range");
}

TEST_CASE("member: eager leader computes the assignment and distributes it in SyncGroup", "[member]") {
  harness h;
  h.start();
  auto a = h.join(join_ok("m1", 1, "m1", "roundrobin", {"m1", "m2"}));
  REQUIRE(h.m.state() == classic_state::assigning);
  REQUIRE(h.m.is_leader());
  auto c = expect<compute_assignment>(a);
  expect_empty(a);
  CHECK(c.generation == 1);
  CHECK(c.protocol_name == "roundrobin");
  REQUIRE(c.members.size() == 2);
  CHECK(c.members[0].member_id == "m1");
  CHECK(c.members[1].member_id == "m2");

  // While the assignor runs the leader heartbeats (issue 13, item 9): its session is timed from
  // the JoinGroup answer, and a slow assignor must not cost it the membership. SyncGroup goes out
  // only after assignment_computed.
  a = h.advance(3000ms);
  auto hb = expect<send_heartbeat>(a);
  expect_empty(a);
  CHECK(hb.request.generation_id == 1);
  CHECK(hb.request.member_id == "m1");
  a = h.heartbeat();
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::assigning);
  // Past session.timeout.ms from the JoinGroup answer, kept alive by the heartbeats.
  a = h.advance(3000ms);
  expect<send_heartbeat>(a);
  expect_empty(h.heartbeat());
  a = h.advance(3000ms);
  expect<send_heartbeat>(a);
  expect_empty(h.heartbeat());
  a = h.advance(3000ms);
  expect<send_heartbeat>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::assigning);
  REQUIRE(h.m.generation() == 1);
  // This heartbeat is still in flight when the assignment is ready: SyncGroup does not wait for it,
  // and its late answer changes nothing.

  std::vector<protocol::sync_group_request::sync_group_request_assignment> out{
      {"m1", encode_parts({{"t", 0}})}, {"m2", encode_parts({{"t", 1}})}};
  // A result computed for another generation is stale (issue 13, item 9): dropped.
  h.m.assignment_computed(h.now, 0, {}, out);
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::assigning);
  a = h.computed(out);
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  CHECK(s.request.generation_id == 1);
  CHECK(s.request.member_id == "m1");
  CHECK(s.request.protocol_name == "roundrobin");
  CHECK(s.request.assignments == out);
  REQUIRE(h.m.state() == classic_state::syncing);

  // A second assignment_computed (stale) sends nothing.
  a = h.computed(out);
  expect_empty(a);
  a = h.heartbeat(kafka_errc::unknown_member_id);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::syncing);

  a = h.sync(sync_ok({{"t", 0}}));
  expect<assignment_changed>(a);
  auto l = expect_listener(a, listener_kind::assigned, {{"t", 0}});
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
}

TEST_CASE("member: a leader removed while its assignor runs rejoins and drops the late assignment",
          "[member]") {
  harness h;
  h.start();
  auto a = h.join(join_ok("m1", 1, "m1", "range", {"m1", "m2"}));
  expect<compute_assignment>(a);
  a = h.advance(3000ms);
  expect<send_heartbeat>(a);
  a = h.heartbeat(kafka_errc::unknown_member_id);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
  REQUIRE(h.m.state() == classic_state::joining);
  REQUIRE(h.m.generation() == -1);
  // The assignor's result for generation 1 arrives after the removal: dropped.
  h.m.assignment_computed(h.now, 1, {}, {{"m1", encode_parts({{"t", 0}})}, {"m2", encode_parts({{"t", 1}})}});
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::joining);
}

TEST_CASE("member: the leader's failed assignment is reported and the member rejoins after a backoff",
          "[member]") {
  harness h;
  h.start();
  auto a = h.join(join_ok("m1", 1, "m1", "range", {"m1"}));
  expect<compute_assignment>(a);
  h.m.assignment_computed(h.now, h.m.generation(), make_error_code(client_errc::protocol_violation), {});
  a = h.take();
  auto e = expect<report_error>(a);
  CHECK_FALSE(e.fatal);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::joining);
  CHECK(h.until_deadline() == 100ms);
  a = h.to_deadline();
  expect<send_join_group>(a);
  expect_empty(a);
}

TEST_CASE("member: a leader told to skip the assignment (static leader) syncs like a follower", "[member]") {
  harness h(make_options(RebalanceProtocol::eager, "i1"));
  auto j = h.start();
  CHECK(j.request.group_instance_id == "i1");
  auto r = join_ok("m1", 3, "m1", "range", {"m1"});
  r.skip_assignment = true;
  auto a = h.join(r);
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  CHECK(s.request.group_instance_id == "i1");
  CHECK(s.request.assignments.empty());
}

TEST_CASE("member: cooperative first join assigns everything, no revoke and no second round", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  auto j = h.start();
  REQUIRE(j.request.protocols.size() == 1);
  CHECK(j.request.protocols[0].name == "cooperative-sticky");
  auto a = h.join(join_ok("m1", 1, "leader", "cooperative-sticky"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok(t01));
  REQUIRE(expect<assignment_changed>(a).owned == t01);
  auto l = expect_listener(a, listener_kind::assigned, t01);
  expect_empty(a);
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
  // Stable: the next thing is a heartbeat, not a JoinGroup.
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  expect_empty(a);
}

TEST_CASE("member: cooperative rebalance revokes only what moved, assigns only what was added, then rejoins",
          "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t012);

  // The group rebalances: the member rejoins at once and keeps consuming (no listener).
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::joining);
  CHECK(h.m.owned() == t012);
  CHECK(h.snapshots->back().owned == t012);  // the owned partitions go in the subscription
  CHECK(h.snapshots->back().generation == 1);
  REQUIRE(j.request.reason.has_value());
  CHECK_FALSE(j.request.reason->empty());

  a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
  expect<send_sync_group>(a);
  // t2 moves away, t3 comes in.
  const partition_set next{{"t", 0}, {"t", 1}, {"t", 3}};
  a = h.sync(sync_ok(next));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 2}});
  expect_empty(a);  // nothing assigned before the revoke returned
  CHECK(h.m.owned() == t012);

  a = h.done(revoke);
  REQUIRE(last_owned(a) == next);
  auto assigned = expect_listener(a, listener_kind::assigned, {{"t", 3}});
  expect_empty(a);  // no JoinGroup before the assigned listener returned
  a = h.done(assigned);
  // Second round, at once, so t2 can go to its new owner.
  j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(h.snapshots->back().owned == next);
  CHECK(h.snapshots->back().generation == 2);

  a = h.join(join_ok("m1", 3, "leader", "cooperative-sticky"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok(next));
  // Nothing revoked, nothing added: the assigned listener still runs, with no partitions.
  auto empty = expect_listener(a, listener_kind::assigned, {});
  expect_empty(a);
  a = h.done(empty);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
  a = h.to_deadline();
  expect<send_heartbeat>(a);  // no third round
  expect_empty(a);
}

// A member that missed a generation claims its partitions from an older one; the leader may
// have given them to a member with a newer claim, so the revoke says so (the facade then does not
// auto-commit them). kgroup-sim --group seed 796560523412: a paused static member's auto-commit
// before the revoke committed a partition another member owned.
TEST_CASE("member: a cooperative revoke after a missed generation is marked as a stale claim", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t012);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);
  CHECK(h.snapshots->back().generation == 1);
  SECTION("the next generation: not stale") {
    a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
    expect<send_sync_group>(a);
    a = h.sync(sync_ok({{"t", 0}, {"t", 1}}));
    auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 2}});
    CHECK_FALSE(revoke.stale_claim);
  }
  SECTION("a generation later: stale") {
    a = h.join(join_ok("m1", 3, "leader", "cooperative-sticky"));
    expect<send_sync_group>(a);
    a = h.sync(sync_ok({{"t", 0}}));
    auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 1}, {"t", 2}});
    CHECK(revoke.stale_claim);
    a = h.done(revoke);
    REQUIRE(expect<assignment_changed>(a).owned == partition_set{{"t", 0}});
  }
}

TEST_CASE("member: cooperative revoke with nothing added still calls the assigned listener", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t012);
  h.m.enforce_rebalance(h.now, "test");
  auto a = h.take();
  auto j = expect<send_join_group>(a);
  REQUIRE(j.request.reason.has_value());
  CHECK(j.request.reason->find("test") != std::string::npos);
  a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}}));
  auto r = expect_listener(a, listener_kind::revoked, {{"t", 1}, {"t", 2}});
  a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned == partition_set{{"t", 0}});
  auto l = expect_listener(a, listener_kind::assigned, {});
  a = h.done(l);
  expect<send_join_group>(a);
}

TEST_CASE("member: cooperative subscription change revokes the dropped topic before JoinGroup", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  const partition_set both{{"t", 0}, {"u", 0}};
  h.make_stable(both, {"t", "u"});
  auto a = h.subscribe({"t"});
  auto r = expect_listener(a, listener_kind::revoked, {{"u", 0}});
  expect_empty(a);  // no JoinGroup before the revoke returned
  REQUIRE(h.m.state() == classic_state::preparing);
  a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned == partition_set{{"t", 0}});
  expect<send_join_group>(a);
  expect_empty(a);
  CHECK(h.snapshots->back().topics == std::vector<std::string>{"t"});
  CHECK(h.snapshots->back().owned == partition_set{{"t", 0}});
}

TEST_CASE("member: a subscription change while JoinGroup is in flight is served by another round",
          "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.start({"t"});
  auto a = h.subscribe({"t", "u"});
  expect_empty(a);  // JoinGroup in flight: wait for it
  a = h.join(join_ok("m1", 1, "leader", "cooperative-sticky"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}}));
  expect<assignment_changed>(a);
  auto l = expect_listener(a, listener_kind::assigned, {{"t", 0}});
  a = h.done(l);
  // The join carried only "t": the member joins again for "u".
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(h.snapshots->back().topics == std::vector<std::string>{"t", "u"});
  CHECK(j.request.reason.has_value());
}

TEST_CASE("member: eager rebalance revokes everything before JoinGroup is sent", "[member]") {
  harness h;
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::preparing);

  // The revoke takes a while: heartbeats go on (the group is rebalancing), no JoinGroup yet.
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  expect_empty(a);
  a = h.heartbeat(kafka_errc::rebalance_in_progress);
  expect_empty(a);
  a = h.next_heartbeat();
  expect_empty(a);

  a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned.empty());
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id == "m1");
  CHECK(h.snapshots->back().owned.empty());
  REQUIRE(j.request.reason.has_value());

  a = h.join(join_ok("m1", 2, "leader", "range"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 1}}));
  REQUIRE(expect<assignment_changed>(a).owned == partition_set{{"t", 1}});
  auto l = expect_listener(a, listener_kind::assigned, {{"t", 1}});  // the whole new set
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
  // The REBALANCE_IN_PROGRESS answers seen during the revoke belonged to this rebalance: no
  // extra round afterwards.
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  expect_empty(a);
}

TEST_CASE("member: enforce_rebalance, OffsetCommit's REBALANCE_IN_PROGRESS and metadata changes rejoin",
          "[member]") {
  SECTION("enforce_rebalance carries its reason") {
    harness h;
    h.make_stable(t01);
    h.m.enforce_rebalance(h.now, "user asked");
    auto a = h.take();
    auto r = expect_listener(a, listener_kind::revoked, t01);
    a = h.done(r);
    auto j = expect<send_join_group>(a);
    REQUIRE(j.request.reason.has_value());
    CHECK(j.request.reason->find("user asked") != std::string::npos);
  }
  SECTION("REBALANCE_IN_PROGRESS seen on OffsetCommit") {
    harness h(make_options(RebalanceProtocol::cooperative));
    h.make_stable(t01);
    h.m.rebalance_in_progress_seen(h.now);
    auto a = h.take();
    expect<send_join_group>(a);
    expect_empty(a);
  }
  SECTION("metadata change: only the leader rejoins") {
    harness h(make_options(RebalanceProtocol::cooperative));
    h.make_stable(t01);  // follower
    h.m.metadata_changed(h.now, "partitions added");
    expect_empty(h.take());

    harness l(make_options(RebalanceProtocol::cooperative));
    l.start();
    auto a = l.join(join_ok("m1", 1, "m1", "cooperative-sticky", {"m1"}));
    expect<compute_assignment>(a);
    a = l.computed({{"m1", encode_parts(t01)}});
    expect<send_sync_group>(a);
    a = l.sync(sync_ok(t01));
    auto as = expect_listener(a, listener_kind::assigned, t01);
    a = l.done(as);
    expect_empty(a);
    l.m.metadata_changed(l.now, "topic 't' now has 3 partitions");
    a = l.take();
    auto j = expect<send_join_group>(a);
    CHECK(j.request.reason == "topic 't' now has 3 partitions");
  }
}

// ================================================================================================
// Heartbeats and deadlines
// ================================================================================================

TEST_CASE("member: heartbeats exactly every heartbeat.interval.ms while stable", "[member]") {
  harness h;
  h.make_stable(t01);
  const auto t0 = h.now;
  REQUIRE(h.m.next_deadline() == t0 + 3000ms);

  auto a = h.advance(2999ms);
  expect_empty(a);
  auto last_ok = t0;
  for (int i = 1; i <= 10; ++i) {
    a = h.to_deadline();
    REQUIRE(h.now == t0 + i * 3000ms);
    auto hb = expect<send_heartbeat>(a);
    expect_empty(a);
    CHECK(hb.request.group_id == "g");
    CHECK(hb.request.generation_id == 1);
    CHECK(hb.request.member_id == "m1");
    // While in flight: no other heartbeat; the wake-up is the session deadline, not the interval.
    REQUIRE(h.m.next_deadline() == last_ok + 10000ms);
    h.now += 20ms;
    last_ok = h.now;
    a = h.heartbeat();
    expect_empty(a);
    h.m.poll_called(h.now);
    h.m.poll_returned(h.now);
    REQUIRE(h.m.next_deadline() == t0 + (i + 1) * 3000ms);
  }
}

TEST_CASE("member: no second heartbeat while one is in flight; a late answer sends the overdue one",
          "[member]") {
  harness h;
  h.make_stable(t01);
  auto a = h.to_deadline();
  expect<send_heartbeat>(a);
  a = h.advance(2000ms);
  expect_empty(a);
  a = h.advance(2000ms);  // the next one was due 1 s ago, but one is still in flight
  expect_empty(a);
  a = h.heartbeat();
  expect<send_heartbeat>(a);  // overdue: at once
  expect_empty(a);
}

TEST_CASE("member: no heartbeats while joining, syncing or assigning", "[member]") {
  harness h;
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto r = expect<run_listener>(a);
  a = h.done(r);
  expect<send_join_group>(a);
  REQUIRE(h.m.state() == classic_state::joining);
  // JoinGroup may be held for the whole rebalance timeout; nothing to do meanwhile (not even a
  // session timeout: the member is not heartbeating).
  REQUIRE(h.m.next_deadline() == h.m.last_poll() + 48000ms);
  a = h.advance(20000ms);
  expect_empty(a);
  a = h.join(join_ok("m1", 2, "leader", "range"));
  expect<send_sync_group>(a);
  a = h.advance(20000ms);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::syncing);
}

TEST_CASE("member: next_deadline is the earliest of heartbeat, session, backoff and poll checks",
          "[member]") {
  harness h;
  CHECK_FALSE(h.m.next_deadline().has_value());
  const auto t0 = h.now;
  h.start();
  CHECK(h.m.next_deadline() == t0 + 48000ms);  // 80% of max.poll.interval.ms: the warning point
  auto a = h.join(join_ok("m1", 1, "leader", "range"));
  a = h.sync(sync_ok(t01));
  auto l = expect<run_listener>(a);
  CHECK(h.m.next_deadline() == t0 + 3000ms);  // heartbeating while the listener runs
  h.done(l);
  CHECK(h.m.next_deadline() == t0 + 3000ms);
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  CHECK(h.m.next_deadline() == t0 + 10000ms);  // in flight: only the session deadline
  h.now = t0 + 4000ms;
  h.heartbeat(kafka_errc::coordinator_load_in_progress);
  CHECK(h.m.next_deadline() == t0 + 4100ms);  // retry after the backoff
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  h.heartbeat();
  CHECK(h.m.next_deadline() == t0 + 7100ms);

  // poll() is not called any more: the 80% warning point is a deadline of its own (heartbeats
  // fall at 46.1 s and 49.1 s), then the limit itself.
  expect_empty(h.run_until(t0 + 47999ms, false));
  CHECK(h.m.next_deadline() == t0 + 48000ms);
  a = h.to_deadline();
  expect_empty(a);  // only a log line
  CHECK(h.m.next_deadline() == t0 + 49100ms);
  expect_empty(h.run_until(t0 + 59999ms, false));
  CHECK(h.m.next_deadline() == t0 + 60000ms);
  // A poll() resets both.
  h.poll();
  CHECK(h.m.next_deadline() == t0 + 61100ms);
  CHECK(h.m.last_poll() == h.now);
}

// ================================================================================================
// Error codes, per request
// ================================================================================================

TEST_CASE("member: JoinGroup errors", "[member]") {
  const bool cooperative = GENERATE(false, true);
  CAPTURE(cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
  // A member of generation 1 that rejoins: with its partitions if cooperative, none if eager.
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  if (!cooperative) a = h.done(expect_listener(a, listener_kind::revoked, t01));
  if (!cooperative) expect<assignment_changed>(a);
  expect<send_join_group>(a);
  expect_empty(a);
  const partition_set owned = cooperative ? t01 : partition_set{};
  REQUIRE(h.m.owned() == owned);

  SECTION("NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE: rediscover after a backoff, then rejoin") {
    const auto e = GENERATE(kafka_errc::not_coordinator, kafka_errc::coordinator_not_available);
    a = h.join(join_err(e));
    expect_empty(a);
    CHECK_FALSE(h.m.coordinator().has_value());
    CHECK(h.until_deadline() == 100ms);
    expect_empty(h.advance(99ms));
    a = h.advance(1ms);
    expect<find_coordinator>(a);
    expect_empty(a);
    a = h.found(2);
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == "m1");
    CHECK(h.m.owned() == owned);
  }
  SECTION("COORDINATOR_LOAD_IN_PROGRESS: back off, retry on the same coordinator") {
    a = h.join(join_err(kafka_errc::coordinator_load_in_progress));
    expect_empty(a);
    CHECK(h.m.coordinator() == 1);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<send_join_group>(a);
    expect_empty(a);
    // Backoff doubles on repeated failures.
    a = h.join(join_err(kafka_errc::coordinator_load_in_progress));
    CHECK(h.until_deadline() == 200ms);
  }
  SECTION("UNKNOWN_MEMBER_ID: partitions lost, member id reset, rejoin") {
    a = h.join(join_err(kafka_errc::unknown_member_id));
    if (cooperative) {
      auto l = expect_listener(a, listener_kind::lost, t01);
      expect_empty(a);  // no JoinGroup before the lost listener returned
      a = h.done(l);
      REQUIRE(expect<assignment_changed>(a).owned.empty());
    }
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id.empty());
    CHECK(h.m.generation() == -1);
    CHECK(h.snapshots->back().owned.empty());
  }
  SECTION("ILLEGAL_GENERATION: partitions lost, member id kept, rejoin") {
    a = h.join(join_err(kafka_errc::illegal_generation));
    if (cooperative) {
      auto l = expect_listener(a, listener_kind::lost, t01);
      expect_empty(a);
      a = h.done(l);
      expect<assignment_changed>(a);
    }
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == "m1");
    CHECK(h.m.generation() == -1);
  }
  SECTION("REBALANCE_IN_PROGRESS: join again at once") {
    a = h.join(join_err(kafka_errc::rebalance_in_progress));
    expect<send_join_group>(a);
    expect_empty(a);
  }
  SECTION("MEMBER_ID_REQUIRED: join again at once with the given id") {
    a = h.join(join_err(kafka_errc::member_id_required, "m9"));
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == "m9");
  }
  SECTION("fatal errors") {
    const auto e = GENERATE(from_range(std::begin(fatal_codes), std::end(fatal_codes)));
    CAPTURE(code(e));
    expect_fatal(h, h.join(join_err(e)), e);
    close_and_finish(h, false);
  }
  SECTION("an unexpected retriable error is reported (not fatal) and retried after a backoff") {
    a = h.join(join_err(kafka_errc::not_enough_replicas));
    auto r = expect<report_error>(a);
    expect_empty(a);
    CHECK_FALSE(r.fatal);
    a = h.to_deadline();
    expect<send_join_group>(a);
  }
  SECTION("an unexpected non-retriable error is retried, and fatal, named, the tenth time in a row") {
    // Issue 13, item 9: not a retry loop without end.
    for (int i = 1; i < 10; ++i) {
      a = h.join(join_err(kafka_errc::unknown_server_error));
      CHECK_FALSE(expect<report_error>(a).fatal);
      expect_empty(a);
      a = h.to_deadline();
      expect<send_join_group>(a);
    }
    a = h.join(join_err(kafka_errc::unknown_server_error));
    auto r = expect<report_error>(a);
    expect_empty(a);
    CHECK(r.fatal);
    CHECK(r.message.find("UNKNOWN_SERVER_ERROR") != std::string::npos);
    CHECK(r.message.find("JoinGroup") != std::string::npos);
    REQUIRE(h.m.state() == classic_state::fatal);
  }
  SECTION("request_failed: rediscover after a backoff, rejoin") {
    a = h.failed();
    expect_empty(a);
    CHECK_FALSE(h.m.coordinator().has_value());
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<find_coordinator>(a);
    expect_empty(a);
    a = h.found();
    expect<send_join_group>(a);
    expect_empty(a);
    CHECK(h.m.owned() == owned);
  }
}

TEST_CASE("member: SyncGroup errors", "[member]") {
  const bool cooperative = GENERATE(false, true);
  CAPTURE(cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  if (!cooperative) a = h.done(expect_listener(a, listener_kind::revoked, t01));
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", h.proto));
  expect<send_sync_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::syncing);
  const partition_set owned = cooperative ? t01 : partition_set{};

  SECTION("REBALANCE_IN_PROGRESS: rejoin at once") {
    a = h.sync(sync_err(kafka_errc::rebalance_in_progress));
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == "m1");
    CHECK(h.m.owned() == owned);  // cooperative keeps its partitions
  }
  SECTION("UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION: partitions lost, rejoin") {
    const auto e = GENERATE(kafka_errc::unknown_member_id, kafka_errc::illegal_generation);
    a = h.sync(sync_err(e));
    if (cooperative) {
      auto l = expect_listener(a, listener_kind::lost, t01);
      expect_empty(a);
      a = h.done(l);
      expect<assignment_changed>(a);
    }
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == (e == kafka_errc::unknown_member_id ? "" : "m1"));
    CHECK(h.m.owned().empty());
  }
  SECTION("NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE: rediscover, then JoinGroup again") {
    const auto e = GENERATE(kafka_errc::not_coordinator, kafka_errc::coordinator_not_available);
    a = h.sync(sync_err(e));
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::joining);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<find_coordinator>(a);
    a = h.found();
    expect<send_join_group>(a);
    expect_empty(a);
  }
  SECTION("COORDINATOR_LOAD_IN_PROGRESS: back off, JoinGroup again") {
    a = h.sync(sync_err(kafka_errc::coordinator_load_in_progress));
    expect_empty(a);
    CHECK(h.m.coordinator() == 1);
    a = h.to_deadline();
    expect<send_join_group>(a);
    expect_empty(a);
  }
  SECTION("fatal errors") {
    const auto e = GENERATE(from_range(std::begin(fatal_codes), std::end(fatal_codes)));
    CAPTURE(code(e));
    expect_fatal(h, h.sync(sync_err(e)), e);
    close_and_finish(h, false);
  }
  SECTION("a SyncGroup protocol that differs from JoinGroup's is fatal") {
    a = h.sync(sync_ok(t01, "something-else"));
    expect_fatal(h, a, kafka_errc::inconsistent_group_protocol);
  }
  SECTION("request_failed: rediscover, then JoinGroup again") {
    a = h.failed();
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::joining);
    a = h.to_deadline();
    expect<find_coordinator>(a);
    a = h.found();
    expect<send_join_group>(a);
    expect_empty(a);
    CHECK(h.m.owned() == owned);
  }
}

TEST_CASE("member: Heartbeat errors", "[member]") {
  const bool cooperative = GENERATE(false, true);
  CAPTURE(cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
  h.make_stable(t01);
  auto a = h.to_deadline();
  expect<send_heartbeat>(a);
  const auto sent = h.now;

  SECTION("NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE: rediscover, heartbeat again, still stable") {
    const auto e = GENERATE(kafka_errc::not_coordinator, kafka_errc::coordinator_not_available);
    a = h.heartbeat(e);
    expect_empty(a);
    CHECK_FALSE(h.m.coordinator().has_value());
    a = h.to_deadline();
    CHECK(h.now == sent + 100ms);
    expect<find_coordinator>(a);
    expect_empty(a);
    a = h.found(3);
    expect<send_heartbeat>(a);  // the failed one is retried as soon as the coordinator is back
    expect_empty(a);
    a = h.heartbeat();
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::stable);
    CHECK(h.m.owned() == t01);
  }
  SECTION("COORDINATOR_LOAD_IN_PROGRESS: back off, retry") {
    a = h.heartbeat(kafka_errc::coordinator_load_in_progress);
    expect_empty(a);
    CHECK(h.m.coordinator() == 1);
    a = h.to_deadline();
    CHECK(h.now == sent + 100ms);
    expect<send_heartbeat>(a);
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::stable);
  }
  SECTION("UNKNOWN_MEMBER_ID: lost, member id reset, rejoin") {
    a = h.heartbeat(kafka_errc::unknown_member_id);
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::preparing);
    expect_empty(h.advance(5000ms));  // no heartbeats for a generation that is gone
    a = h.done(l);
    REQUIRE(expect<assignment_changed>(a).owned.empty());
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id.empty());
  }
  SECTION("ILLEGAL_GENERATION: lost, member id kept, rejoin") {
    a = h.heartbeat(kafka_errc::illegal_generation);
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    a = h.done(l);
    expect<assignment_changed>(a);
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    CHECK(j.request.member_id == "m1");
  }
  SECTION("REBALANCE_IN_PROGRESS: rejoin at once (eager after the revoke)") {
    a = h.heartbeat(kafka_errc::rebalance_in_progress);
    if (!cooperative) {
      auto r = expect_listener(a, listener_kind::revoked, t01);
      expect_empty(a);
      a = h.done(r);
      expect<assignment_changed>(a);
    }
    expect<send_join_group>(a);
    expect_empty(a);
  }
  SECTION("fatal errors") {
    const auto e = GENERATE(from_range(std::begin(fatal_codes), std::end(fatal_codes)));
    CAPTURE(code(e));
    expect_fatal(h, h.heartbeat(e), e);
    CHECK(h.m.owned() == t01);
    // Closing runs the lost listener (the partitions are not ours any more), without a LeaveGroup.
    h.m.close(h.now);
    a = h.take();
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    a = h.done(l);
    expect<assignment_changed>(a);
    expect<left_group>(a);
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::closed);
  }
  SECTION("request_failed: rediscover, heartbeat again within the session") {
    a = h.failed();
    expect_empty(a);
    CHECK_FALSE(h.m.coordinator().has_value());
    a = h.to_deadline();
    CHECK(h.now == sent + 100ms);
    expect<find_coordinator>(a);
    a = h.found();
    expect<send_heartbeat>(a);
    expect_empty(a);
    a = h.heartbeat();
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::stable);
    CHECK(h.m.owned() == t01);
    CHECK(h.m.member_id() == "m1");
  }
  SECTION("repeated lookup failures back off exponentially up to retry.backoff.max.ms") {
    a = h.failed();
    std::vector<ms> waits;
    for (int i = 0; i < 6; ++i) {
      const auto before = h.now;
      a = h.to_deadline();
      waits.push_back(std::chrono::duration_cast<ms>(h.now - before));
      expect<find_coordinator>(a);
      h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
      expect_empty(h.take());
    }
    CHECK(waits == std::vector<ms>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms});
  }
}

TEST_CASE("member: a coordinator lookup refused for authorization is fatal", "[member]") {
  harness h;
  auto a = h.subscribe();
  expect<find_coordinator>(a);
  h.m.coordinator_failed(h.now, make_error_code(kafka_errc::group_authorization_failed));
  expect_fatal(h, h.take(), kafka_errc::group_authorization_failed);
  close_and_finish(h, false);
}

TEST_CASE("member: LeaveGroup errors and failures still finish the leave", "[member]") {
  const auto e = GENERATE(kafka_errc::none, kafka_errc::not_coordinator,
                          kafka_errc::coordinator_not_available, kafka_errc::coordinator_load_in_progress,
                          kafka_errc::unknown_member_id, kafka_errc::illegal_generation,
                          kafka_errc::rebalance_in_progress, kafka_errc::fenced_instance_id,
                          kafka_errc::group_authorization_failed, kafka_errc::unknown_server_error);
  const bool use_request_failed = GENERATE(false, true);
  CAPTURE(code(e), use_request_failed);
  harness h;
  h.make_stable(t01);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);  // no LeaveGroup before the revoke returned
  REQUIRE(h.m.state() == classic_state::leaving);
  a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned.empty());
  auto l = expect<send_leave_group>(a);
  expect_empty(a);
  CHECK(l.request.group_id == "g");
  CHECK(l.request.member_id == "m1");
  REQUIRE(l.request.members.size() == 1);
  CHECK(l.request.members[0].member_id == "m1");
  REQUIRE(l.request.members[0].reason.has_value());  // KIP-800
  CHECK_FALSE(l.request.members[0].reason->empty());
  a = use_request_failed ? h.failed() : h.leave(e);
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  CHECK(h.m.member_id().empty());
  CHECK(h.m.generation() == -1);
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(100000ms));
}

// ================================================================================================
// What a commit gets from the core's standing (issue 30, item 6)
// ================================================================================================

namespace {

// The data path's decision for a commit of one offset with the member's standing now: "sent"
// when it would go out, else the name of the error the caller gets.
std::string commit_now(const harness& h) {
  data::group_identity who;
  static_cast<group::standing&>(who) = h.m.standing();
  who.subscribed = true;
  const auto refused = data::refuse_commit(who, {{{"t", 0}, {5, "", -1}}});
  return refused ? error_name(refused->code) : "sent";
}

const std::string commit_failed = error_name(make_error_code(client_errc::commit_failed));
const std::string rebalancing = error_name(make_error_code(kafka_errc::rebalance_in_progress));

}  // namespace

TEST_CASE("member: a commit after a fatal error or once the leave is next fails for good; a rebalance is retriable",
          "[member][committer]") {
  harness h;
  h.make_stable(t01, {"t"}, "m1", 4);
  CHECK(commit_now(h) == "sent");

  SECTION("fatal: the generation stays, the commit fails for good, inside on_partitions_lost too") {
    auto a = h.next_heartbeat(kafka_errc::group_authorization_failed);
    CHECK(expect<report_error>(a).fatal);
    REQUIRE(h.m.state() == classic_state::fatal);
    REQUIRE(h.m.generation() == 4);
    CHECK(commit_now(h) == commit_failed);
    h.m.close(h.now);
    a = h.take();
    (void)expect_listener(a, listener_kind::lost, t01);
    REQUIRE(h.m.state() == classic_state::leaving);
    CHECK(h.m.standing().left);
    CHECK(commit_now(h) == commit_failed);
  }
  SECTION("unsubscribe: commits inside the revoke go out; once the LeaveGroup is sent they fail") {
    h.m.unsubscribe(h.now);
    auto a = h.take();
    auto revoke = expect_listener(a, listener_kind::revoked, t01);
    CHECK(commit_now(h) == "sent");
    a = h.done(revoke);
    expect<send_leave_group>(a);
    REQUIRE(h.m.generation() == 4);
    CHECK(h.m.standing().left);
    CHECK(commit_now(h) == commit_failed);
    (void)h.leave();
    REQUIRE(h.m.state() == classic_state::unsubscribed);
    CHECK_FALSE(h.m.standing().gone());
  }
  SECTION("removed: fails for good until rejoined") {
    auto a = h.next_heartbeat(kafka_errc::illegal_generation);
    auto lost = expect_listener(a, listener_kind::lost, t01);
    CHECK(commit_now(h) == commit_failed);
    a = h.done(lost);
    expect<send_join_group>(a);
    CHECK(commit_now(h) == commit_failed);
    a = h.join(join_ok("m1", 5, "leader", h.proto));
    CHECK(commit_now(h) == rebalancing);  // syncing
  }
  SECTION("a rebalance: REBALANCE_IN_PROGRESS (poll(), then commit again)") {
    auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
    auto revoke = expect_listener(a, listener_kind::revoked, t01);
    CHECK(commit_now(h) == "sent");  // the revoke commits with generation 4
    a = h.done(revoke);
    expect<send_join_group>(a);
    CHECK_FALSE(h.m.standing().gone());
    CHECK(commit_now(h) == rebalancing);
  }
}

TEST_CASE(
    "member: close() while syncing a new generation refuses the revoke's commits (not the generation they "
    "own)",
    "[member][committer][sim_finding]") {
  // kgroup-sim --group, fresh seed 796587710215 (G2): a member's JoinGroup answer moved its
  // generation from 2 to 3, and close() came before that generation's SyncGroup answer; the
  // auto-commit before the revoke sent the partitions of generation 2 with generation 3. After a
  // coordinator failover the reloaded group (stored at generation 2) made a generation 3 of its
  // own, which gave one of them to another member and accepted the commit. Java takes the
  // generation for a commit only while STABLE.
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t01, {"t"}, "m1", 4);
  CHECK(commit_now(h) == "sent");
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);  // cooperative: t01 stays owned through the join
  a = h.join(join_ok("m1", 5, "leader", h.proto));
  REQUIRE(h.m.generation() == 5);
  CHECK(commit_now(h) == rebalancing);  // syncing
  h.m.close(h.now);
  a = h.take();
  (void)expect_listener(a, listener_kind::revoked, t01);
  REQUIRE(h.m.state() == classic_state::leaving);
  CHECK_FALSE(h.m.standing().stable);
  CHECK(commit_now(h) == rebalancing);  // was "sent", with generation 5 and generation 4's partitions
}
