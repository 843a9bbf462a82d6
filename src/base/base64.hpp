// Base64 (RFC 4648): the padded standard form (section 4: SCRAM, kgroup-consume's binary keys and
// values) and the unpadded URL-safe form (section 5: JWT parts). The project's one implementation.
//
// Header-only on purpose: kgroup-consume may link a shared libkgroup, which exports nothing of
// src/, so a compiled copy in the library would be out of its reach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup::base {

namespace detail {

inline constexpr char base64_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
inline constexpr char base64url_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline std::string base64_encode(const std::uint8_t* in, std::size_t size, const char* digits, bool pad) {
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const std::uint32_t n = std::uint32_t{in[i]} << 16 | std::uint32_t{in[i + 1]} << 8 | in[i + 2];
    out += digits[n >> 18];
    out += digits[(n >> 12) & 63];
    out += digits[(n >> 6) & 63];
    out += digits[n & 63];
  }
  if (const std::size_t rest = size - i; rest > 0) {
    const std::uint32_t n = std::uint32_t{in[i]} << 16 | (rest == 2 ? std::uint32_t{in[i + 1]} << 8 : 0);
    out += digits[n >> 18];
    out += digits[(n >> 12) & 63];
    if (rest == 2) out += digits[(n >> 6) & 63];
    if (pad) out.append(3 - rest, '=');
  }
  return out;
}

// The 6-bit value of `c` in the alphabet whose last two digits are `c62` and `c63`; -1 outside it.
inline int base64_value(char c, char c62, char c63) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == c62) return 62;
  if (c == c63) return 63;
  return -1;
}

// Decodes `text` whose padding, if any, has been removed. Canonical only: a final group of one
// digit is no whole byte, and the bits a short final group leaves unused must be zero (RFC 4648
// 3.5), so that every byte string has exactly one encoding.
inline bool base64_decode_unpadded(std::string_view text, char c62, char c63,
                                   std::vector<std::uint8_t>& out) {
  out.clear();
  if (text.size() % 4 == 1) return false;
  out.reserve(text.size() / 4 * 3 + 2);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const std::size_t digits = text.size() - i < 4 ? text.size() - i : 4;
    std::uint32_t n = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      int v = 0;
      if (k < digits) {
        v = base64_value(text[i + k], c62, c63);
        if (v < 0) return false;
      }
      n = n << 6 | static_cast<std::uint32_t>(v);
    }
    if ((digits == 3 && (n & 0xFF) != 0) || (digits == 2 && (n & 0xFFFF) != 0)) return false;
    out.push_back(static_cast<std::uint8_t>(n >> 16));
    if (digits > 2) out.push_back(static_cast<std::uint8_t>(n >> 8));
    if (digits > 3) out.push_back(static_cast<std::uint8_t>(n));
  }
  return true;
}

}  // namespace detail

/// Base64 with the standard alphabet and '=' padding (RFC 4648 section 4).
inline std::string base64_encode(std::span<const std::uint8_t> bytes) {
  return detail::base64_encode(bytes.data(), bytes.size(), detail::base64_digits, true);
}
inline std::string base64_encode(std::string_view bytes) {
  return detail::base64_encode(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(),
                               detail::base64_digits, true);
}

/// Decodes the padded standard form into `out`. False (with `out` unspecified) for a length that
/// is not a multiple of 4, a character outside the alphabet, padding anywhere but at the end or
/// of the wrong length, or a non-canonical final group.
inline bool base64_decode(std::string_view text, std::vector<std::uint8_t>& out) {
  out.clear();
  if (text.size() % 4 != 0) return false;
  std::size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  return detail::base64_decode_unpadded(text.substr(0, text.size() - pad), '+', '/', out);
}

/// Base64url: the URL-safe alphabet ('-', '_') without padding (RFC 4648 section 5), as JWTs use.
inline std::string base64url_encode(std::string_view bytes) {
  return detail::base64_encode(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(),
                               detail::base64url_digits, false);
}

/// Decodes the unpadded URL-safe form into `out`. False for '=', a character outside that
/// alphabet (so '+' and '/' too), a length of 4n+1 or a non-canonical final group.
inline bool base64url_decode(std::string_view text, std::vector<std::uint8_t>& out) {
  return detail::base64_decode_unpadded(text, '-', '_', out);
}

}  // namespace kgroup::base
