// kgroup-demo, member side: one kgroup Consumer (or, with --share, one kgroup::ShareConsumer) in
// its own process, reporting to the parent (line protocol in demo.hpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "demo.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "kgroup/log.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/share_consumer.hpp"
#include "mock_cluster.hpp"

namespace demo {
namespace {

using namespace std::chrono_literals;

volatile std::sig_atomic_t g_leave = 0;
void on_sigterm(int) { g_leave = 1; }

// Lines go to stdout (the pipe), one write each, flushed at once. Listener callbacks run on the
// polling thread, so one thread writes; the lock keeps that true if that ever changes.
std::mutex g_out_mutex;
void emit(const std::string& line) {
  std::lock_guard lock(g_out_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}
std::int64_t now_ns() { return to_ns(steady::now()); }

std::vector<std::int32_t> numbers(const std::vector<kgroup::TopicPartition>& parts) {
  std::vector<std::int32_t> out;
  for (const auto& tp : parts) out.push_back(tp.partition);
  return out;
}

// One word, no spaces (the line protocol splits on spaces).
std::string word(const std::string& s) { return s.empty() ? "-" : s; }

class reporting_listener : public kgroup::ConsumerRebalanceListener {
 public:
  explicit reporting_listener(const kgroup::Consumer* consumer) : consumer_(consumer) {}
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& p) override {
    emit(fmt::format("A {} {} {}", now_ns(), consumer_->group_metadata().generation_id, encode_partitions(numbers(p))));
  }
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& p) override {
    emit(fmt::format("V {} {}", now_ns(), encode_partitions(numbers(p))));
  }
  void on_partitions_lost(const std::vector<kgroup::TopicPartition>& p) override {
    emit(fmt::format("L {} {}", now_ns(), encode_partitions(numbers(p))));
  }

 private:
  const kgroup::Consumer* consumer_;
};

// Closes `consumer` (a Consumer or a ShareConsumer), reports an error (E) or the clean close (X).
template <class AnyConsumer>
int close_and_report(AnyConsumer& consumer) {
  try {
    consumer.close(std::chrono::seconds(10));
  } catch (const std::exception& e) {
    emit(fmt::format("E {} close: {}", now_ns(), e.what()));
  }
  emit(fmt::format("X {}", now_ns()));
  return 0;
}

// Reads the parent's commands from stdin without blocking the poll loop.
class command_reader {
 public:
  command_reader() { ::fcntl(0, F_SETFL, ::fcntl(0, F_GETFL) | O_NONBLOCK); }
  /// The next complete command line, "" if none; "leave" once stdin is closed.
  std::string next() {
    char buf[256];
    for (;;) {
      const ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) {
        pending_.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) eof_ = true;
      break;
    }
    const auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    return eof_ ? "leave" : "";
  }

 private:
  std::string pending_;
  bool eof_ = false;
};

// Sends the rebalances of the metrics history that finished since the last call.
class history_reporter {
 public:
  void report(const kgroup::ConsumerMetrics& m) {
    const auto steady_now = now_ns();
    for (const auto& r : m.rebalances) {
      if (r.duration_ms < 0) continue;  // still in progress
      // start_ms is recomputed from a steady clock in every snapshot and may move by a
      // millisecond; a finished record's generation, duration and cause do not.
      const auto key = std::make_tuple(r.generation, r.duration_ms, static_cast<int>(r.cause), r.completed);
      if (!sent_.insert(key).second) continue;
      // start_ms is wall-clock time; move it onto the steady clock the parent uses.
      const std::int64_t start_ns = steady_now - (m.timestamp_ms - r.start_ms) * 1'000'000;
      std::string detail = r.detail;
      for (auto& c : detail) {
        if (c == '\n' || c == '\t') c = ' ';
      }
      emit(fmt::format("H {} {} {} {} {} {}\t{}", steady_now, start_ns, r.duration_ms, r.generation,
                       r.completed ? 1 : 0, kgroup::to_string(r.cause), detail));
    }
  }

 private:
  std::set<std::tuple<std::int32_t, std::int64_t, int, bool>> sent_;
};

int run(const member_options& o) {
  kgroup::Config config{
      {"bootstrap.servers", o.bootstrap},
      {"group.id", o.group},
      {"client.id", o.name},
      {"max.poll.interval.ms", std::to_string(o.max_poll_interval_ms)},
      {"auto.offset.reset", "earliest"},
      {"enable.auto.commit", "true"},
      {"auto.commit.interval.ms", "1000"},
      {"observability.http.listen", "127.0.0.1:0"},
  };
  for (const auto& [key, value] : o.settings) config.set(key, value);
  // The classic protocol's timers and assignor; with group.protocol=consumer the coordinator owns
  // them (and Config::validate() refuses them).
  if (config.get("group.protocol") != "consumer") {
    config.set("partition.assignment.strategy", o.strategy);
    config.set("session.timeout.ms", std::to_string(o.session_timeout_ms));
    config.set("heartbeat.interval.ms", std::to_string(o.heartbeat_interval_ms));
  }
  // This consumer's log to stderr (which the parent points at this member's log file), at info
  // whatever KGROUP_LOG_LEVEL says, each line naming the member.
  config.set_log_sink(kgroup::make_stderr_log_sink(kgroup::LogLevel::info, o.name));
  kgroup::Consumer consumer(config);
  auto listener = std::make_shared<reporting_listener>(&consumer);
  consumer.subscribe({topic_name}, listener);

  std::string member_id = "?";  // forces the first identity line
  auto report_identity = [&] {
    const std::string id = word(consumer.group_metadata().member_id);
    if (id == member_id) return;
    member_id = id;
    emit(fmt::format("I {} {} {}", now_ns(), member_id, word(consumer.http_endpoint())));
  };
  report_identity();

  command_reader commands;
  history_reporter history;
  auto last_status = steady::time_point{};
  std::string key;
  while (!g_leave) {
    const std::string cmd = commands.next();
    if (cmd == "leave") break;
    if (cmd.rfind("stall ", 0) == 0) {
      // The scripted stall: this thread does not call poll() for longer than max.poll.interval.ms.
      // The background thread notices, leaves the group, and the next poll() reports the
      // partitions lost and rejoins.
      const int ms = std::atoi(cmd.c_str() + 6);
      emit(fmt::format("P {} begin {}", now_ns(), ms));
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      emit(fmt::format("P {} end {}", now_ns(), ms));
    }

    try {
      const kgroup::ConsumerRecords records = consumer.poll(100ms);
      // Contiguous runs per partition; each record's key must be the one the producer wrote at
      // that offset ("orders-<partition>-<offset>").
      std::int32_t part = -1;
      std::int64_t first = -1, last = -1, bad = 0;
      auto flush = [&] {
        if (part >= 0) emit(fmt::format("C {} {} {} {} {}", now_ns(), part, first, last, bad));
        part = -1;
        bad = 0;
      };
      for (const auto& r : records) {
        if (r.partition != part || r.offset != last + 1) {
          flush();
          part = r.partition;
          first = r.offset;
        }
        last = r.offset;
        key = kgroup::test::record_key(topic_name, r.partition, r.offset);
        if (!r.key || *r.key != key) ++bad;
      }
      flush();
    } catch (const std::exception& e) {
      emit(fmt::format("E {} poll: {}", now_ns(), e.what()));
    }

    if (steady::now() - last_status >= 250ms) {
      last_status = steady::now();
      report_identity();
      const kgroup::ConsumerMetrics m = consumer.metrics();
      history.report(m);
      emit(fmt::format("S {} {} {} {} {} {}", now_ns(), word(m.state), m.generation, m.rebalance_total,
                       m.records_consumed_total, m.leader ? 1 : 0));
    }
  }

  return close_and_report(consumer);
}

// "3-7,9": ascending offsets as runs.
std::string offset_runs(const std::set<std::int64_t>& offsets) {
  std::string out;
  for (auto it = offsets.begin(); it != offsets.end();) {
    const std::int64_t first = *it;
    std::int64_t last = first;
    for (++it; it != offsets.end() && *it == last + 1; ++it) last = *it;
    if (!out.empty()) out += ',';
    out += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
  }
  return out.empty() ? "-" : out;
}

// The share story's member: a ShareConsumer in implicit mode (each poll() accepts what the last
// one returned), working share_work_per_record on each record it gets.
int run_share(const member_options& o) {
  kgroup::Config config{
      {"bootstrap.servers", o.bootstrap},
      {"group.id", o.group},
      {"client.id", o.name},
      {"observability.http.listen", "127.0.0.1:0"},
  };
  for (const auto& [key, value] : o.settings) config.set(key, value);
  config.set_log_sink(kgroup::make_stderr_log_sink(kgroup::LogLevel::info, o.name));
  kgroup::ShareConsumer consumer(config);
  // Every acknowledgement outcome, applied or not, to the parent: it checks that each record
  // was accepted once and that every other delivery of it is explained.
  consumer.set_acknowledgement_commit_callback([](const kgroup::AcknowledgementResults& results) {
    for (const auto& [tp, r] : results) {
      emit(fmt::format("K {} {} {} {}", now_ns(), tp.partition, offset_runs(r.offsets),
                       kgroup::error_name(r.error)));
    }
  });
  consumer.subscribe({share_topic_name});

  std::string member_id = "?";
  command_reader commands;
  auto last_status = steady::time_point{};
  int stall_ms = 0;  // asked for: starts after the next poll() that returns records
  std::string list;
  while (!g_leave) {
    const std::string cmd = commands.next();
    if (cmd == "leave") break;
    if (cmd.rfind("stall ", 0) == 0) stall_ms = std::atoi(cmd.c_str() + 6);

    try {
      const kgroup::ConsumerRecords records = consumer.poll(100ms);
      const auto polled = steady::now();
      if (!records.empty()) {
        std::int64_t bad = 0;
        list.clear();
        for (const auto& r : records) {
          if (!r.key || *r.key != kgroup::test::record_key(share_topic_name, r.partition, r.offset)) ++bad;
          if (!list.empty()) list += ',';
          list += fmt::format("{}:{}:{}", r.partition, r.offset, r.delivery_count.value_or(-1));
        }
        emit(fmt::format("R {} {} {}", to_ns(polled), bad, list));
        if (stall_ms > 0) {
          // The scripted stall, holding these records: no poll(), so they are neither processed
          // nor accepted; the process, its background thread (heartbeats) and its connection stay.
          emit(fmt::format("P {} begin {} {}", now_ns(), stall_ms, to_ns(polled)));
          std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
          emit(fmt::format("P {} end {}", now_ns(), stall_ms));
          stall_ms = 0;
        } else {
          std::this_thread::sleep_for(share_work_per_record * static_cast<int>(records.size()));
        }
      }
    } catch (const std::exception& e) {
      emit(fmt::format("E {} poll: {}", now_ns(), e.what()));
    }

    if (steady::now() - last_status >= 250ms) {
      last_status = steady::now();
      const kgroup::ShareConsumerMetrics m = consumer.metrics();
      if (word(m.member_id) != member_id) {
        member_id = word(m.member_id);
        emit(fmt::format("I {} {} {}", now_ns(), member_id, word(m.http_endpoint)));
      }
      emit(fmt::format("M {} {} {} {} {} {} {} {} {}", now_ns(), m.member_epoch, m.records_delivered,
                       m.records_redelivered, m.acknowledged_accept, m.acknowledged_release,
                       m.acknowledgements_failed, m.acknowledgements_lock_expired, word(m.state)));
    }
  }

  return close_and_report(consumer);
}

}  // namespace

int run_member(const member_options& options) {
  // Die with the parent (it may be killed without a chance to stop us); leave cleanly on SIGTERM.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the whole process group; the parent decides
  try {
    return options.share ? run_share(options) : run(options);
  } catch (const std::exception& e) {
    emit(fmt::format("E {} {}", now_ns(), e.what()));
    std::fprintf(stderr, "%s: %s\n", options.name.c_str(), e.what());
    return 2;
  }
}

}  // namespace demo
