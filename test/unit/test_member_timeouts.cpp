// The membership core: session and poll timeouts, unsubscribe and close, bad assignments and
// stale events (member_harness.hpp).
#include "member_harness.hpp"

// ================================================================================================
// Session and poll timeouts
// ================================================================================================

TEST_CASE("member: no successful heartbeat for session.timeout.ms loses the partitions", "[member]") {
  const bool is_static = GENERATE(false, true);
  CAPTURE(is_static);
  harness h(
      make_options(RebalanceProtocol::eager, is_static ? std::optional<std::string>("i1") : std::nullopt));
  h.make_stable(t01);
  const auto t0 = h.now;

  SECTION("every heartbeat is answered with a retriable error") {
    actions a;
    for (int i = 0; i < 1000 && h.m.owned() == t01 && h.m.state() == classic_state::stable; ++i) {
      a = h.to_deadline();
      if (count_of<send_heartbeat>(a) == 1) {
        REQUIRE(h.now < t0 + 10000ms);
        expect<send_heartbeat>(a);
        expect_empty(a);
        a = h.heartbeat(kafka_errc::coordinator_load_in_progress);
        expect_empty(a);
      } else if (!a.empty()) {
        break;
      }
    }
    REQUIRE(h.now == t0 + 10000ms);
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    a = h.done(l);
    REQUIRE(last_owned(a).empty());
    auto j = drive_to_join(h, std::move(a));
    CHECK(j.request.member_id == (is_static ? "m1" : ""));
  }
  SECTION("the heartbeat in flight never comes back") {
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    a = h.advance(6999ms);
    expect_empty(a);
    a = h.advance(1ms);
    REQUIRE(h.now == t0 + 10000ms);
    // The hung heartbeat is abandoned at once (issue 13, item 7): the rejoin does not wait for
    // request.timeout.ms to fail it.
    CHECK(expect<abandon_requests>(a).node == 1);
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    a = h.done(l);
    expect<assignment_changed>(a);
    expect<find_coordinator>(a);
    a = h.found();
    auto j = expect<send_join_group>(a);
    CHECK(j.request.member_id == (is_static ? "m1" : ""));
    // (The abandoned heartbeat's own failure never reaches the core: the driver drops callbacks
    // of requests sent before an abandon_requests.)
  }
  SECTION("a successful heartbeat just in time keeps the session") {
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    h.now = t0 + 9999ms;
    a = h.heartbeat();
    expect<send_heartbeat>(a);  // overdue
    a = h.advance(1ms);
    expect_empty(a);
    a = h.heartbeat();
    expect_empty(a);
    REQUIRE(h.m.state() == classic_state::stable);
    CHECK(h.m.owned() == t01);
  }
}

TEST_CASE("member: poll timeout makes a dynamic member leave with a reason; the next poll rejoins",
          "[member]") {
  harness h;
  h.make_stable(t01);
  const auto t0 = h.m.last_poll();
  auto rest = h.run_until(t0 + 59999ms, false);
  expect_empty(rest);
  REQUIRE(h.m.state() == classic_state::stable);
  REQUIRE(h.m.next_deadline() == t0 + 60000ms);
  auto a = h.to_deadline();
  auto l = expect<send_leave_group>(a);
  REQUIRE(l.request.members.size() == 1);
  CHECK(l.request.members[0].member_id == "m1");
  REQUIRE(l.request.members[0].reason.has_value());
  CHECK(l.request.members[0].reason->find("poll") != std::string::npos);
  auto e = expect<report_error>(a);
  CHECK_FALSE(e.fatal);
  CHECK(e.message.find("max.poll.interval.ms") != std::string::npos);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  CHECK(h.m.owned() == t01);  // lost only when the user polls again
  CHECK_FALSE(h.m.next_deadline().has_value());
  a = h.leave();
  expect_empty(a);
  expect_empty(h.advance(30000ms));  // no heartbeats, nothing

  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  expect<assignment_changed>(a);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
  a = h.join(join_ok("m2", 5, "leader", "range"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok(t01));
  expect<assignment_changed>(a);
  a = h.done(expect_listener(a, listener_kind::assigned, t01));
  REQUIRE(h.m.state() == classic_state::stable);

  // Found by kgroup-sim --group (seed 5863, invariant G6): the poll timeout's LeaveGroup was still
  // counted as sent in the new membership, so a later close() neither heartbeated nor looked the
  // coordinator up while its revoke ran, and never sent its LeaveGroup: close() waited out its
  // timeout and the group waited for the session timeout.
  h.m.close(h.now);
  a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.advance(3000ms);  // the revoke callback runs: heartbeats go on
  expect<send_heartbeat>(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  auto leave = expect<send_leave_group>(a);
  CHECK(leave.request.member_id == "m2");
}

TEST_CASE("member: a long poll() keeps the member; only the time between polls counts", "[member][poll]") {
  // Issue 13, item 1: poll(12 s) with max.poll.interval.ms 5 s on an idle topic was evicted in
  // every call. Time spent waiting inside poll() never counts (Java's poll(Long.MAX_VALUE) idiom).
  harness h;
  h.make_stable(t01);
  h.m.poll_called(h.now);
  const auto entered = h.now;
  // Four max.poll.interval.ms inside one poll(): heartbeats go on, nothing else happens.
  expect_empty(h.run_until(entered + 4 * 60000ms, false));
  REQUIRE(h.m.state() == classic_state::stable);
  REQUIRE(h.m.owned() == t01);
  REQUIRE(h.m.generation() == 1);
  // The next deadline is a heartbeat, never the poll timer, while inside poll().
  REQUIRE(h.m.next_deadline() <= h.now + 3000ms);
  // poll() returns: from now on the application has max.poll.interval.ms until the next one.
  h.m.poll_returned(h.now);
  const auto returned = h.now;
  expect_empty(h.take());
  expect_empty(h.run_until(returned + 59999ms, false));
  REQUIRE(h.m.state() == classic_state::stable);
  auto a = h.to_deadline();
  CHECK(h.now == returned + 60000ms);
  expect<send_leave_group>(a);
  expect<report_error>(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
}

TEST_CASE("member: a long poll() still rebalances when the group does", "[member][poll]") {
  harness h;
  h.make_stable(t01);
  h.m.poll_called(h.now);
  expect_empty(h.run_until(h.now + 90000ms, false));
  // Another member joins: the member, still inside the same poll(), rejoins and gets its share.
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto revoked = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  h.m.listener_started(h.now, revoked.seq);
  a = h.done(revoked);
  expect<assignment_changed>(a);
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", "range"));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}}));
  expect<assignment_changed>(a);
  auto assigned = expect_listener(a, listener_kind::assigned, {{"t", 0}});
  a = h.done(assigned);
  REQUIRE(h.m.state() == classic_state::stable);
  REQUIRE(h.m.generation() == 2);
  expect_empty(h.run_until(h.now + 120000ms, false));
  REQUIRE(h.m.state() == classic_state::stable);
}

TEST_CASE("member: a listener callback inside poll() counts toward max.poll.interval.ms", "[member][poll]") {
  harness h;
  h.make_stable(t01);
  h.m.poll_called(h.now);
  expect_empty(h.run_until(h.now + 100000ms, false));  // waiting inside poll(): does not count
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto revoked = expect_listener(a, listener_kind::revoked, t01);
  h.m.listener_started(h.now, revoked.seq);
  const auto callback_began = h.now;
  // The callback hangs: max.poll.interval.ms runs from its start.
  expect_empty(h.run_until(callback_began + 59999ms, false));
  a = h.to_deadline();
  CHECK(h.now == callback_began + 60000ms);
  expect<send_leave_group>(a);
  expect<report_error>(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
}

TEST_CASE("member: poll timeout of a static member sends no LeaveGroup and keeps its id", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative, "i1"));
  h.make_stable(t01);
  const auto t0 = h.m.last_poll();
  expect_empty(h.run_until(t0 + 59999ms, false));
  auto a = h.to_deadline();
  expect<report_error>(a);
  expect_empty(a);  // no LeaveGroup: the instance id keeps the membership until the session ends
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  expect_empty(h.advance(30000ms));  // it just stops heartbeating
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  a = h.done(lost);
  expect<assignment_changed>(a);
  auto j = expect<send_join_group>(a);
  CHECK(j.request.member_id == "m1");
  CHECK(j.request.group_instance_id == "i1");
}

// A stable member owning t01 (h: cooperative, static) rejoins, a rebalance under way: the
// coordinator holds its JoinGroup, which names t01 as owned.
namespace {
void hold_rejoin(harness& h) {
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);
  expect_empty(a);
}
}  // namespace

// Found by kgroup-sim --group --static (seed 1230, invariant G6). A static member's poll timeout
// sends no LeaveGroup, so the JoinGroup it had in flight (a rebalance under way, its partitions
// still owned) stayed in flight, and after the next poll() reported those partitions lost the
// core took that JoinGroup's answer for the rejoin. The leader had assigned from the
// subscription it carried, which still named the lost partitions: cooperative-sticky held them
// back for this member to revoke, it owned nothing to revoke and never rejoined, and the
// partitions stayed unassigned until some other rebalance. (A dynamic member's LeaveGroup
// supersedes the JoinGroup's answer, though not its failure: see the next case.)
// The poll timeout now abandons the request in flight, and the rejoin sends a JoinGroup that
// owns nothing.
TEST_CASE("member: a static member's poll timeout abandons its JoinGroup in flight; the rejoin owns nothing",
          "[member][sim_finding]") {
  harness h(make_options(RebalanceProtocol::cooperative, "i1"));
  hold_rejoin(h);
  REQUIRE(h.snapshots->back().owned == t01);
  // The coordinator holds the JoinGroup while the application stalls past max.poll.interval.ms.
  const auto limit = h.m.last_poll() + 60000ms;
  expect_empty(h.run_until(limit - 1ms, false));
  auto a = h.to_deadline();
  REQUIRE(h.now == limit);
  CHECK(expect<abandon_requests>(a).node == 1);
  CHECK_FALSE(expect<report_error>(a).fatal);
  expect_empty(a);  // no LeaveGroup
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  REQUIRE(last_owned(a).empty());
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id == "m1");
  CHECK(j.request.group_instance_id == "i1");
  CHECK(h.snapshots->back().owned.empty());
}

// Found by kgroup-sim --group (seed 796594772677, invariant G6). A dynamic member's poll timeout
// sent its LeaveGroup while a JoinGroup was in flight and forgot that JoinGroup without
// abandoning it: the request stayed outstanding in the driver, and its failure (its timeout,
// max.poll.interval.ms + 5 s after it was sent) came while the rejoin's JoinGroup was in flight,
// which the core took for that one's. It sent another JoinGroup while the coordinator still
// held the first, and in the simulation every JoinGroup's REBALANCE_IN_PROGRESS answer was taken
// for the next one's: a rejoin loop that kept the group rebalancing. Java never has two
// JoinGroups out and never takes one request's answer for another's. The poll timeout now
// abandons the request in flight before its LeaveGroup, as a static member's does.
TEST_CASE("member: a dynamic member's poll timeout abandons its JoinGroup in flight before the LeaveGroup",
          "[member][sim_finding]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  hold_rejoin(h);
  const auto limit = h.m.last_poll() + 60000ms;
  expect_empty(h.run_until(limit - 1ms, false));
  auto a = h.to_deadline();
  REQUIRE(h.now == limit);
  // The abandon comes first: the driver fails the group connection's requests in flight, and the
  // LeaveGroup goes out after it.
  REQUIRE_FALSE(a.empty());
  REQUIRE(std::holds_alternative<abandon_requests>(a.front()));
  CHECK(expect<abandon_requests>(a).node == 1);
  auto l = expect<send_leave_group>(a);
  CHECK(l.request.member_id == "m1");
  CHECK_FALSE(expect<report_error>(a).fatal);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  a = h.leave();
  expect_empty(a);
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  REQUIRE(last_owned(a).empty());
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
}

TEST_CASE("member: a poll timeout with nothing in flight abandons nothing", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t01);
  const auto limit = h.m.last_poll() + 60000ms;
  auto a = h.run_until(limit, false);
  REQUIRE(h.now == limit);
  REQUIRE(count_of<abandon_requests>(a) == 0);
  expect<send_leave_group>(a);
  expect<report_error>(a);
  expect_empty(a);
}

TEST_CASE("member: poll timeout while a listener runs: its continuation is dropped, the next poll rejoins",
          "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t012);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
  a = h.sync(sync_ok(t01));
  auto r = expect_listener(a, listener_kind::revoked, {{"t", 2}});
  h.m.listener_started(h.now, r.seq);
  // The user's revoke callback hangs past max.poll.interval.ms (heartbeats go on meanwhile).
  const auto limit = h.m.last_poll() + 60000ms;
  actions rest = h.run_until(limit - 1ms, false);
  expect_empty(rest);
  a = h.to_deadline();
  expect<send_leave_group>(a);
  expect<report_error>(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  h.leave();
  a = h.done(r);  // the revoke returns: t2 is gone, but nothing is assigned to a member that left
  REQUIRE(expect<assignment_changed>(a).owned == t01);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  a = h.done(lost);
  expect<assignment_changed>(a);
  expect<send_join_group>(a);
  expect_empty(a);
}

// ================================================================================================
// Unsubscribe and close
// ================================================================================================

TEST_CASE("member: unsubscribe revokes, then leaves; subscribing again rejoins", "[member]") {
  harness h;
  h.make_stable(t01);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  // Leaving: no LeaveGroup before the revoke returned, but heartbeats go on meanwhile.
  a = h.advance(3000ms);
  expect<send_heartbeat>(a);
  expect_empty(a);
  expect_empty(h.heartbeat());
  a = h.done(r);
  expect<assignment_changed>(a);
  auto l = expect<send_leave_group>(a);
  CHECK_FALSE(l.request.members.at(0).reason.value_or("").empty());
  a = h.leave();
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  CHECK(h.m.topics().empty());

  // The coordinator is still known: JoinGroup at once, as a new member.
  a = h.subscribe({"t"});
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
  a = h.join(join_ok("m2", 7, "leader", "range"));
  expect<send_sync_group>(a);
}

// Found by kgroup-sim --group --static --unsubscribe (seed 3965, invariant G6), the poll timeout's
// finding above again, through unsubscribe(): a static member's unsubscribe() sends no LeaveGroup
// (Java's DEFAULT operation), so the JoinGroup it had in flight (a rebalance under way, its
// partitions still owned) stayed in flight after the leave; the next subscribe() sent no JoinGroup
// of its own and took that one's answer. The leader had assigned from the subscription it
// carried, which still named the partitions the unsubscribe() had revoked: cooperative-sticky held
// one back for this member to revoke, it owned nothing to revoke and never rejoined, and the
// partition stayed unassigned. Joining again after a leave now abandons the request in flight.
TEST_CASE(
    "member: a static member's unsubscribe() abandons its JoinGroup in flight; subscribe() joins owning "
    "nothing",
    "[member][sim_finding]") {
  harness h(make_options(RebalanceProtocol::cooperative, "i1"));
  hold_rejoin(h);
  // The coordinator holds the JoinGroup; the application unsubscribes meanwhile.
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned.empty());
  expect<left_group>(a);
  expect_empty(a);  // no LeaveGroup: a static member stays until its session timeout
  REQUIRE(h.m.state() == classic_state::unsubscribed);

  // subscribe() joins at once with a JoinGroup of its own, abandoning the one in flight (whose
  // answer would otherwise be taken for this join).
  a = h.subscribe({"t"});
  CHECK(expect<abandon_requests>(a).node == 1);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id == "m1");
  CHECK(j.request.group_instance_id == "i1");
  CHECK(h.snapshots->back().owned.empty());
}

TEST_CASE("member: close of a dynamic member revokes, sends LeaveGroup, then left_group", "[member]") {
  harness h;
  h.make_stable(t01);
  h.m.close(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  auto l = expect<send_leave_group>(a);
  expect_empty(a);
  CHECK(l.request.member_id == "m1");
  a = h.leave();
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::closed);
}

TEST_CASE("member: close of a static member revokes and sends no LeaveGroup", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative, "i1"));
  h.make_stable(t01);
  h.m.close(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::closed);
}

TEST_CASE("member: subscribe while the leave is under way rejoins once it is done", "[member]") {
  harness h;
  h.make_stable(t01);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  a = h.subscribe({"u"});
  expect_empty(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<send_leave_group>(a);
  a = h.leave();
  expect<left_group>(a);
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
  CHECK(h.snapshots->back().topics == std::vector<std::string>{"u"});
  REQUIRE(h.m.state() == classic_state::joining);
}

TEST_CASE("member: a fatal error while leaving is reported and the leave still finishes", "[member]") {
  harness h;
  h.make_stable(t01);
  auto a = h.to_deadline();
  expect<send_heartbeat>(a);
  h.m.close(h.now);
  a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  a = h.heartbeat(kafka_errc::group_authorization_failed);  // the heartbeat sent before close
  auto e = expect<report_error>(a);
  CHECK(e.fatal);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::leaving);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<send_leave_group>(a);
  a = h.leave(kafka_errc::group_authorization_failed);
  expect<left_group>(a);
  REQUIRE(h.m.state() == classic_state::closed);
}

TEST_CASE("member: close() from every state finishes", "[member]") {
  const bool is_static = GENERATE(false, true);
  const bool cooperative = GENERATE(false, true);
  CAPTURE(is_static, cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager,
                         is_static ? std::optional<std::string>("i1") : std::nullopt));
  // A dynamic member that has a member id and a known coordinator says goodbye.
  bool leave = false;
  actions carry;
  SECTION("unsubscribed") {}
  SECTION("joining, looking for the coordinator") {
    h.subscribe();
    REQUIRE(h.m.state() == classic_state::joining);
  }
  SECTION("joining, first JoinGroup in flight (no member id yet)") {
    h.start();
  }
  SECTION("joining, JoinGroup with a member id in flight") {
    h.start();
    h.join(join_err(kafka_errc::member_id_required, "m1"));
    leave = !is_static;
  }
  SECTION("joining, backing off") {
    h.start();
    h.join(join_err(kafka_errc::member_id_required, "m1"));
    h.join(join_err(kafka_errc::coordinator_load_in_progress));
    REQUIRE(h.m.next_deadline() == h.now + 100ms);
    leave = !is_static;
  }
  SECTION("joining, coordinator gone") {
    h.start();
    h.join(join_err(kafka_errc::member_id_required, "m1"));
    h.join(join_err(kafka_errc::not_coordinator));
    REQUIRE_FALSE(h.m.coordinator().has_value());
  }
  SECTION("assigning") {
    h.start();
    h.join(join_ok("m1", 1, "m1", h.proto, {"m1"}));
    REQUIRE(h.m.state() == classic_state::assigning);
    leave = !is_static;
  }
  SECTION("syncing") {
    h.start();
    h.join(join_ok("m1", 1, "leader", h.proto));
    REQUIRE(h.m.state() == classic_state::syncing);
    leave = !is_static;
  }
  SECTION("completing, assigned listener pending") {
    h.start();
    h.join(join_ok("m1", 1, "leader", h.proto));
    h.sync(sync_ok(t01));
    REQUIRE(h.m.state() == classic_state::completing);
    leave = !is_static;
  }
  SECTION("stable") {
    h.make_stable(t01);
    leave = !is_static;
  }
  SECTION("stable, heartbeat in flight") {
    h.make_stable(t01);
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    leave = !is_static;
  }
  SECTION("preparing, revoke pending") {
    h.make_stable(t01, {"t", "u"});
    if (cooperative) {
      // The revoke before a cooperative rejoin: a topic was dropped (t is on it).
      h.subscribe({"u"});
    } else {
      h.m.enforce_rebalance(h.now, "x");
      h.take();
    }
    REQUIRE(h.m.state() == classic_state::preparing);
    leave = !is_static;
  }
  SECTION("preparing, lost pending after ILLEGAL_GENERATION") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::illegal_generation);
    REQUIRE(h.m.state() == classic_state::preparing);
    leave = !is_static;  // the member id is still valid
  }
  SECTION("preparing, lost pending after UNKNOWN_MEMBER_ID") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::unknown_member_id);
    REQUIRE(h.m.state() == classic_state::preparing);
  }
  SECTION("leaving, unsubscribe under way") {
    h.make_stable(t01);
    h.m.unsubscribe(h.now);
    carry = h.take();  // the revoke listener the user is running
    REQUIRE(h.m.state() == classic_state::leaving);
    leave = !is_static;
  }
  SECTION("poll_timed_out") {
    h.make_stable(t01);
    h.run_until(h.m.last_poll() + 59999ms, false);
    auto a = h.to_deadline();
    if (!is_static) {
      expect<send_leave_group>(a);
      h.leave();
    }
    REQUIRE(h.m.state() == classic_state::poll_timed_out);
  }
  SECTION("fatal") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::group_authorization_failed);
    REQUIRE(h.m.state() == classic_state::fatal);
  }
  close_and_finish(h, leave, kafka_errc::none, std::move(carry));
}

// ================================================================================================
// Bad assignments
// ================================================================================================

TEST_CASE("member: a malformed assignment is rejected and the member rejoins", "[member]") {
  const protocol::bytes bad = GENERATE(protocol::bytes{0x00}, protocol::bytes{0xff, 0xff},
                                       protocol::bytes{0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't'},
                                       protocol::bytes{0x00, 0x00, 0x7f, 0xff, 0xff, 0xff});
  const bool cooperative = GENERATE(false, true);
  CAPTURE(bad, cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
  h.start();
  auto a = h.join(join_ok("m1", 1, "leader", h.proto));
  expect<send_sync_group>(a);
  a = h.sync(sync_raw(bad));
  auto e = expect<report_error>(a);
  expect_empty(a);  // no listener, no assignment
  CHECK_FALSE(e.fatal);
  CHECK(e.code == make_error_code(client_errc::protocol_violation));
  CHECK(e.message.find("malformed") != std::string::npos);
  REQUIRE(h.m.state() == classic_state::joining);
  CHECK(h.m.owned().empty());
  a = h.to_deadline();
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id == "m1");
  a = h.join(join_ok("m1", 2, "leader", h.proto));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok(t01));
  expect<assignment_changed>(a);
  a = h.done(expect_listener(a, listener_kind::assigned, t01));
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
}

TEST_CASE("member: an assignment naming an unsubscribed topic is rejected and the member rejoins",
          "[member]") {
  const bool cooperative = GENERATE(false, true);
  CAPTURE(cooperative);
  harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  if (!cooperative) a = h.done(expect<run_listener>(a));
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", h.proto));
  expect<send_sync_group>(a);
  a = h.sync(sync_ok({{"t", 0}, {"u", 0}}));
  auto e = expect<report_error>(a);
  expect_empty(a);
  CHECK_FALSE(e.fatal);
  CHECK(e.message.find("'u'") != std::string::npos);
  CHECK(h.m.owned() == (cooperative ? t01 : partition_set{}));  // nothing taken, nothing revoked
  a = h.to_deadline();
  expect<send_join_group>(a);
  expect_empty(a);
}

// ================================================================================================
// Stale events
// ================================================================================================

TEST_CASE("member: stale events are ignored", "[member]") {
  SECTION("listener_done with an old, a repeated or an unknown seq") {
    harness h(make_options(RebalanceProtocol::cooperative));
    h.make_stable(t012);
    auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
    a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
    a = h.sync(sync_ok(t01));
    auto old = expect_listener(a, listener_kind::revoked, {{"t", 2}});
    h.m.unsubscribe(h.now);  // supersedes the pending revoke with a revoke of everything
    a = h.take();
    auto all = expect_listener(a, listener_kind::revoked, t012);
    CHECK(all.seq != old.seq);
    expect_empty(h.done(old));
    h.m.listener_done(h.now, 12345);
    expect_empty(h.take());
    REQUIRE(h.m.state() == classic_state::leaving);
    CHECK(h.m.owned() == t012);
    a = h.done(all);
    expect<assignment_changed>(a);
    expect<send_leave_group>(a);
    expect_empty(h.done(all));  // twice
    a = h.leave();
    expect<left_group>(a);
  }
  SECTION("a JoinGroup response after close") {
    harness h;
    h.start();
    h.m.close(h.now);
    auto a = h.take();
    expect<left_group>(a);
    REQUIRE(h.m.state() == classic_state::closed);
    expect_empty(h.join(join_ok("m1", 1, "m1", "range", {"m1"})));
    expect_empty(h.join(join_err(kafka_errc::fenced_instance_id)));
    expect_empty(h.sync(sync_ok(t01)));
    expect_empty(h.heartbeat(kafka_errc::fenced_instance_id));
    expect_empty(h.failed());
    expect_empty(h.found());
    h.m.coordinator_failed(h.now, make_error_code(kafka_errc::group_authorization_failed));
    expect_empty(h.take());
    expect_empty(h.poll());
    h.m.subscribe(h.now, {"t"});
    expect_empty(h.take());
    REQUIRE(h.m.state() == classic_state::closed);
  }
  SECTION("a heartbeat answer after close") {
    harness h;
    h.make_stable(t01);
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    h.m.close(h.now);
    a = h.take();
    a = h.done(expect<run_listener>(a));
    expect<send_leave_group>(a);
    expect_empty(h.heartbeat(kafka_errc::fenced_instance_id));  // overtaken by the LeaveGroup
    a = h.leave();
    expect<left_group>(a);
    expect_empty(h.heartbeat(kafka_errc::unknown_member_id));
    REQUIRE(h.m.state() == classic_state::closed);
  }
  SECTION("request_failed with nothing in flight") {
    harness h;
    h.make_stable(t01);
    expect_empty(h.failed());
    CHECK(h.m.coordinator() == 1);
    REQUIRE(h.m.state() == classic_state::stable);
  }
  SECTION("a repeated SyncGroup answer") {
    harness h;
    h.start();
    auto a = h.join(join_ok("m1", 1, "leader", "range"));
    a = h.sync(sync_err(kafka_errc::rebalance_in_progress));
    expect<send_join_group>(a);
    expect_empty(h.sync(sync_ok(t01)));  // the JoinGroup is what is in flight
    REQUIRE(h.m.state() == classic_state::joining);
    CHECK(h.m.owned().empty());
  }
  SECTION("an assignment computed after the leader left") {
    harness h;
    h.start();
    auto a = h.join(join_ok("m1", 1, "m1", "range", {"m1"}));
    expect<compute_assignment>(a);
    h.m.unsubscribe(h.now);
    a = h.take();
    expect<send_leave_group>(a);
    expect_empty(h.computed({{"m1", encode_parts(t01)}}));
    a = h.leave();
    expect<left_group>(a);
  }
  SECTION("a late answer to a heartbeat that outlived the session") {
    harness h(make_options(RebalanceProtocol::cooperative));
    h.make_stable(t01);
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    a = h.advance(7000ms);
    auto lost = expect_listener(a, listener_kind::lost, t01);
    // The answer comes while the lost listener runs: it is about the old generation.
    a = h.heartbeat(kafka_errc::unknown_member_id);
    expect_empty(a);
    a = h.done(lost);
    expect<assignment_changed>(a);
    expect<find_coordinator>(a);
    a = h.found();
    expect<send_join_group>(a);
  }
}

TEST_CASE("member: close(CloseOptions) per KIP-1092: LeaveGroup or not, static or dynamic",
          "[member][close_options]") {
  const bool is_static = GENERATE(false, true);
  const auto op = GENERATE(group::close_membership::default_operation, group::close_membership::leave_group,
                           group::close_membership::remain_in_group);
  CAPTURE(is_static, static_cast<int>(op));
  harness h(make_options(RebalanceProtocol::cooperative,
                         is_static ? std::optional<std::string>("i1") : std::nullopt));
  h.make_stable(t01);
  h.m.close(h.now, op);
  auto a = h.take();
  // The revoke listener runs whatever the operation (Java's onLeavePrepare).
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  const bool leaves = op == group::close_membership::leave_group ||
                      (op == group::close_membership::default_operation && !is_static);
  if (leaves) {
    auto l = expect<send_leave_group>(a);
    expect_empty(a);
    REQUIRE(l.request.members.size() == 1);
    CHECK(l.request.members.front().member_id == "m1");
    CHECK(l.request.members.front().group_instance_id ==
          (is_static ? std::optional<std::string>("i1") : std::nullopt));
    a = h.leave();
  }
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::closed);
}
