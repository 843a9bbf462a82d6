// The chaos test's parent side (test_chaos.cpp): the recorder of every member's lines and the
// invariant checks over them, the handles of members in this process or in child processes, and
// the committed-offset sampler.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "group_harness.hpp"
#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"

extern char** environ;

using namespace std::chrono_literals;

#include "chaos_member.hpp"

extern char** environ;

namespace chaos {

inline std::vector<int> parse_parts(const std::string& text) {
  std::vector<int> out;
  if (text == "-") return out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::atoi(text.c_str() + pos));
    pos = comma + 1;
  }
  return out;
}

struct ownership_event {
  std::int64_t t = 0;
  std::string member;
  char what = 'A';  // A, R, L
  std::vector<int> parts;
};

class recorder {
 public:
  recorder() : consumed_(partition_count) {}

  void line(const std::string& member, const std::string& text) {
    if (text.empty()) return;
    std::istringstream in(text.substr(1));
    std::lock_guard lock(mutex_);
    switch (text[0]) {
      case 'A':
      case 'R':
      case 'L': {
        ownership_event e;
        std::string parts;
        in >> e.t >> parts;
        e.member = member;
        e.what = text[0];
        e.parts = parse_parts(parts);
        auto& owned = owned_[member];
        for (int p : e.parts) {
          if (e.what == 'A') {
            owned.insert(p);
          } else {
            owned.erase(p);
          }
        }
        events_.push_back(std::move(e));
        break;
      }
      case 'C': {
        int p = 0;
        std::int64_t first = 0, last = 0;
        in >> p >> first >> last;
        if (p < 0 || p >= partition_count) break;
        runs_.push_back({now_ns(), member, p, first, last});
        auto& bits = consumed_[static_cast<std::size_t>(p)];
        if (bits.size() <= static_cast<std::size_t>(last)) bits.resize(static_cast<std::size_t>(last) + 1, 0);
        for (std::int64_t o = first; o <= last; ++o) {
          if (bits[static_cast<std::size_t>(o)]) ++redelivered_;
          bits[static_cast<std::size_t>(o)] = 1;
          ++consumed_total_;
        }
        break;
      }
      case 'S': {
        std::int64_t at = 0, last_poll = 0;
        int ms = 0;
        in >> at >> last_poll >> ms;
        // The member's poll deadline: after it, it is no longer a live member.
        stall_cuts_[member].push_back(last_poll +
                                      static_cast<std::int64_t>(max_poll_interval_ms) * 1'000'000);
        break;
      }
      case 'G': {
        std::int64_t at = 0;
        int generation = 0;
        in >> at >> generation;
        if (generation <= 0) break;
        auto [it, fresh] = formed_.emplace(generation, at);
        if (!fresh) it->second = std::min(it->second, at);
        joined_[member].insert(generation);
        break;
      }
      case 'T': {
        int s = 0;
        in >> s;
        settled_[member] = s == 1;
        break;
      }
      case 'K': {
        std::int64_t at = 0;
        std::string list;
        in >> at >> list;
        std::istringstream items(list);
        std::string item;
        while (std::getline(items, item, ',')) {
          const auto colon = item.find(':');
          if (colon == std::string::npos) continue;
          const int p = std::atoi(item.c_str());
          if (p >= 0 && p < partition_count)
            commits_[p].push_back({at, member, std::atoll(item.c_str() + colon + 1)});
        }
        break;
      }
      case 'N':
        ++notes_[member];
        if (note_samples_.size() < 12) note_samples_.push_back(member + ": " + text.substr(2));
        break;
      case 'E':
        failures_.push_back(member + ": " + text.substr(2));
        break;
      case 'X': {
        const auto space = text.rfind(' ');
        closes_[member] = {text.substr(2, space - 2), std::atoll(text.c_str() + space + 1)};
        break;
      }
      default:
        break;
    }
  }

  void killed(const std::string& member, std::int64_t at) {
    std::lock_guard lock(mutex_);
    kills_[member] = at;
  }
  void failure(const std::string& text) {
    std::lock_guard lock(mutex_);
    failures_.push_back(text);
  }

  std::set<int> owned(const std::string& member) const {
    std::lock_guard lock(mutex_);
    auto it = owned_.find(member);
    return it == owned_.end() ? std::set<int>{} : it->second;
  }
  bool settled(const std::string& member) const {
    std::lock_guard lock(mutex_);
    auto it = settled_.find(member);
    return it != settled_.end() && it->second;
  }
  std::optional<std::pair<std::string, std::int64_t>> close_result(const std::string& member) const {
    std::lock_guard lock(mutex_);
    auto it = closes_.find(member);
    if (it == closes_.end()) return std::nullopt;
    return it->second;
  }

  // Offsets in [0, produced[p]) nobody consumed.
  std::vector<std::string> missing(const std::vector<std::int64_t>& produced,
                                   std::size_t* count = nullptr) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    std::size_t n = 0;
    for (int p = 0; p < partition_count; ++p) {
      const auto& bits = consumed_[static_cast<std::size_t>(p)];
      for (std::int64_t o = 0; o < produced[static_cast<std::size_t>(p)]; ++o) {
        if (static_cast<std::size_t>(o) >= bits.size() || !bits[static_cast<std::size_t>(o)]) {
          ++n;
          if (out.size() < 10) out.push_back(std::to_string(p) + "@" + std::to_string(o));
        }
      }
    }
    if (count) *count = n;
    return out;
  }

  // Missing offsets per partition (the partitions that have any).
  std::map<int, std::size_t> missing_by_partition(const std::vector<std::int64_t>& produced) const {
    std::lock_guard lock(mutex_);
    std::map<int, std::size_t> out;
    for (int p = 0; p < partition_count; ++p) {
      const auto& bits = consumed_[static_cast<std::size_t>(p)];
      for (std::int64_t o = 0; o < produced[static_cast<std::size_t>(p)]; ++o) {
        if (static_cast<std::size_t>(o) >= bits.size() || !bits[static_cast<std::size_t>(o)]) ++out[p];
      }
    }
    return out;
  }

  // The librdkafka member that holds partition `p` now (its last ownership event is an assign),
  // was never killed, has held it for at least `held` and consumed none of it since: a stalled
  // librdkafka consumer (2.0.2 stops fetching after some series of broker outages), whose
  // partition's missing records are not a kgroup fault. Empty otherwise.
  std::string stalled_librdkafka_owner(int p, std::chrono::nanoseconds held) const {
    std::lock_guard lock(mutex_);
    const ownership_event* last = nullptr;
    for (const auto& e : events_) {
      if (std::find(e.parts.begin(), e.parts.end(), p) != e.parts.end()) last = &e;
    }
    if (last == nullptr || last->what != 'A' || last->member.empty() || last->member[0] != 'r') return "";
    if (kills_.count(last->member) != 0 || now_ns() - last->t < held.count()) return "";
    for (const auto& r : runs_) {
      if (r.p == p && r.member == last->member && r.t >= last->t) return "";
    }
    return last->member;
  }

  std::uint64_t consumed_total() const {
    std::lock_guard lock(mutex_);
    return consumed_total_;
  }
  std::uint64_t redelivered() const {
    std::lock_guard lock(mutex_);
    return redelivered_;
  }
  std::vector<std::string> failures() const {
    std::lock_guard lock(mutex_);
    return failures_;
  }
  std::map<std::string, int> notes() const {
    std::lock_guard lock(mutex_);
    return notes_;
  }
  std::vector<std::string> note_samples() const {
    std::lock_guard lock(mutex_);
    return note_samples_;
  }

  // Invariant 1: every moment a partition had two live owners (see the header comment).
  // `ends` (optional) counts the intervals by how they ended (R, L, K, S, G, o as above).
  std::vector<std::string> double_owners(std::size_t* intervals_out = nullptr,
                                         std::map<char, std::size_t>* ends = nullptr) const {
    std::lock_guard lock(mutex_);
    struct interval {
      std::int64_t start, end;
      std::string member;
      char how;  // R, L (its callback), K (killed), S (poll deadline of a stall), G (left out of a
                 // generation), open; ends also counts g: an assignment delivered after its generation was
                 // over (no interval)
    };
    constexpr std::int64_t forever = INT64_MAX;
    auto events = events_;
    std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.t < b.t; });
    std::map<std::string, std::map<int, std::int64_t>> open;  // member -> partition -> start
    std::vector<std::vector<interval>> by_partition(partition_count);
    auto close_interval = [&](const std::string& member, int p, std::int64_t start, std::int64_t end,
                              char how) {
      // Ownership also ends at a kill and at a stalled member's poll deadline.
      if (auto k = kills_.find(member); k != kills_.end() && k->second < end) {
        end = k->second;
        how = 'K';
      }
      if (auto s = stall_cuts_.find(member); s != stall_cuts_.end()) {
        for (std::int64_t cut : s->second) {
          if (start < cut && cut < end) {
            end = cut;
            how = 'S';
          }
        }
      }
      const auto j = joined_.find(member);
      // An assignment that arrives when the newest generation is one this member did not join
      // belongs to a generation that is over (a callback delivered late, after a stall): it makes
      // the member no live owner.
      {
        std::optional<int> current;
        for (const auto& [generation, formed] : formed_) {
          if (formed <= start) current = generation;
        }
        if (current && (j == joined_.end() || !j->second.count(*current))) {
          if (ends) ++(*ends)['g'];
          return;
        }
      }
      // A generation formed after the ownership began that this member did not join.
      for (const auto& [generation, formed] : formed_) {
        if (start < formed && formed < end && (j == joined_.end() || !j->second.count(generation))) {
          end = formed;
          how = 'G';
        }
      }
      if (end > start && p >= 0 && p < partition_count)
        by_partition[static_cast<std::size_t>(p)].push_back({start, end, member, how});
    };
    for (const auto& e : events) {
      auto& mine = open[e.member];
      for (int p : e.parts) {
        if (e.what == 'A') {
          mine.emplace(p, e.t);  // keeps the earlier start if already open
        } else if (auto it = mine.find(p); it != mine.end()) {
          close_interval(e.member, p, it->second, e.t, e.what);
          mine.erase(it);
        }
      }
    }
    for (const auto& [member, parts] : open) {
      for (const auto& [p, start] : parts) close_interval(member, p, start, forever, 'o');
    }
    std::vector<std::string> out;
    std::size_t total = 0;
    for (int p = 0; p < partition_count; ++p) {
      auto& v = by_partition[static_cast<std::size_t>(p)];
      total += v.size();
      if (ends) {
        for (const auto& i : v) ++(*ends)[i.how];
      }
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
      for (std::size_t i = 0; i < v.size(); ++i) {
        for (std::size_t j = i + 1; j < v.size() && v[j].start < v[i].end; ++j) {
          if (v[j].member == v[i].member) continue;
          if (out.size() < 10) {
            char buf[256];
            std::snprintf(buf, sizeof buf,
                          "partition %d: %s from %.3f s (until %.3f s, %c) overlaps %s from %.3f s", p,
                          v[i].member.c_str(), static_cast<double>(v[i].start - t0_) / 1e9,
                          v[i].end == forever ? -1.0 : static_cast<double>(v[i].end - t0_) / 1e9, v[i].how,
                          v[j].member.c_str(), static_cast<double>(v[j].start - t0_) / 1e9);
            out.push_back(buf);
          } else {
            out.push_back("...");
            if (intervals_out) *intervals_out = total;
            return out;
          }
        }
      }
    }
    if (intervals_out) *intervals_out = total;
    return out;
  }

  void set_t0(std::int64_t t0) { t0_ = t0; }
  std::size_t event_count() const {
    std::lock_guard lock(mutex_);
    return events_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::int64_t t0_ = 0;
  std::vector<ownership_event> events_;
  std::map<std::string, std::set<int>> owned_;
  std::map<std::string, bool> settled_;
  std::vector<std::vector<char>> consumed_;
  std::uint64_t consumed_total_ = 0;
  std::uint64_t redelivered_ = 0;
  std::map<std::string, std::vector<std::int64_t>> stall_cuts_;
  std::map<int, std::int64_t> formed_;           // generation -> first JoinGroup answer seen
  std::map<std::string, std::set<int>> joined_;  // member -> generations it joined
  std::map<std::string, std::int64_t> kills_;
  std::map<std::string, int> notes_;
  std::vector<std::string> note_samples_;
  std::vector<std::string> failures_;
  std::map<std::string, std::pair<std::string, std::int64_t>> closes_;
  struct run {
    std::int64_t t;
    std::string member;
    int p;
    std::int64_t first, last;
  };
  std::vector<run> runs_;
  struct commit_event {
    std::int64_t t;
    std::string member;
    std::int64_t offset;
  };
  std::map<int, std::vector<commit_event>> commits_;  // partition -> commits reported (K lines)

 public:
  // Ownership events of partition `p`, and the stalls and kills of their members.
  // The commits members reported for partition `p` at or above offset `low` (invariant 3's report).
  void explain_commits(int p, std::int64_t low) const {
    std::lock_guard lock(mutex_);
    std::printf("    commits of partition %d at or above offset %" PRId64
                " (as the members reported them):\n",
                p, low);
    auto it = commits_.find(p);
    if (it == commits_.end()) return;
    for (const auto& c : it->second) {
      if (c.offset >= low)
        std::printf("      %8.3f s %s %" PRId64 "\n", static_cast<double>(c.t - t0_) / 1e9, c.member.c_str(),
                    c.offset);
    }
  }

  // The members that reported committing `offset` for partition `p` between `from` and `to`
  // (CLOCK_MONOTONIC ns): who a committed offset the sampler saw came from.
  std::set<std::string> committers(int p, std::int64_t offset, std::int64_t from, std::int64_t to) const {
    std::lock_guard lock(mutex_);
    std::set<std::string> who;
    auto it = commits_.find(p);
    if (it == commits_.end()) return who;
    for (const auto& c : it->second) {
      if (c.offset == offset && c.t >= from && c.t <= to) who.insert(c.member);
    }
    return who;
  }

  void explain_partition(int p) const {
    std::lock_guard lock(mutex_);
    std::set<std::string> who;
    std::printf("    ownership of partition %d:\n", p);
    for (const auto& e : events_) {
      if (std::find(e.parts.begin(), e.parts.end(), p) != e.parts.end()) {
        std::printf("      %8.3f s %s %c\n", static_cast<double>(e.t - t0_) / 1e9, e.member.c_str(), e.what);
        who.insert(e.member);
      }
    }
    for (const auto& m : who) {
      if (auto k = kills_.find(m); k != kills_.end())
        std::printf("      %s killed at %.3f s\n", m.c_str(), static_cast<double>(k->second - t0_) / 1e9);
      if (auto s = stall_cuts_.find(m); s != stall_cuts_.end()) {
        for (auto cut : s->second)
          std::printf("      %s stall: poll deadline %.3f s\n", m.c_str(),
                      static_cast<double>(cut - t0_) / 1e9);
      }
      if (auto j = joined_.find(m); j != joined_.end()) {
        std::printf("      %s joined generations:", m.c_str());
        for (int g : j->second) std::printf(" %d", g);
        std::printf("\n");
      }
    }
    std::printf("      generations formed:");
    for (const auto& [g, t] : formed_) std::printf(" %d@%.3f", g, static_cast<double>(t - t0_) / 1e9);
    std::printf("\n");
  }

  // For a failed at-least-once check: the gaps, who consumed around them and who owned the partition.
  void explain_missing(const std::vector<std::int64_t>& produced) const {
    std::lock_guard lock(mutex_);
    int shown = 0;
    for (int p = 0; p < partition_count && shown < 3; ++p) {
      const auto& bits = consumed_[static_cast<std::size_t>(p)];
      for (std::int64_t o = 0; o < produced[static_cast<std::size_t>(p)] && shown < 3; ++o) {
        if (static_cast<std::size_t>(o) < bits.size() && bits[static_cast<std::size_t>(o)]) continue;
        std::int64_t end = o;
        while (
            end + 1 < produced[static_cast<std::size_t>(p)] &&
            !(static_cast<std::size_t>(end + 1) < bits.size() && bits[static_cast<std::size_t>(end + 1)])) {
          ++end;
        }
        std::printf("    gap: partition %d offsets %" PRId64 "-%" PRId64 "; consumed runs of it:\n", p, o,
                    end);
        for (const auto& r : runs_) {
          if (r.p == p) {
            std::printf("      %8.3f s %s %" PRId64 "-%" PRId64 "\n", static_cast<double>(r.t - t0_) / 1e9,
                        r.member.c_str(), r.first, r.last);
          }
        }
        std::printf("    ownership of partition %d:\n", p);
        for (const auto& e : events_) {
          if (std::find(e.parts.begin(), e.parts.end(), p) != e.parts.end()) {
            std::printf("      %8.3f s %s %c\n", static_cast<double>(e.t - t0_) / 1e9, e.member.c_str(),
                        e.what);
          }
        }
        ++shown;
        o = end;
      }
    }
  }
};

inline std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(buf, static_cast<std::size_t>(n));
}

inline std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}
// Minus the descriptor of the directory stream that lists them.
inline std::size_t open_fds() {
  return count_entries("/proc/self/fd") - 1;
}
inline std::size_t threads() {
  return count_entries("/proc/self/task");
}

// One member as the chaos schedule sees it: in this process or in a child process.
class member_handle {
 public:
  enum class state { live, left, killed, failed };

  member_handle(const member_spec& spec, bool child, recorder& rec) : spec_(spec), child_(child), rec_(rec) {
    auto emit = [this](const std::string& line) { rec_.line(spec_.name, line); };
    if (!child_) {
      local_ = make_member(spec_, emit);
      local_->start();
      return;
    }
    int out[2], in[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 3);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    // Nothing else of this process (sockets of other members) leaks into the child.
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    const std::string exe = self_exe();
    std::vector<std::string> args{exe, "chaos member process"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "KGROUP_CHAOS_MEMBER=", 20) != 0) env_strings.emplace_back(*e);
    }
    env_strings.push_back("KGROUP_CHAOS_MEMBER=" + spec_.encode());
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
      close(in[1]);
      close(out[0]);
      throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    }
    cmd_fd_ = in[1];
    reader_ = std::thread([this, fd = out[0]] {
      std::string buf;
      char chunk[4096];
      for (;;) {
        const ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        buf.append(chunk, static_cast<std::size_t>(n));
        std::size_t pos;
        while ((pos = buf.find('\n')) != std::string::npos) {
          rec_.line(spec_.name, buf.substr(0, pos));
          buf.erase(0, pos + 1);
        }
      }
      close(fd);
    });
  }

  ~member_handle() { finish(); }
  member_handle(const member_handle&) = delete;
  member_handle& operator=(const member_handle&) = delete;

  const std::string& name() const { return spec_.name; }
  const member_spec& spec() const { return spec_; }
  bool child() const { return child_; }
  state current() const { return state_; }
  bool live() const { return state_ == state::live; }

  void stall(int ms) {
    if (state_ != state::live) return;
    if (child_) {
      command("stall " + std::to_string(ms));
    } else {
      local_->stall(ms);
    }
  }

  // Clean leave: close() inside the member (on a thread of its own for in-process members, so
  // the caller goes on), then (child) the process exits. See join_leave() and wait_exit().
  void leave() {
    if (state_ != state::live) return;
    state_ = state::left;
    if (child_) {
      command("leave");
    } else {
      leaver_ = std::thread([this] { local_->leave(); });
    }
  }
  // In-process members: waits for the leave to finish and destroys the consumer.
  void join_leave() {
    if (leaver_.joinable()) leaver_.join();
    if (!child_ && state_ != state::live) local_.reset();
  }

  // Waits for a leaving child to exit; returns false (and kills it) if it did not within `limit`.
  bool wait_exit(std::chrono::milliseconds limit) {
    if (!child_ || pid_ <= 0) return true;
    const auto deadline = steady::now() + limit;
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (steady::now() >= deadline) {
        rec_.failure(spec_.name + ": did not exit within " + std::to_string(limit.count()) +
                     " ms after leave; killed");
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = -1;
        state_ = state::failed;
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    pid_ = -1;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && state_ != state::killed) {
      rec_.failure(spec_.name + ": process ended abnormally (status " + std::to_string(status) + ")");
      state_ = state::failed;
    }
    return ok;
  }

  // SIGKILL, no warning. Children only.
  void kill() {
    if (!child_ || state_ != state::live) return;
    state_ = state::killed;
    rec_.killed(spec_.name, now_ns());
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (cmd_fd_ >= 0) close(cmd_fd_);
    cmd_fd_ = -1;
  }

  // A child that exited on its own while it should be live crashed.
  void check_alive() {
    if (!child_ || pid_ <= 0 || state_ != state::live) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      state_ = state::failed;
      rec_.failure(spec_.name + ": member process died unexpectedly (status " + std::to_string(status) + ")");
    }
  }

  // Reaps everything (used at the end and on error paths).
  void finish() {
    if (leaver_.joinable()) leaver_.join();
    if (local_) {
      local_->leave();
      local_.reset();
    }
    if (child_) {
      if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
      }
      if (cmd_fd_ >= 0) close(cmd_fd_);
      cmd_fd_ = -1;
      if (reader_.joinable()) reader_.join();
    }
  }

 private:
  void command(const std::string& c) {
    if (cmd_fd_ < 0) return;
    const std::string line = c + "\n";
    (void)!write(cmd_fd_, line.data(), line.size());
  }

  member_spec spec_;
  bool child_;
  recorder& rec_;
  std::atomic<state> state_{state::live};  // written by the schedule's thread only
  std::unique_ptr<chaos_member> local_;
  std::thread leaver_;
  pid_t pid_ = -1;
  int cmd_fd_ = -1;
  std::thread reader_;
};

// Samples the group's committed offsets with a librdkafka consumer of the same group that never
// subscribes (rd_kafka_committed() only): an observer independent of the clients under test, which
// follows coordinator moves by itself.
class commit_sampler {
 public:
  commit_sampler(const std::string& bootstrap, const std::string& group) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      kgroup::test::apply_log_settings(conf);
      if (std::getenv("KGROUP_MOCK_LOG_LEVEL") == nullptr) kgroup::test::set_config(conf, "log_level", "2");
      kgroup::test::set_config(conf, "bootstrap.servers", bootstrap);
      kgroup::test::set_config(conf, "group.id", group);
      kgroup::test::set_config(conf, "client.id", "commit-sampler");
      kgroup::test::set_config(conf, "enable.auto.commit", "false");
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    rd_kafka_conf_set_error_cb(conf, [](rd_kafka_t*, int, const char*, void*) {});
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("rd_kafka_new: ") + err);
    }
    thread_ = std::thread([this] {
      while (running_) {
        sample();
        std::this_thread::sleep_for(300ms);
      }
    });
  }
  ~commit_sampler() { stop(); }

  void stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
    if (rk_ != nullptr) {
      rd_kafka_destroy(rk_);
      rk_ = nullptr;
    }
  }

  // A committed offset lower than the one the sample before saw. The lower commit landed between
  // `from` (the start of that earlier sample) and `to` (the end of this one), CLOCK_MONOTONIC ns.
  struct regression {
    int partition = -1;
    std::int64_t low = -1, high = -1;
    std::int64_t from = 0, to = 0;
    std::string describe() const {
      return "partition " + std::to_string(partition) + ": committed " + std::to_string(low) + " after " +
             std::to_string(high);
    }
  };

  // Called by the sampling thread, or by the test once that thread is stopped.
  void sample() {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partition_count);
    for (int p = 0; p < partition_count; ++p) rd_kafka_topic_partition_list_add(list, chaos_topic.c_str(), p);
    const std::int64_t started = now_ns();
    const rd_kafka_resp_err_t e = rd_kafka_committed(rk_, list, 5000);
    const std::int64_t ended = now_ns();
    std::lock_guard lock(mutex_);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++failed_;
    } else {
      ++samples_;
      for (int i = 0; i < list->cnt; ++i) {
        const auto& el = list->elems[i];
        if (el.err != RD_KAFKA_RESP_ERR_NO_ERROR || el.offset < 0) continue;  // nothing committed (yet)
        auto& last = last_[el.partition];
        if (el.offset < last.first) {
          ++regression_count_;
          if (regressions_.size() < 100)
            regressions_.push_back({el.partition, el.offset, last.first, last.second, ended});
        }
        last = {el.offset, started};
      }
    }
    rd_kafka_topic_partition_list_destroy(list);
  }

  std::vector<regression> regressions(std::size_t* count) const {
    std::lock_guard lock(mutex_);
    *count = regression_count_;
    return regressions_;
  }
  int samples() const {
    std::lock_guard lock(mutex_);
    return samples_;
  }
  int failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }
  std::int64_t committed_total() const {
    std::lock_guard lock(mutex_);
    std::int64_t total = 0;
    for (const auto& [p, v] : last_) total += v.first;
    return total;
  }

 private:
  rd_kafka_t* rk_ = nullptr;
  std::thread thread_;
  std::atomic<bool> running_{true};
  mutable std::mutex mutex_;
  // partition -> last committed offset seen, and when the sample that saw it started
  std::map<int, std::pair<std::int64_t, std::int64_t>> last_;
  std::vector<regression> regressions_;
  std::size_t regression_count_ = 0;
  int samples_ = 0;
  int failed_ = 0;
};

}  // namespace chaos
