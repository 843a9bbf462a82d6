// kgroup over SASL/GSSAPI (Kerberos, issue 35 item 4) with a real MIT KDC started by the test
// (test/support/test_kdc.hpp) and the security front's GSSAPI acceptor in front of the mock
// cluster (proven with librdkafka's Cyrus SASL in test_security_front.cpp): credentials from a
// keytab (librdkafka's keys and Java's Krb5LoginModule line), KIP-368 re-authentication, tickets
// renewed from the keytab when they run out, and the failures (a stale keytab, an unknown
// principal, a wrong service name) as clear fatal errors.
//
// Skipped with a warning only where kgroup was built without MIT Kerberos or the KDC packages
// are missing (.ci/deps installs them, so CI runs these).
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <set>
#include <string>

#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "mock_cluster.hpp"
#include "secure_front.hpp"
#include "security/gssapi.hpp"
#include "test_config.hpp"
#include "test_kdc.hpp"

using namespace std::chrono_literals;
using kgroup::test::mock_cluster;
using kgroup::test::secure_front;
using kgroup::test::secure_front_options;
using kgroup::test::test_config;
using kgroup::test::test_kdc;
using steady = std::chrono::steady_clock;

namespace {

const std::string topic = "kerberized";
constexpr int partitions = 3;
constexpr int records = 30;

bool kerberos_ready() {
  if (!kgroup::security::kerberos_available() || !secure_front::gssapi_available()) {
    WARN("kgroup was built without MIT Kerberos (libkrb5-dev): the GSSAPI tests do not run");
    return false;
  }
  if (auto why = test_kdc::missing()) {
    WARN("no KDC for the GSSAPI tests: " << *why);
    return false;
  }
  return true;
}

// A realm with the brokers' service keytab and a client alice (her keytab alice.keytab).
struct realm {
  explicit realm(kgroup::test::test_kdc_options o = {}, int alice_max_life = 0) : kdc(std::move(o)) {
    service_keytab = kdc.service_keytab();
    kdc.add_principal("alice", alice_max_life);
    alice_keytab = kdc.export_keytab("alice.keytab", {"alice"});
  }
  test_kdc kdc;
  std::string service_keytab;
  std::string alice_keytab;
};

secure_front_options gssapi_front(const realm& r) {
  secure_front_options fo;
  fo.sasl_mechanisms = {"GSSAPI"};
  fo.gssapi_keytab = r.service_keytab;
  return fo;
}

// The topic every case reads, with its records.
void seed(mock_cluster& mc) {
  mc.create_topic(topic, partitions);
  mc.produce(topic, records);
}

kgroup::Config gssapi_config(const secure_front& front, const std::string& group) {
  kgroup::Config cfg = test_config(front.bootstrap_servers())
                           .group(group)
                           .earliest()
                           .short_session(300ms)
                           .retry_backoff(50ms)
                           .reconnect_backoff(20ms, 200ms);
  cfg.set("security.protocol", "SASL_PLAINTEXT").set("sasl.mechanism", "GSSAPI");
  return cfg;
}

// Polls until every record was seen or `limit` passed (at least `at_least`); distinct records seen.
int read_all(kgroup::Consumer& c, std::chrono::milliseconds limit, std::chrono::milliseconds at_least = 0ms) {
  c.subscribe({topic});
  std::set<std::pair<int, std::int64_t>> seen;
  const auto start = steady::now();
  while ((static_cast<int>(seen.size()) < records || steady::now() - start < at_least) &&
         steady::now() - start < limit) {
    for (const auto& r : c.poll(50ms)) seen.emplace(r.partition, r.offset);
  }
  return static_cast<int>(seen.size());
}

kgroup::Error poll_until_error(kgroup::Consumer& c, std::chrono::seconds limit = 15s) {
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

// AS requests the KDC answered with a ticket for `client` (its log, one line each).
int tickets_issued_to(const test_kdc& kdc, const std::string& client) {
  std::ifstream f(kdc.dir() + "/kdc.log");
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.find("AS_REQ") != std::string::npos && line.find("ISSUE") != std::string::npos &&
        line.find(client + " for krbtgt/") != std::string::npos) {
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("kerberos: a consumer authenticates with GSSAPI from a keytab and consumes",
          "[security][kerberos]") {
  if (!kerberos_ready()) return;
  realm r;
  mock_cluster mc(2);
  seed(mc);
  secure_front front(mc, gssapi_front(r));
  auto cfg = gssapi_config(front, "g-krb");
  const std::string how = GENERATE(as<std::string>{}, "librdkafka keys", "JAAS line");
  INFO(how);
  if (how == "librdkafka keys") {
    cfg.set("sasl.kerberos.principal", r.kdc.principal("alice")).set("sasl.kerberos.keytab", r.alice_keytab);
  } else {
    cfg.set("sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            "keyTab=\"" +
                r.alice_keytab + "\" principal=\"alice@" + r.kdc.realm() + "\";");
  }
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 20s) == records);
  c.commit_sync();
  const auto m = c.metrics();
  CHECK(m.authentication_failures_total == 0);
  CHECK(m.authentications_total >= 2);  // bootstrap, coordinator, leaders
  c.close();
  const auto n = front.counters();
  CHECK(n.failed_authentications == 0);
  CHECK(n.unauthenticated_requests == 0);
  CHECK(n.authentications >= 2);
  CHECK(n.authentications_by_mechanism.at("GSSAPI") == n.authentications);
  CHECK(n.authentications_by_principal.at("alice@" + r.kdc.realm()) == n.authentications);
  // One ticket-granting ticket from the keytab served every connection (a MEMORY cache per client).
  CHECK(tickets_issued_to(r.kdc, "alice@" + r.kdc.realm()) == 1);
}

TEST_CASE(
    "kerberos: a stale keytab, an unknown principal and a wrong service name are fatal with the GSS reason",
    "[security][kerberos][failures]") {
  if (!kerberos_ready()) return;
  realm r;
  mock_cluster mc(1);
  seed(mc);
  secure_front front(mc, gssapi_front(r));
  auto cfg = gssapi_config(front, "g-krb-fail");
  std::vector<std::string> must_contain;
  std::vector<std::string> must_contain_one;
  SECTION("the principal's key changed after the keytab was exported") {
    r.kdc.change_key("alice");
    cfg.set("sasl.kerberos.principal", r.kdc.principal("alice")).set("sasl.kerberos.keytab", r.alice_keytab);
    must_contain = {"sasl.kerberos.keytab"};
    // MIT's words for it depend on the path taken (preauthentication or not).
    must_contain_one = {"Password incorrect", "Decrypt integrity check failed", "Preauthentication failed"};
  }
  SECTION("a principal the KDC does not know") {
    r.kdc.add_principal("mallory");
    const std::string keytab = r.kdc.export_keytab("mallory.keytab", {"mallory"});
    r.kdc.kadmin("delprinc -force " + r.kdc.principal("mallory"));
    cfg.set("sasl.kerberos.principal", r.kdc.principal("mallory")).set("sasl.kerberos.keytab", keytab);
    must_contain = {"not found in Kerberos database", "mallory@", "sasl.kerberos.principal"};
  }
  SECTION("a keytab without the principal") {
    cfg.set("sasl.kerberos.principal", r.kdc.principal("bob")).set("sasl.kerberos.keytab", r.alice_keytab);
    must_contain = {"bob@", "sasl.kerberos.keytab"};
  }
  SECTION("a service the KDC does not know") {
    cfg.set("sasl.kerberos.principal", r.kdc.principal("alice"))
        .set("sasl.kerberos.keytab", r.alice_keytab)
        .set("sasl.kerberos.service.name", "kafka-typo");
    must_contain = {"kafka-typo", "not found in Kerberos database"};
  }
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  const auto started = steady::now();
  const kgroup::Error e = poll_until_error(c);
  INFO(e.what());
  CHECK(e.code() == make_error_code(kgroup::kafka_errc::sasl_authentication_failed));
  CHECK(steady::now() - started < 10s);
  for (const auto& s : must_contain) CHECK(std::string(e.what()).find(s) != std::string::npos);
  if (!must_contain_one.empty()) {
    bool found = false;
    for (const auto& s : must_contain_one)
      found = found || std::string(e.what()).find(s) != std::string::npos;
    CHECK(found);
  }
  CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(front.port_of(1))) != std::string::npos);
  CHECK_THROWS_AS(c.poll(10ms), kgroup::Error);  // fatal: raised again
  CHECK(front.counters().authentications == 0);
  c.close(5s);
}

TEST_CASE("kerberos: a KDC that does not answer is retried, not fatal; the consumer goes on once it is back",
          "[security][kerberos]") {
  if (!kerberos_ready()) return;
  realm r;
  mock_cluster mc(1);
  seed(mc);
  secure_front front(mc, gssapi_front(r));
  auto cfg = gssapi_config(front, "g-krb-kdc-down");
  cfg.set("sasl.kerberos.principal", r.kdc.principal("alice")).set("sasl.kerberos.keytab", r.alice_keytab);
  r.kdc.stop();
  kgroup::Consumer c(cfg);
  c.subscribe({topic});
  const auto until = steady::now() + 2s;
  while (steady::now() < until) CHECK_NOTHROW(c.poll(50ms));  // retried with the backoff
  CHECK(front.counters().authentications == 0);
  r.kdc.restart();
  CHECK(read_all(c, 20s) == records);
  CHECK(front.counters().authentications >= 1);
  c.close();
}

TEST_CASE("kerberos: a keytab that cannot be read is a configuration error", "[security][kerberos][config]") {
  if (!kgroup::security::kerberos_available()) return;
  kgroup::Config cfg = test_config("127.0.0.1:9").group("g");
  cfg.set("security.protocol", "SASL_PLAINTEXT").set("sasl.mechanism", "GSSAPI");
  SECTION("missing file") {
    cfg.set("sasl.kerberos.principal", "alice").set("sasl.kerberos.keytab", "/nonexistent/alice.keytab");
    try {
      kgroup::Consumer c(cfg);
      FAIL("constructed");
    } catch (const kgroup::Error& e) {
      CHECK(std::string(e.what()).find("sasl.kerberos.keytab: cannot read '/nonexistent/alice.keytab'") !=
            std::string::npos);
    }
  }
  SECTION("a keytab without a principal") {
    cfg.set("sasl.kerberos.keytab", "/nonexistent/alice.keytab");
    CHECK_THROWS_WITH(kgroup::Consumer(cfg), Catch::Contains("needs sasl.kerberos.principal"));
  }
  SECTION("a JAAS line for another mechanism") {
    cfg.set("sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" "
            "password=\"p\";");
    CHECK_THROWS_WITH(kgroup::Consumer(cfg), Catch::Contains("Krb5LoginModule"));
  }
  SECTION("useKeyTab=true without keyTab") {
    cfg.set("sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true principal=\"a\";");
    CHECK_THROWS_WITH(kgroup::Consumer(cfg), Catch::Contains("needs keyTab"));
  }
}

TEST_CASE("kerberos: KIP-368 re-authentication with GSSAPI keeps the group running",
          "[security][kerberos][reauth]") {
  if (!kerberos_ready()) return;
  realm r;
  mock_cluster mc(2);
  seed(mc);
  auto fo = gssapi_front(r);
  fo.session_lifetime_ms = 1500;
  secure_front front(mc, fo);
  auto cfg = gssapi_config(front, "g-krb-reauth");
  cfg.set("sasl.kerberos.principal", r.kdc.principal("alice")).set("sasl.kerberos.keytab", r.alice_keytab);
  cfg.set("auto.commit.interval.ms", "200");
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 25s, 4s) == records);
  const auto m = c.metrics();
  CHECK(m.reauthentications_total >= 2);
  CHECK(m.authentication_failures_total == 0);
  c.close();
  const auto n = front.counters();
  CHECK(n.reauthentications >= 2);
  CHECK(n.expired_sessions == 0);
  CHECK(n.failed_authentications == 0);
}

TEST_CASE(
    "kerberos: tickets that run out are renewed from the keytab; the broker's session follows the ticket",
    "[security][kerberos][reauth]") {
  if (!kerberos_ready()) return;
  // alice's tickets live 3 s. The front caps each session at the ticket's remaining life (as Kafka
  // does with connections.max.reauth.ms set, here to a minute), so the client re-authenticates before each
  // ticket ends and needs new ones: MIT Kerberos gets them from the keytab (kgroup's cred store names it as
  // the client keytab).
  realm r({}, 3);
  mock_cluster mc(1);
  seed(mc);
  auto fo = gssapi_front(r);
  fo.session_lifetime_ms = 60'000;  // Kafka caps only with connections.max.reauth.ms set
  secure_front front(mc, fo);
  auto cfg = gssapi_config(front, "g-krb-renew");
  cfg.set("sasl.kerberos.principal", r.kdc.principal("alice")).set("sasl.kerberos.keytab", r.alice_keytab);
  kgroup::Consumer c(cfg);
  CHECK(read_all(c, 25s, 8500ms) == records);
  const auto m = c.metrics();
  CHECK(m.authentication_failures_total == 0);
  CHECK(m.reauthentications_total >= 2);
  c.close();
  const auto n = front.counters();
  CHECK(n.failed_authentications == 0);
  CHECK(n.expired_sessions == 0);
  CHECK(n.reauthentications >= 2);
  CHECK(tickets_issued_to(r.kdc, "alice@" + r.kdc.realm()) >= 2);  // renewed from the keytab
}
