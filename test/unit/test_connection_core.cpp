// The connection's decisions (net/connection_core.hpp) with a fake clock: answers matched in
// correlation order, deadlines, setup timeout, reconnect backoff, KIP-368 re-authentication
// timing, and a failure at every step of a connection's life with every request completed once.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "kgroup/error.hpp"
#include "net/connection_core.hpp"

using namespace kgroup;
using namespace kgroup::net;
using namespace std::chrono_literals;
using st = connection_state;
using verdict = connection_core::timer_verdict;

namespace {

connection_core::options quiet_options() {
  connection_core::options o;
  o.request_timeout = 30000ms;
  o.connect_timeout = 10000ms;
  o.reconnect_backoff = 50ms;
  o.reconnect_backoff_max = 1000ms;
  o.reconnect_jitter = 0;  // deterministic
  return o;
}

// Counts how each request ended, by correlation id.
struct completions {
  std::map<std::int32_t, std::vector<std::string>> ends;
  raw_handler handler(std::int32_t corr) {
    return [this, corr](std::error_code ec, const response_frame&) -> std::error_code {
      ends[corr].push_back(ec ? ec.message() : "answered");
      return {};
    };
  }
};

struct fixture {
  connection_core::time_point now = connection_core::time_point{} + 1000s;
  connection_core core{quiet_options()};
  completions done;

  std::int32_t send(std::chrono::milliseconds timeout = 0ms) {
    const auto corr = core.next_correlation_id();
    core.sent(now, 18, corr, false, done.handler(corr), timeout);
    return corr;
  }
  void answer(std::int32_t corr) {
    auto m = core.match(corr);
    REQUIRE(m.request.has_value());
    REQUIRE(m.request->correlation_id == corr);
    (void)m.request->handler({}, response_frame{});
  }
  void connect() {
    core.connect_started(now);
    core.step(st::connecting);
    core.step(st::handshaking);
    core.became_ready();
  }
  void fail_all() {
    auto f = core.failed(now);
    for (auto& r : f.in_flight)
      (void)r.handler(make_error_code(client_errc::connection_closed), response_frame{});
  }
};

}  // namespace

TEST_CASE("connection core: answers match the oldest request in flight, or the frame is a violation",
          "[connection_core]") {
  fixture f;
  f.connect();
  const auto a = f.send();
  const auto b = f.send();
  CHECK(b == a + 1);
  CHECK(f.core.in_flight() == 2);
  SECTION("in order") {
    f.answer(a);
    f.answer(b);
    CHECK(f.core.in_flight() == 0);
    CHECK(f.done.ends[a] == std::vector<std::string>{"answered"});
  }
  SECTION("out of order: a violation, nothing delivered") {
    auto m = f.core.match(b);
    CHECK_FALSE(m.request.has_value());
    CHECK(std::string(m.violation) == "correlation id mismatch");
    CHECK(m.expected == a);
    CHECK(f.core.in_flight() == 2);
  }
  SECTION("nothing in flight") {
    f.answer(a);
    f.answer(b);
    auto m = f.core.match(b + 1);
    CHECK_FALSE(m.request.has_value());
    CHECK(std::string(m.violation) == "unsolicited response");
  }
}

TEST_CASE("connection core: the earliest deadline is armed; a late request times out alone",
          "[connection_core]") {
  fixture f;
  f.connect();
  const auto slow = f.send(60000ms);  // a JoinGroup: the rebalance timeout
  const auto fast = f.send();         // request.timeout.ms
  REQUIRE(f.core.next_deadline(false) == f.now + 30000ms);
  f.now += 29999ms;
  CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
  f.now += 1ms;
  auto t = f.core.on_timer(f.now);
  REQUIRE(t.verdict == verdict::request_timed_out);
  REQUIRE(t.expired.has_value());
  CHECK(t.expired->correlation_id == fast);
  CHECK(f.core.in_flight() == 1);
  CHECK(f.core.next_deadline(false) == f.now + 30000ms);  // the JoinGroup's own deadline
  (void)slow;
}

TEST_CASE("connection core: setup must reach ready within connect.timeout", "[connection_core]") {
  fixture f;
  f.core.connect_started(f.now);
  CHECK(f.core.setting_up());
  CHECK(f.core.next_deadline(false) == f.now + 10000ms);
  f.core.step(st::connecting);
  f.now += 10000ms;
  CHECK(f.core.on_timer(f.now).verdict == verdict::setup_timed_out);
  SECTION("once ready, no setup deadline") {
    fixture g;
    g.connect();
    CHECK_FALSE(g.core.setting_up());
    CHECK_FALSE(g.core.next_deadline(false).has_value());
  }
}

TEST_CASE("connection core: reconnect backoff doubles per failed attempt and starts over once ready",
          "[connection_core]") {
  fixture f;
  f.core.connect_started(f.now);
  CHECK(f.core.failed(f.now).wait == 50ms);
  CHECK(f.core.current() == st::backoff);
  CHECK_FALSE(f.core.next_deadline(false).has_value());  // nothing waits: no timer
  CHECK(f.core.next_deadline(true) == f.now + 50ms);
  f.now += 50ms;
  CHECK(f.core.on_timer(f.now).verdict == verdict::backoff_over);
  CHECK(f.core.current() == st::idle);
  f.core.connect_started(f.now);
  CHECK(f.core.failed(f.now).wait == 100ms);
  f.now += 100ms;
  CHECK(f.core.on_timer(f.now).verdict == verdict::backoff_over);
  f.connect();
  CHECK(f.core.connects() == 1);
  CHECK(f.core.failed(f.now).wait == 50ms);
}

TEST_CASE("connection core: a re-authentication waits for the requests in flight, new ones wait for it",
          "[connection_core][reauth]") {
  fixture f;
  f.connect();
  f.core.authenticated(f.now, 1000ms);
  CHECK(f.core.next_deadline(false) == f.now + 1000ms);
  SECTION("nothing in flight: at once") {
    f.now += 1000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::reauth_now);
    CHECK(f.core.reauthenticating());
    f.core.authenticated(f.now, 1000ms);
    CHECK_FALSE(f.core.reauthenticating());
    CHECK(f.core.next_deadline(false) == f.now + 1000ms);
  }
  SECTION("a long request in flight: after its answer, never timed out") {
    const auto join = f.send(300000ms);
    f.now += 1000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::reauth_waits);
    CHECK(f.core.reauthenticating());  // new requests wait
    // The re-authentication itself has no deadline while it waits: only the JoinGroup's.
    CHECK(f.core.next_deadline(false) == f.now - 1000ms + 300000ms);
    f.now += 60000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    f.answer(join);
    CHECK(f.core.answered());        // start it now
    CHECK_FALSE(f.core.answered());  // once
    f.core.reauth_started();
    f.core.authenticated(f.now, 1000ms);
    CHECK_FALSE(f.core.reauthenticating());
  }
  SECTION("a failure forgets the re-authentication: the next connect authenticates anew") {
    (void)f.send();
    f.now += 1000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::reauth_waits);
    f.fail_all();
    CHECK_FALSE(f.core.reauthenticating());
    CHECK_FALSE(f.core.answered());
  }
}

TEST_CASE("connection core: a failure at every step of a connection's life; every request ends once",
          "[connection_core]") {
  // The life: connect, ApiVersions (a request), ready, three requests (one answered at each step),
  // a re-authentication due behind them, answers. A failure (connection lost) is injected before
  // step `k`; the connection then backs off, reconnects and completes what is sent afterwards.
  constexpr int steps = 9;
  for (int k = 0; k <= steps; ++k) {
    INFO("failure before step " << k);
    fixture f;
    int step = 0;
    bool failed = false;
    auto maybe_fail = [&] {
      if (step++ != k || failed) return false;
      f.fail_all();
      failed = true;
      return true;
    };
    std::vector<std::int32_t> sent;
    auto run = [&] {
      if (maybe_fail()) return;
      f.core.connect_started(f.now);
      if (maybe_fail()) return;
      f.core.step(st::connecting);
      f.core.step(st::handshaking);
      const auto api_versions = f.send();
      sent.push_back(api_versions);
      if (maybe_fail()) return;
      f.answer(api_versions);
      f.core.became_ready();
      f.core.authenticated(f.now, 5000ms);
      if (maybe_fail()) return;
      for (int i = 0; i < 3; ++i) sent.push_back(f.send());
      if (maybe_fail()) return;
      f.answer(sent[1]);
      if (maybe_fail()) return;
      f.now += 5000ms;
      REQUIRE(f.core.on_timer(f.now).verdict == verdict::reauth_waits);
      if (maybe_fail()) return;
      f.answer(sent[2]);
      CHECK_FALSE(f.core.answered());
      if (maybe_fail()) return;
      f.answer(sent[3]);
      CHECK(f.core.answered());
      if (maybe_fail()) return;
    };
    run();
    if (failed) {
      CHECK(f.core.current() == st::backoff);
      CHECK(f.core.in_flight() == 0);
      REQUIRE(f.core.next_deadline(true).has_value());
      f.now = *f.core.next_deadline(true);
      CHECK(f.core.on_timer(f.now).verdict == verdict::backoff_over);
      // A new life: connects, and a request sent now is answered.
      f.connect();
      const auto again = f.send();
      sent.push_back(again);
      f.answer(again);
    }
    // Every request ended exactly once: answered, or failed by the lost connection.
    for (const auto corr : sent) {
      INFO("request " << corr);
      CHECK(f.done.ends[corr].size() == 1);
    }
    CHECK(f.core.in_flight() == 0);
  }
}
