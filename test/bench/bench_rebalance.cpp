// kgroup-bench-rebalance: how long rebalances take and how long partitions go unowned (issue 4).
//
// Setup: a 3-broker librdkafka mock cluster, one 24-partition topic, session.timeout.ms 6000 and
// heartbeat.interval.ms 500. For each rebalance protocol (eager = range, cooperative =
// cooperative-sticky, consumer = KIP-848's group.protocol=consumer, where the mock coordinator
// assigns, hands out a 500 ms heartbeat interval and fences a member silent for 6 s; librdkafka
// 2.15's mock only, so it is skipped on 2.0.2's) and each client (kgroup, librdkafka), on a fresh
// mock cluster and group:
//   start  3 members start together and settle
//   join   a 4th member joins
//   leave  one member leaves cleanly (SIGTERM: the member closes, so it revokes and sends LeaveGroup)
//   kill   one member is killed (SIGKILL: no revoke, no LeaveGroup; the coordinator notices when
//          its session expires)
// Prints one line per phase:
//   client=kgroup|librdkafka protocol=eager|cooperative|consumer phase=NAME settle_ms=N unowned_partitions=N
//   max_unowned_ms=N overlaps=N
// then '#' lines: per scenario the number of group generations each phase went through, and the
// clients side by side, phase by phase.
//
// Every member runs in its own child process (this binary re-executed with --child), so "killed"
// is a real SIGKILL for both clients: kgroup has no public way to stop heartbeating without
// leaving, and killing the process is what the scenario means. Children write their listener
// events with CLOCK_MONOTONIC timestamps (std::chrono::steady_clock, shared by all processes on
// Linux) to a pipe; the parent merges them into one timeline.
//
// Measures, per phase (t0 = the moment the phase's action starts):
//   settle_ms            from t0 to the last ownership event (an assign callback starting, a revoke
//                        returning) before the group was seen settled: every partition owned by
//                        exactly one live member, members' counts within one of each other, and
//                        every member reporting itself settled (kgroup: group_state() "stable" and
//                        assignment() equal to what its listener was told; librdkafka: join state
//                        "steady" and rd_kafka_assignment() equal to what its callback was told),
//                        held for a quiet second.
//   unowned_partitions   partitions without an owner at some point in [t0, settled]: from a
//                        revoke/lost returning (or the kill) until an assign callback starts.
//   max_unowned_ms       the longest such gap, clipped to the phase.
//   overlaps             a partition assigned while another member still owned it (must be 0); a
//                        killed member's ownership ends at the kill.
// The mock's own timers dominate (first join waits 3 s; a rebalance of a stable group waits
// session.timeout.ms - 1 s), so compare the clients side by side rather than with real Kafka.
// Generations: an eager phase needs one, a cooperative join two (revoke, then assign). More mean
// the mock repeated a rebalance, usually because of its SyncGroup race: librdkafka 2.0.2's mock
// completes the sync as soon as the leader's SyncGroup arrives and answers INVALID_REQUEST to a
// follower whose SyncGroup arrives after it (real Kafka answers it with its assignment); that
// follower rejoins, and the rebalance costs another session.timeout.ms - 1 s. A leader that
// fetches metadata and assigns quickly loses that race more often, so the raw mock penalises fast
// leaders (kgroup's, in practice) by timing luck. To measure the clients rather than the race,
// every mock broker delays its responses by --rtt-ms (default 10): the leader's metadata round
// trip then puts its SyncGroup at least that long behind the followers'. Both clients run with the
// same delay; it adds a few tens of milliseconds to each phase. --rtt-ms 0 shows the raw mock.
// Look at the generations before reading a difference in settle_ms as a difference between clients.
//
// Generations of a consumer (KIP-848) group are its group epochs: the coordinator bumps it once per
// membership change, and members reach it one by one, without a barrier.
//
// Usage: kgroup-bench-rebalance [--quick] [--protocol eager|cooperative|consumer] [--client kgroup|librdkafka]
//                               [--rtt-ms N] [--child-log PATH|""] [--events]
//   --quick      cooperative protocol, kgroup members only (the ctest smoke test).
//   --rtt-ms     delay of every mock broker response, default 10 (0: the raw mock; see above).
//   --child-log  where the members' stderr goes (default /tmp/kgroup-bench-rebalance.PID.log,
//                removed after a successful run; "" inherits this process's stderr).
//   --events     also print every merged listener event to stderr, relative to the scenario start.
// Exit status 1 if a phase did not settle within 120 s or any overlap was seen.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "group_harness.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/log.hpp"
#include "mock_cluster.hpp"
#include "rdkafka_member.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using kgroup::TopicPartition;
using kgroup::test::steady;
using kgroup::test::timeline;

constexpr int partition_count = 24;
constexpr const char* topic_name = "bench";
constexpr auto phase_limit = 120s;
constexpr auto quiet_window = 1s;
// The child's --strategy for protocol=consumer: group.protocol=consumer, no client-side assignor.
constexpr const char* kip848_strategy = "kip848";

std::int64_t to_ns(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
steady::time_point from_ns(std::int64_t ns) {
  return steady::time_point(std::chrono::duration_cast<steady::duration>(std::chrono::nanoseconds(ns)));
}
long ms_between(steady::time_point a, steady::time_point b) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count());
}

// ---- child side ----------------------------------------------------------------------------------

volatile std::sig_atomic_t g_stop = 0;
void on_sigterm(int) { g_stop = 1; }

// Child output: one line per write, under a lock, flushed at once.
//   E <ns> a|r|l <topic>:<p>,...   (or '-' for no partitions)
//   S <ns> 0|1 <generation>        settled from this member's own point of view; its generation
std::mutex g_out_mutex;
void emit_line(const std::string& line) {
  std::lock_guard lock(g_out_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void emit_event(timeline::kind k, const std::vector<TopicPartition>& parts) {
  std::string line = "E " + std::to_string(to_ns(steady::now())) + " ";
  line += k == timeline::kind::assigned ? "a" : k == timeline::kind::revoked ? "r" : "l";
  line += " ";
  if (parts.empty()) line += "-";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) line += ",";
    line += parts[i].topic + ":" + std::to_string(parts[i].partition);
  }
  emit_line(line);
}

void emit_status(bool settled, std::int32_t generation) {
  emit_line("S " + std::to_string(to_ns(steady::now())) + (settled ? " 1 " : " 0 ") + std::to_string(generation));
}

// The kgroup listener of a child: reports each callback like recording_listener does (assigned
// when it starts, revoked/lost when it returns).
class child_listener : public kgroup::ConsumerRebalanceListener {
 public:
  void on_partitions_assigned(const std::vector<TopicPartition>& p) override {
    emit_event(timeline::kind::assigned, p);
    std::lock_guard lock(mutex_);
    owned_.insert(p.begin(), p.end());
  }
  void on_partitions_revoked(const std::vector<TopicPartition>& p) override {
    {
      std::lock_guard lock(mutex_);
      for (const auto& tp : p) owned_.erase(tp);
    }
    emit_event(timeline::kind::revoked, p);
  }
  void on_partitions_lost(const std::vector<TopicPartition>& p) override {
    {
      std::lock_guard lock(mutex_);
      owned_.clear();
    }
    emit_event(timeline::kind::lost, p);
  }
  std::set<TopicPartition> owned() const {
    std::lock_guard lock(mutex_);
    return owned_;
  }

 private:
  mutable std::mutex mutex_;
  std::set<TopicPartition> owned_;
};

struct child_args {
  std::string client, bootstrap, group, strategy, topic, name;
};

int run_kgroup_child(const child_args& a) {
  // Warnings and errors only, unless $KGROUP_BENCH_LOG_LEVEL names another level (as
  // KGROUP_LOG_LEVEL does); each line names the child.
  const char* level = std::getenv("KGROUP_BENCH_LOG_LEVEL");
  kgroup::set_default_log_sink(kgroup::make_stderr_log_sink(
      level != nullptr ? kgroup::detail::log_level_from_name(level) : kgroup::LogLevel::warn, a.name));
  kgroup::Config config{{"bootstrap.servers", a.bootstrap}, {"group.id", a.group}, {"client.id", a.name}};
  if (a.strategy == kip848_strategy) {
    config.set("group.protocol", "consumer");  // the coordinator assigns and sets the timers
  } else {
    config.set("session.timeout.ms", "6000");
    config.set("heartbeat.interval.ms", "500");
    config.set("partition.assignment.strategy", a.strategy);
  }
  kgroup::Consumer consumer(config);
  auto listener = std::make_shared<child_listener>();
  consumer.subscribe({a.topic}, listener);
  auto last_status = steady::time_point{};
  while (!g_stop) {
    try {
      consumer.poll(20ms);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: poll: %s\n", a.name.c_str(), e.what());
    }
    if (steady::now() - last_status >= 50ms) {
      last_status = steady::now();
      emit_status(consumer.group_state() == "stable" && consumer.assignment() == listener->owned(),
                  consumer.group_metadata().generation_id);
    }
  }
  try {
    consumer.close(20s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: close: %s\n", a.name.c_str(), e.what());
  }
  return 0;
}

int run_librdkafka_child(const child_args& a) {
  std::map<std::string, std::string> extra;
  if (a.strategy == kip848_strategy) extra["group.protocol"] = "consumer";
  kgroup::test::rdkafka_member member(
      a.name, a.bootstrap, a.group, a.strategy, {a.topic},
      [](const std::string&, timeline::kind k, const std::vector<TopicPartition>& p) { emit_event(k, p); }, extra);
  while (!g_stop) {
    std::this_thread::sleep_for(50ms);
    const auto join = member.last_join();
    emit_status(member.stable(), join ? join->generation : -1);
  }
  member.stop();
  for (const auto& e : member.errors()) std::fprintf(stderr, "%s: %s\n", a.name.c_str(), e.c_str());
  return 0;
}

int run_child(const child_args& a) {
  // Die with the parent; stop cleanly on SIGTERM.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    return a.client == "kgroup" ? run_kgroup_child(a) : run_librdkafka_child(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", a.name.c_str(), e.what());
    return 2;
  }
}

// ---- parent side ---------------------------------------------------------------------------------

struct event {
  steady::time_point at;
  std::string member;
  timeline::kind what;
  std::vector<TopicPartition> parts;
};

struct status {
  steady::time_point at{};
  bool settled = false;
  std::int32_t generation = -1;
};

// Everything the children reported, merged.
class recorder {
 public:
  void add(event e) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(e));
  }
  void set_status(const std::string& member, status s) {
    std::lock_guard lock(mutex_);
    statuses_[member] = s;
  }
  // Events in time order.
  std::vector<event> events() const {
    std::vector<event> out;
    {
      std::lock_guard lock(mutex_);
      out = events_;
    }
    std::stable_sort(out.begin(), out.end(), [](const event& a, const event& b) { return a.at < b.at; });
    return out;
  }
  std::size_t event_count() const {
    std::lock_guard lock(mutex_);
    return events_.size();
  }
  /// The highest generation any member reported so far.
  std::int32_t max_generation() const {
    std::lock_guard lock(mutex_);
    std::int32_t g = -1;
    for (const auto& [name, st] : statuses_) g = std::max(g, st.generation);
    return g;
  }
  std::optional<status> status_of(const std::string& member) const {
    std::lock_guard lock(mutex_);
    auto it = statuses_.find(member);
    if (it == statuses_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<event> events_;
  std::map<std::string, status> statuses_;
};

std::vector<TopicPartition> parse_partitions(const std::string& text) {
  std::vector<TopicPartition> out;
  if (text == "-") return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.rfind(':');
    if (colon == std::string::npos) continue;
    out.push_back({item.substr(0, colon), std::atoi(item.c_str() + colon + 1)});
  }
  return out;
}

// One member in a child process; a thread reads what it reports.
class child_member {
 public:
  child_member(const std::string& self_exe, const child_args& a, const std::string& log_path, recorder& rec)
      : name_(a.name), rec_(rec) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    if (!log_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    std::vector<std::string> args{self_exe,    "--child",  a.client,    "--bootstrap", a.bootstrap, "--group", a.group,
                                  "--strategy", a.strategy, "--topic",   a.topic,       "--name",    a.name};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, self_exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    }
    reader_ = std::thread([this, fd = fds[0]] { read_loop(fd); });
  }
  ~child_member() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      wait_exit(5s);
    }
    if (reader_.joinable()) reader_.join();
  }
  child_member(const child_member&) = delete;
  child_member& operator=(const child_member&) = delete;

  const std::string& name() const { return name_; }
  /// Clean leave: the child closes its consumer and exits.
  void terminate() { ::kill(pid_, SIGTERM); }
  /// Crash: no callbacks, no LeaveGroup.
  void kill() { ::kill(pid_, SIGKILL); }
  /// Waits for the child to exit (SIGKILL after `limit`).
  void wait_exit(std::chrono::milliseconds limit) {
    if (reaped_) return;
    const auto deadline = steady::now() + limit;
    int st = 0;
    while (waitpid(pid_, &st, WNOHANG) == 0) {
      if (steady::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    reaped_ = true;
    if (reader_.joinable()) reader_.join();
  }

 private:
  void read_loop(int fd) {
    FILE* f = fdopen(fd, "r");
    if (f == nullptr) {
      close(fd);
      return;
    }
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
      std::string s(line, static_cast<std::size_t>(n));
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      std::stringstream ss(s);
      std::string tag, kind, parts;
      long long ns = 0;
      ss >> tag >> ns;
      if (tag == "E") {
        ss >> kind >> parts;
        const auto k = kind == "a" ? timeline::kind::assigned : kind == "r" ? timeline::kind::revoked : timeline::kind::lost;
        rec_.add({from_ns(ns), name_, k, parse_partitions(parts)});
      } else if (tag == "S") {
        int settled = 0;
        std::int32_t generation = -1;
        ss >> settled >> generation;
        rec_.set_status(name_, {from_ns(ns), settled != 0, generation});
      }
    }
    std::free(line);
    std::fclose(f);
  }

  std::string name_;
  recorder& rec_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::thread reader_;
};

// Ownership per member after replaying `events`.
std::map<std::string, std::set<TopicPartition>> ownership(const std::vector<event>& events) {
  std::map<std::string, std::set<TopicPartition>> owned;
  for (const auto& e : events) {
    auto& mine = owned[e.member];
    if (e.what == timeline::kind::assigned) {
      mine.insert(e.parts.begin(), e.parts.end());
    } else if (e.what == timeline::kind::revoked) {
      for (const auto& tp : e.parts) mine.erase(tp);
    } else {
      mine.clear();
    }
  }
  return owned;
}

bool settled_now(const recorder& rec, const std::vector<std::string>& alive) {
  const auto events = rec.events();
  const auto owned = ownership(events);
  std::set<TopicPartition> all;
  std::size_t total = 0, lo = SIZE_MAX, hi = 0;
  for (const auto& m : alive) {
    const auto st = rec.status_of(m);
    if (!st || !st->settled) return false;
    // The status must be newer than the member's last event.
    for (const auto& e : events) {
      if (e.member == m && e.at > st->at) return false;
    }
    auto it = owned.find(m);
    const std::size_t n = it == owned.end() ? 0 : it->second.size();
    if (it != owned.end()) all.insert(it->second.begin(), it->second.end());
    total += n;
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  return total == static_cast<std::size_t>(partition_count) && all.size() == total && hi - lo <= 1;
}

struct phase_result {
  std::string name;
  long settle_ms = -1;
  int unowned_partitions = 0;
  long max_unowned_ms = 0;
  int overlaps = 0;
  int generations = 0;  // group generations the phase went through (mock races add some)
};

// Waits until the group is settled for a quiet window; returns when it first was (nullopt on
// timeout).
std::optional<steady::time_point> wait_settled(const recorder& rec, const std::vector<std::string>& alive) {
  const auto deadline = steady::now() + phase_limit;
  std::optional<steady::time_point> since;
  std::size_t events_then = 0;
  while (steady::now() < deadline) {
    if (settled_now(rec, alive)) {
      if (!since) {
        since = steady::now();
        events_then = rec.event_count();
      } else if (rec.event_count() != events_then) {
        since = steady::now();  // something moved meanwhile: start the window again
        events_then = rec.event_count();
      } else if (steady::now() - *since >= quiet_window) {
        return since;
      }
    } else {
      since.reset();
    }
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

// Fills the measures of one phase from the merged events. `scenario_start`: when every partition
// began unowned (the first phase's t0).
void analyse(const std::vector<event>& all_events, steady::time_point scenario_start, steady::time_point t0,
             steady::time_point settled_seen, std::size_t overlaps_before, phase_result& out) {
  // `all_events` holds everything received until now, after the quiet window that followed
  // `settled_seen`; the settle time and the unowned gaps end at the settle, overlaps include the window.
  // Settle time: the last ownership event before the group was seen settled.
  steady::time_point last = t0;
  for (const auto& e : all_events) {
    if (e.at >= t0 && e.at <= settled_seen) last = std::max(last, e.at);
  }
  out.settle_ms = ms_between(t0, last);
  const steady::time_point end = last;

  // Unowned gaps, replayed from the beginning of the scenario.
  std::map<TopicPartition, std::set<std::string>> owners;
  std::map<TopicPartition, steady::time_point> unowned_since;
  for (int p = 0; p < partition_count; ++p) unowned_since[{topic_name, p}] = scenario_start;
  std::set<TopicPartition> gapped;
  steady::duration longest{};
  // A gap [since, at] counts if it reaches into [t0, end]; its length is clipped to the phase.
  auto close_gap = [&](const TopicPartition& tp, steady::time_point at) {
    const auto since = unowned_since[tp];
    if (at <= t0 || since > end || at <= since) return;
    gapped.insert(tp);
    const auto length = std::min(at, end) - std::max(since, t0);
    if (length > longest) longest = length;
  };
  for (const auto& e : all_events) {
    if (e.at > end) break;
    for (const auto& tp : e.parts) {
      auto& o = owners[tp];
      if (e.what == timeline::kind::assigned) {
        if (o.empty()) close_gap(tp, e.at);
        o.insert(e.member);
      } else if (o.erase(e.member) != 0 && o.empty()) {
        unowned_since[tp] = e.at;
      }
    }
  }
  for (int p = 0; p < partition_count; ++p) {
    const TopicPartition tp{topic_name, p};
    if (owners[tp].empty()) close_gap(tp, end);  // still unowned: not settled, but report it
  }
  out.unowned_partitions = static_cast<int>(gapped.size());
  out.max_unowned_ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(longest).count());

  // Overlaps, with the harness's own check, over every event so far (the phase and its quiet window).
  timeline t;
  for (const auto& e : all_events) t.record(e.member, e.what, e.parts);
  out.overlaps = static_cast<int>(t.overlaps().size() - overlaps_before);
}

std::size_t overlaps_until(const std::vector<event>& all_events, steady::time_point until) {
  timeline t;
  for (const auto& e : all_events) {
    if (e.at > until) break;
    t.record(e.member, e.what, e.parts);
  }
  return t.overlaps().size();
}

struct scenario_result {
  std::string client, protocol;
  std::vector<phase_result> phases;
  bool ok = true;
};

struct options {
  std::string self_exe;
  std::string child_log;  // children's stderr goes here ("" = inherit)
  bool dump_events = false;
  int rtt_ms = 10;  // added to every mock broker response (see the top of this file)
};

// Prints the merged events of a scenario to stderr, relative to its start.
void dump_events(const std::vector<event>& events, steady::time_point start, const std::string& label) {
  for (const auto& e : events) {
    std::string parts;
    for (const auto& tp : e.parts) parts += (parts.empty() ? "" : ",") + std::to_string(tp.partition);
    std::fprintf(stderr, "%s %8.3f %s %s [%s]\n", label.c_str(),
                 std::chrono::duration<double>(e.at - start).count(), e.member.c_str(),
                 e.what == timeline::kind::assigned  ? "assigned"
                 : e.what == timeline::kind::revoked ? "revoked"
                                                     : "lost",
                 parts.c_str());
  }
}

scenario_result run_scenario(const options& opt, const std::string& client, const std::string& protocol) {
  scenario_result result{client, protocol, {}, true};
  const std::string strategy = protocol == "eager"         ? "range"
                               : protocol == "consumer" ? kip848_strategy
                                                        : "cooperative-sticky";
  kgroup::test::mock_cluster mc(3);
  if (protocol == "consumer" && !mc.set_consumer_group_timers(500, 6000)) {
    std::printf("# client=%s protocol=consumer: skipped, librdkafka %s's mock has no KIP-848 groups\n", client.c_str(),
                kgroup::test::mock_cluster::librdkafka_version_string().c_str());
    std::fflush(stdout);
    return result;
  }
  mc.create_topic(topic_name, partition_count);
  if (opt.rtt_ms > 0) mc.set_rtt(-1, opt.rtt_ms);
  recorder rec;
  const std::string group = "bench-" + client + "-" + protocol;
  std::map<std::string, std::unique_ptr<child_member>> members;
  std::vector<std::string> alive;
  auto spawn = [&](const std::string& name) {
    child_args a{client, mc.bootstrap_servers(), group, strategy, topic_name, name};
    members[name] = std::make_unique<child_member>(opt.self_exe, a, opt.child_log, rec);
    alive.push_back(name);
  };
  auto drop = [&](const std::string& name) { alive.erase(std::remove(alive.begin(), alive.end(), name), alive.end()); };

  const auto scenario_start = steady::now();
  // `generation_before`: the group's generation when the phase started.
  auto finish_phase = [&](const std::string& phase, steady::time_point t0, std::int32_t generation_before) {
    phase_result r;
    r.name = phase;
    const auto seen = wait_settled(rec, alive);
    r.generations = rec.max_generation() - generation_before;
    const auto events = rec.events();
    const std::size_t before = overlaps_until(events, t0 - std::chrono::nanoseconds(1));
    analyse(events, scenario_start, t0, seen.value_or(steady::now()), before, r);
    if (!seen) {
      r.settle_ms = -1;
      result.ok = false;
      if (opt.dump_events) dump_events(events, scenario_start, client + "/" + protocol);
    }
    if (r.overlaps != 0) result.ok = false;
    std::printf("client=%s protocol=%s phase=%s settle_ms=%ld unowned_partitions=%d max_unowned_ms=%ld overlaps=%d\n",
                client.c_str(), protocol.c_str(), phase.c_str(), r.settle_ms, r.unowned_partitions, r.max_unowned_ms,
                r.overlaps);
    std::fflush(stdout);
    result.phases.push_back(r);
    return seen.has_value();
  };
  auto print_generations = [&] {
    std::string line = "# client=" + client + " protocol=" + protocol + " generations";
    for (const auto& ph : result.phases) line += " " + ph.name + "=" + std::to_string(ph.generations);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };

  // start: three members start together.
  auto t0 = steady::now();
  // The mock numbers a new classic group's first generation 2 (its counter starts at 1); a new
  // consumer group starts at epoch 0.
  std::int32_t g0 = protocol == "consumer" ? 0 : 1;
  spawn("m1");
  spawn("m2");
  spawn("m3");
  if (!finish_phase("start", t0, g0)) {
    print_generations();
    return result;
  }

  // join: a fourth member.
  t0 = steady::now();
  g0 = rec.max_generation();
  spawn("m4");
  if (!finish_phase("join", t0, g0)) {
    print_generations();
    return result;
  }

  // leave: m2 closes cleanly (revoke, LeaveGroup) and exits.
  t0 = steady::now();
  g0 = rec.max_generation();
  members["m2"]->terminate();
  drop("m2");
  const bool left = finish_phase("leave", t0, g0);
  members["m2"]->wait_exit(30s);
  if (!left) {
    print_generations();
    return result;
  }

  // kill: m3 dies; its partitions are unowned from this moment (nobody consumes them).
  t0 = steady::now();
  g0 = rec.max_generation();
  members["m3"]->kill();
  {
    // A synthetic "lost" ends m3's ownership at the kill, with its partitions as last reported.
    const auto owned = ownership(rec.events());
    auto it = owned.find("m3");
    if (it != owned.end()) rec.add({t0, "m3", timeline::kind::lost, {it->second.begin(), it->second.end()}});
  }
  drop("m3");
  members["m3"]->wait_exit(5s);
  finish_phase("kill", t0, g0);
  print_generations();

  const std::size_t overlaps_before_shutdown = overlaps_until(rec.events(), steady::now());
  for (const auto& name : alive) members[name]->terminate();
  for (const auto& name : alive) members[name]->wait_exit(30s);
  if (const auto n = overlaps_until(rec.events(), steady::now()) - overlaps_before_shutdown; n != 0) {
    std::printf("# client=%s protocol=%s: %zu overlap(s) while the last members closed\n", client.c_str(),
                protocol.c_str(), n);
    result.ok = false;
  }
  if (opt.dump_events) dump_events(rec.events(), scenario_start, client + "/" + protocol);
  return result;
}

int usage() {
  std::fprintf(stderr,
               "usage: kgroup-bench-rebalance [--quick] [--protocol eager|cooperative|consumer] [--client kgroup|librdkafka]\n"
               "                              [--rtt-ms N] [--child-log PATH] [--events]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--child") {
    child_args a;
    if (args.size() < 2) return usage();
    a.client = args[1];
    for (std::size_t i = 2; i + 1 < args.size(); i += 2) {
      if (args[i] == "--bootstrap") a.bootstrap = args[i + 1];
      else if (args[i] == "--group") a.group = args[i + 1];
      else if (args[i] == "--strategy") a.strategy = args[i + 1];
      else if (args[i] == "--topic") a.topic = args[i + 1];
      else if (args[i] == "--name") a.name = args[i + 1];
    }
    return run_child(a);
  }

  std::vector<std::string> protocols{"eager", "cooperative"};
  if (kgroup::test::mock_cluster::modern()) protocols.push_back("consumer");
  std::vector<std::string> clients{"kgroup", "librdkafka"};
  options opt;
  opt.child_log = "/tmp/kgroup-bench-rebalance." + std::to_string(getpid()) + ".log";
  bool keep_log = false;  // the default log is removed after a successful run
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      protocols = {"cooperative"};
      clients = {"kgroup"};
    } else if (args[i] == "--protocol" && i + 1 < args.size()) {
      protocols = {args[++i]};
    } else if (args[i] == "--client" && i + 1 < args.size()) {
      clients = {args[++i]};
    } else if (args[i] == "--child-log" && i + 1 < args.size()) {
      opt.child_log = args[++i];
      keep_log = true;
    } else if (args[i] == "--rtt-ms" && i + 1 < args.size()) {
      opt.rtt_ms = std::atoi(args[++i].c_str());
    } else if (args[i] == "--events") {
      opt.dump_events = true;
    } else {
      return usage();
    }
  }
  for (const auto& p : protocols) {
    if (p != "eager" && p != "cooperative" && p != "consumer") return usage();
  }
  for (const auto& c : clients) {
    if (c != "kgroup" && c != "librdkafka") return usage();
  }
  // The children are this very binary.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::perror("readlink /proc/self/exe");
    return 2;
  }
  exe[n] = '\0';
  opt.self_exe = exe;
  signal(SIGPIPE, SIG_IGN);

  std::printf("# 3 mock brokers of librdkafka %s (responses delayed %d ms), topic '%s' with %d partitions,"
              " session.timeout.ms 6000, heartbeat.interval.ms 500; members in child processes (leave = SIGTERM,"
              " clean close; kill = SIGKILL)\n",
              kgroup::test::mock_cluster::librdkafka_version_string().c_str(), opt.rtt_ms, topic_name,
              partition_count);
  if (!opt.child_log.empty()) std::printf("# members' stderr: %s\n", opt.child_log.c_str());
  std::fflush(stdout);
  std::vector<scenario_result> results;
  bool ok = true;
  for (const auto& p : protocols) {
    for (const auto& c : clients) {
      results.push_back(run_scenario(opt, c, p));
      ok = ok && results.back().ok;
    }
  }
  // Side by side: kgroup against librdkafka, phase by phase.
  for (const auto& p : protocols) {
    const scenario_result* k = nullptr;
    const scenario_result* r = nullptr;
    for (const auto& s : results) {
      if (s.protocol == p && s.client == "kgroup") k = &s;
      if (s.protocol == p && s.client == "librdkafka") r = &s;
    }
    if (k == nullptr || r == nullptr) continue;
    for (std::size_t i = 0; i < std::min(k->phases.size(), r->phases.size()); ++i) {
      const auto& a = k->phases[i];
      const auto& b = r->phases[i];
      // Noise: the mock's timers fire within a few ms of their due time, but it checks sessions once
      // a second, so when a killed member is noticed varies by up to a second.
      const long noise_ms = a.name == "kill" ? 1000 : 100;
      std::string verdict = "n/a";
      if (a.settle_ms >= 0 && b.settle_ms >= 0) {
        const long diff = a.settle_ms - b.settle_ms;
        verdict = std::labs(diff) <= noise_ms ? "same within " + std::to_string(noise_ms) + " ms"
                  : diff < 0                  ? "kgroup faster by " + std::to_string(-diff) + " ms"
                                              : "kgroup slower by " + std::to_string(diff) + " ms";
      }
      std::printf(
          "# protocol=%s phase=%s settle_ms kgroup=%ld librdkafka=%ld (%s) unowned kgroup=%d librdkafka=%d"
          " generations kgroup=%d librdkafka=%d\n",
          p.c_str(), a.name.c_str(), a.settle_ms, b.settle_ms, verdict.c_str(), a.unowned_partitions,
          b.unowned_partitions, a.generations, b.generations);
    }
  }
  if (!ok) {
    std::printf("# FAILED: a phase did not settle within %lld s or an overlap was seen; members' logs kept in %s\n",
                static_cast<long long>(phase_limit.count()), opt.child_log.c_str());
  } else if (!opt.child_log.empty() && !keep_log) {
    std::remove(opt.child_log.c_str());
  }
  return ok ? 0 : 1;
}
