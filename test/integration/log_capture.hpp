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

#include <spdlog/sinks/base_sink.h>

#include "kgroup/log.hpp"

namespace kgroup::test {

// Installs a logger that keeps every message kgroup logs (debug and up) for the test's lifetime.
class log_capture {
 public:
  log_capture() : sink_(std::make_shared<sink>()) {
    auto l = std::make_shared<spdlog::logger>("kgroup", sink_);
    l->set_level(spdlog::level::debug);
    kgroup::set_logger(l);
  }
  ~log_capture() { kgroup::set_logger(nullptr); }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  /// Whether a message at `level` or above contains every one of `parts`.
  bool has(spdlog::level::level_enum level, std::initializer_list<std::string> parts) const {
    std::lock_guard lock(sink_->mutex_);
    for (const auto& [lvl, msg] : sink_->lines) {
      if (lvl < level) continue;
      if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return msg.find(p) != std::string::npos; })) {
        return true;
      }
    }
    return false;
  }
  bool has_error(std::initializer_list<std::string> parts) const { return has(spdlog::level::err, parts); }
  bool has_warning(std::initializer_list<std::string> parts) const { return has(spdlog::level::warn, parts); }

  /// Everything at warn and above, for failure messages.
  std::string problems() const {
    std::lock_guard lock(sink_->mutex_);
    std::string out;
    for (const auto& [lvl, msg] : sink_->lines) {
      if (lvl >= spdlog::level::warn) out += std::string(spdlog::level::to_string_view(lvl).data()) + ": " + msg + "\n";
    }
    return out;
  }
  void clear() {
    std::lock_guard lock(sink_->mutex_);
    sink_->lines.clear();
  }

 private:
  struct sink : spdlog::sinks::base_sink<std::mutex> {
    using spdlog::sinks::base_sink<std::mutex>::mutex_;
    std::vector<std::pair<spdlog::level::level_enum, std::string>> lines;
    void sink_it_(const spdlog::details::log_msg& m) override {
      lines.emplace_back(m.level, std::string(m.payload.data(), m.payload.size()));
      if (echo) std::fprintf(stderr, "[%s] %s\n", spdlog::level::to_string_view(m.level).data(), lines.back().second.c_str());
    }
    const bool echo = std::getenv("KGROUP_TEST_LOG") != nullptr;  // set to see the log while debugging
    void flush_() override {}
  };
  std::shared_ptr<sink> sink_;
};

}  // namespace kgroup::test
