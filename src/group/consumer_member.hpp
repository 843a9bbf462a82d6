// The KIP-848 membership core (group.protocol=consumer): the ConsumerGroupHeartbeat protocol as
// a deterministic state machine with no I/O, no threads and no clock reads, beside the classic
// core (member.hpp). Events go in (tick, heartbeat answers, topic names, listener completions,
// poll calls); actions come out (send a heartbeat, ask for topic names, run a listener, report an
// error). The coordinator computes the assignment; this core reconciles the member's target
// assignment with what it owns, revoking before assigning, and acknowledges it in the next
// heartbeat. See docs/DESIGN.md, "KIP-848 membership core".
//
// Its driver is src/net/consumer_group_driver.cpp (the classic core's is net/group_driver.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "base/backoff.hpp"
#include "group/membership.hpp"
#include "group/topic_names.hpp"
#include "group/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::group::kip848 {

/// Membership states. Exactly one at a time; transitions are listed in transition_allowed().
enum class consumer_member_state {
  unsubscribed,     // no subscription: not a member, nothing to do
  joining,          // heartbeat with epoch 0 to send or in flight; no assignment yet
  reconciling,      // a target assignment differs from what is owned: names resolved, revoke, assign
  acknowledging,    // an assignment was reconciled: the next heartbeat (sent at once) reports it
  stable,           // owns its target assignment; heartbeats every broker-given interval
  fenced,           // the coordinator removed this member: lost listener, then joining with epoch 0
  prepare_leaving,  // unsubscribe()/close(): revoke listener runs; heartbeats go on meanwhile
  leaving,          // the leave heartbeat (epoch -1, or -2 for a static member) to send or in flight
  poll_timed_out,   // max.poll.interval.ms expired: left the group; next poll() reports lost, rejoins
  fatal,            // fatal group error reported; nothing more happens until close
  closed,           // close finished; terminal
};
const char* to_string(consumer_member_state s) noexcept;

/// Whether a state change is one of the documented transitions (for the checks in transition()).
bool transition_allowed(consumer_member_state from, consumer_member_state to) noexcept;

// Assignments by topic id: group/topic_names.hpp (shared with the share-group core).
using group::id_assignment;
using group::topic_id;
using group::topic_id_less;

struct consumer_member_options {
  std::string group_id;
  std::optional<std::string> group_instance_id;
  std::optional<std::string> rack;
  /// group.remote.assignor: the broker-side assignor to use (unset: the broker's default).
  std::optional<std::string> remote_assignor;
  /// The member id this client made itself (KIP-1082: a random UUID, base64url, made once per
  /// Consumer by the driver). Used when the coordinator speaks ConsumerGroupHeartbeat v1+; with
  /// v0 the coordinator hands one out in its first answer.
  std::string member_id;
  /// Also the rebalance timeout sent to the coordinator (the time it gives a revoke).
  ms max_poll_interval{300000};
  ms retry_backoff{100};
  ms retry_backoff_max{1000};
  /// Until the coordinator names its own interval (every successful answer carries it).
  ms heartbeat_interval{5000};
};

// ---- actions (besides the shared ones of membership.hpp) -------------------------------------

struct send_consumer_group_heartbeat {
  protocol::consumer_group_heartbeat_request request;
  /// Every field set (joining, or the first heartbeat after an error), else only what changed.
  bool full = false;
  /// A leave (epoch -1/-2): the driver need not wait for the answer to close.
  bool leave = false;
};
/// The target assignment names topics by id: fetch metadata and answer topic_names_resolved()
/// with whatever names it knows (ids it does not know are asked for again after a backoff).
struct need_topic_names {
  std::vector<topic_id> ids;
};

using action = std::variant<find_coordinator, send_consumer_group_heartbeat, need_topic_names, run_listener,
                            assignment_changed, report_error, left_group, cancel_listener>;

/// The KIP-848 epochs with a meaning of their own.
inline constexpr std::int32_t join_epoch = 0;
inline constexpr std::int32_t leave_epoch_dynamic = -1;
inline constexpr std::int32_t leave_epoch_static = -2;

/// The fatal error of a coordinator without ConsumerGroupHeartbeat (no fallback to classic).
std::string unsupported_message(std::int32_t node);

/// What the KIP-848 core continues with once the pending listener is acknowledged.
enum class consumer_member_then { nothing, assign_step, acknowledge, rejoin, leave, finish_leave };

class consumer_member;
using consumer_member_skeleton =
    membership_skeleton<consumer_member, consumer_member_state, action, id_assignment, consumer_member_then>;

class consumer_member : public consumer_member_skeleton {
 public:
  explicit consumer_member(consumer_member_options opts);

  // ---- events from the user (through the facade) ----
  void subscribe(time_point now, std::vector<std::string> topics);
  /// Subscribes by a regular expression the broker evaluates (RE2/J syntax, sent as
  /// subscribed_topic_regex; ConsumerGroupHeartbeat v1 brokers).
  void subscribe_regex(time_point now, std::string regex);
  void unsubscribe(time_point now);
  /// Revokes (or reports lost), then leaves as `op` says (KIP-1092: the leave heartbeat with
  /// epoch -1, -2, or none), then closed.
  void close(time_point now, close_membership op = close_membership::default_operation);
  /// As the classic core: max.poll.interval.ms runs between poll_returned() and the next
  /// poll_called(), and while a listener callback runs inside poll().
  void poll_called(time_point now);
  // poll_returned(), listener_started() and listener_done(): the skeleton's (membership.hpp).
  /// A commit with member epoch `epoch` failed with `code`. Nothing changes here: the core learns
  /// of fencing from its own heartbeats (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), and a
  /// STALE_MEMBER_EPOCH is the committer's to retry (logged at debug).
  void commit_failed(time_point now, std::int32_t epoch, std::int16_t code);
  /// KIP-848 has no client-triggered rebalance (the coordinator computes assignments; Java's new
  /// consumer ignores enforceRebalance too): logged, nothing else.
  void enforce_rebalance(time_point now, std::string reason);

  // ---- events from the driver ----
  void tick(time_point now);
  /// The coordinator is `node`, and the connection to it negotiated ConsumerGroupHeartbeat
  /// `heartbeat_version` (0: the coordinator assigns the member id; 1+: this client's own). A
  /// negative version (its ApiVersions lack the API) makes it unusable: coordinator_unusable()
  /// with unsupported_message(node).
  void coordinator_found(time_point now, std::int32_t node, std::int16_t heartbeat_version);
  void coordinator_failed(time_point now, std::error_code ec);
  /// The coordinator cannot serve this protocol at all (its ApiVersions lack
  /// ConsumerGroupHeartbeat): fatal with `message`, no fallback. While leaving, the leave ends
  /// without a coordinator instead (the member was never known there).
  void coordinator_unusable(time_point now, std::error_code ec, std::string message);
  /// Connection error or timeout of the heartbeat in flight.
  void request_failed(time_point now, std::error_code ec);
  void heartbeat_done(time_point now, const protocol::consumer_group_heartbeat_response& r);
  /// Topic names the driver found in metadata (for need_topic_names; more than asked is fine).
  void topic_names_resolved(time_point now, const std::vector<std::pair<topic_id, std::string>>& names);

  // ---- outputs (and take_actions(), the skeleton's) ----
  /// When tick() must be called next (heartbeat due, backoff over, names retry, poll timer), or
  /// nullopt. Never in the past.
  std::optional<time_point> next_deadline() const;

  // ---- observation (and state(), invalid_transitions(), coordinator(), stats(), last_poll()) ----
  /// Owned partitions by name (what the listeners and the fetcher see).
  partition_set owned() const;
  const id_assignment& owned_ids() const noexcept { return owned_; }
  /// The latest target assignment the coordinator sent (unset: none, or reconciled away by a
  /// fence or leave).
  const std::optional<id_assignment>& target() const noexcept { return target_; }
  const std::string& member_id() const noexcept { return member_id_; }
  /// The subscription as subscription() shows it: the topic names (sorted, unique), or with a
  /// broker-evaluated regex the topics of the partitions the broker assigned from it.
  std::vector<std::string> subscription() const;
  /// What the user thread shows as the generation and the assignor (one snapshot for both
  /// protocols): the member epoch; the broker-side assignor asked for ("" the broker's default).
  std::int32_t generation() const noexcept { return epoch_; }
  std::string protocol_name() const { return opts_.remote_assignor.value_or(""); }
  /// No member leads in KIP-848: the coordinator assigns.
  bool is_leader() const noexcept { return false; }
  /// The member epoch OffsetCommit v9+ carries (0 while joining, < 0 while leaving).
  std::int32_t member_epoch() const noexcept { return epoch_; }
  ms heartbeat_interval() const noexcept { return interval_; }
  /// The membership as commits see it: `generation` is the member epoch.
  group::standing standing() const;
  const consumer_member_options& options() const noexcept { return opts_; }
  // stats(): in the classic core's shape (one facade, one metrics path), a "rebalance" here is a
  // reconciliation, from the moment the member stops being stable (or joins) until it is stable
  // again; `generation` is the member epoch it ended in.

 private:
  friend consumer_member_skeleton;
  // abandoned: a heartbeat of a membership given up (a poll timeout) whose answer is still due; it
  // is ignored whenever it comes, even after the rejoin has begun.
  enum class in_flight { none, heartbeat, leave, abandoned };
  using then = consumer_member_then;

  // For the skeleton (membership.hpp).
  const std::string& group_id() const noexcept { return opts_.group_id; }
  std::string who() const;
  void requests_dropped() noexcept { in_flight_ = in_flight::none; }
  void disown(const id_assignment& parts);
  partition_set named(const id_assignment& parts) const { return names_of(parts); }
  bool poll_interval_applies() const noexcept;
  void after_listener(time_point now, then next);
  // The fields of the last heartbeat sent; unset means "not sent since the last reset", so the
  // next heartbeat carries it (Java's SentFields).
  struct sent_fields {
    std::optional<std::int32_t> rebalance_timeout_ms;
    std::optional<std::vector<std::string>> topics;
    std::optional<std::string> regex;
    std::optional<std::string> assignor;
    std::optional<std::string> rack;
    std::optional<id_assignment> owned;
  };

  void pump(time_point now);
  bool needs_coordinator() const noexcept;
  bool heartbeating() const noexcept;
  bool heartbeat_due(time_point now) const noexcept;
  void send_heartbeat(time_point now);
  void send_leave(time_point now);
  bool must_leave() const noexcept;
  /// Leaving: whether the leave heartbeat goes out (must_leave(), unless close() said otherwise).
  bool sends_leave() const noexcept;
  std::int32_t leave_epoch() const noexcept;
  void begin_join(time_point now, RebalanceCause cause, const std::string& why);
  /// The subscription (names or regex) was just set, `changed` from before: join when not a
  /// member yet, else tell the coordinator at once.
  void subscription_set(time_point now, bool changed, const char* why);
  void maybe_reconcile(time_point now);
  void maybe_request_names(time_point now);
  void assign_step(time_point now);
  void fence(time_point now, const std::string& why);
  void finish_leave(time_point now);
  void fatal(time_point now, std::error_code ec, std::string message);
  void reconciliation_begins(time_point now, RebalanceCause cause, const std::string& detail);
  void reconciliation_ends(time_point now, bool completed);
  void heartbeat_error(time_point now, const protocol::consumer_group_heartbeat_response& r);
  void continue_after_listener(time_point now, then next);
  void set_owned(id_assignment owned);
  bool check_poll_timeout(time_point now);
  void backoff(time_point now);
  /// The part of `a` whose topic names are known, and the ids that are not.
  id_assignment resolved(const id_assignment& a, std::vector<topic_id>* unknown) const;
  /// The ids of `a` whose topic names are not known, in `a`'s order (resolved()'s `unknown`,
  /// without the copy of the rest).
  std::vector<topic_id> unknown_ids(const id_assignment& a) const;
  /// The reconciliation's detail: the target's epoch, size, and what moves.
  std::string target_detail() const;
  partition_set names_of(const id_assignment& a) const;
  std::string fatal_message(std::int16_t c, const std::optional<std::string>& broker_message) const;

  consumer_member_options opts_;
  // The subscription: topic names, or a regex for the broker (exactly one is used).
  std::vector<std::string> topics_;
  std::optional<std::string> regex_;
  std::string member_id_;
  std::int32_t epoch_ = join_epoch;
  std::int16_t version_ = -1;  // ConsumerGroupHeartbeat version of the coordinator's connection
  id_assignment owned_;
  std::optional<id_assignment> target_;
  id_assignment step_target_;  // what the reconciliation in progress moves to (resolved names only)
  std::map<topic_id, std::string, topic_id_less> names_;  // every id whose name is known
  std::set<topic_id, topic_id_less> names_asked_;         // asked for and not yet answered
  time_point names_retry_at_{};
  base::backoff names_backoff_;
  in_flight in_flight_ = in_flight::none;
  bool join_sent_ = false;      // a heartbeat with epoch 0 went out since the last fence/leave
  bool heartbeat_now_ = false;  // the subscription changed: tell the coordinator without waiting
  bool leave_pending_ = false;  // poll timeout: the leave heartbeat still has to go out
  // removed_ (the skeleton's): fenced or removed by the coordinator and not given an epoch again
  // yet (the epoch is 0 meanwhile, as while joining).
  bool fatal_while_leaving_ = false;  // a fatal error during unsubscribe()/close(): state stays
  sent_fields sent_;
  time_point next_heartbeat_at_{};
  ms interval_;
  time_point heartbeat_sent_{};
  // The cause of the next reconciliation, when this member caused it (a subscription change).
  std::optional<RebalanceCause> next_cause_;
};

}  // namespace kgroup::group::kip848
