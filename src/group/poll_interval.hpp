// max.poll.interval.ms as both membership cores enforce it (internal to the cores): what is
// recorded and reported when it is exceeded (the clock itself: poll_clock.hpp). What the member
// then does (leave, forget the generation) is each core's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "group/member.hpp"

namespace kgroup::group {

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
