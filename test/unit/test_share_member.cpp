// The share-group membership core (group/share_member.hpp): scripted steps with a fake clock; the
// harness plays the driver and the coordinator, the tests assert on the actions that come out.
// Then the ShareGroupHeartbeat v1 codec against bytes written by hand from the schemas.
#define KGROUP_TEST_MESSAGE_CHECKS
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "byte_builder.hpp"
#include "group/share_member.hpp"
#include "kgroup/error.hpp"
#include "kgroup/log.hpp"

using namespace kgroup;
using namespace kgroup::group;
using namespace kgroup::group::share;
using namespace std::chrono_literals;
using st = share_member_state;

namespace {

using actions = std::vector<share::action>;
using hb_request = protocol::share_group_heartbeat_request;
using hb_response = protocol::share_group_heartbeat_response;

topic_id tid(std::uint8_t n) {
  topic_id id;
  id.bytes[0] = 0xCD;
  id.bytes[15] = n;
  return id;
}
const topic_id T = tid(1);  // named "t"
const topic_id U = tid(2);  // named "u"

std::string describe(const share_assignment& a) {
  std::string out = "{";
  for (const auto& [tp, id] : a) {
    if (out.size() > 1) out += ",";
    out += tp.topic + std::to_string(tp.partition);
  }
  return out + "}";
}

std::string describe(const share::action& a) {
  std::ostringstream o;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, find_coordinator>) {
          o << "find_coordinator";
        } else if constexpr (std::is_same_v<X, send_share_group_heartbeat>) {
          o << "heartbeat(epoch=" << x.request.member_epoch << ", member='" << x.request.member_id
            << "', full=" << x.full << ", leave=" << x.leave << ")";
        } else if constexpr (std::is_same_v<X, need_topic_names>) {
          o << "need_topic_names(" << x.ids.size() << ")";
        } else if constexpr (std::is_same_v<X, share_assignment_changed>) {
          o << "assignment_changed(" << describe(x.owned) << ")";
        } else if constexpr (std::is_same_v<X, report_error>) {
          o << "report_error(" << error_name(x.code) << ", fatal=" << x.fatal << ", '" << x.message << "')";
        } else if constexpr (std::is_same_v<X, left_group>) {
          o << "left_group";
        }
      },
      a);
  return o.str();
}

std::string describe(const actions& as) {
  std::string out = "[";
  for (const auto& a : as) {
    if (out.size() > 1) out += ", ";
    out += describe(a);
  }
  return out + "]";
}

template <class X>
std::size_t count_of(const actions& as) {
  return static_cast<std::size_t>(std::count_if(
      as.begin(), as.end(), [](const share::action& a) { return std::holds_alternative<X>(a); }));
}

// Exactly one action of type X: removes it from `as` and returns it.
template <class X>
X expect(actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(count_of<X>(as) == 1);
  auto it =
      std::find_if(as.begin(), as.end(), [](const share::action& a) { return std::holds_alternative<X>(a); });
  X out = std::get<X>(std::move(*it));
  as.erase(it);
  return out;
}

void expect_empty(const actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(as.empty());
}

hb_response ok(std::int32_t epoch, std::optional<id_assignment> assignment = std::nullopt,
               std::int32_t interval_ms = 2000) {
  hb_response r;
  r.member_id = "client-uuid-1";
  r.member_epoch = epoch;
  r.heartbeat_interval_ms = interval_ms;
  if (assignment) {
    hb_response::assignment_t a;
    for (const auto& [id, parts] : *assignment)
      a.topic_partitions.push_back({id, {parts.begin(), parts.end()}});
    r.assignment = std::move(a);
  }
  return r;
}

hb_response err(kafka_errc e, std::optional<std::string> message = std::nullopt) {
  hb_response r;
  r.error_code = static_cast<std::int16_t>(e);
  r.error_message = std::move(message);
  return r;
}

share_member_options options() {
  share_member_options o;
  o.group_id = "sg";
  o.rack = "r1";
  o.member_id = "client-uuid-1";
  o.max_poll_interval = 60000ms;
  o.retry_backoff = 100ms;
  o.retry_backoff_max = 1000ms;
  return o;
}

share_assignment owned_of(std::initializer_list<std::tuple<std::string, std::int32_t, topic_id>> l) {
  share_assignment out;
  for (const auto& [t, p, id] : l) out.emplace(TopicPartition{t, p}, id);
  return out;
}

struct harness {
  time_point now = time_point{} + 1000s;  // far from the epoch: the core uses time_point{} as "never"
  share_member m;
  std::shared_ptr<LogSink> saved_sink = default_log_sink();

  explicit harness(share_member_options o = options()) : m(std::move(o)) {
    if (std::getenv("KGROUP_TEST_LOG") == nullptr) set_default_log_sink(make_stderr_log_sink(LogLevel::off));
  }
  harness(const harness&) = delete;
  harness& operator=(const harness&) = delete;
  ~harness() {
    set_default_log_sink(saved_sink);
    // Every test, whatever it does, keeps to the documented transitions.
    if (std::uncaught_exceptions() == 0) CHECK(m.invalid_transitions() == 0);
  }

  actions take() { return m.take_actions(); }
  void no_spin() {
    const auto d = m.next_deadline();
    if (d) {
      INFO("next_deadline is " << std::chrono::duration_cast<ms>(*d - now).count() << " ms from now");
      REQUIRE(*d > now);
    }
  }
  actions tick() {
    m.tick(now);
    auto a = take();
    no_spin();
    return a;
  }
  actions advance(ms d) {
    now += d;
    return tick();
  }
  actions to_deadline() {
    const auto d = m.next_deadline();
    REQUIRE(d.has_value());
    now = *d;
    return tick();
  }
  ms until_deadline() const {
    const auto d = m.next_deadline();
    REQUIRE(d.has_value());
    return std::chrono::duration_cast<ms>(*d - now);
  }
  actions found(std::int16_t version = 1) {
    m.coordinator_found(now, 7, version);
    auto a = take();
    no_spin();
    return a;
  }
  actions answer(const hb_response& r) {
    m.heartbeat_done(now, r);
    auto a = take();
    no_spin();
    return a;
  }
  actions names(std::vector<std::pair<topic_id, std::string>> n) {
    m.topic_names_resolved(now, n);
    auto a = take();
    no_spin();
    return a;
  }
  actions poll() {
    m.poll_called(now);
    m.poll_returned(now);
    return take();
  }

  // subscribe -> FindCoordinator -> the join heartbeat (in flight). Returns it.
  send_share_group_heartbeat start(std::vector<std::string> topics = {"t"}) {
    m.subscribe(now, std::move(topics));
    auto a = take();
    expect<find_coordinator>(a);
    expect_empty(a);
    REQUIRE(m.state() == st::joining);
    a = found();
    auto hb = expect<send_share_group_heartbeat>(a);
    expect_empty(a);
    return hb;
  }

  // Joins and takes `target` (names known in advance); ends stable, nothing in flight, the next
  // heartbeat due in 2 s.
  void make_stable(const id_assignment& target, std::int32_t epoch = 1) {
    start();
    (void)names({{T, "t"}, {U, "u"}});
    auto a = answer(ok(epoch, target));
    if (!target.empty()) expect<share_assignment_changed>(a);
    expect_empty(a);
    REQUIRE(m.state() == st::stable);
    REQUIRE(m.owned_ids() == target);
    REQUIRE(until_deadline() == 2000ms);
  }

  // From stable: the next heartbeat goes out when due and gets `r`. Returns the request's actions
  // and the answer's.
  actions next_heartbeat(const hb_response& r, send_share_group_heartbeat* sent = nullptr) {
    auto a = to_deadline();
    auto hb = expect<send_share_group_heartbeat>(a);
    expect_empty(a);
    if (sent) *sent = hb;
    return answer(r);
  }
};

}  // namespace

// ================================================================================================
// Joining, heartbeats, assignments
// ================================================================================================

TEST_CASE(
    "share: the join sends every field with epoch 0 and the client's id; then heartbeats at the "
    "coordinator's interval with null for unchanged fields",
    "[share_member]") {
  harness h;
  CHECK(h.m.state() == st::unsubscribed);
  CHECK_FALSE(h.m.next_deadline().has_value());
  auto join = h.start({"u", "t", "t"});
  CHECK(join.full);
  CHECK_FALSE(join.leave);
  const auto& j = join.request;
  CHECK(j.group_id == "sg");
  CHECK(j.member_id == "client-uuid-1");
  CHECK(j.member_epoch == 0);
  CHECK(j.rack_id == std::optional<std::string>("r1"));
  CHECK(j.subscribed_topic_names == std::optional<std::vector<std::string>>({"t", "u"}));  // sorted, unique
  CHECK(h.m.subscription() == std::vector<std::string>{"t", "u"});
  CHECK(h.m.coordinator() == 7);

  // One heartbeat in flight at most.
  expect_empty(h.advance(5000ms));

  // An answer without an assignment: still joining, the next heartbeat after the interval.
  auto a = h.answer(ok(1, std::nullopt, 3000));
  expect_empty(a);
  CHECK(h.m.state() == st::joining);
  CHECK(h.m.epoch() == 1);
  CHECK(h.m.heartbeat_interval() == 3000ms);
  CHECK(h.until_deadline() == 3000ms);
  expect_empty(h.advance(2999ms));
  a = h.advance(1ms);
  auto hb = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK_FALSE(hb.full);
  CHECK(hb.request.member_epoch == 1);
  CHECK(hb.request.member_id == "client-uuid-1");
  CHECK_FALSE(hb.request.rack_id.has_value());  // unchanged: null
  CHECK_FALSE(hb.request.subscribed_topic_names.has_value());

  // The first assignment (empty) makes it a member proper; the interval changes with the answer.
  a = h.answer(ok(2, id_assignment{}, 1500));
  expect_empty(a);  // nothing owned before, nothing owned now
  CHECK(h.m.state() == st::stable);
  CHECK(h.until_deadline() == 1500ms);
  CHECK(h.m.stats().heartbeats == 2);
  CHECK(h.m.stats().rebalances == 1);  // the join, as one history entry

  // Steady heartbeats carry the epoch and nulls.
  send_share_group_heartbeat sent;
  a = h.next_heartbeat(ok(2), &sent);
  expect_empty(a);
  CHECK(sent.request.member_epoch == 2);
  CHECK_FALSE(sent.request.subscribed_topic_names.has_value());
  CHECK_FALSE(sent.request.rack_id.has_value());
}

TEST_CASE("share: a member without a rack sends a null rack, and the id never changes", "[share_member]") {
  auto o = options();
  o.rack.reset();
  harness h(o);
  auto join = h.start();
  CHECK_FALSE(join.request.rack_id.has_value());
  CHECK(join.request.subscribed_topic_names.has_value());
  // A coordinator naming another id is logged; the client keeps its own (ShareFetch carries it).
  auto r = ok(1, id_assignment{});
  r.member_id = "someone-else";
  expect_empty(h.answer(r));
  CHECK(h.m.member_id() == "client-uuid-1");
  auto a = h.to_deadline();
  CHECK(expect<send_share_group_heartbeat>(a).request.member_id == "client-uuid-1");
}

TEST_CASE("share: the assignment names topics by id; names are resolved and owned partitions carry both",
          "[share_member]") {
  harness h;
  h.start({"t", "u"});
  // Names unknown: the member asks for them and owns nothing yet.
  auto a = h.answer(ok(1, id_assignment{{T, {0, 1}}, {U, {2}}}));
  auto need = expect<need_topic_names>(a);
  expect_empty(a);
  CHECK(need.ids.size() == 2);
  CHECK(h.m.state() == st::reconciling);
  CHECK(h.m.owned().empty());
  REQUIRE(h.m.target().has_value());

  // One name arrives: that part applies at once; the other is still asked for.
  a = h.names({{T, "t"}});
  auto changed = expect<share_assignment_changed>(a);
  expect_empty(a);
  CHECK(changed.owned == owned_of({{"t", 0, T}, {"t", 1, T}}));
  CHECK(h.m.state() == st::reconciling);
  CHECK(h.m.owned() == partition_set{{"t", 0}, {"t", 1}});

  // Metadata did not know u (too new for the broker asked): asked again after the backoff,
  // while heartbeats go on.
  CHECK(h.until_deadline() == 100ms);
  a = h.to_deadline();
  need = expect<need_topic_names>(a);
  expect_empty(a);
  REQUIRE(need.ids.size() == 1);
  CHECK(need.ids[0] == U);
  CHECK(h.until_deadline() == 100ms);  // t's name reset the backoff
  a = h.to_deadline();
  expect<need_topic_names>(a);
  CHECK(h.until_deadline() == 200ms);  // now it doubles

  a = h.names({{U, "u"}, {tid(9), "unrelated"}});
  changed = expect<share_assignment_changed>(a);
  expect_empty(a);
  CHECK(changed.owned == owned_of({{"t", 0, T}, {"t", 1, T}, {"u", 2, U}}));
  CHECK(h.m.owned_partitions() == changed.owned);
  CHECK(h.m.state() == st::stable);
  CHECK(h.until_deadline() == 2000ms - 200ms);  // the heartbeat interval from the answer
  CHECK(h.m.stats().rebalances == 1);
  const auto& entry = h.m.stats().history.back();
  CHECK(entry.assigned == partition_set{{"t", 0}, {"t", 1}, {"u", 2}});
}

TEST_CASE("share: assignment changes apply at once, with no revoke step; null means unchanged",
          "[share_member]") {
  harness h;
  h.make_stable({{T, {0, 1}}});

  // A null assignment changes nothing.
  auto a = h.next_heartbeat(ok(1));
  expect_empty(a);
  CHECK(h.m.owned_ids() == id_assignment{{T, {0, 1}}});

  // A new assignment replaces the old one in one step: partitions taken away and added together.
  a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}, {U, {0}}}));
  auto changed = expect<share_assignment_changed>(a);
  expect_empty(a);
  CHECK(changed.owned == owned_of({{"t", 1, T}, {"u", 0, U}}));
  CHECK(h.m.state() == st::stable);
  CHECK(h.m.epoch() == 2);
  const auto& e = h.m.stats().history.back();
  CHECK(e.revoked == partition_set{{"t", 0}});
  CHECK(e.assigned == partition_set{{"u", 0}});
  CHECK(e.completed);

  // The same assignment again: nothing to do.
  a = h.next_heartbeat(ok(3, id_assignment{{T, {1}}, {U, {0}}}));
  expect_empty(a);
  // An empty one: nothing owned.
  a = h.next_heartbeat(ok(4, id_assignment{}));
  changed = expect<share_assignment_changed>(a);
  expect_empty(a);
  CHECK(changed.owned.empty());
  CHECK(h.m.state() == st::stable);
}

TEST_CASE("share: a subscription change goes out at once, only the changed field", "[share_member]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.now += 500ms;
  h.m.subscribe(h.now, {"t", "u"});
  auto a = h.take();
  auto hb = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK_FALSE(hb.full);
  CHECK(hb.request.member_epoch == 1);
  CHECK(hb.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t", "u"}));
  CHECK_FALSE(hb.request.rack_id.has_value());
  expect_empty(h.answer(ok(1)));
  // The same list again sends nothing early.
  h.m.subscribe(h.now, {"u", "t"});
  expect_empty(h.take());
  // Subscribing to nothing is unsubscribing.
  h.m.subscribe(h.now, {});
  a = h.take();
  expect<share_assignment_changed>(a);
  hb = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(hb.leave);
  CHECK(h.m.state() == st::leaving);
}

// ================================================================================================
// Fencing
// ================================================================================================

TEST_CASE("share: fenced -> assignment dropped, rejoin at once with epoch 0 and the same id",
          "[share_member]") {
  for (auto code : {kafka_errc::fenced_member_epoch, kafka_errc::unknown_member_id}) {
    INFO(kafka_error_name(static_cast<int>(code)));
    harness h;
    h.make_stable({{T, {0, 1}}}, 5);
    auto a = h.next_heartbeat(err(code));
    auto changed = expect<share_assignment_changed>(a);
    CHECK(changed.owned.empty());
    CHECK(changed.rejoining);  // the share sessions stay (Java): not a leave
    auto join = expect<send_share_group_heartbeat>(a);
    expect_empty(a);
    CHECK(join.full);
    CHECK(join.request.member_epoch == 0);
    CHECK(join.request.member_id == "client-uuid-1");
    CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t"}));
    CHECK(join.request.rack_id == std::optional<std::string>("r1"));
    CHECK(h.m.state() == st::joining);
    CHECK(h.m.owned().empty());
    CHECK(h.m.epoch() == 0);
    CHECK(h.m.stats().failed_rebalances == 0);

    // The coordinator takes it back with a new epoch and (maybe) the same partitions.
    a = h.answer(ok(6, id_assignment{{T, {1}}}));
    changed = expect<share_assignment_changed>(a);
    expect_empty(a);
    CHECK(changed.owned == owned_of({{"t", 1, T}}));
    CHECK_FALSE(changed.rejoining);
    CHECK(h.m.state() == st::stable);
    CHECK(h.m.epoch() == 6);
    CHECK(h.m.member_id() == "client-uuid-1");
  }
}

TEST_CASE("share: a join refused as fenced is retried after a backoff, not in a tight loop",
          "[share_member]") {
  harness h;
  h.start();
  auto a = h.answer(err(kafka_errc::fenced_member_epoch));
  expect_empty(a);  // nothing owned, nothing sent at once
  CHECK(h.m.state() == st::joining);
  CHECK(h.until_deadline() == 100ms);
  a = h.to_deadline();
  auto join = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.request.member_epoch == 0);
  CHECK(join.full);
  a = h.answer(err(kafka_errc::unknown_member_id));
  expect_empty(a);
  CHECK(h.until_deadline() == 200ms);
}

// ================================================================================================
// Leaving
// ================================================================================================

TEST_CASE("share: close drops the assignment, leaves with epoch -1, then closed", "[share_member]") {
  harness h;
  h.make_stable({{T, {0}}}, 3);
  h.now += 300ms;
  h.m.close(h.now);
  auto a = h.take();
  auto changed = expect<share_assignment_changed>(a);
  CHECK(changed.owned.empty());
  auto leave = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.leave);
  CHECK(leave.request.member_epoch == -1);
  CHECK(leave.request.member_id == "client-uuid-1");
  CHECK_FALSE(leave.request.subscribed_topic_names.has_value());
  CHECK_FALSE(leave.request.rack_id.has_value());
  CHECK(h.m.state() == st::leaving);
  CHECK(h.m.epoch() == -1);
  CHECK_FALSE(h.m.next_deadline().has_value());  // nothing to do but wait for the answer

  hb_response left;
  left.member_id = "client-uuid-1";
  left.member_epoch = -1;
  a = h.answer(left);
  expect<left_group>(a);
  expect_empty(a);
  CHECK(h.m.state() == st::closed);
  // Closed is terminal: nothing more happens.
  h.m.subscribe(h.now, {"t"});
  h.m.close(h.now);
  expect_empty(h.tick());
}

TEST_CASE("share: leaving ends without the coordinator's answer when it cannot be had", "[share_member]") {
  SECTION("the leave fails: done anyway (the coordinator expires the member)") {
    harness h;
    h.make_stable({{T, {0}}});
    h.m.unsubscribe(h.now);
    auto a = h.take();
    expect<send_share_group_heartbeat>(a);
    h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
    a = h.take();
    expect<left_group>(a);
    expect_empty(a);
    CHECK(h.m.state() == st::unsubscribed);
    CHECK(h.m.subscription().empty());
  }
  SECTION("no coordinator: done without a leave") {
    harness h;
    h.make_stable({{T, {0}}});
    auto a = h.next_heartbeat(err(kafka_errc::not_coordinator));
    expect<find_coordinator>(a);
    h.m.close(h.now);
    a = h.take();
    expect<share_assignment_changed>(a);
    expect_empty(a);  // the lookup is under way
    h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
    a = h.take();
    expect<left_group>(a);
    expect_empty(a);
    CHECK(h.m.state() == st::closed);
  }
  SECTION("never joined: nothing to leave") {
    harness h;
    h.m.subscribe(h.now, {"t"});
    (void)h.take();
    h.m.unsubscribe(h.now);
    auto a = h.take();
    expect<left_group>(a);
    expect_empty(a);
    CHECK(h.m.state() == st::unsubscribed);
    h.m.close(h.now);
    a = h.take();
    expect<left_group>(a);
    CHECK(h.m.state() == st::closed);
  }
  SECTION("a heartbeat in flight: the leave follows its answer") {
    harness h;
    h.make_stable({{T, {0}}});
    auto a = h.to_deadline();
    expect<send_share_group_heartbeat>(a);
    h.m.close(h.now);
    a = h.take();
    expect<share_assignment_changed>(a);
    expect_empty(a);
    a = h.answer(ok(2, id_assignment{{T, {0, 1}}}));  // too late: not taken
    auto leave = expect<send_share_group_heartbeat>(a);
    expect_empty(a);
    CHECK(leave.request.member_epoch == -1);
    CHECK(h.m.owned().empty());
    a = h.answer(ok(-1));
    expect<left_group>(a);
    CHECK(h.m.state() == st::closed);
  }
  SECTION("subscribe during the leave: joins again once left") {
    harness h;
    h.make_stable({{T, {0}}});
    h.m.unsubscribe(h.now);
    (void)h.take();
    h.m.subscribe(h.now, {"u"});
    expect_empty(h.take());
    auto a = h.answer(ok(-1));
    expect<left_group>(a);
    auto join = expect<send_share_group_heartbeat>(a);
    expect_empty(a);
    CHECK(join.request.member_epoch == 0);
    CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"u"}));
    CHECK(h.m.state() == st::joining);
  }
}

// ================================================================================================
// max.poll.interval.ms
// ================================================================================================

TEST_CASE("share: a member late to poll leaves with epoch -1 and rejoins on its next poll",
          "[share_member]") {
  harness h;
  h.poll();
  h.make_stable({{T, {0, 1}}}, 4);
  // Heartbeats go on while the application works; at 80% a warning, at 100% the member leaves.
  for (int i = 0; i < 40; ++i) {
    auto a = h.to_deadline();
    if (h.m.state() != st::stable) break;
    if (count_of<send_share_group_heartbeat>(a) == 1) expect_empty(h.answer(ok(4)));
  }
  REQUIRE(h.m.state() == st::poll_timed_out);
  CHECK(h.now - h.m.last_poll() >= 60000ms);
  // (the loop's last tick did it: look at the state it left)
  CHECK(h.m.owned().empty());
  CHECK(h.m.epoch() == 0);
}

TEST_CASE("share: poll timeout, step by step", "[share_member]") {
  harness h;
  h.poll();
  h.make_stable({{T, {0, 1}}}, 4);
  // The next deadline is the heartbeat; jump to just past the poll interval without heartbeats
  // in between (the coordinator's answers are not needed for this).
  h.now = h.m.last_poll() + 60000ms;
  auto a = h.tick();
  auto changed = expect<share_assignment_changed>(a);
  CHECK(changed.owned.empty());
  auto e = expect<report_error>(a);
  CHECK_FALSE(e.fatal);
  auto leave = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.leave);
  CHECK(leave.request.member_epoch == -1);
  CHECK(h.m.state() == st::poll_timed_out);
  CHECK(h.m.stats().history.back().cause == RebalanceCause::poll_timeout);
  expect_empty(h.answer(ok(-1)));
  // Nothing happens until the application polls again: no heartbeat, no timer.
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(600000ms));
  // Its next poll rejoins with epoch 0, every field, the same id.
  h.m.poll_called(h.now);
  a = h.take();
  auto join = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.full);
  CHECK(join.request.member_epoch == 0);
  CHECK(join.request.member_id == "client-uuid-1");
  CHECK(h.m.state() == st::joining);
  h.m.poll_returned(h.now);
  a = h.answer(ok(5, id_assignment{{T, {0}}}));
  expect<share_assignment_changed>(a);
  CHECK(h.m.state() == st::stable);
}

TEST_CASE("share: poll timeout with a heartbeat in flight: its answer is ignored, the leave follows it",
          "[share_member]") {
  harness h;
  h.poll();
  h.make_stable({{T, {0}}}, 4);
  auto a = h.to_deadline();
  expect<send_share_group_heartbeat>(a);
  h.now = h.m.last_poll() + 60000ms;
  a = h.tick();
  expect<share_assignment_changed>(a);
  expect<report_error>(a);
  expect_empty(a);  // the leave waits for the heartbeat in flight
  // The application polls before the old answer comes: the rejoin waits too.
  h.m.poll_called(h.now);
  expect_empty(h.take());
  CHECK(h.m.state() == st::joining);
  // The old answer (with an assignment) is not taken; the leave goes, then the join.
  a = h.answer(ok(5, id_assignment{{T, {0, 1}}}));
  auto leave = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.request.member_epoch == -1);
  CHECK(h.m.owned().empty());
  a = h.answer(ok(-1));
  auto join = expect<send_share_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.request.member_epoch == 0);
}

TEST_CASE("share: the poll interval does not run inside poll()", "[share_member]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.m.poll_called(h.now);
  for (int i = 0; i < 60; ++i) {
    auto a = h.to_deadline();
    if (count_of<send_share_group_heartbeat>(a) == 1) expect_empty(h.answer(ok(1)));
  }
  CHECK(h.m.state() == st::stable);
}

// ================================================================================================
// Coordinator errors, failures, unsupported brokers, fatal codes
// ================================================================================================

TEST_CASE("share: coordinator errors rediscover or back off; the next heartbeat carries every field",
          "[share_member]") {
  SECTION("NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: looked up at once, heartbeat when found") {
    for (auto code : {kafka_errc::not_coordinator, kafka_errc::coordinator_not_available}) {
      harness h;
      h.make_stable({{T, {0}}}, 2);
      auto a = h.next_heartbeat(err(code));
      expect<find_coordinator>(a);
      expect_empty(a);
      CHECK(h.m.owned_ids() == id_assignment{{T, {0}}});  // still owned
      CHECK_FALSE(h.m.coordinator().has_value());
      a = h.found();
      auto hb = expect<send_share_group_heartbeat>(a);
      expect_empty(a);
      CHECK(hb.full);
      CHECK(hb.request.member_epoch == 2);
      CHECK(hb.request.subscribed_topic_names.has_value());
      CHECK(hb.request.rack_id.has_value());
    }
  }
  SECTION("COORDINATOR_LOAD_IN_PROGRESS: the same coordinator after a growing backoff") {
    harness h;
    h.make_stable({{T, {0}}}, 2);
    auto a = h.next_heartbeat(err(kafka_errc::coordinator_load_in_progress));
    expect_empty(a);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    auto hb = expect<send_share_group_heartbeat>(a);
    CHECK(hb.full);
    a = h.answer(err(kafka_errc::coordinator_load_in_progress));
    CHECK(h.until_deadline() == 200ms);
    a = h.to_deadline();
    expect<send_share_group_heartbeat>(a);
    expect_empty(h.answer(ok(2)));
    CHECK(h.until_deadline() == 2000ms);  // the backoff was reset by the success
  }
  SECTION("a failed request: rediscover after a backoff") {
    harness h;
    h.make_stable({{T, {0}}}, 2);
    auto a = h.to_deadline();
    expect<send_share_group_heartbeat>(a);
    h.m.request_failed(h.now, make_error_code(client_errc::request_timed_out));
    a = h.take();
    expect_empty(a);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<find_coordinator>(a);
    a = h.found();
    auto hb = expect<send_share_group_heartbeat>(a);
    CHECK(hb.full);
    // A late answer to nothing in flight is stale.
    expect_empty(h.answer(ok(2)));
    expect_empty(h.answer(ok(9, id_assignment{})));
    CHECK(h.m.epoch() == 2);
  }
  SECTION("the coordinator lookup fails: retried after a backoff") {
    harness h;
    h.m.subscribe(h.now, {"t"});
    (void)h.take();
    h.m.coordinator_failed(h.now, make_error_code(kafka_errc::coordinator_not_available));
    expect_empty(h.take());
    CHECK(h.until_deadline() == 100ms);
    auto a = h.to_deadline();
    expect<find_coordinator>(a);
  }
}

TEST_CASE("share: a coordinator without ShareGroupHeartbeat is fatal with a clear message",
          "[share_member]") {
  harness h;
  h.m.subscribe(h.now, {"t"});
  (void)h.take();
  auto a = h.found(-1);
  auto e = expect<report_error>(a);
  expect_empty(a);
  CHECK(e.fatal);
  CHECK(e.code == make_error_code(client_errc::no_compatible_version));
  CHECK(e.message.find("broker does not support share groups (KIP-932, Kafka 4.1+)") != std::string::npos);
  CHECK(e.message.find("'sg'") != std::string::npos);
  CHECK(h.m.state() == st::fatal);
  CHECK_FALSE(h.m.next_deadline().has_value());
  // Fatal: subscribe does nothing; unsubscribe tells a waiting user thread it is done; close closes.
  h.m.subscribe(h.now, {"t"});
  expect_empty(h.take());
  h.m.unsubscribe(h.now);
  a = h.take();
  expect<left_group>(a);
  expect_empty(a);
  h.m.close(h.now);
  a = h.take();
  expect<left_group>(a);
  CHECK(h.m.state() == st::closed);
}

TEST_CASE("share: fatal heartbeat answers drop the assignment and name the problem", "[share_member]") {
  struct row {
    kafka_errc code;
    const char* says;
  };
  for (const auto& [code, says] :
       {row{kafka_errc::group_max_size_reached, "group.share.max.size"},
        row{kafka_errc::group_authorization_failed, "not authorized to access"},
        row{kafka_errc::topic_authorization_failed, "not authorized to read the topics"},
        row{kafka_errc::unsupported_version, "does not support share groups (KIP-932"},
        row{kafka_errc::invalid_request, "refused the ShareGroupHeartbeat as invalid"},
        row{kafka_errc::group_id_not_found, "a group of another type"},
        row{kafka_errc::invalid_group_id, "INVALID_GROUP_ID"}}) {
    INFO(kafka_error_name(static_cast<int>(code)));
    harness h;
    h.make_stable({{T, {0}}});
    auto a = h.next_heartbeat(err(code, "broker says no"));
    auto changed = expect<share_assignment_changed>(a);
    CHECK(changed.owned.empty());
    auto e = expect<report_error>(a);
    expect_empty(a);
    CHECK(e.fatal);
    CHECK(e.code == make_error_code(code));
    INFO(e.message);
    CHECK(e.message.find(says) != std::string::npos);
    CHECK(e.message.find("(broker: broker says no)") != std::string::npos);
    CHECK(h.m.state() == st::fatal);
    CHECK_FALSE(h.m.next_deadline().has_value());
    expect_empty(h.advance(60000ms));
  }
  SECTION("also while joining") {
    harness h;
    h.start();
    auto a = h.answer(err(kafka_errc::group_max_size_reached));
    auto e = expect<report_error>(a);
    expect_empty(a);
    CHECK(e.fatal);
  }
  SECTION("GROUP_AUTHORIZATION_FAILED from the coordinator lookup") {
    harness h;
    h.m.subscribe(h.now, {"t"});
    (void)h.take();
    h.m.coordinator_failed(h.now, make_error_code(kafka_errc::group_authorization_failed));
    auto a = h.take();
    auto e = expect<report_error>(a);
    CHECK(e.fatal);
    CHECK(h.m.state() == st::fatal);
  }
}

TEST_CASE("share: unexpected codes go through the skeleton's policy", "[share_member]") {
  SECTION("retriable: logged, retried after a backoff, for as long as it lasts") {
    harness h;
    h.make_stable({{T, {0}}});
    for (int i = 0; i < 15; ++i) {
      auto a = h.next_heartbeat(err(kafka_errc::request_timed_out));
      auto e = expect<report_error>(a);
      CHECK_FALSE(e.fatal);
      expect_empty(a);
    }
    CHECK(h.m.state() == st::stable);
    CHECK(h.m.owned_ids() == id_assignment{{T, {0}}});
  }
  SECTION("not retriable: fatal the tenth time in a row") {
    harness h;
    h.make_stable({{T, {0}}});
    for (int i = 1; i < 10; ++i) {
      auto a = h.next_heartbeat(err(kafka_errc::cluster_authorization_failed));
      auto e = expect<report_error>(a);
      CHECK_FALSE(e.fatal);
    }
    auto a = h.next_heartbeat(err(kafka_errc::cluster_authorization_failed));
    expect<share_assignment_changed>(a);
    auto e = expect<report_error>(a);
    CHECK(e.fatal);
    CHECK(e.message.find("ShareGroupHeartbeat") != std::string::npos);
    CHECK(h.m.state() == st::fatal);
  }
}

TEST_CASE("share: a member without an id is an internal error, not a join", "[share_member]") {
  auto o = options();
  o.member_id.clear();
  harness h(o);
  h.m.subscribe(h.now, {"t"});
  auto a = h.take();
  auto e = expect<report_error>(a);
  CHECK(e.fatal);
  CHECK(e.code == make_error_code(client_errc::illegal_state));
}

// ================================================================================================
// The transition table
// ================================================================================================

TEST_CASE("share: states have names; the table keeps the common rules", "[share_member]") {
  for (auto x : {st::unsubscribed, st::joining, st::reconciling, st::stable, st::fenced, st::leaving,
                 st::poll_timed_out, st::fatal, st::closed}) {
    CHECK(std::string(to_string(x)) != "?");
    CHECK(transition_allowed(x, x));
    CHECK(transition_allowed(x, st::closed));
    CHECK(transition_allowed(x, st::fatal) == (x != st::closed));
  }
  CHECK_FALSE(transition_allowed(st::unsubscribed, st::stable));
  CHECK_FALSE(transition_allowed(st::leaving, st::joining));
  CHECK_FALSE(transition_allowed(st::fatal, st::joining));
  CHECK(transition_allowed(st::stable, st::fenced));
  CHECK(transition_allowed(st::fenced, st::joining));
  CHECK(transition_allowed(st::poll_timed_out, st::joining));
}

TEST_CASE("share: random events never leave the table, never spin, and keep the member's id",
          "[share_member]") {
  // A seeded walk through every event the core takes, answers and failures at every step; the
  // harness checks invalid_transitions() == 0 and that next_deadline() is never in the past.
  for (std::uint32_t seed = 1; seed <= 200; ++seed) {
    INFO("seed " << seed);
    harness h;
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    bool in_flight = false;
    bool looking = false;
    const std::vector<kafka_errc> codes{
        kafka_errc::fenced_member_epoch,      kafka_errc::unknown_member_id,
        kafka_errc::not_coordinator,          kafka_errc::coordinator_load_in_progress,
        kafka_errc::request_timed_out,        kafka_errc::group_max_size_reached,
        kafka_errc::coordinator_not_available};
    for (int step = 0; step < 200 && h.m.state() != st::closed; ++step) {
      actions a;
      switch (pick(14)) {
        case 0:
          h.m.subscribe(h.now,
                        pick(4) == 0 ? std::vector<std::string>{} : std::vector<std::string>{"t", "u"});
          break;
        case 1:
          if (pick(3) == 0) h.m.unsubscribe(h.now);
          break;
        case 2:
          if (pick(8) == 0) h.m.close(h.now);
          break;
        case 3:
          h.m.poll_called(h.now);
          break;
        case 4:
          h.m.poll_returned(h.now);
          break;
        case 5:
          if (looking) h.m.coordinator_found(h.now, 1, pick(20) == 0 ? -1 : 1);
          looking = false;
          break;
        case 6:
          if (looking) h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
          looking = false;
          break;
        case 7:
        case 8: {
          const int epoch = 1 + pick(5);
          std::optional<id_assignment> asg;
          if (pick(2) == 0) asg = id_assignment{{T, {0, static_cast<std::int32_t>(pick(3))}}, {U, {1}}};
          h.m.heartbeat_done(h.now, ok(epoch, asg, 1000 + 500 * pick(3)));
          in_flight = false;
          break;
        }
        case 9:
          if (pick(3) == 0) {
            h.m.heartbeat_done(h.now,
                               err(codes[static_cast<std::size_t>(pick(static_cast<int>(codes.size())))]));
            in_flight = false;
          }
          break;
        case 10:
          h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
          in_flight = false;
          break;
        case 11:
          h.m.topic_names_resolved(h.now, pick(2) == 0
                                              ? std::vector<std::pair<topic_id, std::string>>{{T, "t"}}
                                              : std::vector<std::pair<topic_id, std::string>>{{U, "u"}});
          break;
        case 12:
          if (auto d = h.m.next_deadline()) h.now = *d;
          h.m.tick(h.now);
          break;
        default:
          h.now += ms(pick(70000));
          h.m.tick(h.now);
          break;
      }
      a = h.take();
      for (const auto& x : a) {
        if (std::holds_alternative<find_coordinator>(x)) looking = true;
        if (const auto* hb = std::get_if<send_share_group_heartbeat>(&x)) {
          CHECK(hb->request.member_id == "client-uuid-1");
          CHECK(hb->request.member_epoch >= -1);
          if (hb->request.member_epoch == 0) CHECK(hb->full);
          in_flight = true;
        }
        if (const auto* c = std::get_if<share_assignment_changed>(&x))
          CHECK(c->owned == h.m.owned_partitions());
      }
      (void)in_flight;
      h.no_spin();
      REQUIRE(h.m.invalid_transitions() == 0);
      if (h.m.state() == st::unsubscribed || h.m.state() == st::fatal || h.m.state() == st::poll_timed_out ||
          h.m.state() == st::leaving) {
        CHECK(h.m.owned().empty());
      }
    }
  }
}

// ================================================================================================
// ShareGroupHeartbeat (key 76) v1, flexible throughout (KIP-932; v0 was Kafka 4.0's early access).
// Bytes by hand from ShareGroupHeartbeatRequest.json / ShareGroupHeartbeatResponse.json.
// ================================================================================================

namespace {
using kgroup::test::byte_builder;
using bytes = std::vector<std::uint8_t>;
}  // namespace

TEST_CASE("ShareGroupHeartbeatRequest v1", "[codec][share_member]") {
  using protocol::share_group_heartbeat_request;
  STATIC_REQUIRE(share_group_heartbeat_request::api_key == 76);
  STATIC_REQUIRE(share_group_heartbeat_request::lowest_version == 1);
  STATIC_REQUIRE(share_group_heartbeat_request::highest_version == 1);
  STATIC_REQUIRE(share_group_heartbeat_request::first_flexible_version == 0);
  auto make = [](std::int16_t) {
    share_group_heartbeat_request m;
    m.group_id = "sg";
    m.member_id = "m1";
    m.member_epoch = 0;
    m.rack_id = "r1";
    m.subscribed_topic_names = std::vector<std::string>{"a", "bc"};
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.cstr("sg").cstr("m1").i32(0).cstr("r1");
    b.uvarint(3).cstr("a").cstr("bc");
    b.tags0(true);
    return b.out;
  };
  kgroup::test::check_all_versions<share_group_heartbeat_request>(make, wire);
  kgroup::test::check_unknown_top_tags<share_group_heartbeat_request>(make, wire);
  // Literal: the join heartbeat, every byte.
  CHECK(wire(1) == bytes{0x03, 's', 'g', 0x03, 'm',  '1', 0x00, 0x00, 0x00, 0x00,
                         0x03, 'r', '1', 0x03, 0x02, 'a', 0x03, 'b',  'c',  0x00});

  // A steady heartbeat: nulls for the unchanged fields (compact null: 0).
  share_group_heartbeat_request steady;
  steady.group_id = "sg";
  steady.member_id = "m1";
  steady.member_epoch = 7;
  kgroup::test::check_wire(steady, 1,
                           bytes{0x03, 's', 'g', 0x03, 'm', '1', 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00});
  // The leave: epoch -1.
  share_group_heartbeat_request leave = steady;
  leave.member_epoch = -1;
  kgroup::test::check_wire(leave, 1,
                           bytes{0x03, 's', 'g', 0x03, 'm', '1', 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00});
  // An empty subscription is not null: a compact array of length 0 (1).
  share_group_heartbeat_request none = steady;
  none.subscribed_topic_names = std::vector<std::string>{};
  kgroup::test::check_wire(none, 1,
                           bytes{0x03, 's', 'g', 0x03, 'm', '1', 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00});
  // Version 0 (removed in Kafka 4.1) cannot be written.
  bytes out;
  CHECK(protocol::encode(steady, 0, out) == protocol::codec_errc::unsupported_version);
}

TEST_CASE("ShareGroupHeartbeatResponse v1", "[codec][share_member]") {
  using protocol::share_group_heartbeat_response;
  auto uuid_of = [](std::uint8_t fill) {
    protocol::uuid u;
    for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
    return u;
  };
  auto make = [&](std::int16_t) {
    share_group_heartbeat_response m;
    m.throttle_time_ms = 5;
    m.member_id = "m1";
    m.member_epoch = 3;
    m.heartbeat_interval_ms = 5000;
    share_group_heartbeat_response::assignment_t a;
    a.topic_partitions.push_back({uuid_of(0x20), {0, 2}});
    a.topic_partitions.push_back({uuid_of(0x40), {}});
    m.assignment = a;
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.i32(5).i16(0).null_cstr().cstr("m1").i32(3).i32(5000);
    // Assignment: a nullable struct (int8 1 present / -1 null), its array, each entry's tags,
    // the struct's tags.
    b.i8(1).uvarint(3);
    b.uuid(0x20).uvarint(3).i32(0).i32(2).tags0(true);
    b.uuid(0x40).uvarint(1).tags0(true);
    b.tags0(true);
    b.tags0(true);
    return b.out;
  };
  kgroup::test::check_all_versions<share_group_heartbeat_response>(make, wire);
  kgroup::test::check_unknown_top_tags<share_group_heartbeat_response>(make, wire);

  SECTION("an error with a message, no member id, no assignment (null: -1)") {
    share_group_heartbeat_response e;
    e.error_code = 110;  // FENCED_MEMBER_EPOCH
    e.error_message = "fenced";
    kgroup::test::check_wire(
        e, 1, byte_builder{}.i32(0).i16(110).cstr("fenced").null_cstr().i32(0).i32(0).i8(-1).tags0(true).out);
    // Literal, every byte.
    CHECK(byte_builder{}.i32(0).i16(110).cstr("fenced").null_cstr().i32(0).i32(0).i8(-1).tags0(true).out ==
          bytes{0x00, 0x00, 0x00, 0x00, 0x00, 0x6e, 0x07, 'f',  'e',  'n',  'c',  'e',
                'd',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x00});
  }
  SECTION("an empty assignment is not a null one") {
    share_group_heartbeat_response r;
    r.member_epoch = 1;
    r.assignment = share_group_heartbeat_response::assignment_t{};
    kgroup::test::check_wire(r, 1,
                             byte_builder{}
                                 .i32(0)
                                 .i16(0)
                                 .null_cstr()
                                 .null_cstr()
                                 .i32(1)
                                 .i32(0)
                                 .i8(1)
                                 .uvarint(1)
                                 .tags0(true)
                                 .tags0(true)
                                 .out);
  }
  SECTION("a truncated assignment is an error, never a partial one") {
    bytes in = wire(1);
    in.resize(in.size() - 8);
    share_group_heartbeat_response got;
    CHECK(protocol::decode(in, 1, got));
  }
}
