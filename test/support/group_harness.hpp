// Test harness for consumer groups: members that poll on their own threads, and a timeline of
// listener callbacks (one process, one clock) to check that no partition is ever owned by two
// members at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kgroup/consumer.hpp"

namespace kgroup::test {

using steady = std::chrono::steady_clock;

/// Ownership events, recorded when an assign callback starts and when a revoke/lost returns.
class timeline {
 public:
  enum class kind { assigned, revoked, lost };
  struct event {
    steady::time_point at;
    std::string member;
    kind what;
    std::vector<TopicPartition> partitions;
  };

  void record(const std::string& member, kind what, const std::vector<TopicPartition>& parts) {
    std::lock_guard lock(mutex_);
    events_.push_back({steady::now(), member, what, parts});
  }

  std::vector<event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }

  /// Replays the events; returns a description of every moment a partition was assigned to a
  /// member while another member still held it (lost counts as giving it up). `allow_after_lost`
  /// names members whose partitions may be taken before they notice (killed or stalled members).
  std::vector<std::string> overlaps(const std::set<std::string>& zombies = {}) const {
    std::vector<std::string> out;
    std::map<TopicPartition, std::string> owner;
    for (const auto& e : events()) {
      for (const auto& tp : e.partitions) {
        if (e.what == kind::assigned) {
          auto it = owner.find(tp);
          if (it != owner.end() && it->second != e.member && !zombies.count(it->second)) {
            out.push_back(tp.topic + "-" + std::to_string(tp.partition) + " assigned to " + e.member +
                          " while owned by " + it->second);
          }
          owner[tp] = e.member;
        } else {
          auto it = owner.find(tp);
          if (it != owner.end() && it->second == e.member) owner.erase(it);
        }
      }
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<event> events_;
};

/// A listener that records into a timeline and keeps its member's current ownership.
class recording_listener : public ConsumerRebalanceListener {
 public:
  recording_listener(std::string name, timeline& t) : name_(std::move(name)), timeline_(t) {}

  void on_partitions_assigned(const std::vector<TopicPartition>& p) override {
    timeline_.record(name_, timeline::kind::assigned, p);
    std::lock_guard lock(mutex_);
    owned_.insert(p.begin(), p.end());
    ++assigned_calls_;
  }
  void on_partitions_revoked(const std::vector<TopicPartition>& p) override {
    {
      std::lock_guard lock(mutex_);
      for (const auto& tp : p) owned_.erase(tp);
      ++revoked_calls_;
      revoked_total_ += p.size();
    }
    if (on_revoke) on_revoke(p);
    timeline_.record(name_, timeline::kind::revoked, p);
  }
  void on_partitions_lost(const std::vector<TopicPartition>& p) override {
    {
      std::lock_guard lock(mutex_);
      for (const auto& tp : p) owned_.erase(tp);
      ++lost_calls_;
    }
    timeline_.record(name_, timeline::kind::lost, p);
  }

  std::set<TopicPartition> owned() const {
    std::lock_guard lock(mutex_);
    return owned_;
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
  std::function<void(const std::vector<TopicPartition>&)> on_revoke;  // extra behaviour (e.g. throw)

 private:
  std::string name_;
  timeline& timeline_;
  mutable std::mutex mutex_;
  std::set<TopicPartition> owned_;
  int assigned_calls_ = 0;
  int revoked_calls_ = 0;
  std::size_t revoked_total_ = 0;
  int lost_calls_ = 0;
};

/// A kgroup consumer polling on its own thread until stopped.
class polling_member {
 public:
  polling_member(std::string name, const Config& cfg, std::vector<std::string> topics, timeline& t)
      : name_(std::move(name)), listener_(std::make_shared<recording_listener>(name_, t)) {
    consumer_ = std::make_unique<Consumer>(cfg);
    consumer_->subscribe(topics, listener_);
    thread_ = std::thread([this] { loop(); });
  }
  ~polling_member() { stop(); }

  /// Stops polling and closes the consumer (a clean leave).
  void stop(std::chrono::milliseconds close_timeout = std::chrono::seconds(20)) {
    stop(kgroup::CloseOptions{.timeout = close_timeout});
  }
  /// Stops polling, then close(options) (KIP-1092).
  void stop(const kgroup::CloseOptions& options) {
    if (!thread_.joinable()) return;
    running_ = false;
    thread_.join();
    const auto start = steady::now();
    try {
      consumer_->close(options);
    } catch (const std::exception& e) {
      close_error_ = e.what();
    }
    close_took_ = steady::now() - start;
  }
  /// Stops polling without closing: the member stalls (its heartbeat thread keeps running).
  void stall() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  /// Resumes polling after stall().
  void resume() {
    if (thread_.joinable()) return;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
  }

  const std::string& name() const { return name_; }
  Consumer& consumer() { return *consumer_; }
  recording_listener& listener() { return *listener_; }
  std::optional<std::string> poll_error() const {
    std::lock_guard lock(mutex_);
    return poll_error_;
  }
  std::optional<std::string> close_error() const { return close_error_; }
  steady::duration close_took() const { return close_took_; }

 private:
  void loop() {
    while (running_) {
      try {
        consumer_->poll(std::chrono::milliseconds(50));
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        if (!poll_error_) poll_error_ = e.what();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  std::string name_;
  std::shared_ptr<recording_listener> listener_;
  std::unique_ptr<Consumer> consumer_;
  std::thread thread_;
  std::atomic<bool> running_{true};
  mutable std::mutex mutex_;
  std::optional<std::string> poll_error_;
  std::optional<std::string> close_error_;
  steady::duration close_took_{};
};

/// Partitions 0..n-1 of `topic`.
inline std::set<TopicPartition> all_partitions(const std::string& topic, int n) {
  std::set<TopicPartition> s;
  for (int i = 0; i < n; ++i) s.insert({topic, i});
  return s;
}

/// Waits until `pred` holds or `limit` passes; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit, std::chrono::milliseconds step = std::chrono::milliseconds(50)) {
  const auto deadline = steady::now() + limit;
  while (!pred()) {
    if (steady::now() >= deadline) return pred();
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace kgroup::test
