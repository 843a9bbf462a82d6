#include "net/connection.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <limits>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include <fmt/ranges.h>

#include "base/log.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

struct connection_transport {
  explicit connection_transport(asio::io_context& io) : socket(io) {}
  asio::ip::tcp::socket socket;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls;
};

namespace {

// Runs `op` on the stream the connection talks through: TLS over the socket, or the socket.
template <class Op>
void on_stream(connection_transport& t, Op&& op) {
  if (t.tls) {
    op(*t.tls);
  } else {
    op(t.socket);
  }
}

std::string to_text(const asio::ip::tcp::endpoint& e) {
  const auto a = e.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(e.port());
}

// Reads until the buffers are full, asking the stream each time for all that is still missing:
// asio's own transfer_all asks for at most 64 KiB per read, so a 10 MiB frame took 160 reads even
// when the socket held more.
struct until_full {
  std::size_t operator()(const boost::system::error_code& ec, std::size_t) const {
    return ec ? 0 : std::numeric_limits<std::size_t>::max();
  }
};

template <class Buffers, class Handler>
void read_exact(connection_transport& t, const Buffers& b, Handler&& h) {
  on_stream(t, [&](auto& stream) { asio::async_read(stream, b, until_full{}, std::forward<Handler>(h)); });
}

template <class Buffers, class Handler>
void write_all(connection_transport& t, const Buffers& b, Handler&& h) {
  on_stream(t, [&](auto& stream) { asio::async_write(stream, b, std::forward<Handler>(h)); });
}

}  // namespace

void connection::note_trailing_bytes(std::int16_t api_key, const char* api, std::int16_t version,
                                     std::size_t count) {
  if (!opts_.wire) return;
  ++opts_.wire->responses_with_trailing_bytes;
  if (opts_.wire->first_trailing(node_id_, api_key)) {
    logger()->info(
        "broker {} ({}:{}): {} v{} had {} byte(s) after its last field; ignored (logged once per broker "
        "and API, counted in responses_with_trailing_bytes_total)",
        node_id_, host_, port_, api, version, count);
  }
}

void connection::note_mismatch(std::int16_t api_key, const char* api, std::int16_t version, const std::string& what) {
  if (opts_.wire) ++opts_.wire->responses_mismatched;
  if (!opts_.wire || opts_.wire->first_mismatch(node_id_, api_key)) {
    logger()->warn(
        "broker {} ({}:{}): {}{} names {}; the answer is dropped and the request failed "
        "(logged once per broker and API, counted in responses_mismatched_total)",
        node_id_, host_, port_, api, version >= 0 ? " v" + std::to_string(version) : std::string(), what);
  }
}

connection::connection(asio::io_context& io, std::int32_t node_id, std::string host, std::uint16_t port,
                       connection_options opts)
    : io_(io),
      node_id_(node_id),
      host_(std::move(host)),
      port_(port),
      opts_(std::move(opts)),
      resolver_(io),
      timer_(io),
      core_({.request_timeout = opts_.request_timeout,
             .connect_timeout = opts_.connect_timeout,
             .reconnect_backoff = opts_.reconnect_backoff,
             .reconnect_backoff_max = opts_.reconnect_backoff_max,
             .reconnect_jitter = 0.2,
             .max_idle = opts_.max_idle}),
      setup_(core_, {.sasl = opts_.security && opts_.security->sasl ? &opts_.security->credentials : nullptr,
                     .token_provider = opts_.security && opts_.security->tokens != nullptr,
                     .gss = gss_factory()}) {}

std::function<std::unique_ptr<security::gss_context>()> connection::gss_factory() {
  if (!opts_.security || !opts_.security->kerberos) return {};
  // The target is the broker's host name as the client knows it (metadata's, or the bootstrap
  // name): service@host, which Kerberos maps to the principal service/host@REALM.
  return [this] { return opts_.security->kerberos->context_for(host_); };
}

connection::~connection() = default;

void connection::logger_mismatch(const std::string& what) {
  logger()->error("no common API version: {}", what);
}

void connection::when_ready(std::function<void(std::error_code)> cb) {
  switch (core_.current()) {
    case state::ready:
      if (core_.reauthenticating()) {
        waiters_.push_back(std::move(cb));  // sent once re-authenticated
        return;
      }
      cb({});
      return;
    case state::failed:
      asio::post(io_, [cb = std::move(cb), ec = fatal_ec_] { cb(ec); });
      return;
    case state::closed:
      asio::post(io_, [cb = std::move(cb)] { cb(make_error_code(client_errc::shutting_down)); });
      return;
    case state::idle:
      waiters_.push_back(std::move(cb));
      start_connect();
      return;
    case state::backoff:
      // The backoff timer starts the next attempt when it expires.
      waiters_.push_back(std::move(cb));
      arm_timer();
      return;
    case state::resolving:
    case state::connecting:
    case state::tls_handshaking:
    case state::handshaking:
    case state::authenticating:
      waiters_.push_back(std::move(cb));
      return;
  }
}

void connection::close() {
  if (core_.current() == state::closed) return;
  if (core_.current() == state::failed) {
    core_.stop(state::closed);
    return;
  }
  fail(make_error_code(client_errc::shutting_down), "closed by client");
  core_.stop(state::closed);
  timer_.cancel();
  // Requests queued by handlers while failing must not wait forever.
  flush_waiters(make_error_code(client_errc::shutting_down));
}

void connection::abort_requests(const char* why) {
  if (core_.terminal()) return;
  fail(make_error_code(client_errc::connection_closed), why);
}

void connection::start_connect() {
  core_.connect_started(clock::now());
  arm_timer();
  logger()->debug("broker {} ({}:{}): connecting", node_id_, host_, port_);
  if (opts_.resolve) {
    asio::post(io_, [self = shared_from_this(), gen = generation_] {
      if (gen == self->generation_) self->on_resolved(self->opts_.resolve(self->host_, self->port_));
    });
    return;
  }
  // An address needs no lookup: Asio's resolver runs getaddrinfo on a thread of its own, started
  // at the first lookup (issue 37: a member whose brokers are given as addresses runs one thread
  // fewer, and each connect wakes no other thread).
  boost::system::error_code not_an_address;
  const auto address = asio::ip::make_address(host_, not_an_address);
  if (!not_an_address) {
    asio::post(io_,
               [self = shared_from_this(), gen = generation_, ep = asio::ip::tcp::endpoint(address, port_)] {
                 if (gen == self->generation_) self->on_resolved({ep});
               });
    return;
  }
  resolver_.async_resolve(
      host_, std::to_string(port_),
      [self = shared_from_this(), gen = generation_](const boost::system::error_code& ec,
                                                     const asio::ip::tcp::resolver::results_type& results) {
        if (gen != self->generation_) return;
        if (ec) {
          logger()->debug("broker {} ({}:{}): cannot resolve: {}", self->node_id_, self->host_, self->port_,
                          ec.message());
          self->fail(make_error_code(client_errc::connection_failed), "resolve failed");
          return;
        }
        std::vector<asio::ip::tcp::endpoint> endpoints;
        for (const auto& r : results) endpoints.push_back(r.endpoint());
        self->on_resolved(std::move(endpoints));
      });
}

void connection::on_resolved(std::vector<asio::ip::tcp::endpoint> endpoints) {
  if (endpoints.empty()) {
    fail(make_error_code(client_errc::connection_failed), "resolve failed");
    return;
  }
  endpoints_ = std::move(endpoints);
  const std::size_t first = core_.resolved(clock::now(), endpoints_.size());
  arm_timer();
  connect_to(first);
}

void connection::connect_to(std::size_t i) {
  const auto endpoint = endpoints_[i];
  tr_ = std::make_shared<connection_transport>(io_);
  auto& socket = tr_->socket;
  boost::system::error_code ec;
  socket.open(endpoint.protocol(), ec);
  if (!ec) {
    // Before connect, as Java: the receive buffer bounds the window scale agreed in the handshake.
    boost::system::error_code opt;
    if (opts_.keepalive) socket.set_option(asio::socket_base::keep_alive(true), opt);
    if (opts_.send_buffer >= 0)
      socket.set_option(asio::socket_base::send_buffer_size(opts_.send_buffer), opt);
    if (opts_.receive_buffer >= 0) {
      socket.set_option(asio::socket_base::receive_buffer_size(opts_.receive_buffer), opt);
    }
    if (opt)
      logger()->warn("broker {} ({}:{}): socket option refused: {}", node_id_, host_, port_, opt.message());
  }
  auto next_or_fail = [this](const boost::system::error_code& why, const asio::ip::tcp::endpoint& ep) {
    if (auto next = core_.address_failed(clock::now())) {
      logger()->debug("broker {} ({}:{}): {} failed ({}); trying {}", node_id_, host_, port_, to_text(ep),
                      why.message(), to_text(endpoints_[*next]));
      arm_timer();
      connect_to(*next);
      return;
    }
    fail(make_error_code(client_errc::connection_failed), "connect failed");
  };
  if (ec) {
    next_or_fail(ec, endpoint);
    return;
  }
  socket.async_connect(endpoint, [self = shared_from_this(), gen = generation_, tr = tr_, endpoint,
                                  next_or_fail](const boost::system::error_code& cec) {
    if (gen != self->generation_) return;
    if (cec) {
      next_or_fail(cec, endpoint);
      return;
    }
    self->on_connected();
  });
}

int connection::native_socket() const noexcept {
  return tr_ && tr_->socket.is_open() ? static_cast<int>(tr_->socket.native_handle()) : -1;
}

void connection::drop_transport() {
  ++generation_;
  boost::system::error_code ignored;
  resolver_.cancel();
  if (tr_) tr_->socket.close(ignored);
  tr_.reset();  // pending operations keep it alive until they complete
  setup_.lost();
  writing_ = false;
  write_queue_.clear();
}

void connection::on_connected() {
  endpoints_.clear();
  boost::system::error_code ignored;
  tr_->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  const auto& sec = opts_.security;
  if (!sec || !sec->tls) {
    begin_protocol();
    return;
  }
  core_.step(state::tls_handshaking);
  tr_->tls.emplace(tr_->socket, *sec->tls);
  SSL* ssl = tr_->tls->native_handle();
  if (const std::string error = configure_identity_check(ssl, host_, sec->verify_hostname); !error.empty()) {
    fatal(make_error_code(client_errc::tls_failed), error);
    return;
  }
  tr_->tls->async_handshake(asio::ssl::stream_base::client,
                            [self = shared_from_this(), gen = generation_, tr = tr_](const boost::system::error_code& ec) {
                              if (gen != self->generation_) return;
                              self->on_tls_handshake(ec);
                            });
}

void connection::on_tls_handshake(const boost::system::error_code& ec) {
  if (ec) {
    tls_failure(ec, "TLS handshake");
    return;
  }
  logger()->debug("broker {} ({}:{}): TLS {} established ({})", node_id_, host_, port_,
                  SSL_get_version(tr_->tls->native_handle()), SSL_get_cipher_name(tr_->tls->native_handle()));
  begin_protocol();
}

void connection::tls_failure(const boost::system::error_code& ec, const char* during) {
  const bool tls_error = ec.category() == asio::error::get_ssl_category();  // not stream_truncated (its own category)
  if (!tls_error) {
    // The peer went away (or the network failed) mid-handshake: retried with backoff.
    fail(make_error_code(client_errc::connection_failed), "connection lost during the TLS handshake");
    return;
  }
  const long verify = tr_ && tr_->tls ? SSL_get_verify_result(tr_->tls->native_handle()) : X509_V_OK;
  std::string what;
  if (verify != X509_V_OK) {
    const char* hint = "check ssl.ca.location (the CA that signs the brokers' certificates)";
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      hint = "the certificate does not name the address connected to: check bootstrap.servers and the "
             "brokers' advertised listeners, and that their certificates name those addresses";
    } else if (verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID) {
      hint = "the broker's certificate is outside its validity period (or this machine's clock is wrong)";
    }
    what = fmt::format("{} failed: the broker's certificate is not trusted: {}; {}", during,
                       X509_verify_cert_error_string(verify), hint);
  } else {
    what = fmt::format("{} failed: {}; check that the listener speaks TLS (security.protocol), and the client "
                       "certificate if the broker requires one (ssl.certificate.location, ssl.key.location)",
                       during, ec.message());
  }
  fatal(make_error_code(client_errc::tls_failed), what);
}

void connection::begin_protocol() {
  auto first = setup_.connected();
  start_read();
  run(std::move(first));
}

void connection::fatal(std::error_code ec, const std::string& what) {
  if (core_.terminal()) return;
  fatal_message_ = fmt::format("broker {} ({}:{}): {}", node_id_, host_, port_, what);
  fatal_ec_ = ec;
  logger()->error("{}", fatal_message_);
  if (opts_.wire) ++opts_.wire->authentication_failures;
  if (opts_.security && opts_.security->on_fatal) opts_.security->on_fatal(ec, fatal_message_);
  fail(ec, "authentication failed");
  core_.stop(state::failed);
  timer_.cancel();
  flush_waiters(ec);
}

void connection::send_raw(std::int16_t api_key, std::int16_t version, const encoder& enc,
                          bool flexible_response, raw_handler handler, std::chrono::milliseconds timeout) {
  auto frame = std::make_shared<protocol::bytes>();
  const std::int32_t corr = core_.next_correlation_id();
  if (auto ec = enc(corr, opts_.client_id, *frame)) {
    logger()->error("broker {}: cannot encode request (api {} v{}): {}", node_id_, api_key, version,
                    ec.message());
    asio::post(io_, [handler = std::move(handler), ec] { handler(ec, response_frame{}); });
    return;
  }
  core_.sent(clock::now(), api_key, corr, flexible_response, std::move(handler), timeout);
  write_queue_.push_back(std::move(frame));
  arm_timer();
  write_next();
}

void connection::write_next() {
  if (writing_ || write_queue_.empty()) return;
  writing_ = true;
  auto frame = write_queue_.front();
  write_all(*tr_, asio::buffer(*frame),
            [self = shared_from_this(), frame, gen = generation_, tr = tr_](const boost::system::error_code& ec,
                                                                            std::size_t) {
                      if (gen != self->generation_) return;
                      self->writing_ = false;
                      if (ec) {
                        self->fail(make_error_code(client_errc::connection_closed), "write failed");
                        return;
                      }
                      self->write_queue_.pop_front();
                      self->write_next();
                    });
}

void connection::start_read() {
  read_exact(
      *tr_, asio::buffer(size_buf_),
      [self = shared_from_this(), gen = generation_, tr = tr_](const boost::system::error_code& ec, std::size_t) {
        if (gen != self->generation_) return;
        if (ec && tr->tls && self->core_.current() == state::handshaking) {
          // TLS 1.3 reports a refused client certificate on the first read.
          self->tls_failure(ec, "TLS session");
          return;
        }
        if (ec) {
          self->fail(make_error_code(client_errc::connection_closed),
                     ec == asio::error::eof ? "closed by broker" : "read failed");
          return;
        }
        const std::uint32_t size =
            (std::uint32_t{self->size_buf_[0]} << 24) | (std::uint32_t{self->size_buf_[1]} << 16) |
            (std::uint32_t{self->size_buf_[2]} << 8) | std::uint32_t{self->size_buf_[3]};
        if (size < 4 || size > self->opts_.max_response_size) {
          logger()->error("broker {}: response frame of {} bytes (limit {}, receive.message.max.bytes)",
                          self->node_id_, static_cast<std::int32_t>(size), self->opts_.max_response_size);
          self->fail(make_error_code(client_errc::protocol_violation), "bad frame size");
          return;
        }
        // The buffer reserves the announced size (up to frame_pool::max_reserve) and only the
        // pages the bytes reach become resident: a broker that announces a huge frame and sends
        // nothing costs no memory. Large frames reuse the buffers of earlier ones (frame_pool.hpp).
        self->read_body(self->frames_->acquire(size), size, 0);
      });
}

void connection::read_body(std::shared_ptr<frame_buffer> frame, std::size_t size, std::size_t have) {
  // The frame's `size` bytes go to the start of the buffer, which may be longer (a reused one).
  auto chunk = asio::buffer(frame->data() + have, std::min(frame->capacity(), size) - have);
  read_exact(
      *tr_, chunk,
      [self = shared_from_this(), frame, size, have, gen = generation_, tr = tr_](const boost::system::error_code& rec,
                                                                                  std::size_t got) {
        if (gen != self->generation_) return;
        const std::size_t now_have = have + got;
        if (rec) {
          // A frame cut short: say how short, so a truncating broker or proxy is
          // recognisable in the log.
          logger()->error("broker {}: connection {} inside a response frame ({} of {} bytes)", self->node_id_,
                          rec == asio::error::eof ? "closed by broker" : "failed", now_have, size);
          self->fail(make_error_code(client_errc::connection_closed),
                     rec == asio::error::eof ? "closed by broker inside a response frame" : "read failed");
          return;
        }
        if (now_have < size) {
          // Announced past frame_pool::max_reserve and the reservation is full: grow by
          // reallocation (doubling), keeping what was read.
          frame->grow(std::min(size, frame->capacity() * 2), now_have);
          self->read_body(frame, size, now_have);
          return;
        }
        self->on_frame(frame, size);
        if (gen == self->generation_) self->start_read();
      });
}

void connection::on_frame(std::shared_ptr<frame_buffer> frame, std::size_t size) {
  const std::span<const std::uint8_t> bytes(frame->data(), size);
  std::int32_t corr = 0;
  if (!protocol::peek_correlation_id(bytes, corr)) {
    fail(make_error_code(client_errc::protocol_violation), "truncated response header");
    return;
  }
  auto matched = core_.match(corr);
  if (!matched.request) {
    if (matched.expected) {
      logger()->error("broker {}: response correlation id {} but expected {}", node_id_, corr,
                      *matched.expected);
    } else {
      logger()->error("broker {}: response with correlation id {} to no request", node_id_, corr);
    }
    fail(make_error_code(client_errc::protocol_violation), matched.violation);
    return;
  }
  connection_core::in_flight_request req = std::move(*matched.request);
  protocol::reader r(bytes);
  protocol::response_header h;
  protocol::decode_response_header(r, h, protocol::response_header_version(req.api_key, req.flexible_header));
  if (!r.ok()) {
    fail(make_error_code(client_errc::protocol_violation), "bad response header");
    return;
  }
  const std::uint8_t* data = frame->data();
  response_frame f{std::move(frame), data, size - r.remaining(), size};
  const std::uint64_t gen = generation_;
  if (auto ec = req.handler({}, f)) {
    const auto body = f.body();
    logger()->error("broker {}: undecodable response to api {} ({} body bytes, first {:02x}): {}", node_id_,
                    req.api_key, body.size(),
                    fmt::join(body.first(std::min<std::size_t>(body.size(), 128)), " "), ec.message());
    if (gen == generation_) fail(make_error_code(client_errc::protocol_violation), "undecodable response");
    return;
  }
  if (gen != generation_) return;
  if (core_.answered(clock::now())) {
    logger()->debug("broker {} ({}:{}): re-authenticating (KIP-368)", node_id_, host_, port_);
    run(setup_.reauthenticate());
  }
  arm_timer();
}

void connection::arm_timer() {
  const auto when = core_.next_deadline(!waiters_.empty());
  if (!when) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(*when);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    self->on_timer();
  });
}

void connection::on_timer() {
  using verdict = connection_core::timer_verdict;
  auto t = core_.on_timer(clock::now());
  switch (t.verdict) {
    case verdict::setup_timed_out:
      fail(make_error_code(client_errc::connection_failed), "connection setup timed out");
      return;
    case verdict::reauth_now:
      logger()->debug("broker {} ({}:{}): re-authenticating (KIP-368)", node_id_, host_, port_);
      run(setup_.reauthenticate());
      arm_timer();
      return;
    case verdict::reauth_waits:
      logger()->debug(
          "broker {} ({}:{}): re-authentication (KIP-368) due; waiting for {} request(s) in flight", node_id_,
          host_, port_, core_.in_flight());
      arm_timer();
      return;
    case verdict::request_timed_out:
      logger()->warn("broker {}: request (api {}, correlation id {}) timed out; closing the connection",
                     node_id_, t.expired->api_key, t.expired->correlation_id);
      t.expired->handler(make_error_code(client_errc::request_timed_out), response_frame{});
      fail(make_error_code(client_errc::connection_closed), "request timed out");
      return;
    case verdict::backoff_over:
      if (!waiters_.empty()) start_connect();
      return;
    case verdict::next_address:
      // (The core moves one address on: the previous one is the address that did not answer.)
      logger()->info(
          "broker {} ({}:{}): {} did not connect within socket.connection.setup.timeout.ms; trying {}",
          node_id_, host_, port_,
          to_text(endpoints_[(*t.address + endpoints_.size() - 1) % endpoints_.size()]),
          to_text(endpoints_[*t.address]));
      drop_transport();
      arm_timer();
      connect_to(*t.address);
      return;
    case verdict::idle_close:
      logger()->debug("broker {} ({}:{}): closing the connection, idle for connections.max.idle.ms ({} ms)",
                      node_id_, host_, port_, opts_.max_idle.count());
      if (opts_.wire) ++opts_.wire->idle_closes;
      drop_transport();
      arm_timer();
      return;
    case verdict::nothing:
      arm_timer();
      return;
  }
}

void connection::fail(std::error_code ec, const char* why) {
  if (core_.terminal()) return;
  drop_transport();
  const bool closing = ec == make_error_code(client_errc::shutting_down);  // close(): no reconnect
  auto lost = core_.failed(clock::now(), closing);
  const auto wait = lost.wait;
  const bool was_ready = lost.was_ready;
  auto& in_flight = lost.in_flight;
  if (ec == make_error_code(client_errc::shutting_down) || !fatal_message_.empty()) {
    // (A fatal failure was logged as an error already, and is not retried.)
    logger()->debug("broker {} ({}:{}): {}", node_id_, host_, port_, why);
  } else {
    logger()->warn("broker {} ({}:{}): {} ({}); {} request(s) failed, reconnect allowed in {} ms", node_id_,
                   host_, port_, why, ec.message(), in_flight.size(), wait.count());
  }
  const std::error_code inflight_ec = ec == make_error_code(client_errc::shutting_down)
                                          ? ec
                                          : make_error_code(client_errc::connection_closed);
  for (auto& r : in_flight) r.handler(inflight_ec, response_frame{});
  // Waiters get the failure of this attempt; they may queue new requests, which wait for the backoff.
  flush_waiters(was_ready ? inflight_ec : ec);
  arm_timer();
}

void connection::flush_waiters(std::error_code ec) {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) w(ec);
}

}  // namespace kgroup::net
