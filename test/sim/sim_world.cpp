// One seed of the data-path simulation. See sim_world.hpp, and sim.cpp for what is the real code
// and what mirrors the Asio driver.
#include "sim_world.hpp"

#include "sim_fetcher.hpp"
#include "sim_kernel.hpp"
#include "sim_log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "consumer/data_reader.hpp"
#include "data/cluster_metadata.hpp"
#include "data/committer.hpp"
#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/position_requests.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"
#include "protocol/messages.hpp"
#include "protocol/records.hpp"

namespace kgroup::sim {

bool mix_commits = false;
bool no_restarts = false;

namespace {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using std::chrono::milliseconds;
using pstate = data::fetch_state;
using partition_data = protocol::fetch_response::fetchable_topic_response::partition_data;

std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

// ---- the simulated cluster: the partition logs (sim_log.hpp) ----------------------------------------

// ---- one seed -------------------------------------------------------------------------------------

class simulation final : public fetcher_calls {
 public:
  // auto.offset.reset: earliest, latest in about 15 % of the seeds (drawn apart from the schedule).
  // `traced`: keep the trace (always with `verbose`).
  simulation(std::uint64_t seed, bool verbose, bool traced)
      : fetcher_calls(fp_, chains_, shared_),
        rng_(seed),
        verbose_(verbose),
        traced_(verbose || traced),
        policy_(prng(seed ^ 0x5bd1e995u).below(100) < 15 ? data::reset_policy::latest
                                                         : data::reset_policy::earliest),
        compaction_rng_(seed ^ 0x2545f491u),
        compacted_topic_(compaction_rng_.below(100) < 30),
        legacy_history_(compacted_topic_ && compaction_rng_.chance(0.5)),
        restart_rng_(seed ^ 0x68e31da4u),
        restarts_(restart_rng_.below(100) < 30 && !no_restarts),
        down_rng_(seed ^ 0x1b873593u) {}

  run_result run();

 private:
  static std::string name(const TopicPartition& tp) { return tp.topic + "-" + std::to_string(tp.partition); }
  double ms(time_point t) const { return std::chrono::duration<double, std::milli>(t - start_).count(); }
  std::string line(const trace_line& t) const { return fmt::format("{:10.3f} ms  {}", ms(t.at), t.what); }
  // The trace (the last events overall and per partition, which a failure prints; every event with
  // --verbose): kept only when traced_ (a failed seed runs again with it, run_seed()), so that a
  // passing seed formats none of its lines.
  template <class... A>
  void notef(fmt::format_string<A...> f, A&&... args) {
    if (traced_) note(fmt::format(f, std::forward<A>(args)...));
  }
  // fmt::format(f, args...) when traced_, else "" (an event's or a trace line's words).
  template <class... A>
  std::string words(fmt::format_string<A...> f, A&&... args) {
    return traced_ ? fmt::format(f, std::forward<A>(args)...) : std::string();
  }
  void note(std::string what) {
    if (!traced_) return;
    if (verbose_) std::printf("%10.3f ms  %s\n", ms(now_), what.c_str());
    // Per partition too: a stall shows in the partition's own last events, not the last overall.
    // (Fetch requests and appends left out: they crowd out what the application saw.)
    if (!what.starts_with("bg: fetch from") && !what.starts_with("produce")) {
      if (part_names_.size() != logs_.size()) {
        part_names_.clear();
        for (const auto& [tp, l] : logs_) part_names_.emplace_back(tp, name(tp));
      }
      for (const auto& [tp, n] : part_names_) {
        if (what.find(n) == std::string::npos) continue;
        auto& t = part_trace_[tp];
        t.push_back({now_, what});
        if (t.size() > 25) t.pop_front();
      }
    }
    trace_.push_back({now_, std::move(what)});
    if (trace_.size() > 40) trace_.pop_front();
  }
  [[noreturn]] void fail(const char* invariant, std::string message) {
    note("FAILED " + std::string(invariant) + ": " + message);
    throw violation{invariant, std::move(message)};
  }
  template <class F>
  void at(time_point when, std::string what, F&& f) {
    queue_.at(when, std::pair<std::string, event_fn>(std::move(what), event_fn(std::forward<F>(f))));
  }
  // A call posted to the background thread: run in the order posted.
  void post(std::string what, std::function<void()> f) override {
    last_post_ = std::max(now_ + milliseconds(rng_.below(2)), last_post_);
    at(last_post_, "bg: " + what, std::move(f));
  }
  void push_event(detail::user_event e) { shared_.push(std::move(e)); }

  bool fault_phase() const { return now_ < quiet_at_; }
  milliseconds latency() {
    std::int64_t d = rng_.between(1, 15);
    if (fault_phase() && rng_.chance(0.05)) d += rng_.between(50, 600);  // a slow answer
    return milliseconds(d);
  }
  bool lost() { return fault_phase() && rng_.chance(0.02); }

  // ---- world --------------------------------------------------------------------------------------
  void setup();
  void produce();
  void fault();
  void compact();
  void crash();
  void restart(std::int32_t node);
  void fence(std::int32_t node);
  bool gone(std::int32_t node) const { return gone_.count(node) != 0; }
  bool up(std::int32_t node) const { return !restarts_ || brokers_up_.at(node); }
  std::int32_t live(std::int32_t drawn) const;
  bool compacted_between(const TopicPartition& tp, std::int64_t from, std::int64_t to) const;
  bool compacted_before(const TopicPartition& tp, std::int64_t from, std::int64_t to, std::int64_t id) const;
  void refresh_truth();
  partition_log& log(const TopicPartition& tp) { return logs_.at(tp); }

  // ---- the driver glue (mirrors src/fetch/fetcher*.cpp, see sim.cpp) ----------------------------
  void pump() override;
  void schedule_retry();
  void schedule_retry_at(time_point t);
  void maybe_refresh_metadata();
  void retry_after_metadata() {
    maybe_refresh_metadata();
    schedule_retry();
  }
  void push_cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch, detail::cut_kind kind,
                bool halted);
  void send_offset_fetch();
  void send_list_offsets();
  void send_validations();
  void send_fetches();
  void fetch_sent(std::int32_t node, std::shared_ptr<const data::fetch_set> sent,
                  std::shared_ptr<const protocol::fetch_request> req, std::uint64_t id);
  // What a broker makes of a Fetch request in the seeds with restarts, whose brokers keep KIP-227
  // sessions: the partitions it answers (the session's, for an incremental request), the session
  // it answers with, or a top-level error.
  struct broker_view {
    data::fetch_set parts;
    std::int32_t session_id = 0;
    bool incremental = false;
    std::int16_t error_code = 0;
  };
  broker_view broker_fetch(std::int32_t node, const protocol::fetch_request& req);
  protocol::bytes fetch_answer(std::int32_t node, const data::fetch_set& sent,
                               const broker_view* view = nullptr);
  bool no_data(std::int32_t node, const data::fetch_set& sent);
  void deliver_fetch(std::int32_t node, const data::fetch_set& sent, const broker_view* view = nullptr);
  // A request to `node` over the client's connection to it (the seeds with restarts; in the others
  // `sent` runs at once: every request reaches its broker). `sent(id)` runs when it is written
  // (at once on a ready connection, else once a connection attempt succeeds); it is then in
  // flight as `id` until reaches(). Else `failed` runs: the connection attempt failed (the broker
  // is down), or the connection was reset by a restart the client had not seen yet.
  void send(std::int32_t node, std::string what, std::function<void(std::uint64_t)> sent,
            std::function<void()> failed);
  // A request that is answered or lost (then failed after request_timeout): `answer(fails)` runs
  // when its answer or failure reaches the client (ListOffsets, OffsetForLeaderEpoch).
  void send_answered(std::int32_t node, const char* api, std::function<void(bool)> answer);
  void connection_attempt(std::int32_t node, std::uint64_t generation);
  // Whether request `id` to `node` is still in flight (a crash failed it otherwise); `done`: it
  // is answered now.
  bool reaches(std::int32_t node, std::uint64_t id, bool done);
  void on_fetch_response(std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                         std::shared_ptr<const protocol::bytes> frame, const data::fetch_set& sent);
  void auto_commit();

  // ---- the application ----------------------------------------------------------------------------
  void poll();
  void app_action();
  void on_position_event(const detail::position_event& e);
  // check_record()'s look-ups of one partition, kept while records of it follow one another in a
  // poll()'s batch (nothing it reads changes between them but what it writes through them).
  struct record_lookup {
    bool valid = false;
    TopicPartition tp;
    std::map<TopicPartition, std::int64_t>::iterator expected;  // expected_.end(): none
    offset_epochs* epochs = nullptr;                            // looked up once needed
  };
  void check_record(const ConsumerRecord& r, record_lookup& look);
  void commit(const TopicPartition& tp, std::int64_t offset, const char* who);
  void check_end();

  prng rng_;
  bool verbose_;
  bool traced_;
  time_point start_{std::chrono::seconds(1000)};
  time_point now_ = start_;
  time_point quiet_at_, produce_until_, end_at_;
  event_queue<std::pair<std::string, event_fn>> queue_{now_};
  time_point last_post_ = start_;
  std::deque<trace_line> trace_;
  std::map<TopicPartition, std::deque<trace_line>> part_trace_;
  std::vector<protocol::bytes> answer_buffers_;                     // fetch_answer()'s, reused
  std::vector<std::pair<TopicPartition, std::string>> part_names_;  // logs_'s keys and name()s

  // World.
  std::int32_t brokers_ = 1;
  std::map<TopicPartition, partition_log> logs_;
  data::cluster_metadata truth_;
  std::int64_t next_id_ = 1;
  // Where each record was appended: appended_at_[id - 1] (ids are given out from 1, in order).
  std::vector<std::pair<TopicPartition, std::int64_t>> appended_at_;
  const std::pair<TopicPartition, std::int64_t>* appended_at(std::int64_t id) const {
    return id >= 1 && static_cast<std::uint64_t>(id) <= appended_at_.size()
               ? &appended_at_[static_cast<std::size_t>(id - 1)]
               : nullptr;
  }
  truncated_records truncated_;  // invariant 3: when each record was truncated
  // The records the cleaner removed (partition_log::for_each_id_at() has every record ever appended).
  std::set<std::int64_t> compacted_ids_;

  // Client: the background side.
  data::reset_policy policy_;
  // Log compaction (about 30 % of the seeds) draws from a PRNG of its own, so the other seeds'
  // schedules are what they were before it existed.
  prng compaction_rng_;
  bool compacted_topic_;
  // Half of the compacted topics were written before the upgrade to record batches: their history
  // (what was there before the consumer started) is served as magic-0 gzip wrappers, whose offset
  // stays when the cleaner removes their last messages (Fetch answers never convert old data up).
  bool legacy_history_;
  // Broker crashes and restarts (about 30 % of the seeds) draw from a PRNG of their own too, and
  // only those seeds' brokers keep fetch sessions and are reached over modelled connections: the
  // other seeds replay as before.
  prng restart_rng_;
  bool restarts_;
  std::map<std::int32_t, bool> brokers_up_;
  // Brokers down for good (some crashes of those seeds): they never restart. Whether a crash is
  // one, and how it ends, draws from a PRNG of its own, so the seeds with restarts whose crashes
  // all restart run as before.
  prng down_rng_;
  std::set<std::int32_t> gone_;
  struct broker_session {
    data::fetch_set parts;
    std::int32_t epoch = 1;  // the next incremental request's
    // What the last answer naming each partition said: an incremental answer names a partition
    // only with records, an error, or a changed high watermark or log start (KIP-227).
    std::map<TopicPartition, std::pair<std::int64_t, std::int64_t>> told;
  };
  struct broker_state {
    std::uint64_t incarnation = 0;  // crashes so far
    // The requests in flight to it: their connection-error answers, run when it crashes.
    std::map<std::uint64_t, std::function<void()>> in_flight;
    std::map<std::int32_t, broker_session> sessions;  // forgotten by a crash
    std::int32_t next_session = 1;
  };
  std::map<std::int32_t, broker_state> broker_;
  // The client's connection to each broker (net/connection.cpp, in short): the broker incarnation
  // it reached (-1: none, the next request connects), and its reconnect backoff after failures.
  struct client_connection {
    std::int64_t incarnation = -1;
    int failures = 0;
    time_point next_attempt{};
    bool attempt_pending = false;
    std::uint64_t generation = 0;  // bumped when dropped: a pending attempt is void
    // Requests waiting for the connection (net::connection's waiters): what, sent, failed.
    std::vector<std::tuple<std::string, std::function<void(std::uint64_t)>, std::function<void()>>> waiting;
  };
  std::map<std::int32_t, client_connection> connections_;
  std::uint64_t next_request_ = 1;
  std::map<TopicPartition, std::int64_t> history_end_;
  data::fetch_positions fp_{policy_, [this](const std::string& r) { note("REFUSED " + r); }};
  data::fetch_planner planner_{fp_, data::fetch_planner_options{}};
  data::position_requests requests_{fp_, planner_, "sim", 0};
  detail::fetch_chains chains_;  // fetcher.cpp's: the application's restarts received (fetched_data::chain)
  data::cluster_metadata md_;
  std::uint64_t refreshes_ = 0;
  bool refresh_in_flight_ = false;
  time_point last_refresh_{};
  bool retry_armed_ = false;
  std::size_t buffer_max_bytes_ = 16 * 1024;
  std::map<TopicPartition, std::int64_t> last_auto_committed_;
  // The answer time of each diverged cut pushed and of the last one applied (invariant 3).
  divergences divergences_;

  // Client: the user thread.
  detail::shared_state shared_;
  detail::poll_stats stats_;
  detail::data_reader reader_{shared_, stats_, *this};
  std::set<TopicPartition> owned_;
  std::set<TopicPartition> paused_;

  // What the checks know of the application.
  std::map<TopicPartition, std::int64_t> expected_;  // the application's next offset
  std::map<TopicPartition, offset_epochs> returned_epochs_;
  std::map<TopicPartition, int> seek_tos_pending_;
  std::map<TopicPartition, std::int64_t> last_commit_;
  std::map<TopicPartition, std::set<std::int64_t>> sanctioned_;  // positions a commit may move back to
  std::uint64_t returned_count_ = 0;
  bool auto_commit_on_ = false;
  bool sync_commits_ = false;
};

// ---- world ------------------------------------------------------------------------------------------

void simulation::setup() {
  brokers_ = static_cast<std::int32_t>(rng_.between(1, 3));
  const int partitions = static_cast<int>(rng_.between(1, 3));
  const auto duration = milliseconds(rng_.between(10000, 30000));
  end_at_ = start_ + duration;
  // The last 20 % (at least 6 s: a lost request takes 1 s to fail, a long poll 0.5 s) has no
  // faults; the producer stops a quarter into it, and every partition must be read to its end.
  const auto quiet = std::max<milliseconds>(duration / 5, milliseconds(6000));
  quiet_at_ = end_at_ - quiet;
  produce_until_ = quiet_at_ + quiet / 4;
  for (std::int32_t b = 1; b <= brokers_; ++b) {
    truth_.brokers[b].node_id = b;
    if (restarts_) {
      brokers_up_[b] = true;
      broker_[b];
    }
  }
  for (int i = 0; i < partitions; ++i) {
    const TopicPartition tp{"t", i};
    auto& l = logs_[tp];
    l.leader = static_cast<std::int32_t>(rng_.between(1, brokers_));
    l.epoch_start[0] = 0;
    l.batch_starts.insert(0);
    // Some history before the consumer starts, and sometimes a committed offset in it.
    const auto n = rng_.below(40);
    for (std::int64_t o = 0; o < n; ++o) {
      l.entries.push_back({next_id_, 0});
      l.appended_at(o, next_id_);
      appended_at_.emplace_back(tp, o);
      ++next_id_;
    }
    history_end_[tp] = n;
    if (compacted_topic_ && n > 1) {
      // The cleaner has been over the history already; it keeps at least one record of it.
      std::int64_t kept = 0;
      for (std::int64_t o = 0; o < n; ++o) {
        auto& e = l.entries[static_cast<std::size_t>(o)];
        if (o == n - 1 && kept == 0) break;
        if (compaction_rng_.chance(0.4)) {
          e.compacted = true;
          compacted_ids_.insert(e.id);
        } else {
          ++kept;
        }
      }
    }
    if (n > 0 && rng_.chance(0.5)) l.committed = {rng_.below(n + 1), rng_.chance(0.5) ? 0 : -1};
    if (l.committed.offset >= 0) last_commit_[tp] = l.committed.offset;
    owned_.insert(tp);
  }
  // Auto-commit, sync commits or both (a third each; --mix-commits: both). Both found that a
  // commitSync() of the positions followed by an auto-commit of the consumed positions (one poll()
  // behind) moved the committed offset back (fixed: data_reader::positions_for_commit()).
  const auto mode = rng_.below(3);
  if (mix_commits || mode == 2)
    auto_commit_on_ = sync_commits_ = true;
  else
    (mode == 0 ? auto_commit_on_ : sync_commits_) = true;
  refresh_truth();
  md_ = truth_;
  md_.refreshes = ++refreshes_;
  notef("setup: {} brokers, {} partitions, {} ms, reset {}, {}{}{}{}{}", brokers_, partitions,
        duration.count(), policy_ == data::reset_policy::latest ? "latest" : "earliest",
        auto_commit_on_ ? "auto-commit " : "", sync_commits_ ? "sync commits" : "",
        compacted_topic_ ? ", compacted topic" : "", legacy_history_ ? " (history in magic 0)" : "",
        restarts_ ? ", broker restarts (fetch sessions kept)" : "");
}

void simulation::refresh_truth() {
  auto& t = truth_.topics["t"];
  t.name = "t";
  t.partitions.clear();
  for (const auto& [tp, l] : logs_) {
    t.partitions.push_back(
        data::partition_metadata{tp.partition, 0, l.leader, l.epoch, {l.leader}, {l.leader}});
  }
}

void simulation::produce() {
  if (now_ >= produce_until_) return;
  auto it = logs_.begin();
  std::advance(it, rng_.below(static_cast<std::int64_t>(logs_.size())));
  auto& [tp, l] = *it;
  if (!up(l.leader)) {
    // Its leader is down: the producer's send waits (and is retried) until there is one.
    at(now_ + milliseconds(rng_.between(1, 100)), "produce", [this] { produce(); });
    return;
  }
  const auto n = rng_.between(1, 8);
  l.batch_starts.insert(l.end());
  for (std::int64_t i = 0; i < n; ++i) {
    l.appended_at(l.end(), next_id_);
    appended_at_.emplace_back(tp, l.end());
    l.entries.push_back({next_id_++, l.epoch});
  }
  notef("produce {} records to {}, end {}", n, name(tp), l.end());
  at(now_ + milliseconds(rng_.between(1, 100)), "produce", [this] { produce(); });
}

void simulation::fault() {
  if (!fault_phase()) return;
  auto it = logs_.begin();
  std::advance(it, rng_.below(static_cast<std::int64_t>(logs_.size())));
  auto& [tp, l] = *it;
  const auto kind = rng_.below(10);
  if (kind < 4) {
    // A clean leader change: nothing lost, the new leader's epoch starts at the log's end.
    l.leader = live(static_cast<std::int32_t>(rng_.between(1, brokers_)));
    ++l.epoch;
    l.epoch_start[l.epoch] = l.end();
    notef("FAULT clean leader change {}: leader {} epoch {}", name(tp), l.leader, l.epoch);
  } else if (kind < 7) {
    // An unclean election: the new leader's log ends at a random offset at or below the old
    // one's; later appends diverge from what was fetched.
    // Not into magic-0 history: its records carry no leader epoch, so no client can tell a
    // position there diverged (Java and kgroup validate only positions with an epoch).
    const std::int64_t lowest = legacy_history_ ? std::max(l.log_start, history_end_[tp]) : l.log_start;
    const std::int64_t cut = rng_.between(std::max(lowest, l.end() - 30), std::max(lowest, l.end()));
    const auto leader = live(static_cast<std::int32_t>(rng_.between(1, brokers_)));
    truncated_.truncated(unclean_election(l, cut, leader), now_);
    history_end_[tp] = std::min(history_end_[tp], cut);  // what follows is written as record batches
    notef("FAULT unclean election {}: truncated to {}, leader {} epoch {}", name(tp), cut, l.leader, l.epoch);
  } else {
    // Retention: the log's start moves forward (the epoch cache is cut from the start too).
    const std::int64_t to = rng_.between(l.log_start, l.end());
    delete_records_before(l, to);
    notef("FAULT retention {}: log start {}", name(tp), to);
  }
  refresh_truth();
  at(now_ + milliseconds(rng_.between(100, 1500)), "fault", [this] { fault(); });
}

// The log cleaner of a compacted topic: records below the active segment (here: the last batch)
// are removed, their batches stay with their offsets (a batch's last offset is kept even when its
// trailing records go, and a batch left empty is kept too, as Kafka keeps batches whose producer
// state it needs). The fetcher continues after a batch's last offset, and the reader must too.
void simulation::compact() {
  if (!fault_phase()) return;
  auto& crng = compaction_rng_;
  auto it = logs_.begin();
  std::advance(it, crng.below(static_cast<std::int64_t>(logs_.size())));
  auto& [tp, l] = *it;
  const std::int64_t active = l.batch_starts.empty() ? 0 : *l.batch_starts.rbegin();
  const std::int64_t from = std::max(l.log_start, active - crng.between(1, 60));
  std::int64_t removed = 0;
  for (std::int64_t o = from; o < active; ++o) {
    auto& e = l.entries[static_cast<std::size_t>(o)];
    if (!e.compacted && crng.chance(0.4)) {
      e.compacted = true;
      compacted_ids_.insert(e.id);
      ++removed;
    }
  }
  if (removed > 0)
    notef("FAULT compaction {}: {} records removed in [{}, {})", name(tp), removed, from, active);
  at(now_ + milliseconds(crng.between(200, 2000)), "compact", [this] { compact(); });
}

// A leader the controller can elect: `drawn` if it is up, else the next broker that is (the
// seeds with restarts; while no broker is up, a partition stays with `drawn`, or the next broker
// after it that is not down for good: one that will restart).
std::int32_t simulation::live(std::int32_t drawn) const {
  for (std::int32_t i = 0; i < brokers_; ++i) {
    const std::int32_t b = (drawn - 1 + i) % brokers_ + 1;
    if (up(b)) return b;
  }
  for (std::int32_t i = 0; i < brokers_; ++i) {
    const std::int32_t b = (drawn - 1 + i) % brokers_ + 1;
    if (!gone(b)) return b;
  }
  return drawn;
}

// A broker crashes (one at a time, in the seeds with restarts): every request in flight to it is
// lost, and the client's connection to it is reset (the requests fail with a connection error a
// moment later, as net::connection::fail fails them); it is gone from metadata until it restarts
// (Kafka lists only live brokers; a partition it led keeps it as leader, which the planner's
// locate() treats as no leader) and forgets its fetch sessions. Half the crashes, the controller
// moves its partitions to brokers that are up (a clean election: a new leader epoch from the
// log's end); otherwise they are unavailable until it restarts, 0.5-5 s later, and leads them
// again with a new epoch. No crash in the quiet phase, and every broker that is not down for good
// (below) is up when it begins.
//
// A crash with another broker up is for good half the time (down_rng_): the broker never restarts
// (it is down longer than the seed runs, as real outages are). A quarter of those, the controller
// notices at once (as above, and its partitions always move). The others it notices only after the
// broker's session timeout (1-9 s here; Kafka's broker.session.timeout.ms is 9 s): until then the
// broker stays registered, in metadata and leader of its partitions, and every connection attempt
// to it fails; then the controller fences it (fence()), up to 2 s into the quiet phase (the
// timeout began before it; what the client must then do, follow the partitions to their new
// leaders, is what the quiet phase checks). Either way its partitions move to live brokers, it
// stays out of metadata, and no election, leader change or crash picks it again; the next crash
// comes 1-6 s after the controller saw it. A crash never picks a broker down for good (the next
// one that is not, instead), so the last broker that could lead only crashes to restart. Session
// 29's ListOffsets bug (a failed request refreshed no metadata) needs such a broker: a partition
// resetting when its leader moves away from it asks it again every backoff, and nothing else
// refreshes metadata in the quiet phase.
void simulation::crash() {
  auto& rr = restart_rng_;
  if (now_ + milliseconds(500) >= quiet_at_) return;
  auto node = static_cast<std::int32_t>(rr.between(1, brokers_));
  while (gone(node)) node = node % brokers_ + 1;
  auto& b = broker_[node];
  brokers_up_[node] = false;
  ++b.incarnation;
  b.sessions.clear();
  bool others = false;
  for (std::int32_t o = 1; o <= brokers_; ++o) others = others || (o != node && up(o));
  const bool for_good = others && down_rng_.chance(0.5);
  const bool fenced_later = for_good && down_rng_.chance(0.75);
  if (for_good) gone_.insert(node);
  if (!fenced_later) truth_.brokers.erase(node);
  bool move = others && rr.chance(0.5);
  if (for_good) move = !fenced_later;
  std::string moved;
  for (auto& [tp, l] : logs_) {
    if (l.leader != node) continue;
    if (move) {
      l.leader = live(static_cast<std::int32_t>(rr.between(1, brokers_)));
      ++l.epoch;
      l.epoch_start[l.epoch] = l.end();
      moved += fmt::format(" {} to {} epoch {}", name(tp), l.leader, l.epoch);
    } else {
      moved += fmt::format(" {} unavailable", name(tp));
    }
  }
  refresh_truth();
  const auto lost_requests = b.in_flight.size();
  notef("FAULT broker {} crashes{} ({} request(s) in flight lost);{}", node,
        !for_good      ? ""
        : fenced_later ? " for good, registered until its session times out"
                       : " for good",
        lost_requests, moved.empty() ? " leads nothing" : moved);
  if (!b.in_flight.empty()) {
    auto failed = std::move(b.in_flight);
    b.in_flight.clear();
    auto& c = connections_[node];
    c.incarnation = -1;
    c.failures = 1;
    const auto reset = milliseconds(rr.between(1, 30));
    c.next_attempt = now_ + reset + milliseconds(50);
    at(now_ + reset, fmt::format("bg: connection to broker {} reset", node), [failed = std::move(failed)] {
      for (const auto& [id, f] : failed) f();
    });
  }
  if (fenced_later) {
    const auto fenced =
        std::min(now_ + milliseconds(down_rng_.between(1000, 9000)), quiet_at_ + milliseconds(2000));
    at(fenced, "fence", [this, node] { fence(node); });
  } else if (for_good) {
    at(now_ + milliseconds(rr.between(1000, 6000)), "crash", [this] { crash(); });
  } else {
    const auto back = std::min(now_ + milliseconds(rr.between(500, 5000)), quiet_at_ - milliseconds(1));
    at(back, "restart", [this, node] { restart(node); });
  }
}

// The controller fences a broker down for good whose session timed out: it leaves metadata and
// its partitions move to live brokers (every other broker that is not down for good is up: one
// crash at a time).
void simulation::fence(std::int32_t node) {
  truth_.brokers.erase(node);
  std::string moved;
  for (auto& [tp, l] : logs_) {
    if (l.leader != node) continue;
    l.leader = live(static_cast<std::int32_t>(down_rng_.between(1, brokers_)));
    ++l.epoch;
    l.epoch_start[l.epoch] = l.end();
    moved += fmt::format(" {} to {} epoch {}", name(tp), l.leader, l.epoch);
  }
  refresh_truth();
  note(
      fmt::format("FAULT broker {} fenced (down for good);{}", node, moved.empty() ? " led nothing" : moved));
  at(now_ + milliseconds(restart_rng_.between(1000, 6000)), "crash", [this] { crash(); });
}

void simulation::restart(std::int32_t node) {
  brokers_up_[node] = true;
  truth_.brokers[node].node_id = node;
  std::string led;
  for (auto& [tp, l] : logs_) {
    if (l.leader != node) continue;
    ++l.epoch;
    l.epoch_start[l.epoch] = l.end();
    led += fmt::format(" {} epoch {}", name(tp), l.epoch);
  }
  refresh_truth();
  notef("FAULT broker {} restarts, fetch sessions forgotten;{}", node, led.empty() ? " leads nothing" : led);
  at(now_ + milliseconds(restart_rng_.between(1000, 6000)), "crash", [this] { crash(); });
}

void simulation::send(std::int32_t node, std::string what, std::function<void(std::uint64_t)> sent,
                      std::function<void()> failed) {
  if (!restarts_) {
    sent(0);
    return;
  }
  auto& b = broker_[node];
  auto& c = connections_[node];
  if (c.incarnation >= 0 && static_cast<std::uint64_t>(c.incarnation) != b.incarnation) {
    // The broker crashed since the connection was made, with nothing in flight then: the write is
    // answered with a reset, and the next request connects again (after the backoff).
    const auto d = milliseconds(restart_rng_.between(1, 5));
    c.incarnation = -1;
    c.failures = 1;
    c.next_attempt = now_ + d + milliseconds(50);
    at(now_ + d, fmt::format("bg: {} to broker {} failed (connection reset)", what, node), std::move(failed));
    return;
  }
  if (c.incarnation >= 0) {
    const auto id = next_request_++;
    b.in_flight.emplace(id, std::move(failed));
    sent(id);
    return;
  }
  c.waiting.emplace_back(std::move(what), std::move(sent), std::move(failed));
  if (c.attempt_pending) return;
  // Connecting (again) once the reconnect backoff allows it; the attempt succeeds if the broker is
  // up then.
  c.attempt_pending = true;
  at(std::max(now_, c.next_attempt) + milliseconds(restart_rng_.between(1, 10)),
     words("bg: connecting to broker {}", node),
     [this, node, generation = c.generation] { connection_attempt(node, generation); });
}

void simulation::connection_attempt(std::int32_t node, std::uint64_t generation) {
  auto& b = broker_[node];
  auto& c = connections_[node];
  if (c.generation != generation) return;  // dropped meanwhile
  c.attempt_pending = false;
  auto waiting = std::move(c.waiting);
  c.waiting.clear();
  if (up(node)) {
    c.incarnation = static_cast<std::int64_t>(b.incarnation);
    c.failures = 0;
    for (auto& [what, sent, failed] : waiting) {
      const auto id = next_request_++;
      b.in_flight.emplace(id, std::move(failed));
      sent(id);
    }
    return;
  }
  // connection_core's reconnect backoff: 50 ms doubling up to 1 s (without its jitter).
  ++c.failures;
  c.next_attempt = now_ + std::min(milliseconds(50 << std::min(c.failures - 1, 5)), milliseconds(1000));
  std::string whats;
  for (const auto& w : waiting) whats += " " + std::get<0>(w);
  notef("bg: connecting to broker {} failed (it is down):{} failed", node, whats);
  for (auto& w : waiting) std::get<2>(w)();
}

bool simulation::reaches(std::int32_t node, std::uint64_t id, bool done) {
  if (!restarts_) return true;
  auto& f = broker_[node].in_flight;
  const auto it = f.find(id);
  if (it == f.end()) return false;  // lost in a crash: its connection error is on its way
  if (done) f.erase(it);
  return true;
}

// A Fetch as a broker of the seeds with restarts takes it (KIP-227, as Kafka's FetchSession):
// epoch -1 fetches without a session (closing `session_id`'s), epoch 0 closes `session_id`'s (if
// it still exists) and opens a new one; an incremental request adds or updates the partitions it
// names, drops the forgotten ones, and is answered from the session's partitions. A session it
// does not hold (forgotten by a restart, or evicted: now and then, as a full session cache does)
// is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.
simulation::broker_view simulation::broker_fetch(std::int32_t node, const protocol::fetch_request& req) {
  auto& b = broker_[node];
  broker_view out;
  const auto read = [&](data::fetch_set& into) {
    for (const auto& t : req.topics) {
      for (const auto& p : t.partitions) {
        into[TopicPartition{t.topic, p.partition}] = data::partition_fetch{
            t.topic_id, p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes, p.log_start_offset};
      }
    }
  };
  if (req.session_epoch <= 0) {
    if (req.session_id != 0) b.sessions.erase(req.session_id);
    if (req.session_epoch < 0) {
      read(out.parts);
      return out;
    }
    out.session_id = b.next_session++;
    auto& s = b.sessions[out.session_id];
    read(s.parts);
    out.parts = s.parts;
    return out;
  }
  if (restart_rng_.chance(0.01) && b.sessions.erase(req.session_id) > 0) {
    notef("broker {} evicts fetch session {}", node, req.session_id);
  }
  const auto it = b.sessions.find(req.session_id);
  if (it == b.sessions.end()) {
    out.error_code = code(kafka_errc::fetch_session_id_not_found);
    return out;
  }
  auto& s = it->second;
  if (req.session_epoch != s.epoch) {
    out.error_code = code(kafka_errc::invalid_fetch_session_epoch);
    return out;
  }
  read(s.parts);
  for (const auto& t : req.forgotten_topics_data) {
    for (const auto p : t.partitions) {
      s.parts.erase(TopicPartition{t.topic, p});
      s.told.erase(TopicPartition{t.topic, p});
    }
  }
  s.epoch = s.epoch == std::numeric_limits<std::int32_t>::max() ? 1 : s.epoch + 1;
  out.session_id = req.session_id;
  out.incremental = true;
  out.parts = s.parts;
  return out;
}

// Whether every offset in [from, to) of the partition's log holds a record the cleaner removed.
bool simulation::compacted_between(const TopicPartition& tp, std::int64_t from, std::int64_t to) const {
  const auto& l = logs_.at(tp);
  if (from >= to || to > l.end() || from < 0) return false;
  for (std::int64_t o = from; o < to; ++o) {
    if (!l.entries[static_cast<std::size_t>(o)].compacted) return false;
  }
  return true;
}

// The same for the branch of the log record `id` belongs to (which an unclean election may have
// truncated since): at each offset, the last record appended there before `id`.
bool simulation::compacted_before(const TopicPartition& tp, std::int64_t from, std::int64_t to,
                                  std::int64_t id) const {
  if (from >= to || from < 0) return false;
  const auto& l = logs_.at(tp);
  for (std::int64_t o = from; o < to; ++o) {
    std::int64_t branch = -1;
    const bool any = l.for_each_id_at(o, [&](std::int64_t i) {
      if (i < id) branch = std::max(branch, i);
    });
    if (!any) return false;
    if (branch < 0 || !compacted_ids_.count(branch)) return false;
  }
  return true;
}

// ---- the driver glue ------------------------------------------------------------------------------

void simulation::pump() {
  send_offset_fetch();
  send_list_offsets();
  send_validations();
  send_fetches();
}

constexpr milliseconds retry_backoff{100};
constexpr milliseconds request_timeout{1000};

void simulation::schedule_retry() {
  schedule_retry_at(now_ + retry_backoff);
}

void simulation::schedule_retry_at(time_point t) {
  if (retry_armed_) return;
  retry_armed_ = true;
  // The driver's timer has millisecond resolution.
  const auto after = std::chrono::ceil<milliseconds>(std::max(t - now_, clock::duration::zero()));
  at(now_ + after, "bg: retry timer", [this] {
    retry_armed_ = false;
    pump();
  });
}

void simulation::maybe_refresh_metadata() {
  if (refresh_in_flight_ || now_ - last_refresh_ < retry_backoff * 5) return;
  last_refresh_ = now_;
  refresh_in_flight_ = true;
  at(now_ + latency(), "bg: metadata refreshed", [this] {
    refresh_in_flight_ = false;
    if (restarts_ && truth_.brokers.empty()) {
      // No broker to ask (cluster::refresh_metadata retries until its timeout, then calls back
      // with the error; the fetcher pumps either way).
      note("bg: metadata refresh failed: no broker is up");
      pump();
      return;
    }
    md_ = truth_;
    md_.refreshes = ++refreshes_;
    md_.updated = now_;
    if (restarts_) {
      // cluster::apply_metadata: the connections of brokers the answer does not name are closed
      // (what waits on them fails with shutting_down); a later one starts afresh, without backoff.
      for (auto& [node, c] : connections_) {
        if (md_.brokers.count(node) != 0 || (c.incarnation < 0 && !c.attempt_pending && c.failures == 0))
          continue;
        auto waiting = std::move(c.waiting);
        const auto generation = c.generation + 1;
        c = client_connection{};
        c.generation = generation;
        notef("bg: connection to broker {} dropped: not in metadata ({} waiting)", node, waiting.size());
        for (auto& w : waiting) std::get<2>(w)();
      }
    }
    pump();
  });
}

void simulation::push_cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch,
                          detail::cut_kind kind, bool halted) {
  notef("bg: cut {} at {} epoch {} ({})", name(tp), offset, epoch,
        kind == detail::cut_kind::diverged ? "diverged" : "log end");
  if (kind == detail::cut_kind::diverged) divergences_.pushed(tp, now_);
  shared_.push_cut(tp, offset, epoch, kind, halted);
}

// fetcher_offsets.cpp's glue around the library's position_requests core: the requests it
// builds are answered by the brokers' logs, and what the core makes of the answers is carried out
// as the driver does (the notes stand for its log lines).
static const std::error_code request_failed = make_error_code(client_errc::request_timed_out);

void simulation::send_offset_fetch() {
  const auto wanted = requests_.committed_wanted();
  if (wanted.empty()) return;
  auto req = requests_.request_committed(wanted);
  const bool fails = lost();
  at(now_ + (fails ? request_timeout : latency()),
     fails ? "bg: OffsetFetch failed" : "bg: OffsetFetch answered", [this, req = std::move(req), fails] {
       protocol::offset_fetch_response r;
       if (!fails) {
         for (const auto& t : *req.topics) {
           auto& rt = r.topics.emplace_back();
           rt.name = t.name;
           for (const auto p : t.partition_indexes) {
             const auto c = log({t.name, p}).committed;
             rt.partitions.push_back({p, c.offset, c.epoch, std::string{}, 0});
           }
         }
       }
       const auto got = requests_.on_committed(fails ? request_failed : std::error_code{}, r);
       for (const auto& c : got.offsets) {
         notef("bg: {} committed offset {} epoch {}", name(c.tp), c.offset, c.epoch);
         push_event(detail::position_event{c.tp, c.offset, false, c.epoch});
       }
       if (got.retry) schedule_retry();
       if (!fails) pump();
     });
}

void simulation::send_answered(std::int32_t node, const char* api, std::function<void(bool)> answer) {
  send(
      node, api,
      [this, node, api, answer](std::uint64_t id) {
        const bool fails = lost();
        at(now_ + (fails ? request_timeout : latency()),
           words("bg: {} from {} {}", api, node, fails ? "failed" : "answered"),
           [this, node, answer, fails, id] {
             if (reaches(node, id, true)) answer(fails);
           });
      },
      [answer] { answer(true); });
}

void simulation::send_list_offsets() {
  const auto wants = requests_.resets_wanted(md_);
  if (!wants.reports.empty())
    fail("driver", "a partition reported (missing from metadata, or no reset policy)");
  if (wants.missing) retry_after_metadata();
  for (const auto& [leader, tps] : wants.by_leader) {
    auto sent = std::make_shared<const data::sent_resets>(requests_.request_resets(leader, tps, md_, 0));
    auto answer = [this, sent](bool fails) {
      const auto r =
          fails ? protocol::list_offsets_response{} : answer_list_offsets(logs_, sent->node, sent->request);
      const auto got = requests_.on_resets(*sent, fails ? request_failed : std::error_code{}, r);
      for (const auto& p : got.positions) {
        notef("bg: {} reset to {} epoch {}", name(p.tp), p.offset, p.epoch);
        push_event(detail::position_event{p.tp, p.offset, true, p.epoch});
      }
      if (got.refresh_metadata) maybe_refresh_metadata();
      if (got.retry) schedule_retry();
      pump();
    };
    send_answered(leader, "ListOffsets", answer);
  }
}

void simulation::send_validations() {
  const auto wants = requests_.validations_wanted(md_);
  if (!wants.reports.empty()) fail("driver", "a partition reported missing from metadata");
  if (wants.missing) retry_after_metadata();
  for (const auto& [leader, tps] : wants.by_leader) {
    auto sent =
        std::make_shared<const data::sent_validations>(requests_.request_validations(leader, tps, md_));
    for (const auto& t : sent->request.topics) {
      for (const auto& p : t.partitions) {
        const auto& sp = sent->sent.at({t.topic, p.partition});
        notef("bg: validate {} at {} epoch {} (leader epoch {})", name({t.topic, p.partition}), sp.position,
              sp.epoch, sp.leader_epoch);
      }
    }
    auto answer = [this, sent](bool fails) {
      const auto r = fails ? protocol::offset_for_leader_epoch_response{}
                           : answer_offset_for_leader_epoch(logs_, sent->node, sent->request);
      const auto got = requests_.on_validations(*sent, fails ? request_failed : std::error_code{}, r);
      for (const auto& v : got.results) {
        const auto& o = v.outcome;
        const auto& sp = sent->sent.at(v.tp);
        notef("bg: {} validated at {} epoch {}: error {}, end epoch {} offset {} -> verdict {}", name(v.tp),
              sp.position, sp.epoch, v.error_code, v.end_epoch, v.end_offset, static_cast<int>(o.what));
        if (o.what == data::validation_outcome::verdict::awaiting_seek)
          fail("driver", "awaiting_seek with auto.offset.reset=earliest");
        if (o.cut) push_cut(v.tp, o.cut->offset, o.cut->epoch, detail::cut_kind::diverged, o.cut->halted);
      }
      if (got.refresh_metadata) maybe_refresh_metadata();
      if (got.retry) schedule_retry();
      pump();
    };
    send_answered(leader, "OffsetForLeaderEpoch", answer);
  }
}

void simulation::send_fetches() {
  {
    std::lock_guard lock(shared_.mutex);
    if (shared_.buffered_bytes >= buffer_max_bytes_) return;
  }
  auto plan = planner_.plan(now_, md_);
  if (!plan.report_missing.empty()) fail("driver", "a partition reported missing from metadata");
  if (plan.refresh_metadata) maybe_refresh_metadata();
  if (plan.retry_at) schedule_retry_at(*plan.retry_at);
  if (plan.validate) send_validations();
  for (auto& f : plan.requests) {
    const auto node = f.node;
    auto sent = f.partitions;
    if (md_.brokers.count(node) == 0) {
      // fetcher.cpp: cluster::broker() has no connection for a node metadata does not name (a
      // connection is dropped when metadata stops naming its broker): the plan is undone, metadata
      // refreshed, and the partitions planned again after the backoff. (locate() leaves out a
      // leader metadata does not name, so a plan names one only if a check there is lost.)
      notef("bg: fetch from {} not sent: not in metadata", node);
      const auto retry = planner_.not_sent(now_, node, *sent);
      maybe_refresh_metadata();
      schedule_retry_at(retry);
      continue;
    }
    // A broker that is down but still in this member's metadata has a connection object: the
    // request waits for it to connect, which fails, and fails as a lost connection does.
    auto req = std::make_shared<protocol::fetch_request>(std::move(f.request));
    planner_.fill(node, *req, 12, *sent);
    std::string list;
    if (traced_) {
      for (const auto& [tp, pf] : *sent)
        list += fmt::format(" {}@{}/e{}", name(tp), pf.fetch_offset, pf.current_leader_epoch);
      if (restarts_) list += fmt::format(" (session {} epoch {})", req->session_id, req->session_epoch);
    }
    notef("bg: fetch from {}:{}", node, list);
    send(
        node, "fetch", [this, node, sent, req](std::uint64_t id) { fetch_sent(node, sent, req, id); },
        [this, node, sent] {
          on_fetch_response(node, make_error_code(client_errc::connection_closed), {}, nullptr, *sent);
        });
  }
}

void simulation::fetch_sent(std::int32_t node, std::shared_ptr<const data::fetch_set> sent,
                            std::shared_ptr<const protocol::fetch_request> req, std::uint64_t id) {
  {
    const bool fails = lost();
    at(now_ + (fails ? request_timeout : latency()), words("bg: fetch answer from {}", node),
       [this, node, sent, fails, id, req] {
         if (!reaches(node, id, fails)) return;
         if (fails) {
           notef("bg: fetch from {} failed (request timed out)", node);
           on_fetch_response(node, make_error_code(client_errc::request_timed_out), {}, nullptr, *sent);
           return;
         }
         std::shared_ptr<const broker_view> view;
         if (restarts_) view = std::make_shared<broker_view>(broker_fetch(node, *req));
         const auto& parts = view ? view->parts : *sent;
         // The broker holds a Fetch without data up to fetch.max.wait.ms (long poll).
         if ((!view || view->error_code == 0) && no_data(node, parts)) {
           at(now_ + milliseconds(rng_.between(20, 500)), words("bg: fetch answer from {} (waited)", node),
              [this, node, sent, id, view] {
                if (reaches(node, id, true)) deliver_fetch(node, *sent, view.get());
              });
           return;
         }
         reaches(node, id, true);
         deliver_fetch(node, *sent, view.get());
       });
  }
}

bool simulation::no_data(std::int32_t node, const data::fetch_set& sent) {
  for (const auto& [tp, pf] : sent) {
    const auto& l = log(tp);
    if (l.leader != node || pf.current_leader_epoch != l.epoch || pf.fetch_offset != l.end()) return false;
  }
  return true;
}

void simulation::deliver_fetch(std::int32_t node, const data::fetch_set& sent, const broker_view* view) {
  // Encoded and decoded as the driver receives it: the fetched data keeps spans into the frame.
  auto frame = std::make_shared<protocol::bytes>(fetch_answer(node, view ? view->parts : sent, view));
  protocol::fetch_response r;
  std::size_t trailing = 0;
  if (auto ec = protocol::decode(*frame, 12, r, &trailing))
    fail("codec", "Fetch answer does not decode: " + ec.message());
  on_fetch_response(node, {}, r, frame, sent);
}

protocol::bytes simulation::fetch_answer(std::int32_t node, const data::fetch_set& sent,
                                         const broker_view* view) {
  protocol::fetch_response r;
  std::size_t buffers_used = 0;  // of answer_buffers_ (each partition's records, until encoded)
  if (answer_buffers_.size() < sent.size()) answer_buffers_.resize(sent.size());
  std::string list;
  broker_session* session = nullptr;
  if (view) {
    r.session_id = view->session_id;
    if (view->error_code != 0) {
      r.error_code = view->error_code;
      r.session_id = 0;
      list += words(" error {}", view->error_code);
    } else if (view->session_id != 0) {
      // (Absent only if the request was lost meanwhile, which reaches() checked.)
      auto& ss = broker_.at(node).sessions;
      if (const auto it = ss.find(view->session_id); it != ss.end()) session = &it->second;
      list += words(" (session {}{})", view->session_id, view->incremental ? ", incremental" : "");
    }
  }
  static const data::fetch_set none;
  for (const auto& [tp, pf] : view && view->error_code != 0 ? none : sent) {
    const auto& l = log(tp);
    partition_data pd;
    pd.partition_index = tp.partition;
    pd.high_watermark = l.end();
    pd.last_stable_offset = l.end();
    pd.log_start_offset = l.log_start;
    pd.error_code = fetch_error(l, node, pf.current_leader_epoch, pf.fetch_offset, [&]() -> std::int16_t {
      if (!fault_phase() || !rng_.chance(0.03)) return 0;
      return code(rng_.chance(0.5) ? kafka_errc::not_leader_or_follower : kafka_errc::unknown_leader_epoch);
    });
    if (pd.error_code == 0 && pf.fetch_offset < l.end()) {
      // Whole batches as they were produced, from the one holding the fetch offset (so an answer
      // may begin below it, as Kafka's do), up to about `want` records past the fetch offset.
      auto& buf = answer_buffers_[buffers_used++];
      buf.clear();
      const std::int64_t want = rng_.between(1, 40);
      const auto w = write_batches(l, pf.fetch_offset, want, legacy_history_ ? history_end_.at(tp) : -1, buf);
      if (w.error) fail("codec", w.error);
      const std::int64_t stop = w.stop;
      pd.records = protocol::records_view{buf};
      if (traced_) list += fmt::format(" {}[{}, {})", name(tp), pf.fetch_offset, stop);
    }
    if (traced_ && pd.error_code != 0) list += fmt::format(" {} error {}", name(tp), pd.error_code);
    if (session) {
      // An incremental answer leaves out a partition with nothing new for it (KIP-227).
      const std::pair<std::int64_t, std::int64_t> now{pd.high_watermark, pd.log_start_offset};
      auto [told, first] = session->told.try_emplace(tp, now);
      const bool news =
          first || told->second != now || pd.error_code != 0 || (pd.records && !pd.records->data.empty());
      told->second = now;
      if (view->incremental && !news) continue;
    }
    if (r.responses.empty() || r.responses.back().topic != tp.topic) {
      r.responses.emplace_back();
      r.responses.back().topic = tp.topic;
      r.responses.back().partitions.reserve(sent.size());  // (no reallocation)
    }
    r.responses.back().partitions.push_back(std::move(pd));
  }
  notef("broker {} answers:{}", node, list);
  protocol::bytes out;
  if (protocol::encode(r, 12, out)) fail("codec", "Fetch answer does not encode");
  return out;
}

void simulation::on_fetch_response(std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                                   std::shared_ptr<const protocol::bytes> frame,
                                   const data::fetch_set& sent) {
  const auto answer = planner_.on_answer(now_, md_, node, ec, r, sent);
  using nk = data::fetch_note::kind;
  for (const auto& n : answer.notes) {
    if (n.what == nk::log_end_cut) {
      push_cut(n.tp, n.end, -1, detail::cut_kind::log_end, n.halted);
    } else if (n.what == nk::out_of_range) {
      notef("bg: {} offset {} out of range: reset", name(n.tp), n.offset);
      if (n.halted) fail("driver", "out of range halted with auto.offset.reset=earliest");
    }
  }
  if (answer.refresh_metadata) maybe_refresh_metadata();
  if (answer.retry_at) schedule_retry_at(*answer.retry_at);
  calls_.deliver(answer.slices, frame, node);
  if (answer.plan_again) pump();
}

void simulation::auto_commit() {
  std::map<TopicPartition, detail::epoch_offset> consumed;
  {
    std::lock_guard lock(shared_.mutex);
    consumed = shared_.consumed;
  }
  for (const auto& [tp, m] : data::auto_commit_due(consumed, owned_, last_auto_committed_)) {
    last_auto_committed_[tp] = m.offset;
    log(tp).committed = {m.offset, m.epoch};
    commit(tp, m.offset, "auto-commit");
  }
  at(now_ + milliseconds(rng_.between(100, 1000)), "bg: auto-commit", [this] { auto_commit(); });
}

// ---- the application and the checks ------------------------------------------------------------------

void simulation::commit(const TopicPartition& tp, std::int64_t offset, const char* who) {
  notef("{} commits {} at {}", who, name(tp), offset);
  const auto last = last_commit_.find(tp);
  if (last != last_commit_.end() && offset < last->second) {
    // Invariant 4: back only to (or past) a position the application or a truncation moved to
    // since the last commit.
    const auto& s = sanctioned_[tp];
    if (s.empty() || *s.begin() > offset)
      fail("4 (committed offsets never move back without a seek or a truncation)",
           fmt::format("{} committed {} after {} (positions moved to since: {})", name(tp), offset,
                       last->second, fmt::join(s, ", ")));
  }
  sanctioned_[tp].clear();
  last_commit_[tp] = offset;
}

void simulation::on_position_event(const detail::position_event& e) {
  const auto& tp = e.tp;
  const bool diverged = e.cut == detail::cut_kind::diverged;
  const std::optional<time_point> cut_time = diverged ? divergences_.take(tp) : std::nullopt;
  const auto before = reader_.positions().position(tp);
  // A position computed before a seek the fetcher has not applied yet is ignored by the reader;
  // it cannot be the answer to that seek (seed 796482694773: a reset's answer arrived between the
  // application's seek_to_end() and its seek_applied, and used up the seek_to of the answer after).
  const bool stale = reader_.positions().seek_in_flight(tp);
  reader_.position_event(e, owned_.count(tp) > 0);
  note(
      fmt::format("app: position event {} offset {} epoch {} forced {} seek_applied {} cut {} -> position {}",
                  name(tp), e.offset, e.epoch, e.forced, e.seek_applied, static_cast<int>(e.cut),
                  reader_.positions().position(tp).value_or(detail::epoch_offset{}).offset));
  if (e.seek_applied) return;
  if (cut_time) divergences_.applied(tp, *cut_time);
  const auto after = reader_.positions().position(tp);
  // A resolved seek_to_*() may move the position either way; each forced position uses one up.
  struct use_seek_to {
    int& pending;
    bool forced;
    ~use_seek_to() {
      if (forced && pending > 0) --pending;
    }
  } used{seek_tos_pending_[tp], e.forced && !stale};
  if (!after || (before && before->offset == after->offset)) return;
  const auto exp = expected_.find(tp);
  if (exp != expected_.end() && after->offset != exp->second) {
    if (after->offset < exp->second) {
      const bool why = e.forced || (diverged && after->offset == e.offset) || seek_tos_pending_[tp] > 0;
      if (!why)
        fail("2 (no skip)", fmt::format("{}: the position moved back from {} to {} without a cause", name(tp),
                                        exp->second, after->offset));
    } else {
      // Forward only past records retention removed (a reset to the log's start), by seek_to, or
      // by a reset with auto.offset.reset=latest.
      const bool why = seek_tos_pending_[tp] > 0 || (e.forced && log(tp).log_start > exp->second) ||
                       (e.forced && policy_ == data::reset_policy::latest) ||
                       compacted_between(tp, exp->second, after->offset);
      if (!why)
        fail("2 (no skip)",
             fmt::format(
                 "{}: the position jumped forward from {} to {} (log start {}, end {}), skipping records",
                 name(tp), exp->second, after->offset, log(tp).log_start, log(tp).end()));
    }
  }
  expected_[tp] = after->offset;
  sanctioned_[tp].insert(after->offset);
}

void simulation::check_record(const ConsumerRecord& r, record_lookup& look) {
  if (!look.valid || look.tp.partition != r.partition || look.tp.topic != r.topic) {
    look = record_lookup{};
    look.valid = true;
    look.tp = TopicPartition{std::string(r.topic), r.partition};
    look.expected = expected_.find(look.tp);
  }
  const TopicPartition& tp = look.tp;
  ++returned_count_;
  if (verbose_) notef("app: record {}@{} epoch {}", name(tp), r.offset, r.leader_epoch);
  std::int64_t id = -1;
  if (r.value) {
    // (std::stoll's answer, and its exception, for a value that is not all digits.)
    const auto& v = *r.value;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
    if (ec != std::errc{} || end != v.data() + v.size() || v.empty() || v[0] == '-')
      id = std::stoll(std::string(v));
  }
  const auto* w = appended_at(id);
  if (w == nullptr || w->first != tp || w->second != r.offset)
    fail("1 (offsets)", fmt::format("{} offset {} holds id {}, appended at {}", name(tp), r.offset, id,
                                    w == nullptr ? std::string("nowhere")
                                                 : fmt::format("{} offset {}", name(w->first), w->second)));
  const auto exp = look.expected;
  if (exp == expected_.end() || (r.offset != exp->second && !compacted_before(tp, exp->second, r.offset, id)))
    fail("2 (no skip)", fmt::format("{}: record at offset {} returned, the application's position is {}",
                                    name(tp), r.offset, exp == expected_.end() ? -1 : exp->second));
  if (const auto seen = divergences_.returned_past(tp, truncated_, id))
    fail("3 (no record past a detected divergence)",
         fmt::format("{} offset {} (id {}) was truncated at {} ms, before the divergence the reader applied "
                     "(found at {} ms)",
                     name(tp), r.offset, id, ms(truncated_.died.at(id)), ms(*seen)));
  exp->second = r.offset + 1;
  if (!look.epochs) look.epochs = &returned_epochs_[tp];
  look.epochs->set(r.offset, r.leader_epoch);
}

void simulation::poll() {
  // consumer_poll.cpp's poll_records(): publish, events, errors, drain.
  reader_.publish_returned();
  for (int round = 0; round < 4; ++round) {
    for (;;) {
      detail::user_event e;
      {
        std::lock_guard lock(shared_.mutex);
        if (shared_.events.empty()) break;
        e = std::move(shared_.events.front());
        shared_.events.pop_front();
      }
      if (auto* pe = std::get_if<detail::position_event>(&e))
        on_position_event(*pe);
      else if (auto* de = std::get_if<detail::data_error>(&e))
        reader_.push_error(*de);
    }
    try {
      reader_.raise_data_error();
    } catch (const std::exception& x) {
      fail("data error", std::string("poll() raised: ") + x.what());
    }
    if (verbose_) {
      std::string q;
      std::lock_guard lock(shared_.mutex);
      for (const auto& d : shared_.fetched) q += fmt::format(" {}@{}", name(d.tp), d.fetch_offset);
      note("app: fetched queue:" + q);
    }
    auto batch = reader_.drain();
    if (!batch.records.empty()) {
      notef("app: poll returned {} records, first {}-{}@{}", batch.records.size(),
            batch.records.front().topic, batch.records.front().partition, batch.records.front().offset);
    }
    record_lookup look;
    for (const auto& r : batch.records) check_record(r, look);
    if (!batch.records.empty()) break;
    std::lock_guard lock(shared_.mutex);
    if (shared_.events.empty()) break;
  }
  if (!fault_phase() && !paused_.empty()) {
    note("app: resumes every partition (quiet phase)");
    reader_.resume(paused_);
    paused_.clear();
  }
  if (fault_phase()) app_action();
  auto next = milliseconds(rng_.between(1, 40));
  if (fault_phase() && rng_.chance(0.02)) next += milliseconds(rng_.between(200, 2000));
  at(now_ + next, "app: poll", [this] { poll(); });
}

void simulation::app_action() {
  auto it = owned_.begin();
  std::advance(it, rng_.below(static_cast<std::int64_t>(owned_.size())));
  const TopicPartition tp = *it;
  if (rng_.chance(0.03)) {
    const auto& back = returned_epochs_[tp];
    if (back.empty()) return;
    const std::int64_t target =
        back.offset_at(static_cast<std::size_t>(rng_.below(static_cast<std::int64_t>(back.size()))));
    std::int32_t epoch = -1;
    if (rng_.chance(0.5)) {
      if (const auto* prev = back.find(target - 1)) epoch = *prev;
    }
    notef("app: seek {} to {} epoch {}", name(tp), target, epoch);
    reader_.seek(tp, target, epoch);
    expected_[tp] = target;
    sanctioned_[tp].insert(target);
  } else if (rng_.chance(0.01)) {
    const bool beginning = rng_.chance(0.5);
    notef("app: seek_to_{} {}", beginning ? "beginning" : "end", name(tp));
    ++seek_tos_pending_[tp];
    reader_.seek_to({tp}, beginning);
  } else if (rng_.chance(0.02) && !paused_.count(tp)) {
    notef("app: pause {}", name(tp));
    paused_.insert(tp);
    reader_.pause({tp});
  } else if (rng_.chance(0.1) && paused_.count(tp)) {
    notef("app: resume {}", name(tp));
    paused_.erase(tp);
    reader_.resume({tp});
  } else if (rng_.chance(0.01) && !paused_.count(tp)) {
    notef("app: resume {} (not paused: nothing to do)", name(tp));
    reader_.resume({tp});
  } else if (sync_commits_ && rng_.chance(0.01) && expected_.count(tp)) {
    // commit_sync() of an explicit offset (consumer_offsets.cpp): after a record the application
    // processed (record.offset() + 1), never below the last commit (that is the application's own
    // choice, not the client's).
    const std::int64_t o = expected_[tp] - rng_.below(3);
    const auto last = last_commit_.find(tp);
    if (o >= 0 && (last == last_commit_.end() || o >= last->second)) {
      reader_.offsets_committed({{tp, {o, "", std::nullopt}}});
      log(tp).committed = {o, -1};
      last_auto_committed_[tp] = o;
      commit(tp, o, "app: commit of an explicit offset");
    }
  } else if (sync_commits_ && rng_.chance(0.03)) {
    // commit_sync() without offsets (consumer_impl.hpp): the positions, which auto-commit then
    // commits from as well.
    const auto offsets = reader_.positions_for_commit();
    for (const auto& [ctp, m] : offsets) {
      if (!owned_.count(ctp)) continue;
      log(ctp).committed = {m.offset, m.leader_epoch.value_or(-1)};
      last_auto_committed_[ctp] = m.offset;
      commit(ctp, m.offset, "app: sync commit");
    }
  }
}

void simulation::check_end() {
  for (const auto& [tp, l] : logs_) {
    const auto pos = reader_.positions().position(tp);
    const auto exp = expected_.find(tp);
    // The application's last record may be followed by offsets the cleaner emptied (an unclean
    // election can cut the log back into a compacted stretch); the reader's position is past them.
    if (!pos || pos->offset != l.end() || exp == expected_.end() ||
        (exp->second != l.end() && !compacted_between(tp, exp->second, l.end()))) {
      std::string events;
      for (const auto& t : part_trace_[tp]) events += "\n" + line(t);
      fail("6 (liveness)",
           fmt::format("{}: {} ms after the last fault the application's position is {} (reader {}), the log "
                       "ends at {} (start {}); fetch state {}, fetch position {}. The last events of {}:{}",
                       name(tp), ms(now_) - ms(quiet_at_), exp == expected_.end() ? -1 : exp->second,
                       pos ? pos->offset : -1, l.end(), l.log_start, data::to_string(fp_.find(tp)->state()),
                       fp_.find(tp)->fetch_pos(), name(tp), events));
    }
  }
}

run_result simulation::run() {
  run_result out;
  bool ended = false;
  try {
    setup();
    detail::data_reader::options o;
    o.max_poll_records = static_cast<std::size_t>(rng_.between(10, 200));
    reader_.configure(o);
    // fetcher::assign and the facade's assign(): every partition, from now on.
    fp_.assign(owned_);
    reader_.assign(owned_);
    pump();
    at(now_ + milliseconds(rng_.between(0, 50)), "produce", [this] { produce(); });
    at(now_ + milliseconds(rng_.between(100, 1500)), "fault", [this] { fault(); });
    at(now_ + milliseconds(rng_.between(1, 40)), "app: poll", [this] { poll(); });
    if (compacted_topic_)
      at(now_ + milliseconds(compaction_rng_.between(200, 2000)), "compact", [this] { compact(); });
    if (restarts_) at(now_ + milliseconds(restart_rng_.between(500, 5000)), "crash", [this] { crash(); });
    if (auto_commit_on_)
      at(now_ + milliseconds(rng_.between(100, 1000)), "bg: auto-commit", [this] { auto_commit(); });
    at(end_at_, "end", [this, &ended] {
      check_end();
      ended = true;
    });
    while (!ended && !queue_.empty()) {
      auto [what, f] = queue_.next();
      if (traced_ && what != "produce" && what != "app: poll" && what != "fault" && what != "compact" &&
          what != "crash" && what != "restart" && what != "fence")
        note(std::move(what));
      f();
      if (fp_.invalid_transitions() != 0)
        fail("5 (no invalid transition)", "fetch_positions refused: " + fp_.last_refusal());
    }
  } catch (const violation& v) {
    out.ok = false;
    out.invariant = v.invariant;
    out.message = v.message;
  }
  if (!out.ok) {
    for (const auto& t : trace_) out.trace += line(t) + "\n";
  }
  out.simulated_seconds = std::chrono::duration<double>(now_ - start_).count();
  return out;
}

}  // namespace

run_result run_seed(std::uint64_t seed, bool verbose) {
  auto r = std::make_unique<simulation>(seed, verbose, false)->run();
  if (r.ok || verbose) return r;
  // A failed seed without its trace (a passing one formats none): it runs again, with the trace.
  return replay_traced(r, std::make_unique<simulation>(seed, false, true)->run());
}

}  // namespace kgroup::sim
