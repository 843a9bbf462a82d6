// The connection's decisions (net/connection_core.hpp) with a fake clock: answers matched in
// correlation order, deadlines, setup timeout, reconnect backoff, KIP-368 re-authentication
// timing, and a failure at every step of a connection's life with every request completed once.
// Then its setup conversation (net/connection_setup.hpp) against scripted broker answers: the
// ApiVersions fallback, SASL (SCRAM's two rounds, OAUTHBEARER tokens) and re-authentication, with
// an error answer, a malformed answer and a timeout at every step.
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
#include "net/connection_setup.hpp"

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

TEST_CASE("connection core: a close fails what is in flight without drawing a reconnect backoff",
          "[connection_core]") {
  // Issue 37: the jittered draw would make the backoff's generator (5,000 bytes) at every close.
  auto o = quiet_options();
  o.reconnect_jitter = 0.2;
  fixture f{.core = connection_core(o), .done = {}};
  f.connect();
  f.send();
  auto closing = f.core.failed(f.now, /*closing=*/true);
  CHECK(closing.wait == 0ms);
  CHECK(closing.was_ready);
  CHECK(closing.in_flight.size() == 1);
  CHECK(f.core.failed_attempts() == 0);
  CHECK_FALSE(f.core.reconnect_jitter_drawn());
  f.core.stop(st::closed);
  CHECK(f.core.current() == st::closed);
  // A lost connection still backs off with jitter.
  connection_core lost(o);
  lost.connect_started(f.now);
  const auto wait = lost.failed(f.now).wait;
  CHECK(wait >= 40ms);
  CHECK(wait <= 60ms);
  CHECK(lost.reconnect_jitter_drawn());
}

TEST_CASE("connection core: reconnect backoff doubles per failed attempt and starts over once ready",
          "[connection_core]") {
  fixture f;
  CHECK(f.core.failed_attempts() == 0);
  f.core.connect_started(f.now);
  CHECK(f.core.failed(f.now).wait == 50ms);
  CHECK(f.core.failed_attempts() == 1);
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
  CHECK(f.core.failed_attempts() == 2);  // still, back to idle: what metadata recovery looks at
  f.connect();
  CHECK(f.core.connects() == 1);
  CHECK(f.core.failed_attempts() == 0);
  CHECK(f.core.failed(f.now).wait == 50ms);  // a ready connection lost counts one
  CHECK(f.core.failed_attempts() == 1);
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
    CHECK(f.core.answered(f.now));        // start it now
    CHECK_FALSE(f.core.answered(f.now));  // once
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
    CHECK_FALSE(f.core.answered(f.now));
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
      CHECK_FALSE(f.core.answered(f.now));
      if (maybe_fail()) return;
      f.answer(sent[3]);
      CHECK(f.core.answered(f.now));
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

// ---- the setup conversation ----

namespace {

using kind = setup_action::kind;
using protocol::bytes;

template <class Message>
bytes body_of(const Message& m, std::int16_t version) {
  bytes out;
  REQUIRE_FALSE(protocol::encode(m, version, out));
  return out;
}

bytes versions_answer(std::int16_t version, std::int16_t error = 0, std::int16_t api_versions_max = 4) {
  protocol::api_versions_response r;
  r.error_code = error;
  r.api_keys = {{18, 0, api_versions_max}, {17, 0, 1}, {36, 0, 2}};
  return body_of(r, version);
}

bytes handshake_answer(std::int16_t error = 0) {
  protocol::sasl_handshake_response r;
  r.error_code = error;
  r.mechanisms = {"PLAIN", "SCRAM-SHA-256"};
  return body_of(r, 1);
}

bytes auth_answer(const std::string& auth, std::int16_t error = 0, std::string message = {},
                  std::int64_t lifetime_ms = 0) {
  protocol::sasl_authenticate_response r;
  r.error_code = error;
  r.error_message = std::move(message);
  r.auth_bytes.assign(auth.begin(), auth.end());
  r.session_lifetime_ms = lifetime_ms;
  return body_of(r, 2);
}

// RFC 7677's SCRAM-SHA-256 exchange (user "user", password "pencil", a fixed client nonce).
const std::string server_first =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const std::string server_final = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

bool is_send(kind k) {
  return k == kind::send_api_versions || k == kind::send_sasl_handshake || k == kind::send_sasl_authenticate;
}

// The two cores and what connection.cpp does with them: a send goes in flight (its failure ends
// the exchange), an answer is matched and fed to the setup, a failure fails everything in flight.
struct setup_rig {
  connection_core::time_point now = connection_core::time_point{} + 1000s;
  connection_core core{quiet_options()};
  security::sasl_credentials creds;
  connection_setup setup;
  std::optional<std::int32_t> pending;  // the setup request in flight

  explicit setup_rig(const char* mechanism, bool tokens = false)
      : creds{mechanism, "user", "pencil", "rOprNGfwEbeRWgbNEkqO", {}},
        setup(core, {std::string(mechanism).empty() ? nullptr : &creds, tokens, 7, {}}) {}

  setup_action carry(setup_action a) {
    if (is_send(a.what)) {
      REQUIRE_FALSE(pending.has_value());  // one setup request at a time
      pending = core.next_correlation_id();
      core.sent(now, 0, *pending, false,
                [this](std::error_code ec, const response_frame&) -> std::error_code {
                  if (ec) setup.lost();
                  return {};
                });
    }
    return a;
  }
  setup_action start() {
    core.connect_started(now);
    core.step(st::connecting);
    return carry(setup.connected());
  }
  setup_action answer(const bytes& body) {
    REQUIRE(pending.has_value());
    auto m = core.match(*pending);
    REQUIRE(m.request.has_value());
    pending.reset();
    return carry(setup.answer(now, body));
  }
  setup_action reauth_due() {
    now = *core.next_deadline(false);
    REQUIRE(core.on_timer(now).verdict == verdict::reauth_now);
    return carry(setup.reauthenticate());
  }
  // connection::fail(): the socket is closed, everything in flight fails.
  void fail() {
    for (auto& r : core.failed(now).in_flight)
      (void)r.handler(make_error_code(client_errc::connection_closed), {});
    setup.lost();
    pending.reset();
  }
  // Nothing more goes out, whatever arrives late.
  void check_silent(const bytes& late) {
    CHECK(setup.current() == connection_setup::step::idle);
    CHECK(setup.answer(now, late).what == kind::none);
    CHECK(setup.token({}, false, security::oauth_token{"tok", {}, "p", {}}).what == kind::none);
    CHECK(setup.reauthenticate().what == kind::none);
  }
};

}  // namespace

TEST_CASE("connection setup: ApiVersions at v4, then ready without SASL", "[connection_core][setup]") {
  setup_rig r("");
  auto a = r.start();
  REQUIRE(a.what == kind::send_api_versions);
  CHECK(a.version == 4);
  CHECK(a.api_versions.client_software_name == "kgroup");
  CHECK(r.core.current() == st::handshaking);
  auto body = versions_answer(4);
  body.push_back(0);  // a byte after the last field: tolerated, noted
  a = r.answer(body);
  CHECK(a.what == kind::ready);
  CHECK(a.note.versions_at == 4);
  CHECK(a.note.apis == 3);
  CHECK(a.note.trailing == 1);
  CHECK(r.core.current() == st::ready);
  CHECK(r.core.connects() == 1);
  CHECK(r.setup.versions().broker_max(36) == 2);
  CHECK(r.setup.reauthenticate().what == kind::none);  // no SASL: nothing to renew
}

TEST_CASE("connection setup: UNSUPPORTED_VERSION retries once at the broker's version, else v0",
          "[connection_core][setup]") {
  setup_rig r("");
  REQUIRE(r.start().version == 4);
  SECTION("the range in the v0 layout (real brokers)") {
    auto a = r.answer(versions_answer(0, 35, 2));
    REQUIRE(a.what == kind::send_api_versions);
    CHECK(a.version == 2);
    CHECK(a.note.refused_version == 4);
    CHECK(r.answer(versions_answer(2)).what == kind::ready);
  }
  SECTION("the range in the requested version's layout") {
    auto a = r.answer(versions_answer(4, 35, 3));
    CHECK(a.what == kind::send_api_versions);
    CHECK(a.version == 3);
  }
  SECTION("no usable range: v0, which every broker answers") {
    auto a = r.answer(versions_answer(4, 35, 9));  // not below the refused version
    CHECK(a.version == 0);
    a = r.answer(bytes{0, 35});          // no range at all
    CHECK(a.what == kind::undecodable);  // refused at v0 too: no common version
    CHECK(a.error == make_error_code(client_errc::no_compatible_version));
    r.check_silent(versions_answer(0));
  }
}

TEST_CASE("connection setup: an ApiVersions error fails the attempt; REBOOTSTRAP_REQUIRED keeps its code",
          "[connection_core][setup]") {
  // KIP-1102: the driver tells the cluster (net/metadata_recovery.hpp), and the requests waiting
  // for the connection see why it failed.
  setup_rig r("");
  (void)r.start();
  SECTION("REBOOTSTRAP_REQUIRED") {
    auto a = r.answer(versions_answer(4, 129));
    CHECK(a.what == kind::fail);
    CHECK(a.error == make_error_code(kafka_errc::rebootstrap_required));
    CHECK(a.note.api_versions_error == 129);
  }
  SECTION("another error") {
    auto a = r.answer(versions_answer(4, 58));  // SASL_AUTHENTICATION_FAILED, say
    CHECK(a.what == kind::fail);
    CHECK(a.error == make_error_code(client_errc::connection_failed));
    CHECK(a.note.api_versions_error == 58);
  }
  CHECK(r.core.current() != st::ready);
  r.check_silent(versions_answer(4));
}

TEST_CASE("connection setup: a truncated ApiVersions answer is undecodable at every length",
          "[connection_core][setup]") {
  const auto good = versions_answer(4);
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("length " << n);
    setup_rig r("");
    (void)r.start();
    auto a = r.answer(bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)));
    CHECK(a.what == kind::undecodable);
    CHECK(a.error);
    r.check_silent(good);
  }
}

TEST_CASE("connection setup: SASL needs SaslHandshake v1 and SaslAuthenticate", "[connection_core][setup]") {
  setup_rig r("PLAIN");
  (void)r.start();
  protocol::api_versions_response old;
  old.api_keys = {{18, 0, 4}, {17, 0, 0}};
  auto a = r.answer(body_of(old, 4));
  CHECK(a.what == kind::fatal);
  CHECK(a.error == make_error_code(client_errc::no_compatible_version));
  CHECK(a.message.find("security.protocol") != std::string::npos);
  r.check_silent(handshake_answer());
}

TEST_CASE("connection setup: SCRAM and a re-authentication, with a fault at every step",
          "[connection_core][setup][reauth]") {
  // The life: ApiVersions, SaslHandshake, two SaslAuthenticate rounds (ready, a 10 s session),
  // then the re-authentication's handshake and rounds. Each step's answer is replaced by an
  // error, a malformed body or silence; the exchange ends as the step requires and nothing is
  // sent after it.
  struct step_script {
    bytes good;
    kind after;     // what the good answer leads to
    bytes error;    // an answer carrying an error
    kind on_error;  // fail or fatal
    std::error_code code;
  };
  const auto refused = make_error_code(kafka_errc::sasl_authentication_failed);
  const std::vector<step_script> life = {
      {versions_answer(4), kind::send_sasl_handshake, versions_answer(4, 42), kind::fail,
       make_error_code(client_errc::connection_failed)},
      {handshake_answer(), kind::send_sasl_authenticate, handshake_answer(33), kind::fatal,
       make_error_code(kafka_errc::unsupported_sasl_mechanism)},
      {auth_answer(server_first), kind::send_sasl_authenticate,
       auth_answer("", 58, "no such user; you sent pencil"), kind::fatal, refused},
      {auth_answer(server_final, 0, {}, 10000), kind::ready, auth_answer("v=AAAA"), kind::fatal, refused},
      {handshake_answer(), kind::send_sasl_authenticate, handshake_answer(33), kind::fatal,
       make_error_code(kafka_errc::unsupported_sasl_mechanism)},
      {auth_answer(server_first), kind::send_sasl_authenticate, auth_answer("", 58), kind::fatal, refused},
      {auth_answer(server_final, 0, {}, 10000), kind::reauthenticated, auth_answer("v=AAAA"), kind::fatal,
       refused},
  };
  for (std::size_t k = 0; k < life.size(); ++k) {
    for (const char* fault : {"error", "malformed", "timeout"}) {
      INFO("step " << k << ", " << fault);
      setup_rig r("SCRAM-SHA-256");
      REQUIRE(r.start().what == kind::send_api_versions);
      for (std::size_t i = 0; i < k; ++i) {
        const auto a = r.answer(life[i].good);
        REQUIRE(a.what == life[i].after);
        if (a.what == kind::ready) {
          CHECK(a.note.authenticated);
          CHECK(a.note.session_lifetime_ms == 10000);
          CHECK(r.core.current() == st::ready);
          // KIP-368: at 85-95% of the session.
          const auto at = *r.core.next_deadline(false) - r.now;
          CHECK(at >= 8500ms);
          CHECK(at <= 9500ms);
          REQUIRE(r.reauth_due().what == kind::send_sasl_handshake);
          CHECK(r.core.reauthenticating());
        }
      }
      const std::string f = fault;
      if (f == "error") {
        const auto a = r.answer(life[k].error);
        CHECK(a.what == life[k].on_error);
        CHECK(a.error == life[k].code);
        CHECK(a.message.find("pencil") == std::string::npos);  // never the password
        if (k == 0) CHECK(a.note.api_versions_error == 42);
        if (k == 1) CHECK(a.message.find("check sasl.mechanism") != std::string::npos);
        if (k == 2) CHECK(a.message.find("check sasl.username and sasl.password") != std::string::npos);
        CHECK(r.setup.current() == connection_setup::step::idle);  // ended by itself
      } else if (f == "malformed") {
        const auto a = r.answer(bytes{life[k].good.front()});
        CHECK(a.what == kind::undecodable);
        CHECK(a.error);
        CHECK(r.setup.current() == connection_setup::step::idle);
      } else {
        // Setup steps run under connect.timeout; a re-authentication's requests under their own.
        r.now = *r.core.next_deadline(false);
        auto t = r.core.on_timer(r.now);
        CHECK(t.verdict == (k < 4 ? verdict::setup_timed_out : verdict::request_timed_out));
        if (t.expired) (void)t.expired->handler(make_error_code(client_errc::request_timed_out), {});
      }
      r.fail();  // what the driver does with each of them
      r.check_silent(life[k].good);
      CHECK(r.core.in_flight() == 0);
      // The next attempt starts over with ApiVersions at v4 and completes.
      r.now = *r.core.next_deadline(true);
      REQUIRE(r.core.on_timer(r.now).verdict == verdict::backoff_over);
      CHECK(r.start().version == 4);
      for (std::size_t i = 0; i < 4; ++i) CHECK(r.answer(life[i].good).what == life[i].after);
    }
  }
}

TEST_CASE("connection setup: OAUTHBEARER waits for the token provider", "[connection_core][setup]") {
  setup_rig r("OAUTHBEARER", /*tokens=*/true);
  (void)r.start();
  REQUIRE(r.answer(versions_answer(4)).what == kind::get_token);
  CHECK(r.core.current() == st::authenticating);
  const security::oauth_token token{"eyJ.token", {}, "alice", {}};
  SECTION("a token: SaslHandshake, one SaslAuthenticate round, ready") {
    auto a = r.carry(r.setup.token({}, false, token));
    REQUIRE(a.what == kind::send_sasl_handshake);
    CHECK(a.handshake.mechanism == "OAUTHBEARER");
    a = r.answer(handshake_answer());
    REQUIRE(a.what == kind::send_sasl_authenticate);
    CHECK(std::string(a.authenticate.auth_bytes.begin(), a.authenticate.auth_bytes.end()).find("eyJ.token") !=
          std::string::npos);
    a = r.answer(auth_answer("", 58, "token eyJ.token expired"));
    CHECK(a.what == kind::fatal);
    CHECK(a.message.find("eyJ.token") == std::string::npos);  // never the token
    CHECK(a.message.find("check the OAUTHBEARER token") != std::string::npos);
  }
  SECTION("the provider refuses for good: fatal") {
    auto a = r.setup.token("the token endpoint refused the client (401)", true, {});
    CHECK(a.what == kind::fatal);
    CHECK(a.error == make_error_code(kafka_errc::sasl_authentication_failed));
    r.check_silent(handshake_answer());
  }
  SECTION("the provider is down: the attempt fails, retried after the backoff") {
    auto a = r.setup.token("token endpoint unreachable", false, {});
    CHECK(a.what == kind::fail);
    CHECK(a.error == make_error_code(client_errc::connection_failed));
    CHECK(a.message == "no OAUTHBEARER token");
    r.check_silent(handshake_answer());
  }
  SECTION("no token before connect.timeout: the attempt fails; a late token sends nothing") {
    r.now = *r.core.next_deadline(false);
    CHECK(r.core.on_timer(r.now).verdict == verdict::setup_timed_out);
    r.fail();
    r.check_silent(handshake_answer());
  }
}

TEST_CASE(
    "connection core: a connection idle for connections.max.idle.ms is closed, and the next request reopens "
    "it",
    "[connection_core][idle]") {
  connection_core::options o = quiet_options();
  o.max_idle = 60000ms;
  fixture f{.core = connection_core{o}, .done = {}};
  f.connect();
  // Ready and unused: closed max.idle after the connect began.
  CHECK(f.core.next_deadline(false) == f.now + 60000ms);
  const auto corr = f.send(300000ms);
  SECTION("never with a request in flight, however long it is held") {
    CHECK(f.core.next_deadline(false) == f.now + 300000ms);  // only the request's deadline
    f.now += 200000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    CHECK(f.core.current() == st::ready);
    // Idle time counts from the answer, not from the send.
    f.answer(corr);
    CHECK_FALSE(f.core.answered(f.now));
    CHECK(f.core.next_deadline(false) == f.now + 60000ms);
    f.now += 59999ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    f.now += 1ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::idle_close);
    CHECK(f.core.current() == st::idle);
  }
  SECTION("each request starts the idle time again") {
    f.answer(corr);
    CHECK_FALSE(f.core.answered(f.now));
    f.now += 40000ms;
    f.answer(f.send());
    CHECK_FALSE(f.core.answered(f.now));
    f.now += 40000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    f.now += 20000ms;
    REQUIRE(f.core.on_timer(f.now).verdict == verdict::idle_close);
    // Closed quietly: nothing to fail, no backoff, no failed attempt counted; the next request
    // connects at once and the reconnect backoff is still the first step.
    CHECK(f.core.current() == st::idle);
    CHECK_FALSE(f.core.next_deadline(true).has_value());
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    f.connect();
    CHECK(f.core.connects() == 2);
    CHECK(f.core.failed(f.now).wait == 50ms);
  }
  SECTION("a re-authentication waiting for the connection is not idleness") {
    f.answer(corr);
    CHECK_FALSE(f.core.answered(f.now));
    f.core.authenticated(f.now, 1000ms);
    f.now += 1000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::reauth_now);
    f.now += 60000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::nothing);
    CHECK(f.core.current() == st::ready);
  }
  SECTION("-1: never closed") {
    fixture g;  // quiet_options: max_idle -1
    g.connect();
    g.answer(g.send());
    CHECK_FALSE(g.core.answered(g.now));
    CHECK_FALSE(g.core.next_deadline(false).has_value());
    g.now += 24h;
    CHECK(g.core.on_timer(g.now).verdict == verdict::nothing);
    CHECK(g.core.current() == st::ready);
  }
}

TEST_CASE("connection core: every address of a name is tried in turn, each within connect.timeout",
          "[connection_core][dns]") {
  fixture f;
  f.core.connect_started(f.now);
  // Three addresses: the first tried is the first resolved.
  CHECK(f.core.resolved(f.now, 3) == 0);
  CHECK(f.core.current() == st::connecting);
  SECTION("a refused address: the next one at once, with its own connect.timeout") {
    f.now += 5ms;
    CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(1));
    CHECK(f.core.next_deadline(false) == f.now + 10000ms);
    CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(2));
    CHECK(f.core.address_failed(f.now) == std::nullopt);  // all tried: the attempt failed
    CHECK(f.core.failed(f.now).wait == 50ms);
  }
  SECTION("an address that never answers: the next one after connect.timeout, not a failed attempt") {
    f.now += 10000ms;
    auto t = f.core.on_timer(f.now);
    CHECK(t.verdict == verdict::next_address);
    CHECK(t.address == std::optional<std::size_t>(1));
    CHECK(f.core.current() == st::connecting);
    CHECK(f.core.next_deadline(false) == f.now + 10000ms);
    f.core.step(st::handshaking);
    f.core.became_ready();
    CHECK(f.core.connects() == 1);
    SECTION("the next connect resolves again and starts with the address that worked") {
      (void)f.core.failed(f.now);
      f.now += 50ms;
      CHECK(f.core.on_timer(f.now).verdict == verdict::backoff_over);
      f.core.connect_started(f.now);
      CHECK(f.core.current() == st::resolving);
      CHECK(f.core.resolved(f.now, 3) == 1);
      SECTION("wrapping around to the ones before it") {
        CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(2));
        CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(0));
        CHECK(f.core.address_failed(f.now) == std::nullopt);
      }
      SECTION("fewer addresses now: from the first") {
        (void)f.core.failed(f.now);
        f.now += 100ms;
        CHECK(f.core.on_timer(f.now).verdict == verdict::backoff_over);
        f.core.connect_started(f.now);
        CHECK(f.core.resolved(f.now, 1) == 0);
      }
    }
  }
  SECTION("the last address never answers: the setup timed out") {
    CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(1));
    CHECK(f.core.address_failed(f.now) == std::optional<std::size_t>(2));
    f.now += 10000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::setup_timed_out);
  }
  SECTION("connected, then the broker does not answer ApiVersions: the setup timed out") {
    f.core.step(st::handshaking);
    f.now += 10000ms;
    CHECK(f.core.on_timer(f.now).verdict == verdict::setup_timed_out);
  }
}
