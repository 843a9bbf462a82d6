// The consumer-group membership core: a deterministic state machine with no I/O, no threads and
// no clock reads. Events go in (tick, responses, listener completions, poll calls); actions come
// out (send a request, run a listener, report an error). See docs/DESIGN.md for the state diagram.
//
// The driver (src/net/group_driver.cpp) applies actions with real connections on the background
// thread; tests apply them by hand with a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "group/membership.hpp"
#include "group/types.hpp"
#include "kgroup/assignor.hpp"
#include "kgroup/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::group {

/// Membership states. Exactly one at a time; transitions are listed in transition_allowed().
enum class classic_state {
  unsubscribed,    // no subscription: not a member, nothing to do
  preparing,       // a revoke/lost listener must finish before (re)joining
  joining,         // JoinGroup to send or in flight
  assigning,       // leader: waiting for the driver to compute the assignment
  syncing,         // SyncGroup in flight
  completing,      // assignment received; revoke/assign listeners must finish
  stable,          // member of the current generation, heartbeating
  leaving,         // revoke/lost listener then LeaveGroup, after unsubscribe()/close()
  poll_timed_out,  // left the group because poll() was late; next poll() reports lost and rejoins
  fatal,           // fatal group error reported; nothing more happens until close
  closed,          // close finished; terminal
};
const char* to_string(classic_state s) noexcept;

struct member_options {
  std::string group_id;
  std::optional<std::string> group_instance_id;
  std::optional<std::string> rack;
  ms session_timeout{45000};
  ms heartbeat_interval{3000};
  ms max_poll_interval{300000};  // also the rebalance timeout sent in JoinGroup
  ms retry_backoff{100};
  ms retry_backoff_max{1000};
  ms request_timeout{30000};
  /// Pattern subscriptions never match internal topics (exclude.internal.topics).
  bool exclude_internal_topics = true;
  RebalanceProtocol protocol = RebalanceProtocol::eager;
  /// Assignors in preference order. The leader runs the one the group chose (see
  /// assignment_metadata()).
  std::vector<std::shared_ptr<PartitionAssignor>> assignors;
};

// ---- actions (besides the shared ones of membership.hpp) -------------------------------------

struct send_join_group {
  protocol::join_group_request request;
  /// The coordinator holds a JoinGroup for the whole rebalance, up to the rebalance timeout
  /// (max.poll.interval.ms): the request's own timeout is longer than request.timeout.ms.
  ms timeout{};
};
struct send_sync_group {
  protocol::sync_group_request request;
};
struct send_heartbeat {
  protocol::heartbeat_request request;
};
struct send_leave_group {
  protocol::leave_group_request request;
};
/// Leader only: the assignment for `generation` needs fresh metadata of `topics` (every topic a
/// member subscribed to). Answer with assignment_metadata(); the core runs the assignor.
struct compute_assignment {
  std::int32_t generation = -1;
  std::string protocol_name;
  std::vector<protocol::join_group_response::join_group_response_member> members;
  std::vector<std::string> topics;
};
/// The coordinator `node` is given up on while a request to it is in flight (client-side session
/// expiry): fail that request now (disconnect) instead of waiting for request.timeout.ms, as
/// Java's markCoordinatorUnknown does. The core has already forgotten the request.
struct abandon_requests {
  std::int32_t node = -1;
};

using action = std::variant<find_coordinator, send_join_group, send_sync_group, send_heartbeat,
                            send_leave_group, compute_assignment, run_listener, assignment_changed,
                            report_error, left_group, cancel_listener, abandon_requests>;

/// Builds the JoinGroup protocol list (assignor name + encoded subscription), given what the core
/// knows about itself. Pure; consumer_protocols() unless a test injects its own.
struct subscription_snapshot {
  std::vector<std::string> topics;
  partition_set owned;
  std::int32_t generation = -1;
  std::optional<std::string> rack;
};
using protocol_builder = std::function<std::vector<protocol::join_group_request::join_group_request_protocol>(
    const subscription_snapshot&)>;
/// Decodes the assignment bytes of a SyncGroup response; returns an error for malformed bytes.
using assignment_decoder = std::function<std::error_code(std::span<const std::uint8_t>, partition_set&)>;

/// The consumer protocol's JoinGroup list for `assignors` (group/member_protocol.cpp): one entry
/// per assignor, in preference order, with the subscription (v3: owned partitions, generation,
/// rack) and the assignor's user data; one that cannot be encoded is left out and logged.
protocol_builder consumer_protocols(std::vector<std::shared_ptr<PartitionAssignor>> assignors);
/// The consumer protocol's assignment: the partitions it names (an error for malformed bytes).
std::error_code decode_consumer_assignment(std::span<const std::uint8_t> in, partition_set& out);

/// What the core needs to know of a topic in a metadata update (pattern matching and the
/// leader's partition-count watch).
struct topic_summary {
  std::string name;
  bool internal = false;
  std::int16_t error_code = 0;
  std::size_t partitions = 0;
};

/// LeaveGroup v0-2 name one member (member_id); v3+ a list of identities (members, with a
/// reason from v5). The core fills both; this keeps the one `version` can carry.
void fit_leave_group(protocol::leave_group_request& r, std::int16_t version);

/// What the classic core does when the pending listener returns.
enum class member_then {
  nothing,
  join,
  assign_added,
  finish_assignment,
  leave,
  rejoin_after_lost,
  close_after_leave
};

class member;
using member_skeleton = membership_skeleton<member, classic_state, action, partition_set, member_then>;

class member : public member_skeleton {
 public:
  /// Empty `build_protocols` / `decode_assignment`: the consumer protocol's (above).
  explicit member(member_options opts, protocol_builder build_protocols = {},
                  assignment_decoder decode_assignment = {});

  // ---- events from the user (through the facade) ----
  void subscribe(time_point now, std::vector<std::string> topics);
  /// Subscribes to every topic whose name matches `pattern` (the whole name, ECMAScript syntax),
  /// as metadata_updated() reports them; until the first update the subscription is unchanged.
  void subscribe_pattern(time_point now, std::regex pattern);
  void unsubscribe(time_point now);
  /// Revokes (or reports lost), then leaves as `op` says (KIP-1092), then closed.
  void close(time_point now, close_membership op = close_membership::default_operation);
  /// poll() began. Until poll_returned(), max.poll.interval.ms does not run: the time the
  /// application spends waiting inside poll() never counts (as in Java), only the time between a
  /// poll() returning and the next one, and the time a listener callback takes inside poll().
  void poll_called(time_point now);
  void enforce_rebalance(time_point now, std::string reason);
  // poll_returned(), listener_started() and listener_done(): the skeleton's (membership.hpp).

  // ---- events from the driver ----
  void tick(time_point now);
  void coordinator_found(time_point now, std::int32_t node_id);
  void coordinator_failed(time_point now, std::error_code ec);
  /// Connection error or timeout of the coordinator request in flight (any kind).
  void request_failed(time_point now, std::error_code ec);
  void join_group_done(time_point now, const protocol::join_group_response& r);
  void sync_group_done(time_point now, const protocol::sync_group_response& r);
  void heartbeat_done(time_point now, const protocol::heartbeat_response& r);
  void leave_group_done(time_point now, const protocol::leave_group_response& r);
  /// The metadata asked for by compute_assignment for `generation` (or the error fetching it):
  /// the core runs the group's assignor, checks its result (assign::check_assignment) and sends
  /// it with SyncGroup. For another generation than the one being assigned now it is stale.
  void assignment_metadata(time_point now, std::int32_t generation, std::error_code ec,
                           const ClusterMetadata& metadata);
  /// The assignment for `generation`, computed (the last step of assignment_metadata(), and an
  /// entry for tests that script the leader's result); a result for another generation than the
  /// one being assigned now is stale and dropped.
  void assignment_computed(
      time_point now, std::int32_t generation, std::error_code ec,
      std::vector<protocol::sync_group_request::sync_group_request_assignment> assignments);
  /// A REBALANCE_IN_PROGRESS seen on another group request (OffsetCommit) starts the rejoin.
  void rebalance_in_progress_seen(time_point now);
  /// An OffsetCommit sent with `generation` failed with error `c`: REBALANCE_IN_PROGRESS starts
  /// the rejoin, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID end the membership as on a heartbeat
  /// (Java's resetGenerationOnResponseError), FENCED_INSTANCE_ID is fatal, NOT_COORDINATOR /
  /// COORDINATOR_NOT_AVAILABLE forget the coordinator and look it up again. An answer for an older
  /// generation is ignored.
  void commit_failed(time_point now, std::int32_t generation, std::int16_t c);
  /// The partition counts of subscribed topics changed (leader triggers a rebalance).
  void metadata_changed(time_point now, std::string reason);
  /// The cluster's metadata was refreshed (`topics`: every topic it knows, any order): a pattern
  /// subscription follows the matching topics, and the leader rebalances when a topic it
  /// assigned changed its partition count.
  void metadata_updated(time_point now, const std::vector<topic_summary>& topics);

  // ---- outputs (and take_actions(), the skeleton's) ----
  /// When tick() must be called next (heartbeat due, backoff over, a timeout), or nullopt.
  std::optional<time_point> next_deadline() const;

  // ---- observation (and state(), invalid_transitions(), coordinator(), stats(), last_poll()) ----
  const partition_set& owned() const noexcept { return owned_; }
  const std::string& member_id() const noexcept { return member_id_; }
  std::int32_t generation() const noexcept { return generation_; }
  bool is_leader() const noexcept { return !member_id_.empty() && leader_id_ == member_id_; }
  const std::string& protocol_name() const noexcept { return protocol_name_; }
  const std::vector<std::string>& topics() const noexcept { return topics_; }
  /// The subscription as subscription() shows it (the topics, matched ones for a pattern).
  const std::vector<std::string>& subscription() const noexcept { return topics_; }
  const member_options& options() const noexcept { return opts_; }
  /// The coordinator removed this member (unknown member, fenced generation, session expiry) and
  /// it has not joined a generation since: commits fail with commit_failed, not as "joining".
  bool removed() const noexcept { return removed_; }
  /// The membership as commits see it (identity, and whether the generation is settled).
  group::standing standing() const;
  /// The leader's view of the rebalance in progress (who joined or left, from the member lists of
  /// consecutive generations) replaces the generic "group rebalancing" cause.
  void describe_rebalance(RebalanceCause cause, std::string detail);
  /// Whether a pattern subscription is active.
  bool pattern_subscribed() const noexcept { return pattern_.has_value(); }

 private:
  friend member_skeleton;
  enum class in_flight { none, join, sync, heartbeat, leave };
  using then = member_then;

  // For the skeleton (membership.hpp).
  const std::string& group_id() const noexcept { return opts_.group_id; }
  std::string who() const { return "member '" + member_id_ + "'"; }
  void requests_dropped() noexcept { in_flight_ = in_flight::none; }
  void disown(const partition_set& parts);
  /// Joining again after a leave: a request still in flight to the membership that ended (no
  /// LeaveGroup superseded it) is abandoned, so its answer is not taken for this join.
  void abandon_stale_request();
  partition_set named(const partition_set& parts) const { return parts; }
  bool poll_interval_applies() const noexcept;
  void after_listener(time_point now, then next);

  void pump(time_point now);
  void start_rebalance(time_point now, const std::string& reason);
  void begin_join(time_point now);
  void send_join(time_point now);
  void send_sync(time_point now,
                 std::vector<protocol::sync_group_request::sync_group_request_assignment> assignments);
  void send_heartbeat_now(time_point now);
  void send_leave(time_point now, const std::string& reason);
  void lose_partitions(time_point now, const std::string& why, then next);
  /// Leaving, with the revoke callback of unsubscribe()/close() still running: heartbeats go on.
  bool leaving_heartbeats() const noexcept;
  void finish_leave(time_point now);
  void continue_after_listener(time_point now, then next);
  void complete_assignment(time_point now);
  void set_owned(partition_set owned);
  void heartbeat_after_backoff();
  void fatal(time_point now, std::error_code ec, std::string message);
  void request_rejoin(RebalanceCause cause, std::string reason);
  void rebalance_begins(time_point now, RebalanceCause cause, const std::string& detail);
  void rebalance_ends(time_point now, bool completed);
  void rebalance_failed(time_point now);
  bool needs_coordinator() const noexcept;
  bool check_poll_timeout(time_point now);
  /// The coordinator no longer knows this member's generation (`what` answered `c`): partitions
  /// lost, rejoin.
  void membership_lost(time_point now, const std::string& what, std::int16_t c);
  // Fenced (is_fenced(c)): the generation is gone, the partitions are lost, the member joins
  // again (with a new member id after UNKNOWN_MEMBER_ID).
  void fenced(time_point now, const std::string& what, std::int16_t c);
  enum class retry_with { join, heartbeat };
  /// The end every JoinGroup/SyncGroup/Heartbeat error ladder shares (member_responses.cpp).
  void answer_error(time_point now, std::int16_t c, const char* api, retry_with retry);
  bool coordinator_error(time_point now, std::int16_t code);
  /// Leader: who joined and who left since the generation before (describe_rebalance).
  void describe_membership_change(
      std::int32_t generation,
      const std::vector<protocol::join_group_response::join_group_response_member>& members);
  /// Leader: decodes the members' subscriptions into assignment_job_ and asks for metadata.
  void request_assignment(const protocol::join_group_response& r);

  member_options opts_;
  protocol_builder build_protocols_;
  assignment_decoder decode_assignment_;
  std::vector<std::string> topics_;
  std::string member_id_;
  std::int32_t generation_ = -1;
  std::int32_t claimed_generation_ = -1;  // the generation the last JoinGroup's owned partitions are from
  // The generation of the last SyncGroup answer: generation_ moves on at a JoinGroup answer, and
  // until its SyncGroup is answered, it is not the one the partitions owned came with.
  std::int32_t synced_generation_ = -1;
  std::string leader_id_;
  std::string protocol_name_;
  partition_set owned_;
  partition_set pending_assignment_;  // received in SyncGroup, applied after listeners
  in_flight in_flight_ = in_flight::none;
  time_point last_heartbeat_sent_{};
  time_point last_heartbeat_ok_{};
  bool rejoin_needed_ = false;
  std::string rejoin_reason_;
  RebalanceCause rejoin_cause_ = RebalanceCause::group_rebalancing;
  time_point join_sent_{};
  time_point sync_sent_{};
  bool leave_sent_ = false;
  std::optional<std::regex> pattern_;
  // Leader: the group's subscriptions for the generation being assigned.
  struct assignment_job {
    std::int32_t generation = -1;
    std::shared_ptr<PartitionAssignor> assignor;
    GroupSubscription group;
    std::vector<std::string> topics;
  };
  std::optional<assignment_job> assignment_job_;
  // Leader: partition counts of the topics the last assignment was computed from (0: unusable).
  std::map<std::string, std::size_t> assigned_counts_;
  // Leader: members (instance id or member id) of the last generation it led.
  std::set<std::string> last_members_;
  std::int32_t last_members_generation_ = -1;
};

/// Whether a state change is one of the documented transitions (for the checks in transition()).
bool transition_allowed(classic_state from, classic_state to) noexcept;

}  // namespace kgroup::group
