// The consumer group as its coordinator describes it (DescribeGroups), with the group's committed
// offsets and the partitions' end offsets: what GET /group serves and the dashboard's group map
// draws. A plain value type in base/, because the runtime layer gathers it (fetch/group_observer)
// and the http layer renders it, and http may include nothing but base.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kgroup/types.hpp"

namespace kgroup::base {

struct group_view_member {
  std::string member_id;
  std::string client_id;
  std::string host;  // as the coordinator saw the connection, e.g. "/127.0.0.1"
  std::optional<std::string> instance_id;
  std::vector<TopicPartition> partitions;  // its assignment, decoded with the consumer protocol
  // Why its assignment could not be read (bytes that do not decode, another protocol type);
  // `partitions` is then empty. Other members are unaffected.
  std::string error;
};

struct group_view_partition {
  TopicPartition partition;
  std::string owner;             // member_id; empty when no member has it
  std::int64_t committed = -1;   // the group's committed offset; -1 none or unknown
  std::int64_t end_offset = -1;  // high watermark (last stable offset under read_committed); -1 unknown
  std::int64_t lag = -1;         // end_offset - committed when both are known, else -1
};

struct group_view {
  std::string group_id;
  std::string member_id;         // this consumer's member id; empty when it is not a member
  std::string state;             // Stable, PreparingRebalance, CompletingRebalance, Empty, Dead; "" unknown
  std::string protocol_type;     // "consumer" for consumer groups
  std::string protocol;          // the assignor the group chose
  std::int32_t generation = -1;  // this member's generation when it is in the group, else -1
  std::vector<group_view_member> members;
  std::vector<group_view_partition> partitions;  // by topic, then partition
  std::int64_t age_ms = -1;  // since members and partitions were gathered; -1: not gathered yet
  std::string error;         // what went wrong in the latest refresh; empty if it succeeded
  bool refreshing = false;   // a refresh is under way
};

}  // namespace kgroup::base
