/// \file
/// Partition assignment: the interface the group leader uses to divide partitions among the
/// members of a consumer group, and the built-in assignors under Kafka's protocol names.
///
/// The leader runs assign() once per generation with every member's subscription; the result is
/// sent to the members in SyncGroup. Members never run assign(): they only contribute the user
/// data of their subscription (user_data()).
///
/// Everything here is plain values: no I/O, no threads, no clock. The types are shaped for groups
/// with a million partitions: partitions are grouped per topic ({topic, [partition...]}), never one
/// string per partition, and per-partition replica placement is given as broker ids (which a
/// Metadata response already has) plus one rack per broker.
#pragma once

#include "kgroup/export.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup {

/// How a group moves partitions between members during a rebalance.
enum class RebalanceProtocol : std::uint8_t {
  /// Every member revokes all its partitions before it rejoins (the classic protocol).
  eager,
  /// KIP-429 incremental rebalancing: members keep their partitions while the group rebalances;
  /// a partition that changes owner is first revoked by its old owner (this round) and only then
  /// assigned to its new owner (the follow-up round).
  cooperative,
};

/// Some partitions of one topic. Used for owned and assigned partitions.
struct KGROUP_EXPORT TopicPartitions {
  std::string topic;                     ///< topic name
  std::vector<std::int32_t> partitions;  ///< partition numbers of that topic
  /// Same topic and the same partitions in the same order.
  bool operator==(const TopicPartitions&) const = default;
};

/// A topic as the leader's metadata knows it.
struct KGROUP_EXPORT TopicMetadata {
  std::string topic;  ///< topic name
  /// Partitions 0 .. partition_count - 1. Must not be negative.
  std::int32_t partition_count = 0;
  /// Optional replica placement for rack-aware assignment (KIP-881): either empty (unknown) or
  /// exactly partition_count entries, entry p listing the broker ids of partition p's replicas
  /// (all replicas, not only the in-sync ones). Broker racks come from ClusterMetadata::brokers.
  std::vector<std::vector<std::int32_t>> replicas;
};

/// A broker and its rack (broker.rack), for rack-aware assignment.
struct KGROUP_EXPORT BrokerMetadata {
  std::int32_t node_id = -1;        ///< broker id
  std::optional<std::string> rack;  ///< its broker.rack; empty when it has none
};

/// The cluster as the leader sees it when it assigns.
struct KGROUP_EXPORT ClusterMetadata {
  /// Topic names must be unique. Topics nobody subscribes to are ignored.
  std::vector<TopicMetadata> topics;
  /// Only needed for rack-aware assignment; brokers without a rack are ignored.
  std::vector<BrokerMetadata> brokers;
};

/// One member's entry in the group: JoinGroup's member identity plus its decoded consumer-protocol
/// subscription (ConsumerProtocolSubscription v0-v3).
struct KGROUP_EXPORT MemberSubscription {
  std::string member_id;  ///< the member id the coordinator gave it
  /// group.instance.id of a static member (KIP-345); orders members before member_id does.
  std::optional<std::string> group_instance_id;
  /// Subscribed topics. Topics missing from the metadata are ignored; duplicates are harmless.
  std::vector<std::string> topics;
  /// The assignor-specific bytes the member's own assignor produced with user_data().
  std::optional<std::vector<std::uint8_t>> user_data;
  /// Partitions the member owned in `generation` (Subscription v1+; empty for eager members).
  std::vector<TopicPartitions> owned_partitions;
  /// Generation of owned_partitions (Subscription v2+); -1 if unknown.
  std::int32_t generation = -1;
  /// The member's client.rack (Subscription v3+).
  std::optional<std::string> rack;
};

/// The members of one generation, as the leader received them in the JoinGroup response.
struct KGROUP_EXPORT GroupSubscription {
  /// Member ids must be unique. The order carries no meaning.
  std::vector<MemberSubscription> members;
};

/// What one member gets (ConsumerProtocolAssignment).
struct KGROUP_EXPORT MemberAssignment {
  std::string member_id;  ///< the member this entry is for
  /// Topics in name order, partitions ascending (the built-ins; custom assignors may differ).
  std::vector<TopicPartitions> partitions;
  /// Assignor-specific bytes for the member (ConsumerProtocolAssignment.UserData); the built-ins
  /// send none.
  std::optional<std::vector<std::uint8_t>> user_data;
};

/// The result of assign().
struct KGROUP_EXPORT GroupAssignment {
  /// The built-ins return exactly one entry per input member, in the input order. A member a
  /// custom assignor leaves out gets an empty assignment.
  std::vector<MemberAssignment> members;
};

/// What a member knows about itself when it (re)joins; the input of PartitionAssignor::user_data.
struct KGROUP_EXPORT MemberState {
  std::vector<std::string> topics;  ///< the topics it subscribes to
  /// The partitions it owns now (for eager members: owned before it revoked them to rejoin).
  std::vector<TopicPartitions> owned_partitions;
  /// The generation in which it got owned_partitions; -1 if it never had an assignment.
  std::int32_t generation = -1;
  std::optional<std::string> rack;  ///< its client.rack, if set
};

/// A partition assignment strategy, named by its protocol name in JoinGroup ("range", ...).
///
/// Implement this to plug in your own strategy. Requirements:
/// - Determinism: assign() must return the same assignment for the same input, whatever the
///   order of GroupSubscription::members (the built-ins order members by group_instance_id, then
///   member_id, and topics by name).
/// - Every partition of a subscribed topic should be assigned to at most one member, and only to
///   a member that subscribes to its topic. The leader checks this before sending the result.
/// - For RebalanceProtocol::cooperative: a partition some member owns (MemberSubscription::
///   owned_partitions) must not be given to another member in the same round; give it in the
///   follow-up round, after the owner revoked it.
///
/// Thread-safety: the consumer calls user_data() and assign() on its background thread, one call
/// at a time. An instance shared by several consumers may be called from several threads at once,
/// so shared instances must be safe for concurrent const calls. The built-ins are stateless and
/// safe to share.
///
/// Exceptions: an exception from assign() or user_data() is caught by the consumer and reported
/// as a failure of this rebalance; it does not cross into other threads.
class KGROUP_EXPORT PartitionAssignor {
 public:
  virtual ~PartitionAssignor() = default;

  /// The protocol name sent in JoinGroup. Members of a group must agree on one name; the built-in
  /// names are Kafka's, so groups can mix kgroup with Java, librdkafka and franz-go members.
  /// Does not throw (built-ins).
  virtual std::string name() const = 0;

  /// The rebalance protocols this assignor supports. The group uses cooperative only if every
  /// assignor the consumer is configured with supports it. Default: {eager}.
  virtual std::vector<RebalanceProtocol> supported_protocols() const;

  /// The user data for this member's subscription (ConsumerProtocolSubscription.UserData), or
  /// nullopt for none. Called each time the member (re)joins. Default: nullopt.
  /// Built-ins: "sticky" writes Kafka's StickyAssignorUserData v1 (owned partitions and
  /// generation), "cooperative-sticky" writes the generation as 4 bytes (as the Java client).
  /// Throws only std::bad_alloc (built-ins).
  virtual std::optional<std::vector<std::uint8_t>> user_data(const MemberState& self) const;

  /// Divides the partitions of the subscribed topics among the members.
  /// Built-ins: throw std::invalid_argument for input the caller got wrong (duplicate member ids,
  /// duplicate topics in the metadata, a negative partition count, a replicas vector whose size
  /// is neither 0 nor partition_count, more than 2^31 - 1 partitions in total) and
  /// std::bad_alloc. Anything a member sent (unknown topics, bad owned partitions, malformed
  /// user data, any generation) is tolerated: what cannot be used is ignored.
  virtual GroupAssignment assign(const ClusterMetadata& cluster, const GroupSubscription& group) const = 0;
};

/// Kafka's RangeAssignor: per topic, members in order get consecutive ranges of partitions, the
/// first ones one extra. Rack-aware (KIP-881) when members and replicas have racks. Eager only.
KGROUP_EXPORT std::shared_ptr<PartitionAssignor> make_range_assignor();

/// Kafka's RoundRobinAssignor: all partitions in topic order dealt to members in turn, skipping
/// members not subscribed to the partition's topic. Eager only.
KGROUP_EXPORT std::shared_ptr<PartitionAssignor> make_roundrobin_assignor();

/// Kafka's StickyAssignor ("sticky"): balanced, and moves as few partitions as balance allows.
/// Ownership travels in the user data (StickyAssignorUserData), as eager members revoke
/// everything before they rejoin. Rack-aware. Eager only.
KGROUP_EXPORT std::shared_ptr<PartitionAssignor> make_sticky_assignor();

/// Kafka's CooperativeStickyAssignor ("cooperative-sticky"): the sticky algorithm on the owned
/// partitions of Subscription v1+, with KIP-429's two-phase hand-over (a partition that changes
/// owner is left unassigned this round). Rack-aware. Supports cooperative and eager.
KGROUP_EXPORT std::shared_ptr<PartitionAssignor> make_cooperative_sticky_assignor();

/// The built-in assignor with this protocol name ("range", "roundrobin", "sticky",
/// "cooperative-sticky"), or nullptr for any other name. Does not throw except std::bad_alloc.
KGROUP_EXPORT std::shared_ptr<PartitionAssignor> make_assignor(std::string_view name);

}  // namespace kgroup
