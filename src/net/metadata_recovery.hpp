// When the client starts over from bootstrap.servers (KIP-899, KIP-1102), without sockets, timers
// or threads: the decisions of metadata.recovery.strategy and
// metadata.recovery.rebootstrap.trigger.ms, as Java's NetworkClient makes them. The cluster
// (net/cluster.cpp) reports what happened (a metadata refresh began, an answer named the cluster's
// brokers, a broker answered REBOOTSTRAP_REQUIRED) and asks, each time it picks a broker for a
// Metadata or FindCoordinator request, whether to rebootstrap first. A verdict other than
// `none` is an action: the core has already moved to `bootstrapping` and counted it; the cluster
// forgets the brokers it knows from metadata, resolves bootstrap.servers again and opens fresh
// connections to them. Time is an argument.
//
// Phases:
//   bootstrapping  no answer has named the cluster's brokers since the client started or last
//                  rebootstrapped: requests go to the bootstrap servers (and to any broker a
//                  FindCoordinator answer named meanwhile)
//   on_metadata    requests go to the brokers the last answer named, never to the bootstrap
//                  servers (Java forgets them after the first answer too: a bootstrap list is
//                  often a load balancer or a DNS alias, not a broker)
//
// With strategy `rebootstrap` the client rebootstraps
//   - when no broker it knows from metadata can be reached (KIP-899; only on_metadata: while
//     bootstrapping, the bootstrap servers' own backoff paces the retries). A broker counts as
//     unreachable when the connection Metadata requests use to it is neither connected nor
//     connecting and its last attempt failed: in its reconnect backoff, back to idle after a
//     failure, or failed for good. Java counts only the backoff itself, but looks on every poll of
//     its network loop; kgroup looks when a request picks a broker, so that instant test would
//     rarely find every broker inside its backoff at the same moment;
//   - when metadata has been wanted for longer than the trigger without an answer (KIP-1102): the
//     clock starts when a refresh begins and none is pending, stops when an answer names brokers,
//     and starts again at every rebootstrap; it fires when `now - start > trigger` (Java's test);
//   - at once when a broker answers REBOOTSTRAP_REQUIRED (129) in ApiVersions or as a Metadata
//     (v13+) or FindCoordinator answer's top-level error.
// With strategy `none` it never does: it keeps retrying the brokers it knows, and a 129 fails the
// request like any other error.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "net/connection_core.hpp"

namespace kgroup::net {

class metadata_recovery {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  enum class strategy {
    none,         // never rebootstrap
    rebootstrap,  // Java 4.x's default
  };
  enum class phase {
    bootstrapping,  // requests go to bootstrap.servers
    on_metadata,    // requests go to the brokers the last answer named
  };
  /// Why to rebootstrap now (`none`: do not).
  enum class reason {
    none,
    brokers_unreachable,  // no broker known from metadata can be reached
    metadata_stale,       // no answer for longer than metadata.recovery.rebootstrap.trigger.ms
    broker_required,      // a broker answered REBOOTSTRAP_REQUIRED
  };

  struct options {
    strategy recovery = strategy::rebootstrap;
    std::chrono::milliseconds trigger{300000};
  };

  /// A broker known from metadata, as its connection for Metadata requests stands.
  struct broker_link {
    connection_state state = connection_state::idle;  // idle also when there is no connection yet
    int failed_attempts = 0;                          // since the connection was last ready
  };

  explicit metadata_recovery(options o) : opts_(o) {}

  phase current() const noexcept { return phase_; }
  /// Whether the bootstrap servers are candidates for the next request.
  bool use_bootstrap_servers() const noexcept { return phase_ == phase::bootstrapping; }
  /// Rebootstraps so far.
  std::uint64_t rebootstraps() const noexcept { return rebootstraps_; }
  /// When the pending metadata attempt began (the trigger's clock); none when no refresh waits.
  std::optional<time_point> wanted_since() const noexcept { return wanted_since_; }

  // ---- events ----

  /// A metadata refresh begins: the trigger's clock starts unless one is already waiting.
  void refresh_started(time_point now) noexcept;
  /// An answer named the cluster's brokers (an answer naming none is a failed attempt, as Java
  /// treats it): requests go to them from now on, and the clock stops.
  void brokers_learned() noexcept;
  /// Before a broker is picked for a Metadata or FindCoordinator request. `known`: the brokers
  /// known from metadata. The reason to rebootstrap before picking (none: pick as usual).
  reason before_request(time_point now, std::span<const broker_link> known) noexcept;
  /// A broker answered REBOOTSTRAP_REQUIRED: the reason to rebootstrap now (none with strategy
  /// none).
  reason rebootstrap_required(time_point now) noexcept;

  /// Whether the broker counts as reachable: connected, connecting, or idle with no failed
  /// attempt since it was last ready (never tried, or closed for idleness).
  static bool reachable(const broker_link& b) noexcept;

 private:
  reason rebootstrap(time_point now, reason why) noexcept;

  options opts_;
  phase phase_ = phase::bootstrapping;
  // The trigger's clock: set while a refresh waits for an answer naming brokers.
  std::optional<time_point> wanted_since_;
  std::uint64_t rebootstraps_ = 0;
};

const char* to_string(metadata_recovery::reason r) noexcept;
const char* to_string(metadata_recovery::phase p) noexcept;

}  // namespace kgroup::net
