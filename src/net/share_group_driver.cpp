#include "net/share_group_driver.hpp"

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "net/consumer_group_driver.hpp"  // make_member_id()

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
namespace sh = group::share;

sh::share_member_options share_group_driver::with_member_id(sh::share_member_options member) {
  if (member.member_id.empty()) member.member_id = make_member_id();
  return member;
}

share_group_driver::share_group_driver(asio::io_context& io, std::shared_ptr<cluster> c,
                                       share_group_driver_options opts, detail::shared_state& shared)
    // The share core emits neither listener calls nor group::assignment_changed: the Consumer's
    // membership_hooks stay empty; this driver's own hooks are in opts_.
    : base(io, shared, membership_hooks{}, with_member_id(opts.member)),
      cluster_(std::move(c)),
      opts_(std::move(opts)),
      member_id_(member_.member_id()) {
  // Every refresh (periodic, or another part of the client's) may name topic ids the core waits for.
  cluster_->on_metadata([this] { feed_names(); });
}

void share_group_driver::subscribe(std::vector<std::string> topics) {
  core().subscribe(clock::now(), std::move(topics));
  cluster_->start_periodic_refresh();
  process();
}

void share_group_driver::on_coordinator(std::int32_t node) {
  parts::on_coordinator(*this, node);
}

void share_group_driver::send_heartbeat(sh::send_share_group_heartbeat hb) {
  parts::send_heartbeat(*this, std::move(hb.request));
}

void share_group_driver::resolve_names() {
  parts::resolve_names(*this, "share group");
}

void share_group_driver::feed_names() {
  parts::feed_names(*this);
}

void share_group_driver::apply(sh::action& a) {
  apply_with(a, [&](auto& act) {
    using T = std::decay_t<decltype(act)>;
    if constexpr (std::is_same_v<T, sh::send_share_group_heartbeat>) {
      send_heartbeat(std::move(act));
    } else if constexpr (std::is_same_v<T, sh::need_topic_names>) {
      resolve_names();
    } else if constexpr (std::is_same_v<T, sh::share_assignment_changed>) {
      // The snapshot is published after this batch (process()).
      if (opts_.hooks.on_assignment_changed) opts_.hooks.on_assignment_changed(act.owned, act.rejoining);
    }
  });
}

}  // namespace kgroup::net
