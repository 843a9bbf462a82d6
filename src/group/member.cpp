#include "group/member.hpp"

#include "base/sim_mutants.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"

namespace kgroup::group {

namespace {

partition_set minus(const partition_set& a, const partition_set& b) {
  partition_set out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

}  // namespace

void fit_leave_group(protocol::leave_group_request& r, std::int16_t version) {
  if (version < 3) {
    r.members.clear();
  } else {
    r.member_id.clear();
  }
}

member::member(member_options opts, protocol_builder build_protocols, assignment_decoder decode_assignment)
    : member_skeleton(opts.retry_backoff, opts.retry_backoff_max),
      opts_(std::move(opts)),
      build_protocols_(build_protocols ? std::move(build_protocols) : consumer_protocols(opts_.assignors)),
      decode_assignment_(decode_assignment ? std::move(decode_assignment) : decode_consumer_assignment) {}

void member::subscribe(time_point now, std::vector<std::string> topics) {
  if (state_ == classic_state::fatal || state_ == classic_state::closed) return;
  pattern_.reset();
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
  const bool changed = topics != topics_;
  topics_ = std::move(topics);
  if (!poll_.started()) poll_.restart(now);
  if (state_ == classic_state::unsubscribed) {
    poll_.restart(now);
    abandon_stale_request();
    transition(classic_state::joining, "subscribed");
    rejoin_reason_ = "subscribed";
    rebalance_begins(now, RebalanceCause::member_joined, "this member subscribed");
    pump(now);
    return;
  }
  if (changed) request_rejoin(RebalanceCause::subscription_change, "subscription changed");
  pump(now);
}

void member::unsubscribe(time_point now) {
  pattern_.reset();
  if (state_ == classic_state::unsubscribed || state_ == classic_state::closed ||
      state_ == classic_state::leaving)
    return;
  if (state_ == classic_state::fatal) {
    // Nothing to leave (the coordinator refused us), nothing to wait for: the partitions still
    // owned are reported lost, then unsubscribe() returns.
    closing_ = false;
    topics_.clear();
    transition(classic_state::leaving, "unsubscribe after a fatal error");
    if (!owned_.empty()) {
      request_listener(listener_kind::lost, owned_, then::close_after_leave);
    } else {
      finish_leave(now);
    }
    return;
  }
  closing_ = false;
  topics_.clear();
  // A callback of a rebalance still queued is replaced by unsubscribe()'s own (one revoke, not two).
  supersede_pending_listener();
  transition(classic_state::leaving, "unsubscribe");
  if (!owned_.empty()) {
    // Partitions of a generation that is gone are lost, not revoked: their offsets must not be committed.
    const bool valid = generation_ >= 0;
    request_listener(valid ? listener_kind::revoked : listener_kind::lost, owned_, then::leave);
    return;
  }
  send_leave(now, "the consumer unsubscribed");
}

void member::close(time_point now, close_membership op) {
  pattern_.reset();
  if (state_ == classic_state::closed) return;
  close_op_ = op;
  if (state_ == classic_state::fatal && !owned_.empty()) {
    // The partitions are not ours any more (fenced, unauthorized, ...): tell the user they are
    // lost, then close without a LeaveGroup (the coordinator refused us; there is nothing to leave).
    closing_ = true;
    transition(classic_state::leaving, "close after a fatal error");
    request_listener(listener_kind::lost, owned_, then::close_after_leave);
    return;
  }
  if (state_ == classic_state::unsubscribed || state_ == classic_state::fatal) {
    set_owned({});
    rebalance_ends(now, false);
    transition(classic_state::closed, "close");
    actions_.emplace_back(left_group{});
    return;
  }
  if (state_ == classic_state::leaving) {
    closing_ = true;
    return;
  }
  unsubscribe(now);
  closing_ = true;
  if (state_ == classic_state::unsubscribed) {
    transition(classic_state::closed, "close");
  }
}

void member::poll_called(time_point now) {
#ifdef KGROUP_SIM_MUTANTS
  // The long-poll eviction put back: the time spent waiting inside poll() counted toward
  // max.poll.interval.ms (issue 30's fix: only the time between polls and inside callbacks does).
  if (sim::mutant_enabled("poll_time_counts")) {
    poll_.returned(now);
    if (state_ == classic_state::poll_timed_out && !listener_.pending())
      lose_partitions(now, "max.poll.interval.ms was exceeded", then::rejoin_after_lost);
    pump(now);
    return;
  }
#endif
  poll_.called(now);
  if (state_ == classic_state::poll_timed_out && !listener_.pending()) {
    lose_partitions(now, "max.poll.interval.ms was exceeded", then::rejoin_after_lost);
  }
  pump(now);
}

void member::enforce_rebalance(time_point now, std::string reason) {
  if (state_ == classic_state::unsubscribed || state_ == classic_state::fatal ||
      state_ == classic_state::closed || state_ == classic_state::leaving) {
    return;
  }
  request_rejoin(RebalanceCause::enforced,
                 reason.empty() ? "enforce_rebalance" : "enforce_rebalance: " + reason);
  pump(now);
}

void member::after_listener(time_point now, then next) {
  if (state_ == classic_state::poll_timed_out) {
    // We left the group while the listener ran: its continuation belongs to a generation that is
    // gone. The next poll_called() reports what is still owned as lost and rejoins.
    return;
  }
  continue_after_listener(now, next);
  pump(now);
}

// ---- driver events ----------------------------------------------------------------------------

void member::tick(time_point now) {
  if (check_poll_timeout(now)) return;
  const bool heartbeating = (state_ == classic_state::stable || state_ == classic_state::completing ||
                             state_ == classic_state::preparing || state_ == classic_state::assigning) &&
                            generation_ >= 0;
  if (heartbeating && now - last_heartbeat_ok_ >= opts_.session_timeout) {
    logger()->warn(
        "group '{}': no successful heartbeat for session.timeout.ms ({} ms); the coordinator has "
        "removed this member",
        opts_.group_id, opts_.session_timeout.count());
    if (in_flight_ != in_flight::none && coord_.node()) {
      // The request in flight (a heartbeat that never came back) would hold the next JoinGroup
      // until request.timeout.ms: fail it now.
      actions_.emplace_back(abandon_requests{*coord_.node()});
      in_flight_ = in_flight::none;
    }
    forget_coordinator("session timed out");
    rebalance_begins(now, RebalanceCause::session_timeout, "no successful heartbeat for session.timeout.ms");
    generation_ = -1;
    removed_ = true;
    if (!opts_.group_instance_id) member_id_.clear();
    lose_partitions(now, "session timed out", then::join);
    pump(now);
    return;
  }
  pump(now);
}

bool member::leaving_heartbeats() const noexcept {
  return state_ == classic_state::leaving && listener_.pending() && !leave_sent_ && generation_ >= 0;
}

bool member::poll_interval_applies() const noexcept {
  return state_ != classic_state::unsubscribed && state_ != classic_state::poll_timed_out &&
         state_ != classic_state::fatal && state_ != classic_state::closed &&
         state_ != classic_state::leaving;
}

bool member::check_poll_timeout(time_point now) {
  const auto measured = poll_interval_exceeded(now, opts_.max_poll_interval);
  if (!measured) return false;
  if (!member_id_.empty() && !opts_.group_instance_id && coord_.node()) {
    // The request in flight (a JoinGroup the coordinator holds, a SyncGroup, a heartbeat) belongs
    // to the membership that just ended, and the core forgets it: abandoned first, so that its
    // answer or failure (a JoinGroup's timeout comes max.poll.interval.ms + 5 s after it was
    // sent) is not taken for the LeaveGroup's or, later, the rejoin's. Found by kgroup-sim
    // --group, seed 796594772677: a stale JoinGroup's timeout was taken for the rejoin's, which
    // was sent again while the coordinator still held it.
    if (in_flight_ != in_flight::none
#ifdef KGROUP_SIM_MUTANTS
        && !sim::mutant_enabled("dynamic_stale_join")
#endif
    )
      actions_.emplace_back(abandon_requests{*coord_.node()});
    protocol::leave_group_request req;
    req.group_id = opts_.group_id;
    req.member_id = member_id_;
    req.members.push_back({member_id_, opts_.group_instance_id, "consumer poll timeout has expired"});
    actions_.emplace_back(send_leave_group{std::move(req)});
    in_flight_ = in_flight::leave;
    leave_sent_ = true;
  } else if (opts_.group_instance_id && in_flight_ != in_flight::none && coord_.node()) {
    // A static member sends no LeaveGroup: the request in flight belongs to the membership that
    // just ended. A JoinGroup's answer would be taken for the rejoin after the next poll(),
    // though its subscription still names the partitions that poll() reports lost (found by
    // kgroup-sim --group --static: cooperative-sticky held them back for this member to revoke,
    // and they stayed unassigned).
#ifdef KGROUP_SIM_MUTANTS
    if (!sim::mutant_enabled("static_stale_join"))
#endif
    {
      actions_.emplace_back(abandon_requests{*coord_.node()});
      in_flight_ = in_flight::none;
    }
  }
  generation_ = -1;
  if (!opts_.group_instance_id) member_id_.clear();
  rejoin_needed_ = false;
  // A callback the stalled application has not run belongs to a generation that is gone: the
  // next poll() reports what is owned as lost instead.
  cancel_unstarted_listener();
  rebalance_begins(now, RebalanceCause::poll_timeout, poll_timeout_detail(*measured, opts_.max_poll_interval));
  transition(classic_state::poll_timed_out, "max.poll.interval.ms exceeded");
  actions_.emplace_back(poll_timeout_error());
  return true;
}

void member::assignment_computed(
    time_point now, std::int32_t generation, std::error_code ec,
    std::vector<protocol::sync_group_request::sync_group_request_assignment> assignments) {
  // Only the answer to our compute_assignment counts; one that arrives after the member moved on
  // (a poll timeout, a leave, a lost generation), even into assigning a newer generation, is
  // stale.
  if (state_ != classic_state::assigning || generation != generation_) return;
  if (ec) {
    rebalance_failed(now);
    actions_.emplace_back(
        report_error{ec, "the leader could not compute an assignment: " + ec.message(), false});
    transition(classic_state::joining, "assignment failed");
    backoff(now);
    pump(now);
    return;
  }
  send_sync(now, std::move(assignments));
}

void member::send_sync(time_point now,
                       std::vector<protocol::sync_group_request::sync_group_request_assignment> assignments) {
  protocol::sync_group_request req;
  req.group_id = opts_.group_id;
  req.generation_id = generation_;
  req.member_id = member_id_;
  req.group_instance_id = opts_.group_instance_id;
  req.protocol_type = protocol_type;
  req.protocol_name = protocol_name_;
  req.assignments = std::move(assignments);
  transition(classic_state::syncing, "sending SyncGroup");
  in_flight_ = in_flight::sync;
  sync_sent_ = now;
  actions_.emplace_back(send_sync_group{std::move(req)});
}

// ---- internals --------------------------------------------------------------------------------

bool member::needs_coordinator() const noexcept {
  switch (state_) {
    case classic_state::joining:
    case classic_state::syncing:
    case classic_state::assigning:
      return true;
    case classic_state::stable:
    case classic_state::completing:
    case classic_state::preparing:
      return generation_ >= 0;
    case classic_state::leaving:
      // While the revoke of unsubscribe()/close() runs, the member heartbeats and the commits in
      // the callback need the coordinator: one that moved is looked up again.
      return leaving_heartbeats() || (!leave_sent_ && !member_id_.empty() && !listener_.pending());
    default:
      return false;
  }
}

void member::pump(time_point now) {
  // A backoff that is over is forgotten, so next_deadline() never reports a time in the past.
  if (backoff_until_ != time_point{} && now >= backoff_until_) backoff_until_ = {};
  if (state_ == classic_state::unsubscribed || state_ == classic_state::fatal ||
      state_ == classic_state::closed || state_ == classic_state::poll_timed_out) {
    return;
  }
  if (needs_coordinator() && !coord_.known()) {
    if (coord_.unknown() && now >= backoff_until_ && coord_.start()) actions_.emplace_back(find_coordinator{});
    return;
  }
  if (now < backoff_until_) return;
  switch (state_) {
    case classic_state::joining:
      if (in_flight_ == in_flight::none) send_join(now);
      return;
    case classic_state::stable:
      if (rejoin_needed_ && in_flight_ == in_flight::none && !listener_.pending()) {
        start_rebalance(now, rejoin_reason_);
        return;
      }
      [[fallthrough]];
    case classic_state::completing:
    case classic_state::preparing:
    case classic_state::assigning:
      // The leader heartbeats while its assignor runs too: the coordinator times the session of
      // a member that has joined from the JoinGroup answer on (Java heartbeats in
      // COMPLETING_REBALANCE), and a slow assignor must not cost the leader its membership.
      if (generation_ >= 0 && in_flight_ == in_flight::none &&
          now >= last_heartbeat_sent_ + opts_.heartbeat_interval) {
        send_heartbeat_now(now);
      }
      return;
    case classic_state::leaving:
      if (leaving_heartbeats()) {
        // unsubscribe()/close() runs its revoke (and the commits in it) on the user thread: the
        // member stays alive meanwhile, so the final commit still finds its generation.
        if (in_flight_ == in_flight::none && now >= last_heartbeat_sent_ + opts_.heartbeat_interval) {
          send_heartbeat_now(now);
        }
        return;
      }
      if (!listener_.pending() && !leave_sent_ && in_flight_ == in_flight::none) {
        send_leave(now, "the consumer is leaving");
      }
      return;
    default:
      return;
  }
}

void member::start_rebalance(time_point now, const std::string& reason) {
  rejoin_needed_ = false;
  rejoin_reason_ = reason;
  logger()->info("group '{}': rebalancing ({})", opts_.group_id, reason);
  rebalance_begins(now, rejoin_cause_, reason);
  if (opts_.protocol == RebalanceProtocol::eager && !owned_.empty()) {
    // Eager: give everything back, on the user's thread, before asking to join.
    transition(classic_state::preparing, "eager revoke before JoinGroup");
    request_listener(listener_kind::revoked, owned_, then::join);
    return;
  }
  if (opts_.protocol == RebalanceProtocol::cooperative) {
    // Cooperative: keep what we own while rejoining, except partitions of topics we no longer
    // subscribe to; those are revoked first (they cannot be ours in the next generation).
    partition_set unsubscribed;
    for (const auto& tp : owned_) {
      if (!std::binary_search(topics_.begin(), topics_.end(), tp.topic)) unsubscribed.insert(tp);
    }
    if (!unsubscribed.empty()) {
      transition(classic_state::preparing, "revoke partitions of unsubscribed topics before JoinGroup");
      request_listener(listener_kind::revoked, unsubscribed, then::join);
      return;
    }
  }
  transition(classic_state::joining, reason.c_str());
  pump(now);
}

void member::send_join(time_point now) {
  join_sent_ = now;
  // A LeaveGroup sent (after a poll timeout) belonged to the membership it ended; this one may
  // leave again, and heartbeats while its close() revokes (found by kgroup-sim --group).
#ifdef KGROUP_SIM_MUTANTS
  if (!sim::mutant_enabled("stale_leave_sent"))
#endif
    leave_sent_ = false;
  protocol::join_group_request req;
  req.group_id = opts_.group_id;
  req.session_timeout_ms = static_cast<std::int32_t>(opts_.session_timeout.count());
  req.rebalance_timeout_ms = static_cast<std::int32_t>(opts_.max_poll_interval.count());
  req.member_id = member_id_;
  req.group_instance_id = opts_.group_instance_id;
  req.protocol_type = protocol_type;
  subscription_snapshot snap{topics_, owned_, generation_, opts_.rack};
  claimed_generation_ = generation_;
  req.protocols = build_protocols_(snap);
  req.reason = rejoin_reason_.empty() ? std::optional<std::string>() : rejoin_reason_;
  // This JoinGroup carries the current subscription and answers every rejoin request made so far
  // (including the REBALANCE_IN_PROGRESS heartbeats of the rebalance it joins); a request made
  // while it is in flight still counts and is served once the member is stable again.
  rejoin_needed_ = false;
  in_flight_ = in_flight::join;
  actions_.emplace_back(send_join_group{std::move(req), std::max(opts_.request_timeout,
                                                                 opts_.max_poll_interval + std::chrono::seconds(5))});
}

void member::send_heartbeat_now(time_point now) {
  protocol::heartbeat_request req;
  req.group_id = opts_.group_id;
  req.generation_id = generation_;
  req.member_id = member_id_;
  req.group_instance_id = opts_.group_instance_id;
  in_flight_ = in_flight::heartbeat;
  last_heartbeat_sent_ = now;
  actions_.emplace_back(send_heartbeat{std::move(req)});
}

void member::send_leave(time_point now, const std::string& reason) {
  // A static member does not leave by default: its instance id keeps its partitions across a
  // restart (KIP-345). close() may say otherwise (KIP-1092, Java's shouldSendLeaveGroupRequest).
  // (close_op_ stays default_operation unless close() set it.)
  const bool leaves = close_op_ == close_membership::leave_group ||
                      (close_op_ == close_membership::default_operation && !opts_.group_instance_id);
  if (member_id_.empty() || !leaves || !coord_.node()) {
    finish_leave(now);
    return;
  }
  protocol::leave_group_request req;
  req.group_id = opts_.group_id;
  req.member_id = member_id_;
  req.members.push_back({member_id_, opts_.group_instance_id, reason});
  in_flight_ = in_flight::leave;
  leave_sent_ = true;
  actions_.emplace_back(send_leave_group{std::move(req)});
}

void member::finish_leave(time_point now) {
  generation_ = -1;
  removed_ = false;
  if (!opts_.group_instance_id) member_id_.clear();
  leave_sent_ = false;
  rejoin_needed_ = false;
  set_owned({});
  rebalance_ends(now, false);
  if (closing_) {
    transition(classic_state::closed, "left the group");
  } else {
    transition(classic_state::unsubscribed, "left the group");
  }
  actions_.emplace_back(left_group{});
  if (!closing_ && !topics_.empty()) {
    // subscribe() was called while the leave was under way: join again with the new topics.
    abandon_stale_request();
    rejoin_reason_ = "subscribed";
    rebalance_begins(now, RebalanceCause::member_joined, "this member subscribed");
    transition(classic_state::joining, "subscribed while leaving");
    pump(now);
  }
}

void member::abandon_stale_request() {
  // A leave without LeaveGroup (a static member's unsubscribe(), Java's DEFAULT operation) left
  // the request in flight to the membership that ended; a JoinGroup's answer would be taken for
  // this join, though its subscription still names the partitions the leave revoked (found by
  // kgroup-sim --group --static --unsubscribe: cooperative-sticky held one back for this member
  // to revoke, and it stayed unassigned). As after a static member's poll timeout.
  if (in_flight_ == in_flight::none || !coord_.node()) return;
#ifdef KGROUP_SIM_MUTANTS
  if (sim::mutant_enabled("static_unsubscribe_stale_join")) return;
#endif
  actions_.emplace_back(abandon_requests{*coord_.node()});
  in_flight_ = in_flight::none;
}

void member::disown(const partition_set& parts) { set_owned(minus(owned_, parts)); }

void member::lose_partitions(time_point now, const std::string& why, then next) {
  // A revoke or assign callback still queued for the user thread is overtaken: the application
  // hears only that the partitions are lost (never commits partitions that may have a new owner,
  // never starts on partitions of a generation it is no longer in).
  supersede_pending_listener();
  if (!owned_.empty()) {
    logger()->warn("group '{}': partitions lost ({})", opts_.group_id, why);
    if (state_ != classic_state::preparing) transition(classic_state::preparing, why.c_str());
    request_listener(listener_kind::lost, owned_, next);
    return;
  }
  continue_after_listener(now, next);
}

void member::continue_after_listener(time_point now, then next) {
  switch (next) {
    case then::nothing:
      return;
    case then::join:
    case then::rejoin_after_lost:
      if (state_ == classic_state::leaving) return;
      transition(classic_state::joining, "rejoining");
      return;
    case then::assign_added: {
      // Cooperative, after revoking owned-minus-assigned: take the new set, announce what was added.
      const partition_set added = minus(pending_assignment_, owned_);
      set_owned(pending_assignment_);
      request_listener(listener_kind::assigned, added, then::finish_assignment);
      return;
    }
    case then::finish_assignment:
      if (state_ == classic_state::completing) {
        transition(classic_state::stable, "assignment complete");
        rebalance_ends(now, true);
      }
      return;
    case then::leave:
      send_leave(now, "the consumer is leaving");
      return;
    case then::close_after_leave:
      finish_leave(now);
      return;
  }
  (void)now;
}

void member::complete_assignment(time_point now) {
  if (opts_.protocol == RebalanceProtocol::eager) {
    set_owned(pending_assignment_);
    request_listener(listener_kind::assigned, pending_assignment_, then::finish_assignment);
    return;
  }
  const partition_set revoked = minus(owned_, pending_assignment_);
  if (!revoked.empty()) {
    // Second round once stable: the revoked partitions can then go to their new owners. Any
    // other pending rejoin request (a subscription change during the join) is kept as it is.
    request_rejoin(RebalanceCause::cooperative_round, "partitions revoked; second cooperative round");
    // A member that joined the generation before this one claimed them at the newest generation
    // there was: another claimant ties (the partition is withheld) or loses, so nobody has them
    // yet. One that missed a generation (a paused process, a failed SyncGroup) claimed them at an
    // older one, and a member given them meanwhile claims them at a newer one and keeps them:
    // they are that member's already, and the auto-commit before the revoke must not commit
    // them for it (kgroup-sim --group, seed 796560523412).
    bool stale = claimed_generation_ < 0 || generation_ > claimed_generation_ + 1;
#ifdef KGROUP_SIM_MUTANTS
    if (sim::mutant_enabled("stale_claim_commit")) stale = false;  // the bug put back
#endif
    request_listener(listener_kind::revoked, revoked, then::assign_added, stale);
    return;
  }
  continue_after_listener(now, then::assign_added);
}

void member::set_owned(partition_set owned) {
  if (owned == owned_) return;
  owned_ = std::move(owned);
  actions_.emplace_back(assignment_changed{owned_});
}

void member::heartbeat_after_backoff() {
  // A failed heartbeat is retried once the backoff ends, not a whole heartbeat.interval.ms later
  // (as the Java client's failHeartbeat): the session timer keeps running meanwhile.
  last_heartbeat_sent_ = backoff_until_ - opts_.heartbeat_interval;
}

void member::fatal(time_point, std::error_code ec, std::string message) {
  if (state_ == classic_state::closed) return;  // a late answer after close
  logger()->error("group '{}': fatal: {}", opts_.group_id, message);
  if (state_ == classic_state::leaving) {
    // Already leaving (unsubscribe/close): report it, but let the leave finish so close() returns.
    actions_.emplace_back(report_error{ec, std::move(message), true});
    return;
  }
  in_flight_ = in_flight::none;
  listener_.drop();
  transition(classic_state::fatal, message.c_str());
  actions_.emplace_back(report_error{ec, std::move(message), true});
}

void member::request_rejoin(RebalanceCause cause, std::string reason) {
  rejoin_needed_ = true;
  rejoin_cause_ = cause;
  rejoin_reason_ = std::move(reason);
}

std::optional<time_point> member::next_deadline() const {
  std::optional<time_point> t;
  auto consider = [&](time_point x) {
    if (!t || x < *t) t = x;
  };
  const bool member_like = state_ != classic_state::unsubscribed && state_ != classic_state::poll_timed_out &&
                           state_ != classic_state::fatal && state_ != classic_state::closed &&
                           state_ != classic_state::leaving;
  if (poll_timer_running()) {
    consider(poll_.next_check(opts_.max_poll_interval));
  }
  if (backoff_until_ != time_point{} && member_like) consider(backoff_until_);
  const bool heartbeating = (state_ == classic_state::stable || state_ == classic_state::completing ||
                             state_ == classic_state::preparing || state_ == classic_state::assigning) &&
                            generation_ >= 0;
  if (leaving_heartbeats() && in_flight_ == in_flight::none && coord_.known()) {
    consider(std::max(last_heartbeat_sent_ + opts_.heartbeat_interval, backoff_until_));
  }
  if (state_ == classic_state::leaving && backoff_until_ != time_point{} && coord_.unknown() &&
      needs_coordinator()) {
    consider(backoff_until_);  // the next lookup of a coordinator forgotten while leaving
  }
  if (heartbeating) {
    // The next heartbeat is due only when none is in flight and the coordinator is known (else
    // its response or the lookup wakes the core), and not before a backoff ends.
    if (in_flight_ == in_flight::none && coord_.known()) {
      consider(std::max(last_heartbeat_sent_ + opts_.heartbeat_interval, backoff_until_));
    }
    consider(last_heartbeat_ok_ + opts_.session_timeout);
  }
  return t;
}

}  // namespace kgroup::group
