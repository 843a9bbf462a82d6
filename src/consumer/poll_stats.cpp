// poll_stats: the user thread's poll() figures for ConsumerMetrics.
#include "consumer/poll_stats.hpp"

#include "base/log.hpp"

namespace kgroup::detail {

void poll_stats::poll_started(clock::time_point now) {
  if (last_poll_start_) {
    between_polls_.record(now, std::chrono::duration<double, std::milli>(now - *last_poll_start_).count());
    between_polls_hist_.observe(std::chrono::duration<double>(now - *last_poll_start_).count());
  }
  last_poll_start_ = now;
}

void poll_stats::poll_ended(clock::time_point started, clock::time_point now, std::size_t records) {
  if (prev_poll_start_) {
    // Java's poll-idle-ratio: the share of the time since the previous poll() began that was
    // spent waiting inside this one.
    const double cycle = std::chrono::duration<double>(now - *prev_poll_start_).count();
    if (cycle > 0) idle_ratio_.record(now, std::chrono::duration<double>(now - started).count() / cycle);
  }
  prev_poll_start_ = started;
  records_total_ += static_cast<std::int64_t>(records);
  records_window_.record(now, static_cast<double>(records));
  if (pending_bytes_ > 0) {
    bytes_total_ += pending_bytes_;
    bytes_window_.record(now, static_cast<double>(pending_bytes_));
    pending_bytes_ = 0;
  }
}

void poll_stats::publish(metrics_state& m, clock::time_point now) {
  last_publish_ = now;
  m.records_total = records_total_;
  m.bytes_total = bytes_total_;
  m.records_rate = records_window_.rate(now);
  m.bytes_rate = bytes_window_.rate(now);
  m.between_poll_avg_ms = between_polls_.avg(now);
  m.between_poll_max_ms = between_polls_.max(now);
  m.between_poll_hist = between_polls_hist_;
  m.idle_ratio_avg = idle_ratio_.avg(now);
}

void poll_stats::report_statistics(clock::time_point now, const std::function<ConsumerMetrics()>& snapshot) {
  if (!statistics_cb_ || statistics_interval_.count() <= 0 || now < next_statistics_) return;
  next_statistics_ = now + statistics_interval_;
  try {
    // A copy runs: the callback may replace or remove itself (set_statistics_callback) inside.
    const StatisticsCallback cb = statistics_cb_;
    cb(snapshot());
  } catch (const std::exception& e) {
    logger()->warn("statistics callback threw: {}", e.what());
  } catch (...) {
    logger()->warn("statistics callback threw");
  }
}

}  // namespace kgroup::detail
