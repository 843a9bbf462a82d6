// What the Consumer facade asks of a membership driver, whichever protocol it speaks: the classic
// one (net/group_driver: JoinGroup/SyncGroup) or KIP-848's (net/consumer_group_driver:
// ConsumerGroupHeartbeat). Every call runs on the background thread (the facade posts them).
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "group/types.hpp"

namespace kgroup::net {

class membership_driver {
 public:
  virtual ~membership_driver() = default;

  virtual void subscribe(std::vector<std::string> topics) = 0;
  /// A pattern this client matches (classic) or one the broker matches (KIP-848); each driver
  /// refuses the other kind with a fatal error (the facade checks first).
  virtual void subscribe_pattern(std::regex pattern) = 0;
  virtual void subscribe_pattern(std::string broker_pattern) = 0;
  virtual void unsubscribe() = 0;
  virtual void close() = 0;
  virtual void poll_called() = 0;
  virtual void poll_returned() = 0;
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
