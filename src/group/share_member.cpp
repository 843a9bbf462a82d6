// The share-group membership core (share_member.hpp). Pure, like the other cores: no I/O, no
// clock. One file: the states and their table, the user's and the driver's events, the heartbeat
// loop (pump) and what the coordinator's errors mean.
#include "group/share_member.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::group::share {

namespace {

using s = share_member_state;
using table = transition_table<share_member_state>;
constexpr std::size_t at(s x) {
  return table::at(x);
}

// The transition table (docs/DESIGN.md lists it): for each state, the states it may move to.
// Staying is always allowed; every state but closed may become fatal, and every state may close.
// membership_skeleton::transition() refuses anything else.
constexpr table::rows transitions = [] {
  table::rows t{};
  const auto out = states_of(s::leaving, s::poll_timed_out, s::fenced);
  t[at(s::unsubscribed)] = states_of(s::joining);
  t[at(s::joining)] = states_of(s::reconciling, s::stable) | out;
  t[at(s::reconciling)] = states_of(s::stable) | out;
  t[at(s::stable)] = states_of(s::reconciling) | out;
  t[at(s::fenced)] = states_of(s::joining, s::leaving, s::poll_timed_out);
  t[at(s::leaving)] = states_of(s::unsubscribed);
  t[at(s::poll_timed_out)] = states_of(s::joining, s::leaving);
  t[at(s::fatal)] = 0;
  t[at(s::closed)] = 0;
  return table::with_common_rules(t);
}();

id_assignment minus(const id_assignment& a, const id_assignment& b) {
  id_assignment out;
  for (const auto& [id, parts] : a) {
    const auto it = b.find(id);
    std::set<std::int32_t> left;
    for (auto p : parts) {
      if (it == b.end() || !it->second.contains(p)) left.insert(p);
    }
    if (!left.empty()) out.emplace(id, std::move(left));
  }
  return out;
}

bool is_fatal(std::int16_t c) {
  // KIP-932's fatal answers (the schema's GROUP_MAX_SIZE_REACHED, GROUP_AUTHORIZATION_FAILED,
  // INVALID_REQUEST; TOPIC_AUTHORIZATION_FAILED and UNSUPPORTED_VERSION as Java's share consumer),
  // plus the classic fatal class (INVALID_GROUP_ID among them) and GROUP_ID_NOT_FOUND, the
  // coordinator's answer when the id belongs to a group of another type: retrying cannot help.
  return protocol::reacts(c, protocol::reaction::group_fatal) ||
         c == code_of(kafka_errc::topic_authorization_failed) || c == code_of(kafka_errc::invalid_request) ||
         c == code_of(kafka_errc::group_id_not_found);
}

}  // namespace

const char* to_string(share_member_state x) noexcept {
  switch (x) {
    case s::unsubscribed:
      return "unsubscribed";
    case s::joining:
      return "joining";
    case s::reconciling:
      return "reconciling";
    case s::stable:
      return "stable";
    case s::fenced:
      return "fenced";
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

bool transition_allowed(share_member_state from, share_member_state to) noexcept {
  return table::allowed(transitions, from, to);
}

std::string unsupported_message(const std::string& group_id, std::int32_t node) {
  return "share group '" + group_id +
         "': the broker does not support share groups (KIP-932, Kafka 4.1+): the group coordinator (broker " +
         std::to_string(node) +
         ") does not offer ShareGroupHeartbeat v1 (Kafka 4.1 needs share.version=1; 4.2+ has it by default)";
}

share_member::share_member(share_member_options opts)
    : share_member_skeleton(opts.retry_backoff, opts.retry_backoff_max),
      opts_(std::move(opts)),
      member_id_(opts_.member_id),
      names_(opts_.retry_backoff, opts_.retry_backoff_max),
      interval_(opts_.heartbeat_interval) {}

std::string share_member::who() const {
  return "share member '" + member_id_ + "' epoch " + std::to_string(epoch_);
}

share_assignment share_member::owned_partitions() const {
  share_assignment out;
  for (const auto& [id, parts] : owned_) {
    const auto* name = names_.find(id);
    if (!name) continue;  // owned_ holds named ids only
    for (auto p : parts) out.emplace(TopicPartition{*name, p}, id);
  }
  return out;
}

// ---- user events ------------------------------------------------------------------------------

void share_member::subscribe(time_point now, std::vector<std::string> topics) {
  if (state_ == s::fatal || state_ == s::closed) return;
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
  if (topics.empty()) {
    unsubscribe(now);  // as Java: subscribing to nothing is unsubscribing
    return;
  }
  if (member_id_.empty()) {
    fatal(now, make_error_code(client_errc::illegal_state),
          "internal error: a share group member needs a client-generated member id and none was given");
    return;
  }
  const bool changed = topics != topics_;
  topics_ = std::move(topics);
  if (state_ == s::unsubscribed) {
    poll_.restart(now);
    begin_join(now, RebalanceCause::member_joined, "this member subscribed");
    return;
  }
  // A member tells the coordinator at once (Java waits for the interval). While leaving, the
  // join follows the leave; after a poll timeout, the next poll() rejoins with the new list.
  if (changed && heartbeating()) heartbeat_now_ = true;
  pump(now);
}

void share_member::unsubscribe(time_point now) {
  topics_.clear();
  heartbeat_now_ = false;
  switch (state_) {
    case s::unsubscribed:
    case s::closed:
    case s::leaving:
      return;
    case s::fatal:
      // Nothing to leave (the coordinator refused us, or no longer can be reached as one); the
      // waiting user thread still hears that the call is done.
      actions_.emplace_back(left_group{});
      return;
    default:
      break;
  }
  // No revoke step: what is owned is dropped at once (the fetcher stops), then the leave.
  target_.reset();
  set_owned(now, {});
  stats_.end(now, false, epoch_);
  transition(s::leaving, closing_ ? "close" : "unsubscribe");
  pump(now);
}

void share_member::close(time_point now) {
  if (state_ == s::closed) return;
  closing_ = true;
  if (state_ == s::unsubscribed || state_ == s::fatal) {
    set_owned(now, {});
    transition(s::closed, state_ == s::fatal ? "close after a fatal error" : "close");
    actions_.emplace_back(left_group{});
    return;
  }
  unsubscribe(now);
}

void share_member::poll_called(time_point now) {
  poll_.called(now);
  if (state_ == s::poll_timed_out)
    begin_join(now, RebalanceCause::poll_timeout, "poll() after a poll timeout");
  pump(now);
}

// ---- driver events ----------------------------------------------------------------------------

void share_member::tick(time_point now) {
  (void)check_poll_timeout(now);
  pump(now);
}

void share_member::coordinator_found(time_point now, std::int32_t node, std::int16_t heartbeat_version) {
  if (heartbeat_version < 0) {
    coord_.forget();
    if (state_ == s::leaving) {
      coordinator_failed(now, make_error_code(client_errc::no_compatible_version));
      return;
    }
    fatal(now, make_error_code(client_errc::no_compatible_version),
          unsupported_message(opts_.group_id, node));
    return;
  }
  coord_.found(node);
  version_ = heartbeat_version;
  backoff_until_ = {};
  logger()->info("share group '{}': coordinator is broker {} (ShareGroupHeartbeat v{})", opts_.group_id, node,
                 heartbeat_version);
  pump(now);
}

void share_member::coordinator_failed(time_point now, std::error_code ec) {
  coord_.forget();
  if (ec == make_error_code(kafka_errc::group_authorization_failed)) {
    fatal(now, ec, fatal_message(code_of(kafka_errc::group_authorization_failed), std::nullopt));
    return;
  }
  logger()->debug("share group '{}': coordinator lookup failed: {}", opts_.group_id, ec.message());
  if (state_ == s::leaving && in_flight_ == in_flight::none) {
    // No coordinator to leave through: it expires the member on its own.
    finish_leave(now);
    return;
  }
  backoff(now);
  pump(now);
}

void share_member::request_failed(time_point now, std::error_code ec) {
  const in_flight was = in_flight_;
  if (was == in_flight::none) return;  // stale
  in_flight_ = in_flight::none;
  logger()->debug("share group '{}': ShareGroupHeartbeat failed: {}", opts_.group_id, ec.message());
  if (was == in_flight::leave) {
    // Best effort: the coordinator expires the member anyway.
    if (state_ == s::leaving) {
      finish_leave(now);
    } else {
      pump(now);
    }
    return;
  }
  // Retried after a backoff, every field again, through a coordinator looked up again. The client
  // never ends a membership for silence: the coordinator fences a member it has not heard from for
  // its session timeout, and its answer says so.
  coord_.forget();
  sent_ = {};
  backoff(now);
  pump(now);
}

void share_member::topic_names_resolved(time_point now,
                                        const std::vector<std::pair<topic_id, std::string>>& names) {
  names_.learn(names);
  if (target_ && (state_ == s::reconciling || state_ == s::stable)) apply_target(now);
  pump(now);
}

void share_member::heartbeat_done(time_point now, const protocol::share_group_heartbeat_response& r) {
  const in_flight was = in_flight_;
  if (was == in_flight::none) return;  // stale: nothing of ours is in flight
  in_flight_ = in_flight::none;
  stats_.heartbeat_answered(now, heartbeat_sent_);
  if (was == in_flight::abandoned) {
    pump(now);  // the leave or the rejoin was waiting for it
    return;
  }
  if (was == in_flight::leave) {
    if (r.error_code != 0) {
      logger()->debug("share group '{}': leave heartbeat answered {}", opts_.group_id,
                      kafka_error_name(r.error_code));
    }
    if (state_ == s::leaving) {
      finish_leave(now);
    } else {
      pump(now);  // a poll timeout's leave: the rejoin may be waiting for it
    }
    return;
  }
  if (!heartbeating()) {
    // An answer for a membership already given up on (its leave or rejoin follows). A fenced
    // member needs no leave.
    if (state_ == s::leaving && protocol::reacts(r.error_code, protocol::reaction::fenced)) known_ = false;
    pump(now);
    return;
  }
  if (r.error_code != 0) {
    heartbeat_error(now, r);
    return;
  }
  unexpected_cleared("ShareGroupHeartbeat");
  retry_backoff_.reset();
  if (r.member_id && !r.member_id->empty() && *r.member_id != member_id_) {
    // The coordinator echoes the client's id. The id is the client's for its life (ShareFetch
    // carries it too, read from other threads): another one is logged, not taken.
    logger()->warn("share group '{}': coordinator answered with member id '{}'; keeping this client's '{}'",
                   opts_.group_id, *r.member_id, member_id_);
  }
  epoch_ = r.member_epoch;
  if (epoch_ > 0) removed_ = false;
  if (r.heartbeat_interval_ms > 0) interval_ = ms(r.heartbeat_interval_ms);
  next_heartbeat_at_ = now + interval_;
  if (r.assignment) {
    id_assignment target;
    for (const auto& tp : r.assignment->topic_partitions) {
      target[tp.topic_id].insert(tp.partitions.begin(), tp.partitions.end());
    }
    target_ = normalized_assignment(std::move(target));
    logger()->debug("share group '{}': assignment of epoch {}: {} topics", opts_.group_id, epoch_,
                    target_->size());
  }
  // A joining member waits for its first assignment (possibly empty) to be a member proper; a
  // null assignment is "unchanged".
  if (r.assignment && epoch_ > 0) apply_target(now);
  pump(now);
}

void share_member::heartbeat_error(time_point now, const protocol::share_group_heartbeat_response& r) {
  const std::int16_t c = r.error_code;
  sent_ = {};  // after any error the next heartbeat carries every field (Java resets its SentFields)
  if (protocol::reacts(c, protocol::reaction::fenced)) {
    fence(now, kafka_error_name(c));
    pump(now);
    return;
  }
  if (protocol::reacts(c, protocol::reaction::coordinator_moved)) {
    forget_coordinator(kafka_error_name(c));
    next_heartbeat_at_ = now;  // the new coordinator hears from the member as soon as it is found
    pump(now);
    return;
  }
  if (protocol::reacts(c, protocol::reaction::coordinator_busy)) {
    backoff(now);
    pump(now);
    return;
  }
  if (is_fatal(c)) {
    fatal(now, make_error_code(static_cast<kafka_errc>(c)), fatal_message(c, r.error_message));
    return;
  }
  // The skeleton's one policy: logged and retried after a backoff; a code that is not retriable
  // becomes fatal the tenth time in a row.
  if (unexpected_error(now, c, "ShareGroupHeartbeat", r.error_message)) return;
  backoff(now);
  pump(now);
}

std::string share_member::fatal_message(std::int16_t c, const std::optional<std::string>& broker) const {
  const std::string g = "share group '" + opts_.group_id + "'";
  std::string m;
  switch (static_cast<kafka_errc>(c)) {
    case kafka_errc::group_max_size_reached:
      m = g + " is full: it has reached the broker's group.share.max.size members";
      break;
    case kafka_errc::group_authorization_failed:
      m = "not authorized to access " + g + " (the principal needs READ on the group)";
      break;
    case kafka_errc::topic_authorization_failed:
      m = "not authorized to read the topics subscribed by " + g + " (the principal needs READ on them)";
      break;
    case kafka_errc::unsupported_version:
      m = g +
          ": the broker does not support share groups (KIP-932, Kafka 4.1+): the coordinator refused "
          "ShareGroupHeartbeat as an unsupported version";
      break;
    case kafka_errc::invalid_request:
      m = "the coordinator of " + g + " refused the ShareGroupHeartbeat as invalid";
      break;
    case kafka_errc::group_id_not_found:
      m = "the coordinator has no " + g +
          ": the group id is taken by a group of another type (a consumer or classic group); use another "
          "group.id";
      break;
    default:
      m = group::fatal_message(c, opts_.group_id);
      break;
  }
  if (broker && !broker->empty()) m += " (broker: " + *broker + ")";
  return m;
}

// ---- the heartbeat loop -----------------------------------------------------------------------

bool share_member::heartbeating() const noexcept {
  return state_ == s::joining || state_ == s::reconciling || state_ == s::stable;
}

bool share_member::needs_coordinator() const noexcept {
  if (leave_pending_) return true;
  if (state_ == s::leaving) return in_flight_ == in_flight::none && known_;
  return heartbeating();
}

bool share_member::heartbeat_due(time_point now) const noexcept {
  // The join goes at once (a member the coordinator answered without an assignment waits for the
  // interval), and so does a changed subscription.
  if ((state_ == s::joining && epoch_ == join_epoch) || heartbeat_now_) return true;
  return now >= next_heartbeat_at_;
}

bool share_member::poll_interval_applies() const noexcept {
  return heartbeating() || state_ == s::fenced;
}

void share_member::pump(time_point now) {
  if (backoff_until_ != time_point{} && now >= backoff_until_) backoff_until_ = {};
  if (state_ == s::unsubscribed || state_ == s::fatal || state_ == s::closed) return;
  if (state_ == s::reconciling && target_) {
    if (auto ask = names_.to_ask(now, *target_)) actions_.emplace_back(need_topic_names{std::move(*ask)});
  }
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
    if (known_) {
      send_leave(now);
    } else {
      finish_leave(now);
    }
    return;
  }
  if (heartbeating() && heartbeat_due(now)) send_heartbeat(now);
}

void share_member::send_heartbeat(time_point now) {
  protocol::share_group_heartbeat_request req;
  req.group_id = opts_.group_id;
  req.member_id = member_id_;
  req.member_epoch = epoch_;
  // Every field when joining or after an error; afterwards null for what did not change (the
  // schema's "null if it didn't change since the last heartbeat").
  const bool full = epoch_ == join_epoch || !sent_.topics;
  if (opts_.rack && (full || sent_.rack != opts_.rack)) {
    req.rack_id = opts_.rack;
    sent_.rack = opts_.rack;
  }
  if (full || sent_.topics != topics_) {
    req.subscribed_topic_names = topics_;
    sent_.topics = topics_;
  }
  if (epoch_ == join_epoch) known_ = true;
  heartbeat_now_ = false;
  in_flight_ = in_flight::heartbeat;
  heartbeat_sent_ = now;
  next_heartbeat_at_ = now + interval_;
  actions_.emplace_back(send_share_group_heartbeat{std::move(req), full, false});
}

void share_member::send_leave(time_point now) {
  protocol::share_group_heartbeat_request req;
  req.group_id = opts_.group_id;
  req.member_id = member_id_;
  req.member_epoch = leave_epoch;
  leave_pending_ = false;
  known_ = false;
  in_flight_ = in_flight::leave;
  heartbeat_sent_ = now;
  sent_ = {};
  // While leaving the epoch says so; a poll timeout's leave leaves the member out of the group and
  // a rejoin starts from 0.
  epoch_ = state_ == s::leaving ? leave_epoch : join_epoch;
  logger()->info("share group '{}': leaving with epoch {}", opts_.group_id, leave_epoch);
  actions_.emplace_back(send_share_group_heartbeat{std::move(req), false, true});
}

void share_member::begin_join(time_point now, RebalanceCause cause, const std::string& why) {
  stats_.begin(now, cause, why);
  epoch_ = join_epoch;
  target_.reset();
  sent_ = {};
  heartbeat_now_ = false;
  transition(s::joining, why);
  pump(now);
}

void share_member::apply_target(time_point now) {
  std::vector<topic_id> unknown;
  id_assignment named = names_.resolved(*target_, &unknown);
  if (!stats_.open_entry() && named != owned_) {
    stats_.begin(now, RebalanceCause::group_rebalancing, fmt::format("new assignment of epoch {}", epoch_));
  }
  set_owned(now, std::move(named));
  if (unknown.empty()) {
    transition(s::stable, state_ == s::joining ? "joined the group" : "assignment applied");
    stats_.end(now, true, epoch_);
  } else {
    transition(s::reconciling, fmt::format("{} topic id{} of the assignment not known by name yet",
                                           unknown.size(), unknown.size() == 1 ? "" : "s"));
  }
}

void share_member::set_owned(time_point now, id_assignment owned, bool rejoining) {
  (void)now;
  owned = normalized_assignment(std::move(owned));
  if (owned == owned_) return;
  // The history shows what moved, in the shape of the other cores' listener calls.
  stats_.listener_called(listener_kind::revoked, names_.named(minus(owned_, owned)));
  stats_.listener_called(listener_kind::assigned, names_.named(minus(owned, owned_)));
  owned_ = std::move(owned);
  actions_.emplace_back(share_assignment_changed{owned_partitions(), rejoining});
}

void share_member::fence(time_point now, const std::string& why) {
  logger()->warn("share group '{}': member '{}' fenced at epoch {} ({}); rejoining with epoch 0",
                 opts_.group_id, member_id_, epoch_, why);
  const bool refused_join = epoch_ == join_epoch;
  if (stats_.open_entry()) stats_.failed(now);
  stats_.end(now, false, epoch_);
  stats_.begin(now, RebalanceCause::session_timeout, "fenced: " + why);
  epoch_ = join_epoch;
  known_ = false;
  target_.reset();
  set_owned(now, {}, /*rejoining=*/true);
  if (!refused_join) removed_ = true;
  transition(s::fenced, why);
  // Refused while joining: again after a backoff, not in a tight loop. Otherwise at once.
  if (refused_join) backoff(now);
  begin_join(now, RebalanceCause::session_timeout, "rejoining after " + why);
}

void share_member::finish_leave(time_point now) {
  if (state_ == s::closed) return;
  stats_.end(now, false, epoch_);
  removed_ = false;
  epoch_ = join_epoch;
  known_ = false;
  leave_pending_ = false;
  target_.reset();
  sent_ = {};
  set_owned(now, {});
  transition(closing_ ? s::closed : s::unsubscribed, "left the group");
  actions_.emplace_back(left_group{});
  if (!closing_ && !topics_.empty()) {
    // subscribe() was called while the leave was under way: join again.
    poll_.restart(now);
    begin_join(now, RebalanceCause::member_joined, "this member subscribed");
  }
}

void share_member::fatal(time_point now, std::error_code ec, std::string message) {
  if (state_ == s::closed || state_ == s::fatal) return;
  if (stats_.open_entry()) stats_.failed(now);
  stats_.end(now, false, epoch_);
  logger()->error("share group '{}': fatal: {}", opts_.group_id, message);
  if (state_ == s::leaving) {
    // Leaving anyway: reported, and the leave ends here so that close() returns.
    actions_.emplace_back(report_error{ec, std::move(message), true});
    in_flight_ = in_flight::none;
    known_ = false;
    finish_leave(now);
    return;
  }
  in_flight_ = in_flight::none;
  leave_pending_ = false;
  heartbeat_now_ = false;
  target_.reset();
  set_owned(now, {});  // the fetcher stops: this membership cannot go on
  transition(s::fatal, message);
  actions_.emplace_back(report_error{ec, std::move(message), true});
}

bool share_member::check_poll_timeout(time_point now) {
  const auto measured = poll_interval_exceeded(now, opts_.max_poll_interval);
  if (!measured) return false;
  // Java's share consumer: the member leaves the group (epoch -1) and rejoins on its next poll().
  heartbeat_now_ = false;
  leave_pending_ = known_;
  // Its answer may come after poll() has begun the rejoin: it must not count for the new membership.
  if (in_flight_ == in_flight::heartbeat) in_flight_ = in_flight::abandoned;
  epoch_ = join_epoch;
  target_.reset();
  stats_.end(now, false, epoch_);
  stats_.begin(now, RebalanceCause::poll_timeout, poll_timeout_detail(*measured, opts_.max_poll_interval));
  set_owned(now, {});
  transition(s::poll_timed_out, "max.poll.interval.ms exceeded");
  actions_.emplace_back(poll_timeout_error());
  return true;
}

void share_member::backoff(time_point now) {
  share_member_skeleton::backoff(now);
  // A heartbeat that failed goes again when the backoff ends, not a whole interval later.
  next_heartbeat_at_ = backoff_until_;
}

std::optional<time_point> share_member::next_deadline() const {
  std::optional<time_point> t;
  auto consider = [&](time_point x) {
    if (!t || x < *t) t = x;
  };
  if (poll_timer_running()) consider(poll_.next_check(opts_.max_poll_interval));
  const bool active = state_ != s::unsubscribed && state_ != s::fatal && state_ != s::closed;
  if (!active) return t;
  if (backoff_until_ != time_point{}) consider(backoff_until_);
  if (in_flight_ == in_flight::none && coord_.known() && heartbeating()) {
    // A heartbeat due at once that is still unsent waits only for a backoff (pump() sent it
    // otherwise), so the deadline is never in the past.
    if (!heartbeat_due(time_point{})) consider(std::max(next_heartbeat_at_, backoff_until_));
  }
  if (state_ == s::reconciling && target_) {
    if (auto r = names_.retry_at(*target_)) consider(*r);
  }
  return t;
}

}  // namespace kgroup::group::share
