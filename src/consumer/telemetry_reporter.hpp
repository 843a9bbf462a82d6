// Client telemetry's driver (KIP-714, enable.metrics.push): runs the pure subscription core
// (data/telemetry.hpp) on the background thread with one timer, sending GetTelemetrySubscriptions
// and PushTelemetry to the least loaded broker, and maps the Consumer's metrics to the Java
// client's telemetry names (org.apache.kafka.consumer.*).
//
// Threads: everything runs on the background thread except client_instance_id(), which any
// thread may call (the id is written under mutex_ by the background thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "data/telemetry.hpp"
#include "kgroup/config.hpp"
#include "kgroup/metrics.hpp"
#include "net/cluster.hpp"

namespace kgroup::detail {

/// The consumer metrics KIP-714 asks a Java consumer to offer, from a snapshot, with the Java
/// client's telemetry names: "org.apache.kafka.consumer." + group ("coordinator.",
/// "fetch.manager." or none) + the Java metric name with dots for dashes. Totals are counters
/// (OTLP sums), the rest gauges; latencies in milliseconds. Metrics kgroup does not know yet
/// (-1 in the snapshot) are left out.
std::vector<data::telemetry::sample> telemetry_samples(const ConsumerMetrics& m);

/// The resource attributes a consumer sends (KIP-714's client labels): group_id,
/// group_instance_id, group_member_id and client_rack, those that are set. client_id,
/// client_instance_id, the software name and version and the address are added by the broker.
std::vector<protocol::otlp::attribute> telemetry_resource(const ConsumerMetrics& m,
                                                          const std::string& client_rack);

/// The codecs internal.metrics.push.compression.types names (a comma-separated list of zstd,
/// lz4, gzip, snappy; empty: none, send uncompressed). Throws Error(invalid_config) otherwise.
std::vector<protocol::compression> telemetry_codecs(const std::string& list);

class telemetry_reporter : public std::enable_shared_from_this<telemetry_reporter> {
 public:
  telemetry_reporter(boost::asio::io_context& io, std::shared_ptr<net::cluster> cluster, const Config& config,
                     std::function<ConsumerMetrics()> snapshot);

  /// Background thread: asks for the subscription and pushes from then on.
  void start();
  /// Background thread: sends the terminating push, if subscribed, then calls `done` (at once
  /// when there is nothing to send). A second call only replaces `done`.
  void close(std::function<void()> done);
  /// Background thread: stops the timer; nothing is sent any more.
  void shutdown();

  /// Any thread: the client instance id the broker assigned (base64url, as Java's
  /// Uuid.toString()), waiting at most `timeout` for the first answer. Empty when not known by
  /// then, or never (the broker lacks the APIs, or telemetry stopped before an id came).
  std::optional<std::string> client_instance_id(std::chrono::milliseconds timeout);

 private:
  void pump();
  void arm(std::optional<data::telemetry::time_point> at);
  void send_subscriptions(protocol::get_telemetry_subscriptions_request req);
  void send_push(protocol::push_telemetry_request req);
  void after_answer();
  void log_notes();

  boost::asio::io_context& io_;
  std::shared_ptr<net::cluster> cluster_;
  std::function<ConsumerMetrics()> snapshot_;
  std::string client_rack_;
  data::telemetry::core core_;
  boost::asio::steady_timer timer_;
  std::function<void()> closed_;  // close()'s completion, once the core is finished
  bool stopped_ = false;

  std::mutex mutex_;
  std::condition_variable id_known_;
  std::optional<std::string> instance_id_;  // under mutex_
  bool id_final_ = false;                   // under mutex_: no id will come any more
};

}  // namespace kgroup::detail
