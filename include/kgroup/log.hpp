/// \file
/// Logging. kgroup never prints to stdout: it hands each log line to a LogSink, the Consumer's own
/// (Config::set_log_sink) or else the process-wide default, which writes to stderr. No logging
/// library appears here, so an application need not compile or link against kgroup's.
#pragma once

#include "kgroup/export.hpp"

#include <memory>
#include <string_view>

namespace kgroup {

/// Severity of a log line, lowest first. `off` is only a minimum level (a sink that wants no
/// line); no line is logged at it.
enum class LogLevel { trace, debug, info, warn, error, critical, off };

/// "trace", "debug", "info", "warn", "error", "critical" or "off".
KGROUP_EXPORT std::string_view to_string(LogLevel level) noexcept;

/// Receives kgroup's log lines. Implement log() (and min_level() to see more or fewer than info).
///
/// Thread-safety: a sink is called on the Consumer's background thread and on every thread that
/// calls into the Consumer, possibly at the same time, and one sink may serve several Consumers:
/// both methods must be thread-safe. log() runs on the thread that keeps the group membership
/// alive (heartbeats), so it should be quick, and it must not call into a Consumer.
class KGROUP_EXPORT LogSink {
 public:
  virtual ~LogSink();

  /// The lowest level this sink wants: kgroup asks before it formats a line, so a line below it
  /// costs this call and nothing else. Called for every log statement, so keep it cheap (return
  /// a member, or load an atomic to change it at run time). Default: info.
  virtual LogLevel min_level() const noexcept { return LogLevel::info; }

  /// One line: `message` has no trailing newline and is valid only during the call; `level` is
  /// at least min_level(). An exception thrown from here is caught and the line dropped.
  virtual void log(LogLevel level, std::string_view message) = 0;
};

/// Replaces the process-wide default sink, used for every log line not logged on behalf of a
/// Consumer or describe_cluster() whose Config has a sink of its own (Config::set_log_sink).
/// Thread-safe; takes effect for lines logged after it returns, also by running Consumers.
/// nullptr restores the built-in default: stderr, as "[date time] [kgroup] [level] message", at
/// the level the environment variable KGROUP_LOG_LEVEL names (trace, debug, info, warn, error,
/// critical, off; read once, default info).
KGROUP_EXPORT void set_default_log_sink(std::shared_ptr<LogSink> sink);

/// The current default sink (the built-in one unless replaced). Thread-safe.
KGROUP_EXPORT std::shared_ptr<LogSink> default_log_sink();

/// A new sink like the built-in default, writing to stderr as "[date time] [name] [level]
/// message", dropping lines below `min_level`. Lines of all such sinks never interleave.
KGROUP_EXPORT std::shared_ptr<LogSink> make_stderr_log_sink(LogLevel min_level, std::string_view name = "kgroup");

}  // namespace kgroup
