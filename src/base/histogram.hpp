// Fixed-bucket histograms for ConsumerMetrics and /metrics (Prometheus histograms). Not
// synchronised: each lives with data that is already guarded (the membership core's stats, or
// metrics_state under shared_state::mutex, or the user thread's own fields).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kgroup/metrics.hpp"

namespace kgroup::detail {

/// Upper bounds in seconds for every latency: from a millisecond (a commit on loopback) to five
/// minutes (a rebalance waiting for a slow member's max.poll.interval.ms).
inline constexpr std::array<double, 17> latency_bounds_s = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                            1,     2.5,    5,     10,   30,    60,   120, 300};
/// Upper bounds in bytes for fetch response sizes: 1 KiB to 64 MiB, by factors of four.
inline constexpr std::array<double, 9> size_bounds_bytes = {1024.0,     4096.0,     16384.0,    65536.0,   262144.0,
                                                            1048576.0,  4194304.0,  16777216.0, 67108864.0};

class histogram {
 public:
  explicit histogram(std::span<const double> bounds = latency_bounds_s)
      : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

  void observe(double v) {
    const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
    ++counts_[i];  // i == bounds.size(): above every bound (+Inf)
    ++count_;
    sum_ += v;
  }
  std::uint64_t count() const noexcept { return count_; }

  /// Cumulative counts per bound, as Prometheus wants them.
  Histogram snapshot() const {
    Histogram h;
    h.bounds.assign(bounds_.begin(), bounds_.end());
    h.buckets.resize(bounds_.size());
    std::uint64_t run = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      run += counts_[i];
      h.buckets[i] = run;
    }
    h.count = count_;
    h.sum = sum_;
    return h;
  }

 private:
  std::span<const double> bounds_;
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace kgroup::detail
