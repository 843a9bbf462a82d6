// The group's coordinator outside a subscription (assign(), or nothing at all): commits and
// committed() go to it without joining the group. It is looked up on demand, and again once the
// one in use stops answering as coordinator (it moved, or its broker is down). Inside a
// subscription the membership core finds the coordinator instead (the facade does not ask here).
//
// Not thread-safe: every call, and `on_answer`, on the io_context's thread. The cluster's
// callbacks reach this object by pointer: the background thread must stop before it is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data/committer.hpp"
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

/// Who a commit speaks for: the membership (a subscription: generation, member id and the
/// coordinator the membership core found) or nobody (assign(), or nothing at all: generation -1,
/// no member id, the standalone coordinator), as Java's commits.
///
/// Threads: the user thread sets the mode (set_mode(): atomic); identity() and
/// coordinator_unusable() run on the background thread, where the membership and the standalone
/// coordinator live.
class commit_identity {
 public:
  enum class mode { none, subscribed, manual };

  /// `group_mode`: a group.id is set. Both parts are set before the background thread starts
  /// (the standalone coordinator wakes the fetcher, which asks here: made after this).
  explicit commit_identity(bool group_mode) : group_mode_(group_mode) {}
  void set_coordinator(std::unique_ptr<standalone_coordinator> c) { coordinator_ = std::move(c); }
  /// The membership core's standing (read on the background thread).
  void set_standing(std::function<group::standing()> s) { standing_ = std::move(s); }

  void set_mode(mode m) noexcept { mode_.store(m, std::memory_order_release); }
  mode current() const noexcept { return mode_.load(std::memory_order_acquire); }

  data::group_identity identity() const {
    data::group_identity id;
    id.group_mode = group_mode_;
    if (current() != mode::subscribed) {
      id.coordinator = coordinator_->node();
      id.stable = true;
      return id;
    }
    static_cast<group::standing&>(id) = standing_();
    id.subscribed = true;
    return id;
  }

  /// A group request found no usable coordinator (fetcher_options::coordinator_unusable): outside
  /// a subscription it is looked up (again); inside one the membership core looks it up.
  void coordinator_unusable(bool failed) {
    if (current() != mode::subscribed) coordinator_->need(failed);
  }

 private:
  bool group_mode_;
  std::unique_ptr<standalone_coordinator> coordinator_;
  std::function<group::standing()> standing_;
  std::atomic<mode> mode_{mode::none};
};

}  // namespace kgroup::fetch
