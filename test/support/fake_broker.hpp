// A scriptable fake Kafka broker on loopback, for tests of what kgroup does with bad input from the
// network (issue 7). It needs only Asio and kgroup's own codec (no librdkafka).
//
// It listens on 127.0.0.1:<ephemeral>, serves each accepted connection on its own thread with
// blocking I/O, reads request frames (size, header v1 or v2 depending on the API's flexible
// versions, body) and asks the test's handler what to do with each request:
//   - return a reply: bytes written verbatim (one or more complete frames, or deliberately broken
//     bytes), optionally after a delay, optionally closing the connection afterwards;
//   - return std::nullopt: the default behaviour, which answers ApiVersions with the advertised
//     version table (a request above the table's own ApiVersions range is refused in the v0
//     format, as brokers do), Metadata with this broker (node 1) and the configured topics,
//     FindCoordinator with this broker, and closes the connection on anything else.
// Handler calls are serialised (one at a time, under one mutex), so a handler may keep plain
// state; the delay of a reply is spent outside that mutex.
//
// Helpers build correct responses with kgroup's encoders (`response(req, msg)`), or a header with
// a hand-written body (`frame_with_header(req, body)`).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "protocol/headers.hpp"
#include "protocol/messages.hpp"

namespace kgroup::test {

class fake_broker {
 public:
  using bytes = protocol::bytes;

  struct request {
    std::int16_t api_key = 0;
    std::int16_t api_version = 0;
    std::int32_t correlation_id = 0;
    std::optional<std::string> client_id;
    bytes body;          // after the header
    int connection = 0;  // 1 for the first accepted connection, 2 for the next, ...
    int index = 0;       // 1 for the first request of this API on this broker, 2 for the next, ...

    /// Decodes the body as `Request` at the request's version; false if it does not decode.
    template <class Request>
    bool decode(Request& out) const {
      return !protocol::decode(body, api_version, out);
    }
  };

  struct reply {
    bytes data;                          // written as is
    bool close = false;                  // close the connection after writing
    std::chrono::milliseconds delay{0};  // wait before writing (outside the handler mutex)
  };

  using handler = std::function<std::optional<reply>(const request&)>;

  struct topic {
    std::string name;
    std::int32_t partitions = 1;
  };

  /// `versions`: the ApiVersions table to advertise; empty means default_versions().
  explicit fake_broker(handler h = nullptr, std::vector<topic> topics = {},
                       std::vector<protocol::api_versions_response::api_version> versions = {})
      : handler_(std::move(h)),
        topics_(std::move(topics)),
        versions_(versions.empty() ? default_versions() : std::move(versions)),
        acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~fake_broker() { stop(); }
  fake_broker(const fake_broker&) = delete;
  fake_broker& operator=(const fake_broker&) = delete;

  /// Stops accepting, closes every connection and joins the threads.
  void stop() {
    if (stop_.exchange(true)) return;
    // A blocking accept() is not woken by closing the acceptor from another thread: connect once.
    try {
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket s(io);
      s.connect({boost::asio::ip::make_address("127.0.0.1"), port_});
    } catch (const std::exception&) {
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(conn_mutex_);
      for (auto& s : sockets_) {
        boost::system::error_code ignored;
        s->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
      }
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  std::uint16_t port() const { return port_; }
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }
  /// Connections accepted so far.
  int connections() const { return connections_; }
  /// Requests of `api_key` received so far.
  int requests(std::int16_t api_key) const {
    std::lock_guard lock(handler_mutex_);
    auto it = asked_.find(api_key);
    return it == asked_.end() ? 0 : static_cast<int>(it->second.size());
  }
  /// The versions of the requests of `api_key` received so far, in the order they came.
  std::vector<std::int16_t> versions_asked(std::int16_t api_key) const {
    std::lock_guard lock(handler_mutex_);
    auto it = asked_.find(api_key);
    return it == asked_.end() ? std::vector<std::int16_t>{} : it->second;
  }

  // ---- building replies ----------------------------------------------------------------------

  /// kgroup's supported range of every API it sends, except Fetch below v13 (topic names, not ids).
  static std::vector<protocol::api_versions_response::api_version> default_versions() {
    std::vector<protocol::api_versions_response::api_version> v;
    for_each_request([&](auto tag) {
      using R = typename decltype(tag)::type;
      v.push_back({R::api_key, R::lowest_version, R::highest_version});
    });
    for (auto& a : v) {
      if (a.api_key == protocol::fetch_request::api_key) a.max_version = 12;
    }
    return v;
  }

  /// Whether requests of `api_key` at `version` use the flexible (v2) request header.
  static bool flexible(std::int16_t api_key, std::int16_t version) {
    bool f = false;
    for_each_request([&](auto tag) {
      using R = typename decltype(tag)::type;
      if (R::api_key == api_key) f = R::first_flexible_version >= 0 && version >= R::first_flexible_version;
    });
    return f;
  }

  /// Prefixes `payload` with its int32 size.
  static bytes frame(const bytes& payload) {
    bytes out;
    protocol::writer w(out);
    w.write_int32(static_cast<std::int32_t>(payload.size()));
    w.write_raw(payload);
    return out;
  }

  /// The response header for `req` (correlation id; tagged fields for flexible versions, except
  /// ApiVersions, whose responses always use header v0).
  static bytes header(const request& req, std::int32_t correlation_id) {
    bytes out;
    protocol::writer w(out);
    protocol::encode_response_header(
        w, {correlation_id},
        protocol::response_header_version(req.api_key, flexible(req.api_key, req.api_version)));
    return out;
  }
  static bytes header(const request& req) { return header(req, req.correlation_id); }

  /// A complete frame: the header for `req` followed by a hand-written `body`.
  static bytes frame_with_header(const request& req, const bytes& body,
                                 std::optional<std::int32_t> corr = {}) {
    bytes payload = header(req, corr.value_or(req.correlation_id));
    payload.insert(payload.end(), body.begin(), body.end());
    return frame(payload);
  }

  /// A complete, correct response frame for `req` holding `msg` at the request's version.
  template <class Response>
  static bytes response(const request& req, const Response& msg, std::optional<std::int32_t> corr = {}) {
    bytes body;
    if (auto ec = protocol::encode(msg, req.api_version, body)) {
      throw std::runtime_error(std::string("fake_broker: cannot encode ") + Response::name + ": " +
                               ec.message());
    }
    return frame_with_header(req, body, corr);
  }

  /// The body of the default Metadata answer (this broker as node 1, the configured topics).
  protocol::metadata_response metadata() const {
    protocol::metadata_response m;
    m.brokers.push_back({1, "127.0.0.1", port_, std::nullopt});
    m.cluster_id = "fake";
    m.controller_id = 1;
    for (const auto& t : topics_) {
      protocol::metadata_response::metadata_response_topic mt;
      mt.name = t.name;
      for (std::int32_t p = 0; p < t.partitions; ++p) {
        mt.partitions.push_back({0, p, 1, 0, {1}, {1}, {}});
      }
      m.topics.push_back(std::move(mt));
    }
    return m;
  }

  /// The default behaviour for `req` (what a handler's std::nullopt means).
  std::optional<reply> default_reply(const request& req) const {
    if (req.api_key == protocol::api_versions_request::api_key) {
      protocol::api_versions_response r;
      r.api_keys = versions_;
      if (req.api_version > highest_api_versions()) {
        // Too new for this broker: UNSUPPORTED_VERSION in the v0 format, as real brokers do.
        r.error_code = 35;
        request v0 = req;
        v0.api_version = 0;
        return reply{response(v0, r)};
      }
      return reply{response(req, r)};
    }
    if (req.api_key == protocol::metadata_request::api_key) return reply{response(req, metadata())};
    if (req.api_key == protocol::find_coordinator_request::api_key) {
      // This broker coordinates every group.
      protocol::find_coordinator_request fc;
      protocol::find_coordinator_response r;
      if (req.api_version >= 4 && req.decode(fc)) {
        for (const auto& k : fc.coordinator_keys)
          r.coordinators.push_back({k, 1, "127.0.0.1", port_, 0, std::nullopt});
      } else {
        r.node_id = 1;
        r.host = "127.0.0.1";
        r.port = port_;
      }
      return reply{response(req, r)};
    }
    return std::nullopt;
  }

 private:
  template <class T>
  struct type_tag {
    using type = T;
  };
  template <class F>
  static void for_each_request(F&& f) {
    using namespace protocol;
    std::apply(
        [&](auto... t) { (f(t), ...); },
        std::tuple<type_tag<api_versions_request>, type_tag<metadata_request>,
                   type_tag<find_coordinator_request>, type_tag<join_group_request>,
                   type_tag<sync_group_request>, type_tag<heartbeat_request>, type_tag<leave_group_request>,
                   type_tag<offset_commit_request>, type_tag<offset_fetch_request>,
                   type_tag<list_offsets_request>, type_tag<fetch_request>,
                   type_tag<offset_for_leader_epoch_request>, type_tag<describe_groups_request>>{});
  }

  // The highest ApiVersions version this broker advertises (kgroup's own when the table has none).
  std::int16_t highest_api_versions() const {
    for (const auto& a : versions_) {
      if (a.api_key == protocol::api_versions_request::api_key) return a.max_version;
    }
    return protocol::api_versions_response::highest_version;
  }

  void accept_loop() {
    while (!stop_) {
      auto s = std::make_shared<boost::asio::ip::tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*s, ec);
      if (ec || stop_) return;
      const int id = ++connections_;
      std::lock_guard lock(conn_mutex_);
      sockets_.push_back(s);
      threads_.emplace_back([this, s, id] { serve(*s, id); });
    }
  }

  void serve(boost::asio::ip::tcp::socket& s, int id) {
    try {
      for (;;) {
        std::uint8_t len[4];
        boost::asio::read(s, boost::asio::buffer(len));
        const std::uint32_t n = (std::uint32_t{len[0]} << 24) | (std::uint32_t{len[1]} << 16) |
                                (std::uint32_t{len[2]} << 8) | len[3];
        bytes f(n);
        boost::asio::read(s, boost::asio::buffer(f));
        request req;
        req.connection = id;
        {
          // The header version depends on the API and version, which come first.
          protocol::reader peek(f);
          req.api_key = peek.read_int16();
          req.api_version = peek.read_int16();
          protocol::reader r(f);
          protocol::request_header h;
          protocol::decode_request_header(
              r, h, protocol::request_header_version(flexible(req.api_key, req.api_version)));
          if (!r.ok()) return;
          req.correlation_id = h.correlation_id;
          req.client_id = h.client_id;
          req.body.assign(f.end() - static_cast<std::ptrdiff_t>(r.remaining()), f.end());
        }
        std::optional<reply> rep;
        {
          std::lock_guard lock(handler_mutex_);
          auto& asked = asked_[req.api_key];
          asked.push_back(req.api_version);
          req.index = static_cast<int>(asked.size());
          if (handler_) rep = handler_(req);
          if (!rep) rep = default_reply(req);
        }
        if (!rep) return;  // not scripted: close
        if (rep->delay.count() > 0) std::this_thread::sleep_for(rep->delay);
        if (stop_) return;
        if (!rep->data.empty()) boost::asio::write(s, boost::asio::buffer(rep->data));
        if (rep->close) {
          boost::system::error_code ignored;
          s.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
          return;
        }
      }
    } catch (const std::exception&) {
      // The client closed the connection (or stop() did).
    }
  }

  handler handler_;
  std::vector<topic> topics_;
  std::vector<protocol::api_versions_response::api_version> versions_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex conn_mutex_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> sockets_;
  std::vector<std::thread> threads_;
  mutable std::mutex handler_mutex_;
  std::map<std::int16_t, std::vector<std::int16_t>> asked_;  // per API, the version of each request
};

}  // namespace kgroup::test
