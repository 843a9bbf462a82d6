// The one listener call a membership core has outstanding with the user thread (both cores use
// it). The core asks for a call (its run_listener action carries the sequence number), the user
// thread reports when it starts and when it is done. A call not started yet can be dropped and
// cancelled; a started one runs to its end as what it is, and once dropped its done is stale.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "base/sim_mutants.hpp"
#include "group/types.hpp"

namespace kgroup::group {

/// `Parts`: the partitions of a call (as the core keeps them); `Then`: what the core does next
/// when the call is done.
template <class Parts, class Then>
class listener_handshake {
 public:
  struct call {
    std::uint64_t seq = 0;
    listener_kind kind = listener_kind::assigned;
    Parts parts;
    Then after{};
    bool started = false;  // the user thread began running it
  };

  /// Asks for call `seq`, replacing any outstanding one.
  void request(std::uint64_t seq, listener_kind kind, Parts parts, Then after) {
    pending_ = call{seq, kind, std::move(parts), after, false};
  }
  /// Whether a call is outstanding.
  bool pending() const noexcept { return pending_.has_value(); }
  /// Whether the outstanding call is running on the user thread.
  bool running() const noexcept { return pending_ && pending_->started; }
  /// Whether the outstanding call is of `kind`.
  bool pending_is(listener_kind kind) const noexcept { return pending_ && pending_->kind == kind; }
  const Parts* parts() const noexcept { return pending_ ? &pending_->parts : nullptr; }
  /// Changes what follows the outstanding call.
  void then_after(Then after) noexcept {
    if (pending_) pending_->after = after;
  }

  /// The user thread started `seq`; false if it is not the outstanding call.
  bool start(std::uint64_t seq) noexcept {
    if (!pending_ || pending_->seq != seq) return false;
    pending_->started = true;
    return true;
  }
  /// The user thread finished `seq`: the call, or nothing if it is stale (dropped or replaced).
  std::optional<call> finish(std::uint64_t seq) {
    if (!pending_ || pending_->seq != seq) return std::nullopt;
    return drop();
  }
  /// Drops the outstanding call, with its effect on what the member owns. One the user thread
  /// has not started is cancelled: its seq is returned for the core's cancel action, and what it
  /// would have assigned was never the application's (`disown(parts)`). One already running
  /// finishes as what it is (unless `unstarted_only`: then it stays outstanding), but its done is
  /// stale from here: what it revokes or loses is gone now (`disown(parts)`), so no partition is
  /// both revoked and lost, and its seq is returned too (a late cancel for the user thread: a
  /// commit from inside that callback would carry the identity of whatever membership comes next,
  /// so it is refused; found by kgroup-sim --group); what it assigns stays owned, so the next
  /// callback takes it back (no cancel: the user thread would report it lost at once).
  template <class Disown>
  std::optional<std::uint64_t> release(bool unstarted_only, Disown disown) {
    if (!pending_ || (unstarted_only && pending_->started)) return std::nullopt;
    const call c = *drop();
    if (!c.started) {
      if (c.kind == listener_kind::assigned) disown(c.parts);
      return c.seq;
    }
    if (c.kind == listener_kind::assigned) return std::nullopt;
    disown(c.parts);
#ifdef KGROUP_SIM_MUTANTS
    if (sim::mutant_enabled("no_late_cancel")) return std::nullopt;  // kgroup-sim --group's finding put back
#endif
    return c.seq;
  }
  /// Forgets the outstanding call (its done becomes stale) and returns it.
  std::optional<call> drop() {
    std::optional<call> out = std::move(pending_);
    pending_.reset();
    return out;
  }

 private:
  std::optional<call> pending_;
};

}  // namespace kgroup::group
