// The log sink interface (issue 17): which sink a line reaches (the thread's scope, else the
// default), the default replaced and restored, min_level() checked before formatting, and a
// throwing sink contained. The routing of whole Consumers is in integration/test_log_routing.cpp.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "base/log.hpp"
#include "kgroup/log.hpp"

using kgroup::LogLevel;
using kgroup::LogSink;

namespace {

struct recording_sink : LogSink {
  explicit recording_sink(LogLevel level = LogLevel::trace) : min(level) {}
  LogLevel min;
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogLevel min_level() const noexcept override { return min; }
  void log(LogLevel level, std::string_view message) override {
    lines.emplace_back(level, std::string(message));
  }
};

struct throwing_sink : LogSink {
  int calls = 0;
  LogLevel min_level() const noexcept override { return LogLevel::trace; }
  void log(LogLevel, std::string_view) override {
    ++calls;
    throw std::runtime_error("sink failed");
  }
};

// Counts how often fmt formats it: a line below the sink's level must not be formatted.
struct counted {
  int* formatted;
};

// Restores the built-in default sink when a test ends, whatever it replaced it with.
struct default_sink_restorer {
  ~default_sink_restorer() { kgroup::set_default_log_sink(nullptr); }
};

}  // namespace

template <>
struct fmt::formatter<counted> : fmt::formatter<int> {
  auto format(const counted& c, fmt::format_context& ctx) const -> decltype(ctx.out()) {
    ++*c.formatted;
    return fmt::formatter<int>::format(*c.formatted, ctx);
  }
};

TEST_CASE("log levels have spdlog's names; KGROUP_LOG_LEVEL's names parse as before", "[log]") {
  CHECK(kgroup::to_string(LogLevel::trace) == "trace");
  CHECK(kgroup::to_string(LogLevel::warn) == "warn");
  CHECK(kgroup::to_string(LogLevel::error) == "error");
  CHECK(kgroup::to_string(LogLevel::off) == "off");
  CHECK(kgroup::detail::log_level_from_name("debug") == LogLevel::debug);
  CHECK(kgroup::detail::log_level_from_name("warning") == LogLevel::warn);
  CHECK(kgroup::detail::log_level_from_name("err") == LogLevel::error);
  CHECK(kgroup::detail::log_level_from_name("critical") == LogLevel::critical);
  // As spdlog did: an unknown name turns logging off.
  CHECK(kgroup::detail::log_level_from_name("loud") == LogLevel::off);
}

TEST_CASE("the default sink is replaced and restored", "[log]") {
  default_sink_restorer restore;
  const auto builtin = kgroup::default_log_sink();
  REQUIRE(builtin != nullptr);
  auto mine = std::make_shared<recording_sink>();
  kgroup::set_default_log_sink(mine);
  CHECK(kgroup::default_log_sink() == mine);
  kgroup::logger()->info("to the default: {}", 1);
  REQUIRE(mine->lines.size() == 1);
  CHECK(mine->lines[0] == std::pair<LogLevel, std::string>(LogLevel::info, "to the default: 1"));

  kgroup::set_default_log_sink(nullptr);
  CHECK(kgroup::default_log_sink() == builtin);
  kgroup::logger()->debug("to the built-in sink (below its level unless KGROUP_LOG_LEVEL says otherwise)");
  CHECK(mine->lines.size() == 1);
}

TEST_CASE("a thread's scope sink gets its lines; scopes nest; other threads keep the default", "[log]") {
  default_sink_restorer restore;
  auto fallback = std::make_shared<recording_sink>();
  kgroup::set_default_log_sink(fallback);
  recording_sink outer, inner;
  {
    const kgroup::detail::log_scope a(&outer);
    kgroup::logger()->info("outer {}", 1);
    {
      const kgroup::detail::log_scope b(&inner);
      kgroup::logger()->info("inner");
      std::thread([] { kgroup::logger()->info("another thread"); }).join();
    }
    kgroup::logger()->warn("outer {}", 2);
    {
      const kgroup::detail::log_scope none(nullptr);  // a Consumer without a sink: the default
      kgroup::logger()->error("default again");
    }
  }
  kgroup::logger()->info("after the scopes");
  REQUIRE(outer.lines.size() == 2);
  CHECK(outer.lines[0].second == "outer 1");
  CHECK(outer.lines[1] == std::pair<LogLevel, std::string>(LogLevel::warn, "outer 2"));
  REQUIRE(inner.lines.size() == 1);
  CHECK(inner.lines[0].second == "inner");
  REQUIRE(fallback->lines.size() == 3);
  CHECK(fallback->lines[0].second == "another thread");
  CHECK(fallback->lines[1].second == "default again");
  CHECK(fallback->lines[2].second == "after the scopes");
}

TEST_CASE("a sink's minimum level: no call and no formatting below it", "[log]") {
  recording_sink sink(LogLevel::warn);
  const kgroup::detail::log_scope scope(&sink);
  int formatted = 0;
  kgroup::logger()->trace("{}", counted{&formatted});
  kgroup::logger()->debug("{}", counted{&formatted});
  kgroup::logger()->info("{}", counted{&formatted});
  CHECK_FALSE(kgroup::logger()->should_log(LogLevel::info));
  CHECK(formatted == 0);
  CHECK(sink.lines.empty());
  CHECK(kgroup::logger()->should_log(LogLevel::warn));
  kgroup::logger()->warn("{}", counted{&formatted});
  kgroup::logger()->critical("{}", counted{&formatted});
  CHECK(formatted == 2);
  REQUIRE(sink.lines.size() == 2);
  CHECK(sink.lines[1] == std::pair<LogLevel, std::string>(LogLevel::critical, "2"));

  // A sink that wants nothing (off) gets nothing, critical included.
  sink.min = LogLevel::off;
  kgroup::logger()->critical("{}", counted{&formatted});
  CHECK(formatted == 2);
  CHECK(sink.lines.size() == 2);
}

TEST_CASE("a throwing sink: the line is dropped, the caller goes on, later lines are delivered", "[log]") {
  throwing_sink sink;
  const kgroup::detail::log_scope scope(&sink);
  CHECK_NOTHROW(kgroup::logger()->error("first {}", "line"));
  CHECK_NOTHROW(kgroup::logger()->info("second"));
  CHECK(sink.calls == 2);
}

TEST_CASE("the stderr sink: its level, and lines below it are dropped", "[log]") {
  auto quiet = kgroup::make_stderr_log_sink(LogLevel::error, "test");
  CHECK(quiet->min_level() == LogLevel::error);
  const kgroup::detail::log_scope scope(quiet.get());
  CHECK_FALSE(kgroup::logger()->should_log(LogLevel::warn));
  CHECK(kgroup::logger()->should_log(LogLevel::error));
}

// Issue 31, lower items: strings a peer controls (a broker's error message, a member id, a
// client id) reach the sink with their control characters escaped, so a peer cannot forge log
// lines or send terminal escapes; printable UTF-8 stays as it is.
TEST_CASE("log lines: control characters and invalid UTF-8 are escaped before the sink", "[log]") {
  recording_sink sink;
  kgroup::detail::log_scope scope(&sink);
  const std::string peer = "member-1\n[2024-01-01 00:00:00.000] [kgroup] [error] forged\r\x1b[31mred\x7f";
  kgroup::logger()->warn("member '{}' left", peer);
  kgroup::logger()->info("caf\xc3\xa9 {} end", std::string("\xff\xc3"));
  REQUIRE(sink.lines.size() == 2);
  const std::string& line = sink.lines[0].second;
  INFO(line);
  for (const char c : line) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(line.find("member-1\\x0a[2024") != std::string::npos);
  CHECK(line.find("\\x1b[31mred\\x7f") != std::string::npos);
  CHECK(sink.lines[1].second == "caf\xc3\xa9 \\xff\\xc3 end");
}
