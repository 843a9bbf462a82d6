#include "data/telemetry.hpp"

#include <algorithm>
#include <utility>

#include "kgroup/error.hpp"

namespace kgroup::data::telemetry {

namespace {

// Kafka error codes a telemetry answer may carry.
constexpr std::int16_t unsupported_version = 35;
constexpr std::int16_t invalid_request = 42;
constexpr std::int16_t unsupported_compression_type = 76;
constexpr std::int16_t invalid_record = 87;
constexpr std::int16_t unknown_subscription_id = 117;
constexpr std::int16_t telemetry_too_large = 118;

// Java's default push interval, for a broker that answers with none.
constexpr ms default_push_interval{300000};

std::string code_text(std::int16_t code) {
  return kafka_error_name(code) + " (" + std::to_string(code) + ")";
}

std::variant<std::int64_t, double> minus(const std::variant<std::int64_t, double>& now,
                                         const std::variant<std::int64_t, double>& before) {
  if (const auto* i = std::get_if<std::int64_t>(&now)) {
    if (const auto* j = std::get_if<std::int64_t>(&before)) return *i - *j;
    return static_cast<double>(*i) - std::get<double>(before);
  }
  const double b = std::holds_alternative<double>(before)
                       ? std::get<double>(before)
                       : static_cast<double>(std::get<std::int64_t>(before));
  return std::get<double>(now) - b;
}

}  // namespace

const char* to_string(state s) noexcept {
  switch (s) {
    case state::subscription_needed:
      return "subscription_needed";
    case state::awaiting_subscription:
      return "awaiting_subscription";
    case state::push_needed:
      return "push_needed";
    case state::awaiting_push:
      return "awaiting_push";
    case state::terminating_push_needed:
      return "terminating_push_needed";
    case state::awaiting_terminating:
      return "awaiting_terminating";
    case state::terminated:
      return "terminated";
  }
  return "unknown";
}

bool selected(const std::vector<std::string>& requested, const std::string& name) {
  return std::any_of(requested.begin(), requested.end(), [&](const std::string& prefix) {
    return prefix.empty() || prefix == "*" || name.starts_with(prefix);
  });
}

protocol::compression pick_compression(const std::vector<std::int8_t>& accepted,
                                       const std::vector<protocol::compression>& usable,
                                       const std::vector<protocol::compression>& refused) {
  for (const std::int8_t id : accepted) {
    const auto c = static_cast<protocol::compression>(id);
    if (c == protocol::compression::none) continue;
    if (std::find(usable.begin(), usable.end(), c) == usable.end()) continue;
    if (std::find(refused.begin(), refused.end(), c) != refused.end()) continue;
    return c;
  }
  return protocol::compression::none;
}

core::core(options o)
    : opts_(std::move(o)),
      backoff_(opts_.retry_backoff, opts_.retry_backoff_max, 0.0, opts_.seed),
      rng_(opts_.seed) {}

void core::go(state to, const std::string& why, bool warning) {
  notes_.push_back(
      {warning, std::string("telemetry: ") + to_string(state_) + " -> " + to_string(to) + ": " + why});
  state_ = to;
}

void core::need_subscription(time_point at, const std::string& why, bool warning) {
  next_ = at;
  go(state::subscription_needed, why, warning);
}

step core::poll(time_point now, std::uint64_t wall_unix_nano,
                const std::function<std::vector<sample>()>& collect) {
  step s;
  switch (state_) {
    case state::subscription_needed:
      if (now < next_) {
        s.wake_at = next_;
        return s;
      }
      s.get_subscriptions.emplace();
      if (instance_id_) s.get_subscriptions->client_instance_id = *instance_id_;
      go(state::awaiting_subscription, "asking for the subscription");
      return s;
    case state::push_needed:
    case state::terminating_push_needed: {
      const bool terminating = state_ == state::terminating_push_needed;
      if (!terminating && now < next_) {
        s.wake_at = next_;
        return s;
      }
      bool too_large = false;
      auto req = build_push(wall_unix_nano, collect(), terminating, too_large);
      if (too_large) {
        // Not sent: the broker would refuse it. The next interval may be smaller.
        notes_.push_back({true, "telemetry: the metrics (" + std::to_string(req.metrics.size()) +
                                    " bytes) exceed the broker's TelemetryMaxBytes (" +
                                    std::to_string(sub_->max_bytes) + "): push skipped"});
        pending_.clear();
        if (terminating) {
          go(state::terminated, "closing (the last push was too large to send)");
          return s;
        }
        next_ = now + sub_->push_interval;
        s.wake_at = next_;
        return s;
      }
      s.push = std::move(req);
      first_push_ = false;
      go(terminating ? state::awaiting_terminating : state::awaiting_push,
         terminating ? "pushing the last metrics (terminating)" : "pushing metrics");
      return s;
    }
    case state::awaiting_subscription:
    case state::awaiting_push:
    case state::awaiting_terminating:
    case state::terminated:
      return s;
  }
  return s;
}

protocol::push_telemetry_request core::build_push(std::uint64_t wall_unix_nano,
                                                  const std::vector<sample>& samples, bool terminating,
                                                  bool& too_large) {
  protocol::otlp::metrics_data data;
  data.resource = opts_.resource;
  data.scope_name = opts_.scope_name;
  data.scope_version = opts_.scope_version;
  pending_.clear();
  pending_at_ = wall_unix_nano;
  for (const auto& smp : samples) {
    if (!selected(sub_->requested, smp.name)) continue;
    protocol::otlp::metric m;
    m.name = smp.name;
    m.description = smp.description;
    m.unit = smp.unit;
    protocol::otlp::data_point p;
    p.time_unix_nano = wall_unix_nano;
    p.value = smp.value;
    if (smp.counter) {
      m.kind = protocol::otlp::metric_kind::sum;
      m.monotonic = true;
      pending_[smp.name] = smp.value;
      if (sub_->delta) {
        m.sum_temporality = protocol::otlp::temporality::delta;
        if (auto it = sent_.find(smp.name); it != sent_.end()) {
          p.value = minus(smp.value, it->second);
          p.start_time_unix_nano = sent_at_;
        } else {
          p.start_time_unix_nano = opts_.start_unix_nano;
        }
      } else {
        m.sum_temporality = protocol::otlp::temporality::cumulative;
        p.start_time_unix_nano = opts_.start_unix_nano;
      }
    }
    m.points.push_back(std::move(p));
    data.metrics.push_back(std::move(m));
  }
  protocol::push_telemetry_request req;
  req.client_instance_id = instance_id_.value_or(protocol::uuid{});
  req.subscription_id = sub_->id;
  req.terminating = terminating;
  const auto payload = protocol::otlp::encode(data);
  const auto codec = pick_compression(sub_->accepted_compression, opts_.codecs, refused_);
  req.compression_type = static_cast<std::int8_t>(protocol::compression::none);
  if (codec != protocol::compression::none) {
    protocol::bytes packed;
    if (!protocol::compress(codec, payload, packed)) {
      req.compression_type = static_cast<std::int8_t>(codec);
      req.metrics = std::move(packed);
    }
  }
  if (req.compression_type == static_cast<std::int8_t>(protocol::compression::none)) req.metrics = payload;
  too_large = sub_->max_bytes > 0 && req.metrics.size() > static_cast<std::size_t>(sub_->max_bytes);
  return req;
}

void core::on_subscriptions(time_point now, std::error_code failure,
                            const protocol::get_telemetry_subscriptions_response* answer) {
  if (state_ != state::awaiting_subscription) return;  // closed meanwhile: the answer is moot
  if (failure || answer == nullptr) {
    need_subscription(now + backoff_.next(), "GetTelemetrySubscriptions failed: " + failure.message());
    return;
  }
  const auto code = answer->error_code;
  if (code == unsupported_version || code == invalid_request) {
    go(state::terminated,
       "GetTelemetrySubscriptions refused with " + code_text(code) + "; telemetry stays off", true);
    return;
  }
  if (code != 0) {
    need_subscription(now + backoff_.next(), "GetTelemetrySubscriptions answered " + code_text(code));
    return;
  }
  if (!instance_id_) {
    if (answer->client_instance_id.is_zero()) {
      need_subscription(now + backoff_.next(), "the broker assigned no client instance id (zero Uuid)", true);
      return;
    }
    instance_id_ = answer->client_instance_id;
  } else if (!answer->client_instance_id.is_zero()) {
    instance_id_ = answer->client_instance_id;  // the broker may reassign it
  }
  backoff_.reset();
  subscription s;
  s.id = answer->subscription_id;
  s.accepted_compression = answer->accepted_compression_types;
  s.push_interval = answer->push_interval_ms > 0 ? ms(answer->push_interval_ms) : default_push_interval;
  s.max_bytes = answer->telemetry_max_bytes;
  s.delta = answer->delta_temporality;
  s.requested = answer->requested_metrics;
  const bool changed = !sub_ || sub_->id != s.id || sub_->delta != s.delta || sub_->requested != s.requested;
  if (changed) {
    // A new subscription starts its deltas afresh (Java resets its collected state likewise).
    sent_.clear();
    sent_at_ = 0;
    first_push_ = true;
  }
  sub_ = std::move(s);
  if (sub_->requested.empty()) {
    need_subscription(now + sub_->push_interval,
                      "subscribed to no metrics; asking again after the push interval");
    return;
  }
  ms wait = sub_->push_interval;
  if (first_push_) {
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    wait = ms(static_cast<std::int64_t>(static_cast<double>(wait.count()) * jitter(rng_)));
  }
  next_ = now + wait;
  go(state::push_needed, "subscription " + std::to_string(sub_->id) + ": " +
                             std::to_string(sub_->requested.size()) + " selector(s), every " +
                             std::to_string(sub_->push_interval.count()) + " ms");
}

void core::on_push(time_point now, std::error_code failure, const protocol::push_telemetry_response* answer) {
  const bool terminating = state_ == state::awaiting_terminating;
  if (state_ != state::awaiting_push && !terminating) return;
  const std::int16_t code = (failure || answer == nullptr) ? std::int16_t{-1} : answer->error_code;
  if (code == 0) {
    ++pushes_;
    backoff_.reset();
    if (sub_ && sub_->delta) {
      for (auto& [name, v] : pending_) sent_[name] = v;
      sent_at_ = pending_at_;
    }
  }
  pending_.clear();
  if (terminating) {
    go(state::terminated, code == 0    ? "the last push was answered"
                          : code == -1 ? "the last push failed: " + failure.message()
                                       : "the last push was answered " + code_text(code));
    return;
  }
  if (close_requested_) {
    go(state::terminating_push_needed, "closing after the push in flight");
    return;
  }
  if (code == -1) {
    need_subscription(now + backoff_.next(), "PushTelemetry failed: " + failure.message());
    return;
  }
  switch (code) {
    case 0:
      next_ = now + sub_->push_interval;
      go(state::push_needed, "push answered");
      return;
    case unknown_subscription_id:
      need_subscription(now, "the broker no longer knows subscription " + std::to_string(sub_->id));
      return;
    case unsupported_compression_type: {
      const auto used = pick_compression(sub_->accepted_compression, opts_.codecs, refused_);
      if (used != protocol::compression::none) refused_.push_back(used);
      need_subscription(now, std::string("the broker refused the codec ") + protocol::to_string(used), true);
      return;
    }
    case unsupported_version:
    case invalid_request:
    case invalid_record:
      go(state::terminated, "PushTelemetry refused with " + code_text(code) + "; telemetry stays off", true);
      return;
    case telemetry_too_large:
    default:
      next_ = now + sub_->push_interval;
      go(state::push_needed, "push answered " + code_text(code) + "; next push at the next interval", true);
      return;
  }
}

void core::unsupported() {
  if (state_ != state::terminated)
    go(state::terminated, "the broker does not offer the telemetry APIs (KIP-714)");
}

void core::close() {
  switch (state_) {
    case state::push_needed:
      go(state::terminating_push_needed, "closing");
      return;
    case state::awaiting_push:
      close_requested_ = true;
      return;
    case state::subscription_needed:
    case state::awaiting_subscription:
      go(state::terminated, "closing without a subscription: no last push");
      return;
    case state::terminating_push_needed:
    case state::awaiting_terminating:
    case state::terminated:
      return;
  }
}

}  // namespace kgroup::data::telemetry
