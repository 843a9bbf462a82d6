// The driver of the share-group membership core (KIP-932): runs on the background thread of a
// ShareConsumer, feeds group::share::share_member with events (ShareGroupHeartbeat answers,
// failures, timer ticks, topic names from Metadata, user calls posted from the user thread) and
// carries out its actions with real connections. Thin like the other membership drivers, on the
// same net/driver_base.hpp (action loop, timer, FindCoordinator with key type group, requests to
// the coordinator on the group channel, errors, the end of a leave, the snapshot in
// detail::shared_state); it does not implement net/membership_driver.hpp, the Consumer's
// interface, since a share member has no rebalance listener and no offset commits. Every
// decision is the core's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "group/share_member.hpp"
#include "net/cluster.hpp"
#include "net/driver_base.hpp"
#include "net/heartbeat_driver_parts.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::net {

/// The ShareConsumer facade's hooks into the membership.
struct share_membership_hooks {
  /// The owned set changed (the share fetcher starts or stops fetching): every partition the
  /// member owns now, with its topic id (ShareFetch and ShareAcknowledge name topics by id); empty
  /// after a fence, a poll timeout, a fatal error, unsubscribe() and close(); `rejoining` is true
  /// only after a fence (the member rejoins at once: its share sessions should stay). Called on
  /// the background thread, in order, before the snapshot in shared_state (owned, by name) is
  /// published. Several members may own the same partition.
  std::function<void(const group::share::share_assignment&, bool rejoining)> on_assignment_changed;
};

struct share_group_driver_options {
  /// member_id may be left empty: the driver makes one (make_member_id(), as KIP-848's driver).
  group::share::share_member_options member;
  std::chrono::milliseconds request_timeout{30000};
  share_membership_hooks hooks;
};

/// Every call runs on the io_context's thread (the facade posts them), except member_id().
/// Through `shared` (detail::shared_state) the user thread hears: fatal errors (a
/// detail::fatal_error event: poll() raises it; e.g. the broker without share groups,
/// GROUP_AUTHORIZATION_FAILED, GROUP_MAX_SIZE_REACHED), the end of unsubscribe() or close() (a
/// detail::left_event and left_count + 1), and the snapshot (owned by name, topics, member_id,
/// generation = member epoch, state, metrics.group and metrics.coordinator). Non-fatal errors
/// (a poll timeout, unexpected codes retried) are logged as warnings.
class share_group_driver : public driver_base<share_group_driver, group::share::share_member>,
                           public std::enable_shared_from_this<share_group_driver> {
 public:
  /// Takes the cluster's on_metadata() slot (topic names for the assignment's ids).
  share_group_driver(boost::asio::io_context& io, std::shared_ptr<cluster> c, share_group_driver_options opts,
                     detail::shared_state& shared);

  /// Subscribes (joins, or tells the coordinator the new list at once); an empty list is
  /// unsubscribe(). Starts the periodic metadata refresh.
  void subscribe(std::vector<std::string> topics);
  // unsubscribe(), close(), poll_called(), shutdown(): driver_base's.
  //   unsubscribe(): drops the assignment (hook with an empty set) and leaves (epoch -1);
  //     left_event when done (at once when not subscribed).
  //   close(): the same, then the core is closed; left_event when done. Call after the share
  //     sessions' final ShareAcknowledge (epoch -1), which needs no membership.
  //   poll_called(): reads the poll board (shared_state::poll_began()/poll_ended(), which the
  //     driver also reads before any other event reaches the core); max.poll.interval.ms runs
  //     between a return and the next call; a member late to poll leaves, and the call rejoins.
  //   shutdown(): nothing reaches the core afterwards (the thread is about to stop).

  /// The member id this client made (ShareFetch and ShareAcknowledge carry it). Fixed for the
  /// driver's life: safe to read from any thread.
  const std::string& member_id() const noexcept { return member_id_; }

 private:
  friend class driver_base<share_group_driver, group::share::share_member>;
  using parts = heartbeat_driver_parts<share_group_driver, group::share::share_member,
                                       protocol::share_group_heartbeat_request>;
  friend parts;
  using base = driver_base<share_group_driver, group::share::share_member>;
  static group::share::share_member_options with_member_id(group::share::share_member_options member);
  /// The share core's own actions; driver_base::apply_with carries out the shared ones.
  void apply(group::share::action& a);
  void on_coordinator(std::int32_t node);
  void send_heartbeat(group::share::send_share_group_heartbeat hb);
  void resolve_names();
  void feed_names();

  std::shared_ptr<cluster> cluster_;
  share_group_driver_options opts_;
  const std::string member_id_;
  bool names_in_flight_ = false;
};

}  // namespace kgroup::net
