// Builds a ConsumerMetrics snapshot from what the two threads published in shared_state.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "runtime/shared_state.hpp"
#include "kgroup/metrics.hpp"

namespace kgroup::detail {

/// What does not change over a consumer's life.
struct metrics_identity {
  std::string client_id;
  std::string group_id;
  std::optional<std::string> group_instance_id;
  std::string protocol;  // "eager" or "cooperative" (classic), "consumer" (KIP-848)
  std::int64_t max_poll_interval_ms = 0;
  /// Wall-clock milliseconds minus steady-clock milliseconds, taken once: converting the core's
  /// steady times with a fixed offset keeps a rebalance's start_ms identical in every snapshot.
  std::int64_t wall_minus_steady_ms = 0;
};

/// Call with shared.mutex held. `steady_now` and `wall_now` are the same instant on both clocks.
ConsumerMetrics make_metrics(const shared_state& shared, const metrics_identity& id,
                             std::chrono::steady_clock::time_point steady_now,
                             std::chrono::system_clock::time_point wall_now);

}  // namespace kgroup::detail
