// The embedded HTTP endpoint: accept loop and connections (Beast). See server.hpp.
//
// Every connection reads one request header at a time (GET has no body) under one deadline that
// covers the whole header, so a client that trickles bytes is dropped as surely as a silent one.
// Error responses end the connection with a lingering close: shut down our sending side, discard
// what the client still sends for a short while, then close, so the client reads the status
// instead of a reset.
#include "http/server.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <exception>
#include <iterator>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "base/log.hpp"
#include "http/render.hpp"
#include "kgroup/error.hpp"

namespace kgroup::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

std::optional<listen_address> parse_listen_address(std::string_view text, std::string& why) {
  const auto bad = [&](std::string reason) -> std::optional<listen_address> {
    why = "invalid listen address \"" + std::string(text) + "\": " + std::move(reason) +
          " (expected host:port, e.g. 127.0.0.1:9464 or [::1]:9464)";
    return std::nullopt;
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing ':port' after ']'");
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':port'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address needs brackets");
  }
  if (host.empty()) return bad("missing host");
  if (port.empty()) return bad("missing port");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || port.front() == '+' || value > 65535) {
    return bad("port must be a number from 0 to 65535");
  }
  listen_address out;
  out.port = static_cast<std::uint16_t>(value);
  if (host == "localhost") {
    out.host = "127.0.0.1";
    return out;
  }
  boost::system::error_code aec;
  const auto address = asio::ip::make_address(std::string(host), aec);
  if (aec) return bad("host must be an IP address or localhost (no DNS lookups)");
  out.host = address.to_string();
  return out;
}

namespace {

std::string format_endpoint(const tcp::endpoint& ep) {
  const auto address = ep.address();
  const auto port = std::to_string(ep.port());
  if (address.is_v6()) return "[" + address.to_string() + "]:" + port;
  return address.to_string() + ":" + port;
}

class connection;

}  // namespace

struct server::state {
  state(asio::io_context& io_, server_options opts_, snapshot_fn snapshot_)
      : io(io_), opts(std::move(opts_)), snapshot(std::move(snapshot_)), acceptor(io_), retry(io_) {}

  asio::io_context& io;
  const server_options opts;
  const snapshot_fn snapshot;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // re-arms accept after an accept error (e.g. out of descriptors)
  std::string endpoint;      // written once by start()
  bool stopped = false;
  // Open connections; each removes itself in its destructor. Raw pointers: a connection is owned
  // by its pending handlers and keeps this state alive through its own shared_ptr.
  std::unordered_set<connection*> connections;
};

namespace {

// Lingering close: how long and how much we keep reading after an error response.
constexpr std::chrono::milliseconds linger_time{1000};
constexpr std::size_t linger_bytes = 64 * 1024;

class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(std::shared_ptr<server::state> owner, tcp::socket socket)
      : owner_(std::move(owner)), stream_(std::move(socket)), buffer_(owner_->opts.max_request_bytes + 1) {}

  ~connection() { owner_->connections.erase(this); }

  void start() { read_request(); }

  // Closes the socket; pending operations complete with operation_aborted and release us.
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  using response = bhttp::response<bhttp::string_body>;

  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(
        static_cast<std::uint32_t>(std::min<std::size_t>(owner_->opts.max_request_bytes, UINT32_MAX)));
    stream_.expires_after(owner_->opts.request_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) {
      close();
      return;
    }
    if (ec == beast::error::timeout) {
      logger()->debug("http: {} sent no complete request within {} ms; dropped", peer(),
                      owner_->opts.request_timeout.count());
      close();
      return;
    }
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      logger()->debug("http: {}: request larger than {} bytes", peer(), owner_->opts.max_request_bytes);
      respond_error(bhttp::status::request_header_fields_too_large, "request too large\n", 11);
      return;
    }
    if (ec.category() ==
        bhttp::make_error_code(bhttp::error::bad_target).category()) {  // any other parse error
      logger()->debug("http: {}: bad request: {}", peer(), ec.message());
      respond_error(bhttp::status::bad_request, "bad request\n", 11);
      return;
    }
    if (ec) {
      logger()->debug("http: {}: read failed: {}", peer(), ec.message());
      close();
      return;
    }

    const auto& req = parser_->get();
    const auto version = req.version();
    if (static_cast<std::size_t>(std::distance(req.begin(), req.end())) > owner_->opts.max_header_count) {
      logger()->debug("http: {}: more than {} header fields", peer(), owner_->opts.max_header_count);
      respond_error(bhttp::status::request_header_fields_too_large, "too many header fields\n", version);
      return;
    }
    const bool head = req.method() == bhttp::verb::head;
    if (req.method() != bhttp::verb::get && !head) {
      respond_error(bhttp::status::method_not_allowed, "only GET and HEAD are allowed\n", version);
      return;
    }
    if (!parser_->is_done()) {  // a GET with a body: not read, not accepted
      respond_error(bhttp::status::bad_request, "a GET request has no body\n", version);
      return;
    }
    const bool keep_alive = req.keep_alive();
    std::string_view target = req.target();
    target = target.substr(0, target.find('?'));

    auto res = std::make_shared<response>();
    res->version(version);
    try {
      if (target == "/metrics") {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res->body() = render_prometheus(owner_->snapshot());
      } else if (target == "/status") {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "application/json");
        res->body() = render_status_json(owner_->snapshot());
      } else if (target == "/group" && owner_->opts.group_view) {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "application/json");
        res->body() = render_group_json(owner_->opts.group_view());
      } else if (target == "/") {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/html; charset=utf-8");
        res->body() = std::string(dashboard_html());
      } else {
        res->result(bhttp::status::not_found);
        res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
        res->body() = owner_->opts.group_view ? "not found; try /, /metrics, /status or /group\n"
                                              : "not found; try /, /metrics or /status\n";
      }
    } catch (const std::exception& e) {
      logger()->warn("http: building the response to {} failed: {}", std::string(target), e.what());
      res->result(bhttp::status::internal_server_error);
      res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res->body() = "internal error\n";
    }
    res->set(bhttp::field::cache_control, "no-store");
    res->set("X-Content-Type-Options", "nosniff");
    res->keep_alive(keep_alive);
    if (head) {
      res->content_length(res->body().size());
      res->body().clear();
    } else {
      res->prepare_payload();
    }
    write(std::move(res), !keep_alive);
  }

  void respond_error(bhttp::status status, std::string_view text, unsigned version) {
    auto res = std::make_shared<response>();
    res->version(version);
    res->result(status);
    res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
    res->set(bhttp::field::cache_control, "no-store");
    if (status == bhttp::status::method_not_allowed) res->set(bhttp::field::allow, "GET, HEAD");
    res->keep_alive(false);
    res->body() = std::string(text);
    res->prepare_payload();
    write(std::move(res), true);
  }

  void write(std::shared_ptr<response> res, bool close_after) {
    stream_.expires_after(owner_->opts.request_timeout);
    bhttp::async_write(stream_, *res,
                       [self = shared_from_this(), res, close_after](beast::error_code ec, std::size_t) {
                         if (self->closed_) return;
                         if (ec) {
                           logger()->debug("http: {}: write failed: {}", self->peer(), ec.message());
                           self->close();
                         } else if (close_after) {
                           self->linger();
                         } else {
                           self->read_request();
                         }
                       });
  }

  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::min<std::chrono::milliseconds>(linger_time, owner_->opts.request_timeout));
    drain();
  }

  void drain() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (self->closed_) return;
                              self->drained_ += n;
                              if (ec || self->drained_ >= linger_bytes) {
                                self->close();
                              } else {
                                self->drain();
                              }
                            });
  }

  std::string peer() {
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    return ec ? std::string("client") : format_endpoint(ep);
  }

  std::shared_ptr<server::state> owner_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
  std::array<char, 4096> scratch_{};
  std::size_t drained_ = 0;
  bool closed_ = false;
};

void accept_next(const std::shared_ptr<server::state>& s) {
  s->acceptor.async_accept([s](beast::error_code ec, tcp::socket socket) {
    if (s->stopped) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      logger()->warn("http: accept failed: {}; retrying in 100 ms", ec.message());
      s->retry.expires_after(std::chrono::milliseconds(100));
      s->retry.async_wait([s](beast::error_code wait_ec) {
        if (!wait_ec && !s->stopped) accept_next(s);
      });
      return;
    }
    if (s->connections.size() >= s->opts.max_connections) {
      logger()->debug("http: {} connections open; refusing another", s->connections.size());
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      auto c = std::make_shared<connection>(s, std::move(socket));
      s->connections.insert(c.get());
      c->start();
    }
    accept_next(s);
  });
}

}  // namespace

server::server(asio::io_context& io, server_options opts, snapshot_fn snapshot)
    : state_(std::make_shared<state>(io, std::move(opts), std::move(snapshot))) {}

server::~server() {
  stop();
}

std::error_code server::start() {
  auto& s = *state_;
  if (s.acceptor.is_open() || s.stopped) return make_error_code(client_errc::illegal_state);
  std::string why;
  const auto address = parse_listen_address(s.opts.listen, why);
  if (!address) {
    logger()->error("http: {}", why);
    return make_error_code(client_errc::invalid_config);
  }
  const tcp::endpoint ep(asio::ip::make_address(address->host), address->port);
  beast::error_code ec;
  const auto fail = [&](const char* step) {
    logger()->error("http: cannot listen on {}: {} failed: {}", s.opts.listen, step, ec.message());
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return std::error_code(ec);
  };
  s.acceptor.open(ep.protocol(), ec);
  if (ec) return fail("open");
  s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail("setsockopt");
  s.acceptor.bind(ep, ec);
  if (ec) return fail("bind");
  s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  const auto local = s.acceptor.local_endpoint(ec);
  if (ec) return fail("getsockname");
  s.endpoint = format_endpoint(local);
  if (!local.address().is_loopback()) {
    logger()->warn("http: the observability endpoint listens on {}, not on loopback", s.endpoint);
  }
  logger()->info("http: observability endpoint on http://{}/", s.endpoint);
  accept_next(state_);
  return {};
}

std::string server::endpoint() const {
  return state_->endpoint;
}

void server::stop() {
  auto& s = *state_;
  if (s.stopped) return;
  s.stopped = true;
  beast::error_code ignored;
  s.acceptor.close(ignored);
  s.retry.cancel();
  // close() does not destroy a connection (its pending handlers own it), so iterating a copy
  // only guards against a future close() that would.
  const std::vector<connection*> open(s.connections.begin(), s.connections.end());
  for (auto* c : open) c->close();
}

std::size_t server::connection_count() const {
  return state_->connections.size();
}

}  // namespace kgroup::http
