// kgroup-demo: the story (see story.hpp and the top of main.cpp).
#include "story.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "parent.hpp"
#include "processes.hpp"
#include "timeline.hpp"

namespace demo {
namespace {

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
    if (opt.protocol == "consumer") {
      // KIP-848: the coordinator assigns and owns the timers (the mock's are set to the same 6 s
      // session and 500 ms heartbeat interval as the classic runs).
      base_.strategy.clear();
      base_.settings.emplace_back("group.protocol", "consumer");
      state_.set_kip848(true);
    }
    base_.session_timeout_ms = 6000;
    base_.heartbeat_interval_ms = 500;
    base_.max_poll_interval_ms = 8000;
    state_.set_max_poll_ms(base_.max_poll_interval_ms);
  }

  /// Runs the story; returns the failures (empty: it ran as scripted).
  std::vector<std::string> run() {
    if (kip848()) {
      fmt::print("Group '{}' with the consumer protocol (KIP-848: group.protocol=consumer, the coordinator\n"
                 "assigns, no group-wide barrier); the coordinator's session timeout is {} ms and its heartbeat\n"
                 "interval {} ms; every member has max.poll.interval.ms={}, auto.offset.reset=earliest.\n"
                 "Each member is a child process (so one can be SIGKILLed); their logs (kept if something fails): {}\n\n",
                 base_.group, base_.session_timeout_ms, base_.heartbeat_interval_ms, base_.max_poll_interval_ms,
                 log_dir_);
    } else {
      fmt::print("Group '{}' with the {} protocol (partition.assignment.strategy={}); every member has\n"
                 "session.timeout.ms={}, heartbeat.interval.ms={}, max.poll.interval.ms={}, auto.offset.reset=earliest.\n"
                 "Each member is a child process (so one can be SIGKILLed); their logs (kept if something fails): {}\n\n",
                 base_.group, opt_.protocol, base_.strategy, base_.session_timeout_ms, base_.heartbeat_interval_ms,
                 base_.max_poll_interval_ms, log_dir_);
    }
    producer_ = std::make_unique<producer>(cluster_.bootstrap_servers(), opt_.rate);
    state_.note(steady::now(), fmt::format("producer started: about {} records/s over the {} partitions", opt_.rate,
                                           partition_count));

    step("1. Three members join", {"member-1", "member-2", "member-3"}, [&] {
      for (const char* n : {"member-1", "member-2", "member-3"}) start(n);
      return std::function<bool()>([] { return true; });
    });
    check_owns(fmt::format("after the first {}, member-1", state_.rebalance_word()), "member-1");
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
    step(fmt::format("3. {} leaves cleanly (close(): revokes its partitions, sends {})", leaver,
                     kip848() ? "a heartbeat with epoch -1" : "LeaveGroup"),
         alive, [&] {
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
    step(fmt::format("4. {} is killed (SIGKILL: no revoke, no {}; the coordinator notices after {}={})", victim,
                     kip848() ? "leave heartbeat" : "LeaveGroup",
                     kip848() ? "group.consumer.session.timeout.ms" : "session.timeout.ms", base_.session_timeout_ms),
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

    fmt::print("\nSummary ({} protocol, {:.1f} s, {} {}{})\n", opt_.protocol, seconds(story_end - state_.t0()),
               state_.rebalance_count(), state_.rebalance_word(), state_.rebalance_count() == 1 ? "" : "s");
    fmt::print("  {:<9} {:<24} {:<20} {:>9} {:>11}  {}\n", "member", "fate", "partitions at end", "records",
               kip848() ? "reconciled" : "rebalances", "its partitions paused (count, total, longest)");
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
    fmt::print("  partitions paused by {}s: {} times, {:.1f} partition-seconds in total, longest {:.2f} s\n",
               state_.rebalance_word(), paused_count, paused_total, paused_longest);
    fmt::print("  records: produced {}, consumed {} ({} distinct, {} duplicates), missing {}, wrong key {}\n",
               with_commas(produced_total), with_commas(totals.consumed), with_commas(totals.distinct),
               with_commas(totals.duplicates), with_commas(totals.missing), with_commas(totals.bad));
    if (kip848()) {
      fmt::print("  (reconciled: the reconciliations each member's metrics count, one per new target assignment it\n"
                 "   reached. paused: from the owner stopping - revoke or lost callback returned, killed, poll loop\n"
                 "   stalled - until an assign callback for the partition starts)\n");
    } else {
      fmt::print("  (rebalances: completed, as each member's metrics count them; a cooperative rebalance that moves\n"
                 "   partitions takes two. paused: from the owner stopping - revoke or lost callback returned,\n"
                 "   killed, poll loop stalled - until an assign callback for the partition starts)\n");
    }
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
    serve_members(members_, "Serving until Ctrl-C (the producer is stopped; the members keep polling):",
                  [this](const std::string& name) {
                    const auto m = state_.member(name);
                    return "dashboard: " + (m.http_endpoint.empty() ? std::string("(not available)")
                                                                    : "http://" + m.http_endpoint + "/");
                  });
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

  member_process& find(const std::string& name) { return find_member(members_, name); }

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
    step_result result;
    result.title = title;
    result.settle_s = seconds(settled_at - t);
    for (const auto& p : state_.pauses()) {
      if (p.from.empty() || p.end <= t || p.end > settled_at) continue;
      ++result.paused;
      result.paused_s += seconds(p.end - p.start);
      result.longest_s = std::max(result.longest_s, seconds(p.end - p.start));
    }
    steps_.push_back(result);
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
  member_options base_;
  story_state state_;
  std::unique_ptr<producer> producer_;
  std::vector<std::unique_ptr<member_process>> members_;
  std::vector<std::string> failures_;
  std::vector<step_result> steps_;

 public:
  bool kip848() const { return opt_.protocol == "consumer"; }
  const std::vector<step_result>& steps() const { return steps_; }
};

}  // namespace

std::vector<std::string> tell_story(const options& opt, kgroup::test::mock_cluster& cluster,
                                    const std::string& member_bootstrap, const std::string& log_dir,
                                    std::vector<std::pair<std::string, std::string>> member_settings,
                                    std::vector<step_result>* steps) {
  story s(opt, cluster, member_bootstrap, log_dir, std::move(member_settings));
  auto failures = s.run();
  const auto more = s.finish();
  if (steps != nullptr) *steps = s.steps();
  failures.insert(failures.end(), more.begin(), more.end());
  if (opt.serve && !g_interrupted) s.serve();
  s.close_members();
  return failures;
}

}  // namespace demo
