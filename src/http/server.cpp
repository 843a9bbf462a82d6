// The embedded HTTP endpoint: accept loop and connections (Beast). See server.hpp.
//
// Every connection reads one request header at a time (GET has no body) under one deadline that
// covers the whole header, so a client that trickles bytes is dropped as surely as a silent one.
// Error responses end the connection with a lingering close: shut down our sending side, discard
// what the client still sends for a short while, then close, so the client reads the status
// instead of a reset.
//
// Slots: at most max_connections connections, at most max_connections_per_peer from one peer IP.
// A connection is idle while it waits for the first bytes of a request (it reads them with a
// plain read_some before handing over to the header parser) or lingers after an error response;
// a new connection that finds no free slot evicts the connection idle longest (the peer's own
// when the peer is at its limit) and is refused only when none is idle, so idle sockets cannot
// lock a scraper out, and a request once started is never cut off.
//
// Host check (DNS rebinding): a request is served only when its one Host field names the bound
// address (any IP literal when bound to 0.0.0.0 or ::, since an IP literal cannot come from a
// rebound name), "localhost" when bound to loopback or to any address, or a name of
// server_options::allowed_hosts; the port is not compared (port forwarding changes it). Anything
// else is answered 421. Every response carries a strict Content-Security-Policy.
#include "http/server.hpp"

#include <algorithm>
#include <array>
#include <cctype>
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
  state(asio::io_context& io_, server_options opts_, pages documents_)
      : io(io_), opts(std::move(opts_)), documents(std::move(documents_)), acceptor(io_), retry(io_) {}

  asio::io_context& io;
  const server_options opts;
  const pages documents;
  tcp::acceptor acceptor;
  asio::steady_timer retry;                // re-arms accept after an accept error (e.g. out of descriptors)
  std::string endpoint;                    // written once by start()
  asio::ip::address bound;                 // written once by start()
  std::vector<std::string> allowed_hosts;  // normalized (normalize_allowed_host); written once by start()
  bool stopped = false;
  // Open connections; each removes itself when it closes (and, at the latest, in its destructor).
  // Raw pointers: a connection is owned by its pending handlers and keeps this state alive
  // through its own shared_ptr.
  std::unordered_set<connection*> connections;
  // Stamps the moment a connection becomes idle: the lowest stamp has been idle longest.
  std::uint64_t idle_clock = 0;
};

namespace {

// Lingering close: how long and how much we keep reading after an error response.
constexpr std::chrono::milliseconds linger_time{1000};
constexpr std::size_t linger_bytes = 64 * 1024;

// Nothing but the dashboard's own script, style and the JSON it fetches; no framing, no inline
// code, no plugins, no forms, no base URL.
constexpr const char* content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

template <class Response>
void set_common_headers(Response& res) {
  res.set(bhttp::field::cache_control, "no-store");
  res.set("Content-Security-Policy", content_security_policy);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
}

// Whether the request has exactly one Host field and it names this endpoint (see the top).
template <class Request>
bool host_allowed(const server::state& s, const Request& req, std::string& shown) {
  const auto [first, last] = req.equal_range(bhttp::field::host);
  if (first == last) {
    shown = "(none)";
    return false;
  }
  if (std::next(first) != last) {
    shown = "(several)";
    return false;
  }
  const std::string_view value = first->value();
  shown = "\"" + std::string(value.substr(0, 256)) + "\"";
  std::string_view host, rest;
  const bool bracketed = !value.empty() && value.front() == '[';
  if (bracketed) {
    const auto close = value.find(']');
    if (close == std::string_view::npos) return false;
    host = value.substr(1, close - 1);
    rest = value.substr(close + 1);
  } else {
    const auto colon = value.find(':');
    host = value.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : value.substr(colon);
  }
  if (!rest.empty()) {  // ":port", not compared
    const auto port = rest.substr(1);
    if (rest.front() != ':' || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
  }
  if (host.empty()) return false;
  const auto listed = [&](const std::string& name) {
    return std::find(s.allowed_hosts.begin(), s.allowed_hosts.end(), name) != s.allowed_hosts.end();
  };
  boost::system::error_code ec;
  if (bracketed) {
    const auto v6 = asio::ip::make_address_v6(std::string(host), ec);
    if (ec) return false;
    return asio::ip::address(v6) == s.bound || s.bound.is_unspecified() || listed(v6.to_string());
  }
  const auto v4 = asio::ip::make_address_v4(std::string(host), ec);
  if (!ec) return asio::ip::address(v4) == s.bound || s.bound.is_unspecified() || listed(v4.to_string());
  std::string name(host);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "localhost" && (s.bound.is_loopback() || s.bound.is_unspecified())) return true;
  return listed(name);
}

class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(std::shared_ptr<server::state> owner, tcp::socket socket, const tcp::endpoint& remote)
      : owner_(std::move(owner)),
        stream_(std::move(socket)),
        buffer_(owner_->opts.max_request_bytes + 1),
        peer_address_(remote.address()),
        peer_(format_endpoint(remote)) {}

  ~connection() { owner_->connections.erase(this); }

  void start() { read_request(); }

  // Idle: waiting for the first bytes of a request, or lingering after an error response; only
  // an idle connection may be evicted. idle_since() orders them (lowest: idle longest).
  bool idle() const { return idle_ && !closed_; }
  std::uint64_t idle_since() const { return idle_since_; }
  const asio::ip::address& peer_address() const { return peer_address_; }
  const std::string& peer() const { return peer_; }

  // Closes the socket and frees the slot; pending operations complete with operation_aborted and
  // release us.
  void close() {
    if (closed_) return;
    closed_ = true;
    owner_->connections.erase(this);
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
    // One deadline for the wait and the whole header.
    stream_.expires_after(owner_->opts.request_timeout);
    if (buffer_.size() != 0) {  // the next request's bytes are here already (pipelining)
      read_header();
      return;
    }
    // Idle until the first bytes arrive.
    become_idle();
    stream_.async_read_some(buffer_.prepare(std::min<std::size_t>(buffer_.max_size(), 4096)),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->idle_ = false;
                              if (self->closed_) return;
                              self->buffer_.commit(n);
                              if (ec) {
                                self->on_header(ec);
                              } else {
                                self->read_header();
                              }
                            });
  }

  void become_idle() {
    idle_ = true;
    idle_since_ = ++owner_->idle_clock;
  }

  void read_header() {
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
    if (std::string host; !host_allowed(*owner_, req, host)) {
      logger()->debug(
          "http: {}: Host {} names neither the bound address nor an allowed host "
          "(observability.http.allowed.hosts); answered 421",
          peer(), host);
      respond_error(bhttp::status::misdirected_request, "misdirected request: unknown Host\n", version);
      return;
    }
    const bool keep_alive = req.keep_alive();
    std::string_view target = req.target();
    target = target.substr(0, target.find('?'));

    auto res = std::make_shared<response>();
    res->version(version);
    using page = server_options::dashboard_page;
    const page dashboard = owner_->opts.dashboard;
    try {
      if (target == "/metrics") {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res->body() = owner_->documents.metrics();
      } else if (target == "/status") {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "application/json");
        res->body() = owner_->documents.status();
      } else if (target == "/group" && owner_->opts.group_view) {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "application/json");
        res->body() = render_group_json(owner_->opts.group_view());
      } else if (target == "/" && dashboard != page::none) {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/html; charset=utf-8");
        res->body() = dashboard == page::share ? share_dashboard_html() : dashboard_html();
      } else if (target == "/dashboard.js" && dashboard != page::none) {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/javascript; charset=utf-8");
        res->body() = dashboard == page::share ? share_dashboard_script() : dashboard_script();
      } else if (target == "/dashboard.css" && dashboard != page::none) {
        res->result(bhttp::status::ok);
        res->set(bhttp::field::content_type, "text/css; charset=utf-8");
        res->body() = std::string(dashboard_style());
      } else {
        res->result(bhttp::status::not_found);
        res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
        res->body() = dashboard == page::none   ? "not found; try /metrics or /status\n"
                      : owner_->opts.group_view ? "not found; try /, /metrics, /status or /group\n"
                                                : "not found; try /, /metrics or /status\n";
      }
    } catch (const std::exception& e) {
      logger()->warn("http: building the response to {} failed: {}", std::string(target), e.what());
      res->result(bhttp::status::internal_server_error);
      res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res->body() = "internal error\n";
    }
    set_common_headers(*res);
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
    set_common_headers(*res);
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
    become_idle();  // the answer is out: the connection may go to make room
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

  std::shared_ptr<server::state> owner_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
  std::array<char, 4096> scratch_{};
  std::size_t drained_ = 0;
  const asio::ip::address peer_address_;
  const std::string peer_;  // "ip:port", for logs
  bool idle_ = false;
  std::uint64_t idle_since_ = 0;
  bool closed_ = false;
};

// Gives the accepted socket a slot (see the top of this file), or closes it.
void admit(const std::shared_ptr<server::state>& s, tcp::socket socket) {
  beast::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) {  // already gone
    socket.close(ec);
    return;
  }
  std::size_t from_peer = 0;
  connection* oldest = nullptr;          // idle longest
  connection* oldest_of_peer = nullptr;  // idle longest among the peer's
  for (auto* c : s->connections) {
    const bool same_peer = c->peer_address() == remote.address();
    if (same_peer) ++from_peer;
    if (!c->idle()) continue;
    if (oldest == nullptr || c->idle_since() < oldest->idle_since()) oldest = c;
    if (same_peer && (oldest_of_peer == nullptr || c->idle_since() < oldest_of_peer->idle_since())) {
      oldest_of_peer = c;
    }
  }
  const bool peer_full = from_peer >= s->opts.max_connections_per_peer;
  const bool all_full = s->connections.size() >= s->opts.max_connections;
  if (peer_full || all_full) {
    connection* evict = peer_full ? oldest_of_peer : oldest;
    const auto open = peer_full ? from_peer : s->connections.size();
    const char* whose = peer_full ? " from this peer" : "";
    if (evict == nullptr) {
      logger()->debug("http: {} connections{} open, none idle; refusing {}", open, whose,
                      format_endpoint(remote));
      socket.close(ec);
      return;
    }
    logger()->debug("http: {} connections{} open; closing {}, idle longest, to serve {}", open, whose,
                    evict->peer(), format_endpoint(remote));
    evict->close();
  }
  auto c = std::make_shared<connection>(s, std::move(socket), remote);
  s->connections.insert(c.get());
  c->start();
}

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
    admit(s, std::move(socket));
    accept_next(s);
  });
}

}  // namespace

server::server(asio::io_context& io, server_options opts, snapshot_fn snapshot)
    : server(io, std::move(opts),
             pages{[snapshot] { return render_prometheus(snapshot()); },
                   [snapshot] { return render_status_json(snapshot()); }}) {}

server::server(asio::io_context& io, server_options opts, pages documents)
    : state_(std::make_shared<state>(io, std::move(opts), std::move(documents))) {}

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
  for (const auto& entry : s.opts.allowed_hosts) {
    auto normalized = normalize_allowed_host(entry, why);
    if (!normalized) {
      logger()->error("http: {}", why);
      s.allowed_hosts.clear();
      return make_error_code(client_errc::invalid_config);
    }
    s.allowed_hosts.push_back(std::move(*normalized));
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
  s.bound = local.address();
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
  // close() removes the connection from the set (its pending handlers own it and destroy it
  // later), hence the copy.
  const std::vector<connection*> open(s.connections.begin(), s.connections.end());
  for (auto* c : open) c->close();
}

std::size_t server::connection_count() const {
  return state_->connections.size();
}

std::size_t server::idle_connection_count() const {
  const auto& open = state_->connections;
  return static_cast<std::size_t>(
      std::count_if(open.begin(), open.end(), [](const connection* c) { return c->idle(); }));
}

}  // namespace kgroup::http
