// max.poll.interval.ms as both membership cores enforce it (internal to the cores): how long
// since the last poll(), a warning past 80%, and what is logged, recorded and reported when it
// is exceeded. What the member then does (leave, forget the generation) is each core's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "group/member.hpp"

namespace kgroup::group {

/// The milliseconds since `last_poll` once they reach `max` (logged as a warning), nullopt
/// before; past 80% of `max` it warns once (until `warned` is reset by the next poll()).
inline std::optional<std::int64_t> poll_interval_exceeded(time_point now, time_point last_poll, ms max,
                                                          bool& warned, const std::string& group_id) {
  const auto since = std::chrono::duration_cast<ms>(now - last_poll);
  if (since >= max) {
    logger()->warn(
        "group '{}': poll() was not called for {} ms, more than max.poll.interval.ms ({} ms); leaving "
        "the group. Raise max.poll.interval.ms or reduce max.poll.records or the work per poll.",
        group_id, since.count(), max.count());
    return since.count();
  }
  if (!warned && since >= max * 8 / 10) {
    warned = true;
    logger()->warn("group '{}': {} ms since the last poll(), over 80% of max.poll.interval.ms ({} ms)",
                   group_id, since.count(), max.count());
  }
  return std::nullopt;
}

/// The rebalance history's detail for a poll timeout.
inline std::string poll_timeout_detail(std::int64_t measured, ms max) {
  return "poll() not called for " + std::to_string(measured) + " ms (max.poll.interval.ms " +
         std::to_string(max.count()) + ")";
}

/// What poll() raises after a poll timeout (not fatal: the next poll() rejoins). Out of line
/// (member_stats.cpp): inlined into a core's emplace_back, GCC 12 -O2 reports a false
/// -Warray-bounds in the string copy.
report_error poll_timeout_error();

}  // namespace kgroup::group
