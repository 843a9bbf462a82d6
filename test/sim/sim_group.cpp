// One seed of the group simulation (kgroup-sim --group): several members of one consumer group,
// each the real membership core of its protocol (classic: group::member, eager or cooperative,
// with the real assignors; --protocol consumer: group::kip848::consumer_member), the real listener
// mailbox (detail::listener_mailbox: the user thread's half of the listener handshake) and the
// real commit decisions (data::refuse_commit, make_commit_request, read_commit_response,
// auto_committer, commit_retriable), against a simulated group coordinator. The classic one, here,
// follows Kafka's classic GroupCoordinator: JoinGroup (MEMBER_ID_REQUIRED, the rebalance
// timeout, pending members), SyncGroup (the leader's assignment, pending syncs removed after the
// rebalance timeout), Heartbeat, LeaveGroup, session expiry, OffsetCommit (accepted while Stable or
// PreparingRebalance for the current generation, REBALANCE_IN_PROGRESS while CompletingRebalance)
// and OffsetFetch; coordinator moves reload the group as last stored (at each SyncGroup of the
// leader) with COORDINATOR_LOAD_IN_PROGRESS meanwhile. Static members (KIP-345; a third of the
// seeds, every seed with --static) follow Kafka's GroupMetadataManager: a JoinGroup with a
// group.instance.id needs no MEMBER_ID_REQUIRED round, one without a member id replaces the member
// id the instance id had (Stable: no rebalance, the new id gets the old one's assignment, stored at
// once; otherwise a rebalance), every request naming the instance id with another member id is
// answered FENCED_INSTANCE_ID, a known member that joins again unchanged gets the current
// generation back (Completing, or Stable and not the leader), and a static member that does not
// rejoin stays in the generation until its session times out. The KIP-848 one is
// sim_group_consumer.cpp's.
//
// Each member's data path is a model here by default (the data simulation, sim_world.cpp, runs the
// real data cores): a partition's position comes from OffsetFetch when the member is assigned it,
// a poll() returns records from the positions of the partitions the application owns (as the
// listener calls left them), and the application processes every record it is given. With
// --real-data each member runs the real data path instead (sim_group_data.cpp, and its checks).
//
// The application of each member is a seeded actor: poll() with short or long timeouts, work
// between polls (sometimes past max.poll.interval.ms), slow listener callbacks, commits (auto,
// commit_sync() of its positions, of explicit offsets retried after REBALANCE_IN_PROGRESS as
// Java's documentation says, and inside the revoke callback), close(), unsubscribe() and
// subscribe() again (a third of the seeds; the revoke, or the loss of a membership that is gone,
// runs inside unsubscribe() with its commits, and the facade stays subscribed until the leave is
// done), crashes, process pauses
// (both threads frozen, past the session timeout) and new members joining; and for static
// members, a crash whose process restarts with the same group.instance.id, and a pause during
// which a new process takes the instance id over (the paused one wakes as a zombie).
//
// Invariants, checked after every step:
//   G1  classic: two members that are stable in the same generation own no partition in common
//       (but two incarnations of one static member's process may: the coordinator fences all
//       but one, and G2 holds for the fenced ones' commits).
//       KIP-848 (epochs differ per member): the coordinator holds no partition for two members at
//       once (assigned, or being revoked), and a member's core owns, while the coordinator knows
//       it at its epoch (or the one before, whose answer may be on its way), only partitions the
//       coordinator holds for it; so a partition moves only once its old owner released it;
//   G2  the coordinator accepts a commit of a partition only from the member that generation
//       assigned it to (KIP-848: that holds it at the commit's member epoch);
//   G3  a committed offset never moves back (there are no seeks here), and a member never
//       commits past the position its application reached;
//   G4  no membership core makes a transition its table refuses, or reports a fatal error (but
//       FENCED_INSTANCE_ID, for a member the coordinator did answer so: its application closes it,
//       and its process starts again unless the one that took its instance id over runs);
//   G5  a member leaves for max.poll.interval.ms only when its application spent that long
//       outside poll() or inside one listener callback (time waiting inside poll() never counts);
//   G6  after the faults stop, the group converges: one generation (group epoch, with the target
//       assignment of that epoch), every member in it stable, every partition owned by exactly one
//       member, read to its end by someone and committed there; and no offset of any partition
//       was skipped (at-least-once across owners; with --real-data, an application's own seek
//       forward or seek_to_end() skips on purpose). One exception, Kafka's: a cooperative
//       generation that holds a partition back for a revoking static member that a new process
//       replaced without a rebalance leaves it unassigned (nobody rejoins for it). A member
//       that unsubscribed subscribes again before the faults stop.
//   G7  a member's commits carry its membership: no commit as nobody's (generation -1, no member
//       id: outside a subscription) from a process the coordinator holds as a member (such a
//       commit is refused, and its offsets are lost).
#include "sim_group.hpp"

#include "base/sim_mutants.hpp"

namespace kgroup::sim {
bool group_static = false;
bool group_unsubscribe = false;
}  // namespace kgroup::sim

namespace kgroup::sim::group_sim {

// ---- world ------------------------------------------------------------------------------------------

void simulation::setup() {
  const auto duration = milliseconds(rng_.between(40000, 90000));
  end_at_ = start_ + duration;
  // The quiet phase must outlast a rebalance that waits for a member stuck in a callback up to the
  // rebalance timeout, the session timeout of a crashed member, and a rejoin after them.
  quiet_at_ = end_at_ - milliseconds(45000);
  produce_until_ = quiet_at_ + milliseconds(10000);
  topics_["a"] = static_cast<std::int32_t>(rng_.between(1, 6));
  if (rng_.chance(0.5)) topics_["b"] = static_cast<std::int32_t>(rng_.between(1, 3));
  for (const auto& [t, n] : topics_) {
    for (std::int32_t p = 0; p < n; ++p) {
      log_end_[{t, p}] = rng_.below(30);
      processed_[{t, p}].assign(static_cast<std::size_t>(log_end_[{t, p}]), false);
    }
  }
  base_.group_id = "g";
  real_data_ = group_real_data;
  unclean_ = real_data_ && unclean_rng_.below(2) == 0;
  retention_ = real_data_ && retention_rng_.below(3) == 0;
  async_commits_ = real_data_ && async_rng_.below(2) == 0;
  seeks_forward_ = real_data_ && seek_rng_.below(2) == 0;
  if (real_data_) data_setup();
  if (consumer()) {
    setup_consumer();
  } else {
    setup_classic();
  }
  // Static members (KIP-345; KIP-848's instance ids) in a third of the seeds (every seed with
  // --static): every process slot has a group.instance.id, or each one by a coin's throw.
  const auto pick = static_rng_.below(6);
  if (group_static) {
    static_mode_ = pick % 2 == 0 ? statics::all : statics::some;
  } else if (pick < 2) {
    static_mode_ = pick == 0 ? statics::all : statics::some;
  }
  // Applications that unsubscribe() and subscribe() again: a third of the seeds (every seed with
  // --unsubscribe).
  unsubscribes_ = group_unsubscribe || unsub_rng_.below(3) == 0;
  max_members_ = static_cast<std::size_t>(rng_.between(1, 4));
  notef(
      "setup: {} protocol, topics {}, {}, session {} ms, heartbeat {} ms, max.poll.interval {} ms, {} "
      "ms{}{}{}{}{}{}{}",
      consumer() ? "consumer" : "classic", topics_, assignor_, base_.session_timeout.count(),
      base_.heartbeat_interval.count(), base_.max_poll_interval.count(), duration.count(),
      static_mode_ == statics::all    ? ", static members"
      : static_mode_ == statics::some ? ", some static members"
                                      : "",
      unsubscribes_ ? ", applications unsubscribe" : "", real_data_ ? ", the real data path" : "",
      unclean_ ? ", unclean elections" : "", retention_ ? ", retention" : "",
      async_commits_ ? ", commit_async" : "",
      !seeks_forward_ ? ""
      : unclean_      ? ", seek_to_end"
                      : ", seeks forward and seek_to_end");
  const auto first = rng_.between(1, static_cast<std::int64_t>(max_members_));
  for (std::int64_t i = 0; i < first; ++i) add_member();
}

void simulation::setup_classic() {
  base_.session_timeout = milliseconds(rng_.between(6000, 10000));
  base_.heartbeat_interval = milliseconds(rng_.between(1000, 3000));
  base_.max_poll_interval = milliseconds(rng_.between(5000, 12000));
  base_.retry_backoff = milliseconds(100);
  base_.retry_backoff_max = milliseconds(1000);
  base_.request_timeout = milliseconds(3000);
  const auto kind = rng_.below(4);
  if (kind == 0) {
    assignor_ = "range";
    base_.assignors = {make_range_assignor()};
  } else if (kind == 1) {
    assignor_ = "roundrobin";
    base_.assignors = {make_roundrobin_assignor()};
  } else if (kind == 2) {
    assignor_ = "sticky";
    base_.assignors = {make_sticky_assignor()};
  } else {
    assignor_ = "cooperative-sticky";
    base_.protocol = RebalanceProtocol::cooperative;
    base_.assignors = {make_cooperative_sticky_assignor()};
  }
}

sim_member& simulation::add_member(int slot) {
  auto m = std::make_unique<sim_member>();
  m->index = next_member_++;
  if (slot < 0) {
    m->slot = m->index;
    m->name = fmt::format("m{}", m->index);
    if (static_mode_ == statics::all || (static_mode_ == statics::some && static_rng_.chance(0.5)))
      m->instance_id = fmt::format("i{}", m->slot);
  } else {
    // A restarted process: the slot's group.instance.id, a fresh core (no member id).
    m->slot = slot;
    m->name = fmt::format("m{}.{}", slot, ++incarnations_[slot]);
    for (const auto& other : members_)
      if (other->slot == slot) m->instance_id = other->instance_id;
  }
  if (consumer()) {
    auto opts = consumer_base_;
    // The driver's own member id (KIP-1082), used with ConsumerGroupHeartbeat v1.
    opts.member_id = fmt::format("{}-{:016x}", m->name, static_cast<std::uint64_t>(rng_.below(1ll << 62)));
    opts.group_instance_id = m->instance_id;
    m->core = std::make_unique<core_box<kip848::consumer_member>>(std::move(opts));
  } else {
    auto opts = base_;
    opts.group_instance_id = m->instance_id;
    m->core = std::make_unique<core_box<group::member>>(std::move(opts));
  }
  m->max_poll_interval = base_.max_poll_interval;
  const auto mode = rng_.below(3);
  m->auto_commit = mode != 1;
  m->sync_commits = mode != 0;
  m->commit_in_revoke = rng_.chance(0.7);
  if (real_data_) {
    m->data = std::make_unique<member_data>(*this, *m);
    m->data->md = md_;
    detail::data_reader::options o;
    o.max_poll_records = static_cast<std::size_t>(rng_.between(10, 200));
    m->data->reader.configure(o);
  }
  notef("{} starts: {}{}{}{}", m->name, m->auto_commit ? "auto-commit " : "",
        m->sync_commits ? "sync commits " : "", m->commit_in_revoke ? "commits in revoke" : "",
        m->instance_id ? " group.instance.id " + *m->instance_id : "");
  auto& ref = *m;
  members_.push_back(std::move(m));
  std::vector<std::string> topics;
  for (const auto& [t, n] : topics_) topics.push_back(t);
  ref.clock_from = now_;
  ref.core->subscribe(now_, topics);
  process(ref);
  if (ref.auto_commit)
    at_member(ref, now_ + milliseconds(rng_.between(100, 1000)), [this, &ref] { auto_commit_timer(ref); });
  at_member(ref, now_ + milliseconds(rng_.between(1, 50)), [this, &ref] { poll_start(ref); });
  return ref;
}

void simulation::crash(sim_member& m, const char* why) {
  notef("FAULT {} {}", m.name, why);
  m.alive = false;
}

bool simulation::superseded(const sim_member& m) const {
  return std::any_of(members_.begin(), members_.end(),
                     [&](const auto& o) { return o->slot == m.slot && o->index > m.index; });
}

bool simulation::slot_alive(int slot, const sim_member* except) const {
  return std::any_of(members_.begin(), members_.end(), [&](const auto& o) {
    return o.get() != except && o->slot == slot && o->alive && !o->fenced_fatal;
  });
}

bool simulation::slot_running(int slot, const sim_member* except) const {
  return std::any_of(members_.begin(), members_.end(), [&](const auto& o) {
    return o.get() != except && o->slot == slot && o->alive && !o->fenced_fatal && now_ >= o->frozen_until;
  });
}

// A pause of a process already paused never ends it sooner: the events held until the end of the
// pause under way (an answer that came meanwhile, a timer) stay held until then (run_event), so
// waking the process earlier would deliver them late, after what it does once awake (found on
// seed 796594772677: a JoinGroup answer held past the wake-up let the request's timeout fire
// first).
void simulation::pause(sim_member& m, milliseconds d) {
  m.frozen_until = std::max(m.frozen_until, now_ + d);
}

std::string simulation::paused_note(const sim_member& m, milliseconds d) const {
  if (m.frozen_until == now_ + d) return "";
  return fmt::format(" (within a pause until {:.0f} ms)", ms(m.frozen_until));
}

void simulation::restart_slot(int slot, time_point when, const char* why) {
  at(when, [this, slot, why] {
    notef("the process of slot {} starts again ({})", slot, why);
    add_member(slot);
  });
}

// The faults of static members (KIP-345): a process that crashes and restarts with its
// group.instance.id (within the session timeout or after it), and a process presumed dead while
// it is only paused, whose instance id a new process takes over: the old one, a zombie when it
// wakes, must be fenced (FENCED_INSTANCE_ID, fatal for its core).
void simulation::static_fault(std::int64_t kind, sim_member& victim) {
  if (consumer() && kind == 12) {
    // KIP-848: a rolling bounce. close() leaves with epoch -2 (the coordinator keeps the
    // assignment for the instance id), and the new process takes it over.
    note(
        fmt::format("FAULT {} is bounced: close(), then its process starts again with the same "
                    "group.instance.id",
                    victim.name));
    victim.close_requested = true;
    victim.restart_after_close = true;
    return;
  }
  if (kind < 13) {
    crash(victim, "crashes; its process restarts with the same group.instance.id");
    restart_slot(victim.slot, now_ + milliseconds(rng_.between(100, base_.session_timeout.count() + 3000)),
                 "after a crash");
    return;
  }
  const auto d = milliseconds(rng_.between(3000, base_.session_timeout.count() + 4000));
  pause(victim, d);
  notef(
      "FAULT {} paused (both threads) for {} ms{}; presumed dead, its group.instance.id is started "
      "again meanwhile",
      victim.name, d.count(), paused_note(victim, d));
  restart_slot(victim.slot, now_ + milliseconds(rng_.between(100, 1500)), "its old process is paused");
}

void simulation::produce() {
  if (now_ >= produce_until_) return;
  auto it = log_end_.begin();
  std::advance(it, rng_.below(static_cast<std::int64_t>(log_end_.size())));
  const auto n = rng_.between(1, 8);
  it->second += n;
  processed_[it->first].resize(static_cast<std::size_t>(it->second), false);
  if (real_data_) data_produce(it->first, n);
  at(now_ + milliseconds(rng_.between(5, 200)), [this] { produce(); });
  data_only();  // the logs' ends: nothing check_step() reads
}

std::size_t live(const std::vector<std::unique_ptr<sim_member>>& ms) {
  return static_cast<std::size_t>(
      std::count_if(ms.begin(), ms.end(), [](const auto& m) { return m->alive; }));
}

void simulation::fault() {
  if (!fault_phase()) return;
  const auto kind = rng_.below(20);
  std::vector<sim_member*> alive;
  for (auto& m : members_)
    if (m->alive && !m->closing && !m->close_requested) alive.push_back(m.get());
  sim_member* victim =
      alive.empty() ? nullptr
                    : alive[static_cast<std::size_t>(rng_.below(static_cast<std::int64_t>(alive.size())))];
  if (kind < 3) {
    move_coordinator();
  } else if (kind < 4) {
    coord_down_until_ = now_ + milliseconds(rng_.between(200, 3000));
    notef("FAULT coordinator {} unavailable until {:.0f} ms", coord_node_, ms(coord_down_until_));
  } else if (kind < 6 && victim) {
    const auto d = milliseconds(rng_.between(1000, base_.session_timeout.count() + 4000));
    pause(*victim, d);
    notef("FAULT {} paused (both threads) for {} ms{}", victim->name, d.count(), paused_note(*victim, d));
  } else if (kind < 7 && victim) {
    crash(*victim, "crashes");
  } else if (kind < 8 && victim) {
    // close() is the application's call: it comes once the poll() or work under way is done.
    victim->close_requested = true;
  } else if (kind < 11 && live(members_) < max_members_ + 1) {
    add_member();
  } else if (kind >= 11 && kind < 14 && victim && victim->instance_id && !slot_alive(victim->slot, victim)) {
    // (Kinds 11-19 do nothing in seeds without static members: their schedules stay as they were.)
    static_fault(kind, *victim);
  }
  at(now_ + milliseconds(rng_.between(500, 5000)), [this] { fault(); });
}

// ---- the coordinator --------------------------------------------------------------------------------

std::optional<std::int16_t> simulation::not_serving(std::int32_t node) const {
  if (node != coord_node_) return code(kafka_errc::not_coordinator);
  if (now_ < coord_down_until_) return code(kafka_errc::coordinator_not_available);
  if (now_ < coord_loading_until_) return code(kafka_errc::coordinator_load_in_progress);
  return std::nullopt;
}

void simulation::answer_held(coord_member& cm, kafka_errc error, const std::string& member_id) {
  if (cm.pending_join) {
    join_resp r;
    r.member_id = member_id;
    r.error_code = code(error);
    auto f = std::move(cm.pending_join);
    cm.pending_join = nullptr;
    f(r);
  }
  if (cm.pending_sync) {
    protocol::sync_group_response r;
    r.error_code = code(error);
    auto f = std::move(cm.pending_sync);
    cm.pending_sync = nullptr;
    f(r);
  }
}

void simulation::move_coordinator() {
  // The old coordinator answers what it holds with NOT_COORDINATOR; the new one loads the group as
  // last stored (members' timers start again), and answers COORDINATOR_LOAD_IN_PROGRESS meanwhile.
  // (A KIP-848 coordinator holds no request: every heartbeat is answered at once.)
  for (auto& [id, cm] : g_.members) answer_held(cm, kafka_errc::not_coordinator, "");
  std::int32_t next = coord_node_;
  while (next == coord_node_) next = static_cast<std::int32_t>(rng_.between(1, brokers_));
  coord_node_ = next;
  coord_loading_until_ = now_ + milliseconds(rng_.between(0, 1500));
  if (consumer()) {
    cg_moved();
    return;
  }
  g_ = stored_;
  pending_ids_.clear();
  for (auto& [id, cm] : g_.members) {
    cm.last_seen = now_;
    cm.awaiting_sync = false;
  }
  notef("FAULT coordinator moves to {}: group {} generation {} with {} members", coord_node_,
        to_string(g_.state), g_.generation, g_.members.size());
}

void simulation::prepare_rebalance(const std::string& why) {
  if (g_.state == gstate::completing) {
    // Members waiting for their assignment learn that it will not come.
    for (auto& [id, cm] : g_.members) {
      if (!cm.pending_sync) continue;
      protocol::sync_group_response r;
      r.error_code = code(kafka_errc::rebalance_in_progress);
      auto f = std::move(cm.pending_sync);
      cm.pending_sync = nullptr;
      f(r);
    }
  }
  if (g_.state != gstate::preparing) {
    milliseconds longest{0};
    for (const auto& [id, cm] : g_.members) longest = std::max(longest, cm.rebalance);
    rebalance_deadline_ = now_ + longest;
    notef("coordinator: PreparingRebalance ({}), deadline {:.0f} ms", why, ms(rebalance_deadline_));
  }
  g_.state = gstate::preparing;
  for (auto& [id, cm] : g_.members) cm.awaiting_sync = false;
}

void simulation::remove_member(const std::string& id, const std::string& why) {
  auto it = g_.members.find(id);
  if (it == g_.members.end()) return;
  notef("coordinator: removes {} ({})", id, why);
  answer_held(it->second, kafka_errc::unknown_member_id, "");
  if (const auto& instance = it->second.instance_id) {
    auto s = g_.statics.find(*instance);
    if (s != g_.statics.end() && s->second == id) g_.statics.erase(s);
  }
  g_.members.erase(it);
  if (g_.members.empty() && g_.state != gstate::preparing) {
    g_.state = gstate::empty;
    ++g_.generation;
    g_.leader.clear();
    store_group();
    return;
  }
  if (g_.state == gstate::stable || g_.state == gstate::completing) prepare_rebalance("member removed");
  maybe_complete_join();
}

void simulation::maybe_complete_join() {
  if (g_.state != gstate::preparing || !pending_ids_.empty()) return;
  for (const auto& [id, cm] : g_.members)
    if (!cm.pending_join) return;
  complete_join();
}

void simulation::complete_join() {
  // Members that did not rejoin in time are gone; static ones stay (Kafka's completeGenericGroupJoin:
  // only the session timeout removes them), in the generation, with their last subscription.
  std::vector<std::string> late;
  for (const auto& [id, cm] : g_.members)
    if (!cm.pending_join && !cm.instance_id) late.push_back(id);
  for (const auto& id : late) {
    notef("coordinator: {} did not rejoin within the rebalance timeout", id);
    g_.members.erase(id);
  }
  if (!g_.members.empty() && std::none_of(g_.members.begin(), g_.members.end(),
                                          [](const auto& e) { return !!e.second.pending_join; })) {
    // Only static members that did not rejoin are left: the join waits another rebalance timeout
    // (until their session timeouts remove them or one rejoins), as Kafka's does.
    milliseconds longest{0};
    for (const auto& [id, cm] : g_.members) longest = std::max(longest, cm.rebalance);
    rebalance_deadline_ = now_ + longest;
    note("coordinator: no member rejoined; the rebalance waits another rebalance timeout");
    return;
  }
  pending_ids_.clear();
  ++g_.generation;
  ++generations_;
  if (g_.members.empty()) {
    g_.state = gstate::empty;
    g_.leader.clear();
    store_group();
    notef("coordinator: generation {} is empty", g_.generation);
    return;
  }
  // The leader is a member that joined this round (Kafka's maybeElectNewJoinedLeader).
  if (!g_.members.count(g_.leader) || !g_.members.at(g_.leader).pending_join) {
    for (const auto& [id, cm] : g_.members) {
      if (!cm.pending_join) continue;
      g_.leader = id;
      break;
    }
  }
  // Every member here offers the same one assignor.
  g_.protocol = g_.members.at(g_.leader).protocols.front().name;
  g_.state = gstate::completing;
  milliseconds longest{0};
  for (const auto& [id, cm] : g_.members) longest = std::max(longest, cm.rebalance);
  rebalance_deadline_ = now_ + longest;
  notef("coordinator: generation {} with {} members, leader {}", g_.generation, g_.members.size(), g_.leader);
  const auto list = member_list();
  for (auto& [id, cm] : g_.members) {
    cm.awaiting_sync = true;
    cm.assignment.clear();
    if (!cm.pending_join) {
      cm.last_seen = now_;  // a static member that did not rejoin: its session timer restarts
      continue;
    }
    join_resp r;
    r.generation_id = g_.generation;
    r.protocol_type = "consumer";
    r.protocol_name = g_.protocol;
    r.leader = g_.leader;
    r.member_id = id;
    if (id == g_.leader) r.members = list;
    auto f = std::move(cm.pending_join);
    cm.pending_join = nullptr;
    f(r);
  }
}

std::vector<join_resp::join_group_response_member> simulation::member_list() const {
  std::vector<join_resp::join_group_response_member> list;
  for (const auto& [id, cm] : g_.members) {
    join_resp::join_group_response_member e;
    e.member_id = id;
    e.group_instance_id = cm.instance_id;
    for (const auto& p : cm.protocols)
      if (p.name == g_.protocol) e.metadata = p.metadata;
    list.push_back(std::move(e));
  }
  return list;
}

join_resp simulation::current_generation(const std::string& id, bool with_members,
                                         bool skip_assignment) const {
  join_resp r;
  r.generation_id = g_.generation;
  r.protocol_type = "consumer";
  r.protocol_name = g_.protocol;
  r.leader = g_.leader;
  r.member_id = id;
  r.skip_assignment = skip_assignment;
  if (with_members) r.members = member_list();
  return r;
}

std::optional<std::int16_t> simulation::static_member_error(const std::optional<std::string>& instance,
                                                            const std::string& member_id) const {
  // Kafka's GenericGroup.validateMember: an instance id the group does not know is an unknown
  // member; one it knows by another member id is fenced.
  if (!instance) return std::nullopt;
  const auto it = g_.statics.find(*instance);
  if (it == g_.statics.end()) return code(kafka_errc::unknown_member_id);
  if (it->second != member_id) return code(kafka_errc::fenced_instance_id);
  return std::nullopt;
}

// A member's JoinGroup is held: its protocols and timeouts recorded, and a JoinGroup it sent before
// (whose answer was lost or timed out) answered REBALANCE_IN_PROGRESS and replaced.
void simulation::hold_join(coord_member& cm, const join_req& r, std::function<void(join_resp)> reply) {
  cm.protocols = r.protocols;
  cm.session = milliseconds(r.session_timeout_ms);
  cm.rebalance = milliseconds(r.rebalance_timeout_ms);
  cm.last_seen = now_;
  if (cm.pending_join) {
    join_resp stale;
    stale.error_code = code(kafka_errc::rebalance_in_progress);
    auto f = std::move(cm.pending_join);
    f(stale);
  }
  cm.pending_join = std::move(reply);
}

void simulation::handle_static_join(sim_member& m, join_req r, std::function<void(join_resp)> reply) {
  const auto& instance = *r.group_instance_id;
  auto update = [this, &r](coord_member& cm, std::function<void(join_resp)> f) {
    hold_join(cm, r, std::move(f));
  };
  if (r.member_id.empty()) {
    // No MEMBER_ID_REQUIRED round for a static member (KIP-345): its member id comes with the answer.
    const auto id = fmt::format("{}-{}", m.name, next_member_id_++);
    const auto known = g_.statics.find(instance);
    if (known != g_.statics.end()) {
      const auto old_id = known->second;
      replace_static(m, instance, old_id, id, r, std::move(reply));
      return;
    }
    coord_member cm;
    cm.id = id;
    cm.sim = m.index;
    cm.instance_id = instance;
    g_.statics[instance] = id;
    notef("coordinator: static member {} joins as {}", instance, id);
    update(g_.members.emplace(id, std::move(cm)).first->second, std::move(reply));
    if (g_.state != gstate::preparing) prepare_rebalance("JoinGroup from static member " + instance);
    maybe_complete_join();
    return;
  }
  if (auto err = static_member_error(r.group_instance_id, r.member_id)) {
    join_resp out;
    out.member_id = r.member_id;
    out.error_code = *err;
    reply(out);
    return;
  }
  // Kafka's genericGroupJoinExistingMember: a member that joins again with what it joined with
  // before gets the current generation back while the group completes it, and, if it is not the
  // leader, while it is stable; anything else rebalances.
  auto& cm = g_.members.at(r.member_id);
  if (cm.protocols == r.protocols &&
      (g_.state == gstate::completing || (g_.state == gstate::stable && g_.leader != r.member_id))) {
    cm.last_seen = now_;
    notef("coordinator: {} joins again unchanged: generation {} without a rebalance", r.member_id,
          g_.generation);
    reply(current_generation(r.member_id, g_.state == gstate::completing && g_.leader == r.member_id, false));
    return;
  }
  update(cm, std::move(reply));
  if (g_.state != gstate::preparing) prepare_rebalance("JoinGroup from " + r.member_id);
  maybe_complete_join();
}

void simulation::replace_static(sim_member& m, const std::string& instance, const std::string& old_id,
                                const std::string& new_id, const join_req& r,
                                std::function<void(join_resp)> reply) {
  // Kafka's replaceStaticMember: the old member id's requests held here are answered
  // FENCED_INSTANCE_ID, and the new id takes its place (subscription, assignment, leadership).
  auto node = g_.members.extract(old_id);
  auto cm = std::move(node.mapped());
  answer_held(cm, kafka_errc::fenced_instance_id, old_id);
  cm.id = new_id;
  cm.sim = m.index;
  cm.protocols = r.protocols;
  cm.session = milliseconds(r.session_timeout_ms);
  cm.rebalance = milliseconds(r.rebalance_timeout_ms);
  cm.last_seen = now_;
  if (g_.leader == old_id) g_.leader = new_id;
  g_.statics[instance] = new_id;
  notef("coordinator: static member {} joins as {}, replacing {} ({})", instance, new_id, old_id,
        to_string(g_.state));
  auto& ref = g_.members.emplace(new_id, std::move(cm)).first->second;
  switch (g_.state) {
    case gstate::stable: {
      // The group's protocol does not change (every member offers the one assignor): no
      // rebalance. The replacement is stored before the answer; the new member id has the old
      // one's assignment (SyncGroup returns it), the leader is told to skip the assignment
      // (JoinGroup v9+). The old id's partitions are the new id's in this generation (G2).
      auto a = assigned_.find({old_id, g_.generation});
      if (a != assigned_.end()) {
        assigned_[{new_id, g_.generation}] = a->second;
        assigned_.erase(a);
      }
      store_group();
      replaced_in_stable_.insert(g_.generation);
      const bool leader = g_.leader == new_id;
      reply(current_generation(new_id, leader, leader));
      return;
    }
    case gstate::completing:
      // The leader may have assigned the old id already: rebalance.
      ref.pending_join = std::move(reply);
      prepare_rebalance("static member " + instance + " replaced while completing");
      maybe_complete_join();
      return;
    case gstate::preparing:
      ref.pending_join = std::move(reply);
      maybe_complete_join();
      return;
    case gstate::empty:
      fail("coordinator", "an empty group knows static member " + instance);
  }
}

void simulation::fenced_seen(sim_member& m, std::int16_t error_code) {
  if (error_code == code(kafka_errc::fenced_instance_id)) m.fenced_answer = true;
}

void simulation::handle_join(sim_member& m, join_req r, std::function<void(join_resp)> reply) {
  if (r.group_instance_id) {
    handle_static_join(m, std::move(r), std::move(reply));
    return;
  }
  join_resp out;
  if (r.member_id.empty()) {
    // JoinGroup v4+: a new member first gets its id and joins again with it.
    out.member_id = fmt::format("{}-{}", m.name, next_member_id_++);
    out.error_code = code(kafka_errc::member_id_required);
    pending_ids_[out.member_id] = now_ + milliseconds(r.session_timeout_ms);
    reply(out);
    return;
  }
  auto it = g_.members.find(r.member_id);
  const bool pending = pending_ids_.erase(r.member_id) > 0;
  if (it == g_.members.end() && !pending) {
    out.error_code = code(kafka_errc::unknown_member_id);
    reply(out);
    return;
  }
  if (it == g_.members.end()) {
    coord_member cm;
    cm.id = r.member_id;
    cm.sim = m.index;
    it = g_.members.emplace(r.member_id, std::move(cm)).first;
  }
  hold_join(it->second, r, std::move(reply));
  if (g_.state != gstate::preparing) prepare_rebalance("JoinGroup from " + r.member_id);
  maybe_complete_join();
}

void simulation::handle_sync(sim_member&, protocol::sync_group_request r,
                             std::function<void(protocol::sync_group_response)> reply) {
  protocol::sync_group_response out;
  auto it = g_.members.find(r.member_id);
  if (auto err = static_member_error(r.group_instance_id, r.member_id)) {
    out.error_code = *err;
  } else if (it == g_.members.end()) {
    out.error_code = code(kafka_errc::unknown_member_id);
  } else if (r.generation_id != g_.generation) {
    out.error_code = code(kafka_errc::illegal_generation);
  } else if (g_.state == gstate::preparing) {
    out.error_code = code(kafka_errc::rebalance_in_progress);
  }
  if (out.error_code != 0) {
    reply(out);
    return;
  }
  auto& cm = it->second;
  cm.last_seen = now_;
  cm.awaiting_sync = false;
  if (g_.state == gstate::stable) {
    out.protocol_type = "consumer";
    out.protocol_name = g_.protocol;
    out.assignment = cm.assignment;
    reply(out);
    return;
  }
  // CompletingRebalance.
  cm.pending_sync = std::move(reply);
  if (r.member_id != g_.leader) return;
  for (const auto& a : r.assignments) {
    auto m = g_.members.find(a.member_id);
    if (m == g_.members.end()) continue;
    m->second.assignment = a.assignment;
    partition_set parts;
    if (auto ec = group::decode_consumer_assignment(a.assignment, parts))
      fail("coordinator", "the leader's assignment does not decode: " + ec.message());
    assigned_[{a.member_id, g_.generation}] = parts;
  }
  g_.state = gstate::stable;
  store_group();
  notef("coordinator: generation {} Stable", g_.generation);
  for (auto& [id, member] : g_.members) {
    if (!member.pending_sync) continue;
    protocol::sync_group_response ok;
    ok.protocol_type = "consumer";
    ok.protocol_name = g_.protocol;
    ok.assignment = member.assignment;
    auto f = std::move(member.pending_sync);
    member.pending_sync = nullptr;
    f(ok);
  }
}

protocol::heartbeat_response simulation::handle_heartbeat(const protocol::heartbeat_request& r) {
  protocol::heartbeat_response out;
  auto it = g_.members.find(r.member_id);
  if (auto err = static_member_error(r.group_instance_id, r.member_id)) {
    out.error_code = *err;
  } else if (it == g_.members.end()) {
    out.error_code = code(kafka_errc::unknown_member_id);
  } else if (r.generation_id != g_.generation) {
    out.error_code = code(kafka_errc::illegal_generation);
  } else {
    it->second.last_seen = now_;
    if (g_.state == gstate::preparing) out.error_code = code(kafka_errc::rebalance_in_progress);
  }
  return out;
}

protocol::leave_group_response simulation::handle_leave(const protocol::leave_group_request& r) {
  protocol::leave_group_response out;
  // v3+ names member identities (member id and instance id; the core fills both forms).
  std::vector<protocol::leave_group_request::member_identity> ids = r.members;
  if (ids.empty() && !r.member_id.empty()) ids.push_back({r.member_id, std::nullopt, std::nullopt});
  for (const auto& who : ids) {
    protocol::leave_group_response::member_response mr;
    mr.member_id = who.member_id;
    mr.group_instance_id = who.group_instance_id;
    if (auto err = static_member_error(who.group_instance_id, who.member_id)) {
      mr.error_code = *err;
    } else if (!g_.members.count(who.member_id)) {
      mr.error_code = code(kafka_errc::unknown_member_id);
    } else {
      remove_member(who.member_id, "LeaveGroup");
    }
    out.members.push_back(mr);
  }
  return out;
}

protocol::offset_commit_response simulation::handle_commit(sim_member& m,
                                                           const protocol::offset_commit_request& r) {
  std::int16_t err = 0;
  auto it = g_.members.find(r.member_id);
  if (consumer()) {
    err = cg_commit_error(r);
  } else if (r.group_instance_id && !(r.generation_id_or_member_epoch < 0 && g_.state == gstate::empty)) {
    // Kafka's validateOffsetCommit for a static member: validateMember first (FENCED_INSTANCE_ID
    // for a member id its instance id no longer has), then the generation.
    if (auto e = static_member_error(r.group_instance_id, r.member_id)) {
      err = *e;
    } else if (r.generation_id_or_member_epoch != g_.generation) {
      err = code(kafka_errc::illegal_generation);
    } else if (g_.state == gstate::completing) {
      err = code(kafka_errc::rebalance_in_progress);
    }
  } else if (r.generation_id_or_member_epoch < 0 && r.member_id.empty()) {
    if (g_.state != gstate::empty) err = code(kafka_errc::unknown_member_id);
  } else if (it == g_.members.end()) {
    err = code(kafka_errc::unknown_member_id);
  } else if (r.generation_id_or_member_epoch != g_.generation) {
    err = code(kafka_errc::illegal_generation);
  } else if (g_.state == gstate::completing) {
    err = code(kafka_errc::rebalance_in_progress);
  }
  // G7: a member's commits carry its membership. A commit as nobody's (generation -1, no member id)
  // from a process the coordinator holds as a member is refused (UNKNOWN_MEMBER_ID), and its
  // offsets are lost: the next owner reads the records again.
  if (r.generation_id_or_member_epoch < 0 && r.member_id.empty() && holds_process(m))
    fail("G7 (a member's commits carry its membership)",
         fmt::format(
             "{} commits as nobody's (generation -1, no member id) while the coordinator holds it as a "
             "member",
             m.name));
  protocol::offset_commit_response out;
  for (const auto& t : r.topics) {
    protocol::offset_commit_response::offset_commit_response_topic rt;
    rt.name = t.name;
    for (const auto& p : t.partitions) {
      rt.partitions.push_back({p.partition_index, err});
      if (err != 0) continue;
      const TopicPartition tp{t.name, p.partition_index};
      // G2: only the member the generation assigned the partition to commits it, or (a
      // cooperative revoke, whose callback runs in the next generation) the member that owned
      // it last while the generation holds it back from everyone.
      // With KIP-848: the member holds it at that epoch (assigned, or being revoked).
      if (consumer() ? !cg_holds(r.member_id, tp)
                     : !owns_for_commit(r.member_id, r.generation_id_or_member_epoch, tp))
        fail("G2 (commits only from the partition's owner)",
             fmt::format("{} ({}) committed {} at {} in {} {}, which did not assign it to that member",
                         m.name, r.member_id, name(tp), p.committed_offset,
                         consumer() ? "member epoch" : "generation", r.generation_id_or_member_epoch));
      // G3: never back.
      const auto c = committed_.find(tp);
      if (c != committed_.end() && p.committed_offset < c->second &&
          !(real_data_ && data_commit_back_sanctioned(m, tp, p.committed_offset)))
        fail("G3 (committed offsets never move back)",
             fmt::format("{} committed {} at {} (generation {}), below {} committed before", m.name, name(tp),
                         p.committed_offset, r.generation_id_or_member_epoch, c->second));
      committed_[tp] = p.committed_offset;
      committed_epoch_[tp] = p.committed_leader_epoch;
      ++commits_accepted_;
      if (real_data_) {
        if (const auto f = seek_floors_.find(tp); f != seek_floors_.end())
          std::erase_if(f->second,
                        [&](const auto& s) { return s.member == m.index && commit_first_sent_ > s.after; });
      }
    }
    out.topics.push_back(std::move(rt));
  }
  notef("coordinator: OffsetCommit from {} generation {}: error {}", r.member_id,
        r.generation_id_or_member_epoch, err);
  if (it != g_.members.end() && err == 0) it->second.last_seen = now_;
  return out;
}

bool simulation::holds_process(const sim_member& m) const {
  if (consumer())
    return std::any_of(cg_.members.begin(), cg_.members.end(),
                       [&](const auto& e) { return e.second.sim == m.index; });
  return std::any_of(g_.members.begin(), g_.members.end(),
                     [&](const auto& e) { return e.second.sim == m.index; });
}

bool simulation::owns_for_commit(const std::string& member, std::int32_t generation,
                                 const TopicPartition& tp) const {
  // Legitimate: the generation assigned it to the member; or it assigned it to nobody (a
  // cooperative hand-over holds it back) and the last generation that assigned it to anyone
  // assigned it to this member (whether or not the member heard of the generations between).
  // (The generation tests first: the set is searched only for a generation that would count.)
  std::int32_t last_gen = -1;
  const std::string* last_owner = nullptr;
  for (const auto& [key, parts] : assigned_) {
    if (key.second > generation || key.second <= last_gen || !parts.count(tp)) continue;
    last_gen = key.second;
    last_owner = &key.first;
  }
  return last_gen >= 0 && *last_owner == member;
}

void simulation::coordinator_tick() {
  if (now_ >= coord_down_until_ && now_ >= coord_loading_until_) {
    if (consumer()) {
      cg_tick();
    } else {
      classic_tick();
    }
  }
  at(now_ + milliseconds(100), [this] { coordinator_tick(); });
}

void simulation::classic_tick() {
  {
    std::vector<std::string> expired;
    for (const auto& [id, cm] : g_.members) {
      if (!cm.pending_join && now_ - cm.last_seen > cm.session) expired.push_back(id);
    }
    for (const auto& id : expired) remove_member(id, "session timeout");
    std::vector<std::string> pending_expired;
    for (const auto& [id, until] : pending_ids_)
      if (now_ > until) pending_expired.push_back(id);
    for (const auto& id : pending_expired) pending_ids_.erase(id);
    if (!pending_expired.empty()) maybe_complete_join();
    if (g_.state == gstate::preparing && now_ >= rebalance_deadline_) complete_join();
    if (g_.state == gstate::completing && now_ >= rebalance_deadline_) {
      // KIP-394's pending syncs: members that never sent SyncGroup are removed.
      std::vector<std::string> late;
      for (const auto& [id, cm] : g_.members)
        if (cm.awaiting_sync) late.push_back(id);
      for (const auto& id : late) remove_member(id, "no SyncGroup within the rebalance timeout");
    }
  }
}

// ---- a member's background thread -----------------------------------------------------------------

void simulation::process(sim_member& m) {
  for (int rounds = 0; rounds < 64 && m.alive; ++rounds) {
    if (!m.core->apply_actions(*this, m)) break;
  }
  if (!m.alive) return;
  // The timer (driver_base::arm_timer): one armed, at the core's next deadline.
  const auto when = m.core->next_deadline();
  if (!when) {
    m.timer_at.reset();
    ++m.timer_seq;
    return;
  }
  if (m.timer_at && *m.timer_at == *when) return;
  m.timer_at = *when;
  const auto seq = ++m.timer_seq;
  // The driver's timer has millisecond resolution.
  const auto t =
      now_ + std::chrono::ceil<milliseconds>(std::max(*when - now_, group::clock::duration::zero()));
  at_member(m, t, [this, &m, seq] {
    if (seq != m.timer_seq) return nothing_changed();
    m.timer_at.reset();
    m.core->tick(now_);
    process(m);
    check_poll_timeout(m);
  });
}

template <class Response, class Handle>
void simulation::send(sim_member& m, const char* what, milliseconds timeout, Handle handle,
                      std::function<void(sim_member&, const Response&)> deliver) {
  const auto node = m.core->coordinator();
  if (!node) {
    m.core->request_failed(now_, make_error_code(client_errc::coordinator_not_found));
    return;
  }
  const auto epoch = m.request_epoch;
  // One answer reaches the core: the response or the failure, whichever comes first.
  auto done = std::make_shared<bool>(false);
  auto fail_request = [this, &m, epoch, done, what](std::error_code ec) {
    if (*done || epoch != m.request_epoch) return;
    *done = true;
    notef("{}: {} failed: {}", m.name, what, ec.message());
    m.core->request_failed(now_, ec);
    process(m);
    check_poll_timeout(m);
  };
  if (timeout.count() == 0) timeout = base_.request_timeout;
  at_member(m, now_ + timeout, [this, &m, epoch, done, fail_request] {
    if (*done || epoch != m.request_epoch) return nothing_changed();  // answered (or abandoned)
    fail_request(make_error_code(client_errc::request_timed_out));
  });
  const bool reset = fault_phase() && rng_.chance(0.02);
  const bool reaches = !reset || rng_.chance(0.5);
  m.last_send = std::max(now_ + latency(), m.last_send);
  if (reset) {
    at_member(m, m.last_send,
              [fail_request] { fail_request(make_error_code(client_errc::connection_closed)); });
    if (!reaches) return;
  }
  auto respond = [this, &m, epoch, done, deliver, reset](Response r) {
    if (reset) return;  // the connection is gone: the answer is lost
    m.last_answer = std::max(now_ + latency(), m.last_answer);
    at_member(m, m.last_answer, [this, &m, epoch, done, deliver, r] {
      if (*done || epoch != m.request_epoch) return nothing_changed();
      *done = true;
      deliver(m, r);
      process(m);
      check_poll_timeout(m);
    });
  };
  at(m.last_send, [this, node = *node, handle, respond] {
    if (auto err = not_serving(node)) {
      Response r;
      r.error_code = *err;
      respond(r);
      return;
    }
    handle(respond);
  });
}

// Carries out `a`: the actions both cores emit here (apply_shared), the core's own through `own`.
template <class Action, class Own>
void simulation::apply_with(sim_member& m, Action& a, Own own) {
  std::visit(
      [&](auto& act) {
        if constexpr (shared_action<std::decay_t<decltype(act)>>) {
          apply_shared(m, act);
        } else {
          own(act);
        }
      },
      a);
}

void simulation::apply(sim_member& m, group::action& a) {
  apply_with(m, a, [&](auto& act) {
    using T = std::decay_t<decltype(act)>;
    if constexpr (std::is_same_v<T, group::find_coordinator>) {
      find_coordinator(m, [this, &m] { core_of<group::member>(m).coordinator_found(now_, coord_node_); });
    } else if constexpr (std::is_same_v<T, group::send_join_group>) {
      notef("{}: JoinGroup as '{}'", m.name, act.request.member_id);
      send<join_resp>(
          m, "JoinGroup", act.timeout,
          [this, &m, r = act.request](auto respond) { handle_join(m, r, respond); },
          [this](sim_member& mm, const join_resp& r) {
            notef("{}: JoinGroup answer: error {} generation {} leader {}", mm.name, r.error_code,
                  r.generation_id, r.leader);
            fenced_seen(mm, r.error_code);
            core_of<group::member>(mm).join_group_done(now_, r);
          });
    } else if constexpr (std::is_same_v<T, group::send_sync_group>) {
      send<protocol::sync_group_response>(
          m, "SyncGroup", milliseconds(0),
          [this, &m, r = act.request](auto respond) { handle_sync(m, r, respond); },
          [this](sim_member& mm, const protocol::sync_group_response& r) {
            notef("{}: SyncGroup answer: error {}", mm.name, r.error_code);
            fenced_seen(mm, r.error_code);
            core_of<group::member>(mm).sync_group_done(now_, r);
          });
    } else if constexpr (std::is_same_v<T, group::send_heartbeat>) {
      send<protocol::heartbeat_response>(
          m, "Heartbeat", milliseconds(0),
          [this, r = act.request](auto respond) { respond(handle_heartbeat(r)); },
          [this](sim_member& mm, const protocol::heartbeat_response& r) {
            if (r.error_code != 0) notef("{}: Heartbeat answer: error {}", mm.name, r.error_code);
            fenced_seen(mm, r.error_code);
            core_of<group::member>(mm).heartbeat_done(now_, r);
          });
    } else if constexpr (std::is_same_v<T, group::send_leave_group>) {
      notef("{}: LeaveGroup", m.name);
      send<protocol::leave_group_response>(
          m, "LeaveGroup", milliseconds(0),
          [this, r = act.request](auto respond) { respond(handle_leave(r)); },
          [this](sim_member& mm, const protocol::leave_group_response& r) {
            for (const auto& mr : r.members) fenced_seen(mm, mr.error_code);
            core_of<group::member>(mm).leave_group_done(now_, r);
          });
    } else if constexpr (std::is_same_v<T, group::compute_assignment>) {
      at_member(m, now_ + latency(), [this, &m, job = act] {
        ClusterMetadata cm;
        for (const auto& t : job.topics) {
          auto it = topics_.find(t);
          if (it == topics_.end()) continue;
          TopicMetadata tm;
          tm.topic = t;
          tm.partition_count = it->second;
          cm.topics.push_back(std::move(tm));
        }
        core_of<group::member>(m).assignment_metadata(now_, job.generation, {}, cm);
        process(m);
      });
    } else if constexpr (std::is_same_v<T, group::abandon_requests>) {
      ++m.request_epoch;
    }
  });
}

void simulation::find_coordinator(sim_member& m, std::function<void()> found) {
  at_member(m, now_ + latency(), [this, &m, found] {
    if (now_ < coord_down_until_) {
      m.core->coordinator_failed(now_, make_error_code(kafka_errc::coordinator_not_available));
    } else {
      found();
    }
    process(m);
  });
}

// The actions both cores emit (driver_base::apply_shared).
void simulation::apply_shared(sim_member& m, group::run_listener& act) {
  notef("{}: listener call {} {} ({})", m.name, act.seq, group::to_string(act.kind), names(act.partitions));
  detail::listener_call call{act.kind, std::move(act.partitions), act.seq};
  call.stale_claim = act.stale_claim;
  m.shared.push(std::move(call));
}

void simulation::apply_shared(sim_member& m, group::assignment_changed& act) {
  assignment_changed(m, act.owned);
}

void simulation::apply_shared(sim_member& m, group::report_error& act) {
  if (act.fatal && m.fenced_answer &&
      (act.code == make_error_code(kafka_errc::fenced_instance_id) ||
       (consumer() && act.code == make_error_code(kafka_errc::unreleased_instance_id)))) {
    // G4's one exception (KIP-345): the coordinator knows this member's group.instance.id by
    // another member id now (a new process took it over, or a coordinator that moved loaded an
    // older one): the membership is over for good, and the application closes the consumer.
    // KIP-848: or a join found the instance id still held by a member that did not leave with
    // epoch -2 (a crashed or paused process, until its session times out): UNRELEASED_INSTANCE_ID,
    // fatal as in Java's client; the orchestrator starts the process again later.
    notef("{}: fenced: {}; the application closes it", m.name, act.message);
    m.fenced_fatal = true;
    m.close_requested = true;
    return;
  }
  if (act.fatal)
    fail("G4 (no fatal error, no refused transition)", fmt::format("{}: {}", m.name, act.message));
  notef("{}: error: {}", m.name, act.message);
}

void simulation::apply_shared(sim_member& m, group::cancel_listener& act) {
  if (m.shared.started_listeners.count(act.seq)) {
    m.shared.late_cancels.insert(act.seq);
  } else {
    m.shared.cancelled_listeners.insert(act.seq);
  }
}

void simulation::apply_shared(sim_member& m, group::left_group&) {
  ++m.left_count;
  m.shared.push(detail::left_event{});
}

// net/consumer_group_driver.cpp: one heartbeat in flight, whose answer supersedes the earlier
// ones'; topic ids named from metadata (here every topic's, at once).
void simulation::apply(sim_member& m, kip848::action& a) {
  apply_with(m, a, [&](auto& act) {
    using T = std::decay_t<decltype(act)>;
    if constexpr (std::is_same_v<T, group::find_coordinator>) {
      find_coordinator(m, [this, &m] {
        core_of<kip848::consumer_member>(m).coordinator_found(now_, coord_node_, heartbeat_version_);
      });
    } else if constexpr (std::is_same_v<T, kip848::send_consumer_group_heartbeat>) {
      const auto& r = act.request;
      notef("{}: ConsumerGroupHeartbeat '{}' epoch {}{}", m.name, r.member_id, r.member_epoch,
            r.topic_partitions ? " owning " + names(from_wire(*r.topic_partitions)) : "");
      ++m.request_epoch;  // supersede::earlier
      send<cg_response>(
          m, "ConsumerGroupHeartbeat", milliseconds(0),
          [this, &m, r](auto respond) { respond(cg_heartbeat(m, r, heartbeat_version_)); },
          [this](sim_member& mm, const cg_response& resp) {
            notef(
                "{}: ConsumerGroupHeartbeat answer: error {} epoch {}{}", mm.name, resp.error_code,
                resp.member_epoch,
                resp.assignment ? " assignment " + names(from_wire(resp.assignment->topic_partitions)) : "");
            core_of<kip848::consumer_member>(mm).heartbeat_done(now_, resp);
          });
    } else if constexpr (std::is_same_v<T, kip848::need_topic_names>) {
      at_member(m, now_ + latency(), [this, &m] {
        std::vector<std::pair<kip848::topic_id, std::string>> known;
        for (const auto& [t, id] : topic_ids_) known.emplace_back(id, t);
        core_of<kip848::consumer_member>(m).topic_names_resolved(now_, known);
        process(m);
      });
    }
  });
}

void simulation::assignment_changed(sim_member& m, const partition_set& owned) {
  if (m.data) {
    data_assign(m, owned);
    m.bg_owned = owned;
    return;
  }
  // The fetcher's assign(): positions of new partitions come from OffsetFetch; partitions no longer
  // owned are forgotten (auto-commit starts afresh for a later owner).
  for (const auto& tp : m.bg_owned) {
    if (owned.count(tp)) continue;
    m.fetched_pos.erase(tp);
    m.auto_committer.forget(tp);
    m.consumed.erase(tp);  // shared_state::drop_fetched()
  }
  for (const auto& tp : owned) {
    if (m.bg_owned.count(tp)) continue;
    const auto s = ++m.bg_own_seq[tp];
    offset_fetch(m, tp, s);
  }
  m.bg_owned = owned;
}

void simulation::offset_fetch(sim_member& m, const TopicPartition& tp, std::uint64_t own_seq) {
  const bool fails = fault_phase() && rng_.chance(0.05);
  at_member(m, now_ + latency(), [this, &m, tp, own_seq, fails] {
    if (!m.bg_owned.count(tp) || m.bg_own_seq[tp] != own_seq) return;
    if (fails || not_serving(coord_node_)) {  // the fetcher finds the coordinator itself
      at_member(m, now_ + milliseconds(100), [this, &m, tp, own_seq] { offset_fetch(m, tp, own_seq); });
      return;
    }
    const auto c = committed_.find(tp);
    const std::int64_t p = c == committed_.end() ? 0 : c->second;  // auto.offset.reset=earliest
    m.fetched_pos[tp] = p;
    notef("{}: {} starts at {}{}", m.name, name(tp), p, c == committed_.end() ? " (reset)" : "");
  });
}

void simulation::auto_commit_timer(sim_member& m) {
  // fetcher::auto_commit: the consumed positions of owned partitions, if the member is stable.
  const auto offsets = [&] {
    std::map<TopicPartition, detail::epoch_offset> consumed;
    if (m.data) {
      std::lock_guard lock(m.shared.mutex);
      consumed = m.shared.consumed;
    } else {
      for (const auto& [tp, o] : m.consumed) consumed[tp] = {o, -1};
    }
    return m.auto_committer.due(consumed, m.bg_owned, identity(m));
  }();
  if (m.data) {
    // G3: auto-commit commits what the application consumed, never past its position now (after a
    // seek back or a resolved seek_to_beginning(), the new position; unknown while a seek_to is
    // in flight: not checked then).
    for (const auto& [tp, om] : offsets) {
      const auto p = m.data->reader.positions().position(tp);
      if (p && om.offset > p->offset)
        fail("G3 (committed offsets never move back)",
             fmt::format("{}: auto-commit commits {} at {}, past its application's position {}", m.name,
                         name(tp), om.offset, p->offset));
    }
  }
  if (!offsets.empty()) {
    send_commit(
        m, offsets, "auto-commit", [](std::optional<data::commit_error>) {}, now_);
  }
  at_member(m, now_ + milliseconds(rng_.between(500, 2000)), [this, &m] { auto_commit_timer(m); });
}

void simulation::send_commit(sim_member& m, const data::commit_map& offsets, const char* who,
                             std::function<void(std::optional<data::commit_error>)> done, time_point deadline,
                             std::uint64_t listener_seq, std::uint64_t first_sent) {
  if (first_sent == 0) first_sent = ++commits_sent_;
  // fetcher::commit: no attempt once the listener call it was made in is cancelled late.
  if (listener_seq != 0 && m.shared.late_cancels.count(listener_seq)) {
    notef("{}: {} refused: made in a superseded callback", m.name, who);
    done(data::superseded_callback_commit());
    return;
  }
  const auto id = identity(m);
  if (auto refused = data::refuse_commit(id, offsets)) {
    if (!refused->code) {
      done(std::nullopt);
      return;
    }
    notef("{}: {} refused: {}", m.name, who, refused->message);
    done(refused);
    return;
  }
  for (const auto& [tp, om] : offsets) {
    // G2: a member commits only partitions it owns (the application's view, or the fetcher's
    // for auto-commit).
    if (!m.app_owned.count(tp) && !m.bg_owned.count(tp))
      fail("G2 (commits only from the partition's owner)",
           fmt::format("{} commits {} at {} ({}), which it does not own", m.name, name(tp), om.offset, who));
    // G3: a member commits only what its application reached (with the real data path: before
    // a seek back too).
    auto p = m.pos.find(tp);
    if (m.data) {
      p = m.data->reached.find(tp);
      if (p == m.data->reached.end()) p = m.pos.find(tp);
    }
    if (p == m.pos.end() || om.offset > p->second)
      fail("G3 (committed offsets never move back)",
           fmt::format("{} commits {} at {}, past its application's position {}", m.name, name(tp), om.offset,
                       p == m.pos.end() ? -1 : p->second));
  }
  std::string list;
  if (traced_)
    for (const auto& [tp, om] : offsets) list += fmt::format(" {}@{}", name(tp), om.offset);
  notef("{}: {} sends generation {}:{}", m.name, who, id.generation, list);
  auto req = data::make_commit_request("g", id, offsets);
  const bool lost = fault_phase() && rng_.chance(0.02);
  m.last_send = std::max(now_ + latency(), m.last_send);
  auto answer = [this, &m, offsets, who, done, deadline, listener_seq, first_sent,
                 gen = id.generation](protocol::offset_commit_response r) {
    const auto failure = data::read_commit_response(r);
    if (failure) fenced_seen(m, failure->kafka_code);
    if (!failure) {
      m.auto_committer.committed(offsets);
      done(std::nullopt);
      return;
    }
    if (failure->kafka_code != 0) {
      m.core->commit_failed(now_, gen, failure->kafka_code);
      process(m);
    }
    if (data::commit_retriable(failure->error.code) && now_ + milliseconds(100) < deadline) {
      at_member(m, now_ + milliseconds(100),
                [this, &m, offsets, who, done, deadline, listener_seq, first_sent] {
                  send_commit(m, offsets, who, done, deadline, listener_seq, first_sent);
                });
      return;
    }
    notef("{}: {} failed: {}", m.name, who, failure->error.message);
    done(failure->error);
  };
  if (lost) {
    at_member(m, m.last_send, [this, &m, offsets, who, done, deadline, listener_seq, first_sent] {
      notef("{}: {} lost (connection reset)", m.name, who);
      if (now_ + milliseconds(100) < deadline) {
        at_member(m, now_ + milliseconds(100),
                  [this, &m, offsets, who, done, deadline, listener_seq, first_sent] {
                    send_commit(m, offsets, who, done, deadline, listener_seq, first_sent);
                  });
      } else {
        done(data::commit_error{make_error_code(client_errc::connection_closed), "connection reset"});
      }
    });
    return;
  }
  // (The request and the answer's handler move into the events: each runs once.)
  at(m.last_send, [this, &m, req = std::move(req), answer = std::move(answer), first_sent,
                   node = id.coordinator.value_or(-1)]() mutable {
    protocol::offset_commit_response r;
    if (auto err = not_serving(node)) {
      for (const auto& t : req.topics) {
        protocol::offset_commit_response::offset_commit_response_topic rt;
        rt.name = t.name;
        for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, *err});
        r.topics.push_back(std::move(rt));
      }
    } else {
      commit_first_sent_ = first_sent;
      r = handle_commit(m, req);
    }
    m.last_answer = std::max(now_ + latency(), m.last_answer);
    at_member(m, m.last_answer, [answer = std::move(answer), r = std::move(r)] { answer(r); });
  });
}

// ---- a member's application ---------------------------------------------------------------------------

data::group_identity simulation::identity(const sim_member& m) const {
  data::group_identity id;
  id.group_mode = true;
  if (!m.subscribed) {
    // fetch::commit_identity outside a subscription: nobody's commit, to the coordinator the
    // standalone lookup finds.
    id.coordinator = coord_node_;
    id.stable = true;
    return id;
  }
  static_cast<group::standing&>(id) = m.core->standing();
  id.subscribed = true;
  return id;
}

void simulation::poll_start(sim_member& m) {
  if (m.closing) return;
  if (verbose_) notef("{}: poll()", m.name);
  ++m.polls;
  m.in_poll = true;
  m.clock_from = now_;
  m.core->poll_called(now_);
  process(m);
  // publish_returned(): what the last poll() returned is consumed now.
  if (m.data) {
    m.data->reader.publish_returned();
  } else {
    m.consumed.clear();
    for (const auto& tp : m.app_owned)
      if (m.pos.count(tp)) m.consumed[tp] = m.pos[tp];
  }
  // poll(timeout): mostly short, sometimes longer than max.poll.interval.ms (waiting inside poll()
  // never counts toward it).
  milliseconds timeout(rng_.between(10, 200));
  if (rng_.chance(0.05)) timeout = m.max_poll_interval + milliseconds(rng_.between(500, 5000));
  m.poll_deadline = now_ + timeout;
  run_events(m, [this, &m] { poll_body(m); });
}

void simulation::run_events(sim_member& m, std::function<void()> then) {
  while (!m.shared.events.empty()) {
    auto e = std::move(m.shared.events.front());
    m.shared.events.pop_front();
    if (auto* call = std::get_if<detail::listener_call>(&e)) {
      if (!m.mailbox.start(*call)) continue;  // superseded
      m.core->listener_started(now_, call->seq);
      process(m);
      m.in_callback = true;
      m.clock_from = now_;
      auto c = *call;
      auto finish = [this, &m, c, then] {
        m.in_callback = false;
        m.clock_from = now_;
        auto after = [this, &m, c, then] {
          m.core->listener_done(now_, c.seq);
          process(m);
          check_poll_timeout(m);
          run_events(m, then);
        };
        if (auto lost = m.mailbox.finish(c)) {
          invoke(m, *lost, after);
          return;
        }
        after();
      };
      if (c.kind != group::listener_kind::lost || !c.partitions.empty()) {
        invoke(m, c, finish);
      } else {
        finish();
      }
      return;  // run_events continues from the callback's end
    }
    if (m.data) data_event(m, e);
  }
  then();
}

void simulation::invoke(sim_member& m, detail::listener_call call, std::function<void()> done) {
  // Consumer::impl::invoke: auto-commit the revoked partitions first; a revoked call's callback runs
  // while they are still owned, a lost or assigned one after the bookkeeping.
  // A revoke of partitions claimed from an older generation commits nothing of them on its own.
  if (call.kind == group::listener_kind::revoked && !call.partitions.empty() && m.auto_commit &&
      !call.stale_claim) {
    // data_reader::commit_positions(): the positions, which become the consumed ones.
    data::commit_map offsets;
    if (m.data) {
      offsets = m.data->reader.commit_positions({call.partitions.begin(), call.partitions.end()});
    } else {
      for (const auto& tp : call.partitions) {
        if (!m.pos.count(tp)) continue;
        offsets[tp] = {m.pos[tp], "", -1};
        if (m.consumed.count(tp)) m.consumed[tp] = m.pos[tp];
      }
    }
    if (m.mailbox.running_superseded()) offsets.clear();  // commit_client refuses it (logged)
    send_commit(
        m, offsets, "auto-commit before revoking",
        [this, &m, call, done](std::optional<data::commit_error>) { callback(m, call, done); },
        now_ + milliseconds(60000), m.mailbox.running_seq());
    return;
  }
  callback(m, call, done);
}

void simulation::callback(sim_member& m, const detail::listener_call& call, std::function<void()> done) {
  if (call.kind != group::listener_kind::revoked) ownership_changed(m, call);
  // The application's callback: some take long (past max.poll.interval.ms in the fault phase).
  milliseconds d(rng_.between(0, 30));
  if (fault_phase() && rng_.chance(0.05))
    d = milliseconds(rng_.between(500, m.max_poll_interval.count() + 3000));
  notef("{}: on_partitions_{}({}) runs {} ms", m.name, group::to_string(call.kind), names(call.partitions),
        d.count());
  at_member(m, now_ + d, [this, &m, call, done] {
    auto end = [this, &m, call, done] {
      if (call.kind == group::listener_kind::revoked) ownership_changed(m, call);
      done();
    };
    if (call.kind == group::listener_kind::revoked && m.commit_in_revoke) {
      // commit_sync() of the revoked partitions' positions inside the callback.
      data::commit_map offsets;
      for (const auto& tp : call.partitions)
        if (m.pos.count(tp)) offsets[tp] = {m.pos[tp], "", position_epoch(m, tp, m.pos[tp])};
      commit_sync(m, offsets, "commit_sync in on_partitions_revoked", false, end);
      return;
    }
    end();
  });
}

void simulation::ownership_changed(sim_member& m, const detail::listener_call& call) {
  if (m.data) m.data->reader.ownership_changed(call);
  for (const auto& tp : call.partitions) {
    if (call.kind == group::listener_kind::assigned) {
      m.app_owned.insert(tp);
    } else {
      m.app_owned.erase(tp);
      m.pos.erase(tp);
      m.consumed.erase(tp);
      if (m.data) {
        m.data->paused.erase(tp);
        m.data->reached.erase(tp);
        m.data->returned_epochs.erase(tp);
        m.data->last_pos.erase(tp);
      }
    }
  }
  if (m.data) data_sync_pos(m);
}

std::int32_t simulation::position_epoch(sim_member& m, const TopicPartition& tp, std::int64_t offset) const {
  if (!m.data) return -1;
  if (const auto p = m.data->reader.positions().position(tp); p && p->offset == offset) return p->epoch;
  // A seek_to_beginning() or reset in flight: the reader has no position, and the application
  // commits the last one it knew (m.pos), with its epoch, or that of its last record before it.
  if (const auto l = m.data->last_pos.find(tp); l != m.data->last_pos.end() && l->second.offset == offset)
    return l->second.epoch;
  const auto e = m.data->returned_epochs.find(tp);
  if (e == m.data->returned_epochs.end()) return -1;
  const auto* r = e->second.find(offset - 1);
  return r == nullptr ? -1 : *r;
}

bool simulation::poll_body(sim_member& m) {
  if (m.data) {
    if (data_poll(m) || now_ >= m.poll_deadline) {
      poll_return(m);
      return true;
    }
    // Waiting inside poll(): woken by events and data (looked at every few milliseconds here).
    at_member(m, std::min(m.poll_deadline, now_ + milliseconds(rng_.between(5, 50))), [this, &m] {
      // (Two lambdas of two pointers: held inside the std::function, not allocated.)
      if (m.shared.events.empty() && m.shared.fetched.empty()) {
        run_events(m, [this, &m] {
          if (!poll_body(m)) nothing_changed();
        });
        return;
      }
      // Without a listener call among the events (position events and data errors: the real
      // reader's), run_events() and poll_body() change only the member's data path and its
      // application's side unless poll() returns (poll_return(): the core's poll_returned()).
      const bool data_events =
          std::none_of(m.shared.events.begin(), m.shared.events.end(),
                       [](const auto& e) { return std::holds_alternative<detail::listener_call>(e); });
      run_events(m, [this, &m] { poll_body(m); });
      if (data_events && m.in_poll) data_only();
    });
    return false;
  }
  // (The owned partitions, the positions and the logs' ends are walked side by side: all three
  // are in TopicPartition's order.)
  // Positions the background found (the position events of the real reader).
  auto walk = [](auto& map, auto& it, const TopicPartition& tp) {
    while (it != map.end() && compare(it->first, tp) < 0) ++it;
    return it != map.end() && compare(it->first, tp) == 0;
  };
  auto p = m.pos.begin();
  for (const auto& tp : m.app_owned) {
    if (!m.fetched_pos.empty() && !walk(m.pos, p, tp)) {
      auto f = m.fetched_pos.find(tp);
      if (f == m.fetched_pos.end()) continue;
      p = m.pos.emplace_hint(p, tp, f->second);
      m.fetched_pos.erase(f);
    }
  }
  std::int64_t budget = rng_.between(1, 50);
  bool any = false;
  std::vector<std::string> got;  // shown with --verbose
  p = m.pos.begin();
  auto e = log_end_.begin();
  for (const auto& tp : m.app_owned) {
    if (!walk(m.pos, p, tp) || budget <= 0) continue;
    const std::int64_t end = walk(log_end_, e, tp) ? e->second : log_end_[tp];
    const auto n = std::min(budget, end - p->second);
    if (n <= 0) continue;
    auto& seen = processed_[tp];
    for (std::int64_t o = p->second; o < p->second + n; ++o) seen[static_cast<std::size_t>(o)] = true;
    any = true;
    if (verbose_) got.push_back(fmt::format("{}[{}, {})", name(tp), p->second, p->second + n));
    p->second += n;
    budget -= n;
  }
  if (any) {
    if (verbose_) notef("{}: poll returns {}", m.name, fmt::join(got, " "));
    poll_return(m);
    return true;
  }
  if (now_ >= m.poll_deadline) {
    poll_return(m);
    return true;
  }
  // Waiting inside poll(): woken by events and data (looked at every few milliseconds here).
  at_member(m, std::min(m.poll_deadline, now_ + milliseconds(rng_.between(5, 50))), [this, &m] {
    // A look that finds no event and no data and waits on changes only the application's side
    // (positions, the queue): nothing the checks after each step read.
    // (Two lambdas of two pointers: held inside the std::function, not allocated.)
    if (m.shared.events.empty()) {
      run_events(m, [this, &m] {
        if (!poll_body(m)) nothing_changed();
      });
    } else {
      run_events(m, [this, &m] { poll_body(m); });
    }
  });
  return false;
}

void simulation::poll_return(sim_member& m) {
  m.in_poll = false;
  m.clock_from = now_;
  m.core->poll_returned(now_);
  process(m);
  // The application's work between polls.
  milliseconds work(rng_.between(1, 40));
  if (fault_phase() && rng_.chance(0.01)) work = m.max_poll_interval + milliseconds(rng_.between(100, 3000));
  if (work > milliseconds(1000)) notef("{}: app works {} ms before the next poll", m.name, work.count());
  at_member(m, now_ + work, [this, &m] { after_work(m); });
}

void simulation::after_work(sim_member& m) {
  if (m.close_requested) {
    notef("{}: the application calls close()", m.name);
    close_member(m);
    return;
  }
  if (unsubscribes_ && fault_phase() && !m.fenced_fatal && unsub_rng_.chance(0.005)) {
    unsubscribe_member(m);
    return;
  }
  auto next = [this, &m] {
    if (!m.closing) at_member(m, now_ + milliseconds(rng_.between(0, 5)), [this, &m] { poll_start(m); });
  };
  if (m.data && data_app_action(m, next)) return;
  if (m.retry_commit) {
    // A careful application commits again only what it still owns (Kafka's classic coordinator
    // accepts a commit of any partition from a member of the current generation), at the
    // positions it has reached since (an older offset would be its own step back).
    auto offsets = std::move(*m.retry_commit);
    m.retry_commit.reset();
    std::erase_if(offsets,
                  [&](const auto& e) { return !m.app_owned.count(e.first) || !m.pos.count(e.first); });
    for (auto& [tp, om] : offsets) om = {m.pos[tp], om.metadata, position_epoch(m, tp, m.pos[tp])};
    commit_sync(m, offsets, "commit_sync again (after REBALANCE_IN_PROGRESS)", true, next);
    return;
  }
  // After the faults, every poll() commits: the group must end committed at every log's end.
  if (m.sync_commits && (!fault_phase() || rng_.chance(0.1))) {
    // commit_sync() without offsets: data_reader::positions_for_commit(), which makes the positions
    // the consumed ones (auto-commit never commits below them afterwards).
    data::commit_map offsets;
    if (m.data) {
      for (const auto& [tp, om] : m.data->reader.positions_for_commit())
        if (m.app_owned.count(tp)) offsets[tp] = {om.offset, om.metadata, om.leader_epoch.value_or(-1)};
    } else {
      for (const auto& tp : m.app_owned) {
        if (!m.pos.count(tp)) continue;
        offsets[tp] = {m.pos[tp], "", -1};
        m.consumed[tp] = m.pos[tp];
      }
    }
    if (async_commits_ && async_rng_.chance(0.5)) {
      commit_async(m, offsets, "commit_async", next);
    } else {
      commit_sync(m, offsets, "commit_sync", true, next);
    }
    return;
  }
  next();
}

void simulation::offsets_committed(sim_member& m, const data::commit_map& offsets) {
  if (!m.data) return;
  OffsetMap explicit_offsets;
  for (const auto& [tp, om] : offsets)
    explicit_offsets[tp] = {om.offset, om.metadata,
                            om.epoch >= 0 ? std::optional<std::int32_t>(om.epoch) : std::nullopt};
  m.data->reader.offsets_committed(explicit_offsets);
}

void simulation::commit_async(sim_member& m, data::commit_map offsets, const char* who,
                              std::function<void()> then) {
  // Consumer::impl::commit_async: data_reader::offsets_committed(), then the fetcher's commit with
  // no retry deadline (one attempt); its callback runs from a later poll().
  offsets_committed(m, offsets);
  send_commit(
      m, offsets, who,
      [this, &m, who](std::optional<data::commit_error> e) {
        if (e) notef("{}: {} callback: {}", m.name, who, e->message);
      },
      now_, m.mailbox.running_seq());
  then();
}

void simulation::commit_sync(sim_member& m, data::commit_map offsets, const char* who, bool retry_later,
                             std::function<void()> then) {
  if (m.mailbox.running_superseded()) {
    // commit_client: a commit from inside a callback the core superseded fails for good.
    notef("{}: {} refused: the callback's rebalance is over", m.name, who);
    then();
    return;
  }
  // commit_sync(): retried inside until its timeout while retriable; REBALANCE_IN_PROGRESS goes back
  // to the application, which (as Java's documentation suggests) polls and commits the same
  // offsets again.
  // data_reader::offsets_committed(), before the commit goes out: auto-commit is not left below
  // what the application commits.
  offsets_committed(m, offsets);
  for (const auto& [tp, om] : offsets) {
    if (m.data) break;
    auto c = m.consumed.find(tp);
    const auto p = m.pos.find(tp);
    if (c != m.consumed.end() && p != m.pos.end() && om.offset <= p->second && c->second < om.offset)
      c->second = om.offset;
  }
  send_commit(
      m, offsets, who,
      [this, &m, offsets, retry_later, then](std::optional<data::commit_error> e) {
        if (e && e->code == make_error_code(kafka_errc::rebalance_in_progress) && retry_later) {
          m.retry_commit = offsets;
        }
        then();
      },
      now_ + milliseconds(rng_.between(2000, 10000)), m.mailbox.running_seq());
}

void simulation::close_member(sim_member& m) {
  // close(): the revoke runs on the application's thread (with its auto-commit and callback),
  // then LeaveGroup; close() waits for it up to its timeout.
  m.closing = true;
  // A static member stays in the group on close() by default (KIP-345; Java's
  // shouldSendLeaveGroupRequest); some applications ask it to leave (KIP-1092's LEAVE_GROUP).
  auto op = group::close_membership::default_operation;
  if (m.instance_id && !m.fenced_fatal && !m.restart_after_close && rng_.chance(0.3))
    op = group::close_membership::leave_group;
  if (op != group::close_membership::default_operation) notef("{}: close(LEAVE_GROUP)", m.name);
  const auto left_before = m.left_count;
  m.core->close(now_, op);
  process(m);
  close_wait(m, left_before, now_ + milliseconds(30000));
}

void simulation::close_wait(sim_member& m, std::uint64_t left_before, time_point deadline) {
  run_events(m, [this, &m, left_before, deadline] {
    const bool left = m.left_count > left_before;
    if (left || now_ >= deadline) {
      notef("{} closed{}", m.name, left ? "" : " (timed out)");
      m.alive = false;
      // A process that exits on FENCED_INSTANCE_ID is started again by its orchestrator, unless
      // the process that took its instance id over is still running.
      // KIP-848: a process refused with UNRELEASED_INSTANCE_ID because its instance id is still
      // held by an older incarnation that is only paused (presumed dead) is started again too,
      // until that one's session times out (or it wakes).
      if (m.fenced_fatal && (consumer() ? !slot_running(m.slot, &m) : !slot_alive(m.slot, &m)))
        restart_slot(m.slot, now_ + milliseconds(rng_.between(500, 3000)), "after it was fenced");
      else if (m.restart_after_close && !slot_alive(m.slot, &m))
        restart_slot(m.slot, now_ + milliseconds(rng_.between(50, 3000)), "a rolling bounce");
      return;
    }
    at_member(m, now_ + milliseconds(10),
              [this, &m, left_before, deadline] { close_wait(m, left_before, deadline); });
  });
}

void simulation::unsubscribe_member(sim_member& m) {
  notef("{}: the application calls unsubscribe()", m.name);
  m.unsubscribing = true;
  // The mutant puts back issue 13's item 3 (fixed in 01fea93): unsubscribe() left the subscription
  // before the leave, so the auto-commit before the revoke and the callback's commits went out as
  // nobody's (G7). The facade's order is mirrored here, not run.
  if (mutant_enabled("unsubscribe_stranger_commit")) m.subscribed = false;
  const auto left_before = m.left_count;
  if (m.core->unsubscribed()) {
    // driver_base::unsubscribe(): nothing to leave; the waiting user thread is still told.
    ++m.left_count;
    m.shared.push(detail::left_event{});
  } else {
    m.core->unsubscribe(now_);
    process(m);
  }
  // It waits up to default.api.timeout.ms, running the listener calls meanwhile.
  unsubscribe_wait(m, left_before, now_ + milliseconds(60000));
}

void simulation::unsubscribe_wait(sim_member& m, std::uint64_t left_before, time_point deadline) {
  run_events(m, [this, &m, left_before, deadline] {
    const bool left = m.left_count > left_before;
    if (!left && now_ < deadline) {
      at_member(m, now_ + milliseconds(10),
                [this, &m, left_before, deadline] { unsubscribe_wait(m, left_before, deadline); });
      return;
    }
    // Consumer::impl::unsubscribe(): out of the subscription once the leave is done.
    m.subscribed = false;
    m.unsubscribing = false;
    m.unsubscribed = true;
    m.clock_from = now_;
    // subscribe() again a while later; before the quiet phase at the latest, so that every
    // member that has not closed is in the group the faults leave behind.
    auto when = now_ + milliseconds(unsub_rng_.between(0, 5000));
    if (fault_phase()) when = std::min(when, quiet_at_);
    if (!fault_phase()) when = now_;
    notef("{}: unsubscribe() returns{}; subscribe() at {:.0f} ms", m.name, left ? "" : " (timed out)",
          ms(when));
    at_member(m, when, [this, &m] { resubscribe(m); });
  });
}

void simulation::resubscribe(sim_member& m) {
  m.unsubscribed = false;
  if (m.close_requested) {
    notef("{}: the application calls close() (unsubscribed)", m.name);
    close_member(m);
    return;
  }
  notef("{}: the application calls subscribe() again", m.name);
  m.subscribed = true;  // check_can_subscribe()
  std::vector<std::string> topics;
  for (const auto& [t, n] : topics_) topics.push_back(t);
  m.clock_from = now_;
  m.core->subscribe(now_, topics);
  process(m);
  at_member(m, now_ + milliseconds(rng_.between(0, 5)), [this, &m] { poll_start(m); });
}

// ---- checks ---------------------------------------------------------------------------------------------

void simulation::check_poll_timeout(sim_member& m) {
  if (!m.core->poll_timed_out()) {
    m.timeout_checked = false;
    return;
  }
  if (m.timeout_checked) return;
  m.timeout_checked = true;
  const bool counting = !m.in_poll || m.in_callback;
  if (!counting || now_ - m.clock_from < m.max_poll_interval)
    fail("G5 (max.poll.interval.ms counts only time outside poll() or inside a callback)",
         fmt::format(
             "{} left the group for max.poll.interval.ms ({} ms): its application is {} since {:.0f} ms",
             m.name, m.max_poll_interval.count(),
             m.in_callback ? "in a listener callback"
             : m.in_poll   ? "waiting inside poll()"
                           : "working outside poll()",
             ms(m.clock_from)));
}

void simulation::check_data_step() {
  // What check_step() would find after such an event: every core's refusals, and G1, read only
  // what it did not change (so they pass as they did after the last event that changed them); the
  // member's fetch_positions may have refused a transition.
  for (const auto& m : members_) {
    if (m->alive && m->data && m->data->fp.invalid_transitions() != 0)
      fail("5 (no invalid transition)", m->name + ": fetch_positions refused: " + m->data->refused);
  }
}

void simulation::check_step() {
  for (const auto& m : members_) {
    if (m->alive && m->core->invalid_transitions() != 0)
      fail("G4 (no fatal error, no refused transition)", m->name + " made a transition its table refuses");
    if (m->alive && m->data && m->data->fp.invalid_transitions() != 0)
      fail("5 (no invalid transition)", m->name + ": fetch_positions refused: " + m->data->refused);
  }
  if (consumer()) {
    cg_check_step();
    return;
  }
  // G1 below reads only the cores and which members are alive: when no core was called and no
  // member died or started since it last ran (and passed), its verdict is the same.
  bool unchanged = g1_inputs_.size() == members_.size();
  g1_inputs_.resize(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const std::pair<std::uint64_t, bool> in{members_[i]->core->calls(), members_[i]->alive};
    if (g1_inputs_[i] != in) {
      g1_inputs_[i] = in;
      unchanged = false;
    }
  }
  if (unchanged) return;
  // G1: members stable in one generation own disjoint partitions. Two incarnations of one static
  // member's process (the same group.instance.id) may both think they own a partition in one
  // generation: the coordinator knows the instance id by one member id only and fences the other
  // (G2: its commits are refused; it reports FENCED_INSTANCE_ID when it next asks).
  // First without a copy or a map: when no two stable members of one generation own a partition
  // in common, the check below has nothing to find; else it runs and tells (or excuses) them.
  stable_.clear();
  for (const auto& m : members_) {
    if (m->alive && m->core->stable()) stable_.emplace_back(m->core->generation(), &m->core->owned_ref());
  }
  bool overlap = false;
  for (std::size_t i = 0; i < stable_.size() && !overlap; ++i) {
    for (std::size_t j = i + 1; j < stable_.size() && !overlap; ++j)
      overlap = stable_[i].first == stable_[j].first && intersect(*stable_[i].second, *stable_[j].second);
  }
  if (!overlap) return;
  std::map<std::int32_t, std::map<TopicPartition, const sim_member*>> owners;
  for (const auto& m : members_) {
    if (!m->alive || !m->core->stable()) continue;
    auto& gen = owners[m->core->generation()];
    for (const auto& tp : m->core->owned()) {
      auto [it, inserted] = gen.emplace(tp, m.get());
      if (!inserted && m->instance_id && it->second->slot == m->slot) continue;
      if (!inserted)
        fail("G1 (one owner per partition and generation)",
             fmt::format("{} and {} both own {} in generation {}", it->second->name, m->name, name(tp),
                         m->core->generation()));
    }
  }
}

bool simulation::held_back_for_good(const TopicPartition& tp) const {
  // A cooperative generation that assigns `tp` to nobody waits for the member that revokes it to
  // join again. When a new process took that member's group.instance.id over while the group was
  // Stable (no rebalance: KIP-345), the new incarnation never owned `tp`, revokes nothing and does
  // not rejoin: the partition stays unassigned until something else rebalances the group (the
  // same with Java's client; the coordinator's behaviour, not the member's).
  if (consumer() || base_.protocol != RebalanceProtocol::cooperative || g_.state != gstate::stable ||
      !replaced_in_stable_.count(g_.generation))
    return false;
  for (const auto& [key, parts] : assigned_)
    if (key.second == g_.generation && parts.count(tp)) return false;
  return true;
}

void simulation::check_end() {
  std::vector<sim_member*> alive;
  for (auto& m : members_)
    if (m->alive) alive.push_back(m.get());
  const auto where = fmt::format("{:.0f} ms after the last fault", ms(now_) - ms(quiet_at_));
  if (alive.empty()) fail("G6 (convergence)", "no member is left");
  if (consumer()) {
    cg_check_end(where);
  } else if (g_.state != gstate::stable) {
    fail("G6 (convergence)", fmt::format("{}: the group is {}", where, to_string(g_.state)));
  }
  // One generation (or group epoch), every member stable in it.
  const auto group_generation = consumer() ? cg_.epoch : g_.generation;
  std::map<TopicPartition, std::string> owner;
  for (auto* m : alive) {
    if (!m->core->stable() || m->core->generation() != group_generation)
      fail("G6 (convergence)",
           fmt::format("{}: {} is {} in {} {}, the group's is {}", where, m->name, m->core->state_name(),
                       consumer() ? "epoch" : "generation", m->core->generation(), group_generation));
    for (const auto& tp : m->core->owned()) {
      if (owner.count(tp))
        fail("G6 (convergence)",
             fmt::format("{}: {} and {} both own {}", where, owner[tp], m->name, name(tp)));
      owner[tp] = m->name;
    }
  }
  for (const auto& [tp, end] : log_end_) {
    if (!owner.count(tp) && held_back_for_good(tp)) {
      notef(
          "{}: nobody owns {}: the generation holds it back for a cooperative hand-over whose revoking "
          "static member was replaced without a rebalance (Kafka's protocol has no rebalance for it)",
          where, name(tp));
      continue;
    }
    if (!owner.count(tp)) fail("G6 (convergence)", fmt::format("{}: nobody owns {}", where, name(tp)));
    // (Records an application skipped by its own seek forward count as given.)
    if (const auto gap = data_first_gap(tp, end); gap != end)
      fail("G6 (no offset skipped)",
           fmt::format("{}: offset {} of {} (end {}) was never given to an application", where, gap, name(tp),
                       end));
    const auto c = committed_.find(tp);
    if (c == committed_.end() || c->second != end)
      fail("G6 (convergence)", fmt::format("{}: {} is committed at {}, its log ends at {} (owner {})", where,
                                           name(tp), c == committed_.end() ? -1 : c->second, end, owner[tp]));
  }
}

run_result simulation::run() {
  run_result out;
  bool ended = false;
  try {
    setup();
    at(now_ + milliseconds(rng_.between(0, 50)), [this] { produce(); });
    at(now_ + milliseconds(rng_.between(1000, 5000)), [this] { fault(); });
    at(now_ + milliseconds(100), [this] { coordinator_tick(); });
    if (real_data_) at(now_ + milliseconds(rng_.between(300, 3000)), [this] { data_fault(); });
    if (unclean_) at(now_ + milliseconds(unclean_rng_.between(500, 4000)), [this] { data_unclean(); });
    if (retention_) at(now_ + milliseconds(retention_rng_.between(1000, 8000)), [this] { data_retention(); });
    // The quiet phase starts with every member working: one more if none is left.
    at(quiet_at_, [this] {
      note("quiet: no more faults");
      // (A process whose slot started again after it is no member: its instance id went to the
      // newer one, and it is fenced when it next asks.)
      if (live(members_) == 0 || std::none_of(members_.begin(), members_.end(), [this](const auto& m) {
            return m->alive && !m->closing && !m->close_requested && !m->fenced_fatal && !superseded(*m);
          }))
        add_member();
    });
    at(end_at_, [this, &ended] {
      check_end();
      ended = true;
    });
    while (!ended && !queue_.empty()) {
      idle_ = false;
      data_only_ = false;
      auto e = queue_.next();
      run_event(e);
      if (idle_) continue;
      if (data_only_)
        check_data_step();
      else
        check_step();
    }
  } catch (const violation& v) {
    out.ok = false;
    out.invariant = v.invariant;
    out.message = v.message;
  }
  if (!out.ok) {
    for (const auto& t : trace_) out.trace += fmt::format("{:10.3f} ms  {}\n", ms(t.at), t.what);
  }
  // Member-seconds: every member simulated counts.
  out.simulated_seconds =
      std::chrono::duration<double>(now_ - start_).count() * static_cast<double>(live(members_));
  return out;
}

}  // namespace kgroup::sim::group_sim

namespace kgroup::sim {

run_result run_group_seed(std::uint64_t seed, bool verbose, bool consumer_protocol) {
  const auto protocol =
      consumer_protocol ? group_sim::group_protocol::consumer : group_sim::group_protocol::classic;
  auto r = std::make_unique<group_sim::simulation>(seed, verbose, protocol, false)->run();
  if (r.ok || verbose) return r;
  // A failed seed without its trace (a passing one formats none): it runs again, with the trace.
  return replay_traced(r, std::make_unique<group_sim::simulation>(seed, false, protocol, true)->run());
}

}  // namespace kgroup::sim
