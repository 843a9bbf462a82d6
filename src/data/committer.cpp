#include "data/committer.hpp"

#include "base/sim_mutants.hpp"

#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::data {

namespace {

// Why the membership that owned the offsets is gone (group::standing::gone()), or nothing.
std::optional<commit_error> membership_gone(const group_identity& who) {
  if (who.poll_timed_out) {
    return commit_error{
        make_error_code(client_errc::commit_failed),
        "commit failed: this member left the group because poll() was not called within "
        "max.poll.interval.ms, so its partitions may be reassigned; the next poll() reports them lost and "
        "rejoins. Raise max.poll.interval.ms or process less per poll (max.poll.records)"};
  }
  if (who.fatal) {
    return commit_error{make_error_code(client_errc::commit_failed),
                        "commit failed: this member is no longer in the group (a fatal group error was "
                        "reported by poll())"};
  }
  if (who.removed) {
    return commit_error{
        make_error_code(client_errc::commit_failed),
        "commit failed: the coordinator removed this member from the group (session timeout, unknown member, "
        "fenced generation or member epoch) and it has not rejoined yet, so its partitions may be reassigned; "
        "poll() reports them lost and rejoins"};
  }
  if (who.left) {
    return commit_error{make_error_code(client_errc::commit_failed),
                        "commit failed: this member is leaving the group (unsubscribe() or close()) and no "
                        "longer owns its partitions"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<commit_error> refuse_commit(const group_identity& who, const commit_map& offsets) {
  if (!who.group_mode) return commit_error{make_error_code(client_errc::invalid_config), "commits need a group.id"};
  if (offsets.empty()) return commit_error{};
  if (who.subscribed) {
    // First, whatever the generation: a membership that is gone (fenced, poll timeout, fatal
    // error, leaving) fails the commit for good. Were it retriable, an application would poll()
    // and commit the same offsets again with the next membership's identity, which the
    // coordinator accepts, though the partitions may have a new owner.
#ifdef KGROUP_SIM_MUTANTS
    if (!sim::mutant_enabled("gone_commit_retriable"))  // issue 30, item 6, put back
#endif
      if (auto gone = membership_gone(who)) return gone;
    if (who.generation < 0) {
      // Not a member of a generation yet: a commit would go out with generation -1, which a
      // broker accepts as a "simple" commit when the group is empty. Refused here, as Java does.
      return commit_error{make_error_code(kafka_errc::rebalance_in_progress),
                          "this member is joining the group; poll() to complete the rebalance, then commit again"};
    }
  }
  if (!who.stable && who.generation >= 0) {
    return commit_error{make_error_code(kafka_errc::rebalance_in_progress),
                        "the group is rebalancing; poll() to complete the rebalance, then commit again"};
  }
  if (who.subscribed) {
    // A partition this membership does not own (given up or lost, e.g. while a slow revoke
    // callback ran and the member rejoined) may belong to another member of this very generation:
    // the coordinator would accept the commit and move that member's offset.
    for (const auto& [tp, m] : offsets) {
#ifdef KGROUP_SIM_MUTANTS
      if (sim::mutant_enabled("commit_not_owned")) break;  // kgroup-sim --group's finding put back
#endif
      if (!who.owned.count(tp)) {
        return commit_error{make_error_code(client_errc::commit_failed),
                            "commit failed: this member does not own " + tp.topic + "-" +
                                std::to_string(tp.partition) +
                                " now (it is not assigned to this member, or no longer: it may have "
                                "another owner); commit only the partitions assigned now"};
      }
    }
  }
  return std::nullopt;
}

protocol::offset_commit_request make_commit_request(const std::string& group_id, const group_identity& who,
                                                    const commit_map& offsets) {
  protocol::offset_commit_request req;
  req.group_id = group_id;
  req.generation_id_or_member_epoch = who.generation;
  req.member_id = who.member_id;
  req.group_instance_id = who.instance_id;
  std::map<std::string, std::size_t> index;
  for (const auto& [tp, om] : offsets) {
    auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
    if (inserted) req.topics.push_back({tp.topic, {}});
    protocol::offset_commit_request::offset_commit_request_topic::offset_commit_request_partition p;
    p.partition_index = tp.partition;
    p.committed_offset = om.offset;
    p.committed_leader_epoch = om.epoch;  // v6+ (KIP-320): the next owner can validate it
    p.committed_metadata = om.metadata;
    req.topics[it->second].partitions.push_back(p);
  }
  return req;
}

void fit_offset_commit(protocol::offset_commit_request& r, std::int16_t version) {
  if (version < 7) r.group_instance_id.reset();
}

std::optional<commit_failure> read_commit_response(const protocol::offset_commit_response& r) {
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code == 0) continue;
      commit_failure f;
      f.kafka_code = p.error_code;
      f.coordinator_gone = protocol::reacts(p.error_code, protocol::reaction::coordinator_moved);
      if (protocol::reacts(p.error_code, protocol::reaction::fenced) ||
          p.error_code == static_cast<std::int16_t>(kafka_errc::fenced_instance_id)) {
        f.error = {make_error_code(client_errc::commit_failed),
                   "commit failed (" + kafka_error_name(p.error_code) +
                       "): this member's generation is gone, its partitions may be reassigned. Either it was "
                       "removed from the group, or poll() was not called within max.poll.interval.ms; raise "
                       "max.poll.interval.ms or process less per poll (max.poll.records)"};
      } else {
        f.error = {make_error_code(static_cast<kafka_errc>(p.error_code)),
                   "commit of " + t.name + "-" + std::to_string(p.partition_index) +
                       " failed: " + kafka_error_name(p.error_code)};
      }
      return f;
    }
  }
  return std::nullopt;
}

commit_map auto_committer::due(const std::map<TopicPartition, detail::epoch_offset>& consumed,
                               const std::set<TopicPartition>& owned, const group_identity& who) const {
  if (!who.stable || who.gone()) return {};
  return auto_commit_due(consumed, owned, last_);
}

void auto_committer::committed(const commit_map& offsets) {
  for (const auto& [tp, om] : offsets) last_[tp] = om.offset;
}

std::optional<commit_error> refuse_offset_fetch(const group_identity& who) {
  if (!who.group_mode) return commit_error{make_error_code(kafka_errc::invalid_group_id), "no group.id"};
  return std::nullopt;
}

commit_error superseded_callback_commit() {
  return {
      make_error_code(client_errc::commit_failed),
      "commit failed: it was made inside a listener callback whose rebalance is over (the member gave its "
      "partitions up and went on while the callback ran), so they may have new owners; their next owner "
      "starts from the last commit that succeeded"};
}

commit_error coordinator_unknown() {
  return {make_error_code(kafka_errc::coordinator_not_available), "the group coordinator is not known yet"};
}

protocol::offset_fetch_request make_offset_fetch_request(const std::string& group_id,
                                                         const std::set<TopicPartition>& tps) {
  protocol::offset_fetch_request req;
  req.group_id = group_id;
  req.require_stable = true;
  std::map<std::string, std::size_t> index;
  for (const auto& tp : tps) {
    auto [it, inserted] = index.emplace(tp.topic, req.topics->size());
    if (inserted) req.topics->push_back({tp.topic, {}});
    (*req.topics)[it->second].partition_indexes.push_back(tp.partition);
  }
  return req;
}

committed_answer read_committed(const protocol::offset_fetch_response& r) {
  committed_answer out;
  const std::int16_t top = r.groups.empty() ? r.error_code : r.groups.front().error_code;
  out.coordinator_gone = protocol::reacts(top, protocol::reaction::coordinator_moved);
  if (top != 0) out.error = {make_error_code(static_cast<kafka_errc>(top)), "OffsetFetch failed: " + kafka_error_name(top)};
  for_each_committed(r, [&](const std::string& topic, std::int32_t p, std::int64_t off,
                            const std::optional<std::string>& m, std::int32_t epoch, std::int16_t err) {
    if (err == 0 && off >= 0) out.offsets[{topic, p}] = {off, m.value_or(""), epoch};
    if (err != 0 && !out.error.code) {
      out.error = {make_error_code(static_cast<kafka_errc>(err)),
                   "OffsetFetch of " + topic + "-" + std::to_string(p) + " failed: " + kafka_error_name(err)};
    }
  });
  return out;
}

bool commit_retriable(std::error_code ec) {
  if (ec.category() == kafka_category()) {
    return protocol::reacts(static_cast<std::int16_t>(ec.value()), protocol::reaction::coordinator_moved |
                                                                       protocol::reaction::coordinator_busy |
                                                                       protocol::reaction::retry_commit);
  }
  return ec == make_error_code(client_errc::connection_closed) || ec == make_error_code(client_errc::request_timed_out);
}

commit_map auto_commit_due(const std::map<TopicPartition, detail::epoch_offset>& consumed,
                           const std::set<TopicPartition>& owned,
                           const std::map<TopicPartition, std::int64_t>& last_committed) {
  commit_map out;
  for (const auto& [tp, pos] : consumed) {
    if (!owned.count(tp)) continue;
    auto it = last_committed.find(tp);
    if (it == last_committed.end() || it->second != pos.offset) out[tp] = {pos.offset, "", pos.epoch};
  }
  return out;
}

}  // namespace kgroup::data
