// Kafka's RangeAssignor, with KIP-881 rack awareness.
//
// Per topic, the subscribers in member order get n / k partitions each and the first n % k one
// more. Without racks, member i gets the i-th consecutive range (Kafka's exact result). With racks,
// each member first takes same-rack partitions (lowest first) up to its count, then the remaining
// partitions are dealt in order to members still short; the counts per member never change, so
// rack awareness costs no balance.
#include <algorithm>

#include "assign/model.hpp"

namespace kgroup::assign {

std::vector<std::uint32_t> range_assign(const group_model& model) {
  std::vector<std::uint32_t> owner(model.partition_count(), no_member);
  std::vector<std::uint32_t> got, bucket_begin, bucket, cursor;
  for (std::uint32_t t = 0; t < model.topic_count(); ++t) {
    const auto subs = model.subscribers_of(t);
    const auto k = static_cast<std::uint32_t>(subs.size());
    const std::uint32_t base = model.topic_base[t];
    const std::uint32_t n = model.topic_base[t + 1] - base;
    if (k == 0) continue;
    const std::uint32_t each = n / k, extra = n % k;
    const auto quota = [&](std::uint32_t i) { return each + (i < extra ? 1u : 0u); };

    bool racks_here = false;
    if (model.rack_aware) {
      racks_here = model.part_rack_begin[base] != model.part_rack_begin[base + n];
    }
    if (!racks_here) {
      std::uint32_t g = base;
      for (std::uint32_t i = 0; i < k; ++i) {
        for (std::uint32_t j = quota(i); j > 0; --j) owner[g++] = subs[i];
      }
      continue;
    }

    // Partitions of t per rack, ascending.
    bucket_begin.assign(model.rack_count + 1, 0);
    for (std::uint32_t g = base; g < base + n; ++g) {
      for (std::uint16_t r : model.racks_of(g)) ++bucket_begin[r + 1u];
    }
    for (std::uint32_t r = 0; r < model.rack_count; ++r) bucket_begin[r + 1] += bucket_begin[r];
    bucket.resize(bucket_begin[model.rack_count]);
    cursor.assign(bucket_begin.begin(), bucket_begin.end() - 1);
    for (std::uint32_t g = base; g < base + n; ++g) {
      for (std::uint16_t r : model.racks_of(g)) bucket[cursor[r]++] = g;
    }
    cursor.assign(bucket_begin.begin(), bucket_begin.end() - 1);

    got.assign(k, 0);
    for (std::uint32_t i = 0; i < k; ++i) {
      const std::int32_t r = model.member_rack[subs[i]];
      if (r < 0) continue;
      const auto ru = static_cast<std::uint32_t>(r);
      while (got[i] < quota(i) && cursor[ru] < bucket_begin[ru + 1]) {
        const std::uint32_t g = bucket[cursor[ru]++];
        if (owner[g] != no_member) continue;
        owner[g] = subs[i];
        ++got[i];
      }
    }
    std::uint32_t g = base;
    for (std::uint32_t i = 0; i < k; ++i) {
      for (; got[i] < quota(i); ++got[i]) {
        while (owner[g] != no_member) ++g;
        owner[g] = subs[i];
      }
    }
  }
  return owner;
}

}  // namespace kgroup::assign
