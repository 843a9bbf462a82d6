#include "net/connection_core.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace kgroup::net {

const char* to_string(connection_state s) noexcept {
  using st = connection_state;
  switch (s) {
    case st::idle:
      return "idle";
    case st::resolving:
      return "resolving";
    case st::connecting:
      return "connecting";
    case st::tls_handshaking:
      return "tls_handshaking";
    case st::handshaking:
      return "handshaking";
    case st::authenticating:
      return "authenticating";
    case st::failed:
      return "failed";
    case st::ready:
      return "ready";
    case st::backoff:
      return "backoff";
    case st::closed:
      return "closed";
  }
  return "?";
}

connection_core::connection_core(options o)
    : opts_(o),
      reconnect_backoff_(opts_.reconnect_backoff, opts_.reconnect_backoff_max, opts_.reconnect_jitter) {}

bool connection_core::setting_up() const noexcept {
  return state_ == state::resolving || state_ == state::connecting || state_ == state::tls_handshaking ||
         state_ == state::handshaking || state_ == state::authenticating;
}

void connection_core::connect_started(time_point now) {
  state_ = state::resolving;
  connect_deadline_ = now + opts_.connect_timeout;
  last_used_ = now;
  addresses_ = 0;
  addresses_tried_ = 0;
}

std::size_t connection_core::resolved(time_point now, std::size_t addresses) {
  state_ = state::connecting;
  addresses_ = addresses;
  address_ = worked_ < addresses ? worked_ : 0;
  addresses_tried_ = 1;
  connect_deadline_ = now + opts_.connect_timeout;
  return address_;
}

std::optional<std::size_t> connection_core::address_failed(time_point now) {
  if (addresses_tried_ >= addresses_) return std::nullopt;
  ++addresses_tried_;
  address_ = (address_ + 1) % addresses_;
  connect_deadline_ = now + opts_.connect_timeout;
  return address_;
}

void connection_core::step(state to) {
  state_ = to;
}

void connection_core::became_ready() {
  state_ = state::ready;
  if (addresses_ > 0) worked_ = address_;
  reconnect_backoff_.reset();
  ++connects_;
}

void connection_core::authenticated(time_point now, std::optional<ms> reauth_in) {
  reauth_at_ = reauth_in ? now + *reauth_in : time_point::max();
  reauthenticating_ = false;
}

std::int32_t connection_core::next_correlation_id() noexcept {
  const std::int32_t id = next_correlation_id_;
  next_correlation_id_ = id == std::numeric_limits<std::int32_t>::max() ? 1 : id + 1;
  return id;
}

void connection_core::sent(time_point now, std::int16_t api_key, std::int32_t correlation_id,
                           bool flexible_header, raw_handler handler, ms timeout) {
  const ms t = timeout.count() > 0 ? timeout : opts_.request_timeout;
  in_flight_.push_back({api_key, correlation_id, flexible_header, now + t, std::move(handler)});
  last_used_ = now;
}

connection_core::match_result connection_core::match(std::int32_t correlation_id) {
  if (in_flight_.empty()) return {std::nullopt, "unsolicited response", std::nullopt};
  if (in_flight_.front().correlation_id != correlation_id)
    return {std::nullopt, "correlation id mismatch", in_flight_.front().correlation_id};
  match_result out{std::move(in_flight_.front()), nullptr, std::nullopt};
  in_flight_.pop_front();
  return out;
}

bool connection_core::answered(time_point now) noexcept {
  last_used_ = now;
  if (!reauth_draining_ || !in_flight_.empty()) return false;
  reauth_draining_ = false;
  return true;
}

std::optional<connection_core::time_point> connection_core::next_deadline(bool waiting) const {
  if (terminal()) return std::nullopt;
  time_point when = time_point::max();
  if (setting_up()) when = std::min(when, connect_deadline_);
  if (state_ == state::ready && !reauthenticating_) when = std::min(when, reauth_at_);
  if (state_ == state::ready && !reauthenticating_ && in_flight_.empty() && opts_.max_idle.count() >= 0) {
    when = std::min(when, last_used_ + opts_.max_idle);
  }
  for (const auto& r : in_flight_) when = std::min(when, r.deadline);
  if (state_ == state::backoff && waiting) when = std::min(when, backoff_until_);
  if (when == time_point::max()) return std::nullopt;
  return when;
}

connection_core::timer_result connection_core::on_timer(time_point now) {
  if (terminal()) return {};
  if (setting_up() && now >= connect_deadline_) {
    // An address that does not answer (a dropped SYN) gives way to the next one, as in Java,
    // where each address is an attempt of its own.
    if (state_ == state::connecting) {
      if (auto next = address_failed(now)) return {timer_verdict::next_address, std::nullopt, next};
    }
    return {timer_verdict::setup_timed_out, std::nullopt, std::nullopt};
  }
  if (state_ == state::ready && !reauthenticating_ && now >= reauth_at_) {
    // New requests wait from now on. With requests in flight, the exchange starts once their
    // answers are in (answered()): sent behind a JoinGroup the coordinator may hold for the whole
    // rebalance, it would time out after request.timeout.ms and take the connection and the
    // JoinGroup with it. The broker accepts a re-authentication after the session ended.
    reauthenticating_ = true;
    if (in_flight_.empty()) return {timer_verdict::reauth_now, std::nullopt, std::nullopt};
    reauth_draining_ = true;
    return {timer_verdict::reauth_waits, std::nullopt, std::nullopt};
  }
  auto expired = std::find_if(in_flight_.begin(), in_flight_.end(),
                              [now](const in_flight_request& r) { return now >= r.deadline; });
  if (expired != in_flight_.end()) {
    timer_result out{timer_verdict::request_timed_out, std::move(*expired), std::nullopt};
    in_flight_.erase(expired);
    return out;
  }
  if (idle_due(now)) {
    // Java closes connections idle this long; load balancers and Azure Event Hubs drop idle ones
    // without a word, and the next request would wait for request.timeout.ms to learn it.
    state_ = state::idle;
    reauth_at_ = time_point::max();
    return {timer_verdict::idle_close, std::nullopt, std::nullopt};
  }
  if (state_ == state::backoff && now >= backoff_until_) {
    state_ = state::idle;
    return {timer_verdict::backoff_over, std::nullopt, std::nullopt};
  }
  return {};
}

bool connection_core::idle_due(time_point now) const noexcept {
  return state_ == state::ready && !reauthenticating_ && in_flight_.empty() && opts_.max_idle.count() >= 0 &&
         now >= last_used_ + opts_.max_idle;
}

connection_core::failure connection_core::failed(time_point now, bool closing) {
  failure out;
  out.was_ready = state_ == state::ready;
  out.in_flight = std::move(in_flight_);
  in_flight_.clear();
  reauthenticating_ = false;
  reauth_draining_ = false;
  reauth_at_ = time_point::max();
  state_ = state::backoff;
  out.wait = closing ? ms(0) : reconnect_backoff_.next();
  backoff_until_ = now + out.wait;
  return out;
}

}  // namespace kgroup::net
