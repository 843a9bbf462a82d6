// The group simulation's KIP-848 coordinator (kgroup-sim --group --protocol consumer), after
// Kafka's GroupMetadataManager and CurrentAssignmentBuilder: ConsumerGroupHeartbeat joins (epoch 0;
// v0 names the member, v1 takes the client's id), member epochs behind one group epoch, a target
// assignment the coordinator computes (uniform, sticky, or range), and each member's reconciliation
// toward it: a member keeps its epoch while it revokes, and a partition goes to its new owner only
// once the old one has acknowledged giving it up (a heartbeat whose owned partitions leave it out).
// Fencing (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), the session timeout, the rebalance timeout of a
// revocation, leaving (epoch -1), and OffsetCommit's member epoch check (STALE_MEMBER_EPOCH). Every
// change is stored at once, as Kafka writes a record per change: a coordinator move keeps the group
// and restarts its timers.
#include "sim_group.hpp"

namespace kgroup::sim::group_sim {

namespace {

partition_set minus(const partition_set& a, const partition_set& b) {
  partition_set out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}
partition_set both(const partition_set& a, const partition_set& b) {
  partition_set out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}
partition_set held(const cg_member& cm) {
  partition_set out = cm.assigned;
  out.insert(cm.revoking.begin(), cm.revoking.end());
  return out;
}

}  // namespace

const char* to_string(cg_state s) {
  switch (s) {
    case cg_state::stable:
      return "STABLE";
    case cg_state::revoking:
      return "UNREVOKED_PARTITIONS";
    case cg_state::unreleased:
      return "UNRELEASED_PARTITIONS";
  }
  return "?";
}

void simulation::setup_consumer() {
  // The session timeout and the heartbeat interval are the broker's (group.consumer.*).
  cg_session_ = milliseconds(rng_.between(6000, 10000));
  cg_interval_ = milliseconds(rng_.between(1000, 3000));
  base_.session_timeout = cg_session_;
  base_.heartbeat_interval = cg_interval_;
  base_.max_poll_interval = milliseconds(rng_.between(5000, 12000));
  base_.request_timeout = milliseconds(3000);
  server_assignor_ = rng_.chance(0.5) ? "uniform" : "range";
  heartbeat_version_ = rng_.chance(0.5) ? 1 : 0;
  assignor_ =
      fmt::format("server assignor {}, ConsumerGroupHeartbeat v{}", server_assignor_, heartbeat_version_);
  std::uint8_t n = 0;
  for (const auto& [t, count] : topics_) {
    kip848::topic_id id;
    id.bytes[0] = ++n;
    id.bytes[15] = 0x5a;
    topic_ids_[t] = id;
  }
  consumer_base_.group_id = "g";
  consumer_base_.max_poll_interval = base_.max_poll_interval;
  consumer_base_.retry_backoff = milliseconds(100);
  consumer_base_.retry_backoff_max = milliseconds(1000);
  if (rng_.chance(0.5)) consumer_base_.remote_assignor = server_assignor_;
}

partition_set simulation::from_wire(const std::vector<cg_request::topic_partitions_t>& parts) const {
  return by_name(parts);
}
partition_set simulation::from_wire(const std::vector<cg_response::topic_partitions_t>& parts) const {
  return by_name(parts);
}

template <class Wire>
partition_set simulation::by_name(const std::vector<Wire>& parts) const {
  partition_set out;
  for (const auto& tp : parts) {
    std::string topic = "<unknown " + tp.topic_id.to_string() + ">";
    for (const auto& [t, id] : topic_ids_)
      if (id == tp.topic_id) topic = t;
    for (const auto p : tp.partitions) out.insert({topic, p});
  }
  return out;
}

std::vector<cg_response::topic_partitions_t> simulation::to_wire(const partition_set& parts) const {
  std::vector<cg_response::topic_partitions_t> out;
  for (const auto& tp : parts) {
    const auto& id = topic_ids_.at(tp.topic);
    if (out.empty() || out.back().topic_id != id) out.push_back({id, {}});
    out.back().partitions.push_back(tp.partition);
  }
  return out;
}

// ---- ConsumerGroupHeartbeat -------------------------------------------------------------------------

cg_response simulation::cg_heartbeat(sim_member& m, const cg_request& r, std::int16_t version) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  if (r.member_epoch == kip848::leave_epoch_dynamic || r.member_epoch == kip848::leave_epoch_static)
    return cg_leave(m, r);
  cg_response out;
  auto refuse = [&](kafka_errc e, std::string why) {
    out.error_code = code(e);
    notef("coordinator: ConsumerGroupHeartbeat from {} ('{}' epoch {}): {} ({})", m.name, r.member_id,
          r.member_epoch, kafka_error_name(code(e)), why);
    return out;
  };
  // throwIfConsumerGroupHeartbeatRequestIsInvalid: a join carries everything, and owns nothing.
  if (r.member_epoch == 0) {
    if (version >= 1 && r.member_id.empty())
      return refuse(kafka_errc::invalid_request, "v1 join without member id");
    if (r.rebalance_timeout_ms < 0 || !r.subscribed_topic_names || !r.topic_partitions ||
        !r.topic_partitions->empty())
      return refuse(kafka_errc::invalid_request, "a join must carry its subscription and own nothing");
  } else if (r.member_id.empty() || r.member_epoch < 0) {
    return refuse(kafka_errc::invalid_request, "no member id");
  }
  const std::string id =
      r.member_id.empty() ? fmt::format("{}-srv{}", m.name, next_member_id_++) : r.member_id;
  if (r.instance_id) {
    std::string why;
    if (const auto e = cg_static(m, r, id, why)) return refuse(static_cast<kafka_errc>(e), why);
  }
  const std::optional<partition_set> owned =
      r.topic_partitions ? std::optional(from_wire(*r.topic_partitions)) : std::nullopt;
  auto it = cg_.members.find(id);
  if (it == cg_.members.end()) {
    if (r.member_epoch != 0) return refuse(kafka_errc::unknown_member_id, "not a member");
    cg_member cm;
    cm.id = id;
    cm.sim = m.index;
    cm.instance_id = r.instance_id;
    if (r.instance_id) cg_.statics[*r.instance_id] = id;
    it = cg_.members.emplace(id, std::move(cm)).first;
    notef("coordinator: {} joins as '{}'{}", m.name, id,
          r.instance_id ? " (static member '" + *r.instance_id + "')" : "");
    cg_bump("member joined");
  } else if (r.member_epoch > it->second.epoch) {
    // throwIfMemberEpochIsInvalid.
    return refuse(kafka_errc::fenced_member_epoch, fmt::format("ahead of {}", it->second.epoch));
  } else if (r.member_epoch < it->second.epoch && (r.member_epoch != it->second.previous_epoch ||
                                                   (owned && !minus(*owned, it->second.assigned).empty()))) {
    // The previous epoch with a subset of the assignment is fine: the answer that moved it on was lost.
    return refuse(kafka_errc::fenced_member_epoch, fmt::format("behind {}", it->second.epoch));
  }
  auto& cm = it->second;
  if (r.rebalance_timeout_ms >= 0) cm.rebalance = milliseconds(r.rebalance_timeout_ms);
  if (r.subscribed_topic_names) {
    auto topics = *r.subscribed_topic_names;
    std::sort(topics.begin(), topics.end());
    if (topics != cm.topics) {
      const bool first = cm.topics.empty();
      cm.topics = std::move(topics);
      if (!first) cg_bump("subscription changed");
    }
  }
  if (cg_.epoch > cg_.assignment_epoch) cg_compute_target();
  const auto before = cm.assigned;
  cg_reconcile(cm, owned);
  cm.last_seen = now_;
  out.member_id = id;
  out.member_epoch = cm.epoch;
  out.heartbeat_interval_ms = static_cast<std::int32_t>(cg_interval_.count());
  if (owned || r.member_epoch == 0 || cm.assigned != before) {
    cg_response::assignment_t a;
    a.topic_partitions = to_wire(cm.assigned);
    out.assignment = std::move(a);
  }
  return out;
}

std::int16_t simulation::cg_static(sim_member& m, const cg_request& r, const std::string& id,
                                   std::string& why) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  const std::string& instance = *r.instance_id;
  const auto s = cg_.statics.find(instance);
  auto fenced = [&](kafka_errc e) {
    // G4 accepts these as fatal from a member the coordinator answered so.
    m.fenced_answer = true;
    return code(e);
  };
  if (r.member_epoch != 0) {
    // throwIfStaticMemberIsUnknown, throwIfInstanceIdIsFenced (the epoch is checked next).
    if (s == cg_.statics.end()) {
      why = "unknown instance id '" + instance + "'";
      return code(kafka_errc::unknown_member_id);
    }
    if (s->second != r.member_id) {
      why = fmt::format("instance id '{}' is member '{}' now", instance, s->second);
      return fenced(kafka_errc::fenced_instance_id);
    }
    return 0;
  }
  if (s == cg_.statics.end()) return 0;  // a new static member (the caller adds it)
  auto old = cg_.members.find(s->second);
  if (old == cg_.members.end()) fail("coordinator", "static member '" + instance + "' has no member");
  // throwIfInstanceIdIsUnreleased: only a member that left with epoch -2 gives its instance id up
  // before its session times out.
  if (old->second.epoch != kip848::leave_epoch_static) {
    why = fmt::format("instance id '{}' is still held by '{}' at epoch {}", instance, old->first,
                      old->second.epoch);
    return fenced(kafka_errc::unreleased_instance_id);
  }
  // The member is copied under the new id at epoch 0 (previous 0), with its assignment and target;
  // the group epoch stays (replaceMember: no join, no leave).
  cg_member cm = old->second;
  const auto target = cg_.target.find(old->first);
  std::optional<partition_set> kept_target;
  if (target != cg_.target.end()) {
    kept_target = target->second;
    cg_.target.erase(target);
  }
  note(
      fmt::format("coordinator: {} as '{}' replaces '{}' (static member '{}', left with epoch -2): assigned "
                  "[{}], no new group epoch",
                  m.name, id, old->first, instance, names(cm.assigned)));
  cg_.members.erase(old);
  cm.id = id;
  cm.sim = m.index;
  cm.epoch = 0;
  cm.previous_epoch = 0;
  cg_.members[id] = std::move(cm);
  if (kept_target) cg_.target[id] = std::move(*kept_target);
  s->second = id;
  return 0;
}

cg_response simulation::cg_leave(sim_member& m, const cg_request& r) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  cg_response out;
  auto refuse = [&](kafka_errc e, const std::string& why) {
    out.error_code = code(e);
    notef("coordinator: leave of {} ('{}' epoch {}): {} ({})", m.name, r.member_id, r.member_epoch,
          kafka_error_name(code(e)), why);
    return out;
  };
  if (r.member_epoch == kip848::leave_epoch_static && !r.instance_id)
    return refuse(kafka_errc::invalid_request, "epoch -2 without an instance id");
  if (r.instance_id) {
    // consumerGroupLeave: the static member of the instance id, by this member id.
    const auto s = cg_.statics.find(*r.instance_id);
    if (s == cg_.statics.end()) return refuse(kafka_errc::unknown_member_id, "unknown instance id");
    if (s->second != r.member_id) {
      m.fenced_answer = true;
      return refuse(kafka_errc::fenced_instance_id, "the instance id is member '" + s->second + "' now");
    }
    if (r.member_epoch == kip848::leave_epoch_static) {
      // consumerGroupStaticMemberGroupLeave: epoch -2, nothing pending revocation, the assignment
      // kept for the instance id until the session times out; no new group epoch.
      auto& cm = cg_.members.at(r.member_id);
      notef("coordinator: '{}' (static member '{}') leaves with epoch -2, keeping [{}]", r.member_id,
            *r.instance_id, names(cm.assigned));
      cm.epoch = kip848::leave_epoch_static;
      cm.revoking.clear();
      cm.revoke_deadline.reset();
      out.member_id = r.member_id;
      out.member_epoch = r.member_epoch;
      return out;
    }
  }
  if (!cg_.members.count(r.member_id)) {
    out.error_code = code(kafka_errc::unknown_member_id);
    return out;
  }
  cg_remove(r.member_id, fmt::format("left with epoch {}", r.member_epoch));
  out.member_id = r.member_id;
  out.member_epoch = r.member_epoch;
  return out;
}

void simulation::cg_bump(const std::string& why) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  ++cg_.epoch;
  ++generations_;
  notef("coordinator: group epoch {} ({})", cg_.epoch, why);
}

void simulation::cg_remove(const std::string& id, const std::string& why) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  auto it = cg_.members.find(id);
  if (it == cg_.members.end()) return;
  notef("coordinator: removes '{}' ({}), which held {}", id, why, names(held(it->second)));
  if (const auto& instance = it->second.instance_id) {
    const auto s = cg_.statics.find(*instance);
    if (s != cg_.statics.end() && s->second == id) cg_.statics.erase(s);
  }
  cg_.members.erase(it);
  cg_.target.erase(id);
  cg_bump("member removed");
}

void simulation::cg_compute_target() {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  // Every member subscribes to every topic here.
  std::vector<std::string> ids;
  for (const auto& [id, cm] : cg_.members) ids.push_back(id);
  std::map<std::string, partition_set> target;
  for (const auto& id : ids) target[id];
  if (!ids.empty() && server_assignor_ == "range") {
    // Per topic, contiguous ranges in member order, the first ones one longer.
    const auto k = static_cast<std::int32_t>(ids.size());
    for (const auto& [t, n] : topics_) {
      std::int32_t p = 0;
      for (std::int32_t i = 0; i < k; ++i) {
        const std::int32_t count = n / k + (i < n % k ? 1 : 0);
        for (std::int32_t j = 0; j < count; ++j) target[ids[static_cast<std::size_t>(i)]].insert({t, p++});
      }
    }
  } else if (!ids.empty()) {
    // Uniform and sticky: every member keeps what it had up to its share, the rest is dealt out.
    partition_set all;
    for (const auto& [t, n] : topics_)
      for (std::int32_t p = 0; p < n; ++p) all.insert({t, p});
    const std::size_t base = all.size() / ids.size();
    std::size_t extra = all.size() % ids.size();
    partition_set taken;
    for (const auto& id : ids) {
      const auto prev = cg_.target.find(id);
      if (prev == cg_.target.end()) continue;
      for (const auto& tp : prev->second) {
        const std::size_t have = target[id].size();
        if (!all.count(tp) || taken.count(tp)) continue;
        if (have < base || (have == base && extra > 0)) {
          if (have == base) --extra;
          target[id].insert(tp);
          taken.insert(tp);
        }
      }
    }
    for (const auto& tp : minus(all, taken)) {
      std::string best;
      for (const auto& id : ids) {
        const std::size_t have = target[id].size();
        if (have < base || (have == base && extra > 0)) {
          if (best.empty() || have < target[best].size()) best = id;
        }
      }
      if (target[best].size() == base) --extra;
      target[best].insert(tp);
    }
  }
  cg_.target = std::move(target);
  cg_.assignment_epoch = cg_.epoch;
  std::string summary;
  for (const auto& [id, parts] : cg_.target) summary += fmt::format(" '{}': [{}]", id, names(parts));
  notef("coordinator: target assignment of epoch {} ({}):{}", cg_.epoch, server_assignor_, summary);
}

bool simulation::cg_held_by_other(const std::string& id, const TopicPartition& tp) const {
  for (const auto& [other, cm] : cg_.members)
    if (other != id && (cm.assigned.count(tp) || cm.revoking.count(tp))) return true;
  return false;
}

void simulation::cg_reconcile(cg_member& cm, const std::optional<partition_set>& owned) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  const auto was = cm.state;
  const auto epoch = cm.epoch;
  switch (cm.state) {
    case cg_state::revoking:
      // Stays until a heartbeat's owned partitions leave every revoked one out.
      if (!owned || !both(*owned, cm.revoking).empty()) return;
      cm.revoking.clear();
      cm.revoke_deadline.reset();
      cg_next_assignment(cm);
      break;
    case cg_state::unreleased:
      cg_next_assignment(cm);  // what the others released meanwhile, or the newer target
      break;
    case cg_state::stable:
      if (cm.epoch != cg_.assignment_epoch) cg_next_assignment(cm);
      break;
  }
  if (cm.state != was || cm.epoch != epoch)
    notef("coordinator: '{}' {} epoch {} -> {} epoch {}: assigned [{}], revoking [{}]", cm.id, to_string(was),
          epoch, to_string(cm.state), cm.epoch, names(cm.assigned), names(cm.revoking));
}

void simulation::cg_next_assignment(cg_member& cm) {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  // CurrentAssignmentBuilder.computeNextAssignment: revoke first (the epoch stays), then take
  // what nobody else holds any more.
  const auto t = cg_.target.find(cm.id);
  const partition_set target = t == cg_.target.end() ? partition_set{} : t->second;
  const partition_set kept = both(cm.assigned, target);
  const partition_set revoke = minus(cm.assigned, target);
  const partition_set pending = minus(target, kept);
  cm.target_epoch = cg_.assignment_epoch;
  if (!revoke.empty()) {
    cm.state = cg_state::revoking;
    cm.assigned = kept;
    cm.revoking = revoke;
    cm.revoke_deadline = now_ + cm.rebalance;
    return;
  }
  partition_set got = kept;
  for (const auto& tp : pending)
    if (!cg_held_by_other(cm.id, tp)) got.insert(tp);
  if (cm.epoch != cg_.assignment_epoch) {
    cm.previous_epoch = cm.epoch;
    cm.epoch = cg_.assignment_epoch;
  }
  cm.state = got.size() == target.size() ? cg_state::stable : cg_state::unreleased;
  cm.assigned = std::move(got);
}

// ---- timers, moves, commits -------------------------------------------------------------------------

void simulation::cg_tick() {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  std::vector<std::pair<std::string, std::string>> expired;
  for (const auto& [id, cm] : cg_.members) {
    if (now_ - cm.last_seen > cg_session_) {
      expired.emplace_back(id, "session timeout");
    } else if (cm.revoke_deadline && now_ > *cm.revoke_deadline) {
      expired.emplace_back(id, "revocation not acknowledged within the rebalance timeout");
    }
  }
  for (const auto& [id, why] : expired) cg_remove(id, why);
}

void simulation::cg_moved() {
  ++cg_changes_;  // (the checks after each step: the coordinator may change)
  // The new coordinator replays the group from the log and starts its timers again.
  for (auto& [id, cm] : cg_.members) {
    cm.last_seen = now_;
    if (cm.revoke_deadline) cm.revoke_deadline = now_ + cm.rebalance;
  }
  notef("FAULT coordinator moves to {}: group epoch {} with {} members", coord_node_, cg_.epoch,
        cg_.members.size());
}

std::int16_t simulation::cg_commit_error(const protocol::offset_commit_request& r) const {
  // ConsumerGroup.validateOffsetCommit: a member of the group, at its current epoch exactly.
  if (r.generation_id_or_member_epoch < 0 && cg_.members.empty()) return 0;
  const auto it = cg_.members.find(r.member_id);
  if (it == cg_.members.end()) return code(kafka_errc::unknown_member_id);
  if (r.generation_id_or_member_epoch != it->second.epoch) return code(kafka_errc::stale_member_epoch);
  return 0;
}

bool simulation::cg_holds(const std::string& member, const TopicPartition& tp) const {
  const auto it = cg_.members.find(member);
  return it != cg_.members.end() && held(it->second).count(tp) > 0;
}

// ---- checks ---------------------------------------------------------------------------------------------

bool simulation::cg_check_step_suspect() {
  // Each half reads only some of the coordinator, the cores and which members are alive, and a
  // look that found nothing is not taken again while what it read stays the same (cg_changes_,
  // each core's calls()): a step that called one core looks at that member only.
  // G1's first half: two members' held partitions (assigned or revoking) in common.
  if (cg_pairs_looked_ != cg_changes_) {
    for (auto a = cg_.members.begin(); a != cg_.members.end(); ++a) {
      for (auto b = std::next(a); b != cg_.members.end(); ++b) {
        const auto& x = a->second;
        const auto& y = b->second;
        if (intersect(x.assigned, y.assigned) || intersect(x.assigned, y.revoking) ||
            intersect(x.revoking, y.assigned) || intersect(x.revoking, y.revoking))
          return true;
      }
    }
    cg_pairs_looked_ = cg_changes_;
  }
  // Its second half: a core owns what the coordinator does not count as held by it.
  const auto owns_unheld = [this](sim_member& m) {
    const auto epoch = m.core->generation();
    if (epoch <= 0) return false;
    const auto it = cg_.members.find(m.core->member_id());
    if (it == cg_.members.end() || (epoch != it->second.epoch && epoch != it->second.previous_epoch))
      return false;
    return !within(m.core->owned_ref(), it->second.assigned, it->second.revoking);
  };
  if (cg_member_looked_.size() < members_.size())
    cg_member_looked_.resize(members_.size(), {~std::uint64_t{0}, ~std::uint64_t{0}});
  for (std::size_t i = 0; i < members_.size(); ++i) {
    auto& m = *members_[i];
    if (!m.alive) continue;
    const std::pair<std::uint64_t, std::uint64_t> inputs{m.core->calls(), cg_changes_};
    if (cg_member_looked_[i] == inputs) continue;
    if (owns_unheld(m)) return true;
    cg_member_looked_[i] = inputs;
  }
  return false;
}

void simulation::cg_check_step() {
  // The full check (with the maps and sets its messages name) only when the quick look suspects
  // something; it decides.
  if (!cg_check_step_suspect()) return;
  // G1: the coordinator gives no partition to two members at once (assigned or still revoking)...
  std::map<TopicPartition, std::string> holder;
  for (const auto& [id, cm] : cg_.members) {
    for (const auto& tp : held(cm)) {
      auto [it, inserted] = holder.emplace(tp, id);
      if (!inserted)
        fail("G1 (one owner per partition)",
             fmt::format("the coordinator has {} held by both '{}' and '{}'", name(tp), it->second, id));
    }
  }
  // ... and a member's core owns, while the coordinator knows it at its epoch (or the one before,
  // whose answer may be under way), only what the coordinator counts as held by it: so no two
  // members' cores own a partition at once, whatever their epochs.
  for (const auto& m : members_) {
    if (!m->alive) continue;
    const auto it = cg_.members.find(m->core->member_id());
    const auto epoch = m->core->generation();
    if (it == cg_.members.end() || epoch <= 0 ||
        (epoch != it->second.epoch && epoch != it->second.previous_epoch))
      continue;
    const auto extra = minus(m->core->owned(), held(it->second));
    if (!extra.empty())
      fail("G1 (one owner per partition)",
           fmt::format(
               "{} (epoch {}) owns {}, which the coordinator does not count as its (epoch {}: assigned "
               "[{}], revoking [{}])",
               m->name, epoch, names(extra), it->second.epoch, names(it->second.assigned),
               names(it->second.revoking)));
  }
}

void simulation::cg_check_end(const std::string& where) {
  std::size_t alive = 0;
  for (const auto& m : members_) {
    if (!m->alive) continue;
    ++alive;
    if (!cg_.members.count(m->core->member_id()))
      fail("G6 (convergence)",
           fmt::format("{}: {} ('{}') is not a member", where, m->name, m->core->member_id()));
  }
  if (cg_.members.size() != alive)
    fail("G6 (convergence)",
         fmt::format("{}: the coordinator has {} members, {} are alive", where, cg_.members.size(), alive));
  if (cg_.assignment_epoch != cg_.epoch)
    fail("G6 (convergence)", fmt::format("{}: the target is of epoch {}, the group's is {}", where,
                                         cg_.assignment_epoch, cg_.epoch));
  for (const auto& [id, cm] : cg_.members) {
    if (cm.state != cg_state::stable || cm.epoch != cg_.epoch)
      fail("G6 (convergence)", fmt::format("{}: the coordinator has '{}' {} at epoch {}, the group's is {}",
                                           where, id, to_string(cm.state), cm.epoch, cg_.epoch));
  }
}

}  // namespace kgroup::sim::group_sim
