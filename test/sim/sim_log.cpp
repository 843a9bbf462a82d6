// The record batches of a simulated Fetch answer (sim_log.hpp).
#include "sim_log.hpp"

#include "protocol/crc32c.hpp"

#include <charconv>
#include <cstring>
#include <optional>
#include <string>

namespace kgroup::sim {

std::vector<std::int64_t> unclean_election(partition_log& l, std::int64_t cut, std::int32_t leader) {
  std::vector<std::int64_t> died;
  for (std::int64_t o = cut; o < l.end(); ++o) died.push_back(l.entries[static_cast<std::size_t>(o)].id);
  l.entries.resize(static_cast<std::size_t>(cut));
  l.batch_starts.erase(l.batch_starts.lower_bound(cut), l.batch_starts.end());
  std::erase_if(l.epoch_start, [&](const auto& e) { return e.second >= cut; });
  l.leader = leader;
  ++l.epoch;
  l.epoch_start[l.epoch] = cut;
  return died;
}

void delete_records_before(partition_log& l, std::int64_t to) {
  l.log_start = to;
  auto keep = l.epoch_start.begin();
  for (auto e = l.epoch_start.begin(); e != l.epoch_start.end(); ++e) {
    if (e->second <= to) keep = e;
  }
  const auto epoch = keep->first;
  l.epoch_start.erase(l.epoch_start.begin(), keep);
  l.epoch_start[epoch] = std::max(l.epoch_start[epoch], to);
}

namespace {

// The writers of put_batch(), into bytes sized beforehand.
void put_be(std::uint8_t*& p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) *p++ = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_uvarint(std::uint8_t*& p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
}
std::size_t uvarint_size(std::uint64_t v) {
  std::size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}
// The length of `v` in decimal (what std::to_chars writes).
std::size_t decimal_size(std::int64_t v) {
  if (v < 0) {
    char digits[20];
    return static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, v).ptr - digits);
  }
  std::size_t n = 1;
  for (; v >= 10; v /= 10) ++n;
  return n;
}
// Zigzag, as Kafka's varints and varlongs encode a signed value (the same bytes for both at
// values in int32's range).
std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}

// Appends to `buf` the magic-2 batch of the log's offsets [o, b) (one leader epoch): what
// protocol::encode_record_batch() writes for its records (no key, the id's digits as value,
// timestamp 1, no header, each at its offset delta; the last offset delta b - 1 - o; no
// compression, producer id, epoch and sequence -1), written here at once into bytes sized
// beforehand (a Fetch answer's batches are the simulation's largest cost otherwise, and not what
// it tests: the client only decodes). Byte for byte the same (every seed replays).
void put_batch(const partition_log& l, std::int64_t o, std::int64_t b, std::int32_t epoch,
               protocol::bytes& buf) {
  // A record's size: attributes, timestamp delta (0), offset delta, key (null), value, header
  // count (0).
  const auto record_size = [](std::int64_t delta, std::size_t n) {
    return 1 + 1 + uvarint_size(zigzag(delta)) + 1 + uvarint_size(zigzag(static_cast<std::int64_t>(n))) + n +
           1;
  };
  std::size_t body = 0;
  std::size_t count = 0;
  for (std::int64_t i = o; i < b; ++i) {
    const auto& e = l.entries[static_cast<std::size_t>(i)];
    if (e.compacted) continue;
    const std::size_t record = record_size(i - o, decimal_size(e.id));
    body += uvarint_size(zigzag(static_cast<std::int64_t>(record))) + record;
    ++count;
  }
  constexpr std::size_t header = 61;
  const std::size_t start = buf.size();
  buf.resize(start + header + body);
  std::uint8_t* p = buf.data() + start;
  const std::uint64_t timestamp = count > 0 ? 1 : static_cast<std::uint64_t>(-1);
  put_be(p, static_cast<std::uint64_t>(o), 8);          // base offset
  put_be(p, header + body - 12, 4);                     // batch length
  put_be(p, static_cast<std::uint32_t>(epoch), 4);      // partition leader epoch
  *p++ = 2;                                             // magic
  p += 4;                                               // crc, below
  put_be(p, 0, 2);                                      // attributes
  put_be(p, static_cast<std::uint32_t>(b - 1 - o), 4);  // last offset delta
  put_be(p, timestamp, 8);                              // base timestamp
  put_be(p, timestamp, 8);                              // max timestamp
  put_be(p, static_cast<std::uint64_t>(-1), 8);         // producer id
  put_be(p, static_cast<std::uint16_t>(-1), 2);         // producer epoch
  put_be(p, static_cast<std::uint32_t>(-1), 4);         // base sequence
  put_be(p, static_cast<std::uint32_t>(count), 4);      // records
  for (std::int64_t i = o; i < b; ++i) {
    const auto& e = l.entries[static_cast<std::size_t>(i)];
    if (e.compacted) continue;
    const std::size_t n = decimal_size(e.id);
    put_uvarint(p, zigzag(static_cast<std::int64_t>(record_size(i - o, n))));
    *p++ = 0;                       // attributes
    *p++ = 0;                       // timestamp delta
    put_uvarint(p, zigzag(i - o));  // offset delta
    *p++ = 1;                       // key: null (-1)
    put_uvarint(p, zigzag(static_cast<std::int64_t>(n)));
    p = reinterpret_cast<std::uint8_t*>(
        std::to_chars(reinterpret_cast<char*>(p), reinterpret_cast<char*>(p + n), e.id).ptr);
    *p++ = 0;  // headers
  }
  std::uint8_t* crc_at = buf.data() + start + 17;
  put_be(crc_at, protocol::crc32c(protocol::byte_view(buf).subspan(start + 21)), 4);
}

}  // namespace

batches_written write_batches(const partition_log& l, std::int64_t fetch_offset, std::int64_t want,
                              std::int64_t legacy_until, protocol::bytes& buf) {
  auto first = l.batch_starts.upper_bound(fetch_offset);
  std::int64_t o = first == l.batch_starts.begin() ? fetch_offset : *std::prev(first);
  while (o < l.end() && (o <= fetch_offset || o - fetch_offset < want)) {
    const auto next = l.batch_starts.upper_bound(o);
    const std::int64_t batch_end = next == l.batch_starts.end() ? l.end() : std::min(*next, l.end());
    const auto epoch = l.entries[static_cast<std::size_t>(o)].epoch;
    std::int64_t b = o;
    while (b < batch_end && l.entries[static_cast<std::size_t>(b)].epoch == epoch) ++b;
    if (b <= legacy_until) {
      // A magic-0 gzip wrapper at the batch's last offset; its messages carry absolute offsets.
      // A wrapper the cleaner emptied is gone (the next batch answers).
      std::string values;
      values.reserve(20 * static_cast<std::size_t>(b - o));  // the messages' views stay valid
      std::vector<protocol::legacy_message_input> msgs;
      for (std::int64_t i = o; i < b; ++i) {
        const auto& e = l.entries[static_cast<std::size_t>(i)];
        if (e.compacted) continue;
        char digits[20];
        const auto end = std::to_chars(digits, digits + sizeof digits, e.id).ptr;
        const std::size_t at = values.size();
        values.append(digits, end);
        msgs.push_back({i, -1, std::nullopt,
                        protocol::byte_view(reinterpret_cast<const std::uint8_t*>(values.data() + at),
                                            static_cast<std::size_t>(end - digits))});
      }
      protocol::legacy_encode_options lo;
      lo.magic = 0;
      lo.codec = protocol::compression::gzip;
      lo.wrapper_offset = b - 1;
      if (!msgs.empty() && protocol::encode_legacy_message_set(msgs, lo, buf))
        return {o, "legacy message set does not encode"};
      o = b;
      continue;
    }
    put_batch(l, o, b, epoch, buf);
    o = b;
  }
  return {o, nullptr};
}

protocol::list_offsets_response answer_list_offsets(const std::map<TopicPartition, partition_log>& logs,
                                                    std::int32_t node,
                                                    const protocol::list_offsets_request& req) {
  protocol::list_offsets_response r;
  for (const auto& t : req.topics) {
    auto& rt = r.topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      rp.error_code =
          logs.at({t.name, p.partition_index})
              .list_offsets(node, p.current_leader_epoch, p.timestamp, rp.offset, rp.leader_epoch);
    }
  }
  return r;
}

protocol::offset_for_leader_epoch_response answer_offset_for_leader_epoch(
    const std::map<TopicPartition, partition_log>& logs, std::int32_t node,
    const protocol::offset_for_leader_epoch_request& req) {
  protocol::offset_for_leader_epoch_response r;
  for (const auto& t : req.topics) {
    auto& rt = r.topics.emplace_back();
    rt.topic = t.topic;
    for (const auto& p : t.partitions) {
      std::pair<std::int32_t, std::int64_t> end;
      const auto err = logs.at({t.topic, p.partition})
                           .offset_for_leader_epoch(node, p.current_leader_epoch, p.leader_epoch, end);
      rt.partitions.push_back({err, p.partition, end.first, end.second});
    }
  }
  return r;
}

}  // namespace kgroup::sim
