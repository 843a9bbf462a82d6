// Consumer::impl: construction from the configuration (consumer_plan.hpp's plan), subscribe,
// assign and unsubscribe, close, the background thread and the read-only views.
#include "consumer/consumer_impl.hpp"

#include <future>

#include <boost/asio/executor_work_guard.hpp>

#include "net/consumer_group_driver.hpp"
#include "net/group_driver.hpp"

namespace kgroup {

Consumer::impl::impl(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom)
    : config_(config) {
  // What the constructor logs goes to this Consumer's sink too (the thread's scope: see run()).
  const detail::log_scope log_scope(log_sink());
  config_.validate();
  detail::default_client_id(config_);
  // The effective configuration, once (what was set explicitly; the rest is the defaults).
  logger()->info("consumer configuration: {}", config_.to_string());
  auto plan = detail::make_consumer_plan(config_, custom);
  shared_.metrics.wire = plan.cluster.connection.wire;
  if (plan.cluster.connection.security) {
    // Refused credentials and untrusted brokers are fatal: poll() raises them.
    plan.cluster.connection.security->on_fatal = [s = &shared_](std::error_code ec, const std::string& what) {
      s->push(detail::fatal_error{ec, what});
    };
  }
  cluster_ = std::make_shared<net::cluster>(io_, std::move(plan.cluster));
  auto_commit_ = plan.auto_commit;
  max_poll_interval_ = plan.max_poll_interval;
  default_timeout_ = plan.default_timeout;
  statistics_interval_ = plan.statistics_interval;
  inline_listener_ = plan.inline_listener;
  kip848_ = plan.kip848;
  reader_.configure(detail::data_reader::options{plan.cursor, plan.max_poll_records, plan.read_committed});

  // Who commits: the membership (its standing, once the driver exists) or the standalone
  // coordinator; the fetcher asks on the background thread.
  who_ = std::make_shared<fetch::commit_identity>(!config_.get("group.id").empty());
  fetch::fetcher_options fo = std::move(plan.fetch);
  fo.coordinator_unusable = [who = who_.get()](bool failed) { who->coordinator_unusable(failed); };
  fo.commit_error = [this](std::int32_t generation, std::int16_t c) {
    driver_->commit_failed(generation, c);
  };
  auto identity = [who = who_.get()] { return who->identity(); };
  fetcher_ = std::make_shared<fetch::fetcher>(io_, cluster_, std::move(fo), shared_, identity);
  to_fetcher_.set_fetcher(fetcher_);
  who_->set_coordinator(std::make_unique<fetch::standalone_coordinator>(
      cluster_, config_.get("group.id"), config_.get_ms("request.timeout.ms"),
      [f = std::weak_ptr<fetch::fetcher>(fetcher_)] {
        if (auto p = f.lock()) p->wake();  // it waits for a coordinator
      }));
  queries_ =
      std::make_unique<detail::cluster_queries>([this](std::function<void()> f) { post(std::move(f)); },
                                                fetcher_, cluster_, config_.get_ms("request.timeout.ms"));

  net::membership_hooks hooks;
  if (inline_listener_)
    hooks.run_listener_inline = [l = &listeners_](const detail::listener_call& call) { l->run_inline(call); };
  hooks.on_assignment_changed = [f = fetcher_](const std::set<TopicPartition>& owned) { f->assign(owned); };
  if (kip848_) {
    // KIP-848: the coordinator assigns. Same listener, fetcher and commit plumbing.
    net::consumer_group_driver_options kopts;
    kopts.member = std::move(plan.kip848_member);
    kopts.request_timeout = plan.request_timeout;
    kopts.hooks = std::move(hooks);
    driver_ = std::make_shared<net::consumer_group_driver>(io_, cluster_, std::move(kopts), shared_);
  } else {
    net::group_driver_options dopts;
    dopts.member = std::move(plan.member);
    dopts.request_timeout = plan.request_timeout;
    dopts.hooks = std::move(hooks);
    driver_ = std::make_shared<net::group_driver>(io_, cluster_, std::move(dopts), shared_);
  }
  who_->set_standing([d = driver_.get()] { return d->standing(); });
  metrics_id_ = std::move(plan.metrics_id);
  metrics_id_.wall_minus_steady_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() -
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
  endpoint_ = std::make_unique<detail::observability_endpoint>(
      io_, config_, kip848_, cluster_, fetcher_, identity, [s = &shared_, id = &metrics_id_] {
        std::lock_guard lock(s->mutex);
        return detail::make_metrics(*s, *id, clock::now(), std::chrono::system_clock::now());
      });
  shared_.metrics.http_endpoint = endpoint_->endpoint();
  if (config_.get_bool("enable.metrics.push")) {
    telemetry_ = std::make_shared<detail::telemetry_reporter>(
        io_, cluster_, config_, [s = &shared_, id = &metrics_id_] {
          std::lock_guard lock(s->mutex);
          return detail::make_metrics(*s, *id, clock::now(), std::chrono::system_clock::now());
        });
    post([t = telemetry_] { t->start(); });
  }
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
  // Arguments first: a refused subscribe() changes nothing.
  for (const auto& t : topics) {
    if (t.empty())
      throw Error(make_error_code(client_errc::invalid_argument), "subscribe(): empty topic name");
  }
  check_can_subscribe();
  listeners_.set_listener(std::move(listener));
  post([d = driver_, topics = std::move(topics)]() mutable { d->subscribe(std::move(topics)); });
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
  post([d = std::static_pointer_cast<net::group_driver>(driver_), pattern = std::move(pattern)]() mutable {
    d->subscribe_pattern(std::move(pattern));
  });
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
  post([d = std::static_pointer_cast<net::consumer_group_driver>(driver_),
        p = std::move(pattern.pattern)]() mutable { d->subscribe_pattern(std::move(p)); });
}

void Consumer::impl::check_can_subscribe() {
  if (who_->current() == mode::manual) {
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
  who_->set_mode(mode::subscribed);
}

void Consumer::impl::unsubscribe() {
  check_open();
  if (who_->current() == mode::manual) {
    unassign();
    return;
  }
  std::uint64_t left_before;
  {
    std::lock_guard lock(shared_.mutex);
    left_before = shared_.left_count;
  }
  post([d = driver_] { d->unsubscribe(); });
  // Still subscribed until the leave is done: the auto-commit before the revoke and commits
  // inside on_partitions_revoked carry the live generation and member id.
  wait_left(left_before, clock::now() + default_timeout_);
  who_->set_mode(mode::none);
  listeners_.rethrow_error();
}

void Consumer::impl::assign(const std::set<TopicPartition>& tps) {
  check_open();
  if (who_->current() == mode::subscribed) {
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
  if (who_->current() == mode::manual) {
    // As Java's assign(): what the dropped partitions reached is committed first (async).
    std::set<TopicPartition> dropping;
    for (const auto& [tp, p] : reader_.positions().entries())
      if (!tps.count(tp)) dropping.insert(tp);
    auto_commit_manual(dropping, std::nullopt);
  }
  who_->set_mode(tps.empty() ? mode::none : mode::manual);
  reader_.assign(tps);
  {
    std::lock_guard lock(shared_.mutex);
    manual_ = tps;
  }
  post([who = who_, f = fetcher_, tps] {
    if (!tps.empty()) who->coordinator_unusable(false);  // look the coordinator up for commits
    f->assign(tps, /*manual=*/true);
  });
}

void Consumer::impl::auto_commit_manual(const std::set<TopicPartition>& tps,
                                        std::optional<clock::time_point> deadline) {
  if (!auto_commit_ || config_.get("group.id").empty()) return;
  commits_.auto_commit(
      reader_.commit_positions(tps), deadline,
      deadline ? "auto-commit on close()" : "auto-commit of the partitions assign() dropped");
}

void Consumer::impl::enforce_rebalance(std::string reason) {
  check_open();
  post([d = driver_, reason = std::move(reason)]() mutable { d->enforce_rebalance(std::move(reason)); });
}

void Consumer::impl::close(std::chrono::milliseconds timeout, CloseOptions::GroupMembershipOperation op) {
  // Callbacks that run inside close() (on_partitions_revoked committing its offsets) may still
  // call the consumer; it counts as closed once the background thread is gone.
  if (closed_ || closing_) return;
  closing_ = true;
  const auto deadline = deadline_after(timeout);
  close_deadline_ = deadline;
  // Java's close(): async commits in flight are waited for (their callbacks run here), and a
  // manual assignment's positions are auto-committed, all within the timeout.
  try {
    if (who_->current() == mode::manual) {
      std::set<TopicPartition> all;
      for (const auto& [tp, p] : reader_.positions().entries()) all.insert(tp);
      auto_commit_manual(all, deadline);
    }
    commits_.finish_async(deadline);
  } catch (const std::exception& e) {
    logger()->warn("close(): committing before leaving failed: {}", e.what());
  }
  std::uint64_t left_before;
  {
    std::lock_guard lock(shared_.mutex);
    left_before = shared_.left_count;
  }
  const auto membership = op == CloseOptions::GroupMembershipOperation::leave_group
                              ? group::close_membership::leave_group
                          : op == CloseOptions::GroupMembershipOperation::remain_in_group
                              ? group::close_membership::remain_in_group
                              : group::close_membership::default_operation;
  post([d = driver_, membership] { d->close(membership); });
  if (!wait_left(left_before, deadline)) {
    logger()->warn("group '{}': close() timed out after {} ms before leaving the group cleanly",
                   config_.get("group.id"), timeout.count());
  }
  if (telemetry_) {
    // KIP-714: the last push, marked terminating, within what is left of the timeout, with the
    // user thread's figures as they are now (poll() publishes them at most every 100 ms).
    {
      std::lock_guard lock(shared_.mutex);
      publish_user_metrics(clock::now());
    }
    auto pushed = std::make_shared<std::promise<void>>();
    auto done = pushed->get_future();
    post([t = telemetry_, pushed] { t->close([pushed] { pushed->set_value(); }); });
    if (done.wait_until(deadline) != std::future_status::ready)
      logger()->debug("close(): the last telemetry push was not answered in time");
  }
  stop_thread();
  closed_ = true;
  listeners_.rethrow_error();
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
  post([this] {
    endpoint_->stop();
    if (telemetry_) telemetry_->shutdown();
    driver_->shutdown();
    fetcher_->shutdown();
    cluster_->close();
    io_.stop();
  });
  thread_.join();
}

std::set<TopicPartition> Consumer::impl::assignment() const {
  std::lock_guard lock(shared_.mutex);
  return who_->current() == mode::manual ? manual_ : shared_.owned;
}

std::vector<std::string> Consumer::impl::subscription() const {
  std::lock_guard lock(shared_.mutex);
  return shared_.topics;
}

std::string Consumer::impl::state() const {
  std::lock_guard lock(shared_.mutex);
  return shared_.state;
}

std::string Consumer::impl::http_endpoint() const {
  std::lock_guard lock(shared_.mutex);
  return shared_.metrics.http_endpoint;
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

std::optional<std::string> Consumer::impl::client_instance_id(std::chrono::milliseconds timeout) {
  if (!telemetry_)
    throw Error(make_error_code(client_errc::illegal_state),
                "client telemetry is off: set enable.metrics.push=true to get a client instance id");
  if (timeout < std::chrono::milliseconds::zero())
    throw Error(make_error_code(client_errc::invalid_argument), "client_instance_id(): negative timeout");
  check_open();
  return telemetry_->client_instance_id(timeout);
}

ConsumerMetrics Consumer::impl::metrics() {
  const auto now = clock::now();
  std::lock_guard lock(shared_.mutex);
  // Any thread may ask (as Java's metrics()); only the application's own thread brings the
  // user-thread figures up to date, others see them as last published (at most 100 ms old
  // while it polls).
  if (thread_check_.on_user_thread()) publish_user_metrics(now);
  return detail::make_metrics(shared_, metrics_id_, now, std::chrono::system_clock::now());
}

}  // namespace kgroup
