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

class group_driver : public membership_driver_base<group_driver, group::member>,
                     public std::enable_shared_from_this<group_driver> {
 public:
  group_driver(boost::asio::io_context& io, std::shared_ptr<cluster> c, group_driver_options opts,
               detail::shared_state& shared);

  // All of these run on the io_context's thread (the facade posts them).
  void subscribe(std::vector<std::string> topics) override;
  /// This client matches the pattern against the topics in metadata.
  void subscribe_pattern(std::regex pattern);

 private:
  friend class driver_base<group_driver, group::member>;
  void apply(group::action& a);
  /// The classic protocol's own actions (driver_base::apply_with carries out the shared ones).
  template <class T>
  void apply_own(T& act);
  void on_coordinator(std::int32_t node);
  void do_compute_assignment(group::compute_assignment job);
  void on_metadata();

  std::shared_ptr<cluster> cluster_;
  group_driver_options opts_;
};

}  // namespace kgroup::net
