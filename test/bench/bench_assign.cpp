// kgroup-bench-assign: assignor speed and memory at scale (issue 3).
//
// Prints one line per case:
//   case=NAME partitions=P members=M ms=MEDIAN steady_ms=S first_ms=F first_x=X first_faults=N peak_rss_mb=R
//   moves=N spread=S
//   [assignor=NAME]
// ms is the median wall time of PartitionAssignor::assign() over several runs (public types in
// and out, as the group leader calls it); first_ms is the first of those runs, the process's
// first call of that assignor, as a group leader makes it once per rebalance (issue 37), and
// first_faults the minor page faults during it (memory touched for the first time); steady_ms is
// the median of the later half of the runs (the second and third calls still fault in memory
// glibc gave back, so the median of all runs mixes warm and cold), and first_x is first_ms over
// steady_ms; peak_rss_mb is the
// process's VmHWM. Each case runs in its own forked child so the peak belongs to that case alone. moves
// counts partitions whose owner differs from the previous generation; spread is max - min partitions per
// member. For cooperative-sticky, a round that withholds partitions is followed by the follow-up round
// (reported as its own case, NAME-followup), and moves/spread describe the settled assignment.
// Lines for cooperative-sticky, the assignor the goals are for, carry no assignor= field.
//
// Usage: kgroup-bench-assign [--quick] [--runs N] [--case NAME] [--assignor NAME|all]
//   --quick  small cases, one run each: a smoke test for ctest.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "assign/sticky_user_data.hpp"
#include "assign/validate.hpp"
#include "kgroup/assignor.hpp"

namespace {

using namespace kgroup;

struct bench_case {
  std::string name;
  int topics;
  int partitions_per_topic;
  int members;
  enum kind_t { fresh, leave, join, mixed } kind;
};

struct options {
  bool quick = false;
  int runs = 0;  // 0: default per case
  std::string only_case;
  std::string assignor = "all";
};

std::string topic_name(int t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "topic-%04d", t);
  return buf;
}

// Member ids shaped like the coordinator's: client id, then a UUID.
std::string member_id(int i) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(i) * 7919 + 17);
  char buf[80];
  std::snprintf(buf, sizeof buf, "consumer-bench-%d-%08llx-%04llx-%04llx-%012llx", i,
                static_cast<unsigned long long>(rng() & 0xffffffffULL), static_cast<unsigned long long>(rng() & 0xffff),
                static_cast<unsigned long long>(rng() & 0xffff),
                static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  return buf;
}

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return -1;
}

struct group_state {
  ClusterMetadata cluster;
  GroupSubscription group;
};

group_state make_group(const bench_case& c) {
  group_state s;
  for (int t = 0; t < c.topics; ++t) s.cluster.topics.push_back({topic_name(t), c.partitions_per_topic, {}});
  std::vector<std::string> all;
  for (const auto& t : s.cluster.topics) all.push_back(t.topic);
  std::mt19937 rng(20240601);
  for (int i = 0; i < c.members; ++i) {
    MemberSubscription m;
    m.member_id = member_id(i);
    if (c.kind == bench_case::mixed) {
      // A random half of the topics (fixed seed).
      std::vector<std::string> half = all;
      std::shuffle(half.begin(), half.end(), rng);
      half.resize(all.size() / 2);
      m.topics = std::move(half);
    } else {
      m.topics = all;
    }
    s.group.members.push_back(std::move(m));
  }
  return s;
}

// Owner per global partition id (topic index * partitions_per_topic + p), as a member number
// (member_id(i) has number i); -1 for none.
using owner_table = std::vector<std::int32_t>;

struct member_numbers {
  std::unordered_map<std::string, std::int32_t> by_id;
  explicit member_numbers(int count) {
    for (int i = 0; i <= count; ++i) by_id.emplace(member_id(i), i);  // count: the joining member
  }
};

owner_table owners_of(const bench_case& c, const member_numbers& numbers, const GroupAssignment& a) {
  const auto ppt = static_cast<std::size_t>(c.partitions_per_topic);
  owner_table out(static_cast<std::size_t>(c.topics) * ppt, -1);
  for (const auto& m : a.members) {
    const std::int32_t n = numbers.by_id.at(m.member_id);
    for (const auto& tp : m.partitions) {
      const auto t = static_cast<std::size_t>(std::atoi(tp.topic.c_str() + 6));
      for (auto p : tp.partitions) out[t * ppt + static_cast<std::size_t>(p)] = n;
    }
  }
  return out;
}

std::size_t count_moves(const owner_table& before, const owner_table& after) {
  std::size_t n = 0;
  for (std::size_t g = 0; g < before.size(); ++g) n += before[g] >= 0 && after[g] != before[g] ? 1 : 0;
  return n;
}

std::size_t assigned_count(const GroupAssignment& a) {
  std::size_t n = 0;
  for (const auto& m : a.members) {
    for (const auto& tp : m.partitions) n += tp.partitions.size();
  }
  return n;
}

std::size_t spread(const GroupAssignment& a) {
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& m : a.members) {
    std::size_t n = 0;
    for (const auto& tp : m.partitions) n += tp.partitions.size();
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  return a.members.empty() ? 0 : hi - lo;
}

// What each member reports after receiving `a` in `generation`.
void report_ownership(const PartitionAssignor& assignor, GroupSubscription& g, const GroupAssignment& a,
                      std::int32_t generation) {
  std::unordered_map<std::string_view, const MemberAssignment*> by_id;
  for (const auto& m : a.members) by_id.emplace(m.member_id, &m);
  const bool eager = assignor.name() != "cooperative-sticky";
  for (auto& m : g.members) {
    const auto it = by_id.find(m.member_id);
    std::vector<TopicPartitions> owned = it == by_id.end() ? std::vector<TopicPartitions>{} : it->second->partitions;
    m.generation = generation;
    m.user_data = assignor.user_data({m.topics, owned, generation, m.rack});
    // Eager members revoke everything before rejoining; their ownership is in the user data.
    m.owned_partitions = eager ? std::vector<TopicPartitions>{} : std::move(owned);
  }
}

struct timing {
  double median_ms;
  double steady_ms;   // median of the later half of the runs
  double first_ms;    // the first run in this process: what a group leader pays once per rebalance
  long first_faults;  // minor page faults during that run (first touches of fresh memory)
  GroupAssignment result;
};

timing time_assign(const PartitionAssignor& assignor, const group_state& s, int runs) {
  std::vector<double> ms;
  GroupAssignment last;
  long first_faults = 0;
  for (int r = 0; r < runs; ++r) {
    rusage u0{}, u1{};
    getrusage(RUSAGE_SELF, &u0);
    const auto t0 = std::chrono::steady_clock::now();
    GroupAssignment result = assignor.assign(s.cluster, s.group);
    const auto t1 = std::chrono::steady_clock::now();
    getrusage(RUSAGE_SELF, &u1);
    if (r == 0) first_faults = u1.ru_minflt - u0.ru_minflt;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    last = std::move(result);  // the previous result is freed here, outside the timed region
  }
  const double first = ms.front();
  std::vector<double> later(ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  std::sort(later.begin(), later.end());
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], later[later.size() / 2], first, first_faults, std::move(last)};
}

void print_line(const std::string& name, std::size_t partitions, std::size_t members, const timing& t,
                std::size_t moves, std::size_t spread_value, const std::string& assignor) {
  std::printf(
      "case=%s partitions=%zu members=%zu ms=%.2f steady_ms=%.2f first_ms=%.2f first_x=%.1f first_faults=%ld "
      "peak_rss_mb=%.0f moves=%zu spread=%zu%s\n",
      name.c_str(), partitions, members, t.median_ms, t.steady_ms, t.first_ms,
      t.steady_ms > 0 ? t.first_ms / t.steady_ms : 0.0, t.first_faults, peak_rss_mb(), moves, spread_value,
      assignor == "cooperative-sticky" ? "" : (" assignor=" + assignor).c_str());
  std::fflush(stdout);
}

bool verify(const group_state& s, const GroupAssignment& a, const PartitionAssignor& assignor, const std::string& what) {
  const auto protocol =
      assignor.name() == "cooperative-sticky" ? RebalanceProtocol::cooperative : RebalanceProtocol::eager;
  const std::string err = assign::check_assignment(s.cluster, s.group, a, protocol);
  if (!err.empty()) {
    std::fprintf(stderr, "%s: invalid assignment from %s: %s\n", what.c_str(), assignor.name().c_str(), err.c_str());
    return false;
  }
  return true;
}

int run_case(const bench_case& c, const PartitionAssignor& assignor, int runs) {
  group_state s = make_group(c);
  const member_numbers numbers(c.members);
  const std::size_t total = static_cast<std::size_t>(c.topics) * static_cast<std::size_t>(c.partitions_per_topic);
  owner_table before(total, -1);

  if (c.kind == bench_case::leave || c.kind == bench_case::join) {
    // The group after a fresh assignment, every member reporting what it owns.
    const GroupAssignment fresh = assignor.assign(s.cluster, s.group);
    before = owners_of(c, numbers, fresh);
    report_ownership(assignor, s.group, fresh, 1);
    if (c.kind == bench_case::leave) {
      s.group.members.erase(s.group.members.begin() + c.members / 2);
    } else {
      MemberSubscription m;
      m.member_id = member_id(c.members);
      m.topics = s.group.members[0].topics;
      m.user_data = assignor.user_data({m.topics, {}, -1, std::nullopt});
      s.group.members.push_back(std::move(m));
    }
  }

  timing t = time_assign(assignor, s, runs);
  if (!verify(s, t.result, assignor, c.name)) return 1;
  GroupAssignment settled = std::move(t.result);
  std::optional<timing> follow_up;
  if (assignor.name() == "cooperative-sticky" && assigned_count(settled) < total) {
    report_ownership(assignor, s.group, settled, 2);
    follow_up = time_assign(assignor, s, runs);
    if (!verify(s, follow_up->result, assignor, c.name + "-followup")) return 1;
    settled = std::move(follow_up->result);
  }
  if (assigned_count(settled) != total) {
    std::fprintf(stderr, "%s: %zu of %zu partitions assigned\n", c.name.c_str(), assigned_count(settled), total);
    return 1;
  }
  const std::size_t moves = count_moves(before, owners_of(c, numbers, settled));
  const std::size_t members = s.group.members.size();
  print_line(c.name, total, members, t, moves, spread(settled), assignor.name());
  if (follow_up)
    print_line(c.name + "-followup", total, members, *follow_up, moves, spread(settled), assignor.name());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--runs" && i + 1 < argc) {
      opt.runs = std::atoi(argv[++i]);
    } else if (a == "--case" && i + 1 < argc) {
      opt.only_case = argv[++i];
    } else if (a == "--assignor" && i + 1 < argc) {
      opt.assignor = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--runs N] [--case NAME] [--assignor NAME|all]\n", argv[0]);
      return 2;
    }
  }

  std::vector<bench_case> cases;
  if (opt.quick) {
    cases = {{"fresh-40k", 50, 800, 800, bench_case::fresh},
             {"leave-40k", 50, 800, 800, bench_case::leave},
             {"join-40k", 50, 800, 800, bench_case::join},
             {"mixed-40k", 50, 800, 800, bench_case::mixed}};
  } else {
    cases = {{"fresh-1m", 500, 2000, 2000, bench_case::fresh},   {"leave-1m", 500, 2000, 2000, bench_case::leave},
             {"join-1m", 500, 2000, 2000, bench_case::join},     {"mixed-1m", 500, 2000, 2000, bench_case::mixed},
             {"fresh-50k", 50, 1000, 1000, bench_case::fresh},   {"fresh-40k", 50, 800, 800, bench_case::fresh}};
  }
  std::vector<std::string> assignors{"cooperative-sticky", "sticky", "range", "roundrobin"};
  if (opt.assignor != "all") assignors = {opt.assignor};

  int failures = 0;
  for (const auto& name : assignors) {
    const auto assignor = make_assignor(name);
    if (!assignor) {
      std::fprintf(stderr, "unknown assignor %s\n", name.c_str());
      return 2;
    }
    for (const auto& c : cases) {
      if (!opt.only_case.empty() && c.name != opt.only_case) continue;
      const bool big = static_cast<long>(c.topics) * c.partitions_per_topic >= 500000;
      const int runs = opt.runs > 0 ? opt.runs : opt.quick ? 1 : big ? 7 : 31;
      std::fflush(stdout);
      const pid_t pid = fork();
      if (pid < 0) {
        std::perror("fork");
        return 1;
      }
      if (pid == 0) std::_Exit(run_case(c, *assignor, runs));
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "case %s (%s) failed\n", c.name.c_str(), name.c_str());
        ++failures;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
