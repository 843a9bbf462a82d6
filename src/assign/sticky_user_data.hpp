// Assignor user data formats other clients put in their subscriptions, so a kgroup leader keeps
// stickiness in groups with Java, librdkafka and franz-go members, and they keep it with ours.
//
// - Kafka's StickyAssignorUserData (the eager "sticky" assignor; also what librdkafka and
//   franz-go send for both sticky assignors): v0 is an array of (topic: string, partitions:
//   [int32]); v1 appends generation: int32. Non-flexible encoding, no version prefix: readers tell
//   the versions apart by whether four more bytes follow the array.
// - The Java CooperativeStickyAssignor's user data: the generation alone, one big-endian int32
//   (for leaders that read Subscription v0/v1, which has no generation field).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

#include "kgroup/assignor.hpp"

namespace kgroup::assign {

struct sticky_user_data {
  std::vector<TopicPartitions> partitions;
  std::optional<std::int32_t> generation;  // present in v1
  bool operator==(const sticky_user_data&) const = default;
};

/// Encodes v1 when `generation` is set, v0 otherwise. Throws std::invalid_argument for a topic name
/// longer than an int16 length can carry, std::bad_alloc.
std::vector<std::uint8_t> encode_sticky_user_data(std::span<const TopicPartitions> partitions,
                                                  std::optional<std::int32_t> generation);

/// Decodes v0 or v1. As the Java client does, bytes after the generation are ignored (a newer
/// version may append fields), and one to three bytes after the array mean v0. Returns a
/// protocol::codec_errc for malformed input (truncated, negative or oversized counts); never throws
/// except std::bad_alloc.
std::error_code decode_sticky_user_data(std::span<const std::uint8_t> in, sticky_user_data& out);

std::vector<std::uint8_t> encode_generation_user_data(std::int32_t generation);
/// The generation of a 4-byte cooperative user data; nullopt for any other size.
std::optional<std::int32_t> decode_generation_user_data(std::span<const std::uint8_t> in) noexcept;

/// What a sticky leader learns from a member's user data, whichever of the formats above it is
/// in: 4 bytes are a generation; anything else is tried as StickyAssignorUserData. Null, empty or
/// malformed user data gives nothing (the member is treated as owning nothing by its user data).
sticky_user_data interpret_user_data(const std::optional<std::vector<std::uint8_t>>& user_data);

}  // namespace kgroup::assign
