// make_consumer_plan(): which configuration key lands in which option field of the parts a
// Consumer is made of, and the values derived from several keys (the rebalance protocol, the
// record cursor's bounds).
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "consumer/consumer_plan.hpp"
#include "kgroup/config.hpp"
#include "kgroup/error.hpp"

using kgroup::Config;
using kgroup::RebalanceProtocol;
using kgroup::detail::make_consumer_plan;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

struct named_assignor : kgroup::PartitionAssignor {
  std::string my_name;
  bool cooperative = false;
  explicit named_assignor(std::string n, bool coop = false) : my_name(std::move(n)), cooperative(coop) {}
  std::string name() const override { return my_name; }
  std::vector<RebalanceProtocol> supported_protocols() const override {
    if (cooperative) return {RebalanceProtocol::eager, RebalanceProtocol::cooperative};
    return {RebalanceProtocol::eager};
  }
  kgroup::GroupAssignment assign(const kgroup::ClusterMetadata&,
                                 const kgroup::GroupSubscription&) const override {
    return {};
  }
};

Config base_config() {
  Config c;
  c.set("bootstrap.servers", "a:9092,[::1]:9093");
  return c;
}

// The keys both membership cores read.
Config with_member_keys(Config c) {
  c.set("group.id", "g")
      .set("group.instance.id", "i-1")
      .set("client.rack", "r1")
      .set("max.poll.interval.ms", "20000")
      .set("retry.backoff.ms", "50")
      .set("retry.backoff.max.ms", "700");
  return c;
}

}  // namespace

TEST_CASE("consumer plan: membership, cluster and fetch keys map to their option fields", "[consumer_plan]") {
  Config c = with_member_keys(base_config());
  c.set("client.id", "cid")
      .set("session.timeout.ms", "10000")
      .set("heartbeat.interval.ms", "1000")
      .set("request.timeout.ms", "9000")
      .set("exclude.internal.topics", "false")
      .set("fetch.min.bytes", "10")
      .set("fetch.max.bytes", "1000000")
      .set("fetch.max.wait.ms", "250")
      .set("max.partition.fetch.bytes", "2000")
      .set("auto.offset.reset", "earliest")
      .set("queued.max.messages.kbytes", "128")
      .set("enable.auto.commit", "false")
      .set("auto.commit.interval.ms", "777")
      .set("metadata.max.age.ms", "60000")
      .set("max.poll.records", "42")
      .set("default.api.timeout.ms", "12345")
      .set("statistics.interval.ms", "1500")
      .set("check.crcs", "false");
  const auto p = make_consumer_plan(c, {});

  CHECK(p.member.group_id == "g");
  CHECK(p.member.group_instance_id == std::optional<std::string>("i-1"));
  CHECK(p.member.rack == std::optional<std::string>("r1"));
  CHECK(p.member.session_timeout == milliseconds(10000));
  CHECK(p.member.heartbeat_interval == milliseconds(1000));
  CHECK(p.member.max_poll_interval == milliseconds(20000));
  CHECK(p.member.retry_backoff == milliseconds(50));
  CHECK(p.member.retry_backoff_max == milliseconds(700));
  CHECK(p.member.request_timeout == milliseconds(9000));
  CHECK_FALSE(p.member.exclude_internal_topics);
  CHECK(p.request_timeout == milliseconds(9000));
  CHECK_FALSE(p.kip848);
  CHECK_FALSE(p.inline_listener);

  REQUIRE(p.cluster.bootstrap.size() == 2);
  CHECK(p.cluster.bootstrap[0] == std::pair<std::string, std::uint16_t>("a", 9092));
  CHECK(p.cluster.bootstrap[1] == std::pair<std::string, std::uint16_t>("::1", 9093));
  CHECK(p.cluster.connection.client_id == "cid");
  CHECK(p.cluster.connection.request_timeout == milliseconds(9000));
  CHECK(p.cluster.retry_backoff == milliseconds(50));
  CHECK(p.cluster.metadata_max_age == milliseconds(60000));

  CHECK(p.fetch.group_id == "g");
  CHECK(p.fetch.fetch_min_bytes == 10);
  CHECK(p.fetch.fetch_max_bytes == 1000000);
  CHECK(p.fetch.fetch_max_wait_ms == 250);
  CHECK(p.fetch.max_partition_fetch_bytes == 2000);
  CHECK(p.fetch.isolation_level == 0);
  CHECK(p.fetch.auto_offset_reset == "earliest");
  CHECK(p.fetch.buffer_max_bytes == 128 * 1024);
  CHECK_FALSE(p.fetch.auto_commit);
  CHECK(p.fetch.auto_commit_interval == milliseconds(777));
  CHECK(p.fetch.retry_backoff == milliseconds(50));
  CHECK(p.fetch.request_timeout == milliseconds(9000));
  CHECK(p.fetch.client_rack == "r1");
  CHECK(p.fetch.preferred_replica_ttl == milliseconds(60000));
  CHECK_FALSE(p.fetch.coordinator_unusable);  // the facade's hooks are not the plan's
  CHECK_FALSE(p.fetch.commit_error);

  CHECK_FALSE(p.auto_commit);
  CHECK_FALSE(p.read_committed);
  CHECK_FALSE(p.cursor.read_committed);
  CHECK_FALSE(p.cursor.verify_crc);
  CHECK(p.max_poll_records == 42);
  CHECK(p.max_poll_interval == milliseconds(20000));
  CHECK(p.default_timeout == milliseconds(12345));
  CHECK(p.statistics_interval == milliseconds(1500));

  CHECK(p.metrics_id.client_id == "cid");
  CHECK(p.metrics_id.group_id == "g");
  CHECK(p.metrics_id.group_instance_id == std::optional<std::string>("i-1"));
  CHECK(p.metrics_id.max_poll_interval_ms == 20000);
  CHECK(p.metrics_id.wall_minus_steady_ms == 0);  // a clock reading: the facade's
}

TEST_CASE("consumer plan: defaults; empty group.instance.id and client.rack stay unset", "[consumer_plan]") {
  const auto p = make_consumer_plan(base_config(), {});
  CHECK(p.member.group_id.empty());
  CHECK_FALSE(p.member.group_instance_id);
  CHECK_FALSE(p.member.rack);
  CHECK(p.fetch.client_rack.empty());
  CHECK(p.auto_commit);
  CHECK(p.fetch.auto_commit);
  CHECK(p.cursor.verify_crc);
  CHECK(p.max_poll_records == 500);
  CHECK(p.default_timeout == milliseconds(60000));
  CHECK(p.statistics_interval == milliseconds(0));
  // range,cooperative-sticky: range is eager only, so the group is eager.
  REQUIRE(p.member.assignors.size() == 2);
  CHECK(p.member.assignors[0]->name() == "range");
  CHECK(p.member.assignors[1]->name() == "cooperative-sticky");
  CHECK(p.member.protocol == RebalanceProtocol::eager);
  CHECK(p.metrics_id.protocol == "eager");
}

TEST_CASE("consumer plan: the record cursor's bounds come from the fetch sizes", "[consumer_plan]") {
  SECTION("small fetch sizes: a batch may still decompress to 16 MiB; a poll holds fetch.max.bytes") {
    Config c = base_config();
    c.set("fetch.max.bytes", "1000").set("max.partition.fetch.bytes", "2000");
    const auto p = make_consumer_plan(c, {});
    CHECK(p.cursor.max_batch_bytes == 16 * mib);
    CHECK(p.cursor.poll_bytes == 1000);
  }
  SECTION("fetch.max.bytes above 16 MiB bounds a batch") {
    Config c = base_config();
    c.set("fetch.max.bytes", std::to_string(40 * mib)).set("max.partition.fetch.bytes", "2000");
    const auto p = make_consumer_plan(c, {});
    CHECK(p.cursor.max_batch_bytes == 40 * mib);
    CHECK(p.cursor.poll_bytes == 40 * mib);
  }
  SECTION("max.partition.fetch.bytes above both bounds a batch") {
    Config c = base_config();
    c.set("fetch.max.bytes", std::to_string(20 * mib))
        .set("max.partition.fetch.bytes", std::to_string(30 * mib));
    const auto p = make_consumer_plan(c, {});
    CHECK(p.cursor.max_batch_bytes == 30 * mib);
    CHECK(p.cursor.poll_bytes == 20 * mib);
  }
  SECTION("the defaults: 50 MiB fetches") {
    const auto p = make_consumer_plan(base_config(), {});
    CHECK(p.cursor.max_batch_bytes == 52428800);
    CHECK(p.cursor.poll_bytes == 52428800);
  }
}

TEST_CASE("consumer plan: read_committed reaches the fetcher, the cursor and the user thread",
          "[consumer_plan]") {
  Config c = base_config();
  c.set("isolation.level", "read_committed").set("rebalance.listener.thread", "heartbeat");
  const auto p = make_consumer_plan(c, {});
  CHECK(p.read_committed);
  CHECK(p.fetch.isolation_level == 1);
  CHECK(p.cursor.read_committed);
  CHECK(p.inline_listener);
}

TEST_CASE("consumer plan: cooperative only when every assignor supports it; custom assignors by name",
          "[consumer_plan]") {
  SECTION("cooperative-sticky alone") {
    Config c = base_config();
    c.set("partition.assignment.strategy", "cooperative-sticky");
    const auto p = make_consumer_plan(c, {});
    CHECK(p.member.protocol == RebalanceProtocol::cooperative);
    CHECK(p.metrics_id.protocol == "cooperative");
  }
  SECTION("a custom assignor of a configured name is used, in the configured order") {
    Config c = base_config();
    c.set("partition.assignment.strategy", "mine,cooperative-sticky");
    auto mine = std::make_shared<named_assignor>("mine", /*coop=*/true);
    auto unused = std::make_shared<named_assignor>("other");
    const auto p = make_consumer_plan(c, {unused, mine});
    REQUIRE(p.member.assignors.size() == 2);
    CHECK(p.member.assignors[0] == mine);
    CHECK(p.member.assignors[1]->name() == "cooperative-sticky");
    CHECK(p.member.protocol == RebalanceProtocol::cooperative);
  }
  SECTION("an eager-only custom assignor keeps the group eager") {
    Config c = base_config();
    c.set("partition.assignment.strategy", "cooperative-sticky,mine");
    const auto p = make_consumer_plan(c, {std::make_shared<named_assignor>("mine")});
    CHECK(p.member.protocol == RebalanceProtocol::eager);
  }
  SECTION("an unknown name is a configuration error") {
    Config c = base_config();
    c.set("partition.assignment.strategy", "range,nonesuch");
    try {
      (void)make_consumer_plan(c, {});
      FAIL("no error");
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == make_error_code(kgroup::client_errc::invalid_config));
      CHECK(std::string(e.what()).find("unknown assignor 'nonesuch'") != std::string::npos);
    }
  }
}

TEST_CASE("consumer plan: group.protocol=consumer fills the KIP-848 core's options", "[consumer_plan]") {
  Config c = with_member_keys(base_config());
  c.set("group.protocol", "consumer").set("group.remote.assignor", "uniform");
  const auto p = make_consumer_plan(c, {});
  REQUIRE(p.kip848);
  CHECK(p.kip848_member.group_id == "g");
  CHECK(p.kip848_member.group_instance_id == std::optional<std::string>("i-1"));
  CHECK(p.kip848_member.rack == std::optional<std::string>("r1"));
  CHECK(p.kip848_member.remote_assignor == std::optional<std::string>("uniform"));
  CHECK(p.kip848_member.member_id.empty());  // the driver makes one
  CHECK(p.kip848_member.max_poll_interval == milliseconds(20000));
  CHECK(p.kip848_member.retry_backoff == milliseconds(50));
  CHECK(p.kip848_member.retry_backoff_max == milliseconds(700));
  CHECK(p.metrics_id.protocol == "consumer");

  Config d = base_config();
  d.set("group.protocol", "consumer");
  CHECK_FALSE(make_consumer_plan(d, {}).kip848_member.remote_assignor);  // empty: the broker's default
}
