// The membership core (src/group/member.*), driven step by step with a fake clock: every event
// goes in by hand and the test asserts on the actions that come out. The harness below plays the
// driver; a small scripted coordinator plays the broker for the error-at-every-step loops.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "assign/consumer_protocol.hpp"
#include "group/member.hpp"
#include "kgroup/assignor.hpp"
#include "kgroup/error.hpp"
#include "kgroup/log.hpp"

using namespace kgroup;
using namespace kgroup::group;
using namespace std::chrono_literals;

namespace {

using actions = std::vector<action>;

// ---- partitions and the assignment encoding ---------------------------------------------------

partition_set set_of(const std::vector<TopicPartition>& v) {
  return {v.begin(), v.end()};
}

std::string describe(const partition_set& s) {
  std::string out = "{";
  for (const auto& tp : s) {
    if (out.size() > 1) out += ",";
    out += tp.topic + std::to_string(tp.partition);
  }
  return out + "}";
}

// The real consumer-protocol Assignment (v1), so the decoder the core gets is the one the driver uses.
protocol::bytes encode_parts(const partition_set& parts) {
  MemberAssignment a;
  for (const auto& tp : parts) {
    if (a.partitions.empty() || a.partitions.back().topic != tp.topic) a.partitions.push_back({tp.topic, {}});
    a.partitions.back().partitions.push_back(tp.partition);
  }
  protocol::bytes out;
  const auto ec = assign::encode_assignment(a, 1, out);
  REQUIRE_FALSE(ec);
  return out;
}

std::error_code decode_parts(std::span<const std::uint8_t> in, partition_set& out) {
  MemberAssignment a;
  if (auto ec = assign::decode_assignment(in, a)) return ec;
  for (const auto& t : a.partitions) {
    for (auto p : t.partitions) out.insert({t.topic, p});
  }
  return {};
}

// ---- actions ----------------------------------------------------------------------------------

std::string describe(const action& a) {
  std::ostringstream o;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, find_coordinator>) {
          o << "find_coordinator";
        } else if constexpr (std::is_same_v<T, send_join_group>) {
          o << "send_join_group(member='" << x.request.member_id << "', reason='"
            << x.request.reason.value_or("") << "')";
        } else if constexpr (std::is_same_v<T, send_sync_group>) {
          o << "send_sync_group(gen=" << x.request.generation_id << ")";
        } else if constexpr (std::is_same_v<T, send_heartbeat>) {
          o << "send_heartbeat(gen=" << x.request.generation_id << ")";
        } else if constexpr (std::is_same_v<T, send_leave_group>) {
          o << "send_leave_group";
        } else if constexpr (std::is_same_v<T, compute_assignment>) {
          o << "compute_assignment(gen=" << x.generation << ")";
        } else if constexpr (std::is_same_v<T, run_listener>) {
          o << "run_listener(" << to_string(x.kind) << ", " << describe(set_of(x.partitions))
            << ", seq=" << x.seq << ")";
        } else if constexpr (std::is_same_v<T, assignment_changed>) {
          o << "assignment_changed(" << describe(x.owned) << ")";
        } else if constexpr (std::is_same_v<T, report_error>) {
          o << "report_error(" << x.code.message() << ", fatal=" << x.fatal << ", '" << x.message << "')";
        } else if constexpr (std::is_same_v<T, left_group>) {
          o << "left_group";
        } else if constexpr (std::is_same_v<T, cancel_listener>) {
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

template <class T>
std::size_t count_of(const actions& as) {
  return static_cast<std::size_t>(
      std::count_if(as.begin(), as.end(), [](const action& a) { return std::holds_alternative<T>(a); }));
}

// Removes every assignment_changed and returns the last one's set (a revoke followed by an
// assignment in one batch announces both).
partition_set last_owned(actions& as) {
  std::optional<partition_set> last;
  for (auto it = as.begin(); it != as.end();) {
    if (auto* c = std::get_if<assignment_changed>(&*it)) {
      last = c->owned;
      it = as.erase(it);
    } else {
      ++it;
    }
  }
  INFO("actions: " << describe(as));
  REQUIRE(last.has_value());
  return *last;
}

// Exactly one action of type T: removes it from `as` and returns it.
template <class T>
T expect(actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(count_of<T>(as) == 1);
  auto it = std::find_if(as.begin(), as.end(), [](const action& a) { return std::holds_alternative<T>(a); });
  T out = std::get<T>(std::move(*it));
  as.erase(it);
  return out;
}

template <class T>
void expect_none(const actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(count_of<T>(as) == 0);
}

void expect_empty(const actions& as) {
  INFO("actions: " << describe(as));
  REQUIRE(as.empty());
}

// The listener of kind `k` (exactly one) with exactly these partitions.
run_listener expect_listener(actions& as, listener_kind k, const partition_set& parts) {
  auto l = expect<run_listener>(as);
  INFO("listener " << to_string(l.kind) << " " << describe(set_of(l.partitions)));
  REQUIRE(l.kind == k);
  REQUIRE(set_of(l.partitions) == parts);
  REQUIRE(l.partitions.size() == parts.size());
  return l;
}

// ---- responses --------------------------------------------------------------------------------

protocol::join_group_response join_ok(const std::string& me, std::int32_t gen, const std::string& leader,
                                      const std::string& proto, std::vector<std::string> members = {}) {
  protocol::join_group_response r;
  r.error_code = 0;
  r.generation_id = gen;
  r.protocol_type = "consumer";
  r.protocol_name = proto;
  r.leader = leader;
  r.member_id = me;
  for (auto& id : members) r.members.push_back({id, std::nullopt, {}});
  return r;
}

protocol::join_group_response join_err(kafka_errc e, const std::string& me = "") {
  protocol::join_group_response r;
  r.error_code = static_cast<std::int16_t>(e);
  r.member_id = me;
  return r;
}

protocol::sync_group_response sync_ok(const partition_set& parts,
                                      std::optional<std::string> proto = std::nullopt) {
  protocol::sync_group_response r;
  r.error_code = 0;
  r.protocol_type = "consumer";
  r.protocol_name = std::move(proto);
  r.assignment = encode_parts(parts);
  return r;
}

protocol::sync_group_response sync_raw(protocol::bytes bytes) {
  protocol::sync_group_response r;
  r.assignment = std::move(bytes);
  return r;
}

protocol::sync_group_response sync_err(kafka_errc e) {
  protocol::sync_group_response r;
  r.error_code = static_cast<std::int16_t>(e);
  return r;
}

std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

// ---- the harness ------------------------------------------------------------------------------

member_options make_options(RebalanceProtocol proto = RebalanceProtocol::eager,
                            std::optional<std::string> instance = std::nullopt) {
  member_options o;
  o.group_id = "g";
  o.group_instance_id = std::move(instance);
  o.session_timeout = 10000ms;
  o.heartbeat_interval = 3000ms;
  o.max_poll_interval = 60000ms;
  o.retry_backoff = 100ms;
  o.retry_backoff_max = 1000ms;
  o.protocol = proto;
  if (proto == RebalanceProtocol::cooperative) {
    o.assignors = {make_cooperative_sticky_assignor()};
  } else {
    o.assignors = {make_range_assignor(), make_roundrobin_assignor()};
  }
  return o;
}

struct harness {
  // Far from the epoch: the core uses time_point{} as "never".
  time_point now = time_point{} + 1000s;
  std::shared_ptr<std::vector<member_snapshot>> snapshots = std::make_shared<std::vector<member_snapshot>>();
  std::string proto;  // the protocol the coordinator picks (the first assignor)
  member m;

  // The core logs every transition; quiet unless KGROUP_TEST_LOG is set.
  std::shared_ptr<LogSink> saved_sink = default_log_sink();

  explicit harness(member_options o = make_options())
      : proto(o.assignors.front()->name()), m(o, builder(o, snapshots), decode_parts) {
    if (std::getenv("KGROUP_TEST_LOG") == nullptr) set_default_log_sink(make_stderr_log_sink(LogLevel::off));
  }
  harness(const harness&) = delete;
  harness& operator=(const harness&) = delete;

  ~harness() {
    set_default_log_sink(saved_sink);
    // Every test, whatever it does, must keep to the documented transitions.
    if (std::uncaught_exceptions() == 0) CHECK(m.invalid_transitions() == 0);
  }

  static protocol_builder builder(const member_options& o,
                                  std::shared_ptr<std::vector<member_snapshot>> snaps) {
    std::vector<std::string> names;
    for (const auto& a : o.assignors) names.push_back(a->name());
    return [names, snaps](const member_snapshot& s) {
      snaps->push_back(s);
      MemberSubscription sub;
      sub.topics = s.topics;
      for (const auto& tp : s.owned) {
        if (sub.owned_partitions.empty() || sub.owned_partitions.back().topic != tp.topic) {
          sub.owned_partitions.push_back({tp.topic, {}});
        }
        sub.owned_partitions.back().partitions.push_back(tp.partition);
      }
      sub.generation = s.generation;
      protocol::bytes meta;
      (void)assign::encode_subscription(sub, 2, meta);
      std::vector<protocol::join_group_request::join_group_request_protocol> out;
      for (const auto& n : names) out.push_back({n, meta});
      return out;
    };
  }

  actions take() { return m.take_actions(); }

  // After a tick the core must not ask to be woken in the past (the driver would spin).
  void no_spin() {
    const auto d = m.next_deadline();
    if (d) {
      INFO("next_deadline is " << std::chrono::duration_cast<ms>(*d - now).count() << " ms from now");
      REQUIRE(*d > now);
    }
  }

  actions subscribe(std::vector<std::string> topics = {"t"}) {
    m.subscribe(now, std::move(topics));
    return take();
  }
  actions found(std::int32_t node = 1) {
    m.coordinator_found(now, node);
    return take();
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
  // Moves the clock to the next deadline and ticks.
  actions to_deadline() {
    const auto d = m.next_deadline();
    REQUIRE(d.has_value());
    REQUIRE(*d >= now);
    now = *d;
    return tick();
  }
  ms until_deadline() const {
    const auto d = m.next_deadline();
    REQUIRE(d.has_value());
    return std::chrono::duration_cast<ms>(*d - now);
  }
  actions join(const protocol::join_group_response& r) {
    m.join_group_done(now, r);
    return take();
  }
  actions sync(const protocol::sync_group_response& r) {
    m.sync_group_done(now, r);
    return take();
  }
  actions heartbeat(kafka_errc e = kafka_errc::none) {
    protocol::heartbeat_response r;
    r.error_code = code(e);
    m.heartbeat_done(now, r);
    return take();
  }
  actions leave(kafka_errc e = kafka_errc::none) {
    protocol::leave_group_response r;
    r.error_code = code(e);
    m.leave_group_done(now, r);
    return take();
  }
  actions failed() {
    m.request_failed(now, make_error_code(client_errc::connection_closed));
    return take();
  }
  actions done(const run_listener& l) {
    m.listener_done(now, l.seq);
    return take();
  }
  // One whole poll() at `now`: called and returned at once (the application then works).
  actions poll() {
    m.poll_called(now);
    m.poll_returned(now);
    return take();
  }
  actions computed(std::vector<protocol::sync_group_request::sync_group_request_assignment> as) {
    m.assignment_computed(now, m.generation(), {}, std::move(as));
    return take();
  }

  // subscribe -> FindCoordinator -> JoinGroup (in flight). Returns the JoinGroup.
  send_join_group start(std::vector<std::string> topics = {"t"}) {
    auto a = subscribe(std::move(topics));
    expect<find_coordinator>(a);
    expect_empty(a);
    REQUIRE(m.state() == member_state::joining);
    a = found();
    auto j = expect<send_join_group>(a);
    expect_empty(a);
    return j;
  }

  // A fresh member becomes a follower of generation `gen` that owns `parts`; ends stable with no
  // request in flight and the first heartbeat due heartbeat.interval.ms from now.
  void make_stable(const partition_set& parts, std::vector<std::string> topics = {"t"},
                   const std::string& id = "m1", std::int32_t gen = 1) {
    start(std::move(topics));
    auto a = join(join_ok(id, gen, "leader", proto));
    expect<send_sync_group>(a);
    expect_empty(a);
    a = sync(sync_ok(parts));
    if (!parts.empty()) REQUIRE(expect<assignment_changed>(a).owned == parts);
    auto l = expect_listener(a, listener_kind::assigned, parts);
    expect_empty(a);
    REQUIRE(m.state() == member_state::completing);
    a = done(l);
    expect_empty(a);
    REQUIRE(m.state() == member_state::stable);
    REQUIRE(m.owned() == parts);
    REQUIRE(m.generation() == gen);
    REQUIRE(m.member_id() == id);
  }

  // From stable: the next heartbeat goes out when due and is answered with `e`.
  actions next_heartbeat(kafka_errc e = kafka_errc::none) {
    auto a = to_deadline();
    expect<send_heartbeat>(a);
    expect_empty(a);
    return heartbeat(e);
  }

  // Runs the clock to `until`, ticking at each deadline, answering heartbeats OK, calling poll()
  // on every wake-up if `polling`. Returns everything else that came out.
  actions run_until(time_point until, bool polling) {
    actions rest;
    for (int i = 0; i < 10000; ++i) {
      const auto d = m.next_deadline();
      if (!d || *d > until) break;
      now = *d;
      if (polling) {
        m.poll_called(now);
        m.poll_returned(now);
      }
      auto a = tick();
      for (auto& x : a) {
        if (std::holds_alternative<send_heartbeat>(x)) {
          auto r = heartbeat();
          rest.insert(rest.end(), r.begin(), r.end());
        } else {
          rest.push_back(std::move(x));
        }
      }
    }
    now = std::max(now, until);
    return rest;
  }
};

const partition_set t01{{"t", 0}, {"t", 1}};

// Answers coordinator lookups and lets time pass until the member sends a JoinGroup.
send_join_group drive_to_join(harness& h, actions a) {
  for (int i = 0; i < 10; ++i) {
    if (count_of<send_join_group>(a) == 1) break;
    if (count_of<find_coordinator>(a) == 1) {
      expect<find_coordinator>(a);
      expect_empty(a);
      a = h.found();
    } else {
      expect_empty(a);
      a = h.to_deadline();
    }
  }
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  return j;
}
const partition_set t012{{"t", 0}, {"t", 1}, {"t", 2}};

}  // namespace

// ================================================================================================
// Happy paths
// ================================================================================================

TEST_CASE("member: eager follower joins with MEMBER_ID_REQUIRED, a reason, then SyncGroup", "[member]") {
  harness h;
  REQUIRE(h.m.state() == member_state::unsubscribed);
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
  REQUIRE(h.m.state() == member_state::syncing);
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
  REQUIRE(h.m.state() == member_state::completing);
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::stable);
  CHECK(h.m.owned() == t01);
  CHECK(h.m.generation() == 4);
  CHECK(h.m.protocol_name() == "range");
}

TEST_CASE("member: eager leader computes the assignment and distributes it in SyncGroup", "[member]") {
  harness h;
  h.start();
  auto a = h.join(join_ok("m1", 1, "m1", "roundrobin", {"m1", "m2"}));
  REQUIRE(h.m.state() == member_state::assigning);
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
  REQUIRE(h.m.state() == member_state::assigning);
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
  REQUIRE(h.m.state() == member_state::assigning);
  REQUIRE(h.m.generation() == 1);
  // This heartbeat is still in flight when the assignment is ready: SyncGroup does not wait for it,
  // and its late answer changes nothing.

  std::vector<protocol::sync_group_request::sync_group_request_assignment> out{
      {"m1", encode_parts({{"t", 0}})}, {"m2", encode_parts({{"t", 1}})}};
  // A result computed for another generation is stale (issue 13, item 9): dropped.
  h.m.assignment_computed(h.now, 0, {}, out);
  expect_empty(h.take());
  REQUIRE(h.m.state() == member_state::assigning);
  a = h.computed(out);
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  CHECK(s.request.generation_id == 1);
  CHECK(s.request.member_id == "m1");
  CHECK(s.request.protocol_name == "roundrobin");
  CHECK(s.request.assignments == out);
  REQUIRE(h.m.state() == member_state::syncing);

  // A second assignment_computed (stale) sends nothing.
  a = h.computed(out);
  expect_empty(a);
  a = h.heartbeat(kafka_errc::unknown_member_id);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::syncing);

  a = h.sync(sync_ok({{"t", 0}}));
  expect<assignment_changed>(a);
  auto l = expect_listener(a, listener_kind::assigned, {{"t", 0}});
  a = h.done(l);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::joining);
  REQUIRE(h.m.generation() == -1);
  // The assignor's result for generation 1 arrives after the removal: dropped.
  h.m.assignment_computed(h.now, 1, {}, {{"m1", encode_parts({{"t", 0}})}, {"m2", encode_parts({{"t", 1}})}});
  expect_empty(h.take());
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::stable);
  a = h.to_deadline();
  expect<send_heartbeat>(a);  // no third round
  expect_empty(a);
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
  REQUIRE(h.m.state() == member_state::preparing);
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
  REQUIRE(h.m.state() == member_state::preparing);

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
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::joining);
  // JoinGroup may be held for the whole rebalance timeout; nothing to do meanwhile (not even a
  // session timeout: the member is not heartbeating).
  REQUIRE(h.m.next_deadline() == h.m.last_poll() + 48000ms);
  a = h.advance(20000ms);
  expect_empty(a);
  a = h.join(join_ok("m1", 2, "leader", "range"));
  expect<send_sync_group>(a);
  a = h.advance(20000ms);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::syncing);
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

namespace {

const kafka_errc fatal_codes[] = {kafka_errc::fenced_instance_id, kafka_errc::group_authorization_failed,
                                  kafka_errc::inconsistent_group_protocol,
                                  kafka_errc::group_max_size_reached};

// A fatal error: reported once with fatal=true and a message naming the group, then nothing.
void expect_fatal(harness& h, actions a, kafka_errc e) {
  auto r = expect<report_error>(a);
  expect_empty(a);
  CHECK(r.fatal);
  CHECK(r.code == make_error_code(e));
  INFO(r.message);
  CHECK(r.message.find("'g'") != std::string::npos);
  if (e == kafka_errc::group_max_size_reached) CHECK(r.message.find("group.max.size") != std::string::npos);
  if (e == kafka_errc::fenced_instance_id) CHECK(r.message.find("group.instance.id") != std::string::npos);
  REQUIRE(h.m.state() == member_state::fatal);
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(60000ms));
  expect_empty(h.poll());
  h.m.enforce_rebalance(h.now, "x");
  expect_empty(h.take());
  REQUIRE(h.m.state() == member_state::fatal);
}

// Closing a member in any state ends in `closed` with exactly one left_group; listeners are
// answered and a LeaveGroup (if any) is answered with `leave_error`.
void close_and_finish(harness& h, bool expect_leave_request, kafka_errc leave_error = kafka_errc::none,
                      actions carry = {}) {
  h.m.close(h.now);
  auto a = std::move(carry);
  for (auto& x : h.take()) a.push_back(std::move(x));
  int left = 0, leaves = 0;
  for (int i = 0; i < 20 && !a.empty(); ++i) {
    actions next;
    for (auto& x : a) {
      INFO("action " << describe(x));
      if (auto* l = std::get_if<run_listener>(&x)) {
        CHECK(l->kind != listener_kind::assigned);
        auto r = h.done(*l);
        next.insert(next.end(), r.begin(), r.end());
      } else if (std::holds_alternative<send_leave_group>(x)) {
        ++leaves;
        auto r = h.leave(leave_error);
        next.insert(next.end(), r.begin(), r.end());
      } else if (std::holds_alternative<left_group>(x)) {
        ++left;
      } else if (std::holds_alternative<send_heartbeat>(x)) {
        // Heartbeats go on while the revoke of close() runs.
        auto r = h.heartbeat();
        next.insert(next.end(), r.begin(), r.end());
      } else {
        // Nothing else may go out while closing (no JoinGroup or SyncGroup); a callback still
        // queued may be cancelled (close()'s own revoke replaces it).
        REQUIRE((std::holds_alternative<assignment_changed>(x) || std::holds_alternative<report_error>(x) ||
                 std::holds_alternative<cancel_listener>(x)));
      }
    }
    a = std::move(next);
  }
  CHECK(left == 1);
  CHECK(leaves == (expect_leave_request ? 1 : 0));
  REQUIRE(h.m.state() == member_state::closed);
  CHECK(h.m.owned().empty());
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(100000ms));
  h.m.close(h.now);
  expect_empty(h.take());
}

}  // namespace

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
    REQUIRE(h.m.state() == member_state::fatal);
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
  REQUIRE(h.m.state() == member_state::syncing);
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
    REQUIRE(h.m.state() == member_state::joining);
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
    REQUIRE(h.m.state() == member_state::joining);
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
    REQUIRE(h.m.state() == member_state::stable);
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
    REQUIRE(h.m.state() == member_state::stable);
  }
  SECTION("UNKNOWN_MEMBER_ID: lost, member id reset, rejoin") {
    a = h.heartbeat(kafka_errc::unknown_member_id);
    auto l = expect_listener(a, listener_kind::lost, t01);
    expect_empty(a);
    REQUIRE(h.m.state() == member_state::preparing);
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
    REQUIRE(h.m.state() == member_state::closed);
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
    REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::leaving);
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
  REQUIRE(h.m.state() == member_state::unsubscribed);
  CHECK(h.m.member_id().empty());
  CHECK(h.m.generation() == -1);
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(100000ms));
}

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
    for (int i = 0; i < 1000 && h.m.owned() == t01 && h.m.state() == member_state::stable; ++i) {
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
    REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::stable);
  REQUIRE(h.m.owned() == t01);
  REQUIRE(h.m.generation() == 1);
  // The next deadline is a heartbeat, never the poll timer, while inside poll().
  REQUIRE(h.m.next_deadline() <= h.now + 3000ms);
  // poll() returns: from now on the application has max.poll.interval.ms until the next one.
  h.m.poll_returned(h.now);
  const auto returned = h.now;
  expect_empty(h.take());
  expect_empty(h.run_until(returned + 59999ms, false));
  REQUIRE(h.m.state() == member_state::stable);
  auto a = h.to_deadline();
  CHECK(h.now == returned + 60000ms);
  expect<send_leave_group>(a);
  expect<report_error>(a);
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::stable);
  REQUIRE(h.m.generation() == 2);
  expect_empty(h.run_until(h.now + 120000ms, false));
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
}

TEST_CASE("member: poll timeout of a static member sends no LeaveGroup and keeps its id", "[member]") {
  harness h(make_options(RebalanceProtocol::cooperative, "i1"));
  h.make_stable(t01);
  const auto t0 = h.m.last_poll();
  expect_empty(h.run_until(t0 + 59999ms, false));
  auto a = h.to_deadline();
  expect<report_error>(a);
  expect_empty(a);  // no LeaveGroup: the instance id keeps the membership until the session ends
  REQUIRE(h.m.state() == member_state::poll_timed_out);
  expect_empty(h.advance(30000ms));  // it just stops heartbeating
  a = h.poll();
  auto lost = expect_listener(a, listener_kind::lost, t01);
  a = h.done(lost);
  expect<assignment_changed>(a);
  auto j = expect<send_join_group>(a);
  CHECK(j.request.member_id == "m1");
  CHECK(j.request.group_instance_id == "i1");
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
  h.leave();
  a = h.done(r);  // the revoke returns: t2 is gone, but nothing is assigned to a member that left
  REQUIRE(expect<assignment_changed>(a).owned == t01);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::unsubscribed);
  CHECK(h.m.topics().empty());

  // The coordinator is still known: JoinGroup at once, as a new member.
  a = h.subscribe({"t"});
  auto j = expect<send_join_group>(a);
  expect_empty(a);
  CHECK(j.request.member_id.empty());
  a = h.join(join_ok("m2", 7, "leader", "range"));
  expect<send_sync_group>(a);
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
  REQUIRE(h.m.state() == member_state::closed);
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
  REQUIRE(h.m.state() == member_state::closed);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::leaving);
  a = h.done(r);
  expect<assignment_changed>(a);
  expect<send_leave_group>(a);
  a = h.leave(kafka_errc::group_authorization_failed);
  expect<left_group>(a);
  REQUIRE(h.m.state() == member_state::closed);
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
    REQUIRE(h.m.state() == member_state::joining);
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
    REQUIRE(h.m.state() == member_state::assigning);
    leave = !is_static;
  }
  SECTION("syncing") {
    h.start();
    h.join(join_ok("m1", 1, "leader", h.proto));
    REQUIRE(h.m.state() == member_state::syncing);
    leave = !is_static;
  }
  SECTION("completing, assigned listener pending") {
    h.start();
    h.join(join_ok("m1", 1, "leader", h.proto));
    h.sync(sync_ok(t01));
    REQUIRE(h.m.state() == member_state::completing);
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
    REQUIRE(h.m.state() == member_state::preparing);
    leave = !is_static;
  }
  SECTION("preparing, lost pending after ILLEGAL_GENERATION") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::illegal_generation);
    REQUIRE(h.m.state() == member_state::preparing);
    leave = !is_static;  // the member id is still valid
  }
  SECTION("preparing, lost pending after UNKNOWN_MEMBER_ID") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::unknown_member_id);
    REQUIRE(h.m.state() == member_state::preparing);
  }
  SECTION("leaving, unsubscribe under way") {
    h.make_stable(t01);
    h.m.unsubscribe(h.now);
    carry = h.take();  // the revoke listener the user is running
    REQUIRE(h.m.state() == member_state::leaving);
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
    REQUIRE(h.m.state() == member_state::poll_timed_out);
  }
  SECTION("fatal") {
    h.make_stable(t01);
    h.next_heartbeat(kafka_errc::group_authorization_failed);
    REQUIRE(h.m.state() == member_state::fatal);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::stable);
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
    REQUIRE(h.m.state() == member_state::leaving);
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
    REQUIRE(h.m.state() == member_state::closed);
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
    REQUIRE(h.m.state() == member_state::closed);
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
    REQUIRE(h.m.state() == member_state::closed);
  }
  SECTION("request_failed with nothing in flight") {
    harness h;
    h.make_stable(t01);
    expect_empty(h.failed());
    CHECK(h.m.coordinator() == 1);
    REQUIRE(h.m.state() == member_state::stable);
  }
  SECTION("a repeated SyncGroup answer") {
    harness h;
    h.start();
    auto a = h.join(join_ok("m1", 1, "leader", "range"));
    a = h.sync(sync_err(kafka_errc::rebalance_in_progress));
    expect<send_join_group>(a);
    expect_empty(h.sync(sync_ok(t01)));  // the JoinGroup is what is in flight
    REQUIRE(h.m.state() == member_state::joining);
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
      if (h.m.state() == member_state::stable) ++heartbeats_since_sync;
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
    return h.m.state() == member_state::stable && h.m.owned() == target && user_owned == target &&
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::stable);
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
    REQUIRE(h.m.state() == member_state::stable);
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
  REQUIRE(h.m.state() == member_state::closed);
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
  REQUIRE(h.m.state() == member_state::preparing);
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::poll_timed_out);
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
  REQUIRE(h.m.state() == member_state::unsubscribed);
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
  REQUIRE(h.m.state() == member_state::unsubscribed);
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
    CHECK(h.m.state() == member_state::stable);
  }
  SECTION("fenced instance id is fatal") {
    h.m.commit_failed(h.now, 1, code(kafka_errc::fenced_instance_id));
    auto a = h.take();
    CHECK(expect<report_error>(a).fatal);
    CHECK(h.m.state() == member_state::fatal);
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
  REQUIRE(h.m.state() == member_state::leaving);
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
    REQUIRE(h.m.state() == member_state::fatal);
  }
  SECTION("SyncGroup") {
    h.start();
    auto a = h.join(join_ok("m1", 1, "leader", "range"));
    expect<send_sync_group>(a);
    auto r = sync_ok(t01);
    r.protocol_type = "connect";
    a = h.sync(r);
    CHECK(expect<report_error>(a).fatal);
    REQUIRE(h.m.state() == member_state::fatal);
  }
}

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
  REQUIRE(h.m.state() == member_state::assigning);

  h.m.assignment_metadata(h.now, 1, {}, cluster_of({{"t", 2}, {"u", 1}}));
  a = h.take();
  auto s = expect<send_sync_group>(a);
  expect_empty(a);
  REQUIRE(h.m.state() == member_state::syncing);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::joining);
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
  REQUIRE(h.m.state() == member_state::stable);

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
  REQUIRE(h.m.state() == member_state::unsubscribed);
  // Nothing matches yet: still not a member.
  h.m.metadata_updated(h.now, {{"x", false, 0, 1}});
  expect_empty(h.take());
  REQUIRE(h.m.state() == member_state::unsubscribed);
  // Internal topics, topics with an error and names matching only in part are not subscribed.
  h.m.metadata_updated(h.now, {{"t2", false, 0, 1},
                               {"t1", false, 0, 1},
                               {"tx", true, 0, 1},
                               {"tbroken", false, code(kafka_errc::leader_not_available), 0},
                               {"xt", false, 0, 1}});
  auto a = h.take();
  expect<find_coordinator>(a);
  CHECK(h.m.topics() == std::vector<std::string>{"t1", "t2"});
  REQUIRE(h.m.state() == member_state::joining);
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
  using st = member_state;
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
