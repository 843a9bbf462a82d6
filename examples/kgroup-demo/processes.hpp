// kgroup-demo: the processes the story drives: each group member as a child process
// (member_process: this binary re-executed with --member, its lines fed to the timeline) and the
// producer writing to the topic throughout.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mock_cluster.hpp"
#include "parent.hpp"
#include "timeline.hpp"

extern char** environ;

namespace demo {

inline std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this program's path: " + ec.message());
  return p.string();
}

class member_process {
 public:
  member_process(const member_options& o, const std::string& log_path, member_reports& state)
      : name_(o.name), state_(state) {
    int out[2], in[2];
    // Close-on-exec, so no other member inherits these ends (EOF must mean this member is gone).
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (::pipe2(in, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const std::string exe = self_exe();
    std::vector<std::string> args{exe,
                                  "--member",
                                  o.name,
                                  "--bootstrap",
                                  o.bootstrap,
                                  "--group",
                                  o.group,
                                  "--strategy",
                                  o.strategy,
                                  "--timeouts",
                                  fmt::format("{},{},{}", o.session_timeout_ms, o.heartbeat_interval_ms,
                                              o.max_poll_interval_ms)};
    if (o.share) args.emplace_back("--share");
    for (const auto& [key, value] : o.settings) {
      args.push_back("--set");
      args.push_back(key + "=" + value);
    }
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      throw std::runtime_error(std::string("cannot start a member process: ") + std::strerror(rc));
    }
    to_child_ = in[1];
    reader_ = std::thread([this, fd = out[0]] { read_loop(fd); });
  }
  ~member_process() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      wait_exit(5s);
    }
    if (reader_.joinable()) reader_.join();
    if (to_child_ >= 0) ::close(to_child_);
  }
  member_process(const member_process&) = delete;
  member_process& operator=(const member_process&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !reaped_; }

  /// Writes one command line to the member ("stall <ms>", "leave").
  void command(const std::string& line) {
    const std::string s = line + "\n";
    if (to_child_ >= 0) (void)!::write(to_child_, s.data(), s.size());
  }
  void kill() {
    killed_by_story_ = true;
    ::kill(pid_, SIGKILL);
  }

  /// Waits for the process to exit (SIGKILL after `limit`); returns its exit status, or -signal.
  int wait_exit(std::chrono::milliseconds limit) {
    if (reaped_) return status_;
    const auto deadline = steady::now() + limit;
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (steady::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    if (reader_.joinable()) reader_.join();
    return status_;
  }

 private:
  void read_loop(int fd) {
    FILE* f = ::fdopen(fd, "r");
    if (f == nullptr) {
      ::close(fd);
      return;
    }
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n = 0;
    while ((n = ::getline(&line, &cap, f)) > 0) {
      std::string s(line, static_cast<std::size_t>(n));
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      state_.on_line(name_, s);
    }
    std::free(line);
    std::fclose(f);
    if (!killed_by_story_ && !state_.closed_cleanly(name_)) {
      state_.note(steady::now(), name_ + "'s process ended without closing its consumer (it crashed or was killed)");
    }
  }

  std::string name_;
  member_reports& state_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  bool reaped_ = false;
  std::atomic<bool> killed_by_story_{false};
  int status_ = 0;
  std::thread reader_;
};

/// The member process named `name` (a story's own; it exists).
inline member_process& find_member(const std::vector<std::unique_ptr<member_process>>& members,
                                   const std::string& name) {
  for (const auto& p : members) {
    if (p->name() == name) return *p;
  }
  throw std::logic_error("no member " + name);
}

/// --serve: prints `intro` and where each running member serves (`where(name)`), then waits
/// until SIGINT or SIGTERM.
inline void serve_members(const std::vector<std::unique_ptr<member_process>>& members,
                          const std::string& intro,
                          const std::function<std::string(const std::string& name)>& where) {
  fmt::print("\n{}\n", intro);
  for (const auto& p : members) {
    if (p->running()) fmt::print("  {} {}\n", p->name(), where(p->name()));
  }
  std::fflush(stdout);
  while (!g_interrupted) std::this_thread::sleep_for(100ms);
  fmt::print("\n");
}

// ---- the producer ----------------------------------------------------------------------------

// Writes `rate` records per second round-robin over the topic's partitions, keys
// "orders-<partition>-<n>" (kgroup::test::record_key, n = the record's offset: the topic is new
// and this is its only writer, idempotent so retries cannot duplicate) and values of 100 bytes.
class producer {
 public:
  producer(const std::string& bootstrap, int rate) : rate_(rate), produced_(partition_count, 0) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      kgroup::test::apply_log_settings(conf);
      kgroup::test::set_config(conf, "bootstrap.servers", bootstrap);
      kgroup::test::set_config(conf, "client.id", "kgroup-demo-producer");
      kgroup::test::set_config(conf, "enable.idempotence", "true");
      kgroup::test::set_config(conf, "linger.ms", "5");
      kgroup::test::set_config(conf, "allow.auto.create.topics", "false");
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, &producer::on_delivery);
    rd_kafka_conf_set_opaque(conf, this);
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("producer: ") + err);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~producer() {
    stop();
    rd_kafka_destroy(rk_);
  }
  producer(const producer&) = delete;
  producer& operator=(const producer&) = delete;

  /// Stops producing and waits (up to 30 s) until every record is acknowledged.
  void stop() {
    if (stopping_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    rd_kafka_flush(rk_, 30000);
  }
  /// Records acknowledged per partition (after stop(): the records in the topic).
  std::vector<std::int64_t> produced() const {
    std::lock_guard lock(mutex_);
    return produced_;
  }
  std::int64_t failed() const { return failed_.load(); }
  std::int64_t total() const {
    std::lock_guard lock(mutex_);
    std::int64_t n = 0;
    for (auto v : produced_) n += v;
    return n;
  }

 private:
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    auto* self = static_cast<producer*>(opaque);
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++self->failed_;
      return;
    }
    std::lock_guard lock(self->mutex_);
    if (msg->partition >= 0 && msg->partition < partition_count) ++self->produced_[static_cast<std::size_t>(msg->partition)];
  }

  void run() {
    constexpr auto tick = 50ms;
    const int per_tick = std::max(1, rate_ / 20);
    std::vector<std::int64_t> next(partition_count, 0);
    std::int32_t cursor = 0;
    auto due = steady::now();
    std::string value;
    while (!stopping_) {
      for (int i = 0; i < per_tick; ++i) {
        const std::int32_t p = cursor;
        cursor = (cursor + 1) % partition_count;
        const std::string key = kgroup::test::record_key(topic_name, p, next[static_cast<std::size_t>(p)]++);
        value = kgroup::test::expected_value(key, 100);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(topic_name), RD_KAFKA_V_PARTITION(p),
                                        RD_KAFKA_V_KEY(key.data(), key.size()),
                                        RD_KAFKA_V_VALUE(value.data(), value.size()),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          rd_kafka_poll(rk_, 10);
        }
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) ++failed_;
      }
      rd_kafka_poll(rk_, 0);
      due += tick;
      std::this_thread::sleep_until(due);
    }
  }

  const int rate_;
  rd_kafka_t* rk_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<std::int64_t> produced_;
  std::atomic<std::int64_t> failed_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace demo
