// The Consumer facade: the user-thread side. Everything protocol-related happens on the
// background thread (net/group_driver); this file posts user calls there and runs listener
// callbacks that the background thread queues (see runtime/shared_state.hpp).
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
#include "consumer/make_metrics.hpp"
#include "consumer/window_stat.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/group_observer.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "kgroup_build_config.hpp"
#if KGROUP_WITH_HTTP
#include "http/server.hpp"
#endif
#include "net/cluster.hpp"
#include "net/group_driver.hpp"
#include "protocol/records.hpp"
#include "runtime/shared_state.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

class Consumer::impl {
 public:
  impl(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom) : config_(config) {
    // What the constructor logs goes to this Consumer's sink too (the thread's scope: see run()).
    const detail::log_scope log_scope(log_sink());
    config_.validate();
    // The effective configuration, once (what was set explicitly; the rest is the defaults).
    logger()->info("consumer configuration: {}", config_.to_string());
    // group.id is optional: manual assignment (assign()) works without one; subscribe() and
    // commits need it.
    group::member_options mo;
    mo.group_id = config_.get("group.id");
    if (auto id = config_.get("group.instance.id"); !id.empty()) mo.group_instance_id = id;
    if (auto rack = config_.get("client.rack"); !rack.empty()) mo.rack = rack;
    mo.session_timeout = config_.get_ms("session.timeout.ms");
    mo.heartbeat_interval = config_.get_ms("heartbeat.interval.ms");
    mo.max_poll_interval = config_.get_ms("max.poll.interval.ms");
    mo.retry_backoff = config_.get_ms("retry.backoff.ms");
    mo.retry_backoff_max = config_.get_ms("retry.backoff.max.ms");
    for (const auto& name : config_.get_list("partition.assignment.strategy")) {
      std::shared_ptr<PartitionAssignor> a;
      for (const auto& c : custom) {
        if (c && c->name() == name) a = c;
      }
      if (!a) a = make_assignor(name);
      if (!a) {
        throw Error(
            make_error_code(client_errc::invalid_config),
            fmt::format("partition.assignment.strategy: unknown assignor '{}' (built-ins: range, roundrobin, "
                        "sticky, cooperative-sticky; or pass a custom PartitionAssignor)",
                        name));
      }
      mo.assignors.push_back(std::move(a));
    }
    if (mo.assignors.empty()) {
      throw Error(make_error_code(client_errc::invalid_config),
                  "partition.assignment.strategy: no assignor given");
    }
    // The rebalance protocol is the best one every configured assignor supports (as in Java):
    // "range,cooperative-sticky" stays eager until range is removed.
    bool all_cooperative = true;
    for (const auto& a : mo.assignors) {
      auto p = a->supported_protocols();
      if (std::find(p.begin(), p.end(), RebalanceProtocol::cooperative) == p.end()) all_cooperative = false;
    }
    mo.protocol = all_cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager;

    mo.request_timeout = config_.get_ms("request.timeout.ms");
    mo.exclude_internal_topics = config_.get_bool("exclude.internal.topics");
    net::group_driver_options dopts;
    dopts.member = mo;
    dopts.request_timeout = mo.request_timeout;
    if (config_.get("rebalance.listener.thread") == "heartbeat") {
      dopts.run_listener_inline = [this](const detail::listener_call& call) { run_inline(call); };
      inline_listener_ = true;
    }
    auto copts = net::cluster_options::from_config(config_);
    shared_.metrics.wire = copts.connection.wire;
    if (copts.connection.security) {
      // Refused credentials and untrusted brokers are fatal: poll() raises them.
      copts.connection.security->on_fatal = [this](std::error_code ec, const std::string& what) {
        shared_.push(detail::fatal_error{ec, what});
      };
    }
    cluster_ = std::make_shared<net::cluster>(io_, std::move(copts));

    fetch::fetcher_options fo;
    fo.group_id = mo.group_id;
    fo.fetch_min_bytes = static_cast<std::int32_t>(config_.get_int("fetch.min.bytes"));
    fo.fetch_max_bytes = static_cast<std::int32_t>(config_.get_int("fetch.max.bytes"));
    fo.fetch_max_wait_ms = static_cast<std::int32_t>(config_.get_int("fetch.max.wait.ms"));
    fo.max_partition_fetch_bytes = static_cast<std::int32_t>(config_.get_int("max.partition.fetch.bytes"));
    fo.isolation_level = config_.get("isolation.level") == "read_committed" ? 1 : 0;
    fo.auto_offset_reset = config_.get("auto.offset.reset");
    fo.buffer_max_bytes = static_cast<std::size_t>(config_.get_int("queued.max.messages.kbytes")) * 1024;
    fo.auto_commit = config_.get_bool("enable.auto.commit");
    fo.auto_commit_interval = config_.get_ms("auto.commit.interval.ms");
    fo.retry_backoff = mo.retry_backoff;
    fo.request_timeout = config_.get_ms("request.timeout.ms");
    fo.client_rack = mo.rack.value_or("");
    fo.preferred_replica_ttl = config_.get_ms("metadata.max.age.ms");
    auto_commit_ = fo.auto_commit;
    read_committed_ = fo.isolation_level == 1;
    max_poll_records_ = static_cast<std::size_t>(config_.get_int("max.poll.records"));
    max_poll_interval_ = mo.max_poll_interval;
    cursor_ = data::record_cursor({.read_committed = read_committed_, .verify_crc = config_.get_bool("check.crcs")});
    fo.coordinator_unusable = [this](bool failed) { standalone_coordinator(failed); };
    // Background thread, like the driver it reaches (created below, before any commit).
    fo.commit_error = [this](std::int32_t generation, std::int16_t c) {
      driver_->commit_failed(generation, c);
    };
    fetcher_ = std::make_shared<fetch::fetcher>(io_, cluster_, fo, shared_, [this] { return identity(); });
    dopts.on_assignment_changed = [f = fetcher_](const std::set<TopicPartition>& owned) {
      f->assign(owned);
    };
    driver_ = std::make_shared<net::group_driver>(io_, cluster_, std::move(dopts), shared_);
    default_timeout_ = config_.get_ms("default.api.timeout.ms");
    metrics_id_.client_id = config_.get("client.id");
    metrics_id_.group_id = mo.group_id;
    metrics_id_.group_instance_id = mo.group_instance_id;
    metrics_id_.protocol = mo.protocol == RebalanceProtocol::cooperative ? "cooperative" : "eager";
    metrics_id_.max_poll_interval_ms = mo.max_poll_interval.count();
    metrics_id_.wall_minus_steady_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count() -
        std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
    statistics_interval_ = config_.get_ms("statistics.interval.ms");
    start_http();
    thread_ = std::thread([this] {
      // Everything on the background thread (connections, drivers, the HTTP endpoint, listeners
      // with rebalance.listener.thread=heartbeat) logs for this Consumer.
      const detail::log_scope log_scope(log_sink());
      run();
    });
  }

  ~impl() { stop_thread(); }

  // This Consumer's sink; nullptr for the default. Kept alive by config_.
  LogSink* log_sink() const noexcept { return config_.log_sink().get(); }

  void subscribe(std::vector<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener) {
    check_open();
    // Arguments first: a refused subscribe() changes nothing (before, it left the mode subscribed).
    for (const auto& t : topics) {
      if (t.empty()) throw Error(make_error_code(client_errc::invalid_argument), "subscribe(): empty topic name");
    }
    check_can_subscribe();
    set_listener(std::move(listener));
    post([this, topics = std::move(topics)]() mutable { driver_->subscribe(std::move(topics)); });
  }

  void subscribe(std::regex pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
    check_open();
    check_can_subscribe();
    set_listener(std::move(listener));
    post([this, pattern = std::move(pattern)]() mutable { driver_->subscribe_pattern(std::move(pattern)); });
  }

  void unsubscribe() {
    check_open();
    if (mode_ == mode::manual) {
      unassign();
      return;
    }
    std::uint64_t left_before;
    {
      std::lock_guard lock(shared_.mutex);
      left_before = shared_.left_count;
    }
    post([this] { driver_->unsubscribe(); });
    // Still subscribed until the leave is done: the auto-commit before the revoke and commits
    // inside on_partitions_revoked carry the live generation and member id (issue 13, item 3).
    wait_left(left_before, clock::now() + default_timeout_);
    mode_ = mode::none;
    rethrow_listener_error();
  }

  void assign(const std::set<TopicPartition>& tps) {
    check_open();
    if (mode_ == mode::subscribed) {
      throw Error(
          make_error_code(client_errc::illegal_state),
          "assign() while subscribed: subscribe() and assign() exclude each other; call unsubscribe() first");
    }
    for (const auto& tp : tps) {
      if (tp.topic.empty() || tp.partition < 0) {
        throw Error(make_error_code(client_errc::invalid_argument),
                    "assign(): invalid topic partition (topic '" + tp.topic +
                        "', partition " + std::to_string(tp.partition) + ")");
      }
    }
    mode_ = tps.empty() ? mode::none : mode::manual;
    for (const auto& tp : positions_.retain(tps)) drop_current(tp);
    for (const auto& tp : tps) positions_.own(tp);
    {
      std::lock_guard lock(shared_.mutex);
      manual_ = tps;
      for (auto it = shared_.consumed.begin(); it != shared_.consumed.end();) {
        it = tps.count(it->first) ? std::next(it) : shared_.consumed.erase(it);
      }
      std::erase_if(returned_, [&](const auto& e) { return !tps.count(e.first); });
    }
    post([this, tps] {
      if (!tps.empty()) standalone_coordinator(false);
      fetcher_->assign(tps, /*manual=*/true);
    });
  }

  void unassign() { assign({}); }

  ConsumerRecords poll(std::chrono::milliseconds timeout) {
    check_open();
    const auto started = clock::now();
    poll_started(started);
    // However poll() ends (records, timeout, an exception), max.poll.interval.ms runs from then.
    struct returned_guard {
      impl* self;
      ~returned_guard() {
        self->last_poll_return_ = clock::now();
        self->post([s = self] { s->driver_->poll_returned(); });
      }
    } guard{this};
    ConsumerRecords out = poll_records(poll_deadline(started, timeout));
    poll_ended(started, out.size());
    return out;
  }

  // Whether the member may have left the group for a poll timeout since the last poll():
  // the core says so, or it is about to (the time since the last poll() returned).
  bool may_have_left_group() {
    if (last_poll_return_ && clock::now() - *last_poll_return_ >= max_poll_interval_) return true;
    std::lock_guard lock(shared_.mutex);
    return shared_.state == "poll_timed_out";
  }

  // Waits until the background thread handled poll() number `seq`; false if `deadline` (at least
  // a second from now: the round trip is fast, poll(0) must not skip it) passed first.
  bool wait_poll_acked(std::uint64_t seq, clock::time_point deadline) {
    deadline = std::max(deadline, clock::now() + std::chrono::seconds(1));
    std::unique_lock lock(shared_.mutex);
    return shared_.cv.wait_until(lock, deadline, [&] { return shared_.poll_acked >= seq; });
  }

  // started + timeout without overflow: poll(milliseconds::max()) waits "forever" (capped at a
  // year, far beyond any other timer), a negative timeout does not wait.
  static clock::time_point poll_deadline(clock::time_point started, std::chrono::milliseconds timeout) {
    constexpr auto longest = std::chrono::hours(24 * 365);
    if (timeout <= std::chrono::milliseconds::zero()) return started;
    if (timeout >= longest) return started + longest;
    return started + timeout;
  }

  ConsumerRecords poll_records(clock::time_point deadline) {
    if (!returned_.empty()) {
      std::lock_guard lock(shared_.mutex);
      for (const auto& [tp, pos] : returned_) shared_.consumed[tp] = pos;
      returned_.clear();
    }
    const std::uint64_t seq = ++poll_seq_;
    post([this, seq] {
      driver_->poll_called();
      // Everything poll_called() queued (the loss after a poll timeout) is in `events` now.
      {
        std::lock_guard lock(shared_.mutex);
        shared_.poll_acked = seq;
      }
      shared_.cv.notify_all();
    });
    // After a poll timeout the partitions are lost before any record is returned (issue 13, item
    // 2): wait until the background thread has queued the loss, then run it below. Only then, so
    // that a busy poll loop does not pay a thread round trip per call.
    if (may_have_left_group() && !wait_poll_acked(seq, deadline)) return ConsumerRecords{};
    for (;;) {
      run_events(/*throw_fatal=*/true);
      rethrow_listener_error();
      raise_data_error();
      {
        std::lock_guard lock(shared_.mutex);
        if (shared_.woken) {
          shared_.woken = false;
          throw Error(make_error_code(client_errc::woken_up));
        }
      }
      ConsumerRecords records = drain();
      if (!records.empty()) return records;
      std::unique_lock lock(shared_.mutex);
      if (!shared_.events.empty() || (!shared_.fetched.empty())) continue;
      if (clock::now() >= deadline) break;
      shared_.cv.wait_until(lock, deadline, [this] {
        return !shared_.events.empty() || !shared_.fetched.empty() || shared_.woken;
      });
    }
    return ConsumerRecords{};
  }

  // ---- offsets ----

  void commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout) {
    check_open();
    const fetch::commit_map m = to_commit_map(offsets);
    commit_and_wait(m, deadline_after(timeout));
  }

  void commit_sync(std::chrono::milliseconds timeout) { commit_sync(current_positions(), timeout); }

  void commit_async(const OffsetMap& offsets, CommitCallback cb) {
    check_open();
    const fetch::commit_map m = to_commit_map(offsets);
    const std::uint64_t id = ++next_request_id_;
    async_commits_[id] = {offsets, std::move(cb)};
    post([this, id, m]() mutable { fetcher_->commit(id, std::move(m)); });
  }

  void commit_async(CommitCallback cb) { commit_async(current_positions(), std::move(cb)); }

  OffsetMap committed(const std::set<TopicPartition>& tps, std::chrono::milliseconds timeout) {
    check_open();
    const auto done =
        coordinator_request([this, tps](std::uint64_t id) { fetcher_->fetch_committed(id, tps); },
                            deadline_after(timeout), "committed()");
    OffsetMap out;
    for (const auto& [tp, om] : done.offsets)
      out[tp] = {om.offset, om.metadata, om.epoch >= 0 ? std::optional<std::int32_t>(om.epoch) : std::nullopt};
    return out;
  }

  std::int64_t position(const TopicPartition& tp, std::chrono::milliseconds timeout) {
    check_open();
    const auto deadline = deadline_after(timeout);
    for (;;) {
      // Positions, errors and commit results only: listener callbacks (and the auto-commit before
      // a revoke) run inside poll(), close() and unsubscribe(), never in the middle of the
      // application's batch (issue 13, item 5).
      run_events(/*throw_fatal=*/true, /*run_listeners=*/false);
      raise_data_error();
      if (auto p = positions_.position(tp)) return p->offset;
      {
        std::lock_guard lock(shared_.mutex);
        if (!shared_.owned.count(tp) && !manual_.count(tp)) {
          throw Error(make_error_code(client_errc::illegal_state), "position(): " + tp.topic + "-" +
                                                                       std::to_string(tp.partition) +
                                                                       " is not assigned to this consumer");
        }
      }
      std::unique_lock lock(shared_.mutex);
      if (clock::now() >= deadline)
        throw Error(make_error_code(client_errc::request_timed_out), "position(): not known in time");
      shared_.cv.wait_until(lock, std::min(deadline, clock::now() + std::chrono::milliseconds(100)), [this] {
        return std::any_of(shared_.events.begin(), shared_.events.end(), [](const detail::user_event& x) {
          return !std::holds_alternative<detail::listener_call>(x);
        });
      });
    }
  }

  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch = -1) {
    check_open();
    if (offset < 0) throw Error(make_error_code(client_errc::invalid_argument),
                                   "seek(): negative offset " + std::to_string(offset));
    positions_.seek(tp, offset, epoch);
    drop_current(tp);
    {
      // What auto-commit commits is the seek target from now on (Java's allConsumed(): the
      // position): after a seek back, the records past the target are read again, never skipped.
      std::lock_guard lock(shared_.mutex);
      if (shared_.consumed.count(tp) || returned_.count(tp)) shared_.consumed[tp] = {offset, epoch};
      returned_.erase(tp);
    }
    post([this, tp, offset, epoch] { fetcher_->seek(tp, offset, epoch); });
  }

  void seek_to(const std::set<TopicPartition>& tps, bool beginning) {
    check_open();
    for (const auto& tp : tps) {
      positions_.seek_to(tp);
      drop_current(tp);
    }
    post([this, tps, beginning] { fetcher_->seek_to(tps, beginning); });
  }

  void pause(const std::set<TopicPartition>& tps) {
    check_open();
    for (const auto& tp : tps) {
      positions_.pause(tp);
      drop_current(tp);
    }
    post([this, tps] { fetcher_->pause(tps); });
  }

  void resume(const std::set<TopicPartition>& tps) {
    check_open();
    std::map<TopicPartition, detail::epoch_offset> positions;
    for (const auto& tp : tps) {
      if (auto p = positions_.resume(tp)) positions[tp] = *p;
    }
    post([this, positions] { fetcher_->resume(positions); });
  }

  std::set<TopicPartition> paused() const { return positions_.paused(); }

  std::set<TopicPartition> assignment() const {
    std::lock_guard lock(shared_.mutex);
    return mode_ == mode::manual ? manual_ : shared_.owned;
  }

  std::vector<std::string> subscription() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.topics;
  }

  ConsumerGroupMetadata group_metadata() const {
    std::lock_guard lock(shared_.mutex);
    ConsumerGroupMetadata m;
    m.group_id = config_.get("group.id");
    m.member_id = shared_.member_id;
    m.generation_id = shared_.generation;
    if (auto id = config_.get("group.instance.id"); !id.empty()) m.group_instance_id = id;
    return m;
  }

  ConsumerMetrics metrics() {
    const auto now = clock::now();
    std::lock_guard lock(shared_.mutex);
    publish_user_metrics(now);
    return detail::make_metrics(shared_, metrics_id_, now, std::chrono::system_clock::now());
  }

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

  void wakeup() {
    {
      std::lock_guard lock(shared_.mutex);
      shared_.woken = true;
    }
    shared_.cv.notify_all();
  }

  void close(std::chrono::milliseconds timeout) {
    // Callbacks that run inside close() (on_partitions_revoked committing its offsets) may still
    // call the consumer; it counts as closed once the background thread is gone.
    if (closed_ || closing_) return;
    closing_ = true;
    const auto deadline = clock::now() + timeout;
    std::uint64_t left_before;
    {
      std::lock_guard lock(shared_.mutex);
      left_before = shared_.left_count;
    }
    post([this] { driver_->close(); });
    if (!wait_left(left_before, deadline)) {
      logger()->warn("group '{}': close() timed out after {} ms before leaving the group cleanly",
                     config_.get("group.id"), timeout.count());
    }
    stop_thread();
    closed_ = true;
    rethrow_listener_error();
  }

 private:
  // The embedded HTTP endpoint (observability.http.listen): created and started here, before the
  // background thread runs; it then lives on the background thread's io_context and reads
  // snapshots (make_metrics under the mutex) there. A bad address or a port in use is a
  // configuration error thrown from the constructor.
  void start_http() {
    const std::string listen = config_.get("observability.http.listen");
    if (listen.empty()) return;
#if !KGROUP_WITH_HTTP
    throw Error(make_error_code(client_errc::invalid_config),
                "observability.http.listen: this kgroup was built without the HTTP endpoint (KGROUP_HTTP=OFF)");
#else
    std::string why;
    if (!http::parse_listen_address(listen, why)) {
      throw Error(make_error_code(client_errc::invalid_config), "observability.http.listen: " + why);
    }
    http::server_options so;
    so.listen = listen;
    // GET /group: the whole group's view, gathered on this thread only while it is asked for.
    fetch::group_observer_options go;
    go.group_id = config_.get("group.id");
    go.request_timeout = std::min(config_.get_ms("request.timeout.ms"), std::chrono::milliseconds(5000));
    group_observer_ =
        std::make_shared<fetch::group_observer>(io_, cluster_, fetcher_, go, [this] { return identity(); });
    so.group_view = [o = group_observer_] { return o->view(); };
    http_ = std::make_unique<http::server>(io_, so, [this] {
      std::lock_guard lock(shared_.mutex);
      return detail::make_metrics(shared_, metrics_id_, clock::now(), std::chrono::system_clock::now());
    });
    if (auto ec = http_->start()) {
      http_.reset();
      throw Error(make_error_code(client_errc::invalid_config),
                  "observability.http.listen: cannot listen on " + listen + ": " + ec.message());
    }
    std::lock_guard lock(shared_.mutex);
    shared_.metrics.http_endpoint = http_->endpoint();
    logger()->info("observability endpoint on http://{}/ (/metrics, /status, /group)", http_->endpoint());
#endif
  }

  // ---- metrics of the user thread ----

  void poll_started(clock::time_point now) {
    if (last_poll_start_) {
      between_polls_.record(now, std::chrono::duration<double, std::milli>(now - *last_poll_start_).count());
      between_polls_hist_.observe(std::chrono::duration<double>(now - *last_poll_start_).count());
    }
    last_poll_start_ = now;
    std::lock_guard lock(shared_.mutex);
    shared_.metrics.last_poll = now;
  }

  void poll_ended(clock::time_point started, std::size_t records) {
    const auto now = clock::now();
    if (prev_poll_start_) {
      // Java's poll-idle-ratio: the share of the time since the previous poll() began that was
      // spent waiting inside this one.
      const double cycle = std::chrono::duration<double>(now - *prev_poll_start_).count();
      if (cycle > 0) idle_ratio_.record(now, std::chrono::duration<double>(now - started).count() / cycle);
    }
    prev_poll_start_ = started;
    records_total_ += static_cast<std::int64_t>(records);
    records_window_.record(now, static_cast<double>(records));
    if (pending_bytes_ > 0) {
      bytes_total_ += pending_bytes_;
      bytes_window_.record(now, static_cast<double>(pending_bytes_));
      pending_bytes_ = 0;
    }
    if (now - last_publish_ >= std::chrono::milliseconds(100)) {
      std::lock_guard lock(shared_.mutex);
      publish_user_metrics(now);
    }
    if (statistics_cb_ && statistics_interval_.count() > 0 && now >= next_statistics_) {
      next_statistics_ = now + statistics_interval_;
      auto snapshot = metrics();
      try {
        statistics_cb_(snapshot);
      } catch (const std::exception& e) {
        logger()->warn("statistics callback threw: {}", e.what());
      } catch (...) {
        logger()->warn("statistics callback threw");
      }
    }
  }

  // With shared_.mutex held.
  void publish_user_metrics(clock::time_point now) {
    last_publish_ = now;
    auto& m = shared_.metrics;
    m.partitions.clear();
    const bool manual = mode_ == mode::manual;
    for (const auto& tp : manual ? manual_ : shared_.owned) {
      auto& out = m.partitions[tp];
      if (const auto* p = positions_.find(tp)) {
        out.position = p->position;
        out.high_watermark = p->high_watermark;
        out.replica = p->replica;
        out.log_start_offset = p->log_start_offset;
        out.paused = p->paused;
      }
    }
    m.records_total = records_total_;
    m.bytes_total = bytes_total_;
    m.records_rate = records_window_.rate(now);
    m.bytes_rate = bytes_window_.rate(now);
    m.between_poll_avg_ms = between_polls_.avg(now);
    m.between_poll_max_ms = between_polls_.max(now);
    m.between_poll_hist = between_polls_hist_;
    m.idle_ratio_avg = idle_ratio_.avg(now);
  }

  // User-thread view of one owned partition.
  fetch::group_identity identity() const {
    // Runs on the background thread (the fetcher asks it), where the core lives.
    fetch::group_identity id;
    id.group_mode = !config_.get("group.id").empty();
    if (mode_ != mode::subscribed) {
      // Manual assignment (or none): commits carry generation -1 and no member id, as Java's do.
      id.coordinator = manual_coordinator_.node();
      id.stable = true;
      return id;
    }
    static_cast<group::standing&>(id) = driver_->core().standing();
    id.subscribed = true;
    return id;
  }

  // Background thread. Outside a subscription (assign(), or nothing at all) commits and
  // committed() go to the group's coordinator without joining: it is looked up on demand, and
  // again once the one in use stops answering as coordinator (it moved, or its broker is down).
  void standalone_coordinator(bool failed) {
    if (mode_ == mode::subscribed) return;  // the membership core finds the group's coordinator
    if (failed && manual_coordinator_.known()) manual_coordinator_.forget();
    const std::string group = config_.get("group.id");
    if (group.empty() || !manual_coordinator_.start()) return;
    cluster_->find_coordinator(group, config_.get_ms("request.timeout.ms"),
                               [this](std::error_code ec, std::int32_t node) {
                                 if (ec) {
                                   manual_coordinator_.forget();
                                 } else {
                                   manual_coordinator_.found(node);
                                 }
                                 fetcher_->wake();
                               });
  }

  OffsetMap current_positions() const {
    OffsetMap out;
    for (const auto& [tp, p] : positions_.positions())
      out[tp] = {p.offset, "", p.epoch >= 0 ? std::optional<std::int32_t>(p.epoch) : std::nullopt};
    return out;
  }

  void drop_current(const TopicPartition& tp) {
    if (const auto* cur = cursor_.partition(); cur && *cur == tp) finish_cursor();
  }

  void finish_cursor() {
    if (!cursor_.open()) return;
    const std::size_t bytes = cursor_.finish();
    {
      std::lock_guard lock(shared_.mutex);
      shared_.buffered_bytes -= std::min(shared_.buffered_bytes, bytes);
    }
    post([this] { fetcher_->wake(); });
  }

  // Takes the next usable fetched data, dropping stale ones (revoked, paused, seeked).
  bool next_cursor() {
    for (;;) {
      detail::fetched_data d;
      {
        std::lock_guard lock(shared_.mutex);
        if (shared_.fetched.empty()) return false;
        d = std::move(shared_.fetched.front());
        shared_.fetched.pop_front();
      }
      const auto fit = positions_.fit(d);
      if (fit != data::fetched_fit::usable) {
        std::lock_guard lock(shared_.mutex);
        // It may only look stale because the events that make it usable are still queued: the
        // background thread queues a partition's assignment (listener call) and its position
        // (position_event) before it fetches, but a Fetch answer can arrive after poll() ran the
        // events and before this drain() reaches it. Dropping it then stalled the partition for
        // good (the fetcher had moved past it; seen in the CLI tests as partitions never read).
        // So it goes back to the front and this drain() ends; poll() runs the events and drains
        // again. Data still unusable with no such event queued is stale (revoked, paused,
        // seeked) and dropped.
        const bool events_pending =
            std::any_of(shared_.events.begin(), shared_.events.end(), [](const detail::user_event& e) {
              return std::holds_alternative<detail::position_event>(e) ||
                     std::holds_alternative<detail::listener_call>(e);
            });
        if (events_pending) {
          shared_.fetched.push_front(std::move(d));
          return false;
        }
        shared_.buffered_bytes -= std::min(shared_.buffered_bytes, d.bytes);
        logger()->debug("{}-{}: fetched data from offset {} dropped ({})", d.tp.topic, d.tp.partition,
                        d.fetch_offset, data::to_string(fit));
        // The fetcher stops while the buffer is full and only the user thread wakes it: freeing
        // space by dropping must wake it too, as finish_cursor() does.
        post([this] { fetcher_->wake(); });
        continue;
      }
      positions_.note_fetched(d, read_committed_);
      pending_bytes_ += static_cast<std::int64_t>(d.bytes);
      cursor_.start(std::make_shared<detail::fetched_data>(std::move(d)));
      return true;
    }
  }

  ConsumerRecords drain() {
    data::poll_batch batch;
    while (batch.records.size() < max_poll_records_) {
      if (!cursor_.open() && !next_cursor()) break;
      const auto tp = *cursor_.partition();
      const auto stop = cursor_.read(batch, max_poll_records_, positions_);
      if (stop == data::record_cursor::stop::full) break;
      if (stop == data::record_cursor::stop::corrupt) corrupt_data(tp, cursor_.error(), cursor_.error_what());
      finish_cursor();
    }
    // Committable by auto-commit only from the next poll() on: the application processes these
    // records before it polls again (Java's at-least-once rule for auto-commit).
    for (const auto& [tp, pos] : batch.advanced) returned_[tp] = pos;
    return ConsumerRecords(std::move(batch.records), std::move(batch.owners));
  }

  // Raises the oldest data-path error of a partition still owned (one per call). Truncations
  // queued together are raised as one LogTruncationError naming each partition and where its
  // log diverged (Java's LogTruncationException).
  void raise_data_error() {
    while (!pending_data_errors_.empty()) {
      auto e = std::move(pending_data_errors_.front());
      pending_data_errors_.pop_front();
      if (!positions_.owns(e.tp)) continue;  // given up since: nothing to report
      const auto truncation = make_error_code(client_errc::log_truncation);
      if (e.code != truncation) throw Error(e.code, e.message);
      std::map<TopicPartition, OffsetAndMetadata> divergent;
      std::string message = e.message;
      auto add = [&](const detail::data_error& d) {
        if (d.divergent_offset < 0) return;
        divergent[d.tp] = {d.divergent_offset, "",
                           d.divergent_epoch >= 0 ? std::optional<std::int32_t>(d.divergent_epoch) : std::nullopt};
      };
      add(e);
      for (auto it = pending_data_errors_.begin(); it != pending_data_errors_.end();) {
        if (it->code != truncation || !positions_.owns(it->tp)) {
          ++it;
          continue;
        }
        add(*it);
        message += "; " + it->message;
        it = pending_data_errors_.erase(it);
      }
      throw LogTruncationError(message, std::move(divergent));
    }
  }

  // Corrupt record data at the partition's position (a CRC mismatch under check.crcs, a batch or
  // record that does not parse): raised from poll() naming the partition and the offset, as Java
  // does. Nothing at or past it is returned or skipped: the position stays, and the fetcher reads
  // from it again, so every poll() raises it until the application seeks past it.
  void corrupt_data(const TopicPartition& tp, std::error_code ec, const char* what) {
    const auto p = positions_.position(tp).value_or(detail::epoch_offset{});
    const std::string message = "corrupt " + std::string(what) + " in " + tp.topic + "-" +
                                std::to_string(tp.partition) + " at offset " + std::to_string(p.offset) + ": " +
                                ec.message() + "; seek() past it to skip it";
    logger()->error("{}", message);
    pending_data_errors_.push_back({tp, make_error_code(client_errc::corrupt_record), message});
    post([this, tp, p] { fetcher_->refetch(tp, p.offset, p.epoch); });
  }

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
                                               std::chrono::milliseconds timeout, const std::string& what) {
    if (timestamps.empty()) return {};
    const auto deadline = deadline_after(timeout);
    return background_query<fetch::fetcher::offsets_result>(
        [this, timestamps = std::move(timestamps), deadline, what](auto promise) mutable {
          fetcher_->query_offsets(std::move(timestamps), deadline,
                                  [promise, what](std::error_code ec, const std::string& message,
                                                  fetch::fetcher::offsets_result r) {
                                    if (ec)
                                      promise->set_exception(std::make_exception_ptr(Error(ec, what + ": " + message)));
                                    else
                                      promise->set_value(std::move(r));
                                  });
        },
        deadline, what);
  }

  std::map<TopicPartition, std::int64_t> offsets_at(const std::set<TopicPartition>& tps, std::int64_t which,
                                                     std::chrono::milliseconds timeout, const std::string& what) {
    std::map<TopicPartition, std::int64_t> want;
    for (const auto& tp : tps) want[tp] = which;
    std::map<TopicPartition, std::int64_t> out;
    for (const auto& [tp, r] : query_offsets(std::move(want), timeout, what)) out[tp] = r.first;
    return out;
  }

  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout) {
    for (const auto& [tp, ts] : timestamps) {
      if (ts < 0)
        throw Error(make_error_code(client_errc::invalid_argument),
                    "offsets_for_times(): negative timestamp " + std::to_string(ts) + " for " + tp.topic + "-" +
                        std::to_string(tp.partition));
    }
    std::map<TopicPartition, std::optional<OffsetAndTimestamp>> out;
    for (const auto& [tp, r] : query_offsets(timestamps, timeout, "offsets_for_times()")) {
      out[tp] = r.first >= 0 ? std::optional<OffsetAndTimestamp>(OffsetAndTimestamp{r.first, r.second}) : std::nullopt;
    }
    return out;
  }

  // Fresh metadata of `topics` (all when empty), as PartitionInfo lists per existing topic.
  std::map<std::string, std::vector<PartitionInfo>> topic_partitions(std::optional<std::vector<std::string>> topics,
                                                                     std::chrono::milliseconds timeout,
                                                                     const std::string& what) {
    using result = std::map<std::string, std::vector<PartitionInfo>>;
    const auto deadline = deadline_after(timeout);
    const auto request_timeout = std::max(std::chrono::milliseconds(1),
                                          std::min(config_.get_ms("request.timeout.ms"), timeout));
    return background_query<result>(
        [this, topics, request_timeout, what](auto promise) {
          cluster_->refresh_metadata(topics, request_timeout, [this, topics, promise, what](std::error_code ec) {
            if (ec) {
              promise->set_exception(std::make_exception_ptr(Error(ec, what + ": metadata: " + ec.message())));
              return;
            }
            result out;
            for (const auto& [name, t] : cluster_->metadata().topics) {
              if (t.error_code != 0) continue;  // unknown (or unauthorized) topic: absent
              if (topics && std::find(topics->begin(), topics->end(), name) == topics->end()) continue;
              auto& parts = out[name];
              for (const auto& p : t.partitions)
                parts.push_back({p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.error_code});
            }
            promise->set_value(std::move(out));
          });
        },
        deadline, what);
  }

  std::optional<std::int64_t> current_lag(const TopicPartition& tp) const {
    return positions_.lag(tp);
  }

 private:
  static fetch::commit_map to_commit_map(const OffsetMap& offsets) {
    fetch::commit_map m;
    for (const auto& [tp, om] : offsets) m[tp] = {om.offset, om.metadata, om.leader_epoch.value_or(-1)};
    return m;
  }

  static bool retriable_coordinator_error(std::error_code ec) {
    if (ec.category() == kafka_category() &&
        protocol::reacts(static_cast<std::int16_t>(ec.value()),
                         protocol::reaction::coordinator_moved | protocol::reaction::coordinator_busy)) {
      return true;
    }
    return ec == make_error_code(client_errc::connection_closed) ||
           ec == make_error_code(client_errc::request_timed_out) ||
           // Partition-level, retriable as in Java (issue 13, item 8).
           ec == make_error_code(kafka_errc::request_timed_out) ||
           ec == make_error_code(kafka_errc::unstable_offset_commit);
  }

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
      if (!retriable_coordinator_error(done->code) || clock::now() + wait >= deadline) {
        throw Error(done->code, done->message);
      }
      std::this_thread::sleep_for(wait);
    }
  }

  // Waits for the commit_done event `id`, leaving every other event queued.
  std::optional<detail::commit_done> wait_request(std::uint64_t id, clock::time_point deadline) {
    std::unique_lock lock(shared_.mutex);
    for (;;) {
      for (auto it = shared_.events.begin(); it != shared_.events.end(); ++it) {
        if (auto* d = std::get_if<detail::commit_done>(&*it); d && d->id == id) {
          detail::commit_done out = std::move(*d);
          shared_.events.erase(it);
          return out;
        }
      }
      if (clock::now() >= deadline) return std::nullopt;
      shared_.cv.wait_until(lock, deadline);
    }
  }

  void run() {
    auto guard = asio::make_work_guard(io_);
    try {
      io_.run();
    } catch (const std::exception& e) {
      // Nothing on the background thread should throw; if something does, report it instead of
      // terminating the application.
      logger()->critical("kgroup background thread stopped: {}", e.what());
      shared_.push(detail::fatal_error{make_error_code(client_errc::illegal_state),
                                       std::string("background thread failed: ") + e.what()});
    }
  }

  template <class F>
  void post(F&& f) {
    asio::post(io_, std::forward<F>(f));
  }

  void stop_thread() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
#if KGROUP_WITH_HTTP
      if (http_) http_->stop();
      if (group_observer_) group_observer_->shutdown();
#endif
      driver_->shutdown();
      fetcher_->shutdown();
      cluster_->close();
      io_.stop();
    });
    thread_.join();
  }

  void check_can_subscribe() {
    if (mode_ == mode::manual) {
      throw Error(
          make_error_code(client_errc::illegal_state),
          "subscribe() while partitions are assigned manually: subscribe() and assign() exclude each other; "
          "call unassign() or unsubscribe() first");
    }
    if (config_.get("group.id").empty()) {
      throw Error(
          make_error_code(client_errc::invalid_config),
          "group.id: required to subscribe to a consumer group (use assign() to consume without a group)");
    }
    mode_ = mode::subscribed;
  }

  void check_open() const {
    if (closed_) throw Error(make_error_code(client_errc::closed), "the consumer is closed");
  }

  void set_listener(std::shared_ptr<ConsumerRebalanceListener> l) {
    std::lock_guard lock(listener_mutex_);
    listener_ = std::move(l);
  }

  // User-thread bookkeeping of an ownership change: positions_, cursor_ and the consumed positions.
  // Always on the user thread (with rebalance.listener.thread=heartbeat it arrives as a
  // bookkeeping-only event after the callback ran on the background thread).
  void bookkeep(const detail::listener_call& call) {
    if (call.kind != group::listener_kind::assigned) {
      // Revoked or lost: no record of these partitions is returned after this point, and lost
      // ones are never committed.
      for (const auto& tp : call.partitions) {
        drop_current(tp);
        positions_.drop(tp);
      }
      std::lock_guard lock(shared_.mutex);
      for (const auto& tp : call.partitions) {
        shared_.consumed.erase(tp);
        returned_.erase(tp);
      }
    } else {
      for (const auto& tp : call.partitions) positions_.own(tp);
    }
  }

  // Runs a listener callback and remembers the first exception; the group carries on regardless.
  void invoke(const detail::listener_call& call) {
    if (call.kind == group::listener_kind::revoked && !call.partitions.empty()) {
      // Auto-commit what was consumed before giving the partitions back, so their next owner
      // starts where this one stopped.
      if (auto_commit_ && !inline_listener_) {
        fetch::commit_map offsets;
        for (const auto& tp : call.partitions) {
          if (auto p = positions_.position(tp)) offsets[tp] = {p->offset, "", p->epoch};
        }
        if (!offsets.empty()) {
          try {
            commit_and_wait(offsets, clock::now() + default_timeout_);
          } catch (const std::exception& e) {
            logger()->warn("auto-commit before revoking partitions failed: {}", e.what());
          }
        }
      }
    }
    // Revoked: the callback runs while the partitions are still this consumer's, so
    // commit_sync() and position() inside it cover them (as in Java); no record of theirs is
    // returned after it. Lost: the bookkeeping comes first, so nothing inside the callback can
    // commit them. Assigned: the new partitions are known to position() inside the callback.
    if (call.kind == group::listener_kind::revoked) {
      call_listener(call);
      bookkeep(call);
    } else {
      bookkeep(call);
      call_listener(call);
    }
  }

  // The core cancelled `call` after this thread had started it (it counts it as never run). A
  // revoke did run: the lost callback that follows leaves its partitions out. An assignment did
  // run, of a generation that is gone: its partitions are reported lost right away, as the core
  // never will (it took them back).
  void settle_late_cancel(const detail::listener_call& call) {
    if (call.kind == group::listener_kind::revoked) {
      late_revoked_.insert(call.partitions.begin(), call.partitions.end());
    } else if (call.kind == group::listener_kind::assigned && !call.partitions.empty()) {
      detail::listener_call lost{group::listener_kind::lost, call.partitions, 0};
      invoke(lost);
    }
  }

  void call_listener(const detail::listener_call& call) {
    std::shared_ptr<ConsumerRebalanceListener> l;
    {
      std::lock_guard lock(listener_mutex_);
      l = listener_;
    }
    if (!l) return;
    const auto started = clock::now();
    // The callback's duration (Java's partition-assigned/revoked/lost latency), thrown or not.
    struct record_duration {
      impl& self;
      group::listener_kind kind;
      clock::time_point started;
      ~record_duration() {
        const double s = std::chrono::duration<double>(clock::now() - started).count();
        std::lock_guard lock(self.shared_.mutex);
        auto& m = self.shared_.metrics;
        (kind == group::listener_kind::assigned  ? m.assigned_hist
         : kind == group::listener_kind::revoked ? m.revoked_hist
                                                 : m.lost_hist)
            .observe(s);
      }
    } recorder{*this, call.kind, started};
    try {
      switch (call.kind) {
        case group::listener_kind::revoked:
          l->on_partitions_revoked(call.partitions);
          break;
        case group::listener_kind::assigned:
          l->on_partitions_assigned(call.partitions);
          break;
        case group::listener_kind::lost:
          l->on_partitions_lost(call.partitions);
          break;
      }
    } catch (...) {
      logger()->error("rebalance listener threw from on_partitions_{}; the rebalance continues",
                      group::to_string(call.kind));
      std::lock_guard lock(listener_mutex_);
      if (!listener_error_) listener_error_ = std::current_exception();
    }
  }

  // Background thread (rebalance.listener.thread=heartbeat): only the user's callback runs here;
  // positions_ and cursor_ belong to the user thread, which applies the bookkeeping from this event.
  void run_inline(const detail::listener_call& call) {
    call_listener(call);
    detail::listener_call bk = call;
    bk.bookkeeping_only = true;
    shared_.push(std::move(bk));
  }

  // Drains queued events on the user thread: listener calls run here and are acknowledged.
  // Without `run_listeners`, listener calls stay queued, in order, for the next poll().
  void run_events(bool throw_fatal, bool run_listeners = true) {
    for (;;) {
      detail::user_event e;
      {
        std::lock_guard lock(shared_.mutex);
        auto it = shared_.events.begin();
        if (!run_listeners) {
          it = std::find_if(it, shared_.events.end(), [](const detail::user_event& x) {
            return !std::holds_alternative<detail::listener_call>(x);
          });
        }
        if (it == shared_.events.end()) break;
        e = std::move(*it);
        shared_.events.erase(it);
      }
      if (auto* call = std::get_if<detail::listener_call>(&e)) {
        if (call->bookkeeping_only) {
          bookkeep(*call);  // the callback already ran (and was acknowledged) on the background thread
          continue;
        }
        {
          // Checked and marked under one lock: a cancel that comes later finds it started and is
          // "late" (below) instead of racing with it (issue 13, item 9).
          std::lock_guard lock(shared_.mutex);
          if (shared_.cancelled_listeners.erase(call->seq) > 0) continue;  // superseded (see cancel_listener)
          shared_.started_listeners.insert(call->seq);
        }
        post([this, seq = call->seq] { driver_->listener_started(seq); });
        if (call->kind == group::listener_kind::lost) {
          // Partitions a late-cancelled revoke already gave back are not lost as well.
          std::erase_if(call->partitions,
                        [&](const TopicPartition& tp) { return late_revoked_.count(tp) > 0; });
          late_revoked_.clear();
        } else if (call->kind == group::listener_kind::assigned) {
          for (const auto& tp : call->partitions) late_revoked_.erase(tp);  // ours again
        }
        if (call->kind != group::listener_kind::lost || !call->partitions.empty()) invoke(*call);
        bool late = false;
        {
          std::lock_guard lock(shared_.mutex);
          shared_.started_listeners.erase(call->seq);
          late = shared_.late_cancels.erase(call->seq) > 0;
        }
        if (late) settle_late_cancel(*call);
        post([this, seq = call->seq] { driver_->listener_done(seq); });
      } else if (auto* f = std::get_if<detail::fatal_error>(&e)) {
        std::lock_guard lock(shared_.mutex);
        shared_.fatal = *f;
      } else if (auto* pe = std::get_if<detail::position_event>(&e)) {
        if (pe->seek_applied) {
          positions_.seek_applied(pe->tp);
          continue;
        }
        bool owned;
        {
          std::lock_guard lock(shared_.mutex);
          owned = shared_.owned.count(pe->tp) > 0 || manual_.count(pe->tp) > 0;
        }
        if (owned && positions_.position_found(pe->tp, pe->offset, pe->epoch, pe->forced)) drop_current(pe->tp);
      } else if (auto* de = std::get_if<detail::data_error>(&e)) {
        pending_data_errors_.push_back(*de);
      } else if (auto* cd = std::get_if<detail::commit_done>(&e)) {
        auto it = async_commits_.find(cd->id);
        if (it != async_commits_.end()) {
          auto [offsets, cb] = std::move(it->second);
          async_commits_.erase(it);
          if (cb) {
            try {
              cb(offsets, cd->code);
            } catch (...) {
              std::lock_guard lock(listener_mutex_);
              if (!listener_error_) listener_error_ = std::current_exception();
            }
          }
        }
      }
    }
    if (throw_fatal) {
      std::lock_guard lock(shared_.mutex);
      if (shared_.fatal) throw Error(shared_.fatal->code, shared_.fatal->message);
    }
  }

  bool wait_left(std::uint64_t left_before, clock::time_point deadline) {
    for (;;) {
      run_events(/*throw_fatal=*/false);
      std::unique_lock lock(shared_.mutex);
      if (shared_.left_count > left_before) return true;
      if (!shared_.events.empty()) continue;
      if (clock::now() >= deadline) return false;
      shared_.cv.wait_until(lock, deadline,
                            [&] { return !shared_.events.empty() || shared_.left_count > left_before; });
    }
  }

  void rethrow_listener_error() {
    std::exception_ptr e;
    {
      std::lock_guard lock(listener_mutex_);
      e = std::exchange(listener_error_, nullptr);
    }
    if (e) std::rethrow_exception(e);
  }

  Config config_;
  asio::io_context io_;
#if KGROUP_WITH_HTTP
  std::unique_ptr<http::server> http_;  // after io_: destroyed before it
  std::shared_ptr<fetch::group_observer> group_observer_;  // what GET /group shows; with http_ only
#endif
  std::shared_ptr<net::cluster> cluster_;
  std::shared_ptr<net::group_driver> driver_;
  mutable detail::shared_state shared_;
  std::thread thread_;
  std::chrono::milliseconds default_timeout_{60000};

 public:
  std::chrono::milliseconds default_timeout() const { return default_timeout_; }

 private:
  bool closed_ = false;
  bool closing_ = false;  // close() is under way (listener callbacks may still use the consumer)
  std::mutex
      listener_mutex_;  // listener_ and listener_error_ (inline callbacks run on the background thread)
  std::shared_ptr<ConsumerRebalanceListener> listener_;
  std::exception_ptr listener_error_;
  // Data path, user-thread side.
  std::shared_ptr<fetch::fetcher> fetcher_;
  data::position_table positions_;
  // Positions after the records the last poll() returned; they become shared_.consumed (what
  // auto-commit commits) when poll() is called again.
  std::map<TopicPartition, detail::epoch_offset> returned_;
  std::set<TopicPartition> late_revoked_;  // see settle_late_cancel
  data::record_cursor cursor_{{}};  // rebuilt with the configured options in the constructor
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
  // manual_coordinator_ is background-thread only.
  enum class mode { none, subscribed, manual };
  std::atomic<mode> mode_{mode::none};
  std::set<TopicPartition> manual_;
  group::coordinator_lookup manual_coordinator_;
  // Metrics, user-thread side (published into shared_.metrics).
  detail::metrics_identity metrics_id_;
  std::optional<clock::time_point> last_poll_start_;
  std::optional<clock::time_point> prev_poll_start_;
  clock::time_point last_publish_{};
  detail::window_stat between_polls_;
  detail::histogram between_polls_hist_;
  detail::window_stat idle_ratio_;
  detail::window_stat records_window_;
  detail::window_stat bytes_window_;
  std::int64_t records_total_ = 0;
  std::int64_t bytes_total_ = 0;
  std::int64_t pending_bytes_ = 0;  // bytes of fetched data opened since the last poll() ended
  StatisticsCallback statistics_cb_;
  std::chrono::milliseconds statistics_interval_{0};
  clock::time_point next_statistics_{};
};

Consumer::Consumer(const Config& config) : Consumer(config, {}) {}

Consumer::Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors)
    : impl_(std::make_unique<impl>(config, std::move(custom_assignors))) {}

Consumer::~Consumer() { close_quietly(); }

Consumer::Consumer(Consumer&& other) noexcept = default;

Consumer& Consumer::operator=(Consumer&& other) noexcept {
  if (this != &other) {
    close_quietly();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

// Closes and destroys the impl, both in this Consumer's log scope: what the impl's members log
// as they go reaches its sink too (config_, which owns the sink, is the first member: the last
// destroyed; nothing logs after it).
void Consumer::close_quietly() noexcept {
  if (!impl_) return;  // moved from
  const detail::log_scope log_scope(impl_->log_sink());
  try {
    impl_->close(std::chrono::seconds(30));
  } catch (const std::exception& e) {
    logger()->warn("error while closing the consumer in its destructor: {}", e.what());
  }
  impl_.reset();
}

// The impl, with this Consumer's log sink the calling thread's until the end of the public
// method's full expression, so what the call logs on the user's thread reaches that sink.
class Consumer::call {
 public:
  explicit call(impl& i) noexcept : scope_(i.log_sink()), impl_(i) {}
  impl* operator->() const noexcept { return &impl_; }

 private:
  detail::log_scope scope_;
  impl& impl_;
};

Consumer::call Consumer::self() const {
  if (!impl_) throw Error(make_error_code(client_errc::illegal_state), "this Consumer was moved from");
  return call(*impl_);
}

void Consumer::subscribe(const std::vector<std::string>& topics,
                         std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(topics, std::move(listener));
}
void Consumer::subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(pattern, std::move(listener));
}
void Consumer::unsubscribe() {
  self()->unsubscribe();
}
void Consumer::assign(const std::set<TopicPartition>& partitions) {
  self()->assign(partitions);
}
void Consumer::unassign() {
  self()->unassign();
}
ConsumerRecords Consumer::poll(std::chrono::milliseconds timeout) {
  return self()->poll(timeout);
}
void Consumer::commit_sync() {
  self()->commit_sync(self()->default_timeout());
}
void Consumer::commit_sync(std::chrono::milliseconds timeout) {
  self()->commit_sync(timeout);
}
void Consumer::commit_sync(const OffsetMap& offsets) {
  self()->commit_sync(offsets, self()->default_timeout());
}
void Consumer::commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout) {
  self()->commit_sync(offsets, timeout);
}
void Consumer::commit_async(CommitCallback callback) {
  self()->commit_async(std::move(callback));
}
void Consumer::commit_async(const OffsetMap& offsets, CommitCallback callback) {
  self()->commit_async(offsets, std::move(callback));
}
OffsetMap Consumer::committed(const std::set<TopicPartition>& partitions) {
  return self()->committed(partitions, self()->default_timeout());
}
OffsetMap Consumer::committed(const std::set<TopicPartition>& partitions, std::chrono::milliseconds timeout) {
  return self()->committed(partitions, timeout);
}
std::int64_t Consumer::position(const TopicPartition& partition) {
  return self()->position(partition, self()->default_timeout());
}
std::int64_t Consumer::position(const TopicPartition& partition, std::chrono::milliseconds timeout) {
  return self()->position(partition, timeout);
}
std::optional<std::int64_t> Consumer::current_lag(const TopicPartition& partition) const {
  return self()->current_lag(partition);
}
std::map<TopicPartition, std::int64_t> Consumer::beginning_offsets(const std::set<TopicPartition>& partitions) {
  return beginning_offsets(partitions, self()->default_timeout());
}
std::map<TopicPartition, std::int64_t> Consumer::beginning_offsets(const std::set<TopicPartition>& partitions,
                                                                    std::chrono::milliseconds timeout) {
  return self()->offsets_at(partitions, -2, timeout, "beginning_offsets()");
}
std::map<TopicPartition, std::int64_t> Consumer::end_offsets(const std::set<TopicPartition>& partitions) {
  return end_offsets(partitions, self()->default_timeout());
}
std::map<TopicPartition, std::int64_t> Consumer::end_offsets(const std::set<TopicPartition>& partitions,
                                                              std::chrono::milliseconds timeout) {
  return self()->offsets_at(partitions, -1, timeout, "end_offsets()");
}
std::map<TopicPartition, std::optional<OffsetAndTimestamp>> Consumer::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps) {
  return offsets_for_times(timestamps, self()->default_timeout());
}
std::map<TopicPartition, std::optional<OffsetAndTimestamp>> Consumer::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout) {
  return self()->offsets_for_times(timestamps, timeout);
}
std::vector<PartitionInfo> Consumer::partitions_for(const std::string& topic) {
  return partitions_for(topic, self()->default_timeout());
}
std::vector<PartitionInfo> Consumer::partitions_for(const std::string& topic, std::chrono::milliseconds timeout) {
  auto all = self()->topic_partitions(std::vector<std::string>{topic}, timeout, "partitions_for()");
  auto it = all.find(topic);
  return it == all.end() ? std::vector<PartitionInfo>{} : std::move(it->second);
}
std::map<std::string, std::vector<PartitionInfo>> Consumer::list_topics() {
  return list_topics(self()->default_timeout());
}
std::map<std::string, std::vector<PartitionInfo>> Consumer::list_topics(std::chrono::milliseconds timeout) {
  return self()->topic_partitions(std::nullopt, timeout, "list_topics()");
}
void Consumer::seek(const TopicPartition& partition, std::int64_t offset) {
  self()->seek(partition, offset);
}
void Consumer::seek(const TopicPartition& partition, const OffsetAndMetadata& offset) {
  self()->seek(partition, offset.offset, offset.leader_epoch.value_or(-1));
}
void Consumer::seek_to_beginning(const std::set<TopicPartition>& partitions) {
  self()->seek_to(partitions, true);
}
void Consumer::seek_to_end(const std::set<TopicPartition>& partitions) {
  self()->seek_to(partitions, false);
}
void Consumer::pause(const std::set<TopicPartition>& partitions) {
  self()->pause(partitions);
}
void Consumer::resume(const std::set<TopicPartition>& partitions) {
  self()->resume(partitions);
}
std::set<TopicPartition> Consumer::paused() const {
  return self()->paused();
}
std::set<TopicPartition> Consumer::assignment() const {
  return self()->assignment();
}
std::vector<std::string> Consumer::subscription() const {
  return self()->subscription();
}
ConsumerGroupMetadata Consumer::group_metadata() const {
  return self()->group_metadata();
}
void Consumer::enforce_rebalance(const std::string& reason) {
  self()->enforce_rebalance(reason);
}
void Consumer::wakeup() {
  self()->wakeup();
}
void Consumer::close(std::chrono::milliseconds timeout) {
  self()->close(timeout);
}
std::string Consumer::group_state() const {
  return self()->state();
}
ConsumerMetrics Consumer::metrics() const {
  return self()->metrics();
}
void Consumer::set_statistics_callback(StatisticsCallback callback) {
  self()->set_statistics_callback(std::move(callback));
}
std::string Consumer::http_endpoint() const {
  return self()->http_endpoint();
}

}  // namespace kgroup
