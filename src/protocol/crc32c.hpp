// CRC-32C (Castagnoli), the checksum of Kafka record batches (magic 2).
//
// Pure code. The hardware path (SSE4.2 crc32 instruction) is chosen once at run time when the CPU
// supports it; otherwise a portable slicing-by-8 table implementation runs. Both give identical
// results; tests compare them.
#pragma once

#include <cstdint>
#include <span>

namespace kgroup::protocol {

/// CRC-32C of `data` (reflected, initial value and final xor 0xFFFFFFFF, as in RFC 3720 and Kafka).
/// crc32c("123456789") == 0xE3069283. Thread-safe, never throws.
std::uint32_t crc32c(std::span<const std::uint8_t> data) noexcept;

/// Extends a finished CRC-32C `crc` of some prefix with `data`, so that
/// crc32c_extend(crc32c(a), b) == crc32c(a + b). crc32c_extend(0, d) == crc32c(d).
std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept;

namespace detail {
/// The portable table implementation, exposed so tests can compare it with the hardware path.
std::uint32_t crc32c_extend_portable(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept;
/// True when crc32c_extend uses the CPU's crc32 instruction.
bool crc32c_hardware_available() noexcept;
}  // namespace detail

}  // namespace kgroup::protocol
