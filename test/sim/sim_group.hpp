// The group simulation (kgroup-sim --group): what its two sources share. sim_group.cpp runs the
// world, the members (their background threads mirror the membership drivers; their applications
// are seeded actors), the classic coordinator and the checks; sim_group_consumer.cpp is the KIP-848
// coordinator. Each member runs one real membership core, the classic one (group::member) or the
// KIP-848 one (group::kip848::consumer_member), behind member_core: everything but a core's own
// requests, answers and states is written once for both.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "consumer/data_reader.hpp"
#include "consumer/listener_mailbox.hpp"
#include "data/cluster_metadata.hpp"
#include "data/committer.hpp"
#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/position_requests.hpp"
#include "group/consumer_member.hpp"
#include "group/member.hpp"
#include "kgroup/assignor.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"
#include "runtime/shared_state.hpp"
#include "sim_fetcher.hpp"
#include "sim_kernel.hpp"
#include "sim_log.hpp"
#include "sim_world.hpp"

namespace kgroup::sim::group_sim {

using group::time_point;
using std::chrono::milliseconds;
using partition_set = std::set<TopicPartition>;
using join_req = protocol::join_group_request;
using join_resp = protocol::join_group_response;

inline std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}
inline std::string name(const TopicPartition& tp) {
  return tp.topic + "-" + std::to_string(tp.partition);
}
// TopicPartition's order (the topic's bytes as unsigned, a prefix first, then the partition),
// inline: the checks after every step compare short topic names many times.
inline int compare(const TopicPartition& a, const TopicPartition& b) {
  const std::size_t n = std::min(a.topic.size(), b.topic.size());
  for (std::size_t k = 0; k < n; ++k) {
    const auto x = static_cast<unsigned char>(a.topic[k]);
    const auto y = static_cast<unsigned char>(b.topic[k]);
    if (x != y) return x < y ? -1 : 1;
  }
  if (a.topic.size() != b.topic.size()) return a.topic.size() < b.topic.size() ? -1 : 1;
  return a.partition == b.partition ? 0 : a.partition < b.partition ? -1 : 1;
}
// Whether two sets have an element in common (without building their intersection).
inline bool intersect(const partition_set& a, const partition_set& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    const int c = compare(*i, *j);
    if (c == 0) return true;
    if (c < 0)
      ++i;
    else
      ++j;
  }
  return false;
}
// Whether every element of `a` is in `b` or in `c`.
inline bool within(const partition_set& a, const partition_set& b, const partition_set& c) {
  auto j = b.begin();
  auto k = c.begin();
  for (const auto& x : a) {
    while (j != b.end() && compare(*j, x) < 0) ++j;
    while (k != c.end() && compare(*k, x) < 0) ++k;
    if ((j == b.end() || compare(*j, x) != 0) && (k == c.end() || compare(*k, x) != 0)) return false;
  }
  return true;
}
template <class Parts>
std::string names(const Parts& parts) {
  std::string out;
  for (const auto& tp : parts) out += (out.empty() ? "" : ", ") + name(tp);
  return out;
}

// ---- the classic coordinator ----------------------------------------------------------------------------

enum class gstate { empty, preparing, completing, stable };
inline const char* to_string(gstate s) {
  switch (s) {
    case gstate::empty:
      return "Empty";
    case gstate::preparing:
      return "PreparingRebalance";
    case gstate::completing:
      return "CompletingRebalance";
    case gstate::stable:
      return "Stable";
  }
  return "?";
}

struct coord_member {
  std::string id;
  int sim = -1;                            // which simulated member sent it (for the checks)
  std::optional<std::string> instance_id;  // group.instance.id of a static member (KIP-345)
  std::vector<join_req::join_group_request_protocol> protocols;
  milliseconds session{};
  milliseconds rebalance{};
  time_point last_seen{};
  std::function<void(join_resp)> pending_join;
  std::function<void(protocol::sync_group_response)> pending_sync;
  bool awaiting_sync = false;  // joined this generation, no SyncGroup yet
  protocol::bytes assignment;
};

struct group_state {
  gstate state = gstate::empty;
  std::int32_t generation = 0;
  std::string leader;
  std::string protocol;
  std::map<std::string, coord_member> members;
  // KIP-345: each static member's group.instance.id and the member id it is known by now. A
  // JoinGroup with the instance id and no member id replaces that member id (whose requests are
  // answered FENCED_INSTANCE_ID from then on).
  std::map<std::string, std::string> statics;
};

// ---- the KIP-848 coordinator (sim_group_consumer.cpp) -----------------------------------------------

namespace kip848 = group::kip848;
using cg_request = protocol::consumer_group_heartbeat_request;
using cg_response = protocol::consumer_group_heartbeat_response;

// A member's place in its reconciliation, as Kafka's CurrentAssignmentBuilder names them.
enum class cg_state {
  stable,      // holds its target (at the target's epoch)
  revoking,    // UNREVOKED_PARTITIONS: keeps its epoch until a heartbeat shows the revoked ones gone
  unreleased,  // UNRELEASED_PARTITIONS: at the target's epoch, waiting for partitions others still hold
};
const char* to_string(cg_state s);

struct cg_member {
  std::string id;
  int sim = -1;                            // which simulated member it is (for the checks)
  std::optional<std::string> instance_id;  // group.instance.id of a static member
  std::int32_t epoch = 0;
  std::int32_t previous_epoch = 0;
  std::int32_t target_epoch = 0;  // the target assignment epoch it reconciles toward
  cg_state state = cg_state::stable;
  partition_set assigned;  // what it may own now (the heartbeat answer's assignment)
  partition_set revoking;  // what it must give up and still holds (no one else gets it meanwhile)
  std::vector<std::string> topics;
  milliseconds rebalance{};
  time_point last_seen{};
  std::optional<time_point> revoke_deadline;  // the rebalance timeout for the revocation under way
};

struct consumer_group {
  std::int32_t epoch = 0;             // the group epoch
  std::int32_t assignment_epoch = 0;  // the epoch of the target assignment
  std::map<std::string, partition_set> target;
  std::map<std::string, cg_member> members;
  // Static members: each group.instance.id and the member id that has it now. A member that left
  // with epoch -2 keeps its instance id (and its assignment) until its session times out or a join
  // with the instance id replaces it.
  std::map<std::string, std::string> statics;
};

class simulation;
struct sim_member;

// ---- one member's membership core, whichever protocol ---------------------------------------------

// What the simulation asks of a membership core; core_box<Core> forwards to the real one.
class member_core {
 public:
  virtual ~member_core() = default;
  virtual void subscribe(time_point now, std::vector<std::string> topics) = 0;
  virtual void unsubscribe(time_point now) = 0;
  /// In the core's `unsubscribed` state (driver_base::unsubscribe() then has nothing to leave).
  virtual bool unsubscribed() const = 0;
  virtual void poll_called(time_point now) = 0;
  virtual void poll_returned(time_point now) = 0;
  virtual void listener_started(time_point now, std::uint64_t seq) = 0;
  virtual void listener_done(time_point now, std::uint64_t seq) = 0;
  virtual void commit_failed(time_point now, std::int32_t generation, std::int16_t code) = 0;
  virtual void close(time_point now, group::close_membership op) = 0;
  virtual void tick(time_point now) = 0;
  virtual void request_failed(time_point now, std::error_code ec) = 0;
  virtual void coordinator_failed(time_point now, std::error_code ec) = 0;
  virtual std::optional<time_point> next_deadline() const = 0;
  virtual std::optional<std::int32_t> coordinator() const = 0;
  virtual group::standing standing() const = 0;
  virtual partition_set owned() const = 0;
  /// owned() without a copy (for the checks after every step): the classic core's own set, or
  /// KIP-848's names of its ids, computed again only when the ids change (owned_cache below).
  virtual const partition_set& owned_ref() = 0;
  virtual const std::string& member_id() const = 0;
  /// The generation (classic) or member epoch (KIP-848).
  virtual std::int32_t generation() const = 0;
  virtual bool stable() const = 0;
  virtual bool poll_timed_out() const = 0;
  virtual std::string state_name() const = 0;
  virtual std::uint64_t invalid_transitions() const = 0;
  /// How many calls that may change the core it has had (the checks after each step skip what
  /// reads only cores that had none since).
  virtual std::uint64_t calls() const = 0;
  /// Takes the core's actions and carries each out (simulation::apply); false when it had none.
  virtual bool apply_actions(simulation& sim, sim_member& m) = 0;
};

// KIP-848's core keeps its partitions by topic id and names them on each owned() call. Its names
// are only ever added (a name learnt is never replaced or forgotten), so the names of one set of
// ids stay what they were once every id had one: owned_ref() keeps them while the ids stay the
// same, and names again when one had none (a placeholder) or the ids changed.
template <class Core>
struct owned_cache {};
template <>
struct owned_cache<kip848::consumer_member> {
  group::id_assignment ids;
  partition_set names;
  bool valid = false;
};

template <class Core>
class core_box final : public member_core {
 public:
  template <class Options>
  explicit core_box(Options opts) : core(std::move(opts)) {}
  Core core;

  // Every call that may change the core marks it touched (owned_ref() below).
  void subscribe(time_point now, std::vector<std::string> topics) override {
    touch();
    core.subscribe(now, std::move(topics));
  }
  void unsubscribe(time_point now) override {
    touch();
    core.unsubscribe(now);
  }
  bool unsubscribed() const override { return core.state() == decltype(core.state())::unsubscribed; }
  void poll_called(time_point now) override {
    touch();
    core.poll_called(now);
  }
  void poll_returned(time_point now) override {
    touch();
    core.poll_returned(now);
  }
  void listener_started(time_point now, std::uint64_t seq) override {
    touch();
    core.listener_started(now, seq);
  }
  void listener_done(time_point now, std::uint64_t seq) override {
    touch();
    core.listener_done(now, seq);
  }
  void commit_failed(time_point now, std::int32_t generation, std::int16_t code) override {
    touch();
    core.commit_failed(now, generation, code);
  }
  void close(time_point now, group::close_membership op) override {
    touch();
    core.close(now, op);
  }
  void tick(time_point now) override {
    touch();
    core.tick(now);
  }
  void request_failed(time_point now, std::error_code ec) override {
    touch();
    core.request_failed(now, ec);
  }
  void coordinator_failed(time_point now, std::error_code ec) override {
    touch();
    core.coordinator_failed(now, ec);
  }
  std::optional<time_point> next_deadline() const override { return core.next_deadline(); }
  std::optional<std::int32_t> coordinator() const override { return core.coordinator(); }
  group::standing standing() const override { return core.standing(); }
  partition_set owned() const override { return core.owned(); }
  const partition_set& owned_ref() override {
    if constexpr (std::is_reference_v<decltype(core.owned())>) {
      return core.owned();
    } else {
      // (An untouched core's ids are the ones compared last time: no need to compare again.)
      if (touched_ && (!cache_.valid || cache_.ids != core.owned_ids())) {
        cache_.ids = core.owned_ids();
        cache_.names = core.owned();
        cache_.valid = std::none_of(cache_.names.begin(), cache_.names.end(), [](const TopicPartition& tp) {
          return tp.topic.starts_with("<topic id ");
        });
      }
      touched_ = !cache_.valid;  // names with a placeholder: named again next time
      return cache_.names;
    }
  }
  const std::string& member_id() const override { return core.member_id(); }
  std::int32_t generation() const override { return core.generation(); }
  bool stable() const override { return core.state() == decltype(core.state())::stable; }
  bool poll_timed_out() const override { return core.state() == decltype(core.state())::poll_timed_out; }
  std::string state_name() const override { return to_string(core.state()); }
  std::uint64_t invalid_transitions() const override { return core.invalid_transitions(); }
  bool apply_actions(simulation& sim, sim_member& m) override;
  /// The core is about to be called directly (core_of()), or through the calls above.
  void touch() {
    touched_ = true;
    ++calls_;
  }
  std::uint64_t calls() const override { return calls_; }

 private:
  owned_cache<Core> cache_;
  bool touched_ = true;      // called since owned_ref() last compared its ids
  std::uint64_t calls_ = 0;  // calls that may have changed it (touch())
};

// The real core of member `m`, known to run `Core`.
template <class Core>
Core& core_of(sim_member& m);

// ---- one member's real data path (--real-data; sim_group_data.cpp) ----------------------------------

// The fetcher's cores on the member's background thread and the data reader on its application's,
// as sim_world.cpp runs them for one member: the reader's calls (fetcher_calls) are posted to the
// background thread in order, the fetcher's answers reach the reader through the member's
// shared_state (the one its listener mailbox uses too, as in the Consumer).
struct member_data final : fetcher_calls {
  member_data(simulation& s, sim_member& owner);
  void post(std::string what, std::function<void()> f) override;
  void pump() override;
  /// The fetcher's side of the reader's calls, assign() and the delivery of Fetch answers.
  fetch::position_calls& calls() { return calls_; }

  simulation& sim;
  sim_member& m;
  std::string refused;  // fetch_positions' last refused transition
  data::fetch_positions fp;
  data::fetch_planner planner{fp, data::fetch_planner_options{}};
  data::position_requests requests{fp, planner, "sim", 0};
  detail::fetch_chains chains;  // fetcher.cpp's: the application's restarts received
  detail::poll_stats stats;
  detail::data_reader reader;
  time_point last_post{};     // calls posted to the background thread run in order
  data::cluster_metadata md;  // the fetcher's metadata (refreshed from the simulation's)
  bool refresh_in_flight = false;
  time_point last_refresh{};
  bool retry_armed = false;
  // The checker's view: each owned partition's next offset for the application (from the position
  // events the reader applied and the records it returned).
  std::map<TopicPartition, std::int64_t> expected;
  partition_set paused;  // the application's pause()s (forgotten with the partition)
  // The highest position the application reached per owned partition (a commit may carry one
  // from before a seek back: the application did process those records).
  std::map<TopicPartition, std::int64_t> reached;
  // Invariant 3: the diverged cuts its fetcher pushed and the last one its reader applied.
  divergences div;
  // The leader epoch of each record the application was given, per partition and offset (its
  // seeks carry the epoch of the record before the target, as Java's seek(OffsetAndMetadata)).
  std::map<TopicPartition, offset_epochs> returned_epochs;
  std::map<TopicPartition, detail::epoch_offset> last_pos;  // the reader's last position (m.pos's)
  // The application's seek_to_end() calls not resolved yet: the position each was called at (the
  // records from there to the resolved end are skipped on purpose once it resolves).
  std::map<TopicPartition, std::int64_t> to_end;
};

// ---- one member ---------------------------------------------------------------------------------

struct sim_member {
  int index = 0;
  std::string name;
  // The process slot: a restart of a crashed (or presumed dead) process is a new sim_member of
  // the same slot, with the same group.instance.id when the slot has one (static membership).
  int slot = 0;
  std::optional<std::string> instance_id;
  bool fenced_answer = false;        // the coordinator answered one of its requests FENCED_INSTANCE_ID
  bool fenced_fatal = false;         // its core reported that as fatal: the application closes it
  bool restart_after_close = false;  // a rolling bounce: the process starts again once it closed
  bool alive = true;
  bool closing = false;
  bool close_requested = false;  // the application calls close() after its current work
  std::uint64_t left_count = 0;  // left_group actions (shared_state::left_count)
  time_point frozen_until{};
  std::unique_ptr<member_core> core;
  detail::shared_state shared;
  detail::listener_mailbox mailbox{shared};
  // The background thread.
  std::uint64_t request_epoch = 0;  // abandon_requests()
  std::uint64_t timer_seq = 0;
  std::optional<time_point> timer_at;
  partition_set bg_owned;
  std::map<TopicPartition, std::uint64_t> bg_own_seq;  // bumped when a partition is assigned again
  std::map<TopicPartition, std::int64_t> fetched_pos;  // OffsetFetch answers not yet taken by the app
  data::auto_committer auto_committer;
  time_point last_send{};  // the coordinator connection is FIFO
  time_point last_answer{};
  // The application (user thread).
  // The facade's commit identity (fetch::commit_identity's mode): subscribed from subscribe()
  // until unsubscribe() returns; outside, commits go out as nobody's (generation -1, no member id).
  bool subscribed = true;
  bool unsubscribing = false;  // inside unsubscribe()
  bool unsubscribed = false;   // unsubscribe() returned; subscribe() comes later
  bool auto_commit = false;
  bool sync_commits = false;
  bool commit_in_revoke = false;
  milliseconds max_poll_interval{};
  partition_set app_owned;
  std::map<TopicPartition, std::int64_t> pos;
  std::map<TopicPartition, std::int64_t> consumed;  // published at the start of each poll()
  std::optional<data::commit_map> retry_commit;     // explicit offsets to commit again after a poll()
  bool in_poll = false;
  bool in_callback = false;
  time_point clock_from{};  // when the application's max.poll.interval.ms clock last restarted
  time_point poll_deadline{};
  std::uint64_t polls = 0;
  bool timeout_checked = false;  // G5 looked at the current poll timeout
  // With --real-data: the real data path (else the model above: fetched_pos, pos, consumed).
  std::unique_ptr<member_data> data;
};

enum class group_protocol { classic, consumer };

class simulation {
 public:
  // An event: of a member (at_member), or of the world (nullptr).
  struct event {
    sim_member* member = nullptr;
    event_fn f;
  };
  // `traced`: keep the trace (always with `verbose`).
  simulation(std::uint64_t seed, bool verbose, group_protocol protocol, bool traced)
      : rng_(seed),
        static_rng_(seed ^ 0x5354415449430345ull),
        unsub_rng_(seed ^ 0x554e535542534352ull),
        unclean_rng_(seed ^ 0x554e434c45414e31ull),
        retention_rng_(seed ^ 0x524554454e54494full),
        async_rng_(seed ^ 0x4153594e43434f4dull),
        seek_rng_(seed ^ 0x5345454b464f5257ull),
        verbose_(verbose),
        traced_(verbose || traced),
        protocol_(protocol) {}
  run_result run();

  // A member's background thread carries out its core's actions (core_box::apply_actions).
  void apply(sim_member& m, group::action& a);
  void apply(sim_member& m, kip848::action& a);

 private:
  bool consumer() const { return protocol_ == group_protocol::consumer; }
  double ms(time_point t) const { return std::chrono::duration<double, std::milli>(t - start_).count(); }
  // The trace (the last events a failure prints, every event with --verbose): kept only when
  // traced_ (a failed seed runs again with it, run_group_seed()), so that a passing seed formats
  // none of its lines.
  void note(std::string what) {
    if (!traced_) return;
    if (verbose_) std::printf("%10.3f ms  %s\n", ms(now_), what.c_str());
    trace_.push_back({now_, std::move(what)});
    if (trace_.size() > 60) trace_.pop_front();
  }
  // note(fmt::format(f, args...)), formatted only when traced_ (the arguments are evaluated anyway).
  template <class... A>
  void notef(fmt::format_string<A...> f, A&&... args) {
    if (traced_) note(fmt::format(f, std::forward<A>(args)...));
  }
  [[noreturn]] void fail(const char* invariant, std::string message) {
    note("FAILED " + std::string(invariant) + ": " + message);
    throw violation{invariant, std::move(message)};
  }
  template <class F>
  void at(time_point when, F&& f) {
    queue_.at(when, event{nullptr, event_fn(std::forward<F>(f))});
  }
  // An event of member `m`: dropped once it crashed, held while its process is paused (run_event).
  template <class F>
  void at_member(sim_member& m, time_point when, F&& f) {
    queue_.at(when, event{&m, event_fn(std::forward<F>(f))});
  }
  void run_event(event& e) {
    if (e.member != nullptr) {
      sim_member& m = *e.member;
      if (!m.alive) return nothing_changed();
      if (now_ < m.frozen_until) {
        at_member(m, m.frozen_until, std::move(e.f));
        return nothing_changed();
      }
    }
    e.f();
  }
  // Said by an event that returns at once, having changed nothing the checks after each step
  // read (a dropped or held event, a timer or timeout already overtaken): their verdict is the
  // last step's, so they are not run again (run()).
  void nothing_changed() { idle_ = true; }
  // Said by an event of a member's background data path (sim_group_data.cpp: a Fetch,
  // OffsetFetch, ListOffsets or OffsetForLeaderEpoch answer, a metadata refresh, the retry timer,
  // a call the reader posted), which changes that member's fetcher, its queue for the
  // application, the world's PRNG and the event queue, and nothing else the checks after each
  // step read but its fetch_positions' refusals: only those are checked after it (check_data_step()).
  void data_only() { data_only_ = true; }
  bool fault_phase() const { return now_ < quiet_at_; }
  milliseconds latency() {
    std::int64_t d = rng_.between(1, 10);
    if (fault_phase() && rng_.chance(0.03)) d += rng_.between(50, 800);
    return milliseconds(d);
  }

  // ---- world ----
  void setup();
  void setup_classic();
  void produce();
  void fault();
  /// A new member: in a new process slot, or (`slot` >= 0) a new incarnation of that slot.
  sim_member& add_member(int slot = -1);
  void crash(sim_member& m, const char* why);
  /// A new incarnation of `slot` at `when` (a restarted process, with its group.instance.id).
  void restart_slot(int slot, time_point when, const char* why);
  bool slot_alive(int slot, const sim_member* except) const;
  /// slot_alive(), and not paused (an orchestrator presumes a paused process dead).
  bool slot_running(int slot, const sim_member* except) const;
  /// A later incarnation of `m`'s process slot has started.
  bool superseded(const sim_member& m) const;
  void static_fault(std::int64_t kind, sim_member& victim);
  /// Pauses `m`'s process (both threads) for `d`, or until the end of a pause under way if later.
  void pause(sim_member& m, milliseconds d);
  /// The trace's words for a pause within a longer one under way ("" when it sets the end).
  std::string paused_note(const sim_member& m, milliseconds d) const;

  // ---- the coordinator ----
  void coordinator_tick();
  void classic_tick();
  std::optional<std::int16_t> not_serving(std::int32_t node) const;
  void handle_join(sim_member& m, join_req r, std::function<void(join_resp)> reply);
  // KIP-345 (static members): the JoinGroup of a member with a group.instance.id, Kafka's
  // validateMember for any request that names one, and the rejoin that replaces a member id.
  void handle_static_join(sim_member& m, join_req r, std::function<void(join_resp)> reply);
  void hold_join(coord_member& cm, const join_req& r, std::function<void(join_resp)> reply);
  std::optional<std::int16_t> static_member_error(const std::optional<std::string>& instance,
                                                  const std::string& member_id) const;
  void replace_static(sim_member& m, const std::string& instance, const std::string& old_id,
                      const std::string& new_id, const join_req& r, std::function<void(join_resp)> reply);
  /// The JoinGroup answer of the current generation, without a rebalance.
  join_resp current_generation(const std::string& id, bool with_members, bool skip_assignment) const;
  std::vector<join_resp::join_group_response_member> member_list() const;
  void fenced_seen(sim_member& m, std::int16_t error_code);
  void handle_sync(sim_member& m, protocol::sync_group_request r,
                   std::function<void(protocol::sync_group_response)> reply);
  protocol::heartbeat_response handle_heartbeat(const protocol::heartbeat_request& r);
  protocol::leave_group_response handle_leave(const protocol::leave_group_request& r);
  protocol::offset_commit_response handle_commit(sim_member& m, const protocol::offset_commit_request& r);
  void prepare_rebalance(const std::string& why);
  void maybe_complete_join();
  void complete_join();
  void remove_member(const std::string& id, const std::string& why);
  void store_group() { stored_ = g_; }
  bool owns_for_commit(const std::string& member, std::int32_t generation, const TopicPartition& tp) const;
  /// The coordinator has a member that process `m` joined as.
  bool holds_process(const sim_member& m) const;
  void move_coordinator();
  /// Answers `cm`'s held JoinGroup and SyncGroup with `error` (the JoinGroup answer naming
  /// `member_id`): a coordinator move, or a static member's id replaced.
  void answer_held(coord_member& cm, kafka_errc error, const std::string& member_id);

  // ---- the KIP-848 coordinator (sim_group_consumer.cpp) ----
  void setup_consumer();
  cg_response cg_heartbeat(sim_member& m, const cg_request& r, std::int16_t version);
  cg_response cg_leave(sim_member& m, const cg_request& r);
  /// KIP-848's static-member rules for a heartbeat with an instance id (Kafka's
  /// getOrMaybeSubscribeStaticConsumerGroupMember): an error code, or 0 (a join may have replaced
  /// a member that left with epoch -2 by `id`).
  std::int16_t cg_static(sim_member& m, const cg_request& r, const std::string& id, std::string& why);
  void cg_compute_target();
  void cg_reconcile(cg_member& cm, const std::optional<partition_set>& owned);
  void cg_next_assignment(cg_member& cm);
  bool cg_held_by_other(const std::string& id, const TopicPartition& tp) const;
  void cg_remove(const std::string& id, const std::string& why);
  void cg_bump(const std::string& why);
  void cg_tick();
  void cg_moved();
  std::int16_t cg_commit_error(const protocol::offset_commit_request& r) const;
  bool cg_holds(const std::string& member, const TopicPartition& tp) const;
  partition_set from_wire(const std::vector<cg_request::topic_partitions_t>& parts) const;
  partition_set from_wire(const std::vector<cg_response::topic_partitions_t>& parts) const;
  template <class Wire>
  partition_set by_name(const std::vector<Wire>& parts) const;
  std::vector<cg_response::topic_partitions_t> to_wire(const partition_set& parts) const;
  void cg_check_step();
  void cg_check_end(const std::string& where);

  // ---- a member's background thread (mirrors net/driver_base.hpp and net/group_driver.cpp) ----
  void process(sim_member& m);
  template <class Action, class Own>
  void apply_with(sim_member& m, Action& a, Own own);
  void find_coordinator(sim_member& m, std::function<void()> found);
  void apply_shared(sim_member& m, group::run_listener& a);
  void apply_shared(sim_member& m, group::assignment_changed& a);
  void apply_shared(sim_member& m, group::report_error& a);
  void apply_shared(sim_member& m, group::cancel_listener& a);
  void apply_shared(sim_member& m, group::left_group& a);
  template <class Response, class Handle>
  void send(sim_member& m, const char* what, milliseconds timeout, Handle handle,
            std::function<void(sim_member&, const Response&)> deliver);
  void assignment_changed(sim_member& m, const partition_set& owned);
  void offset_fetch(sim_member& m, const TopicPartition& tp, std::uint64_t own_seq);
  void auto_commit_timer(sim_member& m);
  /// `first_sent`: the number of the commit's first attempt (a retry's; 0: this is the first).
  void send_commit(sim_member& m, const data::commit_map& offsets, const char* who,
                   std::function<void(std::optional<data::commit_error>)> done, time_point deadline,
                   std::uint64_t listener_seq = 0, std::uint64_t first_sent = 0);

  // ---- a member's application (mirrors consumer_poll.cpp and consumer_offsets.cpp) ----
  data::group_identity identity(const sim_member& m) const;
  void poll_start(sim_member& m);
  void run_events(sim_member& m, std::function<void()> then);
  void invoke(sim_member& m, detail::listener_call call, std::function<void()> done);
  void callback(sim_member& m, const detail::listener_call& call, std::function<void()> done);
  void ownership_changed(sim_member& m, const detail::listener_call& call);
  /// The leader epoch of `m`'s position `offset` of `tp` (the real reader's, or that of the record
  /// before it; -1 without --real-data), which commits of the position carry (KIP-320: the next
  /// owner validates it).
  std::int32_t position_epoch(sim_member& m, const TopicPartition& tp, std::int64_t offset) const;
  /// The part of poll() that takes records, or waits for them: true when poll() returned.
  bool poll_body(sim_member& m);
  void poll_return(sim_member& m);
  void after_work(sim_member& m);
  void commit_sync(sim_member& m, data::commit_map offsets, const char* who, bool retry_later,
                   std::function<void()> then);
  /// data_reader::offsets_committed() of what the application commits (real data path only), as
  /// both commit calls of the facade make it before the commit goes out.
  void offsets_committed(sim_member& m, const data::commit_map& offsets);
  /// commit_async(offsets): the same bookkeeping as commit_sync(), one attempt, and the
  /// application goes on at once; the answer (a callback from a later poll()) is only noted.
  void commit_async(sim_member& m, data::commit_map offsets, const char* who, std::function<void()> then);
  void close_member(sim_member& m);
  // unsubscribe() (Consumer::impl::unsubscribe: the revoke, or the loss of a membership that is
  // gone, runs inside it, then the leave; the facade stays subscribed until it is done), and
  // subscribe() again a while later.
  void unsubscribe_member(sim_member& m);
  void unsubscribe_wait(sim_member& m, std::uint64_t left_before, time_point deadline);
  void resubscribe(sim_member& m);
  void close_wait(sim_member& m, std::uint64_t left_before, time_point deadline);

  // ---- a member's real data path (--real-data; sim_group_data.cpp) ----
  friend struct member_data;
  void data_setup();
  void data_produce(const TopicPartition& tp, std::int64_t n);
  void data_post(sim_member& m, std::string what, std::function<void()> f);
  void data_assign(sim_member& m, const partition_set& owned);
  void data_pump(sim_member& m);
  void data_retry_at(sim_member& m, time_point t);
  void data_offset_fetch(sim_member& m);
  void data_list_offsets(sim_member& m);
  void data_validations(sim_member& m);
  // What position_requests' *_wanted() asks of the driver besides the requests.
  void data_wants(sim_member& m, const data::position_wants& wants);
  void data_fetches(sim_member& m);
  void data_deliver(sim_member& m, std::int32_t node, std::shared_ptr<const data::fetch_set> sent);
  /// fetcher::on_fetch_response: the answer (or, with `ec`, none) to a Fetch of `sent`.
  void data_answer(sim_member& m, std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                   std::shared_ptr<const protocol::bytes> frame, const data::fetch_set& sent);
  /// maybe_refresh_metadata (at most one in flight, 5 x retry.backoff apart).
  void data_refresh(sim_member& m);
  /// A clean leader change of a partition (the fault phase of --real-data).
  void data_fault();
  /// An unclean election of a partition (the fault phase of --real-data, in half of the seeds).
  void data_unclean();
  /// Retention of a partition (the fault phase of --real-data, in a third of the seeds).
  void data_retention();
  /// The members' metadata source learns `tp`'s leader and leader epoch from its log.
  void data_new_leader(const TopicPartition& tp, const partition_log& l);
  /// Whether a position at `offset` whose last record had leader epoch `epoch` lies in a branch
  /// of `tp` an unclean election truncated (past the log's end, or past where `epoch` now ends),
  /// or below the log's start: the fetcher does not read from it as it is.
  bool data_diverged(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) const;
  /// run_events(): a position event or data error for the data reader.
  void data_event(sim_member& m, detail::user_event& e);
  /// poll()'s drain: true when it returned records.
  bool data_poll(sim_member& m);
  /// data_record()'s look-ups of one partition, kept while records of it follow one another in a
  /// poll()'s batch (nothing they read changes between its records; only what they point to is
  /// written, and only once the record's checks passed).
  struct record_lookup {
    bool valid = false;
    TopicPartition tp;
    bool owned = false;                                         // m.app_owned has it
    bool paused = false;                                        // its application paused it
    std::map<TopicPartition, std::int64_t>::iterator expected;  // end(): none
    offset_epochs* returned_epochs = nullptr;                   // looked up once needed
    std::vector<bool>* processed = nullptr;                     // looked up once needed
  };
  void data_record(sim_member& m, const ConsumerRecord& r, record_lookup& look);
  /// The application's positions (m.pos, which the commits and G3 read) from the reader's.
  void data_sync_pos(sim_member& m);
  /// The application's data calls between polls: seek back, seek_to_beginning(), pause(), resume()
  /// (every partition resumed once the faults stop), seek forward and seek_to_end() in the seeds
  /// that have them (data_seek_forward()), commit_sync() of an explicit offset (then
  /// `next` runs once it returns, and this returns true).
  bool data_app_action(sim_member& m, const std::function<void()>& next);
  /// The seeds with seeks forward: seek() of `tp` past the application's position (within the log,
  /// or past its end), or seek_to_end(); every draw from seek_rng_.
  void data_seek_forward(sim_member& m, const TopicPartition& tp);
  /// The first offset below `upto` of `tp` no application was given, nor skipped by its own seek
  /// forward (G6, G9); `upto` when there is none.
  std::int64_t data_first_gap(const TopicPartition& tp, std::int64_t upto) const;
  /// G3 with seeks: whether a commit of `tp` at `offset` from `m` (first sent at commit_first_sent_),
  /// below the committed offset, goes back to where its application seeked since.
  bool data_commit_back_sanctioned(const sim_member& m, const TopicPartition& tp, std::int64_t offset);

  // ---- checks ----
  void check_step();
  /// check_step() after an event that was data_only(): the checks its changes can fail.
  void check_data_step();
  /// Whether cg_check_step() may find something (a quick look, without copies; false: it would not).
  bool cg_check_step_suspect();
  void check_poll_timeout(sim_member& m);
  void check_end();
  bool held_back_for_good(const TopicPartition& tp) const;

  prng rng_;
  // Whether (and which) members are static: drawn from a stream of its own, so that the seeds
  // without static members keep the schedule they had before static membership was simulated.
  prng static_rng_;
  enum class statics { none, all, some } static_mode_ = statics::none;
  // Whether applications unsubscribe() (and subscribe() again), and when: a stream of its own too,
  // so the seeds without it keep their schedules.
  prng unsub_rng_;
  bool unsubscribes_ = false;
  // --real-data: unclean elections in half of the seeds, drawn from a stream of their own (as the
  // committed offsets' leader epochs the coordinator answers, and the epochs of the applications'
  // seeks and explicit commits, which only these seeds carry), so the other seeds keep their
  // schedules.
  prng unclean_rng_;
  bool unclean_ = false;
  truncated_records truncated_;  // invariant 3: when each record was truncated
  // --real-data: retention in a third of the seeds, from a stream of its own too.
  prng retention_rng_;
  bool retention_ = false;
  // --real-data: commit_async() in half of the seeds (a stream of its own too): some of the
  // applications' commits of their positions go out without waiting for the answer.
  prng async_rng_;
  bool async_commits_ = false;
  // --real-data: the applications' seeks forward (seek() past their positions, within the log or
  // past its end) and seek_to_end() in half of the seeds (a stream of its own too); in the seeds
  // with unclean elections only seek_to_end().
  prng seek_rng_;
  bool seeks_forward_ = false;
  // Per partition, the offsets [from, to) an application skipped by its own seek() forward (from
  // its position to the target, once the reader applied it): nobody is owed them (G6, G9), whether
  // in the log then or appended later (there is no truncation in the seeds that seek forward).
  std::map<TopicPartition, std::vector<std::pair<std::int64_t, std::int64_t>>> seek_skips_;
  // Per partition, the targets of seeks forward past the log's end: a member may start at one
  // (a committed offset) although the log ends below it (its fetcher then finds the log's end).
  std::map<TopicPartition, std::set<std::int64_t>> past_end_targets_;
  std::map<int, int> incarnations_;  // per slot, the incarnations started so far
  bool verbose_;
  bool traced_;
  group_protocol protocol_;
  time_point start_{std::chrono::seconds(1000)};
  time_point now_ = start_;
  time_point quiet_at_, produce_until_, end_at_;
  event_queue<event> queue_{now_};
  std::deque<trace_line> trace_;  // the last 60 events
  bool idle_ = false;             // the current event changed nothing (nothing_changed())
  bool data_only_ = false;        // it changed only a member's data path (data_only())
  // What check_step()'s classic G1 read when it last ran: each member's core's calls() and
  // whether it was alive.
  std::vector<std::pair<std::uint64_t, bool>> g1_inputs_;
  std::uint64_t cg_changes_ = 0;  // calls of the cg_ functions that may change the coordinator
  // cg_check_step_suspect()'s looks that found nothing: the coordinator's cg_changes_ at the
  // last one of its first half, and each member's core calls() and cg_changes_ at its last one.
  std::uint64_t cg_pairs_looked_ = ~std::uint64_t{0};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> cg_member_looked_;
  std::vector<std::pair<std::int32_t, const partition_set*>> stable_;  // check_step()'s, reused

  // World.
  std::int32_t brokers_ = 3;
  std::map<std::string, std::int32_t> topics_;  // name -> partitions
  std::map<TopicPartition, std::int64_t> log_end_;
  std::map<TopicPartition, std::vector<bool>> processed_;  // offsets some application was given
  // --real-data: the partitions' logs (log_end_ stays their ends), where each record id was
  // appended (appended_at_[id - 1]), and the metadata every member's fetcher reads (one broker).
  bool real_data_ = false;
  std::map<TopicPartition, partition_log> logs_;
  std::int64_t next_id_ = 1;
  std::vector<std::pair<TopicPartition, std::int64_t>> appended_at_;
  std::vector<protocol::bytes> answer_buffers_;  // data_deliver()'s, reused
  data::cluster_metadata md_;
  std::uint64_t records_returned_ = 0;
  // G3 with seeks: per partition, the member whose application seeked it, where to, and the last
  // commit first sent before it took effect (a seek at once, a seek_to_beginning() once resolved;
  // unresolved: none yet); its commits first sent since may move the committed offset back to
  // there (once: cleared by the first of them accepted). Commits are numbered as first sent.
  struct seek_floor {
    int member;
    std::int64_t offset;
    std::uint64_t after;
  };
  static constexpr std::uint64_t unresolved = ~std::uint64_t{0};
  std::map<TopicPartition, std::vector<seek_floor>> seek_floors_;
  std::uint64_t commits_sent_ = 0;
  std::uint64_t commit_first_sent_ = 0;  // of the commit handle_commit() is answering
  std::vector<std::unique_ptr<sim_member>> members_;
  int next_member_ = 0;
  std::size_t max_members_ = 4;
  group::member_options base_;
  std::string assignor_;

  // The coordinator.
  std::int32_t coord_node_ = 1;
  time_point coord_down_until_{};
  time_point coord_loading_until_{};
  group_state g_;
  group_state stored_;
  time_point rebalance_deadline_{};
  std::map<TopicPartition, std::int64_t> committed_;
  std::map<TopicPartition, std::int32_t> committed_epoch_;  // the leader epoch each commit carried
  std::map<std::pair<std::string, std::int32_t>, partition_set> assigned_;  // (member, generation)
  std::uint64_t next_member_id_ = 1;
  std::map<std::string, time_point> pending_ids_;  // MEMBER_ID_REQUIRED given, not joined yet
  std::uint64_t commits_accepted_ = 0;
  std::set<std::int32_t> replaced_in_stable_;  // generations in which a static member was replaced
  std::uint64_t generations_ = 0;

  // The KIP-848 coordinator: the group as every change stores it (a move keeps it whole).
  consumer_group cg_;
  std::string server_assignor_;         // uniform or range
  std::int16_t heartbeat_version_ = 1;  // ConsumerGroupHeartbeat version every connection negotiates
  milliseconds cg_session_{};           // group.consumer.session.timeout.ms
  milliseconds cg_interval_{};          // group.consumer.heartbeat.interval.ms
  kip848::consumer_member_options consumer_base_;
  std::map<std::string, kip848::topic_id> topic_ids_;
};

template <class Core>
bool core_box<Core>::apply_actions(simulation& sim, sim_member& m) {
  touch();
  auto actions = core.take_actions();
  for (auto& a : actions) sim.apply(m, a);
  return !actions.empty();
}

template <class Core>
Core& core_of(sim_member& m) {
  auto& box = static_cast<core_box<Core>&>(*m.core);
  box.touch();
  return box.core;
}

/// Whether `T` is one of the actions both cores emit (simulation::apply_shared).
template <class T>
constexpr bool shared_action =
    std::is_same_v<T, group::run_listener> || std::is_same_v<T, group::assignment_changed> ||
    std::is_same_v<T, group::report_error> || std::is_same_v<T, group::cancel_listener> ||
    std::is_same_v<T, group::left_group>;
}  // namespace kgroup::sim::group_sim
