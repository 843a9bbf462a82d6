// kgroup-demo's parent process: the settings and text helpers its parts share (timeline.hpp,
// processes.hpp, story.cpp, main.cpp). What crosses to the member processes is in demo.hpp.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>

#include "demo.hpp"

namespace demo {

using namespace std::chrono_literals;

inline constexpr int broker_count = 3;
inline constexpr int partition_count = 12;
inline constexpr auto step_limit = 60s;      // a step that has not settled by then failed
inline constexpr auto quiet_window = 1s;     // settled = the group looked settled this long without a change
inline constexpr auto dwell = 2s;            // consuming between steps
inline constexpr auto journal_holdback = 300ms;  // members' lines arrive over separate pipes: sort them first

// Set by SIGINT and SIGTERM (main.cpp): the story stops waiting and closes the members.
inline volatile std::sig_atomic_t g_interrupted = 0;

inline double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

inline std::string partition_list(const std::vector<std::int32_t>& parts) {
  if (parts.empty()) return "nothing";
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += ", ";
    out += fmt::format("{}-{}", topic_name, parts[i]);
  }
  return out;
}
inline std::string short_list(const std::set<std::int32_t>& parts) {
  if (parts.empty()) return "-";
  std::string out;
  for (auto p : parts) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}
inline std::string with_commas(std::int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return v < 0 ? "-" + s : s;
}

}  // namespace demo
