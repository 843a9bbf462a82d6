// The stderr sink (make_stderr_log_sink, the built-in default): the only source that includes
// spdlog, compiled as its own layer (kgroup_stderr_sink) so nothing else sees spdlog's headers.
#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "kgroup/log.hpp"

namespace kgroup {

namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
  // Indexed by LogLevel.
  constexpr std::array levels{spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
                              spdlog::level::warn,  spdlog::level::err,   spdlog::level::critical};
  const auto i = static_cast<std::size_t>(level);
  return i < levels.size() ? levels[i] : spdlog::level::off;
}

// stderr, never stdout: applications own their stdout. The spdlog logger is private (never in
// spdlog's registry), so an application's own spdlog setup neither sees nor changes it. spdlog's
// colour sinks share one console mutex, so lines of several of these sinks do not interleave.
class stderr_sink final : public LogSink {
 public:
  stderr_sink(LogLevel min_level, std::string_view name)
      : min_level_(min_level),
        logger_(std::string(name), std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {
    logger_.set_level(spdlog::level::trace);  // min_level_ filters
  }
  LogLevel min_level() const noexcept override { return min_level_; }
  void log(LogLevel level, std::string_view message) override {
    logger_.log(to_spdlog(level), spdlog::string_view_t(message.data(), message.size()));
  }

 private:
  const LogLevel min_level_;
  spdlog::logger logger_;
};

}  // namespace

std::shared_ptr<LogSink> make_stderr_log_sink(LogLevel min_level, std::string_view name) {
  return std::make_shared<stderr_sink>(min_level, name);
}

}  // namespace kgroup
