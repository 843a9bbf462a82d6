// What the drivers of the heartbeat-protocol cores share (KIP-848's net/consumer_group_driver and
// share groups' net/share_group_driver): both learn which version of their one heartbeat API the
// coordinator speaks, send one heartbeat at a time (a later one supersedes an earlier answer),
// and resolve the topic ids of their assignment to names from metadata. Each driver makes these
// its friend and calls them from its own on_coordinator/send_heartbeat/resolve_names/feed_names.
//
// `Derived` has cluster_, opts_ (member.group_id, request_timeout), names_in_flight_, and
// driver_base's member_, stopped_, process() and send_to_coordinator(). Background thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "group/topic_names.hpp"
#include "kgroup/error.hpp"
#include "net/cluster.hpp"

namespace kgroup::net {

template <class Derived, class Core, class Heartbeat>
struct heartbeat_driver_parts {
  using clock = std::chrono::steady_clock;

  /// The coordinator's ApiVersions decide: the highest common version of `Heartbeat`, or -1
  /// when it lacks the API (the core makes that a clear fatal error).
  static void on_coordinator(Derived& d, std::int32_t node) {
    auto conn = d.cluster_->broker(node, channel::group);
    if (!conn) {
      d.core().coordinator_failed(clock::now(), make_error_code(client_errc::coordinator_not_found));
      d.process();
      return;
    }
    conn->when_ready([self = d.shared_from_this(), conn, node](std::error_code ec) {
      if (self->stopped_) return;
      const auto now = clock::now();
      if (ec) {
        self->core().coordinator_failed(now, ec);
      } else {
        self->core().coordinator_found(now, node,
                                       conn->versions().common(Heartbeat::api_key, Heartbeat::lowest_version,
                                                               Heartbeat::highest_version));
      }
      self->process();
    });
  }

  /// Only the answer to the latest heartbeat reaches the core (one is in flight at a time; an
  /// older one is from before a failure the core already handled).
  static void send_heartbeat(Derived& d, Heartbeat request) {
    d.send_to_coordinator(
        std::move(request), [](Heartbeat&, std::int16_t) {},
        [](Core& m, const auto& r) { m.heartbeat_done(clock::now(), r); }, d.opts_.request_timeout,
        Derived::supersede::earlier);
  }

  /// Metadata v10+ carries topic ids; an all-topics refresh names every id an assignment can hold.
  /// Ids still unknown are asked for again by the core. `kind`: "group" or "share group", for logs.
  static void resolve_names(Derived& d, const char* kind) {
    if (d.names_in_flight_) return;
    d.names_in_flight_ = true;
    d.cluster_->refresh_metadata(std::nullopt, d.opts_.request_timeout,
                                 [self = d.shared_from_this(), kind](std::error_code ec) {
                                   if (self->stopped_) return;
                                   self->names_in_flight_ = false;
                                   if (ec) {
                                     logger()->debug("{} '{}': metadata for topic ids failed: {}", kind,
                                                     self->opts_.member.group_id, ec.message());
                                     self->core().topic_names_resolved(clock::now(), {});
                                     self->process();
                                     return;
                                   }
                                   feed_names(*self);
                                 });
  }

  /// Every id with a name in the cluster's metadata, to the core.
  static void feed_names(Derived& d) {
    if (d.stopped_) return;
    std::vector<std::pair<group::topic_id, std::string>> names;
    for (const auto& [name, t] : d.cluster_->metadata().topics) {
      if (!t.topic_id.is_zero() && t.error_code == 0) names.emplace_back(t.topic_id, name);
    }
    d.core().topic_names_resolved(clock::now(), names);
    d.process();
  }
};

}  // namespace kgroup::net
