// The log sink interface (issue 17): which sink a line reaches (the thread's scope, else the
// default), the default replaced and restored, min_level() checked before formatting, and a
// throwing sink contained. The routing of whole Consumers is in integration/test_log_routing.cpp.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>
#include <catch2/catch.hpp>

#include "base/log.hpp"
#include "base/stderr_sink.hpp"
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

// Points fd 1 and fd 2 at temporary files until finish(), which returns what each received.
// Nothing may be CHECKed in between: Catch reports to stdout.
class std_capture {
 public:
  std_capture() {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int i = 0; i < 2; ++i) {
      files_[i] = std::tmpfile();
      saved_[i] = ::dup(i + 1);
      ok_ = ok_ && files_[i] != nullptr && saved_[i] >= 0 && ::dup2(::fileno(files_[i]), i + 1) >= 0;
    }
  }
  ~std_capture() { finish(); }
  std_capture(const std_capture&) = delete;
  std_capture& operator=(const std_capture&) = delete;

  bool ok() const { return ok_; }
  // {stdout, stderr}
  std::array<std::string, 2> finish() {
    std::array<std::string, 2> out;
    std::fflush(stdout);
    std::fflush(stderr);
    for (int i = 0; i < 2; ++i) {
      if (saved_[i] >= 0) {
        ::dup2(saved_[i], i + 1);
        ::close(saved_[i]);
        saved_[i] = -1;
      }
      if (files_[i] != nullptr) {
        std::rewind(files_[i]);
        char buffer[4096];
        std::size_t n = 0;
        while ((n = std::fread(buffer, 1, sizeof buffer, files_[i])) > 0) out[i].append(buffer, n);
        std::fclose(files_[i]);
        files_[i] = nullptr;
      }
    }
    return out;
  }

 private:
  std::array<std::FILE*, 2> files_{};
  std::array<int, 2> saved_{-1, -1};
  bool ok_ = true;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  if (start < text.size()) lines.push_back(text.substr(start));  // an unterminated rest
  return lines;
}

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

// Issue 37: the sink writes spdlog 1.10's default pattern itself (spdlog is no longer linked).
TEST_CASE("the stderr sink's line: spdlog's default pattern, level names and colours", "[log]") {
  using namespace std::chrono;
  const system_clock::time_point when = system_clock::time_point(seconds(1796696174)) + milliseconds(7);
  // The local date and time, as strftime prints it.
  const std::time_t t = 1796696174;
  std::tm local{};
  REQUIRE(localtime_r(&t, &local) != nullptr);
  char date[32];
  REQUIRE(std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &local) > 0);
  const std::string stamp = "[" + std::string(date) + ".007] ";

  using kgroup::detail::stderr_log_line;
  CHECK(stderr_log_line(when, "kgroup", LogLevel::warn, "broker 3 is down", false) ==
        stamp + "[kgroup] [warning] broker 3 is down\n");
  CHECK(stderr_log_line(when + milliseconds(726), "kgroup", LogLevel::info, "x", false) ==
        "[" + std::string(date) + ".733] [kgroup] [info] x\n");
  const std::pair<LogLevel, std::string> names[]{
      {LogLevel::trace, "trace"},  {LogLevel::debug, "debug"}, {LogLevel::info, "info"},
      {LogLevel::warn, "warning"}, {LogLevel::error, "error"}, {LogLevel::critical, "critical"}};
  for (const auto& [level, name] : names) {
    CHECK(stderr_log_line(when, "my-app", level, "m", false) == stamp + "[my-app] [" + name + "] m\n");
  }
  // No name: no "[] " (as spdlog with an empty logger name). An empty message: the line still ends.
  CHECK(stderr_log_line(when, "", LogLevel::error, "no name", false) == stamp + "[error] no name\n");
  CHECK(stderr_log_line(when, "kgroup", LogLevel::info, "", false) == stamp + "[kgroup] [info] \n");
  CHECK(stderr_log_line(when, "kgroup", LogLevel::off, "never", false).empty());

  // On a colour terminal the level's name only, in spdlog's colour for the level, then a reset.
  const std::pair<LogLevel, std::string> colours[]{
      {LogLevel::trace, "\033[37mtrace"},        {LogLevel::debug, "\033[36mdebug"},
      {LogLevel::info, "\033[32minfo"},          {LogLevel::warn, "\033[33m\033[1mwarning"},
      {LogLevel::error, "\033[31m\033[1merror"}, {LogLevel::critical, "\033[1m\033[41mcritical"}};
  for (const auto& [level, coloured] : colours) {
    CHECK(stderr_log_line(when, "kgroup", level, "m", true) ==
          stamp + "[kgroup] [" + coloured + "\033[m] m\n");
  }
}

TEST_CASE("the stderr sink writes whole lines to stderr, none to stdout", "[log]") {
  std::array<std::string, 2> out;
  bool captured = false;
  {
    std_capture capture;
    // Made while stderr is a file: no colour, whatever the terminal the tests run in.
    const auto sink = kgroup::make_stderr_log_sink(LogLevel::trace, "capture-test");
    const auto unnamed = kgroup::make_stderr_log_sink(LogLevel::trace, "");
    sink->log(LogLevel::trace, "one");
    sink->log(LogLevel::debug, "two");
    sink->log(LogLevel::info, "three");
    sink->log(LogLevel::warn, "broker 3 is down");
    sink->log(LogLevel::error, "five");
    sink->log(LogLevel::critical, "six");
    unnamed->log(LogLevel::info, "seven");
    // Through the logging front, as the library logs.
    {
      const kgroup::detail::log_scope scope(sink.get());
      kgroup::logger()->warn("member '{}' left", "m-1");
    }
    // Two sinks on four threads: every line arrives whole (one mutex, one write per line).
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        const std::string text(100 + i * 37, static_cast<char>('a' + i));
        for (int n = 0; n < 200; ++n) (i % 2 == 0 ? sink : unnamed)->log(LogLevel::info, text);
      });
    }
    for (auto& thread : threads) thread.join();
    captured = capture.ok();
    out = capture.finish();
  }
  REQUIRE(captured);
  CHECK(out[0].empty());  // stdout
  const std::vector<std::string> lines = split_lines(out[1]);
  REQUIRE(lines.size() == 8 + 4 * 200);
  REQUIRE(out[1].back() == '\n');
  const std::string stamp = R"(\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\] )";
  const char* expected[]{"[capture-test] [trace] one",
                         "[capture-test] [debug] two",
                         "[capture-test] [info] three",
                         "[capture-test] [warning] broker 3 is down",
                         "[capture-test] [error] five",
                         "[capture-test] [critical] six",
                         "[info] seven",
                         "[capture-test] [warning] member 'm-1' left"};
  const std::regex stamp_re(stamp + ".*");
  for (std::size_t i = 0; i < 8; ++i) {
    INFO(lines[i]);
    CHECK(std::regex_match(lines[i], stamp_re));
    CHECK(lines[i].substr(lines[i].find("] ") + 2) == expected[i]);
  }
  const std::regex threaded(stamp + R"((\[capture-test\] )?\[info\] ([a-d]+))");
  std::array<int, 4> per_thread{};
  for (std::size_t i = 8; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, threaded)) {
      FAIL_CHECK("a torn line: " << lines[i]);
      continue;
    }
    const std::string text = m[2].str();
    const int thread = text[0] - 'a';
    CHECK(text == std::string(100 + static_cast<std::size_t>(thread) * 37, text[0]));
    CHECK(m[1].matched == (thread % 2 == 0));  // the named sink's threads: 0 and 2
    ++per_thread[static_cast<std::size_t>(thread)];
  }
  CHECK(per_thread == std::array<int, 4>{200, 200, 200, 200});
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
