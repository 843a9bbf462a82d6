// A tiny, independent byte builder for codec tests. It deliberately shares no code with
// src/protocol (no writer), so expected byte vectors in tests are an independent check of the
// encoders: every appender is written out by hand from the Kafka protocol guide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup::test {

class byte_builder {
 public:
  std::vector<std::uint8_t> out;

  // Fixed-width big-endian integers.
  byte_builder& i8(std::int64_t v) { return be(static_cast<std::uint64_t>(v), 1); }
  byte_builder& i16(std::int64_t v) { return be(static_cast<std::uint64_t>(v), 2); }
  byte_builder& u16(std::uint64_t v) { return be(v, 2); }
  byte_builder& i32(std::int64_t v) { return be(static_cast<std::uint64_t>(v), 4); }
  byte_builder& u32(std::uint64_t v) { return be(v, 4); }
  byte_builder& i64(std::int64_t v) { return be(static_cast<std::uint64_t>(v), 8); }
  byte_builder& boolean(bool v) { return i8(v ? 1 : 0); }

  // Unsigned LEB128-style varint, 7 bits per byte, low group first.
  byte_builder& uvarint(std::uint64_t v) {
    do {
      std::uint8_t b = v & 0x7f;
      v >>= 7;
      if (v != 0) b |= 0x80;
      out.push_back(b);
    } while (v != 0);
    return *this;
  }
  // Zigzag: 0,-1,1,-2,... -> 0,1,2,3,...
  byte_builder& varint(std::int64_t v) {
    const std::uint64_t u =
        v < 0 ? (static_cast<std::uint64_t>(-(v + 1)) * 2 + 1) : static_cast<std::uint64_t>(v) * 2;
    return uvarint(u);
  }

  byte_builder& raw(std::initializer_list<std::uint8_t> b) {
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  byte_builder& raw(const std::vector<std::uint8_t>& b) {
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  byte_builder& chars(std::string_view s) {
    for (char c : s) out.push_back(static_cast<std::uint8_t>(c));
    return *this;
  }

  // STRING: int16 length + bytes; NULLABLE_STRING null: int16 -1.
  byte_builder& str(std::string_view s) { return i16(static_cast<std::int64_t>(s.size())).chars(s); }
  byte_builder& null_str() { return i16(-1); }
  // COMPACT_STRING: uvarint (length + 1) + bytes; null: uvarint 0.
  byte_builder& cstr(std::string_view s) { return uvarint(s.size() + 1).chars(s); }
  byte_builder& null_cstr() { return uvarint(0); }
  // Picks the encoding by flexibility.
  byte_builder& s(bool flex, std::string_view v) { return flex ? cstr(v) : str(v); }
  byte_builder& null_s(bool flex) { return flex ? null_cstr() : null_str(); }

  // BYTES: int32 length; COMPACT_BYTES: uvarint (length + 1).
  byte_builder& byts(const std::vector<std::uint8_t>& b) {
    i32(static_cast<std::int64_t>(b.size()));
    return raw(b);
  }
  byte_builder& cbyts(const std::vector<std::uint8_t>& b) {
    uvarint(b.size() + 1);
    return raw(b);
  }
  byte_builder& b(bool flex, const std::vector<std::uint8_t>& v) { return flex ? cbyts(v) : byts(v); }
  byte_builder& null_b(bool flex) { return flex ? uvarint(0) : i32(-1); }

  // ARRAY length: int32 n (-1 null); COMPACT_ARRAY: uvarint (n + 1) (0 null).
  byte_builder& arr(bool flex, std::int64_t n) {
    return flex ? uvarint(static_cast<std::uint64_t>(n + 1)) : i32(n);
  }

  byte_builder& uuid(std::uint8_t fill) {
    for (int k = 0; k < 16; ++k) out.push_back(static_cast<std::uint8_t>(fill + k));
    return *this;
  }

  // Empty tagged-field section (only in flexible versions).
  byte_builder& tags0(bool flex) { return flex ? uvarint(0) : *this; }

  // A tagged field: tag, size, then the payload built separately.
  byte_builder& tag(std::uint64_t t, const byte_builder& payload) {
    uvarint(t).uvarint(payload.out.size());
    return raw(payload.out);
  }

  std::size_t size() const { return out.size(); }

 private:
  byte_builder& be(std::uint64_t v, int n) {
    for (int k = n - 1; k >= 0; --k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
    return *this;
  }
};

}  // namespace kgroup::test

// ---------------------------------------------------------------------------------------------
// Checks shared by the message tests. They call the library's encode/decode (that is what they
// test); the expected bytes they compare against come from byte_builder above.
#ifdef KGROUP_TEST_MESSAGE_CHECKS
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "protocol/headers.hpp"
#include "protocol/messages.hpp"

namespace kgroup::test {

inline std::string hex(const std::vector<std::uint8_t>& b) {
  std::string s;
  char buf[4];
  for (std::size_t i = 0; i < b.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    if (i) s += (i % 16 == 0) ? "\n" : " ";
    s += buf;
  }
  return s;
}

/// encode(msg, v) == expected; decode(expected, v) == msg; every strict prefix fails to decode;
/// one trailing byte gives trailing_bytes, or, with the `trailing` out-parameter, decodes to the
/// same message with the extra bytes counted (issue 14); a prefix still fails in that mode.
template <class M>
void check_wire(const M& msg, std::int16_t v, const std::vector<std::uint8_t>& expected) {
  using namespace kgroup::protocol;
  INFO(M::name << " v" << v);
  bytes out;
  const std::error_code enc = encode(msg, v, out);
  INFO("encode: " << enc.message() << " (" << (enc ? "failed" : "ok") << ")");
  REQUIRE_FALSE(enc);
  CHECK(hex(out) == hex(expected));

  M back;
  const std::error_code dec = decode(expected, v, back);
  INFO("decode: " << dec.message());
  CHECK_FALSE(dec);
  CHECK(back == msg);

  std::size_t accepted = 0;
  std::size_t first_accepted = expected.size();
  for (std::size_t n = 0; n < expected.size(); ++n) {
    // An exact-size copy, so a sanitizer sees any read past the end.
    const bytes cut(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(n));
    M tmp;
    if (!decode(cut, v, tmp)) {
      ++accepted;
      if (first_accepted == expected.size()) first_accepted = n;
    }
  }
  INFO("first accepted prefix length " << first_accepted);
  CHECK(accepted == 0);

  bytes longer = expected;
  longer.push_back(0);
  M tmp;
  CHECK(decode(longer, v, tmp) == codec_errc::trailing_bytes);

  std::size_t trailing = 99;
  M tolerant;
  CHECK_FALSE(decode(expected, v, tolerant, &trailing));
  CHECK(trailing == 0);
  longer.insert(longer.end(), {0xde, 0xad});
  CHECK_FALSE(decode(longer, v, tolerant, &trailing));
  CHECK(trailing == 3);
  CHECK(tolerant == msg);
  if (!expected.empty()) {
    const bytes cut(expected.begin(), expected.end() - 1);
    CHECK(decode(cut, v, tolerant, &trailing));
  }
}

/// Decoded structs must be encodable, and re-encoding must be stable: if decode(in) gives x,
/// then encode(x) succeeds and decode(encode(x)) == x. Returns a description of the first
/// violation, or an empty string.
template <class M>
std::string reencode_problem(const std::vector<std::uint8_t>& in, std::int16_t v) {
  using namespace kgroup::protocol;
  M x;
  if (decode(in, v, x)) return {};
  bytes out;
  if (auto ec = encode(x, v, out))
    return "decoded value does not encode: " + ec.message() + " from " + hex(in);
  M y;
  if (auto ec = decode(out, v, y)) return "re-encoded bytes do not decode: " + ec.message() + " " + hex(out);
  if (!(x == y)) return "re-decoded value differs, from " + hex(in);
  return {};
}

/// Golden bytes at every supported version, plus the version bounds, plus:
/// - every version's struct encoded at every other version either fails with
///   field_not_supported / null_not_allowed or round-trips stably (decode, re-encode, same bytes);
/// - single-byte mutations of the golden bytes never crash and never decode to something the
///   encoder rejects.
template <class M, class Make, class Wire>
void check_all_versions(Make make, Wire wire) {
  using namespace kgroup::protocol;
  for (std::int16_t v = M::lowest_version; v <= M::highest_version; ++v) check_wire<M>(make(v), v, wire(v));

  std::string cross;
  for (std::int16_t u = M::lowest_version; u <= M::highest_version && cross.empty(); ++u) {
    for (std::int16_t v = M::lowest_version; v <= M::highest_version && cross.empty(); ++v) {
      bytes out;
      const std::error_code ec = encode(make(u), v, out);
      const std::string where = "struct of v" + std::to_string(u) + " at v" + std::to_string(v) + ": ";
      if (ec) {
        if (ec != codec_errc::field_not_supported && ec != codec_errc::null_not_allowed) {
          cross = where + ec.message();
        }
        continue;
      }
      M back;
      if (auto dec = decode(out, v, back)) {
        cross = where + "does not decode: " + dec.message();
        continue;
      }
      bytes again;
      if (encode(back, v, again) || again != out) cross = where + "re-encoding differs";
    }
  }
  INFO(M::name << " cross-version: " << cross);
  CHECK(cross.empty());

  std::string mutated;
  std::size_t tried = 0;
  for (std::int16_t v = M::lowest_version; v <= M::highest_version && mutated.empty(); ++v) {
    const bytes golden = wire(v);
    for (std::size_t i = 0; i < golden.size() && mutated.empty(); ++i) {
      const std::uint8_t b = golden[i];
      for (std::uint8_t x : {std::uint8_t{0x00}, std::uint8_t{0xff}, std::uint8_t{0x80}, std::uint8_t(b + 1),
                             std::uint8_t(b - 1)}) {
        if (x == b) continue;
        bytes in = golden;
        in[i] = x;
        ++tried;
        mutated = reencode_problem<M>(in, v);
        if (!mutated.empty()) {
          mutated = "v" + std::to_string(v) + " byte " + std::to_string(i) + ": " + mutated;
          break;
        }
      }
    }
  }
  INFO(M::name << " mutations tried: " << tried << "; " << mutated);
  CHECK(mutated.empty());
  bytes out;
  M tmp;
  CHECK(encode(M{}, static_cast<std::int16_t>(M::lowest_version - 1), out) ==
        codec_errc::unsupported_version);
  CHECK(encode(M{}, static_cast<std::int16_t>(M::highest_version + 1), out) ==
        codec_errc::unsupported_version);
  CHECK(out.empty());
  const bytes any{0x00, 0x00, 0x00, 0x00};
  CHECK(decode(any, static_cast<std::int16_t>(M::lowest_version - 1), tmp) ==
        codec_errc::unsupported_version);
  CHECK(decode(any, static_cast<std::int16_t>(M::highest_version + 1), tmp) ==
        codec_errc::unsupported_version);
}

/// For flexible versions whose last byte is the top-level (empty) tagged-field section: the same
/// message with unknown tags there decodes to the same struct.
template <class M, class Make, class Wire>
void check_unknown_top_tags(Make make, Wire wire) {
  using namespace kgroup::protocol;
  if (M::first_flexible_version < 0) return;
  // From the first flexible version the codec supports (the share messages are flexible from
  // v0 but start at v1).
  const std::int16_t from = std::max<std::int16_t>(M::first_flexible_version, M::lowest_version);
  for (std::int16_t v = from; v <= M::highest_version; ++v) {
    INFO(M::name << " v" << v);
    bytes in = wire(v);
    REQUIRE(in.back() == 0x00);
    in.pop_back();
    // tag 99 (1 byte payload), tag 128 (empty payload)
    in.insert(in.end(), {0x02, 0x63, 0x01, 0xaa, 0x80, 0x01, 0x00});
    M back;
    CHECK_FALSE(decode(in, v, back));
    CHECK(back == make(v));
  }
}

/// encode fails with `want` and leaves the output as it was.
template <class M>
void check_encode_fails(const M& msg, std::int16_t v, kgroup::protocol::codec_errc want) {
  using namespace kgroup::protocol;
  INFO(M::name << " v" << v);
  bytes out{0xee};
  CHECK(encode(msg, v, out) == want);
  CHECK(hex(out) == "ee");
}

/// An ignorable field set where the version lacks it is dropped: encoding `msg` gives the same
/// bytes as encoding `restricted`.
template <class M>
void check_dropped(const M& msg, const M& restricted, std::int16_t v) {
  using namespace kgroup::protocol;
  INFO(M::name << " v" << v);
  bytes a, b;
  CHECK_FALSE(encode(msg, v, a));
  CHECK_FALSE(encode(restricted, v, b));
  CHECK(hex(a) == hex(b));
  M back;
  CHECK_FALSE(decode(a, v, back));
  CHECK(back == restricted);
}

template <class M>
void check_decode_fails(const std::vector<std::uint8_t>& in, std::int16_t v,
                        kgroup::protocol::codec_errc want) {
  INFO(M::name << " v" << v);
  M back;
  CHECK(decode(in, v, back) == want);
}

}  // namespace kgroup::test
#endif  // KGROUP_TEST_MESSAGE_CHECKS
