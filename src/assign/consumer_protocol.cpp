#include "assign/consumer_protocol.hpp"

namespace kgroup::assign {
namespace {

template <class Message>
std::vector<typename Message::topic_partition> to_message_partitions(const std::vector<TopicPartitions>& in) {
  std::vector<typename Message::topic_partition> out;
  out.reserve(in.size());
  for (const auto& tp : in) out.push_back({tp.topic, tp.partitions});
  return out;
}

template <class MessagePartition>
std::vector<TopicPartitions> from_message_partitions(std::vector<MessagePartition>&& in) {
  std::vector<TopicPartitions> out;
  out.reserve(in.size());
  for (auto& tp : in) out.push_back({std::move(tp.topic), std::move(tp.partitions)});
  return out;
}

// The (topic, [partition]) array shared by both messages, read by hand for versions newer than the
// generated codec knows.
std::vector<TopicPartitions> read_partitions(protocol::reader& r) {
  std::vector<TopicPartitions> out;
  const std::int32_t n = r.read_array_length(false, false, 6);
  protocol::reserve_for(out, r, n);
  for (std::int32_t i = 0; i < n && r.ok(); ++i) {
    auto& tp = out.emplace_back();
    tp.topic = r.read_string(false);
    const std::int32_t count = r.read_array_length(false, false, 4);
    if (!r.ok()) break;
    tp.partitions.resize(static_cast<std::size_t>(count));
    for (auto& p : tp.partitions) p = r.read_int32();
  }
  return out;
}

void reset_subscription_fields(MemberSubscription& out) {
  out.topics.clear();
  out.user_data.reset();
  out.owned_partitions.clear();
  out.generation = -1;
  out.rack.reset();
}

}  // namespace

protocol::consumer_protocol_subscription to_message(const MemberSubscription& s) {
  protocol::consumer_protocol_subscription m;
  m.topics = s.topics;
  m.user_data = s.user_data;
  m.owned_partitions = to_message_partitions<protocol::consumer_protocol_subscription>(s.owned_partitions);
  m.generation_id = s.generation;
  m.rack_id = s.rack;
  return m;
}

void from_message(protocol::consumer_protocol_subscription&& m, MemberSubscription& out) {
  out.topics = std::move(m.topics);
  out.user_data = std::move(m.user_data);
  out.owned_partitions = from_message_partitions(std::move(m.owned_partitions));
  out.generation = m.generation_id;
  out.rack = std::move(m.rack_id);
}

protocol::consumer_protocol_assignment to_message(const MemberAssignment& a) {
  protocol::consumer_protocol_assignment m;
  m.assigned_partitions = to_message_partitions<protocol::consumer_protocol_assignment>(a.partitions);
  m.user_data = a.user_data;
  return m;
}

void from_message(protocol::consumer_protocol_assignment&& m, MemberAssignment& out) {
  out.partitions = from_message_partitions(std::move(m.assigned_partitions));
  out.user_data = std::move(m.user_data);
}

std::error_code encode_subscription(const MemberSubscription& s, std::int16_t version, protocol::bytes& out) {
  if (version < 0 || version > subscription_version_max) return protocol::codec_errc::unsupported_version;
  const std::size_t start = out.size();
  protocol::writer w(out);
  w.write_int16(version);
  if (auto ec = protocol::encode(to_message(s), version, out)) {
    out.resize(start);
    return ec;
  }
  return {};
}

namespace {

// The int16 version both embedded messages start with; negative versions are refused.
std::error_code read_version(std::span<const std::uint8_t> in, std::int16_t* version, std::int16_t& v) {
  protocol::reader r(in);
  v = r.read_int16();
  if (!r.ok()) return r.error();
  if (version != nullptr) *version = v;
  if (v < 0) return protocol::codec_errc::unsupported_version;
  return {};
}

}  // namespace

std::error_code decode_subscription(std::span<const std::uint8_t> in, MemberSubscription& out,
                                    std::int16_t* version) {
  reset_subscription_fields(out);
  std::int16_t v = 0;
  if (auto ec = read_version(in, version, v)) return ec;
  const auto body = in.subspan(2);
  if (v <= subscription_version_max) {
    protocol::consumer_protocol_subscription m;
    if (auto ec = protocol::decode(body, v, m)) return ec;
    from_message(std::move(m), out);
    return {};
  }
  // A newer version: the v3 fields come first and whatever follows is for newer readers.
  protocol::reader b(body);
  const std::int32_t n = b.read_array_length(false, false, 2);
  protocol::reserve_for(out.topics, b, n);
  for (std::int32_t i = 0; i < n && b.ok(); ++i) out.topics.push_back(b.read_string(false));
  out.user_data = b.read_nullable_bytes(false);
  out.owned_partitions = read_partitions(b);
  out.generation = b.read_int32();
  out.rack = b.read_nullable_string(false);
  if (!b.ok()) {
    reset_subscription_fields(out);
    return b.error();
  }
  return {};
}

std::error_code encode_assignment(const MemberAssignment& a, std::int16_t version, protocol::bytes& out) {
  if (version < 0 || version > assignment_version_max) return protocol::codec_errc::unsupported_version;
  const std::size_t start = out.size();
  protocol::writer w(out);
  w.write_int16(version);
  if (auto ec = protocol::encode(to_message(a), version, out)) {
    out.resize(start);
    return ec;
  }
  return {};
}

std::error_code decode_assignment(std::span<const std::uint8_t> in, MemberAssignment& out, std::int16_t* version) {
  out.partitions.clear();
  out.user_data.reset();
  if (in.empty()) return {};
  std::int16_t v = 0;
  if (auto ec = read_version(in, version, v)) return ec;
  const auto body = in.subspan(2);
  if (v <= assignment_version_max) {
    protocol::consumer_protocol_assignment m;
    if (auto ec = protocol::decode(body, v, m)) return ec;
    from_message(std::move(m), out);
    return {};
  }
  protocol::reader b(body);
  out.partitions = read_partitions(b);
  out.user_data = b.read_nullable_bytes(false);
  if (!b.ok()) {
    out.partitions.clear();
    out.user_data.reset();
    return b.error();
  }
  return {};
}

}  // namespace kgroup::assign
