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
  member_.subscribe(clock::now(), std::move(topics));
  cluster_->start_periodic_refresh();
  process();
}

void share_group_driver::on_coordinator(std::int32_t node) {
  // The coordinator's ApiVersions decide: ShareGroupHeartbeat v1, or a clear fatal error.
  auto conn = cluster_->broker(node, channel::group);
  if (!conn) {
    member_.coordinator_failed(clock::now(), make_error_code(client_errc::coordinator_not_found));
    process();
    return;
  }
  conn->when_ready([self = shared_from_this(), conn, node](std::error_code ec) {
    if (self->stopped_) return;
    const auto now = clock::now();
    if (ec) {
      self->member_.coordinator_failed(now, ec);
    } else {
      // -1 when its ApiVersions lack the API (or offer only the early-access v0): the core makes
      // that a clear fatal error.
      self->member_.coordinator_found(
          now, node,
          conn->versions().common(protocol::share_group_heartbeat_request::api_key,
                                  protocol::share_group_heartbeat_request::lowest_version,
                                  protocol::share_group_heartbeat_request::highest_version));
    }
    self->process();
  });
}

void share_group_driver::send_heartbeat(sh::send_share_group_heartbeat hb) {
  // Only the answer to the latest heartbeat reaches the core (one is in flight at a time; an
  // older one is from before a failure the core already handled).
  send_to_coordinator(
      std::move(hb.request), [](protocol::share_group_heartbeat_request&, std::int16_t) {},
      [](sh::share_member& m, const auto& r) { m.heartbeat_done(clock::now(), r); }, opts_.request_timeout,
      supersede::earlier);
}

void share_group_driver::resolve_names() {
  // Metadata v10+ carries topic ids; an all-topics refresh names every id the assignment can
  // hold. Ids still unknown are asked for again by the core.
  if (names_in_flight_) return;
  names_in_flight_ = true;
  cluster_->refresh_metadata(std::nullopt, opts_.request_timeout,
                             [self = shared_from_this()](std::error_code ec) {
                               if (self->stopped_) return;
                               self->names_in_flight_ = false;
                               if (ec) {
                                 logger()->debug("share group '{}': metadata for topic ids failed: {}",
                                                 self->opts_.member.group_id, ec.message());
                                 self->member_.topic_names_resolved(clock::now(), {});
                                 self->process();
                                 return;
                               }
                               self->feed_names();
                             });
}

void share_group_driver::feed_names() {
  if (stopped_) return;
  std::vector<std::pair<group::topic_id, std::string>> names;
  for (const auto& [name, t] : cluster_->metadata().topics) {
    if (!t.topic_id.is_zero() && t.error_code == 0) names.emplace_back(t.topic_id, name);
  }
  member_.topic_names_resolved(clock::now(), names);
  process();
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
      if (opts_.hooks.on_assignment_changed) opts_.hooks.on_assignment_changed(act.owned);
    }
  });
}

}  // namespace kgroup::net
