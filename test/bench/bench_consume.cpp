// kgroup-bench-consume: consuming throughput, CPU and memory, kgroup against librdkafka (issue 5).
//
// Setup: a 3-broker librdkafka mock cluster in this process, one 36-partition topic per codec
// (none, lz4), each seeded with 600,000 records of 100 bytes spread evenly (16,667 per partition,
// about 2 MB uncompressed: under the 5 MB the mock keeps per partition; the benchmark checks that
// every partition's low watermark is still 0, i.e. nothing was dropped). Then, per codec and per
// client, a single group member subscribes with auto.offset.reset=earliest and
// enable.auto.commit=false (everything else at the library's defaults) and reads every record:
//   kgroup       kgroup::Consumer::poll(100 ms)
//   librdkafka   the high-level consumer, rd_kafka_consumer_poll(100 ms) (Debian's 2.0.2)
// Each record is looked at (value length and first byte are summed) and checked: the offsets of a
// partition must come 0, 1, 2, ... (so every record was read exactly once).
//
// Two placements per client:
//   run=child       the client runs in a child process (this binary spawned with --child) that
//                   connects to this process's mock cluster, so CPU and memory are the client's
//                   own. These are the figures to compare.
//   run=in-process  the client runs here, next to the mock cluster: its CPU includes the mock's
//                   work (the brokers answer in this process) and peak_rss_mb is the growth of
//                   this process's peak RSS over its RSS before the client started (the mock's
//                   stored data is not counted, its fetch-response buffers are).
// The child is spawned (fork+exec via posix_spawn) rather than forked without exec: the parent
// runs librdkafka's threads, so a fork-only child could inherit locks held by them, and it would
// also inherit the parent's memory (the mock's data) into its RSS. The child's peak RSS is its
// VmHWM from /proc/self/status (the peak of its own address space after exec; ru_maxrss would
// carry the spawning parent's peak over the exec).
//
// Per run:
//   records_per_s      (records - records of the first poll) / (time of the last record - time
//                      the first poll returned records). The mock broker bounds this (about
//                      200,000-300,000 records/s on the reference machine), so it mostly shows
//                      whether a client keeps up with it.
//   cpu_s_per_million  user + sys CPU time of the process (getrusage(RUSAGE_SELF), every thread)
//                      over the same interval, per million records. The figure that tells the
//                      clients apart.
//   peak_rss_mb        see above.
// Each line is the median (per figure) of --runs runs (default 3), each with a fresh group, the
// clients' runs interleaved; for the CPU figure also the smallest, the largest and the spread
// (largest minus smallest, in percent of the median).
// Output, one line per client, codec and placement:
//   client=kgroup|librdkafka codec=none|lz4 records=N records_per_s=R cpu_s_per_million=C
//     cpu_min=L cpu_max=H cpu_spread_pct=S peak_rss_mb=M run=child|in-process
// then '#' lines comparing kgroup with librdkafka (ratios of the child medians).
//
// --cli compares the consumer CLIs instead: examples/kgroup-consume printing one JSON line per
// record (`-b .. -g .. --commit none --max-messages N TOPIC`) against a small librdkafka program
// (this binary's `--child librdkafka-print` mode) that prints the same record lines with
// fprintf, both with stdout on /dev/null. Per codec and program, the median of --runs runs of:
//   cli=kgroup-consume|librdkafka-print codec=C records=N wall_s=W cpu_s_per_million=C peak_rss_mb=M
// wall_s is from spawn to exit and so includes the mock's 3 s first-join delay and the close;
// CPU is the whole process's (wait4's rusage), peak RSS its VmHWM polled every 20 ms. When kcat
// is found (--kcat PATH, or `kcat` on PATH; Debian's kcat 1.7.1 on librdkafka 2.0.2) it runs as a
// third program, a group member printing JSON records the same way (`kcat -b .. -G GROUP -J -c N
// -q -X auto.offset.reset=earliest -X enable.auto.commit=false TOPIC`: key, value, headers,
// timestamp), and the summary compares kgroup-consume with it (issue 37's goal: at most x0.5).
//
// --idle SECONDS compares idle members instead (issue 37): per client, a member with the
// library's defaults alone in a group on a topic of --partitions (12 unless given) empty
// partitions, spawned, polling every 100 ms for SECONDS, then closed; whole-process CPU (start,
// join, polls, close) and peak RSS, medians of --runs runs:
//   idle client=C partitions=P seconds=S cpu_s=X cpu_min=L cpu_max=H peak_rss_mb=M
// with client=none as the floor (unless --client is given): this binary started with no client,
// waiting 100 ms at a time on a condition variable for SECONDS, and '#' lines with each client's
// CPU and RSS above it.
//
// Usage: kgroup-bench-consume [--quick] [--cli] [--idle SECONDS] [--records N] [--partitions N] [--runs N]
//                             [--codec none|lz4] [--client kgroup|librdkafka]
//                             [--placement child|in-process] [--kgroup-consume PATH] [--kcat PATH]
//   --quick    one run of 60,000 records, kgroup only (the ctest smoke test).
// Exit status 1 if a run did not read every record exactly once within its time limit.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "find_program.hpp"
#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"

extern char** environ;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// ---- measurement ------------------------------------------------------------------------------

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// A "Vm...:" field of /proc/<pid>/status in KiB, or -1.
long status_kb(const std::string& status_path, std::string_view field) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) == 0) return std::strtol(line.c_str() + field.size(), nullptr, 10);
  }
  return -1;
}

// CPU time of each of this process's threads, in ns, by thread id (/proc/self/task/*/schedstat: the
// scheduler's run time, exact, where /proc's utime and stime are in 10 ms ticks).
std::map<long, std::int64_t> thread_cpu_ns() {
  std::map<long, std::int64_t> out;
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/self/task", ec)) {
    const long tid = std::strtol(entry.path().filename().c_str(), nullptr, 10);
    std::ifstream in(entry.path() / "schedstat");
    long long ns = 0;
    if (tid > 0 && (in >> ns)) out[tid] = ns;
  }
  return out;
}

// The mock cluster's threads (in-process runs): every thread but this one that runs before any
// client starts. A run's client CPU is the CPU of every other thread (the user thread, which is
// this one, and the threads the client starts), so the in-process figure leaves the mock's
// serving out (issue 37: "measured without the mock in the way").
std::set<long> g_mock_threads;

void note_mock_threads() {
  const long self = static_cast<long>(gettid());
  std::string names;
  for (const auto& [tid, ns] : thread_cpu_ns()) {
    if (tid == self) continue;
    g_mock_threads.insert(tid);
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(in, name);
    names += (names.empty() ? "" : ",") + name;
  }
  std::printf("# mock cluster threads (left out of client_cpu): %zu (%s)\n", g_mock_threads.size(),
              names.c_str());
}

// Restarts this process's peak RSS (VmHWM) at its current RSS (Linux >= 4.0).
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// What one client run measured.
struct run_result {
  std::int64_t records = 0;
  std::int64_t first_batch = 0;   // records the first poll returned (not part of the rate)
  double elapsed_s = 0;           // first poll with records -> last record
  double cpu_s = 0;               // user + sys over the same interval
  double client_cpu_s = 0;        // the same without the mock cluster's threads (= cpu_s in a child)
  double peak_rss_mb = -1;
  std::int64_t out_of_order = 0;  // records whose offset was not their partition's next one
  bool complete = false;          // every expected record arrived in time

  double rate() const {
    return elapsed_s > 0 ? static_cast<double>(records - first_batch) / elapsed_s : 0;
  }
  double cpu_per_million() const {
    const auto n = records - first_batch;
    return n > 0 ? cpu_s / static_cast<double>(n) * 1e6 : 0;
  }
  double client_cpu_per_million() const {
    const auto n = records - first_batch;
    return n > 0 ? client_cpu_s / static_cast<double>(n) * 1e6 : 0;
  }
  bool ok() const { return complete && out_of_order == 0; }

  std::string serialize() const {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "records=%" PRId64 " first_batch=%" PRId64 " elapsed_s=%.6f cpu_s=%.6f peak_rss_mb=%.3f "
                  "out_of_order=%" PRId64 " complete=%d",
                  records, first_batch, elapsed_s, cpu_s, peak_rss_mb, out_of_order, complete ? 1 : 0);
    return buf;
  }
  static std::optional<run_result> parse(const std::string& line) {
    run_result r;
    int complete = 0;
    if (std::sscanf(line.c_str(),
                    "records=%" SCNd64 " first_batch=%" SCNd64 " elapsed_s=%lf cpu_s=%lf peak_rss_mb=%lf "
                    "out_of_order=%" SCNd64 " complete=%d",
                    &r.records, &r.first_batch, &r.elapsed_s, &r.cpu_s, &r.peak_rss_mb, &r.out_of_order,
                    &complete) != 7) {
      return std::nullopt;
    }
    r.complete = complete != 0;
    r.client_cpu_s = r.cpu_s;  // a child runs no mock
    return r;
  }
};

// Per-record bookkeeping shared by both clients: the exactly-once check and a sink that makes the
// record's bytes count as used.
class record_check {
 public:
  explicit record_check(int partitions) : next_(static_cast<std::size_t>(partitions), 0) {}

  void see(std::int32_t partition, std::int64_t offset, const char* value, std::size_t size) {
    if (partition < 0 || static_cast<std::size_t>(partition) >= next_.size()) {
      ++bad_;
    } else {
      auto& next = next_[static_cast<std::size_t>(partition)];
      if (offset != next) ++bad_;
      next = offset + 1;
    }
    sink_ += size + (size > 0 ? static_cast<unsigned char>(value[0]) : 0u);
  }
  std::int64_t bad() const { return bad_; }
  std::uint64_t sink() const { return sink_; }

 private:
  std::vector<std::int64_t> next_;
  std::int64_t bad_ = 0;
  std::uint64_t sink_ = 0;
};

// A consumer's side of a run: where to connect and what to read.
struct run_spec {
  std::string bootstrap;
  std::string topic;
  std::string group;
  std::int64_t records = 0;
  int partitions = 0;
  std::chrono::seconds limit{180};
};

volatile std::uint64_t g_sink = 0;  // keeps the per-record work from being optimised away

// Times a run: start() when the first records arrive, stop() after the last.
class run_clock {
 public:
  void start(std::int64_t first_batch, run_result& r) {
    t0_ = steady::now();
    cpu0_ = cpu_seconds();
    threads0_ = thread_cpu_ns();
    r.first_batch = first_batch;
  }
  void stop(run_result& r) const {
    r.elapsed_s = std::chrono::duration<double>(steady::now() - t0_).count();
    r.cpu_s = cpu_seconds() - cpu0_;
    std::int64_t client_ns = 0;
    for (const auto& [tid, ns] : thread_cpu_ns()) {
      if (g_mock_threads.count(tid) != 0) continue;
      const auto before = threads0_.find(tid);
      client_ns += ns - (before == threads0_.end() ? 0 : before->second);
    }
    r.client_cpu_s = static_cast<double>(client_ns) / 1e9;
  }

 private:
  steady::time_point t0_{};
  double cpu0_ = 0;
  std::map<long, std::int64_t> threads0_;
};

// ---- the clients --------------------------------------------------------------------------------

run_result run_kgroup(const run_spec& spec) {
  run_result r;
  kgroup::Config config{{"bootstrap.servers", spec.bootstrap},
                        {"group.id", spec.group},
                        {"client.id", "bench-kgroup"},
                        {"auto.offset.reset", "earliest"},
                        {"enable.auto.commit", "false"}};
  kgroup::Consumer consumer(config);
  consumer.subscribe({spec.topic});
  record_check check(spec.partitions);
  run_clock clock;
  const auto deadline = steady::now() + spec.limit;
  while (r.records < spec.records && steady::now() < deadline) {
    const auto batch = consumer.poll(100ms);
    if (batch.empty()) continue;
    if (r.records == 0) clock.start(static_cast<std::int64_t>(batch.size()), r);
    for (const auto& rec : batch) {
      const std::string_view v = rec.value.value_or(std::string_view());
      check.see(rec.partition, rec.offset, v.data(), v.size());
    }
    r.records += static_cast<std::int64_t>(batch.size());
  }
  if (r.records > 0) clock.stop(r);
  r.complete = r.records == spec.records;
  r.out_of_order = check.bad();
  g_sink = g_sink + check.sink();
  r.peak_rss_mb = static_cast<double>(status_kb("/proc/self/status", "VmHWM:")) / 1024.0;
  consumer.close(10s);
  return r;
}

struct rd_consumer {
  rd_kafka_t* rk = nullptr;

  explicit rd_consumer(const run_spec& spec, const char* client_id) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      kgroup::test::apply_log_settings(conf);
      kgroup::test::set_config(conf, "bootstrap.servers", spec.bootstrap);
      kgroup::test::set_config(conf, "group.id", spec.group);
      kgroup::test::set_config(conf, "client.id", client_id);
      kgroup::test::set_config(conf, "auto.offset.reset", "earliest");
      kgroup::test::set_config(conf, "enable.auto.commit", "false");
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    char err[512];
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("rd_kafka_new: ") + err);
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, spec.topic.c_str(), RD_KAFKA_PARTITION_UA);
    const rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_destroy(rk);
      throw std::runtime_error(std::string("rd_kafka_subscribe: ") + rd_kafka_err2str(e));
    }
  }
  ~rd_consumer() {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
  rd_consumer(const rd_consumer&) = delete;
  rd_consumer& operator=(const rd_consumer&) = delete;
};

run_result run_librdkafka(const run_spec& spec) {
  run_result r;
  rd_consumer c(spec, "bench-librdkafka");
  record_check check(spec.partitions);
  run_clock clock;
  const auto deadline = steady::now() + spec.limit;
  while (r.records < spec.records && steady::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c.rk, 100);
    if (m == nullptr) continue;
    if (m->err) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        std::fprintf(stderr, "librdkafka consumer: %s\n", rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
      continue;
    }
    if (r.records == 0) clock.start(1, r);
    check.see(m->partition, m->offset, static_cast<const char*>(m->payload), m->len);
    ++r.records;
    rd_kafka_message_destroy(m);
  }
  if (r.records > 0) clock.stop(r);
  r.complete = r.records == spec.records;
  r.out_of_order = check.bad();
  g_sink = g_sink + check.sink();
  r.peak_rss_mb = static_cast<double>(status_kb("/proc/self/status", "VmHWM:")) / 1024.0;
  return r;
}

// The librdkafka side of --cli: the record lines kgroup-consume prints, written the way a small C
// program would write them (fprintf per record into stdio's buffer, flushed when idle and at the
// end). The benchmark's topic names, keys and values are ASCII letters, digits, '-' and ':', so
// they need no JSON escaping (kgroup-consume still checks them for UTF-8 and escapes), and its
// records have no headers.
int run_librdkafka_print(const run_spec& spec) {
  rd_consumer c(spec, "bench-librdkafka-print");
  std::int64_t records = 0;
  const auto deadline = steady::now() + spec.limit;
  while (records < spec.records && steady::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c.rk, 100);
    if (m == nullptr) {
      std::fflush(stdout);
      continue;
    }
    if (m->err) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        std::fprintf(stdout, "{\"ts_ms\":%lld,\"event\":\"error\",\"code\":\"%s\",\"message\":\"%s\"}\n",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()),
                     rd_kafka_err2name(m->err), rd_kafka_err2str(m->err));
      }
      rd_kafka_message_destroy(m);
      continue;
    }
    const long long ts = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    rd_kafka_timestamp_type_t ts_type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    const long long record_ts = rd_kafka_message_timestamp(m, &ts_type);
    const char* ts_type_name = ts_type == RD_KAFKA_TIMESTAMP_CREATE_TIME       ? "create_time"
                               : ts_type == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME ? "log_append_time"
                                                                               : "none";
    std::fprintf(stdout,
                 "{\"ts_ms\":%lld,\"event\":\"record\",\"topic\":\"%s\",\"partition\":%d,\"offset\":%lld,"
                 "\"timestamp\":%lld,\"timestamp_type\":\"%s\",\"key\":\"%.*s\",\"value\":\"%.*s\",\"headers\":[]}\n",
                 ts, rd_kafka_topic_name(m->rkt), static_cast<int>(m->partition), static_cast<long long>(m->offset),
                 record_ts, ts_type_name, static_cast<int>(m->key_len), static_cast<const char*>(m->key),
                 static_cast<int>(m->len), static_cast<const char*>(m->payload));
    ++records;
    rd_kafka_message_destroy(m);
  }
  std::fflush(stdout);
  return records == spec.records ? 0 : 1;
}

// ---- child processes ------------------------------------------------------------------------------

// --idle's children: a member with the library's defaults (group.id and client.id only) that
// subscribes to a topic of empty partitions and polls every 100 ms for spec.records seconds, then
// closes. Exit status 0 only if it was given every partition (it joined and stayed).
int run_kgroup_idle(const run_spec& spec) {
  kgroup::Consumer consumer(kgroup::Config{
      {"bootstrap.servers", spec.bootstrap}, {"group.id", spec.group}, {"client.id", "bench-kgroup-idle"}});
  consumer.subscribe({spec.topic});
  const auto end = steady::now() + std::chrono::seconds(spec.records);
  std::size_t records = 0;
  while (steady::now() < end) records += consumer.poll(100ms).size();
  const bool joined = consumer.assignment().size() == static_cast<std::size_t>(spec.partitions);
  consumer.close(10s);
  return joined && records == 0 ? 0 : 1;
}

// --idle's reference: the same process with no client, waiting the same 100 ms at a time on a
// condition variable (as both clients' poll() waits when nothing arrives) for spec.records seconds:
// what starting this binary and the application's own 600 timed waits a minute cost on this
// machine, which no client can go below.
int run_none_idle(const run_spec& spec) {
  std::mutex m;
  std::condition_variable cv;
  const auto end = steady::now() + std::chrono::seconds(spec.records);
  std::unique_lock lock(m);
  while (steady::now() < end) cv.wait_until(lock, std::min(end, steady::now() + 100ms));
  return 0;
}

int run_librdkafka_idle(const run_spec& spec) {
  std::size_t assigned = 0;
  {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    kgroup::test::apply_log_settings(conf);
    kgroup::test::set_config(conf, "bootstrap.servers", spec.bootstrap);
    kgroup::test::set_config(conf, "group.id", spec.group);
    kgroup::test::set_config(conf, "client.id", "bench-librdkafka-idle");
    char err[512];
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == nullptr) {
      std::fprintf(stderr, "rd_kafka_new: %s\n", err);
      return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, spec.topic.c_str(), RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    const auto end = steady::now() + std::chrono::seconds(spec.records);
    while (steady::now() < end) {
      if (rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100)) rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_t* a = nullptr;
    if (rd_kafka_assignment(rk, &a) == RD_KAFKA_RESP_ERR_NO_ERROR && a != nullptr) {
      assigned = static_cast<std::size_t>(a->cnt);
      rd_kafka_topic_partition_list_destroy(a);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
  return assigned == static_cast<std::size_t>(spec.partitions) ? 0 : 1;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(buf, static_cast<std::size_t>(n));
}

// A spawned process: stdout to a pipe (read by wait()) or to /dev/null; stderr inherited.
class child {
 public:
  child(const std::vector<std::string>& args, bool stdout_to_null) {
    int fds[2] = {-1, -1};
    if (!stdout_to_null && pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (stdout_to_null) {
      posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    } else {
      posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    }
    std::vector<std::string> storage = args;
    std::vector<char*> argv;
    for (auto& a : storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    started_ = steady::now();
    const int rc = posix_spawn(&pid_, storage[0].c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (!stdout_to_null) ::close(fds[1]);
    if (rc != 0) {
      if (!stdout_to_null) ::close(fds[0]);
      throw std::runtime_error("posix_spawn " + storage[0] + ": " + std::strerror(rc));
    }
    out_fd_ = stdout_to_null ? -1 : fds[0];
    status_path_ = "/proc/" + std::to_string(pid_) + "/status";
  }
  ~child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  struct outcome {
    int exit_code = -1;
    std::string out;
    double wall_s = 0;
    double cpu_s = 0;
    double peak_rss_mb = -1;  // VmHWM polled while it ran
  };

  // Reads stdout (if piped) and waits for the exit, polling VmHWM meanwhile.
  outcome wait() {
    outcome o;
    std::thread reader;
    if (out_fd_ >= 0) {
      reader = std::thread([this, &o] {
        char buf[4096];
        for (;;) {
          const ssize_t n = ::read(out_fd_, buf, sizeof buf);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          o.out.append(buf, static_cast<std::size_t>(n));
        }
      });
    }
    long hwm = -1;
    for (;;) {
      int st = 0;
      rusage ru{};
      const pid_t r = ::wait4(pid_, &st, WNOHANG, &ru);
      if (r == pid_) {
        reaped_ = true;
        o.wall_s = std::chrono::duration<double>(steady::now() - started_).count();
        o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
        o.cpu_s = s(ru.ru_utime) + s(ru.ru_stime);
        break;
      }
      if (r < 0 && errno != EINTR) break;
      hwm = std::max(hwm, status_kb(status_path_, "VmHWM:"));
      std::this_thread::sleep_for(20ms);
    }
    if (reader.joinable()) reader.join();
    o.peak_rss_mb = hwm >= 0 ? static_cast<double>(hwm) / 1024.0 : -1;
    return o;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  steady::time_point started_{};
  std::string status_path_;
};

std::vector<std::string> child_args(const std::string& exe, const std::string& mode, const run_spec& spec) {
  return {exe,          "--child",     mode,          "--bootstrap",
          spec.bootstrap, "--topic",   spec.topic,    "--group",
          spec.group,   "--records",   std::to_string(spec.records), "--partitions",
          std::to_string(spec.partitions)};
}

run_result run_in_child(const std::string& exe, const std::string& client, const run_spec& spec) {
  child c(child_args(exe, client, spec), /*stdout_to_null=*/false);
  const auto o = c.wait();
  for (std::size_t pos = 0; pos < o.out.size();) {
    auto nl = o.out.find('\n', pos);
    if (nl == std::string::npos) nl = o.out.size();
    if (auto r = run_result::parse(o.out.substr(pos, nl - pos))) return *r;
    pos = nl + 1;
  }
  std::fprintf(stderr, "child %s exited %d without a result line\n", client.c_str(), o.exit_code);
  return {};
}

run_result run_here(const std::string& client, const run_spec& spec) {
  const bool reset = reset_peak_rss();
  const long before_kb = status_kb("/proc/self/status", "VmRSS:");
  run_result r = client == "kgroup" ? run_kgroup(spec) : run_librdkafka(spec);
  r.peak_rss_mb = reset && before_kb >= 0 && r.peak_rss_mb >= 0 ? r.peak_rss_mb - static_cast<double>(before_kb) / 1024.0 : -1;
  return r;
}

// ---- the parent ---------------------------------------------------------------------------------

struct options {
  bool quick = false;
  bool cli = false;
  int idle_seconds = 0;  // --idle: the idle-member comparison instead of throughput
  std::int64_t records = 600000;
  int partitions = 36;
  int runs = 3;
  std::vector<std::string> codecs = {"none", "lz4"};
  std::vector<std::string> clients = {"kgroup", "librdkafka"};
  std::vector<std::string> placements = {"child", "in-process"};
  std::string kgroup_consume;
  std::string kcat;  // --cli: kcat's path; empty: looked for on PATH
  // --child
  std::string child_mode;
  run_spec spec;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kgroup-bench-consume: %s\nusage: kgroup-bench-consume [--quick] [--cli] [--records N] "
               "[--partitions N] [--runs N] [--codec none|lz4] [--client kgroup|librdkafka] "
               "[--placement child|in-process] [--kgroup-consume PATH] [--kcat PATH] [--idle SECONDS]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
#ifdef KGROUP_CONSUME_PATH
  o.kgroup_consume = KGROUP_CONSUME_PATH;
#endif
  bool records_set = false;
  bool runs_set = false;
  bool clients_set = false;
  bool partitions_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> std::int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) usage(a + ": '" + v + "' is not a positive integer");
      return n;
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--cli") {
      o.cli = true;
    } else if (a == "--records") {
      o.records = number();
      records_set = true;
    } else if (a == "--partitions") {
      o.partitions = static_cast<int>(number());
      partitions_set = true;
    } else if (a == "--runs") {
      o.runs = static_cast<int>(number());
      runs_set = true;
    } else if (a == "--codec") {
      o.codecs = {value()};
      if (o.codecs[0] != "none" && o.codecs[0] != "lz4") usage("--codec: none or lz4");
    } else if (a == "--client") {
      o.clients = {value()};
      clients_set = true;
      if (o.clients[0] != "kgroup" && o.clients[0] != "librdkafka") usage("--client: kgroup or librdkafka");
    } else if (a == "--placement") {
      o.placements = {value()};
      if (o.placements[0] != "child" && o.placements[0] != "in-process") usage("--placement: child or in-process");
    } else if (a == "--kgroup-consume") {
      o.kgroup_consume = value();
    } else if (a == "--kcat") {
      o.kcat = value();
    } else if (a == "--idle") {
      o.idle_seconds = static_cast<int>(number());
    } else if (a == "--child") {
      o.child_mode = value();
    } else if (a == "--bootstrap") {
      o.spec.bootstrap = value();
    } else if (a == "--topic") {
      o.spec.topic = value();
    } else if (a == "--group") {
      o.spec.group = value();
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (o.quick) {
    if (!records_set) o.records = 60000;
    if (!runs_set) o.runs = 1;
    if (!clients_set) o.clients = {"kgroup"};
  }
  if (o.idle_seconds > 0) {
    o.records = o.idle_seconds;  // the children read it as their seconds
    if (!partitions_set) o.partitions = 12;
    if (!clients_set) o.clients.push_back("none");  // the floor: no client, the same waits
  }
  o.spec.records = o.records;
  o.spec.partitions = o.partitions;
  return o;
}

int child_main(const options& o) {
  if (o.spec.bootstrap.empty() || o.spec.topic.empty() || o.spec.group.empty()) usage("--child needs --bootstrap, --topic, --group");
  if (o.child_mode == "librdkafka-print") return run_librdkafka_print(o.spec);
  if (o.child_mode == "kgroup-idle") return run_kgroup_idle(o.spec);
  if (o.child_mode == "librdkafka-idle") return run_librdkafka_idle(o.spec);
  if (o.child_mode == "none-idle") return run_none_idle(o.spec);
  run_result r;
  if (o.child_mode == "kgroup") {
    r = run_kgroup(o.spec);
  } else if (o.child_mode == "librdkafka") {
    r = run_librdkafka(o.spec);
  } else {
    usage("unknown --child mode '" + o.child_mode + "'");
  }
  std::printf("%s\n", r.serialize().c_str());
  std::fflush(stdout);
  return r.ok() ? 0 : 1;
}

// Seeds one topic per codec; false if the mock dropped data (a partition's low watermark moved).
bool seed(kgroup::test::mock_cluster& mc, const options& o) {
  for (const auto& codec : o.codecs) {
    const std::string topic = "bench-" + codec;
    mc.create_topic(topic, o.partitions);
    const auto t0 = steady::now();
    mc.produce(topic, o.records, codec);
    const double s = std::chrono::duration<double>(steady::now() - t0).count();
    const auto wm = mc.watermarks(topic);
    std::int64_t total = 0;
    bool dropped = false;
    for (std::size_t p = 0; p < wm.size(); ++p) {
      total += wm[p].high - wm[p].low;
      if (wm[p].low != 0) {
        std::fprintf(stderr, "%s-%zu: low watermark %" PRId64 ": the mock dropped old data\n", topic.c_str(), p, wm[p].low);
        dropped = true;
      }
    }
    std::printf("# seeded %s: %" PRId64 " records of 100 bytes over %d partitions in %.1f s; all kept: %s\n",
                topic.c_str(), total, o.partitions, s, dropped ? "NO" : "yes");
    std::fflush(stdout);
    if (dropped || total != o.records) {
      std::fprintf(stderr, "the mock cluster does not hold all %" PRId64 " records of %s; use fewer records or more "
                   "partitions\n", o.records, topic.c_str());
      return false;
    }
  }
  return true;
}

int next_group = 0;
std::string group_name(const std::string& what) {
  return "bench-" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(next_group++);
}

int throughput_main(const options& o, kgroup::test::mock_cluster& mc) {
  const std::string exe = self_exe();
  bool all_ok = true;
  // Child medians for the comparison: [codec][client] -> (rate, cpu, rss).
  std::map<std::string, std::map<std::string, std::array<double, 3>>> child_medians;
  // In-process medians of the client threads' CPU per million and their spread: [codec][client].
  std::map<std::string, std::map<std::string, std::pair<double, double>>> in_process_cpu;
  if (std::find(o.placements.begin(), o.placements.end(), "in-process") != o.placements.end())
    note_mock_threads();
  for (const auto& codec : o.codecs) {
    for (const auto& placement : o.placements) {
      // Runs interleaved across the clients (run 1 of each, then run 2 of each, ...), so a change
      // in the machine's load meets every client alike.
      std::map<std::string, std::vector<double>> rates, cpus, client_cpus, rss;
      std::map<std::string, std::int64_t> records;
      for (int i = 0; i < o.runs; ++i) {
        for (const auto& client : o.clients) {
          run_spec spec = o.spec;
          spec.bootstrap = mc.bootstrap_servers();
          spec.topic = "bench-" + codec;
          spec.group = group_name(client + "-" + codec);
          const run_result r = placement == "child" ? run_in_child(exe, client, spec) : run_here(client, spec);
          if (!r.ok()) {
            std::fprintf(stderr, "client=%s codec=%s run=%s: read %" PRId64 " of %" PRId64
                         " records, %" PRId64 " out of order\n", client.c_str(), codec.c_str(), placement.c_str(),
                         r.records, spec.records, r.out_of_order);
            all_ok = false;
          }
          records[client] = r.records;
          rates[client].push_back(r.rate());
          cpus[client].push_back(r.cpu_per_million());
          client_cpus[client].push_back(r.client_cpu_per_million());
          rss[client].push_back(r.peak_rss_mb);
          std::fprintf(stderr,
                       "# %s %s %s run %d: %.0f records/s, %.3f cpu s/M (client threads %.3f), %.1f MB\n",
                       client.c_str(), codec.c_str(), placement.c_str(), i + 1, r.rate(), r.cpu_per_million(),
                       r.client_cpu_per_million(), r.peak_rss_mb);
        }
      }
      for (const auto& client : o.clients) {
        const auto& c = cpus[client];
        const double mr = median(rates[client]), mc_ = median(c), mm = median(rss[client]);
        const auto [lo, hi] = std::minmax_element(c.begin(), c.end());
        const auto& cc = client_cpus[client];
        const double mcc = median(cc);
        const auto [clo, chi] = std::minmax_element(cc.begin(), cc.end());
        const double cspread = mcc > 0 ? 100 * (*chi - *clo) / mcc : 0;
        std::printf(
            "client=%s codec=%s records=%" PRId64
            " records_per_s=%.0f cpu_s_per_million=%.3f "
            "cpu_min=%.3f cpu_max=%.3f cpu_spread_pct=%.0f client_cpu_s_per_million=%.3f client_cpu_min=%.3f "
            "client_cpu_max=%.3f client_cpu_spread_pct=%.0f peak_rss_mb=%.1f run=%s\n",
            client.c_str(), codec.c_str(), records[client], mr, mc_, *lo, *hi,
            mc_ > 0 ? 100 * (*hi - *lo) / mc_ : 0, mcc, *clo, *chi, cspread, mm, placement.c_str());
        std::fflush(stdout);
        if (placement == "child") child_medians[codec][client] = {mr, mc_, mm};
        if (placement == "in-process") in_process_cpu[codec][client] = {mcc, cspread};
      }
    }
  }
  for (const auto& [codec, by_client] : child_medians) {
    auto k = by_client.find("kgroup");
    auto l = by_client.find("librdkafka");
    if (k == by_client.end() || l == by_client.end()) continue;
    const auto& kv = k->second;
    const auto& lv = l->second;
    std::printf("# codec=%s kgroup/librdkafka (child medians): records_per_s x%.2f (goal >= 1.5), cpu per record x%.2f "
                "(goal <= 0.5), peak rss x%.2f (goal <= 1)\n",
                codec.c_str(), lv[0] > 0 ? kv[0] / lv[0] : 0, lv[1] > 0 ? kv[1] / lv[1] : 0,
                lv[2] > 0 ? kv[2] / lv[2] : 0);
  }
  for (const auto& [codec, by_client] : in_process_cpu) {
    auto k = by_client.find("kgroup");
    auto l = by_client.find("librdkafka");
    if (k == by_client.end() || l == by_client.end()) continue;
    std::printf(
        "# codec=%s kgroup/librdkafka (in-process, client threads' CPU, mock left out): cpu per record x%.2f "
        "(goal <= %s), spread %.0f %% and %.0f %% (goal < 20)\n",
        codec.c_str(), l->second.first > 0 ? k->second.first / l->second.first : 0,
        codec == "none" ? "0.35" : "0.25", k->second.second, l->second.second);
  }
  return all_ok ? 0 : 1;
}

int cli_main(const options& o, kgroup::test::mock_cluster& mc) {
  if (o.kgroup_consume.empty() || access(o.kgroup_consume.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "kgroup-consume not found ('%s'); pass --kgroup-consume PATH\n", o.kgroup_consume.c_str());
    return 1;
  }
  const std::string exe = self_exe();
  bool all_ok = true;
  std::map<std::string, std::map<std::string, std::array<double, 3>>> medians;
  std::vector<std::string> programs = {"kgroup-consume", "librdkafka-print"};
  const std::string kcat = o.kcat.empty() ? kgroup::test::find_on_path("kcat") : o.kcat;
  if (!kcat.empty() && access(kcat.c_str(), X_OK) == 0) {
    programs.push_back("kcat");
  } else {
    std::fprintf(
        stderr,
        "# kcat not found (apt-get install kcat, or --kcat PATH): compared with librdkafka-print only\n");
  }
  for (const auto& codec : o.codecs) {
    for (const auto& program : programs) {
      std::vector<double> walls, cpus, rss;
      for (int i = 0; i < o.runs; ++i) {
        run_spec spec = o.spec;
        spec.bootstrap = mc.bootstrap_servers();
        spec.topic = "bench-" + codec;
        spec.group = group_name(program + "-" + codec);
        std::vector<std::string> args;
        if (program == "kgroup-consume") {
          args = {o.kgroup_consume, "-b", spec.bootstrap, "-g", spec.group, "--commit", "none",
                  "--max-messages", std::to_string(spec.records), spec.topic};
        } else if (program == "kcat") {
          args = {kcat,
                  "-b",
                  spec.bootstrap,
                  "-G",
                  spec.group,
                  "-J",
                  "-q",
                  "-c",
                  std::to_string(spec.records),
                  "-X",
                  "auto.offset.reset=earliest",
                  "-X",
                  "enable.auto.commit=false",
                  spec.topic};
        } else {
          args = child_args(exe, "librdkafka-print", spec);
        }
        child c(args, /*stdout_to_null=*/true);
        const auto out = c.wait();
        if (out.exit_code != 0) {
          std::fprintf(stderr, "%s codec=%s exited %d\n", program.c_str(), codec.c_str(), out.exit_code);
          all_ok = false;
        }
        walls.push_back(out.wall_s);
        cpus.push_back(out.cpu_s / static_cast<double>(spec.records) * 1e6);
        rss.push_back(out.peak_rss_mb);
        std::fprintf(stderr, "# %s %s run %d: wall %.2f s, cpu %.3f s, %.1f MB\n", program.c_str(), codec.c_str(), i + 1,
                     out.wall_s, out.cpu_s, out.peak_rss_mb);
      }
      const double w = median(walls), cp = median(cpus), m = median(rss);
      std::printf("cli=%s codec=%s records=%" PRId64 " wall_s=%.2f cpu_s_per_million=%.3f peak_rss_mb=%.1f\n",
                  program.c_str(), codec.c_str(), o.spec.records, w, cp, m);
      std::fflush(stdout);
      medians[codec][program] = {w, cp, m};
    }
  }
  for (const auto& [codec, by] : medians) {
    const auto& k = by.at("kgroup-consume");
    for (const auto& [other, l] : by) {
      if (other == "kgroup-consume") continue;
      std::printf(
          "# codec=%s kgroup-consume/%s: wall x%.2f, cpu per record x%.2f (goal <= 0.5), "
          "peak rss x%.2f (goal <= 1)\n",
          codec.c_str(), other.c_str(), l[0] > 0 ? k[0] / l[0] : 0, l[1] > 0 ? k[1] / l[1] : 0,
          l[2] > 0 ? k[2] / l[2] : 0);
    }
  }
  return all_ok ? 0 : 1;
}

// --idle: one member of each client alone in a group on a topic of empty partitions (default 12),
// from its start to its close, in a spawned process: whole-process CPU (wait4's rusage: start,
// join, spec.records seconds of 100 ms polls, close) and peak RSS (VmHWM polled). Runs
// interleaved; medians, with the CPU's smallest and largest.
int idle_main(const options& o, kgroup::test::mock_cluster& mc) {
  const std::string exe = self_exe();
  const std::string topic = "bench-idle";
  mc.create_topic(topic, o.partitions);
  bool all_ok = true;
  std::map<std::string, std::vector<double>> cpus, rss;
  for (int i = 0; i < o.runs; ++i) {
    for (const auto& client : o.clients) {
      run_spec spec = o.spec;
      spec.bootstrap = mc.bootstrap_servers();
      spec.topic = topic;
      spec.group = group_name(client + "-idle");
      child c(child_args(exe, client + "-idle", spec), /*stdout_to_null=*/true);
      const auto out = c.wait();
      if (out.exit_code != 0) {
        std::fprintf(stderr, "%s idle run %d: exited %d (not given every partition, or records seen)\n",
                     client.c_str(), i + 1, out.exit_code);
        all_ok = false;
      }
      cpus[client].push_back(out.cpu_s);
      rss[client].push_back(out.peak_rss_mb);
      std::fprintf(stderr, "# %s idle run %d: wall %.1f s, cpu %.3f s, %.1f MB\n", client.c_str(), i + 1,
                   out.wall_s, out.cpu_s, out.peak_rss_mb);
    }
  }
  for (const auto& client : o.clients) {
    const auto& c = cpus[client];
    const auto [lo, hi] = std::minmax_element(c.begin(), c.end());
    std::printf("idle client=%s partitions=%d seconds=%" PRId64
                " cpu_s=%.3f cpu_min=%.3f cpu_max=%.3f peak_rss_mb=%.1f\n",
                client.c_str(), o.partitions, o.spec.records, median(c), *lo, *hi, median(rss[client]));
  }
  if (cpus.count("kgroup") && cpus.count("librdkafka")) {
    std::printf(
        "# idle kgroup/librdkafka: cpu x%.2f, peak rss x%.2f (goals: kgroup at most 0.05 s of CPU in 60 s, "
        "rss at most librdkafka's)\n",
        median(cpus["kgroup"]) / std::max(1e-9, median(cpus["librdkafka"])),
        median(rss["kgroup"]) / std::max(1e-9, median(rss["librdkafka"])));
  }
  if (cpus.count("none")) {
    for (const char* client : {"kgroup", "librdkafka"}) {
      if (!cpus.count(client)) continue;
      std::printf(
          "# idle %s above the floor (client=none: this binary started, the same 100 ms waits): "
          "cpu %+.3f s, peak rss %+.1f MB\n",
          client, median(cpus[client]) - median(cpus["none"]), median(rss[client]) - median(rss["none"]));
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  try {
    if (!o.child_mode.empty()) return child_main(o);
    kgroup::test::mock_cluster mc(3);
    std::printf("# mock cluster: 3 brokers of librdkafka %s\n",
                kgroup::test::mock_cluster::librdkafka_version_string().c_str());
    if (o.idle_seconds > 0) return idle_main(o, mc);
    if (!seed(mc, o)) return 1;
    return o.cli ? cli_main(o, mc) : throughput_main(o, mc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgroup-bench-consume: %s\n", e.what());
    return 1;
  }
}
