// Kafka record compression codecs: gzip (zlib), snappy (raw and xerial-framed), lz4 (frame
// format) and zstd.
//
// Pure code. Decompression is bounded: a caller states the most output it accepts, and a
// decompression bomb stops with codec_errc::decompression_bound after producing at most
// max_output + 1 bytes (plus the codec's own bounded working memory), never exhausting memory.
// Nothing here throws; allocation failure is reported as std::errc::not_enough_memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include "protocol/primitives.hpp"

namespace kgroup::protocol {

/// The codec ids of the compression bits (0-2) of record batch and legacy message attributes.
enum class compression : std::int8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };

/// The codec named by attribute bits 0-2, or std::nullopt for the unassigned ids 5-7.
std::optional<compression> compression_from_attributes(std::int16_t attributes) noexcept;

/// A short lower-case name ("none", "gzip", "snappy", "lz4", "zstd"), "unknown" otherwise.
const char* to_string(compression codec) noexcept;

/// Decompresses `input` written with `codec` into `out`, which is cleared first (its capacity is
/// reused). At most `max_output` bytes are accepted.
///
/// Formats accepted:
///   - gzip: one or more concatenated gzip members (zlib streams are accepted too). Bytes after
///     the last member that do not start another member are ignored, as Java's GZIPInputStream
///     does.
///   - snappy: a raw snappy block (librdkafka and most non-Java producers) or the xerial framing
///     of Java producers (magic "\x82SNAPPY\0", int32 version, int32 compat, then blocks of
///     int32 big-endian length + raw snappy data).
///   - lz4: one or more LZ4 frames. Frames written by Kafka before 0.10 (legacy magic 0 messages)
///     carry a header checksum computed over the magic number as well (KAFKA-3160); such a
///     checksum is recognised exactly and accepted. Any other bad header checksum is an error.
///   - zstd: one or more frames, content size known or not (streaming decompression). The window
///     the decoder may allocate is capped at 2^max(23, min(27, log2(max_output))) bytes; a frame
///     that needs a larger window is rejected with decompression_bound. Frames in the pre-1.0
///     legacy formats, which Kafka never wrote and whose window the cap cannot reach, are refused
///     (decompression_failed).
///   - none: a bounded copy.
///
/// Returns: {} on success; codec_errc::decompression_bound when the output would exceed
/// max_output; codec_errc::decompression_failed for corrupt or truncated input;
/// codec_errc::unknown_compression for a codec outside the enum; std::errc::not_enough_memory if
/// an allocation failed. On error `out` holds unspecified (partial) data. Never throws.
/// Thread-safe (no shared state).
std::error_code decompress(compression codec, std::span<const std::uint8_t> input,
                           std::size_t max_output, bytes& out) noexcept;

/// Compresses `input` with `codec` into `out` (cleared first). gzip writes one gzip member at the
/// default level; snappy writes a raw snappy block (use compress_snappy_xerial for Java's
/// framing); lz4 writes one LZ4 frame with independent 64 KiB blocks and no content size, the
/// shape Java's Kafka LZ4 reader understands; zstd writes one frame at level 3.
///
/// Returns {} on success; codec_errc::oversized for input above 2^31-1 bytes (no Kafka batch can
/// hold it); codec_errc::unknown_compression; std::errc::not_enough_memory. Never throws.
std::error_code compress(compression codec, std::span<const std::uint8_t> input, bytes& out) noexcept;

/// Writes `input` in the xerial snappy framing used by Java producers (version 1, compatible
/// version 1), split into raw snappy blocks of at most `block_size` input bytes (> 0). Same
/// results as compress().
std::error_code compress_snappy_xerial(std::span<const std::uint8_t> input, bytes& out,
                                       std::size_t block_size = 32 * 1024) noexcept;

namespace detail {
/// xxHash32 of `data` with `seed`: the LZ4 frame header checksum is (xxh32(descriptor, 0) >> 8).
/// Exposed for tests of the legacy lz4 header handling.
std::uint32_t xxh32(std::span<const std::uint8_t> data, std::uint32_t seed) noexcept;
}  // namespace detail

}  // namespace kgroup::protocol
