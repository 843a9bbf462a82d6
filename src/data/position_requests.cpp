#include "data/position_requests.hpp"

#include "base/sim_mutants.hpp"
#include "data/committer.hpp"
#include "data/offset_fetch.hpp"
#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::data {

namespace {

const partition_metadata& leader_of(const cluster_metadata& md, const TopicPartition& tp) {
  return md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
}

// The index of `topic`'s entry in `topics` (a request's topic list), appended when new.
template <class Topics>
auto& topic_entry(Topics& topics, std::map<std::string, std::size_t>& index, const std::string& topic) {
  auto [it, inserted] = index.emplace(topic, topics.size());
  if (inserted) {
    topics.emplace_back();
    if constexpr (requires { topics.back().name; }) {
      topics.back().name = topic;
    } else {
      topics.back().topic = topic;
    }
  }
  return topics[it->second];
}

}  // namespace

// ---- committed offsets ----------------------------------------------------------------------------

std::set<TopicPartition> position_requests::committed_wanted() const {
  std::set<TopicPartition> wanted;
  if (committed_in_flight_) return wanted;
  for (const auto& [tp, p] : positions_.parts()) {
    if (p.state() == fetch_state::needs_committed) wanted.insert(wanted.end(), tp);
  }
  return wanted;
}

void position_requests::no_group(const std::set<TopicPartition>& tps) {
  for (const auto& tp : tps) {
    if (auto* p = positions_.find(tp); p != nullptr && p->state() == fetch_state::needs_committed)
      positions_.no_group(tp, *p);
  }
}

protocol::offset_fetch_request position_requests::request_committed(const std::set<TopicPartition>& tps) {
  for (const auto& tp : tps) positions_.committed_requested(tp, *positions_.find(tp));
  committed_in_flight_ = true;
  return make_offset_fetch_request(group_id_, tps);
}

committed_result position_requests::on_committed(std::error_code failure,
                                                 const protocol::offset_fetch_response& r) {
  committed_in_flight_ = false;
  committed_result out;
  auto fail_all = [&] {
    positions_.for_each([&](const TopicPartition& tp, fetch_part& p) { positions_.committed_failed(tp, p); });
    out.retry = true;
  };
  if (failure) {
    out.coordinator_failed = true;
    fail_all();
    return out;
  }
  out.error_code = r.groups.empty() ? r.error_code : r.groups.front().error_code;
  if (out.error_code != 0) {
    out.coordinator_failed = protocol::reacts(out.error_code, protocol::reaction::coordinator_moved);
    fail_all();
    return out;
  }
  for_each_committed(r, [&](const std::string& topic, std::int32_t partition, std::int64_t offset,
                            const std::optional<std::string>&, std::int32_t epoch, std::int16_t err) {
    TopicPartition tp{topic, partition};
    fetch_part* p = positions_.find(tp);
    if (!p || p->state() != fetch_state::fetching_committed) return;
    if (err != 0) {
      positions_.committed_failed(tp, *p);  // e.g. UNSTABLE_OFFSET_COMMIT: asked again
      out.retry = true;
      return;
    }
    positions_.committed(tp, *p, offset, epoch);
    if (offset >= 0) out.offsets.push_back({std::move(tp), offset, epoch});
  });
  // Anything the coordinator did not answer is asked again (committed_failed() only applies to a
  // partition still being asked).
  positions_.for_each([&](const TopicPartition& tp, fetch_part& p) { positions_.committed_failed(tp, p); });
  return out;
}

// ---- resets -----------------------------------------------------------------------------------------

position_wants position_requests::resets_wanted(const cluster_metadata& md) {
  position_wants out;
  positions_.for_each([&](const TopicPartition& tp, fetch_part& p) {
    if (p.state() != fetch_state::needs_reset) return;
    if (positions_.reset_waits_for_seek(tp, p)) {
      out.reports.push_back({tp, position_report::kind::no_reset_policy});
      return;
    }
    const auto where = planner_.locate(md, tp, p);
    if (where.report) out.reports.push_back({tp, position_report::kind::missing});
    if (where.missing) {
      out.missing = true;
      return;
    }
    out.by_leader[leader_of(md, tp).leader].push_back(tp);
  });
  return out;
}

sent_resets position_requests::request_resets(std::int32_t node, const std::vector<TopicPartition>& tps,
                                              const cluster_metadata& md, std::int64_t now_ms) {
  sent_resets out;
  out.node = node;
  out.request.replica_id = -1;
  out.request.isolation_level = isolation_;
  std::map<std::string, std::size_t> index;
  for (const auto& tp : tps) {
    auto& p = *positions_.find(tp);
    out.seqs[tp] = positions_.reset_requested(tp, p);
    // current_leader_epoch travels from v4 on (the leader fences a stale one).
    topic_entry(out.request.topics, index, tp.topic)
        .partitions.push_back(
            {tp.partition, leader_of(md, tp).leader_epoch, positions_.list_offsets_timestamp(p, now_ms), 1});
  }
  return out;
}

reset_result position_requests::on_resets(const sent_resets& sent, std::error_code failure,
                                          const protocol::list_offsets_response& r) {
  reset_result out;
  // Only while it is the partition's latest reset (not seeked, revoked or reset again since).
  const auto current = [&](const TopicPartition& tp) -> fetch_part* {
    const auto s = sent.seqs.find(tp);
    return s == sent.seqs.end() ? nullptr : positions_.reset_current(tp, s->second);
  };
  std::set<TopicPartition> answered;
  if (failure) {
    // The broker could not be reached or the request was lost: its leadership may have moved (a
    // broker gone for good), so fresh metadata is asked for before the retry, as for Fetch and
    // OffsetForLeaderEpoch (Java refreshes on every disconnect). Without it the retry went to the
    // same broker until metadata.max.age.ms (found by kgroup-sim).
#ifdef KGROUP_SIM_MUTANTS
    if (!sim::mutant_enabled("list_offsets_no_refresh"))
#endif
      out.refresh_metadata = true;
  } else {
    for (const auto& t : r.topics) {
      for (const auto& pr : t.partitions) {
        TopicPartition tp{t.name, pr.partition_index};
        fetch_part* cur = current(tp);
        if (cur == nullptr) continue;
        if (pr.error_code == 0 && pr.offset < 0 && positions_.reset_found_nothing(tp, *cur)) {
          answered.insert(tp);  // not a failure: the end is asked for at once
          out.found_nothing.push_back(std::move(tp));
          continue;
        }
        if (pr.error_code != 0 || pr.offset < 0) {
          if (protocol::reacts(pr.error_code, protocol::reaction::refresh_metadata))
            out.refresh_metadata = true;
          continue;
        }
        answered.insert(tp);
        positions_.reset_answered(tp, *cur, pr.offset, pr.leader_epoch);  // epoch: v4+; -1 before
        out.positions.push_back({std::move(tp), pr.offset, pr.leader_epoch});
      }
    }
  }
  for (const auto& [tp, seq] : sent.seqs) {
    if (answered.count(tp)) continue;
    if (auto* p = current(tp)) positions_.reset_failed(tp, *p);
  }
  out.retry = answered.size() != sent.seqs.size();
  return out;
}

// ---- validation (KIP-320) -----------------------------------------------------------------------

position_wants position_requests::validations_wanted(const cluster_metadata& md) {
  position_wants out;
  positions_.for_each([&](const TopicPartition& tp, fetch_part& p) {
    if (p.state() != fetch_state::needs_validation) return;
    const auto where = planner_.locate(md, tp, p);
    if (where.report) out.reports.push_back({tp, position_report::kind::missing});
    if (where.missing) {
      out.missing = true;
      return;
    }
    const auto& pi = leader_of(md, tp);
    if (p.epoch() < 0 || pi.leader_epoch < 0) {
      // Nothing to check with: a position without an epoch (legacy records, a plain seek), or
      // metadata without leader epochs (Metadata before v7). Fetched as it is, as Java does.
      positions_.validation_skipped(tp, p, pi.leader_epoch);
      return;
    }
    out.by_leader[pi.leader].push_back(tp);
  });
  return out;
}

sent_validations position_requests::request_validations(std::int32_t node,
                                                        const std::vector<TopicPartition>& tps,
                                                        const cluster_metadata& md) {
  sent_validations out;
  out.node = node;
  out.request.replica_id = -1;  // a consumer (v3+)
  std::map<std::string, std::size_t> index;
  for (const auto& tp : tps) {
    auto& p = *positions_.find(tp);
    const auto leader_epoch = leader_of(md, tp).leader_epoch;
    positions_.validation_requested(tp, p);
    topic_entry(out.request.topics, index, tp.topic)
        .partitions.push_back({tp.partition, leader_epoch, p.epoch()});
    out.sent.emplace(tp, sent_validations::part{p.fetch_pos(), p.epoch(), leader_epoch});
  }
  return out;
}

validation_result position_requests::on_validations(const sent_validations& sent, std::error_code failure,
                                                    const protocol::offset_for_leader_epoch_response& r) {
  validation_result out;
  // Still waiting for this answer: not seeked, reset or revoked meanwhile.
  const auto waiting = [&](const TopicPartition& tp) -> fetch_part* {
    fetch_part* p = positions_.find(tp);
    const auto s = sent.sent.find(tp);
    if (!p || s == sent.sent.end() || p->state() != fetch_state::validating ||
        p->fetch_pos() != s->second.position)
      return nullptr;
    return p;
  };
  if (failure == make_error_code(client_errc::no_compatible_version)) {
    out.unsupported = true;
    for (const auto& [tp, sp] : sent.sent) {
      if (fetch_part* p = waiting(tp)) positions_.validation_skipped(tp, *p, sp.leader_epoch);
    }
    return out;
  }
  if (failure) {
    out.refresh_metadata = true;
  } else {
    for (const auto& t : r.topics) {
      for (const auto& e : t.partitions) {
        TopicPartition tp{t.topic, e.partition};
        fetch_part* p = waiting(tp);
        if (p == nullptr) continue;
        auto o = positions_.validated(tp, *p, sent.sent.at(tp).leader_epoch, e.error_code, e.leader_epoch,
                                      e.end_offset);
        if (o.what == validation_outcome::verdict::retry) {
          // FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...: asked again, once metadata
          // is fresh when the error says so.
          if (protocol::reacts(e.error_code, protocol::reaction::refresh_metadata))
            out.refresh_metadata = true;
          out.retry = true;
        }
        out.results.push_back({std::move(tp), e.error_code, e.leader_epoch, e.end_offset, std::move(o)});
      }
    }
  }
  for (const auto& [tp, sp] : sent.sent) {
    if (fetch_part* p = waiting(tp)) {  // not answered: asked again
      positions_.validation_failed(tp, *p);
      out.retry = true;
    }
  }
  return out;
}

}  // namespace kgroup::data
