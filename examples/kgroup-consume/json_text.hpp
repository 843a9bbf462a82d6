// JSON strings for kgroup-consume's lines: Boost.JSON's escaping, with bytes that are not valid
// UTF-8 replaced by U+FFFD first (Boost.JSON's serializer copies string bytes as they are, which
// would make an invalid document). The tool's own copy of what the library keeps internal, so it
// builds against an installed kgroup with nothing but the public headers.
#pragma once

#include <boost/json/serializer.hpp>
#include <boost/json/string.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kgroup_consume {

/// Length of the valid UTF-8 sequence at the start of non-empty `s`, or 0 if it is not one
/// (truncated, overlong, a surrogate, or beyond U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view s) noexcept {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  std::uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1Fu;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0Fu;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  constexpr std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

/// Whether all of `s` is valid UTF-8.
inline bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence_length(s.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

/// `s` as a JSON string value, each byte that is not part of valid UTF-8 replaced by U+FFFD.
inline boost::json::string json_text(std::string_view s) {
  if (valid_utf8(s)) return boost::json::string(s);
  boost::json::string out;
  out.reserve(s.size() + 8);
  while (!s.empty()) {
    const std::size_t len = utf8_sequence_length(s);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, len));
      s.remove_prefix(len);
    }
  }
  return out;
}

/// True when `s` is printable ASCII without '"' or '\\': valid UTF-8 that JSON takes verbatim
/// (what Boost.JSON's serializer would write unchanged between the quotes). Eight bytes at a time:
/// a word has a byte below n when (w - n*ones) & ~w & highs is not zero (n <= 128), a zero byte
/// (one equal to c, after w ^ c*ones) when the same holds for n = 1.
inline bool plain_json_text(std::string_view s) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t highs = 0x8080808080808080ULL;
  const auto below = [](std::uint64_t w, std::uint64_t n) { return (w - n * ones) & ~w & highs; };
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if ((w & highs) | below(w, 0x20) | below(w ^ ('"' * ones), 1) | below(w ^ ('\\' * ones), 1)) return false;
  }
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
  }
  return true;
}

/// Appends `s` (valid UTF-8) as a JSON string literal, escaped by `sr` (one per document).
inline void append_json_string(std::string& out, boost::json::serializer& sr, std::string_view s) {
  sr.reset(s);
  // Straight into `out`: room for the quotes and a few escapes first, more while it needs more.
  std::size_t at = out.size();
  out.resize(at + s.size() + 8);
  for (;;) {
    at += sr.read(out.data() + at, out.size() - at).size();
    if (sr.done()) break;
    out.resize(out.size() + s.size() + 8);
  }
  out.resize(at);
}

}  // namespace kgroup_consume
