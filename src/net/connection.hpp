// One TCP connection to one Kafka broker, on the background thread's io_context.
//
// Lifecycle: idle -> resolving -> connecting [-> tls_handshaking] -> handshaking (ApiVersions)
// [-> authenticating (SaslHandshake, SaslAuthenticate)] -> ready; any failure
// goes to backoff (exponential with jitter) and back to idle when the backoff expires; the next
// request reconnects. Requests made before `ready` wait in a queue and are sent once the versions
// are known. Several requests are in flight at once; Kafka answers them in order, so the response
// at the head of the in-flight queue must carry the head's correlation id, or the connection is
// closed as a protocol violation. A request that times out closes the connection too (its late
// response would otherwise be matched to the next request), as the Java client does.
//
// As Java's (client.dns.lookup=use_all_dns_ips): every connect resolves the name again (an IP
// address is used as it is, without the resolver's thread) and tries its addresses in turn, each
// within socket.connection.setup.timeout.ms, starting with the one that worked last. A connection
// with nothing in flight for connections.max.idle.ms is closed quietly and reopened by the next
// request. The socket options (SO_KEEPALIVE, SO_SNDBUF, SO_RCVBUF) are set before connecting, as
// Java does, so the receive window can scale to them.
//
// Not thread-safe: every call must be made on the io_context's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/backoff.hpp"
#include "kgroup/error.hpp"
#include "net/api_versions.hpp"
#include "net/connection_core.hpp"
#include "net/connection_setup.hpp"
#include "net/frame_pool.hpp"
#include "net/security.hpp"
#include "protocol/answer_check.hpp"
#include "protocol/headers.hpp"
#include "protocol/messages.hpp"
#include "runtime/wire_stats.hpp"

namespace kgroup::net {

struct connection_options {
  std::string client_id = "kgroup";
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds reconnect_backoff_max{1000};
  std::size_t max_response_size = 100'000'000;
  /// Shared by the connections of one client (may be null: then nothing is counted).
  std::shared_ptr<wire_stats> wire;
  /// TLS and SASL; null for PLAINTEXT.
  std::shared_ptr<transport_security> security;
  /// connections.max.idle.ms; negative: never close an idle connection.
  std::chrono::milliseconds max_idle{-1};
  /// socket.keepalive.enable (SO_KEEPALIVE).
  bool keepalive = false;
  /// send.buffer.bytes, receive.buffer.bytes (SO_SNDBUF, SO_RCVBUF); -1: the OS's default.
  int send_buffer = -1;
  int receive_buffer = -1;
  /// Called (on the io_context) when the broker answers ApiVersions with REBOOTSTRAP_REQUIRED
  /// (KIP-1102), with this connection's node id; the connection fails that attempt as for any
  /// other ApiVersions error. The cluster sets it.
  std::function<void(std::int32_t node_id)> on_rebootstrap_required;
  /// For tests: resolves a broker's name instead of the system's resolver (to put an address that
  /// never answers before one that works, say). Called on every connect, on the io_context.
  std::function<std::vector<boost::asio::ip::tcp::endpoint>(const std::string& host, std::uint16_t port)>
      resolve;
};

/// The socket and, with TLS, the stream over it: one per connection attempt, kept alive by the
/// asynchronous operations that use it.
struct connection_transport;

class connection : public std::enable_shared_from_this<connection> {
 public:
  /// Lifecycle states (connection_core.hpp); `failed` is explained by fatal_error().
  using state = connection_state;
  using raw_handler = net::raw_handler;

  connection(boost::asio::io_context& io, std::int32_t node_id, std::string host, std::uint16_t port,
             connection_options opts);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends `req` at the highest version both sides support; `done` gets the decoded response or
  /// an error (connection failure, timeout, no common version, undecodable response).
  template <class Request, class Handler>
  void send(Request req, Handler done) {
    send_keep_frame(std::move(req),
                    [done = std::move(done)](std::error_code ec, const auto& resp,
                                             const response_frame&) mutable { done(ec, resp); });
  }

  /// Like send(), but the handler also gets the frame that holds the response's record views.
  template <class Request, class Handler>
  void send_keep_frame(Request req, Handler done) {
    send_adjusted(
        std::move(req), [](Request&, std::int16_t) {}, std::move(done));
  }

  /// The general form: `adjust(req, version)` runs once the version is chosen, for requests
  /// whose fields depend on it (e.g. FindCoordinator's single key before v4, batched keys after).
  /// An `adjust` returning bool may decline with false: nothing is sent, and `done` gets
  /// std::errc::operation_canceled.
  /// `done(ec, response, frame)`.
  template <class Request, class Adjust, class Handler>
  void send_adjusted(Request req, Adjust adjust, Handler done, std::chrono::milliseconds timeout = {},
                     std::int16_t max_version = -1);

  /// Why the connection is `failed` (empty otherwise): the broker's or TLS's message, the
  /// broker's address and the key to check.
  const std::string& fatal_error() const noexcept { return fatal_message_; }

  /// Runs `cb` once the connection is ready (connecting first if needed), or with the error that
  /// prevented it.
  void when_ready(std::function<void(std::error_code)> cb);

  /// Closes the socket and fails everything queued or in flight with client_errc::shutting_down.
  void close();
  /// Fails every request in flight or queued now, as a lost connection would (their handlers
  /// get connection_closed), and reconnects for later requests after the usual backoff.
  void abort_requests(const char* why);

  state current_state() const noexcept { return core_.current(); }
  std::int32_t node_id() const noexcept { return node_id_; }
  const std::string& host() const noexcept { return host_; }
  std::uint16_t port() const noexcept { return port_; }
  const api_version_table& versions() const noexcept { return setup_.versions(); }
  std::size_t in_flight() const noexcept { return core_.in_flight(); }
  /// Number of completed connection attempts that reached `ready` (for tests and metrics).
  std::uint64_t connects() const noexcept { return core_.connects(); }
  /// Attempts that failed since the connection was last ready (see connection_core).
  int failed_attempts() const noexcept { return core_.failed_attempts(); }
  /// The socket's descriptor while one is open, else -1 (for tests: getsockopt).
  int native_socket() const noexcept;

  static const char* to_string(state s) noexcept { return net::to_string(s); }
  /// A response of `api` had `count` bytes after its last field (see send_adjusted).
  void note_trailing_bytes(std::int16_t api_key, const char* api, std::int16_t version, std::size_t count);
  /// A response of `api` named `what`, which its request did not ask for: dropped (see send_now).
  /// `version` -1: not known to the caller.
  void note_mismatch(std::int16_t api_key, const char* api, std::int16_t version, const std::string& what);
  static void logger_mismatch(const std::string& what);

 private:
  // GSSAPI: makes a Kerberos context with this connection's broker (empty without Kerberos).
  std::function<std::unique_ptr<security::gss_context>()> gss_factory();

  using encoder =
      std::function<std::error_code(std::int32_t, const std::optional<std::string>&, protocol::bytes&)>;

  template <class Request>
  static bool response_header_flexible(std::int16_t version) {
    using response = typename Request::response_type;
    return response::first_flexible_version >= 0 && version >= response::first_flexible_version;
  }

  /// `timeout` zero means request.timeout.ms (JoinGroup passes a longer one: the coordinator may
  /// hold it for the whole rebalance timeout).
  void send_raw(std::int16_t api_key, std::int16_t version, const encoder& enc, bool flexible_response,
                raw_handler handler, std::chrono::milliseconds timeout = {});
  /// send_adjusted() once `ready`.
  template <class Request, class Adjust, class Handler>
  void send_now(Request req, Adjust adjust, Handler done, std::chrono::milliseconds timeout, std::int16_t max_version);

  void start_connect();
  void on_resolved(std::vector<boost::asio::ip::tcp::endpoint> endpoints);
  /// Connects to endpoints_[i] on a new socket with the configured options.
  void connect_to(std::size_t i);
  void on_connected();
  /// Closes the socket and forgets what was queued for it; stale completions are ignored.
  void drop_transport();
  void on_tls_handshake(const boost::system::error_code& ec);
  void begin_protocol();
  // The driver side of connection_setup (connection_setup_driver.cpp): sends its requests, feeds
  // it the answers and tokens, carries out its actions.
  template <class Request>
  void send_setup(Request req, std::int16_t version);
  std::error_code on_setup_answer(std::int16_t api_key, const char* answer_name, std::int16_t version,
                                  setup_action a);
  void run(setup_action a);
  void get_token();
  void log_notes(const setup_action& a);
  void become_ready();
  /// Ends the connection for good with an error retrying cannot fix (see `failed`).
  void fatal(std::error_code ec, const std::string& what);
  /// A TLS error: fatal when the peer cannot be trusted or refused us, a plain failure otherwise.
  void tls_failure(const boost::system::error_code& ec, const char* during);
  void start_read();
  void read_body(std::shared_ptr<frame_buffer> frame, std::size_t size, std::size_t have);
  void on_frame(std::shared_ptr<frame_buffer> frame, std::size_t size);
  void write_next();
  void arm_timer();
  void on_timer();
  void fail(std::error_code ec, const char* why);
  void flush_waiters(std::error_code ec);

  boost::asio::io_context& io_;
  std::int32_t node_id_;
  std::string host_;
  std::uint16_t port_;
  connection_options opts_;
  boost::asio::ip::tcp::resolver resolver_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;  // this attempt's addresses of host_
  std::shared_ptr<connection_transport> tr_;
  boost::asio::steady_timer timer_;  // request deadlines, connect deadline, backoff expiry
  connection_core core_;             // states, requests in flight, deadlines, backoff
  std::uint64_t generation_ = 0;     // bumped on every close, so stale async completions are ignored
  connection_setup setup_;           // ApiVersions and SASL: what to send next, what an answer means
  std::deque<std::function<void(std::error_code)>> waiters_;
  std::deque<std::shared_ptr<protocol::bytes>> write_queue_;
  bool writing_ = false;
  std::uint8_t size_buf_[4] = {};
  std::shared_ptr<frame_pool> frames_ = std::make_shared<frame_pool>();  // response buffers, reused
  std::error_code fatal_ec_;
  std::string fatal_message_;
};

template <class Request, class Adjust, class Handler>
void connection::send_adjusted(Request req, Adjust adjust, Handler done, std::chrono::milliseconds timeout,
                               std::int16_t max_version) {
  using response = typename Request::response_type;
  when_ready([self = shared_from_this(), req = std::move(req), adjust = std::move(adjust),
              done = std::move(done), timeout, max_version](std::error_code ec) mutable {
    if (ec) {
      done(ec, response{}, response_frame{});
      return;
    }
    self->send_now(std::move(req), std::move(adjust), std::move(done), timeout, max_version);
  });
}

template <class Request, class Adjust, class Handler>
void connection::send_now(Request req, Adjust adjust, Handler done, std::chrono::milliseconds timeout,
                          std::int16_t max_version) {
  using response = typename Request::response_type;
  std::int16_t version = 0;
  if (auto vec = versions().pick<Request>(version)) {
    logger_mismatch(versions().mismatch<Request>());
    done(vec, response{}, response_frame{});
    return;
  }
  if (max_version >= Request::lowest_version && version > max_version) version = max_version;
  if constexpr (std::is_same_v<decltype(adjust(req, version)), bool>) {
    // An adjust that returns false declines: the request (which it may not have written) is not
    // sent, and `done` gets operation_canceled.
    if (!adjust(req, version)) {
      done(std::make_error_code(std::errc::operation_canceled), response{}, response_frame{});
      return;
    }
  } else {
    adjust(req, version);
  }
  // Kept until the answer arrives, to check the answer against it (protocol/answer_check.hpp).
  auto sent = std::make_shared<const Request>(std::move(req));
  send_raw(
      Request::api_key, version,
      [sent, version](std::int32_t corr, const std::optional<std::string>& cid, protocol::bytes& out) {
        return protocol::encode_request(*sent, version, corr, cid, out);
      },
      response_header_flexible<Request>(version),
      [self = shared_from_this(), done = std::move(done), version, sent](
          std::error_code ec, const response_frame& f) mutable -> std::error_code {
        response resp;
        if (ec) {
          done(ec, resp, f);
          return {};
        }
        // Bytes after a complete response are tolerated (counted, logged once per broker and
        // API); a truncated or inconsistent one is a protocol violation.
        std::size_t trailing = 0;
        if (auto dec = protocol::decode(f.body(), version, resp, &trailing)) {
          done(make_error_code(client_errc::protocol_violation), response{}, response_frame{});
          return dec;
        }
        if (trailing != 0) self->note_trailing_bytes(Request::api_key, response::name, version, trailing);
        // An answer about what was not asked is dropped whole, the request failed as for an
        // undecodable answer; the connection stays (its framing and correlation were right).
        if (const auto what = protocol::unasked(*sent, resp); !what.empty()) {
          self->note_mismatch(Request::api_key, response::name, version, what);
          done(make_error_code(client_errc::protocol_violation), response{}, response_frame{});
          return {};
        }
        done(std::error_code{}, resp, f);
        return {};
      },
      timeout);
}

}  // namespace kgroup::net
