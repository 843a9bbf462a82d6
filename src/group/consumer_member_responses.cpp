// The KIP-848 membership core (consumer_member.hpp): the driver's events (coordinator found or
// lost, heartbeat answers and failures, topic names) and what their errors mean.
#include "group/consumer_member.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/log.hpp"
#include "group/consumer_member_ops.hpp"
#include "group/member_reactions.hpp"
#include "group/poll_interval.hpp"
#include "kgroup/error.hpp"

namespace kgroup::group::kip848 {

// ---- driver events ----------------------------------------------------------------------------

void consumer_member::tick(time_point now) {
  if (check_poll_timeout(now)) {
    pump(now);
    return;
  }
  pump(now);
}

std::string unsupported_message(std::int32_t node) {
  return "group.protocol=consumer needs a broker with ConsumerGroupHeartbeat (KIP-848, Kafka 4.0+): the group "
         "coordinator (broker " +
         std::to_string(node) + ") does not offer it; use group.protocol=classic with this cluster";
}

std::vector<std::string> consumer_member::subscription() const {
  if (!regex_) return topics_;
  std::vector<std::string> matched;
  for (const auto& tp : owned()) {
    if (matched.empty() || matched.back() != tp.topic) matched.push_back(tp.topic);
  }
  return matched;
}

void consumer_member::coordinator_found(time_point now, std::int32_t node, std::int16_t heartbeat_version) {
  if (heartbeat_version < 0) {
    coordinator_unusable(now, make_error_code(client_errc::no_compatible_version), unsupported_message(node));
    return;
  }
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
  if (was == in_flight::abandoned) {
    pump(now);  // the leave or the rejoin was waiting for it
    return;
  }
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
  unexpected_cleared("ConsumerGroupHeartbeat");
  retry_backoff_.reset();
  if (r.member_id && !r.member_id->empty() && *r.member_id != member_id_) {
    // v0: the coordinator names the member in its first answer. v1: it echoes ours.
    logger()->info("group '{}': member id is '{}'", opts_.group_id, *r.member_id);
    member_id_ = *r.member_id;
  }
  epoch_ = r.member_epoch;
  if (epoch_ > 0) removed_ = false;  // a member again
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
  // Unexpected: the skeleton's one policy (logged and retried after a backoff; a code that is not
  // retriable becomes fatal the tenth time in a row).
  if (unexpected_error(now, c, "ConsumerGroupHeartbeat", r.error_message)) return;
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

}  // namespace kgroup::group::kip848
