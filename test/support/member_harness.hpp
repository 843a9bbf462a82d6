// The test harness of the membership core tests (test_member*.cpp): the harness plays the
// driver and the coordinator's answers; every event goes in by hand with a fake clock and the
// tests assert on the actions that come out. Test-only; each test file includes it.
#pragma once

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

// The helpers below have internal linkage and each test file uses only some of them.
#pragma GCC diagnostic ignored "-Wunused-function"

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
  std::shared_ptr<std::vector<subscription_snapshot>> snapshots =
      std::make_shared<std::vector<subscription_snapshot>>();
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
                                  std::shared_ptr<std::vector<subscription_snapshot>> snaps) {
    std::vector<std::string> names;
    for (const auto& a : o.assignors) names.push_back(a->name());
    return [names, snaps](const subscription_snapshot& s) {
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
    REQUIRE(m.state() == classic_state::joining);
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
    REQUIRE(m.state() == classic_state::completing);
    a = done(l);
    expect_empty(a);
    REQUIRE(m.state() == classic_state::stable);
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
  REQUIRE(h.m.state() == classic_state::fatal);
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(60000ms));
  expect_empty(h.poll());
  h.m.enforce_rebalance(h.now, "x");
  expect_empty(h.take());
  REQUIRE(h.m.state() == classic_state::fatal);
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
  REQUIRE(h.m.state() == classic_state::closed);
  CHECK(h.m.owned().empty());
  CHECK_FALSE(h.m.next_deadline().has_value());
  expect_empty(h.advance(100000ms));
  h.m.close(h.now);
  expect_empty(h.take());
}

}  // namespace
