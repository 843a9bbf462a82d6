// What the Consumer facade asks of a membership driver, whichever protocol it speaks: the classic
// one (net/group_driver: JoinGroup/SyncGroup) or KIP-848's (net/consumer_group_driver:
// ConsumerGroupHeartbeat). Every call runs on the background thread (the facade posts them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "group/types.hpp"

namespace kgroup::net {

class membership_driver {
 public:
  virtual ~membership_driver() = default;

  virtual void subscribe(std::vector<std::string> topics) = 0;
  // Pattern subscriptions are each driver's own (a std::regex this client matches, classic; a
  // pattern the broker matches, KIP-848): the facade, which chose the driver, calls it directly.
  virtual void unsubscribe() = 0;
  /// Leaves as `op` says (KIP-1092), then signals left.
  virtual void close(group::close_membership op) = 0;
  /// poll() began after it may have left the group: the core reads the poll board now (it
  /// rejoins). Other calls and returns are only written to the board (driver_base::sync_poll()).
  virtual void poll_called() = 0;
  /// An OffsetCommit sent with `generation` (the member epoch with KIP-848) failed with `code`.
  virtual void commit_failed(std::int32_t generation, std::int16_t code) = 0;
  virtual void listener_done(std::uint64_t seq) = 0;
  virtual void listener_started(std::uint64_t seq) = 0;
  virtual void enforce_rebalance(std::string reason) = 0;
  /// Stops feeding the core: nothing reaches it afterwards (the thread is about to stop).
  virtual void shutdown() = 0;
  /// The membership as commits and the fetcher see it (generation = member epoch with KIP-848).
  virtual group::standing standing() const = 0;
};

}  // namespace kgroup::net
