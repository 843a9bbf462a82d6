// Counters of what brokers send that kgroup reads but would not send itself: shared by
// every connection of a Consumer, read by its metrics. No Asio here: the consumer includes it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

namespace kgroup::net {

struct wire_stats {
  /// Responses that decoded completely and had bytes left after their last field. Accepted, as
  /// Java's and librdkafka's readers stop after the last field; logged once per broker and API.
  std::atomic<std::uint64_t> responses_with_trailing_bytes{0};
  /// Responses dropped whole because they named what their request did not ask for (a topic,
  /// partition, group or key): none of their entries can be trusted (protocol/answer_check.hpp).
  /// Logged once per broker and API.
  std::atomic<std::uint64_t> responses_mismatched{0};
  /// SASL authentications completed, re-authentications (KIP-368), and connections that ended
  /// for good because credentials were refused or the TLS peer was not trusted.
  std::atomic<std::uint64_t> authentications{0};
  std::atomic<std::uint64_t> reauthentications{0};
  std::atomic<std::uint64_t> authentication_failures{0};
  /// Connections closed after connections.max.idle.ms with nothing in flight (reopened on use).
  std::atomic<std::uint64_t> idle_closes{0};
  /// Times the client went back to bootstrap.servers (metadata.recovery.strategy=rebootstrap).
  std::atomic<std::uint64_t> rebootstraps{0};

  /// True the first time (broker, api) is seen: the caller logs then.
  bool first_trailing(std::int32_t node, std::int16_t api_key) {
    std::lock_guard lock(mutex_);
    return logged_.emplace(node, api_key).second;
  }
  /// The same for a mismatched response.
  bool first_mismatch(std::int32_t node, std::int16_t api_key) {
    std::lock_guard lock(mutex_);
    return mismatch_logged_.emplace(node, api_key).second;
  }

 private:
  std::mutex mutex_;
  std::set<std::pair<std::int32_t, std::int16_t>> logged_;
  std::set<std::pair<std::int32_t, std::int16_t>> mismatch_logged_;
};

}  // namespace kgroup::net
