// The KIP-848 membership core (consumer_member.hpp): the heartbeat loop (pump), building full
// and incremental heartbeats, leaving, and reconciling toward the target (revoke, then assign;
// fencing; listener hand-offs).
#include "group/consumer_member.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.hpp"
#include "base/sim_mutants.hpp"
#include "group/consumer_member_ops.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group::kip848 {

void consumer_member::pump(time_point now) {
  if (backoff_until_ != time_point{} && now >= backoff_until_) backoff_until_ = {};
  if (state_ == s::unsubscribed || state_ == s::fatal || state_ == s::closed) return;
  if (heartbeating() && state_ != s::joining) maybe_request_names(now);
  if (state_ == s::reconciling) maybe_reconcile(now);
  if (needs_coordinator() && !coord_.known()) {
    if (coord_.unknown() && now >= backoff_until_ && coord_.start())
      actions_.emplace_back(find_coordinator{});
    return;
  }
  if (now < backoff_until_ || in_flight_ != in_flight::none) return;
  if (leave_pending_) {
    send_leave(now);
    return;
  }
  if (state_ == s::leaving) {
    if (listener_.pending()) return;
    if (sends_leave()) {
      send_leave(now);
    } else {
      finish_leave(now);
    }
    return;
  }
  if (heartbeating() && heartbeat_due(now)) {
    send_heartbeat(now);
    // An acknowledgement just went out and the target moved on meanwhile: the next round starts.
    if (state_ == s::reconciling) maybe_reconcile(now);
  }
}

void consumer_member::send_heartbeat(time_point now) {
  if (regex_ && version_ < 1) {
    // ConsumerGroupHeartbeat v0 has no SubscribedTopicRegex (brokers before Kafka 4.0 evaluate no
    // regex); resolving it here instead would be a different, client-side semantics.
    fatal(now, make_error_code(client_errc::no_compatible_version),
          "group '" + opts_.group_id +
              "': subscribing by regex with group.protocol=consumer needs a coordinator "
              "with ConsumerGroupHeartbeat v1 (Kafka 4.0+); this one speaks v0: subscribe by topic names");
    return;
  }
  protocol::consumer_group_heartbeat_request req;
  req.group_id = opts_.group_id;
  req.member_id = member_id_;
  req.member_epoch = epoch_;
  req.instance_id = opts_.group_instance_id;
  const bool all = state_ == s::joining;
  // rebalance_timeout_ms stays -1 and the optional fields null when unchanged (the schema's
  // "null if it did not change").
  const auto rebalance_timeout = static_cast<std::int32_t>(opts_.max_poll_interval.count());
  const bool full = all || !sent_.rebalance_timeout_ms;
  if (all || sent_.rebalance_timeout_ms != rebalance_timeout) {
    req.rebalance_timeout_ms = rebalance_timeout;
    sent_.rebalance_timeout_ms = rebalance_timeout;
  }
  if (opts_.rack && (all || sent_.rack != opts_.rack)) {
    req.rack_id = opts_.rack;
    sent_.rack = opts_.rack;
  }
  // While the revoke of unsubscribe()/close() runs, the subscription on record stays as it was.
  const bool subscription = state_ != s::prepare_leaving;
  // From v1 on, a subscription goes out whole: names with an empty regex, or a regex with no
  // names, never one field alone (the other null). Brokers read the empty value as "none";
  // librdkafka sends the same, and its mock cluster refuses (aborts on) one field alone.
  const bool whole = version_ >= 1;
  if (subscription && regex_) {
    if (all || sent_.regex != regex_) {
      req.subscribed_topic_regex = regex_;
      sent_.regex = regex_;
      if (whole) {
        req.subscribed_topic_names = std::vector<std::string>{};
        sent_.topics = std::vector<std::string>{};
      }
    }
    if (sent_.topics && !sent_.topics->empty()) {
      // From names to a regex: the names are cleared.
      req.subscribed_topic_names = std::vector<std::string>{};
      sent_.topics = std::vector<std::string>{};
    }
  } else if (subscription) {
    if (all || sent_.topics != topics_) {
      req.subscribed_topic_names = topics_;
      sent_.topics = topics_;
      if (whole) {
        req.subscribed_topic_regex = std::string{};
        sent_.regex = std::string{};
      }
    }
    if (sent_.regex && !sent_.regex->empty()) {
      // From a regex to names: the regex is cleared (an empty string).
      req.subscribed_topic_regex = std::string{};
      sent_.regex = std::string{};
    }
  }
  if (opts_.remote_assignor && (all || sent_.assignor != opts_.remote_assignor)) {
    req.server_assignor = opts_.remote_assignor;
    sent_.assignor = opts_.remote_assignor;
  }
  // Everything owned, including what an assign callback has not taken yet. Java leaves those out
  // until on_partitions_assigned is done, but the coordinator reads a partition it is revoking and
  // the member does not report as released: had the target moved it on meanwhile, it would go to
  // another member while this one still owns it (kgroup-sim's G1; docs/DESIGN.md). A finished
  // revoke is reported at once.
  id_assignment reported = owned_;
#ifdef KGROUP_SIM_MUTANTS
  // kgroup-sim --group --protocol consumer's finding put back (Java's way).
  if (sim::mutant_enabled("assign_unreported") && listener_.pending_is(listener_kind::assigned))
    reported = minus(owned_, *listener_.parts());
#endif
  if (all || sent_.owned != reported) {
    // On joining (empty), and the first heartbeat after a reconciliation: the acknowledgement.
    req.topic_partitions = to_wire(reported);
    sent_.owned = reported;
  }
  if (state_ == s::joining) join_sent_ = true;
  heartbeat_now_ = false;
  in_flight_ = in_flight::heartbeat;
  heartbeat_sent_ = now;
  next_heartbeat_at_ = now + interval_;
  actions_.emplace_back(send_consumer_group_heartbeat{std::move(req), full, false});
  if (state_ == s::acknowledging) {
    // The acknowledgement is out: on to the newest target if it differs (Java moves on when the
    // request is built, not answered).
    if (target_ && *target_ != owned_) {
      transition(s::reconciling, "acknowledged; the target moved on");
    } else {
      transition(s::stable, "reconciled assignment acknowledged");
      reconciliation_ends(now, true);
    }
  }
}

void consumer_member::send_leave(time_point now) {
  (void)now;
  protocol::consumer_group_heartbeat_request req;
  req.group_id = opts_.group_id;
  req.member_id = member_id_;
  req.member_epoch = leave_epoch();
  req.instance_id = opts_.group_instance_id;
  leave_pending_ = false;
  in_flight_ = in_flight::leave;
  heartbeat_sent_ = now;
  sent_ = {};
  join_sent_ = false;
  // While leaving the epoch says so; a poll timeout's leave leaves the member out of the group,
  // and a rejoin starts from 0.
  epoch_ = state_ == s::leaving ? leave_epoch() : join_epoch;
  logger()->info("group '{}': leaving with epoch {}", opts_.group_id, req.member_epoch);
  actions_.emplace_back(send_consumer_group_heartbeat{std::move(req), false, true});
}

void consumer_member::begin_join(time_point now, RebalanceCause cause, const std::string& why) {
  reconciliation_begins(now, cause, why);
  epoch_ = join_epoch;
  join_sent_ = false;
  target_.reset();
  step_target_.clear();
  sent_ = {};
  heartbeat_now_ = false;
  transition(s::joining, why);
  pump(now);
}

void consumer_member::maybe_request_names(time_point now) {
  if (!target_) return;
  const std::vector<topic_id> unknown = unknown_ids(*target_);
  if (unknown.empty()) return;
  // Ask for ids not asked yet at once; ask again for the ones metadata did not know after a
  // backoff (the topic may be too new for the broker the driver asked).
  std::vector<topic_id> ask;
  const bool retry = now >= names_retry_at_;
  for (const auto& id : unknown) {
    if (retry || !names_asked_.contains(id)) ask.push_back(id);
  }
  if (ask.empty()) return;
  for (const auto& id : ask) names_asked_.insert(id);
  if (retry) names_asked_.insert(unknown.begin(), unknown.end());
  names_retry_at_ = now + names_backoff_.next();
  actions_.emplace_back(need_topic_names{retry ? unknown : ask});
}

void consumer_member::maybe_reconcile(time_point now) {
  if (listener_.pending() || !target_) return;
  const id_assignment ready = resolved(*target_, nullptr);
  if (ready == owned_) {
    // Nothing to do with the names known: either reconciled, or waiting for names.
    if (*target_ == owned_) {
      transition(s::stable, "target assignment reached");
      reconciliation_ends(now, true);
    }
    return;
  }
  step_target_ = ready;
  const id_assignment revoked = minus(owned_, ready);
  logger()->info("group '{}': reconciling toward epoch {}: revoke {} topics, then assign", opts_.group_id,
                 epoch_, revoked.size());
  if (!revoked.empty()) {
    // Revoke first, with a chance to commit (the coordinator hands these partitions to others
    // only once this member has acknowledged giving them up).
    request_listener(listener_kind::revoked, revoked, then::assign_step);
    return;
  }
  assign_step(now);
}

void consumer_member::assign_step(time_point now) {
  (void)now;
  // The step's target, less what a newer target has taken back meanwhile (never assign what the
  // coordinator no longer gives us; what it added is for the next round).
  id_assignment step = step_target_;
  if (target_) step = intersect(step, *target_);
  const id_assignment added = minus(step, owned_);
  set_owned(unite(intersect(owned_, step_target_), added));
  // Called also with nothing added, as after a classic rebalance (docs/DESIGN.md).
  request_listener(listener_kind::assigned, added, then::acknowledge);
}

void consumer_member::fence(time_point now, const std::string& why) {
  (void)now;
  logger()->warn("group '{}': member '{}' fenced at epoch {} ({})", opts_.group_id, member_id_, epoch_, why);
  if (stats_.open_entry()) stats_.failed(now);
  if (state_ != s::prepare_leaving && state_ != s::leaving) {
    reconciliation_begins(now, RebalanceCause::session_timeout, "fenced: " + why);
  }
  epoch_ = join_epoch;
  join_sent_ = false;
  target_.reset();
  step_target_.clear();
  // Refused while joining, the member had nothing of this membership to lose.
  if (state_ != s::joining) removed_ = true;
  if (state_ == s::prepare_leaving || state_ == s::leaving) {
    // Leaving anyway: nothing to leave any more; the revoke running finishes, then done.
    if (state_ == s::leaving && !listener_.pending()) finish_leave(now);
    return;
  }
  if (state_ == s::joining) {
    // Refused while joining: again after a backoff, not in a tight loop.
    transition(s::fenced, why);
    backoff(now);
    transition(s::joining, "rejoining after " + why);
    return;
  }
  transition(s::fenced, why);
  // A revoke or assign still queued is overtaken: the application hears only that everything is
  // lost (never commits partitions that may have a new owner).
  supersede_pending_listener();
  if (!owned_.empty()) {
    request_listener(listener_kind::lost, owned_, then::rejoin);
    return;
  }
  continue_after_listener(now, then::rejoin);
}

void consumer_member::finish_leave(time_point now) {
  if (state_ == s::closed) return;
  reconciliation_ends(now, false);
  removed_ = false;
  fatal_while_leaving_ = false;
  epoch_ = join_epoch;
  join_sent_ = false;
  leave_pending_ = false;
  target_.reset();
  step_target_.clear();
  sent_ = {};
  set_owned({});
  if (closing_) {
    transition(s::closed, "left the group");
  } else {
    transition(s::unsubscribed, "left the group");
  }
  actions_.emplace_back(left_group{});
  if (!closing_ && (!topics_.empty() || regex_)) {
    // subscribe() was called while the leave was under way: join again.
    begin_join(now, RebalanceCause::member_joined, "this member subscribed");
  }
}

void consumer_member::fatal(time_point now, std::error_code ec, std::string message) {
  if (state_ == s::closed) return;
  if (stats_.open_entry()) stats_.failed(now);
  reconciliation_ends(now, false);
  logger()->error("group '{}': fatal: {}", opts_.group_id, message);
  if (state_ == s::leaving || state_ == s::prepare_leaving) {
    // Already leaving: report it, let the leave finish so close() returns.
    fatal_while_leaving_ = true;
    actions_.emplace_back(report_error{ec, std::move(message), true});
    if (state_ == s::prepare_leaving) {
      epoch_ = join_epoch;  // nothing to leave: the revoke finishes, then done
      join_sent_ = false;
    }
    return;
  }
  in_flight_ = in_flight::none;
  leave_pending_ = false;
  supersede_pending_listener();
  target_.reset();
  transition(s::fatal, message);
  actions_.emplace_back(report_error{ec, std::move(message), true});
}

void consumer_member::continue_after_listener(time_point now, then next) {
  switch (next) {
    case then::nothing:
      return;
    case then::assign_step:
      if (state_ == s::reconciling) assign_step(now);
      return;
    case then::acknowledge:
      if (state_ == s::reconciling) transition(s::acknowledging, "assignment reconciled");
      return;
    case then::rejoin:
      if (state_ == s::fenced) begin_join(now, RebalanceCause::session_timeout, "rejoining with epoch 0");
      return;
    case then::leave:
      if (state_ == s::prepare_leaving) transition(s::leaving, "revoke done");
      return;
    case then::finish_leave:
      // A poll timeout's leave heartbeat that has not gone out yet goes first (pump()).
      if (!leave_pending_) finish_leave(now);
      return;
  }
}

void consumer_member::disown(const id_assignment& parts) { set_owned(minus(owned_, parts)); }

void consumer_member::set_owned(id_assignment owned) {
  owned = normalized(std::move(owned));
  if (owned == owned_) return;
  owned_ = std::move(owned);
  actions_.emplace_back(assignment_changed{names_of(owned_)});
}

}  // namespace kgroup::group::kip848
