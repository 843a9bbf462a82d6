// What the record batch decoder (records.cpp) and encoder (records_encode.cpp) share: the
// formats' sizes and offsets, and arithmetic that must not overflow on untrusted data. Internal to
// the codec.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <system_error>

#include "protocol/primitives.hpp"
#include "protocol/records.hpp"

namespace kgroup::protocol::records_detail {

// Base offset (8) and batch length / message size (4): the prefix every format shares, and the
// magic byte sits at the same position (16) in all of them.
constexpr std::size_t log_overhead = 12;
constexpr std::size_t magic_position = 16;

// Magic 2 header: 12 + epoch 4 + magic 1 + crc 4, then attributes (the CRC-covered part starts
// there) ... record count; 61 bytes in all.
constexpr std::size_t v2_crc_start = 21;
constexpr std::size_t v2_header_size = 61;
constexpr std::int32_t v2_min_batch_length = static_cast<std::int32_t>(v2_header_size - log_overhead);
// Smallest encoded magic-2 record: length, attributes, timestamp delta, offset delta, key length,
// value length and header count, one byte each. Bounds a declared record count by the data.
constexpr std::size_t v2_min_record_size = 7;

// Legacy message body: crc 4, magic 1, attributes 1, [timestamp 8], key length 4, value length 4.
constexpr std::int32_t v0_min_message_size = 14;
constexpr std::int32_t v1_min_message_size = 22;

constexpr auto max_int32 = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());

inline std::error_code err(codec_errc e) noexcept {
  return make_error_code(e);
}

// Offsets and timestamps come from untrusted data; wrap instead of overflowing (UB) and let the
// data path's own checks reject nonsense.
inline std::int64_t wrap_add(std::int64_t a, std::int64_t b) noexcept {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
inline std::int64_t wrap_sub(std::int64_t a, std::int64_t b) noexcept {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

inline std::uint32_t legacy_crc(byte_view covered) noexcept {
  return static_cast<std::uint32_t>(crc32_z(0, covered.data(), covered.size()));
}

}  // namespace kgroup::protocol::records_detail
