// Captures what kgroup logs during a test (debug and up), to assert on warnings and errors.
// KGROUP_TEST_LOG=1 echoes the lines to stderr while debugging.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kgroup/log.hpp"

namespace kgroup::test {

// A sink that keeps every line (debug and up). By default it is also the process-wide default
// sink for the capture's lifetime (what Consumers without a sink of their own log to); with
// `install_as_default` false, sink() is given to a Config instead.
class log_capture {
 public:
  explicit log_capture(bool install_as_default = true)
      : sink_(std::make_shared<sink_type>()), installed_(install_as_default) {
    if (installed_) kgroup::set_default_log_sink(sink_);
  }
  ~log_capture() {
    if (installed_) kgroup::set_default_log_sink(nullptr);
  }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  std::shared_ptr<LogSink> sink() const { return sink_; }

  /// Whether a message at `level` or above contains every one of `parts`.
  bool has(LogLevel level, std::initializer_list<std::string> parts) const {
    std::lock_guard lock(sink_->mutex);
    for (const auto& [lvl, msg] : sink_->lines) {
      if (lvl < level) continue;
      if (std::all_of(parts.begin(), parts.end(),
                      [&](const std::string& p) { return msg.find(p) != std::string::npos; })) {
        return true;
      }
    }
    return false;
  }
  bool has_error(std::initializer_list<std::string> parts) const { return has(LogLevel::error, parts); }
  bool has_warning(std::initializer_list<std::string> parts) const { return has(LogLevel::warn, parts); }

  /// Everything at warn and above, for failure messages.
  std::string problems() const {
    std::lock_guard lock(sink_->mutex);
    std::string out;
    for (const auto& [lvl, msg] : sink_->lines) {
      if (lvl >= LogLevel::warn) out += std::string(to_string(lvl)) + ": " + msg + "\n";
    }
    return out;
  }
  /// Every line so far.
  std::vector<std::pair<LogLevel, std::string>> lines() const {
    std::lock_guard lock(sink_->mutex);
    return sink_->lines;
  }
  void clear() {
    std::lock_guard lock(sink_->mutex);
    sink_->lines.clear();
  }

 private:
  struct sink_type : LogSink {
    std::mutex mutex;
    std::vector<std::pair<LogLevel, std::string>> lines;          // guarded by mutex
    const bool echo = std::getenv("KGROUP_TEST_LOG") != nullptr;  // set to see the log while debugging
    LogLevel min_level() const noexcept override { return LogLevel::debug; }
    void log(LogLevel level, std::string_view message) override {
      std::lock_guard lock(mutex);
      lines.emplace_back(level, std::string(message));
      if (echo)
        std::fprintf(stderr, "[%s] %s\n", std::string(to_string(level)).c_str(), lines.back().second.c_str());
    }
  };
  std::shared_ptr<sink_type> sink_;
  const bool installed_;
};

}  // namespace kgroup::test
