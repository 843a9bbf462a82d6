#include "assign/validate.hpp"

#include <algorithm>
#include <unordered_map>

#include "assign/model.hpp"

namespace kgroup::assign {
namespace {

std::string name_of(const group_model& model, std::uint32_t g) {
  const std::uint32_t t = model.topic_of(g);
  return std::string(model.topic_name[t]) + "-" + std::to_string(g - model.topic_base[t]);
}

}  // namespace

std::string check_assignment(const ClusterMetadata& cluster, const GroupSubscription& group,
                             const GroupAssignment& assignment, RebalanceProtocol protocol) {
  const group_model model = build_model(cluster, group, false);
  std::unordered_map<std::string_view, std::uint32_t> member_of;
  for (std::uint32_t m = 0; m < model.member_count(); ++m) member_of.emplace(model.member(m).member_id, m);

  std::vector<std::uint32_t> owner(model.partition_count(), no_member);
  std::vector<bool> seen(model.member_count(), false);
  for (const auto& a : assignment.members) {
    const auto it = member_of.find(a.member_id);
    if (it == member_of.end()) return "assignment for unknown member " + a.member_id;
    const std::uint32_t m = it->second;
    if (seen[m]) return "member " + a.member_id + " assigned twice";
    seen[m] = true;
    for (const auto& tp : a.partitions) {
      const auto t = model.topic_id.find(tp.topic);
      if (t == model.topic_id.end()) {
        return "member " + a.member_id + " got topic " + tp.topic + ", which nobody subscribes to or does not exist";
      }
      if (!model.subscribes(m, t->second)) return "member " + a.member_id + " got unsubscribed topic " + tp.topic;
      const std::uint32_t base = model.topic_base[t->second];
      const std::uint32_t n = model.topic_base[t->second + 1] - base;
      for (std::int32_t p : tp.partitions) {
        if (p < 0 || static_cast<std::uint32_t>(p) >= n) {
          return "member " + a.member_id + " got nonexistent partition " + tp.topic + "-" + std::to_string(p);
        }
        const std::uint32_t g = base + static_cast<std::uint32_t>(p);
        if (owner[g] != no_member) {
          return "partition " + name_of(model, g) + " assigned to both " + model.member(owner[g]).member_id +
                 " and " + a.member_id;
        }
        owner[g] = m;
      }
    }
  }

  if (protocol == RebalanceProtocol::cooperative) {
    // Java's check: the partitions revoked from someone (owned, not assigned to them) and the
    // partitions added to someone (assigned, not owned by them) must not meet.
    std::vector<std::vector<std::uint32_t>> owned(model.member_count());
    std::vector<bool> revoked(model.partition_count(), false);
    for (std::uint32_t m = 0; m < model.member_count(); ++m) {
      for (const auto& tp : model.member(m).owned_partitions) {
        const auto t = model.topic_id.find(tp.topic);
        if (t == model.topic_id.end()) continue;
        const std::uint32_t base = model.topic_base[t->second];
        const std::uint32_t n = model.topic_base[t->second + 1] - base;
        for (std::int32_t p : tp.partitions) {
          if (p < 0 || static_cast<std::uint32_t>(p) >= n) continue;
          const std::uint32_t g = base + static_cast<std::uint32_t>(p);
          owned[m].push_back(g);
          if (owner[g] != m) revoked[g] = true;
        }
      }
      std::sort(owned[m].begin(), owned[m].end());
    }
    for (std::uint32_t g = 0; g < model.partition_count(); ++g) {
      const std::uint32_t m = owner[g];
      if (!revoked[g] || m == no_member) continue;
      if (!std::binary_search(owned[m].begin(), owned[m].end(), g)) {
        return "partition " + name_of(model, g) + " is revoked from a member and given to " +
               model.member(m).member_id + " in the same cooperative round";
      }
    }
  }
  return {};
}

}  // namespace kgroup::assign
