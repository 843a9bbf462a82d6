// The consumer protocol's bytes in the classic membership (group/member.hpp): the JoinGroup
// protocol list the member sends (one entry per assignor, with its subscription) and the
// decoding of the assignment SyncGroup returns. The defaults of group::member; tests inject their own.
#include <utility>

#include "assign/consumer_protocol.hpp"
#include "base/log.hpp"
#include "group/member.hpp"

namespace kgroup::group {

namespace {

std::vector<TopicPartitions> group_by_topic(const partition_set& parts) {
  std::vector<TopicPartitions> out;
  for (const auto& tp : parts) {
    if (out.empty() || out.back().topic != tp.topic) out.push_back({tp.topic, {}});
    out.back().partitions.push_back(tp.partition);
  }
  return out;
}

}  // namespace

protocol_builder consumer_protocols(std::vector<std::shared_ptr<PartitionAssignor>> assignors) {
  // In preference order, each with the member's subscription encoded with the consumer protocol
  // (v3: owned partitions, generation, rack) and the assignor's own user data. An assignor whose
  // subscription cannot be encoded is left out (and logged), the others still offered.
  return [assignors = std::move(assignors)](const subscription_snapshot& s) {
    std::vector<protocol::join_group_request::join_group_request_protocol> out;
    for (const auto& a : assignors) {
      MemberState self{s.topics, group_by_topic(s.owned), s.generation, s.rack};
      MemberSubscription sub;
      sub.topics = s.topics;
      sub.user_data = a->user_data(self);
      sub.owned_partitions = self.owned_partitions;
      sub.generation = s.generation;
      sub.rack = s.rack;
      protocol::bytes meta;
      if (auto ec = assign::encode_subscription(sub, assign::subscription_version_max, meta)) {
        logger()->error("cannot encode the subscription for assignor '{}': {}", a->name(), ec.message());
        continue;
      }
      out.push_back({a->name(), std::move(meta)});
    }
    return out;
  };
}

std::error_code decode_consumer_assignment(std::span<const std::uint8_t> in, partition_set& out) {
  MemberAssignment a;
  if (auto ec = assign::decode_assignment(in, a)) return ec;
  for (const auto& tp : a.partitions) {
    for (auto p : tp.partitions) out.insert({tp.topic, p});
  }
  return {};
}

}  // namespace kgroup::group
