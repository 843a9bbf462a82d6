// Client telemetry (KIP-714): the OTLP encoder (src/protocol/otlp) byte for byte, the metric
// selectors and codec choice, the subscription state machine (src/data/telemetry) driven step by
// step with a fake clock, and the Consumer's metric names (src/consumer/telemetry_reporter).
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <set>

#include "consumer/telemetry_reporter.hpp"
#include "data/telemetry.hpp"
#include "kgroup/error.hpp"
#include "protocol/compression.hpp"
#include "protocol/otlp.hpp"

using namespace kgroup;
using namespace kgroup::data::telemetry;
namespace otlp = kgroup::protocol::otlp;
using protocol::bytes;
using protocol::compression;

namespace {

bytes cat(std::initializer_list<bytes> parts) {
  bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
bytes text(const std::string& s) {
  return bytes(s.begin(), s.end());
}
bytes le64(std::uint64_t v) {
  bytes out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  return out;
}

}  // namespace

TEST_CASE("otlp: one gauge with an int value, byte for byte", "[telemetry]") {
  otlp::metrics_data d;
  d.resource = {{"group_id", "g"}};
  d.scope_name = "k";
  otlp::metric m;
  m.name = "a";
  otlp::data_point p;
  p.time_unix_nano = 1;
  p.value = std::int64_t{5};
  m.points = {p};
  d.metrics = {m};
  // KeyValue{key "group_id", value AnyValue{string_value "g"}}: 15 bytes.
  const bytes kv = cat({{0x0a, 0x08}, text("group_id"), {0x12, 0x03, 0x0a, 0x01, 'g'}});
  REQUIRE(kv.size() == 15);
  const bytes resource = cat({{0x0a, 0x0f}, kv});                    // Resource.attributes: 17
  const bytes scope = {0x0a, 0x01, 'k'};                             // InstrumentationScope.name: 3
  const bytes point = cat({{0x19}, le64(1), {0x31}, le64(5)});       // time (3), as_int (6): 18
  const bytes gauge = cat({{0x0a, 0x12}, point});                    // Gauge.data_points: 20
  const bytes metric = cat({{0x0a, 0x01, 'a', 0x2a, 0x14}, gauge});  // name, gauge (5): 25
  const bytes scope_metrics = cat({{0x0a, 0x03}, scope, {0x12, 0x19}, metric});               // 32
  const bytes resource_metrics = cat({{0x0a, 0x11}, resource, {0x12, 0x20}, scope_metrics});  // 53
  const bytes want = cat({{0x0a, 0x35}, resource_metrics});
  CHECK(otlp::encode(d) == want);
  CHECK(want.size() == 55);
}

TEST_CASE("otlp: a monotonic delta sum with a double value and a labelled point, byte for byte",
          "[telemetry]") {
  otlp::metrics_data d;
  d.scope_name = "kgroup";
  d.scope_version = "1";
  otlp::metric m;
  m.name = "n";
  m.description = "d";
  m.unit = "ms";
  m.kind = otlp::metric_kind::sum;
  m.sum_temporality = otlp::temporality::delta;
  otlp::data_point p;
  p.start_time_unix_nano = 2;
  p.time_unix_nano = 3;
  p.value = 1.5;
  p.attributes = {{"node.id", ""}};
  m.points = {p};
  d.metrics = {m};
  // 1.5 = 0x3ff8000000000000; an empty string value is still written (AnyValue's oneof).
  const bytes kv = cat({{0x0a, 0x07}, text("node.id"), {0x12, 0x02, 0x0a, 0x00}});  // 13
  const bytes point =
      cat({{0x11}, le64(2), {0x19}, le64(3), {0x21}, le64(0x3ff8000000000000ULL), {0x3a, 0x0d}, kv});
  REQUIRE(point.size() == 42);
  const bytes sum = cat({{0x0a, 0x2a}, point, {0x10, 0x01, 0x18, 0x01}});  // temporality 1, monotonic: 48
  const bytes metric =
      cat({{0x0a, 0x01, 'n', 0x12, 0x01, 'd', 0x1a, 0x02, 'm', 's', 0x3a, 0x30}, sum});  // 60
  const bytes scope = cat({{0x0a, 0x06}, text("kgroup"), {0x12, 0x01, '1'}});            // 11
  const bytes scope_metrics = cat({{0x0a, 0x0b}, scope, {0x12, 0x3c}, metric});          // 75
  // An empty Resource is still present (length 0).
  const bytes resource_metrics = cat({{0x0a, 0x00, 0x12, 0x4b}, scope_metrics});  // 79
  const bytes want = cat({{0x0a, 0x4f}, resource_metrics});
  CHECK(otlp::encode(d) == want);
}

TEST_CASE("otlp: lengths above 127 take a two-byte varint", "[telemetry]") {
  otlp::metrics_data d;
  otlp::metric m;
  m.name = std::string(200, 'x');
  m.points = {otlp::data_point{}};
  d.metrics = {m};
  const auto out = otlp::encode(d);
  // ScopeMetrics.metrics: tag 0x12, the metric's length (name 3 + 200, gauge 2 + 11: 216 = 0xd8 0x01),
  // then Metric.name: tag 0x0a, length 200 = 0xc8 0x01.
  const bytes metric_head = {0x12, 0xd8, 0x01, 0x0a, 0xc8, 0x01};
  CHECK(std::search(out.begin(), out.end(), metric_head.begin(), metric_head.end()) != out.end());
}

TEST_CASE("telemetry: selectors are name prefixes; none selects nothing, an empty string or * everything",
          "[telemetry]") {
  const std::string name = "org.apache.kafka.consumer.poll.idle.ratio.avg";
  CHECK_FALSE(selected({}, name));
  CHECK(selected({""}, name));
  CHECK(selected({"*"}, name));
  CHECK(selected({"org.apache.kafka.consumer."}, name));
  CHECK(selected({"org.apache.kafka.producer.", "org.apache.kafka.consumer.poll"}, name));
  CHECK_FALSE(selected({"org.apache.kafka.producer."}, name));
  CHECK_FALSE(selected({"org.apache.kafka.consumer.poll.idle.ratio.avg.x"}, name));
}

TEST_CASE("telemetry: the codec is the broker's first accepted one the client can write", "[telemetry]") {
  const std::vector<compression> all{compression::zstd, compression::lz4, compression::gzip,
                                     compression::snappy};
  CHECK(pick_compression({4, 3, 1, 2}, all, {}) == compression::zstd);
  CHECK(pick_compression({1, 4}, all, {}) == compression::gzip);  // the broker's order, not the client's
  CHECK(pick_compression({4, 3, 1, 2}, {compression::lz4, compression::gzip}, {}) == compression::lz4);
  CHECK(pick_compression({4, 3, 1, 2}, all, {compression::zstd}) == compression::lz4);
  CHECK(pick_compression({}, all, {}) == compression::none);
  CHECK(pick_compression({0, 7, -1}, all, {}) == compression::none);  // unknown ids are skipped
}

namespace {

using clock_t_ = std::chrono::steady_clock;
const time_point t0 = clock_t_::time_point{} + std::chrono::hours(1);

protocol::uuid instance(std::uint8_t fill) {
  protocol::uuid u;
  for (auto& b : u.bytes) b = fill;
  return u;
}

protocol::get_telemetry_subscriptions_response subscription_answer(std::vector<std::string> requested,
                                                                   bool delta = false) {
  protocol::get_telemetry_subscriptions_response r;
  r.client_instance_id = instance(0x42);
  r.subscription_id = 7;
  r.accepted_compression_types = {3, 1};  // lz4, gzip
  r.push_interval_ms = 1000;
  r.telemetry_max_bytes = 100000;
  r.delta_temporality = delta;
  r.requested_metrics = std::move(requested);
  return r;
}

struct fixture {
  options opts = [] {
    options o;
    o.resource = {{"group_id", "g"}};
    o.scope_version = "test";
    o.start_unix_nano = 1000;
    o.seed = 1;
    return o;
  }();
  core c{opts};
  std::int64_t polls = 5;
  std::int64_t commits = 10;
  std::vector<sample> collect() const {
    sample idle{"org.apache.kafka.consumer.poll.idle.ratio.avg", "idle", "1", false, 0.25};
    sample total{"org.apache.kafka.consumer.coordinator.commit.total", "commits", "1", true, commits};
    sample other{"org.apache.kafka.consumer.fetch.manager.fetch.latency.avg", "fetch", "ms", false, 3.0};
    return {idle, total, other};
  }
  step poll(time_point now, std::uint64_t wall = 5000) {
    return c.poll(now, wall, [this] { return collect(); });
  }
  // Subscribes: the first step and its answer. Returns when the first push is due.
  time_point subscribe(std::vector<std::string> requested, bool delta = false, time_point now = t0) {
    auto s = poll(now);
    REQUIRE(s.get_subscriptions);
    auto a = subscription_answer(std::move(requested), delta);
    c.on_subscriptions(now, {}, &a);
    REQUIRE(c.current() == state::push_needed);
    auto idle = poll(now);
    REQUIRE_FALSE(idle.push);
    REQUIRE(idle.wake_at);
    return *idle.wake_at;
  }
};

// The OTLP payload of a push, decompressed.
bytes payload(const protocol::push_telemetry_request& r) {
  bytes out;
  REQUIRE_FALSE(protocol::decompress(static_cast<compression>(r.compression_type), r.metrics, 1 << 20, out));
  return out;
}

otlp::metrics_data expected_data(const fixture& f, std::vector<otlp::metric> metrics) {
  otlp::metrics_data d;
  d.resource = f.opts.resource;
  d.scope_name = f.opts.scope_name;
  d.scope_version = f.opts.scope_version;
  d.metrics = std::move(metrics);
  return d;
}

otlp::metric gauge(const std::string& name, const std::string& desc, const std::string& unit, double v,
                   std::uint64_t at) {
  otlp::metric m;
  m.name = name;
  m.description = desc;
  m.unit = unit;
  otlp::data_point p;
  p.time_unix_nano = at;
  p.value = v;
  m.points = {p};
  return m;
}

otlp::metric counter(std::int64_t v, std::uint64_t start, std::uint64_t at, otlp::temporality t) {
  otlp::metric m;
  m.name = "org.apache.kafka.consumer.coordinator.commit.total";
  m.description = "commits";
  m.unit = "1";
  m.kind = otlp::metric_kind::sum;
  m.sum_temporality = t;
  otlp::data_point p;
  p.start_time_unix_nano = start;
  p.time_unix_nano = at;
  p.value = v;
  m.points = {p};
  return m;
}

}  // namespace

TEST_CASE("telemetry: subscribe, then push the selected metrics at the interval, the first one jittered",
          "[telemetry]") {
  fixture f;
  auto s = f.poll(t0);
  REQUIRE(s.get_subscriptions);
  CHECK(s.get_subscriptions->client_instance_id == protocol::uuid{});  // zero on the first request
  CHECK_FALSE(s.push);
  CHECK(f.c.current() == state::awaiting_subscription);
  CHECK_FALSE(f.c.client_instance_id());
  CHECK_FALSE(f.poll(t0).get_subscriptions);  // one at a time

  auto a = subscription_answer({"org.apache.kafka.consumer.poll", "org.apache.kafka.consumer.coordinator."});
  f.c.on_subscriptions(t0, {}, &a);
  REQUIRE(f.c.client_instance_id() == instance(0x42));
  auto idle = f.poll(t0);
  REQUIRE(idle.wake_at);
  CHECK(*idle.wake_at >= t0 + ms(500));
  CHECK(*idle.wake_at < t0 + ms(1500));
  const auto first = *idle.wake_at;
  CHECK_FALSE(f.poll(first - ms(1)).push);

  auto p = f.poll(first, 7000);
  REQUIRE(p.push);
  CHECK(p.push->client_instance_id == instance(0x42));
  CHECK(p.push->subscription_id == 7);
  CHECK_FALSE(p.push->terminating);
  CHECK(p.push->compression_type == static_cast<std::int8_t>(compression::lz4));
  // Selected: poll.idle.ratio.avg and coordinator.commit.total (cumulative from the start);
  // fetch latency is not.
  CHECK(payload(*p.push) ==
        otlp::encode(
            expected_data(f, {gauge("org.apache.kafka.consumer.poll.idle.ratio.avg", "idle", "1", 0.25, 7000),
                              counter(10, 1000, 7000, otlp::temporality::cumulative)})));
  CHECK(f.c.current() == state::awaiting_push);

  protocol::push_telemetry_response ok;
  f.c.on_push(first, {}, &ok);
  CHECK(f.c.pushes() == 1);
  auto next = f.poll(first);
  REQUIRE(next.wake_at);
  CHECK(*next.wake_at == first + ms(1000));  // no jitter after the first
  f.commits = 25;
  auto p2 = f.poll(first + ms(1000), 8000);
  REQUIRE(p2.push);
  CHECK(payload(*p2.push) ==
        otlp::encode(
            expected_data(f, {gauge("org.apache.kafka.consumer.poll.idle.ratio.avg", "idle", "1", 0.25, 8000),
                              counter(25, 1000, 8000, otlp::temporality::cumulative)})));
}

TEST_CASE("telemetry: delta temporality sends counters as the change since the last answered push",
          "[telemetry]") {
  fixture f;
  const auto first = f.subscribe({"org.apache.kafka.consumer.coordinator.commit"}, /*delta=*/true);
  auto p = f.poll(first, 7000);
  REQUIRE(p.push);
  CHECK(payload(*p.push) ==
        otlp::encode(expected_data(f, {counter(10, 1000, 7000, otlp::temporality::delta)})));
  protocol::push_telemetry_response ok;
  f.c.on_push(first, {}, &ok);

  f.commits = 14;
  auto p2 = f.poll(first + ms(1000), 8000);
  REQUIRE(p2.push);
  CHECK(payload(*p2.push) ==
        otlp::encode(expected_data(f, {counter(4, 7000, 8000, otlp::temporality::delta)})));
  // Not answered (connection lost): the next delta still counts from the last answered push.
  f.c.on_push(first + ms(1000), make_error_code(std::errc::connection_reset), nullptr);
  CHECK(f.c.current() == state::subscription_needed);
  auto again = f.poll(first + ms(1000));
  REQUIRE(again.wake_at);
  auto g = f.poll(*again.wake_at);
  REQUIRE(g.get_subscriptions);
  CHECK(g.get_subscriptions->client_instance_id == instance(0x42));  // ours from now on
  auto a = subscription_answer({"org.apache.kafka.consumer.coordinator.commit"}, true);
  f.c.on_subscriptions(*again.wake_at, {}, &a);  // the same subscription: deltas continue
  f.commits = 20;
  auto w = f.poll(*again.wake_at);
  REQUIRE(w.wake_at);
  auto p3 = f.poll(*w.wake_at, 9000);
  REQUIRE(p3.push);
  CHECK(payload(*p3.push) ==
        otlp::encode(expected_data(f, {counter(10, 7000, 9000, otlp::temporality::delta)})));
}

TEST_CASE("telemetry: a subscription to no metrics pushes nothing and is fetched again after the interval",
          "[telemetry]") {
  fixture f;
  REQUIRE(f.poll(t0).get_subscriptions);
  auto a = subscription_answer({});
  f.c.on_subscriptions(t0, {}, &a);
  CHECK(f.c.current() == state::subscription_needed);
  auto s = f.poll(t0);
  CHECK_FALSE(s.push);
  REQUIRE(s.wake_at);
  CHECK(*s.wake_at == t0 + ms(1000));
  CHECK(f.poll(t0 + ms(1000)).get_subscriptions);
  // Closing without a subscription: no terminating push.
  f.c.close();
  CHECK(f.c.finished());
  auto late = subscription_answer({""});
  f.c.on_subscriptions(t0 + ms(1000), {}, &late);  // the answer to the request in flight is moot
  CHECK(f.c.finished());
  auto none = f.poll(t0 + ms(2000));
  CHECK_FALSE(none.push);
  CHECK_FALSE(none.get_subscriptions);
  CHECK_FALSE(none.wake_at);
}

TEST_CASE("telemetry: push errors", "[telemetry]") {
  fixture f;
  const auto first = f.subscribe({""});
  REQUIRE(f.poll(first).push);

  SECTION("UNKNOWN_SUBSCRIPTION_ID: the subscription is fetched again at once") {
    protocol::push_telemetry_response r;
    r.error_code = 117;
    f.c.on_push(first, {}, &r);
    auto s = f.poll(first);
    REQUIRE(s.get_subscriptions);
    CHECK(s.get_subscriptions->client_instance_id == instance(0x42));
  }
  SECTION("UNSUPPORTED_COMPRESSION_TYPE: fetched again at once, and that codec is not used again") {
    protocol::push_telemetry_response r;
    r.error_code = 76;
    f.c.on_push(first, {}, &r);
    REQUIRE(f.poll(first).get_subscriptions);
    auto a = subscription_answer({""});
    f.c.on_subscriptions(first, {}, &a);
    auto w = f.poll(first);
    REQUIRE(w.wake_at);
    auto p = f.poll(*w.wake_at);
    REQUIRE(p.push);
    CHECK(p.push->compression_type == static_cast<std::int8_t>(compression::gzip));
    CHECK(payload(*p.push).size() > 0);
  }
  SECTION("TELEMETRY_TOO_LARGE: the subscription is kept, the next push waits an interval") {
    protocol::push_telemetry_response r;
    r.error_code = 118;
    f.c.on_push(first, {}, &r);
    CHECK(f.c.current() == state::push_needed);
    auto w = f.poll(first);
    REQUIRE(w.wake_at);
    CHECK(*w.wake_at == first + ms(1000));
    CHECK(f.poll(*w.wake_at).push);
  }
  SECTION("INVALID_RECORD, INVALID_REQUEST, UNSUPPORTED_VERSION: telemetry stops for good") {
    const std::int16_t code = GENERATE(87, 42, 35);
    protocol::push_telemetry_response r;
    r.error_code = code;
    f.c.on_push(first, {}, &r);
    CHECK(f.c.finished());
    auto s = f.poll(first + std::chrono::hours(1));
    CHECK_FALSE(s.push);
    CHECK_FALSE(s.get_subscriptions);
    f.c.close();  // no terminating push either
    CHECK_FALSE(f.poll(first + std::chrono::hours(1)).push);
  }
  SECTION("no answer: the subscription is fetched again after a backoff that grows") {
    f.c.on_push(first, make_error_code(std::errc::timed_out), nullptr);
    auto w = f.poll(first);
    REQUIRE(w.wake_at);
    CHECK(*w.wake_at == first + ms(100));
    REQUIRE(f.poll(*w.wake_at).get_subscriptions);
    f.c.on_subscriptions(*w.wake_at, make_error_code(std::errc::timed_out), nullptr);
    auto w2 = f.poll(*w.wake_at);
    REQUIRE(w2.wake_at);
    CHECK(*w2.wake_at == *w.wake_at + ms(200));
  }
}

TEST_CASE("telemetry: GetTelemetrySubscriptions errors", "[telemetry]") {
  fixture f;
  REQUIRE(f.poll(t0).get_subscriptions);
  SECTION("a retriable or unknown error: asked again after a backoff") {
    protocol::get_telemetry_subscriptions_response r;
    r.error_code = 89;  // THROTTLING_QUOTA_EXCEEDED
    f.c.on_subscriptions(t0, {}, &r);
    auto w = f.poll(t0);
    REQUIRE(w.wake_at);
    CHECK(*w.wake_at == t0 + ms(100));
    CHECK_FALSE(f.c.client_instance_id());
  }
  SECTION("a zero client instance id on the first answer is not accepted") {
    auto a = subscription_answer({""});
    a.client_instance_id = {};
    f.c.on_subscriptions(t0, {}, &a);
    CHECK(f.c.current() == state::subscription_needed);
    CHECK_FALSE(f.c.client_instance_id());
  }
  SECTION("UNSUPPORTED_VERSION: telemetry stops for good") {
    protocol::get_telemetry_subscriptions_response r;
    r.error_code = 35;
    f.c.on_subscriptions(t0, {}, &r);
    CHECK(f.c.finished());
  }
}

TEST_CASE("telemetry: close() sends one last push marked terminating, at once", "[telemetry]") {
  fixture f;
  const auto first = f.subscribe({"org.apache.kafka.consumer.poll"});
  SECTION("between pushes") {
    f.c.close();
    auto p = f.poll(t0, 6000);  // long before the interval
    REQUIRE(p.push);
    CHECK(p.push->terminating);
    CHECK(payload(*p.push) ==
          otlp::encode(expected_data(
              f, {gauge("org.apache.kafka.consumer.poll.idle.ratio.avg", "idle", "1", 0.25, 6000)})));
    CHECK_FALSE(f.c.finished());
    protocol::push_telemetry_response ok;
    f.c.on_push(t0, {}, &ok);
    CHECK(f.c.finished());
  }
  SECTION("with a push in flight: after its answer") {
    REQUIRE(f.poll(first).push);
    f.c.close();
    CHECK_FALSE(f.poll(first).push);
    protocol::push_telemetry_response ok;
    f.c.on_push(first, {}, &ok);
    auto p = f.poll(first);
    REQUIRE(p.push);
    CHECK(p.push->terminating);
    f.c.on_push(first, make_error_code(std::errc::connection_reset), nullptr);  // its failure ends it too
    CHECK(f.c.finished());
  }
}

TEST_CASE("telemetry: a payload above TelemetryMaxBytes is not sent", "[telemetry]") {
  fixture f;
  REQUIRE(f.poll(t0).get_subscriptions);
  auto a = subscription_answer({""});
  a.telemetry_max_bytes = 20;
  a.accepted_compression_types = {};
  f.c.on_subscriptions(t0, {}, &a);
  auto w = f.poll(t0);
  REQUIRE(w.wake_at);
  auto s = f.poll(*w.wake_at);
  CHECK_FALSE(s.push);
  REQUIRE(s.wake_at);
  CHECK(*s.wake_at == *w.wake_at + ms(1000));
  bool warned = false;
  for (const auto& n : f.c.take_notes())
    warned = warned || (n.warning && n.text.find("TelemetryMaxBytes") != std::string::npos);
  CHECK(warned);
}

TEST_CASE("telemetry: a broker without the APIs: nothing is ever sent", "[telemetry]") {
  fixture f;
  f.c.unsupported();
  CHECK(f.c.finished());
  auto s = f.poll(t0);
  CHECK_FALSE(s.get_subscriptions);
  CHECK_FALSE(s.push);
  CHECK_FALSE(s.wake_at);
}

// ---- the Consumer's side (src/consumer/telemetry_reporter): names, kinds, codecs ----

TEST_CASE("telemetry: the consumer's metrics under the Java client's names", "[telemetry]") {
  ConsumerMetrics m;
  m.group_id = "g";
  m.member_id = "m-1";
  m.assigned_partitions = 3;
  m.records_consumed_total = 42;
  m.commit_latency_max_ms = 7.5;
  m.poll_idle_ratio_avg = 0.5;
  m.fetch_latency.count = 4;
  m.fetch_latency.sum = 0.02;  // seconds: 5 ms on average
  m.fetch_latency_max_ms = 9;
  const auto samples = detail::telemetry_samples(m);
  std::set<std::string> names;
  for (const auto& s : samples) {
    INFO(s.name);
    CHECK(s.name.starts_with("org.apache.kafka.consumer."));
    CHECK(names.insert(s.name).second);  // each once
    CHECK(s.counter == s.name.ends_with(".total"));
    CHECK_FALSE(s.description.empty());
    CHECK_FALSE(s.unit.empty());
  }
  auto value = [&](const std::string& name) -> std::variant<std::int64_t, double> {
    for (const auto& s : samples) {
      if (s.name == "org.apache.kafka.consumer." + name) return s.value;
    }
    FAIL("no metric " << name);
    return std::int64_t{-1};
  };
  CHECK(std::get<std::int64_t>(value("coordinator.assigned.partitions")) == 3);
  CHECK(std::get<std::int64_t>(value("fetch.manager.records.consumed.total")) == 42);
  CHECK(std::get<double>(value("coordinator.commit.latency.max")) == 7.5);
  CHECK(std::get<double>(value("poll.idle.ratio.avg")) == 0.5);
  CHECK(std::get<double>(value("fetch.manager.fetch.latency.avg")) == Approx(5.0));
  CHECK(std::get<double>(value("fetch.manager.fetch.latency.max")) == 9.0);
  // Unknown figures (-1) are left out rather than sent as -1.
  CHECK(names.count("org.apache.kafka.consumer.fetch.manager.records.lag.max") == 0);
  CHECK(names.count("org.apache.kafka.consumer.last.poll.seconds.ago") == 0);

  CHECK(detail::telemetry_resource(m, "") ==
        std::vector<otlp::attribute>{{"group_id", "g"}, {"group_member_id", "m-1"}});
  m.group_instance_id = "i";
  CHECK(detail::telemetry_resource(m, "rack-a") == std::vector<otlp::attribute>{{"client_rack", "rack-a"},
                                                                                {"group_id", "g"},
                                                                                {"group_instance_id", "i"},
                                                                                {"group_member_id", "m-1"}});
}

TEST_CASE("telemetry: internal.metrics.push.compression.types", "[telemetry]") {
  CHECK(
      detail::telemetry_codecs("zstd,lz4,gzip,snappy") ==
      std::vector<compression>{compression::zstd, compression::lz4, compression::gzip, compression::snappy});
  CHECK(detail::telemetry_codecs(" lz4 , gzip") ==
        std::vector<compression>{compression::lz4, compression::gzip});
  CHECK(detail::telemetry_codecs("").empty());
  CHECK_THROWS_AS(detail::telemetry_codecs("lz4,brotli"), Error);
}
