// Whether a decoded answer talks about what its request asked. A response can
// decode cleanly and still be wrong: a broker that writes a field too wide shifts every later
// entry (librdkafka 2.0.2's mock, ListOffsets v4-5: the second partition of an answer comes out
// as partition -1 with garbage offsets, followed by "trailing" bytes). Counting trailing bytes is
// right for a complete, well-formed answer; an answer naming a topic, partition, group or key
// that was not asked for is dropped whole and never applied, since none of its entries can be
// trusted. Checked by the connection for every API before the caller sees the answer. APIs
// whose answers list nothing of the request's (JoinGroup, Heartbeat, ...) always pass; Fetch
// answers are checked by the fetch session, which knows the partitions of incremental fetches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "protocol/messages.hpp"

namespace kgroup::protocol {

namespace answer_detail {

// The (topic, partition) pairs a request asked for; take() strikes one off as the answer names it.
class asked_partitions {
 public:
  void add(const std::string& topic, std::int32_t partition) { left_.emplace(topic, partition); }
  // "" if asked and not named before; else what to report.
  std::string take(const std::string& topic, std::int32_t partition) {
    if (left_.erase({topic, partition}) == 1) return {};
    return "partition " + topic + "-" + std::to_string(partition) + " (not asked, or named twice)";
  }

 private:
  std::set<std::pair<std::string, std::int32_t>> left_;
};

// The first entry of `answer` whose key(entry) is not in `asked`, or is named twice.
template <class Names, class Answer, class Key>
std::string first_unasked_key(const Names& asked, const Answer& answer, Key key, const char* what) {
  std::set<std::string> left(asked.begin(), asked.end());
  for (const auto& a : answer) {
    if (left.erase(key(a)) == 0) return std::string(what) + " " + key(a) + " (not asked, or named twice)";
  }
  return {};
}

}  // namespace answer_detail

/// What in `resp` its request `req` did not ask for, or names twice ("" when the answer matches).
/// The default: nothing to check.
template <class Request, class Response>
std::string unasked(const Request&, const Response&) {
  return {};
}

namespace answer_detail {
// For requests and answers whose topics hold `name` and partitions `partition_index`.
template <class Request, class Response>
std::string unasked_by_name(const Request& req, const Response& resp) {
  asked_partitions asked;
  for (const auto& t : req.topics)
    for (const auto& p : t.partitions) asked.add(t.name, p.partition_index);
  for (const auto& t : resp.topics)
    for (const auto& p : t.partitions)
      if (auto bad = asked.take(t.name, p.partition_index); !bad.empty()) return bad;
  return {};
}
}  // namespace answer_detail

inline std::string unasked(const list_offsets_request& req, const list_offsets_response& resp) {
  return answer_detail::unasked_by_name(req, resp);
}

inline std::string unasked(const offset_for_leader_epoch_request& req, const offset_for_leader_epoch_response& resp) {
  answer_detail::asked_partitions asked;
  for (const auto& t : req.topics)
    for (const auto& p : t.partitions) asked.add(t.topic, p.partition);
  for (const auto& t : resp.topics)
    for (const auto& p : t.partitions)
      if (auto bad = asked.take(t.topic, p.partition); !bad.empty()) return bad;
  return {};
}

inline std::string unasked(const offset_commit_request& req, const offset_commit_response& resp) {
  return answer_detail::unasked_by_name(req, resp);
}

inline std::string unasked(const offset_fetch_request& req, const offset_fetch_response& resp) {
  // The single-group layout (v1-7): a request for all topics (null) accepts any partitions.
  if (req.topics) {
    answer_detail::asked_partitions asked;
    for (const auto& t : *req.topics)
      for (auto p : t.partition_indexes) asked.add(t.name, p);
    for (const auto& t : resp.topics)
      for (const auto& p : t.partitions)
        if (auto bad = asked.take(t.name, p.partition_index); !bad.empty()) return bad;
  }
  // The batched layout (v8+): the groups asked, each once, and within each the topics asked
  // (unless null).
  std::vector<std::string> group_ids;
  for (const auto& g : req.groups) group_ids.push_back(g.group_id);
  if (auto bad = answer_detail::first_unasked_key(group_ids, resp.groups,
                                                  [](const auto& g) -> const std::string& { return g.group_id; }, "group");
      !bad.empty())
    return bad;
  for (const auto& g : resp.groups) {
    const auto rg = std::find_if(req.groups.begin(), req.groups.end(),
                                 [&](const auto& r) { return r.group_id == g.group_id; });
    if (!rg->topics) continue;
    answer_detail::asked_partitions asked;
    for (const auto& t : *rg->topics)
      for (auto p : t.partition_indexes) asked.add(t.name, p);
    for (const auto& t : g.topics)
      for (const auto& p : t.partitions)
        if (auto bad = asked.take(t.name, p.partition_index); !bad.empty()) return bad;
  }
  return {};
}

inline std::string unasked(const find_coordinator_request& req, const find_coordinator_response& resp) {
  // v4+ answers per key; before, one coordinator for the single key (no list).
  return answer_detail::first_unasked_key(req.coordinator_keys, resp.coordinators,
                                          [](const auto& c) -> const std::string& { return c.key; }, "key");
}

inline std::string unasked(const describe_groups_request& req, const describe_groups_response& resp) {
  return answer_detail::first_unasked_key(req.groups, resp.groups,
                                          [](const auto& d) -> const std::string& { return d.group_id; }, "group");
}

inline std::string unasked(const consumer_group_describe_request& req, const consumer_group_describe_response& resp) {
  return answer_detail::first_unasked_key(req.group_ids, resp.groups,
                                          [](const auto& d) -> const std::string& { return d.group_id; }, "group");
}

}  // namespace kgroup::protocol
