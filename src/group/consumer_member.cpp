// The KIP-848 membership core (consumer_member.hpp). Pure, like member.cpp: no I/O, no clock.
#include "group/consumer_member.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "base/log.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group::kip848 {

namespace {

using s = consumer_member_state;

constexpr std::uint32_t bit(s x) {
  return 1u << static_cast<unsigned>(x);
}
template <class... S>
constexpr std::uint32_t any_of(S... x) {
  return (bit(x) | ...);
}
constexpr std::size_t state_count = static_cast<std::size_t>(s::closed) + 1;
constexpr std::size_t at(s x) {
  return static_cast<std::size_t>(x);
}

// The transition table (docs/DESIGN.md lists it): for each state, the states it may move to.
// Staying is always allowed; every state but closed may become fatal, and every state may close.
// consumer_member::transition() refuses anything else.
constexpr std::array<std::uint32_t, state_count> transitions = [] {
  std::array<std::uint32_t, state_count> t{};
  // Leaving (prepare_leaving with owned partitions, else leaving) and a poll timeout are open to
  // every state that is in the group or joining it.
  const auto out = any_of(s::prepare_leaving, s::leaving, s::poll_timed_out);
  t[at(s::unsubscribed)] = any_of(s::joining);
  t[at(s::joining)] = any_of(s::reconciling, s::stable, s::fenced, s::unsubscribed) | out;
  t[at(s::reconciling)] = any_of(s::acknowledging, s::stable, s::fenced) | out;
  t[at(s::acknowledging)] = any_of(s::reconciling, s::stable, s::fenced) | out;
  t[at(s::stable)] = any_of(s::reconciling, s::fenced) | out;
  t[at(s::fenced)] = any_of(s::joining, s::leaving, s::unsubscribed, s::poll_timed_out);
  t[at(s::prepare_leaving)] = any_of(s::leaving, s::unsubscribed);
  t[at(s::leaving)] = any_of(s::unsubscribed);
  t[at(s::poll_timed_out)] = any_of(s::fenced, s::joining, s::leaving, s::unsubscribed);
  t[at(s::fatal)] = any_of(s::leaving);  // close()/unsubscribe(): lost listener first
  t[at(s::closed)] = 0;
  for (std::size_t from = 0; from < state_count; ++from) {
    t[from] |= (1u << from) | bit(s::closed);
    if (static_cast<s>(from) != s::closed) t[from] |= bit(s::fatal);
  }
  return t;
}();

std::int16_t code_of(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

id_assignment minus(const id_assignment& a, const id_assignment& b) {
  id_assignment out;
  for (const auto& [id, parts] : a) {
    auto it = b.find(id);
    std::set<std::int32_t> left;
    for (auto p : parts) {
      if (it == b.end() || !it->second.contains(p)) left.insert(p);
    }
    if (!left.empty()) out.emplace(id, std::move(left));
  }
  return out;
}

id_assignment intersect(const id_assignment& a, const id_assignment& b) {
  return minus(a, minus(a, b));
}

id_assignment unite(id_assignment a, const id_assignment& b) {
  for (const auto& [id, parts] : b) a[id].insert(parts.begin(), parts.end());
  return a;
}

// Empty partition lists are not part of an assignment (so that equal sets compare equal).
id_assignment normalized(id_assignment a) {
  std::erase_if(a, [](const auto& e) { return e.second.empty(); });
  return a;
}

std::vector<protocol::consumer_group_heartbeat_request::topic_partitions_t> to_wire(const id_assignment& a) {
  std::vector<protocol::consumer_group_heartbeat_request::topic_partitions_t> out;
  for (const auto& [id, parts] : a) out.push_back({id, {parts.begin(), parts.end()}});
  return out;
}

bool is_fatal(std::int16_t c) {
  // The classic core's fatal class (which holds KIP-848's UNRELEASED_INSTANCE_ID,
  // UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION), plus what only this protocol makes fatal:
  // a refused topic (issue 16; Java reports it and carries on, see docs/DESIGN.md) and a request
  // the coordinator calls invalid (Java: fatal; retrying the same request cannot help).
  return protocol::reacts(c, protocol::reaction::group_fatal) ||
         c == code_of(kafka_errc::topic_authorization_failed) || c == code_of(kafka_errc::invalid_request);
}

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
  const auto f = at(from);
  return f < state_count && at(to) < state_count && (transitions[f] & bit(to)) != 0;
}

consumer_member::consumer_member(consumer_member_options opts)
    : opts_(std::move(opts)),
      names_backoff_(opts_.retry_backoff, opts_.retry_backoff_max),  // no jitter: deterministic tests
      retry_backoff_(opts_.retry_backoff, opts_.retry_backoff_max),
      interval_(opts_.heartbeat_interval) {}

void consumer_member::transition(consumer_member_state to, const std::string& reason) {
  if (to == state_) return;
  if (!transition_allowed(state_, to)) {
    // A bug in the core. Not applied: the member stops (fatal, raised from poll()) instead of
    // going on in a state the table does not know. Tests fail on it.
    ++invalid_transitions_;
    const std::string what = std::string("internal error: invalid membership transition ") +
                             to_string(state_) + " -> " + to_string(to) + " (" + reason + ")";
    logger()->error("group '{}': {}", opts_.group_id, what);
    if (state_ != s::closed && state_ != s::fatal) {
      in_flight_ = in_flight::none;
      listener_.drop();
      state_ = s::fatal;
      actions_.emplace_back(report_error{make_error_code(client_errc::illegal_state), what, true});
    }
    return;
  }
  logger()->debug("group '{}' member '{}' epoch {}: {} -> {} ({})", opts_.group_id, member_id_, epoch_,
                  to_string(state_), to_string(to), reason);
  state_ = to;
}

std::vector<action> consumer_member::take_actions() {
  std::vector<action> out;
  out.swap(actions_);
  return out;
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

group::standing consumer_member::standing() const {
  group::standing st;
  st.generation = epoch_;
  st.member_id = member_id_;
  st.instance_id = opts_.group_instance_id;
  st.coordinator = coord_.node();
  // Commits are fine while reconciling (the revoke listener commits): the epoch is what counts.
  st.stable = epoch_ > 0 && (state_ == s::stable || state_ == s::reconciling || state_ == s::acknowledging ||
                             state_ == s::prepare_leaving);
  st.poll_timed_out = state_ == s::poll_timed_out;
  st.fatal = state_ == s::fatal;
  st.removed = state_ == s::fenced;
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
  if (state_ == s::unsubscribed) {
    last_poll_ = now;
    poll_warned_ = false;
    begin_join(now, RebalanceCause::member_joined, "this member subscribed");
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

void consumer_member::subscribe_regex(time_point now, std::string regex) {
  if (state_ == s::fatal || state_ == s::closed) return;
  const bool changed = regex_ != regex;
  regex_ = std::move(regex);
  topics_.clear();
  if (state_ == s::unsubscribed) {
    last_poll_ = now;
    poll_warned_ = false;
    begin_join(now, RebalanceCause::member_joined, "this member subscribed (regex)");
    return;
  }
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

void consumer_member::close(time_point now) {
  if (state_ == s::closed) return;
  closing_ = true;
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
  last_poll_ = now;
  in_poll_ = true;
  poll_warned_ = false;
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

void consumer_member::poll_returned(time_point now) {
  in_poll_ = false;
  last_poll_ = now;
  poll_warned_ = false;
  pump(now);
}

void consumer_member::listener_started(time_point now, std::uint64_t seq) {
  if (listener_.start(seq)) {
    if (in_poll_) last_poll_ = now;
  }
}

void consumer_member::listener_done(time_point now, std::uint64_t seq) {
  const auto done = listener_.finish(seq);
  if (!done) return;  // stale (cancelled or superseded)
  if (in_poll_) last_poll_ = now;
  if (done->kind != listener_kind::assigned)
    set_owned(done->kind == listener_kind::lost ? decltype(owned_){} : minus(owned_, done->parts));
  const then next = done->after;
  continue_after_listener(now, next);
  pump(now);
}

// ---- driver events ----------------------------------------------------------------------------

void consumer_member::tick(time_point now) {
  if (check_poll_timeout(now)) {
    pump(now);
    return;
  }
  pump(now);
}

void consumer_member::coordinator_found(time_point now, std::int32_t node, std::int16_t heartbeat_version) {
  coord_.found(node);
  version_ = heartbeat_version;
  backoff_until_ = {};
  logger()->info("group '{}': coordinator is broker {} (ConsumerGroupHeartbeat v{})", opts_.group_id, node,
                 heartbeat_version);
  if (version_ >= 1 && member_id_.empty()) {
    // KIP-1082: from v1 on the member names itself, once, and keeps the id across rejoins.
    if (opts_.member_id.empty()) {
      fatal(
          now, make_error_code(client_errc::illegal_state),
          "internal error: ConsumerGroupHeartbeat v1 needs a client-generated member id and none was given");
      return;
    }
    member_id_ = opts_.member_id;
  }
  pump(now);
}

void consumer_member::coordinator_failed(time_point now, std::error_code ec) {
  coord_.forget();
  if (ec == make_error_code(kafka_errc::group_authorization_failed)) {
    fatal(now, ec, fatal_message(code_of(kafka_errc::group_authorization_failed), std::nullopt));
    return;
  }
  logger()->debug("group '{}': coordinator lookup failed: {}", opts_.group_id, ec.message());
  if (state_ == s::leaving && in_flight_ == in_flight::none && !listener_.pending()) {
    // No coordinator to leave through: the coordinator expires the member on its own.
    finish_leave(now);
    return;
  }
  backoff(now);
  pump(now);
}

void consumer_member::coordinator_unusable(time_point now, std::error_code ec, std::string message) {
  coord_.forget();
  if (state_ == s::leaving || state_ == s::prepare_leaving) {
    coordinator_failed(now, ec);
    return;
  }
  fatal(now, ec, std::move(message));
}

void consumer_member::request_failed(time_point now, std::error_code ec) {
  const in_flight was = in_flight_;
  if (was == in_flight::none) return;  // stale
  in_flight_ = in_flight::none;
  logger()->debug("group '{}': ConsumerGroupHeartbeat failed: {}", opts_.group_id, ec.message());
  if (was == in_flight::leave) {
    // The leave is best effort: the coordinator expires the member anyway.
    if (state_ == s::leaving) {
      finish_leave(now);
    } else {
      pump(now);
    }
    return;
  }
  // Retried after a backoff, with every field (the coordinator may not have seen the last one),
  // through a coordinator looked up again. The client never gives up on its own: the coordinator
  // fences a member it has not heard from for its session timeout, and the answer says so.
  coord_.forget();
  sent_ = {};
  backoff(now);
  pump(now);
}

void consumer_member::topic_names_resolved(time_point now,
                                           const std::vector<std::pair<topic_id, std::string>>& names) {
  bool news = false;
  for (const auto& [id, name] : names) {
    if (name.empty()) continue;
    auto [it, added] = names_.emplace(id, name);
    if (added) news = true;
    names_asked_.erase(id);
  }
  if (news) names_backoff_.reset();
  pump(now);
}

void consumer_member::heartbeat_done(time_point now, const protocol::consumer_group_heartbeat_response& r) {
  const in_flight was = in_flight_;
  if (was == in_flight::none) return;  // stale: nothing of ours is in flight
  in_flight_ = in_flight::none;
  stats_.heartbeat_answered(now, heartbeat_sent_);
  if (was == in_flight::leave) {
    if (r.error_code != 0) {
      logger()->debug("group '{}': leave heartbeat answered {}", opts_.group_id,
                      kafka_error_name(r.error_code));
    }
    if (state_ == s::leaving) {
      finish_leave(now);
    } else {
      pump(now);  // a poll timeout's leave: the rejoin may be waiting for it
    }
    return;
  }
  if (state_ == s::poll_timed_out || state_ == s::fenced || state_ == s::leaving || state_ == s::fatal ||
      state_ == s::closed || state_ == s::unsubscribed) {
    // An answer for a membership already given up on (its leave, lost listener or rejoin follows).
    if (state_ == s::leaving && r.error_code == 0) {
      // A join answered after unsubscribe(): leave with the id and epoch the coordinator gave.
      if (r.member_id && !r.member_id->empty()) member_id_ = *r.member_id;
      epoch_ = r.member_epoch;
    }
    pump(now);
    return;
  }
  if (r.error_code != 0) {
    heartbeat_error(now, r);
    return;
  }
  unexpected_in_a_row_.clear();
  retry_backoff_.reset();
  if (r.member_id && !r.member_id->empty() && *r.member_id != member_id_) {
    // v0: the coordinator names the member in its first answer. v1: it echoes ours.
    logger()->info("group '{}': member id is '{}'", opts_.group_id, *r.member_id);
    member_id_ = *r.member_id;
  }
  epoch_ = r.member_epoch;
  if (r.heartbeat_interval_ms > 0) interval_ = ms(r.heartbeat_interval_ms);
  next_heartbeat_at_ = now + interval_;
  if (r.assignment && state_ != s::prepare_leaving) {
    id_assignment target;
    for (const auto& tp : r.assignment->topic_partitions) {
      target[tp.topic_id].insert(tp.partitions.begin(), tp.partitions.end());
    }
    target_ = normalized(std::move(target));
    logger()->debug("group '{}': target assignment of epoch {}: {} topics", opts_.group_id, epoch_,
                    target_->size());
  }
  if (state_ == s::joining && epoch_ > 0 && target_) {
    if (*target_ == owned_) {
      transition(s::stable, "joined the group");
      reconciliation_ends(now, true);
    } else {
      transition(s::reconciling, "joined the group");
    }
  } else if (state_ == s::stable && target_ && *target_ != owned_) {
    reconciliation_begins(now, next_cause_.value_or(RebalanceCause::group_rebalancing), target_detail());
    transition(s::reconciling, "new target assignment");
  }
  pump(now);
}

std::string consumer_member::target_detail() const {
  // "new target assignment of epoch 7: 4 partitions, 1 to revoke, 2 to add"
  std::size_t total = 0, revoke = 0, add = 0;
  const auto count_missing = [](const id_assignment& from, const id_assignment& in) {
    std::size_t n = 0;
    for (const auto& [id, parts] : from) {
      const auto it = in.find(id);
      for (const auto p : parts) n += it == in.end() || it->second.count(p) == 0 ? 1 : 0;
    }
    return n;
  };
  if (target_) {
    for (const auto& [id, parts] : *target_) total += parts.size();
    revoke = count_missing(owned_, *target_);
    add = count_missing(*target_, owned_);
  }
  return fmt::format("new target assignment of epoch {}: {} partition{}, {} to revoke, {} to add", epoch_, total,
                     total == 1 ? "" : "s", revoke, add);
}

void consumer_member::heartbeat_error(time_point now, const protocol::consumer_group_heartbeat_response& r) {
  const std::int16_t c = r.error_code;
  // After any error the next heartbeat carries every field (Java resets its SentFields).
  sent_ = {};
  if (protocol::reacts(c, protocol::reaction::fenced)) {
    fence(now, kafka_error_name(c));
    pump(now);
    return;
  }
  if (protocol::reacts(c, protocol::reaction::coordinator_moved)) {
    logger()->info("group '{}': coordinator {} answered {}; rediscovering", opts_.group_id,
                   coord_.node().value_or(-1), kafka_error_name(c));
    coord_.forget();
    next_heartbeat_at_ = now;  // the new coordinator hears from the member as soon as it is found (as Java)
    pump(now);                 // looked up at once; a failed lookup backs off
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
  // Unexpected: logged and retried after a backoff; a code that is not retriable becomes fatal
  // the tenth time in a row (as the classic core: never a retry loop without end).
  const auto e = static_cast<kafka_errc>(c);
  auto& in_a_row = unexpected_in_a_row_[c];
  if (!is_retriable(e) && ++in_a_row >= max_unexpected_in_a_row) {
    fatal(now, make_error_code(e),
          "group '" + opts_.group_id + "': unexpected error in ConsumerGroupHeartbeat response: " +
              kafka_error_name(c) + " (" + r.error_message.value_or(make_error_code(e).message()) + "), " +
              std::to_string(in_a_row) + " times in a row");
    return;
  }
  actions_.emplace_back(
      report_error{make_error_code(e),
                   "unexpected error in ConsumerGroupHeartbeat response: " + kafka_error_name(c) +
                       (r.error_message ? " (" + *r.error_message + ")" : "") + "; retrying",
                   false});
  backoff(now);
  pump(now);
}

std::string consumer_member::fatal_message(std::int16_t c, const std::optional<std::string>& broker) const {
  const std::string g = "'" + opts_.group_id + "'";
  std::string m;
  switch (static_cast<kafka_errc>(c)) {
    case kafka_errc::unreleased_instance_id:
      m = "group.instance.id '" + opts_.group_instance_id.value_or("") +
          "' is still held by another member of group " + g +
          " (its previous owner has not left it, or another consumer uses the same id): use a unique "
          "group.instance.id per process";
      break;
    case kafka_errc::fenced_instance_id:
      m = "another consumer with the same group.instance.id joined group " + g +
          "; this one is fenced (use a unique group.instance.id per process)";
      break;
    case kafka_errc::group_max_size_reached:
      m = "group " + g + " has reached the broker's group.consumer.max.size";
      break;
    case kafka_errc::unsupported_assignor:
      m = "the coordinator of group " + g + " has no server-side assignor '" +
          opts_.remote_assignor.value_or("") +
          "' (group.remote.assignor must name one of the broker's group.consumer.assignors, e.g. uniform or "
          "range)";
      break;
    case kafka_errc::invalid_regular_expression:
      m = "the coordinator of group " + g + " refused the subscription regex '" + regex_.value_or("") +
          "' (the broker evaluates it with RE2/J syntax)";
      break;
    case kafka_errc::group_authorization_failed:
      m = "not authorized to access group " + g;
      break;
    case kafka_errc::topic_authorization_failed:
      m = "not authorized to read (describe) topics subscribed by group " + g;
      break;
    case kafka_errc::unsupported_version:
      m = "the coordinator of group " + g +
          " does not support the consumer group protocol (group.protocol=consumer needs a broker with "
          "KIP-848 "
          "enabled, Kafka 4.0+); use group.protocol=classic";
      break;
    case kafka_errc::invalid_request:
      m = "the coordinator of group " + g + " refused the ConsumerGroupHeartbeat as invalid";
      break;
    default:
      m = group::fatal_message(c, opts_.group_id);
      break;
  }
  if (broker && !broker->empty()) m += " (broker: " + *broker + ")";
  return m;
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
  return opts_.group_instance_id ? leave_epoch_static : leave_epoch_dynamic;
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
  if (state_ == s::leaving) return in_flight_ == in_flight::none && must_leave() && !listener_.pending();
  return heartbeating();
}

bool consumer_member::heartbeat_due(time_point now) const noexcept {
  // Joining before the first answer, acknowledging and a changed subscription go at once (a
  // joining member the coordinator answered without an assignment waits for the interval).
  if ((state_ == s::joining && epoch_ == join_epoch) || state_ == s::acknowledging || heartbeat_now_)
    return true;
  return now >= next_heartbeat_at_;
}

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
    if (must_leave()) {
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
  // What is owned, less what an assign callback still running has not taken yet: an assignment is
  // acknowledged once on_partitions_assigned is done (as Java); a finished revoke is reported at once.
  const id_assignment reported =
      listener_.pending_is(listener_kind::assigned) ? minus(owned_, *listener_.parts()) : owned_;
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
  std::vector<topic_id> unknown;
  (void)resolved(*target_, &unknown);
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

void consumer_member::request_listener(listener_kind kind, const id_assignment& parts, then next) {
  const std::uint64_t seq = next_seq_++;
  listener_.request(seq, kind, parts, next);
  const partition_set named = names_of(parts);
  stats_.listener_called(kind, named);
  actions_.emplace_back(run_listener{kind, {named.begin(), named.end()}, seq});
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

void consumer_member::supersede_pending_listener() { release_listener(false); }

void consumer_member::cancel_unstarted_listener() { release_listener(true); }

void consumer_member::release_listener(bool unstarted_only) {
  const auto cancelled =
      listener_.release(unstarted_only, [&](const auto& parts) { set_owned(minus(owned_, parts)); });
  if (cancelled) actions_.emplace_back(cancel_listener{*cancelled});
}

void consumer_member::set_owned(id_assignment owned) {
  owned = normalized(std::move(owned));
  if (owned == owned_) return;
  owned_ = std::move(owned);
  actions_.emplace_back(assignment_changed{names_of(owned_)});
}

bool consumer_member::poll_timer_running() const noexcept {
  const bool member_like = state_ == s::joining || state_ == s::reconciling || state_ == s::acknowledging ||
                           state_ == s::stable || state_ == s::fenced;
  const bool in_callback = listener_.running();
  return member_like && (!in_poll_ || in_callback);
}

bool consumer_member::check_poll_timeout(time_point now) {
  if (!poll_timer_running()) return false;
  const auto measured =
      poll_interval_exceeded(now, last_poll_, opts_.max_poll_interval, poll_warned_, opts_.group_id);
  if (!measured) return false;
  // A callback the stalled application has not started belongs to a membership that is gone.
  supersede_pending_listener();
  target_.reset();
  step_target_.clear();
  heartbeat_now_ = false;
  leave_pending_ = must_leave();
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
  backoff_until_ = now + retry_backoff_.next();
  // A heartbeat that failed goes again when the backoff ends, not a whole interval later.
  next_heartbeat_at_ = backoff_until_;
}

std::optional<time_point> consumer_member::next_deadline() const {
  std::optional<time_point> t;
  auto consider = [&](time_point x) {
    if (!t || x < *t) t = x;
  };
  if (poll_timer_running()) {
    consider(poll_warned_ ? last_poll_ + opts_.max_poll_interval
                          : last_poll_ + opts_.max_poll_interval * 8 / 10);
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
    std::vector<topic_id> unknown;
    (void)resolved(*target_, &unknown);
    if (!unknown.empty()) consider(names_retry_at_);
  }
  return t;
}

}  // namespace kgroup::group::kip848
