// kgroup-demo --share: a share group's story (KIP-932, queues for Kafka), told as a timeline.
//
// The parent starts librdkafka 2.15's mock cluster (one broker) with share groups on and a short
// acquisition lock, writes a queue of records to topic 'jobs' (3 partitions) and then runs three
// kgroup::ShareConsumer members, each a child process (processes.hpp) in implicit mode: a poll()
// accepts what the previous one returned, and each record takes share_work_per_record of pretend
// work. Every member is given every partition (the mock's target assignment: its automatic one
// gives a partition to one member), so the three work one queue:
//   1. three members work the queue
//   2. one stalls, holding the records of its last poll(), past the lock: they go to the others
//      with delivery count 2; when it polls again its accept of them is refused
//   3. one is killed (SIGKILL): what it held goes on, the others carry on
// then the members finish the queue and the summary checks, on the journal of every delivery and
// every acknowledgement outcome the members reported (the invariants of the share integration
// tests), that every record was accepted exactly once and that every other delivery of it is
// explained: a failed acknowledgement (the lock had expired, or the member's share session ended)
// or a delivery to the killed member, which never answered.
//
// Decision: the records are written before the members start and the producer is gone by then.
// librdkafka 2.15.1's mock drops every share session of a broker when any connection to it closes
// (SHARE-GROUPS.md, M1): a producer's connections coming and going would release the members'
// records at random. The kill does it on purpose: the story shows it (the others' pending
// acknowledgements fail with SHARE_SESSION_NOT_FOUND and those records come back too).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mock_cluster.hpp"
#include "parent.hpp"
#include "processes.hpp"
#include "story.hpp"
#include "timeline.hpp"

namespace demo {
namespace {

constexpr int share_partitions = 3;
constexpr std::int64_t share_records = 3000;  // 1,000 a partition (the mock scans linearly)
constexpr int lock_ms = 3000;                 // group.share.record.lock.duration.ms
constexpr int delivery_limit = 5;             // group.share.delivery.count.limit
constexpr int heartbeat_ms = 500;
// The mock also ends a share session idle for the group's session timeout (releasing its
// records): longer than the stall, so the stalled member's late accept meets an expired lock, not
// a missing session.
constexpr int session_ms = 10000;
constexpr int max_poll_records = 10;
constexpr int stall_ms = 2 * lock_ms + 1000;  // past the lock, and the mock's once-a-second sweep
constexpr auto wait_limit = 40s;              // a step whose outcome has not come by then failed
const char* const share_group = "kgroup-demo-queue";

using record_id = std::pair<std::int32_t, std::int64_t>;  // partition, offset

std::string record_name(const record_id& r) {
  return fmt::format("{}-{}@{}", share_topic_name, r.first, r.second);
}

// "jobs-0@3-7, jobs-1@9": records as runs per partition.
std::string record_runs(const std::vector<record_id>& records) {
  std::vector<record_id> sorted = records;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1].first == sorted[i].first &&
           sorted[j + 1].second == sorted[j].second + 1) {
      ++j;
    }
    if (!out.empty()) out += ", ";
    out += record_name(sorted[i]) + (j > i ? fmt::format("-{}", sorted[j].second) : "");
    i = j + 1;
  }
  return out.empty() ? "nothing" : out;
}

// Why an acknowledgement failed, in the story's words.
std::string failure_cause(const std::string& error) {
  if (error == "INVALID_RECORD_STATE") return "lock expired";
  return "share session ended";  // SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, a lost connection
}

struct delivery {
  std::string member;
  std::int16_t count = 0;
  steady::time_point at;
};

struct record_log {
  std::vector<delivery> deliveries;
  std::vector<std::string> accepted_by;  // the members whose accept the broker applied
  std::vector<std::string> failed;       // error names of the acknowledgements that failed
  std::map<std::string, int> answers;    // outcomes (applied or failed) per member
};

struct share_member {
  std::string member_id, endpoint;
  bool identity_seen = false;
  std::int32_t epoch = 0;
  std::string state;
  std::uint64_t delivered = 0, redelivered = 0, accepted = 0, released = 0, failed = 0,
                lock_expired = 0;    // metrics()
  std::int64_t records = 0;          // from its R lines
  std::vector<record_id> last_poll;  // the records of its latest R line
  steady::time_point last_poll_at{};
  std::optional<steady::time_point> stall_begin, stall_end;
  steady::time_point stall_last_poll{};
  std::vector<record_id> held;  // the records of its last poll() before the stall
  std::optional<steady::time_point> killed_at;
  std::vector<record_id> held_at_kill;
  std::string fate;
};

// The share members' reports merged: every delivery and acknowledgement outcome per record.
class share_state : public member_reports {
 public:
  explicit share_state(steady::time_point t0) : member_reports(t0) {}

  void add_member(const std::string& name) {
    std::lock_guard lock(mutex_);
    members_[name].fate = "worked throughout";
    order_.push_back(name);
  }

 protected:
  void on_report_locked(const std::string& name, const std::string& tag, steady::time_point at,
                        std::istringstream& in) override {
    share_member& m = members_[name];
    if (tag == "R") {
      on_records_locked(name, m, at, in);
    } else if (tag == "K") {
      std::int32_t p = 0;
      std::string runs, error;
      in >> p >> runs >> error;
      on_outcome_locked(name, at, p, runs, error);
    } else if (tag == "M") {
      in >> m.epoch >> m.delivered >> m.redelivered >> m.accepted >> m.released >> m.failed >>
          m.lock_expired >> m.state;
    } else if (tag == "I") {
      std::string id, endpoint;
      in >> id >> endpoint;
      m.member_id = id == "-" ? "" : id;
      const std::string ep = endpoint == "-" ? "" : endpoint;
      if (!m.identity_seen || ep != m.endpoint) {
        note_locked(at, fmt::format("{} joins (member id {}); its metrics: {}", name, m.member_id,
                                    ep.empty() ? "(not served)" : "http://" + ep + "/metrics"));
      }
      m.identity_seen = true;
      m.endpoint = ep;
    } else if (tag == "P") {
      std::string what;
      int ms = 0;
      long long last_ns = 0;
      in >> what >> ms >> last_ns;
      if (what == "begin") {
        m.stall_begin = at;
        m.stall_last_poll = from_ns(last_ns);
        m.held = m.last_poll;
        note_locked(
            at,
            fmt::format("{} stops calling poll() for {:.1f} s, holding the {} records of its last poll(): {}",
                        name, ms / 1000.0, m.held.size(), record_runs(m.held)));
      } else {
        m.stall_end = at;
        note_locked(
            at, fmt::format("{} calls poll() again after {:.1f} s (its accept of what it held goes out now)",
                            name, ms / 1000.0));
      }
    } else if (tag == "X") {
      note_locked(at, fmt::format("{} closed its share consumer", name));
    }
  }

 public:
  /// The member was SIGKILLed at `at`: what it was given last is held by a process that is gone.
  void killed(const std::string& name, steady::time_point at) {
    std::lock_guard lock(mutex_);
    share_member& m = members_[name];
    m.killed_at = at;
    m.held_at_kill = m.last_poll;
    m.fate = fmt::format("killed at {:.1f}s", seconds(at - t0_));
  }
  void set_fate(const std::string& name, std::string fate) {
    std::lock_guard lock(mutex_);
    members_[name].fate = std::move(fate);
  }

  share_member member(const std::string& name) const {
    std::lock_guard lock(mutex_);
    const auto it = members_.find(name);
    return it == members_.end() ? share_member{} : it->second;
  }
  std::vector<std::string> member_names() const {
    std::lock_guard lock(mutex_);
    return order_;
  }

  /// Records with an applied accept, or last given to the killed member and not answered (see
  /// verdict()).
  std::int64_t accepted_records() const {
    std::lock_guard lock(mutex_);
    std::int64_t n = 0;
    for (const auto& [id, r] : records_) n += !r.accepted_by.empty() || died_with_killed_locked(r) ? 1 : 0;
    return n;
  }
  std::int64_t deliveries() const {
    std::lock_guard lock(mutex_);
    return deliveries_;
  }

  /// The deliveries of `records` to a member other than `from`, after `since`, each record's first.
  std::vector<delivery> moved_on(const std::vector<record_id>& records, const std::string& from,
                                 steady::time_point since) const {
    std::lock_guard lock(mutex_);
    std::vector<delivery> out;
    for (const auto& id : records) {
      const auto it = records_.find(id);
      if (it == records_.end()) continue;
      for (const auto& d : it->second.deliveries) {
        if (d.member != from && d.at >= since) {
          out.push_back(d);
          break;
        }
      }
    }
    return out;
  }

  /// The acknowledgement outcomes of `member` for `records`, by error name ("NONE": applied).
  std::map<std::string, int> outcomes_of(const std::string& member,
                                         const std::vector<record_id>& records) const {
    std::lock_guard lock(mutex_);
    std::map<std::string, int> out;
    for (const auto& id : records) {
      const auto it = outcome_by_.find({member, id});
      if (it != outcome_by_.end()) ++out[it->second];
    }
    return out;
  }

  struct check {
    std::int64_t distinct = 0, missing = 0, accepted_once = 0, accepted_twice = 0, not_accepted = 0;
    std::int64_t unexplained = 0, redelivered = 0, bad = 0;
    // Accepts by the stalled member of a record already accepted by its next holder, applied by
    // the mock (see verdict()).
    std::int64_t late_applied = 0;
    std::int64_t died_with_killed = 0;  // last given to the killed member, its accept's outcome died with it
    std::map<std::string, std::int64_t> causes;  // the extra deliveries, by what explains them
    std::map<int, std::int64_t> counts;          // deliveries by delivery count
    std::vector<std::string> failures;
  };
  /// The journal against the records produced (`per_partition` offsets of each partition), with
  /// SHARE-GROUPS.md's invariants: every record accepted exactly once, every other delivery of it
  /// answered by a failed acknowledgement or given to a member that was killed.
  check verdict(std::int64_t per_partition) const {
    std::lock_guard lock(mutex_);
    check c;
    c.bad = bad_;
    c.failures = violations_;
    for (std::int32_t p = 0; p < share_partitions; ++p) {
      for (std::int64_t o = 0; o < per_partition; ++o) {
        const auto it = records_.find({p, o});
        if (it == records_.end() || it->second.deliveries.empty()) {
          ++c.missing;
          continue;
        }
        const record_log& r = it->second;
        ++c.distinct;
        // An accept from the stalled member whose delivery was not the record's last one came
        // after the record had moved on (its lock expired): Kafka refuses it
        // (INVALID_RECORD_STATE), but librdkafka 2.15.1's mock applies, unchecked, any
        // acknowledgement of an offset below the share-partition start offset, which the next
        // holder's accept has moved past. Such an accept is counted apart; the record must still
        // have exactly one accept by its holder. Any other second accept is a failure.
        int late = 0;
        for (const auto& by : r.accepted_by) {
          const auto mi = members_.find(by);
          if (by != r.deliveries.back().member && mi != members_.end() && mi->second.stall_begin) ++late;
        }
        c.late_applied += late;
        int accepted = static_cast<int>(r.accepted_by.size()) - late;
        // The killed member accepted what it had processed with its next poll(), but an
        // outcome reaches the callback only at a later poll(): what it accepted last has no
        // outcome. Such a record, last given to it and never again, was accepted (had the broker
        // not applied the accept, the killed member's connection closing would have released it to
        // the others: verdict() runs longer than the lock after the kill).
        const bool died = accepted == 0 && died_with_killed_locked(r);
        if (died) {
          ++c.died_with_killed;
          accepted = 1;
        }
        if (accepted == 1) ++c.accepted_once;
        if (accepted > 1) ++c.accepted_twice;
        if (accepted == 0) ++c.not_accepted;
        int killed_unanswered = 0;
        std::map<std::string, int> to;
        for (const auto& d : r.deliveries) {
          ++c.counts[d.count];
          ++to[d.member];
        }
        for (const auto& [name, n] : to) {
          const auto mi = members_.find(name);
          if (mi == members_.end() || !mi->second.killed_at) continue;
          const auto ai = r.answers.find(name);
          killed_unanswered += std::max(0, n - (ai == r.answers.end() ? 0 : ai->second));
        }
        const auto extra = static_cast<int>(r.deliveries.size()) - 1;
        if (extra > 0 || r.deliveries.front().count > 1) ++c.redelivered;
        for (const auto& e : r.failed) ++c.causes[failure_cause(e)];
        if (late > 0) c.causes["lock expired (the late accept the mock applied)"] += late;
        // A record the killed member accepted as it died: that delivery was the accepted one.
        if (killed_unanswered - (died ? 1 : 0) > 0) {
          c.causes["held by the killed member"] += killed_unanswered - (died ? 1 : 0);
        }
        const int answered = static_cast<int>(r.accepted_by.size() + r.failed.size()) + killed_unanswered;
        if (answered != static_cast<int>(r.deliveries.size())) {
          ++c.unexplained;
          if (c.unexplained <= 5) {
            c.failures.push_back(
                fmt::format("{}: delivered {} times, accepted {}, {} acknowledgements failed, {} "
                            "deliveries to a killed member unanswered",
                            record_name({p, o}), r.deliveries.size(), r.accepted_by.size(), r.failed.size(),
                            killed_unanswered));
          }
        }
      }
    }
    return c;
  }

 private:
  void on_records_locked(const std::string& name, share_member& m, steady::time_point at,
                         std::istringstream& in) {
    long long bad = 0;
    std::string list;
    in >> bad >> list;
    bad_ += bad;
    std::vector<record_id> got;
    std::map<std::int32_t, std::int64_t> last;  // per partition within this poll
    std::vector<std::pair<record_id, std::int16_t>> again;
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
      int p = 0, count = 0;
      long long o = 0;
      if (std::sscanf(item.c_str(), "%d:%lld:%d", &p, &o, &count) != 3) continue;
      const record_id id{p, o};
      got.push_back(id);
      ++deliveries_;
      const auto [it, fresh] = last.emplace(p, o);
      if (!fresh) {
        if (o <= it->second)
          violate(fmt::format("{} got {} after offset {} in one poll()", name, record_name(id), it->second));
        it->second = o;
      }
      record_log& r = records_[id];
      if (count < 1) violate(fmt::format("{} got {} without a delivery count", name, record_name(id)));
      if (!r.deliveries.empty() && count <= r.deliveries.back().count) {
        violate(fmt::format("{} got {} with delivery count {} after count {}", name, record_name(id), count,
                            r.deliveries.back().count));
      }
      if (!r.accepted_by.empty())
        violate(fmt::format("{} got {} after it was accepted", name, record_name(id)));
      if (count > 1) again.emplace_back(id, static_cast<std::int16_t>(count));
      r.deliveries.push_back({name, static_cast<std::int16_t>(count), at});
    }
    m.records += static_cast<std::int64_t>(got.size());
    m.last_poll = std::move(got);
    m.last_poll_at = at;
    if (!again.empty()) {
      // Where they were before, for the timeline.
      std::set<std::string> before;
      std::vector<record_id> ids;
      std::int16_t top = 0;
      for (const auto& [id, count] : again) {
        ids.push_back(id);
        top = std::max(top, count);
        const auto& ds = records_[id].deliveries;
        if (ds.size() >= 2) before.insert(ds[ds.size() - 2].member);
      }
      note_locked(at,
                  fmt::format("{} gets {} record{} again (delivery count up to {}): {}{}", name, again.size(),
                              again.size() == 1 ? "" : "s", top, record_runs(ids),
                              before.empty() ? std::string()
                                             : fmt::format("; given before to {}", fmt::join(before, ", "))));
    }
  }

  void on_outcome_locked(const std::string& name, steady::time_point at, std::int32_t p,
                         const std::string& runs, const std::string& error) {
    std::vector<record_id> ids;
    std::istringstream in(runs);
    for (std::string run; std::getline(in, run, ',');) {
      long long a = 0, b = 0;
      const int n = std::sscanf(run.c_str(), "%lld-%lld", &a, &b);
      if (n < 1) continue;
      if (n == 1) b = a;
      for (long long o = a; o <= b; ++o) ids.emplace_back(p, o);
    }
    const bool applied = error == "NONE";
    for (const auto& id : ids) {
      record_log& r = records_[id];
      ++r.answers[name];
      if (applied) {
        r.accepted_by.push_back(name);
      } else {
        r.failed.push_back(error);
      }
      outcome_by_[{name, id}] = error;
    }
    if (!applied && !ids.empty()) {
      note_locked(at, fmt::format("{}'s accept of {} record{} failed: {} ({}): {}", name, ids.size(),
                                  ids.size() == 1 ? "" : "s", error, failure_cause(error), record_runs(ids)));
    }
  }

  // Last given to a killed member, which never answered for it.
  bool died_with_killed_locked(const record_log& r) const {
    if (r.deliveries.empty()) return false;
    const std::string& last = r.deliveries.back().member;
    const auto mi = members_.find(last);
    if (mi == members_.end() || !mi->second.killed_at) return false;
    const auto given = std::count_if(r.deliveries.begin(), r.deliveries.end(),
                                     [&](const delivery& d) { return d.member == last; });
    const auto ai = r.answers.find(last);
    return (ai == r.answers.end() ? 0 : ai->second) < given;
  }

  void violate(std::string what) {
    if (violations_.size() < 20) violations_.push_back(std::move(what));
  }

  std::map<std::string, share_member> members_;
  std::vector<std::string> order_;
  std::map<record_id, record_log> records_;
  std::map<std::pair<std::string, record_id>, std::string>
      outcome_by_;  // (member, record) -> its last outcome
  std::vector<std::string> violations_;
  std::int64_t bad_ = 0;
  std::int64_t deliveries_ = 0;
};

class share_story {
 public:
  share_story(kgroup::test::mock_cluster& cluster, const std::string& log_dir)
      : cluster_(cluster), log_dir_(log_dir), state_(steady::now()) {
    base_.bootstrap = cluster.bootstrap_servers();
    base_.group = share_group;
    base_.share = true;
    base_.settings = {{"max.poll.records", std::to_string(max_poll_records)}, {"retry.backoff.ms", "50"}};
  }

  /// Runs the steps; stops at the first that fails (finish() reports it).
  void run() {
    fmt::print(
        "Share group '{}' (KIP-932) on topic '{}' ({} partitions, {} records written before the members\n"
        "start). The broker's group configs: acquisition lock {} ms (group.share.record.lock.duration.ms),\n"
        "delivery limit {}, heartbeat interval {} ms, session timeout {} ms. Each member is a\n"
        "kgroup::ShareConsumer in its own process (so one can be SIGKILLed), implicit acknowledgement\n"
        "(a poll() accepts what the previous one returned), max.poll.records={}, {} ms of work per record.\n"
        "Their logs (kept if something fails): {}\n",
        share_group, share_topic_name, share_partitions, with_commas(share_records), lock_ms, delivery_limit,
        heartbeat_ms, session_ms, max_poll_records, share_work_per_record.count(), log_dir_);

    step("1. Three members work the queue (each is given every partition)");
    for (const char* n : {"member-1", "member-2", "member-3"}) {
      start(n);
      if (!assign_all()) return;
    }
    let_work(4s);
    report_step();

    stall_step();
    if (!failures_.empty()) return;
    let_work(2s);
    kill_step();
  }

  /// Waits for the queue to be worked through, prints the summary; returns what failed, in the
  /// steps or there.
  std::vector<std::string> finish() {
    if (failures_.empty()) {
      state_.note(steady::now(), "");
      state_.note(steady::now(), "== The members finish the queue");
      // Longer than the lock after the kill: a record the killed member held unanswered has
      // either gone to another member by then or was accepted (verdict()).
      const auto after_kill = killed_at_ + std::chrono::milliseconds(lock_ms) + 1500ms;
      wait_for([&] { return state_.accepted_records() >= share_records && steady::now() >= after_kill; },
               90s);
    }
    // Outcomes still on their way (an accept goes out with a member's next poll()).
    let_work(1s);
    state_.note(steady::now(), "story over");
    state_.flush_journal(true);
    return summary();
  }

  /// With --serve: keeps the members (and their /metrics) running until Ctrl-C.
  void serve() {
    serve_members(
        members_,
        "Serving until Ctrl-C (the members keep polling an empty queue):", [this](const std::string& name) {
          const auto m = state_.member(name);
          return "metrics: " +
                 (m.endpoint.empty() ? std::string("(not served)") : "http://" + m.endpoint + "/metrics");
        });
  }

  /// Closes the members still running and reaps them; a member that does not exit 0 failed.
  std::vector<std::string> close_members() {
    std::vector<std::string> failures;
    for (auto& p : members_) {
      if (p->running()) p->command("leave");
    }
    for (auto& p : members_) {
      if (!p->running()) continue;
      if (const int rc = p->wait_exit(15s); rc != 0) {
        failures.push_back(fmt::format("{} exited with status {} after closing", p->name(), rc));
      }
    }
    return failures;
  }

 private:
  void start(const std::string& name) {
    member_options o = base_;
    o.name = name;
    state_.add_member(name);
    members_.push_back(std::make_unique<member_process>(o, log_dir_ + "/" + name + ".log", state_));
    state_.note(steady::now(), fmt::format("{} started (pid {})", name, members_.back()->pid()));
  }

  member_process& find(const std::string& name) { return find_member(members_, name); }

  // Waits until `done` holds (printing the timeline meanwhile); false, with a failure, if it does
  // not by `limit` or the demo is interrupted.
  bool wait_for(const std::function<bool()>& done, std::chrono::seconds limit, const std::string& what = "") {
    const auto deadline = steady::now() + limit;
    while (!done()) {
      state_.flush_journal(false);
      if (g_interrupted) {
        failures_.push_back("interrupted");
        return false;
      }
      if (steady::now() >= deadline) {
        if (!what.empty()) failures_.push_back(fmt::format("{} (waited {} s)", what, limit.count()));
        return false;
      }
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }

  void let_work(std::chrono::milliseconds d) {
    const auto until = steady::now() + d;
    while (steady::now() < until && !g_interrupted) {
      state_.flush_journal(false);
      std::this_thread::sleep_for(50ms);
    }
  }

  // The members started so far, once the mock knows each, get every partition of the topic (the
  // mock's automatic assignment gives a partition to one member, SHARE-GROUPS.md M3). A member
  // joins a heartbeat interval after the last change (two within one fence, M4).
  bool assign_all() {
    std::map<std::string, std::string> ids;  // member id -> name
    const bool known = wait_for(
        [&] {
          ids.clear();
          for (const auto& p : members_) {
            const auto m = state_.member(p->name());
            if (!m.member_id.empty()) ids[m.member_id] = p->name();
          }
          if (ids.size() != members_.size()) return false;
          const auto in_mock = cluster_.share_group_member_ids(share_group);
          return std::all_of(ids.begin(), ids.end(), [&](const auto& kv) {
            return std::find(in_mock.begin(), in_mock.end(), kv.first) != in_mock.end();
          });
        },
        20s, fmt::format("{} did not join the share group", members_.back()->name()));
    if (!known) return false;
    std::vector<std::pair<std::string, std::int32_t>> every;
    for (std::int32_t p = 0; p < share_partitions; ++p) every.emplace_back(share_topic_name, p);
    std::map<std::string, std::vector<std::pair<std::string, std::int32_t>>> target;
    std::vector<std::string> names;
    for (const auto& [id, name] : ids) {
      target[id] = every;
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    if (!cluster_.share_group_assign(share_group, target)) {
      failures_.push_back("the mock cluster refused the target assignment");
      return false;
    }
    state_.note(steady::now(),
                fmt::format("every partition of '{}' assigned to {} (the mock's target assignment)",
                            share_topic_name, fmt::join(names, ", ")));
    let_work(std::chrono::milliseconds(heartbeat_ms + 300));
    return true;
  }

  void step(const std::string& title) {
    const auto t = steady::now();
    state_.note(t, "");
    state_.note(t, "== " + title);
    step_start_ = t;
    step_deliveries_ = state_.deliveries();
    for (const auto& n : state_.member_names()) step_records_[n] = state_.member(n).records;
  }

  // Records per member since the step began.
  void report_step() {
    state_.flush_journal(true);
    std::vector<std::string> per;
    for (const auto& n : state_.member_names()) {
      per.push_back(fmt::format("{} {}", n, with_commas(state_.member(n).records - step_records_[n])));
    }
    fmt::print("  -> {} records delivered in {:.1f} s ({}); {} of {} accepted so far\n",
               with_commas(state_.deliveries() - step_deliveries_), seconds(steady::now() - step_start_),
               fmt::join(per, ", "), with_commas(state_.accepted_records()), with_commas(share_records));
    std::fflush(stdout);
  }

  void stall_step() {
    const std::string staller = "member-2";
    step(fmt::format(
        "2. {} stalls for {:.1f} s after a poll(), past the {:.1f} s lock (its process, heartbeats and "
        "connection stay)",
        staller, stall_ms / 1000.0, lock_ms / 1000.0));
    find(staller).command(fmt::format("stall {}", stall_ms));
    if (!wait_for([&] { return state_.member(staller).stall_begin.has_value(); }, 20s,
                  staller + " did not get records to stall with")) {
      return;
    }
    const auto m = state_.member(staller);
    // Its records move on: each to another member, with delivery count 2.
    std::vector<delivery> moved;
    wait_for(
        [&] {
          moved = state_.moved_on(m.held, staller, *m.stall_begin);
          return moved.size() == m.held.size();
        },
        wait_limit, fmt::format("the records {} held were not all given to another member", staller));
    // It polls again: its accept of them goes out too late.
    wait_for(
        [&] {
          int n = 0;
          for (const auto& [e, c] : state_.outcomes_of(staller, m.held)) n += c;
          return state_.member(staller).stall_end.has_value() && n == static_cast<int>(m.held.size());
        },
        wait_limit, fmt::format("{}'s late accept of the records it held was not answered", staller));
    state_.set_fate(staller, fmt::format("stalled {:.1f} s", stall_ms / 1000.0));
    report_step();
    if (moved.empty()) return;
    steady::time_point first = moved.front().at, all = first;
    std::set<std::string> to;
    bool count2 = true;
    for (const auto& d : moved) {
      first = std::min(first, d.at);
      all = std::max(all, d.at);
      to.insert(d.member);
      count2 = count2 && d.count == 2;
    }
    redelivery_first_s_ = seconds(first - m.stall_last_poll);
    redelivery_all_s_ = seconds(all - m.stall_last_poll);
    fmt::print(
        "     the {} records {} held went to {} with delivery count {}: the first {:.2f} s\n"
        "     after its last poll(), all of them after {:.2f} s (lock {:.1f} s; the mock sweeps\n"
        "     expired locks once a second)\n",
        m.held.size(), staller, fmt::join(to, " and "), count2 ? "2" : "2 or more", redelivery_first_s_,
        redelivery_all_s_, lock_ms / 1000.0);
    if (!count2)
      failures_.push_back(
          fmt::format("{}'s held records came back with a delivery count other than 2", staller));
    for (const auto& [error, n] : state_.outcomes_of(staller, m.held)) {
      if (error == "NONE") {
        fmt::print(
            "     its late accept of {} of them was applied: the other member had accepted them\n"
            "     already, which moved the share-partition start offset past them, and librdkafka\n"
            "     2.15.1's mock applies acknowledgements below that offset without a check (Kafka\n"
            "     refuses them: INVALID_RECORD_STATE)\n",
            n);
      } else {
        fmt::print("     its late accept of {} of them failed: {} ({})\n", n, error, failure_cause(error));
      }
    }
    const auto after = state_.member(staller);
    fmt::print("     {}'s metrics: acknowledgements_failed {}, acknowledgements_lock_expired {}\n", staller,
               after.failed, after.lock_expired);
    std::fflush(stdout);
  }

  void kill_step() {
    const std::string victim = "member-3";
    step(fmt::format("3. {} is killed (SIGKILL: no close(), its share session and connection just end)",
                     victim));
    const auto at = steady::now();
    killed_at_ = at;
    find(victim).kill();
    state_.killed(victim, at);
    state_.note(at, fmt::format("{} killed (pid {})", victim, find(victim).pid()));
    find(victim).wait_exit(5s);
    const auto m = state_.member(victim);
    // What it held goes on to the others, unless its accept of them went out before it died (the
    // summary's verdict tells them apart): no failure here, the lock bounds the wait.
    wait_for([&] { return state_.moved_on(m.held_at_kill, victim, at).size() == m.held_at_kill.size(); },
             std::chrono::seconds(lock_ms / 1000 + 2));
    // The others carry on.
    std::map<std::string, std::int64_t> before;
    for (const auto& n : {"member-1", "member-2"}) before[n] = state_.member(n).records;
    wait_for(
        [&] {
          return state_.accepted_records() >= share_records ||
                 std::all_of(before.begin(), before.end(), [&](const auto& kv) {
                   return state_.member(kv.first).records > kv.second + 20;
                 });
        },
        wait_limit, "the members left did not carry on");
    let_work(2s);
    report_step();
    const auto moved = state_.moved_on(m.held_at_kill, victim, at);
    if (m.held_at_kill.empty()) {
      fmt::print("     {} held no records when it was killed\n", victim);
    } else if (!moved.empty()) {
      steady::time_point first = moved.front().at;
      for (const auto& d : moved) first = std::min(first, d.at);
      fmt::print(
          "     {} of the {} records {} held went on {:.2f} s after the kill: the mock ends\n"
          "     every share session of the broker when a connection closes, which releases them\n"
          "     (the lock did not have to run out)\n",
          moved.size(), m.held_at_kill.size(), victim, seconds(first - at));
    }
    if (moved.size() < m.held_at_kill.size()) {
      fmt::print("     {} of them never went on: its accept of them went out before it died\n",
                 m.held_at_kill.size() - moved.size());
    }
    std::fflush(stdout);
  }

  std::vector<std::string> summary() {
    std::vector<std::string> failures = failures_;
    const auto c = state_.verdict(share_records / share_partitions);
    fmt::print("\nSummary (share group, {:.1f} s)\n", seconds(steady::now() - state_.t0()));
    fmt::print("  {:<9} {:<18} {:>9} {:>11} {:>9} {:>7} {:>12}\n", "member", "fate", "delivered",
               "redelivered", "accepted", "failed", "lock expired");
    for (const auto& n : state_.member_names()) {
      const auto m = state_.member(n);
      fmt::print("  {:<9} {:<18} {:>9} {:>11} {:>9} {:>7} {:>12}\n", n, m.fate, with_commas(m.records),
                 with_commas(static_cast<std::int64_t>(m.redelivered)),
                 with_commas(static_cast<std::int64_t>(m.accepted)),
                 with_commas(static_cast<std::int64_t>(m.failed)),
                 with_commas(static_cast<std::int64_t>(m.lock_expired)));
    }
    fmt::print(
        "  (delivered: records its poll() returned; the others from its ShareConsumer::metrics(), a killed\n"
        "   member's as last reported: redelivered = delivery count above 1, failed = acknowledgements the\n"
        "   broker refused, lock expired = of those, refused because the lock had run out)\n");
    std::vector<std::string> counts;
    for (const auto& [count, n] : c.counts)
      counts.push_back(fmt::format("count {}: {}", count, with_commas(n)));
    fmt::print(
        "  records: produced {}, delivered {} times to {} distinct ({}),\n"
        "  missing {}, wrong key {}\n",
        with_commas(share_records), with_commas(state_.deliveries()), with_commas(c.distinct),
        fmt::join(counts, ", "), with_commas(c.missing), with_commas(c.bad));
    fmt::print("  accepted exactly once: {} of {}; redelivered (a count above 1): {}\n",
               with_commas(c.accepted_once), with_commas(share_records), with_commas(c.redelivered));
    if (c.died_with_killed > 0) {
      fmt::print(
          "  (of those accepted, {} by the killed member as it died: their outcome died with it,\n"
          "   and they were never delivered again, so the broker applied the accept)\n",
          with_commas(c.died_with_killed));
    }
    std::vector<std::string> causes;
    for (const auto& [cause, n] : c.causes) causes.push_back(fmt::format("{} {}", with_commas(n), cause));
    fmt::print("  the deliveries besides each record's accepted one, by cause:\n    {}\n",
               causes.empty() ? std::string("none") : fmt::format("{}", fmt::join(causes, ", ")));
    if (c.late_applied > 0) {
      fmt::print(
          "  late accepts of records another member had accepted, applied by the mock (see step 2): {}\n",
          with_commas(c.late_applied));
    }
    if (redelivery_first_s_ >= 0) {
      fmt::print(
          "  the stalled member's records redelivered {:.2f} s after its last poll() (all by {:.2f} s);\n"
          "  lock {:.1f} s\n",
          redelivery_first_s_, redelivery_all_s_, lock_ms / 1000.0);
    }
    fmt::print(
        "  (every delivery but a record's accepted one must be explained: a failed acknowledgement - the\n"
        "   lock had expired, or the member's share session ended when the killed member's connection\n"
        "   closed - or a late accept the mock applied, or a delivery to the killed member, which never\n"
        "   answered)\n");
    for (const auto& e : state_.errors()) fmt::print("  error reported by{}\n", e);

    if (const auto in_topic = cluster_.total_records(share_topic_name); in_topic != share_records) {
      failures.push_back(
          fmt::format("{} records were written but the topic holds {}", share_records, in_topic));
    }
    if (c.missing > 0) failures.push_back(fmt::format("{} produced records were never delivered", c.missing));
    if (c.not_accepted > 0) failures.push_back(fmt::format("{} records were never accepted", c.not_accepted));
    if (c.accepted_twice > 0)
      failures.push_back(fmt::format("{} records were accepted twice", c.accepted_twice));
    if (c.bad > 0) failures.push_back(fmt::format("{} records had an unexpected key", c.bad));
    if (c.unexplained > 0) {
      failures.push_back(fmt::format("{} records were delivered more often than explained", c.unexplained));
    }
    for (const auto& v : c.failures) failures.push_back(v);
    return failures;
  }

  kgroup::test::mock_cluster& cluster_;
  std::string log_dir_;
  member_options base_;
  share_state state_;
  std::vector<std::unique_ptr<member_process>> members_;
  std::vector<std::string> failures_;
  steady::time_point step_start_{};
  std::int64_t step_deliveries_ = 0;
  std::map<std::string, std::int64_t> step_records_;
  double redelivery_first_s_ = -1, redelivery_all_s_ = -1;
  steady::time_point killed_at_{};
};

}  // namespace

std::vector<std::string> tell_share_story(const options& opt, const std::string& log_dir) {
  try {
    kgroup::test::mock_cluster cluster(1);
    // Before any member: the timers apply only to groups created afterwards (SHARE-GROUPS.md M9).
    kgroup::test::mock_cluster::share_group_settings s;
    s.earliest = true;
    s.record_lock_duration_ms = lock_ms;
    s.max_delivery_attempts = delivery_limit;
    s.heartbeat_interval_ms = heartbeat_ms;
    s.session_timeout_ms = session_ms;
    if (!cluster.set_share_groups(s)) {
      return {"--share needs librdkafka 2.15's mock cluster (share groups, KIP-932); librdkafka " +
              kgroup::test::mock_cluster::librdkafka_version_string() +
              " is loaded. .ci/demo --share builds 2.15.1 and runs the demo with it"};
    }
    cluster.create_topic(share_topic_name, share_partitions);
    cluster.produce(share_topic_name, share_records);
    fmt::print(
        "kgroup-demo: mock Kafka cluster (librdkafka {}) of 1 broker at {}, topic '{}' with {} "
        "partitions\n\n",
        kgroup::test::mock_cluster::librdkafka_version_string(), cluster.bootstrap_servers(),
        share_topic_name, share_partitions);
    share_story story(cluster, log_dir);
    story.run();
    auto failures = story.finish();
    if (opt.serve && !g_interrupted) story.serve();
    const auto closing = story.close_members();
    failures.insert(failures.end(), closing.begin(), closing.end());
    return failures;
  } catch (const std::exception& e) {
    return {e.what()};
  }
}

}  // namespace demo
