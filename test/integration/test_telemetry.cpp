// Client telemetry (KIP-714, enable.metrics.push) against librdkafka 2.15.1's mock, which answers
// GetTelemetrySubscriptions with what set_telemetry() asked for and decodes every PushTelemetry
// payload (OTLP protobuf, through nanopb), logging each string and data point it finds: the
// tests read that log. Against 2.0.2's mock (no telemetry APIs) the consumer sends neither and
// works as before.
//
// Run both:
//   LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib kgroup-integration-tests "[telemetry]"
//   kgroup-integration-tests "[telemetry]"
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "log_capture.hpp"
#include "mock_cluster.hpp"
#include "protocol/primitives.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::mock_cluster;

namespace {

constexpr const char* consumed_total = "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
constexpr const char* assigned = "org.apache.kafka.consumer.coordinator.assigned.partitions";
constexpr const char* idle_ratio = "org.apache.kafka.consumer.poll.idle.ratio.avg";

kgroup::Config telemetry_config(const mock_cluster& mc, const std::string& group) {
  return kgroup::test::test_config(mc.bootstrap_servers())
      .group(group)
      .client_id("telemetry-test")
      .earliest()
      .strategy("range")
      .retry_backoff(50ms)
      // The mock lists zstd first but, built without it, cannot read it (and then drops the
      // connection): pushes use the next codec it lists.
      .set("internal.metrics.push.compression.types", "lz4,gzip,snappy");
}

// One decoded push, from the mock's log: the strings in order and the data points, each data
// point after the name of its metric.
struct push_seen {
  std::vector<std::string> strings;
  std::vector<std::pair<std::string, std::string>> points;  // metric name, "int 3" / "double 0.25"
};

// Splits the MOCKTELEMETRY lines ("[thrd:mock]: mock:0/internal: string value: ...") into
// pushes. A push's strings come in this order: its resource attributes (keys and values), the
// scope name ("kgroup") and version, then per metric its name and description, each followed by
// its data point. So the strings after a push's last data point and before the next "kgroup"
// are the next push's resource attributes.
std::vector<push_seen> pushes_in(const std::vector<std::string>& log) {
  static const std::string str = "string value: ";
  static const std::string point = "NumberDataPoint ";
  std::vector<push_seen> out;
  push_seen current;
  std::vector<std::string> since_point;  // strings since the last data point
  std::string metric;
  bool in_push = false;
  for (const auto& line : log) {
    if (const auto at = line.find(str); at != std::string::npos) {
      const auto value = line.substr(at + str.size());
      if (value == "kgroup") {
        if (in_push) {
          current.strings.resize(current.strings.size() - since_point.size());
          out.push_back(std::move(current));
          current = {};
          current.strings = since_point;
        }
        in_push = true;
      }
      if (value.rfind("org.apache.kafka.", 0) == 0) metric = value;
      current.strings.push_back(value);
      since_point.push_back(value);
    } else if (const auto p = line.find(point); p != std::string::npos) {
      // "NumberDataPoint int value: 3 time: ..." / "NumberDataPoint double value: 0.250000 time: ..."
      const auto rest = line.substr(p + point.size());
      const auto kind = rest.substr(0, rest.find(' '));
      const auto v0 = rest.find("value: ") + 7;
      current.points.emplace_back(metric, kind + " " + rest.substr(v0, rest.find(' ', v0) - v0));
      since_point.clear();
    }
  }
  if (in_push) out.push_back(std::move(current));
  return out;
}

std::vector<std::string> values_of(const std::vector<push_seen>& pushes, const std::string& metric) {
  std::vector<std::string> out;
  for (const auto& p : pushes) {
    for (const auto& [name, v] : p.points) {
      if (name == metric) out.push_back(v);
    }
  }
  return out;
}

std::int64_t int_of(const std::string& v) {
  REQUIRE(v.rfind("int ", 0) == 0);
  return std::stoll(v.substr(4));
}

std::int64_t sum_of(const std::vector<push_seen>& pushes, const std::string& metric) {
  std::int64_t sum = 0;
  for (const auto& v : values_of(pushes, metric)) sum += int_of(v);
  return sum;
}

// kgroup's telemetry lines (the driver logs the core's transitions at debug).
std::string telemetry_lines(const kgroup::test::log_capture& log) {
  std::string out;
  for (const auto& [level, line] : log.lines()) {
    if (line.find("telemetry") != std::string::npos) out += line + "\n";
  }
  return out;
}

// The last lines of the mock's telemetry log, for failure messages.
std::string tail_of(const std::vector<std::string>& log, std::size_t n = 60) {
  std::string out;
  for (std::size_t i = log.size() > n ? log.size() - n : 0; i < log.size(); ++i) out += log[i] + "\n";
  return out;
}

std::int64_t consume(kgroup::Consumer& c, std::int64_t want, std::chrono::seconds within = 30s) {
  std::int64_t n = 0;
  const auto end = std::chrono::steady_clock::now() + within;
  while (n < want && std::chrono::steady_clock::now() < end)
    n += static_cast<std::int64_t>(c.poll(50ms).size());
  return n;
}

// The client instance id librdkafka 2.15.1's mock assigns to every client (most significant
// bits 298, least 129), in Java's Uuid.toString() form.
std::string mock_instance_id() {
  kgroup::protocol::uuid u;
  u.bytes[6] = 0x01;  // 298 = 0x012a
  u.bytes[7] = 0x2a;
  u.bytes[15] = 0x81;  // 129
  return u.to_string();
}

}  // namespace

TEST_CASE("telemetry: the requested metrics arrive at the interval, as deltas, with plausible values",
          "[telemetry][integration]") {
  if (!mock_cluster::modern()) {
    WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                                << " has no telemetry APIs; run with librdkafka 2.15.1");
    return;
  }
  kgroup::test::log_capture log;
  mock_cluster mc(3);
  REQUIRE(mc.set_telemetry({consumed_total, assigned, idle_ratio}, 300));
  mc.create_topic("t", 3);
  mc.produce("t", 30);
  kgroup::Consumer c(telemetry_config(mc, "g-telemetry"));
  c.subscribe({"t"});
  REQUIRE(consume(c, 30) == 30);
  CHECK(c.client_instance_id(10s) == mock_instance_id());
  // Pushes come every 300 ms (the first after 150-450 ms); the mock's subscription asks for
  // deltas, so the records counted over all pushes add up to what poll() returned.
  std::vector<push_seen> pushes;
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end) {
    c.poll(50ms);
    pushes = pushes_in(mc.telemetry_log());
    if (pushes.size() >= 3 && sum_of(pushes, consumed_total) == 30) break;
  }
  INFO(pushes.size() << " pushes; the mock's log ends with:\n" << tail_of(mc.telemetry_log()));
  INFO("kgroup's telemetry log:\n" << telemetry_lines(log));
  REQUIRE(pushes.size() >= 3);
  CHECK(sum_of(pushes, consumed_total) == 30);
  // Every push carries the three requested metrics and nothing else.
  for (const auto& p : pushes) {
    std::vector<std::string> names;
    for (const auto& s : p.strings) {
      if (s.rfind("org.apache.kafka.", 0) == 0) names.push_back(s);
    }
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{assigned, consumed_total, idle_ratio});
    // The resource attributes: group_id and the member id (after the first join).
    CHECK(std::find(p.strings.begin(), p.strings.end(), "group_id") != p.strings.end());
    CHECK(std::find(p.strings.begin(), p.strings.end(), "g-telemetry") != p.strings.end());
  }
  // The only member owns all three partitions; the idle ratio is a ratio.
  CHECK(int_of(values_of(pushes, assigned).back()) == 3);
  for (const auto& v : values_of(pushes, idle_ratio)) {
    REQUIRE(v.rfind("double ", 0) == 0);
    const double r = std::stod(v.substr(7));
    CHECK(r >= 0.0);
    CHECK(r <= 1.0);
  }
  c.close();
}

TEST_CASE("telemetry: close() sends one last push, with what the interval had not sent yet",
          "[telemetry][integration]") {
  if (!mock_cluster::modern()) {
    WARN("skipped: librdkafka " << mock_cluster::librdkafka_version_string()
                                << " has no telemetry APIs; run with librdkafka 2.15.1");
    return;
  }
  mock_cluster mc(1);
  // All metrics, every 60 s: the first push would come after 30-90 s, long after close().
  kgroup::test::log_capture log;
  REQUIRE(mc.set_telemetry({""}, 60000));
  mc.create_topic("t", 2);
  mc.produce("t", 12);
  kgroup::Consumer c(telemetry_config(mc, "g-telemetry-close"));
  c.subscribe({"t"});
  REQUIRE(consume(c, 12) == 12);
  REQUIRE(c.client_instance_id(10s) == mock_instance_id());  // subscribed
  CHECK(pushes_in(mc.telemetry_log()).empty());
  c.close();
  const auto pushes = pushes_in(mc.telemetry_log());
  INFO("the mock's log ends with:\n" << tail_of(mc.telemetry_log()));
  INFO("kgroup's telemetry log:\n" << telemetry_lines(log));
  REQUIRE(pushes.size() == 1);
  CHECK(sum_of(pushes, consumed_total) == 12);
  // "" selects everything kgroup offers: more than the three above, all under the consumer prefix.
  std::size_t names = 0;
  for (const auto& s : pushes[0].strings) names += s.rfind("org.apache.kafka.consumer.", 0) == 0 ? 1 : 0;
  CHECK(names >= 20);
  CHECK_THROWS_AS(c.client_instance_id(0ms), kgroup::Error);  // closed
}

TEST_CASE("telemetry: a broker without the APIs gets neither request and the consumer works as before",
          "[telemetry][integration]") {
  kgroup::test::log_capture log;
  mock_cluster mc(3);
  if (mock_cluster::modern()) {
    // 2.15.1's mock offers them: take them away (-1: not offered), as a broker before 3.7 would.
    mc.set_api_version(71, -1, -1);
    mc.set_api_version(72, -1, -1);
    REQUIRE(mc.set_telemetry({""}, 100));
  }
  mc.create_topic("t", 3);
  mc.produce("t", 30);
  kgroup::Consumer c(telemetry_config(mc, "g-telemetry-none"));
  c.subscribe({"t"});
  REQUIRE(consume(c, 30) == 30);
  // Known at once that no id will come: the call does not wait for its timeout.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(c.client_instance_id(60s));
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);
  CHECK(log.has(kgroup::LogLevel::debug, {"telemetry", "does not offer the telemetry APIs"}));
  c.commit_sync();
  c.close();
  CHECK(mc.telemetry_log().empty());
  // Not an error, not a warning: nothing about it above debug (the core's notes start with
  // "telemetry:", the connection would name the request).
  for (const auto& [level, line] : log.lines()) {
    INFO(line);
    if (line.find("telemetry:") != std::string::npos || line.find("Telemetry") != std::string::npos)
      CHECK(level == kgroup::LogLevel::debug);
  }
}

TEST_CASE("telemetry: with enable.metrics.push=false nothing is sent and client_instance_id() throws",
          "[telemetry][integration]") {
  mock_cluster mc(1);
  const bool has_telemetry = mc.set_telemetry({""}, 100);
  mc.create_topic("t", 1);
  mc.produce("t", 5);
  kgroup::Consumer c(telemetry_config(mc, "g-telemetry-off").set("enable.metrics.push", "false"));
  c.subscribe({"t"});
  REQUIRE(consume(c, 5) == 5);
  try {
    (void)c.client_instance_id(1s);
    FAIL("client_instance_id() did not throw");
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == kgroup::make_error_code(kgroup::client_errc::illegal_state));
  }
  c.close();
  if (has_telemetry) CHECK(mc.telemetry_log().empty());
}
