#include "group/member.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group {

namespace {

constexpr const char* protocol_type = "consumer";

std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

bool is_fatal_group_error(std::int16_t c) {
  switch (static_cast<kafka_errc>(c)) {
    case kafka_errc::fenced_instance_id:
    case kafka_errc::group_authorization_failed:
    case kafka_errc::inconsistent_group_protocol:
    case kafka_errc::group_max_size_reached:
    case kafka_errc::invalid_session_timeout:
    case kafka_errc::invalid_group_id:
    case kafka_errc::unsupported_version:
      return true;
    default:
      return false;
  }
}

std::string fatal_message(std::int16_t c, const std::string& group) {
  switch (static_cast<kafka_errc>(c)) {
    case kafka_errc::fenced_instance_id:
      return "another consumer with the same group.instance.id joined group '" + group +
             "'; this one is fenced (use a unique group.instance.id per process)";
    case kafka_errc::group_authorization_failed:
      return "not authorized to access group '" + group + "'";
    case kafka_errc::inconsistent_group_protocol:
      return "group '" + group +
             "' uses protocols this consumer does not support (partition.assignment.strategy has no assignor "
             "in "
             "common with the other members)";
    case kafka_errc::group_max_size_reached:
      return "group '" + group + "' has reached the broker's group.max.size";
    case kafka_errc::invalid_session_timeout:
      return "session.timeout.ms is outside the broker's group.min.session.timeout.ms .. "
             "group.max.session.timeout.ms";
    default:
      return kafka_error_name(c) + " from the coordinator of group '" + group + "'";
  }
}

std::vector<topic_partition> to_vector(const partition_set& s) {
  return {s.begin(), s.end()};
}

partition_set minus(const partition_set& a, const partition_set& b) {
  partition_set out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

}  // namespace

const char* to_string(member_state s) noexcept {
  switch (s) {
    case member_state::unsubscribed:
      return "unsubscribed";
    case member_state::preparing:
      return "preparing";
    case member_state::joining:
      return "joining";
    case member_state::assigning:
      return "assigning";
    case member_state::syncing:
      return "syncing";
    case member_state::completing:
      return "completing";
    case member_state::stable:
      return "stable";
    case member_state::leaving:
      return "leaving";
    case member_state::poll_timed_out:
      return "poll_timed_out";
    case member_state::fatal:
      return "fatal";
    case member_state::closed:
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

bool transition_allowed(member_state from, member_state to) noexcept {
  using s = member_state;
  if (from == to) return true;
  if (to == s::fatal) return from != s::closed;
  if (to == s::closed) return true;
  switch (from) {
    case s::unsubscribed:
      return to == s::joining;
    case s::preparing:
      return to == s::joining || to == s::leaving || to == s::poll_timed_out || to == s::unsubscribed;
    case s::joining:
    case s::assigning:
    case s::syncing:
      return to == s::joining || to == s::assigning || to == s::syncing || to == s::completing ||
             to == s::preparing || to == s::leaving || to == s::poll_timed_out || to == s::unsubscribed;
    case s::completing:
      return to == s::stable || to == s::joining || to == s::preparing || to == s::leaving ||
             to == s::poll_timed_out || to == s::unsubscribed;
    case s::stable:
      return to == s::preparing || to == s::joining || to == s::leaving || to == s::poll_timed_out ||
             to == s::unsubscribed;
    case s::leaving:
      return to == s::unsubscribed;
    case s::poll_timed_out:
      return to == s::preparing || to == s::joining || to == s::leaving || to == s::unsubscribed;
    case s::fatal:
      return to == s::leaving;  // close() or unsubscribe(): lost listener first
    case s::closed:
      return false;
  }
  return false;
}

member::member(member_options opts, protocol_builder build_protocols, assignment_decoder decode_assignment)
    : opts_(std::move(opts)),
      build_protocols_(std::move(build_protocols)),
      decode_assignment_(std::move(decode_assignment)),
      retry_backoff_(opts_.retry_backoff, opts_.retry_backoff_max) {}  // no jitter: deterministic tests

void member::transition(member_state to, const char* reason) {
  if (to == state_) return;
  if (!transition_allowed(state_, to)) {
    ++invalid_transitions_;
    logger()->error("group '{}': invalid transition {} -> {} ({})", opts_.group_id, to_string(state_),
                    to_string(to), reason);
  } else {
    logger()->debug("group '{}' member '{}': {} -> {} ({})", opts_.group_id, member_id_, to_string(state_),
                    to_string(to), reason);
  }
  state_ = to;
}

std::vector<action> member::take_actions() {
  std::vector<action> out;
  out.swap(actions_);
  return out;
}

// ---- user events ------------------------------------------------------------------------------

void member::subscribe(time_point now, std::vector<std::string> topics) {
  if (state_ == member_state::fatal || state_ == member_state::closed) return;
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
  const bool changed = topics != topics_;
  topics_ = std::move(topics);
  if (last_poll_ == time_point{}) last_poll_ = now;
  if (state_ == member_state::unsubscribed) {
    last_poll_ = now;
    poll_warned_ = false;
    transition(member_state::joining, "subscribed");
    rejoin_reason_ = "subscribed";
    rebalance_begins(now, RebalanceCause::member_joined, "this member subscribed");
    pump(now);
    return;
  }
  if (changed) request_rejoin(RebalanceCause::subscription_change, "subscription changed");
  pump(now);
}

void member::unsubscribe(time_point now) {
  if (state_ == member_state::unsubscribed || state_ == member_state::closed ||
      state_ == member_state::leaving)
    return;
  if (state_ == member_state::fatal) {
    // Nothing to leave (the coordinator refused us), nothing to wait for: the partitions still
    // owned are reported lost, then unsubscribe() returns (issue 13, item 9).
    closing_ = false;
    topics_.clear();
    transition(member_state::leaving, "unsubscribe after a fatal error");
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
  transition(member_state::leaving, "unsubscribe");
  if (!owned_.empty()) {
    // Partitions of a generation that is gone are lost, not revoked: their offsets must not be committed.
    const bool valid = generation_ >= 0;
    request_listener(valid ? listener_kind::revoked : listener_kind::lost, owned_, then::leave);
    return;
  }
  send_leave(now, "the consumer unsubscribed");
}

void member::close(time_point now) {
  if (state_ == member_state::closed) return;
  if (state_ == member_state::fatal && !owned_.empty()) {
    // The partitions are not ours any more (fenced, unauthorized, ...): tell the user they are
    // lost, then close without a LeaveGroup (the coordinator refused us; there is nothing to leave).
    closing_ = true;
    transition(member_state::leaving, "close after a fatal error");
    request_listener(listener_kind::lost, owned_, then::close_after_leave);
    return;
  }
  if (state_ == member_state::unsubscribed || state_ == member_state::fatal) {
    set_owned({});
    rebalance_ends(now, false);
    transition(member_state::closed, "close");
    actions_.emplace_back(left_group{});
    return;
  }
  if (state_ == member_state::leaving) {
    closing_ = true;
    return;
  }
  unsubscribe(now);
  closing_ = true;
  if (state_ == member_state::unsubscribed) {
    transition(member_state::closed, "close");
  }
}

void member::poll_called(time_point now) {
  last_poll_ = now;
  in_poll_ = true;
  poll_warned_ = false;
  if (state_ == member_state::poll_timed_out && !pending_listener_) {
    lose_partitions(now, "max.poll.interval.ms was exceeded", then::rejoin_after_lost);
  }
  pump(now);
}

void member::poll_returned(time_point now) {
  in_poll_ = false;
  last_poll_ = now;
  poll_warned_ = false;
  pump(now);
}

void member::enforce_rebalance(time_point now, std::string reason) {
  if (state_ == member_state::unsubscribed || state_ == member_state::fatal ||
      state_ == member_state::closed || state_ == member_state::leaving) {
    return;
  }
  request_rejoin(RebalanceCause::enforced,
                 reason.empty() ? "enforce_rebalance" : "enforce_rebalance: " + reason);
  pump(now);
}

void member::listener_started(time_point now, std::uint64_t seq) {
  if (pending_listener_ && *pending_listener_ == seq) {
    pending_started_ = true;
    // Inside poll() the callback's own time counts toward max.poll.interval.ms, from its start.
    if (in_poll_) last_poll_ = now;
  }
}

void member::listener_done(time_point now, std::uint64_t seq) {
  if (!pending_listener_ || *pending_listener_ != seq) return;  // stale
  pending_listener_.reset();
  if (in_poll_) last_poll_ = now;
  // The listener's effect on ownership: a revoked or lost partition is no longer ours.
  if (pending_kind_ == listener_kind::revoked) set_owned(minus(owned_, pending_parts_));
  if (pending_kind_ == listener_kind::lost) set_owned({});
  pending_parts_.clear();
  const then next = after_listener_;
  after_listener_ = then::nothing;
  if (state_ == member_state::poll_timed_out) {
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
  const bool heartbeating = (state_ == member_state::stable || state_ == member_state::completing ||
                             state_ == member_state::preparing || state_ == member_state::assigning) &&
                            generation_ >= 0;
  if (heartbeating && now - last_heartbeat_ok_ >= opts_.session_timeout) {
    logger()->warn(
        "group '{}': no successful heartbeat for session.timeout.ms ({} ms); the coordinator has "
        "removed this member",
        opts_.group_id, opts_.session_timeout.count());
    if (in_flight_ != in_flight::none && coordinator_) {
      // The request in flight (a heartbeat that never came back) would hold the next JoinGroup
      // until request.timeout.ms: fail it now (issue 13, item 7).
      actions_.emplace_back(abandon_requests{*coordinator_});
      in_flight_ = in_flight::none;
    }
    mark_coordinator_unknown(now, "session timed out");
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
  return state_ == member_state::leaving && pending_listener_ && !leave_sent_ && generation_ >= 0;
}

bool member::poll_timer_running() const noexcept {
  const bool member_like = state_ != member_state::unsubscribed && state_ != member_state::poll_timed_out &&
                           state_ != member_state::fatal && state_ != member_state::closed &&
                           state_ != member_state::leaving;
  const bool in_callback = pending_listener_ && pending_started_;
  return member_like && (!in_poll_ || in_callback);
}

bool member::check_poll_timeout(time_point now) {
  if (!poll_timer_running()) return false;
  const auto since = now - last_poll_;
  if (since >= opts_.max_poll_interval) {
    const auto measured = std::chrono::duration_cast<ms>(since).count();
    logger()->warn(
        "group '{}': poll() was not called for {} ms, more than max.poll.interval.ms ({} ms); leaving "
        "the group. Raise max.poll.interval.ms or reduce max.poll.records or the work per poll.",
        opts_.group_id, measured, opts_.max_poll_interval.count());
    if (!member_id_.empty() && !opts_.group_instance_id && coordinator_) {
      protocol::leave_group_request req;
      req.group_id = opts_.group_id;
      req.member_id = member_id_;
      req.members.push_back({member_id_, opts_.group_instance_id, "consumer poll timeout has expired"});
      actions_.emplace_back(send_leave_group{std::move(req)});
      in_flight_ = in_flight::leave;
      leave_sent_ = true;
    }
    generation_ = -1;
    if (!opts_.group_instance_id) member_id_.clear();
    rejoin_needed_ = false;
    // A callback the stalled application has not run belongs to a generation that is gone: the
    // next poll() reports what is owned as lost instead.
    cancel_unstarted_listener();
    rebalance_begins(now, RebalanceCause::poll_timeout,
                     "poll() not called for " + std::to_string(measured) + " ms (max.poll.interval.ms " +
                         std::to_string(opts_.max_poll_interval.count()) + ")");
    transition(member_state::poll_timed_out, "max.poll.interval.ms exceeded");
    actions_.emplace_back(report_error{make_error_code(client_errc::request_timed_out),
                                       "max.poll.interval.ms exceeded: left the group", false});
    return true;
  }
  if (!poll_warned_ && since >= opts_.max_poll_interval * 8 / 10) {
    poll_warned_ = true;
    logger()->warn("group '{}': {} ms since the last poll(), over 80% of max.poll.interval.ms ({} ms)",
                   opts_.group_id, std::chrono::duration_cast<ms>(since).count(),
                   opts_.max_poll_interval.count());
  }
  return false;
}

void member::coordinator_found(time_point now, std::int32_t node_id) {
  coord_ = coord_state::known;
  coordinator_ = node_id;
  retry_backoff_.reset();
  backoff_until_ = {};
  logger()->info("group '{}': coordinator is broker {}", opts_.group_id, node_id);
  pump(now);
}

void member::coordinator_failed(time_point now, std::error_code ec) {
  coord_ = coord_state::unknown;
  coordinator_.reset();
  if (ec == make_error_code(kafka_errc::group_authorization_failed)) {
    fatal(ec, fatal_message(code(kafka_errc::group_authorization_failed), opts_.group_id));
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
    if (state_ == member_state::leaving) {
      finish_leave(now);
    } else {
      pump(now);  // the LeaveGroup of a poll timeout: a rejoin may be waiting for it
    }
    return;
  }
  if (was == in_flight::join || was == in_flight::sync) rebalance_failed(now);
  mark_coordinator_unknown(now, "request failed");
  backoff(now);
  if (was == in_flight::heartbeat) heartbeat_after_backoff();
  if (was == in_flight::sync && state_ == member_state::syncing) {
    transition(member_state::joining, "SyncGroup failed");
  }
  pump(now);
}

bool member::coordinator_error(time_point now, std::int16_t c) {
  if (c == code(kafka_errc::not_coordinator) || c == code(kafka_errc::coordinator_not_available)) {
    mark_coordinator_unknown(now, kafka_error_name(c).c_str());
    backoff(now);
    return true;
  }
  if (c == code(kafka_errc::coordinator_load_in_progress)) {
    backoff(now);
    return true;
  }
  return false;
}

void member::join_group_done(time_point now, const protocol::join_group_response& r) {
  if (in_flight_ != in_flight::join) return;  // stale: superseded by a LeaveGroup or never sent
  in_flight_ = in_flight::none;
  if (state_ != member_state::joining) {
    pump(now);
    return;  // a leave or close overtook it
  }
  const std::int16_t c = r.error_code;
  if (c != 0 && c != code(kafka_errc::member_id_required)) rebalance_failed(now);
  if (c == 0 && r.protocol_type && !r.protocol_type->empty() && *r.protocol_type != protocol_type) {
    // JoinGroup v7+ names the group's protocol type: a group of another kind (Connect, ...)
    // shares the id. Java fails the same way (INCONSISTENT_GROUP_PROTOCOL).
    fatal(make_error_code(kafka_errc::inconsistent_group_protocol),
          "group '" + opts_.group_id + "': JoinGroup answered protocol type '" + *r.protocol_type +
              "', not '" + std::string(protocol_type) + "': the group id is used by another kind of group");
    return;
  }
  if (c == 0) {
    unexpected_in_a_row_.erase("JoinGroup");
    ++stats_.joins;
    const auto took = std::chrono::duration_cast<ms>(now - join_sent_);
    stats_.join_time_total += took;
    stats_.join_time_max = std::max(stats_.join_time_max, took);
    stats_.join_hist.observe(std::chrono::duration<double>(now - join_sent_).count());
    ++stats_.version;
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
      transition(member_state::assigning, "JoinGroup done, leader");
      actions_.emplace_back(compute_assignment{generation_, protocol_name_, r.members});
      return;
    }
    send_sync(now, {});
    return;
  }
  if (c == code(kafka_errc::member_id_required)) {
    // KIP-394: the coordinator handed out our member id; join again with it at once.
    member_id_ = r.member_id;
    rejoin_reason_ = "rejoining with the member id the coordinator assigned";
    pump(now);
    return;
  }
  if (c == code(kafka_errc::unknown_member_id) || c == code(kafka_errc::illegal_generation)) {
    rebalance_begins(now, RebalanceCause::session_timeout, "JoinGroup: " + kafka_error_name(c));
    generation_ = -1;
    if (c == code(kafka_errc::unknown_member_id)) member_id_.clear();
    lose_partitions(now, kafka_error_name(c), then::join);
    pump(now);
    return;
  }
  if (c == code(kafka_errc::rebalance_in_progress)) {
    pump(now);
    return;
  }
  if (coordinator_error(now, c)) {
    pump(now);
    return;
  }
  if (is_fatal_group_error(c)) {
    fatal(make_error_code(static_cast<kafka_errc>(c)), fatal_message(c, opts_.group_id));
    return;
  }
  if (unexpected_error(c, "JoinGroup")) return;
  backoff(now);
  pump(now);
}

void member::assignment_computed(
    time_point now, std::int32_t generation, std::error_code ec,
    std::vector<protocol::sync_group_request::sync_group_request_assignment> assignments) {
  // Only the answer to our compute_assignment counts; one that arrives after the member moved on
  // (a poll timeout, a leave, a lost generation), even into assigning a newer generation, is
  // stale (issue 13, item 9).
  if (state_ != member_state::assigning || generation != generation_) return;
  if (ec) {
    rebalance_failed(now);
    actions_.emplace_back(
        report_error{ec, "the leader could not compute an assignment: " + ec.message(), false});
    transition(member_state::joining, "assignment failed");
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
  transition(member_state::syncing, "sending SyncGroup");
  in_flight_ = in_flight::sync;
  sync_sent_ = now;
  actions_.emplace_back(send_sync_group{std::move(req)});
}

void member::sync_group_done(time_point now, const protocol::sync_group_response& r) {
  if (in_flight_ != in_flight::sync) return;  // stale
  in_flight_ = in_flight::none;
  if (state_ != member_state::syncing) {
    pump(now);
    return;
  }
  const std::int16_t c = r.error_code;
  if (c != 0) rebalance_failed(now);
  if (c == 0) {
    unexpected_in_a_row_.erase("SyncGroup");
    ++stats_.syncs;
    const auto took = std::chrono::duration_cast<ms>(now - sync_sent_);
    stats_.sync_time_total += took;
    stats_.sync_time_max = std::max(stats_.sync_time_max, took);
    stats_.sync_hist.observe(std::chrono::duration<double>(now - sync_sent_).count());
    ++stats_.version;
    if (r.protocol_type && !r.protocol_type->empty() && *r.protocol_type != protocol_type) {
      fatal(make_error_code(kafka_errc::inconsistent_group_protocol),
            "group '" + opts_.group_id + "': SyncGroup answered protocol type '" + *r.protocol_type +
                "', not '" + std::string(protocol_type) + "'");
      return;
    }
    if (r.protocol_name && !r.protocol_name->empty() && !protocol_name_.empty() &&
        *r.protocol_name != protocol_name_) {
      fatal(make_error_code(kafka_errc::inconsistent_group_protocol),
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
              : "the group leader assigned topic '" + bad + "', which this member did not subscribe to";
      logger()->error("group '{}': {}; rejecting it and rejoining", opts_.group_id, why);
      actions_.emplace_back(report_error{make_error_code(client_errc::protocol_violation), why, false});
      transition(member_state::joining, "assignment rejected");
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
    last_heartbeat_ok_ = now;
    last_heartbeat_sent_ = now;
    retry_backoff_.reset();
    transition(member_state::completing, "SyncGroup done");
    complete_assignment(now);
    pump(now);
    return;
  }
  if (c == code(kafka_errc::rebalance_in_progress)) {
    transition(member_state::joining, "SyncGroup: rebalance in progress");
    rejoin_reason_ = "group is rebalancing";
    pump(now);
    return;
  }
  if (c == code(kafka_errc::unknown_member_id) || c == code(kafka_errc::illegal_generation)) {
    rebalance_begins(now, RebalanceCause::session_timeout, "SyncGroup: " + kafka_error_name(c));
    generation_ = -1;
    if (c == code(kafka_errc::unknown_member_id)) member_id_.clear();
    transition(member_state::joining, kafka_error_name(c).c_str());
    lose_partitions(now, kafka_error_name(c), then::join);
    pump(now);
    return;
  }
  if (coordinator_error(now, c)) {
    transition(member_state::joining, "SyncGroup: coordinator error");
    pump(now);
    return;
  }
  if (is_fatal_group_error(c)) {
    fatal(make_error_code(static_cast<kafka_errc>(c)), fatal_message(c, opts_.group_id));
    return;
  }
  if (unexpected_error(c, "SyncGroup")) return;
  transition(member_state::joining, "SyncGroup: unexpected error");
  backoff(now);
  pump(now);
}

void member::heartbeat_done(time_point now, const protocol::heartbeat_response& r) {
  if (in_flight_ != in_flight::heartbeat) return;  // stale
  in_flight_ = in_flight::none;
  ++stats_.heartbeats;
  stats_.heartbeat_rtt_max =
      std::max(stats_.heartbeat_rtt_max, std::chrono::duration_cast<ms>(now - last_heartbeat_sent_));
  stats_.heartbeat_hist.observe(std::chrono::duration<double>(now - last_heartbeat_sent_).count());
  stats_.last_heartbeat_response = now;
  ++stats_.version;
  const std::int16_t c = r.error_code;
  if (c == 0) {
    unexpected_in_a_row_.erase("Heartbeat");
    last_heartbeat_ok_ = now;
    pump(now);
    return;
  }
  if (c == code(kafka_errc::rebalance_in_progress)) {
    last_heartbeat_ok_ = now;  // the coordinator still knows us
    if (state_ == member_state::stable || state_ == member_state::completing ||
        state_ == member_state::preparing) {
      if (!rejoin_needed_) request_rejoin(RebalanceCause::group_rebalancing, "group is rebalancing");
    }
    pump(now);
    return;
  }
  if (c == code(kafka_errc::unknown_member_id) || c == code(kafka_errc::illegal_generation)) {
    membership_lost(now, "Heartbeat", c);
    return;
  }
  if (coordinator_error(now, c)) {
    heartbeat_after_backoff();
    pump(now);
    return;
  }
  if (is_fatal_group_error(c)) {
    fatal(make_error_code(static_cast<kafka_errc>(c)), fatal_message(c, opts_.group_id));
    return;
  }
  if (unexpected_error(c, "Heartbeat")) return;
  backoff(now);
  heartbeat_after_backoff();
  pump(now);
}

bool member::unexpected_error(std::int16_t c, const char* api) {
  // Java raises "Unexpected error in ... response" for a code it does not handle and rejoins on
  // the next poll(). Here a code the error table marks retriable (REQUEST_TIMED_OUT, ...) is
  // logged and retried after a backoff; any other is logged and retried too, but the tenth in a
  // row from the same API with no success in between is fatal, named, raised from poll(): never a
  // retry loop without end (issue 13, item 9). (Some brokers answer an out-of-turn SyncGroup with
  // INVALID_REQUEST; one rejoin fixes that.)
  const auto e = static_cast<kafka_errc>(c);
  auto& in_a_row = unexpected_in_a_row_[api];
  if (!is_retriable(e) && ++in_a_row >= max_unexpected_in_a_row) {
    fatal(make_error_code(e), "group '" + opts_.group_id + "': unexpected error in " + api +
                                  " response: " + kafka_error_name(c) + " (" + make_error_code(e).message() +
                                  "), " + std::to_string(in_a_row) + " times in a row");
    return true;
  }
  actions_.emplace_back(report_error{
      make_error_code(e),
      std::string("unexpected error in ") + api + " response: " + kafka_error_name(c) + "; retrying", false});
  return false;
}

void member::leave_group_done(time_point now, const protocol::leave_group_response& r) {
  if (in_flight_ != in_flight::leave) return;  // stale
  in_flight_ = in_flight::none;
  if (r.error_code != 0) {
    logger()->debug("group '{}': LeaveGroup answered {}", opts_.group_id, kafka_error_name(r.error_code));
  }
  if (state_ == member_state::leaving) finish_leave(now);
  pump(now);
}

void member::membership_lost(time_point now, const std::string& what, std::int16_t c) {
  if ((state_ != member_state::stable && state_ != member_state::completing &&
       state_ != member_state::preparing && state_ != member_state::assigning) ||
      generation_ < 0) {
    pump(now);
    return;  // stale answer for a generation we already left (a session timeout, ...)
  }
  rebalance_begins(now, RebalanceCause::session_timeout, what + ": " + kafka_error_name(c));
  generation_ = -1;
  removed_ = true;
  if (c == code(kafka_errc::unknown_member_id)) member_id_.clear();
  lose_partitions(now, kafka_error_name(c), then::join);
  pump(now);
}

void member::commit_failed(time_point now, std::int32_t generation, std::int16_t c) {
  if (generation < 0 || generation != generation_) {
    pump(now);
    return;  // a commit of an older generation (or outside the group): nothing to learn
  }
  if (c == code(kafka_errc::rebalance_in_progress)) {
    rebalance_in_progress_seen(now);
  } else if (c == code(kafka_errc::unknown_member_id) || c == code(kafka_errc::illegal_generation)) {
    membership_lost(now, "OffsetCommit", c);
  } else if (c == code(kafka_errc::fenced_instance_id)) {
    fatal(make_error_code(kafka_errc::fenced_instance_id), fatal_message(c, opts_.group_id));
  } else {
    pump(now);
  }
}

void member::rebalance_in_progress_seen(time_point now) {
  if (state_ == member_state::stable || state_ == member_state::completing) {
    request_rejoin(RebalanceCause::group_rebalancing, "group is rebalancing");
  }
  pump(now);
}

void member::metadata_changed(time_point now, std::string reason) {
  if (!is_leader()) return;
  if (state_ != member_state::stable && state_ != member_state::completing) return;
  request_rejoin(RebalanceCause::metadata_change, std::move(reason));
  pump(now);
}

// ---- internals --------------------------------------------------------------------------------

bool member::needs_coordinator() const noexcept {
  switch (state_) {
    case member_state::joining:
    case member_state::syncing:
    case member_state::assigning:
      return true;
    case member_state::stable:
    case member_state::completing:
    case member_state::preparing:
      return generation_ >= 0;
    case member_state::leaving:
      return !leave_sent_ && !member_id_.empty() && !pending_listener_;
    default:
      return false;
  }
}

void member::pump(time_point now) {
  // A backoff that is over is forgotten, so next_deadline() never reports a time in the past.
  if (backoff_until_ != time_point{} && now >= backoff_until_) backoff_until_ = {};
  if (state_ == member_state::unsubscribed || state_ == member_state::fatal ||
      state_ == member_state::closed || state_ == member_state::poll_timed_out) {
    return;
  }
  if (needs_coordinator() && coord_ != coord_state::known) {
    if (coord_ == coord_state::unknown && now >= backoff_until_) {
      coord_ = coord_state::looking;
      actions_.emplace_back(find_coordinator{});
    }
    return;
  }
  if (now < backoff_until_) return;
  switch (state_) {
    case member_state::joining:
      if (in_flight_ == in_flight::none) send_join(now);
      return;
    case member_state::stable:
      if (rejoin_needed_ && in_flight_ == in_flight::none && !pending_listener_) {
        start_rebalance(now, rejoin_reason_);
        return;
      }
      [[fallthrough]];
    case member_state::completing:
    case member_state::preparing:
    case member_state::assigning:
      // The leader heartbeats while its assignor runs too: the coordinator times the session of
      // a member that has joined from the JoinGroup answer on (Java heartbeats in
      // COMPLETING_REBALANCE), and a slow assignor must not cost the leader its membership.
      if (generation_ >= 0 && in_flight_ == in_flight::none &&
          now >= last_heartbeat_sent_ + opts_.heartbeat_interval) {
        send_heartbeat_now(now);
      }
      return;
    case member_state::leaving:
      if (leaving_heartbeats()) {
        // unsubscribe()/close() runs its revoke (and the commits in it) on the user thread: the
        // member stays alive meanwhile, so the final commit still finds its generation.
        if (in_flight_ == in_flight::none && now >= last_heartbeat_sent_ + opts_.heartbeat_interval) {
          send_heartbeat_now(now);
        }
        return;
      }
      if (!pending_listener_ && !leave_sent_ && in_flight_ == in_flight::none) {
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
    transition(member_state::preparing, "eager revoke before JoinGroup");
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
      transition(member_state::preparing, "revoke partitions of unsubscribed topics before JoinGroup");
      request_listener(listener_kind::revoked, unsubscribed, then::join);
      return;
    }
  }
  transition(member_state::joining, reason.c_str());
  pump(now);
}

void member::send_join(time_point now) {
  join_sent_ = now;
  protocol::join_group_request req;
  req.group_id = opts_.group_id;
  req.session_timeout_ms = static_cast<std::int32_t>(opts_.session_timeout.count());
  req.rebalance_timeout_ms = static_cast<std::int32_t>(opts_.max_poll_interval.count());
  req.member_id = member_id_;
  req.group_instance_id = opts_.group_instance_id;
  req.protocol_type = protocol_type;
  member_snapshot snap{topics_, owned_, generation_, opts_.rack};
  req.protocols = build_protocols_(snap);
  req.reason = rejoin_reason_.empty() ? std::optional<std::string>() : rejoin_reason_;
  // This JoinGroup carries the current subscription and answers every rejoin request made so far
  // (including the REBALANCE_IN_PROGRESS heartbeats of the rebalance it joins); a request made
  // while it is in flight still counts and is served once the member is stable again.
  rejoin_needed_ = false;
  in_flight_ = in_flight::join;
  actions_.emplace_back(send_join_group{std::move(req)});
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
  // A static member does not leave: its instance id keeps its partitions across a restart (KIP-345).
  if (member_id_.empty() || opts_.group_instance_id || !coordinator_) {
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
    transition(member_state::closed, "left the group");
  } else {
    transition(member_state::unsubscribed, "left the group");
  }
  actions_.emplace_back(left_group{});
  if (!closing_ && !topics_.empty()) {
    // subscribe() was called while the leave was under way: join again with the new topics.
    rejoin_reason_ = "subscribed";
    rebalance_begins(now, RebalanceCause::member_joined, "this member subscribed");
    transition(member_state::joining, "subscribed while leaving");
    pump(now);
  }
}

void member::supersede_pending_listener() {
  if (!pending_listener_) return;
  if (!pending_started_) {
    cancel_unstarted_listener();
    return;
  }
  // Already running on the user thread: it finishes as what it is. What it revokes (or loses) is
  // gone for the callback that follows, so no partition is both revoked and lost; what it assigns
  // stays owned, so the next callback takes it back. Its own listener_done is stale from here.
  if (pending_kind_ != listener_kind::assigned) set_owned(minus(owned_, pending_parts_));
  pending_listener_.reset();
  pending_parts_.clear();
  after_listener_ = then::nothing;
}

void member::cancel_unstarted_listener() {
  if (!pending_listener_ || pending_started_) return;
  actions_.emplace_back(cancel_listener{*pending_listener_});
  // Partitions the application was never told about are not its to lose.
  if (pending_kind_ == listener_kind::assigned) set_owned(minus(owned_, pending_parts_));
  pending_listener_.reset();
  pending_parts_.clear();
  after_listener_ = then::nothing;
}

void member::lose_partitions(time_point now, const std::string& why, then next) {
  // A revoke or assign callback still queued for the user thread is overtaken: the application
  // hears only that the partitions are lost (never commits partitions that may have a new owner,
  // never starts on partitions of a generation it is no longer in).
  supersede_pending_listener();
  if (!owned_.empty()) {
    logger()->warn("group '{}': partitions lost ({})", opts_.group_id, why);
    if (state_ != member_state::preparing) transition(member_state::preparing, why.c_str());
    request_listener(listener_kind::lost, owned_, next);
    return;
  }
  continue_after_listener(now, next);
}

void member::request_listener(listener_kind kind, const partition_set& parts, then next) {
  // A revoke still waiting for the user thread when the partitions are lost (the member was
  // removed while the application did not poll): the lost callback replaces it, so the
  // application never commits partitions that may already have a new owner.
  const std::uint64_t seq = next_seq_++;
  pending_listener_ = seq;
  pending_started_ = false;
  pending_kind_ = kind;
  pending_parts_ = parts;
  after_listener_ = next;
  if (!stats_.history.empty() && !stats_.history.back().end) {
    auto& e = stats_.history.back();
    auto& into = kind == listener_kind::revoked    ? e.revoked
                 : kind == listener_kind::assigned ? e.assigned
                                                   : e.lost;
    into.insert(parts.begin(), parts.end());
    ++stats_.version;
  }
  actions_.emplace_back(run_listener{kind, to_vector(parts), seq});
}

void member::continue_after_listener(time_point now, then next) {
  switch (next) {
    case then::nothing:
      return;
    case then::join:
    case then::rejoin_after_lost:
      if (state_ == member_state::leaving) return;
      transition(member_state::joining, "rejoining");
      return;
    case then::assign_added: {
      // Cooperative, after revoking owned-minus-assigned: take the new set, announce what was added.
      const partition_set added = minus(pending_assignment_, owned_);
      set_owned(pending_assignment_);
      request_listener(listener_kind::assigned, added, then::finish_assignment);
      return;
    }
    case then::finish_assignment:
      if (state_ == member_state::completing) {
        transition(member_state::stable, "assignment complete");
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
    request_listener(listener_kind::revoked, revoked, then::assign_added);
    return;
  }
  continue_after_listener(now, then::assign_added);
}

void member::set_owned(partition_set owned) {
  if (owned == owned_) return;
  owned_ = std::move(owned);
  actions_.emplace_back(assignment_changed{owned_});
}

void member::mark_coordinator_unknown(time_point, const char* why) {
  if (coord_ == coord_state::known) {
    logger()->info("group '{}': coordinator {} unusable ({}); rediscovering", opts_.group_id,
                   coordinator_.value_or(-1), why);
  }
  coord_ = coord_state::unknown;
  coordinator_.reset();
}

void member::backoff(time_point now) { backoff_until_ = now + retry_backoff_.next(); }

void member::heartbeat_after_backoff() {
  // A failed heartbeat is retried once the backoff ends, not a whole heartbeat.interval.ms later
  // (as the Java client's failHeartbeat): the session timer keeps running meanwhile.
  last_heartbeat_sent_ = backoff_until_ - opts_.heartbeat_interval;
}

void member::fatal(std::error_code ec, std::string message) {
  if (state_ == member_state::closed) return;  // a late answer after close
  logger()->error("group '{}': fatal: {}", opts_.group_id, message);
  if (state_ == member_state::leaving) {
    // Already leaving (unsubscribe/close): report it, but let the leave finish so close() returns.
    actions_.emplace_back(report_error{ec, std::move(message), true});
    return;
  }
  in_flight_ = in_flight::none;
  pending_listener_.reset();
  transition(member_state::fatal, message.c_str());
  actions_.emplace_back(report_error{ec, std::move(message), true});
}

void member::request_rejoin(RebalanceCause cause, std::string reason) {
  rejoin_needed_ = true;
  rejoin_cause_ = cause;
  rejoin_reason_ = std::move(reason);
}

void member::rebalance_begins(time_point now, RebalanceCause cause, const std::string& detail) {
  if (!stats_.history.empty() && !stats_.history.back().end) return;  // one already under way keeps its cause
  if (stats_.history.size() >= member_stats::history_max) stats_.history.pop_front();
  rebalance_entry e;
  e.cause = cause;
  e.detail = detail;
  e.start = now;
  stats_.history.push_back(std::move(e));
  ++stats_.version;
}

void member::rebalance_ends(time_point now, bool completed) {
  if (stats_.history.empty() || stats_.history.back().end) return;
  auto& e = stats_.history.back();
  e.end = now;
  e.completed = completed;
  e.generation = generation_;
  if (completed) {
    const auto took = std::chrono::duration_cast<ms>(now - e.start);
    ++stats_.rebalances;
    stats_.rebalance_latency_total += took;
    stats_.rebalance_latency_max = std::max(stats_.rebalance_latency_max, took);
    stats_.rebalance_hist.observe(std::chrono::duration<double>(now - e.start).count());
    stats_.completed_at.push_back(now);
    while (!stats_.completed_at.empty() && now - stats_.completed_at.front() > std::chrono::hours(1)) {
      stats_.completed_at.pop_front();
    }
  }
  ++stats_.version;
}

void member::rebalance_failed(time_point now) {
  ++stats_.failed_rebalances;
  stats_.failed_at.push_back(now);
  while (!stats_.failed_at.empty() && now - stats_.failed_at.front() > std::chrono::hours(1)) stats_.failed_at.pop_front();
  ++stats_.version;
}

void member::describe_rebalance(RebalanceCause cause, std::string detail) {
  if (stats_.history.empty() || stats_.history.back().end) return;
  auto& e = stats_.history.back();
  if (e.cause != RebalanceCause::group_rebalancing) return;  // this member's own cause is more precise
  e.cause = cause;
  e.detail = std::move(detail);
  ++stats_.version;
}

std::optional<time_point> member::next_deadline() const {
  std::optional<time_point> t;
  auto consider = [&](time_point x) {
    if (!t || x < *t) t = x;
  };
  const bool member_like = state_ != member_state::unsubscribed && state_ != member_state::poll_timed_out &&
                           state_ != member_state::fatal && state_ != member_state::closed &&
                           state_ != member_state::leaving;
  if (poll_timer_running()) {
    consider(poll_warned_ ? last_poll_ + opts_.max_poll_interval
                          : last_poll_ + opts_.max_poll_interval * 8 / 10);
  }
  if (backoff_until_ != time_point{} && member_like) consider(backoff_until_);
  const bool heartbeating = (state_ == member_state::stable || state_ == member_state::completing ||
                             state_ == member_state::preparing || state_ == member_state::assigning) &&
                            generation_ >= 0;
  if (leaving_heartbeats() && in_flight_ == in_flight::none && coord_ == coord_state::known) {
    consider(std::max(last_heartbeat_sent_ + opts_.heartbeat_interval, backoff_until_));
  }
  if (heartbeating) {
    // The next heartbeat is due only when none is in flight and the coordinator is known (else
    // its response or the lookup wakes the core), and not before a backoff ends.
    if (in_flight_ == in_flight::none && coord_ == coord_state::known) {
      consider(std::max(last_heartbeat_sent_ + opts_.heartbeat_interval, backoff_until_));
    }
    consider(last_heartbeat_ok_ + opts_.session_timeout);
  }
  return t;
}

}  // namespace kgroup::group
