#include "protocol/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KGROUP_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace kgroup::protocol {

namespace {

constexpr std::uint32_t castagnoli_reflected = 0x82F63B78u;

// table[k][b] is the CRC contribution of byte b followed by k zero bytes: slicing-by-8 folds
// eight input bytes per step with eight independent lookups.
using crc_tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr crc_tables make_tables() {
  crc_tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ castagnoli_reflected : c >> 1;
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}

constexpr crc_tables tables = make_tables();

// Works on the raw (not yet inverted) register.
std::uint32_t update_portable(std::uint32_t c, const std::uint8_t* p, std::size_t n) noexcept {
  while (n >= 8) {
    // Little-endian assembly of the bytes keeps this independent of the host byte order.
    std::uint32_t lo = c ^ (static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
                            static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24);
    c = tables[7][lo & 0xFFu] ^ tables[6][(lo >> 8) & 0xFFu] ^ tables[5][(lo >> 16) & 0xFFu] ^
        tables[4][lo >> 24] ^ tables[3][p[4]] ^ tables[2][p[5]] ^ tables[1][p[6]] ^ tables[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ tables[0][(c ^ *p++) & 0xFFu];
  return c;
}

#ifdef KGROUP_CRC32C_X86
// The crc32 instruction's latency is three cycles and its throughput one per cycle: one chain of
// dependent steps uses a third of it. Long inputs are read in rounds of three stripes of
// `stripe` bytes, each stripe its own chain (the second and third from a zero register), then
// joined: the register is linear in (register, data), so crc(r, A B) = shift(crc(r, A), |B|) xor
// crc(0, B), where shift advances a register over |B| zero bytes. shift over one stripe is a
// 32x32 bit matrix, applied as four byte-indexed tables built once from the instruction itself.
constexpr std::size_t stripe = 512;

__attribute__((target("sse4.2"))) std::uint32_t update_hardware_serial(std::uint32_t c, const std::uint8_t* p,
                                                                       std::size_t n) noexcept {
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);  // x86 is little-endian, which is what the instruction expects
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c64);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

using shift_tables = std::array<std::array<std::uint32_t, 256>, 4>;

// The register advanced over one stripe of zero bytes, for every byte value at each of the four
// byte positions (by linearity, the image of a register is the xor of its bytes' images).
shift_tables make_shift_tables() noexcept {
  static const std::array<std::uint8_t, stripe> zeros{};
  std::array<std::uint32_t, 32> bit{};
  for (unsigned i = 0; i < 32; ++i) bit[i] = update_hardware_serial(1u << i, zeros.data(), zeros.size());
  shift_tables t{};
  for (unsigned k = 0; k < 4; ++k) {
    for (unsigned b = 0; b < 256; ++b) {
      std::uint32_t v = 0;
      for (unsigned j = 0; j < 8; ++j) {
        if (b & (1u << j)) v ^= bit[8 * k + j];
      }
      t[k][b] = v;
    }
  }
  return t;
}

std::uint32_t shift_stripe(const shift_tables& t, std::uint32_t c) noexcept {
  return t[0][c & 0xFFu] ^ t[1][(c >> 8) & 0xFFu] ^ t[2][(c >> 16) & 0xFFu] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2"))) std::uint32_t update_hardware(std::uint32_t c, const std::uint8_t* p,
                                                                std::size_t n) noexcept {
  if (n >= 3 * stripe) {
    static const shift_tables shift = make_shift_tables();
    while (n >= 3 * stripe) {
      std::uint64_t a = c, b = 0, d = 0;
      for (std::size_t i = 0; i < stripe; i += 8) {
        std::uint64_t va, vb, vd;
        std::memcpy(&va, p + i, 8);
        std::memcpy(&vb, p + stripe + i, 8);
        std::memcpy(&vd, p + 2 * stripe + i, 8);
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        d = _mm_crc32_u64(d, vd);
      }
      c = shift_stripe(shift,
                       shift_stripe(shift, static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b)) ^
          static_cast<std::uint32_t>(d);
      p += 3 * stripe;
      n -= 3 * stripe;
    }
  }
  return update_hardware_serial(c, p, n);
}

bool detect_hardware() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

bool hardware_available() noexcept {
#ifdef KGROUP_CRC32C_X86
  // A function-local static: the CPU check runs once, thread-safely.
  static const bool available = detect_hardware();
  return available;
#else
  return false;
#endif
}

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept {
  std::uint32_t c = ~crc;
#ifdef KGROUP_CRC32C_X86
  if (hardware_available()) return ~update_hardware(c, data.data(), data.size());
#endif
  return ~update_portable(c, data.data(), data.size());
}

std::uint32_t crc32c(std::span<const std::uint8_t> data) noexcept { return crc32c_extend(0, data); }

namespace detail {
std::uint32_t crc32c_extend_portable(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept {
  return ~update_portable(~crc, data.data(), data.size());
}
bool crc32c_hardware_available() noexcept { return hardware_available(); }
}  // namespace detail

}  // namespace kgroup::protocol
