// The KIP-848 membership core (consumer_member.hpp). Pure, like member.cpp: no I/O, no clock.
// This file: the states and their transition table, observation, the user's events, and the
// predicates and timers pump() runs on; consumer_member_responses.cpp takes the driver's events,
// consumer_member_reconcile.cpp sends heartbeats and reconciles.
#include "group/consumer_member.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "base/log.hpp"
#include "base/sim_mutants.hpp"
#include "group/consumer_member_ops.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group::kip848 {

namespace {

using table = transition_table<consumer_member_state>;
constexpr std::size_t at(s x) {
  return table::at(x);
}

// The transition table (docs/DESIGN.md lists it): for each state, the states it may move to.
// Staying is always allowed; every state but closed may become fatal, and every state may close.
// membership_skeleton::transition() refuses anything else.
constexpr table::rows transitions = [] {
  table::rows t{};
  // Leaving (prepare_leaving with owned partitions, else leaving) and a poll timeout are open to
  // every state that is in the group or joining it.
  const auto out = states_of(s::prepare_leaving, s::leaving, s::poll_timed_out);
  t[at(s::unsubscribed)] = states_of(s::joining);
  t[at(s::joining)] = states_of(s::reconciling, s::stable, s::fenced, s::unsubscribed) | out;
  t[at(s::reconciling)] = states_of(s::acknowledging, s::stable, s::fenced) | out;
  t[at(s::acknowledging)] = states_of(s::reconciling, s::stable, s::fenced) | out;
  t[at(s::stable)] = states_of(s::reconciling, s::fenced) | out;
  t[at(s::fenced)] = states_of(s::joining, s::leaving, s::unsubscribed, s::poll_timed_out);
  t[at(s::prepare_leaving)] = states_of(s::leaving, s::unsubscribed);
  t[at(s::leaving)] = states_of(s::unsubscribed);
  t[at(s::poll_timed_out)] = states_of(s::fenced, s::joining, s::leaving, s::unsubscribed);
  t[at(s::fatal)] = states_of(s::leaving);  // close()/unsubscribe(): lost listener first
  t[at(s::closed)] = 0;
  return table::with_common_rules(t);
}();

}  // namespace

const char* to_string(consumer_member_state x) noexcept {
  switch (x) {
    case s::unsubscribed:
      return "unsubscribed";
    case s::joining:
      return "joining";
    case s::reconciling:
      return "reconciling";
    case s::acknowledging:
      return "acknowledging";
    case s::stable:
      return "stable";
    case s::fenced:
      return "fenced";
    case s::prepare_leaving:
      return "prepare_leaving";
    case s::leaving:
      return "leaving";
    case s::poll_timed_out:
      return "poll_timed_out";
    case s::fatal:
      return "fatal";
    case s::closed:
      return "closed";
  }
  return "?";
}

bool transition_allowed(consumer_member_state from, consumer_member_state to) noexcept {
  return table::allowed(transitions, from, to);
}

consumer_member::consumer_member(consumer_member_options opts)
    : consumer_member_skeleton(opts.retry_backoff, opts.retry_backoff_max),
      opts_(std::move(opts)),
      names_backoff_(opts_.retry_backoff, opts_.retry_backoff_max),  // no jitter: deterministic tests
      interval_(opts_.heartbeat_interval) {}

std::string consumer_member::who() const {
  return "member '" + member_id_ + "' epoch " + std::to_string(epoch_);
}

partition_set consumer_member::owned() const {
  return names_of(owned_);
}

partition_set consumer_member::names_of(const id_assignment& a) const {
  partition_set out;
  for (const auto& [id, parts] : a) {
    auto it = names_.find(id);
    // Every id owned or being assigned has a known name (resolved() filtered it); a missing one
    // would be a bug, shown rather than hidden.
    const std::string name = it != names_.end() ? it->second : "<topic id " + id.to_string() + ">";
    for (auto p : parts) out.insert({name, p});
  }
  return out;
}

id_assignment consumer_member::resolved(const id_assignment& a, std::vector<topic_id>* unknown) const {
  id_assignment out;
  for (const auto& [id, parts] : a) {
    if (names_.contains(id)) {
      out.emplace(id, parts);
    } else if (unknown) {
      unknown->push_back(id);
    }
  }
  return out;
}

std::vector<topic_id> consumer_member::unknown_ids(const id_assignment& a) const {
  std::vector<topic_id> unknown;
  for (const auto& [id, parts] : a) {
    if (!names_.contains(id)) unknown.push_back(id);
  }
  return unknown;
}

group::standing consumer_member::standing() const {
  group::standing st{.generation = epoch_,
                     .member_id = member_id_,
                     .instance_id = opts_.group_instance_id,
                     .coordinator = coord_.node()};
  // Commits are fine while reconciling (the revoke listener commits): the epoch is what counts.
  st.stable = epoch_ > 0 && (state_ == s::stable || state_ == s::reconciling || state_ == s::acknowledging ||
                             state_ == s::prepare_leaving);
  st.poll_timed_out = state_ == s::poll_timed_out;
  st.fatal = state_ == s::fatal || fatal_while_leaving_;
  st.removed = state_ == s::fenced || removed_;
  // leaving: the revoke is done and the leave heartbeat is next, or a lost listener runs.
  st.left = state_ == s::leaving;
  st.owned = owned();
  return st;
}

// ---- user events ------------------------------------------------------------------------------

void consumer_member::subscribe(time_point now, std::vector<std::string> topics) {
  if (state_ == s::fatal || state_ == s::closed) return;
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
  const bool changed = regex_.has_value() || topics != topics_;
  regex_.reset();
  topics_ = std::move(topics);
  subscription_set(now, changed, "this member subscribed");
}

void consumer_member::subscribe_regex(time_point now, std::string regex) {
  if (state_ == s::fatal || state_ == s::closed) return;
  const bool changed = regex_ != regex;
  regex_ = std::move(regex);
  topics_.clear();
  subscription_set(now, changed, "this member subscribed (regex)");
}

void consumer_member::subscription_set(time_point now, bool changed, const char* why) {
  if (state_ == s::unsubscribed) {
    poll_.restart(now);
    begin_join(now, RebalanceCause::member_joined, why);
    return;
  }
  // A member tells the coordinator at once (the broker recomputes its target); the heartbeat
  // carries only the changed subscription.
  if (changed && heartbeating() && state_ != s::prepare_leaving) {
    heartbeat_now_ = true;
    next_cause_ = RebalanceCause::subscription_change;
  }
  pump(now);
}

void consumer_member::unsubscribe(time_point now) {
  topics_.clear();
  regex_.reset();
  heartbeat_now_ = false;
  switch (state_) {
    case s::unsubscribed:
    case s::closed:
    case s::prepare_leaving:
    case s::leaving:
      return;
    case s::fatal:
      // Nothing to leave (the coordinator refused us): owned partitions are reported lost.
      transition(s::leaving, "unsubscribe after a fatal error");
      if (!owned_.empty()) {
        request_listener(listener_kind::lost, owned_, then::finish_leave);
      } else {
        finish_leave(now);
      }
      return;
    case s::fenced:
    case s::poll_timed_out:
      // Out of the group already: what is owned is lost, not revoked (it may have a new owner).
      transition(s::leaving, "unsubscribe while out of the group");
      if (listener_.pending_is(listener_kind::lost)) {
        listener_.then_after(then::finish_leave);
      } else if (!owned_.empty()) {
        supersede_pending_listener();
        request_listener(listener_kind::lost, owned_, then::finish_leave);
      } else {
        pump(now);  // a poll timeout's leave heartbeat may still have to go out
      }
      return;
    default:
      break;
  }
  // joining, reconciling, acknowledging, stable: a reconciliation step still queued is replaced
  // by the revoke of everything owned (one callback, not two).
  supersede_pending_listener();
  target_.reset();
  if (!owned_.empty()) {
    transition(s::prepare_leaving, "unsubscribe: revoking owned partitions");
    request_listener(listener_kind::revoked, owned_, then::leave);
    pump(now);  // heartbeats go on while the revoke runs
    return;
  }
  transition(s::leaving, "unsubscribe");
  pump(now);
}

void consumer_member::close(time_point now, close_membership op) {
  if (state_ == s::closed) return;
  closing_ = true;
  close_op_ = op;
  if (state_ == s::unsubscribed) {
    set_owned({});
    transition(s::closed, "close");
    actions_.emplace_back(left_group{});
    return;
  }
  if (state_ == s::fatal && owned_.empty()) {
    transition(s::closed, "close after a fatal error");
    actions_.emplace_back(left_group{});
    return;
  }
  unsubscribe(now);
}

void consumer_member::poll_called(time_point now) {
  poll_.called(now);
  if (state_ == s::poll_timed_out && !listener_.pending()) {
    // The application is back: it hears that its partitions are lost, then the member rejoins.
    if (!owned_.empty()) {
      logger()->warn("group '{}': partitions lost (max.poll.interval.ms was exceeded)", opts_.group_id);
      transition(s::fenced, "poll() after a poll timeout: partitions lost");
      request_listener(listener_kind::lost, owned_, then::rejoin);
    } else {
      begin_join(now, RebalanceCause::poll_timeout, "poll() after a poll timeout");
    }
  }
  pump(now);
}

void consumer_member::commit_failed(time_point, std::int32_t epoch, std::int16_t code) {
  logger()->debug("group '{}': a commit with member epoch {} failed with error {}", opts_.group_id, epoch,
                  kafka_error_name(code));
}

void consumer_member::enforce_rebalance(time_point, std::string reason) {
  logger()->info("group '{}': enforce_rebalance('{}') has no effect with group.protocol=consumer", opts_.group_id,
                 reason);
}

void consumer_member::after_listener(time_point now, then next) {
  continue_after_listener(now, next);
  pump(now);
}

// ---- internals --------------------------------------------------------------------------------

bool consumer_member::must_leave() const noexcept {
  // The coordinator knows this member once it has answered (epoch > 0) or may know it from a
  // join heartbeat sent (v1: our own id); v0 before any answer has no id to leave with.
  return !member_id_.empty() && (epoch_ > 0 || join_sent_);
}

std::int32_t consumer_member::leave_epoch() const noexcept {
  // A static member leaves with -2: the coordinator keeps its assignment for the instance id until
  // the session times out, so a restart gets it back (KIP-848, as KIP-345 in the classic protocol).
  // close(leave_group) leaves for good, static or not (KIP-1092).
  if (close_op_ == close_membership::leave_group) return leave_epoch_dynamic;
  return opts_.group_instance_id ? leave_epoch_static : leave_epoch_dynamic;
}

bool consumer_member::sends_leave() const noexcept {
  // close(remain_in_group) of a dynamic member sends nothing: the coordinator drops it when its
  // session times out (Java's shouldSendLeaveHeartbeatNow). A static one still sends -2.
  if (close_op_ == close_membership::remain_in_group && !opts_.group_instance_id) return false;
  return must_leave();
}

bool consumer_member::heartbeating() const noexcept {
  switch (state_) {
    case s::joining:
    case s::reconciling:
    case s::acknowledging:
    case s::stable:
      return true;
    case s::prepare_leaving:
      return epoch_ > 0;  // heartbeats go on while the revoke of unsubscribe()/close() runs
    default:
      return false;
  }
}

bool consumer_member::needs_coordinator() const noexcept {
  if (leave_pending_) return true;
  if (state_ == s::leaving) return in_flight_ == in_flight::none && sends_leave() && !listener_.pending();
  return heartbeating();
}

bool consumer_member::heartbeat_due(time_point now) const noexcept {
  // Joining before the first answer, acknowledging and a changed subscription go at once (a
  // joining member the coordinator answered without an assignment waits for the interval).
  if ((state_ == s::joining && epoch_ == join_epoch) || state_ == s::acknowledging || heartbeat_now_)
    return true;
  return now >= next_heartbeat_at_;
}

bool consumer_member::poll_interval_applies() const noexcept {
  return state_ == s::joining || state_ == s::reconciling || state_ == s::acknowledging || state_ == s::stable ||
         state_ == s::fenced;
}

bool consumer_member::check_poll_timeout(time_point now) {
  const auto measured = poll_interval_exceeded(now, opts_.max_poll_interval);
  if (!measured) return false;
  // A callback the stalled application has not started belongs to a membership that is gone.
  supersede_pending_listener();
  target_.reset();
  step_target_.clear();
  heartbeat_now_ = false;
  leave_pending_ = must_leave();
  // Its answer may come after poll() has begun the rejoin: it must not count for the new membership.
  if (in_flight_ == in_flight::heartbeat) in_flight_ = in_flight::abandoned;
#ifdef KGROUP_SIM_MUTANTS
  if (sim::mutant_enabled("stale_answer_taken") && in_flight_ == in_flight::abandoned)
    in_flight_ = in_flight::heartbeat;  // kgroup-sim --group --protocol consumer's finding put back
#endif
  epoch_ = join_epoch;
  reconciliation_begins(now, RebalanceCause::poll_timeout, poll_timeout_detail(*measured, opts_.max_poll_interval));
  transition(s::poll_timed_out, "max.poll.interval.ms exceeded");
  actions_.emplace_back(poll_timeout_error());
  return true;
}

void consumer_member::reconciliation_begins(time_point now, RebalanceCause cause, const std::string& detail) {
  next_cause_.reset();
  stats_.begin(now, cause, detail);
}

void consumer_member::reconciliation_ends(time_point now, bool completed) { stats_.end(now, completed, epoch_); }

void consumer_member::backoff(time_point now) {
  consumer_member_skeleton::backoff(now);
  // A heartbeat that failed goes again when the backoff ends, not a whole interval later.
  next_heartbeat_at_ = backoff_until_;
}

std::optional<time_point> consumer_member::next_deadline() const {
  std::optional<time_point> t;
  auto consider = [&](time_point x) {
    if (!t || x < *t) t = x;
  };
  if (poll_timer_running()) {
    consider(poll_.next_check(opts_.max_poll_interval));
  }
  const bool active = state_ != s::unsubscribed && state_ != s::fatal && state_ != s::closed;
  if (!active) return t;
  if (backoff_until_ != time_point{}) consider(backoff_until_);
  if (in_flight_ == in_flight::none && coord_.known() && heartbeating()) {
    // A heartbeat due at once that is still unsent waits only for a backoff (pump() sent it
    // otherwise), so the deadline is never in the past.
    if (!heartbeat_due(time_point{})) consider(std::max(next_heartbeat_at_, backoff_until_));
  }
  if (target_ && heartbeating() && names_retry_at_ != time_point{}) {
    const auto named = [&](const auto& e) { return names_.contains(e.first); };
    if (!std::all_of(target_->begin(), target_->end(), named)) consider(names_retry_at_);
  }
  return t;
}

}  // namespace kgroup::group::kip848
