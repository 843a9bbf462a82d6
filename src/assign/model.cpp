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
// partitions), stores each distinct list once (CSR over ranks: list s is ranks[begin[s] ..
// begin[s+1])) and gives each member the index of its list in model.sub_of.
void resolve_subscriptions(group_model& model,
                           const std::unordered_map<std::string_view, std::uint32_t>& rank_by_name,
                           const std::vector<std::uint32_t>& meta_of_rank,
                           std::vector<std::uint32_t>& begin, std::vector<std::uint32_t>& ranks) {
  const auto& topics = model.cluster->topics;
  const std::uint32_t member_count = model.member_count();
  model.sub_of.assign(member_count, 0);
  begin.assign(1, 0);
  ranks.clear();
  // At most every name of every member; reserved, not touched, so no list moves as it grows.
  std::size_t names_total = 0;
  for (std::uint32_t m = 0; m < member_count; ++m) names_total += model.member(m).topics.size();
  ranks.reserve(names_total);
  // Distinct lists by a hash of their ranks; equal hashes are compared.
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash;
  const std::vector<std::string>* previous = nullptr;
  for (std::uint32_t m = 0; m < member_count; ++m) {
    const std::vector<std::string>& names = model.member(m).topics;
    // Groups mostly share one subscription: comparing with the previous member's names is much
    // cheaper than hashing every name again.
    if (previous != nullptr && names == *previous) {
      model.sub_of[m] = model.sub_of[m - 1];
      continue;
    }
    previous = &names;
    const auto start = ranks.size();
    for (const auto& name : names) {
      const auto it = rank_by_name.find(name);
      if (it == rank_by_name.end()) continue;
      if (topics[meta_of_rank[it->second]].partition_count == 0) continue;
      ranks.push_back(it->second);
    }
    const auto first = ranks.begin() + static_cast<std::ptrdiff_t>(start);
    std::sort(first, ranks.end());
    ranks.erase(std::unique(first, ranks.end()), ranks.end());
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the ranks
    for (auto it = first; it != ranks.end(); ++it) h = (h ^ *it) * 0x100000001b3ull;
    const auto [lo, hi] = by_hash.equal_range(h);
    bool found = false;
    for (auto it = lo; it != hi && !found; ++it) {
      const std::uint32_t s = it->second;
      if (std::equal(ranks.begin() + begin[s], ranks.begin() + begin[s + 1], first, ranks.end())) {
        model.sub_of[m] = s;
        found = true;
      }
    }
    if (found) {
      ranks.resize(start);
      continue;
    }
    const auto s = static_cast<std::uint32_t>(begin.size() - 1);
    by_hash.emplace(h, s);
    model.sub_of[m] = s;
    begin.push_back(static_cast<std::uint32_t>(ranks.size()));
  }
}

// Each topic's subscribers (members in member order), one list per distinct set of subscriptions
// that name the topic: topics subscribed by the same members share their list.
void index_subscribers(group_model& model) {
  const std::uint32_t topic_count = model.topic_count();
  const std::uint32_t member_count = model.member_count();
  const auto sub_count = static_cast<std::uint32_t>(model.sub_begin.size() - 1);
  // The subscriptions naming each topic, ascending (CSR).
  std::vector<std::uint32_t> subs_begin(topic_count + 1, 0);
  for (std::uint32_t t : model.sub_topics) ++subs_begin[t + 1];
  for (std::uint32_t t = 0; t < topic_count; ++t) subs_begin[t + 1] += subs_begin[t];
  std::vector<std::uint32_t> subs(model.sub_topics.size());
  {
    std::vector<std::uint32_t> fill(subs_begin.begin(), subs_begin.end() - 1);
    for (std::uint32_t s = 0; s < sub_count; ++s) {
      for (std::uint32_t i = model.sub_begin[s]; i < model.sub_begin[s + 1]; ++i)
        subs[fill[model.sub_topics[i]]++] = s;
    }
  }
  model.subscriber_list_of.assign(topic_count, 0);
  model.subscriber_begin.assign(1, 0);
  model.subscribers.clear();
  // At most one entry per (member, subscribed topic), when no two topics share their subscribers.
  {
    std::vector<std::uint32_t> members_of(sub_count, 0);
    for (std::uint32_t m = 0; m < member_count; ++m) ++members_of[model.sub_of[m]];
    std::size_t bound = 0;
    for (std::uint32_t s = 0; s < sub_count; ++s) {
      bound += std::size_t{members_of[s]} * (model.sub_begin[s + 1] - model.sub_begin[s]);
    }
    model.subscribers.reserve(bound);
  }
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash;  // a list's subscriptions -> list
  std::vector<std::uint32_t> first_topic;                         // a topic with list l's subscriptions
  std::vector<char> named(sub_count, 0);
  for (std::uint32_t t = 0; t < topic_count; ++t) {
    const auto b = subs.begin() + subs_begin[t];
    const auto e = subs.begin() + subs_begin[t + 1];
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (auto it = b; it != e; ++it) h = (h ^ *it) * 0x100000001b3ull;
    const auto [lo, hi] = by_hash.equal_range(h);
    bool found = false;
    for (auto it = lo; it != hi && !found; ++it) {
      const std::uint32_t u = first_topic[it->second];
      if (std::equal(subs.begin() + subs_begin[u], subs.begin() + subs_begin[u + 1], b, e)) {
        model.subscriber_list_of[t] = it->second;
        found = true;
      }
    }
    if (found) continue;
    const auto l = static_cast<std::uint32_t>(first_topic.size());
    by_hash.emplace(h, l);
    first_topic.push_back(t);
    model.subscriber_list_of[t] = l;
    for (auto it = b; it != e; ++it) named[*it] = 1;
    for (std::uint32_t m = 0; m < member_count; ++m) {
      if (named[model.sub_of[m]] != 0) model.subscribers.push_back(m);
    }
    for (auto it = b; it != e; ++it) named[*it] = 0;
    model.subscriber_begin.push_back(static_cast<std::uint32_t>(model.subscribers.size()));
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

  index_subscribers(model);
  // Equal lists are stored once, so one list means one subscription.
  model.uniform = model.sub_begin.size() <= 2;

  if (want_racks) setup_racks(model);
  return model;
}

ownership resolve_claims(const group_model& model, claim_source source) {
  const std::uint32_t partitions = model.partition_count();
  const std::uint32_t member_count = model.member_count();
  ownership out;

  // Each member's claims and their generation.
  struct claim_set {
    std::uint32_t member;
    std::int32_t generation;
    const std::vector<TopicPartitions>* partitions;
  };
  std::vector<sticky_user_data> decoded(member_count);
  std::vector<claim_set> sets;
  sets.reserve(member_count);
  for (std::uint32_t m = 0; m < member_count; ++m) {
    const MemberSubscription& s = model.member(m);
    // Only decode user data when it can matter: the eager sticky format carries ownership, the
    // cooperative one only a generation for subscriptions too old to have one.
    const bool need_user_data = source == claim_source::user_data_then_owned || s.owned_partitions.empty() ||
                                s.generation < 0;
    if (need_user_data) decoded[m] = interpret_user_data(s.user_data);
    const sticky_user_data& user = decoded[m];
    const std::int32_t subscription_generation =
        s.generation >= 0 ? s.generation : user.generation.value_or(-1);
    const bool from_user_data = source == claim_source::user_data_then_owned
                                    ? !user.partitions.empty()
                                    : s.owned_partitions.empty() && !user.partitions.empty();
    if (from_user_data) {
      sets.push_back({m, user.generation.value_or(s.generation), &user.partitions});
    } else {
      sets.push_back({m, subscription_generation, &s.owned_partitions});
    }
  }
  // The highest generation wins a partition; two members claiming it at that generation contest
  // it. Taking the sets from the highest generation down, a partition's holder always has a
  // generation at least the current set's, so no generation is kept per partition.
  std::stable_sort(sets.begin(), sets.end(),
                   [](const claim_set& a, const claim_set& b) { return a.generation > b.generation; });
  std::vector<std::int32_t> generation_of(member_count, 0);
  for (const auto& set : sets) generation_of[set.member] = set.generation;
  for (const auto& set : sets) {
    const std::uint32_t m = set.member;
    for (const auto& tp : *set.partitions) {
      const auto it = model.topic_id.find(tp.topic);
      if (it == model.topic_id.end()) continue;
      const std::uint32_t t = it->second;
      const std::uint32_t base = model.topic_base[t];
      const auto n = static_cast<std::int64_t>(model.topic_base[t + 1] - base);
      for (std::int32_t p : tp.partitions) {
        if (p < 0 || p >= n) continue;
        const std::uint32_t g = base + static_cast<std::uint32_t>(p);
        if (out.claimant.empty()) out.claimant.assign(partitions, no_member);
        std::uint32_t& c = out.claimant[g];
        if (c == no_member) {
          c = m;
        } else if (c != m && c != contested && generation_of[c] == set.generation) {
          c = contested;
        }
      }
    }
  }

  if (out.claimant.empty()) return out;  // nobody claims anything: both tables stay empty
  // prev_owner only when some claimant no longer subscribes to a claimed partition's topic;
  // otherwise prev() reads the claimant (a group sharing one subscription never needs it).
  if (model.uniform) return out;
  bool needed = false;
  for (std::uint32_t t = 0; t < model.topic_count() && !needed; ++t) {
    std::uint32_t cached_member = no_member;
    for (std::uint32_t g = model.topic_base[t]; g < model.topic_base[t + 1] && !needed; ++g) {
      const std::uint32_t c = out.claimant[g];
      if (c >= contested || c == cached_member) continue;
      cached_member = c;
      needed = !model.subscribes(c, t);
    }
  }
  if (!needed) return out;
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

namespace {

// Members' partitions sorted by member with a counting sort, then each member's result built at
// once: for assignments of short runs (range and roundrobin deal a partition or two per topic to
// each member), where filling in partition order would visit a different member's vectors at
// every step.
void fill_by_member(const group_model& model, std::span<const std::uint32_t> owner, GroupAssignment& out) {
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
  for (std::uint32_t m = 0; m < member_count; ++m) {
    MemberAssignment& a = out.members[model.member_input[m]];
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
}

}  // namespace

namespace {

// Walks `owner` in global id order, which is topic order and, within a topic, partition order:
// each member's partitions come already in the result's order, one run per topic it gets.
// new_run(o, t) is called when member o's partitions of topic t begin, then each(o, t, g) for
// every partition g it owns.
template <class NewRun, class Each>
void walk_runs(const group_model& model, std::span<const std::uint32_t> owner,
               std::vector<std::uint32_t>& last_topic, NewRun&& new_run, Each&& each) {
  const std::uint32_t member_count = model.member_count();
  std::fill(last_topic.begin(), last_topic.end(), no_member);
  const auto partitions = static_cast<std::uint32_t>(owner.size());
  for (std::uint32_t t = 0, g = 0; g < partitions; ++g) {
    while (g >= model.topic_base[t + 1]) ++t;
    const std::uint32_t o = owner[g];
    if (o >= member_count) continue;
    if (last_topic[o] != t) {
      last_topic[o] = t;
      new_run(o, t);
    }
    each(o, t, g);
  }
}

}  // namespace

GroupAssignment build_assignment(const group_model& model, std::span<const std::uint32_t> owner) {
  // The first walk counts each member's runs.
  const std::uint32_t member_count = model.member_count();
  const std::uint32_t partitions =
      static_cast<std::uint32_t>(std::min<std::size_t>(owner.size(), model.partition_count()));
  owner = owner.first(partitions);
  std::vector<std::uint32_t> last_topic(member_count, no_member);
  std::vector<std::uint32_t> run_begin(member_count + 1, 0);
  walk_runs(
      model, owner, last_topic, [&](std::uint32_t o, std::uint32_t) { ++run_begin[o + 1]; },
      [](std::uint32_t, std::uint32_t, std::uint32_t) {});
  for (std::uint32_t m = 0; m < member_count; ++m) run_begin[m + 1] += run_begin[m];
  const std::uint32_t runs = run_begin[member_count];

  GroupAssignment out;
  out.members.resize(member_count);
  for (std::uint32_t m = 0; m < member_count; ++m) {
    MemberAssignment& a = out.members[model.member_input[m]];
    a.member_id = model.member(m).member_id;
    a.partitions.reserve(run_begin[m + 1] - run_begin[m]);
  }
  if (std::uint64_t{runs} * 4 > partitions) {
    fill_by_member(model, owner, out);
    return out;
  }
  // Long runs (the sticky assignors keep a member's partitions together): a second walk measures
  // each run and a third fills the vectors, sized exactly, in partition order. Nothing is
  // written per partition but the result itself, so for a million partitions the result is the
  // only fresh memory of that size a first call touches (issue 37, the assignors cold).
  std::vector<std::uint32_t> run_length(runs, 0);
  std::vector<std::uint32_t> next(run_begin.begin(), run_begin.end() - 1);
  walk_runs(
      model, owner, last_topic, [&](std::uint32_t o, std::uint32_t) { ++next[o]; },
      [&](std::uint32_t o, std::uint32_t, std::uint32_t) { ++run_length[next[o] - 1]; });
  std::vector<std::vector<std::int32_t>*> current(member_count, nullptr);
  std::copy(run_begin.begin(), run_begin.end() - 1, next.begin());
  walk_runs(
      model, owner, last_topic,
      [&](std::uint32_t o, std::uint32_t t) {
        auto& tp = out.members[model.member_input[o]].partitions.emplace_back();
        tp.topic.assign(model.topic_name[t]);
        tp.partitions.reserve(run_length[next[o]++]);
        current[o] = &tp.partitions;
      },
      [&](std::uint32_t o, std::uint32_t t, std::uint32_t g) {
        current[o]->push_back(static_cast<std::int32_t>(g - model.topic_base[t]));
      });
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
