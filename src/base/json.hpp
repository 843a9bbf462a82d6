// Writing JSON with Boost.JSON (base/boost_json.hpp): what Boost.JSON 1.81's serializer leaves to
// the caller. It copies string bytes as they are, so text that is not valid UTF-8 would make an
// invalid document: json_text() replaces such bytes with U+FFFD first. It writes doubles in
// exponent form (3.0 as "3E0") and non-finite ones as out-of-range numbers: append_json() writes
// the shortest decimal that reads back as the same double (3.0 as "3") and null for NaN and
// infinities, everything else as Boost.JSON does.
//
// Header-only (inline) on purpose: kgroup-consume uses it with its own copy of Boost.JSON (see
// base/boost_json.hpp), and nothing here may need a kgroup symbol.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/boost_json.hpp"

namespace kgroup::base {

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

namespace detail {

// Appends `s` as a JSON string literal, escaped by Boost.JSON's serializer (one per document).
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

// `open`, the elements of `range` written by `each` with commas between them, `close`.
template <class Range, class Each>
void append_json_sequence(std::string& out, char open, char close, const Range& range, Each each) {
  out += open;
  bool first = true;
  for (const auto& e : range) {
    if (!first) out += ',';
    first = false;
    each(e);
  }
  out += close;
}

inline void append_json(std::string& out, boost::json::serializer& sr, const boost::json::value& v) {
  char buf[32];
  const auto number = [&](auto n) {
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
    out.append(buf, ec == std::errc{} ? end : buf);
  };
  switch (v.kind()) {
    case boost::json::kind::object:
      append_json_sequence(out, '{', '}', v.get_object(), [&](const auto& kv) {
        append_json_string(out, sr, kv.key());
        out += ':';
        append_json(out, sr, kv.value());
      });
      break;
    case boost::json::kind::array:
      append_json_sequence(out, '[', ']', v.get_array(), [&](const auto& e) { append_json(out, sr, e); });
      break;
    case boost::json::kind::string: append_json_string(out, sr, v.get_string()); break;
    case boost::json::kind::int64: number(v.get_int64()); break;
    case boost::json::kind::uint64: number(v.get_uint64()); break;
    case boost::json::kind::double_:
      if (std::isfinite(v.get_double())) {
        number(v.get_double());
      } else {
        out += "null";
      }
      break;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case boost::json::kind::null: out += "null"; break;
  }
}

}  // namespace detail

/// Appends `v` as JSON text: Boost.JSON's serialization, except for doubles (see above).
inline void append_json(std::string& out, const boost::json::value& v) {
  boost::json::serializer sr;
  detail::append_json(out, sr, v);
}

/// `v` as JSON text (see append_json).
inline std::string to_json(const boost::json::value& v) {
  std::string out;
  append_json(out, v);
  return out;
}

}  // namespace kgroup::base
