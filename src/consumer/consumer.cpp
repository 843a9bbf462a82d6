// The Consumer facade: construction from the configuration, subscribe/assign/unsubscribe,
// close and the background thread, and the public methods (which forward to Consumer::impl,
// consumer_impl.hpp).
#include "consumer/consumer_impl.hpp"

namespace kgroup {

Consumer::impl::impl(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom)
    : config_(config) {
  // What the constructor logs goes to this Consumer's sink too (the thread's scope: see run()).
  const detail::log_scope log_scope(log_sink());
  config_.validate();
  // The effective configuration, once (what was set explicitly; the rest is the defaults).
  logger()->info("consumer configuration: {}", config_.to_string());
  auto plan = detail::make_consumer_plan(config_, custom);
  net::group_driver_options dopts;
  dopts.member = std::move(plan.member);
  dopts.request_timeout = plan.request_timeout;
  if (plan.inline_listener) {
    dopts.hooks.run_listener_inline = [this](const detail::listener_call& call) {
      listeners_.run_inline(call);
    };
    inline_listener_ = true;
  }
  shared_.metrics.wire = plan.cluster.connection.wire;
  if (plan.cluster.connection.security) {
    // Refused credentials and untrusted brokers are fatal: poll() raises them.
    plan.cluster.connection.security->on_fatal = [this](std::error_code ec, const std::string& what) {
      shared_.push(detail::fatal_error{ec, what});
    };
  }
  cluster_ = std::make_shared<net::cluster>(io_, std::move(plan.cluster));

  auto_commit_ = plan.auto_commit;
  read_committed_ = plan.read_committed;
  max_poll_records_ = plan.max_poll_records;
  max_poll_interval_ = plan.max_poll_interval;
  cursor_ = data::record_cursor(plan.cursor);
  fetch::fetcher_options fo = std::move(plan.fetch);
  fo.coordinator_unusable = [this](bool failed) { standalone_coordinator(failed); };
  // Background thread, like the driver it reaches (created below, before any commit).
  fo.commit_error = [this](std::int32_t generation, std::int16_t c) {
    driver_->commit_failed(generation, c);
  };
  fetcher_ =
      std::make_shared<fetch::fetcher>(io_, cluster_, std::move(fo), shared_, [this] { return identity(); });
  manual_coordinator_ = std::make_unique<fetch::standalone_coordinator>(
      cluster_, config_.get("group.id"), config_.get_ms("request.timeout.ms"), [this] { fetcher_->wake(); });
  dopts.hooks.on_assignment_changed = [f = fetcher_](const std::set<TopicPartition>& owned) { f->assign(owned); };
  kip848_ = plan.kip848;
  if (kip848_) {
    // KIP-848: the coordinator assigns. Same listener, fetcher and commit plumbing.
    net::consumer_group_driver_options kopts;
    kopts.member = std::move(plan.kip848_member);
    kopts.request_timeout = plan.request_timeout;
    kopts.hooks = std::move(dopts.hooks);
    driver_ = std::make_shared<net::consumer_group_driver>(io_, cluster_, std::move(kopts), shared_);
  } else {
    driver_ = std::make_shared<net::group_driver>(io_, cluster_, std::move(dopts), shared_);
  }
  default_timeout_ = plan.default_timeout;
  metrics_id_ = std::move(plan.metrics_id);
  metrics_id_.wall_minus_steady_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() -
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
  statistics_interval_ = plan.statistics_interval;
  start_http();
  thread_ = std::thread([this] {
    // Everything on the background thread (connections, drivers, the HTTP endpoint, listeners
    // with rebalance.listener.thread=heartbeat) logs for this Consumer.
    const detail::log_scope log_scope(log_sink());
    run();
  });
}

void Consumer::impl::subscribe(std::vector<std::string> topics,
                               std::shared_ptr<ConsumerRebalanceListener> listener) {
  check_open();
  // Arguments first: a refused subscribe() changes nothing (before, it left the mode subscribed).
  for (const auto& t : topics) {
    if (t.empty())
      throw Error(make_error_code(client_errc::invalid_argument), "subscribe(): empty topic name");
  }
  check_can_subscribe();
  listeners_.set_listener(std::move(listener));
  post([this, topics = std::move(topics)]() mutable { driver_->subscribe(std::move(topics)); });
}

void Consumer::impl::subscribe(std::regex pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  check_open();
  if (kip848_) {
    throw Error(make_error_code(client_errc::invalid_argument),
                "subscribe(std::regex) is not available with group.protocol=consumer: the broker evaluates "
                "subscription patterns (RE2/J syntax) and a std::regex keeps no source text to send; "
                "subscribe with a kgroup::SubscriptionPattern, or use group.protocol=classic");
  }
  check_can_subscribe();
  listeners_.set_listener(std::move(listener));
  post([this, pattern = std::move(pattern)]() mutable { driver_->subscribe_pattern(std::move(pattern)); });
}

void Consumer::impl::subscribe(SubscriptionPattern pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  check_open();
  if (!kip848_) {
    throw Error(make_error_code(client_errc::invalid_argument),
                "subscribe(SubscriptionPattern) needs group.protocol=consumer: it is a pattern the broker "
                "evaluates (KIP-848); with group.protocol=classic subscribe with a std::regex");
  }
  if (pattern.pattern.empty())
    throw Error(make_error_code(client_errc::invalid_argument), "subscribe(): empty subscription pattern");
  check_can_subscribe();
  listeners_.set_listener(std::move(listener));
  post([this, p = std::move(pattern.pattern)]() mutable { driver_->subscribe_pattern(std::move(p)); });
}

void Consumer::impl::unsubscribe() {
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
  // inside on_partitions_revoked carry the live generation and member id.
  wait_left(left_before, clock::now() + default_timeout_);
  mode_ = mode::none;
  listeners_.rethrow_error();
}

void Consumer::impl::assign(const std::set<TopicPartition>& tps) {
  check_open();
  if (mode_ == mode::subscribed) {
    throw Error(
        make_error_code(client_errc::illegal_state),
        "assign() while subscribed: subscribe() and assign() exclude each other; call unsubscribe() first");
  }
  for (const auto& tp : tps) {
    if (tp.topic.empty() || tp.partition < 0) {
      throw Error(make_error_code(client_errc::invalid_argument),
                  "assign(): invalid topic partition (topic '" + tp.topic + "', partition " +
                      std::to_string(tp.partition) + ")");
    }
  }
  if (mode_ == mode::manual) {
    // As Java's assign(): what the dropped partitions reached is committed first (async).
    std::set<TopicPartition> dropping;
    for (const auto& [tp, p] : positions_.entries())
      if (!tps.count(tp)) dropping.insert(tp);
    auto_commit_manual(dropping, std::nullopt);
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

void Consumer::impl::auto_commit_manual(const std::set<TopicPartition>& tps,
                                        std::optional<clock::time_point> deadline) {
  if (!auto_commit_ || config_.get("group.id").empty()) return;
  fetch::commit_map offsets;
  OffsetMap user_offsets;
  for (const auto& tp : tps) {
    if (auto p = positions_.position(tp)) {
      offsets[tp] = {p->offset, "", p->epoch};
      user_offsets[tp] = {p->offset, "", p->epoch >= 0 ? std::optional<std::int32_t>(p->epoch) : std::nullopt};
    }
  }
  if (offsets.empty()) return;
  if (!deadline) {
    send_async_commit(std::move(offsets), user_offsets, [](const OffsetMap&, std::error_code ec) {
      if (ec) logger()->warn("auto-commit of the partitions assign() dropped failed: {}", ec.message());
    });
    return;
  }
  try {
    commit_and_wait(std::move(offsets), *deadline);
  } catch (const std::exception& e) {
    logger()->warn("auto-commit on close() failed: {}", e.what());
  }
}

ConsumerGroupMetadata Consumer::impl::group_metadata() const {
  std::lock_guard lock(shared_.mutex);
  ConsumerGroupMetadata m;
  m.group_id = config_.get("group.id");
  m.member_id = shared_.member_id;
  m.generation_id = shared_.generation;
  if (auto id = config_.get("group.instance.id"); !id.empty()) m.group_instance_id = id;
  return m;
}

ConsumerMetrics Consumer::impl::metrics() {
  const auto now = clock::now();
  std::lock_guard lock(shared_.mutex);
  // Any thread may ask (as Java's metrics()); only the application's own thread brings the
  // user-thread figures up to date, others see them as last published (at most 100 ms old
  // while it polls).
  if (on_user_thread()) publish_user_metrics(now);
  return detail::make_metrics(shared_, metrics_id_, now, std::chrono::system_clock::now());
}

void Consumer::impl::wakeup() {
  {
    std::lock_guard lock(shared_.mutex);
    shared_.woken = true;
  }
  shared_.cv.notify_all();
}

void Consumer::impl::close(std::chrono::milliseconds timeout) {
  // Callbacks that run inside close() (on_partitions_revoked committing its offsets) may still
  // call the consumer; it counts as closed once the background thread is gone.
  if (closed_ || closing_) return;
  closing_ = true;
  const auto deadline = poll_deadline(clock::now(), timeout);
  close_deadline_ = deadline;
  // Java's close(): async commits in flight are waited for (their callbacks run here), and a
  // manual assignment's positions are auto-committed, all within the timeout.
  try {
    if (mode_ == mode::manual) {
      std::set<TopicPartition> all;
      for (const auto& [tp, p] : positions_.entries()) all.insert(tp);
      auto_commit_manual(all, deadline);
    }
    finish_async_commits(next_request_id_, deadline);
  } catch (const std::exception& e) {
    logger()->warn("close(): committing before leaving failed: {}", e.what());
  }
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
  listeners_.rethrow_error();
}

void Consumer::impl::start_http() {
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
  for (const auto& host : config_.get_list("observability.http.allowed.hosts")) {
    if (!http::normalize_allowed_host(host, why)) {
      throw Error(make_error_code(client_errc::invalid_config), "observability.http.allowed.hosts: " + why);
    }
    so.allowed_hosts.push_back(host);
  }
  // GET /group: the whole group's view, gathered on this thread only while it is asked for.
  fetch::group_observer_options go;
  go.group_id = config_.get("group.id");
  go.kip848 = kip848_;
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

fetch::group_identity Consumer::impl::identity() const {
  // Runs on the background thread (the fetcher asks it), where the core lives.
  fetch::group_identity id;
  id.group_mode = !config_.get("group.id").empty();
  if (mode_ != mode::subscribed) {
    // Manual assignment (or none): commits carry generation -1 and no member id, as Java's do.
    id.coordinator = manual_coordinator_->node();
    id.stable = true;
    return id;
  }
  static_cast<group::standing&>(id) = driver_->standing();
  id.subscribed = true;
  return id;
}

void Consumer::impl::standalone_coordinator(bool failed) {
  if (mode_ == mode::subscribed) return;  // the membership core finds the group's coordinator
  manual_coordinator_->need(failed);
}

void Consumer::impl::run() {
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

void Consumer::impl::stop_thread() {
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

void Consumer::impl::check_can_subscribe() {
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

Consumer::Consumer(const Config& config) : Consumer(config, {}) {}

Consumer::Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors)
    : impl_(std::make_unique<impl>(config, std::move(custom_assignors))) {}

Consumer::~Consumer() {
  close_quietly();
}

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
// Unless `any_thread`, the call also enters the impl's single-thread check (impl::enter()) and
// leaves it at the end of the full expression.
class Consumer::call {
 public:
  call(impl& i, bool any_thread) : scope_(i.log_sink()), impl_(i), guarded_(!any_thread) {
    if (guarded_) impl_.enter();
  }
  call(const call&) = delete;
  call& operator=(const call&) = delete;
  ~call() {
    if (guarded_) impl_.leave();
  }
  impl* operator->() const noexcept { return &impl_; }

 private:
  detail::log_scope scope_;
  impl& impl_;
  bool guarded_;
};

Consumer::call Consumer::self(bool any_thread) const {
  if (!impl_) throw Error(make_error_code(client_errc::illegal_state), "this Consumer was moved from");
  return call(*impl_, any_thread);
}

void Consumer::subscribe(const std::vector<std::string>& topics,
                         std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(topics, std::move(listener));
}
void Consumer::subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(pattern, std::move(listener));
}
void Consumer::subscribe(const SubscriptionPattern& pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
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
std::map<TopicPartition, std::int64_t> Consumer::beginning_offsets(
    const std::set<TopicPartition>& partitions) {
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
std::vector<PartitionInfo> Consumer::partitions_for(const std::string& topic,
                                                    std::chrono::milliseconds timeout) {
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
  return self(/*any_thread=*/true)->assignment();
}
std::vector<std::string> Consumer::subscription() const {
  return self(/*any_thread=*/true)->subscription();
}
ConsumerGroupMetadata Consumer::group_metadata() const {
  return self(/*any_thread=*/true)->group_metadata();
}
void Consumer::enforce_rebalance(const std::string& reason) {
  self()->enforce_rebalance(reason);
}
void Consumer::wakeup() {
  self(/*any_thread=*/true)->wakeup();
}
void Consumer::close(std::chrono::milliseconds timeout) {
  self()->close(timeout);
}
std::string Consumer::group_state() const {
  return self(/*any_thread=*/true)->state();
}
ConsumerMetrics Consumer::metrics() const {
  return self(/*any_thread=*/true)->metrics();
}
void Consumer::set_statistics_callback(StatisticsCallback callback) {
  self()->set_statistics_callback(std::move(callback));
}
std::string Consumer::http_endpoint() const {
  return self(/*any_thread=*/true)->http_endpoint();
}

}  // namespace kgroup
