#include "kgroup/log.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kgroup {

namespace {

std::shared_ptr<spdlog::logger> make_default() {
  // stderr, never stdout: applications own their stdout.
  auto l = std::make_shared<spdlog::logger>("kgroup", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  // KGROUP_LOG_LEVEL (trace, debug, info, warn, error, critical, off) adjusts the default logger.
  const char* env = std::getenv("KGROUP_LOG_LEVEL");
  l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::info);
  return l;
}

std::mutex& logger_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<spdlog::logger>& logger_slot() {
  static std::shared_ptr<spdlog::logger> slot = make_default();
  return slot;
}

}  // namespace

void set_logger(std::shared_ptr<spdlog::logger> l) {
  std::lock_guard lock(logger_mutex());
  logger_slot() = l ? std::move(l) : make_default();
}

std::shared_ptr<spdlog::logger> logger() {
  std::lock_guard lock(logger_mutex());
  return logger_slot();
}

}  // namespace kgroup
