#include "net/metadata_recovery.hpp"

#include <algorithm>

namespace kgroup::net {

const char* to_string(metadata_recovery::reason r) noexcept {
  using rs = metadata_recovery::reason;
  switch (r) {
    case rs::none:
      return "none";
    case rs::brokers_unreachable:
      return "no broker known from metadata can be reached";
    case rs::metadata_stale:
      return "no metadata for longer than metadata.recovery.rebootstrap.trigger.ms";
    case rs::broker_required:
      return "a broker answered REBOOTSTRAP_REQUIRED";
  }
  return "?";
}

const char* to_string(metadata_recovery::phase p) noexcept {
  switch (p) {
    case metadata_recovery::phase::bootstrapping:
      return "bootstrapping";
    case metadata_recovery::phase::on_metadata:
      return "on_metadata";
  }
  return "?";
}

bool metadata_recovery::reachable(const broker_link& b) noexcept {
  switch (b.state) {
    case connection_state::idle:
      return b.failed_attempts == 0;
    case connection_state::backoff:
    case connection_state::closed:
    case connection_state::failed:
      return false;
    case connection_state::resolving:
    case connection_state::connecting:
    case connection_state::tls_handshaking:
    case connection_state::handshaking:
    case connection_state::authenticating:
    case connection_state::ready:
      return true;
  }
  return true;
}

void metadata_recovery::refresh_started(time_point now) noexcept {
  if (!wanted_since_) wanted_since_ = now;
}

void metadata_recovery::brokers_learned() noexcept {
  phase_ = phase::on_metadata;
  wanted_since_.reset();
}

metadata_recovery::reason metadata_recovery::before_request(time_point now,
                                                            std::span<const broker_link> known) noexcept {
  if (opts_.recovery != strategy::rebootstrap) return reason::none;
  if (phase_ == phase::on_metadata &&
      std::none_of(known.begin(), known.end(), [](const broker_link& b) { return reachable(b); })) {
    return rebootstrap(now, reason::brokers_unreachable);
  }
  if (wanted_since_ && now - *wanted_since_ > opts_.trigger) return rebootstrap(now, reason::metadata_stale);
  return reason::none;
}

metadata_recovery::reason metadata_recovery::rebootstrap_required(time_point now) noexcept {
  if (opts_.recovery != strategy::rebootstrap) return reason::none;
  return rebootstrap(now, reason::broker_required);
}

metadata_recovery::reason metadata_recovery::rebootstrap(time_point now, reason why) noexcept {
  // Java's rebootstrap(now): the bootstrap servers again, and the clock from now (a metadata
  // refresh is wanted until one of them answers).
  phase_ = phase::bootstrapping;
  wanted_since_ = now;
  ++rebootstraps_;
  return why;
}

}  // namespace kgroup::net
