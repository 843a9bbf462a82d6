#include "consumer/telemetry_reporter.hpp"

#include <random>
#include <sstream>

#include <fmt/format.h>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "kgroup/version.hpp"

namespace kgroup::detail {

namespace asio = boost::asio;
using data::telemetry::sample;

namespace {

constexpr const char* prefix = "org.apache.kafka.consumer.";

std::uint64_t wall_unix_nano() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

std::vector<sample> telemetry_samples(const ConsumerMetrics& m) {
  std::vector<sample> out;
  auto gauge = [&](const char* name, const char* description, const char* unit, auto value) {
    sample s{fmt::format("{}{}", prefix, name), description, unit, false, {}};
    if constexpr (std::is_floating_point_v<decltype(value)>)
      s.value = static_cast<double>(value);
    else
      s.value = static_cast<std::int64_t>(value);
    out.push_back(std::move(s));
  };
  auto counter = [&](const char* name, const char* description, const char* unit, auto value) {
    gauge(name, description, unit, value);
    out.back().counter = true;
  };
  // consumer-metrics
  gauge("poll.idle.ratio.avg",
        "The average fraction of time the consumer's poll() is idle as opposed to waiting for the user code "
        "to process records.",
        "1", m.poll_idle_ratio_avg);
  gauge("time.between.poll.avg", "The average delay between invocations of poll() in milliseconds.", "ms",
        m.time_between_poll_avg_ms);
  gauge("time.between.poll.max", "The max delay between invocations of poll() in milliseconds.", "ms",
        m.time_between_poll_max_ms);
  if (m.last_poll_seconds_ago >= 0)
    gauge("last.poll.seconds.ago", "The number of seconds since the last poll() invocation.", "s",
          m.last_poll_seconds_ago);
  // consumer-coordinator-metrics
  gauge("coordinator.assigned.partitions", "The number of partitions currently assigned to this consumer.",
        "1", m.assigned_partitions);
  gauge("coordinator.commit.latency.avg", "The average time taken for a commit request.", "ms",
        m.commit_latency_avg_ms);
  gauge("coordinator.commit.latency.max", "The max time taken for a commit request.", "ms",
        m.commit_latency_max_ms);
  counter("coordinator.commit.total", "The total number of commit calls.", "1", m.commit_total);
  gauge("coordinator.rebalance.latency.avg", "The average time taken for a group to complete a rebalance.",
        "ms", m.rebalance_latency_avg_ms);
  gauge("coordinator.rebalance.latency.max", "The max time taken for a group to complete a rebalance.", "ms",
        m.rebalance_latency_max_ms);
  counter("coordinator.rebalance.latency.total", "The total number of milliseconds spent in rebalances.",
          "ms", m.rebalance_latency_total_ms);
  counter("coordinator.rebalance.total", "The total number of rebalance events.", "1", m.rebalance_total);
  counter("coordinator.failed.rebalance.total", "The total number of failed rebalance events.", "1",
          m.failed_rebalance_total);
  gauge("coordinator.rebalance.rate.per.hour", "The number of rebalance events per hour.", "1",
        m.rebalance_rate_per_hour);
  gauge("coordinator.failed.rebalance.rate.per.hour", "The number of failed rebalance events per hour.", "1",
        m.failed_rebalance_rate_per_hour);
  if (m.last_rebalance_seconds_ago >= 0)
    gauge("coordinator.last.rebalance.seconds.ago", "The number of seconds since the last rebalance event.",
          "s", m.last_rebalance_seconds_ago);
  gauge("coordinator.join.time.avg", "The average time taken for a group rejoin.", "ms", m.join_time_avg_ms);
  gauge("coordinator.join.time.max", "The max time taken for a group rejoin.", "ms", m.join_time_max_ms);
  counter("coordinator.join.total", "The total number of group joins.", "1", m.join_total);
  gauge("coordinator.sync.time.avg", "The average time taken for a group sync.", "ms", m.sync_time_avg_ms);
  gauge("coordinator.sync.time.max", "The max time taken for a group sync.", "ms", m.sync_time_max_ms);
  counter("coordinator.sync.total", "The total number of group syncs.", "1", m.sync_total);
  gauge("coordinator.heartbeat.response.time.max",
        "The max time taken to receive a response to a heartbeat request.", "ms",
        m.heartbeat_response_time_max_ms);
  counter("coordinator.heartbeat.total", "The total number of heartbeats.", "1", m.heartbeat_total);
  if (m.last_heartbeat_seconds_ago >= 0)
    gauge("coordinator.last.heartbeat.seconds.ago",
          "The number of seconds since the last coordinator heartbeat was sent.", "s",
          m.last_heartbeat_seconds_ago);
  // consumer-fetch-manager-metrics
  if (m.fetch_latency.count > 0) {
    gauge("fetch.manager.fetch.latency.avg", "The average time taken for a fetch request.", "ms",
          m.fetch_latency.sum * 1000.0 / static_cast<double>(m.fetch_latency.count));
    gauge("fetch.manager.fetch.latency.max", "The max time taken for any fetch request.", "ms",
          m.fetch_latency_max_ms);
  }
  counter("fetch.manager.fetch.total", "The total number of fetch requests.", "1", m.fetch_latency.count);
  counter("fetch.manager.records.consumed.total", "The total number of records consumed.", "1",
          m.records_consumed_total);
  gauge("fetch.manager.records.consumed.rate", "The average number of records consumed per second.", "1",
        m.records_consumed_rate);
  counter("fetch.manager.bytes.consumed.total", "The total number of bytes consumed.", "By",
          m.bytes_consumed_total);
  gauge("fetch.manager.bytes.consumed.rate", "The average number of bytes consumed per second.", "By",
        m.bytes_consumed_rate);
  if (m.records_lag_max >= 0)
    gauge("fetch.manager.records.lag.max", "The maximum lag in terms of number of records for any partition.",
          "1", m.records_lag_max);
  if (m.records_lead_min >= 0)
    gauge("fetch.manager.records.lead.min",
          "The minimum lead in terms of number of records for any partition.", "1", m.records_lead_min);
  return out;
}

std::vector<protocol::otlp::attribute> telemetry_resource(const ConsumerMetrics& m,
                                                          const std::string& client_rack) {
  std::vector<protocol::otlp::attribute> out;
  if (!client_rack.empty()) out.push_back({"client_rack", client_rack});
  if (!m.group_id.empty()) out.push_back({"group_id", m.group_id});
  if (m.group_instance_id) out.push_back({"group_instance_id", *m.group_instance_id});
  if (!m.member_id.empty()) out.push_back({"group_member_id", m.member_id});
  return out;
}

std::vector<protocol::compression> telemetry_codecs(const std::string& list) {
  std::vector<protocol::compression> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, item.find_last_not_of(" \t") - b + 1);
    if (item == "zstd")
      out.push_back(protocol::compression::zstd);
    else if (item == "lz4")
      out.push_back(protocol::compression::lz4);
    else if (item == "gzip")
      out.push_back(protocol::compression::gzip);
    else if (item == "snappy")
      out.push_back(protocol::compression::snappy);
    else
      throw Error(make_error_code(client_errc::invalid_config),
                  "internal.metrics.push.compression.types: unknown codec '" + item + "'");
  }
  return out;
}

namespace {

data::telemetry::options make_options(const Config& config) {
  data::telemetry::options o;
  o.codecs = telemetry_codecs(config.get("internal.metrics.push.compression.types"));
  o.scope_version = library_version();
  o.retry_backoff = config.get_ms("retry.backoff.ms");
  o.retry_backoff_max = std::max(o.retry_backoff, config.get_ms("retry.backoff.max.ms"));
  o.start_unix_nano = wall_unix_nano();
  o.seed = static_cast<std::uint32_t>(std::random_device{}());
  return o;
}

}  // namespace

telemetry_reporter::telemetry_reporter(asio::io_context& io, std::shared_ptr<net::cluster> cluster,
                                       const Config& config, std::function<ConsumerMetrics()> snapshot)
    : io_(io),
      cluster_(std::move(cluster)),
      snapshot_(std::move(snapshot)),
      client_rack_(config.get("client.rack")),
      core_(make_options(config)),
      timer_(io) {}

void telemetry_reporter::start() {
  pump();
}

void telemetry_reporter::log_notes() {
  for (const auto& n : core_.take_notes()) {
    if (n.warning)
      logger()->warn("{}", n.text);
    else
      logger()->debug("{}", n.text);
  }
}

void telemetry_reporter::pump() {
  if (stopped_) return;
  const auto now = std::chrono::steady_clock::now();
  auto step = core_.poll(now, wall_unix_nano(), [this] {
    // The resource attributes follow the membership (the member id comes with the first join).
    const auto m = snapshot_();
    core_.set_resource(telemetry_resource(m, client_rack_));
    return telemetry_samples(m);
  });
  log_notes();
  if (step.get_subscriptions) send_subscriptions(*step.get_subscriptions);
  if (step.push) send_push(std::move(*step.push));
  arm(step.wake_at);
  after_answer();
}

void telemetry_reporter::arm(std::optional<data::telemetry::time_point> at) {
  if (!at) return;
  timer_.expires_at(*at);
  timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto s = self.lock()) s->pump();
  });
}

namespace {

// Whether the broker behind `conn` (ready) speaks both telemetry APIs at a version kgroup knows.
bool offers_telemetry(const net::connection& conn) {
  std::int16_t v = 0;
  return !conn.versions().pick<protocol::get_telemetry_subscriptions_request>(v) &&
         !conn.versions().pick<protocol::push_telemetry_request>(v);
}

}  // namespace

void telemetry_reporter::send_subscriptions(protocol::get_telemetry_subscriptions_request req) {
  auto conn = cluster_->least_loaded();
  if (!conn) {
    core_.on_subscriptions(std::chrono::steady_clock::now(),
                           make_error_code(client_errc::no_brokers_available), nullptr);
    asio::post(io_, [self = shared_from_this()] { self->pump(); });
    return;
  }
  // The broker's versions first: a broker without the APIs gets nothing (and the connection's
  // "no common API version" error is not logged for what is not an error here).
  conn->when_ready([self = shared_from_this(), conn, req = std::move(req)](std::error_code ready) mutable {
    if (self->stopped_) return;
    if (ready) {
      self->core_.on_subscriptions(std::chrono::steady_clock::now(), ready, nullptr);
      self->pump();
      return;
    }
    if (!offers_telemetry(*conn)) {
      self->core_.unsupported();
      self->pump();
      return;
    }
    conn->send(std::move(req),
               [self](std::error_code ec, const protocol::get_telemetry_subscriptions_response& r) {
                 if (self->stopped_) return;
                 self->core_.on_subscriptions(std::chrono::steady_clock::now(), ec, ec ? nullptr : &r);
                 if (auto id = self->core_.client_instance_id()) {
                   std::lock_guard lock(self->mutex_);
                   self->instance_id_ = id->to_string();
                 }
                 self->pump();
               });
  });
}

void telemetry_reporter::send_push(protocol::push_telemetry_request req) {
  auto conn = cluster_->least_loaded();
  if (!conn) {
    core_.on_push(std::chrono::steady_clock::now(), make_error_code(client_errc::no_brokers_available),
                  nullptr);
    asio::post(io_, [self = shared_from_this()] { self->pump(); });
    return;
  }
  conn->when_ready([self = shared_from_this(), conn, req = std::move(req)](std::error_code ready) mutable {
    if (self->stopped_) return;
    if (ready) {
      self->core_.on_push(std::chrono::steady_clock::now(), ready, nullptr);
      self->pump();
      return;
    }
    if (!offers_telemetry(*conn)) {
      // Another broker than the one that gave the subscription, without the APIs.
      self->core_.unsupported();
      self->pump();
      return;
    }
    conn->send(std::move(req), [self](std::error_code ec, const protocol::push_telemetry_response& r) {
      if (self->stopped_) return;
      self->core_.on_push(std::chrono::steady_clock::now(), ec, ec ? nullptr : &r);
      self->pump();
    });
  });
}

void telemetry_reporter::after_answer() {
  const bool id_final = core_.client_instance_id().has_value() || core_.finished();
  {
    std::lock_guard lock(mutex_);
    if (id_final && !id_final_) {
      id_final_ = true;
      id_known_.notify_all();
    }
  }
  if (core_.finished() && closed_) std::exchange(closed_, nullptr)();
}

void telemetry_reporter::close(std::function<void()> done) {
  closed_ = std::move(done);
  core_.close();
  log_notes();
  timer_.cancel();
  pump();
}

void telemetry_reporter::shutdown() {
  stopped_ = true;
  timer_.cancel();
  {
    std::lock_guard lock(mutex_);
    id_final_ = true;
  }
  id_known_.notify_all();
  if (closed_) std::exchange(closed_, nullptr)();
}

std::optional<std::string> telemetry_reporter::client_instance_id(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  id_known_.wait_for(lock, timeout, [this] { return id_final_ || instance_id_.has_value(); });
  return instance_id_;
}

}  // namespace kgroup::detail
