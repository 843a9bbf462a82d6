// The max.poll.interval.ms clock both membership cores keep (internal to the cores): when poll()
// was last called or returned, whether the application is inside it, and whether the 80%
// warning went out. Pure; time is an argument.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "group/types.hpp"

namespace kgroup::group {

class poll_clock {
 public:
  /// poll() was called / returned: the interval starts again.
  void called(time_point now) noexcept {
    restart(now);
    in_poll_ = true;
  }
  void returned(time_point now) noexcept {
    restart(now);
    in_poll_ = false;
  }
  /// The member (re)subscribed: the interval starts now.
  void restart(time_point now) noexcept {
    last_ = now;
    warned_ = false;
  }
  /// A listener callback started or finished: inside poll() its own time counts from there.
  void callback_moment(time_point now) noexcept {
    if (in_poll_) last_ = now;
  }
  bool in_poll() const noexcept { return in_poll_; }
  time_point last() const noexcept { return last_; }
  bool started() const noexcept { return last_ != time_point{}; }

  /// The milliseconds since the last poll() once they reach `max` (logged as a warning), nullopt
  /// before; past 80% of `max` it warns once (until the next poll()).
  std::optional<std::int64_t> exceeded(time_point now, ms max, const std::string& group_id) {
    const auto since = std::chrono::duration_cast<ms>(now - last_);
    if (since >= max) {
      logger()->warn(
          "group '{}': poll() was not called for {} ms, more than max.poll.interval.ms ({} ms); leaving "
          "the group. Raise max.poll.interval.ms or reduce max.poll.records or the work per poll.",
          group_id, since.count(), max.count());
      return since.count();
    }
    if (!warned_ && since >= max * 8 / 10) {
      warned_ = true;
      logger()->warn("group '{}': {} ms since the last poll(), over 80% of max.poll.interval.ms ({} ms)",
                     group_id, since.count(), max.count());
    }
    return std::nullopt;
  }
  /// When exceeded() must look next: the 80% warning, or (once warned) the limit.
  time_point next_check(ms max) const noexcept { return warned_ ? last_ + max : last_ + max * 8 / 10; }

 private:
  time_point last_{};  // poll() called or returned, or a callback inside it began or ended
  bool in_poll_ = false;
  bool warned_ = false;
};

}  // namespace kgroup::group
