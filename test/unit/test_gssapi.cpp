// SASL GSSAPI's client state machine (security/gssapi.hpp) with a fake GSS-API layer: the token
// exchange, the RFC 4752 security-layer answer, each failure, and the same through
// sasl_session and connection_setup (the SaslHandshake/SaslAuthenticate framing, fatal versus
// retried failures, KIP-368 re-authentication with a fresh context).
#include <catch2/catch.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kgroup/kafka_errc.hpp"
#include "net/connection_setup.hpp"
#include "protocol/messages.hpp"
#include "security/gssapi.hpp"
#include "security/sasl.hpp"

using kgroup::protocol::bytes;
using kgroup::security::gss_context;
using kgroup::security::gss_result;
using kgroup::security::gssapi_client;

namespace {

bytes b(const std::string& s) {
  return bytes(s.begin(), s.end());
}

// A scripted GSS layer: init answers from `init_script` in order (recording its inputs); wrap and
// unwrap add and strip a "W:" prefix (so tests see what was wrapped), or fail when told to.
struct fake_gss : gss_context {
  struct log_t {
    std::vector<bytes> init_inputs;
    std::vector<bytes> wrapped;  // messages given to wrap
    int contexts = 0;
  };
  std::shared_ptr<log_t> log;
  std::deque<gss_result> init_script;
  bool fail_unwrap = false;
  bool fail_wrap = false;

  explicit fake_gss(std::shared_ptr<log_t> l) : log(std::move(l)) { ++log->contexts; }

  gss_result init(std::span<const std::uint8_t> input) override {
    log->init_inputs.emplace_back(input.begin(), input.end());
    if (init_script.empty()) return {false, false, false, {}, "fake: no more init steps"};
    gss_result r = init_script.front();
    init_script.pop_front();
    return r;
  }
  gss_result unwrap(std::span<const std::uint8_t> input) override {
    if (fail_unwrap)
      return {false, false, false, {}, "gss_unwrap: A token had an invalid Message Integrity Code"};
    if (input.size() < 2 || input[0] != 'W' || input[1] != ':')
      return {false, false, false, {}, "fake: not wrapped"};
    return {true, false, false, bytes(input.begin() + 2, input.end()), {}};
  }
  gss_result wrap(std::span<const std::uint8_t> message) override {
    if (fail_wrap) return {false, false, false, {}, "gss_wrap: failed"};
    log->wrapped.emplace_back(message.begin(), message.end());
    bytes out = b("W:");
    out.insert(out.end(), message.begin(), message.end());
    return {true, false, false, out, {}};
  }
};

gss_result token(const std::string& t, bool complete) {
  return {true, complete, false, b(t), {}};
}

// The usual Kerberos script: AP-REQ out; the server's AP-REP completes the context, no token.
std::unique_ptr<fake_gss> kerberos_like(std::shared_ptr<fake_gss::log_t> log) {
  auto g = std::make_unique<fake_gss>(std::move(log));
  g->init_script = {token("AP-REQ", false), token("", true)};
  return g;
}

bytes offer(std::uint8_t layers, std::uint32_t max) {
  bytes m = b("W:");
  m.push_back(layers);
  m.push_back(static_cast<std::uint8_t>(max >> 16));
  m.push_back(static_cast<std::uint8_t>(max >> 8));
  m.push_back(static_cast<std::uint8_t>(max));
  return m;
}

}  // namespace

TEST_CASE("gssapi: the Kerberos exchange, then no security layer with max size 0", "[gssapi][kerberos]") {
  auto log = std::make_shared<fake_gss::log_t>();
  gssapi_client c(kerberos_like(log));
  CHECK(c.current() == gssapi_client::state::initial);
  bytes out;
  std::string error;
  REQUIRE(c.start(out, error) == gssapi_client::status::send);
  CHECK(out == b("AP-REQ"));
  CHECK(log->init_inputs.at(0).empty());  // the first call has no input token
  CHECK(c.current() == gssapi_client::state::context);

  // The AP-REP completes the context: the client answers with an empty token.
  REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
  CHECK(out.empty());
  CHECK(log->init_inputs.at(1) == b("AP-REP"));
  CHECK(c.current() == gssapi_client::state::offer);

  // The offer: every layer, 64 KiB. The answer chooses none, max size 0, no authzid.
  REQUIRE(c.on_server(offer(0x07, 65536), out, error) == gssapi_client::status::send);
  REQUIRE(log->wrapped.size() == 1);
  CHECK(log->wrapped[0] == bytes{0x01, 0, 0, 0});
  CHECK(out == b(std::string("W:\x01\0\0\0", 6)));
  CHECK(c.current() == gssapi_client::state::answered);

  REQUIRE(c.on_server({}, out, error) == gssapi_client::status::done);
  CHECK(c.current() == gssapi_client::state::done);
  // Nothing more is accepted.
  CHECK(c.on_server(b("x"), out, error) == gssapi_client::status::failed);
}

TEST_CASE("gssapi: several context rounds, an authzid, an empty token before the offer",
          "[gssapi][kerberos]") {
  auto log = std::make_shared<fake_gss::log_t>();
  auto g = std::make_unique<fake_gss>(log);
  g->init_script = {token("t1", false), token("t2", false), token("t3", true)};
  gssapi_client c(std::move(g), "alice@EXAMPLE");
  bytes out;
  std::string error;
  REQUIRE(c.start(out, error) == gssapi_client::status::send);
  REQUIRE(c.on_server(b("s1"), out, error) == gssapi_client::status::send);
  CHECK(out == b("t2"));
  REQUIRE(c.on_server(b("s2"), out, error) == gssapi_client::status::send);
  CHECK(out == b("t3"));  // the completing call's token is still sent
  CHECK(c.current() == gssapi_client::state::offer);
  // A server whose context completed on t3 answers empty first: the client answers empty.
  REQUIRE(c.on_server({}, out, error) == gssapi_client::status::send);
  CHECK(out.empty());
  REQUIRE(c.on_server(offer(0x01, 0), out, error) == gssapi_client::status::send);
  CHECK(log->wrapped.at(0) == b(std::string("\x01\0\0\0alice@EXAMPLE", 17)));
  CHECK(c.on_server({}, out, error) == gssapi_client::status::done);
}

TEST_CASE("gssapi: each failure ends the exchange with the GSS status and no further token",
          "[gssapi][kerberos]") {
  auto log = std::make_shared<fake_gss::log_t>();
  bytes out;
  std::string error;

  SECTION("no credentials: the first call fails (fatal)") {
    auto g = std::make_unique<fake_gss>(log);
    g->init_script = {
        {false,
         false,
         false,
         {},
         "gss_init_sec_context: Unspecified GSS failure (Client not found in Kerberos database)"}};
    gssapi_client c(std::move(g));
    CHECK(c.start(out, error) == gssapi_client::status::failed);
    CHECK(error.find("Client not found in Kerberos database") != std::string::npos);
    CHECK(error.find("cannot start") != std::string::npos);
    CHECK_FALSE(c.retriable());
    CHECK(c.current() == gssapi_client::state::failed);
  }
  SECTION("the KDC does not answer: retriable") {
    auto g = std::make_unique<fake_gss>(log);
    g->init_script = {{false, false, true, {}, "Cannot contact any KDC"}};
    gssapi_client c(std::move(g));
    CHECK(c.start(out, error) == gssapi_client::status::failed);
    CHECK(c.retriable());
  }
  SECTION("the server's token is refused") {
    auto g = std::make_unique<fake_gss>(log);
    g->init_script = {token("AP-REQ", false), {false, false, false, {}, "gss_init_sec_context: bad AP-REP"}};
    gssapi_client c(std::move(g));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    CHECK(c.on_server(b("junk"), out, error) == gssapi_client::status::failed);
    CHECK(error.find("bad AP-REP") != std::string::npos);
  }
  SECTION("the offer does not unwrap") {
    auto g = kerberos_like(log);
    g->fail_unwrap = true;
    gssapi_client c(std::move(g));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
    CHECK(c.on_server(offer(1, 0), out, error) == gssapi_client::status::failed);
    CHECK(error.find("Message Integrity Code") != std::string::npos);
  }
  SECTION("the offer is not 4 bytes") {
    gssapi_client c(kerberos_like(log));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
    CHECK(c.on_server(b("W:\x01\0\0"), out, error) == gssapi_client::status::failed);
    CHECK(error.find("not 4") != std::string::npos);
  }
  SECTION("the server requires a security layer") {
    gssapi_client c(kerberos_like(log));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
    CHECK(c.on_server(offer(0x06, 65536), out, error) == gssapi_client::status::failed);
    CHECK(error.find("integrity or confidentiality layer") != std::string::npos);
    CHECK(log->wrapped.empty());
  }
  SECTION("the answer does not wrap") {
    auto g = kerberos_like(log);
    g->fail_wrap = true;
    gssapi_client c(std::move(g));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
    CHECK(c.on_server(offer(1, 0), out, error) == gssapi_client::status::failed);
  }
  SECTION("a server that never sends its offer") {
    gssapi_client c(kerberos_like(log));
    REQUIRE(c.start(out, error) == gssapi_client::status::send);
    REQUIRE(c.on_server(b("AP-REP"), out, error) == gssapi_client::status::send);
    CHECK(c.on_server({}, out, error) == gssapi_client::status::send);
    CHECK(c.on_server({}, out, error) == gssapi_client::status::send);
    CHECK(c.on_server({}, out, error) == gssapi_client::status::failed);
  }
  SECTION("no context at all") {
    gssapi_client c(nullptr);
    CHECK(c.start(out, error) == gssapi_client::status::failed);
  }
}

namespace {

using kgroup::net::connection_core;
using kgroup::net::connection_setup;
using kgroup::net::setup_action;
using kind = setup_action::kind;

bytes encode_answer(const auto& resp, std::int16_t version) {
  bytes out;
  REQUIRE_FALSE(kgroup::protocol::encode(resp, version, out));
  return out;
}

// ApiVersions v4 (asked first) with SaslHandshake 0-1 and SaslAuthenticate 0-2.
bytes api_versions_answer() {
  kgroup::protocol::api_versions_response r;
  r.api_keys = {{18, 0, 4}, {17, 0, 1}, {36, 0, 2}};
  return encode_answer(r, 4);
}

kgroup::protocol::sasl_authenticate_response auth(const bytes& token, std::int64_t lifetime = 0) {
  kgroup::protocol::sasl_authenticate_response r;
  r.auth_bytes = token;
  r.session_lifetime_ms = lifetime;
  return r;
}

}  // namespace

TEST_CASE("gssapi through the connection setup: handshake, rounds, KIP-368 with a new context, failures",
          "[gssapi][kerberos]") {
  using namespace std::chrono_literals;
  auto log = std::make_shared<fake_gss::log_t>();
  bool fail_first = false;
  bool kdc_down = false;
  kgroup::security::sasl_credentials creds;
  creds.mechanism = "GSSAPI";
  connection_core::options co;
  co.request_timeout = 30000ms;
  co.connect_timeout = 10000ms;
  co.reconnect_backoff = 50ms;
  co.reconnect_backoff_max = 1000ms;
  co.reconnect_jitter = 0;
  connection_core core(co);
  connection_setup::options o;
  o.sasl = &creds;
  o.seed = 1;
  o.gss = [&]() -> std::unique_ptr<gss_context> {
    auto g = kerberos_like(log);
    if (fail_first || kdc_down) {
      g->init_script = {
          {false, false, kdc_down, {}, "gss_init_sec_context: Client not found in Kerberos database"}};
    }
    return g;
  };
  connection_setup setup(core, o);
  const auto now = connection_core::time_point{} + 1000s;
  core.connect_started(now);
  core.step(kgroup::net::connection_state::connecting);
  setup_action a = setup.connected();
  REQUIRE(a.what == kind::send_api_versions);

  SECTION("authenticates, then re-authenticates with a fresh context") {
    a = setup.answer(now, api_versions_answer());
    REQUIRE(a.what == kind::send_sasl_handshake);
    CHECK(a.handshake.mechanism == "GSSAPI");
    CHECK(log->contexts == 1);
    a = setup.answer(now, encode_answer(kgroup::protocol::sasl_handshake_response{}, 1));
    REQUIRE(a.what == kind::send_sasl_authenticate);
    CHECK(a.authenticate.auth_bytes == b("AP-REQ"));
    a = setup.answer(now, encode_answer(auth(b("AP-REP")), a.version));
    REQUIRE(a.what == kind::send_sasl_authenticate);
    CHECK(a.authenticate.auth_bytes.empty());
    a = setup.answer(now, encode_answer(auth(offer(1, 0)), a.version));
    REQUIRE(a.what == kind::send_sasl_authenticate);
    CHECK(a.authenticate.auth_bytes == b(std::string("W:\x01\0\0\0", 6)));
    a = setup.answer(now, encode_answer(auth({}, 10'000), a.version));
    REQUIRE(a.what == kind::ready);
    CHECK(a.note.authenticated);
    CHECK(a.note.session_lifetime_ms == 10'000);

    a = setup.reauthenticate();
    REQUIRE(a.what == kind::send_sasl_handshake);
    CHECK(log->contexts == 2);  // a new security context (and service ticket check) per exchange
    a = setup.answer(now, encode_answer(kgroup::protocol::sasl_handshake_response{}, 1));
    a = setup.answer(now, encode_answer(auth(b("AP-REP")), a.version));
    a = setup.answer(now, encode_answer(auth(offer(1, 0)), a.version));
    a = setup.answer(now, encode_answer(auth({}, 10'000), a.version));
    CHECK(a.what == kind::reauthenticated);
  }
  SECTION("no credentials: fatal before the handshake, naming the keys to check") {
    fail_first = true;
    a = setup.answer(now, api_versions_answer());
    REQUIRE(a.what == kind::fatal);
    CHECK(a.error == make_error_code(kgroup::kafka_errc::sasl_authentication_failed));
    CHECK(a.message.find("Client not found in Kerberos database") != std::string::npos);
    CHECK(a.message.find("sasl.kerberos.keytab") != std::string::npos);
  }
  SECTION("an unreachable KDC: retried, not fatal") {
    kdc_down = true;
    a = setup.answer(now, api_versions_answer());
    CHECK(a.what == kind::fail);
  }
  SECTION("the broker refuses: fatal with its message and the Kerberos keys") {
    a = setup.answer(now, api_versions_answer());
    a = setup.answer(now, encode_answer(kgroup::protocol::sasl_handshake_response{}, 1));
    kgroup::protocol::sasl_authenticate_response r;
    r.error_code = 58;
    r.error_message =
        "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI";
    a = setup.answer(now, encode_answer(r, a.version));
    REQUIRE(a.what == kind::fatal);
    CHECK(a.message.find("SASL_AUTHENTICATION_FAILED") != std::string::npos);
    CHECK(a.message.find("sasl.kerberos.service.name") != std::string::npos);
  }
}
