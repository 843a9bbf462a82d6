// kgroup-demo: what the members report, merged into one timeline (story_state): ownership,
// paused partitions, rebalances per member, consumed records. Fed by member_process's reader
// threads (processes.hpp), read by the story (story.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "parent.hpp"

namespace demo {

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

// What member_process (processes.hpp) feeds with a member's lines, and the journal both stories
// print: the consumer group's story_state below and the share group's share_state (share_story.cpp).
class member_reports {
 public:
  explicit member_reports(steady::time_point t0) : t0_(t0) {}
  virtual ~member_reports() = default;
  member_reports(const member_reports&) = delete;
  member_reports& operator=(const member_reports&) = delete;

  steady::time_point t0() const { return t0_; }

  /// One line from member `name` (see demo.hpp): the tags every member sends (E, X) here, then
  /// every tag but E to the story's on_report_locked(), under the lock.
  void on_line(const std::string& name, const std::string& line) {
    std::istringstream in(line);
    std::string tag;
    long long ns = 0;
    in >> tag >> ns;
    if (!in) return;
    const auto at = from_ns(ns);
    std::lock_guard lock(mutex_);
    if (tag == "E") {
      std::string rest;
      std::getline(in, rest);
      errors_.push_back(name + ":" + rest);
      note_locked(at, fmt::format("{} error:{}", name, rest));
      return;
    }
    if (tag == "X") closed_.insert(name);
    on_report_locked(name, tag, at, in);
  }
  /// The member reported closing its consumer (its X line).
  bool closed_cleanly(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return closed_.count(name) > 0;
  }
  /// The errors members reported (E lines), "name: text".
  std::vector<std::string> errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
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

 protected:
  /// A line of member `name` with `tag`, sent at `at`; `in` is at the tag's fields.
  virtual void on_report_locked(const std::string& name, const std::string& tag, steady::time_point at,
                                std::istringstream& in) = 0;
  void note_locked(steady::time_point at, std::string text) { journal_.emplace_back(at, std::move(text)); }

  mutable std::mutex mutex_;  // guards this class's and the derived class's fields
  const steady::time_point t0_;

 private:
  std::vector<std::pair<steady::time_point, std::string>> journal_;
  std::vector<std::string> errors_;
  std::set<std::string> closed_;
};

class story_state : public member_reports {
 public:
  explicit story_state(steady::time_point t0) : member_reports(t0), parts_(partition_count) {}

  /// KIP-848 (group.protocol=consumer): the words change (a reconciliation to a member epoch, not a
  /// rebalance to a generation; no group leader; a leave heartbeat, not LeaveGroup).
  void set_kip848(bool on) { kip848_ = on; }
  const char* rebalance_word() const { return kip848_ ? "reconciliation" : "rebalance"; }
  const char* generation_word() const { return kip848_ ? "epoch" : "generation"; }

  void add_member(const std::string& name) {
    std::lock_guard lock(mutex_);
    members_[name];
    order_.push_back(name);
  }

 protected:
  void on_report_locked(const std::string& name, const std::string& tag, steady::time_point at,
                        std::istringstream& in) override {
    member_info& m = members_[name];
    if (tag == "A") {
      std::int32_t gen = -1;
      std::string list;
      in >> gen >> list;
      const auto ps = demo::decode_partitions(list);
      for (auto p : ps) assign_locked(name, p, at);
      m.last_ownership_event = at;
      note_locked(at, fmt::format("{} assigned {}{} ({} {})", name, partition_list(ps), ps.empty() ? " new" : "",
                                  generation_word(), gen));
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
    } else if (tag == "X") {
      m.closed_cleanly = true;
      note_locked(at, fmt::format("{} closed its consumer ({} sent)", name,
                                  kip848_ ? "leave heartbeat, epoch -1," : "LeaveGroup"));
    }
  }

 public:
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
        out.push_back(fmt::format("{} left unfinished by {} ({} {})", rebalance_word(), fmt::join(g.abandoned, ", "),
                                  generation_word(), gen));
        continue;
      }
      ++rebalance_count_;
      out.push_back(fmt::format("{} #{} -> {} {}: started at {:.1f}s, took up to {:.1f} s", rebalance_word(),
                                rebalance_count_, generation_word(), gen, seconds(g.first_start - t0_),
                                g.longest_ms / 1000.0));
      // Group the members by the reason they saw.
      std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
      for (const auto& [reason, name] : g.why) {
        auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == reason; });
        if (it == reasons.end()) {
          reasons.push_back({reason, {name}});
        } else if (std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
          it->second.push_back(name);  // a member that reached the same epoch twice is named once
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
    if (kip848_) {
      out.push_back(fmt::format("owners now: {}; assigned by the coordinator", owners.empty() ? "-" : owners));
    } else {
      out.push_back(fmt::format("owners now: {}; group leader: {}", owners.empty() ? "-" : owners,
                                leader.empty() ? "?" : leader));
    }
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
  std::vector<std::string> member_names() const {
    std::lock_guard lock(mutex_);
    return order_;
  }
  int rebalance_count() const {
    std::lock_guard lock(mutex_);
    return rebalance_count_;
  }

 private:
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

  std::map<std::string, member_info> members_;
  std::vector<std::string> order_;
  std::vector<partition_info> parts_;
  std::vector<pause_record> pauses_;
  std::size_t pauses_reported_ = 0;
  std::vector<std::string> overlaps_;
  std::int64_t bad_records_ = 0;
  std::int64_t stray_records_ = 0;
  std::size_t ownership_events_ = 0;
  int rebalance_count_ = 0;
  bool kip848_ = false;
  int max_poll_ms_ = 0;
};

}  // namespace demo
