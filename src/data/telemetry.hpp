// Client telemetry (KIP-714): the subscription state machine of one client. Pure: no Asio, no
// threads, no clock reads (the caller passes `now` and the wall clock), no logging (notes).
//
// The broker tells the client, in a GetTelemetrySubscriptions answer, which metrics it wants
// (name prefixes), how often (PushIntervalMs), how large (TelemetryMaxBytes), compressed how
// (AcceptedCompressionTypes, in the broker's order of preference) and whether counters travel as
// deltas; the client then sends PushTelemetry with the selected metrics as OTLP protobuf at that
// interval, and one last push marked Terminating when it closes.
//
//   state                   meaning
//   subscription_needed     no usable subscription: GetTelemetrySubscriptions is due at next_
//   awaiting_subscription   a GetTelemetrySubscriptions is in flight
//   push_needed             subscribed: the next PushTelemetry is due at next_
//   awaiting_push           a PushTelemetry is in flight
//   terminating_push_needed close() asked for the last push (Terminating = true), due now
//   awaiting_terminating    the terminating push is in flight
//   terminated              nothing more, ever: closed, or the broker lacks the APIs or refused
//                           them for good (UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_RECORD)
//
// Answers (decisions in docs/DESIGN.md, "Client telemetry"):
// - a subscription with no requested metrics: no pushes; the subscription is fetched again after
//   PushIntervalMs (the operator may subscribe the client later).
// - the first push after each new subscription waits PushIntervalMs x a jitter in [0.5, 1.5), so
//   that clients started together do not push together; later pushes wait PushIntervalMs.
// - UNKNOWN_SUBSCRIPTION_ID and UNSUPPORTED_COMPRESSION_TYPE: fetch the subscription again at
//   once (the latter also stops the client from using that codec again).
// - TELEMETRY_TOO_LARGE, throttling and other errors: keep the subscription, push at the next
//   interval. A payload larger than TelemetryMaxBytes is not sent at all.
// - a request without an answer (connection lost, timeout) or a GetTelemetrySubscriptions error
//   that is not final: fetch the subscription again after an exponential backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "base/backoff.hpp"
#include "base/lazy_rng.hpp"
#include "protocol/compression.hpp"
#include "protocol/messages.hpp"
#include "protocol/otlp.hpp"

namespace kgroup::data::telemetry {

using time_point = std::chrono::steady_clock::time_point;
using ms = std::chrono::milliseconds;

/// One metric as the client has it now.
struct sample {
  std::string name;  ///< full name, e.g. "org.apache.kafka.consumer.poll.idle.ratio.avg"
  std::string description;
  std::string unit;
  /// A monotonic total since the client started (an OTLP Sum, delta or cumulative as the
  /// subscription asks); otherwise a gauge.
  bool counter = false;
  std::variant<std::int64_t, double> value = std::int64_t{0};
};

/// Whether `name` is selected by `requested`, the subscription's RequestedMetrics: an empty list
/// selects nothing; an empty string or "*" selects everything; otherwise a prefix of the name.
bool selected(const std::vector<std::string>& requested, const std::string& name);

/// The codec a push uses: the first of the broker's accepted types that the client can write
/// (`usable`, and not in `refused`), in the broker's order; none when there is no such type.
protocol::compression pick_compression(const std::vector<std::int8_t>& accepted,
                                       const std::vector<protocol::compression>& usable,
                                       const std::vector<protocol::compression>& refused);

struct options {
  /// The codecs the client may use for pushes (internal.metrics.push.compression.types).
  std::vector<protocol::compression> codecs{protocol::compression::zstd, protocol::compression::lz4,
                                            protocol::compression::gzip, protocol::compression::snappy};
  std::vector<protocol::otlp::attribute> resource;  ///< the client's resource attributes
  std::string scope_name = "kgroup";
  std::string scope_version;
  ms retry_backoff{100};        ///< after a failed GetTelemetrySubscriptions, doubling...
  ms retry_backoff_max{30000};  ///< ...up to this
  /// Wall time the client started (cumulative sums count from it), ns since the Unix epoch.
  std::uint64_t start_unix_nano = 0;
  std::uint32_t seed = 0;  ///< for the first push's jitter
};

enum class state {
  subscription_needed,
  awaiting_subscription,
  push_needed,
  awaiting_push,
  terminating_push_needed,
  awaiting_terminating,
  terminated,
};
const char* to_string(state s) noexcept;

/// The current subscription, as the broker last described it.
struct subscription {
  std::int32_t id = 0;
  std::vector<std::int8_t> accepted_compression;
  ms push_interval{300000};
  std::int32_t max_bytes = 0;
  bool delta = false;
  std::vector<std::string> requested;
};

/// What poll() asks the driver to do.
struct step {
  std::optional<protocol::get_telemetry_subscriptions_request> get_subscriptions;
  std::optional<protocol::push_telemetry_request> push;
  /// When poll() wants to run next; none while a request is in flight or after `terminated`.
  std::optional<time_point> wake_at;
};

/// Something worth a log line: a transition with its reason, or a push left unsent.
struct note {
  bool warning = false;
  std::string text;
};

class core {
 public:
  explicit core(options o);

  /// Sends what is due at `now`: collects the metrics (`collect`, called only when a push is due)
  /// at wall time `wall_unix_nano`.
  step poll(time_point now, std::uint64_t wall_unix_nano,
            const std::function<std::vector<sample>()>& collect);

  /// The GetTelemetrySubscriptions answer, or `failure` (no answer: connection lost, timeout).
  void on_subscriptions(time_point now, std::error_code failure,
                        const protocol::get_telemetry_subscriptions_response* answer);
  /// The PushTelemetry answer, or `failure`.
  void on_push(time_point now, std::error_code failure, const protocol::push_telemetry_response* answer);

  /// Replaces the resource attributes of later pushes (the member id comes with the first join).
  void set_resource(std::vector<protocol::otlp::attribute> resource) { opts_.resource = std::move(resource); }

  /// The broker lacks GetTelemetrySubscriptions/PushTelemetry: never ask again.
  void unsupported();
  /// The client closes: a last push marked Terminating if subscribed to some metrics, then
  /// `terminated`. A request in flight is answered first.
  void close();

  state current() const noexcept { return state_; }
  /// Nothing in flight and nothing more to send: the client may close its connections.
  bool finished() const noexcept { return state_ == state::terminated; }
  /// Assigned by the broker in the first answer; none before it.
  std::optional<protocol::uuid> client_instance_id() const { return instance_id_; }
  const std::optional<subscription>& current_subscription() const noexcept { return sub_; }
  /// Pushes answered without error (for tests and metrics).
  std::uint64_t pushes() const noexcept { return pushes_; }
  /// The notes since the last call, oldest first.
  std::vector<note> take_notes() { return std::exchange(notes_, {}); }

 private:
  void go(state to, const std::string& why, bool warning = false);
  void need_subscription(time_point at, const std::string& why, bool warning = false);
  protocol::push_telemetry_request build_push(std::uint64_t wall_unix_nano,
                                              const std::vector<sample>& samples, bool terminating,
                                              bool& too_large);

  options opts_;
  state state_ = state::subscription_needed;
  time_point next_{};  // when the due request is due (subscription_needed, push_needed)
  std::optional<protocol::uuid> instance_id_;
  std::optional<subscription> sub_;
  bool first_push_ = true;                      // the next push is the first of its subscription (jitter)
  bool close_requested_ = false;                // close() while a request was in flight
  base::backoff backoff_;                       // consecutive failed GetTelemetrySubscriptions/pushes
  std::vector<protocol::compression> refused_;  // UNSUPPORTED_COMPRESSION_TYPE for these
  // Delta temporality: counter values at the last answered push, and that push's wall time.
  std::map<std::string, std::variant<std::int64_t, double>> sent_;
  std::map<std::string, std::variant<std::int64_t, double>> pending_;  // the push in flight
  std::uint64_t sent_at_ = 0;
  std::uint64_t pending_at_ = 0;
  std::uint64_t pushes_ = 0;
  base::lazy_mt19937 rng_;  // made at the first draw (base/lazy_rng.hpp)
  std::vector<note> notes_;
};

}  // namespace kgroup::data::telemetry
