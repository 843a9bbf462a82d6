// The README's demo (examples/kgroup-demo) as a user runs it: the built binary, once per
// rebalance protocol, checked through its output and exit status. It brings its own mock cluster
// and takes about a minute per protocol. Also the command lines of kgroup-demo (its hidden member
// mode too) and kgroup-mock. KGROUP_DEMO_PATH and KGROUP_MOCK_PATH come from
// examples/CMakeLists.txt.
#ifdef KGROUP_DEMO_PATH

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "kgroup/share_consumer.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

extern char** environ;

namespace {

using steady = std::chrono::steady_clock;

struct run_result {
  int status = -1;  // exit status, or -signal
  std::string out;  // stdout
};

// Runs the demo with `args`; its stderr goes to this process's stderr. Killed after `limit`.
run_result run_demo(const std::vector<std::string>& args, std::chrono::seconds limit) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<std::string> all{KGROUP_DEMO_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, KGROUP_DEMO_PATH, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) ::close(fds[0]);
  REQUIRE(rc == 0);

  run_result r;
  const auto deadline = steady::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
  return r;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The partitions of the summary rows ("  member-1  <fate>  0,1,4 (3)  ...") of members still in
// the group at the end; "-" for members gone. Returns every partition listed, with repeats.
std::vector<int> partitions_at_end(const std::string& out) {
  std::vector<int> parts;
  const auto summary = out.find("\nSummary (");
  if (summary == std::string::npos) return parts;
  std::istringstream in(out.substr(summary + 1));
  std::string line;
  std::getline(in, line);  // title
  std::getline(in, line);  // header
  while (std::getline(in, line) && line.rfind("  member-", 0) == 0) {
    // The partition column is the token before a "(N)" token.
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    for (std::size_t i = 1; i < w.size(); ++i) {
      if (w[i].size() > 2 && w[i].front() == '(' && w[i].back() == ')') {
        std::istringstream list(w[i - 1]);
        for (std::string p; std::getline(list, p, ',');) parts.push_back(std::stoi(p));
        break;
      }
    }
  }
  return parts;
}

void check_story(const run_result& r, const std::string& protocol) {
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(has(r.out, "with the " + protocol + " protocol"));
  // The scripted events, in the members' own words. Steps 3-5 pick members that do not lead the
  // group, so their names vary from run to run.
  CHECK(has(r.out, "== 1. Three members join"));
  CHECK(has(r.out, "== 2. A fourth member joins"));
  CHECK(has(r.out, "member-4 assigned orders-"));
  CHECK(has(r.out, " leaves cleanly (close()"));
  CHECK(has(r.out, protocol == "consumer" ? " closed its consumer (leave heartbeat, epoch -1, sent)"
                                          : " closed its consumer (LeaveGroup sent)"));
  CHECK(has(r.out, " is killed (SIGKILL"));
  CHECK(has(r.out, "paused (killed: member-"));
  CHECK(has(r.out, " stalls: no poll() for "));
  CHECK(has(r.out, "poll timeout (poll() not called"));
  CHECK(has(r.out, "lost orders-"));
  CHECK(has(r.out, "why, as "));
  CHECK(has(r.out, "dashboard: "));
  if (protocol == "cooperative") CHECK(has(r.out, "cooperative round"));
  // The summary: every partition owned by exactly one surviving member, nothing missed.
  const auto parts = partitions_at_end(r.out);
  CHECK(parts.size() == 12);
  CHECK(std::set<int>(parts.begin(), parts.end()).size() == 12);
  CHECK(has(r.out, "missing 0, wrong key 0"));
  CHECK(has(r.out, "The story ran as scripted."));
}

}  // namespace

TEST_CASE("kgroup-demo: the cooperative story runs as scripted", "[demo]") {
  check_story(run_demo({}, std::chrono::seconds(150)), "cooperative");
}

TEST_CASE("kgroup-demo: the eager story runs as scripted, its members over SASL_SSL (SCRAM)", "[demo]") {
  const auto r = run_demo({"--protocol", "eager", "--security-protocol", "SASL_SSL"}, std::chrono::seconds(150));
  check_story(r, "eager");
  CHECK(has(r.out, "members connect with security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-256"));
  CHECK_FALSE(has(r.out, "demo-secret"));
}

TEST_CASE("kgroup-demo: --protocol consumer tells the story with KIP-848, then with classic, and compares them",
          "[demo848]") {
  // Needs librdkafka 2.15's mock: ctest runs it as demo848@2.15 (LD_LIBRARY_PATH reaches the demo).
  const auto r = run_demo({"--protocol", "consumer"}, std::chrono::seconds(300));
  check_story(r, "consumer");
  CHECK(has(r.out, "reconciliation #1 -> epoch "));
  CHECK(has(r.out, "assigned by the coordinator"));
  CHECK(has(r.out, "==== The same story with group.protocol=classic"));
  CHECK(has(r.out, "with the cooperative protocol"));
  const auto table = r.out.find("\nComparison on the same mock cluster (librdkafka 2.15");
  REQUIRE(table != std::string::npos);
  // One row per step, consumer first.
  for (const char* step : {"1. Three members join", "2. A fourth member joins", " leaves cleanly", " is killed",
                           " stalls: no poll() for "}) {
    CHECK(r.out.find(step, table) != std::string::npos);
  }
}

TEST_CASE("kgroup-demo: a bad argument is refused with status 2", "[demo]") {
  const auto r = run_demo({"--protocol", "sticky"}, std::chrono::seconds(20));
  CHECK(r.status == 2);
}

namespace {

// `program` with `args` exits with status 2 and names the problem (`mention`) on stderr.
void check_refused(const std::string& program, const std::vector<std::string>& args,
                   const std::string& mention) {
  std::string line;
  for (const auto& a : args) line += " " + a;
  INFO(program << line);
  kgroup::test::child_process p(program, args, [](const std::string&, bool) {});
  const auto code = p.wait_exit(std::chrono::seconds(10));
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(p.stderr_text(), Catch::Contains(mention));
}

// `program --help` exits 0 and prints `mention`.
void check_help(const std::string& program, const std::string& mention) {
  kgroup::test::child_process help(program, {"--help"}, [](const std::string&, bool) {});
  const auto code = help.wait_exit(std::chrono::seconds(10));
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(help.stdout_text(), Catch::Contains(mention));
}

}  // namespace

// getopt_long reads the options: an unambiguous prefix of a long option is that option, an
// ambiguous or unknown one, a missing value and a bad value are refused by name.
TEST_CASE("kgroup-demo: bad options are refused by name with status 2", "[demo]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--protocol", "sticky"}, "--protocol must be one of eager, cooperative, consumer, not \"sticky\""},
      {{"--prot=sticky"}, "--protocol must be one of"},
      {{"--rate", "12x"}, "--rate must be an integer 1..20000, not \"12x\""},
      {{"--s"}, "option \"--s\" is ambiguous (--serve, --security-protocol, --sasl-mechanism, --share)"},
      {{"--verbose"}, "unknown option \"--verbose\""},
      {{"--serve=yes"}, "--serve takes no value"},
      {{"--rate"}, "--rate needs a value"},
      {{"story"}, "unexpected argument \"story\""},
      // The hidden member mode (the parent's own arguments to each member process): refused, not
      // ignored.
      {{"--member", "member-1", "--set", "novalue"}, "--set wants KEY=VALUE, not \"novalue\""},
      {{"--member", "member-1", "--sets", "a=b"}, "unknown option \"--sets\""},
      {{"--member", "member-1", "--timeouts", "6000,500"}, "--timeouts wants SESSION,HEARTBEAT,MAX_POLL"},
      {{"--member", "member-1", "--group"}, "--group needs a value"},
  };
  for (const auto& [args, mention] : bad) check_refused(KGROUP_DEMO_PATH, args, mention);
}

// The share story has no rebalance protocol, producer rate or security front: those options with
// --share are refused by name, in either order; --share takes no value.
TEST_CASE("kgroup-demo: --share with the consumer-group story's options is refused by name with status 2",
          "[demo]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--share", "--protocol", "eager"}, "--share cannot be combined with --protocol"},
      {{"--protocol", "consumer", "--share"}, "--share cannot be combined with --protocol"},
      {{"--share", "--no-compare"}, "--share cannot be combined with --no-compare"},
      {{"--share", "--rate", "100"}, "--share cannot be combined with --rate"},
      {{"--share", "--security-protocol", "SSL"}, "--share cannot be combined with --security-protocol"},
      {{"--sasl-mechanism", "PLAIN", "--share"}, "--share cannot be combined with --sasl-mechanism"},
      {{"--share=yes"}, "--share takes no value"},
  };
  for (const auto& [args, mention] : bad) check_refused(KGROUP_DEMO_PATH, args, mention);
  check_help(KGROUP_DEMO_PATH, "kgroup-demo --share [--serve]");
}

// The share story ([demo848]: ctest runs it as demo848@2.15, where LD_LIBRARY_PATH reaches the
// demo and its members). Its own summary checks every record was accepted exactly once and every
// other delivery is explained; this checks it says so and exits 0, and that the steps happened.
TEST_CASE(
    "kgroup-demo --share: three share members work a queue, one stalls past the lock and its records "
    "move on with count 2, one is killed; every record accepted once",
    "[demo848]") {
  if (!kgroup::test::mock_cluster::modern()) {
    WARN("this librdkafka's mock has no share groups (run with librdkafka 2.15.1)");
    return;
  }
  const auto r = run_demo({"--share"}, std::chrono::seconds(180));
  INFO(r.out);
  CHECK(r.status == 0);
  for (const char* line :
       {"Share group 'kgroup-demo-queue' (KIP-932)", "acquisition lock 3000 ms",
        "== 1. Three members work the queue", "member-1 joins (member id ", "member-2 joins (member id ",
        "member-3 joins (member id ", "every partition of 'jobs' assigned to member-1, member-2, member-3",
        // Step 2: member-2's held records go to another member with count 2.
        "== 2. member-2 stalls for 7.0 s after a poll(), past the 3.0 s lock",
        "member-2 stops calling poll() for 7.0 s, holding the ", "records member-2 held went to member-",
        "with delivery count 2: the first ", "member-2 calls poll() again after 7.0 s",
        // Step 3: member-3 is killed, the others carry on.
        "== 3. member-3 is killed (SIGKILL", "member-3 killed (pid ", "== The members finish the queue",
        // The summary: every record accepted once, every other delivery explained.
        "\nSummary (share group, ", "member-2  stalled 7.0 s", "member-3  killed at ",
        "records: produced 3,000, delivered ", "missing 0, wrong key 0",
        "accepted exactly once: 3,000 of 3,000", "The story ran as scripted."}) {
    CHECK(has(r.out, line));
  }
  // Not before the lock ran out: it is 3 s from the acquisition, a little before poll() returned.
  const std::string latency = "the stalled member's records redelivered ";
  const auto at = r.out.find(latency);
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(r.out.substr(at + latency.size())) >= 2.5);
}

TEST_CASE("kgroup-demo --share on a librdkafka without share groups: a clear error, status 1", "[demo]") {
  if (kgroup::test::mock_cluster::modern()) {
    WARN("this librdkafka's mock has share groups: the case is for librdkafka 2.0.2's");
    return;
  }
  kgroup::test::child_process p(KGROUP_DEMO_PATH, {"--share"}, [](const std::string&, bool) {});
  const auto code = p.wait_exit(std::chrono::seconds(30));
  REQUIRE(code);
  CHECK(*code == 1);
  CHECK_THAT(p.stderr_text(), Catch::Contains("--share needs librdkafka 2.15's mock cluster"));
}

#ifdef KGROUP_MOCK_PATH
TEST_CASE("kgroup-mock: bad options are refused by name with status 2", "[demo]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--brokers", "0"}, "--brokers must be 1..64"},
      {{"--bro=65"}, "--brokers must be 1..64"},
      {{"--topic", "orders"}, "--topic wants NAME:PARTITIONS"},
      {{"--sasl", "PLAIN"},
       "option \"--sasl\" is ambiguous (--sasl-mechanism, --sasl-user, --sasl-password)"},
      {{"--verbose"}, "unknown option \"--verbose\""},
      {{"--no-stdin=yes"}, "--no-stdin takes no value"},
      {{"--topic"}, "--topic needs a value"},
      {{"orders:3"}, "unexpected argument \"orders:3\""},
  };
  for (const auto& [args, mention] : bad) check_refused(KGROUP_MOCK_PATH, args, mention);
  check_help(KGROUP_MOCK_PATH, "usage: kgroup-mock");
}

TEST_CASE("kgroup-mock: bad --share options are refused by name with status 2", "[demo]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--share-offset-reset", "beginning"}, "--share-offset-reset must be one of earliest, latest"},
      {{"--share-lock-ms", "0"}, "--share-lock-ms must be at least 1"},
      {{"--share-delivery-limit", "-1"}, "--share-delivery-limit must not be negative"},
      {{"--share-heartbeat-ms", "x"}, "--share-heartbeat-ms must be an integer"},
      {{"--share"}, "option \"--share\" is ambiguous"},
  };
  for (const auto& [args, mention] : bad) check_refused(KGROUP_MOCK_PATH, args, mention);
}

namespace {

// kgroup-mock with `args` (and --no-stdin): the bootstrap line, or empty if it exited first.
struct mock_process {
  explicit mock_process(std::vector<std::string> args)
      : process(KGROUP_MOCK_PATH, with_no_stdin(std::move(args)), [this](const std::string& line, bool) {
          if (line.rfind("bootstrap.servers=", 0) == 0) bootstrap = line.substr(18);
        }) {}
  static std::vector<std::string> with_no_stdin(std::vector<std::string> args) {
    args.emplace_back("--no-stdin");
    return args;
  }
  std::string wait_bootstrap() {
    process.wait_for([&] { return !bootstrap.empty(); }, std::chrono::seconds(20));
    auto lock = process.lock();
    return bootstrap;
  }
  std::string bootstrap;  // written by the reader thread under process.lock()
  kgroup::test::child_process process;
};

}  // namespace

// Share groups on the mock: the process loads the same librdkafka as this test ([share]: the
// share@2.15 entries run it on 2.15.1).
TEST_CASE("kgroup-mock --share-*: share groups with the lock and delivery limit asked for", "[share]") {
  if (!kgroup::test::mock_cluster::modern()) {
    WARN("this librdkafka's mock has no share groups (run with librdkafka 2.15.1)");
    return;
  }
  mock_process mock({"--brokers", "1", "--topic", "q:1:4", "--share-offset-reset", "earliest",
                     "--share-lock-ms", "2000", "--share-delivery-limit", "2", "--share-heartbeat-ms",
                     "500"});
  const std::string bootstrap = mock.wait_bootstrap();
  INFO("kgroup-mock stderr:\n" << mock.process.stderr_text());
  REQUIRE(!bootstrap.empty());

  // Explicit mode, every record released: each comes twice (counts 1 and 2), then the limit
  // archives it. Earliest: the records seeded before the group existed are read.
  kgroup::ShareConsumer c(kgroup::test::test_config(bootstrap)
                              .group("mock-share")
                              .retry_backoff(std::chrono::milliseconds(50))
                              .set("share.acknowledgement.mode", "explicit"));
  c.subscribe({"q"});
  std::map<std::int64_t, std::int16_t> count;
  const auto deadline = steady::now() + std::chrono::seconds(30);
  std::size_t deliveries = 0;
  while (deliveries < 8 && steady::now() < deadline) {
    for (const auto& r : c.poll(std::chrono::milliseconds(100))) {
      REQUIRE(r.delivery_count);
      CHECK(*r.delivery_count == count[r.offset] + 1);
      count[r.offset] = *r.delivery_count;
      ++deliveries;
      c.acknowledge(r, kgroup::AcknowledgeType::release);
    }
  }
  CHECK(deliveries == 8);
  CHECK(count == std::map<std::int64_t, std::int16_t>{{0, 2}, {1, 2}, {2, 2}, {3, 2}});
  // Released twice: archived, nothing more comes.
  const auto quiet_until = steady::now() + std::chrono::seconds(3);
  while (steady::now() < quiet_until) CHECK(c.poll(std::chrono::milliseconds(100)).empty());
  // The lock the broker reports is the one asked for.
  CHECK(c.acquisition_lock_timeout() == std::optional<std::chrono::milliseconds>(2000));
  c.close(std::chrono::seconds(10));

  mock.process.send(SIGTERM);
  const auto code = mock.process.wait_exit(std::chrono::seconds(10));
  REQUIRE(code);
  CHECK(*code == 0);
}

TEST_CASE("kgroup-mock --share-* on a librdkafka without share groups: a clear error, status 1", "[demo]") {
  if (kgroup::test::mock_cluster::modern()) {
    WARN("this librdkafka's mock has share groups: the case is for librdkafka 2.0.2's");
    return;
  }
  mock_process mock({"--brokers", "1", "--share-lock-ms", "2000"});
  const auto code = mock.process.wait_exit(std::chrono::seconds(20));
  REQUIRE(code);
  CHECK(*code == 1);
  CHECK(mock.bootstrap.empty());
  CHECK_THAT(mock.process.stderr_text(), Catch::Contains("need share groups"));
  CHECK_THAT(mock.process.stderr_text(), Catch::Contains("2.15"));
}
#endif

#endif  // KGROUP_DEMO_PATH
