#include "data/next_offset.hpp"

#include <algorithm>
#include <limits>

namespace kgroup::data {

namespace {

std::int64_t load_i64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}
std::int32_t load_i32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return static_cast<std::int32_t>(v);
}

}  // namespace

std::int64_t next_fetch_offset(std::span<const std::uint8_t> records, std::int64_t from,
                               std::int32_t* last_epoch) noexcept {
  // Batch and legacy message layouts share the first 17 bytes: offset, length, (epoch|crc), magic.
  std::int64_t next = from;
  std::size_t pos = 0;
  while (records.size() - pos >= 17) {
    const std::uint8_t* p = records.data() + pos;
    const std::int64_t base = load_i64(p);
    const std::int32_t length = load_i32(p + 8);
    if (length < 0 || static_cast<std::size_t>(length) > records.size() - pos - 12) break;  // partial tail
    const std::int8_t magic = static_cast<std::int8_t>(p[16]);
    std::int64_t last = base;
    std::int32_t epoch = -1;
    if (magic >= 2) {
      if (length < 15) break;
      // last offset delta; a batch whose offsets leave int64 (a broker's bytes) ends the data as
      // a partial batch does: the record cursor reports it as corrupt (issue 31, found by
      // kgroup-fuzz-broker; the sum overflowed, undefined behaviour).
      if (__builtin_add_overflow(base, std::int64_t{load_i32(p + 23)}, &last)) break;
      epoch = load_i32(p + 12);  // partition leader epoch
    }
    if (last == std::numeric_limits<std::int64_t>::max()) break;  // no offset after it
    if (last_epoch != nullptr && last + 1 > next) *last_epoch = epoch;
    next = std::max(next, last + 1);
    pos += 12 + static_cast<std::size_t>(length);
  }
  return next;
}

}  // namespace kgroup::data
