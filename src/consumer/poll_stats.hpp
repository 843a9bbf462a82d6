// The user thread's poll() statistics (Java's poll-idle-ratio, time-between-poll, records and
// bytes consumed): measured by the facade's poll() and published into shared_state::metrics.
// User thread only; publish() with shared_state::mutex held.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "base/histogram.hpp"
#include "consumer/window_stat.hpp"
#include "kgroup/consumer.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::detail {

class poll_stats {
 public:
  using clock = std::chrono::steady_clock;

  /// A poll() began at `now`: the time since the previous one began.
  void poll_started(clock::time_point now);

  /// The poll() that began at `started` returns `records` records at `now`.
  void poll_ended(clock::time_point started, clock::time_point now, std::size_t records);

  /// Fetched data of `bytes` was opened for reading (counted when the poll() ends).
  void data_opened(std::size_t bytes) { pending_bytes_ += static_cast<std::int64_t>(bytes); }

  /// Whether poll() publishes at `now` (at most every 100 ms).
  bool publish_due(clock::time_point now) const {
    return now - last_publish_ >= std::chrono::milliseconds(100);
  }

  /// Writes the poll figures into `m` (shared_state::mutex held).
  void publish(metrics_state& m, clock::time_point now);

  /// The application's statistics callback (statistics.interval.ms; 0: never called).
  void set_statistics_callback(StatisticsCallback cb, std::chrono::milliseconds interval,
                               clock::time_point now) {
    statistics_cb_ = std::move(cb);
    statistics_interval_ = interval;
    next_statistics_ = now + interval;
  }
  /// After a poll(): calls the statistics callback with `snapshot()` when it is due. What it
  /// throws is logged, never passed on (the poll() returns its records).
  void report_statistics(clock::time_point now, const std::function<ConsumerMetrics()>& snapshot);

 private:
  StatisticsCallback statistics_cb_;
  std::chrono::milliseconds statistics_interval_{0};
  clock::time_point next_statistics_{};
  std::optional<clock::time_point> last_poll_start_;
  std::optional<clock::time_point> prev_poll_start_;
  clock::time_point last_publish_{};
  window_stat between_polls_;
  histogram between_polls_hist_;
  window_stat idle_ratio_;
  window_stat records_window_;
  window_stat bytes_window_;
  std::int64_t records_total_ = 0;
  std::int64_t bytes_total_ = 0;
  std::int64_t pending_bytes_ = 0;  // bytes of fetched data opened since the last poll() ended
};

}  // namespace kgroup::detail
