// Internals shared by the KIP-848 membership core's sources (consumer_member*.cpp): set
// arithmetic on assignments by topic id, and the error classes. Not part of the core's interface.
#pragma once

#include <set>
#include <vector>

#include "group/consumer_member.hpp"
#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::group::kip848 {

using s = consumer_member_state;

inline id_assignment minus(const id_assignment& a, const id_assignment& b) {
  id_assignment out;
  for (const auto& [id, parts] : a) {
    auto it = b.find(id);
    std::set<std::int32_t> left;
    for (auto p : parts) {
      if (it == b.end() || !it->second.contains(p)) left.insert(p);
    }
    if (!left.empty()) out.emplace(id, std::move(left));
  }
  return out;
}

inline id_assignment intersect(const id_assignment& a, const id_assignment& b) {
  return minus(a, minus(a, b));
}

inline id_assignment unite(id_assignment a, const id_assignment& b) {
  for (const auto& [id, parts] : b) a[id].insert(parts.begin(), parts.end());
  return a;
}

// Empty partition lists are not part of an assignment (so that equal sets compare equal).
inline id_assignment normalized(id_assignment a) {
  std::erase_if(a, [](const auto& e) { return e.second.empty(); });
  return a;
}

inline std::vector<protocol::consumer_group_heartbeat_request::topic_partitions_t> to_wire(const id_assignment& a) {
  std::vector<protocol::consumer_group_heartbeat_request::topic_partitions_t> out;
  for (const auto& [id, parts] : a) out.push_back({id, {parts.begin(), parts.end()}});
  return out;
}

inline bool is_fatal(std::int16_t c) {
  // The classic core's fatal class (which holds KIP-848's UNRELEASED_INSTANCE_ID,
  // UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION), plus what only this protocol makes fatal:
  // a refused topic (Java reports it and carries on, see docs/DESIGN.md) and a request
  // the coordinator calls invalid (Java: fatal; retrying the same request cannot help).
  return protocol::reacts(c, protocol::reaction::group_fatal) ||
         c == code_of(kafka_errc::topic_authorization_failed) || c == code_of(kafka_errc::invalid_request);
}

}  // namespace kgroup::group::kip848
