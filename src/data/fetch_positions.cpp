#include "data/fetch_positions.hpp"

#include <array>

namespace kgroup::data {

namespace {

constexpr unsigned bit(fetch_state s) noexcept {
  return 1u << static_cast<unsigned>(s);
}

// A user seek() (-> ready or needs_validation) and seek_to_*() (-> needs_reset) may come in any
// state; they are in every row.
constexpr unsigned by_user = bit(fetch_state::ready) | bit(fetch_state::needs_validation) | bit(fetch_state::needs_reset);

// transitions[from]: the states `from` may move to.
constexpr std::array<unsigned, fetch_state_count> transitions = {
    // needs_committed: OffsetFetch sent; or no group, so the reset policy applies.
    by_user | bit(fetch_state::fetching_committed),
    // fetching_committed: the answer (offset: ready/needs_validation; none: needs_reset), or asked again.
    by_user | bit(fetch_state::needs_committed),
    // needs_reset: ListOffsets sent, or auto.offset.reset=none leaves it in resetting.
    by_user | bit(fetch_state::resetting),
    // resetting: the answer (ready), or not answered (needs_reset again).
    by_user,
    // needs_validation: OffsetForLeaderEpoch sent, or nothing to validate with (ready).
    by_user | bit(fetch_state::validating),
    // validating: not truncated (ready), truncated (needs_reset, ready at the divergence, or
    // awaiting_seek), or asked again (needs_validation).
    by_user | bit(fetch_state::awaiting_seek),
    // awaiting_seek: only the user's seek.
    by_user,
    // ready: a leader change or FENCED_LEADER_EPOCH (needs_validation), out of range (needs_reset).
    by_user,
};

}  // namespace

const char* to_string(fetch_state s) noexcept {
  switch (s) {
    case fetch_state::needs_committed: return "needs_committed";
    case fetch_state::fetching_committed: return "fetching_committed";
    case fetch_state::needs_reset: return "needs_reset";
    case fetch_state::resetting: return "resetting";
    case fetch_state::needs_validation: return "needs_validation";
    case fetch_state::validating: return "validating";
    case fetch_state::awaiting_seek: return "awaiting_seek";
    case fetch_state::ready: return "ready";
  }
  return "?";
}

bool fetch_transition_allowed(fetch_state from, fetch_state to) noexcept {
  const auto f = static_cast<std::size_t>(from);
  return f < fetch_state_count && static_cast<std::size_t>(to) < fetch_state_count && (transitions[f] & bit(to)) != 0;
}

bool fetch_positions::transition(const TopicPartition& tp, fetch_part& p, fetch_state to, const char* reason) {
  if (p.state_ == to) return true;
  if (!fetch_transition_allowed(p.state_, to)) {
    ++invalid_transitions_;
    last_refusal_ = "internal error: invalid position transition of " + tp.topic + "-" + std::to_string(tp.partition) +
                    ": " + to_string(p.state_) + " -> " + to_string(to) + " (" + reason + "); not applied";
    if (on_refused_) on_refused_(last_refusal_);
    return false;
  }
  p.state_ = to;
  return true;
}

std::int32_t fetch_positions::fetch_node(fetch_part& p, std::int32_t leader, bool replica_known,
                                         std::chrono::steady_clock::time_point now) {
  if (p.preferred_replica < 0) return leader;
  if (now >= p.replica_until || !replica_known) {
    p.preferred_replica = -1;
    return leader;
  }
  return p.preferred_replica;
}

missing_verdict fetch_positions::missing(fetch_part& p, bool absent, std::uint64_t refreshes, bool manual) {
  if (!absent) {
    p.missing_since = 0;
    p.reported_missing = false;
    return missing_verdict::present;
  }
  if (p.missing_since == 0) {
    p.missing_since = refreshes + 1;
  } else if (manual && !p.reported_missing && refreshes > p.missing_since) {
    p.reported_missing = true;
    return missing_verdict::report_missing;
  }
  return missing_verdict::missing;
}

}  // namespace kgroup::data
