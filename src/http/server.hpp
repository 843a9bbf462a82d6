// The embedded, read-only HTTP endpoint: GET /metrics (Prometheus text), GET /status
// (JSON), GET /group (the group view, JSON) and GET / (the dashboard). It runs on the consumer's background ("heartbeat") thread's
// io_context and reads only snapshots (the `snapshot` function is called there, once per
// request), so a slow or hostile client never blocks the group: every connection is bounded in
// request bytes, header count and time; the number of connections is capped in total and per
// peer address, and a new connection evicts the one that has waited longest for a request, so
// idle sockets cannot lock a scraper out. Requests whose Host names neither the bound address nor
// an allowed name are refused (421) against DNS rebinding, and every response carries a strict
// Content-Security-Policy.
//
// Beast stays in server.cpp; this header only forward-declares the io_context.
//
// Threading: not thread-safe. Construct, start(), stop() and destroy on the io_context's thread,
// or while the io_context is not running (destroy it before the io_context, as any Asio object).
// endpoint() may be read from any thread once start() has returned (it does not change
// afterwards).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "base/group_view.hpp"
#include "kgroup/metrics.hpp"

namespace boost::asio {
class io_context;
}

namespace kgroup::http {

struct server_options {
  std::string listen = "127.0.0.1:0";    // "host:port"; host an IP literal or "localhost"; port 0 picks one
  std::size_t max_request_bytes = 8192;  // request line + headers; a GET has no body
  std::size_t max_header_count = 64;
  std::chrono::milliseconds request_timeout{5000};  // for a whole request, and for writing a response
  /// Connections open at once. When full, a new connection evicts the idle one (waiting for the
  /// first bytes of a request, or lingering after an error) that has been idle longest; it is
  /// refused when none is idle. A connection reading a request or writing a response is never
  /// evicted.
  std::size_t max_connections = 16;
  /// Connections open at once from one peer IP address. A peer at its limit gets its own oldest
  /// idle connection evicted, or is refused when none of its connections is idle.
  std::size_t max_connections_per_peer = 8;
  /// Host header values accepted besides the bound address (and "localhost" when bound to
  /// loopback): host names or IP literals, without port, compared case-insensitively. Any other
  /// Host, or none, is answered 421 (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  /// GET /group: returns the latest group view. Called on the server's thread once per request,
  /// so it must not wait for anything (the consumer hands out its cached view and marks it
  /// wanted). Empty: /group answers 404.
  std::function<base::group_view()> group_view;
  /// GET / and its script and style: the page that draws a consumer's /status, a share member's,
  /// or none (those paths answer 404).
  enum class dashboard_page { none, consumer, share };
  dashboard_page dashboard = dashboard_page::consumer;
};

/// The documents of GET /metrics and GET /status, made on the server's thread once per request
/// (so they must not wait for anything).
struct pages {
  std::function<std::string()> metrics;  ///< Prometheus text
  std::function<std::string()> status;   ///< JSON
};

/// A parsed listen address. `host` is an IP literal (IPv6 without brackets).
struct listen_address {
  std::string host;
  std::uint16_t port = 0;
};

/// Parses "host:port" strictly: "127.0.0.1:9464", "localhost:0", "[::1]:9464", "0.0.0.0:9464".
/// Host names other than "localhost" are refused (no DNS lookup on the heartbeat thread). On
/// failure returns nullopt and sets `why` to a message naming the problem.
std::optional<listen_address> parse_listen_address(std::string_view text, std::string& why);

/// Checks and normalizes one entry of server_options::allowed_hosts (observability.http.allowed.hosts):
/// a host name (letters, digits, '-', '_', '.') or an IP literal (IPv6 with or without brackets),
/// without port. Returns the lower-case name or the address in its canonical text; on failure
/// returns nullopt and sets `why`.
std::optional<std::string> normalize_allowed_host(std::string_view entry, std::string& why);

class server {
 public:
  using snapshot_fn = std::function<ConsumerMetrics()>;

  /// A consumer's endpoint: /metrics and /status rendered from `snapshot` (render.hpp).
  server(boost::asio::io_context& io, server_options opts, snapshot_fn snapshot);
  /// Any member's endpoint: /metrics and /status are `documents` (a share member's).
  server(boost::asio::io_context& io, server_options opts, pages documents);
  ~server();  // stop()s
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Binds and listens, then accepts in the background. Returns client_errc::invalid_config for a
  /// bad address, or the system error (address in use, not available, permission denied). Never
  /// throws for those; the error is also logged with its reason.
  std::error_code start();

  /// The bound address ("127.0.0.1:45123", "[::1]:9464"): the real port when port 0 was asked
  /// for. Empty before a successful start().
  std::string endpoint() const;

  /// Closes the acceptor and every connection. Idempotent. Handlers still queued afterwards
  /// only touch state they share ownership of, so destroying the server right after is safe.
  void stop();

  /// Connections currently open (for tests and logs).
  std::size_t connection_count() const;
  /// Of those, the idle ones: waiting for a request's first bytes, or lingering after an error
  /// (for tests).
  std::size_t idle_connection_count() const;

  struct state;  // shared with connections; defined in server.cpp

 private:
  std::shared_ptr<state> state_;
};

}  // namespace kgroup::http
