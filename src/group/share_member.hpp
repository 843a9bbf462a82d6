// The share-group membership core (KIP-932, ShareGroupHeartbeat v1): the third protocol part on
// the membership skeleton (group/membership.hpp), beside the classic core (member.hpp) and the
// KIP-848 core (consumer_member.hpp). Deterministic: no I/O, no threads, no clock reads. Events go
// in (tick, heartbeat answers, topic names, poll calls, subscribe/unsubscribe/close); actions come
// out (send a heartbeat, ask for topic names, the owned set changed, report an error, left).
//
// What makes it thin: the client makes its member id and keeps it for life; the coordinator
// computes the assignment and the member takes it at once: no revoke step, no rebalance listener,
// no acknowledgement of owned partitions, and several members may own one partition. See
// docs/DESIGN.md, "Share membership core". Its driver is src/net/share_group_driver.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "group/membership.hpp"
#include "group/topic_names.hpp"
#include "group/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::group::share {

/// Membership states. Exactly one at a time; transitions are listed in transition_allowed().
enum class share_member_state {
  unsubscribed,    // no subscription: not a member, nothing to do
  joining,         // heartbeat with epoch 0 to send or in flight (every field); no assignment yet
  reconciling,     // the assignment names topic ids not yet known by name: the named part is owned,
                   // the rest asked of metadata; heartbeats go on
  stable,          // owns its whole assignment; heartbeats every broker-given interval
  fenced,          // FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: assignment dropped; rejoins (joining) at once
  leaving,         // unsubscribe()/close(): the leave heartbeat (epoch -1) to send or in flight
  poll_timed_out,  // max.poll.interval.ms expired: assignment dropped, left (epoch -1); poll() rejoins
  fatal,           // fatal group error reported; nothing more happens until close
  closed,          // close finished; terminal
};
const char* to_string(share_member_state s) noexcept;

/// Whether a state change is one of the documented transitions (for the checks in transition()).
bool transition_allowed(share_member_state from, share_member_state to) noexcept;

struct share_member_options {
  std::string group_id;
  /// client.rack: sent when joining (null afterwards while unchanged).
  std::optional<std::string> rack;
  /// The member id this client made itself (a random UUID, base64url: net::make_member_id(), made
  /// once per ShareConsumer by the driver). Kept for the member's life, across fencing and rejoins.
  std::string member_id;
  /// A member that does not call poll() within it leaves; its next poll() rejoins.
  ms max_poll_interval{300000};
  ms retry_backoff{100};
  ms retry_backoff_max{1000};
  /// Until the coordinator names its own interval (every successful answer carries it).
  ms heartbeat_interval{5000};
};

/// What the member owns, by name, each partition with its topic's id (ShareFetch and
/// ShareAcknowledge name topics by id).
using share_assignment = std::map<TopicPartition, topic_id>;

// ---- actions (besides the shared ones of membership.hpp) -------------------------------------

struct send_share_group_heartbeat {
  protocol::share_group_heartbeat_request request;
  /// Every field set (joining, or the first heartbeat after an error), else only what changed.
  bool full = false;
  /// A leave (epoch -1): the driver need not wait for the answer to close.
  bool leave = false;
};
/// The assignment names topics by id: fetch metadata and answer topic_names_resolved() with
/// whatever names it knows (ids still unknown are asked for again after a backoff).
struct need_topic_names {
  std::vector<topic_id> ids;
};
/// The set of partitions this member owns changed; it applies at once (no listener). Unlike the
/// other cores' group::assignment_changed it carries the topic ids.
struct share_assignment_changed {
  share_assignment owned;
  /// Emptied by a fence: the member rejoins at once with the same member id, so its share
  /// sessions (the leaders', not the coordinator's) stay and so do the records the application
  /// holds, as Java's member keeps them. False for every other change, leaving included.
  bool rejoining = false;
};

using action = std::variant<find_coordinator, send_share_group_heartbeat, need_topic_names,
                            share_assignment_changed, report_error, left_group>;

/// The ShareGroupHeartbeat epochs with a meaning of their own.
inline constexpr std::int32_t join_epoch = 0;
inline constexpr std::int32_t leave_epoch = -1;

/// The fatal error of a coordinator without ShareGroupHeartbeat.
std::string unsupported_message(const std::string& group_id, std::int32_t node);

/// The skeleton's "what next after a listener" slot: share groups have no listener, so nothing.
enum class share_member_then { nothing };

class share_member;
using share_member_skeleton =
    membership_skeleton<share_member, share_member_state, action, id_assignment, share_member_then>;

class share_member : public share_member_skeleton {
 public:
  explicit share_member(share_member_options opts);

  // ---- events from the user (through the facade) ----
  /// Subscribes to `topics` (an empty list is unsubscribe()): joins when not a member, else the
  /// next heartbeat (sent at once) carries the new list.
  void subscribe(time_point now, std::vector<std::string> topics);
  /// Drops the assignment at once and leaves (epoch -1); left_group when done.
  void unsubscribe(time_point now);
  /// As unsubscribe(), then closed; left_group when done.
  void close(time_point now);
  /// max.poll.interval.ms runs between poll_returned() (the skeleton's) and the next
  /// poll_called(). After a poll timeout, poll_called() rejoins.
  void poll_called(time_point now);

  // ---- events from the driver ----
  void tick(time_point now);
  /// The coordinator is `node`, and its connection negotiated ShareGroupHeartbeat
  /// `heartbeat_version`; a negative version (its ApiVersions lack the API) is fatal with
  /// unsupported_message() (while leaving, the leave ends without it instead).
  void coordinator_found(time_point now, std::int32_t node, std::int16_t heartbeat_version);
  void coordinator_failed(time_point now, std::error_code ec);
  /// Connection error or timeout of the heartbeat in flight.
  void request_failed(time_point now, std::error_code ec);
  void heartbeat_done(time_point now, const protocol::share_group_heartbeat_response& r);
  /// Topic names the driver found in metadata (for need_topic_names; more than asked is fine).
  void topic_names_resolved(time_point now, const std::vector<std::pair<topic_id, std::string>>& names);

  // ---- outputs (and take_actions(), the skeleton's) ----
  /// When tick() must be called next (heartbeat due, backoff over, names retry, poll timer), or
  /// nullopt. Never in the past.
  std::optional<time_point> next_deadline() const;

  // ---- observation (and state(), invalid_transitions(), coordinator(), stats(), last_poll()) ----
  const std::string& member_id() const noexcept { return member_id_; }
  /// The member epoch (0 while joining, -1 while leaving).
  std::int32_t epoch() const noexcept { return epoch_; }
  /// What the user thread's snapshot shows as the generation: the member epoch.
  std::int32_t generation() const noexcept { return epoch_; }
  /// Owned partitions by name / by topic id / both (what the share fetcher needs).
  partition_set owned() const { return names_.named(owned_); }
  const id_assignment& owned_ids() const noexcept { return owned_; }
  share_assignment owned_partitions() const;
  /// The latest assignment the coordinator sent (unset: none yet, or dropped by a fence or leave).
  const std::optional<id_assignment>& target() const noexcept { return target_; }
  /// The subscribed topic names (sorted, unique).
  const std::vector<std::string>& subscription() const noexcept { return topics_; }
  ms heartbeat_interval() const noexcept { return interval_; }
  const share_member_options& options() const noexcept { return opts_; }

 private:
  friend share_member_skeleton;
  // abandoned: a heartbeat of a membership given up (a poll timeout) whose answer is still due;
  // it is ignored whenever it comes, even after the rejoin has begun.
  enum class in_flight { none, heartbeat, leave, abandoned };
  // The fields of the last heartbeat sent; unset means "not sent since the last reset", so the
  // next heartbeat carries it (Java's SentFields).
  struct sent_fields {
    std::optional<std::vector<std::string>> topics;
    std::optional<std::string> rack;
  };

  // For the skeleton (membership.hpp).
  const std::string& group_id() const noexcept { return opts_.group_id; }
  std::string who() const;
  void requests_dropped() noexcept { in_flight_ = in_flight::none; }
  bool poll_interval_applies() const noexcept;
  void pump(time_point now);
  void fatal(time_point now, std::error_code ec, std::string message);

  bool heartbeating() const noexcept;
  bool needs_coordinator() const noexcept;
  bool heartbeat_due(time_point now) const noexcept;
  void send_heartbeat(time_point now);
  void send_leave(time_point now);
  void begin_join(time_point now, RebalanceCause cause, const std::string& why);
  void apply_target(time_point now);
  void set_owned(time_point now, id_assignment owned, bool rejoining = false);
  void fence(time_point now, const std::string& why);
  void finish_leave(time_point now);
  bool check_poll_timeout(time_point now);
  void heartbeat_error(time_point now, const protocol::share_group_heartbeat_response& r);
  void backoff(time_point now);
  std::string fatal_message(std::int16_t c, const std::optional<std::string>& broker_message) const;

  share_member_options opts_;
  std::vector<std::string> topics_;
  const std::string member_id_;  // the client's, for life
  std::int32_t epoch_ = join_epoch;
  std::int16_t version_ = -1;  // ShareGroupHeartbeat version of the coordinator's connection
  id_assignment owned_;        // the named part of target_ (all of it once stable)
  std::optional<id_assignment> target_;
  topic_names names_;
  in_flight in_flight_ = in_flight::none;
  // A join heartbeat went out since the last fence or leave: the coordinator may know this member,
  // so leaving means a leave heartbeat.
  bool known_ = false;
  bool heartbeat_now_ = false;  // the subscription changed: tell the coordinator without waiting
  bool leave_pending_ = false;  // poll timeout: the leave heartbeat still has to go out
  sent_fields sent_;
  time_point next_heartbeat_at_{};
  ms interval_;
  time_point heartbeat_sent_{};
};

}  // namespace kgroup::group::share
