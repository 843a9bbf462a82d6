// The KIP-848 membership core (group/consumer_member.hpp): scripted steps with a fake clock; the
// harness plays the driver and the coordinator, the tests assert on the actions that come out.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "data/committer.hpp"
#include "group/consumer_member.hpp"
#include "kgroup/error.hpp"
#include "kgroup/log.hpp"

using namespace kgroup;
using namespace kgroup::group;
using namespace kgroup::group::kip848;
using namespace std::chrono_literals;
using st = consumer_member_state;

namespace {

using actions = std::vector<kip848::action>;
using hb_request = protocol::consumer_group_heartbeat_request;
using hb_response = protocol::consumer_group_heartbeat_response;

topic_id tid(std::uint8_t n) {
  topic_id id;
  id.bytes[0] = 0xAB;
  id.bytes[15] = n;
  return id;
}
const topic_id T = tid(1);  // named "t"
const topic_id U = tid(2);  // named "u"
const topic_id V = tid(3);  // named "v"

std::string describe(const partition_set& s) {
  std::string out = "{";
  for (const auto& tp : s) {
    if (out.size() > 1) out += ",";
    out += tp.topic + std::to_string(tp.partition);
  }
  return out + "}";
}

std::string describe(const kip848::action& a) {
  std::ostringstream o;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, find_coordinator>) {
          o << "find_coordinator";
        } else if constexpr (std::is_same_v<X, send_consumer_group_heartbeat>) {
          o << "heartbeat(epoch=" << x.request.member_epoch << ", member='" << x.request.member_id
            << "', full=" << x.full << ", leave=" << x.leave << ")";
        } else if constexpr (std::is_same_v<X, need_topic_names>) {
          o << "need_topic_names(" << x.ids.size() << ")";
        } else if constexpr (std::is_same_v<X, run_listener>) {
          o << "run_listener(" << to_string(x.kind) << ", "
            << describe(partition_set(x.partitions.begin(), x.partitions.end())) << ", seq=" << x.seq << ")";
        } else if constexpr (std::is_same_v<X, assignment_changed>) {
          o << "assignment_changed(" << describe(x.owned) << ")";
        } else if constexpr (std::is_same_v<X, report_error>) {
          o << "report_error(" << error_name(x.code) << ", fatal=" << x.fatal << ", '" << x.message << "')";
        } else if constexpr (std::is_same_v<X, left_group>) {
          o << "left_group";
        } else if constexpr (std::is_same_v<X, cancel_listener>) {
          o << "cancel_listener(seq=" << x.seq << ")";
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
      as.begin(), as.end(), [](const kip848::action& a) { return std::holds_alternative<X>(a); }));
}

// Exactly one action of type X: removes it from `as` and returns it.
template <class X>
X expect(actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(count_of<X>(as) == 1);
  auto it = std::find_if(as.begin(), as.end(),
                         [](const kip848::action& a) { return std::holds_alternative<X>(a); });
  X out = std::get<X>(std::move(*it));
  as.erase(it);
  return out;
}

void expect_empty(const actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(as.empty());
}

// The first action must be of type X (order matters: revoke before assign).
template <class X>
X expect_first(actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE_FALSE(as.empty());
  REQUIRE(std::holds_alternative<X>(as.front()));
  X out = std::get<X>(std::move(as.front()));
  as.erase(as.begin());
  return out;
}

run_listener expect_listener(actions& as, listener_kind k, const partition_set& parts) {
  auto l = expect<run_listener>(as);
  INFO("listener " << to_string(l.kind) << " "
                   << describe(partition_set(l.partitions.begin(), l.partitions.end())));
  REQUIRE(l.kind == k);
  REQUIRE(partition_set(l.partitions.begin(), l.partitions.end()) == parts);
  REQUIRE(l.partitions.size() == parts.size());
  return l;
}

using tps = std::vector<std::pair<topic_id, std::vector<std::int32_t>>>;
tps parts_of(const hb_request& r) {
  tps out;
  for (const auto& tp : *r.topic_partitions) out.emplace_back(tp.topic_id, tp.partitions);
  return out;
}

hb_response ok(std::int32_t epoch, std::optional<id_assignment> assignment = std::nullopt,
               std::int32_t interval_ms = 2000, std::optional<std::string> member = std::nullopt) {
  hb_response r;
  r.member_epoch = epoch;
  r.heartbeat_interval_ms = interval_ms;
  r.member_id = std::move(member);
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

consumer_member_options options(std::optional<std::string> instance = std::nullopt) {
  consumer_member_options o;
  o.group_id = "g";
  o.group_instance_id = std::move(instance);
  o.rack = "r1";
  o.remote_assignor = "uniform";
  o.member_id = "client-uuid-1";
  o.max_poll_interval = 60000ms;
  o.retry_backoff = 100ms;
  o.retry_backoff_max = 1000ms;
  return o;
}

struct harness {
  time_point now = time_point{} + 1000s;  // far from the epoch: the core uses time_point{} as "never"
  consumer_member m;
  std::shared_ptr<LogSink> saved_sink = default_log_sink();

  explicit harness(consumer_member_options o = options()) : m(std::move(o)) {
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
    m.coordinator_found(now, 1, version);
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
    return take();
  }
  actions done(const run_listener& l) {
    m.listener_started(now, l.seq);
    m.listener_done(now, l.seq);
    return take();
  }
  actions poll() {
    m.poll_called(now);
    m.poll_returned(now);
    return take();
  }

  // subscribe -> FindCoordinator -> the join heartbeat (in flight). Returns it.
  send_consumer_group_heartbeat start(std::vector<std::string> topics = {"t"}, std::int16_t version = 1) {
    m.subscribe(now, std::move(topics));
    auto a = take();
    expect<find_coordinator>(a);
    expect_empty(a);
    REQUIRE(m.state() == st::joining);
    a = found(version);
    auto hb = expect<send_consumer_group_heartbeat>(a);
    expect_empty(a);
    return hb;
  }

  // Joins and reconciles `target` (names known in advance); ends stable, nothing in flight, the
  // next heartbeat due in 2 s.
  void make_stable(const id_assignment& target, std::int32_t epoch = 1) {
    start();
    (void)names({{T, "t"}, {U, "u"}, {V, "v"}});
    auto a = answer(ok(epoch, target));
    if (target.empty()) {
      expect_empty(a);
      REQUIRE(m.state() == st::stable);
      return;
    }
    REQUIRE(m.state() == st::reconciling);
    auto changed = expect<assignment_changed>(a);
    (void)changed;
    auto l = expect<run_listener>(a);
    REQUIRE(l.kind == listener_kind::assigned);
    expect_empty(a);
    a = done(l);
    auto ack = expect<send_consumer_group_heartbeat>(a);
    expect_empty(a);
    REQUIRE(ack.request.topic_partitions.has_value());
    REQUIRE(m.state() == st::stable);
    a = answer(ok(epoch));
    expect_empty(a);
    REQUIRE(m.owned_ids() == target);
    REQUIRE(until_deadline() == 2000ms);
  }

  // From stable: the next heartbeat goes out when due and gets `r`.
  actions next_heartbeat(const hb_response& r) {
    auto a = to_deadline();
    expect<send_consumer_group_heartbeat>(a);
    expect_empty(a);
    return answer(r);
  }
};

const partition_set t01{{"t", 0}, {"t", 1}};

}  // namespace

// ================================================================================================
// Joining, reconciling, acknowledging
// ================================================================================================

TEST_CASE("kip848: join, first assignment by topic id, names resolved, assign, acknowledge", "[kip848]") {
  harness h;
  auto join = h.start();
  // The join heartbeat carries every field, with epoch 0 and the client's own member id (v1).
  CHECK(join.full);
  CHECK_FALSE(join.leave);
  const auto& j = join.request;
  CHECK(j.group_id == "g");
  CHECK(j.member_id == "client-uuid-1");
  CHECK(j.member_epoch == 0);
  CHECK_FALSE(j.instance_id.has_value());
  CHECK(j.rack_id == std::optional<std::string>("r1"));
  CHECK(j.rebalance_timeout_ms == 60000);
  CHECK(j.subscribed_topic_names == std::optional<std::vector<std::string>>({"t"}));
  // v1: the subscription goes out whole, the regex empty ("none"), never null beside the names.
  CHECK(j.subscribed_topic_regex == std::optional<std::string>(""));
  CHECK(j.server_assignor == std::optional<std::string>("uniform"));
  REQUIRE(j.topic_partitions.has_value());
  CHECK(j.topic_partitions->empty());
  CHECK(h.m.member_epoch() == 0);
  CHECK_FALSE(h.m.standing().stable);

  // Only one heartbeat in flight: nothing more goes out meanwhile.
  expect_empty(h.advance(5000ms));

  // The answer: epoch 1, interval 2 s, partitions 0 and 1 of a topic known only by id.
  auto a = h.answer(ok(1, id_assignment{{T, {0, 1}}}));
  REQUIRE(h.m.state() == st::reconciling);
  CHECK(h.m.member_epoch() == 1);
  CHECK(h.m.heartbeat_interval() == 2000ms);
  auto need = expect<need_topic_names>(a);
  expect_empty(a);
  REQUIRE(need.ids == std::vector<topic_id>{T});

  // Metadata names it: the partitions are assigned (nothing to revoke).
  a = h.names({{T, "t"}});
  REQUIRE(expect_first<assignment_changed>(a).owned == t01);
  auto l = expect_listener(a, listener_kind::assigned, t01);
  expect_empty(a);
  CHECK(h.m.owned() == t01);

  // The listener done: acknowledged at once (not after the interval) with the owned partitions,
  // and only the fields that changed.
  a = h.done(l);
  auto ack = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK_FALSE(ack.full);
  CHECK(ack.request.member_epoch == 1);
  CHECK(ack.request.member_id == "client-uuid-1");
  CHECK(ack.request.rebalance_timeout_ms == -1);
  CHECK_FALSE(ack.request.subscribed_topic_names.has_value());
  CHECK_FALSE(ack.request.server_assignor.has_value());
  CHECK_FALSE(ack.request.rack_id.has_value());
  REQUIRE(ack.request.topic_partitions.has_value());
  CHECK(parts_of(ack.request) == tps{{T, {0, 1}}});
  REQUIRE(h.m.state() == st::stable);
  CHECK(h.m.standing().stable);
  CHECK(h.m.standing().generation == 1);

  // Then heartbeats every broker-given interval, carrying nothing that did not change.
  a = h.answer(ok(1, std::nullopt, 3000));
  expect_empty(a);
  REQUIRE(h.until_deadline() == 3000ms);
  a = h.to_deadline();
  auto hb = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK_FALSE(hb.full);
  CHECK_FALSE(hb.request.topic_partitions.has_value());
  CHECK_FALSE(hb.request.subscribed_topic_names.has_value());
  CHECK(hb.request.rebalance_timeout_ms == -1);
}

TEST_CASE("kip848: v0 coordinator assigns the member id; an empty first assignment is stable at once",
          "[kip848]") {
  harness h;
  auto join = h.start({"t"}, 0);
  CHECK(join.request.member_id.empty());
  auto a = h.answer(ok(3, id_assignment{}, 2000, "broker-given"));
  expect_empty(a);
  REQUIRE(h.m.state() == st::stable);
  CHECK(h.m.member_id() == "broker-given");
  CHECK(h.m.member_epoch() == 3);
  a = h.to_deadline();
  auto hb = expect<send_consumer_group_heartbeat>(a);
  CHECK(hb.request.member_id == "broker-given");
  CHECK(hb.request.member_epoch == 3);
}

TEST_CASE("kip848: revoke before assign, and the assign listener only after the revoke is done", "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  // New target: t0 goes, u0 comes.
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}, {U, {0}}}));
  REQUIRE(h.m.state() == st::reconciling);
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  expect_empty(a);               // no assignment before the revoke is done
  CHECK(h.m.owned() == t01);     // still ours while the revoke (and its commits) run
  CHECK(h.m.standing().stable);  // commits inside the revoke carry the epoch

  a = h.done(revoke);
  // Ownership drops t0, then takes u0; the assigned listener names only what was added.
  auto first = expect_first<assignment_changed>(a);
  CHECK(first.owned == partition_set{{"t", 1}});
  auto second = expect_first<assignment_changed>(a);
  CHECK(second.owned == (partition_set{{"t", 1}, {"u", 0}}));
  auto assign = expect_listener(a, listener_kind::assigned, {{"u", 0}});
  expect_empty(a);

  a = h.done(assign);
  auto ack = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(ack.request.member_epoch == 2);
  CHECK(parts_of(ack.request) == tps{{T, {1}}, {U, {0}}});
  REQUIRE(h.m.state() == st::stable);
}

TEST_CASE("kip848: a revoke-only target still calls on_partitions_assigned (empty) before acknowledging",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  a = h.done(revoke);
  CHECK(expect<assignment_changed>(a).owned == partition_set{{"t", 1}});
  auto assign = expect_listener(a, listener_kind::assigned, {});
  expect_empty(a);
  a = h.done(assign);
  auto ack = expect<send_consumer_group_heartbeat>(a);
  CHECK(parts_of(ack.request) == tps{{T, {1}}});
}

TEST_CASE("kip848: a target that changes mid-reconciliation: the step finishes, then the newest target",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  // Target A: revoke t0, add u0.
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}, {U, {0}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  expect_empty(a);

  // While the revoke runs, heartbeats go on and bring target B: u0 stays, t1 goes, v0 comes.
  a = h.next_heartbeat(ok(3, id_assignment{{U, {0}}, {V, {0}}}));
  expect_empty(a);  // no second listener while one is pending
  REQUIRE(h.m.state() == st::reconciling);

  // The revoke finishes; the step assigns what A added and B still gives (u0), nothing of B's own.
  a = h.done(revoke);
  CHECK(expect_first<assignment_changed>(a).owned == partition_set{{"t", 1}});
  CHECK(expect_first<assignment_changed>(a).owned == (partition_set{{"t", 1}, {"u", 0}}));
  auto assign = expect_listener(a, listener_kind::assigned, {{"u", 0}});
  expect_empty(a);

  // Acknowledged (what is owned now), then on toward B: revoke t1 first, then assign v0.
  a = h.done(assign);
  auto ack = expect_first<send_consumer_group_heartbeat>(a);
  CHECK(parts_of(ack.request) == tps{{T, {1}}, {U, {0}}});
  REQUIRE(h.m.state() == st::reconciling);
  auto revoke2 = expect_listener(a, listener_kind::revoked, {{"t", 1}});
  expect_empty(a);

  a = h.done(revoke2);
  CHECK(expect_first<assignment_changed>(a).owned == partition_set{{"u", 0}});
  CHECK(expect_first<assignment_changed>(a).owned == (partition_set{{"u", 0}, {"v", 0}}));
  auto assign2 = expect_listener(a, listener_kind::assigned, {{"v", 0}});
  expect_empty(a);

  // The first acknowledgement is still in flight: the second waits for its answer (one in flight).
  a = h.done(assign2);
  expect_empty(a);
  REQUIRE(h.m.state() == st::acknowledging);
  a = h.answer(ok(3));
  auto ack2 = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(parts_of(ack2.request) == tps{{U, {0}}, {V, {0}}});
  REQUIRE(h.m.state() == st::stable);
}

TEST_CASE("kip848: a target that takes back what the step would add never assigns it", "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{U, {0}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  a = h.next_heartbeat(ok(3, id_assignment{{V, {0}}}));
  expect_empty(a);
  a = h.done(revoke);
  CHECK(expect_first<assignment_changed>(a).owned.empty());
  auto assign = expect_listener(a, listener_kind::assigned, {});  // u0 is not ours any more
  expect_empty(a);
  a = h.done(assign);
  expect<send_consumer_group_heartbeat>(a);
  auto l = expect_listener(a, listener_kind::assigned, {{"v", 0}});
  CHECK(h.m.owned() == partition_set{{"v", 0}});
}

TEST_CASE("kip848: a topic id not yet in metadata stays pending, is asked again, then assigned", "[kip848]") {
  harness h;
  h.start();
  (void)h.names({{T, "t"}});
  auto a = h.answer(ok(1, id_assignment{{T, {0}}, {U, {0, 1}}}));
  // t0 is assigned now; U is asked for.
  auto need = expect<need_topic_names>(a);
  CHECK(need.ids == std::vector<topic_id>{U});
  CHECK(expect<assignment_changed>(a).owned == partition_set{{"t", 0}});
  auto l = expect_listener(a, listener_kind::assigned, {{"t", 0}});
  expect_empty(a);
  a = h.done(l);
  auto ack = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(parts_of(ack.request) == tps{{T, {0}}});
  REQUIRE(h.m.state() == st::reconciling);  // the target is not reached
  a = h.answer(ok(1));
  expect_empty(a);

  // Metadata does not know U yet: asked again after the backoff (100 ms, then 200 ms).
  a = h.names({{T, "t"}});
  expect_empty(a);
  REQUIRE(h.until_deadline() == 100ms);
  a = h.to_deadline();
  CHECK(expect<need_topic_names>(a).ids == std::vector<topic_id>{U});
  expect_empty(a);
  REQUIRE(h.until_deadline() == 200ms);

  // Now it does: u0 and u1 are assigned and acknowledged.
  a = h.names({{U, "u"}});
  CHECK(expect<assignment_changed>(a).owned == (partition_set{{"t", 0}, {"u", 0}, {"u", 1}}));
  l = expect_listener(a, listener_kind::assigned, {{"u", 0}, {"u", 1}});
  expect_empty(a);
  a = h.done(l);
  ack = expect<send_consumer_group_heartbeat>(a);
  CHECK(parts_of(ack.request) == tps{{T, {0}}, {U, {0, 1}}});
  REQUIRE(h.m.state() == st::stable);
}

// ================================================================================================
// Heartbeat fields
// ================================================================================================

TEST_CASE("kip848: heartbeats carry only changed fields; after an error all of them", "[kip848]") {
  harness h(options("inst-1"));
  h.make_stable({{T, {0}}});

  SECTION("a subscription change goes out at once, alone") {
    h.m.subscribe(h.now, {"t", "u"});
    auto a = h.take();
    auto hb = expect<send_consumer_group_heartbeat>(a);
    expect_empty(a);
    CHECK_FALSE(hb.full);
    CHECK(hb.request.instance_id == std::optional<std::string>("inst-1"));  // always, when static
    CHECK(hb.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t", "u"}));
    CHECK(hb.request.subscribed_topic_regex == std::optional<std::string>(""));
    CHECK_FALSE(hb.request.topic_partitions.has_value());
    CHECK_FALSE(hb.request.server_assignor.has_value());
    CHECK(hb.request.rebalance_timeout_ms == -1);
  }
  SECTION("switching to a regex sends it and clears the names") {
    h.m.subscribe_regex(h.now, "t.*");
    auto a = h.take();
    auto hb = expect<send_consumer_group_heartbeat>(a);
    CHECK(hb.request.subscribed_topic_regex == std::optional<std::string>("t.*"));
    CHECK(hb.request.subscribed_topic_names ==
          std::optional<std::vector<std::string>>(std::vector<std::string>{}));
  }
  SECTION("after a retriable error the next heartbeat is full, after the backoff") {
    auto a = h.next_heartbeat(err(kafka_errc::coordinator_load_in_progress));
    expect_empty(a);
    REQUIRE(h.until_deadline() == 100ms);
    a = h.to_deadline();
    auto hb = expect<send_consumer_group_heartbeat>(a);
    CHECK(hb.full);
    CHECK(hb.request.member_epoch == 1);  // still a member: same epoch
    CHECK(hb.request.rebalance_timeout_ms == 60000);
    CHECK(hb.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t"}));
    CHECK(hb.request.server_assignor == std::optional<std::string>("uniform"));
    CHECK(hb.request.rack_id == std::optional<std::string>("r1"));
    CHECK(parts_of(hb.request) == tps{{T, {0}}});
  }
}

// ================================================================================================
// Errors
// ================================================================================================

TEST_CASE("kip848: fencing reports the partitions lost and rejoins with epoch 0 and the same id",
          "[kip848]") {
  const auto code = GENERATE(kafka_errc::fenced_member_epoch, kafka_errc::unknown_member_id);
  CAPTURE(error_name(make_error_code(code)));
  harness h;
  h.make_stable({{T, {0, 1}}}, 5);
  auto a = h.next_heartbeat(err(code));
  REQUIRE(h.m.state() == st::fenced);
  CHECK(h.m.member_epoch() == 0);
  CHECK(h.m.standing().removed);
  CHECK_FALSE(h.m.standing().stable);
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  // No heartbeat while the lost listener runs.
  expect_empty(h.advance(10000ms));
  h.m.poll_called(h.now);  // the application runs the callback inside poll()
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  auto join = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.full);
  CHECK(join.request.member_epoch == 0);
  CHECK(join.request.member_id == "client-uuid-1");
  REQUIRE(join.request.topic_partitions.has_value());
  CHECK(join.request.topic_partitions->empty());
  REQUIRE(h.m.state() == st::joining);
}

TEST_CASE("kip848: fenced while a revoke is queued: cancelled, and everything is reported lost", "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  a = h.next_heartbeat(err(kafka_errc::fenced_member_epoch));
  CHECK(expect<cancel_listener>(a).seq == revoke.seq);
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  expect_empty(h.done(revoke));  // stale
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  CHECK(expect<send_consumer_group_heartbeat>(a).request.member_epoch == 0);
}

TEST_CASE("kip848: fatal errors end the membership with a message that says why", "[kip848]") {
  struct row {
    kafka_errc code;
    const char* says;
  };
  const auto r = GENERATE(row{kafka_errc::unreleased_instance_id, "group.instance.id 'inst-1' is still held"},
                          row{kafka_errc::group_max_size_reached, "group.consumer.max.size"},
                          row{kafka_errc::unsupported_assignor, "no server-side assignor 'uniform'"},
                          row{kafka_errc::invalid_regular_expression, "refused the subscription regex '(t'"},
                          row{kafka_errc::group_authorization_failed, "not authorized to access group 'g'"},
                          row{kafka_errc::topic_authorization_failed, "not authorized to read"},
                          row{kafka_errc::unsupported_version, "group.protocol=classic"},
                          row{kafka_errc::fenced_instance_id, "same group.instance.id"});
  CAPTURE(error_name(make_error_code(r.code)));
  harness h(options("inst-1"));
  h.m.subscribe_regex(h.now, "(t");
  auto a = h.take();
  expect<find_coordinator>(a);
  a = h.found();
  auto join = expect<send_consumer_group_heartbeat>(a);
  CHECK(join.request.subscribed_topic_regex == std::optional<std::string>("(t"));
  CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>(std::vector<std::string>{}));
  a = h.answer(err(r.code, "the broker's words"));
  auto e = expect<report_error>(a);
  expect_empty(a);
  CHECK(e.fatal);
  CHECK(e.code == make_error_code(r.code));
  INFO(e.message);
  CHECK(e.message.find(r.says) != std::string::npos);
  CHECK(e.message.find("'g'") != std::string::npos);
  CHECK(e.message.find("the broker's words") != std::string::npos);
  REQUIRE(h.m.state() == st::fatal);
  CHECK(h.m.standing().fatal);
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(100000ms));
  expect_empty(h.poll());
  h.m.close(h.now);
  a = h.take();
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::closed);
}

TEST_CASE("kip848: close after a fatal error reports the owned partitions lost, no leave", "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  auto a = h.next_heartbeat(err(kafka_errc::group_authorization_failed));
  CHECK(expect<report_error>(a).fatal);
  expect_empty(a);
  h.m.close(h.now);
  a = h.take();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::closed);
}

TEST_CASE("kip848: coordinator errors rediscover the coordinator; loading retries after a backoff",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  SECTION("NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE") {
    const auto code = GENERATE(kafka_errc::not_coordinator, kafka_errc::coordinator_not_available);
    CAPTURE(error_name(make_error_code(code)));
    auto a = h.next_heartbeat(err(code));
    expect<find_coordinator>(a);
    expect_empty(a);
    CHECK_FALSE(h.m.coordinator().has_value());
    expect_empty(h.advance(10000ms));  // waits for the lookup
    a = h.found();
    auto hb = expect<send_consumer_group_heartbeat>(a);
    CHECK(hb.full);  // the new coordinator hears everything
    CHECK(hb.request.member_epoch == 1);
    REQUIRE(h.m.state() == st::stable);
    CHECK(h.m.owned() == partition_set{{"t", 0}});
  }
  SECTION("COORDINATOR_LOAD_IN_PROGRESS backs off exponentially") {
    auto a = h.next_heartbeat(err(kafka_errc::coordinator_load_in_progress));
    expect_empty(a);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<send_consumer_group_heartbeat>(a);
    a = h.answer(err(kafka_errc::coordinator_load_in_progress));
    CHECK(h.until_deadline() == 200ms);
    CHECK(h.m.coordinator().has_value());
  }
  SECTION("a failed request (disconnect, timeout): rediscover after a backoff, keep the membership") {
    auto a = h.to_deadline();
    expect<send_consumer_group_heartbeat>(a);
    h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
    a = h.take();
    expect_empty(a);
    CHECK(h.until_deadline() == 100ms);
    a = h.to_deadline();
    expect<find_coordinator>(a);
    a = h.found();
    CHECK(expect<send_consumer_group_heartbeat>(a).full);
    REQUIRE(h.m.state() == st::stable);
  }
  SECTION("an unexpected retriable code is reported, not fatal, and retried") {
    auto a = h.next_heartbeat(err(kafka_errc::request_timed_out));
    auto e = expect<report_error>(a);
    CHECK_FALSE(e.fatal);
    CHECK(h.until_deadline() == 100ms);
    REQUIRE(h.m.state() == st::stable);
  }
}

// ================================================================================================
// Leaving, closing, poll timeout
// ================================================================================================

TEST_CASE("kip848: unsubscribe revokes, keeps heartbeating, then leaves with epoch -1 (-2 static)",
          "[kip848]") {
  const bool is_static = GENERATE(false, true);
  CAPTURE(is_static);
  harness h(is_static ? options("inst-1") : options());
  h.make_stable({{T, {0, 1}}}, 4);
  h.m.unsubscribe(h.now);
  auto a = h.take();
  REQUIRE(h.m.state() == st::prepare_leaving);
  auto revoke = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  CHECK(h.m.standing().stable);  // commits inside the revoke still carry the epoch

  // Heartbeats go on while the revoke runs, without the cleared subscription.
  a = h.to_deadline();
  auto hb = expect<send_consumer_group_heartbeat>(a);
  CHECK(hb.request.member_epoch == 4);
  CHECK_FALSE(hb.request.subscribed_topic_names.has_value());
  a = h.answer(ok(4));
  expect_empty(a);

  a = h.done(revoke);
  CHECK(expect<assignment_changed>(a).owned.empty());
  auto leave = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::leaving);
  CHECK(leave.leave);
  CHECK(leave.request.member_epoch == (is_static ? -2 : -1));
  CHECK(leave.request.member_id == "client-uuid-1");
  CHECK(leave.request.instance_id == (is_static ? std::optional<std::string>("inst-1") : std::nullopt));
  CHECK_FALSE(leave.request.subscribed_topic_names.has_value());
  CHECK_FALSE(leave.request.topic_partitions.has_value());

  a = h.answer(ok(is_static ? -2 : -1));
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::unsubscribed);
  CHECK_FALSE(h.m.next_deadline().has_value());

  // Subscribing again joins with epoch 0.
  h.m.subscribe(h.now, {"t"});
  a = h.take();
  CHECK(expect<send_consumer_group_heartbeat>(a).request.member_epoch == 0);
}

TEST_CASE("kip848: close without partitions leaves at once and closes on the answer or a failure",
          "[kip848]") {
  const bool fail = GENERATE(false, true);
  harness h;
  h.make_stable({});
  h.m.close(h.now);
  auto a = h.take();
  auto leave = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.request.member_epoch == -1);
  if (fail) {
    h.m.request_failed(h.now, make_error_code(client_errc::request_timed_out));
    a = h.take();
  } else {
    a = h.answer(err(kafka_errc::unknown_member_id));  // whatever it says
  }
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::closed);
  CHECK_FALSE(h.m.next_deadline().has_value());
}

TEST_CASE("kip848: fenced while the revoke of unsubscribe runs: no leave heartbeat", "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  a = h.next_heartbeat(err(kafka_errc::unknown_member_id));
  expect_empty(a);
  a = h.done(revoke);
  CHECK(expect<assignment_changed>(a).owned.empty());
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::unsubscribed);
}

TEST_CASE("kip848: max.poll.interval.ms expiry leaves, the next poll reports lost and rejoins", "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}}, 7);
  h.poll();
  const auto last = h.now;
  // Heartbeats answered while the application does not poll, until the poll timer expires.
  actions a;
  for (int i = 0; i < 100 && h.m.state() == st::stable; ++i) {
    a = h.to_deadline();
    if (count_of<send_consumer_group_heartbeat>(a) == 1 && h.m.state() == st::stable) {
      expect<send_consumer_group_heartbeat>(a);
      expect_empty(a);
      expect_empty(h.answer(ok(7)));
    }
  }
  REQUIRE(h.m.state() == st::poll_timed_out);
  CHECK(h.now == last + 60000ms);
  auto e = expect<report_error>(a);
  CHECK_FALSE(e.fatal);
  auto leave = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.leave);
  CHECK(leave.request.member_epoch == -1);
  CHECK(h.m.standing().poll_timed_out);
  CHECK(h.m.owned() == t01);  // until the application hears it on its next poll()
  a = h.answer(ok(-1));
  expect_empty(a);
  expect_empty(h.advance(600000ms));  // nothing until poll()

  h.m.poll_called(h.now);
  a = h.take();
  REQUIRE(h.m.state() == st::fenced);
  auto lost = expect_listener(a, listener_kind::lost, t01);
  expect_empty(a);
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  auto join = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.full);
  CHECK(join.request.member_epoch == 0);
  REQUIRE(h.m.state() == st::joining);
}

TEST_CASE("kip848: a poll timeout cancels a reconciliation step the application never started", "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.poll();
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {0}}, {U, {0}}}));
  auto assign = expect_listener(a, listener_kind::assigned, {{"u", 0}});
  h.now += 60000ms;
  a = h.tick();
  CHECK(expect<cancel_listener>(a).seq == assign.seq);
  CHECK(expect<assignment_changed>(a).owned == partition_set{{"t", 0}});  // u0 taken back
  expect<report_error>(a);
  CHECK(expect<send_consumer_group_heartbeat>(a).request.member_epoch == -1);
  expect_empty(a);
  REQUIRE(h.m.state() == st::poll_timed_out);
}

TEST_CASE("kip848: the transition table", "[kip848]") {
  CHECK(transition_allowed(st::unsubscribed, st::joining));
  CHECK(transition_allowed(st::joining, st::reconciling));
  CHECK(transition_allowed(st::reconciling, st::acknowledging));
  CHECK(transition_allowed(st::acknowledging, st::stable));
  CHECK(transition_allowed(st::stable, st::fenced));
  CHECK(transition_allowed(st::fenced, st::joining));
  CHECK(transition_allowed(st::stable, st::prepare_leaving));
  CHECK(transition_allowed(st::prepare_leaving, st::leaving));
  CHECK(transition_allowed(st::leaving, st::closed));
  CHECK(transition_allowed(st::fatal, st::closed));
  CHECK_FALSE(transition_allowed(st::unsubscribed, st::stable));
  CHECK_FALSE(transition_allowed(st::stable, st::acknowledging));  // only a reconciliation acknowledges
  CHECK_FALSE(transition_allowed(st::leaving, st::joining));
  CHECK_FALSE(transition_allowed(st::fatal, st::joining));
  CHECK_FALSE(transition_allowed(st::closed, st::fatal));
  for (int from = 0; from <= static_cast<int>(st::closed); ++from) {
    CHECK(transition_allowed(static_cast<st>(from), st::closed));
  }
}

// ================================================================================================
// More leaving and fencing orders
// ================================================================================================

TEST_CASE("kip848: unsubscribe while the join heartbeat is in flight leaves with what it answers",
          "[kip848]") {
  harness h;
  auto join = h.start({"t"}, 0);  // v0: no member id until the answer
  CHECK(join.request.member_id.empty());
  h.m.unsubscribe(h.now);
  expect_empty(h.take());  // one request in flight: the leave waits for the answer
  REQUIRE(h.m.state() == st::leaving);
  auto a = h.answer(ok(2, id_assignment{{T, {0}}}, 2000, "broker-given"));
  auto leave = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.leave);
  CHECK(leave.request.member_id == "broker-given");
  CHECK(leave.request.member_epoch == -1);
  CHECK(h.m.owned().empty());  // the assignment of that answer was never taken
  a = h.answer(ok(-1));
  expect<left_group>(a);
  REQUIRE(h.m.state() == st::unsubscribed);
}

TEST_CASE("kip848: subscribe while leaving joins again once the leave is answered", "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.m.unsubscribe(h.now);
  auto a = h.take();
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  h.m.subscribe(h.now, {"u"});
  expect_empty(h.take());  // nothing goes out for it while the revoke runs
  a = h.done(revoke);
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.leave);
  a = h.answer(ok(-1));
  expect<left_group>(a);
  auto join = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.request.member_epoch == 0);
  CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"u"}));
  REQUIRE(h.m.state() == st::joining);
}

TEST_CASE("kip848: a fatal error while unsubscribe's revoke runs is reported and the leave ends quietly",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.m.close(h.now);
  auto a = h.take();
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  a = h.next_heartbeat(err(kafka_errc::group_authorization_failed));
  auto e = expect<report_error>(a);
  expect_empty(a);
  CHECK(e.fatal);
  a = h.done(revoke);
  CHECK(expect<assignment_changed>(a).owned.empty());
  expect<left_group>(a);
  expect_empty(a);  // no leave heartbeat: the coordinator refused us
  REQUIRE(h.m.state() == st::closed);
}

TEST_CASE("kip848: a revoke already running when the member is fenced finishes as a revoke", "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  h.m.listener_started(h.now, revoke.seq);
  a = h.next_heartbeat(err(kafka_errc::fenced_member_epoch));
  // t0 is the running revoke's; only t1 is lost.
  CHECK(expect<assignment_changed>(a).owned == partition_set{{"t", 1}});
  // The running revoke is cancelled late: it finishes as a revoke, but a commit from inside it
  // is refused from now on (it would carry the next membership's epoch; kgroup-sim --group).
  CHECK(expect<cancel_listener>(a).seq == revoke.seq);
  auto lost = expect_listener(a, listener_kind::lost, {{"t", 1}});
  expect_empty(a);
  h.m.listener_done(h.now, revoke.seq);  // stale now
  expect_empty(h.take());
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  CHECK(expect<send_consumer_group_heartbeat>(a).request.member_epoch == 0);
}

TEST_CASE("kip848: a static member's poll timeout leaves with epoch -2", "[kip848]") {
  harness h(options("inst-1"));
  h.make_stable({{T, {0}}});
  h.poll();
  actions a;
  for (int i = 0; i < 100 && h.m.state() == st::stable; ++i) {
    a = h.to_deadline();
    if (count_of<send_consumer_group_heartbeat>(a) == 1 && h.m.state() == st::stable) {
      a.clear();
      expect_empty(h.answer(ok(1)));
    }
  }
  REQUIRE(h.m.state() == st::poll_timed_out);
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.request.member_epoch == -2);
  CHECK(leave.request.instance_id == std::optional<std::string>("inst-1"));
}

TEST_CASE("kip848: a poll timeout while the coordinator is unknown leaves once it is found", "[kip848]") {
  harness h;
  h.make_stable({});
  h.poll();
  auto a = h.next_heartbeat(err(kafka_errc::not_coordinator));
  expect<find_coordinator>(a);
  h.now += 60000ms;
  a = h.tick();
  expect<report_error>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::poll_timed_out);
  a = h.found();
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.leave);
  CHECK(leave.request.member_epoch == -1);
}

// ================================================================================================
// Randomized: errors at any step, targets that change at any step, names that come late
// ================================================================================================

namespace {

struct fake_coordinator {
  std::mt19937 rng;
  std::int32_t epoch = 0;
  id_assignment target;
  bool delivered = false;
  bool errors = true;
  std::uniform_int_distribution<int> pct{0, 99};

  explicit fake_coordinator(unsigned seed) : rng(seed) {}
  bool chance(int p) { return pct(rng) < p; }

  id_assignment random_target() {
    id_assignment t;
    for (const auto& id : {T, U, V}) {
      for (std::int32_t p = 0; p < 3; ++p) {
        if (chance(50)) t[id].insert(p);
      }
    }
    return t;
  }
  void new_target() {
    target = random_target();
    ++epoch;
    delivered = false;
  }
};

}  // namespace

namespace {

// One randomized run: coordinator errors, failed requests, fencing and new targets at any step,
// topic names that come late, callbacks that take their time; with `stalls`, an application that
// now and then does not poll for longer than max.poll.interval.ms; with `close_step` >= 0, a
// close() at that step. The last stretch is quiet: the member must settle (stable on the target,
// or closed with nothing owned).
struct run_counts {
  int poll_timeouts = 0;
  int lost = 0;
  int revoked = 0;
  int assigned = 0;
  int closed = 0;
  run_counts& operator+=(const run_counts& o) {
    poll_timeouts += o.poll_timeouts;
    lost += o.lost;
    revoked += o.revoked;
    assigned += o.assigned;
    closed += o.closed;
    return *this;
  }
};

run_counts random_run(unsigned seed, bool stalls, int close_step) {
  CAPTURE(seed, stalls, close_step);
  run_counts counts;
  {
    harness h;
    fake_coordinator c(seed);
    c.new_target();
    partition_set app;  // what the application was told it owns
    std::optional<run_listener> queued;
    time_point listener_due{};
    std::optional<hb_request> in_flight;
    bool finding = false;
    bool v_known = false;
    std::vector<topic_id> names_wanted;
    std::optional<partition_set> core_owned;
    time_point stall_until{};
    bool closing = false;
    int left = 0;
    id_assignment delivered;  // the last target the coordinator sent
    auto names_of = [](const id_assignment& a) {
      partition_set out;
      for (const auto& [id, parts] : a) {
        for (auto p : parts) out.insert({id == T ? "t" : id == U ? "u" : "v", p});
      }
      return out;
    };

    auto handle = [&](actions as) {
      for (auto& x : as) {
        INFO("action " << describe(x));
        REQUIRE(left == 0);  // nothing after the close is done
        if (std::holds_alternative<find_coordinator>(x)) {
          REQUIRE_FALSE(finding);
          finding = true;
        } else if (auto* hb = std::get_if<send_consumer_group_heartbeat>(&x)) {
          REQUIRE_FALSE(in_flight.has_value());  // one in flight at most
          protocol::bytes wire;
          REQUIRE_FALSE(protocol::encode(hb->request, 1, wire));  // what the core asks is encodable
          in_flight = hb->request;
        } else if (auto* n = std::get_if<need_topic_names>(&x)) {
          names_wanted.insert(names_wanted.end(), n->ids.begin(), n->ids.end());
        } else if (auto* l = std::get_if<run_listener>(&x)) {
          REQUIRE_FALSE(queued.has_value());  // one callback at a time
          const partition_set parts(l->partitions.begin(), l->partitions.end());
          if (l->kind == listener_kind::assigned) {
            REQUIRE_FALSE(closing);  // a closing member assigns nothing
            // Only partitions the latest target the member heard of gives, none it already has.
            for (const auto& tp : parts) REQUIRE_FALSE(app.contains(tp));
            for (const auto& tp : parts) REQUIRE(names_of(delivered).contains(tp));
          } else {
            for (const auto& tp : parts) REQUIRE(app.contains(tp));
          }
          (l->kind == listener_kind::assigned  ? counts.assigned
           : l->kind == listener_kind::revoked ? counts.revoked
                                               : counts.lost) += 1;
          queued = *l;
          listener_due = h.now + ms(c.pct(c.rng) * 30);
        } else if (auto* cl = std::get_if<cancel_listener>(&x)) {
          REQUIRE(queued.has_value());
          REQUIRE(queued->seq == cl->seq);
          queued.reset();
        } else if (auto* ch = std::get_if<assignment_changed>(&x)) {
          core_owned = ch->owned;
        } else if (auto* e = std::get_if<report_error>(&x)) {
          REQUIRE_FALSE(e->fatal);
          if (e->message.find("max.poll.interval.ms") != std::string::npos) ++counts.poll_timeouts;
        } else if (std::holds_alternative<left_group>(x)) {
          REQUIRE(closing);
          ++left;
        } else {
          FAIL("unexpected action " << describe(x));
        }
      }
    };
    auto name_of = [&](const topic_id& id) -> std::optional<std::string> {
      if (id == T) return "t";
      if (id == U) return "u";
      if (id == V && v_known) return "v";
      return std::nullopt;
    };

    h.m.subscribe(h.now, {"t", "u", "v"});
    handle(h.take());
    for (int step = 0; step < 4000; ++step) {
      h.now += 50ms;
      if (step == 2600) c.errors = false;  // the last stretch is quiet: the member must settle
      if (step > 400 || c.chance(1)) v_known = true;
      if (step == close_step) {
        closing = true;
        h.m.close(h.now);
        handle(h.take());
      }
      // A stall (70 s without poll()) ends before the quiet stretch.
      if (stalls && step < 1200 && h.now >= stall_until && c.chance(1)) stall_until = h.now + 70000ms;
      const bool stalled = h.now < stall_until;
      if (step % 20 == 0 && !stalled) {
        h.m.poll_called(h.now);
        h.m.poll_returned(h.now);
        handle(h.take());
      }
      handle(h.tick());
      if (finding && c.chance(50)) {
        finding = false;
        if (c.errors && c.chance(10)) {
          h.m.coordinator_failed(h.now, make_error_code(kafka_errc::coordinator_not_available));
        } else {
          h.m.coordinator_found(h.now, 1, 1);
        }
        handle(h.take());
      }
      if (!names_wanted.empty() && c.chance(50)) {
        std::vector<std::pair<topic_id, std::string>> known;
        for (const auto& id : names_wanted) {
          if (auto n = name_of(id)) known.emplace_back(id, *n);
        }
        names_wanted.clear();
        handle(h.names(known));
      }
      if (queued && h.now >= listener_due && !stalled) {
        const auto l = *queued;
        queued.reset();
        const partition_set parts(l.partitions.begin(), l.partitions.end());
        if (l.kind == listener_kind::assigned) {
          app.insert(parts.begin(), parts.end());
        } else {
          for (const auto& tp : parts) app.erase(tp);
        }
        h.m.poll_called(h.now);
        h.m.listener_started(h.now, l.seq);
        h.m.listener_done(h.now, l.seq);
        h.m.poll_returned(h.now);
        handle(h.take());
      }
      if (c.errors && c.chance(2) && h.m.member_epoch() > 0) c.new_target();
      if (in_flight && c.chance(60)) {
        const hb_request req = *in_flight;
        in_flight.reset();
        const int roll = c.errors ? c.pct(c.rng) : 100;
        if (roll < 3) {
          h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
          handle(h.take());
          continue;
        }
        hb_response r;
        if (roll < 6) {
          r = err(kafka_errc::coordinator_load_in_progress);
        } else if (roll < 8) {
          r = err(kafka_errc::not_coordinator);
        } else if (roll < 9 && req.member_epoch > 0) {
          r = err(kafka_errc::fenced_member_epoch);
          c.epoch += 1;  // the coordinator forgot the member; the rejoin gets a new epoch
          c.delivered = false;
        } else if (req.member_epoch < 0) {
          r = ok(req.member_epoch);
          c.epoch += 1;  // the member left: a rejoin gets a new epoch and the whole target
          c.delivered = false;
        } else {
          if (req.member_epoch == 0) {
            // A join must carry everything, with nothing owned.
            REQUIRE(req.rebalance_timeout_ms == 60000);
            REQUIRE(req.subscribed_topic_names.has_value());
            REQUIRE(req.topic_partitions.has_value());
            REQUIRE(req.topic_partitions->empty());
            c.delivered = false;
          }
          r = ok(c.epoch);
          if (!c.delivered || c.chance(5)) {
            r = ok(c.epoch, c.target);
            c.delivered = true;
            delivered = c.target;
          }
        }
        handle(h.answer(r));
      }
      // What the core announced it owns is what it says it owns.
      if (core_owned) REQUIRE(*core_owned == h.m.owned());
    }
    INFO("state " << to_string(h.m.state()));
    REQUIRE_FALSE(queued.has_value());
    if (closing) {
      REQUIRE(h.m.state() == st::closed);
      REQUIRE(left == 1);
      REQUIRE(app.empty());
      REQUIRE(h.m.owned().empty());
      REQUIRE_FALSE(h.m.next_deadline().has_value());
      ++counts.closed;
      return counts;
    }
    REQUIRE(h.m.state() == st::stable);
    REQUIRE(h.m.owned_ids() == c.target);
    REQUIRE(app == h.m.owned());
  }
  return counts;
}

}  // namespace

TEST_CASE("kip848: randomized errors and target changes keep listener order and converge", "[kip848]") {
  run_counts n;
  for (unsigned seed = 1; seed <= 40; ++seed) n += random_run(seed, false, -1);
  // The runs did go through what they are meant to test.
  CHECK(n.revoked > 40);
  CHECK(n.assigned > 40);
  CHECK(n.lost > 5);
  CHECK(n.poll_timeouts == 0);
}

TEST_CASE("kip848: randomized, with poll stalls past max.poll.interval.ms", "[kip848]") {
  run_counts n;
  for (unsigned seed = 100; seed <= 140; ++seed) n += random_run(seed, true, -1);
  CHECK(n.poll_timeouts > 10);
  CHECK(n.lost > n.poll_timeouts / 2);
}

TEST_CASE("kip848: randomized, closed at a random step", "[kip848]") {
  run_counts n;
  for (unsigned seed = 200; seed <= 240; ++seed) {
    n += random_run(seed, seed % 2 == 0, static_cast<int>(seed * 37 % 2600));
  }
  CHECK(n.closed == 41);
}

TEST_CASE("kip848: each reconciliation is recorded with its cause, partitions, epoch and duration",
          "[kip848]") {
  harness h;
  const auto t0 = h.now;
  h.start();
  (void)h.names({{T, "t"}, {U, "u"}});
  h.now += 40ms;
  auto a = h.answer(ok(1, id_assignment{{T, {0, 1}}}));
  auto l = expect_listener(a, listener_kind::assigned, t01);
  h.now += 10ms;
  a = h.done(l);
  expect<send_consumer_group_heartbeat>(a);
  const auto& stats = h.m.stats();
  REQUIRE(stats.history.size() == 1);
  {
    const auto& e = stats.history.back();
    CHECK(e.cause == RebalanceCause::member_joined);
    CHECK(e.completed);
    CHECK(e.generation == 1);
    CHECK(e.assigned == t01);
    CHECK(e.revoked.empty());
    REQUIRE(e.end.has_value());
    CHECK(*e.end - e.start == 50ms);
    CHECK(e.start == t0);
  }
  a = h.answer(ok(1));

  // A new target: revoke t0, assign u0; a subscription change caused it.
  h.m.subscribe(h.now, {"t", "u"});
  a = h.take();
  expect<send_consumer_group_heartbeat>(a);
  h.now += 5ms;
  a = h.answer(ok(2, id_assignment{{T, {1}}, {U, {0}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  REQUIRE(stats.history.size() == 2);
  CHECK_FALSE(stats.history.back().end.has_value());  // open while reconciling
  h.now += 100ms;
  a = h.done(revoke);
  auto assign = expect_listener(a, listener_kind::assigned, {{"u", 0}});
  a = h.done(assign);
  {
    const auto& e = stats.history.back();
    CHECK(e.cause == RebalanceCause::subscription_change);
    // The target as the detail says it: owned t0,t1 -> target t1,u0.
    CHECK(e.detail == "new target assignment of epoch 2: 2 partitions, 1 to revoke, 1 to add");
    CHECK(e.completed);
    CHECK(e.generation == 2);
    CHECK(e.revoked == partition_set{{"t", 0}});
    CHECK(e.assigned == partition_set{{"u", 0}});
    CHECK(*e.end - e.start == 100ms);
  }
  CHECK(stats.rebalances == 2);
  CHECK(stats.failed_rebalances == 0);
  a = h.answer(ok(2));

  // Fenced: the loss and the rejoin are one record, counted complete once stable again.
  a = h.next_heartbeat(err(kafka_errc::fenced_member_epoch));
  auto lost = expect_listener(a, listener_kind::lost, (partition_set{{"t", 1}, {"u", 0}}));
  a = h.done(lost);
  a = h.answer(ok(4, id_assignment{}));
  REQUIRE(stats.history.size() == 3);
  const auto& e = stats.history.back();
  CHECK(e.cause == RebalanceCause::session_timeout);
  CHECK(e.detail.find("FENCED_MEMBER_EPOCH") != std::string::npos);
  CHECK(e.lost == (partition_set{{"t", 1}, {"u", 0}}));
  CHECK(e.completed);
  CHECK(e.generation == 4);
  CHECK(stats.rebalances == 3);
  CHECK(stats.heartbeats >= 6);
  CHECK(stats.last_heartbeat_response == h.now);
}

TEST_CASE("kip848: unsubscribe after a poll timeout whose leave is still pending: lost, then the leave",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  h.poll();
  auto a = h.next_heartbeat(err(kafka_errc::not_coordinator));
  expect<find_coordinator>(a);
  h.now += 60000ms;
  a = h.tick();
  expect<report_error>(a);
  REQUIRE(h.m.state() == st::poll_timed_out);
  h.m.unsubscribe(h.now);
  a = h.take();
  auto lost = expect_listener(a, listener_kind::lost, {{"t", 0}});
  expect_empty(a);
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  expect_empty(a);  // the leave waits for the coordinator
  REQUIRE(h.m.state() == st::leaving);
  a = h.found();
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.request.member_epoch == -1);
  a = h.answer(ok(-1));
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::unsubscribed);
}

TEST_CASE("kip848: a coordinator lookup that fails while close() reports a loss ends the close once",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  auto a = h.next_heartbeat(err(kafka_errc::not_coordinator));
  expect<find_coordinator>(a);
  h.m.coordinator_found(h.now, 1, 1);
  a = h.take();
  expect<send_consumer_group_heartbeat>(a);
  a = h.answer(err(kafka_errc::group_max_size_reached));
  CHECK(expect<report_error>(a).fatal);
  h.m.close(h.now);
  a = h.take();
  auto lost = expect_listener(a, listener_kind::lost, {{"t", 0}});
  h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
  expect_empty(h.take());  // the close waits for its callback
  a = h.done(lost);
  CHECK(expect<assignment_changed>(a).owned.empty());
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::closed);
}

TEST_CASE("kip848: every request the core makes encodes at the version the coordinator speaks", "[kip848]") {
  const std::int16_t version = GENERATE(0, 1);
  CAPTURE(version);
  harness h(options("inst-1"));
  std::vector<hb_request> sent;
  auto keep = [&](actions a) {
    for (auto& x : a) {
      if (auto* hb = std::get_if<send_consumer_group_heartbeat>(&x)) sent.push_back(hb->request);
    }
    return a;
  };
  sent.push_back(h.start({"t"}, version).request);
  (void)h.names({{T, "t"}});
  auto a = keep(h.answer(ok(1, id_assignment{{T, {0}}}, 2000, "m")));
  auto l = expect<run_listener>(a);
  keep(h.done(l));
  keep(h.answer(ok(1)));
  keep(h.to_deadline());
  keep(h.answer(ok(1)));
  h.m.close(h.now);
  a = keep(h.take());
  l = expect<run_listener>(a);
  keep(h.done(l));
  REQUIRE(sent.size() == 4);  // join, acknowledgement, a regular heartbeat, the leave
  for (const auto& r : sent) {
    INFO("epoch " << r.member_epoch);
    protocol::bytes wire;
    REQUIRE_FALSE(protocol::encode(r, version, wire));
    hb_request back;
    REQUIRE_FALSE(protocol::decode(wire, version, back));
    CHECK(back == r);
  }
  CHECK(sent.back().member_epoch == -2);
}

TEST_CASE("kip848: a regex subscription with a v0 coordinator is fatal, saying why", "[kip848]") {
  harness h;
  h.m.subscribe_regex(h.now, "t.*");
  auto a = h.take();
  expect<find_coordinator>(a);
  a = h.found(0);
  auto e = expect<report_error>(a);
  expect_empty(a);
  CHECK(e.fatal);
  CHECK(e.code == make_error_code(client_errc::no_compatible_version));
  CHECK(e.message.find("ConsumerGroupHeartbeat v1") != std::string::npos);
  REQUIRE(h.m.state() == st::fatal);
}

TEST_CASE("kip848: a revoke is reported at once, an assignment as soon as it is owned (before its callback)",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0, 1}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {1}}, {U, {0}}}));
  auto revoke = expect_listener(a, listener_kind::revoked, {{"t", 0}});
  // While the revoke runs, heartbeats report nothing new.
  a = h.to_deadline();
  CHECK_FALSE(expect<send_consumer_group_heartbeat>(a).request.topic_partitions.has_value());
  a = h.answer(ok(2));
  a = h.done(revoke);
  auto assign = expect_listener(a, listener_kind::assigned, {{"u", 0}});
  // While the (slow) assign callback runs, a heartbeat reports the revocation and u0 (owned now;
  // Java reports u0 only after the callback, which can read as a revocation acknowledged early:
  // see the [sim_finding] case below).
  a = h.to_deadline();
  auto hb = expect<send_consumer_group_heartbeat>(a);
  CHECK(parts_of(hb.request) == tps{{T, {1}}, {U, {0}}});
  a = h.answer(ok(2));
  a = h.done(assign);
  // The acknowledgement goes out at once, with nothing new to report.
  auto ack = expect<send_consumer_group_heartbeat>(a);
  CHECK_FALSE(ack.request.topic_partitions.has_value());
  REQUIRE(h.m.state() == st::stable);
}

TEST_CASE("kip848: a join refused as unknown member is retried after a backoff, with the same id",
          "[kip848]") {
  harness h;
  h.start();
  auto a = h.answer(err(kafka_errc::unknown_member_id));
  expect_empty(a);  // nothing owned, nothing lost
  REQUIRE(h.m.state() == st::joining);
  CHECK(h.until_deadline() == 100ms);
  a = h.to_deadline();
  auto join = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(join.full);
  CHECK(join.request.member_epoch == 0);
  CHECK(join.request.member_id == "client-uuid-1");
  a = h.answer(err(kafka_errc::fenced_member_epoch));
  CHECK(h.until_deadline() == 200ms);  // exponential
}

TEST_CASE("kip848: an unexpected error that is not retriable becomes fatal the tenth time in a row",
          "[kip848]") {
  harness h;
  h.make_stable({{T, {0}}});
  auto a = h.to_deadline();
  for (int i = 1; i < 10; ++i) {
    expect<send_consumer_group_heartbeat>(a);
    a = h.answer(err(kafka_errc::invalid_partitions, "odd"));
    auto e = expect<report_error>(a);
    CHECK_FALSE(e.fatal);
    CHECK(e.message.find("INVALID_PARTITIONS") != std::string::npos);
    expect_empty(a);
    REQUIRE(h.m.state() == st::stable);
    a = h.to_deadline();
  }
  expect<send_consumer_group_heartbeat>(a);
  a = h.answer(err(kafka_errc::invalid_partitions, "odd"));
  auto e = expect<report_error>(a);
  CHECK(e.fatal);
  CHECK(e.message.find("10 times in a row") != std::string::npos);
  REQUIRE(h.m.state() == st::fatal);
}

TEST_CASE("kip848: a coordinator without ConsumerGroupHeartbeat is fatal at once; close() then ends quietly",
          "[kip848]") {
  harness h;
  h.m.subscribe(h.now, {"t"});
  auto a = h.take();
  expect<find_coordinator>(a);
  h.m.coordinator_unusable(h.now, make_error_code(client_errc::no_compatible_version), "needs KIP-848");
  a = h.take();
  auto e = expect<report_error>(a);
  CHECK(e.fatal);
  CHECK(e.message == "needs KIP-848");
  expect_empty(a);
  CHECK(h.m.state() == st::fatal);
  CHECK_FALSE(h.m.next_deadline().has_value());
  h.m.close(h.now);
  a = h.take();
  expect<left_group>(a);
  expect_empty(a);
  CHECK(h.m.state() == st::closed);
}

TEST_CASE("kip848: from v1 a subscription is sent whole (names with an empty regex, a regex with no names); v0 sends names only",
          "[kip848]") {
  {
    harness h;
    auto join = h.start({"t"}, 1);
    CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t"}));
    CHECK(join.request.subscribed_topic_regex == std::optional<std::string>(""));
  }
  {
    harness h;
    auto join = h.start({"t"}, 0);
    CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>({"t"}));
    CHECK_FALSE(join.request.subscribed_topic_regex.has_value());
  }
  {
    harness h;
    h.m.subscribe_regex(h.now, "t.*");
    auto a = h.take();
    expect<find_coordinator>(a);
    a = h.found(1);
    auto join = expect<send_consumer_group_heartbeat>(a);
    CHECK(join.request.subscribed_topic_regex == std::optional<std::string>("t.*"));
    CHECK(join.request.subscribed_topic_names == std::optional<std::vector<std::string>>(std::vector<std::string>{}));
  }
}

TEST_CASE("kip848: while leaving, a coordinator without ConsumerGroupHeartbeat ends the leave without it",
          "[kip848]") {
  harness h;
  h.make_stable({});
  h.m.close(h.now);
  auto a = h.take();
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.leave);
  // The leave fails on the connection; the member looks the coordinator up again and finds one
  // that lacks the API (a broker downgraded): the leave is given up, close() finishes.
  h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
  a = h.take();
  if (h.m.state() != st::closed) {
    expect<find_coordinator>(a);
    h.m.coordinator_unusable(h.now, make_error_code(client_errc::no_compatible_version), "needs KIP-848");
    a = h.take();
  }
  expect<left_group>(a);
  CHECK(h.m.state() == st::closed);
}

TEST_CASE("kip848: what the snapshot shows: the subscription (names, or what a broker regex assigned), epoch, assignor",
          "[kip848]") {
  harness h;
  h.m.subscribe(h.now, {"u", "t", "u"});
  CHECK(h.m.subscription() == std::vector<std::string>{"t", "u"});  // sorted, once each
  CHECK(h.m.protocol_name() == "uniform");
  CHECK_FALSE(h.m.is_leader());
  h.m.subscribe_regex(h.now, "t|v");
  CHECK(h.m.subscription().empty());  // nothing assigned from it yet
  (void)h.take();
  auto a = h.found(1);
  (void)expect<send_consumer_group_heartbeat>(a);
  (void)h.names({{T, "t"}, {V, "v"}});
  a = h.answer(ok(4, id_assignment{{T, {0, 1}}, {V, {2}}}));
  CHECK(h.m.generation() == 4);
  CHECK(h.m.generation() == h.m.member_epoch());
  CHECK(h.m.subscription() == std::vector<std::string>{"t", "v"});  // the topics assigned from the regex
  h.m.unsubscribe(h.now);
  CHECK(h.m.subscription().empty());
}

TEST_CASE("kip848: a coordinator without ConsumerGroupHeartbeat (version -1) is a clear fatal error, no fallback",
          "[kip848]") {
  harness h;
  h.m.subscribe(h.now, {"t"});
  (void)h.take();
  auto a = h.found(-1);
  const auto err = expect<report_error>(a);
  CHECK(err.fatal);
  CHECK(err.code == make_error_code(client_errc::no_compatible_version));
  CHECK(err.message == unsupported_message(1));
  CHECK_THAT(err.message, Catch::Contains("ConsumerGroupHeartbeat") && Catch::Contains("group.protocol=classic"));
  CHECK(h.m.state() == st::fatal);
  CHECK_FALSE(h.m.coordinator().has_value());
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

TEST_CASE("kip848: a commit after a fence, a poll timeout, a fatal error or the leave fails for good",
          "[kip848][committer]") {
  harness h;
  h.make_stable({{T, {0, 1}}}, 5);
  CHECK(commit_now(h) == "sent");

  SECTION("fenced: commit_failed until the coordinator gives an epoch again") {
    auto a = h.next_heartbeat(err(kafka_errc::fenced_member_epoch));
    auto lost = expect_listener(a, listener_kind::lost, t01);
    REQUIRE(h.m.member_epoch() == 0);
    CHECK(commit_now(h) == commit_failed);
    h.m.poll_called(h.now);
    a = h.done(lost);
    expect<send_consumer_group_heartbeat>(a);
    REQUIRE(h.m.state() == st::joining);
    // Rejoining, with no epoch yet: the offsets were of the membership that is gone.
    CHECK(h.m.standing().removed);
    CHECK(commit_now(h) == commit_failed);
    a = h.answer(ok(6, id_assignment{{T, {0}}}));
    REQUIRE(h.m.state() == st::reconciling);
    CHECK_FALSE(h.m.standing().removed);
    CHECK(commit_now(h) == "sent");  // a member of epoch 6 again
  }
  SECTION("poll timeout: commit_failed until poll() has reported the loss; then joining") {
    h.poll();
    for (int i = 0; i < 100 && h.m.state() == st::stable; ++i) {
      auto a = h.to_deadline();
      if (count_of<send_consumer_group_heartbeat>(a) == 1 && h.m.state() == st::stable) {
        expect_empty(h.answer(ok(5)));
      }
    }
    REQUIRE(h.m.state() == st::poll_timed_out);
    REQUIRE(h.m.member_epoch() == 0);
    CHECK(commit_now(h) == commit_failed);
    h.m.poll_called(h.now);
    auto a = h.take();
    auto lost = expect_listener(a, listener_kind::lost, t01);
    CHECK(commit_now(h) == commit_failed);  // inside on_partitions_lost
    (void)h.done(lost);
    REQUIRE(h.m.state() == st::joining);
    // The application has heard of the loss: joining again is a rebalance, as with the classic
    // protocol after a poll timeout.
    CHECK(commit_now(h) == rebalancing);
  }
  SECTION("fatal: the epoch stays, the commit still fails for good") {
    auto a = h.next_heartbeat(err(kafka_errc::group_authorization_failed));
    CHECK(expect<report_error>(a).fatal);
    REQUIRE(h.m.state() == st::fatal);
    REQUIRE(h.m.member_epoch() == 5);
    CHECK(commit_now(h) == commit_failed);
    h.m.close(h.now);
    a = h.take();
    (void)expect_listener(a, listener_kind::lost, t01);
    CHECK(h.m.standing().left);
    CHECK(commit_now(h) == commit_failed);  // inside on_partitions_lost
  }
  SECTION("unsubscribe: commits inside the revoke go out; once the leave is next they fail") {
    h.m.unsubscribe(h.now);
    auto a = h.take();
    auto revoke = expect_listener(a, listener_kind::revoked, t01);
    CHECK(commit_now(h) == "sent");
    a = h.done(revoke);
    CHECK(expect<send_consumer_group_heartbeat>(a).leave);
    REQUIRE(h.m.state() == st::leaving);
    CHECK(h.m.standing().left);
    CHECK(commit_now(h) == commit_failed);
  }
  SECTION("fenced while unsubscribe's revoke runs: commits inside it fail") {
    h.m.unsubscribe(h.now);
    auto a = h.take();
    auto revoke = expect_listener(a, listener_kind::revoked, t01);
    a = h.next_heartbeat(err(kafka_errc::unknown_member_id));
    REQUIRE(h.m.state() == st::prepare_leaving);
    CHECK(commit_now(h) == commit_failed);
    a = h.done(revoke);
    expect<left_group>(a);
    REQUIRE(h.m.state() == st::unsubscribed);
    CHECK_FALSE(h.m.standing().gone());
  }
}

TEST_CASE("kip848: a member joining for the first time is rebalancing, even when a join is refused",
          "[kip848][committer]") {
  harness h;
  h.start();
  CHECK(commit_now(h) == rebalancing);
  expect_empty(h.answer(err(kafka_errc::unknown_member_id)));  // nothing owned, nothing lost
  REQUIRE(h.m.state() == st::joining);
  CHECK_FALSE(h.m.standing().gone());
  CHECK(commit_now(h) == rebalancing);
}

// ================================================================================================
// An error at every step (the classic core's script, test_member_scripted.cpp, for KIP-848)
// ================================================================================================

namespace {

enum class kfault {
  lookup_failed,  // FindCoordinator fails
  request_failed,  // the heartbeat's connection fails
  not_coordinator,
  coordinator_not_available,
  load_in_progress,
  unknown_member_id,  // the coordinator forgot the member: it joins again with epoch 0
  fenced_member_epoch,
  names_unknown,  // metadata does not know the assigned topic ids yet
};
const kfault all_kfaults[] = {kfault::lookup_failed,       kfault::request_failed,  kfault::not_coordinator,
                              kfault::coordinator_not_available, kfault::load_in_progress,
                              kfault::unknown_member_id,   kfault::fenced_member_epoch, kfault::names_unknown};

const char* name_of(kfault f) {
  switch (f) {
    case kfault::lookup_failed:
      return "lookup_failed";
    case kfault::request_failed:
      return "request_failed";
    case kfault::not_coordinator:
      return "NOT_COORDINATOR";
    case kfault::coordinator_not_available:
      return "COORDINATOR_NOT_AVAILABLE";
    case kfault::load_in_progress:
      return "COORDINATOR_LOAD_IN_PROGRESS";
    case kfault::unknown_member_id:
      return "UNKNOWN_MEMBER_ID";
    case kfault::fenced_member_epoch:
      return "FENCED_MEMBER_EPOCH";
    case kfault::names_unknown:
      return "names_unknown";
  }
  return "?";
}

// Plays a KIP-848 coordinator that assigns `target` to this member: every heartbeat, lookup and
// metadata request is answered correctly except the `fail_at`-th step, which fails with `kind`.
// Runs the member until it is stable with `target` acknowledged and one more heartbeat answered.
// Checks the listeners' timeline as it goes: a partition is assigned only if the user does not own
// it, revoked only if the user owns it, lost only all at once.
struct scripted_848_coordinator {
  explicit scripted_848_coordinator(harness& hh) : h(hh) {}

  harness& h;
  id_assignment target{{T, {0, 1}}, {U, {0}}};
  int fail_at = -1;
  kfault kind = kfault::request_failed;

  int step = 0;
  bool injected = false;
  std::int32_t epoch = 0;         // the member's epoch as the coordinator knows it (0: not a member)
  std::int32_t server_epoch = 0;  // the group's epoch, bumped at every join
  bool acked = false;             // the member reported owning `target` at `epoch`
  int heartbeats_since_ack = 0;
  partition_set user_owned;

  bool fail_now(bool eligible = true) {
    ++step;
    if (!eligible || step != fail_at) return false;
    injected = true;
    return true;
  }

  static partition_set named(const id_assignment& a) {
    partition_set out;
    for (const auto& [id, parts] : a)
      for (auto p : parts) out.insert({id == T ? "t" : id == U ? "u" : "v", p});
    return out;
  }

  hb_response heartbeat(const hb_request& r) {
    if (r.member_epoch == join_epoch) {
      epoch = ++server_epoch;
      acked = false;
      return ok(epoch, target);
    }
    if (r.member_epoch != epoch) return err(kafka_errc::fenced_member_epoch);  // a stale epoch
    if (r.topic_partitions) {
      id_assignment reported;
      for (const auto& tp : *r.topic_partitions) reported[tp.topic_id].insert(tp.partitions.begin(), tp.partitions.end());
      if (reported == target) {
        if (acked) ++heartbeats_since_ack;
        acked = true;
        return ok(epoch);
      }
    } else if (acked) {
      ++heartbeats_since_ack;
      return ok(epoch);
    }
    return ok(epoch, target);
  }

  actions handle(kip848::action& x) {
    INFO("step " << step << ": " << describe(x));
    if (std::holds_alternative<find_coordinator>(x)) {
      if (fail_now(kind == kfault::lookup_failed)) {
        h.m.coordinator_failed(h.now, make_error_code(client_errc::coordinator_not_found));
        return h.take();
      }
      return h.found();
    }
    if (auto* hb = std::get_if<send_consumer_group_heartbeat>(&x)) {
      REQUIRE_FALSE(hb->leave);
      const bool heartbeat_fault = kind != kfault::lookup_failed && kind != kfault::names_unknown;
      if (fail_now(heartbeat_fault)) {
        switch (kind) {
          case kfault::request_failed:
            h.m.request_failed(h.now, make_error_code(client_errc::connection_closed));
            return h.take();
          case kfault::not_coordinator:
            return h.answer(err(kafka_errc::not_coordinator));
          case kfault::coordinator_not_available:
            return h.answer(err(kafka_errc::coordinator_not_available));
          case kfault::load_in_progress:
            return h.answer(err(kafka_errc::coordinator_load_in_progress));
          case kfault::unknown_member_id:
            epoch = 0;  // forgotten: only a join (epoch 0) is accepted now
            return h.answer(err(kafka_errc::unknown_member_id));
          case kfault::fenced_member_epoch:
            epoch = 0;
            return h.answer(err(kafka_errc::fenced_member_epoch));
          default:
            break;
        }
      }
      return h.answer(heartbeat(hb->request));
    }
    if (auto* need = std::get_if<need_topic_names>(&x)) {
      if (fail_now(kind == kfault::names_unknown)) return h.names({});
      std::vector<std::pair<topic_id, std::string>> names;
      for (const auto& id : need->ids) names.emplace_back(id, id == T ? "t" : id == U ? "u" : "v");
      return h.names(std::move(names));
    }
    if (auto* l = std::get_if<run_listener>(&x)) {
      const partition_set parts(l->partitions.begin(), l->partitions.end());
      INFO("user owns " << describe(user_owned));
      switch (l->kind) {
        case listener_kind::assigned:
          for (const auto& tp : parts) CHECK(user_owned.count(tp) == 0);
          user_owned.insert(parts.begin(), parts.end());
          break;
        case listener_kind::revoked:
          for (const auto& tp : parts) CHECK(user_owned.count(tp) == 1);
          for (const auto& tp : parts) user_owned.erase(tp);
          break;
        case listener_kind::lost:
          CHECK(parts == user_owned);
          user_owned.clear();
          break;
      }
      return h.done(*l);
    }
    if (auto* e = std::get_if<report_error>(&x)) {
      INFO(e->message);
      CHECK_FALSE(e->fatal);
    }
    return {};
  }

  // Runs until stable and acknowledged; false if that never happens.
  bool run() {
    h.m.subscribe(h.now, {"t", "u"});
    actions pending = h.take();
    for (int guard = 0; guard < 500; ++guard) {
      if (pending.empty()) {
        if (h.m.state() == st::stable && acked && heartbeats_since_ack >= 1 && h.m.owned_ids() == target)
          return true;
        pending = h.to_deadline();
        continue;
      }
      auto a = pending.front();
      pending.erase(pending.begin());
      auto more = handle(a);
      pending.insert(pending.end(), more.begin(), more.end());
    }
    return false;
  }
};

}  // namespace

TEST_CASE("kip848: an error at every step of joining and reconciling, then stable with the target",
          "[kip848][scripted]") {
  // The number of steps of a run without faults bounds where a fault can go.
  int clean_steps = 0;
  {
    harness h;
    scripted_848_coordinator c(h);
    REQUIRE(c.run());
    clean_steps = c.step;
    CHECK(c.user_owned == scripted_848_coordinator::named(c.target));
  }
  REQUIRE(clean_steps > 4);
  for (const kfault f : all_kfaults) {
    int injected = 0;
    for (int at = 1; at <= clean_steps; ++at) {
      INFO("fault " << name_of(f) << " at step " << at);
      harness h;
      scripted_848_coordinator c(h);
      c.kind = f;
      c.fail_at = at;
      REQUIRE(c.run());
      injected += c.injected ? 1 : 0;
      // The member ends owning exactly the target, and the application heard of exactly that.
      CHECK(c.user_owned == scripted_848_coordinator::named(c.target));
      CHECK(h.m.invalid_transitions() == 0);
      CHECK(h.m.state() == st::stable);
    }
    INFO("fault " << name_of(f));
    CHECK(injected > 0);  // every kind of fault really happened at some step
  }
}

// ---- found by the group simulation (kgroup-sim --group --protocol consumer) ----------------------

TEST_CASE(
    "kip848: partitions whose assign callback has not run are reported owned, so a revoke of them is never "
    "acknowledged before it ran",
    "[kip848][sim_finding]") {
  // Seeds 297 and 2111 (G1): the coordinator took t-1 back while on_partitions_assigned(t-1) was
  // still waiting for the application; the next heartbeat left t-1 out of what it owns, the
  // coordinator read that as the revocation acknowledged and gave t-1 to another member, while
  // this one still owned it (and its application was about to be told it has it).
  harness h;
  h.make_stable({{T, {0}}});
  auto a = h.next_heartbeat(ok(2, id_assignment{{T, {0, 1}}}));
  (void)expect_listener(a, listener_kind::assigned, {{"t", 1}});
  // The heartbeats while the callback waits report t-1 as owned ...
  a = h.to_deadline();
  auto hb = expect<send_consumer_group_heartbeat>(a);
  REQUIRE(hb.request.topic_partitions.has_value());
  CHECK(parts_of(hb.request) == tps{{T, {0, 1}}});
  // ... also once the coordinator has moved t-1 on (the answer's target lacks it), and with every
  // field after an error.
  a = h.answer(ok(2, id_assignment{{T, {0}}}));
  a = h.to_deadline();
  expect<send_consumer_group_heartbeat>(a);
  a = h.answer(err(kafka_errc::not_coordinator));
  expect<find_coordinator>(a);
  a = h.found();
  hb = expect<send_consumer_group_heartbeat>(a);
  REQUIRE(hb.request.topic_partitions.has_value());
  CHECK(parts_of(hb.request) == tps{{T, {0, 1}}});
  CHECK(h.m.owned() == t01);
}

TEST_CASE("kip848: the answer to a heartbeat sent before a poll timeout is ignored once the member rejoins",
          "[kip848][sim_finding]") {
  // Seed 2464 (G4): the heartbeat in flight when max.poll.interval.ms expired was answered only
  // after the next poll() had run the lost callback and begun the rejoin; the core took that
  // answer (epoch 7, t-0) for the new membership, assigned t-0, left with the old epoch, and then
  // sent a join that owned t-0, which the coordinator refuses as invalid (a fatal error).
  harness h;
  h.make_stable({{T, {0}}}, 7);
  h.poll();
  // Heartbeats answered until the last one before the poll timer expires stays in flight.
  actions a;
  bool in_flight = false;
  for (int i = 0; i < 100 && h.m.state() == st::stable; ++i) {
    a = h.to_deadline();
    if (count_of<send_consumer_group_heartbeat>(a) == 1 && h.m.state() == st::stable) {
      expect<send_consumer_group_heartbeat>(a);
      expect_empty(a);
      const auto d = h.m.next_deadline();
      if (d && *d - h.now <= 2000ms) {
        in_flight = true;  // the poll timer expires before this answer
        continue;
      }
      expect_empty(h.answer(ok(7)));
    }
  }
  REQUIRE(in_flight);
  REQUIRE(h.m.state() == st::poll_timed_out);
  (void)expect<report_error>(a);
  // The leave waits for the heartbeat in flight; poll() runs the lost callback and rejoins.
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, {{"t", 0}});
  a = h.done(lost);
  // The old heartbeat's answer comes now: it belongs to the membership that is gone.
  a = h.answer(ok(7, id_assignment{{T, {0}}}));
  CHECK(count_of<run_listener>(a) == 0);
  CHECK(h.m.owned().empty());
  // The leave goes out, then the join, which owns nothing.
  auto leave = expect<send_consumer_group_heartbeat>(a);
  CHECK(leave.leave);
  a = h.answer(ok(-1));
  auto join = expect<send_consumer_group_heartbeat>(a);
  CHECK(join.request.member_epoch == 0);
  REQUIRE(join.request.topic_partitions.has_value());
  CHECK(join.request.topic_partitions->empty());
}

TEST_CASE("kip848: close(CloseOptions) per KIP-1092: the leave heartbeat's epoch, or none",
          "[kip848][close_options]") {
  const bool is_static = GENERATE(false, true);
  const auto op = GENERATE(group::close_membership::default_operation, group::close_membership::leave_group,
                           group::close_membership::remain_in_group);
  CAPTURE(is_static, static_cast<int>(op));
  harness h(is_static ? options("inst-1") : options());
  h.make_stable({{T, {0, 1}}}, 4);
  h.m.close(h.now, op);
  auto a = h.take();
  auto revoke = expect_listener(a, listener_kind::revoked, t01);
  expect_empty(a);
  a = h.done(revoke);
  CHECK(expect<assignment_changed>(a).owned.empty());
  // Java 4.1: LEAVE_GROUP leaves with -1 (a static member too); DEFAULT with -1, or -2 for a
  // static member (it remains until its session times out); REMAIN_IN_GROUP sends nothing for a
  // dynamic member and -2 for a static one.
  if (op == group::close_membership::remain_in_group && !is_static) {
    expect<left_group>(a);
    expect_empty(a);
    REQUIRE(h.m.state() == st::closed);
    return;
  }
  auto leave = expect<send_consumer_group_heartbeat>(a);
  expect_empty(a);
  CHECK(leave.leave);
  const std::int32_t epoch = op == group::close_membership::leave_group || !is_static ? -1 : -2;
  CHECK(leave.request.member_epoch == epoch);
  CHECK(leave.request.instance_id == (is_static ? std::optional<std::string>("inst-1") : std::nullopt));
  a = h.answer(ok(epoch));
  expect<left_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == st::closed);
}
