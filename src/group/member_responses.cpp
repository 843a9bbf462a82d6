// The membership core, continued: the coordinator's answers (FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, and the group errors of OffsetCommit) and the error ladders
// they share (docs/DESIGN.md, "Reactions to errors"). Pure, like member.cpp.
#include <algorithm>
#include <string>

#include "group/member.hpp"
#include "group/member_reactions.hpp"
#include "base/log.hpp"

namespace kgroup::group {

void member::coordinator_found(time_point now, std::int32_t node_id) {
  coord_.found(node_id);
  retry_backoff_.reset();
  backoff_until_ = {};
  logger()->info("group '{}': coordinator is broker {}", opts_.group_id, node_id);
  pump(now);
}

void member::coordinator_failed(time_point now, std::error_code ec) {
  coord_.forget();
  if (ec == make_error_code(kafka_errc::group_authorization_failed)) {
    fatal(now, ec, fatal_message(code_of(kafka_errc::group_authorization_failed), opts_.group_id));
    return;
  }
  logger()->debug("group '{}': coordinator lookup failed: {}", opts_.group_id, ec.message());
  backoff(now);
}

void member::request_failed(time_point now, std::error_code ec) {
  const in_flight was = in_flight_;
  if (was == in_flight::none) return;  // stale: nothing of ours is in flight
  in_flight_ = in_flight::none;
  logger()->debug("group '{}': request failed: {}", opts_.group_id, ec.message());
  if (was == in_flight::leave) {
    if (state_ == classic_state::leaving) {
      finish_leave(now);
    } else {
      pump(now);  // the LeaveGroup of a poll timeout: a rejoin may be waiting for it
    }
    return;
  }
  if (was == in_flight::join || was == in_flight::sync) rebalance_failed(now);
  forget_coordinator("request failed");
  backoff(now);
  if (was == in_flight::heartbeat) heartbeat_after_backoff();
  if (was == in_flight::sync && state_ == classic_state::syncing) {
    transition(classic_state::joining, "SyncGroup failed");
  }
  pump(now);
}

bool member::coordinator_error(time_point now, std::int16_t c) {
  if (protocol::reacts(c, protocol::reaction::coordinator_moved)) {
    forget_coordinator(kafka_error_name(c));
    backoff(now);
    return true;
  }
  if (protocol::reacts(c, protocol::reaction::coordinator_busy)) {
    backoff(now);
    return true;
  }
  return false;
}

void member::join_group_done(time_point now, const protocol::join_group_response& r) {
  if (in_flight_ != in_flight::join) return;  // stale: superseded by a LeaveGroup or never sent
  in_flight_ = in_flight::none;
  if (state_ != classic_state::joining) {
    pump(now);
    return;  // a leave or close overtook it
  }
  const std::int16_t c = r.error_code;
  if (c != 0 && c != code_of(kafka_errc::member_id_required)) rebalance_failed(now);
  if (c == 0 && r.protocol_type && !r.protocol_type->empty() && *r.protocol_type != protocol_type) {
    // JoinGroup v7+ names the group's protocol type: a group of another kind (Connect, ...)
    // shares the id. Java fails the same way (INCONSISTENT_GROUP_PROTOCOL).
    fatal(now, make_error_code(kafka_errc::inconsistent_group_protocol),
          "group '" + opts_.group_id + "': JoinGroup answered protocol type '" + *r.protocol_type +
              "', not '" + std::string(protocol_type) + "': the group id is used by another kind of group");
    return;
  }
  if (c == 0) {
    unexpected_cleared("JoinGroup");
    stats_.step_done(now - join_sent_, stats_.joins, stats_.join_time_total, stats_.join_time_max,
                     stats_.join_hist);
    member_id_ = r.member_id;
    generation_ = r.generation_id;
    removed_ = false;
    leader_id_ = r.leader;
    protocol_name_ = r.protocol_name.value_or("");
    retry_backoff_.reset();
    last_heartbeat_ok_ = now;
    last_heartbeat_sent_ = now;  // the session is timed from the JoinGroup answer
    logger()->info("group '{}': joined generation {} as '{}'{} with protocol '{}'", opts_.group_id,
                   generation_, member_id_, is_leader() ? " (leader)" : "", protocol_name_);
    if (is_leader() && !r.skip_assignment) {
      transition(classic_state::assigning, "JoinGroup done, leader");
      describe_membership_change(generation_, r.members);
      request_assignment(r);
      return;
    }
    send_sync(now, {});
    return;
  }
  if (c == code_of(kafka_errc::member_id_required)) {
    // KIP-394: the coordinator handed out our member id; join again with it at once.
    member_id_ = r.member_id;
    rejoin_reason_ = "rejoining with the member id the coordinator assigned";
    pump(now);
    return;
  }
  if (is_fenced(c)) {
    fenced(now, "JoinGroup", c);
    return;
  }
  if (c == code_of(kafka_errc::rebalance_in_progress)) {
    pump(now);
    return;
  }
  answer_error(now, c, "JoinGroup", retry_with::join);
}

void member::sync_group_done(time_point now, const protocol::sync_group_response& r) {
  if (in_flight_ != in_flight::sync) return;  // stale
  in_flight_ = in_flight::none;
  if (state_ != classic_state::syncing) {
    pump(now);
    return;
  }
  const std::int16_t c = r.error_code;
  if (c != 0) rebalance_failed(now);
  if (c == 0) {
    unexpected_cleared("SyncGroup");
    stats_.step_done(now - sync_sent_, stats_.syncs, stats_.sync_time_total, stats_.sync_time_max,
                     stats_.sync_hist);
    if (r.protocol_type && !r.protocol_type->empty() && *r.protocol_type != protocol_type) {
      fatal(now, make_error_code(kafka_errc::inconsistent_group_protocol),
            "group '" + opts_.group_id + "': SyncGroup answered protocol type '" + *r.protocol_type +
                "', not '" + std::string(protocol_type) + "'");
      return;
    }
    if (r.protocol_name && !r.protocol_name->empty() && !protocol_name_.empty() &&
        *r.protocol_name != protocol_name_) {
      fatal(now, make_error_code(kafka_errc::inconsistent_group_protocol),
            "group '" + opts_.group_id + "': SyncGroup protocol '" + *r.protocol_name +
                "' differs from JoinGroup's '" + protocol_name_ + "'");
      return;
    }
    partition_set assigned;
    std::error_code dec = decode_assignment_(r.assignment, assigned);
    std::string bad;
    if (!dec) {
      for (const auto& tp : assigned) {
        if (!std::binary_search(topics_.begin(), topics_.end(), tp.topic)) {
          bad = tp.topic;
          break;
        }
      }
    }
    if (dec || !bad.empty()) {
      const std::string why =
          dec ? "malformed assignment from the group leader: " + dec.message()
              : "the group leader assigned topic '" + detail::escape_nonprintable(bad) +
                    "', which this member did not subscribe to";
      logger()->error("group '{}': {}; rejecting it and rejoining", opts_.group_id, why);
      actions_.emplace_back(report_error{make_error_code(client_errc::protocol_violation), why, false});
      transition(classic_state::joining, "assignment rejected");
      rejoin_reason_ = "rejected assignment";
      rebalance_failed(now);
      if (!stats_.history.empty() && !stats_.history.back().end) {
        stats_.history.back().cause = RebalanceCause::error;
        stats_.history.back().detail = why;
      }
      backoff(now);
      pump(now);
      return;
    }
    pending_assignment_ = std::move(assigned);
    synced_generation_ = generation_;
    last_heartbeat_ok_ = now;
    last_heartbeat_sent_ = now;
    retry_backoff_.reset();
    transition(classic_state::completing, "SyncGroup done");
    complete_assignment(now);
    pump(now);
    return;
  }
  if (c == code_of(kafka_errc::rebalance_in_progress)) {
    transition(classic_state::joining, "SyncGroup: rebalance in progress");
    rejoin_reason_ = "group is rebalancing";
    pump(now);
    return;
  }
  if (is_fenced(c)) {
    fenced(now, "SyncGroup", c);
    return;
  }
  answer_error(now, c, "SyncGroup", retry_with::join);
}

void member::heartbeat_done(time_point now, const protocol::heartbeat_response& r) {
  if (in_flight_ != in_flight::heartbeat) return;  // stale
  in_flight_ = in_flight::none;
  stats_.heartbeat_answered(now, last_heartbeat_sent_);
  const std::int16_t c = r.error_code;
  if (c == 0) {
    unexpected_cleared("Heartbeat");
    last_heartbeat_ok_ = now;
    pump(now);
    return;
  }
  if (c == code_of(kafka_errc::rebalance_in_progress)) {
    last_heartbeat_ok_ = now;  // the coordinator still knows us
    if (state_ == classic_state::stable || state_ == classic_state::completing ||
        state_ == classic_state::preparing) {
      if (!rejoin_needed_) request_rejoin(RebalanceCause::group_rebalancing, "group is rebalancing");
    }
    pump(now);
    return;
  }
  if (is_fenced(c)) {
    membership_lost(now, "Heartbeat", c);
    return;
  }
  answer_error(now, c, "Heartbeat", retry_with::heartbeat);
}

void member::answer_error(time_point now, std::int16_t c, const char* api, retry_with retry) {
  // The tail of the JoinGroup, SyncGroup and Heartbeat ladders: a coordinator error backs off
  // (rediscovering a coordinator that moved), a fatal code ends the membership, anything else is
  // unexpected (logged, retried after a backoff, fatal when it keeps coming). A retried SyncGroup
  // starts over from JoinGroup; a failed heartbeat is resent when the backoff ends.
  if (!coordinator_error(now, c)) {
    if (is_fatal_group_error(c)) {
      fatal(now, make_error_code(static_cast<kafka_errc>(c)), fatal_message(c, opts_.group_id));
      return;
    }
    if (unexpected_error(now, c, api)) return;
    backoff(now);
  }
  if (retry == retry_with::heartbeat) {
    heartbeat_after_backoff();
  } else if (state_ == classic_state::syncing) {
    transition(classic_state::joining, (std::string(api) + " failed: " + kafka_error_name(c)).c_str());
  }
  pump(now);
}

void member::leave_group_done(time_point now, const protocol::leave_group_response& r) {
  if (in_flight_ != in_flight::leave) return;  // stale
  in_flight_ = in_flight::none;
  if (r.error_code != 0) {
    logger()->debug("group '{}': LeaveGroup answered {}", opts_.group_id, kafka_error_name(r.error_code));
  }
  if (state_ == classic_state::leaving) finish_leave(now);
  pump(now);
}

void member::membership_lost(time_point now, const std::string& what, std::int16_t c) {
  if ((state_ != classic_state::stable && state_ != classic_state::completing &&
       state_ != classic_state::preparing && state_ != classic_state::assigning) ||
      generation_ < 0) {
    pump(now);
    return;  // stale answer for a generation we already left (a session timeout, ...)
  }
  removed_ = true;
  fenced(now, what, c);
}

void member::fenced(time_point now, const std::string& what, std::int16_t c) {
  const std::string name = kafka_error_name(c);
  rebalance_begins(now, RebalanceCause::session_timeout, what + ": " + name);
  generation_ = -1;
  if (c == code_of(kafka_errc::unknown_member_id)) member_id_.clear();
  if (state_ == classic_state::syncing) transition(classic_state::joining, name.c_str());
  lose_partitions(now, name, then::join);
  pump(now);
}

void member::commit_failed(time_point now, std::int32_t generation, std::int16_t c) {
  if (generation < 0 || generation != generation_) {
    pump(now);
    return;  // a commit of an older generation (or outside the group): nothing to learn
  }
  if (c == code_of(kafka_errc::rebalance_in_progress)) {
    rebalance_in_progress_seen(now);
  } else if (is_fenced(c)) {
    membership_lost(now, "OffsetCommit", c);
  } else if (c == code_of(kafka_errc::fenced_instance_id)) {
    fatal(now, make_error_code(kafka_errc::fenced_instance_id), fatal_message(c, opts_.group_id));
  } else if (protocol::reacts(c, protocol::reaction::coordinator_moved)) {
    // The commit's coordinator moved (as Java's commit path, markCoordinatorUnknown): look it up
    // again now, so the commit's retry (the facade's) and the heartbeats find the new one, also
    // while the revoke of unsubscribe()/close() runs.
    if (coord_.known()) forget_coordinator(kafka_error_name(c));
    pump(now);
  } else {
    pump(now);
  }
}

void member::rebalance_in_progress_seen(time_point now) {
  if (state_ == classic_state::stable || state_ == classic_state::completing) {
    request_rejoin(RebalanceCause::group_rebalancing, "group is rebalancing");
  }
  pump(now);
}

}  // namespace kgroup::group
