// The membership core, continued: the leader's and the subscription's decisions (kept
// out of the driver so that they are pure and unit-tested). Which topics a pattern subscribes to, the leader's assignment
// (subscriptions decoded, the chosen assignor run on the metadata the driver fetched, its result
// checked and encoded), who joined or left, and the partition-count watch. Pure, like member.cpp.
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>

#include "assign/consumer_protocol.hpp"
#include "assign/validate.hpp"
#include "group/member.hpp"
#include "kgroup/error.hpp"
#include "base/log.hpp"

namespace kgroup::group {

void member::request_assignment(const protocol::join_group_response& r) {
  assignment_job job;
  job.generation = generation_;
  for (const auto& a : opts_.assignors) {
    if (a->name() == protocol_name_) job.assignor = a;
  }
  std::set<std::string> topics;
  for (const auto& m : r.members) {
    MemberSubscription sub;
    if (auto ec = assign::decode_subscription(m.metadata, sub)) {
      // A member whose subscription cannot be read gets nothing rather than breaking the group.
      logger()->error("group '{}': member '{}' sent an unreadable subscription ({}); it gets no partitions",
                      opts_.group_id, m.member_id, ec.message());
      sub = MemberSubscription{};
    }
    sub.member_id = m.member_id;
    sub.group_instance_id = m.group_instance_id;
    topics.insert(sub.topics.begin(), sub.topics.end());
    job.group.members.push_back(std::move(sub));
  }
  job.topics.assign(topics.begin(), topics.end());
  actions_.emplace_back(compute_assignment{generation_, protocol_name_, r.members, job.topics});
  assignment_job_ = std::move(job);
}

void member::assignment_metadata(time_point now, std::int32_t generation, std::error_code ec,
                                 const ClusterMetadata& metadata) {
  if (state_ != classic_state::assigning || generation != generation_ || !assignment_job_ ||
      assignment_job_->generation != generation) {
    return;  // stale (see assignment_computed)
  }
  auto job = std::move(*assignment_job_);
  assignment_job_.reset();
  if (ec) {
    assignment_computed(now, generation, ec, {});
    return;
  }
  if (!job.assignor) {
    // The coordinator chose a protocol this member did not offer.
    assignment_computed(now, generation, make_error_code(kafka_errc::inconsistent_group_protocol), {});
    return;
  }
  // The partition counts this assignment is based on: metadata_updated() watches them.
  assigned_counts_.clear();
  for (const auto& t : job.topics) assigned_counts_[t] = 0;
  for (const auto& t : metadata.topics) {
    if (auto it = assigned_counts_.find(t.topic); it != assigned_counts_.end()) {
      it->second = static_cast<std::size_t>(std::max(t.partition_count, 0));
    }
  }
  GroupAssignment result;
  try {
    result = job.assignor->assign(metadata, job.group);
    // A custom assignor may break the rules the built-ins keep by construction (a partition
    // twice, a member not in the group, a topic it did not subscribe to, KIP-429's revoke rule):
    // such a result is refused here rather than sent to the group.
    if (auto why = assign::check_assignment(metadata, job.group, result, opts_.protocol); !why.empty()) {
      throw std::invalid_argument("invalid assignment: " + why);
    }
  } catch (const std::exception& e) {
    logger()->error("group '{}': assignor '{}' failed: {}", opts_.group_id, job.assignor->name(), e.what());
    assignment_computed(now, generation, make_error_code(client_errc::illegal_state), {});
    return;
  }
  std::vector<protocol::sync_group_request::sync_group_request_assignment> out;
  for (const auto& m : job.group.members) {
    MemberAssignment mine;
    mine.member_id = m.member_id;
    for (const auto& a : result.members) {
      if (a.member_id == m.member_id) mine = a;
    }
    protocol::bytes bytes;
    if (auto eec = assign::encode_assignment(mine, assign::assignment_version_max, bytes)) {
      assignment_computed(now, generation, eec, {});
      return;
    }
    out.push_back({m.member_id, std::move(bytes)});
  }
  assignment_computed(now, generation, {}, std::move(out));
}

void member::describe_membership_change(
    std::int32_t generation,
    const std::vector<protocol::join_group_response::join_group_response_member>& members) {
  // The leader sees every member of consecutive generations: who joined and who left explains a
  // rebalance the coordinator started ("group rebalancing" from a follower's point of view).
  std::set<std::string> now;
  for (const auto& m : members) now.insert(m.group_instance_id.value_or(m.member_id));
  // Only a list of the generation just before this one explains this rebalance; one from an
  // older generation this member led may miss changes made since.
  if (!last_members_.empty() && last_members_generation_ + 1 == generation) {
    std::string joined, left;
    for (const auto& id : now) {
      if (!last_members_.count(id)) joined += (joined.empty() ? "" : ", ") + id;
    }
    for (const auto& id : last_members_) {
      if (!now.count(id)) left += (left.empty() ? "" : ", ") + id;
    }
    if (!left.empty()) {
      describe_rebalance(RebalanceCause::member_left, "left: " + left + (joined.empty() ? "" : "; joined: " + joined));
    } else if (!joined.empty()) {
      describe_rebalance(RebalanceCause::member_joined, "joined: " + joined);
    }
  }
  last_members_ = std::move(now);
  last_members_generation_ = generation;
}

void member::metadata_updated(time_point now, const std::vector<topic_summary>& topics) {
  if (pattern_) {
    std::vector<std::string> matched;
    for (const auto& t : topics) {
      if (opts_.exclude_internal_topics && t.internal) continue;
      if (t.error_code != 0) continue;
      if (std::regex_match(t.name, *pattern_)) matched.push_back(t.name);
    }
    std::sort(matched.begin(), matched.end());
    if ((matched != topics_ || state_ == classic_state::unsubscribed) &&
        (!matched.empty() || state_ != classic_state::unsubscribed)) {
      auto keep = std::move(pattern_);  // subscribe() is the user's call that ends a pattern
      subscribe(now, std::move(matched));
      pattern_ = std::move(keep);
    }
  }
  if (is_leader() && !assigned_counts_.empty()) {
    std::map<std::string_view, const topic_summary*> by_name;
    for (const auto& t : topics) by_name.emplace(t.name, &t);
    for (const auto& [topic, count] : assigned_counts_) {
      auto it = by_name.find(topic);
      if (it == by_name.end()) continue;  // this refresh did not cover the topic
      const std::size_t now_count = it->second->error_code == 0 ? it->second->partitions : 0;
      if (now_count != count) {
        metadata_changed(now, "metadata changed: topic '" + topic + "' now has " + std::to_string(now_count) +
                                  " partitions");
        break;
      }
    }
  }
  pump(now);
}

void member::metadata_changed(time_point now, std::string reason) {
  if (!is_leader()) return;
  if (state_ != classic_state::stable && state_ != classic_state::completing) return;
  request_rejoin(RebalanceCause::metadata_change, std::move(reason));
  pump(now);
}

void member::subscribe_pattern(time_point now, std::regex pattern) {
  if (state_ == classic_state::fatal || state_ == classic_state::closed) return;
  pattern_ = std::move(pattern);
  pump(now);
}

}  // namespace kgroup::group
