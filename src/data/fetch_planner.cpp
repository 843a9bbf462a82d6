#include "data/fetch_planner.hpp"

#include "data/next_offset.hpp"
#include "kgroup/kafka_errc.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::data {

using time_point = std::chrono::steady_clock::time_point;

location fetch_planner::locate(const cluster_metadata& md, const TopicPartition& tp, fetch_part& p) {
  auto t = md.topics.find(tp.topic);
  const bool absent = t == md.topics.end() || t->second.error_code != 0 ||
                      tp.partition >= static_cast<std::int32_t>(t->second.partitions.size());
  // A leader the broker list does not name (a broker that is down: Kafka's metadata, like the
  // mock's, then lists the partition's leader but not the broker) is no leader either: metadata is
  // refreshed until it names one that can be reached. Before, such a partition was skipped with no
  // refresh, and stalled until metadata.max.age.ms (found by the chaos test on librdkafka 2.15.1).
  const bool no_leader = !absent && [&] {
    const auto leader = t->second.partitions[static_cast<std::size_t>(tp.partition)].leader;
    return leader < 0 || md.brokers.count(leader) == 0;
  }();
  switch (fetch_positions::missing(p, absent, md.refreshes, manual_)) {
    case missing_verdict::present:
      return {no_leader, false};
    case missing_verdict::report_missing:
      return {true, true};
    case missing_verdict::missing:
      break;
  }
  return {true, false};
}

fetch_plan fetch_planner::plan(time_point now, const cluster_metadata& md) {
  fetch_plan out;
  std::map<std::int32_t, data::fetch_set> by_node;
  bool backing_off = false;
  positions_.for_each([&](const TopicPartition& tp, fetch_part& p) {
    const auto check = fetch_positions::fetchable(p, now);
    if (check == fetch_check::skip) return;
    if (check == fetch_check::backing_off) {
      backing_off = true;
      return;
    }
    const auto where = locate(md, tp, p);
    if (where.report) out.report_missing.push_back(tp);
    if (where.missing) {
      out.refresh_metadata = true;
      return;
    }
    const auto& t = md.topics.find(tp.topic)->second;
    const auto& pi = t.partitions[static_cast<std::size_t>(tp.partition)];
    if (positions_.leader_epoch_seen(tp, p, pi.leader_epoch)) {
      out.validate = true;  // a new leader: its log is checked against the position first (KIP-320)
      return;
    }
    const bool replica_known = p.preferred_replica() >= 0 && md.brokers.count(p.preferred_replica()) != 0;
    const auto node = fetch_positions::fetch_node(p, pi.leader, replica_known, now);
    if (fetching_nodes_.count(node)) return;
    data::partition_fetch pf;
    pf.topic_id = t.topic_id;
    pf.fetch_offset = p.fetch_pos();
    pf.current_leader_epoch = pi.leader_epoch;  // -1 when metadata has none (before Metadata v7)
    pf.max_bytes = opts_.max_partition_fetch_bytes;
    by_node[node].emplace(tp, pf);
  });
  if (out.refresh_metadata || backing_off) out.retry_at = now + opts_.retry_backoff;
  for (auto& [node, wanted] : by_node) {
    planned_fetch f;
    f.node = node;
    f.request.replica_id = -1;
    f.request.max_wait_ms = opts_.fetch_max_wait_ms;
    f.request.min_bytes = opts_.fetch_min_bytes;
    f.request.max_bytes = opts_.fetch_max_bytes;
    f.request.isolation_level = opts_.isolation_level;
    f.request.rack_id = opts_.client_rack;  // v11+ (KIP-392)
    bool all_ids = true;
    for (const auto& [tp, pf] : wanted) {
      positions_.fetch_sent(*positions_.find(tp));
      all_ids = all_ids && !pf.topic_id.is_zero();
    }
    f.max_version = all_ids ? -1 : 12;
    fetching_nodes_.insert(node);
    f.partitions = std::make_shared<const data::fetch_set>(std::move(wanted));
    out.requests.push_back(std::move(f));
  }
  return out;
}

time_point fetch_planner::not_sent(time_point now, std::int32_t node, const data::fetch_set& partitions) {
  // Undoes plan(): its partitions were not in flight before (fetchable() skips those).
  fetching_nodes_.erase(node);
  for (const auto& [tp, pf] : partitions) positions_.fetch_ended(tp);
  return now + opts_.retry_backoff;
}

void fetch_planner::fill(std::int32_t node, protocol::fetch_request& req, std::int16_t version,
                         const data::fetch_set& partitions) {
  session(node).fill(req, version, partitions);
}

fetch_answer fetch_planner::on_answer(time_point now, const cluster_metadata& md, std::int32_t node,
                                      std::error_code failure, const protocol::fetch_response& r,
                                      const data::fetch_set& sent) {
  fetch_answer out;
  fetching_nodes_.erase(node);
  for (const auto& [tp, pf] : sent) positions_.fetch_ended(tp);
  const auto retry = [&] { out.retry_at = now + opts_.retry_backoff; };
  if (failure) {
    session(node).on_request_failed();
    // A replica that cannot be reached is left for the leader (KIP-392).
    for (const auto& [tp, pf] : sent) {
      const auto dropped = positions_.replica_unreachable(tp, node);
      if (dropped >= 0) out.notes.push_back({tp, fetch_note::kind::replica_dropped, 0, dropped});
    }
    out.refresh_metadata = true;
    retry();
    return out;
  }
  // An answer naming partitions outside the session is dropped whole; the session starts over,
  // so its partitions are asked again in full.
  auto result = session(node).on_response(r);
  if (result.unknown_partitions > 0) {
    out.unknown_partition = result.first_unknown;
    retry();
    return out;
  }
  if (result.error_code != 0) {
    out.error_code = result.error_code;
    const auto code = static_cast<kafka_errc>(result.error_code);
    out.refresh_metadata =
        code != kafka_errc::fetch_session_id_not_found && code != kafka_errc::invalid_fetch_session_epoch;
    retry();  // the session was reset: the next request is a full one
    return out;
  }
  out.answered = std::move(result.partitions);
  for (const auto& [tp, pdp] : out.answered) {
    const auto& pd = *pdp;
    fetch_part* pp = positions_.find(tp);
    auto s = sent.find(tp);
    if (!pp || s == sent.end()) continue;
    fetch_part& p = *pp;
    if (!fetch_positions::answer_applies(p, s->second.fetch_offset)) continue;  // seeked or reset meanwhile
    // KIP-392: the decisions are the position table's.
    const auto replica = positions_.replica_answer(
        p, node, pd.error_code, pd.preferred_read_replica,
        pd.preferred_read_replica >= 0 && md.brokers.count(pd.preferred_read_replica) != 0, now);
    using rv = replica_outcome::verdict;
    if (replica.what == rv::replica_failed) {
      out.notes.push_back({tp, fetch_note::kind::replica_dropped, pd.error_code, replica.replica});
      retry();
      continue;
    }
    if (replica.what == rv::replica_named && replica.changed) {
      out.notes.push_back({tp, fetch_note::kind::replica_named, 0, replica.replica});
    } else if (replica.what == rv::replica_unknown) {
      out.notes.push_back({tp, fetch_note::kind::replica_unknown, 0, replica.replica});
      out.refresh_metadata = true;
      retry();
    }
    if (pd.error_code != 0) {
      apply_error(out, tp, p, pd, now);
      continue;
    }
    if (!pd.records || pd.records->data.empty()) continue;
    std::int32_t last_epoch = p.epoch();
    const std::int64_t from = p.fetch_pos();
    const std::int64_t next = data::next_fetch_offset(pd.records->data, from, &last_epoch);
    if (!positions_.fetched(p, next, last_epoch))
      continue;  // only a partial batch: fetch again (more bytes next time)
    out.slices.push_back({tp, from, pdp});
  }
  out.plan_again = true;
  return out;
}

void fetch_planner::apply_error(fetch_answer& out, const TopicPartition& tp, fetch_part& p,
                                const protocol::fetch_response::fetchable_topic_response::partition_data& pd,
                                time_point now) {
  fetch_note n{tp, fetch_note::kind::other_error, pd.error_code};
  n.offset = p.fetch_pos();
  if (pd.error_code == static_cast<std::int16_t>(kafka_errc::offset_out_of_range) && pd.high_watermark >= 0 &&
      pd.high_watermark < p.fetch_pos()) {
    // The log ends below the prefetch position: the application's position (behind it) may
    // still be in range. A cut at the log's end, decided against the application's position
    // by the user thread; the reset policy applies only when that is past the end too.
    n.what = fetch_note::kind::log_end_cut;
    n.end = pd.high_watermark;
    n.halted = positions_.log_ended(tp, p, pd.high_watermark) == validation_outcome::verdict::awaiting_seek;
  } else if (pd.error_code == static_cast<std::int16_t>(kafka_errc::offset_out_of_range)) {
    n.what = fetch_note::kind::out_of_range;
    n.halted = positions_.offset_out_of_range(tp, p);
  } else if (protocol::reacts(pd.error_code, protocol::reaction::refresh_metadata)) {
    n.what = fetch_note::kind::leader_error;
    // The leader epochs of this member and the broker differ: a leader change, after which
    // the new leader's log is checked against the position once metadata names it (KIP-320).
    if (pd.error_code == static_cast<std::int16_t>(kafka_errc::fenced_leader_epoch) ||
        pd.error_code == static_cast<std::int16_t>(kafka_errc::unknown_leader_epoch))
      positions_.leader_changed(tp, p);
    out.refresh_metadata = true;
    out.retry_at = now + opts_.retry_backoff;
  } else {
    out.retry_at = now + opts_.retry_backoff;
  }
  out.notes.push_back(std::move(n));
}

detail::fetched_data to_fetched(const fetched_slice& slice, std::shared_ptr<const void> frame,
                                std::int32_t replica) {
  const auto& pd = *slice.data;
  detail::fetched_data d;
  d.tp = slice.tp;
  d.fetch_offset = slice.fetch_offset;
  d.high_watermark = pd.high_watermark;
  d.last_stable_offset = pd.last_stable_offset;
  d.log_start_offset = pd.log_start_offset;
  d.records = pd.records->data;
  if (pd.aborted_transactions) {
    for (const auto& a : *pd.aborted_transactions) d.aborted.emplace_back(a.producer_id, a.first_offset);
  }
  d.frame = std::move(frame);
  d.replica = replica;
  d.bytes = pd.records->data.size();
  return d;
}

}  // namespace kgroup::data
