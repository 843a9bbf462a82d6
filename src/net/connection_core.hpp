// The decisions of one broker connection, without sockets, timers or threads (the shape of the
// membership cores): its lifecycle state, the requests in flight in correlation order and their
// deadlines, the setup deadline, the reconnect backoff and KIP-368 re-authentication timing. The
// driver (connection.cpp) reports what its socket and timer did and does what the answers say:
// deliver an answer, close for a protocol violation, start a re-authentication, fail a request
// that timed out, connect again, try the name's next address, close an idle connection. Time is
// an argument.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

#include "base/backoff.hpp"
#include "protocol/primitives.hpp"

namespace kgroup::net {

/// A received response: the owner of the buffer holding the frame (kept alive by the shared_ptr,
/// so views into it such as records stay valid), where the frame starts, its length (its first
/// `length` bytes; a reused buffer may be longer, frame_pool.hpp) and where the body starts.
struct response_frame {
  std::shared_ptr<const void> frame;
  const std::uint8_t* data = nullptr;
  std::size_t body_offset = 0;
  std::size_t length = 0;
  std::span<const std::uint8_t> body() const {
    return std::span<const std::uint8_t>(data, length).subspan(body_offset);
  }
};

/// Raw completion: an error, or the response frame. Returning an error (e.g. the body did not
/// decode) closes the connection as a protocol violation.
using raw_handler = std::function<std::error_code(std::error_code, const response_frame&)>;

enum class connection_state {
  idle,             // not connected; the next request starts a connect
  resolving,        // DNS lookup in progress
  connecting,       // TCP connect in progress
  tls_handshaking,  // TLS handshake in progress
  handshaking,      // ApiVersions sent, waiting for the broker's version ranges
  authenticating,   // SASL exchange in progress
  ready,            // requests flow
  backoff,          // a failure happened; waiting before the next attempt is allowed
  closed,           // close() was called; terminal
  failed,           // authentication or TLS trust failed; terminal
};
const char* to_string(connection_state s) noexcept;

class connection_core {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using ms = std::chrono::milliseconds;
  using state = connection_state;

  struct options {
    ms request_timeout{30000};
    ms connect_timeout{10000};
    ms reconnect_backoff{50};
    ms reconnect_backoff_max{1000};
    /// Either way, so many clients do not reconnect in lockstep (tests use 0).
    double reconnect_jitter = 0.2;
    /// connections.max.idle.ms: a ready connection with nothing in flight for this long is closed
    /// (quietly: back to idle, the next request connects again). Negative: never.
    ms max_idle{-1};
  };

  struct in_flight_request {
    std::int16_t api_key = 0;
    std::int32_t correlation_id = 0;
    bool flexible_header = false;
    time_point deadline{};
    raw_handler handler;
  };

  explicit connection_core(options o);

  state current() const noexcept { return state_; }
  bool terminal() const noexcept { return state_ == state::closed || state_ == state::failed; }
  /// Between the first step of a connect and `ready` (the setup deadline runs).
  bool setting_up() const noexcept;
  /// A re-authentication is due or running: new requests wait for it.
  bool reauthenticating() const noexcept { return reauthenticating_; }
  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  /// Completed connection attempts that reached `ready`.
  std::uint64_t connects() const noexcept { return connects_; }
  /// Attempts that failed since the connection was last `ready` (losing a ready connection counts
  /// one): the count its reconnect backoff grows with.
  int failed_attempts() const noexcept { return reconnect_backoff_.attempts(); }
  /// Whether a jittered reconnect backoff was drawn yet (its generator exists); for tests.
  bool reconnect_jitter_drawn() const noexcept { return reconnect_backoff_.drew(); }

  // ---- the connection's steps, as the driver reports them ----

  /// A connect begins (idle -> resolving): the setup must reach `ready` by connect.timeout.
  /// Every connect resolves the name again (client.dns.lookup=use_all_dns_ips).
  void connect_started(time_point now);
  /// The name resolved to `addresses` (> 0) addresses (resolving -> connecting): the index of the
  /// one to try first, the one that last reached `ready` if the list is still that long (as Java,
  /// which keeps its place in the list), else the first. Each address gets connect.timeout.
  std::size_t resolved(time_point now, std::size_t addresses);
  /// Connecting to the current address failed at once (refused, unreachable): the next address to
  /// try, with a connect.timeout of its own, or none when all of them were tried in this attempt
  /// (the driver then reports failed()).
  std::optional<std::size_t> address_failed(time_point now);
  /// resolving -> connecting -> tls_handshaking -> handshaking -> authenticating, in order (a
  /// step may be skipped: no TLS, no SASL).
  void step(state to);
  /// The setup is done (ApiVersions, and the SASL exchange if any): requests flow, the reconnect
  /// backoff starts over.
  void became_ready();
  /// A SASL exchange is done. `reauth_in`: when to re-authenticate (KIP-368), none if the broker
  /// set no session lifetime. Ends a re-authentication.
  void authenticated(time_point now, std::optional<ms> reauth_in);
  /// The driver starts a re-authentication now (on_timer's or answered()'s verdict).
  void reauth_started() noexcept { reauthenticating_ = true; }

  // ---- requests and answers ----

  /// The correlation id of the next request (1 .. INT32_MAX, then 1 again).
  std::int32_t next_correlation_id() noexcept;
  /// A request went out; its answer is due by now + `timeout` (zero: request.timeout.ms).
  void sent(time_point now, std::int16_t api_key, std::int32_t correlation_id, bool flexible_header,
            raw_handler handler, ms timeout = ms{0});
  /// A response frame carried `correlation_id`: the request it answers (the head of the queue,
  /// Kafka answers in order), or why the frame is a protocol violation (none in flight, another
  /// id). The request is no longer in flight.
  struct match_result {
    std::optional<in_flight_request> request;
    const char* violation = nullptr;       // set when `request` is not
    std::optional<std::int32_t> expected;  // a mismatch: the id the oldest request carries
  };
  match_result match(std::int32_t correlation_id);
  /// An answer was delivered: true when a re-authentication was waiting for the last request in
  /// flight and may start now (the driver then starts it).
  /// The connection's idle time (connections.max.idle.ms) starts again at `now`.
  bool answered(time_point now) noexcept;

  // ---- time ----

  /// When on_timer() must run next; none when nothing is timed. `waiting`: requests wait for the
  /// connection (a backoff then ends in a new connect).
  std::optional<time_point> next_deadline(bool waiting) const;
  enum class timer_verdict {
    nothing,            // not yet: arm the timer again
    setup_timed_out,    // fail the attempt: connection setup timed out
    reauth_now,         // re-authenticate now (nothing in flight)
    reauth_waits,       // re-authentication due: new requests wait, it starts after the last answer
    request_timed_out,  // `expired` timed out: fail it, then close the connection (as Java)
    backoff_over,       // state is idle again: connect if requests wait
    next_address,       // the current address did not connect within connect.timeout: drop that
                        // socket and try `address` (the attempt goes on)
    idle_close,         // nothing in flight for connections.max.idle.ms: close the socket quietly;
                        // state is idle, nothing to fail, the next request connects again
  };
  struct timer_result {
    timer_verdict verdict = timer_verdict::nothing;
    std::optional<in_flight_request> expired;
    std::optional<std::size_t> address;  // next_address: the one to try
  };
  timer_result on_timer(time_point now);

  // ---- failure ----

  struct failure {
    std::deque<in_flight_request> in_flight;  // to fail, in order
    ms wait{0};                               // until a reconnect is allowed
    bool was_ready = false;
  };
  /// The connection is lost (or given up): everything in flight is returned to fail, the state is
  /// backoff until now + the next reconnect backoff. `closing`: the client closes it for good
  /// (stop() follows), so no reconnect backoff is drawn (wait 0, the attempts not counted): a
  /// jittered draw would make the backoff's generator, 5,000 bytes, at every close (issue 37).
  failure failed(time_point now, bool closing = false);
  /// Terminal: close() (closed) or a failure retrying cannot fix (failed).
  void stop(state terminal) noexcept { state_ = terminal; }

 private:
  options opts_;
  state state_ = state::idle;
  time_point connect_deadline_{};
  time_point backoff_until_{};
  base::backoff reconnect_backoff_;  // consecutive failed attempts since the last `ready`
  std::uint64_t connects_ = 0;
  std::int32_t next_correlation_id_ = 1;
  std::deque<in_flight_request> in_flight_;
  // KIP-368: set once a re-authentication is due (new requests wait) until it is done.
  bool reauthenticating_ = false;
  // Due, but requests are still in flight: the exchange starts when the last answer is in.
  bool reauth_draining_ = false;
  time_point reauth_at_ = time_point::max();
  // The last time a request was sent or answered (or the connect began): the idle clock.
  time_point last_used_{};
  // This attempt's addresses (client.dns.lookup): how many, the one being tried, how many tried.
  std::size_t addresses_ = 0;
  std::size_t address_ = 0;
  std::size_t addresses_tried_ = 0;
  // The index of the address that last reached `ready` (where the next attempt starts).
  std::size_t worked_ = 0;
  bool idle_due(time_point now) const noexcept;
};

}  // namespace kgroup::net
