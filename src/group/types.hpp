// The membership core's vocabulary that other layers share without the core itself: clock
// aliases, listener kinds and the statistics the core keeps (the runtime's shared state and the
// metrics read them). No protocol messages here, so including it stays cheap.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>

#include "base/histogram.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/types.hpp"

namespace kgroup::group {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using ms = std::chrono::milliseconds;
using partition_set = std::set<TopicPartition>;

enum class listener_kind { revoked, assigned, lost };

/// KIP-1092 (Java 4.1's CloseOptions.GroupMembershipOperation): what close() does with the
/// membership. The listener runs the same way for all three.
enum class close_membership {
  default_operation,  // a dynamic member leaves; a static one remains (classic: no LeaveGroup;
                      // KIP-848: the leave heartbeat with epoch -2)
  leave_group,        // leave, static or not (classic: LeaveGroup with the instance id; KIP-848: -1)
  remain_in_group,    // stay until the session times out (KIP-848: a static member still sends -2)
};

/// Where a group's coordinator stands for this client: unknown, being looked up (FindCoordinator
/// in flight), or known. One value type for the membership core and for the facade's lookup of
/// commits outside a subscription (assign()), so both discover it the same way.
class coordinator_lookup {
 public:
  /// Whether a lookup should be sent now: none known and none under way. Marks one under way.
  bool start() noexcept {
    if (state_ != state::unknown) return false;
    state_ = state::looking;
    return true;
  }
  void found(std::int32_t node) noexcept {
    state_ = state::known;
    node_ = node;
  }
  /// The lookup failed, or the coordinator in use stopped answering as one: look it up again.
  void forget() noexcept {
    state_ = state::unknown;
    node_.reset();
  }
  bool known() const noexcept { return state_ == state::known; }
  bool unknown() const noexcept { return state_ == state::unknown; }
  std::optional<std::int32_t> node() const noexcept { return node_; }

 private:
  enum class state { unknown, looking, known };
  state state_ = state::unknown;
  std::optional<std::int32_t> node_;
};

/// What the data path needs to know of the membership to commit (member::standing()): the
/// identity commits carry and whether one may be sent now.
///
/// The four "gone" flags say that the membership which owned this member's partitions has ended
/// and no new one has begun: a commit then fails for good (commit_failed), whatever `generation`
/// says (the KIP-848 core sets epoch 0 on a fence or a poll timeout, both cores keep the
/// generation on a fatal error). Without them, a member that is not `stable` is joining or
/// rebalancing: its commit is refused as retriable (REBALANCE_IN_PROGRESS).
struct standing {
  std::int32_t generation = -1;
  std::string member_id;
  std::optional<std::string> instance_id;
  std::optional<std::int32_t> coordinator;
  bool stable = false;          // in a generation and not in the middle of joining it
  bool poll_timed_out = false;  // left the group because poll() was late (max.poll.interval.ms)
  bool fatal = false;           // a fatal group error ended the membership
  bool removed = false;         // the coordinator removed (fenced) this member; it has not rejoined yet
  bool left = false;            // unsubscribe()/close(): the revoke is done (or lost), the leave is next
  /// What the membership owns now: a subscribed member commits no other partition (one it gave
  /// up, or lost, may have another owner in this very generation).
  partition_set owned{};
  bool gone() const noexcept { return poll_timed_out || fatal || removed || left; }
};
const char* to_string(listener_kind k) noexcept;

/// One rebalance as the core saw it (steady-clock times; the facade converts to wall time).
struct rebalance_entry {
  RebalanceCause cause = RebalanceCause::group_rebalancing;
  std::string detail;
  time_point start{};
  std::optional<time_point> end;  // unset while in progress
  std::int32_t generation = -1;
  bool completed = false;
  partition_set revoked, assigned, lost;
};

/// What the core measured, for metrics (Java's consumer-coordinator metrics). `version` changes
/// whenever anything else does, so the driver copies only what changed.
struct member_stats {
  std::uint64_t version = 0;
  std::int64_t rebalances = 0;         // completed
  std::int64_t failed_rebalances = 0;  // failed JoinGroup/SyncGroup attempts and rejected assignments
  ms rebalance_latency_total{0};
  ms rebalance_latency_max{0};
  std::deque<time_point> completed_at;  // completion times of the last hour (trimmed at each completion)
  std::int64_t joins = 0;               // successful JoinGroups, and their round-trip times
  ms join_time_total{0};
  ms join_time_max{0};
  std::int64_t syncs = 0;
  ms sync_time_total{0};
  ms sync_time_max{0};
  std::int64_t heartbeats = 0;  // heartbeat responses of any outcome
  ms heartbeat_rtt_max{0};
  std::optional<time_point> last_heartbeat_response;
  std::deque<time_point> failed_at;  // failed attempts of the last hour
  detail::histogram rebalance_hist, join_hist, sync_hist, heartbeat_hist;  // seconds
  std::deque<rebalance_entry> history;  // the last `history_max`, oldest first; the last may be open
  static constexpr std::size_t history_max = 50;

  /// Opens a history entry (a rebalance, or a KIP-848 reconciliation); false if one is open
  /// already (it keeps its cause).
  bool begin(time_point now, RebalanceCause cause, const std::string& detail);
  /// Closes the open entry, if any: completed ones count toward the latencies.
  void end(time_point now, bool completed, std::int32_t generation);
  /// A failed attempt (counted per hour).
  void failed(time_point now);
  /// The open entry, if any.
  rebalance_entry* open_entry() { return history.empty() || history.back().end ? nullptr : &history.back(); }
  /// Records what a listener call revokes, assigns or loses in the open entry.
  void listener_called(listener_kind kind, const partition_set& parts);
  /// A heartbeat answered (any outcome) `now`, sent at `sent`.
  void heartbeat_answered(time_point now, time_point sent);

  /// A JoinGroup or SyncGroup that succeeded after `took`: counts it, its time and its histogram.
  void step_done(std::chrono::steady_clock::duration took, std::int64_t& count, ms& total, ms& max,
                 detail::histogram& hist) {
    const auto took_ms = std::chrono::duration_cast<ms>(took);
    ++count;
    total += took_ms;
    max = std::max(max, took_ms);
    hist.observe(std::chrono::duration<double>(took).count());
    ++version;
  }
};

}  // namespace kgroup::group
