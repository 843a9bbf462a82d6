// The Consumer facade's implementation class (internal). The user-thread side: everything
// protocol-related happens on the background thread (net/group_driver, fetch/fetcher); the
// facade posts user calls there and runs the listener callbacks that thread queues (see
// runtime/shared_state.hpp). Its members are defined by job:
//   consumer.cpp            construction (from consumer_plan.hpp's plan of the Config),
//                           subscribe/assign, close, the background thread
//   consumer_poll.cpp       poll(): events, fetched data through the position table and the
//                           record cursor (src/data), data errors, publishing the user thread's
//                           metrics (poll_stats.hpp measures them)
//   consumer_offsets.cpp    commits, positions, seeks, pause/resume, cluster queries
//   consumer_listeners.cpp  the event loop of poll(): listener calls (their handshake is
//                           listener_mailbox.hpp's), positions, data errors, commit results
#pragma once

#include "kgroup/consumer.hpp"

#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "base/backoff.hpp"
#include "base/log.hpp"
#include "consumer/consumer_plan.hpp"
#include "consumer/listener_mailbox.hpp"
#include "consumer/make_metrics.hpp"
#include "consumer/poll_stats.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/group_observer.hpp"
#include "fetch/standalone_coordinator.hpp"
#include "kgroup_build_config.hpp"
#if KGROUP_WITH_HTTP
#include "http/server.hpp"
#endif
#include "net/cluster.hpp"
#include "net/consumer_group_driver.hpp"
#include "net/group_driver.hpp"
#include "protocol/error_reactions.hpp"
#include "protocol/records.hpp"
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

  void subscribe(std::vector<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener);

  void subscribe(std::regex pattern, std::shared_ptr<ConsumerRebalanceListener> listener);
  void subscribe(SubscriptionPattern pattern, std::shared_ptr<ConsumerRebalanceListener> listener);

  void unsubscribe();

  void assign(const std::set<TopicPartition>& tps);

  void unassign() { assign({}); }

  ConsumerRecords poll(std::chrono::milliseconds timeout);

  // Whether the member may have left the group for a poll timeout since the last poll():
  // the core says so, or it is about to (the time since the last poll() returned).
  bool may_have_left_group();

  // Waits until the background thread handled poll() number `seq`; false if `deadline` (at least
  // a second from now: the round trip is fast, poll(0) must not skip it) passed first.
  bool wait_poll_acked(std::uint64_t seq, clock::time_point deadline);

  // started + timeout without overflow: poll(milliseconds::max()) waits "forever" (capped at a
  // year, far beyond any other timer), a negative timeout does not wait.
  static clock::time_point poll_deadline(clock::time_point started, std::chrono::milliseconds timeout) {
    constexpr auto longest = std::chrono::hours(24 * 365);
    if (timeout <= std::chrono::milliseconds::zero()) return started;
    if (timeout >= longest) return started + longest;
    return started + timeout;
  }

  ConsumerRecords poll_records(clock::time_point deadline);

  // ---- offsets ----

  void commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout);

  void commit_sync(std::chrono::milliseconds timeout) { commit_sync(current_positions(), timeout); }

  void commit_async(const OffsetMap& offsets, CommitCallback cb);

  // The user thread's single-thread check: a public call enters, and leaves
  // when it returns. Calls nest on one thread (a listener inside poll() calling commit_sync());
  // a call from a second thread while one is inside throws client_errc::concurrent_access.
  void enter() {
    const auto me = std::this_thread::get_id();
    if (user_thread_.load(std::memory_order_acquire) == me) {
      ++user_depth_;
      return;
    }
    std::thread::id none;
    if (user_thread_.compare_exchange_strong(none, me, std::memory_order_acq_rel)) {
      last_user_thread_.store(me, std::memory_order_relaxed);
    } else {
      throw Error(make_error_code(client_errc::concurrent_access),
                  "the Consumer is being called from another thread: it is not safe for concurrent use "
                  "(only wakeup() and the read-only assignment(), subscription(), group_metadata(), "
                  "group_state(), metrics() and http_endpoint() may be called from any thread)");
    }
    user_depth_ = 1;
  }
  // Whether the caller may touch the user thread's state: it is inside a call, or it is the
  // thread that made the last one and no other thread is inside.
  bool on_user_thread() const noexcept {
    const auto me = std::this_thread::get_id();
    const auto inside = user_thread_.load(std::memory_order_acquire);
    return inside == me || (inside == std::thread::id{} && last_user_thread_.load(std::memory_order_relaxed) == me);
  }
  void leave() noexcept {
    if (--user_depth_ == 0) user_thread_.store(std::thread::id{}, std::memory_order_release);
  }

  void commit_async(CommitCallback cb) { commit_async(current_positions(), std::move(cb)); }

  OffsetMap committed(const std::set<TopicPartition>& tps, std::chrono::milliseconds timeout);

  std::int64_t position(const TopicPartition& tp, std::chrono::milliseconds timeout);

  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch = -1);

  void seek_to(const std::set<TopicPartition>& tps, bool beginning);

  void pause(const std::set<TopicPartition>& tps);

  void resume(const std::set<TopicPartition>& tps);

  std::set<TopicPartition> paused() const { return positions_.paused(); }

  std::set<TopicPartition> assignment() const {
    std::lock_guard lock(shared_.mutex);
    return mode_ == mode::manual ? manual_ : shared_.owned;
  }

  std::vector<std::string> subscription() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.topics;
  }

  ConsumerGroupMetadata group_metadata() const;

  ConsumerMetrics metrics();

  void set_statistics_callback(StatisticsCallback cb) {
    statistics_cb_ = std::move(cb);
    next_statistics_ = clock::now() + statistics_interval_;
  }

  std::string http_endpoint() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.metrics.http_endpoint;
  }

  std::string state() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.state;
  }

  void enforce_rebalance(std::string reason) {
    check_open();
    post([this, reason = std::move(reason)]() mutable { driver_->enforce_rebalance(std::move(reason)); });
  }

  void wakeup();

  void close(std::chrono::milliseconds timeout);

 private:
  // The embedded HTTP endpoint (observability.http.listen): created and started here, before the
  // background thread runs; it then lives on the background thread's io_context and reads
  // snapshots (make_metrics under the mutex) there. A bad address or a port in use is a
  // configuration error thrown from the constructor.
  void start_http();

  // ---- metrics of the user thread ----

  void poll_started(clock::time_point now);

  void poll_ended(clock::time_point started, std::size_t records);

  // With shared_.mutex held.
  void publish_user_metrics(clock::time_point now);

  fetch::group_identity identity() const;

  // Background thread. Outside a subscription (assign(), or nothing at all) commits and
  // committed() go to the group's coordinator without joining: manual_coordinator_ looks it up.
  void standalone_coordinator(bool failed);

  OffsetMap current_positions() const;

  void drop_current(const TopicPartition& tp) {
    if (const auto* cur = cursor_.partition(); cur && *cur == tp) finish_cursor();
  }

  void finish_cursor();

  // Takes the next usable fetched data, dropping stale ones (revoked, paused, seeked).
  bool next_cursor();

  ConsumerRecords drain();

  // Raises the oldest data-path error of a partition still owned (one per call). Truncations
  // queued together are raised as one LogTruncationError naming each partition and where its
  // log diverged (Java's LogTruncationException).
  void raise_data_error();

  // The fetcher found the log of `e.tp` cut below its prefetch position (a KIP-320 divergence, or
  // its end): applied against the application's position (position_table::cut). At or below the
  // cut the position stays and the data fetched before it is read up to it; past it the position
  // moves back to a divergence (Java's rule), or with auto.offset.reset=none poll() raises and
  // nothing past the cut is returned until a seek; past a log's end the reset policy applies.
  void apply_cut(const detail::position_event& e);

  // Corrupt record data at the partition's position (a CRC mismatch under check.crcs, a batch or
  // record that does not parse): raised from poll() naming the partition and the offset, as Java
  // does. Nothing at or past it is returned or skipped: the position stays, and the fetcher reads
  // from it again, so every poll() raises it until the application seeks past it.
  void corrupt_data(const TopicPartition& tp, std::error_code ec, const char* what);

  // now + timeout, for the blocking calls (a negative timeout: now; no overflow for huge ones).
  static clock::time_point deadline_after(std::chrono::milliseconds timeout) {
    return poll_deadline(clock::now(), timeout);
  }

 public:
  // ---- cluster queries: offsets by time or position, topics and partitions ----

  // Runs `start(promise)` on the background thread and waits for its result until `deadline`
  // (plus a second for the answer to cross threads).
  template <class T, class Start>
  T background_query(Start start, clock::time_point deadline, const std::string& what) {
    check_open();
    auto promise = std::make_shared<std::promise<T>>();
    auto result = promise->get_future();
    post([start = std::move(start), promise]() mutable { start(promise); });
    if (result.wait_until(deadline + std::chrono::seconds(1)) != std::future_status::ready)
      throw Error(make_error_code(client_errc::request_timed_out), what + ": no answer in time");
    return result.get();
  }

  fetch::fetcher::offsets_result query_offsets(std::map<TopicPartition, std::int64_t> timestamps,
                                               std::chrono::milliseconds timeout, const std::string& what);

  std::map<TopicPartition, std::int64_t> offsets_at(const std::set<TopicPartition>& tps, std::int64_t which,
                                                    std::chrono::milliseconds timeout,
                                                    const std::string& what);

  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout);

  // Fresh metadata of `topics` (all when empty), as PartitionInfo lists per existing topic.
  std::map<std::string, std::vector<PartitionInfo>> topic_partitions(
      std::optional<std::vector<std::string>> topics, std::chrono::milliseconds timeout,
      const std::string& what);

  std::optional<std::int64_t> current_lag(const TopicPartition& tp) const { return positions_.lag(tp); }

 private:
  static fetch::commit_map to_commit_map(const OffsetMap& offsets);

  void commit_and_wait(fetch::commit_map offsets, clock::time_point deadline) {
    coordinator_request([this, offsets](std::uint64_t id) { fetcher_->commit(id, offsets); }, deadline,
                        "commit_sync()");
  }

  // Sends a coordinator request through `send(id)` on the background thread and waits for its
  // answer. Coordinator errors (being looked up, moved, loading) are retried after
  // retry.backoff.ms, doubling up to retry.backoff.max.ms, until `deadline`; any other error, or
  // one whose retry would come after the deadline, is thrown.
  template <class Send>
  detail::commit_done coordinator_request(Send send, clock::time_point deadline, const char* what) {
    base::backoff retry(config_.get_ms("retry.backoff.ms"), config_.get_ms("retry.backoff.max.ms"));
    for (;;) {
      const std::uint64_t id = ++next_request_id_;
      post([send, id] { send(id); });
      auto done = wait_request(id, deadline);
      if (!done)
        throw Error(make_error_code(client_errc::request_timed_out),
                    std::string(what) + ": no answer in time");
      if (!done->code) return std::move(*done);
      const auto wait = retry.next();
      if (!data::commit_retriable(done->code) || clock::now() + wait >= deadline) {
        throw Error(done->code, done->message);
      }
      std::this_thread::sleep_for(wait);
    }
  }

  // commit_async(): the request, remembered for its callback (null: a commit nobody awaits, such as
  // a manual assignment's auto-commit, which close() still waits for).
  void send_async_commit(fetch::commit_map m, const OffsetMap& offsets, CommitCallback cb);

  // An async commit's answer: its callback runs (on this thread; what it throws is rethrown by
  // the next poll(), as a listener's is).
  void complete_async_commit(const detail::commit_done& done);

  // Runs the callbacks of async commits numbered up to `up_to`, in order, waiting for the answers
  // still out until `deadline` (Java's commitSync() and close() do the same).
  void finish_async_commits(std::uint64_t up_to, clock::time_point deadline);

  // Throws client_errc::illegal_state unless `tp` is assigned (Java's "No current assignment").
  void require_assigned(const TopicPartition& tp, const char* what) const;

  // `tps`, or every assigned partition when it is empty (seek_to_beginning({}), as Java).
  std::set<TopicPartition> or_all_assigned(const std::set<TopicPartition>& tps) const;

  // With enable.auto.commit and a manual assignment: commits the positions of `tps` (Java commits
  // on close() and before assign() changes the assignment). Async unless `deadline` is given.
  void auto_commit_manual(const std::set<TopicPartition>& tps, std::optional<clock::time_point> deadline);

  // Waits for the commit_done event `id`, leaving every other event queued.
  std::optional<detail::commit_done> wait_request(std::uint64_t id, clock::time_point deadline);

  void run();

  template <class F>
  void post(F&& f) {
    asio::post(io_, std::forward<F>(f));
  }

  void stop_thread();

  void check_can_subscribe();

  void check_open() const {
    if (closed_) throw Error(make_error_code(client_errc::closed), "the consumer is closed");
  }

  // User-thread bookkeeping of an ownership change: positions_, cursor_ and the consumed positions.
  // Always on the user thread (with rebalance.listener.thread=heartbeat it arrives as a
  // bookkeeping-only event after the callback ran on the background thread).
  void bookkeep(const detail::listener_call& call);

  // A listener call on the user thread: the auto-commit before a revoke, the bookkeeping, and the
  // callback (listeners_), in the order the kind needs.
  void invoke(const detail::listener_call& call);

  // Drains queued events on the user thread: listener calls run here and are acknowledged.
  // Without `run_listeners`, listener calls stay queued, in order, for the next poll().
  void run_events(bool throw_fatal, bool run_listeners = true);

  // With shared_.mutex held: the next event run_events() takes (end() when none).
  std::deque<detail::user_event>::iterator next_event(bool run_listeners);

  bool wait_left(std::uint64_t left_before, clock::time_point deadline);

  Config config_;
  asio::io_context io_;
#if KGROUP_WITH_HTTP
  std::unique_ptr<http::server> http_;                     // after io_: destroyed before it
  std::shared_ptr<fetch::group_observer> group_observer_;  // what GET /group shows; with http_ only
#endif
  std::shared_ptr<net::cluster> cluster_;
  // The classic driver, or KIP-848's with group.protocol=consumer (chosen at construction).
  std::shared_ptr<net::membership_driver> driver_;
  bool kip848_ = false;
  mutable detail::shared_state shared_;
  std::thread thread_;
  std::chrono::milliseconds default_timeout_{60000};

 public:
  std::chrono::milliseconds default_timeout() const {
    return default_timeout_;
  }

 private:
  bool closed_ = false;
  bool closing_ = false;  // close() is under way (listener callbacks may still use the consumer)
  // close()'s deadline while it runs: the auto-commit before its revoke stays within it.
  std::optional<clock::time_point> close_deadline_;
  // The thread inside a public call, and how deeply (see enter()); depth: that thread only.
  std::atomic<std::thread::id> user_thread_{};
  std::atomic<std::thread::id> last_user_thread_{};  // the last thread that entered
  int user_depth_ = 0;
  // The user half of the listener handshake: the listener, its first error, late cancels.
  detail::listener_mailbox listeners_{shared_};
  // Data path, user-thread side.
  std::shared_ptr<fetch::fetcher> fetcher_;
  data::position_table positions_;
  // Positions after the records the last poll() returned; they become shared_.consumed (what
  // auto-commit commits) when poll() is called again.
  std::map<TopicPartition, detail::epoch_offset> returned_;
  data::record_cursor cursor_{{}};         // rebuilt with the configured options in the constructor
  std::deque<detail::data_error> pending_data_errors_;  // raised by poll(), one call each
  std::map<std::uint64_t, std::pair<OffsetMap, CommitCallback>> async_commits_;
  std::uint64_t next_request_id_ = 0;
  std::uint64_t poll_seq_ = 0;                         // poll() calls, for shared_.poll_acked
  std::optional<clock::time_point> last_poll_return_;  // when the last poll() returned
  std::chrono::milliseconds max_poll_interval_{300000};
  std::size_t max_poll_records_ = 500;
  bool auto_commit_ = true;
  bool read_committed_ = false;
  bool inline_listener_ = false;
  // Manual assignment. mode_ is written by the user thread and read by identity() on the
  // background thread (hence atomic); manual_ is written by the user thread under shared_.mutex;
  // manual_coordinator_ is background-thread only (made in the constructor, before the thread).
  enum class mode { none, subscribed, manual };
  std::atomic<mode> mode_{mode::none};
  std::set<TopicPartition> manual_;
  std::unique_ptr<fetch::standalone_coordinator> manual_coordinator_;
  // Metrics, user-thread side (published into shared_.metrics).
  detail::metrics_identity metrics_id_;
  detail::poll_stats poll_stats_;
  StatisticsCallback statistics_cb_;
  std::chrono::milliseconds statistics_interval_{0};
  clock::time_point next_statistics_{};
};

}  // namespace kgroup
