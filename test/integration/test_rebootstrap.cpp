// Rebootstrap (issue 35, item 1; KIP-899, KIP-1102): the client goes back to bootstrap.servers
// when no broker it knows from metadata can be reached, when metadata has been missing for
// metadata.recovery.rebootstrap.trigger.ms, or when a broker answers REBOOTSTRAP_REQUIRED; with
// metadata.recovery.strategy=none it never does. The decisions are net/metadata_recovery.hpp's
// (unit-tested in test/unit/test_metadata_recovery.cpp); here the cluster carries them out
// against fake brokers and both mocks ([net]), and consumer groups live through their brokers
// being decommissioned or hidden from metadata on librdkafka 2.15.1's mock ([modern]: its
// rd_kafka_mock_broker_decommission and _remove_from_metadata). Run the [modern] cases by hand
// with `LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests
// "[rebootstrap]"`.
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "fake_broker.hpp"
#include "group_harness.hpp"
#include "io_wait.hpp"
#include "kgroup/consumer.hpp"
#include "log_capture.hpp"
#include "mock_cluster.hpp"
#include "net/cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace protocol = kgroup::protocol;
using kgroup::LogLevel;
using kgroup::net::channel;
using kgroup::net::cluster;
using kgroup::net::cluster_options;
using kgroup::test::eventually;
using kgroup::test::fake_broker;
using kgroup::test::log_capture;
using kgroup::test::mock_cluster;
using kgroup::test::refresh;
using kgroup::test::run_for;
using kgroup::test::run_until;
using kgroup::test::test_config;

namespace {

constexpr std::int16_t metadata_key = protocol::metadata_request::api_key;
constexpr std::int16_t api_versions_key = protocol::api_versions_request::api_key;

cluster_options options_for(const std::string& bootstrap, const std::string& strategy,
                            std::initializer_list<std::pair<const char*, const char*>> keys = {}) {
  test_config t(bootstrap);
  t.set("request.timeout.ms", "2000").reconnect_backoff(20ms, 200ms).retry_backoff(20ms, 200ms);
  t.set("metadata.recovery.strategy", strategy);
  for (const auto& [k, v] : keys) t.set(k, v);
  kgroup::Config cfg = t;
  cfg.validate();
  return cluster_options::from_config(cfg);
}

// A Metadata answer naming `brokers` ({node id, port} on loopback) as the cluster.
protocol::metadata_response cluster_of(
    std::initializer_list<std::pair<std::int32_t, std::uint16_t>> brokers) {
  protocol::metadata_response m;
  for (const auto& [id, port] : brokers) m.brokers.push_back({id, "127.0.0.1", port, std::nullopt});
  m.cluster_id = "fake";
  m.controller_id = m.brokers.empty() ? -1 : m.brokers.front().node_id;
  return m;
}

fake_broker::reply answer(const fake_broker::request& r, const protocol::metadata_response& m) {
  return fake_broker::reply{fake_broker::response(r, m)};
}

// The bootstrap server of the [net] cases: its first Metadata answer names broker 7 (another fake
// broker, at `seven`); from the second on it names itself as broker 1 (and broker 7 too, at
// `seven`, when `seven_after` is set).
struct bootstrap_server {
  std::uint16_t seven = 0;
  std::optional<std::uint16_t> seven_after;
  fake_broker broker{[this](const fake_broker::request& r) -> std::optional<fake_broker::reply> {
    if (r.api_key != metadata_key) return std::nullopt;
    if (r.index == 1) return answer(r, cluster_of({{7, seven}}));
    if (seven_after) return answer(r, cluster_of({{1, broker.port()}, {7, *seven_after}}));
    return answer(r, cluster_of({{1, broker.port()}}));
  }};
  explicit bootstrap_server(std::uint16_t seven_port, std::optional<std::uint16_t> later = std::nullopt)
      : seven(seven_port), seven_after(later) {}
};

std::string strategy_name(bool recover) {
  return recover ? "rebootstrap" : "none";
}

}  // namespace

// ---- the cluster, against fake brokers ---------------------------------------------------------

TEST_CASE("rebootstrap: no broker known from metadata can be reached", "[net][rebootstrap]") {
  const bool recover = GENERATE(true, false);
  INFO("metadata.recovery.strategy=" << strategy_name(recover));
  log_capture log;
  // Broker 7 answers as itself until it is decommissioned (stopped: its connections close and
  // new ones are refused).
  fake_broker seven([&seven](const fake_broker::request& r) -> std::optional<fake_broker::reply> {
    if (r.api_key != metadata_key) return std::nullopt;
    return answer(r, cluster_of({{7, seven.port()}}));
  });
  bootstrap_server boot(seven.port());
  asio::io_context io;
  auto opts = options_for(boot.broker.bootstrap(), strategy_name(recover));
  const auto wire = opts.connection.wire;
  auto c = std::make_shared<cluster>(io, std::move(opts));
  CHECK(c->bootstrapping());
  REQUIRE_FALSE(refresh(io, *c));
  CHECK_FALSE(c->bootstrapping());
  CHECK(c->metadata().brokers.count(7) == 1);
  // From now on metadata comes from the brokers metadata named, not from the bootstrap server.
  REQUIRE_FALSE(refresh(io, *c));
  CHECK(seven.requests(metadata_key) == 1);
  CHECK(boot.broker.requests(metadata_key) == 1);

  seven.stop();
  if (recover) {
    CHECK_FALSE(refresh(io, *c));
    CHECK(c->rebootstraps() == 1);
    CHECK(wire->rebootstraps == 1);
    CHECK(boot.broker.requests(metadata_key) == 2);
    CHECK(c->metadata().brokers.count(1) == 1);
    CHECK(c->metadata().brokers.count(7) == 0);
    CHECK_FALSE(c->bootstrapping());
    CHECK(log.has(LogLevel::info,
                  {"rebootstrapping from bootstrap.servers " + boot.broker.bootstrap(),
                   "no broker known from metadata can be reached", "forgetting the 1 broker(s)"}));
  } else {
    CHECK(refresh(io, *c, std::nullopt, 1500ms));  // it keeps retrying broker 7 until the refresh gives up
    CHECK(c->rebootstraps() == 0);
    CHECK(wire->rebootstraps == 0);
    CHECK(boot.broker.requests(metadata_key) == 1);
    CHECK(c->metadata().brokers.count(7) == 1);
    CHECK_FALSE(log.has(LogLevel::info, {"rebootstrapping"}));
  }
  c->close();
}

TEST_CASE("rebootstrap: metadata missing for metadata.recovery.rebootstrap.trigger.ms",
          "[net][rebootstrap]") {
  const bool recover = GENERATE(true, false);
  INFO("metadata.recovery.strategy=" << strategy_name(recover));
  log_capture log;
  // Broker 7 stays reachable but, from its second answer on, names no brokers (as a broker
  // starting up does): an attempt that failed, for the trigger's clock (Java counts it so).
  fake_broker seven([&seven](const fake_broker::request& r) -> std::optional<fake_broker::reply> {
    if (r.api_key != metadata_key) return std::nullopt;
    return answer(r, r.index == 1 ? cluster_of({{7, seven.port()}}) : cluster_of({}));
  });
  bootstrap_server boot(seven.port());
  asio::io_context io;
  auto c = std::make_shared<cluster>(io, options_for(boot.broker.bootstrap(), strategy_name(recover),
                                                     {{"metadata.recovery.rebootstrap.trigger.ms", "300"}}));
  REQUIRE_FALSE(refresh(io, *c));  // boot: broker 7
  REQUIRE_FALSE(refresh(io, *c));  // 7: itself
  const auto started = std::chrono::steady_clock::now();
  REQUIRE_FALSE(refresh(io, *c));  // 7: nobody; the clock runs from here
  CHECK(c->rebootstraps() == 0);
  // Refreshes every 50 ms: the first one past the trigger rebootstraps.
  while (c->rebootstraps() == 0 && std::chrono::steady_clock::now() - started < 1500ms) {
    run_for(io, 50ms);
    (void)refresh(io, *c);
  }
  if (recover) {
    CHECK(c->rebootstraps() == 1);
    CHECK(std::chrono::steady_clock::now() - started >= 300ms);
    CHECK(boot.broker.requests(metadata_key) == 2);
    CHECK(c->metadata().brokers.count(1) == 1);
    CHECK(log.has(LogLevel::info, {"rebootstrapping", "metadata.recovery.rebootstrap.trigger.ms"}));
  } else {
    CHECK(c->rebootstraps() == 0);
    CHECK(boot.broker.requests(metadata_key) == 1);
  }
  c->close();
}

TEST_CASE("rebootstrap: a broker answers ApiVersions with REBOOTSTRAP_REQUIRED", "[net][rebootstrap]") {
  const bool recover = GENERATE(true, false);
  INFO("metadata.recovery.strategy=" << strategy_name(recover));
  log_capture log;
  fake_broker seven([](const fake_broker::request& r) -> std::optional<fake_broker::reply> {
    if (r.api_key != api_versions_key) return std::nullopt;
    protocol::api_versions_response refused;
    refused.error_code = 129;
    refused.api_keys = fake_broker::default_versions();
    return fake_broker::reply{fake_broker::response(r, refused)};
  });
  bootstrap_server boot(seven.port());
  asio::io_context io;
  auto c = std::make_shared<cluster>(io, options_for(boot.broker.bootstrap(), strategy_name(recover)));
  REQUIRE_FALSE(refresh(io, *c));  // boot: broker 7
  if (recover) {
    // To 7, whose ApiVersions answer asks for a rebootstrap; then to the bootstrap server again.
    CHECK_FALSE(refresh(io, *c));
    CHECK(seven.requests(api_versions_key) == 1);
    CHECK(seven.requests(metadata_key) == 0);
    CHECK(c->rebootstraps() == 1);
    CHECK(boot.broker.requests(metadata_key) == 2);
    CHECK(log.has(LogLevel::info, {"rebootstrapping", "REBOOTSTRAP_REQUIRED", "broker 7"}));
  } else {
    // The attempts fail with the broker's code, and are retried on broker 7 alone.
    CHECK(refresh(io, *c, std::nullopt, 1000ms) == make_error_code(kgroup::kafka_errc::rebootstrap_required));
    CHECK(seven.requests(api_versions_key) >= 2);
    CHECK(c->rebootstraps() == 0);
    CHECK(boot.broker.requests(metadata_key) == 1);
    CHECK(log.has(LogLevel::warn, {"REBOOTSTRAP_REQUIRED", "metadata.recovery.strategy=none"}));
  }
  c->close();
}

TEST_CASE("rebootstrap: a Metadata v13 answer's REBOOTSTRAP_REQUIRED; working connections are kept",
          "[net][rebootstrap]") {
  log_capture log;
  std::uint16_t moved_to = 0;
  // Broker 7: answers as itself, then (second answer) REBOOTSTRAP_REQUIRED as its top-level error,
  // then names itself at another address.
  fake_broker seven([&](const fake_broker::request& r) -> std::optional<fake_broker::reply> {
    if (r.api_key != metadata_key) return std::nullopt;
    if (r.index == 2) {
      protocol::metadata_response m;
      m.error_code = 129;
      return answer(r, m);
    }
    return answer(r, cluster_of({{7, r.index == 1 ? seven.port() : moved_to}}));
  });
  bootstrap_server boot(seven.port(), seven.port());
  moved_to = boot.broker.port();
  asio::io_context io;
  auto c = std::make_shared<cluster>(io, options_for(boot.broker.bootstrap(), "rebootstrap"));
  REQUIRE_FALSE(refresh(io, *c));  // boot: broker 7
  REQUIRE_FALSE(refresh(io, *c));  // 7: itself
  // The group and offsets channels to 7 (a coordinator's connections, say), ready.
  auto group = c->broker(7, channel::group);
  auto offsets = c->broker(7, channel::offsets);
  REQUIRE(group);
  REQUIRE(offsets);
  int ready = 0;
  group->when_ready([&](std::error_code ec) { ready += ec ? 0 : 1; });
  offsets->when_ready([&](std::error_code ec) { ready += ec ? 0 : 1; });
  REQUIRE(run_until(io, [&] { return ready == 2; }));

  CHECK_FALSE(refresh(io, *c));  // 7 asks for a rebootstrap; the bootstrap server answers
  CHECK(seven.versions_asked(metadata_key).back() == 13);
  CHECK(c->rebootstraps() == 1);
  CHECK(boot.broker.requests(metadata_key) == 2);
  CHECK(log.has(LogLevel::info, {"rebootstrapping", "REBOOTSTRAP_REQUIRED", "broker 7"}));
  CHECK(c->metadata().brokers.count(1) == 1);
  CHECK(c->metadata().brokers.count(7) == 1);
  // The answer names 7 where it was: its working connection was kept through the rebootstrap.
  CHECK(c->broker(7, channel::group) == group);
  CHECK(group->current_state() == kgroup::net::connection::state::ready);
  CHECK(group->connects() == 1);

  // Once an answer names 7 at another address, all its connections go (the offsets channel too,
  // which was left at the old address before).
  for (int i = 0; i < 4 && c->broker(7, channel::group) == group; ++i) REQUIRE_FALSE(refresh(io, *c));
  CHECK(c->metadata().brokers.at(7).port == moved_to);
  CHECK(c->broker(7, channel::group) != group);
  CHECK(group->current_state() == kgroup::net::connection::state::closed);
  CHECK(c->broker(7, channel::offsets) != offsets);
  CHECK(offsets->current_state() == kgroup::net::connection::state::closed);
  CHECK(c->rebootstraps() == 1);
  c->close();
}

// ---- the cluster, against the mocks' ApiVersions ----------------------------------------------

TEST_CASE("rebootstrap: a mock broker's ApiVersions answer asks for it", "[net][rebootstrap]") {
  mock_cluster mc(3);
  const auto boot = mc.address_of(3);
  asio::io_context io;
  auto c =
      std::make_shared<cluster>(io, options_for(boot.host + ":" + std::to_string(boot.port), "rebootstrap"));
  REQUIRE_FALSE(refresh(io, *c));
  CHECK(c->metadata().brokers.size() == 3);
  CHECK_FALSE(c->bootstrapping());
  mc.push_broker_request_errors(1, api_versions_key, {{129, 0}});
  auto conn = c->broker(1);
  REQUIRE(conn);
  bool done = false;
  std::error_code result;
  conn->send(protocol::metadata_request{}, [&](std::error_code ec, const protocol::metadata_response&) {
    result = ec;
    done = true;
  });
  REQUIRE(run_until(io, [&] { return done; }));
  CHECK(result == make_error_code(kgroup::kafka_errc::rebootstrap_required));
  CHECK(c->rebootstraps() == 1);
  CHECK(c->bootstrapping());
  CHECK(c->metadata().brokers.empty());
  // The bootstrap server (broker 3) names the cluster again.
  REQUIRE_FALSE(refresh(io, *c));
  CHECK_FALSE(c->bootstrapping());
  CHECK(c->metadata().brokers.size() == 3);
  c->close();
}

// ---- consumer groups on librdkafka 2.15.1's mock -----------------------------------------------

namespace {

std::string servers(const mock_cluster& mc, std::initializer_list<std::int32_t> ids) {
  std::string out;
  for (const auto id : ids) {
    const auto a = mc.address_of(id);
    if (!out.empty()) out += ",";
    out += a.host + ":" + std::to_string(a.port);
  }
  return out;
}

// Members that refresh metadata every second (so they forget brokers that left soon), retry
// quickly, and whose session outlives a move.
kgroup::Config member_config(const std::string& bootstrap, const std::string& group,
                             const std::string& strategy) {
  return test_config(bootstrap)
      .group(group)
      .short_session()
      .earliest()
      .quick_recovery()
      .set("session.timeout.ms", "10000")
      .set("metadata.max.age.ms", "1000")
      .set("metadata.recovery.strategy", strategy);
}

// Each partition's position, over the members that own it.
std::map<std::int32_t, std::int64_t> positions(std::initializer_list<kgroup::test::polling_member*> members) {
  std::map<std::int32_t, std::int64_t> out;
  for (auto* m : members) {
    for (const auto& p : m->consumer().metrics().partitions) out[p.partition.partition] = p.position;
  }
  return out;
}

// Whether the members' positions are at the end of every partition of `topic`.
bool caught_up(mock_cluster& mc, const std::string& topic,
               std::initializer_list<kgroup::test::polling_member*> members) {
  const auto marks = mc.watermarks(topic);
  const auto pos = positions(members);
  if (pos.size() != marks.size()) return false;
  for (std::size_t p = 0; p < marks.size(); ++p) {
    auto it = pos.find(static_cast<std::int32_t>(p));
    if (it == pos.end() || it->second != marks[p].high) return false;
  }
  return true;
}

// What must not change while the membership stays valid.
struct standing {
  std::string member_id;
  std::int32_t generation = -1;
  std::int64_t rebalances = 0;
  int revoked = 0;
  int lost = 0;
  static standing of(kgroup::test::polling_member& m) {
    const auto metrics = m.consumer().metrics();
    return {metrics.member_id, metrics.generation, metrics.rebalance_total, m.listener().revoked_calls(),
            m.listener().lost_calls()};
  }
  bool operator==(const standing&) const = default;
};

std::ostream& operator<<(std::ostream& os, const standing& s) {
  return os << "member " << s.member_id << " generation " << s.generation << ", " << s.rebalances
            << " rebalance(s), " << s.revoked << " revoke(s), " << s.lost << " lost";
}

// Two members consume `topic` (4 partitions, leaders 1 and 2, the group's coordinator 1) from a
// cluster of four brokers, bootstrapped through brokers 3 and 4. Brokers 3 and 4 leave; once the
// members' metadata no longer names them, they come back and brokers 1 and 2 are decommissioned:
// every broker the members know is gone, and bootstrap.servers names the live ones.
void move_cluster(const std::string& strategy) {
  log_capture log;
  mock_cluster mc(4);
  const std::string topic = "moving";
  const std::string group = "movers-" + strategy;
  mc.create_topic(topic, 4);
  for (std::int32_t p = 0; p < 4; ++p) mc.set_partition_leader(topic, p, 1 + p % 2);
  mc.set_coordinator(group, 1);
  kgroup::test::timeline t;
  const auto cfg = member_config(servers(mc, {3, 4}), group, strategy);
  kgroup::test::polling_member a("a", cfg, {topic}, t);
  kgroup::test::polling_member b("b", cfg, {topic}, t);
  mc.produce(topic, 400);
  REQUIRE(eventually([&] { return caught_up(mc, topic, {&a, &b}); }, 30s));
  CHECK(a.listener().owned().size() == 2);
  CHECK(b.listener().owned().size() == 2);

  mc.broker_down(3);
  mc.broker_down(4);
  std::this_thread::sleep_for(3s);  // three metadata refreshes: 3 and 4 are forgotten
  const auto before_a = standing::of(a);
  const auto before_b = standing::of(b);
  const auto before = positions({&a, &b});

  mc.broker_up(3);
  mc.broker_up(4);
  REQUIRE(mc.decommission_broker(1));
  REQUIRE(mc.decommission_broker(2));
  mc.produce(topic, 400);
  if (strategy == "rebootstrap") {
    // Every record written after the move is read, by the members that owned the partitions.
    CHECK(eventually([&] { return caught_up(mc, topic, {&a, &b}); }, 30s));
    for (auto* m : {&a, &b}) {
      INFO(m->name());
      CHECK(m->consumer().metrics().rebootstraps_total >= 1);
      CHECK_FALSE(m->poll_error().has_value());
    }
    CHECK(standing::of(a) == before_a);
    CHECK(standing::of(b) == before_b);
    CHECK(log.has(LogLevel::info, {"rebootstrapping from bootstrap.servers " + servers(mc, {3, 4}),
                                   "no broker known from metadata can be reached"}));
  } else {
    // They keep retrying brokers 1 and 2: nothing written after the move reaches them.
    std::this_thread::sleep_for(8s);
    CHECK(positions({&a, &b}) == before);
    for (auto* m : {&a, &b}) {
      INFO(m->name());
      CHECK(m->consumer().metrics().rebootstraps_total == 0);
    }
    CHECK_FALSE(log.has(LogLevel::info, {"rebootstrapping"}));
  }
  INFO(log.problems());
  CHECK(t.overlaps().empty());
  a.stop(2s);
  b.stop(2s);
}

}  // namespace

TEST_CASE("rebootstrap: members keep their membership when every broker they know is decommissioned",
          "[modern][rebootstrap]") {
  move_cluster("rebootstrap");
}

TEST_CASE("rebootstrap: with metadata.recovery.strategy=none members keep retrying the brokers they know",
          "[modern][rebootstrap]") {
  move_cluster("none");
}

TEST_CASE("rebootstrap: brokers hidden from metadata while members run are followed without one",
          "[modern][rebootstrap]") {
  // Broker 1 leads every partition and coordinates the group; it leaves the metadata but keeps
  // answering (rd_kafka_mock_broker_remove_from_metadata), so the members' metadata moves them
  // to brokers 2 and 3: no rebootstrap, the same membership, every record read.
  log_capture log;
  mock_cluster mc(3);
  const std::string topic = "hidden";
  const std::string group = "hiders";
  mc.create_topic(topic, 4);
  for (std::int32_t p = 0; p < 4; ++p) mc.set_partition_leader(topic, p, 1);
  mc.set_coordinator(group, 1);
  kgroup::test::timeline t;
  const auto cfg = member_config(mc.bootstrap_servers(), group, "rebootstrap");
  kgroup::test::polling_member a("a", cfg, {topic}, t);
  kgroup::test::polling_member b("b", cfg, {topic}, t);
  mc.produce(topic, 400);
  REQUIRE(eventually([&] { return caught_up(mc, topic, {&a, &b}); }, 30s));
  const auto before_a = standing::of(a);
  const auto before_b = standing::of(b);

  REQUIRE(mc.remove_broker_from_metadata(1));
  mc.produce(topic, 400);
  CHECK(eventually([&] { return caught_up(mc, topic, {&a, &b}); }, 30s));
  for (auto* m : {&a, &b}) {
    INFO(m->name());
    CHECK(m->consumer().metrics().rebootstraps_total == 0);
    CHECK_FALSE(m->poll_error().has_value());
  }
  CHECK(standing::of(a) == before_a);
  CHECK(standing::of(b) == before_b);
  INFO(log.problems());
  CHECK(t.overlaps().empty());
  a.stop(2s);
  b.stop(2s);
}
