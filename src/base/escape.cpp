// Escaping of peer-controlled text before it reaches a log line or an error (see base/log.hpp).
// Its own file, with no dependencies, so the fuzz targets of the security parsers can link it.
#include <cstddef>
#include <string>
#include <string_view>

#include "base/log.hpp"

namespace kgroup::detail {

namespace {

// The length of the valid UTF-8 sequence at `s[i]` (a byte >= 0x80) that is safe to show, 0 when
// it is invalid or a character to escape (C1 controls, line separators, bidi controls).
std::size_t safe_utf8_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  const unsigned char c = at(0);
  const auto cont = [&](std::size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
    return at(k) >= lo && at(k) <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) {
    if (!cont(1)) return 0;
    return c == 0xc2 && at(1) < 0xa0 ? 0 : 2;  // U+0080..U+009F: C1 controls
  }
  if (c >= 0xe0 && c <= 0xef) {
    const bool ok = c == 0xe0 ? cont(1, 0xa0) : c == 0xed ? cont(1, 0x80, 0x9f) : cont(1);
    if (!ok || !cont(2)) return 0;
    if (c == 0xe2 && at(1) == 0x80 && at(2) >= 0xa8 && at(2) <= 0xae) return 0;  // U+2028..U+202E
    if (c == 0xe2 && at(1) == 0x81 && at(2) >= 0xa6 && at(2) <= 0xa9) return 0;  // U+2066..U+2069
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const bool ok = c == 0xf0 ? cont(1, 0x90) : c == 0xf4 ? cont(1, 0x80, 0x8f) : cont(1);
    return ok && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string escape_nonprintable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const std::size_t n = safe_utf8_length(text, i); n != 0) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
    ++i;
  }
  return out;
}

}  // namespace kgroup::detail
