#include "assign/sticky_user_data.hpp"

#include <limits>
#include <stdexcept>

#include "protocol/primitives.hpp"

namespace kgroup::assign {

std::vector<std::uint8_t> encode_sticky_user_data(std::span<const TopicPartitions> partitions,
                                                  std::optional<std::int32_t> generation) {
  std::vector<std::uint8_t> out;
  std::size_t size = 4 + (generation ? 4 : 0);
  for (const auto& tp : partitions) size += 2 + tp.topic.size() + 4 + 4 * tp.partitions.size();
  out.reserve(size);
  protocol::writer w(out);
  w.write_array_length(static_cast<std::int32_t>(partitions.size()), false);
  for (const auto& tp : partitions) {
    if (tp.topic.size() > static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max())) {
      throw std::invalid_argument("topic name too long for StickyAssignorUserData");
    }
    w.write_string(tp.topic, false);
    w.write_array_length(static_cast<std::int32_t>(tp.partitions.size()), false);
    for (std::int32_t p : tp.partitions) w.write_int32(p);
  }
  if (generation) w.write_int32(*generation);
  return out;
}

std::error_code decode_sticky_user_data(std::span<const std::uint8_t> in, sticky_user_data& out) {
  out = {};
  protocol::reader r(in);
  // Smallest entry: empty topic name (2) and an empty partition array (4).
  const std::int32_t n = r.read_array_length(false, false, 6);
  if (!r.ok()) return r.error();
  protocol::reserve_for(out.partitions, r, n);
  for (std::int32_t i = 0; i < n && r.ok(); ++i) {
    auto& tp = out.partitions.emplace_back();
    tp.topic = r.read_string(false);
    const std::int32_t count = r.read_array_length(false, false, 4);
    if (!r.ok()) break;
    tp.partitions.resize(static_cast<std::size_t>(count));
    for (auto& p : tp.partitions) p = r.read_int32();
  }
  if (!r.ok()) {
    const auto e = r.error();
    out = {};
    return e;
  }
  if (r.remaining() >= 4) out.generation = r.read_int32();
  return {};
}

std::vector<std::uint8_t> encode_generation_user_data(std::int32_t generation) {
  std::vector<std::uint8_t> out;
  out.reserve(4);
  protocol::writer w(out);
  w.write_int32(generation);
  return out;
}

std::optional<std::int32_t> decode_generation_user_data(std::span<const std::uint8_t> in) noexcept {
  if (in.size() != 4) return std::nullopt;
  protocol::reader r(in);
  return r.read_int32();
}

sticky_user_data interpret_user_data(const std::optional<std::vector<std::uint8_t>>& user_data) {
  sticky_user_data out;
  if (!user_data || user_data->empty()) return out;
  // Four bytes are ambiguous: a generation (Java's cooperative format) or an empty v0 array.
  // Either way nothing is owned, so reading them as a generation loses nothing.
  if (auto generation = decode_generation_user_data(*user_data)) {
    out.generation = generation;
    return out;
  }
  if (decode_sticky_user_data(*user_data, out)) return {};
  return out;
}

}  // namespace kgroup::assign
