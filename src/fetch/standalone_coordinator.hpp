// The group's coordinator outside a subscription (assign(), or nothing at all): commits and
// committed() go to it without joining the group. It is looked up on demand, and again once the
// one in use stops answering as coordinator (it moved, or its broker is down). Inside a
// subscription the membership core finds the coordinator instead (the facade does not ask here).
//
// Not thread-safe: every call, and `on_answer`, on the io_context's thread. The cluster's
// callbacks reach this object by pointer: the background thread must stop before it is destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "group/types.hpp"
#include "net/cluster.hpp"

namespace kgroup::fetch {

class standalone_coordinator {
 public:
  /// `group_id` empty: no group, nothing is ever looked up. `on_answer` runs after each lookup,
  /// found or not (the fetcher waits for a coordinator: wake it).
  standalone_coordinator(std::shared_ptr<net::cluster> c, std::string group_id,
                         std::chrono::milliseconds request_timeout, std::function<void()> on_answer)
      : cluster_(std::move(c)),
        group_id_(std::move(group_id)),
        request_timeout_(request_timeout),
        on_answer_(std::move(on_answer)) {}

  /// A coordinator is needed: looked up unless one is known or a lookup is under way. `failed`:
  /// the one in use stopped answering as coordinator, so it is forgotten and looked up again.
  void need(bool failed);

  /// The coordinator's node, once known.
  std::optional<std::int32_t> node() const noexcept { return lookup_.node(); }

 private:
  std::shared_ptr<net::cluster> cluster_;
  std::string group_id_;
  std::chrono::milliseconds request_timeout_;
  std::function<void()> on_answer_;
  group::coordinator_lookup lookup_;
};

}  // namespace kgroup::fetch
