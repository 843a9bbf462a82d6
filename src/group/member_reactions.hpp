// The membership core's error vocabulary, shared by its sources (member.cpp and
// member_responses.cpp): the protocol type it joins with, and how a coordinator's error code reads
// (classes from protocol/error_reactions.hpp, messages for the fatal ones). Internal to the core.
#pragma once

#include <cstdint>
#include <string>

#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::group {

inline constexpr const char* protocol_type = "consumer";

inline bool is_fatal_group_error(std::int16_t c) {
  return protocol::reacts(c, protocol::reaction::group_fatal);
}

inline bool is_fenced(std::int16_t c) {
  return protocol::reacts(c, protocol::reaction::fenced);
}

inline std::string fatal_message(std::int16_t c, const std::string& group) {
  switch (static_cast<kafka_errc>(c)) {
    case kafka_errc::fenced_instance_id:
      return "another consumer with the same group.instance.id joined group '" + group +
             "'; this one is fenced (use a unique group.instance.id per process)";
    case kafka_errc::group_authorization_failed:
      return "not authorized to access group '" + group + "'";
    case kafka_errc::inconsistent_group_protocol:
      return "group '" + group +
             "' uses protocols this consumer does not support (partition.assignment.strategy has no assignor "
             "in "
             "common with the other members)";
    case kafka_errc::group_max_size_reached:
      return "group '" + group + "' has reached the broker's group.max.size";
    case kafka_errc::invalid_session_timeout:
      return "session.timeout.ms is outside the broker's group.min.session.timeout.ms .. "
             "group.max.session.timeout.ms";
    default:
      return kafka_error_name(c) + " from the coordinator of group '" + group + "'";
  }
}

}  // namespace kgroup::group
