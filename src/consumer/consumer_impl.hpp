// The Consumer facade's implementation class (internal): the background thread, the poll loop
// and forwarding. Everything protocol-related happens on the background thread; the facade posts
// user calls there and runs, on the user's thread, the events that thread queues
// (runtime/shared_state.hpp). Each of its jobs is a class of its own beside it (the list is in
// docs/DESIGN.md, "Layers": src/consumer/).
#pragma once

#include "kgroup/consumer.hpp"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "consumer/cluster_queries.hpp"
#include "consumer/commit_client.hpp"
#include "consumer/consumer_plan.hpp"
#include "consumer/data_reader.hpp"
#include "consumer/listener_mailbox.hpp"
#include "consumer/make_metrics.hpp"
#include "consumer/observability.hpp"
#include "consumer/poll_stats.hpp"
#include "consumer/posted_fetcher.hpp"
#include "consumer/single_thread.hpp"
#include "consumer/telemetry_reporter.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/standalone_coordinator.hpp"
#include "net/cluster.hpp"
#include "net/membership_driver.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

class Consumer::impl {
 public:
  impl(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom);
  ~impl() { stop_thread(); }

  // This Consumer's sink; nullptr for the default. Kept alive by config_.
  LogSink* log_sink() const noexcept { return config_.log_sink().get(); }
  detail::single_thread_check& thread_check() noexcept { return thread_check_; }
  std::chrono::milliseconds default_timeout() const { return default_timeout_; }

  // ---- membership ----
  void subscribe(std::vector<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener);
  void subscribe(std::regex pattern, std::shared_ptr<ConsumerRebalanceListener> listener);
  void subscribe(SubscriptionPattern pattern, std::shared_ptr<ConsumerRebalanceListener> listener);
  void unsubscribe();
  void assign(const std::set<TopicPartition>& tps);
  void unassign() { assign({}); }
  void enforce_rebalance(std::string reason);
  void close(
      std::chrono::milliseconds timeout,
      CloseOptions::GroupMembershipOperation op = CloseOptions::GroupMembershipOperation::default_operation);

  // ---- poll ----
  ConsumerRecords poll(std::chrono::milliseconds timeout);
  void wakeup();

  // ---- offsets ----
  void commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout);
  void commit_sync(std::chrono::milliseconds timeout) {
    commit_sync(reader_.positions_for_commit(), timeout);
  }
  void commit_async(const OffsetMap& offsets, CommitCallback cb);
  void commit_async(CommitCallback cb) { commit_async(reader_.positions_for_commit(), std::move(cb)); }
  OffsetMap committed(const std::set<TopicPartition>& tps, std::chrono::milliseconds timeout);
  std::int64_t position(const TopicPartition& tp, std::chrono::milliseconds timeout);
  std::optional<std::int64_t> current_lag(const TopicPartition& tp) const {
    return reader_.positions().lag(tp);
  }
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch = -1);
  void seek_to(const std::set<TopicPartition>& tps, bool beginning);
  void pause(const std::set<TopicPartition>& tps);
  void resume(const std::set<TopicPartition>& tps);
  std::set<TopicPartition> paused() const { return reader_.positions().paused(); }
  detail::cluster_queries& queries() {
    check_open();
    return *queries_;
  }

  // ---- read-only, any thread ----
  std::set<TopicPartition> assignment() const;
  std::vector<std::string> subscription() const;
  ConsumerGroupMetadata group_metadata() const;
  std::string state() const;
  ConsumerMetrics metrics();
  std::string http_endpoint() const;
  std::optional<std::string> client_instance_id(std::chrono::milliseconds timeout);
  void set_auto_commit_callback(CommitCallback cb) { commits_.set_auto_commit_callback(std::move(cb)); }
  void set_statistics_callback(StatisticsCallback cb) {
    poll_stats_.set_statistics_callback(std::move(cb), statistics_interval_, clock::now());
  }

  // now + timeout without overflow: poll(milliseconds::max()) waits "forever" (capped at a year,
  // far beyond any other timer), a negative timeout does not wait.
  static clock::time_point deadline_after(std::chrono::milliseconds timeout,
                                          clock::time_point now = clock::now()) {
    constexpr auto longest = std::chrono::hours(24 * 365);
    if (timeout <= std::chrono::milliseconds::zero()) return now;
    if (timeout >= longest) return now + longest;
    return now + timeout;
  }

 private:
  using mode = fetch::commit_identity::mode;

  void run();
  void stop_thread();
  template <class F>
  void post(F&& f) {
    asio::post(io_, std::forward<F>(f));
  }
  void check_open() const {
    if (closed_) throw Error(make_error_code(client_errc::closed), "the consumer is closed");
  }
  void check_can_subscribe();
  bool assigned_now(const TopicPartition& tp) const;  // owned by the group, or assign()ed
  // Throws client_errc::illegal_state unless `tp` is assigned (Java's "No current assignment").
  void require_assigned(const TopicPartition& tp, const char* what) const;
  // With enable.auto.commit and a manual assignment: commits the positions of `tps` (Java commits
  // on close() and before assign() changes the assignment). Async unless `deadline` is given.
  void auto_commit_manual(const std::set<TopicPartition>& tps, std::optional<clock::time_point> deadline);

  // poll() (consumer_poll.cpp)
  ConsumerRecords poll_records(clock::time_point deadline);
  // Whether the member may have left the group for a poll timeout since the last poll(): the core
  // says so, or it is about to (the time since the last poll() returned).
  bool may_have_left_group();
  void poll_ended(clock::time_point started, std::size_t records);
  void publish_user_metrics(clock::time_point now);  // with shared_.mutex held
  // Drains queued events on the user thread: listener calls run here and are acknowledged.
  // Without `run_listeners`, listener calls stay queued, in order, for the next poll().
  void run_events(bool throw_fatal, bool run_listeners = true);
  // With shared_.mutex held: the next event run_events() takes (end() when none).
  std::deque<detail::user_event>::iterator next_event(bool run_listeners);
  // A listener call on the user thread: the auto-commit before a revoke, the bookkeeping, and the
  // callback, in the order the kind needs.
  void invoke(const detail::listener_call& call);
  bool wait_left(std::uint64_t left_before, clock::time_point deadline);

  Config config_;
  asio::io_context io_;
  std::shared_ptr<net::cluster> cluster_;
  // The classic driver, or KIP-848's with group.protocol=consumer (chosen at construction).
  std::shared_ptr<net::membership_driver> driver_;
  bool kip848_ = false;
  mutable detail::shared_state shared_;
  std::shared_ptr<fetch::fetcher> fetcher_;
  std::shared_ptr<fetch::commit_identity> who_;
  std::unique_ptr<detail::observability_endpoint> endpoint_;  // after io_: destroyed before it
  // KIP-714 pushes; null with enable.metrics.push=false. Background thread, except
  // client_instance_id() (its own lock).
  std::shared_ptr<detail::telemetry_reporter> telemetry_;
  std::thread thread_;
  std::chrono::milliseconds default_timeout_{60000};
  bool closed_ = false;
  bool closing_ = false;  // close() is under way (listener callbacks may still use the consumer)
  // close()'s deadline while it runs: the auto-commit before its revoke stays within it.
  std::optional<clock::time_point> close_deadline_;
  detail::single_thread_check thread_check_;
  detail::listener_mailbox listeners_{shared_};
  detail::poll_stats poll_stats_;
  detail::posted_fetcher to_fetcher_{[this](std::function<void()> f) { post(std::move(f)); }};
  detail::data_reader reader_{shared_, poll_stats_, to_fetcher_};
  detail::commit_client commits_{shared_, listeners_,
                                 [this](auto call) { to_fetcher_.run(std::move(call)); }};
  std::unique_ptr<detail::cluster_queries> queries_;
  std::set<TopicPartition> manual_;                    // assign()'s partitions; written under shared_.mutex
  std::uint64_t poll_seq_ = 0;                         // poll() calls, for shared_.poll_acked
  std::optional<clock::time_point> last_poll_return_;  // when the last poll() returned
  std::chrono::milliseconds max_poll_interval_{300000};
  bool auto_commit_ = true;
  bool inline_listener_ = false;
  detail::metrics_identity metrics_id_;
  std::chrono::milliseconds statistics_interval_{0};
};

}  // namespace kgroup
