// What every relaying test proxy in front of a mock cluster needs (group_proxy.hpp, the TLS/SASL
// secure_front): Kafka frames on blocking sockets, request and response bodies through kgroup's
// codec, and the rewrite of broker addresses in Metadata and FindCoordinator answers so clients
// come back through the proxy instead of going to the mock brokers directly.
//
// Test code: needs Asio and kgroup's codec (kgroup_internal).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "protocol/headers.hpp"
#include "protocol/messages.hpp"

namespace kgroup::test::kafka_relay {

using bytes = protocol::bytes;

/// Frames larger than this are refused (the proxy closes the connection).
inline constexpr std::uint32_t max_frame_size = 200'000'000;

template <class Msg>
bool flexible(std::int16_t version) {
  return Msg::first_flexible_version >= 0 && version >= Msg::first_flexible_version;
}

inline std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

inline std::array<std::uint8_t, 4> be32(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v >> 24), static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8),
          static_cast<std::uint8_t>(v)};
}

/// One frame (without its size prefix) from a blocking socket; false on error or a bad size.
inline bool read_frame(boost::asio::ip::tcp::socket& s, bytes& frame) {
  std::uint8_t size_buf[4];
  boost::system::error_code ec;
  boost::asio::read(s, boost::asio::buffer(size_buf), ec);
  if (ec) return false;
  const std::uint32_t size = read_be32(size_buf);
  if (size > max_frame_size) return false;
  frame.resize(size);
  boost::asio::read(s, boost::asio::buffer(frame), ec);
  return !ec;
}

/// Writes the size prefix and the frame to a blocking socket.
inline bool write_frame(boost::asio::ip::tcp::socket& s, const bytes& frame) {
  const auto size_buf = be32(static_cast<std::uint32_t>(frame.size()));
  boost::system::error_code ec;
  boost::asio::write(s, std::array{boost::asio::buffer(size_buf), boost::asio::buffer(frame)}, ec);
  return !ec;
}

/// The fixed start of every request header (api key, version, correlation id); false if the
/// frame is too short.
struct request_start {
  std::int16_t api_key = 0;
  std::int16_t version = 0;
  std::int32_t correlation_id = 0;
};
inline bool peek_request(const bytes& frame, request_start& out) {
  if (frame.size() < 8) return false;
  out.api_key = static_cast<std::int16_t>((frame[0] << 8) | frame[1]);
  out.version = static_cast<std::int16_t>((frame[2] << 8) | frame[3]);
  out.correlation_id = static_cast<std::int32_t>(read_be32(frame.data() + 4));
  return true;
}

/// The client id of a request header (the same in header v1 and v2), empty if it has none.
inline std::string client_id_of(const bytes& frame) {
  protocol::reader r(frame);
  protocol::request_header h;
  protocol::decode_request_header(r, h, 1);
  return r.ok() && h.client_id ? *h.client_id : std::string();
}

/// Decodes a request body (after its header) as Msg; false if it does not decode.
template <class Msg>
bool decode_request(const bytes& frame, std::int16_t version, Msg& out) {
  protocol::reader r(frame);
  protocol::request_header h;
  protocol::decode_request_header(r, h, protocol::request_header_version(flexible<Msg>(version)));
  if (!r.ok()) return false;
  const std::span<const std::uint8_t> body(frame.data() + (frame.size() - r.remaining()), r.remaining());
  std::size_t trailing = 0;
  return !protocol::decode(body, version, out, &trailing);
}

template <class Msg>
bool decode_response(const bytes& frame, std::int16_t version, protocol::response_header& h, Msg& out) {
  protocol::reader r(frame);
  protocol::decode_response_header(r, h, protocol::response_header_version(Msg::api_key, flexible<Msg>(version)));
  if (!r.ok()) return false;
  const std::span<const std::uint8_t> body(frame.data() + (frame.size() - r.remaining()), r.remaining());
  std::size_t trailing = 0;
  return !protocol::decode(body, version, out, &trailing);
}

/// A response frame (without its size) for Msg at `version`; empty if it cannot be encoded.
template <class Msg>
bytes encode_response(const Msg& m, std::int16_t version, std::int32_t correlation_id) {
  bytes out;
  protocol::writer w(out);
  protocol::encode_response_header(w, {correlation_id},
                                   protocol::response_header_version(Msg::api_key, flexible<Msg>(version)));
  if (protocol::encode(m, version, out)) return {};
  return out;
}

/// Maps a mock broker's port to the proxy listener in front of it (unknown ports stay).
using port_map_fn = std::function<std::int32_t(std::int32_t)>;

/// Rewrites the broker addresses in a Metadata or FindCoordinator answer (`api_key` and
/// `version` of the request it answers): every port through `port_of`, and the host to `host`
/// when one is given. Other answers, and answers that do not decode, are left alone.
inline void rewrite_broker_addresses(std::int16_t api_key, std::int16_t version, bytes& frame,
                                     const port_map_fn& port_of, const std::optional<std::string>& host = {}) {
  protocol::response_header h;
  if (api_key == protocol::metadata_response::api_key) {
    protocol::metadata_response m;
    if (!decode_response(frame, version, h, m)) return;
    for (auto& b : m.brokers) {
      b.port = port_of(b.port);
      if (host) b.host = *host;
    }
    if (auto out = encode_response(m, version, h.correlation_id); !out.empty()) frame = std::move(out);
  } else if (api_key == protocol::find_coordinator_response::api_key) {
    protocol::find_coordinator_response m;
    if (!decode_response(frame, version, h, m)) return;
    m.port = port_of(m.port);
    if (host && !m.host.empty()) m.host = *host;
    for (auto& c : m.coordinators) {
      c.port = port_of(c.port);
      if (host && !c.host.empty()) c.host = *host;
    }
    if (auto out = encode_response(m, version, h.correlation_id); !out.empty()) frame = std::move(out);
  }
}

}  // namespace kgroup::test::kafka_relay
