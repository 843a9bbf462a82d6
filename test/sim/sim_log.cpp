// The record batches of a simulated Fetch answer (sim_log.hpp).
#include "sim_log.hpp"

#include <charconv>
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

batches_written write_batches(const partition_log& l, std::int64_t fetch_offset, std::int64_t want,
                              std::int64_t legacy_until, protocol::bytes& buf) {
  auto first = l.batch_starts.upper_bound(fetch_offset);
  std::int64_t o = first == l.batch_starts.begin() ? fetch_offset : *std::prev(first);
  // One batch's records and their values (reused: scratch only, rewritten for every batch).
  static thread_local std::vector<protocol::record_input> recs;
  static thread_local std::string values;
  while (o < l.end() && (o <= fetch_offset || o - fetch_offset < want)) {
    const auto next = l.batch_starts.upper_bound(o);
    const std::int64_t batch_end = next == l.batch_starts.end() ? l.end() : std::min(*next, l.end());
    const auto epoch = l.entries[static_cast<std::size_t>(o)].epoch;
    std::int64_t b = o;
    recs.clear();
    recs.reserve(static_cast<std::size_t>(batch_end - o));
    // Room for every value of the batch (an id has at most 20 characters): the records' views
    // into it stay valid.
    values.clear();
    values.reserve(20 * static_cast<std::size_t>(batch_end - o));
    // Room for the batch (a 61-byte header, records of about 20 bytes): fewer reallocations.
    buf.reserve(buf.size() + 64 + 24 * static_cast<std::size_t>(batch_end - o));
    while (b < batch_end && l.entries[static_cast<std::size_t>(b)].epoch == epoch) {
      const auto& e = l.entries[static_cast<std::size_t>(b)];
      if (!e.compacted) {
        char digits[20];
        const auto end = std::to_chars(digits, digits + sizeof digits, e.id).ptr;
        const std::size_t at = values.size();
        values.append(digits, end);
        recs.push_back({std::nullopt,
                        protocol::byte_view(reinterpret_cast<const std::uint8_t*>(values.data() + at),
                                            static_cast<std::size_t>(end - digits)),
                        1,
                        {},
                        static_cast<std::int32_t>(b - o)});
      }
      ++b;
    }
    if (b <= legacy_until) {
      // A magic-0 gzip wrapper at the batch's last offset; its messages carry absolute offsets.
      // A wrapper the cleaner emptied is gone (the next batch answers).
      std::vector<protocol::legacy_message_input> msgs;
      for (const auto& in : recs) msgs.push_back({o + *in.offset_delta, -1, std::nullopt, in.value});
      protocol::legacy_encode_options lo;
      lo.magic = 0;
      lo.codec = protocol::compression::gzip;
      lo.wrapper_offset = b - 1;
      if (!msgs.empty() && protocol::encode_legacy_message_set(msgs, lo, buf))
        return {o, "legacy message set does not encode"};
      o = b;
      continue;
    }
    protocol::batch_encode_options opts;
    opts.base_offset = o;
    opts.partition_leader_epoch = epoch;
    opts.last_offset_delta = static_cast<std::int32_t>(b - 1 - o);  // kept when the cleaner removed the tail
    if (protocol::encode_record_batch(recs, opts, buf)) return {o, "record batch does not encode"};
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
