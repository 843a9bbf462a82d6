// The stderr sink (make_stderr_log_sink, the built-in default), on fmt and the C library alone
// (issue 37: spdlog, its only user before, cost an idle Consumer's process ~230 KB resident).
// It prints what spdlog's stderr colour sink printed with its default pattern, byte for byte:
// stderr_sink.hpp describes the line.
#include "base/stderr_sink.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

namespace kgroup {

namespace detail {

namespace {

struct level_style {
  std::string_view name;    // spdlog's spelling
  std::string_view colour;  // spdlog's ansicolor_sink defaults
};

// Indexed by LogLevel.
constexpr std::array<level_style, 6> level_styles{{
    {"trace", "\033[37m"},            // white
    {"debug", "\033[36m"},            // cyan
    {"info", "\033[32m"},             // green
    {"warning", "\033[33m\033[1m"},   // bold yellow
    {"error", "\033[31m\033[1m"},     // bold red
    {"critical", "\033[1m\033[41m"},  // bold on red
}};
constexpr std::string_view colour_reset = "\033[m";

// One mutex for every stderr sink of the process (as spdlog's console mutex was), so the lines of
// several sinks never interleave. Never destroyed: a line logged from a static destructor or a
// thread still running at exit must find it.
std::mutex& stderr_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

}  // namespace

std::string stderr_log_line(std::chrono::system_clock::time_point when, std::string_view name, LogLevel level,
                            std::string_view message, bool colour) {
  const auto index = static_cast<std::size_t>(level);
  if (index >= level_styles.size()) return {};
  const auto since_epoch = when.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t time = static_cast<std::time_t>(seconds.count());
  std::tm local{};
  localtime_r(&time, &local);

  std::string line;
  line.reserve(64 + name.size() + message.size());
  auto out = std::back_inserter(line);
  fmt::format_to(out, "[{}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}] ", local.tm_year + 1900, local.tm_mon + 1,
                 local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, millis);
  if (!name.empty()) fmt::format_to(out, "[{}] ", name);
  const level_style& style = level_styles[index];
  if (colour) {
    fmt::format_to(out, "[{}{}{}] ", style.colour, style.name, colour_reset);
  } else {
    fmt::format_to(out, "[{}] ", style.name);
  }
  line.append(message);
  line.push_back('\n');
  return line;
}

bool stderr_wants_colour() noexcept {
  if (::isatty(STDERR_FILENO) == 0) return false;
  static const bool colour_terminal = [] {
    if (std::getenv("COLORTERM") != nullptr) return true;
    const char* term = std::getenv("TERM");
    if (term == nullptr) return false;
    constexpr std::array<const char*, 16> terms{"ansi",  "color", "console",   "cygwin", "gnome", "konsole",
                                                "kterm", "linux", "msys",      "putty",  "rxvt",  "screen",
                                                "vt100", "xterm", "alacritty", "vt102"};
    return std::any_of(terms.begin(), terms.end(),
                       [term](const char* known) { return std::strstr(term, known) != nullptr; });
  }();
  return colour_terminal;
}

namespace {

// stderr, never stdout: applications own their stdout.
class stderr_sink final : public LogSink {
 public:
  stderr_sink(LogLevel min_level, std::string_view name)
      : min_level_(min_level), name_(name), colour_(stderr_wants_colour()) {}
  LogLevel min_level() const noexcept override { return min_level_; }
  void log(LogLevel level, std::string_view message) noexcept override {
    try {
      const std::string line =
          stderr_log_line(std::chrono::system_clock::now(), name_, level, message, colour_);
      if (line.empty()) return;
      // The whole line in one fwrite: stderr is unbuffered, so it is one write() (and lines of
      // other writers to fd 2 do not land inside it); the flush is for an application that made
      // stderr buffered.
      const std::lock_guard lock(stderr_mutex());
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fflush(stderr);
    } catch (...) {
      // Dropped (no memory, or a mutex that cannot be locked): logging must not fail the caller.
    }
  }

 private:
  const LogLevel min_level_;
  const std::string name_;
  const bool colour_;
};

}  // namespace

}  // namespace detail

std::shared_ptr<LogSink> make_stderr_log_sink(LogLevel min_level, std::string_view name) {
  return std::make_shared<detail::stderr_sink>(min_level, name);
}

}  // namespace kgroup
