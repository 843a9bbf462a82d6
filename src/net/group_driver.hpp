// The driver of the membership core: runs on the background thread, feeds the core with events
// (responses, timer ticks, user calls posted from the user thread) and carries out its actions
// with real connections. Thin on purpose: every decision is the core's (subscription patterns,
// the leader's assignor and metadata watch included); the driver fetches, sends and delivers.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "group/member.hpp"
#include "net/cluster.hpp"
#include "net/driver_base.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::net {

struct group_driver_options {
  group::member_options member;
  std::chrono::milliseconds request_timeout{30000};
  membership_hooks hooks;
};

class group_driver : public driver_base<group_driver, group::member>,
                     public std::enable_shared_from_this<group_driver> {
 public:
  group_driver(boost::asio::io_context& io, std::shared_ptr<cluster> c, group_driver_options opts,
               detail::shared_state& shared);

  // All of these run on the io_context's thread (the facade posts them).
  void subscribe(std::vector<std::string> topics) override;
  void subscribe_pattern(std::regex pattern) override;
  void subscribe_pattern(std::string broker_pattern) override;
  void commit_failed(std::int32_t generation, std::int16_t code) override;
  void enforce_rebalance(std::string reason) override;
  void shutdown() override;

 private:
  friend class driver_base<group_driver, group::member>;
  void apply(group::action& a);
  std::shared_ptr<connection> coordinator_connection();
  /// Sends a membership request to the coordinator on the group connection; its answer goes to
  /// `deliver(member, response)`, a failure to member::request_failed. Answers to requests sent
  /// before an abandon_requests, or after stop, reach nobody.
  template <class Request, class Adjust, class Deliver>
  void send_to_coordinator(Request request, Adjust adjust, Deliver deliver, std::chrono::milliseconds timeout = {});
  void do_compute_assignment(group::compute_assignment job);
  void on_metadata();
  void publish_snapshot();

  boost::asio::io_context& io_;
  std::shared_ptr<cluster> cluster_;
  group_driver_options opts_;
  // Bumped by abandon_requests: callbacks of coordinator requests sent before it are ignored.
  std::uint64_t request_epoch_ = 0;
};

}  // namespace kgroup::net
