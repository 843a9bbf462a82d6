// Assignments by topic id and the names they resolve to, for the cores whose coordinator speaks
// topic ids (KIP-848's ConsumerGroupHeartbeat, KIP-932's ShareGroupHeartbeat). Pure: time is an
// argument.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/backoff.hpp"
#include "group/types.hpp"
#include "protocol/primitives.hpp"

namespace kgroup::group {

using topic_id = protocol::uuid;
struct topic_id_less {
  bool operator()(const topic_id& a, const topic_id& b) const noexcept { return a.bytes < b.bytes; }
};
/// An assignment as the coordinator speaks it: partitions by topic id.
using id_assignment = std::map<topic_id, std::set<std::int32_t>, topic_id_less>;

/// Empty partition lists are not part of an assignment (so that equal sets compare equal).
inline id_assignment normalized_assignment(id_assignment a) {
  std::erase_if(a, [](const auto& e) { return e.second.empty(); });
  return a;
}

/// The names of the topic ids a member has seen, and when to ask metadata for the ones it has not.
/// Names are kept for every id seen, so an owned partition never becomes unresolvable.
class topic_names {
 public:
  topic_names(ms retry_backoff, ms retry_backoff_max)
      : backoff_(retry_backoff, retry_backoff_max) {}  // no jitter: deterministic tests

  const std::string* find(const topic_id& id) const {
    const auto it = names_.find(id);
    return it == names_.end() ? nullptr : &it->second;
  }

  /// Names the driver found (more than asked is fine; an empty name is none). True if any is new.
  bool learn(const std::vector<std::pair<topic_id, std::string>>& names) {
    bool news = false;
    for (const auto& [id, name] : names) {
      if (name.empty()) continue;
      if (names_.emplace(id, name).second) news = true;
      asked_.erase(id);
    }
    if (news) backoff_.reset();
    return news;
  }

  /// The part of `a` whose names are known; the ids that are not go to `unknown`.
  id_assignment resolved(const id_assignment& a, std::vector<topic_id>* unknown) const {
    id_assignment out;
    for (const auto& [id, parts] : a) {
      if (names_.contains(id)) {
        out.emplace(id, parts);
      } else if (unknown) {
        unknown->push_back(id);
      }
    }
    return out;
  }

  /// The partitions of `a` by name (an id without a name, a bug, is shown, not hidden).
  partition_set named(const id_assignment& a) const {
    partition_set out;
    for (const auto& [id, parts] : a) {
      const auto* n = find(id);
      const std::string name = n ? *n : "<topic id " + id.to_string() + ">";
      for (auto p : parts) out.insert({name, p});
    }
    return out;
  }

  /// The ids of `a` to ask metadata for now, or nullopt: ids not asked yet at once, every unknown
  /// one again once the retry backoff has passed (the topic may be too new for the broker asked).
  std::optional<std::vector<topic_id>> to_ask(time_point now, const id_assignment& a) {
    std::vector<topic_id> unknown;
    (void)resolved(a, &unknown);
    if (unknown.empty()) return std::nullopt;
    const bool retry = now >= retry_at_;
    std::vector<topic_id> ask;
    for (const auto& id : unknown) {
      if (retry || !asked_.contains(id)) ask.push_back(id);
    }
    if (ask.empty()) return std::nullopt;
    asked_.insert(ask.begin(), ask.end());
    retry_at_ = now + backoff_.next();
    return ask;
  }

  /// When to_ask() asks again for ids of `a` still unknown, or nullopt if none is.
  std::optional<time_point> retry_at(const id_assignment& a) const {
    std::vector<topic_id> unknown;
    (void)resolved(a, &unknown);
    if (unknown.empty() || retry_at_ == time_point{}) return std::nullopt;
    return retry_at_;
  }

 private:
  std::map<topic_id, std::string, topic_id_less> names_;  // every id whose name is known
  std::set<topic_id, topic_id_less> asked_;               // asked for and not yet answered
  time_point retry_at_{};
  base::backoff backoff_;
};

}  // namespace kgroup::group
