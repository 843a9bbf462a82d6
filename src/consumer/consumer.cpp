// The Consumer facade: the user-thread side. Everything protocol-related happens on the
// background thread (net/group_driver); this file posts user calls there and runs listener
// callbacks that the background thread queues (see consumer/shared_state.hpp).
#include "kgroup/consumer.hpp"

#include <atomic>
#include <exception>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "consumer/shared_state.hpp"
#include "kgroup/log.hpp"
#include "net/cluster.hpp"
#include "net/group_driver.hpp"

namespace kgroup {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

class Consumer::impl {
 public:
  impl(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom) : config_(config) {
    config_.validate();
    if (config_.get("group.id").empty()) {
      throw error(make_error_code(client_errc::invalid_config), "group.id: required to subscribe to a consumer group");
    }
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
        throw error(make_error_code(client_errc::invalid_config),
                    fmt::format("partition.assignment.strategy: unknown assignor '{}' (built-ins: range, roundrobin, "
                                "sticky, cooperative-sticky; or pass a custom PartitionAssignor)",
                                name));
      }
      mo.assignors.push_back(std::move(a));
    }
    if (mo.assignors.empty()) {
      throw error(make_error_code(client_errc::invalid_config), "partition.assignment.strategy: no assignor given");
    }
    // The rebalance protocol is the best one every configured assignor supports (as in Java):
    // "range,cooperative-sticky" stays eager until range is removed.
    bool all_cooperative = true;
    for (const auto& a : mo.assignors) {
      auto p = a->supported_protocols();
      if (std::find(p.begin(), p.end(), RebalanceProtocol::cooperative) == p.end()) all_cooperative = false;
    }
    mo.protocol = all_cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager;

    net::group_driver_options dopts;
    dopts.member = mo;
    dopts.request_timeout = config_.get_ms("request.timeout.ms");
    dopts.exclude_internal_topics = config_.get_bool("exclude.internal.topics");
    if (config_.get("rebalance.listener.thread") == "heartbeat") {
      dopts.run_listener_inline = [this](const detail::listener_call& call) { run_inline(call); };
    }
    cluster_ = std::make_shared<net::cluster>(io_, net::cluster_options::from_config(config_));
    driver_ = std::make_shared<net::group_driver>(io_, cluster_, std::move(dopts), shared_);
    default_timeout_ = config_.get_ms("default.api.timeout.ms");
    thread_ = std::thread([this] { run(); });
  }

  ~impl() { stop_thread(); }

  void subscribe(std::vector<std::string> topics, std::shared_ptr<ConsumerRebalanceListener> listener) {
    check_open();
    for (const auto& t : topics) {
      if (t.empty()) throw error(make_error_code(client_errc::invalid_config), "subscribe: empty topic name");
    }
    set_listener(std::move(listener));
    post([this, topics = std::move(topics)]() mutable { driver_->subscribe(std::move(topics)); });
  }

  void subscribe(std::regex pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
    check_open();
    set_listener(std::move(listener));
    post([this, pattern = std::move(pattern)]() mutable { driver_->subscribe_pattern(std::move(pattern)); });
  }

  void unsubscribe() {
    check_open();
    std::uint64_t left_before;
    {
      std::lock_guard lock(shared_.mutex);
      left_before = shared_.left_count;
    }
    post([this] { driver_->unsubscribe(); });
    wait_left(left_before, clock::now() + default_timeout_);
    rethrow_listener_error();
  }

  ConsumerRecords poll(std::chrono::milliseconds timeout) {
    check_open();
    const auto deadline = clock::now() + timeout;
    post([this] { driver_->poll_called(); });
    for (;;) {
      run_events(/*throw_fatal=*/true);
      rethrow_listener_error();
      std::unique_lock lock(shared_.mutex);
      if (shared_.woken) {
        shared_.woken = false;
        throw error(make_error_code(client_errc::woken_up));
      }
      if (!shared_.events.empty()) continue;
      if (clock::now() >= deadline) break;
      shared_.cv.wait_until(lock, deadline, [this] { return !shared_.events.empty() || shared_.woken; });
    }
    return ConsumerRecords{};
  }

  std::set<topic_partition> assignment() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.owned;
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
    if (closed_) return;
    closed_ = true;
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
    rethrow_listener_error();
  }

 private:
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
      driver_->shutdown();
      cluster_->close();
      io_.stop();
    });
    thread_.join();
  }

  void check_open() const {
    if (closed_) throw error(make_error_code(client_errc::closed), "the consumer is closed");
  }

  void set_listener(std::shared_ptr<ConsumerRebalanceListener> l) {
    std::lock_guard lock(listener_mutex_);
    listener_ = std::move(l);
  }

  // Runs a listener callback and remembers the first exception; the group carries on regardless.
  void invoke(const detail::listener_call& call) {
    std::shared_ptr<ConsumerRebalanceListener> l;
    {
      std::lock_guard lock(listener_mutex_);
      l = listener_;
    }
    if (!l) return;
    try {
      switch (call.kind) {
        case group::listener_kind::revoked: l->on_partitions_revoked(call.partitions); break;
        case group::listener_kind::assigned: l->on_partitions_assigned(call.partitions); break;
        case group::listener_kind::lost: l->on_partitions_lost(call.partitions); break;
      }
    } catch (...) {
      logger()->error("rebalance listener threw from on_partitions_{}; the rebalance continues",
                      group::to_string(call.kind));
      std::lock_guard lock(listener_mutex_);
      if (!listener_error_) listener_error_ = std::current_exception();
    }
  }

  void run_inline(const detail::listener_call& call) { invoke(call); }

  // Drains queued events on the user thread: listener calls run here and are acknowledged.
  void run_events(bool throw_fatal) {
    for (;;) {
      detail::user_event e;
      {
        std::lock_guard lock(shared_.mutex);
        if (shared_.events.empty()) break;
        e = std::move(shared_.events.front());
        shared_.events.pop_front();
      }
      if (auto* call = std::get_if<detail::listener_call>(&e)) {
        invoke(*call);
        post([this, seq = call->seq] { driver_->listener_done(seq); });
      } else if (auto* f = std::get_if<detail::fatal_error>(&e)) {
        std::lock_guard lock(shared_.mutex);
        shared_.fatal = *f;
      }
    }
    if (throw_fatal) {
      std::lock_guard lock(shared_.mutex);
      if (shared_.fatal) throw error(shared_.fatal->code, shared_.fatal->message);
    }
  }

  bool wait_left(std::uint64_t left_before, clock::time_point deadline) {
    for (;;) {
      run_events(/*throw_fatal=*/false);
      std::unique_lock lock(shared_.mutex);
      if (shared_.left_count > left_before) return true;
      if (!shared_.events.empty()) continue;
      if (clock::now() >= deadline) return false;
      shared_.cv.wait_until(lock, deadline, [&] { return !shared_.events.empty() || shared_.left_count > left_before; });
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
  std::shared_ptr<net::cluster> cluster_;
  std::shared_ptr<net::group_driver> driver_;
  mutable detail::shared_state shared_;
  std::thread thread_;
  std::chrono::milliseconds default_timeout_{60000};
  bool closed_ = false;
  std::mutex listener_mutex_;  // listener_ and listener_error_ (inline callbacks run on the background thread)
  std::shared_ptr<ConsumerRebalanceListener> listener_;
  std::exception_ptr listener_error_;
};

Consumer::Consumer(const Config& config) : Consumer(config, {}) {}

Consumer::Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors)
    : impl_(std::make_unique<impl>(config, std::move(custom_assignors))) {}

Consumer::~Consumer() {
  try {
    impl_->close(std::chrono::seconds(30));
  } catch (const std::exception& e) {
    logger()->warn("error while closing the consumer in its destructor: {}", e.what());
  }
}

void Consumer::subscribe(const std::vector<std::string>& topics, std::shared_ptr<ConsumerRebalanceListener> listener) {
  impl_->subscribe(topics, std::move(listener));
}
void Consumer::subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  impl_->subscribe(pattern, std::move(listener));
}
void Consumer::unsubscribe() { impl_->unsubscribe(); }
ConsumerRecords Consumer::poll(std::chrono::milliseconds timeout) { return impl_->poll(timeout); }
std::set<topic_partition> Consumer::assignment() const { return impl_->assignment(); }
std::vector<std::string> Consumer::subscription() const { return impl_->subscription(); }
ConsumerGroupMetadata Consumer::group_metadata() const { return impl_->group_metadata(); }
void Consumer::enforce_rebalance(const std::string& reason) { impl_->enforce_rebalance(reason); }
void Consumer::wakeup() { impl_->wakeup(); }
void Consumer::close(std::chrono::milliseconds timeout) { impl_->close(timeout); }
std::string Consumer::group_state() const { return impl_->state(); }

}  // namespace kgroup
