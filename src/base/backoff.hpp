// Exponential backoff with an optional jitter: the one retry schedule of the library.
// Pure value type: no clock, no thread; the caller adds the delay to its own `now`.
//
// The n-th delay (n = 1, 2, ...) is initial x 2^(n-1), capped at max, then multiplied by a factor
// drawn uniformly from [1 - jitter, 1 + jitter] (Java's ExponentialBackoff uses 0.2 for
// reconnects; the membership core uses none, so its tests stay deterministic).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

#include "base/lazy_rng.hpp"

namespace kgroup::base {

class backoff {
 public:
  using ms = std::chrono::milliseconds;

  backoff(ms initial, ms max, double jitter = 0.0, std::uint32_t seed = std::random_device{}())
      : initial_(std::max(initial, ms(0))),
        max_(std::max(max, initial_)),
        jitter_(std::clamp(jitter, 0.0, 1.0)),
        rng_(seed) {}

  /// The delay before attempt number `attempt` (1-based), without jitter and without state.
  [[nodiscard]] ms delay(int attempt) const noexcept {
    ms b = initial_;
    for (int i = 1; i < attempt && b < max_; ++i) b *= 2;
    return std::min(b, max_);
  }

  /// Counts one more failed attempt and returns the delay before the next try.
  ms next() {
    ++attempts_;
    const ms b = delay(attempts_);
    if (jitter_ == 0.0) return b;
    std::uniform_real_distribution<double> factor(1.0 - jitter_, 1.0 + jitter_);
    return ms(static_cast<std::int64_t>(static_cast<double>(b.count()) * factor(rng_)));
  }

  /// A success: the next failure starts from `initial` again.
  void reset() noexcept { attempts_ = 0; }

  [[nodiscard]] int attempts() const noexcept { return attempts_; }
  /// Whether a jittered delay was drawn yet (the generator exists); for tests.
  [[nodiscard]] bool drew() const noexcept { return rng_.started(); }

 private:
  ms initial_;
  ms max_;
  double jitter_;
  int attempts_ = 0;
  lazy_mt19937 rng_;  // made at the first jittered delay (lazy_rng.hpp)
};

}  // namespace kgroup::base
