#include "assign/model.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "assign/sticky_user_data.hpp"

namespace kgroup::assign {

bool member_before(const MemberSubscription& a, const MemberSubscription& b) noexcept {
  if (a.group_instance_id && b.group_instance_id) {
    if (*a.group_instance_id != *b.group_instance_id) return *a.group_instance_id < *b.group_instance_id;
    return a.member_id < b.member_id;
  }
  if (a.group_instance_id) return true;
  if (b.group_instance_id) return false;
  return a.member_id < b.member_id;
}

bool group_model::subscribes(std::uint32_t m, std::uint32_t t) const noexcept {
  const auto topics = topics_of(m);
  return std::binary_search(topics.begin(), topics.end(), t);
}

std::uint32_t group_model::topic_of(std::uint32_t g) const noexcept {
  const auto it = std::upper_bound(topic_base.begin(), topic_base.end(), g);
  return static_cast<std::uint32_t>(it - topic_base.begin() - 1);
}

namespace {

void index_topics(group_model& model, std::vector<std::uint32_t>& rank_of_meta,
                  std::vector<std::uint32_t>& meta_of_rank,
                  std::unordered_map<std::string_view, std::uint32_t>& rank_by_name) {
  const auto& topics = model.cluster->topics;
  const std::size_t n = topics.size();
  meta_of_rank.resize(n);
  std::iota(meta_of_rank.begin(), meta_of_rank.end(), 0u);
  std::sort(meta_of_rank.begin(), meta_of_rank.end(),
            [&](std::uint32_t a, std::uint32_t b) { return topics[a].topic < topics[b].topic; });
  rank_of_meta.resize(n);
  rank_by_name.reserve(n);
  for (std::uint32_t r = 0; r < n; ++r) {
    const TopicMetadata& t = topics[meta_of_rank[r]];
    if (r > 0 && topics[meta_of_rank[r - 1]].topic == t.topic) {
      throw std::invalid_argument("duplicate topic in cluster metadata: " + t.topic);
    }
    if (t.partition_count < 0) throw std::invalid_argument("negative partition count for topic " + t.topic);
    if (!t.replicas.empty() && t.replicas.size() != static_cast<std::size_t>(t.partition_count)) {
      throw std::invalid_argument("replicas of topic " + t.topic + " must be empty or one entry per partition");
    }
    rank_of_meta[meta_of_rank[r]] = r;
    rank_by_name.emplace(t.topic, r);
  }
}

void order_members(group_model& model) {
  const auto& members = model.group->members;
  if (members.size() >= static_cast<std::size_t>(contested)) throw std::invalid_argument("too many members");
  std::unordered_set<std::string_view> ids;
  ids.reserve(members.size());
  for (const auto& m : members) {
    if (!ids.insert(m.member_id).second) throw std::invalid_argument("duplicate member id: " + m.member_id);
  }
  model.member_input.resize(members.size());
  std::iota(model.member_input.begin(), model.member_input.end(), 0u);
  std::sort(model.member_input.begin(), model.member_input.end(),
            [&](std::uint32_t a, std::uint32_t b) { return member_before(members[a], members[b]); });
}

// Resolves every member's topic names to name ranks (sorted, no duplicates, only topics with
// partitions) and lays them out as CSR over ranks.
void resolve_subscriptions(group_model& model,
                           const std::unordered_map<std::string_view, std::uint32_t>& rank_by_name,
                           const std::vector<std::uint32_t>& meta_of_rank,
                           std::vector<std::uint32_t>& begin, std::vector<std::uint32_t>& ranks) {
  const auto& topics = model.cluster->topics;
  const std::uint32_t member_count = model.member_count();
  begin.assign(member_count + 1, 0);
  ranks.clear();
  const std::vector<std::string>* previous = nullptr;
  std::uint32_t previous_begin = 0;
  for (std::uint32_t m = 0; m < member_count; ++m) {
    const std::vector<std::string>& names = model.member(m).topics;
    const auto start = static_cast<std::uint32_t>(ranks.size());
    // Groups mostly share one subscription: comparing with the previous member's list is much
    // cheaper than hashing every name again.
    if (previous != nullptr && names == *previous) {
      const std::uint32_t len = begin[m] - previous_begin;
      ranks.resize(start + len);
      std::copy_n(ranks.begin() + previous_begin, len, ranks.begin() + start);
    } else {
      for (const auto& name : names) {
        const auto it = rank_by_name.find(name);
        if (it == rank_by_name.end()) continue;
        if (topics[meta_of_rank[it->second]].partition_count == 0) continue;
        ranks.push_back(it->second);
      }
      std::sort(ranks.begin() + start, ranks.end());
      ranks.erase(std::unique(ranks.begin() + start, ranks.end()), ranks.end());
      previous = &names;
    }
    previous_begin = start;
    begin[m] = start;
    begin[m + 1] = static_cast<std::uint32_t>(ranks.size());
  }
}

void setup_racks(group_model& model) {
  const std::uint32_t member_count = model.member_count();
  model.member_rack.assign(member_count, -1);
  std::unordered_map<std::string_view, std::uint16_t> rack_ids;
  bool every_member_has_rack = true;
  for (std::uint32_t m = 0; m < member_count; ++m) {
    const auto& rack = model.member(m).rack;
    if (!rack) {
      every_member_has_rack = false;
      continue;
    }
    if (rack_ids.size() >= std::numeric_limits<std::uint16_t>::max()) return;  // absurd: no rack awareness
    const auto it = rack_ids.emplace(*rack, static_cast<std::uint16_t>(rack_ids.size())).first;
    model.member_rack[m] = it->second;
  }
  if (rack_ids.empty()) return;
  model.rack_count = static_cast<std::uint32_t>(rack_ids.size());

  std::unordered_map<std::int32_t, std::uint16_t> broker_rack;
  for (const auto& b : model.cluster->brokers) {
    if (!b.rack) continue;
    const auto it = rack_ids.find(*b.rack);
    if (it != rack_ids.end()) broker_rack[b.node_id] = it->second;
  }
  if (broker_rack.empty()) return;

  const std::uint32_t partitions = model.partition_count();
  model.part_rack_begin.assign(partitions + 1, 0);
  model.part_racks.clear();
  bool any_aligned = false;
  bool all_cover_every_rack = every_member_has_rack;
  for (std::uint32_t t = 0; t < model.topic_count(); ++t) {
    const auto& replicas = model.topic_meta[t]->replicas;
    const std::uint32_t base = model.topic_base[t];
    const std::uint32_t n = model.topic_base[t + 1] - base;
    for (std::uint32_t p = 0; p < n; ++p) {
      const auto start = model.part_racks.size();
      if (!replicas.empty()) {
        for (std::int32_t node : replicas[p]) {
          const auto it = broker_rack.find(node);
          if (it == broker_rack.end()) continue;
          if (std::find(model.part_racks.begin() + static_cast<std::ptrdiff_t>(start), model.part_racks.end(),
                        it->second) == model.part_racks.end()) {
            model.part_racks.push_back(it->second);
          }
        }
      }
      const auto count = model.part_racks.size() - start;
      any_aligned = any_aligned || count > 0;
      all_cover_every_rack = all_cover_every_rack && count == model.rack_count;
      model.part_rack_begin[base + p + 1] = static_cast<std::uint32_t>(model.part_racks.size());
    }
  }
  // When no partition is in any member's rack, or every partition is in every member's rack,
  // preferring same-rack members changes nothing: skip the work.
  model.rack_aware = any_aligned && !all_cover_every_rack;
  if (!model.rack_aware) {
    model.part_rack_begin.clear();
    model.part_racks.clear();
  }
}

}  // namespace

group_model build_model(const ClusterMetadata& cluster, const GroupSubscription& group, bool want_racks) {
  group_model model;
  model.cluster = &cluster;
  model.group = &group;

  std::vector<std::uint32_t> rank_of_meta, meta_of_rank;
  std::unordered_map<std::string_view, std::uint32_t> rank_by_name;
  index_topics(model, rank_of_meta, meta_of_rank, rank_by_name);
  order_members(model);

  std::vector<std::uint32_t> begin, ranks;
  resolve_subscriptions(model, rank_by_name, meta_of_rank, begin, ranks);

  // Dense topic ids: subscribed ranks, renumbered in rank (name) order, so the mapping keeps every
  // member's list sorted.
  const std::size_t meta_count = cluster.topics.size();
  std::vector<std::uint32_t> dense_of_rank(meta_count, no_member);
  for (std::uint32_t r : ranks) dense_of_rank[r] = 0;
  std::uint64_t total = 0;
  model.topic_base.push_back(0);
  for (std::uint32_t r = 0; r < meta_count; ++r) {
    if (dense_of_rank[r] == no_member) continue;
    const TopicMetadata& t = cluster.topics[meta_of_rank[r]];
    dense_of_rank[r] = static_cast<std::uint32_t>(model.topic_name.size());
    model.topic_id.emplace(t.topic, dense_of_rank[r]);
    model.topic_name.push_back(t.topic);
    model.topic_meta.push_back(&t);
    total += static_cast<std::uint64_t>(t.partition_count);
    if (total > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
      throw std::invalid_argument("more than 2^31 - 1 subscribed partitions");
    }
    model.topic_base.push_back(static_cast<std::uint32_t>(total));
  }
  for (auto& r : ranks) r = dense_of_rank[r];
  model.sub_begin = std::move(begin);
  model.sub_topics = std::move(ranks);

  const std::uint32_t topic_count = model.topic_count();
  const std::uint32_t member_count = model.member_count();
  model.subscriber_begin.assign(topic_count + 1, 0);
  for (std::uint32_t t : model.sub_topics) ++model.subscriber_begin[t + 1];
  for (std::uint32_t t = 0; t < topic_count; ++t) model.subscriber_begin[t + 1] += model.subscriber_begin[t];
  model.subscribers.resize(model.sub_topics.size());
  {
    std::vector<std::uint32_t> fill(model.subscriber_begin.begin(), model.subscriber_begin.end() - 1);
    for (std::uint32_t m = 0; m < member_count; ++m) {
      for (std::uint32_t t : model.topics_of(m)) model.subscribers[fill[t]++] = m;
    }
  }

  const auto first = member_count > 0 ? model.topics_of(0) : std::span<const std::uint32_t>{};
  for (std::uint32_t m = 1; m < member_count && model.uniform; ++m) {
    const auto topics = model.topics_of(m);
    model.uniform = std::equal(topics.begin(), topics.end(), first.begin(), first.end());
  }

  if (want_racks) setup_racks(model);
  return model;
}

ownership resolve_claims(const group_model& model, claim_source source) {
  const std::uint32_t partitions = model.partition_count();
  ownership out;
  std::vector<std::int32_t> generation;  // allocated with claimant, at the first claim

  for (std::uint32_t m = 0; m < model.member_count(); ++m) {
    const MemberSubscription& s = model.member(m);
    // Only decode user data when it can matter: the eager sticky format carries ownership, the
    // cooperative one only a generation for subscriptions too old to have one.
    const bool need_user_data = source == claim_source::user_data_then_owned || s.owned_partitions.empty() ||
                                s.generation < 0;
    const sticky_user_data user = need_user_data ? interpret_user_data(s.user_data) : sticky_user_data{};
    const std::int32_t subscription_generation = s.generation >= 0 ? s.generation : user.generation.value_or(-1);
    const std::vector<TopicPartitions>* claims;
    std::int32_t claim_generation;
    const bool from_user_data = source == claim_source::user_data_then_owned
                                    ? !user.partitions.empty()
                                    : s.owned_partitions.empty() && !user.partitions.empty();
    if (from_user_data) {
      claims = &user.partitions;
      claim_generation = user.generation.value_or(s.generation);
    } else {
      claims = &s.owned_partitions;
      claim_generation = subscription_generation;
    }

    for (const auto& tp : *claims) {
      const auto it = model.topic_id.find(tp.topic);
      if (it == model.topic_id.end()) continue;
      const std::uint32_t t = it->second;
      const std::uint32_t base = model.topic_base[t];
      const auto n = static_cast<std::int64_t>(model.topic_base[t + 1] - base);
      for (std::int32_t p : tp.partitions) {
        if (p < 0 || p >= n) continue;
        const std::uint32_t g = base + static_cast<std::uint32_t>(p);
        if (out.claimant.empty()) {
          out.claimant.assign(partitions, no_member);
          generation.assign(partitions, 0);
        }
        std::uint32_t& c = out.claimant[g];
        if (c == no_member || claim_generation > generation[g]) {
          c = m;
          generation[g] = claim_generation;
        } else if (c != m && claim_generation == generation[g]) {
          c = contested;
        }
      }
    }
  }

  if (out.claimant.empty()) return out;  // nobody claims anything: both tables stay empty
  out.prev_owner.assign(partitions, no_member);
  for (std::uint32_t t = 0; t < model.topic_count(); ++t) {
    std::uint32_t cached_member = no_member;
    bool cached_subscribes = false;
    for (std::uint32_t g = model.topic_base[t]; g < model.topic_base[t + 1]; ++g) {
      const std::uint32_t c = out.claimant[g];
      if (c >= contested) continue;
      if (c != cached_member) {
        cached_member = c;
        cached_subscribes = model.subscribes(c, t);
      }
      if (cached_subscribes) out.prev_owner[g] = c;
    }
  }
  return out;
}

GroupAssignment build_assignment(const group_model& model, std::span<const std::uint32_t> owner) {
  const std::uint32_t member_count = model.member_count();
  std::vector<std::uint32_t> begin(member_count + 1, 0);
  for (std::uint32_t o : owner) {
    if (o < member_count) ++begin[o + 1];
  }
  for (std::uint32_t m = 0; m < member_count; ++m) begin[m + 1] += begin[m];
  std::vector<std::uint32_t> sorted(begin[member_count]);
  {
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (std::uint32_t g = 0; g < owner.size(); ++g) {
      const std::uint32_t o = owner[g];
      if (o < member_count) sorted[fill[o]++] = g;
    }
  }

  GroupAssignment out;
  out.members.resize(member_count);
  for (std::uint32_t m = 0; m < member_count; ++m) {
    MemberAssignment& a = out.members[model.member_input[m]];
    a.member_id = model.member(m).member_id;
    std::uint32_t i = begin[m];
    const std::uint32_t end = begin[m + 1];
    while (i < end) {
      const std::uint32_t t = model.topic_of(sorted[i]);
      const std::uint32_t base = model.topic_base[t];
      const std::uint32_t limit = model.topic_base[t + 1];
      std::uint32_t j = i;
      while (j < end && sorted[j] < limit) ++j;
      auto& tp = a.partitions.emplace_back();
      tp.topic.assign(model.topic_name[t]);
      tp.partitions.resize(j - i);
      for (std::uint32_t k = i; k < j; ++k) tp.partitions[k - i] = static_cast<std::int32_t>(sorted[k] - base);
      i = j;
    }
  }
  return out;
}

void withhold_transfers(const ownership& prior, std::vector<std::uint32_t>& owner) {
  if (prior.none()) return;
  for (std::size_t g = 0; g < owner.size(); ++g) {
    const std::uint32_t c = prior.claimant[g];
    if (owner[g] != no_member && c != no_member && c != owner[g]) owner[g] = no_member;
  }
}

}  // namespace kgroup::assign
