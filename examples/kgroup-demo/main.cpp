// kgroup-demo: a consumer group's life on an embedded mock Kafka cluster, told as a timeline.
//
// The parent process starts librdkafka's mock cluster (3 brokers, topic 'orders' with 12
// partitions), a producer that writes continuously, and then runs a scripted story with kgroup
// members:
//   1. three members join          4. one is killed (SIGKILL: no revoke, no LeaveGroup)
//   2. a fourth member joins       5. one stalls in its poll loop past max.poll.interval.ms
//   3. one leaves cleanly
// Steps 3-5 pick members that are not the group leader (preferably member-2, member-3, member-1),
// so the leader, the only member that sees the member list, can name who left and joined.
// It prints each listener call as it happens, then for every step the rebalances it caused (why,
// per member, from Consumer::metrics()), how long each partition went without a consuming owner,
// and at the end a summary table and record totals (produced, consumed, duplicates, missing).
//
// Decision: every member runs in its own child process (this binary re-executed with --member, a
// fork+exec, so no thread of the parent - the mock cluster's, the producer's - is duplicated).
// That makes "killed" a real SIGKILL: a kgroup Consumer has no public way to stop heartbeating
// without leaving the group, and a crashed process is what the story means. Members report over
// a pipe as lines of text with CLOCK_MONOTONIC timestamps (demo.hpp); the parent merges them.
//
// Every figure is measured: listener calls and records come from the members, rebalance causes
// and durations from each member's Consumer::metrics() history, "paused" is computed by the
// parent from those timestamps. A partition is paused from the moment its owner stops consuming
// it (revoke/lost callback returned, the owner was killed, or the owner's poll loop stalled)
// until an assign callback for it starts on another (or the same) member. The mock's own timers
// dominate the durations: a first join waits 3 s and every later rebalance waits
// session.timeout.ms - 1 s (librdkafka's mock group coordinator), so compare the protocols side by
// side (--protocol eager vs cooperative), not against real Kafka.
//
// Exit status 0 when the story ran as scripted (every step settled with every partition owned by a
// live member, no partition owned by two live members at once, every produced record consumed,
// every record's key the one produced at its offset); 1 otherwise, with the reason.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>

#include "demo.hpp"
#include "group_proxy.hpp"
#include "mock_cluster.hpp"
#include "secure_front.hpp"
#include "test_pki.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using demo::from_ns;
using demo::steady;
using demo::topic_name;

constexpr int broker_count = 3;
constexpr int partition_count = 12;
constexpr auto step_limit = 60s;      // a step that has not settled by then failed
constexpr auto quiet_window = 1s;     // settled = the group looked settled this long without a change
constexpr auto dwell = 2s;            // consuming between steps
constexpr auto journal_holdback = 300ms;  // members' lines arrive over separate pipes: sort them first

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

std::string partition_list(const std::vector<std::int32_t>& parts) {
  if (parts.empty()) return "nothing";
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += ", ";
    out += fmt::format("{}-{}", topic_name, parts[i]);
  }
  return out;
}
std::string short_list(const std::set<std::int32_t>& parts) {
  if (parts.empty()) return "-";
  std::string out;
  for (auto p : parts) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}
std::string with_commas(std::int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return v < 0 ? "-" + s : s;
}

// ---- what the members report, merged ---------------------------------------------------------

struct rebalance_report {  // one H line
  steady::time_point start;
  std::int64_t duration_ms = 0;
  std::int32_t generation = -1;
  bool completed = false;
  std::string cause, detail;
};

struct member_info {
  std::string member_id;
  std::vector<std::string> member_ids;  // every id it had (a member that left and rejoined gets a new one)
  bool leader = false;
  std::string http_endpoint;
  bool identity_seen = false;
  bool killed = false;
  bool stalled = false;       // inside its scripted stall (partitions not consumed)
  bool closed_cleanly = false;
  bool exited = false;
  std::string fate;
  std::set<std::int32_t> owned;
  steady::time_point last_ownership_event{};
  steady::time_point last_status{};
  std::string state;
  std::int32_t generation = -1;
  std::int64_t rebalance_total = 0;
  std::int64_t records = 0;   // from its C lines
  std::vector<rebalance_report> history;
  std::size_t history_reported = 0;  // how many of `history` a step summary already showed
  int lost_calls = 0;
  int stall_ends = 0;
};

struct pause_record {
  std::int32_t partition = 0;
  std::string from;  // the member that stopped consuming it ("" = nobody owned it yet)
  std::string to;
  steady::time_point start, end;
  std::string why;   // revoked, lost, killed, stalled, start
};

struct partition_info {
  std::string owner;  // "" = none
  std::optional<steady::time_point> paused_since;
  std::string paused_by, paused_why;
  std::vector<std::uint16_t> seen;  // times each offset was consumed, index = offset
};

class story_state {
 public:
  explicit story_state(steady::time_point t0) : t0_(t0), parts_(partition_count) {}

  steady::time_point t0() const { return t0_; }

  void add_member(const std::string& name) {
    std::lock_guard lock(mutex_);
    members_[name];
    order_.push_back(name);
  }

  // A line of text for the timeline, at `at`.
  void note(steady::time_point at, std::string text) {
    std::lock_guard lock(mutex_);
    note_locked(at, std::move(text));
  }

  /// Prints the journal entries older than the holdback (all of them with `all`), in time order.
  void flush_journal(bool all) {
    std::vector<std::pair<steady::time_point, std::string>> out;
    {
      std::lock_guard lock(mutex_);
      const auto limit = steady::now() - journal_holdback;
      std::stable_sort(journal_.begin(), journal_.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      auto it = journal_.begin();
      while (it != journal_.end() && (all || it->first <= limit)) ++it;
      out.assign(journal_.begin(), it);
      journal_.erase(journal_.begin(), it);
    }
    for (const auto& [at, text] : out) {
      // A line merged late (a member's pipe was slow) still prints with its own time.
      if (text.empty()) {
        fmt::print("\n");
      } else {
        fmt::print("[{:6.1f}s] {}\n", seconds(at - t0_), text);
      }
    }
    std::fflush(stdout);
  }

  /// One line from member `name` (see demo.hpp).
  void on_line(const std::string& name, const std::string& line) {
    std::istringstream in(line);
    std::string tag;
    long long ns = 0;
    in >> tag >> ns;
    if (!in) return;
    const auto at = from_ns(ns);
    std::lock_guard lock(mutex_);
    member_info& m = members_[name];
    if (tag == "A") {
      std::int32_t gen = -1;
      std::string list;
      in >> gen >> list;
      const auto ps = demo::decode_partitions(list);
      for (auto p : ps) assign_locked(name, p, at);
      m.last_ownership_event = at;
      note_locked(at, fmt::format("{} assigned {}{} (generation {})", name, partition_list(ps),
                                  ps.empty() ? " new" : "", gen));
    } else if (tag == "V" || tag == "L") {
      std::string list;
      in >> list;
      const auto ps = demo::decode_partitions(list);
      const bool lost = tag == "L";
      for (auto p : ps) release_locked(name, p, at, lost ? "lost" : "revoked");
      if (lost) {
        ++m.lost_calls;
        for (auto p : std::set<std::int32_t>(m.owned)) release_locked(name, p, at, "lost");
      }
      m.last_ownership_event = at;
      note_locked(at, fmt::format("{} {} {}", name, lost ? "lost" : "revoked", partition_list(ps)));
    } else if (tag == "C") {
      std::int32_t p = 0;
      long long first = 0, last = 0, bad = 0;
      in >> p >> first >> last >> bad;
      if (p < 0 || p >= partition_count || first < 0 || last < first) return;
      auto& seen = parts_[static_cast<std::size_t>(p)].seen;
      if (seen.size() <= static_cast<std::size_t>(last)) seen.resize(static_cast<std::size_t>(last) + 1, 0);
      for (long long o = first; o <= last; ++o) {
        auto& c = seen[static_cast<std::size_t>(o)];
        if (c < UINT16_MAX) ++c;
      }
      m.records += last - first + 1;
      bad_records_ += bad;
      if (!m.owned.count(p)) stray_records_ += last - first + 1;
    } else if (tag == "S") {
      std::int64_t records = 0;
      int leader = 0;
      in >> m.state >> m.generation >> m.rebalance_total >> records >> leader;
      m.leader = leader != 0;
      m.last_status = at;
    } else if (tag == "H") {
      rebalance_report r;
      long long start_ns = 0;
      int completed = 0;
      in >> start_ns >> r.duration_ms >> r.generation >> completed;
      r.start = from_ns(start_ns);
      r.completed = completed != 0;
      std::string rest;
      std::getline(in, rest);
      rest.erase(0, std::min(rest.size(), rest.find_first_not_of(' ')));
      const auto tab = rest.find('\t');
      r.cause = rest.substr(0, tab);
      if (tab != std::string::npos) r.detail = rest.substr(tab + 1);
      m.history.push_back(std::move(r));
    } else if (tag == "I") {
      std::string id, endpoint;
      in >> id >> endpoint;
      m.member_id = id == "-" ? "" : id;
      if (!m.member_id.empty()) m.member_ids.push_back(m.member_id);
      const std::string ep = endpoint == "-" ? "" : endpoint;
      if (!m.identity_seen || ep != m.http_endpoint) {
        note_locked(at, fmt::format("{} dashboard: {}", name, ep.empty() ? "(not available)" : "http://" + ep + "/"));
      }
      m.identity_seen = true;
      m.http_endpoint = ep;
    } else if (tag == "P") {
      std::string what;
      int ms = 0;
      in >> what >> ms;
      if (what == "begin") {
        m.stalled = true;
        for (auto p : m.owned) start_pause_locked(p, name, "stalled", at);
        note_locked(at, fmt::format("{} stops calling poll() for {:.1f} s (max.poll.interval.ms is {:.1f} s)", name,
                                    ms / 1000.0, max_poll_ms_ / 1000.0));
      } else {
        m.stalled = false;
        ++m.stall_ends;
        note_locked(at, fmt::format("{} calls poll() again after {:.1f} s", name, ms / 1000.0));
      }
    } else if (tag == "E") {
      std::string rest;
      std::getline(in, rest);
      errors_.push_back(name + ":" + rest);
      note_locked(at, fmt::format("{} error:{}", name, rest));
    } else if (tag == "X") {
      m.closed_cleanly = true;
      note_locked(at, fmt::format("{} closed its consumer (LeaveGroup sent)", name));
    }
  }

  void set_max_poll_ms(int ms) { max_poll_ms_ = ms; }

  /// The member was SIGKILLed at `at`: its partitions stop being consumed now.
  void killed(const std::string& name, steady::time_point at) {
    std::lock_guard lock(mutex_);
    member_info& m = members_[name];
    m.killed = true;
    for (auto p : m.owned) start_pause_locked(p, name, "killed", at);
  }

  void set_fate(const std::string& name, std::string fate) {
    std::lock_guard lock(mutex_);
    members_[name].fate = std::move(fate);
  }
  void exited(const std::string& name) {
    std::lock_guard lock(mutex_);
    members_[name].exited = true;
  }

  /// Every partition is owned by exactly one member of `alive` that consumes it, their shares
  /// differ by at most one, and each reports itself stable after its last ownership change.
  bool settled(const std::vector<std::string>& alive) const {
    std::lock_guard lock(mutex_);
    std::size_t lo = SIZE_MAX, hi = 0, total = 0;
    for (const auto& name : alive) {
      const auto it = members_.find(name);
      if (it == members_.end()) return false;
      const member_info& m = it->second;
      if (m.killed || m.stalled || m.state != "stable" || m.last_status <= m.last_ownership_event) return false;
      lo = std::min(lo, m.owned.size());
      hi = std::max(hi, m.owned.size());
      total += m.owned.size();
    }
    for (const auto& p : parts_) {
      if (p.owner.empty() || p.paused_since || std::find(alive.begin(), alive.end(), p.owner) == alive.end()) {
        return false;
      }
    }
    return total == static_cast<std::size_t>(partition_count) && hi - lo <= 1;
  }

  /// Ownership events so far (any member), to restart the quiet window when something moves.
  std::size_t ownership_events() const {
    std::lock_guard lock(mutex_);
    return ownership_events_;
  }
  steady::time_point last_ownership_event() const {
    std::lock_guard lock(mutex_);
    steady::time_point t{};
    for (const auto& [n, m] : members_) t = std::max(t, m.last_ownership_event);
    return t;
  }

  member_info member(const std::string& name) const {
    std::lock_guard lock(mutex_);
    const auto it = members_.find(name);
    return it == members_.end() ? member_info{} : it->second;
  }

  /// The rebalances (group generations) members finished since the last call, and the pauses
  /// that ended since the last call, as text lines; numbering continues across calls.
  std::vector<std::string> step_report() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    // Member ids in the leader's detail ("joined: <member id>") are shown as member names.
    auto named = [&](std::string text) {
      for (const auto& [name, m] : members_) {
        for (const auto& id : m.member_ids) {
          for (auto pos = text.find(id); pos != std::string::npos; pos = text.find(id, pos)) {
            text.replace(pos, id.size(), name);
            pos += name.size();
          }
        }
      }
      return text;
    };
    struct gen_view {
      std::int64_t longest_ms = 0;
      steady::time_point first_start = steady::time_point::max();
      std::vector<std::pair<std::string, std::string>> why;  // (reason, member)
      std::vector<std::string> abandoned;
    };
    std::map<std::int32_t, gen_view> gens;
    for (const auto& name : order_) {
      member_info& m = members_[name];
      for (; m.history_reported < m.history.size(); ++m.history_reported) {
        const auto& r = m.history[m.history_reported];
        auto& g = gens[r.generation];
        if (!r.completed) {
          g.abandoned.push_back(name);
          continue;
        }
        g.longest_ms = std::max(g.longest_ms, r.duration_ms);
        g.first_start = std::min(g.first_start, r.start);
        std::string reason = r.cause;
        if (!r.detail.empty()) reason += " (" + named(r.detail) + ")";
        g.why.emplace_back(reason, name);
      }
    }
    for (const auto& [gen, g] : gens) {
      if (g.why.empty()) {
        out.push_back(fmt::format("rebalance left unfinished by {} (generation {})", fmt::join(g.abandoned, ", "),
                                  gen));
        continue;
      }
      ++rebalance_count_;
      out.push_back(fmt::format("rebalance #{} -> generation {}: started at {:.1f}s, took up to {:.1f} s", rebalance_count_,
                                gen, seconds(g.first_start - t0_), g.longest_ms / 1000.0));
      // Group the members by the reason they saw.
      std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
      for (const auto& [reason, name] : g.why) {
        auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == reason; });
        if (it == reasons.end()) {
          reasons.push_back({reason, {name}});
        } else {
          it->second.push_back(name);
        }
      }
      for (const auto& [reason, names] : reasons) {
        out.push_back(fmt::format("    why, as {} saw it: {}", fmt::join(names, ", "), reason));
      }
    }
    // Pauses that ended since the last report, grouped by (from, to, why).
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<const pause_record*>> groups;
    for (; pauses_reported_ < pauses_.size(); ++pauses_reported_) {
      const auto& p = pauses_[pauses_reported_];
      groups[{p.from, p.to, p.why}].push_back(&p);
    }
    if (groups.empty()) {
      out.push_back("no partition was paused");
    }
    for (const auto& [key, list] : groups) {
      const auto& [from, to, why] = key;
      std::string items;
      for (const auto* p : list) {
        items += fmt::format("{}{}-{} {:.2f} s", items.empty() ? "" : ", ", topic_name, p->partition,
                             seconds(p->end - p->start));
      }
      if (from.empty()) {
        out.push_back(fmt::format("first owner {}: {}", to, items));
      } else {
        out.push_back(fmt::format("paused ({}: {} -> {}): {}", why, from, to, items));
      }
    }
    std::vector<std::int32_t> unmoved;
    for (std::int32_t p = 0; p < partition_count; ++p) {
      bool moved = false;
      for (const auto& [key, list] : groups) {
        for (const auto* r : list) moved = moved || r->partition == p;
      }
      if (!moved) unmoved.push_back(p);
    }
    if (!unmoved.empty() && unmoved.size() < static_cast<std::size_t>(partition_count)) {
      out.push_back(fmt::format("never paused in this step: {} partitions", unmoved.size()));
    }
    std::string owners, leader;
    for (const auto& name : order_) {
      if (members_[name].leader && !members_[name].killed && !members_[name].closed_cleanly) leader = name;
    }
    for (const auto& name : order_) {
      const member_info& m = members_[name];
      if (m.owned.empty() || m.killed) continue;
      owners += fmt::format("{}{} {}", owners.empty() ? "" : " | ", name, short_list(m.owned));
    }
    out.push_back(fmt::format("owners now: {}; group leader: {}", owners.empty() ? "-" : owners,
                              leader.empty() ? "?" : leader));
    return out;
  }

  struct totals {
    std::int64_t consumed = 0, distinct = 0, duplicates = 0, missing = 0, bad = 0, stray = 0;
  };
  /// Against `produced` (per partition) records.
  totals record_totals(const std::vector<std::int64_t>& produced) const {
    std::lock_guard lock(mutex_);
    totals t;
    t.bad = bad_records_;
    t.stray = stray_records_;
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      const auto& seen = parts_[p].seen;
      const std::int64_t n = p < produced.size() ? produced[p] : 0;
      for (std::int64_t o = 0; o < std::max<std::int64_t>(n, static_cast<std::int64_t>(seen.size())); ++o) {
        const std::int64_t c = o < static_cast<std::int64_t>(seen.size()) ? seen[static_cast<std::size_t>(o)] : 0;
        t.consumed += c;
        if (c > 0) ++t.distinct;
        if (c > 1) t.duplicates += c - 1;
        if (c == 0 && o < n) ++t.missing;
      }
    }
    return t;
  }

  std::int64_t records_consumed() const {
    std::lock_guard lock(mutex_);
    std::int64_t n = 0;
    for (const auto& [name, m] : members_) n += m.records;
    return n;
  }

  std::vector<pause_record> pauses() const {
    std::lock_guard lock(mutex_);
    return pauses_;
  }
  std::vector<std::string> overlaps() const {
    std::lock_guard lock(mutex_);
    return overlaps_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
  }
  std::vector<std::string> member_names() const {
    std::lock_guard lock(mutex_);
    return order_;
  }
  int rebalance_count() const {
    std::lock_guard lock(mutex_);
    return rebalance_count_;
  }

 private:
  void note_locked(steady::time_point at, std::string text) { journal_.emplace_back(at, std::move(text)); }

  void start_pause_locked(std::int32_t p, const std::string& by, const char* why, steady::time_point at) {
    auto& part = parts_[static_cast<std::size_t>(p)];
    if (part.paused_since) return;  // already paused (e.g. stalled, then lost): the first cause counts
    part.paused_since = at;
    part.paused_by = by;
    part.paused_why = why;
  }

  void assign_locked(const std::string& name, std::int32_t p, steady::time_point at) {
    if (p < 0 || p >= partition_count) return;
    ++ownership_events_;
    auto& part = parts_[static_cast<std::size_t>(p)];
    if (!part.owner.empty() && part.owner != name) {
      const member_info& prev = members_[part.owner];
      // A killed or stalled owner no longer consumes; any other owner still does: two owners.
      if (!prev.killed && !prev.stalled && prev.owned.count(p)) {
        overlaps_.push_back(fmt::format("{}-{} assigned to {} at {:.3f}s while {} still owned it", topic_name, p, name,
                                        seconds(at - t0_), part.owner));
      }
      members_[part.owner].owned.erase(p);
    }
    if (part.paused_since) {
      pauses_.push_back({p, part.paused_by, name, *part.paused_since, at, part.paused_why});
      part.paused_since.reset();
    } else if (part.owner.empty()) {
      pauses_.push_back({p, "", name, t0_, at, "start"});
    }
    part.owner = name;
    members_[name].owned.insert(p);
  }

  void release_locked(const std::string& name, std::int32_t p, steady::time_point at, const char* why) {
    if (p < 0 || p >= partition_count) return;
    ++ownership_events_;
    members_[name].owned.erase(p);
    auto& part = parts_[static_cast<std::size_t>(p)];
    if (part.owner != name) return;  // already reassigned (its owner was killed or stalled)
    part.owner.clear();
    start_pause_locked(p, name, why, at);
  }

  mutable std::mutex mutex_;
  const steady::time_point t0_;
  std::vector<std::pair<steady::time_point, std::string>> journal_;
  std::map<std::string, member_info> members_;
  std::vector<std::string> order_;
  std::vector<partition_info> parts_;
  std::vector<pause_record> pauses_;
  std::size_t pauses_reported_ = 0;
  std::vector<std::string> overlaps_;
  std::vector<std::string> errors_;
  std::int64_t bad_records_ = 0;
  std::int64_t stray_records_ = 0;
  std::size_t ownership_events_ = 0;
  int rebalance_count_ = 0;
  int max_poll_ms_ = 0;
};

// ---- member processes ------------------------------------------------------------------------

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this program's path: " + ec.message());
  return p.string();
}

class member_process {
 public:
  member_process(const demo::member_options& o, const std::string& log_path, story_state& state)
      : name_(o.name), state_(state) {
    int out[2], in[2];
    // Close-on-exec, so no other member inherits these ends (EOF must mean this member is gone).
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (::pipe2(in, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const std::string exe = self_exe();
    std::vector<std::string> args{exe,
                                  "--member",
                                  o.name,
                                  "--bootstrap",
                                  o.bootstrap,
                                  "--group",
                                  o.group,
                                  "--strategy",
                                  o.strategy,
                                  "--timeouts",
                                  fmt::format("{},{},{}", o.session_timeout_ms, o.heartbeat_interval_ms,
                                              o.max_poll_interval_ms)};
    for (const auto& [key, value] : o.settings) {
      args.push_back("--set");
      args.push_back(key + "=" + value);
    }
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      throw std::runtime_error(std::string("cannot start a member process: ") + std::strerror(rc));
    }
    to_child_ = in[1];
    reader_ = std::thread([this, fd = out[0]] { read_loop(fd); });
  }
  ~member_process() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      wait_exit(5s);
    }
    if (reader_.joinable()) reader_.join();
    if (to_child_ >= 0) ::close(to_child_);
  }
  member_process(const member_process&) = delete;
  member_process& operator=(const member_process&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !reaped_; }

  /// Writes one command line to the member ("stall <ms>", "leave").
  void command(const std::string& line) {
    const std::string s = line + "\n";
    if (to_child_ >= 0) (void)!::write(to_child_, s.data(), s.size());
  }
  void kill() {
    killed_by_story_ = true;
    ::kill(pid_, SIGKILL);
  }

  /// Waits for the process to exit (SIGKILL after `limit`); returns its exit status, or -signal.
  int wait_exit(std::chrono::milliseconds limit) {
    if (reaped_) return status_;
    const auto deadline = steady::now() + limit;
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (steady::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    if (reader_.joinable()) reader_.join();
    state_.exited(name_);
    return status_;
  }

 private:
  void read_loop(int fd) {
    FILE* f = ::fdopen(fd, "r");
    if (f == nullptr) {
      ::close(fd);
      return;
    }
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n = 0;
    while ((n = ::getline(&line, &cap, f)) > 0) {
      std::string s(line, static_cast<std::size_t>(n));
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      state_.on_line(name_, s);
    }
    std::free(line);
    std::fclose(f);
    if (!killed_by_story_ && !state_.member(name_).closed_cleanly) {
      state_.note(steady::now(), name_ + "'s process ended without closing its consumer (it crashed or was killed)");
    }
  }

  std::string name_;
  story_state& state_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  bool reaped_ = false;
  std::atomic<bool> killed_by_story_{false};
  int status_ = 0;
  std::thread reader_;
};

// ---- the producer ----------------------------------------------------------------------------

// Writes `rate` records per second round-robin over the topic's partitions, keys
// "orders-<partition>-<n>" (kgroup::test::record_key, n = the record's offset: the topic is new
// and this is its only writer, idempotent so retries cannot duplicate) and values of 100 bytes.
class producer {
 public:
  producer(const std::string& bootstrap, int rate) : rate_(rate), produced_(partition_count, 0) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      kgroup::test::apply_log_settings(conf);
      kgroup::test::set_config(conf, "bootstrap.servers", bootstrap);
      kgroup::test::set_config(conf, "client.id", "kgroup-demo-producer");
      kgroup::test::set_config(conf, "enable.idempotence", "true");
      kgroup::test::set_config(conf, "linger.ms", "5");
      kgroup::test::set_config(conf, "allow.auto.create.topics", "false");
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, &producer::on_delivery);
    rd_kafka_conf_set_opaque(conf, this);
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("producer: ") + err);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~producer() {
    stop();
    rd_kafka_destroy(rk_);
  }
  producer(const producer&) = delete;
  producer& operator=(const producer&) = delete;

  /// Stops producing and waits (up to 30 s) until every record is acknowledged.
  void stop() {
    if (stopping_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    rd_kafka_flush(rk_, 30000);
  }
  /// Records acknowledged per partition (after stop(): the records in the topic).
  std::vector<std::int64_t> produced() const {
    std::lock_guard lock(mutex_);
    return produced_;
  }
  std::int64_t failed() const { return failed_.load(); }
  std::int64_t total() const {
    std::lock_guard lock(mutex_);
    std::int64_t n = 0;
    for (auto v : produced_) n += v;
    return n;
  }

 private:
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    auto* self = static_cast<producer*>(opaque);
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++self->failed_;
      return;
    }
    std::lock_guard lock(self->mutex_);
    if (msg->partition >= 0 && msg->partition < partition_count) ++self->produced_[static_cast<std::size_t>(msg->partition)];
  }

  void run() {
    constexpr auto tick = 50ms;
    const int per_tick = std::max(1, rate_ / 20);
    std::vector<std::int64_t> next(partition_count, 0);
    std::int32_t cursor = 0;
    auto due = steady::now();
    std::string value;
    while (!stopping_) {
      for (int i = 0; i < per_tick; ++i) {
        const std::int32_t p = cursor;
        cursor = (cursor + 1) % partition_count;
        const std::string key = kgroup::test::record_key(topic_name, p, next[static_cast<std::size_t>(p)]++);
        value = kgroup::test::expected_value(key, 100);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(topic_name), RD_KAFKA_V_PARTITION(p),
                                        RD_KAFKA_V_KEY(key.data(), key.size()),
                                        RD_KAFKA_V_VALUE(value.data(), value.size()),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          rd_kafka_poll(rk_, 10);
        }
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) ++failed_;
      }
      rd_kafka_poll(rk_, 0);
      due += tick;
      std::this_thread::sleep_until(due);
    }
  }

  const int rate_;
  rd_kafka_t* rk_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<std::int64_t> produced_;
  std::atomic<std::int64_t> failed_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// ---- the story -------------------------------------------------------------------------------

struct options {
  std::string protocol = "cooperative";
  bool serve = false;
  int rate = 400;  // records per second
  std::string security_protocol = "PLAINTEXT";
  std::string sasl_mechanism = "SCRAM-SHA-256";
};

class story {
 public:
  /// Members connect to `member_bootstrap`: the group proxy in front of `cluster`.
  story(const options& opt, kgroup::test::mock_cluster& cluster, const std::string& member_bootstrap,
        const std::string& log_dir, std::vector<std::pair<std::string, std::string>> member_settings = {})
      : opt_(opt), cluster_(cluster), log_dir_(log_dir), state_(steady::now()) {
    base_.bootstrap = member_bootstrap;
    base_.settings = std::move(member_settings);
    base_.group = "kgroup-demo";
    base_.strategy = opt.protocol == "eager" ? "range" : "cooperative-sticky";
    base_.session_timeout_ms = 6000;
    base_.heartbeat_interval_ms = 500;
    base_.max_poll_interval_ms = 8000;
    state_.set_max_poll_ms(base_.max_poll_interval_ms);
  }

  /// Runs the story; returns the failures (empty: it ran as scripted).
  std::vector<std::string> run() {
    fmt::print("Group '{}' with the {} protocol (partition.assignment.strategy={}); every member has\n"
               "session.timeout.ms={}, heartbeat.interval.ms={}, max.poll.interval.ms={}, auto.offset.reset=earliest.\n"
               "Each member is a child process (so one can be SIGKILLed); their logs (kept if something fails): {}\n\n",
               base_.group, opt_.protocol, base_.strategy, base_.session_timeout_ms, base_.heartbeat_interval_ms,
               base_.max_poll_interval_ms, log_dir_);
    producer_ = std::make_unique<producer>(cluster_.bootstrap_servers(), opt_.rate);
    state_.note(steady::now(), fmt::format("producer started: about {} records/s over the {} partitions", opt_.rate,
                                           partition_count));

    step("1. Three members join", {"member-1", "member-2", "member-3"}, [&] {
      for (const char* n : {"member-1", "member-2", "member-3"}) start(n);
      return std::function<bool()>([] { return true; });
    });
    check_owns("after the first rebalance, member-1", "member-1");
    if (!failures_.empty()) return failures_;

    step("2. A fourth member joins", {"member-1", "member-2", "member-3", "member-4"}, [&] {
      start("member-4");
      return std::function<bool()>([] { return true; });
    });
    check_owns("after joining, member-4", "member-4");
    if (!failures_.empty()) return failures_;

    // Steps 3-5 act on members that are not the group leader, preferring member-2, member-3 and
    // member-1: the leader is the only member that sees the group's member list, so while it stays
    // it can name who left or joined (its metrics' rebalance detail). A new leader cannot.
    std::vector<std::string> alive{"member-1", "member-2", "member-3", "member-4"};
    const std::string leaver = pick_non_leader({"member-2", "member-3", "member-1", "member-4"}, alive);
    alive.erase(std::find(alive.begin(), alive.end(), leaver));
    step(fmt::format("3. {} leaves cleanly (close(): revokes its partitions, sends LeaveGroup)", leaver), alive, [&] {
      state_.note(steady::now(), leaver + " is told to close");
      find(leaver).command("leave");
      return std::function<bool()>([this, leaver] { return state_.member(leaver).closed_cleanly; });
    });
    if (const int rc = find(leaver).wait_exit(15s); rc != 0) {
      failures_.push_back(fmt::format("{} exited with status {} after closing", leaver, rc));
    }
    state_.set_fate(leaver, "left cleanly");
    if (!failures_.empty()) return failures_;

    const std::string victim = pick_non_leader({"member-3", "member-1", "member-4", "member-2"}, alive);
    alive.erase(std::find(alive.begin(), alive.end(), victim));
    step(fmt::format("4. {} is killed (SIGKILL: no revoke, no LeaveGroup; the coordinator notices after "
                     "session.timeout.ms={})",
                     victim, base_.session_timeout_ms),
         alive, [&] {
           const auto at = steady::now();
           find(victim).kill();
           state_.killed(victim, at);
           state_.note(at, fmt::format("{} killed (pid {})", victim, find(victim).pid()));
           return std::function<bool()>([] { return true; });
         });
    find(victim).wait_exit(5s);
    state_.set_fate(victim, "killed");
    if (!failures_.empty()) return failures_;

    const std::string staller = pick_non_leader({"member-1", "member-4", "member-2", "member-3"}, alive);
    const int stall_ms = base_.max_poll_interval_ms + 1500;
    step(fmt::format("5. {} stalls: no poll() for {:.1f} s, past max.poll.interval.ms={}", staller, stall_ms / 1000.0,
                     base_.max_poll_interval_ms),
         alive, [&] {
           const int lost_before = state_.member(staller).lost_calls;
           find(staller).command(fmt::format("stall {}", stall_ms));
           return std::function<bool()>([this, staller, lost_before] {
             const auto m = state_.member(staller);
             return m.stall_ends > 0 && m.lost_calls > lost_before;
           });
         });
    check_owns("after its stall, " + staller, staller);
    state_.set_fate(staller, fmt::format("stalled {:.1f} s, rejoined", stall_ms / 1000.0));
    return failures_;
  }

  /// Stops the producer, waits until the members have consumed every record, prints the summary.
  /// Returns failures found there.
  std::vector<std::string> finish() {
    const auto story_end = steady::now();
    std::vector<std::string> failures;
    if (producer_) producer_->stop();
    const auto produced = producer_ ? producer_->produced() : std::vector<std::int64_t>(partition_count, 0);
    state_.note(steady::now(), fmt::format("producer stopped after {} records; waiting for the members to catch up",
                                           with_commas(producer_ ? producer_->total() : 0)));
    const auto deadline = steady::now() + 20s;
    while (state_.record_totals(produced).missing > 0 && steady::now() < deadline && !g_interrupted) {
      state_.flush_journal(false);
      std::this_thread::sleep_for(50ms);
    }
    state_.note(steady::now(), "story over");
    state_.flush_journal(true);

    // Members at the end of the story (before they close).
    std::map<std::string, member_info> at_end;
    for (const auto& n : state_.member_names()) at_end[n] = state_.member(n);
    const auto totals = state_.record_totals(produced);
    const auto pauses = state_.pauses();

    fmt::print("\nSummary ({} protocol, {:.1f} s, {} rebalance{})\n", opt_.protocol, seconds(story_end - state_.t0()),
               state_.rebalance_count(), state_.rebalance_count() == 1 ? "" : "s");
    fmt::print("  {:<9} {:<24} {:<20} {:>9} {:>11}  {}\n", "member", "fate", "partitions at end", "records",
               "rebalances", "its partitions paused (count, total, longest)");
    for (const auto& [name, m] : at_end) {
      int count = 0;
      double total = 0, longest = 0;
      for (const auto& p : pauses) {
        if (p.from != name) continue;
        ++count;
        const double s = seconds(p.end - p.start);
        total += s;
        longest = std::max(longest, s);
      }
      const std::string owned = m.killed || m.closed_cleanly ? "-" : short_list(m.owned);
      fmt::print("  {:<9} {:<24} {:<20} {:>9} {:>11}  {}\n", name, m.fate,
                 owned == "-" ? owned : fmt::format("{} ({})", owned, m.owned.size()), with_commas(m.records),
                 m.rebalance_total,
                 count == 0 ? std::string("none") : fmt::format("{}, {:.1f} s, {:.2f} s", count, total, longest));
    }
    double paused_total = 0, paused_longest = 0;
    int paused_count = 0;
    for (const auto& p : pauses) {
      if (p.from.empty()) continue;  // the first assignment at start
      ++paused_count;
      paused_total += seconds(p.end - p.start);
      paused_longest = std::max(paused_longest, seconds(p.end - p.start));
    }
    std::int64_t produced_total = 0;
    for (auto v : produced) produced_total += v;
    fmt::print("  partitions paused by rebalances: {} times, {:.1f} partition-seconds in total, longest {:.2f} s\n",
               paused_count, paused_total, paused_longest);
    fmt::print("  records: produced {}, consumed {} ({} distinct, {} duplicates), missing {}, wrong key {}\n",
               with_commas(produced_total), with_commas(totals.consumed), with_commas(totals.distinct),
               with_commas(totals.duplicates), with_commas(totals.missing), with_commas(totals.bad));
    fmt::print("  (rebalances: completed, as each member's metrics count them; a cooperative rebalance that moves\n"
               "   partitions takes two. paused: from the owner stopping - revoke or lost callback returned,\n"
               "   killed, poll loop stalled - until an assign callback for the partition starts)\n");
    fmt::print("  (duplicates are records consumed again by a partition's next owner: those after the last\n"
               "   auto-commit, auto.commit.interval.ms=1000, of a killed or stalled member, or of a revoke\n"
               "   the mock refused to commit during a rebalance)\n");
    if (totals.stray > 0) {
      fmt::print("  records returned for partitions the member did not own at that moment: {}\n",
                 with_commas(totals.stray));
    }
    if (const auto in_topic = cluster_.total_records(topic_name); in_topic != produced_total) {
      failures.push_back(fmt::format("the producer counted {} acknowledged records but the topic holds {}",
                                     produced_total, in_topic));
    }
    if (producer_ && producer_->failed() > 0) {
      failures.push_back(fmt::format("{} records could not be produced", producer_->failed()));
    }
    if (totals.missing > 0) {
      failures.push_back(fmt::format("{} produced records were never consumed", totals.missing));
    }
    if (totals.bad > 0) failures.push_back(fmt::format("{} records had an unexpected key", totals.bad));
    for (const auto& o : state_.overlaps()) failures.push_back("two owners: " + o);
    return failures;
  }

  /// With --serve: keeps the surviving members (and their dashboards) running until Ctrl-C.
  void serve() {
    fmt::print("\nServing until Ctrl-C (the producer is stopped; the members keep polling):\n");
    for (const auto& p : members_) {
      if (!p->running()) continue;
      const auto m = state_.member(p->name());
      fmt::print("  {} dashboard: {}\n", p->name(),
                 m.http_endpoint.empty() ? "(not available)" : "http://" + m.http_endpoint + "/");
    }
    std::fflush(stdout);
    while (!g_interrupted) std::this_thread::sleep_for(100ms);
    fmt::print("\n");
  }

  /// Closes the members still running (clean leave) and reaps them.
  void close_members() {
    for (auto& p : members_) {
      if (p->running()) p->command("leave");
    }
    for (auto& p : members_) {
      if (p->running()) p->wait_exit(15s);
    }
  }

 private:
  void start(const std::string& name) {
    demo::member_options o = base_;
    o.name = name;
    state_.add_member(name);
    state_.set_fate(name, members_.size() < 3 ? "joined at the start" : "joined later");
    members_.push_back(std::make_unique<member_process>(o, log_dir_ + "/" + name + ".log", state_));
    state_.note(steady::now(), fmt::format("{} started (pid {})", name, members_.back()->pid()));
  }

  // The first of `preferred` that is in `alive` and not the group leader (the first in `alive` if
  // every one of them leads, which cannot happen with two or more members).
  std::string pick_non_leader(const std::vector<std::string>& preferred, const std::vector<std::string>& alive) const {
    for (const auto& name : preferred) {
      if (std::find(alive.begin(), alive.end(), name) != alive.end() && !state_.member(name).leader) return name;
    }
    for (const auto& name : preferred) {
      if (std::find(alive.begin(), alive.end(), name) != alive.end()) return name;
    }
    return alive.front();
  }

  member_process& find(const std::string& name) {
    for (auto& p : members_) {
      if (p->name() == name) return *p;
    }
    throw std::logic_error("no member " + name);
  }

  void check_owns(const std::string& who, const std::string& name) {
    if (!failures_.empty()) return;
    if (state_.member(name).owned.empty()) failures_.push_back(who + " owns no partition");
  }

  // One step: `action` starts it and returns the condition the step waits for (besides the
  // group settling with exactly `alive` sharing all partitions).
  void step(const std::string& title, const std::vector<std::string>& alive,
            const std::function<std::function<bool()>()>& action) {
    if (!failures_.empty()) return;
    const auto t = steady::now();
    state_.note(t, "");
    state_.note(t, "== " + title);
    const auto records_before = state_.records_consumed();
    const auto done = action();
    steady::time_point since{};  // when the group was first seen settled; epoch = not settled
    std::size_t events_then = 0;
    const auto deadline = t + step_limit;
    for (;;) {
      state_.flush_journal(false);
      if (g_interrupted) {
        failures_.push_back("interrupted");
        return;
      }
      if (steady::now() >= deadline) {
        failures_.push_back(fmt::format("step '{}' did not settle within {} s (every partition owned by one of: {})",
                                        title, step_limit.count(), fmt::join(alive, ", ")));
        state_.flush_journal(true);
        return;
      }
      if (done() && state_.settled(alive)) {
        const auto events_now = state_.ownership_events();
        if (since == steady::time_point{} || events_now != events_then) {
          since = steady::now();
          events_then = events_now;
        } else if (steady::now() - since >= quiet_window) {
          break;
        }
      } else {
        since = steady::time_point{};
      }
      std::this_thread::sleep_for(50ms);
    }
    // The last ownership change is when the step settled; wait a little for late history lines.
    const auto settled_at = std::max(t, state_.last_ownership_event());
    std::this_thread::sleep_for(300ms);
    state_.flush_journal(true);
    fmt::print("  -> settled {:.1f} s after the step began; {} records consumed meanwhile\n", seconds(settled_at - t),
               with_commas(state_.records_consumed() - records_before));
    for (const auto& line : state_.step_report()) fmt::print("     {}\n", line);
    std::fflush(stdout);
    // Let the group consume for a while before the next step.
    const auto until = steady::now() + dwell;
    while (steady::now() < until && !g_interrupted) {
      state_.flush_journal(false);
      std::this_thread::sleep_for(50ms);
    }
  }

  options opt_;
  kgroup::test::mock_cluster& cluster_;
  std::string log_dir_;
  demo::member_options base_;
  story_state state_;
  std::unique_ptr<producer> producer_;
  std::vector<std::unique_ptr<member_process>> members_;
  std::vector<std::string> failures_;
};

void usage(std::FILE* to) {
  std::fputs(
      "usage: kgroup-demo [--protocol cooperative|eager] [--serve] [--rate N]\n"
      "  Starts a mock Kafka cluster (librdkafka's: 3 brokers, topic 'orders' with 12 partitions, a\n"
      "  producer writing N records/s, default 400) and tells a consumer group's story with kgroup\n"
      "  members: three join, a fourth joins, one leaves cleanly, one is killed, one stalls past\n"
      "  max.poll.interval.ms. Prints a timeline and a summary; takes about a minute.\n"
      "  --protocol  cooperative (cooperative-sticky, the default) or eager (range)\n"
      "  --serve     after the story, keep the members and their dashboards running until Ctrl-C\n"
      "  --security-protocol SSL|SASL_PLAINTEXT|SASL_SSL\n"
      "              members reach the cluster through a TLS/SASL front (test/support/secure_front.hpp)\n"
      "              with a CA generated at start-up and the user demo / demo-secret\n"
      "  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER (default SCRAM-SHA-256)\n",
      to);
}

int parse_timeouts(const std::string& text, demo::member_options& o) {
  return std::sscanf(text.c_str(), "%d,%d,%d", &o.session_timeout_ms, &o.heartbeat_interval_ms,
                     &o.max_poll_interval_ms) == 3
             ? 0
             : 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);

  // Hidden member mode: the parent runs this binary once per group member.
  if (!args.empty() && args[0] == "--member") {
    demo::member_options o;
    for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
      if (args[i] == "--member") o.name = args[i + 1];
      else if (args[i] == "--bootstrap") o.bootstrap = args[i + 1];
      else if (args[i] == "--group") o.group = args[i + 1];
      else if (args[i] == "--strategy") o.strategy = args[i + 1];
      else if (args[i] == "--timeouts" && parse_timeouts(args[i + 1], o) != 0) return 2;
      else if (args[i] == "--set" && args[i + 1].find('=') != std::string::npos) {
        const auto eq = args[i + 1].find('=');
        o.settings.emplace_back(args[i + 1].substr(0, eq), args[i + 1].substr(eq + 1));
      }
    }
    return demo::run_member(o);
  }

  options opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--protocol" && i + 1 < args.size() && (args[i + 1] == "eager" || args[i + 1] == "cooperative")) {
      opt.protocol = args[++i];
    } else if (a == "--serve") {
      opt.serve = true;
    } else if (a == "--security-protocol" && i + 1 < args.size() &&
               (args[i + 1] == "PLAINTEXT" || args[i + 1] == "SSL" || args[i + 1] == "SASL_PLAINTEXT" ||
                args[i + 1] == "SASL_SSL")) {
      opt.security_protocol = args[++i];
    } else if (a == "--sasl-mechanism" && i + 1 < args.size() &&
               (args[i + 1] == "PLAIN" || args[i + 1] == "SCRAM-SHA-256" || args[i + 1] == "SCRAM-SHA-512" ||
                args[i + 1] == "OAUTHBEARER")) {
      opt.sasl_mechanism = args[++i];
    } else if (a == "--rate" && i + 1 < args.size() && std::atoi(args[i + 1].c_str()) > 0 &&
               std::atoi(args[i + 1].c_str()) <= 20000) {
      opt.rate = std::atoi(args[++i].c_str());
    } else {
      std::fprintf(stderr, "kgroup-demo: bad argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }

  std::signal(SIGPIPE, SIG_IGN);  // a member that died must not take the parent with it
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  char dir_template[] = "/tmp/kgroup-demo.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "kgroup-demo: cannot create a log directory under /tmp: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string log_dir = dir_template;

  std::vector<std::string> failures;
  try {
    kgroup::test::mock_cluster cluster(broker_count);
    cluster.create_topic(topic_name, partition_count);
    // librdkafka 2.0.2's mock answers INVALID_REQUEST to a follower whose SyncGroup arrives after
    // the leader's, which forces another rebalance; 10 ms on every response keeps the leader's
    // SyncGroup (it fetches metadata first) behind the followers', as the benchmarks do.
    cluster.set_rtt(-1, 10);
    // The mocks cannot describe groups (DescribeGroups), which every member's dashboard needs for
    // its group map: the members reach the cluster through a proxy that answers DescribeGroups
    // from the JoinGroup/SyncGroup traffic it relays (test/support/group_proxy.hpp).
    kgroup::test::group_proxy proxy(cluster);
    fmt::print("kgroup-demo: mock Kafka cluster of {} brokers at {} (members use {}), topic '{}' with {} partitions\n",
               broker_count, cluster.bootstrap_servers(), proxy.bootstrap_servers(), topic_name, partition_count);

    // With --security-protocol, the members' connections go through a TLS/SASL front chained
    // before the proxy; the producer stays on the mock's own listeners.
    std::unique_ptr<kgroup::test::secure_front> front;
    std::vector<std::pair<std::string, std::string>> settings;
    std::string member_bootstrap = proxy.bootstrap_servers();
    if (opt.security_protocol != "PLAINTEXT") {
      kgroup::test::secure_front_options fo;
      fo.tls = opt.security_protocol == "SSL" || opt.security_protocol == "SASL_SSL";
      const bool sasl = opt.security_protocol.rfind("SASL_", 0) == 0;
      if (sasl) {
        fo.sasl_mechanisms = {opt.sasl_mechanism};
        fo.users = {{"demo", "demo-secret"}};
      }
      front = std::make_unique<kgroup::test::secure_front>(proxy.addresses(), fo);
      member_bootstrap = front->bootstrap_servers();
      settings.emplace_back("security.protocol", opt.security_protocol);
      if (fo.tls) settings.emplace_back("ssl.ca.location", kgroup::test::test_pki::get().ca.cert_path);
      if (sasl) {
        settings.emplace_back("sasl.mechanism", opt.sasl_mechanism);
        if (opt.sasl_mechanism == "OAUTHBEARER") {
          settings.emplace_back("sasl.oauthbearer.config", "principal=demo lifeSeconds=3600");
        } else {
          settings.emplace_back("sasl.username", "demo");
          settings.emplace_back("sasl.password", "demo-secret");
        }
      }
      fmt::print("kgroup-demo: members connect with security.protocol={}{} through {}\n", opt.security_protocol,
                 sasl ? " sasl.mechanism=" + opt.sasl_mechanism : std::string(), member_bootstrap);
    }

    story s(opt, cluster, member_bootstrap, log_dir, settings);
    failures = s.run();
    const auto more = s.finish();
    failures.insert(failures.end(), more.begin(), more.end());
    if (opt.serve && !g_interrupted) s.serve();
    s.close_members();
  } catch (const std::exception& e) {
    failures.push_back(e.what());
  }

  if (!failures.empty()) {
    std::fprintf(stderr, "\nkgroup-demo: the story did not run as scripted:\n");
    for (const auto& f : failures) std::fprintf(stderr, "  - %s\n", f.c_str());
    std::fprintf(stderr, "member logs: %s\n", log_dir.c_str());
    return 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(log_dir, ec);
  fmt::print("\nThe story ran as scripted.\n");
  return 0;
}
