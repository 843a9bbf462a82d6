#include "data/fetch_positions.hpp"

#include <algorithm>
#include <array>

#include "base/iso_duration.hpp"
#include "base/sim_mutants.hpp"

namespace kgroup::data {

namespace {

constexpr unsigned bit(fetch_state s) noexcept {
  return 1u << static_cast<unsigned>(s);
}

// A user seek() (-> ready or needs_validation) and seek_to_*() (-> needs_reset) may come in any
// state; they are in every row.
constexpr unsigned by_user = bit(fetch_state::ready) | bit(fetch_state::needs_validation) | bit(fetch_state::needs_reset);

// transitions[from]: the states `from` may move to.
constexpr std::array<unsigned, fetch_state_count> transitions = {
    // needs_committed: OffsetFetch sent; or no group, so the reset policy applies.
    by_user | bit(fetch_state::fetching_committed),
    // fetching_committed: the answer (offset: ready/needs_validation; none: needs_reset), or asked again.
    by_user | bit(fetch_state::needs_committed),
    // needs_reset: ListOffsets sent, or auto.offset.reset=none leaves it in resetting.
    by_user | bit(fetch_state::resetting),
    // resetting: the answer (ready), or not answered (needs_reset again).
    by_user,
    // needs_validation: OffsetForLeaderEpoch sent, or nothing to validate with (ready).
    by_user | bit(fetch_state::validating),
    // validating: not truncated (ready), truncated (needs_reset, ready at the divergence, or
    // awaiting_seek), or asked again (needs_validation).
    by_user | bit(fetch_state::awaiting_seek),
    // awaiting_seek: the user's seek, or the user thread's verdict that the application's
    // position is at or below the cut (ready).
    by_user,
    // ready: a leader change or FENCED_LEADER_EPOCH (needs_validation), out of range (needs_reset),
    // the log ended below it with auto.offset.reset=none (awaiting_seek).
    by_user | bit(fetch_state::awaiting_seek),
};

}  // namespace

const char* to_string(fetch_state s) noexcept {
  switch (s) {
    case fetch_state::needs_committed: return "needs_committed";
    case fetch_state::fetching_committed: return "fetching_committed";
    case fetch_state::needs_reset: return "needs_reset";
    case fetch_state::resetting: return "resetting";
    case fetch_state::needs_validation: return "needs_validation";
    case fetch_state::validating: return "validating";
    case fetch_state::awaiting_seek: return "awaiting_seek";
    case fetch_state::ready: return "ready";
  }
  return "?";
}

bool fetch_transition_allowed(fetch_state from, fetch_state to) noexcept {
  const auto f = static_cast<std::size_t>(from);
  return f < fetch_state_count && static_cast<std::size_t>(to) < fetch_state_count && (transitions[f] & bit(to)) != 0;
}

bool fetch_positions::transition(const TopicPartition& tp, fetch_part& p, fetch_state to, const char* reason) {
  if (p.state_ == to) return true;
  if (!fetch_transition_allowed(p.state_, to)) {
    ++invalid_transitions_;
    last_refusal_ = "internal error: invalid position transition of " + tp.topic + "-" + std::to_string(tp.partition) +
                    ": " + to_string(p.state_) + " -> " + to_string(to) + " (" + reason + "); not applied";
    if (on_refused_) on_refused_(last_refusal_);
    return false;
  }
  p.state_ = to;
  return true;
}

reset_policy parse_reset_policy(std::string_view s) noexcept {
  return parse_reset_strategy(s).policy;
}

reset_strategy parse_reset_strategy(std::string_view s) noexcept {
  if (s == "earliest") return reset_policy::earliest;
  if (s == "none") return reset_policy::none;
  constexpr std::string_view by_duration = "by_duration:";
  if (s.substr(0, by_duration.size()) == by_duration) {
    if (const auto d = base::parse_iso8601_duration(s.substr(by_duration.size())))
      return reset_strategy(reset_policy::by_duration, *d);
  }
  return reset_policy::latest;
}

std::int64_t reset_timestamp(reset_policy p) noexcept {
  switch (p) {
    case reset_policy::earliest:
      return -2;
    case reset_policy::by_duration:
      return reset_by_duration;
    default:
      return -1;
  }
}

std::vector<TopicPartition> fetch_positions::assign(const std::set<TopicPartition>& owned) {
  std::vector<TopicPartition> removed;
  for (auto it = parts_.begin(); it != parts_.end();) {
    if (!owned.count(it->first)) {
      removed.push_back(it->first);
      it = parts_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& tp : owned) parts_.try_emplace(tp);
  return removed;
}

bool fetch_positions::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  auto it = parts_.find(tp);
  if (it == parts_.end()) return false;
  transition(tp, it->second, epoch >= 0 ? fetch_state::needs_validation : fetch_state::ready, "seek");
  it->second.fetch_pos_ = offset;
  it->second.epoch_ = epoch;
  return true;
}

bool fetch_positions::seek_to(const TopicPartition& tp, bool beginning) {
  auto it = parts_.find(tp);
  if (it == parts_.end()) return false;
  transition(tp, it->second, fetch_state::needs_reset, "seek_to");
  it->second.reset_forced_ = true;
  it->second.reset_timestamp_ = beginning ? -2 : -1;
  return true;
}

bool fetch_positions::refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  auto it = parts_.find(tp);
  if (it == parts_.end() || offset < 0) return false;
  auto& p = it->second;
  switch (p.state_) {
    case fetch_state::ready:
      break;
    case fetch_state::needs_validation:
    case fetch_state::validating:
#ifdef KGROUP_SIM_MUTANTS
      // Commit f6c7448 (issue 30 item 7) reverted: resume()/refetch() during a validation dropped.
      if (sim::mutant_enabled("resume_during_validation")) return false;
#endif
      // The answer in flight (if any) is for the old position: the check after it sees the
      // position changed and ignores it.
      transition(tp, p, fetch_state::needs_validation, "the user thread's position is validated instead");
      break;
    default:
      return false;
  }
  if (p.state_ == fetch_state::ready && epoch >= 0 && epoch <= p.diverged_epoch_ && offset > p.diverged_at_) {
#ifdef KGROUP_SIM_MUTANTS
    if (!sim::mutant_enabled("resume_past_divergence"))
#endif
      // The user thread's position lies past a divergence a validation found (it was computed
      // before the user thread applied that cut, or it is a seek into the truncated branch):
      // validated again, so the cut reaches the user thread and both sides go on from it; fetched
      // as it is, every answer would be on the wrong side of the divergence.
      transition(tp, p, fetch_state::needs_validation,
                 "the user thread's position is past a known divergence");
  }
  p.fetch_pos_ = offset;
  p.epoch_ = epoch;
  return true;
}

void fetch_positions::pause(const TopicPartition& tp) {
  if (auto it = parts_.find(tp); it != parts_.end()) it->second.paused_ = true;
}

void fetch_positions::resume(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  auto it = parts_.find(tp);
  if (it == parts_.end()) return;
  it->second.paused_ = false;
  refetch(tp, offset, epoch);
}

bool fetch_positions::cut_accepted(const TopicPartition& tp, std::int64_t offset) {
  auto it = parts_.find(tp);
  if (it == parts_.end() || it->second.state_ != fetch_state::awaiting_seek || it->second.fetch_pos_ != offset)
    return false;
  return transition(tp, it->second, fetch_state::ready, "the application's position is at or below the cut");
}

void fetch_positions::no_group(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::needs_reset, "no group: no committed offset");
  p.reset_timestamp_ = reset_timestamp(policy_);
}

void fetch_positions::committed_requested(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::fetching_committed, "OffsetFetch sent");
}

void fetch_positions::committed(const TopicPartition& tp, fetch_part& p, std::int64_t offset, std::int32_t epoch) {
  if (offset >= 0) {
    // A committed offset with its leader epoch (OffsetFetch v5+) is validated against the
    // leader's log first: the log may have been truncated below it since (KIP-320).
    transition(tp, p, epoch >= 0 ? fetch_state::needs_validation : fetch_state::ready, "committed offset");
    p.fetch_pos_ = offset;
    p.epoch_ = epoch;
  } else {
    transition(tp, p, fetch_state::needs_reset, "no committed offset");
    p.reset_timestamp_ = reset_timestamp(policy_);
    p.reset_forced_ = false;
  }
}

void fetch_positions::committed_failed(const TopicPartition& tp, fetch_part& p) {
  if (p.state_ == fetch_state::fetching_committed)
    transition(tp, p, fetch_state::needs_committed, "OffsetFetch not answered");
}

bool fetch_positions::reset_waits_for_seek(const TopicPartition& tp, fetch_part& p) {
  if (p.reset_timestamp_ != -1 || policy_ != reset_policy::none || p.reset_forced_) return false;
  transition(tp, p, fetch_state::resetting, "auto.offset.reset=none");  // stays until the user seeks
  return true;
}

std::uint64_t fetch_positions::reset_requested(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::resetting, "ListOffsets sent");
  return ++p.reset_seq_;
}

fetch_part* fetch_positions::reset_current(const TopicPartition& tp, std::uint64_t seq) {
  auto it = parts_.find(tp);
  if (it == parts_.end() || it->second.state_ != fetch_state::resetting || it->second.reset_seq_ != seq)
    return nullptr;
  return &it->second;
}

void fetch_positions::reset_answered(const TopicPartition& tp, fetch_part& p, std::int64_t offset,
                                     std::int32_t epoch) {
  transition(tp, p, fetch_state::ready, "ListOffsets answered");
  p.fetch_pos_ = offset;
  p.epoch_ = epoch;
  p.reset_forced_ = false;
}

void fetch_positions::reset_failed(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::needs_reset, "not answered by ListOffsets");
}

fetch_positions::topic_id_verdict fetch_positions::topic_id_seen(const TopicPartition& tp, fetch_part& p,
                                                                 const protocol::uuid& id) {
  if (id.is_zero() || p.topic_id_ == id) return topic_id_verdict::same;
  const bool first = p.topic_id_.is_zero();
  p.topic_id_ = id;
  if (first || p.state_ == fetch_state::needs_committed || p.state_ == fetch_state::fetching_committed)
    return topic_id_verdict::same;
  return offset_out_of_range(tp, p) ? topic_id_verdict::recreated_waits : topic_id_verdict::recreated;
}

std::int64_t fetch_positions::list_offsets_timestamp(const fetch_part& p,
                                                     std::int64_t now_ms) const noexcept {
  if (p.reset_timestamp_ != reset_by_duration) return p.reset_timestamp_;
  return std::max<std::int64_t>(0, now_ms - duration_.count());
}

bool fetch_positions::reset_found_nothing(const TopicPartition& tp, fetch_part& p) {
  if (p.reset_timestamp_ != reset_by_duration) return false;
  transition(tp, p, fetch_state::needs_reset, "by_duration: no record that recent, the log's end instead");
  p.reset_timestamp_ = -1;
  return true;
}

bool fetch_positions::offset_out_of_range(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::needs_reset, "offset out of range");
  p.reset_timestamp_ = reset_timestamp(policy_);
  p.reset_forced_ = policy_ != reset_policy::none;
  if (policy_ != reset_policy::none) return false;
  transition(tp, p, fetch_state::resetting, "out of range, auto.offset.reset=none");
  return true;
}

validation_outcome::verdict fetch_positions::log_ended(const TopicPartition& tp, fetch_part& p, std::int64_t end) {
  p.fetch_pos_ = end;
  p.epoch_ = -1;  // the epoch of the record before the end is not known
  if (policy_ == reset_policy::none) {
    transition(tp, p, fetch_state::awaiting_seek, "log ended below the position, auto.offset.reset=none");
    return validation_outcome::verdict::awaiting_seek;
  }
  transition(tp, p, fetch_state::ready, "log ended below the position: fetched from its end");
  return validation_outcome::verdict::resumed;
}

bool fetch_positions::leader_changed(const TopicPartition& tp, fetch_part& p) {
  if (p.epoch_ < 0) return false;
  transition(tp, p, fetch_state::needs_validation, "leader epoch changed");
  return true;
}

void fetch_positions::validation_requested(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::validating, "OffsetForLeaderEpoch sent");
}

void fetch_positions::validation_skipped(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch) {
  transition(tp, p, fetch_state::ready, "nothing to validate with");
  p.leader_epoch_ = leader_epoch;
}

void fetch_positions::validation_failed(const TopicPartition& tp, fetch_part& p) {
  transition(tp, p, fetch_state::needs_validation, "not answered by OffsetForLeaderEpoch");
}

validation_outcome fetch_positions::validated(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch,
                                              std::int16_t error_code, std::int32_t end_epoch,
                                              std::int64_t end_offset) {
  validation_outcome o;
  o.position = p.fetch_pos_;
  o.epoch = p.epoch_;
  if (error_code != 0) {
    transition(tp, p, fetch_state::needs_validation, "OffsetForLeaderEpoch error");
    return o;
  }
  p.leader_epoch_ = leader_epoch;
  o.divergence_unknown = end_offset < 0 || end_epoch < 0;
  if (!o.divergence_unknown && end_offset >= p.fetch_pos_) {
    transition(tp, p, fetch_state::ready, "validated");
    o.what = validation_outcome::verdict::valid;
    return o;
  }
  if (policy_ == reset_policy::none) {
    // The application's position may still be at or below the divergence (the user thread
    // decides): wait there, not at the prefetch position.
    transition(tp, p, fetch_state::awaiting_seek, "truncated, auto.offset.reset=none");
    if (!o.divergence_unknown) {
      p.fetch_pos_ = end_offset;
      p.epoch_ = end_epoch;
    }
    o.what = validation_outcome::verdict::awaiting_seek;
    o.cut = validation_outcome::published_cut{o.divergence_unknown ? -1 : end_offset,
                                              o.divergence_unknown ? -1 : end_epoch, true};
  } else if (o.divergence_unknown) {
    transition(tp, p, fetch_state::needs_reset, "truncated, divergence unknown");
    p.reset_timestamp_ = reset_timestamp(policy_);
    p.reset_forced_ = true;
    o.what = validation_outcome::verdict::reset;
    // Found by kgroup-sim (data seed 796444033341): data fetched before the truncation may be of
    // the lost branch, and the reset may land on the offset the application is already at, where
    // that data would still fit. An unknown cut drops it all and has the user thread apply the
    // reset policy to the application's position (as Java validates the consumer's own position
    // and resets it when the leader cannot tell where its log diverged).
#ifdef KGROUP_SIM_MUTANTS
    if (!sim::mutant_enabled("reset_keeps_queued"))
#endif
      o.cut = validation_outcome::published_cut{-1, -1, false};
  } else {
    // As Java: resume at the first offset known to diverge (not at the log's start or end), so
    // no record the new leader has is skipped.
    transition(tp, p, fetch_state::ready, "truncated: resumed at the divergence");
    p.fetch_pos_ = end_offset;
    p.epoch_ = end_epoch;
    if (end_epoch >= p.diverged_epoch_) {
      p.diverged_epoch_ = end_epoch;
      p.diverged_at_ = end_offset;
    }
    o.what = validation_outcome::verdict::resumed;
    o.cut = validation_outcome::published_cut{end_offset, end_epoch, false};
  }
  return o;
}

std::int32_t fetch_positions::fetch_node(fetch_part& p, std::int32_t leader, bool replica_known,
                                         std::chrono::steady_clock::time_point now) {
  if (p.preferred_replica_ < 0) return leader;
  if (now >= p.replica_until_ || !replica_known) {
    p.preferred_replica_ = -1;
    return leader;
  }
  return p.preferred_replica_;
}

fetch_part* fetch_positions::find(const TopicPartition& tp) noexcept {
  auto it = parts_.find(tp);
  return it == parts_.end() ? nullptr : &it->second;
}

fetch_check fetch_positions::fetchable(const fetch_part& p, std::chrono::steady_clock::time_point now) noexcept {
  if (p.state_ != fetch_state::ready || p.paused_ || p.in_flight_) return fetch_check::skip;
  if (now < p.backoff_until_) return fetch_check::backing_off;
  return fetch_check::fetch;
}

bool fetch_positions::leader_epoch_seen(const TopicPartition& tp, fetch_part& p, std::int32_t leader_epoch) {
  if (leader_epoch >= 0 && p.leader_epoch_ >= 0 && leader_epoch != p.leader_epoch_ && leader_changed(tp, p))
    return true;
  p.leader_epoch_ = leader_epoch;
  return false;
}

void fetch_positions::fetch_ended(const TopicPartition& tp) noexcept {
  if (auto* p = find(tp)) p->in_flight_ = false;
}

bool fetch_positions::answer_applies(const fetch_part& p, std::int64_t sent_offset) noexcept {
  return p.state_ == fetch_state::ready && p.fetch_pos_ == sent_offset;
}

replica_outcome fetch_positions::replica_answer(fetch_part& p, std::int32_t node, std::int16_t error_code,
                                                std::int32_t preferred_read_replica, bool replica_known,
                                                std::chrono::steady_clock::time_point now) {
  replica_outcome o;
  if (error_code != 0 && p.preferred_replica_ == node && node >= 0) {
    o.what = replica_outcome::verdict::replica_failed;
    o.replica = node;
    p.preferred_replica_ = -1;
    p.backoff_until_ = now + timing_.retry_backoff;
    return o;
  }
  if (preferred_read_replica < 0 || preferred_read_replica == node) return o;
  o.replica = preferred_read_replica;
  if (!replica_known) {
    o.what = replica_outcome::verdict::replica_unknown;
    p.backoff_until_ = now + timing_.retry_backoff;
    return o;
  }
  o.what = replica_outcome::verdict::replica_named;
  o.changed = p.preferred_replica_ != preferred_read_replica;
  p.preferred_replica_ = preferred_read_replica;
  p.replica_until_ = now + timing_.replica_ttl;
  return o;
}

std::int32_t fetch_positions::replica_unreachable(const TopicPartition& tp, std::int32_t node) {
  auto* p = find(tp);
  if (!p || p->preferred_replica_ < 0 || p->preferred_replica_ != node) return -1;
  p->preferred_replica_ = -1;
  return node;
}

bool fetch_positions::fetched(fetch_part& p, std::int64_t next, std::int32_t last_epoch) noexcept {
  if (next == p.fetch_pos_) return false;
  p.fetch_pos_ = next;
  p.epoch_ = last_epoch;
  return true;
}

missing_verdict fetch_positions::missing(fetch_part& p, bool absent, std::uint64_t refreshes, bool manual) {
  if (!absent) {
    p.missing_since_ = 0;
    p.reported_missing_ = false;
    return missing_verdict::present;
  }
  if (p.missing_since_ == 0) {
    p.missing_since_ = refreshes + 1;
  } else if (manual && !p.reported_missing_ && refreshes > p.missing_since_) {
    p.reported_missing_ = true;
    return missing_verdict::report_missing;
  }
  return missing_verdict::missing;
}

}  // namespace kgroup::data
