// librdkafka 2.15.1's share consumer (KIP-932), for the share tests' mixed groups and the share
// benchmark. The test binaries are compiled against Debian's librdkafka 2.0.2 headers, which have
// no share consumer, so its functions are looked up at run time (dlsym): rdkafka_share_api::load()
// is false on 2.0.2.
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "mock_cluster.hpp"

namespace kgroup::test {

struct rd_share;     // rd_kafka_share_t
struct rd_messages;  // rd_kafka_messages_t

struct rdkafka_share_api {
  rd_share* (*consumer_new)(rd_kafka_conf_t*, char*, size_t) = nullptr;
  rd_kafka_resp_err_t (*subscribe)(rd_share*, const rd_kafka_topic_partition_list_t*) = nullptr;
  rd_kafka_error_t* (*poll)(rd_share*, int, rd_messages**) = nullptr;
  size_t (*count)(const rd_messages*) = nullptr;
  rd_kafka_message_t* (*get)(const rd_messages*, size_t) = nullptr;
  void (*destroy_messages)(rd_messages*) = nullptr;
  rd_kafka_error_t* (*close)(rd_share*) = nullptr;
  rd_kafka_error_t* (*destroy)(rd_share*) = nullptr;
  std::int16_t (*delivery_count)(const rd_kafka_message_t*) = nullptr;
  rd_kafka_error_t* (*acknowledge)(rd_share*, const rd_kafka_message_t*) = nullptr;
  // rd_kafka_share_AcknowledgeType_t: 1 accept, 2 release, 3 reject.
  rd_kafka_error_t* (*acknowledge_type)(rd_share*, const rd_kafka_message_t*, int) = nullptr;
  rd_kafka_error_t* (*commit_sync)(rd_share*, int, rd_kafka_topic_partition_list_t**) = nullptr;

  /// Whether the loaded librdkafka has a share consumer (2.15.1: yes; 2.0.2: no).
  bool load() {
    auto sym = [](const char* name) { return dlsym(RTLD_DEFAULT, name); };
    consumer_new = reinterpret_cast<decltype(consumer_new)>(sym("rd_kafka_share_consumer_new"));
    subscribe = reinterpret_cast<decltype(subscribe)>(sym("rd_kafka_share_subscribe"));
    poll = reinterpret_cast<decltype(poll)>(sym("rd_kafka_share_poll"));
    count = reinterpret_cast<decltype(count)>(sym("rd_kafka_messages_count"));
    get = reinterpret_cast<decltype(get)>(sym("rd_kafka_messages_get"));
    destroy_messages = reinterpret_cast<decltype(destroy_messages)>(sym("rd_kafka_messages_destroy"));
    close = reinterpret_cast<decltype(close)>(sym("rd_kafka_share_consumer_close"));
    destroy = reinterpret_cast<decltype(destroy)>(sym("rd_kafka_share_destroy"));
    delivery_count = reinterpret_cast<decltype(delivery_count)>(sym("rd_kafka_message_delivery_count"));
    acknowledge = reinterpret_cast<decltype(acknowledge)>(sym("rd_kafka_share_acknowledge"));
    acknowledge_type = reinterpret_cast<decltype(acknowledge_type)>(sym("rd_kafka_share_acknowledge_type"));
    commit_sync = reinterpret_cast<decltype(commit_sync)>(sym("rd_kafka_share_commit_sync"));
    return consumer_new && subscribe && poll && count && get && destroy_messages && close && destroy &&
           delivery_count && acknowledge && acknowledge_type && commit_sync;
  }
};

/// The one table of the process (load() it first).
inline rdkafka_share_api& rdkafka_share() {
  static rdkafka_share_api api;
  return api;
}

/// One delivered record as librdkafka reports it.
struct rdkafka_delivery {
  std::int32_t partition;
  std::int64_t offset;
  std::int16_t count;
};

/// A librdkafka share consumer of `group` subscribed to `topic`, polled by one thread.
class rdkafka_share_member {
 public:
  rdkafka_share_member(const mock_cluster& mc, const std::string& group, const std::string& topic,
                       bool explicit_mode = false) {
    auto& rd = rdkafka_share();
    if (!rd.load()) throw std::runtime_error("this librdkafka has no share consumer (2.15.1 has)");
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    apply_log_settings(conf);
    set_config(conf, "bootstrap.servers", mc.bootstrap_servers());
    set_config(conf, "group.id", group);
    set_config(conf, "share.acknowledgement.mode", explicit_mode ? "explicit" : "implicit");
    char err[512];
    h_ = rd.consumer_new(conf, err, sizeof err);
    if (!h_) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("rd_kafka_share_consumer_new: ") + err);
    }
    auto* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, topic.c_str(), RD_KAFKA_PARTITION_UA);
    rd.subscribe(h_, topics);
    rd_kafka_topic_partition_list_destroy(topics);
  }
  ~rdkafka_share_member() { close(); }
  rdkafka_share_member(const rdkafka_share_member&) = delete;
  rdkafka_share_member& operator=(const rdkafka_share_member&) = delete;

  /// The records of one rd_kafka_share_poll() (implicit mode acknowledges the previous ones).
  std::vector<rdkafka_delivery> poll(std::chrono::milliseconds timeout) {
    auto& rd = rdkafka_share();
    std::vector<rdkafka_delivery> out;
    rd_messages* batch = nullptr;
    drop(rd.poll(h_, static_cast<int>(timeout.count()), &batch));
    if (!batch) return out;
    for (size_t i = 0; i < rd.count(batch); ++i) {
      const auto* m = rd.get(batch, i);
      if (m->err) continue;
      out.push_back({m->partition, m->offset, rd.delivery_count(m)});
    }
    rd.destroy_messages(batch);
    return out;
  }
  /// Explicit mode: one rd_kafka_share_poll() whose records the caller holds (unacknowledged)
  /// until release_held(). Returns them.
  std::vector<rdkafka_delivery> poll_hold(std::chrono::milliseconds timeout) {
    auto& rd = rdkafka_share();
    std::vector<rdkafka_delivery> out;
    if (held_) return out;
    drop(rd.poll(h_, static_cast<int>(timeout.count()), &held_));
    if (!held_) return out;
    for (size_t i = 0; i < rd.count(held_); ++i) {
      const auto* m = rd.get(held_, i);
      if (!m->err) out.push_back({m->partition, m->offset, rd.delivery_count(m)});
    }
    if (out.empty()) {
      rd.destroy_messages(held_);
      held_ = nullptr;
    }
    return out;
  }
  /// Releases every record poll_hold() returned (rd_kafka_share_acknowledge_type RELEASE), then
  /// rd_kafka_share_commit_sync(). Returns what went wrong ("" when every step and partition
  /// reported no error).
  std::string release_held() {
    auto& rd = rdkafka_share();
    if (!held_) return "nothing held";
    std::string problems;
    for (size_t i = 0; i < rd.count(held_); ++i) {
      const auto* m = rd.get(held_, i);
      if (m->err) continue;
      if (auto* e = rd.acknowledge_type(h_, m, 2)) {
        problems += std::string("acknowledge_type: ") + rd_kafka_error_string(e) + "; ";
        rd_kafka_error_destroy(e);
      }
    }
    rd.destroy_messages(held_);
    held_ = nullptr;
    rd_kafka_topic_partition_list_t* parts = nullptr;
    if (auto* e = rd.commit_sync(h_, 10000, &parts)) {
      problems += std::string("commit_sync: ") + rd_kafka_error_string(e) + "; ";
      rd_kafka_error_destroy(e);
    }
    if (parts) {
      for (int i = 0; i < parts->cnt; ++i) {
        if (parts->elems[i].err) {
          problems += std::string("partition ") + std::to_string(parts->elems[i].partition) + ": " +
                      rd_kafka_err2str(parts->elems[i].err) + "; ";
        }
      }
      rd_kafka_topic_partition_list_destroy(parts);
    }
    return problems;
  }
  void close() {
    if (!h_) return;
    auto& rd = rdkafka_share();
    if (held_) {
      rd.destroy_messages(held_);
      held_ = nullptr;
    }
    drop(rd.close(h_));
    drop(rd.destroy(h_));
    h_ = nullptr;
  }

 private:
  static void drop(rd_kafka_error_t* e) {
    if (e) rd_kafka_error_destroy(e);
  }
  rd_share* h_ = nullptr;
  rd_messages* held_ = nullptr;  // poll_hold()'s records, until release_held()
};

}  // namespace kgroup::test
