// The driver of the KIP-848 membership core (group.protocol=consumer): runs on the background
// thread, feeds group::kip848::consumer_member with events (ConsumerGroupHeartbeat answers,
// failures, timer ticks, topic names from Metadata, user calls posted from the user thread) and
// carries out its actions with real connections. Thin like the classic driver
// (net/group_driver.hpp); what both drivers do alike (the action loop and timer, listener calls,
// errors, the snapshot for the user thread) is net/driver_base.hpp. Every decision is the core's;
// this file finds the coordinator, sends heartbeats, resolves topic names and delivers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "group/consumer_member.hpp"
#include "net/cluster.hpp"
#include "net/driver_base.hpp"
#include "net/heartbeat_driver_parts.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::net {

struct consumer_group_driver_options {
  /// member_id may be left empty: the driver makes one (make_member_id()).
  group::kip848::consumer_member_options member;
  std::chrono::milliseconds request_timeout{30000};
  membership_hooks hooks;
};

/// A new member id as KIP-1082 asks of the client: a random (version 4) UUID in Kafka's
/// base64url form without padding (22 characters), never starting with '-' (Kafka's own random
/// UUIDs avoid that too: such ids look like command-line options).
std::string make_member_id();

class consumer_group_driver
    : public membership_driver_base<consumer_group_driver, group::kip848::consumer_member>,
      public std::enable_shared_from_this<consumer_group_driver> {
 public:
  consumer_group_driver(boost::asio::io_context& io, std::shared_ptr<cluster> c,
                        consumer_group_driver_options opts, detail::shared_state& shared);

  void subscribe(std::vector<std::string> topics) override;
  /// Sent as subscribed_topic_regex; the broker matches it (RE2/J). (A std::regex cannot be sent:
  /// it keeps no source text, and the broker speaks RE2/J.)
  void subscribe_pattern(std::string broker_pattern);

 private:
  friend class driver_base<consumer_group_driver, group::kip848::consumer_member>;
  using parts = heartbeat_driver_parts<consumer_group_driver, group::kip848::consumer_member,
                                       protocol::consumer_group_heartbeat_request>;
  friend parts;
  using base = membership_driver_base<consumer_group_driver, group::kip848::consumer_member>;
  /// `member` with a member id made when it has none (the core is given that; opts_ keeps the
  /// rest of the options).
  static group::kip848::consumer_member_options with_member_id(group::kip848::consumer_member_options member);
  /// KIP-848's own actions; driver_base::apply_with carries out the shared ones.
  void apply(group::kip848::action& a);
  void on_coordinator(std::int32_t node);
  void send_heartbeat(group::kip848::send_consumer_group_heartbeat hb);
  void resolve_names();
  void feed_names();

  std::shared_ptr<cluster> cluster_;
  consumer_group_driver_options opts_;
  bool names_in_flight_ = false;
};

}  // namespace kgroup::net
