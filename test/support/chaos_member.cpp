// The chaos test's members, one per client (see chaos_member.hpp).
#include "chaos_member.hpp"

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
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "group_harness.hpp"
#include "kgroup/consumer.hpp"
#include "mock_cluster.hpp"

namespace chaos {
namespace {

std::string parts_text(const std::vector<kgroup::TopicPartition>& parts) {
  if (parts.empty()) return "-";
  std::string out;
  for (const auto& tp : parts) {
    if (!out.empty()) out += ",";
    out += std::to_string(tp.partition);
  }
  return out;
}

// Consumed offsets of one poll, as contiguous runs per partition.
class run_builder {
 public:
  void add(std::int32_t p, std::int64_t offset) {
    auto& v = runs_[p];
    if (!v.empty() && v.back().second + 1 == offset) {
      v.back().second = offset;
    } else {
      v.push_back({offset, offset});
    }
  }
  bool empty() const { return runs_.empty(); }
  // Emits the runs and forgets them; returns the next offset to commit per partition.
  std::map<std::int32_t, std::int64_t> flush(const emit_fn& emit) {
    std::map<std::int32_t, std::int64_t> next;
    for (const auto& [p, v] : runs_) {
      for (const auto& [first, last] : v) {
        emit("C " + std::to_string(p) + " " + std::to_string(first) + " " + std::to_string(last));
        next[p] = std::max(next[p], last + 1);
      }
    }
    runs_.clear();
    return next;
  }

 private:
  std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> runs_;
};

// ---- kgroup ----------------------------------------------------------------------------------

class kgroup_chaos_member : public chaos_member {
  struct listener : kgroup::ConsumerRebalanceListener {
    kgroup_chaos_member& m;
    explicit listener(kgroup_chaos_member& member) : m(member) {}
    void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& p) override {
      m.note_generation();
      m.emit_("A " + std::to_string(now_ns()) + " " + parts_text(p));
      std::lock_guard lock(m.mutex_);
      m.owned_.insert(p.begin(), p.end());
    }
    void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& p) override {
      m.note_generation();
      {
        std::lock_guard lock(m.mutex_);
        for (const auto& tp : p) m.owned_.erase(tp);
      }
      m.emit_("R " + std::to_string(now_ns()) + " " + parts_text(p));
    }
    void on_partitions_lost(const std::vector<kgroup::TopicPartition>& p) override {
      {
        std::lock_guard lock(m.mutex_);
        for (const auto& tp : p) m.owned_.erase(tp);
      }
      m.emit_("L " + std::to_string(now_ns()) + " " + parts_text(p));
    }
  };

 public:
  kgroup_chaos_member(member_spec spec, emit_fn emit) : chaos_member(std::move(spec), std::move(emit)) {
    kgroup::Config cfg{{"bootstrap.servers", spec_.bootstrap},
                       {"group.id", spec_.group},
                       {"client.id", spec_.name},
                       {"session.timeout.ms", std::to_string(session_timeout_ms)},
                       {"heartbeat.interval.ms", std::to_string(heartbeat_ms)},
                       {"max.poll.interval.ms", std::to_string(max_poll_interval_ms)},
                       {"partition.assignment.strategy", spec_.strategy},
                       {"retry.backoff.ms", "50"},
                       {"reconnect.backoff.ms", "20"},
                       {"auto.offset.reset", "earliest"},
                       {"allow.auto.create.topics", "false"},
                       {"enable.auto.commit", spec_.commit == "auto" ? "true" : "false"},
                       {"auto.commit.interval.ms", "500"},
                       // A commit_sync() must not keep the loop from poll() past max.poll.interval.ms.
                       {"default.api.timeout.ms", "5000"}};
    consumer_ = std::make_unique<kgroup::Consumer>(cfg);
    if (spec_.commit == "auto") {
      // Auto-commits are reported as the explicit ones are (invariant 3 names who committed what).
      consumer_->set_auto_commit_callback([this](const kgroup::OffsetMap& offsets, std::error_code ec) {
        report_commit("auto-commit", offsets, ec);
      });
    }
    consumer_->subscribe({chaos_topic}, std::make_shared<listener>(*this));
  }
  ~kgroup_chaos_member() override { leave(); }

 protected:
  void poll_once() override {
    run_builder runs;
    try {
      mark_poll();
      const auto records = consumer_->poll(100ms);
      note_generation();
      for (const auto& r : records) {
        check_key(r.partition, r.offset, r.key);
        runs.add(r.partition, r.offset);
      }
    } catch (const std::exception& e) {
      emit_(std::string("E poll() threw: ") + e.what());
      std::this_thread::sleep_for(50ms);
    }
    if (!runs.empty()) {
      runs.flush(emit_);  // processed: reported before anything is committed
      uncommitted_ = true;
    }
    if (spec_.commit == "auto" || !uncommitted_ || steady::now() - last_commit_ < 500ms) return;
    last_commit_ = steady::now();
    uncommitted_ = false;
    if (spec_.commit == "sync") {
      // What commit_sync() commits: the positions of the owned partitions (as metrics() shows them).
      std::string committing;
      for (const auto& pm : consumer_->metrics().partitions) {
        if (pm.position >= 0)
          committing += (committing.empty() ? "" : ",") + std::to_string(pm.partition.partition) + ":" +
                        std::to_string(pm.position);
      }
      try {
        consumer_->commit_sync();
        if (!committing.empty()) emit_("K " + std::to_string(now_ns()) + " " + committing);
      } catch (const std::exception& e) {
        emit_(std::string("N commit_sync: ") + e.what());
        uncommitted_ = true;
      }
    } else {
      consumer_->commit_async([this](const kgroup::OffsetMap& offsets, std::error_code ec) {
        report_commit("commit_async", offsets, ec);
      });
    }
  }

  bool settled() override {
    std::set<kgroup::TopicPartition> owned;
    {
      std::lock_guard lock(mutex_);
      owned = owned_;
    }
    return consumer_->group_state() == "stable" && consumer_->assignment() == owned;
  }

  std::string close_consumer() override {
    try {
      consumer_->close(kgroup_close_timeout);
    } catch (const std::exception& e) {
      return std::string("close() threw: ") + e.what();
    }
    return {};
  }

 private:
  // kgroup has no join event; the generation is sampled after every poll() and at the start of
  // every callback (group_metadata() holds the generation of the last JoinGroup answer).
  void note_generation() { joined_generation(consumer_->group_metadata().generation_id, now_ns()); }

  // A commit's outcome as the recorder reads it: a "K" line with what was committed, or a note.
  void report_commit(const char* what, const kgroup::OffsetMap& offsets, std::error_code ec) {
    if (ec) {
      emit_(std::string("N ") + what + ": " + ec.message());
      return;
    }
    std::string committed;
    for (const auto& [tp, om] : offsets)
      committed +=
          (committed.empty() ? "" : ",") + std::to_string(tp.partition) + ":" + std::to_string(om.offset);
    if (!committed.empty()) emit_("K " + std::to_string(now_ns()) + " " + committed);
  }

  std::unique_ptr<kgroup::Consumer> consumer_;
  std::mutex mutex_;
  std::set<kgroup::TopicPartition> owned_;
  steady::time_point last_commit_{};
  bool uncommitted_ = false;
};

// ---- librdkafka ------------------------------------------------------------------------------

class rdkafka_chaos_member : public chaos_member {
 public:
  rdkafka_chaos_member(member_spec spec, emit_fn emit) : chaos_member(std::move(spec), std::move(emit)) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    try {
      kgroup::test::apply_log_settings(conf);
      forward_level_ = 2;
      if (const char* l = std::getenv("KGROUP_MOCK_LOG_LEVEL"); l != nullptr && *l != '\0')
        forward_level_ = std::atoi(l);
      std::string debug = "cgrp";
      if (const char* d = std::getenv("KGROUP_MOCK_DEBUG"); d != nullptr && *d != '\0') {
        debug = std::string(d) + ",cgrp";
        forward_level_ = 7;
      }
      using kgroup::test::set_config;
      set_config(conf, "debug", debug);
      set_config(conf, "log_level", "7");
      set_config(conf, "bootstrap.servers", spec_.bootstrap);
      set_config(conf, "group.id", spec_.group);
      set_config(conf, "client.id", spec_.name);
      set_config(conf, "partition.assignment.strategy", spec_.strategy);
      set_config(conf, "session.timeout.ms", std::to_string(session_timeout_ms));
      set_config(conf, "heartbeat.interval.ms", std::to_string(heartbeat_ms));
      set_config(conf, "max.poll.interval.ms", std::to_string(max_poll_interval_ms));
      set_config(conf, "auto.offset.reset", "earliest");
      set_config(conf, "allow.auto.create.topics", "false");
      // At-least-once: offsets are stored only after the records were reported, and the stored
      // offsets are committed (every 500 ms and on revoke).
      set_config(conf, "enable.auto.commit", "true");
      set_config(conf, "auto.commit.interval.ms", "500");
      set_config(conf, "enable.auto.offset.store", "false");
    } catch (...) {
      rd_kafka_conf_destroy(conf);
      throw;
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_log_cb(conf, &rdkafka_chaos_member::log_cb);
    rd_kafka_conf_set_rebalance_cb(conf, &rdkafka_chaos_member::rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, &rdkafka_chaos_member::commit_cb);
    // Errors (broker down, timeouts) are expected here; they arrive as consumer errors too.
    rd_kafka_conf_set_error_cb(conf, [](rd_kafka_t*, int, const char*, void*) {});
    char err[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("rd_kafka_new: ") + err);
    }
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, chaos_topic.c_str(), RD_KAFKA_PARTITION_UA);
    const rd_kafka_resp_err_t e = rd_kafka_subscribe(rk_, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_destroy(rk_);
      throw std::runtime_error(std::string("rd_kafka_subscribe: ") + rd_kafka_err2str(e));
    }
  }
  ~rdkafka_chaos_member() override {
    leave();
    rd_kafka_destroy(rk_);
  }

 protected:
  void poll_once() override {
    const auto until = steady::now() + 100ms;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()).count();
      mark_poll();
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, static_cast<int>(std::max<std::int64_t>(left, 0)));
      if (m == nullptr) break;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::optional<std::string_view> key;
        if (m->key != nullptr) key = std::string_view(static_cast<const char*>(m->key), m->key_len);
        check_key(m->partition, m->offset, key);
        runs_.add(m->partition, m->offset);
      } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        emit_(std::string("N consumer error: ") + rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
      if (steady::now() >= until) break;
    }
    flush();
    char fatal[256];
    if (rd_kafka_fatal_error(rk_, fatal, sizeof fatal) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      emit_(std::string("E librdkafka fatal error: ") + fatal);
    }
  }

  bool settled() override {
    std::set<int> assigned;
    rd_kafka_topic_partition_list_t* list = nullptr;
    if (rd_kafka_assignment(rk_, &list) != RD_KAFKA_RESP_ERR_NO_ERROR || list == nullptr) return false;
    for (int i = 0; i < list->cnt; ++i) assigned.insert(list->elems[i].partition);
    rd_kafka_topic_partition_list_destroy(list);
    std::lock_guard lock(mutex_);
    return join_state_ == "steady" && assigned == owned_;
  }

  std::string close_consumer() override {
    const rd_kafka_resp_err_t e = rd_kafka_consumer_close(rk_);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR ? std::string() : std::string("close: ") + rd_kafka_err2str(e);
  }

  void before_stall() override { flush(); }

 private:
  // Reports the consumed runs, then stores their offsets for the auto-commit.
  void flush() {
    if (runs_.empty()) return;
    const auto next = runs_.flush(emit_);
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(next.size()));
    for (const auto& [p, offset] : next)
      rd_kafka_topic_partition_list_add(list, chaos_topic.c_str(), p)->offset = offset;
    // Fails (harmlessly: the records come again) for partitions no longer assigned.
    (void)rd_kafka_offsets_store(rk_, list);
    rd_kafka_topic_partition_list_destroy(list);
  }

  static void commit_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets,
                        void* opaque) {
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || offsets == nullptr) return;
    std::string committed;
    for (int i = 0; i < offsets->cnt; ++i) {
      const auto& el = offsets->elems[i];
      if (el.err != RD_KAFKA_RESP_ERR_NO_ERROR || el.offset < 0) continue;
      committed +=
          (committed.empty() ? "" : ",") + std::to_string(el.partition) + ":" + std::to_string(el.offset);
    }
    if (!committed.empty())
      static_cast<rdkafka_chaos_member*>(opaque)->emit_("K " + std::to_string(now_ns()) + " " + committed);
  }

  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
    const char* proto = rd_kafka_rebalance_protocol(rk_);
    const bool cooperative = proto != nullptr && std::string(proto) == "COOPERATIVE";
    std::vector<kgroup::TopicPartition> list;
    for (int i = 0; i < parts->cnt; ++i) list.push_back({parts->elems[i].topic, parts->elems[i].partition});
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      emit_("A " + std::to_string(now_ns()) + " " + parts_text(list));
      {
        std::lock_guard lock(mutex_);
        if (!cooperative) owned_.clear();
        for (const auto& tp : list) owned_.insert(tp.partition);
      }
      rd_kafka_error_t* e = nullptr;
      rd_kafka_resp_err_t re = RD_KAFKA_RESP_ERR_NO_ERROR;
      if (cooperative) {
        e = rd_kafka_incremental_assign(rk_, parts);
      } else {
        re = rd_kafka_assign(rk_, parts);
      }
      note(e, re, "assign");
      return;
    }
    flush();  // what was consumed is reported and stored, so the revoke commits it
    const bool lost = rd_kafka_assignment_lost(rk_) != 0;
    rd_kafka_error_t* e = nullptr;
    rd_kafka_resp_err_t re = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (cooperative) {
      e = rd_kafka_incremental_unassign(rk_, parts);
    } else {
      re = rd_kafka_assign(rk_, nullptr);
    }
    note(e, re, "unassign");
    {
      std::lock_guard lock(mutex_);
      if (cooperative) {
        for (const auto& tp : list) owned_.erase(tp.partition);
      } else {
        owned_.clear();
      }
    }
    emit_(std::string(lost ? "L " : "R ") + std::to_string(now_ns()) + " " + parts_text(list));
  }

  void note(rd_kafka_error_t* e, rd_kafka_resp_err_t re, const char* what) {
    if (e != nullptr) {
      emit_(std::string("N ") + what + ": " + rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    } else if (re != RD_KAFKA_RESP_ERR_NO_ERROR) {
      emit_(std::string("N ") + what + ": " + rd_kafka_err2str(re));
    }
  }

  static void rebalance_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                           void* opaque) {
    static_cast<rdkafka_chaos_member*>(opaque)->on_rebalance(err, parts);
  }

  // librdkafka has no API for its join state; its "cgrp" debug log says it (as rdkafka_member.hpp).
  static void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
    auto* self = static_cast<rdkafka_chaos_member*>(rd_kafka_opaque(rk));
    if (self == nullptr) return;
    static constexpr std::string_view marker = "changed join state ";
    static constexpr std::string_view joined = "JoinGroup response: GenerationId ";
    const std::string_view line(buf);
    if (const auto pos = line.find(joined); pos != std::string_view::npos && line.ends_with("(no error)")) {
      self->joined_generation(std::atoi(std::string(line.substr(pos + joined.size(), 12)).c_str()), now_ns());
    }
    if (const auto pos = line.find(marker); pos != std::string_view::npos) {
      const auto arrow = line.find(" -> ", pos);
      if (arrow != std::string_view::npos) {
        const auto start = arrow + 4;
        const auto end = line.find(' ', start);
        std::lock_guard lock(self->mutex_);
        self->join_state_ = std::string(
            line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
      }
    }
    if (level <= self->forward_level_)
      std::fprintf(stderr, "%%%d|%s|%s| %s\n", level, fac, self->spec_.name.c_str(), buf);
  }

  rd_kafka_t* rk_ = nullptr;
  int forward_level_ = 2;
  run_builder runs_;  // poll thread only
  std::mutex mutex_;  // guards the two fields below (written by the poll thread and log threads)
  std::set<int> owned_;
  std::string join_state_ = "init";
};

}  // namespace

std::unique_ptr<chaos_member> make_member(const member_spec& spec, emit_fn emit) {
  if (spec.client == "kgroup") return std::make_unique<kgroup_chaos_member>(spec, std::move(emit));
  return std::make_unique<rdkafka_chaos_member>(spec, std::move(emit));
}

}  // namespace chaos
