// kgroup's own log statements: `logger()->info("group '{}': ...", id)`, formatted with fmt and
// handed to the LogSink of the Consumer this thread works for (log_scope), else to the default
// sink (kgroup/log.hpp). Internal: fmt stays out of the public headers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "kgroup/log.hpp"

namespace kgroup::detail {

// Makes `sink` the calling thread's sink until the scope ends, then restores the one before
// (scopes nest: a rebalance listener may call another Consumer). nullptr: the default sink.
// Set by the Consumer on its background thread for the thread's life and on the user's thread
// for each public call, and by describe_cluster(); `sink` must outlive the scope.
class log_scope {
 public:
  explicit log_scope(LogSink* sink) noexcept;
  ~log_scope();
  log_scope(const log_scope&) = delete;
  log_scope& operator=(const log_scope&) = delete;

 private:
  LogSink* previous_;
};

// The sink one log statement goes to. Holds the default sink alive while it is used: another
// thread may replace it meanwhile (a scope's sink is kept alive by the scope's owner).
class sink_ref {
 public:
  sink_ref(LogSink* sink, std::shared_ptr<LogSink> owner) noexcept : sink_(sink), owner_(std::move(owner)) {}
  bool wants(LogLevel level) const noexcept { return level != LogLevel::off && sink_->min_level() <= level; }
  LogSink& operator*() const noexcept { return *sink_; }

 private:
  LogSink* sink_;
  std::shared_ptr<LogSink> owner_;
};

// KGROUP_LOG_LEVEL's names: trace, debug, info, warn (warning), error (err), critical; any other
// name is off.
LogLevel log_level_from_name(std::string_view name) noexcept;

// The calling thread's scope sink, else the default.
sink_ref current_sink() noexcept;

// `text` with what could forge a log line or drive a terminal escaped as \xNN: C0 and C1 control
// characters, DEL, bytes that are not valid UTF-8, and the Unicode line separators and bidi
// overrides. Printable ASCII and other valid UTF-8 stay as they are. For strings a peer controls
// (a broker's error message, another member's id) that go into errors; every log line gets it
// in emit().
std::string escape_nonprintable(std::string_view text);

// Formats and delivers one line (escaped as by escape_nonprintable); whatever formatting or the sink throws is dropped (a log line
// must never break the code that logs it).
void emit(LogSink& sink, LogLevel level, fmt::string_view format, fmt::format_args args) noexcept;

// What logger() returns: spdlog's call shape, so call sites read like spdlog's.
class log_front {
 public:
  // For work done only to build a line (e.g. a list of partitions at trace).
  bool should_log(LogLevel level) const noexcept { return current_sink().wants(level); }

  template <class... A> void trace(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::trace, f, a...); }
  template <class... A> void debug(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::debug, f, a...); }
  template <class... A> void info(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::info, f, a...); }
  template <class... A> void warn(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::warn, f, a...); }
  template <class... A> void error(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::error, f, a...); }
  template <class... A> void critical(fmt::format_string<A...> f, A&&... a) const noexcept { write(LogLevel::critical, f, a...); }

 private:
  template <class... Args>
  static void write(LogLevel level, fmt::string_view f, const Args&... args) noexcept {
    const sink_ref sink = current_sink();
    if (sink.wants(level)) emit(*sink, level, f, fmt::make_format_args(args...));
  }
};

}  // namespace kgroup::detail

namespace kgroup {

// Stateless: every call looks up the current sink.
inline const detail::log_front* logger() noexcept {
  static constexpr detail::log_front front;
  return &front;
}

}  // namespace kgroup
