// OffsetFetch across its two layouts, for every sender of it (the fetcher's committed offsets,
// committed(), the group observer's view of the whole group). Pure.
#pragma once

#include <cstdint>

#include "protocol/messages.hpp"

namespace kgroup::data {

// OffsetFetch v8+ moved the group and its topics into a groups array (KIP-709); require_stable
// exists from v7.
inline void adjust_offset_fetch(protocol::offset_fetch_request& r, std::int16_t version) {
  if (version >= 8) {
    protocol::offset_fetch_request::offset_fetch_request_group g;
    g.group_id = r.group_id;
    g.topics.emplace();
    for (auto& t : *r.topics) g.topics->push_back({t.name, t.partition_indexes});
    r.groups = {std::move(g)};
    r.group_id.clear();
    r.topics->clear();
  }
  if (version < 7) r.require_stable = false;
}

// Calls fn(topic, partition, offset, metadata, epoch, error) for every partition of an OffsetFetch
// answer, whichever layout (v0-7 topics, v8+ groups) it has.
template <class Fn>
void for_each_committed(const protocol::offset_fetch_response& r, Fn&& fn) {
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions)
      fn(t.name, p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code);
  }
  for (const auto& g : r.groups) {
    for (const auto& t : g.topics) {
      for (const auto& p : t.partitions)
        fn(t.name, p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code);
    }
  }
}

}  // namespace kgroup::data
