// The share-group membership driver (net/share_group_driver, issue 34) against librdkafka 2.15.1's
// mock cluster (ShareGroupHeartbeat v1): members join, get partitions by topic id, and leave; and
// against 2.0.2's mock (no ShareGroupHeartbeat): a clear fatal error. The ShareConsumer facade
// and its end-to-end tests are separate; this checks the membership alone.
//
// Each case skips (with a warning) on the cluster it does not fit. Run both:
//   LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests "[share_driver]"
//   kgroup-integration-tests "[share_driver]"
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "io_wait.hpp"
#include "mock_cluster.hpp"
#include "net/cluster.hpp"
#include "net/share_group_driver.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
using kgroup::test::mock_cluster;
using kgroup::test::run_until;

namespace {

kgroup::net::cluster_options options_for(const mock_cluster& mc) {
  kgroup::Config cfg = kgroup::test::test_config(mc.bootstrap_servers())
                           .set("request.timeout.ms", "5000")
                           .reconnect_backoff(20ms, 200ms)
                           .retry_backoff(50ms);
  cfg.validate();
  return kgroup::net::cluster_options::from_config(cfg);
}

// One share member: its own cluster (the driver takes the cluster's metadata hook), its own
// shared state, and what the hook last said.
struct share_member_rig {
  kgroup::detail::shared_state shared;
  std::shared_ptr<kgroup::net::cluster> cluster;
  std::shared_ptr<kgroup::net::share_group_driver> driver;
  kgroup::group::share::share_assignment owned;
  int changes = 0;

  share_member_rig(asio::io_context& io, const mock_cluster& mc, const std::string& group) {
    cluster = std::make_shared<kgroup::net::cluster>(io, options_for(mc));
    kgroup::net::share_group_driver_options o;
    o.member.group_id = group;
    o.member.retry_backoff = 50ms;
    o.request_timeout = 5000ms;
    o.hooks.on_assignment_changed = [this](const kgroup::group::share::share_assignment& a, bool) {
      owned = a;
      ++changes;
    };
    driver = std::make_shared<kgroup::net::share_group_driver>(io, cluster, o, shared);
  }
  ~share_member_rig() {
    driver->shutdown();
    cluster->close();
  }
  /// The application is inside poll() from now on (its max.poll.interval.ms clock stops), as
  /// ShareConsumer::poll() tells the driver: on the poll board, then poll_called().
  void in_poll() {
    {
      std::lock_guard lock(shared.mutex);
      shared.poll_began(std::chrono::steady_clock::now());
    }
    driver->poll_called();
  }
  std::uint64_t left_count() {
    std::lock_guard lock(shared.mutex);
    return shared.left_count;
  }
  std::string state() {
    std::lock_guard lock(shared.mutex);
    return shared.state;
  }
  std::optional<kgroup::detail::fatal_error> fatal() {
    std::lock_guard lock(shared.mutex);
    for (const auto& e : shared.events) {
      if (const auto* f = std::get_if<kgroup::detail::fatal_error>(&e)) return *f;
    }
    return std::nullopt;
  }
};

std::set<std::int32_t> partitions_of(const kgroup::group::share::share_assignment& a) {
  std::set<std::int32_t> out;
  for (const auto& [tp, id] : a) out.insert(tp.partition);
  return out;
}

}  // namespace

TEST_CASE(
    "share_driver: two members split a topic by id, keep their ids, and one takes all when the other closes",
    "[share_driver][integration]") {
  if (!mock_cluster::modern()) {
    WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                                << " has no share groups; run with librdkafka 2.15.1");
    return;
  }
  mock_cluster mc(3);
  mc.create_topic("q", 4);
  asio::io_context io;
  share_member_rig a(io, mc, "sg-split");
  share_member_rig b(io, mc, "sg-split");
  CHECK(a.driver->member_id().size() == 22);
  CHECK(a.driver->member_id() != b.driver->member_id());
  const std::string id_a = a.driver->member_id();

  a.driver->subscribe({"q"});
  a.in_poll();
  REQUIRE(run_until(
      io, [&] { return a.owned.size() == 4; }, 30s));
  // Every partition of q with q's topic id as metadata knows it.
  const auto topic_id = a.cluster->metadata().topics.at("q").topic_id;
  CHECK_FALSE(topic_id.is_zero());
  for (const auto& [tp, id] : a.owned) {
    CHECK(tp.topic == "q");
    CHECK(id == topic_id);
  }
  CHECK(a.state() == "stable");

  // A second member: the mock's automatic assignment gives each partition to one member.
  b.driver->subscribe({"q"});
  b.in_poll();
  REQUIRE(run_until(
      io,
      [&] {
        if (a.owned.empty() || b.owned.empty()) return false;
        std::set<std::int32_t> all = partitions_of(a.owned);
        const auto pb = partitions_of(b.owned);
        all.insert(pb.begin(), pb.end());
        return all.size() == 4 && a.owned.size() + b.owned.size() == 4;
      },
      30s));
  CHECK(a.driver->member_id() == id_a);

  // b closes: its assignment is dropped at once, it leaves, and a gets everything back.
  const auto left_before = b.left_count();
  b.driver->close();
  CHECK(b.owned.empty());
  REQUIRE(run_until(
      io, [&] { return b.left_count() > left_before; }, 10s));
  CHECK(b.state() == "closed");
  REQUIRE(run_until(
      io, [&] { return a.owned.size() == 4; }, 30s));
  CHECK_FALSE(a.fatal().has_value());
  CHECK_FALSE(b.fatal().has_value());

  a.driver->unsubscribe();
  REQUIRE(run_until(
      io, [&] { return a.left_count() > 0; }, 10s));
  CHECK(a.owned.empty());
  CHECK(a.state() == "unsubscribed");
}

TEST_CASE("share_driver: a cluster without ShareGroupHeartbeat fails with a clear fatal error",
          "[share_driver][integration]") {
  if (mock_cluster::modern()) {
    WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                                << " offers ShareGroupHeartbeat; run with librdkafka 2.0.2");
    return;
  }
  mock_cluster mc(1);
  mc.create_topic("q", 1);
  asio::io_context io;
  share_member_rig a(io, mc, "sg-old");
  a.driver->subscribe({"q"});
  REQUIRE(run_until(
      io, [&] { return a.fatal().has_value(); }, 30s));
  const auto f = *a.fatal();
  INFO(f.message);
  CHECK(f.code == kgroup::client_errc::no_compatible_version);
  CHECK(f.message.find("broker does not support share groups (KIP-932, Kafka 4.1+)") != std::string::npos);
  CHECK(a.state() == "fatal");
  a.driver->close();
  CHECK(a.state() == "closed");
}
