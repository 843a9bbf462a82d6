// The dense representation every built-in assignor works on.
//
// Public types name partitions by topic string; the algorithms work on integers: topics get ids in
// name order, members get ids in Kafka's member order, and partition p of topic t gets the global
// id topic_base[t] + p. With these, a group of a million partitions is a handful of flat uint32
// arrays and no per-partition heap object. Pure code: no I/O, no threads.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kgroup/assignor.hpp"

namespace kgroup::assign {

inline constexpr std::uint32_t no_member = 0xFFFFFFFFu;
/// A partition claimed by two members at the same (highest) generation: nobody's by stickiness,
/// and withheld in a cooperative round since either might still hold it.
inline constexpr std::uint32_t contested = 0xFFFFFFFEu;

/// Kafka's member order (Java's MemberInfo): static members first, by group.instance.id, then
/// dynamic members by member id. Range and roundrobin results depend on it.
bool member_before(const MemberSubscription& a, const MemberSubscription& b) noexcept;

struct group_model {
  const ClusterMetadata* cluster = nullptr;
  const GroupSubscription* group = nullptr;

  // Topics: those in the metadata with at least one partition and one subscriber, by name.
  std::vector<std::string_view> topic_name;
  std::vector<const TopicMetadata*> topic_meta;
  std::vector<std::uint32_t> topic_base;  // size T + 1; partitions of t are [base[t], base[t+1])
  std::unordered_map<std::string_view, std::uint32_t> topic_id;

  // Members in Kafka's member order; member m is group->members[member_input[m]].
  std::vector<std::uint32_t> member_input;

  // Subscriptions both ways, each list stored once however many members or topics share it (a
  // group mostly shares one subscription: a million partitions over 2,000 members subscribing to
  // the same 500 topics is one list of 500 topics and one of 2,000 members, not two of a million
  // entries to write on every rebalance). Member m subscribes to the topics of distinct
  // subscription s = sub_of[m]: sub_topics[sub_begin[s] .. sub_begin[s+1]) (ascending topic ids).
  // Topic t has the subscribers of distinct list l = subscriber_list_of[t]:
  // subscribers[subscriber_begin[l] .. subscriber_begin[l+1]) (ascending member ids, i.e. in
  // member order).
  std::vector<std::uint32_t> sub_of;
  std::vector<std::uint32_t> sub_begin;
  std::vector<std::uint32_t> sub_topics;
  std::vector<std::uint32_t> subscriber_list_of;
  std::vector<std::uint32_t> subscriber_begin;
  std::vector<std::uint32_t> subscribers;
  /// Every member subscribes to the same topics (possibly none).
  bool uniform = true;

  // Rack awareness, set up only when it can change a result: some member has a rack and some
  // partition lacks a replica in some member's rack. Racks are numbered among member racks only;
  // partition p's replicas are in racks part_racks[part_rack_begin[p] .. part_rack_begin[p+1]).
  bool rack_aware = false;
  std::vector<std::int32_t> member_rack;  // -1: no rack
  std::vector<std::uint32_t> part_rack_begin;
  std::vector<std::uint16_t> part_racks;
  std::uint32_t rack_count = 0;

  std::uint32_t topic_count() const noexcept { return static_cast<std::uint32_t>(topic_name.size()); }
  std::uint32_t member_count() const noexcept { return static_cast<std::uint32_t>(member_input.size()); }
  std::uint32_t partition_count() const noexcept { return topic_base.back(); }
  const MemberSubscription& member(std::uint32_t m) const noexcept { return group->members[member_input[m]]; }

  std::span<const std::uint32_t> topics_of(std::uint32_t m) const noexcept {
    const std::uint32_t s = sub_of[m];
    return {sub_topics.data() + sub_begin[s], sub_topics.data() + sub_begin[s + 1]};
  }
  std::span<const std::uint32_t> subscribers_of(std::uint32_t t) const noexcept {
    const std::uint32_t l = subscriber_list_of[t];
    return {subscribers.data() + subscriber_begin[l], subscribers.data() + subscriber_begin[l + 1]};
  }
  bool subscribes(std::uint32_t m, std::uint32_t t) const noexcept;
  /// The topic of global partition id g (binary search).
  std::uint32_t topic_of(std::uint32_t g) const noexcept;

  /// Whether member m has a rack and partition g has a replica there.
  bool aligned(std::uint32_t g, std::uint32_t m) const noexcept {
    const std::int32_t r = member_rack[m];
    if (r < 0) return false;
    for (std::uint32_t i = part_rack_begin[g]; i < part_rack_begin[g + 1]; ++i) {
      if (part_racks[i] == static_cast<std::uint16_t>(r)) return true;
    }
    return false;
  }
  std::span<const std::uint16_t> racks_of(std::uint32_t g) const noexcept {
    return {part_racks.data() + part_rack_begin[g], part_racks.data() + part_rack_begin[g + 1]};
  }
};

/// Builds the model; `want_racks` lets assignors without rack support skip the rack tables.
/// Throws std::invalid_argument for caller errors (see PartitionAssignor::assign).
group_model build_model(const ClusterMetadata& cluster, const GroupSubscription& group, bool want_racks);

/// Where the sticky assignors read a member's previous ownership from.
enum class claim_source {
  owned_then_user_data,  // cooperative-sticky: Subscription owned_partitions, user data as fallback
  user_data_then_owned,  // sticky (eager): StickyAssignorUserData, Subscription as fallback
};

/// Previous ownership after resolving conflicting claims. When no member claims anything (a new
/// group) both tables stay empty and every partition reads no_member: a million-partition group's
/// first assignment then touches 12 MB less fresh memory (issue 37, the assignors cold).
struct ownership {
  /// Per global partition: the highest-generation claimant, `contested`, or no_member, whether or
  /// not it still subscribes. A cooperative round withholds a partition from anyone else. Empty:
  /// no claims.
  std::vector<std::uint32_t> claimant;
  /// Per global partition: the owner stickiness keeps it with (the highest-generation claimant,
  /// if uncontested and still subscribed to the topic), or no_member. Empty when there are no
  /// claims or when every uncontested claimant still subscribes to its partitions' topics: prev()
  /// then reads the claimant.
  std::vector<std::uint32_t> prev_owner;

  bool none() const noexcept { return claimant.empty(); }
  std::uint32_t prev(std::uint32_t g) const noexcept {
    if (!prev_owner.empty()) return prev_owner[g];
    if (claimant.empty()) return no_member;
    const std::uint32_t c = claimant[g];
    return c >= contested ? no_member : c;
  }
  std::uint32_t claim(std::uint32_t g) const noexcept { return claimant.empty() ? no_member : claimant[g]; }
};

ownership resolve_claims(const group_model& model, claim_source source);

/// Turns an owner per global partition (no_member: unassigned) into the public result, one entry
/// per input member in input order, topics by name, partitions ascending.
GroupAssignment build_assignment(const group_model& model, std::span<const std::uint32_t> owner);

// The algorithms. Each returns the new owner of every global partition (no_member: unassigned).
std::vector<std::uint32_t> range_assign(const group_model& model);
std::vector<std::uint32_t> roundrobin_assign(const group_model& model);
std::vector<std::uint32_t> sticky_assign(const group_model& model, const ownership& prior);
/// KIP-429: a partition whose highest-generation claimant is not its new owner is left out.
void withhold_transfers(const ownership& prior, std::vector<std::uint32_t>& owner);

}  // namespace kgroup::assign
