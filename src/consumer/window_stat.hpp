// Samples over a sliding window, for the rates and averages of ConsumerMetrics (the Java client
// computes its "-avg", "-max" and "-rate" metrics over a window of samples the same way).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

namespace kgroup::detail {

/// `buckets` one-second buckets; values older than the window are forgotten.
class window_stat {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr int buckets = 30;

  void record(clock::time_point now, double value) {
    if (!first_) first_ = now;
    bucket& b = at(now);
    b.sum += value;
    b.max = b.count == 0 ? value : std::max(b.max, value);
    ++b.count;
  }
  double sum(clock::time_point now) const {
    double s = 0;
    for_live(now, [&](const bucket& b) { s += b.sum; });
    return s;
  }
  std::int64_t count(clock::time_point now) const {
    std::int64_t n = 0;
    for_live(now, [&](const bucket& b) { n += b.count; });
    return n;
  }
  double avg(clock::time_point now) const {
    const auto n = count(now);
    return n == 0 ? 0.0 : sum(now) / static_cast<double>(n);
  }
  double max(clock::time_point now) const {
    std::optional<double> m;
    for_live(now, [&](const bucket& b) { m = m ? std::max(*m, b.max) : b.max; });
    return m.value_or(0.0);
  }
  /// Sum per second over the window, or over the time since the first sample if shorter (at least 1 s).
  double rate(clock::time_point now) const {
    if (!first_) return 0.0;
    const double since = std::chrono::duration<double>(now - *first_).count();
    const double span = std::clamp(since, 1.0, static_cast<double>(buckets));
    return sum(now) / span;
  }

 private:
  struct bucket {
    std::int64_t second = -1;
    double sum = 0;
    double max = 0;
    std::int64_t count = 0;
  };
  static std::int64_t second_of(clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  }
  bucket& at(clock::time_point now) {
    const auto s = second_of(now);
    bucket& b = b_[static_cast<std::size_t>(s % buckets)];
    if (b.second != s) b = bucket{s, 0, 0, 0};
    return b;
  }
  template <class F>
  void for_live(clock::time_point now, F&& f) const {
    const auto s = second_of(now);
    for (const auto& b : b_) {
      if (b.second >= 0 && b.second > s - buckets && b.second <= s && b.count > 0) f(b);
    }
  }
  std::array<bucket, buckets> b_{};
  std::optional<clock::time_point> first_;
};

}  // namespace kgroup::detail
