// kgroup-bench-share: share groups (KIP-932, issue 34), kgroup's ShareConsumer against librdkafka
// 2.15.1's share consumer on librdkafka 2.15.1's mock cluster (the only test cluster with share
// groups; elsewhere it prints why and exits 0).
//
// Throughput: `--records` records of 100 bytes on `--partitions` partitions, produced before any
// member starts (the mock drops every share session on a broker when any connection to it closes,
// so nothing connects while members read); 1 and 3 members in implicit mode, each on its own
// thread, until every record was delivered. One line per client and member count:
//   client=kgroup|librdkafka members=N records=N seconds=S records_per_s=R cpu_s=C cpu_us_per_record=U
//   duplicates=D
// cpu_s is the process's CPU time over the run (getrusage): the clients' threads AND the mock
// serving them, the same records for both clients, so compare the two lines, not absolutes.
//
// Redelivery: one partition, the mock's record lock at `--lock-ms`; two members of one client
// given the partition together (the mock's manual assignment), the fence that follows it (M4)
// waited out before any record is produced; A polls one batch in explicit mode and then holds it
// without acknowledging; B (implicit mode) polls. Prints the time from A's last poll to B's
// first record of A's batch (delivery count 2):
//   client=... redelivery_ms=N lock_ms=L
// The mock sweeps expired locks once a second, so expect lock + up to ~1 s.
//
// librdkafka's share consumer is looked up at run time (dlsym): this binary is compiled against
// Debian's librdkafka 2.0.2 headers, which do not declare it.
//
// Usage: kgroup-bench-share [--quick] [--records N] [--partitions N] [--client kgroup|librdkafka|both]
//                           [--lock-ms N] [--redelivery-only]
//   --quick   6,000 records, kgroup only, no redelivery run (the ctest smoke test; it fails when a
//             record is missing or a member errs).
#include <dlfcn.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kgroup/share_consumer.hpp"
#include "mock_cluster.hpp"
#include "rdkafka_share.hpp"

using namespace std::chrono_literals;
using kgroup::test::mock_cluster;
using steady = std::chrono::steady_clock;

namespace {

// One delivered record as both clients report it.
struct delivery {
  std::int32_t partition;
  std::int64_t offset;
  std::int16_t count;
};

// A member of either client, polled on one thread.
class member {
 public:
  virtual ~member() = default;
  virtual std::vector<delivery> poll(std::chrono::milliseconds timeout) = 0;
  virtual void close() = 0;
};

class kgroup_member : public member {
 public:
  kgroup_member(const mock_cluster& mc, const std::string& group, const std::string& topic,
                bool explicit_mode)
      : c_(kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()},
                          {"group.id", group},
                          {"share.acknowledgement.mode", explicit_mode ? "explicit" : "implicit"}}) {
    c_.subscribe({topic});
  }
  std::vector<delivery> poll(std::chrono::milliseconds timeout) override {
    std::vector<delivery> out;
    for (const auto& r : c_.poll(timeout))
      out.push_back({r.partition, r.offset, r.delivery_count.value_or(0)});
    return out;
  }
  void close() override { c_.close(); }

 private:
  kgroup::ShareConsumer c_;
};

class rdkafka_member : public member {
 public:
  rdkafka_member(const mock_cluster& mc, const std::string& group, const std::string& topic,
                 bool explicit_mode)
      : m_(mc, group, topic, explicit_mode) {}
  std::vector<delivery> poll(std::chrono::milliseconds timeout) override {
    std::vector<delivery> out;
    for (const auto& d : m_.poll(timeout)) out.push_back({d.partition, d.offset, d.count});
    return out;
  }
  void close() override { m_.close(); }

 private:
  kgroup::test::rdkafka_share_member m_;
};

std::unique_ptr<member> make_member(const std::string& client, const mock_cluster& mc,
                                    const std::string& group, const std::string& topic,
                                    bool explicit_mode = false) {
  if (client == "kgroup") return std::make_unique<kgroup_member>(mc, group, topic, explicit_mode);
  return std::make_unique<rdkafka_member>(mc, group, topic, explicit_mode);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct options {
  bool quick = false;
  std::int64_t records = 60000;
  int partitions = 6;
  std::string client = "both";
  int lock_ms = 5000;
  bool redelivery_only = false;
};

// One throughput run; returns false when records were missing.
bool throughput(const options& o, const std::string& client, int members, int run) {
  mock_cluster mc(1);
  mock_cluster::share_group_settings s;
  s.earliest = true;
  s.heartbeat_interval_ms = 500;
  mc.set_share_groups(s);
  const std::string topic = "q" + std::to_string(run);
  mc.create_topic(topic, o.partitions);
  mc.produce(topic, o.records);
  std::mutex m;
  std::set<std::pair<std::int32_t, std::int64_t>> seen;
  std::uint64_t duplicates = 0;
  std::atomic<bool> running{true};
  std::atomic<int> errors{0};
  const double cpu0 = cpu_seconds();
  const auto t0 = steady::now();
  steady::time_point first{}, last{};
  std::int64_t at_first = 0;  // records seen when the first poll with records returned
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<member>> ms;
  for (int i = 0; i < members; ++i) {
    ms.push_back(make_member(client, mc, "bench-" + std::to_string(run), topic));
    threads.emplace_back([&, i] {
      try {
        while (running) {
          auto got = ms[i]->poll(100ms);
          if (got.empty()) continue;
          std::lock_guard lock(m);
          for (const auto& d : got) {
            if (!seen.insert({d.partition, d.offset}).second) ++duplicates;
          }
          last = steady::now();
          if (first == steady::time_point{}) {
            first = last;
            at_first = static_cast<std::int64_t>(seen.size());
          }
          if (static_cast<std::int64_t>(seen.size()) >= o.records) running = false;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "member %d: %s\n", i, e.what());
        ++errors;
        running = false;
      }
    });
    if (i + 1 < members) std::this_thread::sleep_for(600ms);  // the mock fences joins too close together
  }
  const auto limit = t0 + 120s;
  while (running && steady::now() < limit) std::this_thread::sleep_for(20ms);
  running = false;
  for (auto& t : threads) t.join();
  const double cpu = cpu_seconds() - cpu0;
  std::size_t got;
  {
    std::lock_guard lock(m);
    got = seen.size();
  }
  const double secs =
      std::chrono::duration<double>((last == steady::time_point{} ? steady::now() : last) - t0).count();
  // The join and the first fetch take a good part of a run: the time to the first record and the
  // rate after it are printed apart.
  const double first_s =
      first == steady::time_point{} ? 0.0 : std::chrono::duration<double>(first - t0).count();
  const double after_s = secs - first_s;
  const double after_rate =
      after_s > 0 ? static_cast<double>(static_cast<std::int64_t>(got) - at_first) / after_s : 0.0;
  std::printf(
      "client=%s members=%d records=%zu seconds=%.2f records_per_s=%.0f first_record_s=%.3f "
      "records_per_s_after_first=%.0f cpu_s=%.3f cpu_us_per_record=%.2f duplicates=%llu\n",
      client.c_str(), members, got, secs, got / secs, first_s, after_rate, cpu,
      got ? cpu * 1e6 / static_cast<double>(got) : 0.0, static_cast<unsigned long long>(duplicates));
  std::fflush(stdout);
  for (auto& mb : ms) mb->close();
  return errors == 0 && static_cast<std::int64_t>(got) == o.records;
}

// The redelivery run: A holds a batch, B waits for it.
void redelivery(const options& o, const std::string& client) {
  mock_cluster mc(1);
  mock_cluster::share_group_settings s;
  s.earliest = true;
  s.heartbeat_interval_ms = 500;
  s.record_lock_duration_ms = o.lock_ms;
  mc.set_share_groups(s);
  mc.create_topic("held", 1);
  auto a = make_member(client, mc, "redeliver", "held", true);
  std::this_thread::sleep_for(600ms);
  auto b = make_member(client, mc, "redeliver", "held");  // implicit: it accepts what it gets
  // Both members on the one partition (the mock's automatic assignment would give it to one).
  std::vector<std::string> ids;
  const auto until = steady::now() + 20s;
  while (steady::now() < until && (ids = mc.share_group_member_ids("redeliver")).size() < 2)
    std::this_thread::sleep_for(100ms);
  if (ids.size() < 2) {
    std::printf("client=%s redelivery_ms=-1 lock_ms=%d (members did not join)\n", client.c_str(), o.lock_ms);
    return;
  }
  std::map<std::string, std::vector<std::pair<std::string, std::int32_t>>> both;
  for (const auto& id : ids) both[id] = {{"held", 0}};
  mc.share_group_assign("redeliver", both);
  // The manual assignment bumps every member's epoch twice over (M4), so one member is usually
  // fenced right after it and rejoins; a fenced member gives up what it holds. Let that settle
  // (a few heartbeat intervals, nothing to read yet) before there are records to hold, so the
  // figure below is the lock's and not the fence's. The records are produced only then.
  const auto settle = steady::now() + 2500ms;
  while (steady::now() < settle) {
    a->poll(50ms);
    b->poll(50ms);
  }
  mc.produce("held", 200);
  // A takes a batch and holds it; B may already have taken records too: it acknowledges them.
  std::set<std::int64_t> held;
  steady::time_point a_last{};
  const auto a_until = steady::now() + 20s;
  while (held.empty() && steady::now() < a_until) {
    for (const auto& d : a->poll(100ms)) held.insert(d.offset);
    a_last = steady::now();
  }
  long long took = -1;
  const auto b_until = steady::now() + std::chrono::milliseconds(o.lock_ms) + 20s;
  while (took < 0 && steady::now() < b_until) {
    for (const auto& d : b->poll(100ms)) {
      if (held.count(d.offset) && d.count >= 2 && took < 0)
        took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - a_last).count();
    }
  }
  std::printf("client=%s redelivery_ms=%lld lock_ms=%d held=%zu\n", client.c_str(), took, o.lock_ms,
              held.size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick")
      o.quick = true;
    else if (a == "--records")
      o.records = std::atoll(value().c_str());
    else if (a == "--partitions")
      o.partitions = std::atoi(value().c_str());
    else if (a == "--client")
      o.client = value();
    else if (a == "--lock-ms")
      o.lock_ms = std::atoi(value().c_str());
    else if (a == "--redelivery-only")
      o.redelivery_only = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.quick) {
    o.records = 6000;
    o.client = "kgroup";
  }
  {
    mock_cluster probe(1);
    if (!probe.set_share_groups({})) {
      std::printf(
          "# librdkafka %s's mock has no share groups: run with librdkafka 2.15.1 (LD_LIBRARY_PATH)\n",
          mock_cluster::librdkafka_version_string().c_str());
      return 0;
    }
  }
  std::vector<std::string> clients;
  if (o.client == "both" || o.client == "kgroup") clients.push_back("kgroup");
  if (o.client == "both" || o.client == "librdkafka") {
    if (kgroup::test::rdkafka_share().load())
      clients.push_back("librdkafka");
    else
      std::printf("# this librdkafka has no share consumer: librdkafka runs skipped\n");
  }
  bool ok = true;
  int run = 0;
  for (int members : {1, 3}) {
    if (o.redelivery_only) break;
    for (const auto& c : clients) ok = throughput(o, c, members, run++) && ok;
  }
  if (!o.quick) {
    for (const auto& c : clients) redelivery(o, c);
  }
  return ok ? 0 : 1;
}
