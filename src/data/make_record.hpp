// A decoded record as poll() returns it (ConsumerRecord, viewing the decoded bytes), for the
// data path's readers: the record cursor (consumer groups) and the share record reader.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "data/types.hpp"
#include "kgroup/record.hpp"
#include "protocol/records.hpp"

namespace kgroup::data {

/// The leader epoch a batch carries (-1 for the legacy message formats, which have none).
inline std::int32_t batch_epoch(const protocol::record_batch_header& h) {
  return h.magic >= 2 ? h.partition_leader_epoch : -1;
}

/// Whether a position can follow every offset of the batch: its last offset is below the largest
/// int64 and does not wrap. A broker's bytes can break this (kgroup-fuzz-broker, issue 31: the
/// position after such a batch overflowed); such a batch is corrupt data.
inline bool offsets_fit(const protocol::record_batch_header& h) {
  std::int64_t last = 0;
  return !__builtin_add_overflow(h.base_offset, std::int64_t{h.last_offset_delta}, &last) &&
         last < std::numeric_limits<std::int64_t>::max();
}

inline std::string_view bytes_text(const auto& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

inline ConsumerRecord make_record(const TopicPartition& tp, const protocol::record_batch_header& h,
                                  const protocol::record& r) {
  ConsumerRecord rec;
  rec.topic = tp.topic;
  rec.partition = tp.partition;
  rec.offset = r.offset;
  rec.timestamp = r.timestamp;
  rec.timestamp_type = h.magic == 0                         ? TimestampType::none
                       : static_cast<int>(h.ts_type()) == 1 ? TimestampType::log_append_time
                                                            : TimestampType::create_time;
  rec.leader_epoch = batch_epoch(h);
  if (r.key) rec.key = bytes_text(*r.key);
  if (r.value) rec.value = bytes_text(*r.value);
  if (!r.headers.empty()) {
    rec.headers.reserve(r.headers.size());
    for (const auto& hd : r.headers) {
      Header out{hd.key, std::nullopt};
      if (hd.value) out.value = bytes_text(*hd.value);
      rec.headers.push_back(out);
    }
  }
  return rec;
}

}  // namespace kgroup::data
