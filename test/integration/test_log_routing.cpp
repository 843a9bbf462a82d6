// Log sinks per Consumer (issue 17): every line a Consumer logs, on its background thread or on
// the thread calling it, reaches its own sink and no other; describe_cluster() logs to its
// Config's sink; a sink that throws does not disturb the Consumer.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "kgroup/cluster.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/log.hpp"
#include "log_capture.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::log_capture;
using kgroup::test::test_config;

namespace {

kgroup::Config log_config(const kgroup::test::mock_cluster& mc, const std::string& name) {
  return test_config(mc.bootstrap_servers())
      .group("g-" + name)
      .client_id(name)
      .short_session()
      .earliest()
      .retry_backoff(50ms);
}

// Every line, one per row, for failure messages.
std::string dump(const log_capture& logs) {
  std::string out;
  for (const auto& [level, line] : logs.lines())
    out += std::string(kgroup::to_string(level)) + ": " + line + "\n";
  return out;
}

bool mentions(const log_capture& logs, const std::string& part) {
  for (const auto& [level, line] : logs.lines()) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

struct throwing_sink : kgroup::LogSink {
  std::atomic<int> calls{0};
  kgroup::LogLevel min_level() const noexcept override { return kgroup::LogLevel::debug; }
  void log(kgroup::LogLevel, std::string_view) override {
    ++calls;
    throw std::runtime_error("this sink always fails");
  }
};

}  // namespace

TEST_CASE("two Consumers with their own sinks: each sink gets only its Consumer's lines", "[log]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("events", 4);
  constexpr std::size_t records = 400;
  mc.produce("events", records);
  log_capture fallback;  // the default sink: neither Consumer may log here
  log_capture logs_a(false), logs_b(false);
  std::size_t seen_a = 0, seen_b = 0;
  {
    kgroup::Consumer a(log_config(mc, "log-a").set_log_sink(logs_a.sink()));
    kgroup::Consumer b(log_config(mc, "log-b").set_log_sink(logs_b.sink()));
    a.subscribe({"events"});
    b.subscribe({"events"});
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while ((seen_a < records || seen_b < records) && std::chrono::steady_clock::now() < deadline) {
      seen_a += a.poll(50ms).size();
      seen_b += b.poll(50ms).size();
    }
    a.close(5s);
    // b is closed by its destructor (the same routing there).
  }
  CHECK(seen_a == records);
  CHECK(seen_b == records);
  INFO("a's log:\n" << dump(logs_a) << "b's log:\n" << dump(logs_b) << "default log:\n" << dump(fallback));
  // The constructor (user thread), the group and connections (background thread) and the leave.
  CHECK(logs_a.has(kgroup::LogLevel::info, {"consumer configuration", "client.id=log-a"}));
  CHECK(logs_a.has(kgroup::LogLevel::info, {"group 'g-log-a': joined generation"}));
  CHECK(logs_a.has(kgroup::LogLevel::debug, {"connecting"}));
  CHECK(logs_b.has(kgroup::LogLevel::info, {"consumer configuration", "client.id=log-b"}));
  CHECK(logs_b.has(kgroup::LogLevel::info, {"group 'g-log-b': joined generation"}));
  CHECK(logs_b.has(kgroup::LogLevel::debug, {"connecting"}));
  CHECK_FALSE(mentions(logs_a, "log-b"));
  CHECK_FALSE(mentions(logs_b, "log-a"));
  CHECK(fallback.lines().empty());
}

TEST_CASE("a Consumer without a sink logs to the default, replaced while it runs", "[log]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("events", 2);
  mc.produce("events", 100);
  auto first = std::make_unique<log_capture>();
  kgroup::Consumer c(log_config(mc, "log-default"));
  CHECK(first->has(kgroup::LogLevel::info, {"consumer configuration", "client.id=log-default"}));
  first.reset();  // the built-in default again, until the next capture
  log_capture second;
  c.subscribe({"events"});
  std::size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (seen < 100 && std::chrono::steady_clock::now() < deadline) seen += c.poll(50ms).size();
  CHECK(seen == 100);
  c.close(5s);
  INFO(dump(second));
  CHECK(second.has(kgroup::LogLevel::info, {"group 'g-log-default': joined generation"}));
}

TEST_CASE("a sink that throws on every line: the Consumer consumes and closes as usual", "[log]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("events", 3);
  mc.produce("events", 300);
  auto sink = std::make_shared<throwing_sink>();
  log_capture fallback;
  kgroup::Consumer c(log_config(mc, "log-throws").set_log_sink(sink));
  c.subscribe({"events"});
  std::size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (seen < 300 && std::chrono::steady_clock::now() < deadline) seen += c.poll(50ms).size();
  CHECK(seen == 300);
  CHECK_NOTHROW(c.close(5s));
  CHECK(sink->calls > 0);
  CHECK(fallback.lines().empty());  // dropped, not rerouted
}

TEST_CASE("describe_cluster() logs to its Config's sink", "[log]") {
  kgroup::test::mock_cluster mc(2);
  log_capture fallback;
  log_capture mine(false);
  auto config = log_config(mc, "log-describe");
  config.set_log_sink(mine.sink());
  const auto info = kgroup::describe_cluster(config, 10s);
  CHECK(info.brokers.size() == 2);
  INFO(dump(mine));
  CHECK(mine.has(kgroup::LogLevel::debug, {"connecting"}));
  CHECK(fallback.lines().empty());
}
