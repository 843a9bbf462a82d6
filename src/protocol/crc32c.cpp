#include "protocol/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KGROUP_CRC32C_X86 1
#include <immintrin.h>
#endif

namespace kgroup::protocol {

namespace {

constexpr std::uint32_t castagnoli_reflected = 0x82F63B78u;

// Where the CPU can fold (update_fold512 below), inputs shorter than this take the crc32
// instruction instead (update_hardware); docs/DESIGN.md (issue 37) has the measurement.
constexpr std::size_t fold_threshold = 256;

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

// ---------------------------------------------------------------------------------------------
// Folding with carry-less multiplication (VPCLMULQDQ on 512-bit registers)
//
// Notation. The message is a bit stream m_0 m_1 ... m_{N-1} (a reflected CRC sends each byte's
// least significant bit first), read as the polynomial M(x) = sum m_i x^(N-1-i) over GF(2).
// The raw register after the message (from a zero register) is M(x) x^32 mod P, with
// P = x^32 + 0x1EDC6F41 (CRC-32C), and only M's class mod P matters. A w-bit integer v loaded
// little-endian from memory is "reflected": its bit b is the coefficient of x^(w-1-b), so 16
// bytes loaded into a 128-bit lane X = (lo, hi qwords) stand for X(x) = L(x) x^64 + H(x), L and
// H the qwords as reflected 64-bit values.
//
// Carry-less product of reflected values. For 64-bit a (polynomial A, bit b -> x^(63-b)) and c
// (C likewise), the integer clmul(a, c) has bit e = b + d for each pair of set bits; read as a
// reflected 128-bit value (bit e -> x^(127-e)) it stands for x A(x) C(x): one factor x more
// than the plain product.
//
// Folding forward by D bits. A lane X with T bits of message after it contributes X(x) x^T. The
// lane D bits further on has T - D bits after it, so adding Y == X x^D (mod P) into that lane
// keeps the message's class mod P: X x^D = L x^(64+D) + H x^D. With constants c_lo, c_hi:
//   clmul(lo, c_lo) xor clmul(hi, c_hi)  stands for  x L C_lo + x H C_hi,
// so we need C_lo == x^(63+D) and C_hi == x^(D-1) (mod P). A residue R(x) = x^n mod P has
// degree < 32; as the reflected 64-bit value reflect32(R) (in the low 32 bits: bit b -> x^(63-b),
// so bit 31-j -> x^(32+j)) it stands for R(x) x^32. Hence
//   c_lo = reflect32(x^(D+31) mod P),  c_hi = reflect32(x^(D-33) mod P),
// each a 32-bit number, and the products have at most 95 bits: the sum fits the 128-bit lane.
//
// The end. The last lane X (no message bits after it) stands for a 128-bit message with the
// same class mod P as everything folded so far, so the crc32 instruction over its 16 bytes from
// a zero register gives the register (linearity), and the bytes after it continue from there.
// The start. A register r before the message is the same as r xored into its first four bytes
// (r x^(8n) == r x^(8n-32) x^32), so the first lane takes it and the folding starts from zero.
// The derivation was checked first with Python integers against a bitwise CRC-32C.

// x^n mod P in normal (not reflected) form: bit j is the coefficient of x^j.
constexpr std::uint32_t x_pow_mod(unsigned n) noexcept {
  constexpr std::uint32_t castagnoli_normal = 0x1EDC6F41u;  // P without its x^32 term
  std::uint32_t v = 1;
  for (unsigned i = 0; i < n; ++i) v = (v & 0x80000000u) ? (v << 1) ^ castagnoli_normal : v << 1;
  return v;
}

constexpr std::uint32_t reflect32(std::uint32_t v) noexcept {
  std::uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}

// The two constants that fold a 128-bit lane forward by `bits` (see above).
struct fold_constants {
  std::uint64_t lo;  // multiplies the lane's low qword (the earlier 8 bytes)
  std::uint64_t hi;  // multiplies the high qword
};

constexpr fold_constants fold_by(unsigned bits) noexcept {
  return {reflect32(x_pow_mod(bits + 31)), reflect32(x_pow_mod(bits - 33))};
}

static_assert(x_pow_mod(32) == 0x1EDC6F41u, "x^32 == P - x^32 (mod P)");
static_assert(reflect32(0x1EDC6F41u) == castagnoli_reflected);

// Lane distances used below: the next 16 bytes (128 bits), the next 64 bytes (one zmm register,
// 512), the next 256 bytes (four zmm registers in flight, 2048), and the final reduction of a
// zmm's four lanes onto its last (384, 256, 128).
constexpr fold_constants fold_128 = fold_by(128);
constexpr fold_constants fold_256 = fold_by(256);
constexpr fold_constants fold_384 = fold_by(384);
constexpr fold_constants fold_512 = fold_by(512);
constexpr fold_constants fold_2048 = fold_by(2048);

// Every function of the fold path carries the same target, so that they inline into one another
// with VEX/EVEX encodings throughout (no mix with legacy SSE encodings while zmm state is live).
#define KGROUP_CRC32C_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

// GCC 12's AVX-512 intrinsics (broadcast, shuffle, extract, the cast to 128 bits) start from an
// "undefined" register that it then reports as used uninitialized once inlined (GCC bug 105593,
// fixed in GCC 13); the warning is about its header, not this code.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

KGROUP_CRC32C_TARGET_AVX512 inline __m128i fold_xmm(__m128i x, __m128i k, __m128i next) noexcept {
  // 0x96: a xor b xor c in one instruction.
  return _mm_ternarylogic_epi64(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11), next,
                                0x96);
}

KGROUP_CRC32C_TARGET_AVX512 inline __m128i constants_xmm(fold_constants k) noexcept {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

KGROUP_CRC32C_TARGET_AVX512 inline __m128i load_xmm(const std::uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Folds the 128-bit lane x over the remaining whole 16-byte blocks, hands the result to the crc32
// instruction and finishes the tail bytes. Returns the raw register.
KGROUP_CRC32C_TARGET_AVX512 std::uint32_t finish_xmm(__m128i x, const std::uint8_t* p,
                                                     std::size_t n) noexcept {
  const __m128i k128 = constants_xmm(fold_128);
  while (n >= 16) {
    x = fold_xmm(x, k128, load_xmm(p));
    p += 16;
    n -= 16;
  }
  std::uint64_t c = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(x)));
  c = _mm_crc32_u64(c, static_cast<std::uint64_t>(_mm_extract_epi64(x, 1)));
  return update_hardware_serial(static_cast<std::uint32_t>(c), p, n);
}

KGROUP_CRC32C_TARGET_AVX512 inline __m512i fold_zmm(__m512i x, __m512i k, __m512i next) noexcept {
  // 0x96: a xor b xor c in one instruction.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                   next, 0x96);
}

// The constants in each of the four lanes.
KGROUP_CRC32C_TARGET_AVX512 inline __m512i constants_zmm(fold_constants k) noexcept {
  const auto lo = static_cast<long long>(k.lo);
  const auto hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

KGROUP_CRC32C_TARGET_AVX512 inline __m512i load_zmm(const std::uint8_t* p) noexcept {
  return _mm512_loadu_si512(p);
}

// 512-bit VPCLMULQDQ: four zmm registers (16 lanes, 256 bytes) in flight, each folded 256 bytes
// (2048 bits) forward per round; then one zmm folded 64 bytes at a time; then its four lanes
// onto the last one. Needs n >= 64.
KGROUP_CRC32C_TARGET_AVX512 std::uint32_t update_fold512(std::uint32_t c, const std::uint8_t* p,
                                                         std::size_t n) noexcept {
  const __m512i k512 = constants_zmm(fold_512);
  __m512i x0 = _mm512_xor_si512(load_zmm(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
  if (n >= 256) {
    const __m512i k2048 = constants_zmm(fold_2048);
    __m512i x1 = load_zmm(p + 64);
    __m512i x2 = load_zmm(p + 128);
    __m512i x3 = load_zmm(p + 192);
    p += 256;
    n -= 256;
    while (n >= 256) {
      x0 = fold_zmm(x0, k2048, load_zmm(p));
      x1 = fold_zmm(x1, k2048, load_zmm(p + 64));
      x2 = fold_zmm(x2, k2048, load_zmm(p + 128));
      x3 = fold_zmm(x3, k2048, load_zmm(p + 192));
      p += 256;
      n -= 256;
    }
    x0 = fold_zmm(x0, k512, x1);
    x0 = fold_zmm(x0, k512, x2);
    x0 = fold_zmm(x0, k512, x3);
  } else {
    p += 64;
    n -= 64;
  }
  while (n >= 64) {
    x0 = fold_zmm(x0, k512, load_zmm(p));
    p += 64;
    n -= 64;
  }
  // Lanes 0, 1, 2 (lowest first: the earliest bytes) move 384, 256 and 128 bits forward onto lane
  // 3; lane 3's constants are zero and it comes through the mask instead.
  const __m512i kred =
      _mm512_set_epi64(0, 0, static_cast<long long>(fold_128.hi), static_cast<long long>(fold_128.lo),
                       static_cast<long long>(fold_256.hi), static_cast<long long>(fold_256.lo),
                       static_cast<long long>(fold_384.hi), static_cast<long long>(fold_384.lo));
  const __m512i t = fold_zmm(x0, kred, _mm512_maskz_mov_epi64(0xC0, x0));
  // The xor of the four lanes: swap the halves and add, swap neighbouring lanes and add.
  const __m512i t2 = _mm512_xor_si512(t, _mm512_shuffle_i64x2(t, t, 0x4E));     // lanes 2 3 0 1
  const __m512i t4 = _mm512_xor_si512(t2, _mm512_shuffle_i64x2(t2, t2, 0xB1));  // lanes 1 0 3 2
  const __m128i x = _mm512_castsi512_si128(t4);
  return finish_xmm(x, p, n);
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#undef KGROUP_CRC32C_TARGET_AVX512

detail::crc32c_path detect_path() noexcept {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("sse4.2")) return detail::crc32c_path::portable;
  // libgcc's checks of the AVX-512 features include the OS's saving of the zmm state (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul")) {
    return detail::crc32c_path::fold512;
  }
  return detail::crc32c_path::sse42;
}
#endif

detail::crc32c_path selected_path() noexcept {
#ifdef KGROUP_CRC32C_X86
  // A function-local static: the CPU check runs once, thread-safely.
  static const detail::crc32c_path path = detect_path();
  return path;
#else
  return detail::crc32c_path::portable;
#endif
}

// The raw register after `n` bytes at `p` from register `c`, along `path` (which the CPU must
// support).
std::uint32_t update(detail::crc32c_path path, std::uint32_t c, const std::uint8_t* p,
                     std::size_t n) noexcept {
  switch (path) {
#ifdef KGROUP_CRC32C_X86
    case detail::crc32c_path::fold512:
      return n >= fold_threshold ? update_fold512(c, p, n) : update_hardware(c, p, n);
    case detail::crc32c_path::sse42:
      return update_hardware(c, p, n);
#endif
    default:
      return update_portable(c, p, n);
  }
}

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept {
  return ~update(selected_path(), ~crc, data.data(), data.size());
}

std::uint32_t crc32c(std::span<const std::uint8_t> data) noexcept { return crc32c_extend(0, data); }

namespace detail {
std::uint32_t crc32c_extend_portable(std::uint32_t crc, std::span<const std::uint8_t> data) noexcept {
  return ~update_portable(~crc, data.data(), data.size());
}
bool crc32c_hardware_available() noexcept {
  return selected_path() != crc32c_path::portable;
}
crc32c_path crc32c_selected_path() noexcept {
  return selected_path();
}
bool crc32c_path_supported(crc32c_path path) noexcept {
  return static_cast<int>(path) <= static_cast<int>(selected_path());
}
std::uint32_t crc32c_extend_along(crc32c_path path, std::uint32_t crc,
                                  std::span<const std::uint8_t> data) noexcept {
  if (!crc32c_path_supported(path)) path = crc32c_path::portable;
  return ~update(path, ~crc, data.data(), data.size());
}
std::size_t crc32c_fold_threshold() noexcept {
  return fold_threshold;
}
}  // namespace detail

}  // namespace kgroup::protocol
