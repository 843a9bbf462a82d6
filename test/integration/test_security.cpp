// kgroup over TLS and SASL (issue 15), through the security front (test/support/secure_front.hpp)
// in front of a librdkafka mock cluster: groups over every mechanism with and without TLS that
// join, rebalance and commit; mutual TLS; re-authentication (KIP-368) and token refresh while a
// group runs; OIDC; and each failure with its own clear error, raised from poll() without a hang.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "log_capture.hpp"
#include "mock_cluster.hpp"
#include "oidc_token_endpoint.hpp"
#include "secure_front.hpp"
#include "test_config.hpp"
#include "test_pki.hpp"

using namespace std::chrono_literals;
using kgroup::test::front_certificate;
using kgroup::test::log_capture;
using kgroup::test::mock_cluster;
using kgroup::test::secure_front;
using kgroup::test::secure_front_options;
using kgroup::test::test_config;
using kgroup::test::test_pki;
using steady = std::chrono::steady_clock;

namespace {

const std::string topic = "secured";
constexpr int partitions = 4;
constexpr int records = 40;

void seed(mock_cluster& mc) {
  mc.create_topic(topic, partitions);
  mc.produce(topic, records);
}

kgroup::Config base_config(const secure_front& front, const std::string& group) {
  return test_config(front.bootstrap_servers())
      .group(group)
      .earliest()
      .short_session(300ms)
      .retry_backoff(50ms)
      .reconnect_backoff(20ms, 200ms);
}

void add_tls(kgroup::Config& c) { c.set("ssl.ca.location", test_pki::get().ca.cert_path); }

std::set<kgroup::TopicPartition> all_partitions() {
  std::set<kgroup::TopicPartition> s;
  for (int p = 0; p < partitions; ++p) s.insert({topic, p});
  return s;
}

struct seen_records {
  std::set<std::pair<int, std::int64_t>> seen;
  int total = 0;
  void add(const kgroup::ConsumerRecords& rs) {
    for (const auto& r : rs) {
      seen.emplace(r.partition, r.offset);
      ++total;
    }
  }
};

// A front with TLS and one SASL mechanism for user alice.
secure_front_options sasl_ssl_front(const std::string& mechanism) {
  secure_front_options fo;
  fo.tls = true;
  fo.sasl_mechanisms = {mechanism};
  fo.users = {{"alice", "alice-secret"}};
  return fo;
}

// The client side of sasl_ssl_front().
void set_sasl_ssl(kgroup::Config& cfg, const std::string& mechanism, const std::string& password = "alice-secret") {
  add_tls(cfg);
  cfg.set("security.protocol", "SASL_SSL")
      .set("sasl.mechanism", mechanism)
      .set("sasl.username", "alice")
      .set("sasl.password", password);
}

// Subscribes and polls until every seeded record was seen or `limit` passed; returns how many
// distinct records were seen.
int read_all(kgroup::Consumer& c, std::chrono::seconds limit) {
  c.subscribe({topic});
  seen_records seen;
  const auto deadline = steady::now() + limit;
  while (static_cast<int>(seen.seen.size()) < records && steady::now() < deadline) seen.add(c.poll(50ms));
  return static_cast<int>(seen.seen.size());
}

std::int64_t committed_sum(kgroup::Consumer& c) {
  std::int64_t sum = 0;
  for (const auto& [tp, om] : c.committed(all_partitions(), 10s)) sum += om.offset;
  return sum;
}

// Two members: the first takes every partition, reads every record and commits; the second joins
// (a rebalance); more records arrive and the two read them; both commit. The committed offsets
// add up to the record count.
void group_consumes_and_commits(mock_cluster& mc, secure_front& front, const kgroup::Config& cfg) {
  kgroup::Consumer a(cfg);
  a.subscribe({topic});
  seen_records seen;
  const auto deadline = steady::now() + 40s;
  while ((a.assignment().size() != partitions || static_cast<int>(seen.seen.size()) < records) &&
         steady::now() < deadline) {
    seen.add(a.poll(50ms));
  }
  REQUIRE(static_cast<int>(seen.seen.size()) == records);
  a.commit_sync();

  kgroup::Consumer b(cfg);
  b.subscribe({topic});
  // Settled: both own partitions and together all of them (an eager rebalance empties a's
  // assignment before giving it its share).
  const auto settled = [&] {
    return !a.assignment().empty() && !b.assignment().empty() &&
           a.assignment().size() + b.assignment().size() == partitions;
  };
  while (!settled() && steady::now() < deadline) {
    seen.add(a.poll(50ms));
    seen.add(b.poll(50ms));
  }
  REQUIRE(settled());
  mc.produce(topic, 20);
  while (static_cast<int>(seen.seen.size()) < records + 20 && steady::now() < deadline) {
    seen.add(a.poll(50ms));
    seen.add(b.poll(50ms));
  }
  CHECK(static_cast<int>(seen.seen.size()) == records + 20);
  a.commit_sync();
  b.commit_sync();
  CHECK(committed_sum(a) == records + 20);
  const auto ma = a.metrics();
  CHECK(ma.authentication_failures_total == 0);
  if (front.options().sasl_mechanisms.empty()) {
    CHECK(ma.authentications_total == 0);
  } else {
    CHECK(ma.authentications_total >= 2);  // bootstrap, coordinator, partition leaders
  }
  a.close();
  b.close();
  const auto fc = front.counters();
  CHECK(fc.failed_authentications == 0);
  CHECK(fc.unauthenticated_requests == 0);
}

// Polls until poll() throws; returns the error (a default one if it never did within `limit`).
kgroup::Error poll_until_error(kgroup::Consumer& c, std::chrono::seconds limit = 20s) {
  const auto deadline = steady::now() + limit;
  while (steady::now() < deadline) {
    try {
      (void)c.poll(50ms);
    } catch (const kgroup::Error& e) {
      return e;
    }
  }
  return kgroup::Error(std::error_code{}, "poll() never failed");
}

}  // namespace

TEST_CASE("security: a kgroup group over each SASL mechanism, with and without TLS, joins, rebalances and commits",
          "[security][group]") {
  struct setup {
    const char* protocol;
    const char* mechanism;
  };
  const auto s = GENERATE(setup{"SASL_SSL", "SCRAM-SHA-256"}, setup{"SASL_PLAINTEXT", "SCRAM-SHA-512"},
                          setup{"SASL_SSL", "PLAIN"}, setup{"SASL_PLAINTEXT", "PLAIN"},
                          setup{"SASL_SSL", "OAUTHBEARER"}, setup{"SASL_PLAINTEXT", "OAUTHBEARER"});
  INFO(s.protocol << " " << s.mechanism);
  mock_cluster mc(2);
  seed(mc);
  secure_front_options fo;
  fo.tls = std::string(s.protocol) == "SASL_SSL";
  fo.sasl_mechanisms = {s.mechanism};
  fo.users = {{"alice", "alice-secret"}};
  secure_front front(mc, fo);
  auto cfg = base_config(front, std::string("g-") + s.protocol + "-" + s.mechanism);
  cfg.set("security.protocol", s.protocol).set("sasl.mechanism", s.mechanism);
  if (fo.tls) add_tls(cfg);
  if (std::string(s.mechanism) == "OAUTHBEARER") {
    cfg.set("sasl.oauthbearer.config", "principal=alice lifeSeconds=600");
  } else {
    cfg.set("sasl.username", "alice").set("sasl.password", "alice-secret");
  }
  group_consumes_and_commits(mc, front, cfg);
  const auto fc = front.counters();
  CHECK(fc.authentications >= 2);
  CHECK(fc.authentications_by_principal.at("alice") == fc.authentications + fc.reauthentications);
  CHECK(fc.authentications_by_mechanism.at(s.mechanism) == fc.authentications + fc.reauthentications);
  if (fo.tls) CHECK(fc.tls_handshakes == fc.connections_accepted);
}

TEST_CASE("security: mutual TLS with an encrypted client key; a Java JAAS line gives SCRAM credentials",
          "[security][group]") {
  mock_cluster mc(2);
  seed(mc);
  SECTION("mTLS") {
    secure_front_options fo;
    fo.tls = true;
    fo.require_client_certificate = true;
    secure_front front(mc, fo);
    auto cfg = base_config(front, "g-mtls");
    add_tls(cfg);
    cfg.set("security.protocol", "SSL")
        .set("ssl.certificate.location", test_pki::get().client.cert_path)
        .set("ssl.key.location", test_pki::get().client_key_encrypted_path)
        .set("ssl.key.password", test_pki::get().client_key_password);
    group_consumes_and_commits(mc, front, cfg);
    const auto fc = front.counters();
    CHECK(fc.client_certificates_verified > 0);
    CHECK(fc.client_certificates_verified == fc.tls_handshakes);
  }
  SECTION("mTLS with the certificate and key as PEM text, and SCRAM over it") {
    secure_front_options fo;
    fo.tls = true;
    fo.require_client_certificate = true;
    fo.sasl_mechanisms = {"SCRAM-SHA-512"};
    fo.users = {{"bob", "b0b-pw"}};
    secure_front front(mc, fo);
    auto cfg = base_config(front, "g-mtls-pem");
    cfg.set("security.protocol", "SASL_SSL")
        .set("ssl.ca.pem", test_pki::get().ca.cert_pem)
        .set("ssl.certificate.pem", test_pki::get().client.cert_pem)
        .set("ssl.key.pem", test_pki::get().client.key_pem)
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.jaas.config",
             "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"b0b-pw\";");
    group_consumes_and_commits(mc, front, cfg);
    CHECK(front.counters().authentications_by_principal.at("bob") > 0);
  }
}

TEST_CASE("security: refused credentials and untrusted brokers are fatal, raised from poll() with the broker, "
          "its reason and the key to check",
          "[security][failures]") {
  mock_cluster mc(1);
  seed(mc);
  auto fo = sasl_ssl_front("SCRAM-SHA-256");
  std::string password = "alice-secret";
  std::string mechanism = "SCRAM-SHA-256";
  std::vector<std::string> must_contain;
  std::vector<std::string> must_not_contain;
  std::error_code code;

  SECTION("wrong password") {
    password = "not-her-password";
    code = make_error_code(kgroup::kafka_errc::sasl_authentication_failed);
    must_contain = {"SASL_AUTHENTICATION_FAILED", "sasl.username and sasl.password"};
  }
  SECTION("a mechanism the broker does not enable") {
    mechanism = "PLAIN";
    code = make_error_code(kgroup::kafka_errc::unsupported_sasl_mechanism);
    must_contain = {"SCRAM-SHA-256", "sasl.mechanism"};
  }
  SECTION("untrusted CA") {
    fo.certificate = front_certificate::untrusted;
    code = make_error_code(kgroup::client_errc::tls_failed);
    must_contain = {"not trusted", "ssl.ca.location"};
  }
  SECTION("hostname mismatch") {
    fo.certificate = front_certificate::wrong_name;
    code = make_error_code(kgroup::client_errc::tls_failed);
    must_contain = {"does not name the address", "advertised listeners"};
    // Issue 31, lower items: the error must not talk the user into turning verification off.
    must_not_contain = {"identification.algorithm=none", "turns the check off"};
  }
  SECTION("expired certificate") {
    fo.certificate = front_certificate::expired;
    code = make_error_code(kgroup::client_errc::tls_failed);
    must_contain = {"expired", "validity period"};
  }
  SECTION("the broker requires a client certificate") {
    fo.require_client_certificate = true;
    code = make_error_code(kgroup::client_errc::tls_failed);
    must_contain = {"ssl.certificate.location"};
  }
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-fail");
  set_sasl_ssl(cfg, mechanism, password);
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  const auto started = steady::now();
  const kgroup::Error e = poll_until_error(c);
  INFO(e.what());
  CHECK(e.code() == code);
  CHECK(steady::now() - started < 15s);
  CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(front.port_of(1))) != std::string::npos);
  for (const auto& s : must_contain) CHECK(std::string(e.what()).find(s) != std::string::npos);
  for (const auto& s : must_not_contain) CHECK(std::string(e.what()).find(s) == std::string::npos);
  CHECK(std::string(e.what()).find(password) == std::string::npos);
  // Fatal: every later poll() raises it again, and close() does not hang.
  CHECK_THROWS_AS(c.poll(10ms), kgroup::Error);
  CHECK(c.metrics().authentication_failures_total >= 1);
  const auto before_close = steady::now();
  c.close(5s);
  CHECK(steady::now() - before_close < 8s);
}

TEST_CASE("security: an expired OAUTHBEARER token is refused by the broker, fatally, with its challenge",
          "[security][failures][oauth]") {
  mock_cluster mc(1);
  seed(mc);
  secure_front_options fo;
  fo.sasl_mechanisms = {"OAUTHBEARER"};
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-expired-token");
  cfg.set("security.protocol", "SASL_PLAINTEXT").set("sasl.mechanism", "OAUTHBEARER");
  cfg.set_oauthbearer_token_provider([] {
    kgroup::OAuthBearerToken t;
    t.value = kgroup::test::unsecured_jwt("svc", -60'000);
    t.principal = "svc";
    t.expires_at = std::chrono::system_clock::now() - 60s;
    return t;
  });
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  const kgroup::Error e = poll_until_error(c);
  INFO(e.what());
  CHECK(e.code() == make_error_code(kgroup::kafka_errc::sasl_authentication_failed));
  CHECK(std::string(e.what()).find("invalid_token") != std::string::npos);
  CHECK(front.counters().failed_authentications >= 1);
}

TEST_CASE("security: a connection cut in the middle of the SASL exchange is retried, not fatal",
          "[security][failures]") {
  mock_cluster mc(1);
  seed(mc);
  auto fo = sasl_ssl_front("PLAIN");
  fo.cut_handshake_connections = 3;
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-cut");
  set_sasl_ssl(cfg, "PLAIN");
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 30s) == records);
  CHECK(front.counters().cut_handshakes == 3);
  CHECK(c.metrics().authentication_failures_total == 0);
  c.close();
}

TEST_CASE("security: re-authentication (KIP-368) during a running group keeps every connection and request",
          "[security][group][reauth]") {
  mock_cluster mc(2);
  seed(mc);
  auto fo = sasl_ssl_front("SCRAM-SHA-256");
  fo.session_lifetime_ms = 1500;
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-reauth");
  set_sasl_ssl(cfg, "SCRAM-SHA-256");
  cfg.set("auto.commit.interval.ms", "200");
  kgroup::Consumer a(cfg);
  kgroup::Consumer b(cfg);
  a.subscribe({topic});
  b.subscribe({topic});
  seen_records seen;
  // Run for 5 s (three session lifetimes), reading, heartbeating and auto-committing throughout.
  const auto until = steady::now() + 5s;
  const auto settled = [&] {
    return !a.assignment().empty() && !b.assignment().empty() &&
           a.assignment().size() + b.assignment().size() == partitions;
  };
  // (Then until settled with every record read: slower builds, e.g. ASan, take longer to rebalance.)
  while (steady::now() < until ||
         ((!settled() || static_cast<int>(seen.seen.size()) < records) && steady::now() < until + 30s)) {
    seen.add(a.poll(50ms));
    seen.add(b.poll(50ms));
  }
  CHECK(static_cast<int>(seen.seen.size()) == records);
  CHECK(settled());
  a.commit_sync();
  b.commit_sync();
  CHECK(committed_sum(a) == records);
  const auto ma = a.metrics();
  CHECK(ma.reauthentications_total >= 2);
  CHECK(ma.authentication_failures_total == 0);
  const auto fc = front.counters();
  CHECK(fc.reauthentications >= 4);
  CHECK(fc.expired_sessions == 0);  // nobody outlived its session
  CHECK(fc.failed_authentications == 0);
  a.close();
  b.close();
}

// Issue 31, item 4: the re-authentication fell due while a JoinGroup was held by the coordinator
// (legitimately, up to the rebalance timeout). Sent behind it, the SaslHandshake timed out after
// request.timeout.ms, which closed the connection and failed the JoinGroup. Now a due
// re-authentication waits until nothing is in flight (new requests wait with it), as Java's does,
// and times from when it is sent.
TEST_CASE("security: a re-authentication due behind a long JoinGroup waits for it; nothing times out",
          "[security][group][reauth]") {
  mock_cluster mc(1);
  seed(mc);
  secure_front_options fo;
  fo.sasl_mechanisms = {"PLAIN"};
  fo.users = {{"alice", "alice-secret"}};
  fo.session_lifetime_ms = 1500;
  secure_front front(mc, fo);
  // The first JoinGroup is answered 4 s late: past the re-authentication (~1.3-1.4 s after the
  // connection authenticated) plus request.timeout.ms.
  mc.push_broker_request_errors(1, 11, {{0, 4000}});
  log_capture logs;
  auto cfg = base_config(front, "g-reauth-join");
  cfg.set("security.protocol", "SASL_PLAINTEXT")
      .set("sasl.mechanism", "PLAIN")
      .set("sasl.username", "alice")
      .set("sasl.password", "alice-secret")
      .set("request.timeout.ms", "1500");
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 30s) == records);
  const auto m = c.metrics();
  CHECK(m.reauthentications_total >= 1);
  CHECK(m.authentication_failures_total == 0);
  CHECK_FALSE(logs.has(kgroup::LogLevel::warn, {"timed out; closing the connection"}));
  CHECK(front.counters().failed_authentications == 0);
  c.close();
}

TEST_CASE("security: OAUTHBEARER tokens are refreshed before they expire, and re-authentication uses the new one",
          "[security][oauth][reauth]") {
  mock_cluster mc(1);
  seed(mc);
  secure_front_options fo;
  fo.sasl_mechanisms = {"OAUTHBEARER"};
  fo.session_lifetime_ms = 60'000;  // cut to the token's own expiry, as Kafka does
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-refresh");
  cfg.set("security.protocol", "SASL_PLAINTEXT").set("sasl.mechanism", "OAUTHBEARER");
  std::atomic<int> tokens{0};
  cfg.set_oauthbearer_token_provider([&tokens] {
    ++tokens;
    kgroup::OAuthBearerToken t;
    t.value = kgroup::test::unsecured_jwt("svc-refresh", 3000);  // the front's session ends with it
    t.principal = "svc-refresh";
    t.expires_at = std::chrono::system_clock::now() + 3s;
    return t;
  });
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  seen_records seen;
  const auto until = steady::now() + 7s;
  while (steady::now() < until) seen.add(c.poll(50ms));
  CHECK(static_cast<int>(seen.seen.size()) == records);
  CHECK(tokens >= 3);
  const auto fc = front.counters();
  CHECK(fc.reauthentications >= 2);
  CHECK(fc.expired_sessions == 0);
  CHECK(fc.failed_authentications == 0);
  c.close();
}

TEST_CASE("security: OIDC client credentials from an HTTPS token endpoint; a refused client is fatal",
          "[security][oauth]") {
  mock_cluster mc(1);
  seed(mc);
  kgroup::test::oidc_token_endpoint_options eo;
  eo.clients = {{"orders-app", "s3cr3t-value"}};
  kgroup::test::oidc_token_endpoint endpoint(eo);
  secure_front_options fo;
  fo.tls = true;
  fo.sasl_mechanisms = {"OAUTHBEARER"};
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-oidc");
  add_tls(cfg);
  cfg.set("security.protocol", "SASL_SSL")
      .set("sasl.mechanism", "OAUTHBEARER")
      .set("sasl.oauthbearer.method", "oidc")
      .set("sasl.oauthbearer.token.endpoint.url", endpoint.url())
      .set("sasl.oauthbearer.client.id", "orders-app")
      .set("https.ca.location", test_pki::get().ca.cert_path)
      .set("sasl.oauthbearer.scope", "kafka");
  SECTION("the right secret") {
    cfg.set("sasl.oauthbearer.client.secret", "s3cr3t-value");
    kgroup::Consumer c(cfg);
    CHECK(read_all(c, 20s) == records);
    CHECK(endpoint.tokens_issued() == 1);  // one token serves every connection
    CHECK(endpoint.last_scope() == "kafka");
    CHECK(front.counters().authentications_by_principal.at("orders-app") >= 2);
    c.close();
  }
  SECTION("a wrong secret") {
    cfg.set("sasl.oauthbearer.client.secret", "wrong-value");
    kgroup::Consumer c(cfg);
    c.subscribe({topic});
    const kgroup::Error e = poll_until_error(c);
    INFO(e.what());
    CHECK(e.code() == make_error_code(kgroup::kafka_errc::sasl_authentication_failed));
    CHECK(std::string(e.what()).find("HTTP 401") != std::string::npos);
    CHECK(std::string(e.what()).find("sasl.oauthbearer.client.secret") != std::string::npos);
    CHECK(std::string(e.what()).find("wrong-value") == std::string::npos);
    CHECK(front.counters().authentications == 0);
  }
}

// Issue 31, item 5: an identity provider that is busy (429 with Retry-After), slow (408) or
// down for a moment (503) is retried with backoff, honouring Retry-After; only a refusal of the
// client (401, 400) is fatal. A token answer above 1 MiB is refused and retried.
TEST_CASE("security: OIDC answers 429 (Retry-After), 408 and 503 are retried, not fatal; answers above 1 MiB are refused",
          "[security][oauth][oidc-retry]") {
  mock_cluster mc(1);
  seed(mc);
  kgroup::test::oidc_token_endpoint_options eo;
  eo.clients = {{"orders-app", "s3cr3t-value"}};
  kgroup::test::oidc_token_endpoint endpoint(eo);
  secure_front_options fo;
  fo.sasl_mechanisms = {"OAUTHBEARER"};
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-oidc-retry");
  cfg.set("security.protocol", "SASL_PLAINTEXT")
      .set("sasl.mechanism", "OAUTHBEARER")
      .set("sasl.oauthbearer.method", "oidc")
      .set("sasl.oauthbearer.token.endpoint.url", endpoint.url())
      .set("sasl.oauthbearer.client.id", "orders-app")
      .set("sasl.oauthbearer.client.secret", "s3cr3t-value")
      .set("https.ca.location", test_pki::get().ca.cert_path);
  int expected_requests = 0;
  SECTION("429 with Retry-After twice, then 408, then 503") {
    endpoint.script_next(2, {429, 1, 0});
    endpoint.script_next(1, {408, -1, 0});
    endpoint.script_next(1, {503, -1, 0});
    expected_requests = 5;
  }
  SECTION("a token answer of 2 MiB") {
    endpoint.script_next(1, {200, -1, std::size_t{2} << 20});
    expected_requests = 2;
  }
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  seen_records seen;
  const auto deadline = steady::now() + 30s;
  while (static_cast<int>(seen.seen.size()) < records && steady::now() < deadline) {
    try {
      seen.add(c.poll(50ms));
    } catch (const kgroup::Error& e) {
      FAIL("poll() threw: " << e.what());
    }
  }
  CHECK(static_cast<int>(seen.seen.size()) == records);
  // One request per failure (the connections share the retry schedule), then one token.
  CHECK(endpoint.requests() == expected_requests);
  const auto times = endpoint.request_times();
  if (expected_requests == 5 && times.size() >= 3) {
    // Retry-After: 1 was honoured after each 429 (the lower bound only: never a timing goal).
    CHECK(times[1] - times[0] >= 900ms);
    CHECK(times[2] - times[1] >= 900ms);
  }
  c.close();
}

// Issue 31, lower items: an encrypted client key without ssl.key.password never reaches
// OpenSSL's default password callback (which prompts on the terminal): a clear configuration
// error at construction instead.
TEST_CASE("security: an encrypted client key without ssl.key.password is a configuration error, never a prompt",
          "[security][config]") {
  const auto& pki = test_pki::get();
  kgroup::Config cfg{{"bootstrap.servers", "127.0.0.1:9"},
                     {"group.id", "g-key"},
                     {"security.protocol", "SSL"},
                     {"ssl.ca.location", pki.ca.cert_path},
                     {"ssl.certificate.location", pki.client.cert_path}};
  SECTION("a file") { cfg.set("ssl.key.location", pki.client_key_encrypted_path); }
  SECTION("PEM text") { cfg.set("ssl.key.pem", pki.client_key_encrypted_pem); }
  try {
    kgroup::Consumer c(cfg);
    FAIL("the consumer was created");
  } catch (const kgroup::Error& e) {
    INFO(e.what());
    CHECK(e.code() == make_error_code(kgroup::client_errc::invalid_config));
    CHECK(std::string(e.what()).find("encrypted") != std::string::npos);
    CHECK(std::string(e.what()).find("ssl.key.password is not set") != std::string::npos);
  }
}

TEST_CASE("security: a broker reached by host name is verified against the name (SNI); the check can be turned off",
          "[security]") {
  mock_cluster mc(1);
  seed(mc);
  secure_front_options fo;
  fo.tls = true;
  fo.advertised_host = "localhost";  // bootstrap and metadata name the brokers "localhost"
  std::string algorithm = "https";
  SECTION("the certificate names localhost") {}
  SECTION("a certificate for another name, with ssl.endpoint.identification.algorithm=none") {
    fo.certificate = front_certificate::wrong_name;
    algorithm = "none";
  }
  secure_front front(mc, fo);
  auto cfg = base_config(front, "g-hostname");
  add_tls(cfg);
  cfg.set("security.protocol", "SSL").set("ssl.endpoint.identification.algorithm", algorithm);
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 20s) == records);
  CHECK(front.counters().tls_handshake_failures == 0);
  c.close();
}
