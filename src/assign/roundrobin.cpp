// Kafka's RoundRobinAssignor: all partitions, topics in name order, dealt to the members in member
// order in turn; a member not subscribed to a partition's topic is skipped for that partition.
#include <algorithm>

#include "assign/model.hpp"

namespace kgroup::assign {

std::vector<std::uint32_t> roundrobin_assign(const group_model& model) {
  std::vector<std::uint32_t> owner(model.partition_count(), no_member);
  const std::uint32_t member_count = model.member_count();
  std::uint32_t next = 0;  // the member the circular deal continues from
  for (std::uint32_t t = 0; t < model.topic_count(); ++t) {
    const auto subs = model.subscribers_of(t);
    const auto k = static_cast<std::uint32_t>(subs.size());
    if (k == 0) continue;
    // The first subscriber at or after `next`, circularly; from there the deal for this topic
    // only ever visits t's subscribers, one after the other.
    auto j = static_cast<std::uint32_t>(std::lower_bound(subs.begin(), subs.end(), next) - subs.begin());
    if (j == k) j = 0;
    std::uint32_t last = subs[j];
    for (std::uint32_t g = model.topic_base[t]; g < model.topic_base[t + 1]; ++g) {
      last = subs[j];
      owner[g] = last;
      if (++j == k) j = 0;
    }
    next = last + 1 == member_count ? 0 : last + 1;
  }
  return owner;
}

}  // namespace kgroup::assign
