// The membership core against a scripted coordinator: an error at every step of the join
// sequence, then recovery (member_harness.hpp).
#include "member_harness.hpp"

// ================================================================================================
// An error at every step
// ================================================================================================

namespace {

enum class fault {
  request_failed,
  not_coordinator,
  coordinator_not_available,
  load_in_progress,
  unknown_member_id,
  illegal_generation,
  rebalance_in_progress,
};
const fault all_faults[] = {
    fault::request_failed,       fault::not_coordinator,   fault::coordinator_not_available,
    fault::load_in_progress,     fault::unknown_member_id, fault::illegal_generation,
    fault::rebalance_in_progress};

kafka_errc code_of(fault f) {
  switch (f) {
    case fault::not_coordinator:
      return kafka_errc::not_coordinator;
    case fault::coordinator_not_available:
      return kafka_errc::coordinator_not_available;
    case fault::load_in_progress:
      return kafka_errc::coordinator_load_in_progress;
    case fault::unknown_member_id:
      return kafka_errc::unknown_member_id;
    case fault::illegal_generation:
      return kafka_errc::illegal_generation;
    case fault::rebalance_in_progress:
      return kafka_errc::rebalance_in_progress;
    case fault::request_failed:
      break;
  }
  return kafka_errc::none;
}

// Plays the coordinator of a group with this member and (for the leader) one silent peer: answers
// every request correctly, except the `fail_at`-th step (a lookup, a request or an assignment),
// which fails with `kind`. Runs the member until it is stable with `target` and has had a heartbeat
// answered since its last SyncGroup. Checks the listeners' timeline as it goes: a partition is
// assigned only if the user does not own it, revoked only if the user owns it, lost only all at once.
struct scripted_coordinator {
  explicit scripted_coordinator(harness& hh) : h(hh) {}

  harness& h;
  bool leader = false;
  partition_set target;
  int fail_at = -1;
  fault kind = fault::request_failed;

  int step = 0;
  bool injected = false;
  std::int32_t generation = 0;
  int ids = 0;
  partition_set user_owned;
  int heartbeats_since_sync = 0;

  bool fail_now() {
    ++step;
    if (step != fail_at) return false;
    injected = true;
    return true;
  }

  actions handle(action& x) {
    INFO("step " << step << ": " << describe(x));
    if (std::holds_alternative<find_coordinator>(x)) {
      if (fail_now()) {
        h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
        return h.take();
      }
      return h.found();
    }
    if (auto* j = std::get_if<send_join_group>(&x)) {
      REQUIRE(j->request.reason.has_value());
      REQUIRE_FALSE(j->request.reason->empty());
      if (fail_now()) return kind == fault::request_failed ? h.failed() : h.join(join_err(code_of(kind)));
      if (j->request.member_id.empty()) {
        return h.join(join_err(kafka_errc::member_id_required, "m" + std::to_string(++ids)));
      }
      const std::string me = j->request.member_id;
      ++generation;
      return h.join(leader ? join_ok(me, generation, me, h.proto, {me, "peer"})
                           : join_ok(me, generation, "peer", h.proto));
    }
    if (auto* c = std::get_if<compute_assignment>(&x)) {
      REQUIRE(leader);
      REQUIRE(c->generation == generation);
      REQUIRE(c->members.size() == 2);
      if (fail_now()) {
        h.m.assignment_computed(h.now, h.m.generation(), make_error_code(client_errc::protocol_violation), {});
        return h.take();
      }
      return h.computed({{c->members[0].member_id, encode_parts(target)}, {"peer", encode_parts({})}});
    }
    if (auto* s = std::get_if<send_sync_group>(&x)) {
      REQUIRE(s->request.generation_id == generation);
      heartbeats_since_sync = 0;
      if (fail_now()) return kind == fault::request_failed ? h.failed() : h.sync(sync_err(code_of(kind)));
      if (leader) {
        REQUIRE(s->request.assignments.size() == 2);
        CHECK(s->request.assignments[0].member_id == s->request.member_id);
        return h.sync(sync_raw(s->request.assignments[0].assignment));
      }
      REQUIRE(s->request.assignments.empty());
      return h.sync(sync_ok(target));
    }
    if (auto* hb = std::get_if<send_heartbeat>(&x)) {
      REQUIRE(hb->request.generation_id == generation);
      if (fail_now()) return kind == fault::request_failed ? h.failed() : h.heartbeat(code_of(kind));
      if (h.m.state() == classic_state::stable) ++heartbeats_since_sync;
      return h.heartbeat();
    }
    if (auto* l = std::get_if<run_listener>(&x)) {
      const auto parts = set_of(l->partitions);
      switch (l->kind) {
        case listener_kind::assigned:
          for (const auto& tp : parts) REQUIRE(user_owned.count(tp) == 0);
          user_owned.insert(parts.begin(), parts.end());
          break;
        case listener_kind::revoked:
          for (const auto& tp : parts) REQUIRE(user_owned.count(tp) == 1);
          for (const auto& tp : parts) user_owned.erase(tp);
          break;
        case listener_kind::lost:
          REQUIRE(parts == user_owned);
          user_owned.clear();
          break;
      }
      return h.done(*l);
    }
    if (auto* e = std::get_if<report_error>(&x)) {
      REQUIRE_FALSE(e->fatal);
      return {};
    }
    if (std::holds_alternative<assignment_changed>(x)) return {};
    FAIL("unexpected action " << describe(x));
    return {};
  }

  bool settled() const {
    return h.m.state() == classic_state::stable && h.m.owned() == target && user_owned == target &&
           heartbeats_since_sync >= 1;
  }

  void run(actions a) {
    for (int i = 0; i < 5000; ++i) {
      if (a.empty()) {
        if (settled()) {
          CHECK(h.m.invalid_transitions() == 0);
          if (fail_at > 0) CHECK(injected);
          return;
        }
        // Nothing to answer: time passes to the next deadline (the user keeps polling).
        const auto d = h.m.next_deadline();
        INFO("state " << to_string(h.m.state()));
        REQUIRE(d.has_value());
        h.now = std::max(h.now, *d);
        h.m.poll_called(h.now);
        h.m.poll_returned(h.now);
        a = h.tick();
        continue;
      }
      action x = std::move(a.front());
      a.erase(a.begin());
      auto more = handle(x);
      a.insert(a.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    FAIL("the member did not settle; state " << to_string(h.m.state()));
  }
};

enum class scenario {
  eager_follower,
  eager_leader,
  cooperative_leader,
  eager_rebalance,
  cooperative_rebalance
};

// Sets the scenario up (outside the scripted steps) and returns the member's first actions.
actions begin(harness& h, scripted_coordinator& c, scenario s) {
  switch (s) {
    case scenario::eager_follower:
    case scenario::eager_leader:
    case scenario::cooperative_leader:
      c.leader = s != scenario::eager_follower;
      c.target = t01;
      return h.subscribe({"t"});
    case scenario::eager_rebalance:
    case scenario::cooperative_rebalance:
      // A stable member of generation 1 owning t0..t2 is told to rebalance; it ends with t0, t1
      // (cooperative: revoke t2, then a second round).
      h.make_stable(t012);
      c.generation = 1;
      c.ids = 1;
      c.user_owned = t012;
      c.target = t01;
      h.m.enforce_rebalance(h.now, "scripted");
      return h.take();
  }
  return {};
}

}  // namespace

TEST_CASE("member: an error at every step of the join sequence, then recovery", "[member]") {
  const scenario s = GENERATE(scenario::eager_follower, scenario::eager_leader, scenario::cooperative_leader,
                              scenario::eager_rebalance, scenario::cooperative_rebalance);
  const bool cooperative = s == scenario::cooperative_leader || s == scenario::cooperative_rebalance;
  CAPTURE(static_cast<int>(s));

  // A clean run first, to count the steps.
  int steps = 0;
  {
    harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
    scripted_coordinator c(h);
    auto a = begin(h, c, s);
    c.run(std::move(a));
    steps = c.step;
  }
  REQUIRE(steps >= 3);

  for (int k = 1; k <= steps; ++k) {
    for (const fault f : all_faults) {
      CAPTURE(k, static_cast<int>(f));
      harness h(make_options(cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager));
      scripted_coordinator c(h);
      c.fail_at = k;
      c.kind = f;
      auto a = begin(h, c, s);
      c.run(std::move(a));
      REQUIRE(c.injected);
      REQUIRE(h.m.owned() == t01);
    }
  }
}

TEST_CASE("member: after a poll timeout the rejoin waits for the LeaveGroup to end", "[member]") {
  const bool answer_fails = GENERATE(false, true);
  CAPTURE(answer_fails);
  harness h;
  h.make_stable(t01);
  expect_empty(h.run_until(h.m.last_poll() + 59999ms, false));
  auto a = h.to_deadline();
  expect<send_leave_group>(a);
  a = h.poll();  // the user polls again before the LeaveGroup is answered
  auto lost = expect_listener(a, listener_kind::lost, t01);
  a = h.done(lost);
  expect<assignment_changed>(a);
  expect_empty(a);  // one request at a time
  REQUIRE(h.m.state() == classic_state::joining);
  a = answer_fails ? h.failed() : h.leave();
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
}

TEST_CASE("member: the 80% poll warning is armed again after unsubscribe and subscribe", "[member]") {
  harness h;
  h.make_stable(t01);
  expect_empty(h.run_until(h.m.last_poll() + 50000ms, false));  // past the warning point
  h.m.unsubscribe(h.now);
  auto a = h.take();
  a = h.done(expect<run_listener>(a));
  expect<send_leave_group>(a);
  a = h.leave();
  expect<left_group>(a);
  a = h.subscribe({"t"});
  expect<send_join_group>(a);
  CHECK(h.m.next_deadline() == h.now + 48000ms);
}

// ---- statistics for metrics (issue 6) -----------------------------------------------------------

TEST_CASE("member stats: a first join and a cooperative rebalance, with causes, times and partitions",
          "[member][stats]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  const auto t0 = h.now;
  h.start();
  h.now += 40ms;
  auto a = h.join(join_ok("m1", 1, "leader", h.proto));
  expect<send_sync_group>(a);
  h.now += 10ms;
  a = h.sync(sync_ok(t01));
  expect<assignment_changed>(a);
  a = h.done(expect_listener(a, listener_kind::assigned, t01));
  REQUIRE(h.m.state() == classic_state::stable);
  {
    const auto& s = h.m.stats();
    REQUIRE(s.history.size() == 1);
    const auto& e = s.history.back();
    CHECK(e.cause == RebalanceCause::member_joined);
    CHECK(e.start == t0);
    REQUIRE(e.end.has_value());
    CHECK(*e.end - e.start == 50ms);
    CHECK(e.completed);
    CHECK(e.generation == 1);
    CHECK(e.assigned == t01);
    CHECK(e.revoked.empty());
    CHECK(s.rebalances == 1);
    CHECK(s.rebalance_latency_total == 50ms);
    CHECK(s.joins == 1);
    CHECK(s.join_time_max == 40ms);
    CHECK(s.syncs == 1);
    CHECK(s.sync_time_max == 10ms);
    CHECK(s.failed_rebalances == 0);
  }

  // The coordinator starts a rebalance; the leader explains it; t1 moves away, t2 comes in.
  const auto hb_sent = *h.m.next_deadline();
  a = h.to_deadline();
  expect<send_heartbeat>(a);
  h.now += 7ms;
  a = h.heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);
  CHECK(h.m.stats().heartbeats == 1);
  CHECK(h.m.stats().heartbeat_rtt_max == 7ms);
  CHECK(*h.m.stats().last_heartbeat_response - hb_sent == 7ms);
  REQUIRE(h.m.stats().history.size() == 2);
  CHECK(h.m.stats().history.back().cause == RebalanceCause::group_rebalancing);
  CHECK_FALSE(h.m.stats().history.back().end.has_value());
  h.m.describe_rebalance(RebalanceCause::member_left, "left: m9");
  CHECK(h.m.stats().history.back().cause == RebalanceCause::member_left);
  CHECK(h.m.stats().history.back().detail == "left: m9");

  h.now += 100ms;
  a = h.join(join_ok("m1", 2, "leader", h.proto));
  expect<send_sync_group>(a);
  const partition_set next{{"t", 0}, {"t", 2}};
  a = h.sync(sync_ok(next));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 1}});
  a = h.done(revoke);
  a = h.done(expect_listener(a, listener_kind::assigned, {{"t", 2}}));
  // The second cooperative round starts at once: it is a rebalance of its own.
  expect<send_join_group>(a);
  const auto& s = h.m.stats();
  REQUIRE(s.history.size() == 3);
  const auto& second = s.history[1];
  CHECK(second.completed);
  CHECK(second.generation == 2);
  CHECK(second.revoked == partition_set{{"t", 1}});
  CHECK(second.assigned == partition_set{{"t", 2}});
  CHECK(s.rebalances == 2);
  CHECK(s.rebalance_latency_max == 100ms);  // from the REBALANCE_IN_PROGRESS answer to stable
  CHECK(s.history.back().cause == RebalanceCause::cooperative_round);
  // A precise cause of this member's own is not replaced by the leader's view.
  h.m.describe_rebalance(RebalanceCause::member_joined, "joined: m7");
  CHECK(s.history.back().cause == RebalanceCause::cooperative_round);
}

TEST_CASE("member stats: poll timeout, session loss and failed joins", "[member][stats]") {
  harness h;
  h.make_stable(t01);
  // Poll timeout: the rebalance starts when the member leaves and ends when it is stable again.
  auto a = h.run_until(h.m.last_poll() + 60000ms, false);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  REQUIRE(h.m.stats().history.size() == 2);
  CHECK(h.m.stats().history.back().cause == RebalanceCause::poll_timeout);
  CHECK(h.m.stats().history.back().detail.find("max.poll.interval.ms") != std::string::npos);
  a = h.leave();
  a = h.poll();
  a = h.done(expect_listener(a, listener_kind::lost, t01));
  expect<send_join_group>(a);
  CHECK(h.m.stats().history.back().lost == t01);
  // A failed JoinGroup counts as a failed rebalance; MEMBER_ID_REQUIRED does not.
  auto r = join_ok("", -1, "", "");
  r.error_code = code(kafka_errc::member_id_required);
  r.member_id = "m2";
  a = h.join(r);
  CHECK(h.m.stats().failed_rebalances == 0);
  a = h.join([] {
    auto bad = join_ok("", -1, "", "");
    bad.error_code = code(kafka_errc::coordinator_load_in_progress);
    return bad;
  }());
  CHECK(h.m.stats().failed_rebalances == 1);
  a = h.to_deadline();
  expect<send_join_group>(a);
  a = h.join(join_ok("m2", 3, "leader", h.proto));
  a = h.sync(sync_ok(t01));
  a = h.done(expect_listener(a, listener_kind::assigned, t01));
  REQUIRE(h.m.state() == classic_state::stable);
  CHECK(h.m.stats().history.back().completed);
  CHECK(h.m.stats().history.back().generation == 3);
  CHECK(h.m.stats().rebalances == 2);

  // Removed by the coordinator: a session-timeout rebalance.
  a = h.next_heartbeat(kafka_errc::unknown_member_id);
  REQUIRE(h.m.stats().history.size() == 3);
  CHECK(h.m.stats().history.back().cause == RebalanceCause::session_timeout);
  CHECK(h.m.stats().history.back().detail.find("UNKNOWN_MEMBER_ID") != std::string::npos);
  // Recorded when the lost listener is asked for.
  CHECK(h.m.stats().history.back().lost == t01);
  a = h.done(expect_listener(a, listener_kind::lost, t01));
  CHECK_FALSE(h.m.stats().history.back().end.has_value());
}

TEST_CASE("member stats: the history keeps the last 50 rebalances; leaving ends an open one",
          "[member][stats]") {
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t01);
  for (int i = 0; i < 60; ++i) {
    h.m.enforce_rebalance(h.now, "round " + std::to_string(i));
    auto a = h.take();
    expect<send_join_group>(a);
    a = h.join(join_ok("m1", 2 + i, "leader", h.proto));
    a = h.sync(sync_ok(t01));
    a = h.done(expect_listener(a, listener_kind::assigned, {}));
    REQUIRE(h.m.state() == classic_state::stable);
  }
  const auto& s = h.m.stats();
  CHECK(s.history.size() == member_stats::history_max);
  CHECK(s.rebalances == 61);
  CHECK(s.history.back().cause == RebalanceCause::enforced);
  CHECK(s.history.back().detail == "enforce_rebalance: round 59");
  CHECK(s.history.front().detail == "enforce_rebalance: round 10");
  CHECK(s.completed_at.size() == 61);  // all within the last hour

  h.m.enforce_rebalance(h.now, "");
  auto a = h.take();
  expect<send_join_group>(a);
  h.m.close(h.now);
  a = h.take();
  a = h.done(expect_listener(a, listener_kind::revoked, t01));
  expect<send_leave_group>(a);
  a = h.leave();
  REQUIRE(h.m.state() == classic_state::closed);
  REQUIRE(s.history.back().end.has_value());
  CHECK_FALSE(s.history.back().completed);
  CHECK(s.rebalances == 61);
}

TEST_CASE("member: a revoke the application has not run is cancelled when its partitions are lost",
          "[member]") {
  harness h;  // eager
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto revoke = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::preparing);
  // The application does not poll; the coordinator removes the member meanwhile.
  a = h.next_heartbeat(kafka_errc::unknown_member_id);
  auto c = expect<cancel_listener>(a);
  CHECK(c.seq == revoke.seq);
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  // The cancelled revoke's late acknowledgement (it ran anyway, racing the cancel) changes nothing.
  a = h.done(revoke);
  expect_empty(a);
  CHECK(h.m.owned() == t01);
  a = h.done(lost);
  CHECK(last_owned(a).empty());
  expect<send_join_group>(a);
}

TEST_CASE(
    "member: a poll timeout cancels the pending eager revoke; the next poll reports the partitions lost",
    "[member]") {
  harness h;  // eager
  h.make_stable(t01);
  const auto t0 = h.m.last_poll();
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto revoke = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.run_until(t0 + 60000ms, false);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  auto c = expect<cancel_listener>(a);
  CHECK(c.seq == revoke.seq);
  expect<send_leave_group>(a);
  expect<report_error>(a);
  expect_empty(a);
  a = h.leave();
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  CHECK(last_owned(a).empty());
  expect<send_join_group>(a);
}

TEST_CASE("member: an assign callback not yet run when the poll times out is cancelled, not followed by lost",
          "[member]") {
  harness h;  // eager
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  a = h.done(expect_listener(a, listener_kind::revoked, t01));
  expect<assignment_changed>(a);
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", h.proto));
  a = h.sync(sync_ok(t01));
  REQUIRE(expect<assignment_changed>(a).owned == t01);
  auto assigned = expect_listener(a, listener_kind::assigned, t01);
  // The application is stalled: the callback never starts before max.poll.interval.ms passes.
  a = h.run_until(h.m.last_poll() + 60000ms, false);
  REQUIRE(h.m.state() == classic_state::poll_timed_out);
  CHECK(expect<cancel_listener>(a).seq == assigned.seq);
  CHECK(last_owned(a).empty());  // it never owned them as far as the application knows
  a = h.leave();
  a = h.poll();
  CHECK(count_of<run_listener>(a) == 0);  // nothing to report lost
  expect<send_join_group>(a);
}

TEST_CASE("member: unsubscribe() after a fatal error reports the partitions lost and finishes at once",
          "[member][contract]") {
  // Issue 13, item 9: unsubscribe() waited default.api.timeout.ms and ran no callback.
  harness h;
  h.make_stable(t01);
  expect_fatal(h, h.next_heartbeat(kafka_errc::group_authorization_failed),
               kafka_errc::group_authorization_failed);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  expect<assignment_changed>(a);
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::unsubscribed);
  CHECK(h.m.owned().empty());
}

TEST_CASE("member: unsubscribe() after a fatal error without partitions finishes at once",
          "[member][contract]") {
  harness h;
  h.start();
  expect_fatal(h, h.join(join_err(kafka_errc::inconsistent_group_protocol)),
               kafka_errc::inconsistent_group_protocol);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::unsubscribed);
}

TEST_CASE(
    "member: OffsetCommit errors: REBALANCE_IN_PROGRESS rejoins, ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID "
    "end the membership",
    "[member][contract]") {
  // Issue 13, item 8.
  harness h;
  h.make_stable(t01);
  SECTION("rebalance in progress") {
    h.m.commit_failed(h.now, 1, code(kafka_errc::rebalance_in_progress));
    auto a = h.take();
    auto r = expect_listener(a, listener_kind::revoked, t01);
    expect_empty(a);
    a = h.done(r);
    expect<assignment_changed>(a);
    expect<send_join_group>(a);
    CHECK_FALSE(h.m.removed());
  }
  SECTION("illegal generation") {
    h.m.commit_failed(h.now, 1, code(kafka_errc::illegal_generation));
    auto a = h.take();
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    CHECK(h.m.generation() == -1);
    CHECK(h.m.member_id() == "m1");
    CHECK(h.m.removed());
    a = h.done(l);
    expect<assignment_changed>(a);
    auto j = expect<send_join_group>(a);
    CHECK(j.request.member_id == "m1");
    a = h.join(join_ok("m1", 2, "leader", "range"));
    CHECK_FALSE(h.m.removed());
  }
  SECTION("unknown member id") {
    h.m.commit_failed(h.now, 1, code(kafka_errc::unknown_member_id));
    auto a = h.take();
    expect_listener(a, listener_kind::lost, t01);
    CHECK(h.m.member_id().empty());
    CHECK(h.m.removed());
  }
  SECTION("an answer for an older generation is ignored") {
    h.m.commit_failed(h.now, 0, code(kafka_errc::illegal_generation));
    expect_empty(h.take());
    CHECK(h.m.generation() == 1);
    CHECK(h.m.state() == classic_state::stable);
  }
  SECTION("fenced instance id is fatal") {
    h.m.commit_failed(h.now, 1, code(kafka_errc::fenced_instance_id));
    auto a = h.take();
    CHECK(expect<report_error>(a).fatal);
    CHECK(h.m.state() == classic_state::fatal);
  }
}

TEST_CASE(
    "member: a revoke already running when the partitions are lost: the lost callback names only the rest",
    "[member][contract]") {
  // Issue 13, item 9: a partition is never both revoked and lost.
  harness h(make_options(RebalanceProtocol::cooperative));
  h.make_stable(t012);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  expect<send_join_group>(a);
  a = h.join(join_ok("m1", 2, "leader", "cooperative-sticky"));
  a = h.sync(sync_ok(t01));
  auto r = expect_listener(a, listener_kind::revoked, {{"t", 2}});
  h.m.listener_started(h.now, r.seq);
  // While the application's revoke of t-2 runs, the coordinator forgets the member.
  a = h.next_heartbeat(kafka_errc::unknown_member_id);
  auto lost = expect_listener(a, listener_kind::lost, t01);
  CHECK(h.m.owned() == t01);
  expect_empty(h.done(r));  // the revoke returns: stale now, changes nothing
  a = h.done(lost);
  CHECK(last_owned(a).empty());
}

// Found by kgroup-sim --group (seeds 2051 and 4213). An eager revoke callback ran longer than the
// rebalance timeout: the coordinator removed the member, the core gave the partitions up and
// rejoined at once, and the commit_sync() inside the old callback went out with the new
// generation (for partitions that generation had given to another member, or back to this one
// after another had committed them). The core now cancels the running revoke late, so the user
// thread refuses commits from inside it (listener_mailbox::running_superseded).
TEST_CASE("member: a revoke still running when the member is removed is cancelled late; the member rejoins",
          "[member][contract][sim_finding]") {
  harness h;  // eager
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto r = expect_listener(a, listener_kind::revoked, t01);
  h.m.listener_started(h.now, r.seq);
  a = h.next_heartbeat(kafka_errc::unknown_member_id);
  CHECK(expect<cancel_listener>(a).seq == r.seq);
  CHECK(last_owned(a).empty());  // the running revoke's partitions are given up now
  expect<send_join_group>(a);    // no poll() needed: nothing is owned, nothing is lost
  CHECK(h.m.standing().owned.empty());
  expect_empty(h.done(r));  // the revoke returns: stale, changes nothing
}

TEST_CASE("member: unsubscribe() replaces a revoke still queued instead of running two",
          "[member][contract]") {
  harness h;  // eager
  h.make_stable(t01);
  auto a = h.next_heartbeat(kafka_errc::rebalance_in_progress);
  auto queued = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  h.m.unsubscribe(h.now);
  a = h.take();
  CHECK(expect<cancel_listener>(a).seq == queued.seq);
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<send_leave_group>(a);
  expect_empty(a);
}

TEST_CASE("member: heartbeats go on while unsubscribe()'s revoke callback runs", "[member][contract]") {
  harness h;
  h.make_stable(t01);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  h.m.listener_started(h.now, r.seq);
  // The callback (committing, say) takes three session timeouts: the member keeps heartbeating.
  int heartbeats = 0;
  if (count_of<send_heartbeat>(a) == 1) {
    ++heartbeats;
    expect_empty(h.heartbeat());
  }
  const auto until = h.now + 30000ms;
  while (true) {
    const auto d = h.m.next_deadline();
    if (!d || *d > until) break;
    h.now = *d;
    a = h.tick();
    if (count_of<send_heartbeat>(a) == 1) {
      ++heartbeats;
      expect_empty(h.heartbeat());
    }
  }
  CHECK(heartbeats >= 9);
  REQUIRE(h.m.state() == classic_state::leaving);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<send_leave_group>(a);
}

TEST_CASE("member: a JoinGroup or SyncGroup answer of another protocol type is fatal", "[member][contract]") {
  // Issue 13, item 9: protocol_type is checked (a group id shared with a Connect cluster, say).
  harness h;
  SECTION("JoinGroup") {
    h.start();
    auto r = join_ok("m1", 1, "leader", "range");
    r.protocol_type = "connect";
    auto a = h.join(r);
    auto e = expect<report_error>(a);
    CHECK(e.fatal);
    CHECK(e.code == make_error_code(kafka_errc::inconsistent_group_protocol));
    CHECK(e.message.find("connect") != std::string::npos);
    REQUIRE(h.m.state() == classic_state::fatal);
  }
  SECTION("SyncGroup") {
    h.start();
    auto a = h.join(join_ok("m1", 1, "leader", "range"));
    expect<send_sync_group>(a);
    auto r = sync_ok(t01);
    r.protocol_type = "connect";
    a = h.sync(r);
    CHECK(expect<report_error>(a).fatal);
    REQUIRE(h.m.state() == classic_state::fatal);
  }
}

// ================================================================================================
// The coordinator moves while close()/unsubscribe() runs its revoke (issue 30, item 4)
// ================================================================================================

namespace {

// close() (or unsubscribe()) of a stable member: returns the revoke the application is running.
run_listener leave_with_revoke_running(harness& h, bool closing) {
  h.make_stable(t01);
  if (closing) {
    h.m.close(h.now);
  } else {
    h.m.unsubscribe(h.now);
  }
  auto a = h.take();
  auto r = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  h.m.listener_started(h.now, r.seq);
  REQUIRE(h.m.state() == classic_state::leaving);
  return r;
}

// The revoke returns; the LeaveGroup goes to coordinator `node` and close()/unsubscribe() ends.
void finish_revoke_and_leave(harness& h, const run_listener& r, bool closing, std::int32_t node) {
  auto a = h.done(r);
  REQUIRE(expect<assignment_changed>(a).owned.empty());
  auto l = expect<send_leave_group>(a);
  expect_empty(a);
  CHECK(l.request.member_id == "m1");
  CHECK(h.m.coordinator() == node);  // the driver sends it there
  a = h.leave();
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == (closing ? classic_state::closed : classic_state::unsubscribed));
}

}  // namespace

TEST_CASE("member: the coordinator is looked up again while close()/unsubscribe()'s revoke runs",
          "[member][contract]") {
  // The commits inside the revoke callback (and the auto-commit before it) need a coordinator:
  // one that moved is found again at once, as the KIP-848 core does, not after the callback.
  const bool closing = GENERATE(true, false);
  CAPTURE(closing);
  harness h;
  auto r = leave_with_revoke_running(h, closing);

  SECTION("the heartbeat answers NOT_COORDINATOR") {
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    expect_empty(a);
    const auto sent = h.now;
    expect_empty(h.heartbeat(kafka_errc::not_coordinator));
    CHECK_FALSE(h.m.coordinator().has_value());
    CHECK_FALSE(h.m.standing().coordinator.has_value());
    a = h.to_deadline();  // the backoff
    CHECK(h.now == sent + 100ms);
    expect<find_coordinator>(a);
    expect_empty(a);
    a = h.found(2);
    CHECK(h.m.standing().coordinator == 2);  // what the commits in the callback use
    CHECK(h.m.standing().stable);
    expect<send_heartbeat>(a);  // the failed heartbeat goes again, to the new coordinator
    expect_empty(a);
    expect_empty(h.heartbeat());
    finish_revoke_and_leave(h, r, closing, 2);
  }
  SECTION("the heartbeat fails (connection lost); the first lookup fails too") {
    auto a = h.to_deadline();
    expect<send_heartbeat>(a);
    expect_empty(h.failed());
    CHECK_FALSE(h.m.coordinator().has_value());
    a = h.to_deadline();
    expect<find_coordinator>(a);
    expect_empty(a);
    h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
    expect_empty(h.take());
    a = h.to_deadline();  // looked up again after the (longer) backoff
    expect<find_coordinator>(a);
    expect_empty(a);
    a = h.found(3);
    expect<send_heartbeat>(a);
    expect_empty(a);
    expect_empty(h.heartbeat());
    finish_revoke_and_leave(h, r, closing, 3);
  }
  SECTION("a commit inside the callback answers NOT_COORDINATOR") {
    // No heartbeat is due yet: the commit's answer alone makes the member look again.
    h.m.commit_failed(h.now, 1, code(kafka_errc::not_coordinator));
    auto a = h.take();
    expect<find_coordinator>(a);
    expect_empty(a);
    CHECK_FALSE(h.m.standing().coordinator.has_value());
    a = h.found(2);
    expect_empty(a);  // the heartbeat is not due yet
    CHECK(h.m.standing().coordinator == 2);
    a = h.to_deadline();
    expect<send_heartbeat>(a);
    expect_empty(a);
    expect_empty(h.heartbeat());
    finish_revoke_and_leave(h, r, closing, 2);
  }
}

TEST_CASE("member: a commit answered NOT_COORDINATOR makes a stable member look the coordinator up again",
          "[member][contract]") {
  // As Java's commit path does (markCoordinatorUnknown): the next commit goes to the new one.
  harness h;
  h.make_stable(t01);
  const auto e = GENERATE(kafka_errc::not_coordinator, kafka_errc::coordinator_not_available);
  CAPTURE(code(e));
  h.m.commit_failed(h.now, 1, code(e));
  auto a = h.take();
  expect<find_coordinator>(a);
  expect_empty(a);
  CHECK_FALSE(h.m.coordinator().has_value());
  a = h.found(2);
  expect_empty(a);
  CHECK(h.m.coordinator() == 2);
  a = h.next_heartbeat();
  expect_empty(a);
  REQUIRE(h.m.state() == classic_state::stable);
  CHECK(h.m.owned() == t01);
  // COORDINATOR_LOAD_IN_PROGRESS is no move: the coordinator is kept.
  h.m.commit_failed(h.now, 1, code(kafka_errc::coordinator_load_in_progress));
  expect_empty(h.take());
  CHECK(h.m.coordinator() == 2);
}
