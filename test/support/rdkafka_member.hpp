// A librdkafka high-level consumer as a consumer-group member, for interop tests and the rebalance
// benchmark: it subscribes, polls on its own thread, and records its rebalance callbacks in the
// same form as kgroup's recording_listener (assigned when the assign callback starts, revoked or
// lost when the callback returns), so one timeline can check a mixed group.
//
// librdkafka is a test dependency only; nothing under src/ or include/ may include this header.
//
// Observation: librdkafka has no API for its join state or for who leads the group, so this class
// turns on librdkafka's "cgrp" debug context and reads two of its log lines:
//   "Group \"G\" changed join state A -> B (state S)"            -> join_state() ("steady" = settled)
//   "JoinGroup response: GenerationId N, Protocol P, LeaderId L, my MemberId M, ..."
//                                                                -> generation(), leader_id(), ...
// Those lines are librdkafka 2.0.2's (src/rdkafka_cgrp.c). Other log lines are forwarded to stderr
// at the levels mock_cluster's apply_log_settings() uses ($KGROUP_MOCK_LOG_LEVEL, default 3;
// everything when $KGROUP_MOCK_DEBUG is set).
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "group_harness.hpp"
#include "mock_cluster.hpp"

namespace kgroup::test {

class rdkafka_member {
 public:
  /// Receives each ownership event: (member name, kind, partitions).
  using event_sink = std::function<void(const std::string&, timeline::kind, const std::vector<TopicPartition>&)>;

  /// Creates the consumer (session.timeout.ms 6000, heartbeat.interval.ms 500 unless `extra` says
  /// otherwise, or sets group.protocol=consumer: then neither, nor `strategy`), subscribes to `topics` and starts polling on a thread of its own.
  /// `strategy` is librdkafka's partition.assignment.strategy ("range", "cooperative-sticky", ...).
  /// Throws std::runtime_error if librdkafka refuses the configuration or the subscription.
  rdkafka_member(std::string name, const std::string& bootstrap, const std::string& group,
                 const std::string& strategy, const std::vector<std::string>& topics, event_sink sink,
                 const std::map<std::string, std::string>& extra = {})
      : name_(std::move(name)), sink_(std::move(sink)) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      apply_log_settings(conf);
      forward_level_ = env_int("KGROUP_MOCK_LOG_LEVEL", 3);
      std::string debug = "cgrp";
      if (const char* d = std::getenv("KGROUP_MOCK_DEBUG"); d != nullptr && *d != '\0') {
        debug = std::string(d) + ",cgrp";
        forward_level_ = 7;
      }
      set_config(conf, "debug", debug);
      set_config(conf, "log_level", "7");
      set_config(conf, "bootstrap.servers", bootstrap);
      set_config(conf, "group.id", group);
      set_config(conf, "client.id", "rdkafka-" + name_);
      // With group.protocol=consumer (KIP-848) the broker owns the assignor and the timers.
      const auto protocol = extra.find("group.protocol");
      if (protocol == extra.end() || protocol->second != "consumer") {
        set_config(conf, "partition.assignment.strategy", strategy);
        set_config(conf, "session.timeout.ms", "6000");
        set_config(conf, "heartbeat.interval.ms", "500");
      }
      set_config(conf, "enable.auto.commit", "false");
      set_config(conf, "auto.offset.reset", "earliest");
      set_config(conf, "allow.auto.create.topics", "false");
      for (const auto& [k, v] : extra) set_config(conf, k.c_str(), v);
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_log_cb(conf, &rdkafka_member::log_cb);
    rd_kafka_conf_set_rebalance_cb(conf, &rdkafka_member::rebalance_cb);
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("rd_kafka_new: ") + err);
    }
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* subs = rd_kafka_topic_partition_list_new(static_cast<int>(topics.size()));
    for (const auto& t : topics) rd_kafka_topic_partition_list_add(subs, t.c_str(), RD_KAFKA_PARTITION_UA);
    const rd_kafka_resp_err_t e = rd_kafka_subscribe(rk_, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_destroy(rk_);
      rk_ = nullptr;
      throw std::runtime_error(std::string("rd_kafka_subscribe: ") + rd_kafka_err2str(e));
    }
    thread_ = std::thread([this] { loop(); });
  }

  /// Same, recording into `t` under this member's name.
  rdkafka_member(std::string name, const std::string& bootstrap, const std::string& group,
                 const std::string& strategy, const std::vector<std::string>& topics, timeline& t,
                 const std::map<std::string, std::string>& extra = {})
      : rdkafka_member(std::move(name), bootstrap, group, strategy, topics,
                       [&t](const std::string& n, timeline::kind k, const std::vector<TopicPartition>& p) {
                         t.record(n, k, p);
                       },
                       extra) {}

  ~rdkafka_member() {
    stop();
    if (rk_ != nullptr) rd_kafka_destroy(rk_);
  }

  rdkafka_member(const rdkafka_member&) = delete;
  rdkafka_member& operator=(const rdkafka_member&) = delete;

  /// Stops polling and closes the consumer cleanly: the revoke callback runs on this thread
  /// inside rd_kafka_consumer_close(), which then sends LeaveGroup. Idempotent.
  void stop() {
    if (closed_) return;
    closed_ = true;
    running_ = false;
    if (thread_.joinable()) thread_.join();
    const auto start = steady::now();
    const rd_kafka_resp_err_t e = rd_kafka_consumer_close(rk_);
    close_took_ = steady::now() - start;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) close_error_ = rd_kafka_err2str(e);
  }

  const std::string& name() const { return name_; }
  rd_kafka_t* handle() const { return rk_; }

  /// Partitions owned according to the rebalance callbacks.
  std::set<TopicPartition> owned() const {
    std::lock_guard lock(mutex_);
    return owned_;
  }
  /// librdkafka's own current assignment (rd_kafka_assignment()). Valid before stop().
  std::set<TopicPartition> assignment() const {
    std::set<TopicPartition> out;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) != RD_KAFKA_RESP_ERR_NO_ERROR || list == nullptr) return out;
    for (int i = 0; i < list->cnt; ++i) out.insert({list->elems[i].topic, list->elems[i].partition});
    rd_kafka_topic_partition_list_destroy(list);
    return out;
  }
  /// librdkafka's member id (empty before the first JoinGroup answer). Valid before stop().
  std::string member_id() const {
    char* id = rd_kafka_memberid(rk_);
    if (id == nullptr) return {};
    std::string out(id);
    rd_kafka_mem_free(rk_, id);
    return out;
  }
  /// "EAGER", "COOPERATIVE" or "NONE" (no protocol chosen yet).
  std::string rebalance_protocol() const {
    const char* p = rd_kafka_rebalance_protocol(rk_);
    return p != nullptr ? p : "NONE";
  }
  /// The join state librdkafka last logged ("steady" once settled).
  std::string join_state() const {
    std::lock_guard lock(mutex_);
    return join_state_;
  }
  /// Settled from this member's point of view: librdkafka's join state is steady and the
  /// callbacks' view agrees with rd_kafka_assignment().
  bool stable() const { return join_state() == "steady" && owned() == assignment(); }

  /// From the last JoinGroup response librdkafka logged.
  struct join_info {
    std::int32_t generation = -1;
    std::string protocol;
    std::string leader_id;
    std::string member_id;
  };
  std::optional<join_info> last_join() const {
    std::lock_guard lock(mutex_);
    return last_join_;
  }

  int assigned_calls() const {
    std::lock_guard lock(mutex_);
    return assigned_calls_;
  }
  int revoked_calls() const {
    std::lock_guard lock(mutex_);
    return revoked_calls_;
  }
  std::size_t revoked_total() const {
    std::lock_guard lock(mutex_);
    return revoked_total_;
  }
  int lost_calls() const {
    std::lock_guard lock(mutex_);
    return lost_calls_;
  }
  /// Errors seen in poll (consumer error events) and in the rebalance callback's assign calls.
  std::vector<std::string> errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
  }
  std::optional<std::string> close_error() const { return close_error_; }
  steady::duration close_took() const { return close_took_; }

 private:
  static int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    return std::atoi(v);
  }

  static std::vector<TopicPartition> to_vector(const rd_kafka_topic_partition_list_t* list) {
    std::vector<TopicPartition> out;
    if (list == nullptr) return out;
    for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
    return out;
  }

  void loop() {
    while (running_) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 50);
      if (m == nullptr) continue;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        std::lock_guard lock(mutex_);
        errors_.push_back(std::string("poll: ") + rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
    }
  }

  void note_error(const std::string& what, rd_kafka_error_t* e) {
    if (e == nullptr) return;
    {
      std::lock_guard lock(mutex_);
      errors_.push_back(what + ": " + rd_kafka_error_string(e));
    }
    rd_kafka_error_destroy(e);
  }

  void note_error(const std::string& what, rd_kafka_resp_err_t e) {
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return;
    std::lock_guard lock(mutex_);
    errors_.push_back(what + ": " + rd_kafka_err2str(e));
  }

  // Runs on the polling thread (inside rd_kafka_consumer_poll) or inside rd_kafka_consumer_close.
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
    const bool cooperative = rebalance_protocol() == "COOPERATIVE";
    const auto list = to_vector(parts);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      // Recorded before the partitions are taken, like recording_listener.
      sink_(name_, timeline::kind::assigned, list);
      {
        std::lock_guard lock(mutex_);
        if (!cooperative) owned_.clear();
        owned_.insert(list.begin(), list.end());
        ++assigned_calls_;
      }
      if (cooperative) {
        note_error("incremental_assign", rd_kafka_incremental_assign(rk_, parts));
      } else {
        note_error("assign", rd_kafka_assign(rk_, parts));
      }
      return;
    }
    // Revoke (or lost): give the partitions up, then record, like recording_listener.
    const bool lost = rd_kafka_assignment_lost(rk_) != 0;
    if (cooperative) {
      note_error("incremental_unassign", rd_kafka_incremental_unassign(rk_, parts));
    } else {
      note_error("unassign", rd_kafka_assign(rk_, nullptr));
    }
    {
      std::lock_guard lock(mutex_);
      if (cooperative) {
        for (const auto& tp : list) owned_.erase(tp);
      } else {
        owned_.clear();
      }
      if (lost) {
        ++lost_calls_;
      } else {
        ++revoked_calls_;
        revoked_total_ += list.size();
      }
    }
    sink_(name_, lost ? timeline::kind::lost : timeline::kind::revoked, list);
  }

  static void rebalance_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                           void* opaque) {
    static_cast<rdkafka_member*>(opaque)->on_rebalance(err, parts);
  }

  // Called from librdkafka's threads.
  void on_log(int level, const char* fac, const char* buf) {
    const std::string line(buf);
    static constexpr std::string_view join_state_marker = "changed join state ";
    static constexpr std::string_view join_response_marker = "JoinGroup response: GenerationId ";
    if (auto pos = line.find(join_state_marker); pos != std::string::npos) {
      // "... changed join state A -> B (state S)"
      const auto arrow = line.find(" -> ", pos);
      if (arrow != std::string::npos) {
        const auto start = arrow + 4;
        const auto end = line.find(' ', start);
        std::lock_guard lock(mutex_);
        join_state_ = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
      }
    } else if (auto jr = line.find(join_response_marker); jr != std::string::npos) {
      // "JoinGroup response: GenerationId N, Protocol P, LeaderId L[ (me)], my MemberId M, member ..."
      join_info info;
      info.generation = std::atoi(line.c_str() + jr + join_response_marker.size());
      info.protocol = field(line, ", Protocol ");
      info.leader_id = field(line, ", LeaderId ");
      info.member_id = field(line, ", my MemberId ");
      if (line.find("(no error)") != std::string::npos) {
        std::lock_guard lock(mutex_);
        last_join_ = info;
      }
    }
    if (level <= forward_level_) {
      std::fprintf(stderr, "%%%d|%s|%s| %s\n", level, fac, name_.c_str(), buf);
    }
  }

  // The text after `key` up to the next ", " (without a trailing " (me)").
  static std::string field(const std::string& line, const std::string& key) {
    const auto pos = line.find(key);
    if (pos == std::string::npos) return {};
    const auto start = pos + key.size();
    const auto end = line.find(", ", start);
    std::string v = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
    static constexpr std::string_view me = " (me)";
    if (v.size() >= me.size() && v.compare(v.size() - me.size(), me.size(), me) == 0) v.resize(v.size() - me.size());
    return v;
  }

  static void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
    auto* self = static_cast<rdkafka_member*>(rd_kafka_opaque(rk));
    if (self != nullptr) {
      self->on_log(level, fac, buf);
    } else {
      std::fprintf(stderr, "%%%d|%s| %s\n", level, fac, buf);
    }
  }

  std::string name_;
  event_sink sink_;
  int forward_level_ = 3;
  rd_kafka_t* rk_ = nullptr;
  std::thread thread_;
  std::atomic<bool> running_{true};
  bool closed_ = false;  // user thread only

  mutable std::mutex mutex_;  // guards the fields below (written by the poll thread and log threads)
  std::set<TopicPartition> owned_;
  std::string join_state_ = "init";
  std::optional<join_info> last_join_;
  int assigned_calls_ = 0;
  int revoked_calls_ = 0;
  std::size_t revoked_total_ = 0;
  int lost_calls_ = 0;
  std::vector<std::string> errors_;

  std::optional<std::string> close_error_;
  steady::duration close_took_{};
};

}  // namespace kgroup::test
