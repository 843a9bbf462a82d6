// CRC-32C (Castagnoli), the checksum of Kafka record batches (magic 2).
//
// Pure code. The path is chosen once at run time from what the CPU supports: for inputs of 256
// bytes and more, folding with carry-less multiplication on 512-bit registers (VPCLMULQDQ with
// AVX-512F/VL); below that, or without those, the SSE4.2 crc32 instruction; without SSE4.2 a
// portable slicing-by-8 table implementation. All give identical results; tests compare them.
#pragma once

#include <cstddef>
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

/// The ways crc32c_extend can go, each needing what the one before needs and more: a CPU that
/// supports one supports those before it.
enum class crc32c_path {
  portable,  ///< slicing-by-8 tables
  sse42,     ///< the crc32 instruction, three interleaved stripes from 1.5 KB on
  fold512,   ///< + VPCLMULQDQ folding of 512-bit registers from 256 bytes on (AVX-512F/VL, PCLMULQDQ)
};
/// The path crc32c_extend takes on this CPU (chosen once, at the first call).
crc32c_path crc32c_selected_path() noexcept;
/// True when this CPU can run `path`.
bool crc32c_path_supported(crc32c_path path) noexcept;
/// crc32c_extend along `path` (the portable one if the CPU cannot run it), for tests and benches.
std::uint32_t crc32c_extend_along(crc32c_path path, std::uint32_t crc,
                                  std::span<const std::uint8_t> data) noexcept;
/// The input length from which the fold paths fold; shorter inputs take the crc32 instruction.
std::size_t crc32c_fold_threshold() noexcept;
}  // namespace detail

}  // namespace kgroup::protocol
