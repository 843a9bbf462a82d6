// The classic core's states: their names and the transition table (docs/DESIGN.md draws it).
#include "group/member.hpp"

namespace kgroup::group {

const char* to_string(classic_state s) noexcept {
  switch (s) {
    case classic_state::unsubscribed:
      return "unsubscribed";
    case classic_state::preparing:
      return "preparing";
    case classic_state::joining:
      return "joining";
    case classic_state::assigning:
      return "assigning";
    case classic_state::syncing:
      return "syncing";
    case classic_state::completing:
      return "completing";
    case classic_state::stable:
      return "stable";
    case classic_state::leaving:
      return "leaving";
    case classic_state::poll_timed_out:
      return "poll_timed_out";
    case classic_state::fatal:
      return "fatal";
    case classic_state::closed:
      return "closed";
  }
  return "?";
}

const char* to_string(listener_kind k) noexcept {
  switch (k) {
    case listener_kind::revoked:
      return "revoked";
    case listener_kind::assigned:
      return "assigned";
    case listener_kind::lost:
      return "lost";
  }
  return "?";
}

namespace {

using s = classic_state;
using table = transition_table<classic_state>;

// The transition table (docs/DESIGN.md draws it): for each state, the states it may move to.
// Staying is always allowed; every state but closed may become fatal, and every state may close.
// membership_skeleton::transition() refuses anything else.
constexpr table::rows transitions = [] {
  table::rows t{};
  const auto rebalancing = states_of(s::joining, s::assigning, s::syncing, s::completing, s::preparing, s::leaving,
                                  s::poll_timed_out, s::unsubscribed);
  t[static_cast<std::size_t>(s::unsubscribed)] = states_of(s::joining);
  t[static_cast<std::size_t>(s::preparing)] = states_of(s::joining, s::leaving, s::poll_timed_out, s::unsubscribed);
  t[static_cast<std::size_t>(s::joining)] = rebalancing;
  t[static_cast<std::size_t>(s::assigning)] = rebalancing;
  t[static_cast<std::size_t>(s::syncing)] = rebalancing;
  t[static_cast<std::size_t>(s::completing)] =
      states_of(s::stable, s::joining, s::preparing, s::leaving, s::poll_timed_out, s::unsubscribed);
  t[static_cast<std::size_t>(s::stable)] = states_of(s::preparing, s::joining, s::leaving, s::poll_timed_out, s::unsubscribed);
  t[static_cast<std::size_t>(s::leaving)] = states_of(s::unsubscribed);
  t[static_cast<std::size_t>(s::poll_timed_out)] = states_of(s::preparing, s::joining, s::leaving, s::unsubscribed);
  t[static_cast<std::size_t>(s::fatal)] = states_of(s::leaving);  // close() or unsubscribe(): lost listener first
  t[static_cast<std::size_t>(s::closed)] = 0;
  return table::with_common_rules(t);
}();

}  // namespace

bool transition_allowed(classic_state from, classic_state to) noexcept {
  return table::allowed(transitions, from, to);
}

}  // namespace kgroup::group
