// How kgroup reacts to a Kafka error code, by class, from one table generated beside kafka_errc
// (src/protocol/generate_messages.py, REACTIONS): the membership core, the data path and the
// facade ask here instead of each keeping its own list. Pure.
#pragma once

#include <cstdint>

namespace kgroup::protocol {

enum class reaction : std::uint8_t {
  none = 0,
  coordinator_moved = 1,  // forget the coordinator, rediscover it, retry
  coordinator_busy = 2,   // the coordinator is loading: retry after a backoff
  fenced = 4,             // the coordinator no longer knows this member or its generation: lost, rejoin
  group_fatal = 8,        // the membership cannot go on: raised from poll()
  refresh_metadata = 16,  // the partition's leader or the topic changed: refresh metadata first
  retry_commit = 32,      // a commit or committed offsets lookup refused for now: tried again
};

constexpr reaction operator|(reaction a, reaction b) noexcept {
  return static_cast<reaction>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}

/// Whether `code` belongs to any of the classes in `r` (codes Kafka does not define: none).
bool reacts(std::int16_t code, reaction r) noexcept;

}  // namespace kgroup::protocol
