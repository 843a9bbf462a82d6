// The teaching examples (examples/teach) as a user runs them: the programs built against the
// installed package by the install_consumer_app entry (test/install/run.cmake), each in a child
// process against an in-process mock cluster, checked through their `event key=value...` lines,
// their exit status and the offsets they committed.
//
// Hidden ([.]) from the integration entries: the examples_* ctest entries run these cases after
// install_consumer_app built the programs (fixture kgroup_examples_built, test/CMakeLists.txt).
// KGROUP_EXAMPLES_DIR is where that build puts them.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "group_harness.hpp"
#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
using kgroup::test::all_partitions;
using kgroup::test::test_config;
using steady = std::chrono::steady_clock;

namespace {

// One output line: its event (the first word) and its key=value fields.
struct line {
  std::string event;
  std::map<std::string, std::string> fields;
  std::string get(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
  std::int64_t num(const std::string& key) const { return std::stoll(get(key)); }
};

line parse(const std::string& text) {
  line l;
  std::istringstream in(text);
  in >> l.event;
  for (std::string word; in >> word;) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) l.fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return l;
}

// The path of an example program, built by install_consumer_app (the fixture).
std::string example_path(const std::string& program) {
  const std::string path = std::string(KGROUP_EXAMPLES_DIR) + "/" + program;
  REQUIRE(std::filesystem::exists(path));
  return path;
}

// An example program running with `args`; its stdout lines are parsed as they arrive, stderr is
// kept for failure messages. The destructor kills it if a failed check left it running.
class example_process {
 public:
  example_process(const std::string& program, const std::vector<std::string>& args)
      : process_(example_path(program), args, [this](const std::string& text, bool terminated) {
          if (terminated) lines_.push_back(parse(text));
        }) {}

  void send(int sig) { process_.send(sig); }

  // The exit status (128 + signal if killed by one), or nullopt if still running after `limit`.
  // Waits for the end of its output too, so lines() is complete afterwards.
  std::optional<int> wait_exit(std::chrono::milliseconds limit) { return process_.wait_exit(limit); }

  // Waits until at least `n` lines of `event` arrived (or the output ended, or `limit` passed).
  bool wait_for(const std::string& event, std::size_t n, std::chrono::milliseconds limit) {
    return process_.wait_for([&] { return count(event) >= n; }, limit);
  }

  std::vector<line> lines(const std::string& event = "") const {
    auto lock = process_.lock();
    std::vector<line> out;
    for (const auto& l : lines_) {
      if (event.empty() || l.event == event) out.push_back(l);
    }
    return out;
  }
  // stdout and stderr so far, for failure messages.
  std::string output() const {
    return "stdout:\n" + process_.stdout_text() + "stderr:\n" + process_.stderr_text();
  }

 private:
  std::size_t count(const std::string& event) const {  // process_.lock() held
    std::size_t n = 0;
    for (const auto& l : lines_) n += l.event == event ? 1 : 0;
    return n;
  }

  std::vector<line> lines_;
  kgroup::test::child_process process_;  // after lines_, which its reader writes
};

// The group timings of the other group tests (the mock's first join takes ~3 s, a rebalance
// ~session.timeout.ms - 1 s), as the examples' -X options.
std::vector<std::string> group_options(const std::string& group) {
  return {"-X", "group.id=" + group,         "-X", "session.timeout.ms=6000",
          "-X", "heartbeat.interval.ms=500", "-X", "retry.backoff.ms=50"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// "topic-partition" -> offsets of the `event` lines naming it, in order.
std::map<std::string, std::vector<std::int64_t>> offsets_by_partition(const example_process& p,
                                                                      const std::string& event) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& l : p.lines(event)) out[l.get("partition")].push_back(l.num("offset"));
  return out;
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {  // [from, to)
  std::vector<std::int64_t> v;
  for (auto i = from; i < to; ++i) v.push_back(i);
  return v;
}

// The offsets `group` committed for partitions 0..n-1 of `topic` (-1: none), asked by a consumer of
// our own.
std::vector<std::int64_t> committed(const kgroup::test::mock_cluster& mc, const std::string& group,
                                    const std::string& topic, int n) {
  kgroup::Consumer check(test_config(mc.bootstrap_servers()).group(group));
  const auto got = check.committed(all_partitions(topic, n), 10s);
  std::vector<std::int64_t> out;
  for (int p = 0; p < n; ++p) {
    auto it = got.find({topic, p});
    out.push_back(it == got.end() ? -1 : it->second.offset);
  }
  check.close(5s);
  return out;
}

}  // namespace

TEST_CASE("examples: subscribe_commit consumes, and SIGINT ends it cleanly with its commits landed",
          "[.][examples][subscribe_commit]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 3);
  mc.produce("orders", 30);
  example_process p("subscribe_commit",
                    std::vector<std::string>{mc.bootstrap_servers(), "orders"} + group_options("sc"));
  REQUIRE(p.wait_for("record", 30, 30s));
  std::this_thread::sleep_for(300ms);  // a poll() or two after the last batch
  p.send(SIGINT);
  const auto rc = p.wait_exit(20s);
  INFO(p.output());
  REQUIRE(rc);
  CHECK(*rc == 0);
  CHECK(p.lines("signal").size() == 1);
  CHECK(p.lines("commit_error").empty());
  const auto records = offsets_by_partition(p, "record");
  for (int i = 0; i < 3; ++i) CHECK(records.at("orders-" + std::to_string(i)) == range(0, 10));
  const auto reported = offsets_by_partition(p, "committed");
  for (int i = 0; i < 3; ++i)
    CHECK(reported.at("orders-" + std::to_string(i)) == std::vector<std::int64_t>{10});
  REQUIRE(p.lines("closed").size() == 1);
  CHECK(p.lines("closed")[0].num("records") == 30);
  CHECK(committed(mc, "sc", "orders", 3) == std::vector<std::int64_t>{10, 10, 10});
}

TEST_CASE("examples: subscribe_commit ends on SIGTERM while it waits for records",
          "[.][examples][subscribe_commit]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  example_process p("subscribe_commit",
                    std::vector<std::string>{mc.bootstrap_servers(), "orders"} + group_options("sc-idle"));
  std::this_thread::sleep_for(1500ms);  // inside poll(), joining the group
  p.send(SIGTERM);
  const auto rc = p.wait_exit(20s);
  INFO(p.output());
  REQUIRE(rc);
  CHECK(*rc == 0);
  CHECK(p.lines("signal").size() == 1);
  CHECK(p.lines("closed").size() == 1);
}

TEST_CASE(
    "examples: manual_commit commits next offsets, handles a partition error and a retriable commit error",
    "[.][examples][manual_commit]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("ledger", 3);
  mc.produce("ledger", 30);
  const std::vector<std::string> base =
      std::vector<std::string>{mc.bootstrap_servers(), "ledger"} + group_options("mc");
  {
    // A new group with auto.offset.reset=none: every partition is out of range, which the
    // example answers with seek_to_beginning(). The first OffsetCommit fails with
    // UNKNOWN_TOPIC_OR_PARTITION (retriable): the offsets are committed with the next batch's.
    mc.push_request_errors(8 /* OffsetCommit */, {3 /* UNKNOWN_TOPIC_OR_PARTITION */});
    example_process p("manual_commit",
                      base + std::vector<std::string>{"--max-records", "30", "-X", "auto.offset.reset=none"});
    const auto rc = p.wait_exit(60s);
    INFO(p.output());
    REQUIRE(rc);
    CHECK(*rc == 0);
    std::set<std::string> out_of_range;
    for (const auto& e : p.lines("error")) {
      if (e.get("error") == "OFFSET_OUT_OF_RANGE") out_of_range.insert(e.get("partition"));
    }
    CHECK(out_of_range == std::set<std::string>{"ledger-0", "ledger-1", "ledger-2"});
    bool retried = false;
    for (const auto& e : p.lines("error"))
      retried |= e.get("error") == "UNKNOWN_TOPIC_OR_PARTITION" && e.get("retriable") == "1";
    CHECK(retried);
    const auto records = offsets_by_partition(p, "record");
    const auto commits = offsets_by_partition(p, "commit");
    for (int i = 0; i < 3; ++i) {
      const std::string name = "ledger-" + std::to_string(i);
      CHECK(records.at(name) == range(0, 10));
      // The next-offset rule: the offset after the last processed record.
      REQUIRE(!commits.at(name).empty());
      CHECK(commits.at(name).back() == 10);
    }
    CHECK(p.lines("done").at(0).num("records") == 30);
  }
  CHECK(committed(mc, "mc", "ledger", 3) == std::vector<std::int64_t>{10, 10, 10});
  // A second run resumes after the commits: only the new records, then it stops when idle.
  mc.produce("ledger", 6);
  example_process p("manual_commit", base + std::vector<std::string>{"--idle-ms", "8000"});
  const auto rc = p.wait_exit(60s);
  INFO(p.output());
  REQUIRE(rc);
  CHECK(*rc == 0);
  const auto records = offsets_by_partition(p, "record");
  for (int i = 0; i < 3; ++i) CHECK(records.at("ledger-" + std::to_string(i)) == range(10, 12));
  CHECK(committed(mc, "mc", "ledger", 3) == std::vector<std::int64_t>{12, 12, 12});
}

TEST_CASE("examples: cooperative_listener commits a revoked partition's progress for its new owner",
          "[.][examples][cooperative_listener]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("payments", 4);
  mc.produce("payments", 40);
  const std::vector<std::string> base =
      std::vector<std::string>{mc.bootstrap_servers(), "payments"} + group_options("coop");
  // a: the 40 records, then 10 more of its own; b: 10 of the partitions it takes over.
  example_process a("cooperative_listener", base + std::vector<std::string>{"--max-records", "50"});
  REQUIRE(a.wait_for("record", 40, 30s));
  CHECK(a.lines("assigned").size() == 4);
  example_process b("cooperative_listener", base + std::vector<std::string>{"--max-records", "10"});
  INFO(a.output() << b.output());
  REQUIRE(b.wait_for("assigned", 2, 45s));
  // Cooperative: a gave up exactly the two partitions b got, and committed what it processed of
  // them in on_partitions_revoked. librdkafka 2.0.2's mock may refuse that commit with
  // REBALANCE_IN_PROGRESS (its group is rebalancing again by then, where a broker accepts commits
  // of the current generation); the example then says so, and its commits after each batch
  // already cover the records.
  std::set<std::string> revoked, moved;
  for (const auto& l : a.lines("revoked")) revoked.insert(l.get("partition"));
  for (const auto& l : b.lines("assigned")) moved.insert(l.get("partition"));
  CHECK(revoked == moved);
  const auto a_commits = offsets_by_partition(a, "commit");
  if (a.lines("commit_error").empty()) {
    for (const auto& name : moved) CHECK(a_commits.at(name) == std::vector<std::int64_t>{10});
  } else {
    CHECK(a.lines("commit_error")[0].get("error") == "REBALANCE_IN_PROGRESS");
  }
  CHECK(a.lines("lost").empty());

  // One member at a time, so that each commits while the group is stable (kgroup refuses a
  // commit while its group rebalances, as Java does): b reads 5 more records of each of its
  // partitions and leaves; a gets them back, then reads 5 more of each of its own and leaves.
  std::set<std::int32_t> b_parts, a_parts{0, 1, 2, 3};
  for (const auto& name : moved) b_parts.insert(std::stoi(name.substr(name.rfind('-') + 1)));
  for (auto p : b_parts) a_parts.erase(p);
  for (auto p : b_parts) mc.produce("payments", 5, "none", p);
  const auto rc_b = b.wait_exit(45s);
  REQUIRE(a.wait_for("assigned", 6, 45s));
  for (auto p : a_parts) mc.produce("payments", 5, "none", p);
  const auto rc_a = a.wait_exit(45s);
  INFO(a.output() << b.output());
  REQUIRE(rc_a);
  REQUIRE(rc_b);
  CHECK(*rc_a == 0);
  CHECK(*rc_b == 0);
  // b started the moved partitions at a's commits, not at the beginning.
  const auto b_records = offsets_by_partition(b, "record");
  for (const auto& name : moved) CHECK(b_records.at(name) == range(10, 15));
  CHECK(committed(mc, "coop", "payments", 4) == std::vector<std::int64_t>{15, 15, 15, 15});
}

TEST_CASE("examples: static_member reports its instance id and a restart resumes at its commits",
          "[.][examples][static_member]") {
  // The mock has no KIP-345 semantics (the restart still rebalances there): this checks the
  // program, not what a broker gives a static member.
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("inventory", 2);
  mc.produce("inventory", 10);
  const std::vector<std::string> base =
      std::vector<std::string>{mc.bootstrap_servers(), "inventory", "node-1"} + group_options("static");
  {
    example_process p("static_member", base + std::vector<std::string>{"--max-records", "10"});
    const auto rc = p.wait_exit(60s);
    INFO(p.output());
    REQUIRE(rc);
    CHECK(*rc == 0);
    REQUIRE(!p.lines("member").empty());
    CHECK(p.lines("member")[0].get("instance") == "node-1");
    CHECK(p.lines("assigned").size() == 2);
    CHECK(p.lines("record").size() == 10);
  }
  mc.produce("inventory", 4);
  example_process p("static_member", base + std::vector<std::string>{"--max-records", "4"});
  const auto rc = p.wait_exit(60s);
  INFO(p.output());
  REQUIRE(rc);
  CHECK(*rc == 0);
  const auto records = offsets_by_partition(p, "record");
  CHECK(records.at("inventory-0") == range(5, 7));
  CHECK(records.at("inventory-1") == range(5, 7));
  CHECK(committed(mc, "static", "inventory", 2) == std::vector<std::int64_t>{7, 7});
}

TEST_CASE("examples: assign_seek reads a range found by offset or by time, then stops",
          "[.][examples][assign_seek]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("events", 2);
  std::vector<kgroup::test::mock_cluster::seed_record> seed;
  for (int i = 0; i < 20; ++i)
    seed.push_back({"k" + std::to_string(i), "v", {}, 1'700'000'000'000 + 1000 * i});
  mc.produce_records("events", 1, seed);
  const auto run = [&](const std::vector<std::string>& args) {
    auto p = std::make_unique<example_process>(
        "assign_seek", std::vector<std::string>{mc.bootstrap_servers(), "events"} + args);
    const auto rc = p->wait_exit(30s);
    INFO(p->output());
    REQUIRE(rc);
    CHECK(*rc == 0);
    return p;
  };
  SECTION("the whole partition") {
    const auto p = run({"--partition", "1"});
    REQUIRE(p->lines("range").size() == 1);
    CHECK(p->lines("range")[0].num("beginning") == 0);
    CHECK(p->lines("range")[0].num("end") == 20);
    CHECK(offsets_by_partition(*p, "record").at("events-1") == range(0, 20));
    CHECK(p->lines("done")[0].num("records") == 20);
  }
  SECTION("from an offset, a count") {
    const auto p = run({"--partition", "1", "--from-offset", "15", "--count", "3"});
    CHECK(offsets_by_partition(*p, "record").at("events-1") == range(15, 18));
  }
  SECTION("from a time") {
    const auto p = run({"--partition", "1", "--from-time", std::to_string(1'700'000'000'000 + 12'500)});
    REQUIRE(p->lines("found").size() == 1);
    if (kgroup::test::mock_cluster::modern()) {
      CHECK(p->lines("found")[0].num("offset") == 13);
      CHECK(offsets_by_partition(*p, "record").at("events-1") == range(13, 20));
    } else {
      // On librdkafka 2.0.2's mock a lookup by timestamp finds no offset (the mock looks up only
      // earliest and latest): the example finds no record that recent and reads nothing.
      // (offsets_for_times() itself is tested against a fake broker, test_data_safety.cpp.)
      CHECK(p->lines("found")[0].num("offset") == -1);
      CHECK(p->lines("record").empty());
    }
  }
  SECTION("an empty partition: nothing to read") {
    const auto p = run({"--partition", "0"});
    CHECK(p->lines("record").empty());
    CHECK(p->lines("done")[0].num("records") == 0);
  }
}
