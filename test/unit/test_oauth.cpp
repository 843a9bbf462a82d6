// OAUTHBEARER pieces (unsecured tokens, extensions, the client message, JAAS lines, refresh
// times) and the security settings a Config turns into (net/security.hpp): what is accepted,
// what is refused and how, and that no refusal shows a secret.
#include <catch2/catch.hpp>

#include <openssl/ssl.h>

#include <limits>
#include <memory>
#include <set>

#include "base/log.hpp"
#include "kgroup/config.hpp"
#include "kgroup/error.hpp"
#include "net/oidc.hpp"
#include "net/security.hpp"

#include <deque>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include "security/oauth.hpp"
#include "security/sasl.hpp"
#include "test_pki.hpp"

#include <openssl/x509.h>
#include <cstdio>
#include <fstream>

using namespace kgroup::security;
using namespace std::chrono_literals;

namespace {

std::string config_error(const kgroup::Config& c) {
  try {
    c.validate();
    (void)kgroup::net::make_transport_security(c);
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == make_error_code(kgroup::client_errc::invalid_config));
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("oauth: an unsecured token from sasl.oauthbearer.config carries its claims and extensions", "[oauth]") {
  unsecured_token_config cfg;
  std::string error;
  REQUIRE(parse_unsecured_config("principal=alice scope=read,write lifeSeconds=600 extension_logicalCluster=lkc-1",
                                 cfg, error));
  CHECK(cfg.principal == "alice");
  CHECK(cfg.life_seconds == 600);
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  const oauth_token t = make_unsecured_token(cfg, now);
  CHECK(t.expires_at == now + 600s);
  CHECK(t.value.rfind("eyJhbGciOiJub25lIn0.", 0) == 0);  // {"alg":"none"}
  CHECK(t.value.back() == '.');                           // no signature
  std::string sub;
  std::int64_t exp = 0;
  REQUIRE(read_jwt_claims(t.value, sub, exp));
  CHECK(sub == "alice");
  CHECK(exp == 1'700'000'600);
  CHECK(oauthbearer_client_message(t) ==
        "n,,\x01" "auth=Bearer " + t.value + "\x01logicalCluster=lkc-1\x01\x01");

  CHECK_FALSE(parse_unsecured_config("scope=x", cfg, error));
  CHECK(error.find("principal") != std::string::npos);
  CHECK_FALSE(parse_unsecured_config("principal=a lifeSeconds=-3", cfg, error));
  CHECK_FALSE(parse_unsecured_config("principal=a extension_auth=x", cfg, error));
  CHECK_FALSE(read_jwt_claims("not-a-jwt", sub, exp));
  CHECK_FALSE(read_jwt_claims("a.%%%.b", sub, exp));
}

TEST_CASE("oauth: extensions and JAAS lines parse as Java writes them", "[oauth]") {
  std::map<std::string, std::string> ext;
  std::string error;
  REQUIRE(parse_extensions("logicalCluster=lkc-1, identityPoolId=pool-2", ext, error));
  CHECK(ext == std::map<std::string, std::string>{{"identityPoolId", "pool-2"}, {"logicalCluster", "lkc-1"}});
  CHECK_FALSE(parse_extensions("auth=x", ext, error));
  CHECK_FALSE(parse_extensions("bad-name=x", ext, error));

  jaas_config j;
  REQUIRE(parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=\"bob\" "
                     "password=\"p\\\"w;d\" tokenauth=true;",
                     j, error));
  CHECK(j.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule");
  CHECK(j.options.at("username") == "bob");
  CHECK(j.options.at("password") == "p\"w;d");
  CHECK(j.options.at("tokenauth") == "true");
  CHECK_FALSE(parse_jaas("PlainLoginModule username=\"x\";", j, error));  // no control flag
  CHECK_FALSE(parse_jaas("M required password=\"unterminated;", j, error));
  CHECK(error.find("unterminated") != std::string::npos);
  CHECK(error.find("unterminated;") == std::string::npos);  // the value itself is not shown
  // Single quotes, as Java's JAAS parser takes them and Confluent Cloud's templates write them.
  REQUIRE(
      parse_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY7' "
                 "password='s3cr\\'t \"x\"';",
                 j, error));
  CHECK(j.options.at("username") == "KEY7");
  CHECK(j.options.at("password") == "s3cr't \"x\"");
  CHECK_FALSE(parse_jaas("M required password='unterminated;", j, error));
}

TEST_CASE("oauth: a token is refreshed after the window factor of its life, before it expires", "[oauth]") {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  CHECK(refresh_time(t0, t0 + 1000s, 0.8, 0.0) == t0 + 800s);
  CHECK(refresh_time(t0, t0 + 1000s, 0.8, 1.0) == t0 + 850s);
  CHECK(refresh_time(t0, t0 + 1000s, 1.0, 1.0) == t0 + 990s);  // at least 10 s before expiry
  CHECK(refresh_time(t0, t0 + 5s, 0.8, 0.0) == t0 + 1s);       // never sooner than 1 s
}

TEST_CASE("oauth: OAUTHBEARER is one SaslAuthenticate round with the token", "[oauth]") {
  sasl_credentials c;
  c.mechanism = "OAUTHBEARER";
  c.token.value = "tok.en.";
  sasl_session s(c);
  std::string error;
  REQUIRE(s.on_handshake({}, error));
  const auto msg = s.next();
  CHECK(std::string(msg.begin(), msg.end()) == "n,,\x01" "auth=Bearer tok.en.\x01\x01");
  kgroup::protocol::sasl_authenticate_response ok;
  ok.session_lifetime_ms = 1000;
  CHECK(s.on_authenticate(ok, error) == sasl_session::status::done);
  CHECK(s.session_lifetime_ms() == 1000);

  // A refused token: the broker's error challenge, the client's 0x01, then the failure.
  sasl_session refused(c);
  REQUIRE(refused.on_handshake({}, error));
  (void)refused.next();
  kgroup::protocol::sasl_authenticate_response challenge;
  const std::string json = R"({"status":"invalid_token"})";
  challenge.auth_bytes.assign(json.begin(), json.end());
  REQUIRE(refused.on_authenticate(challenge, error) == sasl_session::status::more);
  CHECK(refused.next() == kgroup::protocol::bytes{0x01});
  kgroup::protocol::sasl_authenticate_response failed;
  failed.error_code = 58;
  failed.error_message = "Authentication failed";
  CHECK(refused.on_authenticate(failed, error) == sasl_session::status::failed);
  CHECK(error.find("invalid_token") != std::string::npos);
  CHECK(error.find("tok.en.") == std::string::npos);
}

TEST_CASE("security config: what each protocol needs, refused with the key to fix and never a secret",
          "[oauth][config]") {
  using kgroup::Config;
  const Config plain{{"bootstrap.servers", "h:1"}};
  CHECK(kgroup::net::make_transport_security(plain) == nullptr);

  // GSSAPI (Java's default mechanism) needs a build with MIT Kerberos; with it, the default
  // credentials (the ticket cache) are used, checked only when a connection needs them.
  if (kgroup::security::kerberos_available()) {
    const auto s = kgroup::net::make_transport_security(
        Config{{"bootstrap.servers", "h:1"}, {"security.protocol", "SASL_SSL"}});
    REQUIRE(s != nullptr);
    CHECK(s->credentials.mechanism == "GSSAPI");
    CHECK(s->kerberos != nullptr);
  } else {
    const auto gssapi = config_error(Config{{"bootstrap.servers", "h:1"}, {"security.protocol", "SASL_SSL"}});
    CHECK(gssapi.find("sasl.mechanism=GSSAPI (the default)") != std::string::npos);
    CHECK(gssapi.find("built without Kerberos") != std::string::npos);
  }

  const auto no_password = config_error(Config{{"bootstrap.servers", "h:1"},
                                               {"security.protocol", "SASL_PLAINTEXT"},
                                               {"sasl.mechanism", "SCRAM-SHA-256"},
                                               {"sasl.username", "u"}});
  CHECK(no_password.find("sasl.password") != std::string::npos);

  // Credentials from a JAAS line, as a Java properties file gives them.
  Config jaas{{"bootstrap.servers", "h:1"},
              {"security.protocol", "SASL_PLAINTEXT"},
              {"sasl.mechanism", "PLAIN"},
              {"sasl.jaas.config",
               "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";"}};
  const auto sec = kgroup::net::make_transport_security(jaas);
  REQUIRE(sec);
  CHECK(sec->sasl);
  CHECK(sec->tls == nullptr);
  CHECK(sec->credentials.username == "u");
  CHECK(sec->credentials.password == "hunter2");
  CHECK(jaas.to_string().find("hunter2") == std::string::npos);

  const auto no_token = config_error(Config{{"bootstrap.servers", "h:1"},
                                            {"security.protocol", "SASL_SSL"},
                                            {"sasl.mechanism", "OAUTHBEARER"}});
  CHECK(no_token.find("set_oauthbearer_token_provider") != std::string::npos);

  const auto missing_ca = config_error(Config{{"bootstrap.servers", "h:1"},
                                              {"security.protocol", "SSL"},
                                              {"ssl.ca.location", "/nonexistent/ca.pem"}});
  CHECK(missing_ca.find("ssl.ca.location") != std::string::npos);
  CHECK(missing_ca.find("/nonexistent/ca.pem") != std::string::npos);

  const auto bad_key = config_error(Config{{"bootstrap.servers", "h:1"},
                                           {"security.protocol", "SSL"},
                                           {"ssl.key.pem", "-----BEGIN PRIVATE KEY-----\nsecretbytes\n"},
                                           {"ssl.key.password", "topsecret"}});
  CHECK(bad_key.find("ssl.key.pem") != std::string::npos);
  CHECK(bad_key.find("secretbytes") == std::string::npos);
  CHECK(bad_key.find("topsecret") == std::string::npos);

  const auto factor = config_error(Config{{"bootstrap.servers", "h:1"}, {"sasl.login.refresh.window.factor", "2"}});
  CHECK(factor.find("sasl.login.refresh.window.factor") != std::string::npos);
}

TEST_CASE("security config: a token provider's tokens are cached until their refresh time", "[oauth]") {
  kgroup::Config c{{"bootstrap.servers", "h:1"}, {"security.protocol", "SASL_PLAINTEXT"}, {"sasl.mechanism", "OAUTHBEARER"},
                   {"sasl.oauthbearer.extensions", "logicalCluster=lkc-9"}};
  int calls = 0;
  c.set_oauthbearer_token_provider([&calls] {
    ++calls;
    kgroup::OAuthBearerToken t;
    t.value = "token-" + std::to_string(calls);
    t.principal = "svc";
    t.expires_at = std::chrono::system_clock::now() + 1h;
    return t;
  });
  const auto sec = kgroup::net::make_transport_security(c);
  REQUIRE(sec);
  REQUIRE(sec->tokens);
  std::vector<std::string> got;
  boost::asio::io_context io;
  for (int i = 0; i < 3; ++i) {
    sec->tokens->get(io, [&](const std::string& err, bool, const oauth_token& t) {
      CHECK(err.empty());
      got.push_back(t.value);
      CHECK(t.extensions.at("logicalCluster") == "lkc-9");
    });
  }
  CHECK(got == std::vector<std::string>{"token-1", "token-1", "token-1"});
  CHECK(calls == 1);

  kgroup::Config failing = c;
  failing.set_oauthbearer_token_provider([]() -> kgroup::OAuthBearerToken { throw std::runtime_error("idp down"); });
  std::string error;
  kgroup::net::make_transport_security(failing)->tokens->get(
      io, [&](const std::string& err, bool permanent, const oauth_token&) {
        error = err;
        CHECK_FALSE(permanent);  // a provider may recover: retried
      });
  CHECK(error.find("idp down") != std::string::npos);
}

TEST_CASE("oidc: endpoint URLs and token answers", "[oauth]") {
  std::string host, port, target, error;
  REQUIRE(parse_https_url("https://idp.example.com/oauth2/token", host, port, target, error));
  CHECK(host == "idp.example.com");
  CHECK(port == "443");
  CHECK(target == "/oauth2/token");
  REQUIRE(parse_https_url("https://127.0.0.1:8443", host, port, target, error));
  CHECK(port == "8443");
  CHECK(target == "/");
  REQUIRE(parse_https_url("https://[::1]:9/t", host, port, target, error));
  CHECK(host == "::1");
  CHECK(port == "9");
  CHECK(target == "/t");
  REQUIRE(parse_https_url("https://[2001:db8::7]/realms/a%20b/token?audience=kafka&x=%2F#frag", host, port,
                          target, error));
  CHECK(host == "2001:db8::7");
  CHECK(port == "443");
  CHECK(target == "/realms/a%20b/token?audience=kafka&x=%2F");  // as written, without the fragment
  REQUIRE(parse_https_url("HTTPS://Idp.Example.com:65535?a=1", host, port, target, error));
  CHECK(host == "Idp.Example.com");
  CHECK(port == "65535");
  CHECK(target == "/?a=1");
  REQUIRE(parse_https_url("https://10.0.0.1:08443/", host, port, target, error));
  CHECK(host == "10.0.0.1");
  CHECK(port == "8443");
  CHECK(target == "/");
  CHECK_FALSE(parse_https_url("http://idp/token", host, port, target, error));
  CHECK(error.find("must be an https:// URL") != std::string::npos);
  CHECK_FALSE(parse_https_url("idp.example.com:443/token", host, port, target, error));
  CHECK(error.find("must be an https:// URL") != std::string::npos);
  CHECK_FALSE(parse_https_url("https://user:pw@idp/token", host, port, target, error));
  CHECK(error.find("credentials") != std::string::npos);
  CHECK(error.find("pw") == std::string::npos);
  for (const char* bad : {"", "idp.example.com/token", "https://[::1/token", "https://[::1]x/token",
                          "https://idp/to ken", "https://id p/token", "https://pw@[::1/token"}) {
    INFO(bad);
    CHECK_FALSE(parse_https_url(bad, host, port, target, error));
    CHECK(error.find("is not a valid URL") != std::string::npos);
    CHECK(error.find("expected https://host[:port][/path][?query]") != std::string::npos);
    CHECK(error.find("pw") == std::string::npos);
  }
  for (const char* no_host :
       {"https:///token", "https:idp/token", "https://:443/token", "https://[v1.x]/t"}) {
    INFO(no_host);
    CHECK_FALSE(parse_https_url(no_host, host, port, target, error));
    CHECK(error.find("no host") != std::string::npos);
  }
  for (const char* bad_port :
       {"https://idp:0/t", "https://idp:65536/t", "https://idp:99999999999/t", "https://idp:/t"}) {
    INFO(bad_port);
    CHECK_FALSE(parse_https_url(bad_port, host, port, target, error));
    CHECK(error.find("the port must be 1-65535") != std::string::npos);
  }

  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  unsecured_token_config cfg;
  cfg.principal = "svc-a";
  const auto jwt = make_unsecured_token(cfg, now).value;
  oauth_token t;
  REQUIRE(parse_token_response(R"({"access_token":")" + jwt + R"(","token_type":"Bearer","expires_in":300})",
                                            "client-1", now, t, error));
  CHECK(t.value == jwt);
  CHECK(t.principal == "svc-a");
  CHECK(t.expires_at == now + 300s);
  // Without expires_in the JWT's exp claim gives the lifetime; an opaque token needs expires_in.
  REQUIRE(parse_token_response(R"({"access_token":")" + jwt + R"("})", "client-1", now, t, error));
  CHECK(t.expires_at == now + 3600s);
  REQUIRE(parse_token_response(R"({"access_token":"opaque","expires_in":"60"})", "client-1", now, t, error));
  CHECK(t.principal == "client-1");
  CHECK_FALSE(parse_token_response(R"({"access_token":"opaque"})", "c", now, t, error));
  CHECK_FALSE(parse_token_response(R"({"token_type":"Bearer"})", "c", now, t, error));
  CHECK_FALSE(parse_token_response("<html>", "c", now, t, error));
}

// Issue 31, item 5: a refresh that fails (the identity provider is busy or down) keeps the
// current token while it is valid, so re-authentication and new connections go on; the next
// attempt waits for Retry-After (bounded) or the backoff; only without a valid token do callers
// see the error.
TEST_CASE("token cache: a failed refresh keeps the current token until it expires; retries wait for Retry-After",
          "[oauth][oidc-retry]") {
  using kgroup::net::token_cache;
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  auto now = t0;
  std::deque<token_cache::fetch_result> script;
  int calls = 0;
  const auto token = [](const std::string& value, std::chrono::system_clock::time_point expires) {
    token_cache::fetch_result r;
    r.token.value = value;
    r.token.principal = "svc";
    r.token.expires_at = expires;
    return r;
  };
  const auto failure = [](bool permanent, std::chrono::milliseconds retry_after) {
    token_cache::fetch_result r;
    r.error = "the token endpoint answered HTTP 429";
    r.permanent = permanent;
    r.retry_after = retry_after;
    return r;
  };
  auto cache = std::make_shared<token_cache>(
      [&](boost::asio::io_context&, const token_cache::fetched& done) {
        ++calls;
        REQUIRE_FALSE(script.empty());
        auto r = script.front();
        script.pop_front();
        done(r);
      },
      0.8, [&] { return now; });
  boost::asio::io_context io;
  struct got_t {
    std::string error, value;
    bool permanent = false;
  };
  const auto get = [&] {
    got_t g;
    cache->get(io, [&](const std::string& err, bool permanent, const oauth_token& t) {
      g.error = err;
      g.permanent = permanent;
      g.value = t.value;
    });
    return g;
  };

  script.push_back(token("token-A", t0 + 100s));
  CHECK(get().value == "token-A");
  CHECK(calls == 1);

  // Past the refresh time (at most 90 s), the provider says 429, come back in 30 s.
  now = t0 + 95s;
  script.push_back(failure(false, 30s));
  auto g = get();
  CHECK(g.error.empty());
  CHECK(g.value == "token-A");  // still valid: kept
  CHECK(calls == 2);
  now = t0 + 99s;
  CHECK(get().value == "token-A");
  CHECK(calls == 2);  // Retry-After: not asked again yet

  // Expired, still inside Retry-After: the error, without asking the provider.
  now = t0 + 101s;
  g = get();
  CHECK_FALSE(g.error.empty());
  CHECK_FALSE(g.permanent);
  CHECK(g.value.empty());
  CHECK(calls == 2);

  // After Retry-After: asked again; a 503 without Retry-After backs off (a fraction of a second).
  now = t0 + 126s;
  script.push_back(failure(false, -1ms));
  CHECK_FALSE(get().error.empty());
  CHECK(calls == 3);
  now += 50ms;
  CHECK_FALSE(get().error.empty());
  CHECK(calls == 3);
  now += 1s;
  script.push_back(token("token-B", now + 100s));
  CHECK(get().value == "token-B");
  CHECK(calls == 4);

  // A Retry-After of a day is bounded (60 s).
  now += 95s;
  script.push_back(failure(false, std::chrono::hours(24)));
  CHECK(get().value == "token-B");
  CHECK(calls == 5);
  now += 61s;
  script.push_back(token("token-C", now + 100s));
  CHECK(get().value == "token-C");
  CHECK(calls == 6);

  // A refusal (permanent) while the token is valid: kept too; once it expired, the refusal.
  now += 95s;
  script.push_back(failure(true, -1ms));
  CHECK(get().value == "token-C");
  now += 10s;
  script.push_back(failure(true, -1ms));
  g = get();
  CHECK(g.permanent);
  CHECK(g.value.empty());
}

// Issue 31, item 6: when the identity check cannot be set up (a host OpenSSL cannot check, an
// empty advertised host), the connection must fail, not go on accepting any trusted certificate.
TEST_CASE("tls: the certificate identity check is set up or refused, never skipped", "[oauth][tls]") {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  REQUIRE(ctx);
  const auto check = [&](const std::string& host, bool verify = true) {
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
    return kgroup::net::configure_identity_check(ssl.get(), host, verify);
  };
  CHECK(check("localhost").empty());
  CHECK(check("broker-1.kafka.example.com").empty());
  CHECK(check("127.0.0.1").empty());
  CHECK(check("::1").empty());
  const std::string empty = check("");
  CHECK(empty.find("empty") != std::string::npos);
  const std::string zone = check("fe80::1%eth0");
  CHECK(zone.find("fe80::1%eth0") != std::string::npos);
  CHECK(zone.find("cannot") != std::string::npos);
  // ssl.endpoint.identification.algorithm=none: nothing to check, whatever the host.
  CHECK(check("fe80::1%eth0", false).empty());
}

// Issue 31, lower items: RFC 7628 3.1 and KIP-342: extension keys are ALPHA, values VCHAR, SP,
// HTAB, CR, LF; the token has no \x01. A \x01 would end the key=value pair and inject others.
TEST_CASE("oauth: extension values and tokens that would inject key/value pairs are refused", "[oauth]") {
  std::map<std::string, std::string> ext;
  std::string error;
  CHECK_FALSE(parse_extensions(std::string("logicalCluster=lkc-1\x01" "auth=Bearer forged"), ext, error));
  CHECK(error.find("sasl.oauthbearer.extensions") != std::string::npos);
  CHECK_FALSE(parse_extensions(std::string("a=b\x7f"), ext, error));
  CHECK(parse_extensions("a=b c\td", ext, error));

  unsecured_token_config cfg;
  CHECK_FALSE(parse_unsecured_config(std::string("principal=a extension_k=v\x01x=y"), cfg, error));

  kgroup::Config c{{"bootstrap.servers", "h:1"}, {"security.protocol", "SASL_PLAINTEXT"}, {"sasl.mechanism", "OAUTHBEARER"}};
  SECTION("a token with \\x01") {
    c.set_oauthbearer_token_provider([] {
      kgroup::OAuthBearerToken t;
      t.value = "tok\x01" "en";
      t.principal = "svc";
      t.expires_at = std::chrono::system_clock::now() + 1h;
      return t;
    });
  }
  SECTION("an extension from the provider with \\x01") {
    c.set_oauthbearer_token_provider([] {
      kgroup::OAuthBearerToken t;
      t.value = "token";
      t.principal = "svc";
      t.extensions = {{"k", "v\x01" "auth=x"}};
      t.expires_at = std::chrono::system_clock::now() + 1h;
      return t;
    });
  }
  boost::asio::io_context io;
  std::string got_error, got_token;
  kgroup::net::make_transport_security(c)->tokens->get(io, [&](const std::string& err, bool, const oauth_token& t) {
    got_error = err;
    got_token = t.value;
  });
  CHECK(got_token.empty());
  CHECK(got_error.find("OAUTHBEARER") != std::string::npos);
  CHECK(got_error.find("tok\x01") == std::string::npos);  // never the token
}

// Issue 31, lower items: the broker's session lifetime is clamped: huge values cannot overflow
// the clock, tiny ones cannot make a re-authentication storm.
TEST_CASE("sasl: the re-authentication delay is Java's window, bounded both ways", "[oauth][reauth]") {
  using kgroup::security::reauthentication_delay;
  CHECK(reauthentication_delay(1000, 0.85) == 850ms);
  CHECK(reauthentication_delay(3'600'000, 0.9) == 3'240'000ms);
  CHECK(reauthentication_delay(1, 0.9) >= 500ms);
  CHECK(reauthentication_delay(0, 0.9) >= 500ms);
  for (const std::int64_t huge : {std::numeric_limits<std::int64_t>::max(), std::int64_t{1} << 62}) {
    const auto d = reauthentication_delay(huge, 0.95);
    CHECK(d > 0ms);
    CHECK(d <= std::chrono::hours(24 * 366 * 10));
    // Adding it to the steady clock cannot overflow.
    CHECK(std::chrono::steady_clock::now() + d > std::chrono::steady_clock::now());
  }
}

namespace {
struct lines_sink : kgroup::LogSink {
  std::vector<std::string> lines;
  kgroup::LogLevel min_level() const noexcept override { return kgroup::LogLevel::trace; }
  void log(kgroup::LogLevel level, std::string_view m) override {
    if (level >= kgroup::LogLevel::warn) lines.emplace_back(m);
  }
};
}  // namespace

// Issue 31, lower items: cleartext credentials and an unchecked broker identity are allowed
// (test clusters) but said once per client, through the library's log.
TEST_CASE("security config: PLAIN or OAUTHBEARER over SASL_PLAINTEXT and identification=none warn once", "[oauth][config]") {
  lines_sink sink;
  kgroup::detail::log_scope scope(&sink);
  const kgroup::Config plain{{"bootstrap.servers", "h:1"}, {"security.protocol", "SASL_PLAINTEXT"},
                             {"sasl.mechanism", "PLAIN"}, {"sasl.username", "u"}, {"sasl.password", "hunter2"}};
  REQUIRE(kgroup::net::make_transport_security(plain));
  REQUIRE(sink.lines.size() == 1);
  CHECK(sink.lines[0].find("SASL_PLAINTEXT") != std::string::npos);
  CHECK(sink.lines[0].find("PLAIN") != std::string::npos);
  CHECK(sink.lines[0].find("hunter2") == std::string::npos);
  sink.lines.clear();

  kgroup::Config scram = plain;
  scram.set("sasl.mechanism", "SCRAM-SHA-256");
  REQUIRE(kgroup::net::make_transport_security(scram));
  CHECK(sink.lines.empty());  // SCRAM never sends the password

  const kgroup::Config none{{"bootstrap.servers", "h:1"}, {"security.protocol", "SSL"},
                            {"ssl.endpoint.identification.algorithm", "none"}};
  REQUIRE(kgroup::net::make_transport_security(none));
  REQUIRE(sink.lines.size() == 1);
  CHECK(sink.lines[0].find("ssl.endpoint.identification.algorithm=none") != std::string::npos);
}

namespace {

// The subject CN of the client certificate a TLS context presents, or "" without one.
std::string client_certificate_cn(const kgroup::net::transport_security& sec) {
  X509* cert = SSL_CTX_get0_certificate(sec.tls->native_handle());
  if (cert == nullptr) return {};
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  return cn;
}

std::size_t trusted_certificates(const kgroup::net::transport_security& sec) {
  return static_cast<std::size_t>(
      sk_X509_OBJECT_num(X509_STORE_get0_objects(SSL_CTX_get_cert_store(sec.tls->native_handle()))));
}

}  // namespace

// Issue 35, item 7: Java's stores and PEM keys, librdkafka's keystore and verification switch.
TEST_CASE(
    "security config: PKCS#12 keystores and truststores, PEM stores (KIP-651); JKS is refused with the way "
    "to convert it, and no message shows a password",
    "[oauth][config][tls]") {
  const auto& pki = kgroup::test::test_pki::get();
  using kgroup::Config;
  SECTION("a PKCS#12 keystore and truststore, as Java's and librdkafka's files name them") {
    const Config c = Config::from_properties(
        "bootstrap.servers=h:1\nsecurity.protocol=SSL\n"
        "ssl.keystore.type=PKCS12\n"
        "ssl.keystore.location=" +
        pki.client_keystore_p12_path +
        "\n"
        "ssl.keystore.password=" +
        pki.keystore_password +
        "\n"
        "ssl.truststore.location=" +
        pki.ca_truststore_p12_path +
        "\n"
        "ssl.truststore.password=" +
        pki.truststore_password + "\n");
    const auto sec = kgroup::net::make_transport_security(c);
    REQUIRE(sec);
    REQUIRE(sec->tls);
    CHECK(client_certificate_cn(*sec) == "kgroup-test-client");
    CHECK(trusted_certificates(*sec) == 1);
    CHECK(c.to_string().find(pki.keystore_password) == std::string::npos);
    CHECK(c.to_string().find(pki.truststore_password) == std::string::npos);
  }
  SECTION(
      "Java's default store type (JKS) reads a PKCS#12 file, as Java 9+ does; a truststore without "
      "password") {
    const Config c{{"bootstrap.servers", "h:1"},
                   {"security.protocol", "SSL"},
                   {"ssl.keystore.location", pki.client_keystore_p12_path},
                   {"ssl.keystore.password", pki.keystore_password},
                   {"ssl.truststore.location", pki.ca_truststore_p12_path}};
    const auto sec = kgroup::net::make_transport_security(c);
    CHECK(client_certificate_cn(*sec) == "kgroup-test-client");
    CHECK(trusted_certificates(*sec) == 1);
  }
  SECTION("PEM stores: the KIP-651 keys as text, and a PEM keystore file") {
    const Config text{{"bootstrap.servers", "h:1"},
                      {"security.protocol", "SSL"},
                      {"ssl.keystore.type", "PEM"},
                      {"ssl.keystore.key", pki.client.key_pem},
                      {"ssl.keystore.certificate.chain", pki.client.cert_pem},
                      {"ssl.truststore.type", "PEM"},
                      {"ssl.truststore.certificates", pki.ca.cert_pem}};
    CHECK(client_certificate_cn(*kgroup::net::make_transport_security(text)) == "kgroup-test-client");
    CHECK(text.to_string().find("PRIVATE KEY") == std::string::npos);
    const Config file{{"bootstrap.servers", "h:1"},   {"security.protocol", "SSL"},
                      {"ssl.keystore.type", "PEM"},   {"ssl.keystore.location", pki.client_keystore_pem_path},
                      {"ssl.truststore.type", "PEM"}, {"ssl.truststore.location", pki.ca.cert_path}};
    CHECK(client_certificate_cn(*kgroup::net::make_transport_security(file)) == "kgroup-test-client");
  }
  SECTION("refusals") {
    const auto keystore = [&](const std::string& path, const std::string& password) {
      return config_error(Config{{"bootstrap.servers", "h:1"},
                                 {"security.protocol", "SSL"},
                                 {"ssl.keystore.location", path},
                                 {"ssl.keystore.password", password}});
    };
    const auto wrong = keystore(pki.client_keystore_p12_path, "not-the-Password-9");
    CHECK(wrong.find("ssl.keystore.password") != std::string::npos);
    CHECK(wrong.find("not-the-Password-9") == std::string::npos);
    const std::string jks = pki.directory + "/java.jks";
    {
      std::ofstream out(jks, std::ios::binary);
      out << std::string("\xFE\xED\xFE\xED\x00\x00\x00\x02", 8) << "rest-of-a-jks";
    }
    const auto refused = keystore(jks, "jks-Secret-1");
    CHECK(refused.find("JKS") != std::string::npos);
    CHECK(refused.find("keytool -importkeystore") != std::string::npos);
    CHECK(refused.find("jks-Secret-1") == std::string::npos);
    CHECK(keystore(pki.client.cert_path, "").find("not a PKCS#12 file") != std::string::npos);
    // A truststore is not a keystore: no key in it.
    CHECK(keystore(pki.ca_truststore_p12_path, pki.truststore_password).find("holds no") !=
          std::string::npos);
    // Two sources of one thing are refused rather than one silently preferred.
    const auto both = config_error(Config{{"bootstrap.servers", "h:1"},
                                          {"security.protocol", "SSL"},
                                          {"ssl.keystore.location", pki.client_keystore_p12_path},
                                          {"ssl.keystore.password", pki.keystore_password},
                                          {"ssl.certificate.location", pki.client.cert_path},
                                          {"ssl.key.location", pki.client.key_path}});
    CHECK(both.find("set one") != std::string::npos);
    const auto two_trusts = config_error(Config{{"bootstrap.servers", "h:1"},
                                                {"security.protocol", "SSL"},
                                                {"ssl.truststore.location", pki.ca_truststore_p12_path},
                                                {"ssl.ca.location", pki.ca.cert_path}});
    CHECK(two_trusts.find("set one") != std::string::npos);
    std::remove(jks.c_str());
  }
}

TEST_CASE(
    "security config: enable.ssl.certificate.verification=false (librdkafka's) turns off every certificate "
    "check, with a warning",
    "[oauth][config][tls]") {
  lines_sink sink;
  kgroup::detail::log_scope scope(&sink);
  const kgroup::Config off{{"bootstrap.servers", "h:1"},
                           {"security.protocol", "SSL"},
                           {"enable.ssl.certificate.verification", "false"}};
  const auto sec = kgroup::net::make_transport_security(off);
  REQUIRE(sec);
  CHECK(SSL_CTX_get_verify_mode(sec->tls->native_handle()) == SSL_VERIFY_NONE);
  CHECK_FALSE(sec->verify_hostname);
  REQUIRE(sink.lines.size() == 1);
  CHECK(sink.lines[0].find("enable.ssl.certificate.verification=false") != std::string::npos);

  const kgroup::Config on{{"bootstrap.servers", "h:1"}, {"security.protocol", "SSL"}};
  const auto checked = kgroup::net::make_transport_security(on);
  CHECK(SSL_CTX_get_verify_mode(checked->tls->native_handle()) == SSL_VERIFY_PEER);
  CHECK(checked->verify_hostname);
}

TEST_CASE("tls: ssl.enabled.protocols and ssl.cipher.suites restrict the handshake as Java's keys do",
          "[oauth][config][tls]") {
  using kgroup::Config;
  auto tls = [](std::vector<std::pair<std::string, std::string>> extra) {
    Config c{{"bootstrap.servers", "h:1"}, {"security.protocol", "SSL"}};
    for (const auto& [k, v] : extra) c.set(k, v);
    const auto sec = kgroup::net::make_transport_security(c);
    REQUIRE(sec);
    REQUIRE(sec->tls);
    return sec;
  };
  auto ciphers = [](const kgroup::net::transport_security& sec) {
    std::set<std::string> out;
    STACK_OF(SSL_CIPHER)* list = SSL_CTX_get_ciphers(sec.tls->native_handle());
    for (int i = 0; list && i < sk_SSL_CIPHER_num(list); ++i)
      out.insert(SSL_CIPHER_get_name(sk_SSL_CIPHER_value(list, i)));
    return out;
  };
  SECTION("by default TLS 1.2 and 1.3") {
    const auto sec = tls({});
    CHECK(SSL_CTX_get_min_proto_version(sec->tls->native_handle()) == TLS1_2_VERSION);
    CHECK(SSL_CTX_get_max_proto_version(sec->tls->native_handle()) == TLS1_3_VERSION);
  }
  SECTION("TLS 1.3 only") {
    const auto sec = tls({{"ssl.enabled.protocols", "TLSv1.3"}});
    CHECK(SSL_CTX_get_min_proto_version(sec->tls->native_handle()) == TLS1_3_VERSION);
    CHECK(SSL_CTX_get_max_proto_version(sec->tls->native_handle()) == TLS1_3_VERSION);
  }
  SECTION("versions below TLS 1.2 and unknown ones are refused by name") {
    for (const char* bad : {"TLSv1.1", "TLSv1", "TLSv9"}) {
      INFO(bad);
      Config c{{"bootstrap.servers", "h:1"}, {"security.protocol", "SSL"}, {"ssl.enabled.protocols", bad}};
      try {
        (void)kgroup::net::make_transport_security(c);
        FAIL("accepted");
      } catch (const kgroup::Error& e) {
        CHECK(e.code() == kgroup::client_errc::invalid_config);
        CHECK_THAT(e.what(), Catch::Contains("ssl.enabled.protocols") && Catch::Contains(bad));
      }
    }
  }
  SECTION("suites by their standard (Java's) or OpenSSL's (librdkafka's) names") {
    const auto before = ciphers(*tls({}));
    REQUIRE(before.count("ECDHE-RSA-AES128-GCM-SHA256") == 1);
    const auto sec =
        tls({{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ECDHE-ECDSA-AES128-GCM-SHA256"}});
    const auto after = ciphers(*sec);
    CHECK(after.count("ECDHE-RSA-AES256-GCM-SHA384") == 1);
    CHECK(after.count("ECDHE-ECDSA-AES128-GCM-SHA256") == 1);
    CHECK(after.count("ECDHE-RSA-AES128-GCM-SHA256") == 0);  // not named: not offered
  }
  SECTION("an unknown suite is refused by name") {
    Config c{
        {"bootstrap.servers", "h:1"}, {"security.protocol", "SSL"}, {"ssl.cipher.suites", "TLS_BOGUS_SUITE"}};
    try {
      (void)kgroup::net::make_transport_security(c);
      FAIL("accepted");
    } catch (const kgroup::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("ssl.cipher.suites") && Catch::Contains("TLS_BOGUS_SUITE"));
    }
  }
}
