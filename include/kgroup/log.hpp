// Logging. kgroup never prints to stdout; it logs through an spdlog logger named "kgroup",
// which applications may replace (for example with one writing to their own sinks).
#pragma once

#include "kgroup/export.hpp"

#include <memory>

#include <spdlog/logger.h>

namespace kgroup {

/// Replaces the logger every kgroup component uses. Thread-safe; takes effect for log calls
/// made after it returns. Passing nullptr restores the default (stderr, level "info").
KGROUP_EXPORT void set_logger(std::shared_ptr<spdlog::logger> logger);

/// The current logger. Thread-safe.
KGROUP_EXPORT std::shared_ptr<spdlog::logger> logger();

}  // namespace kgroup
