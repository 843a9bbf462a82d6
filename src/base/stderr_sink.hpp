// The line the stderr sink (make_stderr_log_sink) writes, exposed for its unit test.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "kgroup/log.hpp"

namespace kgroup::detail {

// "[2026-12-07 02:16:14.733] [name] [warning] message\n": spdlog 1.10's default pattern, which
// the sink printed while it was built on spdlog (and which users may parse). Local time with
// milliseconds; "[name] " only for a non-empty name; the level as spdlog spells it (trace, debug,
// info, warning, error, critical). With `colour`, the level's name (only) is wrapped in the ANSI
// colour spdlog's colour sink gives that level and a reset. Empty for LogLevel::off.
std::string stderr_log_line(std::chrono::system_clock::time_point when, std::string_view name, LogLevel level,
                            std::string_view message, bool colour);

// Whether a stderr sink created now colours its lines: as spdlog's colour sinks decide, stderr
// is a terminal and the environment names a colour terminal (COLORTERM is set, or TERM contains
// one of spdlog's terminal names; read once per process).
bool stderr_wants_colour() noexcept;

}  // namespace kgroup::detail
