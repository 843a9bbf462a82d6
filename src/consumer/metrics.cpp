#include "kgroup/metrics.hpp"

namespace kgroup {

const char* to_string(RebalanceCause c) noexcept {
  switch (c) {
    case RebalanceCause::member_joined: return "member joined";
    case RebalanceCause::member_left: return "member left";
    case RebalanceCause::group_rebalancing: return "group rebalancing";
    case RebalanceCause::poll_timeout: return "poll timeout";
    case RebalanceCause::session_timeout: return "session timeout";
    case RebalanceCause::metadata_change: return "metadata change";
    case RebalanceCause::subscription_change: return "subscription change";
    case RebalanceCause::enforced: return "enforce_rebalance";
    case RebalanceCause::cooperative_round: return "cooperative round";
    case RebalanceCause::error: return "error";
  }
  return "unknown";
}

}  // namespace kgroup
