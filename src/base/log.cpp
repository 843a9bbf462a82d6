// Routing of log lines: the thread's scope sink, else the default (see base/log.hpp).
#include "base/log.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>

namespace kgroup {

namespace {

// Indexed by LogLevel.
constexpr std::string_view level_names[]{"trace", "debug", "info", "warn", "error", "critical", "off"};

// The built-in default. Never destroyed: a line logged from a static destructor or a thread
// still running at exit must find it.
const std::shared_ptr<LogSink>& builtin_sink() {
  static const auto* sink = [] {
    const char* env = std::getenv("KGROUP_LOG_LEVEL");
    const LogLevel level = env != nullptr ? detail::log_level_from_name(env) : LogLevel::info;
    return new std::shared_ptr<LogSink>(make_stderr_log_sink(level, "kgroup"));
  }();
  return *sink;
}

// The application's default sink, if it set one. `replaced` lets a log statement skip the
// mutex (and the reference count) in the common case of no replacement; a line racing with
// set_default_log_sink() may still go to the sink before.
struct default_slot {
  std::mutex mutex;
  std::shared_ptr<LogSink> sink;  // guarded by mutex
  std::atomic<bool> replaced{false};
};

default_slot& slot() {
  static auto* s = new default_slot;  // never destroyed, like builtin_sink()
  return *s;
}

thread_local LogSink* thread_sink = nullptr;  // the innermost log_scope's sink

}  // namespace

LogSink::~LogSink() = default;

std::string_view to_string(LogLevel level) noexcept {
  const auto i = static_cast<std::size_t>(level);
  return i < std::size(level_names) ? level_names[i] : "off";
}

void set_default_log_sink(std::shared_ptr<LogSink> sink) {
  // Restoring what default_log_sink() returned is restoring the built-in one (and keeps the
  // fast path).
  if (sink == builtin_sink()) sink = nullptr;
  default_slot& s = slot();
  std::lock_guard lock(s.mutex);
  s.replaced.store(sink != nullptr, std::memory_order_release);
  s.sink = std::move(sink);
}

std::shared_ptr<LogSink> default_log_sink() {
  default_slot& s = slot();
  std::lock_guard lock(s.mutex);
  return s.sink ? s.sink : builtin_sink();
}

namespace detail {

LogLevel log_level_from_name(std::string_view name) noexcept {
  // spdlog's names and short forms, which KGROUP_LOG_LEVEL has always taken.
  if (name == "warning") return LogLevel::warn;
  if (name == "err") return LogLevel::error;
  for (std::size_t i = 0; i < std::size(level_names); ++i) {
    if (name == level_names[i]) return static_cast<LogLevel>(i);
  }
  return LogLevel::off;  // as spdlog: an unknown name turns logging off
}

log_scope::log_scope(LogSink* sink) noexcept : previous_(thread_sink) {
  thread_sink = sink;
}

log_scope::~log_scope() {
  thread_sink = previous_;
}

sink_ref current_sink() noexcept {
  if (thread_sink != nullptr) return {thread_sink, nullptr};
  default_slot& s = slot();
  if (s.replaced.load(std::memory_order_acquire)) {
    try {
      std::lock_guard lock(s.mutex);
      if (s.sink) return {s.sink.get(), s.sink};
    } catch (...) {
      // A mutex that cannot be locked: the built-in sink rather than no line at all.
    }
  }
  const auto& builtin = builtin_sink();
  return {builtin.get(), nullptr};  // never destroyed: no reference needed
}

void emit(LogSink& sink, LogLevel level, fmt::string_view format, fmt::format_args args) noexcept {
  try {
    std::string line = fmt::vformat(format, args);
    // Peer-controlled strings (broker messages, member and client ids) must not forge lines.
    const bool plain = std::all_of(line.begin(), line.end(), [](char ch) {
      return static_cast<unsigned char>(ch) >= 0x20 && static_cast<unsigned char>(ch) < 0x7f;
    });
    if (!plain) line = escape_nonprintable(line);
    sink.log(level, line);
  } catch (...) {
    // Dropped: the sink's problem must not become the Consumer's.
  }
}

}  // namespace detail

}  // namespace kgroup
