// ISO-8601 durations as Java's Duration.parse() reads them (PnDTnHnMn.nS), for
// auto.offset.reset=by_duration:<duration> (KIP-1106). Pure function, header only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kgroup::base {

/// The duration `text` spells (days, hours, minutes, seconds with up to nine fraction digits;
/// letters in either case), truncated to milliseconds. nullopt when it is not such a duration,
/// is signed (KIP-1106 allows no negative duration; kgroup accepts no sign at all), names no
/// part, or does not fit in 64-bit milliseconds.
inline std::optional<std::chrono::milliseconds> parse_iso8601_duration(std::string_view text) {
  const auto upper = [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  if (text.empty() || upper(text[0]) != 'P') return std::nullopt;
  ++i;
  constexpr std::int64_t max_ms = INT64_MAX / 2;  // headroom for now() minus the duration
  std::int64_t total = 0;
  bool any = false;
  bool in_time = false;
  bool time_part = false;
  // Each designator at most once and in order: D, then after T: H, M, S.
  int last = -1;
  const auto add = [&](std::int64_t value, std::int64_t unit_ms) {
    if (value > max_ms / unit_ms) return false;
    total += value * unit_ms;
    return total <= max_ms;
  };
  while (i < text.size()) {
    if (upper(text[i]) == 'T') {
      if (in_time) return std::nullopt;
      in_time = true;
      last = 0;
      ++i;
      continue;
    }
    if (!digit(text[i])) return std::nullopt;
    std::int64_t value = 0;
    for (; i < text.size() && digit(text[i]); ++i) {
      if (value > (INT64_MAX - 9) / 10) return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    std::int64_t fraction_ms = 0;
    bool fraction = false;
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      fraction = true;
      ++i;
      int n = 0;
      std::int64_t scale = 100;
      for (; i < text.size() && digit(text[i]); ++i, ++n) {
        if (n >= 9) return std::nullopt;
        fraction_ms += (text[i] - '0') * scale;
        scale /= 10;
      }
      if (n == 0) return std::nullopt;
    }
    if (i >= text.size()) return std::nullopt;
    const char unit = upper(text[i++]);
    int order = 0;
    std::int64_t unit_ms = 0;
    if (!in_time && unit == 'D') {
      order = 1;
      unit_ms = 86400000;
    } else if (in_time && unit == 'H') {
      order = 1;
      unit_ms = 3600000;
    } else if (in_time && unit == 'M') {
      order = 2;
      unit_ms = 60000;
    } else if (in_time && unit == 'S') {
      order = 3;
      unit_ms = 1000;
    } else {
      return std::nullopt;
    }
    if (fraction && unit != 'S') return std::nullopt;
    if (order <= last) return std::nullopt;
    last = order;
    if (!add(value, unit_ms) || !add(fraction_ms, 1)) return std::nullopt;
    any = true;
    time_part = time_part || in_time;
  }
  if (!any || (in_time && !time_part)) return std::nullopt;
  return std::chrono::milliseconds(total);
}

}  // namespace kgroup::base
