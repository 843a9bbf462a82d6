// The consumer CLI (examples/kgroup-consume) as a user runs it: the built binary in a child
// process against an in-process mock cluster, checked through its JSON lines and exit status.
// KGROUP_CONSUME_PATH comes from examples/CMakeLists.txt; without examples there is nothing to run.
#ifdef KGROUP_CONSUME_PATH

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/boost_json.hpp"
#include "child_process.hpp"
#include "fake_broker.hpp"
#include "group_harness.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/types.hpp"
#include "mock_cluster.hpp"
#include "protocol/records.hpp"
#include "secure_front.hpp"
#include "test_pki.hpp"

using namespace std::chrono_literals;
using kgroup::test::all_partitions;
using steady = std::chrono::steady_clock;

namespace {

// ---- the CLI's lines, parsed by Boost.JSON ----------------------------------------------------
// Parsing every line also checks that the CLI writes valid JSON (and valid UTF-8). The checks read
// the lines through this small tree, which keeps the object keys in their order.

struct json {
  enum class kind { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool boolean = false;
  std::int64_t number = 0;
  std::string string;
  std::vector<json> items;             // array elements, or object values
  std::vector<std::string> keys;       // object keys, parallel to items

  const json* find(std::string_view key) const {
    if (type != kind::object) return nullptr;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &items[i];
    }
    return nullptr;
  }
  std::string str(std::string_view key) const {
    const json* v = find(key);
    return v != nullptr && v->type == kind::string ? v->string : std::string();
  }
  std::optional<std::int64_t> num(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr || v->type != kind::number) return std::nullopt;
    return v->number;
  }
};

// `v` as a json tree; nullopt for a fractional number (the CLI writes integers only).
std::optional<json> from_boost(const boost::json::value& v) {
  json j;
  switch (v.kind()) {
    case boost::json::kind::null: break;
    case boost::json::kind::bool_:
      j.type = json::kind::boolean;
      j.boolean = v.get_bool();
      break;
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
      j.type = json::kind::number;
      j.number = v.to_number<std::int64_t>();
      break;
    case boost::json::kind::double_: return std::nullopt;
    case boost::json::kind::string:
      j.type = json::kind::string;
      j.string.assign(v.get_string().data(), v.get_string().size());
      break;
    case boost::json::kind::array:
      j.type = json::kind::array;
      for (const auto& e : v.get_array()) {
        auto item = from_boost(e);
        if (!item) return std::nullopt;
        j.items.push_back(std::move(*item));
      }
      break;
    case boost::json::kind::object:
      j.type = json::kind::object;
      for (const auto& kv : v.get_object()) {
        auto item = from_boost(kv.value());
        if (!item) return std::nullopt;
        j.keys.emplace_back(kv.key().data(), kv.key().size());
        j.items.push_back(std::move(*item));
      }
      break;
  }
  return j;
}

// One line as a json tree, or nullopt if it is not valid JSON.
std::optional<json> parse_line(std::string_view line) {
  boost::json::error_code ec;
  const boost::json::value v = boost::json::parse(line, ec);
  if (ec) return std::nullopt;
  return from_boost(v);
}

// The partitions of an assigned/revoked/lost event.
std::set<kgroup::TopicPartition> partitions_of(const json& event) {
  std::set<kgroup::TopicPartition> out;
  const json* parts = event.find("partitions");
  if (parts == nullptr || parts->type != json::kind::array) return out;
  for (const auto& p : parts->items) {
    out.insert({p.str("topic"), static_cast<std::int32_t>(p.num("partition").value_or(-1))});
  }
  return out;
}

// Ownership after replaying a process's listener events.
std::set<kgroup::TopicPartition> owned_after(const std::vector<json>& events) {
  std::set<kgroup::TopicPartition> owned;
  for (const auto& e : events) {
    const auto what = e.str("event");
    const auto parts = partitions_of(e);
    if (what == "assigned") {
      owned.insert(parts.begin(), parts.end());
    } else if (what == "revoked" || what == "lost") {
      for (const auto& tp : parts) owned.erase(tp);
    }
  }
  return owned;
}

std::string describe(const std::set<kgroup::TopicPartition>& s) {
  std::string out;
  for (const auto& tp : s) out += (out.empty() ? "" : ",") + tp.topic + "-" + std::to_string(tp.partition);
  return "{" + out + "}";
}

// ---- the child process -----------------------------------------------------------------------

// kgroup-consume running with `args`; stdout lines are parsed as they arrive, stderr is kept for
// failure messages. The destructor kills the process if a failed check left it running.
class cli_process {
 public:
  explicit cli_process(const std::vector<std::string>& args)
      : process_(KGROUP_CONSUME_PATH, args,
                 [this](const std::string& line, bool terminated) { add_line(line, terminated); }) {}

  void send(int sig) { process_.send(sig); }

  // The exit status (128 + signal if killed by one), or nullopt if it is still running after
  // `limit`. Waits for the end of its output too, so events() is complete afterwards.
  std::optional<int> wait_exit(std::chrono::milliseconds limit) { return process_.wait_exit(limit); }

  // How long it ran, once wait_exit() saw it end.
  steady::duration run_time() const { return process_.run_time(); }

  // Waits until `pred(events())` holds or `limit` passes; returns whether it held.
  template <class Pred>
  bool wait_for(Pred pred, std::chrono::milliseconds limit) {
    return process_.wait_for([&] { return pred(events_); }, limit);
  }

  std::vector<json> events() const {
    auto lock = process_.lock();
    return events_;
  }
  std::vector<json> events(std::string_view name) const {
    std::vector<json> out;
    for (auto& e : events()) {
      if (e.str("event") == name) out.push_back(e);
    }
    return out;
  }
  // Lines that were not a JSON object with a numeric ts_ms and a string event.
  std::vector<std::string> bad_lines() const {
    auto lock = process_.lock();
    return bad_lines_;
  }
  std::string stdout_text() const { return process_.stdout_text(); }
  std::string stderr_text() const { return process_.stderr_text(); }

 private:
  // On the stdout reader thread, with process_.lock() held.
  void add_line(const std::string& line, bool terminated) {
    if (!terminated) {
      bad_lines_.push_back(line + " (no newline at the end)");
      return;
    }
    auto j = parse_line(line);
    if (j && j->type == json::kind::object && j->num("ts_ms") && !j->str("event").empty()) {
      events_.push_back(std::move(*j));
    } else {
      bad_lines_.push_back(line);
    }
  }

  std::vector<json> events_;
  std::vector<std::string> bad_lines_;
  kgroup::test::child_process process_;  // after the fields its reader writes
};

// Arguments for a member of `group` on `mc` with the group timings of the other group tests
// (the mock's first join takes ~3 s, a rebalance ~session.timeout.ms - 1 s).
std::vector<std::string> member_args(const kgroup::test::mock_cluster& mc, const std::string& group,
                                     int duration_ms, const std::string& topic = "orders") {
  return {"-b", mc.bootstrap_servers(), "-g", group,
          "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
          "-X", "retry.backoff.ms=50", "--duration-ms", std::to_string(duration_ms), topic};
}

std::int64_t epoch_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Every line parsed, and the timestamps are recent epoch milliseconds that never go backwards.
void check_lines(const cli_process& p, std::int64_t started_ms) {
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  CHECK(p.bad_lines().empty());
  std::int64_t last = started_ms - 1000;
  for (const auto& e : p.events()) {
    const std::int64_t ts = *e.num("ts_ms");
    CHECK(ts >= last);
    CHECK(ts <= epoch_ms() + 1000);
    last = ts;
  }
}

// Merges the listener events of several processes by ts_ms (one machine, one clock) and returns
// every moment a partition was assigned to one while another still held it. Within the same
// millisecond a revoke is taken to come first: the clock cannot order them.
std::vector<std::string> overlaps(const std::vector<const cli_process*>& members) {
  struct entry {
    std::int64_t ts;
    int order;  // revoked/lost before assigned within a millisecond
    std::size_t member;
    const json* event;
  };
  std::vector<std::vector<json>> all;
  for (const auto* m : members) all.push_back(m->events());
  std::vector<entry> merged;
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const auto& e : all[i]) {
      const auto what = e.str("event");
      if (what != "assigned" && what != "revoked" && what != "lost") continue;
      merged.push_back({*e.num("ts_ms"), what == "assigned" ? 1 : 0, i, &e});
    }
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const entry& a, const entry& b) { return std::tie(a.ts, a.order) < std::tie(b.ts, b.order); });
  std::vector<std::string> out;
  std::map<kgroup::TopicPartition, std::size_t> owner;
  for (const auto& m : merged) {
    for (const auto& tp : partitions_of(*m.event)) {
      auto it = owner.find(tp);
      if (m.order == 1) {
        if (it != owner.end() && it->second != m.member) {
          out.push_back(tp.topic + "-" + std::to_string(tp.partition) + " assigned to member " +
                        std::to_string(m.member) + " at " + std::to_string(m.ts) + " while member " +
                        std::to_string(it->second) + " held it");
        }
        owner[tp] = m.member;
      } else if (it != owner.end() && it->second == m.member) {
        owner.erase(it);
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("kgroup-consume: a single member is assigned every partition and exits after --duration-ms", "[cli]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  const auto started_ms = epoch_ms();
  cli_process p(member_args(mc, "g-cli-single", 7000));

  REQUIRE(p.wait_for([](const std::vector<json>& ev) { return !ev.empty() && ev.front().str("event") == "assigned"; }, 15s));
  auto code = p.wait_exit(20s);
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(p.run_time() >= 7s);
  CHECK(p.run_time() < 17s);
  check_lines(p, started_ms);

  const auto ev = p.events();
  REQUIRE(ev.size() >= 3);
  CHECK(partitions_of(ev.front()) == all_partitions("orders", 6));
  // close() revokes everything (eager by default: range,cooperative-sticky), then "closed".
  const auto revoked = p.events("revoked");
  REQUIRE(revoked.size() == 1);
  CHECK(partitions_of(revoked[0]) == all_partitions("orders", 6));
  CHECK(ev[ev.size() - 2].str("event") == "revoked");
  CHECK(ev.back().str("event") == "closed");
  CHECK(ev.back().str("reason") == "duration");
  CHECK(ev.back().num("records") == 0);
  CHECK(p.events("error").empty());
  CHECK(p.events("lost").empty());
}

TEST_CASE("kgroup-consume: two processes in one group split the partitions", "[cli]") {
  // Together: both are in the first generation. Late: the second one's join rebalances a stable
  // group, so the first must revoke before the second is assigned.
  const bool late = GENERATE(false, true);
  INFO((late ? "second process joins a stable group" : "both start together"));
  kgroup::test::mock_cluster mc(3);
  // A network delay, so the leader's SyncGroup (after its own Metadata round trip) cannot beat
  // the follower's: the mock answers a late follower INVALID_REQUEST (DESIGN.md, "Test clusters").
  mc.set_rtt(-1, 20);
  mc.create_topic("orders", 6);
  const auto started_ms = epoch_ms();
  // --duration-ms is only a backstop: both are stopped with SIGTERM once the split is seen.
  cli_process a(member_args(mc, "g-cli-split", 40000));
  if (late) {
    REQUIRE(a.wait_for([](const std::vector<json>& ev) { return !ev.empty() && ev.front().str("event") == "assigned"; }, 15s));
    CHECK(partitions_of(a.events().front()) == all_partitions("orders", 6));
  }
  cli_process b(member_args(mc, "g-cli-split", 40000));

  // Both own a nonempty share, the shares are disjoint and together cover the topic.
  auto split = [&] {
    const auto oa = owned_after(a.events());
    const auto ob = owned_after(b.events());
    std::set<kgroup::TopicPartition> both;
    both.insert(oa.begin(), oa.end());
    both.insert(ob.begin(), ob.end());
    return !oa.empty() && !ob.empty() && oa.size() + ob.size() == both.size() && both == all_partitions("orders", 6);
  };
  const auto deadline = steady::now() + 25s;
  while (!split() && steady::now() < deadline) std::this_thread::sleep_for(50ms);
  {
    INFO("a owns " << describe(owned_after(a.events())) << ", b owns " << describe(owned_after(b.events())));
    INFO("a:\n" << a.stdout_text() << "b:\n" << b.stdout_text() << "b stderr:\n" << b.stderr_text() << "a stderr:\n" << a.stderr_text());
    REQUIRE(split());
  }
  // Range over 6 partitions and 2 members: 3 each.
  CHECK(owned_after(a.events()).size() == 3);
  CHECK(owned_after(b.events()).size() == 3);

  a.send(SIGTERM);
  b.send(SIGTERM);
  const auto ca = a.wait_exit(20s);
  const auto cb = b.wait_exit(20s);
  INFO("a stdout:\n" << a.stdout_text() << "a stderr:\n" << a.stderr_text());
  INFO("b stdout:\n" << b.stdout_text() << "b stderr:\n" << b.stderr_text());
  REQUIRE(ca);
  REQUIRE(cb);
  CHECK(*ca == 0);
  CHECK(*cb == 0);
  check_lines(a, started_ms);
  check_lines(b, started_ms);
  CHECK(owned_after(a.events()).empty());
  CHECK(owned_after(b.events()).empty());
  CHECK(overlaps({&a, &b}).empty());
  if (late) CHECK(a.events("revoked").size() >= 2);  // the rebalance, then close()
}

TEST_CASE("kgroup-consume: SIGTERM and SIGINT close cleanly", "[cli]") {
  const int sig = GENERATE(SIGTERM, SIGINT);
  INFO("signal " << strsignal(sig));
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 3);
  const auto started_ms = epoch_ms();
  cli_process p(member_args(mc, "g-cli-signal", 30000));

  REQUIRE(p.wait_for([](const std::vector<json>& ev) { return !ev.empty() && ev.front().str("event") == "assigned"; }, 15s));
  p.send(sig);
  const auto signalled = steady::now();
  const auto code = p.wait_exit(15s);
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(steady::now() - signalled < 10s);
  check_lines(p, started_ms);

  const auto ev = p.events();
  REQUIRE(ev.size() == 3);
  CHECK(partitions_of(ev[0]) == all_partitions("orders", 3));
  CHECK(ev[1].str("event") == "revoked");
  CHECK(partitions_of(ev[1]) == all_partitions("orders", 3));
  CHECK(ev[2].str("event") == "closed");
  CHECK(ev[2].str("reason") == "signal");
}

TEST_CASE("kgroup-consume: configuration errors are error events with exit code 2", "[cli]") {
  // Nothing here reaches a broker: the errors come before the consumer connects.
  const std::vector<std::string> base = {"-b", "127.0.0.1:1", "-g", "g-cli-config"};

  SECTION("an unknown -X key is named, with JSON escaping of the odd characters in it") {
    const std::string key = "no.such\"key\\with\ttab";
    auto args = base;
    args.insert(args.end(), {"-X", key + "=1", "orders"});
    cli_process p(args);
    const auto code = p.wait_exit(10s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK(p.bad_lines().empty());
    const auto ev = p.events();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].str("event") == "error");
    CHECK(ev[0].str("code") == "INVALID_CONFIG");
    CHECK_THAT(ev[0].str("message"), Catch::Contains(key));
    CHECK(std::abs(*ev[0].num("ts_ms") - epoch_ms()) < 10000);
  }

  SECTION("a misspelt key gets a suggestion") {
    auto args = base;
    args.insert(args.end(), {"-X", "sesion.timeout.ms=6000", "orders"});
    cli_process p(args);
    const auto code = p.wait_exit(10s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    REQUIRE(code);
    CHECK(*code == 2);
    const auto ev = p.events("error");
    REQUIRE(ev.size() == 1);
    CHECK_THAT(ev[0].str("message"), Catch::Contains("sesion.timeout.ms") && Catch::Contains("session.timeout.ms"));
  }

  SECTION("a bad value") {
    auto args = base;
    args.insert(args.end(), {"-X", "session.timeout.ms=soon", "orders"});
    cli_process p(args);
    const auto code = p.wait_exit(10s);
    REQUIRE(code);
    CHECK(*code == 2);
    const auto ev = p.events("error");
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].str("code") == "INVALID_CONFIG");
    CHECK_THAT(ev[0].str("message"), Catch::Contains("session.timeout.ms"));
  }

  SECTION("a bad combination, found when the consumer is created") {
    auto args = base;
    args.insert(args.end(), {"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=6000", "orders"});
    cli_process p(args);
    const auto code = p.wait_exit(10s);
    REQUIRE(code);
    CHECK(*code == 2);
    const auto ev = p.events("error");
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].str("code") == "INVALID_CONFIG");
    CHECK_THAT(ev[0].str("message"), Catch::Contains("heartbeat.interval.ms"));
  }
}

// ---- records -----------------------------------------------------------------------------------

namespace {

// A member that reads from the beginning and stops after `max_messages` records; --duration-ms
// is only a backstop (a run that misses records ends with reason "duration").
std::vector<std::string> reader_args(const kgroup::test::mock_cluster& mc, const std::string& group,
                                     std::int64_t max_messages, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"-b", mc.bootstrap_servers(), "-g", group,
                                   "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
                                   "-X", "retry.backoff.ms=50", "--max-messages", std::to_string(max_messages),
                                   "--duration-ms", "25000"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.emplace_back("orders");
  return args;
}

using record_id = std::pair<std::int32_t, std::int64_t>;  // partition, offset

// The fields of a record line whose key and value are text, in their order.
const std::vector<std::string> text_record_keys = {"ts_ms",     "event",          "topic", "partition", "offset",
                                                   "timestamp", "timestamp_type", "key",   "value",     "headers"};

// The (partition, offset) of every record line, in output order; every line has exactly the
// fields of a record with a text key and value (what produce() writes), in their order.
std::vector<record_id> record_lines(const cli_process& p, const std::string& topic = "orders") {
  std::vector<record_id> out;
  for (const auto& e : p.events("record")) {
    CHECK(e.keys == text_record_keys);
    CHECK(e.str("topic") == topic);
    REQUIRE(e.num("partition"));
    REQUIRE(e.num("offset"));
    out.emplace_back(static_cast<std::int32_t>(*e.num("partition")), *e.num("offset"));
  }
  return out;
}

// Offsets [from[p], to[p]) of every partition p.
std::set<record_id> offset_ranges(const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to) {
  std::set<record_id> out;
  for (std::size_t p = 0; p < to.size(); ++p) {
    for (std::int64_t o = from.empty() ? 0 : from[p]; o < to[p]; ++o) out.emplace(static_cast<std::int32_t>(p), o);
  }
  return out;
}

std::vector<std::int64_t> add(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Ran to its --max-messages limit and closed cleanly with `records` records.
void check_clean_stop(const cli_process& p, std::optional<int> code, std::int64_t records) {
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(p.bad_lines().empty());
  CHECK(p.events("error").empty());
  const auto ev = p.events();
  REQUIRE(!ev.empty());
  CHECK(ev.back().str("event") == "closed");
  CHECK(ev.back().str("reason") == "max-messages");
  CHECK(ev.back().num("records") == records);
}

// Each record line comes while its partition is owned (after "assigned", before "revoked").
void check_records_while_owned(const cli_process& p) {
  std::set<kgroup::TopicPartition> owned;
  for (const auto& e : p.events()) {
    const auto what = e.str("event");
    if (what == "assigned") {
      for (const auto& tp : partitions_of(e)) owned.insert(tp);
    } else if (what == "revoked" || what == "lost") {
      for (const auto& tp : partitions_of(e)) owned.erase(tp);
    } else if (what == "record") {
      const kgroup::TopicPartition tp{e.str("topic"), static_cast<std::int32_t>(e.num("partition").value_or(-1))};
      INFO("record " << tp.topic << "-" << tp.partition << "@" << e.num("offset").value_or(-1));
      CHECK(owned.count(tp) == 1);
    }
  }
}

}  // namespace

TEST_CASE("kgroup-consume: a single member prints every seeded record once", "[cli]") {
  const std::string codec = GENERATE("none", "lz4");
  INFO("codec " << codec);
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  constexpr std::int64_t seeded = 600;
  const auto per_partition = mc.produce("orders", seeded, codec);
  const auto started_ms = epoch_ms();
  cli_process p(reader_args(mc, "g-cli-records-" + codec, seeded));
  const auto code = p.wait_exit(40s);
  check_clean_stop(p, code, seeded);
  check_lines(p, started_ms);
  check_records_while_owned(p);

  const auto lines = record_lines(p);
  CHECK(lines.size() == static_cast<std::size_t>(seeded));
  const std::set<record_id> printed(lines.begin(), lines.end());
  CHECK(printed.size() == lines.size());  // no record twice
  CHECK(printed == offset_ranges({}, per_partition));
  // In offset order within each partition.
  std::map<std::int32_t, std::int64_t> last;
  for (const auto& [partition, offset] : lines) {
    auto [it, first] = last.try_emplace(partition, offset);
    if (!first) {
      CHECK(offset > it->second);
      it->second = offset;
    }
  }
}

TEST_CASE("kgroup-consume: --commit sync, and a second run in the group prints only newer records", "[cli]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  const auto first = mc.produce("orders", 120);
  {
    cli_process p(reader_args(mc, "g-cli-sync", 120, {"--commit", "sync"}));
    const auto code = p.wait_exit(40s);
    check_clean_stop(p, code, 120);
    const auto lines = record_lines(p);
    CHECK(std::set<record_id>(lines.begin(), lines.end()) == offset_ranges({}, first));
  }
  const auto second = mc.produce("orders", 60);
  cli_process p(reader_args(mc, "g-cli-sync", 60, {"--commit", "sync"}));
  const auto code = p.wait_exit(40s);
  // Starting before the committed offsets would print old records; a gap would leave it short of
  // 60 records until --duration-ms.
  check_clean_stop(p, code, 60);
  const auto lines = record_lines(p);
  CHECK(lines.size() == 60);
  CHECK(std::set<record_id>(lines.begin(), lines.end()) == offset_ranges(first, add(first, second)));
}

TEST_CASE("kgroup-consume: a run stopped inside a poll batch commits only what it printed", "[cli]") {
  // 120 records over 6 partitions arrive in one or a few batches (max.poll.records 500), so
  // --max-messages 50 stops inside a batch. The next run must print exactly the other 70: no gap
  // (the unprinted rest of the batch is not committed) and, here, no repeats either.
  const std::string mode = GENERATE("sync", "async", "auto");
  INFO("--commit " << mode);
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  const auto seeded = mc.produce("orders", 120);
  const std::string group = "g-cli-partial-" + mode;
  cli_process a(reader_args(mc, group, 50, {"--commit", mode}));
  const auto ca = a.wait_exit(40s);
  check_clean_stop(a, ca, 50);
  cli_process b(reader_args(mc, group, 70, {"--commit", mode}));
  const auto cb = b.wait_exit(40s);
  check_clean_stop(b, cb, 70);

  auto la = record_lines(a);
  const auto lb = record_lines(b);
  CHECK(la.size() == 50);
  CHECK(lb.size() == 70);
  la.insert(la.end(), lb.begin(), lb.end());
  const std::set<record_id> all(la.begin(), la.end());
  CHECK(all.size() == 120);
  CHECK(all == offset_ranges({}, seeded));
}

TEST_CASE("kgroup-consume: --max-messages 10 prints exactly 10 records", "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 3);
  mc.produce("orders", 300);
  cli_process p(reader_args(mc, "g-cli-ten", 10));
  const auto code = p.wait_exit(40s);
  check_clean_stop(p, code, 10);
  const auto lines = record_lines(p);
  CHECK(lines.size() == 10);
  CHECK(std::set<record_id>(lines.begin(), lines.end()).size() == 10);
}

TEST_CASE("kgroup-consume: --process-ms sleeps after each record", "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 1);
  mc.produce("orders", 100);
  cli_process p(reader_args(mc, "g-cli-slow", 5, {"--process-ms", "300"}));
  const auto code = p.wait_exit(40s);
  check_clean_stop(p, code, 5);
  const auto records = p.events("record");
  REQUIRE(records.size() == 5);
  for (std::size_t i = 1; i < records.size(); ++i) {
    // Each line is written when its record is processed, the sleep follows.
    CHECK(*records[i].num("ts_ms") - *records[i - 1].num("ts_ms") >= 290);
    CHECK(*records[i].num("offset") == *records[i - 1].num("offset") + 1);
  }
  // The last sleep happens before close: "closed" comes at least 300 ms after the last record.
  CHECK(*p.events().back().num("ts_ms") - *records.back().num("ts_ms") >= 290);
}

TEST_CASE("kgroup-consume: --partition consumes exactly the named partitions, without a group", "[cli]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  const auto per_partition = mc.produce("orders", 600);
  const std::int64_t want = per_partition[1] + per_partition[4];
  const std::vector<std::string> args = {"-b", mc.bootstrap_servers(), "--partition", "orders:1", "--partition",
                                         "orders:4", "--max-messages", std::to_string(want), "--duration-ms", "25000"};
  // Two processes on the same partitions both read all of them: no group, no fencing.
  cli_process a(args);
  cli_process b(args);
  for (auto* p : {&a, &b}) {
    const auto code = p->wait_exit(40s);
    check_clean_stop(*p, code, want);
    const auto lines = record_lines(*p);
    CHECK(lines.size() == static_cast<std::size_t>(want));
    std::set<record_id> expected;
    for (std::int32_t part : {1, 4}) {
      for (std::int64_t o = 0; o < per_partition[static_cast<std::size_t>(part)]; ++o) expected.insert({part, o});
    }
    CHECK(std::set<record_id>(lines.begin(), lines.end()) == expected);
    CHECK_THAT(p->stdout_text(), Catch::Contains(R"("event":"assigned","partitions":[{"topic":"orders","partition":1},{"topic":"orders","partition":4}])"));
  }
}

TEST_CASE("kgroup-consume: -F reads a Java properties file; keys of other clients are ignored with a warning",
          "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  mc.produce("orders", 20);
  const std::string path = "kgroup-cli-test-" + std::to_string(::getpid()) + ".properties";
  {
    std::ofstream out(path);
    out << "# written for the Java client\n"
        << "bootstrap.servers=" << mc.bootstrap_servers() << "\n"
        << "group.id=g-cli-file\n"
        << "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
        << "schema.registry.url=http://registry:8081\n"
        << "session.timeout.ms: 6000\n"
        << "heartbeat.interval.ms 500\n";
  }
  cli_process p({"-F", path, "--max-messages", "20", "--duration-ms", "25000", "orders"});
  const auto code = p.wait_exit(40s);
  check_clean_stop(p, code, 20);
  CHECK(record_lines(p).size() == 20);
  CHECK_THAT(p.stderr_text(), Catch::Contains("'schema.registry.url'"));
  // group.id came from the file: the auto-commit on close stored the 20 records there.
  kgroup::Consumer check(kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()}, {"group.id", "g-cli-file"}});
  std::int64_t committed = 0;
  for (const auto& [tp, om] : check.committed({{"orders", 0}, {"orders", 1}})) committed += om.offset;
  CHECK(committed == 20);
  check.close(5s);
  std::remove(path.c_str());

  // A file that cannot be read is a configuration error naming it.
  cli_process bad({"-F", path, "orders"});
  const auto bad_code = bad.wait_exit(10s);
  REQUIRE(bad_code);
  CHECK(*bad_code == 2);
  const auto ev = bad.events("error");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].str("code") == "INVALID_CONFIG");
  CHECK_THAT(ev[0].str("message"), Catch::Contains(path));
}

namespace {

// A bad command line: exit 2, a message on stderr that contains `mention`, nothing on stdout.
void check_usage_error(const std::vector<std::string>& args, const std::string& mention) {
  std::string line;
  for (const auto& a : args) line += a + " ";
  INFO("kgroup-consume " << line);
  cli_process p(args);
  const auto code = p.wait_exit(10s);
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK(p.stdout_text().empty());
  CHECK_THAT(p.stderr_text(), Catch::Contains(mention));
}

}  // namespace

TEST_CASE("kgroup-consume: usage", "[cli]") {
  SECTION("--help prints the usage on stdout and exits 0") {
    cli_process p({"--help"});
    const auto code = p.wait_exit(10s);
    REQUIRE(code);
    CHECK(*code == 0);
    CHECK_THAT(p.stdout_text(), Catch::Contains("usage: kgroup-consume -b BOOTSTRAP -g GROUP"));
  }

  // Each bad command line: exit 2, a message on stderr, nothing on stdout.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"-g", "g", "orders"}, "-b"},
      {{"-b", "127.0.0.1:1", "orders"}, "-g"},
      {{"-b", "127.0.0.1:1", "-g", "g"}, "TOPIC"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-X", "novalue", "orders"}, "key=value"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--commit", "sometimes", "orders"}, "--commit"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--max-messages", "0", "orders"}, "--max-messages"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--duration-ms", "soon", "orders"}, "--duration-ms"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--process-ms", "-1", "orders"}, "--process-ms"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--commit", "sync", "-X", "enable.auto.commit=true", "orders"},
       "contradicts"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--verbose", "orders"}, "--verbose"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--duration-ms"}, "needs a value"},
      {{"-b", "127.0.0.1:1", "--partition", "orders"}, "TOPIC:N"},
      {{"-b", "127.0.0.1:1", "--partition", "orders:-1"}, "partition number"},
      {{"-b", "127.0.0.1:1", "--partition", "orders:x"}, "partition number"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--partition", "orders:0", "audit"}, "exclude each other"},
      {{"-b", "127.0.0.1:1", "--partition", "orders:0", "--commit", "sync"}, "needs -g"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-c", "0", "orders"}, "-c"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-o", "middle", "orders"}, "s@TIMESTAMP"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-o", "s@soon", "orders"}, "s@"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-o", "-0", "orders"}, "-N"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-o", "end", "-X", "rebalance.listener.thread=heartbeat", "orders"},
       "rebalance.listener.thread=poll"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-f", "%s %x", "orders"}, "'%x'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-f", "%s%", "orders"}, "at the end"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-f", "%s\\x41", "orders"}, "escape"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-eqx", "orders"}, "unknown option '-x' in '-eqx'"},
      // --share refuses what a share member has no use for, by name.
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "-o", "beginning", "orders"},
       "-o cannot be used with --share"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "-o", "stored", "orders"},
       "-o cannot be used with --share"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "-e", "orders"}, "-e cannot be used with --share"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "--commit", "none", "orders"},
       "--commit cannot be used with --share"},
      {{"-b", "127.0.0.1:1", "--share", "--partition", "orders:0"},
       "--partition cannot be used with --share"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--ack", "accept", "orders"}, "--ack needs --share"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "--ack", "accept,maybe", "orders"}, "--ack: 'maybe'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "--ack", "accept,", "orders"}, "--ack: ''"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--share", "--ack", "release", "-X",
        "share.acknowledgement.mode=implicit", "orders"},
       "--ack contradicts"},
      {{"-b", "127.0.0.1:1", "--share", "orders"}, "-g"},
  };
  for (const auto& [args, mention] : bad) check_usage_error(args, mention);
}

// getopt_long's reading, as kcat's getopt: short flags grouped (a valued one last, its value glued
// or next), long options abbreviated to any unambiguous prefix, `--` before topics that start
// with '-'. Each line below is read up to a later check that names what was parsed.
TEST_CASE("kgroup-consume: options are read as getopt_long reads them", "[cli]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      // Grouped flags: -q then -c with its value glued, or -e, -q, then -o with the next argument.
      {{"-b", "127.0.0.1:1", "-g", "g", "-qc0", "orders"}, "-c: '0' is not an integer >= 1"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-eqo", "middle", "orders"}, "-o: 'middle' is not"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-qeo-0", "orders"}, "-o -N: '0'"},
      // Abbreviated long options, with the value after '=' or in the next argument; the message
      // names the option in full.
      {{"-b", "127.0.0.1:1", "-g", "g", "--max=0", "orders"}, "--max-messages: '0' is not an integer >= 1"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--dur", "soon", "orders"}, "--duration-ms: 'soon'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--pa", "orders:0", "audit"}, "exclude each other"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--dur"}, "--duration-ms needs a value"},
      // An ambiguous prefix names the options it could be.
      {{"-b", "127.0.0.1:1", "-g", "g", "--p", "orders:0"},
       "option '--p' is ambiguous (--partition, --process-ms)"},
      // An unknown letter in a group names the letter and the group; a value on a flag is refused.
      {{"-b", "127.0.0.1:1", "-g", "g", "-qz", "orders"}, "unknown option '-z' in '-qz'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--help=yes", "orders"}, "--help takes no value"},
      {{"-b", "127.0.0.1:1", "-g", "g", "-qc"}, "-c needs a value"},
      // Topics before and between options; after `--` everything is a topic, '-' included.
      {{"orders", "-b", "127.0.0.1:1", "audit", "-g", "g", "-c", "0"}, "-c: '0'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "--", "-"}, "unknown option '-'"},
      {{"-b", "127.0.0.1:1", "-g", "g", "orders", ""}, "empty topic name"},
  };
  for (const auto& [args, mention] : bad) check_usage_error(args, mention);
}

// ---- kcat's flags: record contents, -f, -o, -e, -q, exit status ---------------------------------

namespace {

using seed_record = kgroup::test::mock_cluster::seed_record;

// One record of each form the output has: text with characters JSON escapes, binary (base64),
// null key, null value, empty key and value; headers with a null value and a binary key and value.
const std::vector<seed_record> varied_records = {
    {"k0", "h\xc3\xa9llo \"w\"\n\tend", {{"h1", "v1"}, {"h2", std::nullopt}}, 1700000000001},
    {std::nullopt, std::string("\x00\x01\xff\xfe" "abc", 7), {{"bin", "\xff"}, {"\xfe", "x"}}, 1700000000002},
    {"k2", std::nullopt, {}, 1700000000003},
    {"", "", {}, 1700000000004},
};

// The JSON event lines on stderr (with -f), in order; library log lines are skipped.
std::vector<json> stderr_events(const cli_process& p) {
  std::vector<json> out;
  std::istringstream lines(p.stderr_text());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = parse_line(line);
    if (j && j->type == json::kind::object && j->num("ts_ms")) out.push_back(std::move(*j));
  }
  return out;
}

std::vector<std::string> event_names(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.str("event"));
  return out;
}

// Exited 0 after -e: the last event is "closed" with reason "eof" and `records` records.
void check_eof_stop(const std::vector<json>& events, std::optional<int> code, std::int64_t records) {
  REQUIRE(code);
  CHECK(*code == 0);
  REQUIRE(!events.empty());
  CHECK(events.back().str("event") == "closed");
  CHECK(events.back().str("reason") == "eof");
  CHECK(events.back().num("records") == records);
}

// The "eof" events as partition -> offset; each partition once.
std::map<std::int32_t, std::int64_t> eof_offsets(const std::vector<json>& events) {
  std::map<std::int32_t, std::int64_t> out;
  for (const auto& e : events) {
    if (e.str("event") != "eof") continue;
    CHECK(e.keys == std::vector<std::string>{"ts_ms", "event", "topic", "partition", "offset"});
    const auto [it, fresh] = out.emplace(static_cast<std::int32_t>(e.num("partition").value_or(-1)), e.num("offset").value_or(-1));
    CHECK(fresh);
  }
  return out;
}

// A fake leader of topic "t" whose records have timestamps it can look up: the mocks' ListOffsets
// answers no offset for any time. Partition p holds sizes[p] records; the one at offset o has
// value "v<o>" and CreateTime 1000 + 10 * o.
class timed_leader {
 public:
  explicit timed_leader(std::vector<std::int64_t> sizes)
      : sizes_(std::move(sizes)),
        fb_([this](const fake_request& r) { return handle(r); }, {{"t", static_cast<std::int32_t>(sizes_.size())}}) {}
  std::string bootstrap() const { return fb_.bootstrap(); }

 private:
  using fake_request = kgroup::test::fake_broker::request;
  using fake_reply = kgroup::test::fake_broker::reply;

  static std::int64_t time_of(std::int64_t offset) { return 1000 + 10 * offset; }

  std::optional<fake_reply> handle(const fake_request& r) {
    namespace proto = kgroup::protocol;
    using kgroup::test::fake_broker;
    switch (r.api_key) {
      case proto::list_offsets_request::api_key: {
        proto::list_offsets_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::list_offsets_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) {
            const std::int64_t size = sizes_.at(static_cast<std::size_t>(p.partition_index));
            std::int64_t offset = p.timestamp == -2 ? 0 : size;
            std::int64_t ts = -1;
            if (p.timestamp >= 0) {
              offset = -1;
              for (std::int64_t o = 0; o < size && offset < 0; ++o) {
                if (time_of(o) >= p.timestamp) {
                  offset = o;
                  ts = time_of(o);
                }
              }
            }
            rt.partitions.push_back({p.partition_index, 0, {}, ts, offset, 0});
          }
        }
        return fake_reply{fake_broker::response(r, resp)};
      }
      case proto::offset_for_leader_epoch_request::api_key: {
        proto::offset_for_leader_epoch_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::offset_for_leader_epoch_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.topic = t.topic;
          for (const auto& p : t.partitions) {
            auto& e = rt.partitions.emplace_back();
            e.partition = p.partition;
            e.leader_epoch = 0;  // one epoch, the whole log
            e.end_offset = sizes_.at(static_cast<std::size_t>(p.partition));
          }
        }
        return fake_reply{fake_broker::response(r, resp)};
      }
      case proto::fetch_request::api_key: {
        proto::fetch_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::fetch_response resp;
        std::deque<proto::bytes> data;  // stable addresses for the records views
        bool any = false;
        for (const auto& t : req.topics) {
          auto& rt = resp.responses.emplace_back();
          rt.topic = t.topic;
          for (const auto& p : t.partitions) {
            const std::int64_t size = sizes_.at(static_cast<std::size_t>(p.partition));
            auto& rp = rt.partitions.emplace_back();
            rp.partition_index = p.partition;
            rp.records = proto::records_view{};
            rp.high_watermark = size;
            rp.last_stable_offset = size;
            rp.log_start_offset = 0;
            if (p.fetch_offset < 0 || p.fetch_offset > size) {
              rp.error_code = 1;  // OFFSET_OUT_OF_RANGE
              continue;
            }
            if (p.fetch_offset == size) continue;
            std::vector<std::string> values;
            for (std::int64_t o = p.fetch_offset; o < size; ++o) values.push_back("v" + std::to_string(o));
            std::vector<proto::record_input> recs;
            for (std::size_t i = 0; i < values.size(); ++i) {
              recs.push_back({std::nullopt,
                              proto::byte_view(reinterpret_cast<const std::uint8_t*>(values[i].data()), values[i].size()),
                              time_of(p.fetch_offset + static_cast<std::int64_t>(i)), {}, {}});
            }
            proto::batch_encode_options o;
            o.base_offset = p.fetch_offset;
            o.partition_leader_epoch = 0;
            auto& bytes = data.emplace_back();
            if (proto::encode_record_batch(recs, o, bytes)) return std::nullopt;
            rp.records = proto::records_view{bytes};
            any = true;
          }
        }
        // An empty answer waits a little, as a broker waits fetch.max.wait.ms.
        return fake_reply{fake_broker::response(r, resp), false, any ? 0ms : 50ms};
      }
      default:
        return std::nullopt;
    }
  }

  std::vector<std::int64_t> sizes_;
  kgroup::test::fake_broker fb_;  // last: its threads call handle()
};

}  // namespace

TEST_CASE("kgroup-consume: records carry timestamp, key, value and headers; -f prints kcat's tokens", "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 1);
  mc.produce_records("orders", 0, varied_records);
  const std::vector<std::string> base = {"-b", mc.bootstrap_servers(), "--partition", "orders:0", "-e", "--duration-ms", "20000"};

  SECTION("JSON: text as strings, binary as base64, null as null") {
    cli_process p(base);
    const auto code = p.wait_exit(30s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    CHECK(p.bad_lines().empty());
    check_eof_stop(p.events(), code, 4);
    CHECK(event_names(p.events()) == std::vector<std::string>{"assigned", "record", "record", "record", "record", "eof", "closed"});
    CHECK(eof_offsets(p.events()) == std::map<std::int32_t, std::int64_t>{{0, 4}});
    const auto r = p.events("record");
    REQUIRE(r.size() == 4);
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK(r[i].num("offset") == static_cast<std::int64_t>(i));
      CHECK(r[i].num("timestamp") == 1700000000001 + static_cast<std::int64_t>(i));
      CHECK(r[i].str("timestamp_type") == "create_time");
    }

    CHECK(r[0].keys == text_record_keys);
    CHECK(r[0].str("key") == "k0");
    CHECK(r[0].str("value") == *varied_records[0].value);
    CHECK_THAT(p.stdout_text(), Catch::Contains(R"("value":"h)" "\xc3\xa9" R"(llo \"w\"\n\tend")"));
    CHECK_THAT(p.stdout_text(), Catch::Contains(R"("headers":[{"key":"h1","value":"v1"},{"key":"h2","value":null}]})"));

    CHECK(r[1].keys == std::vector<std::string>{"ts_ms", "event", "topic", "partition", "offset", "timestamp",
                                                "timestamp_type", "key", "value_b64", "headers"});
    REQUIRE(r[1].find("key") != nullptr);
    CHECK(r[1].find("key")->type == json::kind::null);
    CHECK(r[1].str("value_b64") == "AAH//mFiYw==");
    CHECK_THAT(p.stdout_text(), Catch::Contains(R"("headers":[{"key":"bin","value_b64":"/w=="},{"key_b64":"/g==","value":"x"}]})"));

    CHECK(r[2].str("key") == "k2");
    REQUIRE(r[2].find("value") != nullptr);
    CHECK(r[2].find("value")->type == json::kind::null);
    REQUIRE(r[2].find("headers") != nullptr);
    CHECK(r[2].find("headers")->items.empty());

    // Empty is not null.
    REQUIRE(r[3].find("key") != nullptr);
    CHECK(r[3].find("key")->type == json::kind::string);
    CHECK(r[3].str("key").empty());
    REQUIRE(r[3].find("value") != nullptr);
    CHECK(r[3].find("value")->type == json::kind::string);
  }

  SECTION("-f: every token and escape; stdout has only the records, the events go to stderr") {
    auto args = base;
    args.insert(args.end(), {"-f", R"(%t %p %o [%k] [%s] %T {%h} %K %S %%\t\\\r\n)"});
    cli_process p(args);
    const auto code = p.wait_exit(30s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    const std::string tail = " %\t\\\r\n";
    CHECK(p.stdout_text() == "orders 0 0 [k0] [h\xc3\xa9llo \"w\"\n\tend] 1700000000001 {h1=v1,h2=} 2 15" + tail +
                                 "orders 0 1 [] [" + std::string("\x00\x01\xff\xfe" "abc", 7) +
                                 "] 1700000000002 {bin=\xff,\xfe=x} -1 7" + tail +
                                 "orders 0 2 [k2] [] 1700000000003 {} 2 -1" + tail +
                                 "orders 0 3 [] [] 1700000000004 {} 0 0" + tail);
    const auto ev = stderr_events(p);
    check_eof_stop(ev, code, 4);
    CHECK(event_names(ev) == std::vector<std::string>{"assigned", "eof", "closed"});
    CHECK(eof_offsets(ev) == std::map<std::int32_t, std::int64_t>{{0, 4}});
  }

  SECTION("-f with -q: nothing on stderr") {
    auto args = base;
    args.insert(args.end(), {"-q", "-f", "%o:%s\\n"});
    cli_process p(args);
    const auto code = p.wait_exit(30s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    REQUIRE(code);
    CHECK(*code == 0);
    CHECK(p.stdout_text() == "0:h\xc3\xa9llo \"w\"\n\tend\n1:" + std::string("\x00\x01\xff\xfe" "abc", 7) + "\n2:\n3:\n");
    CHECK(p.stderr_text().empty());
  }
}

TEST_CASE("kgroup-consume: -o picks where each partition starts", "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  mc.produce("orders", 10, "none", 0);
  mc.produce("orders", 6, "none", 1);
  const std::vector<std::int64_t> ends = {10, 6};
  // Both partitions from -o to the end (-e).
  auto run = [&](const std::string& start, const std::vector<std::int64_t>& from) {
    INFO("-o " << start);
    cli_process p({"-b", mc.bootstrap_servers(), "--partition", "orders:0", "--partition", "orders:1", "-o", start,
                   "-e", "--duration-ms", "20000"});
    const auto code = p.wait_exit(30s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    CHECK(p.bad_lines().empty());
    std::int64_t want = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) want += ends[i] - from[i];
    check_eof_stop(p.events(), code, want);
    const auto lines = record_lines(p);
    CHECK(lines.size() == static_cast<std::size_t>(want));
    CHECK(std::set<record_id>(lines.begin(), lines.end()) == offset_ranges(from, ends));
    CHECK(eof_offsets(p.events()) == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 6}});
  };

  SECTION("beginning, and -c stops early") {
    run("beginning", {0, 0});
    cli_process p({"-b", mc.bootstrap_servers(), "--partition", "orders:0", "-o", "beginning", "-c", "3", "--duration-ms", "20000"});
    const auto code = p.wait_exit(30s);
    check_clean_stop(p, code, 3);
    const auto lines = record_lines(p);
    CHECK(lines == std::vector<record_id>{{0, 0}, {0, 1}, {0, 2}});
  }
  SECTION("end") { run("end", {10, 6}); }
  SECTION("an absolute offset") { run("4", {4, 4}); }
  SECTION("-N: N before the end, not before the beginning") {
    run("-3", {7, 3});
    run("-8", {2, 0});
  }

  SECTION("s@TIMESTAMP: the first record at or after it, or the end") {
    // 10 and 5 records with times 1000, 1010, ...: 1065 finds offset 7 in partition 0 and nothing
    // in partition 1 (its last record is from 1040), which therefore starts at its end.
    timed_leader leader({10, 5});
    cli_process p({"-b", leader.bootstrap(), "--partition", "t:0", "--partition", "t:1", "-o", "s@1065", "-e",
                   "-X", "fetch.max.wait.ms=50", "-X", "retry.backoff.ms=20", "--duration-ms", "20000"});
    const auto code = p.wait_exit(30s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    CHECK(p.bad_lines().empty());
    check_eof_stop(p.events(), code, 3);
    const auto r = p.events("record");
    REQUIRE(r.size() == 3);
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK(r[i].num("partition") == 0);
      CHECK(r[i].num("offset") == 7 + static_cast<std::int64_t>(i));
      CHECK(r[i].num("timestamp") == 1070 + 10 * static_cast<std::int64_t>(i));
      CHECK(r[i].str("value") == "v" + std::to_string(7 + i));
      REQUIRE(r[i].find("key") != nullptr);
      CHECK(r[i].find("key")->type == json::kind::null);
    }
    CHECK(eof_offsets(p.events()) == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 5}});
  }
}

TEST_CASE("kgroup-consume: -e in a group stops after exactly the seeded records; -o there ignores committed "
          "offsets; -q keeps stderr empty",
          "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 3);
  mc.produce("orders", 10, "none", 0);
  mc.produce("orders", 6, "none", 1);  // partition 2 stays empty
  const std::vector<std::int64_t> ends = {10, 6, 0};

  // Everything, committed as it goes. (member_args() ends with the topic: flags go before it.)
  auto args = member_args(mc, "g-cli-eof", 30000);
  args.insert(args.end() - 1, {"-e", "--commit", "sync"});
  {
    cli_process p(args);
    const auto code = p.wait_exit(40s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    CHECK(p.bad_lines().empty());
    CHECK(p.events("error").empty());
    check_eof_stop(p.events(), code, 16);
    const auto lines = record_lines(p);
    CHECK(lines.size() == 16);
    CHECK(std::set<record_id>(lines.begin(), lines.end()) == offset_ranges({}, ends));
    CHECK(eof_offsets(p.events()) == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 6}, {2, 0}});
    // Each partition's eof comes after its last record.
    check_records_while_owned(p);
    const auto ev = p.events();
    std::map<std::int32_t, std::size_t> last_record, eof_at;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const auto part = static_cast<std::int32_t>(ev[i].num("partition").value_or(-1));
      if (ev[i].str("event") == "record") last_record[part] = i;
      if (ev[i].str("event") == "eof") eof_at[part] = i;
    }
    for (const auto& [part, i] : last_record) CHECK(eof_at[part] > i);
  }

  // Committed offsets are at the end; -o -2 starts 2 before it all the same.
  args.insert(args.end() - 1, {"-o", "-2", "-q"});
  cli_process p(args);
  const auto code = p.wait_exit(40s);
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  check_eof_stop(p.events(), code, 4);
  const auto lines = record_lines(p);
  CHECK(std::set<record_id>(lines.begin(), lines.end()) == offset_ranges({8, 4, 0}, ends));
  CHECK(p.stderr_text().empty());
}

TEST_CASE("kgroup-consume: a runtime error ends the run with exit status 1", "[cli]") {
  kgroup::test::mock_cluster mc(1);
  mc.create_topic("orders", 2);
  mc.produce("orders", 6, "none", 0);

  auto check_error_exit = [](const cli_process& p, std::optional<int> code, const std::string& error_code) {
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    REQUIRE(code);
    CHECK(*code == 1);
    CHECK(p.bad_lines().empty());
    const auto errors = p.events("error");
    CHECK(std::any_of(errors.begin(), errors.end(), [&](const json& e) { return e.str("code") == error_code; }));
    const auto ev = p.events();
    CHECK(ev.back().str("event") == "closed");
    CHECK(ev.back().str("reason") == "error");
  };

  SECTION("-e with a partition the cluster does not have") {
    cli_process p({"-b", mc.bootstrap_servers(), "--partition", "orders:0", "--partition", "orders:5", "-e"});
    const auto code = p.wait_exit(30s);
    check_error_exit(p, code, "UNKNOWN_TOPIC_OR_PARTITION");
    REQUIRE(!p.events("error").empty());
    CHECK_THAT(p.events("error").front().str("message"), Catch::Contains("orders:5"));
    CHECK(p.events("record").empty());
  }

  SECTION("a fatal error from poll()") {
    mc.push_request_errors(11, {30});  // JoinGroup: GROUP_AUTHORIZATION_FAILED
    cli_process p(member_args(mc, "g-cli-fatal", 30000));
    const auto code = p.wait_exit(40s);
    check_error_exit(p, code, "GROUP_AUTHORIZATION_FAILED");
  }

  SECTION("a failed last commit") {
    // Every commit fails (OFFSET_METADATA_TOO_LARGE is not retried): the one after the batch,
    // and the retry before closing.
    mc.push_request_errors(8, std::vector<std::int16_t>(10, 12));  // OffsetCommit
    cli_process p(reader_args(mc, "g-cli-commit-fails", 6, {"--commit", "sync"}));
    const auto code = p.wait_exit(40s);
    check_error_exit(p, code, "OFFSET_METADATA_TOO_LARGE");
    CHECK(p.events("error").size() >= 2);
    CHECK(record_lines(p).size() == 6);
    CHECK(p.events().back().num("records") == 6);
  }
}

// ---- --share: a share group member (KIP-932) --------------------------------------------------
// On librdkafka 2.15.1's mock ([share]: the share@2.15 entries); on 2.0.2's they skip with a
// warning. The mock wipes every share session of a broker when any connection to it closes
// (SHARE-GROUPS.md, M1), so the records are produced before a member starts and nothing pokes the
// mock while one reads; runs in one group follow each other, each after the last one closed.

namespace {

bool share_groups_on(kgroup::test::mock_cluster& mc) {
  kgroup::test::mock_cluster::share_group_settings s;
  s.heartbeat_interval_ms = 500;
  s.earliest = true;  // before any member joins: the group then starts at the first offset
  if (!mc.set_share_groups(s)) {
    WARN("this librdkafka's mock has no share groups (run with librdkafka 2.15.1)");
    return false;
  }
  return true;
}

std::vector<std::string> share_args(const kgroup::test::mock_cluster& mc, const std::string& group,
                                    std::int64_t max_messages, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--share", "-b", mc.bootstrap_servers(), "-g", group};
  args.insert(args.end(), {"-X", "retry.backoff.ms=50", "--max-messages", std::to_string(max_messages)});
  args.insert(args.end(), {"--duration-ms", "25000"});
  args.insert(args.end(), extra.begin(), extra.end());  // a later --duration-ms wins
  args.emplace_back("orders");
  return args;
}

struct share_line {
  record_id id;
  std::int64_t delivery_count = 0;
};

// The record lines of a share member, in output order: the fields of record_lines() and then
// "delivery_count".
std::vector<share_line> share_lines(const cli_process& p) {
  auto keys = text_record_keys;
  keys.emplace_back("delivery_count");
  std::vector<share_line> out;
  for (const auto& e : p.events("record")) {
    CHECK(e.keys == keys);
    REQUIRE(e.num("partition"));
    REQUIRE(e.num("offset"));
    REQUIRE(e.num("delivery_count"));
    out.push_back(
        {{static_cast<std::int32_t>(*e.num("partition")), *e.num("offset")}, *e.num("delivery_count")});
  }
  return out;
}

}  // namespace

TEST_CASE("kgroup-consume --share: one member prints every record once with delivery_count 1 and accepts it",
          "[cli][share]") {
  kgroup::test::mock_cluster mc(1);
  if (!share_groups_on(mc)) return;
  mc.create_topic("orders", 2);
  const auto seeded = mc.produce("orders", 40);
  const auto started_ms = epoch_ms();
  {
    cli_process p(share_args(mc, "sg-cli-implicit", 40));
    const auto code = p.wait_exit(40s);
    check_clean_stop(p, code, 40);
    check_lines(p, started_ms);
    const auto lines = share_lines(p);
    CHECK(lines.size() == 40);
    std::set<record_id> printed;
    for (const auto& l : lines) {
      CHECK(l.delivery_count == 1);
      printed.insert(l.id);
    }
    CHECK(printed == offset_ranges({}, seeded));
    // The assignment as poll() saw it, then given up on close.
    const auto ev = p.events();
    CHECK(owned_after(ev).empty());
    REQUIRE(!p.events("assigned").empty());
    CHECK(partitions_of(p.events("assigned").front()) == all_partitions("orders", 2));
    REQUIRE(ev.size() >= 2);
    CHECK(ev[ev.size() - 2].str("event") == "revoked");
  }
  // Implicit mode accepted them all (the last batch too, before the member left): a second run in
  // the group gets nothing.
  cli_process again(share_args(mc, "sg-cli-implicit", 1, {"--duration-ms", "5000"}));
  const auto code = again.wait_exit(30s);
  INFO("stdout:\n" << again.stdout_text() << "stderr:\n" << again.stderr_text());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(again.events("record").empty());
  CHECK(again.events("error").empty());
  CHECK(again.events().back().str("reason") == "duration");
}

TEST_CASE("kgroup-consume --share --ack: each record is acknowledged in turn by the pattern",
          "[cli][share]") {
  kgroup::test::mock_cluster mc(1);
  if (!share_groups_on(mc)) return;
  mc.create_topic("orders", 1);
  mc.produce("orders", 10);
  // The pattern alternates: every second record goes back, comes again with its count + 1, and
  // takes the next turn of the pattern. 16 lines stop the run while some are still released.
  cli_process p(share_args(mc, "sg-cli-pattern", 16, {"--ack", "accept,release"}));
  const auto code = p.wait_exit(40s);
  check_clean_stop(p, code, 16);
  const auto lines = share_lines(p);
  REQUIRE(lines.size() == 16);
  std::map<record_id, std::int64_t> count;  // last delivery count printed
  std::set<record_id> accepted;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    INFO("line " << i << ": offset " << l.id.second << " delivery_count " << l.delivery_count);
    CHECK(accepted.count(l.id) == 0);            // an accepted record never comes back
    CHECK(l.delivery_count == count[l.id] + 1);  // a released one comes back with count + 1
    count[l.id] = l.delivery_count;
    if (i % 2 == 0) accepted.insert(l.id);
  }
  CHECK(count.size() == 10);
  CHECK(accepted.size() == 8);  // lines 0, 2, ..., 14

  // The rest (released by the pattern, or by the run's end) go to the next member of the group,
  // each with a higher count; --ack accept finishes them.
  std::set<record_id> left;
  for (const auto& [id, n] : count) {
    if (accepted.count(id) == 0) left.insert(id);
  }
  cli_process q(
      share_args(mc, "sg-cli-pattern", static_cast<std::int64_t>(left.size()), {"--ack", "accept"}));
  const auto qcode = q.wait_exit(40s);
  check_clean_stop(q, qcode, static_cast<std::int64_t>(left.size()));
  std::set<record_id> got;
  for (const auto& l : share_lines(q)) {
    INFO("offset " << l.id.second);
    CHECK(l.delivery_count > count[l.id]);
    got.insert(l.id);
  }
  CHECK(got == left);
}

TEST_CASE("kgroup-consume --share --ack reject: rejected records are never delivered again", "[cli][share]") {
  kgroup::test::mock_cluster mc(1);
  if (!share_groups_on(mc)) return;
  mc.create_topic("orders", 2);
  mc.produce("orders", 6);
  {
    cli_process p(share_args(mc, "sg-cli-reject", 6, {"--ack", "reject"}));
    const auto code = p.wait_exit(40s);
    check_clean_stop(p, code, 6);
    CHECK(share_lines(p).size() == 6);
  }
  cli_process again(share_args(mc, "sg-cli-reject", 1, {"--duration-ms", "5000"}));
  const auto code = again.wait_exit(30s);
  INFO("stdout:\n" << again.stdout_text() << "stderr:\n" << again.stderr_text());
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(again.events("record").empty());
}

// On librdkafka 2.0.2's mock ([cli] runs on the first cluster only).
TEST_CASE("kgroup-consume --share: a broker without share groups is an error event and exit status 1",
          "[cli]") {
  kgroup::test::mock_cluster mc(1);
  if (mc.set_share_groups({})) {
    WARN("this librdkafka's mock has share groups: the case is for librdkafka 2.0.2's");
    return;
  }
  mc.create_topic("orders", 1);
  cli_process p(share_args(mc, "sg-cli-none", 1));
  const auto code = p.wait_exit(40s);
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  REQUIRE(code);
  CHECK(*code == 1);
  const auto errors = p.events("error");
  REQUIRE(!errors.empty());
  CHECK_THAT(errors.front().str("message"), Catch::Contains("share groups"));
  CHECK(p.events().back().str("reason") == "error");
}

TEST_CASE("kgroup-consume --share: consumer-group keys are configuration errors naming the key", "[cli]") {
  for (const char* kv : {"auto.offset.reset=latest", "enable.auto.commit=false", "session.timeout.ms=6000"}) {
    INFO(kv);
    cli_process p({"--share", "-b", "127.0.0.1:1", "-g", "g", "-X", kv, "orders"});
    const auto code = p.wait_exit(10s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    REQUIRE(code);
    CHECK(*code == 2);
    const auto errors = p.events("error");
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].str("code") == "INVALID_CONFIG");
    const std::string key(kv, std::strchr(kv, '='));
    CHECK_THAT(errors[0].str("message"), Catch::Contains(key));
  }
}

TEST_CASE("kgroup-consume over SASL_SSL with -X keys; a wrong password is an error event and exit code 1",
          "[cli][security]") {
  kgroup::test::mock_cluster mc(2);
  mc.create_topic("orders", 3);
  mc.produce("orders", 30);
  kgroup::test::secure_front_options fo;
  fo.tls = true;
  fo.sasl_mechanisms = {"SCRAM-SHA-512"};
  fo.users = {{"cli-user", "cli-password"}};
  kgroup::test::secure_front front(mc, fo);
  const auto args = [&](const std::string& password) {
    return std::vector<std::string>{"-b", front.bootstrap_servers(), "-g", "g-cli-secure-" + std::to_string(password.size()), "-e",
                                    "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
                                    "-X", "sasl.username=cli-user", "-X", "sasl.password=" + password,
                                    "-X", "ssl.ca.location=" + kgroup::test::test_pki::get().ca.cert_path,
                                    "-X", "retry.backoff.ms=50", "orders"};
  };
  {
    cli_process p(args("cli-password"));
    const auto code = p.wait_exit(40s);
    INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
    CHECK(code == 0);
    CHECK(record_lines(p).size() == 30);
    CHECK(p.events("error").empty());
    CHECK(front.counters().authentications_by_principal.at("cli-user") >= 2);
  }
  cli_process p(args("not-the-password"));
  const auto code = p.wait_exit(40s);
  INFO("stdout:\n" << p.stdout_text() << "stderr:\n" << p.stderr_text());
  CHECK(code == 1);
  const auto errors = p.events("error");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].str("code") == "SASL_AUTHENTICATION_FAILED");
  CHECK(errors[0].str("message").find("sasl.username and sasl.password") != std::string::npos);
  CHECK(p.stdout_text().find("not-the-password") == std::string::npos);
  CHECK(p.stderr_text().find("not-the-password") == std::string::npos);
}

#endif  // KGROUP_CONSUME_PATH
