// The endpoint's addresses as configured: observability.http.listen and
// observability.http.allowed.hosts, parsed and normalized (see server.hpp).
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/address.hpp>

#include "http/server.hpp"

namespace kgroup::http {

namespace asio = boost::asio;

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

std::optional<std::string> normalize_allowed_host(std::string_view entry, std::string& why) {
  const auto bad = [&](const char* reason) -> std::optional<std::string> {
    why = "\"" + std::string(entry) + "\" is not an allowed host: " + reason;
    return std::nullopt;
  };
  if (entry.empty()) return bad("empty");
  boost::system::error_code ec;
  if (entry.front() == '[') {
    if (entry.size() < 3 || entry.back() != ']')
      return bad("an IPv6 address in brackets, without port, was expected");
    const auto v6 = asio::ip::make_address_v6(std::string(entry.substr(1, entry.size() - 2)), ec);
    if (ec) return bad("not an IPv6 address");
    return v6.to_string();
  }
  if (entry.find(':') != std::string_view::npos) {
    const auto v6 = asio::ip::make_address_v6(std::string(entry), ec);
    if (ec) return bad("give a host name or IP address without port or scheme");
    return v6.to_string();
  }
  std::string name;
  for (const char c : entry) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '-' && c != '.' && c != '_') {
      return bad("a host name has only letters, digits, '-', '_' and '.'");
    }
    name += static_cast<char>(std::tolower(u));
  }
  const auto v4 = asio::ip::make_address_v4(name, ec);
  return ec ? name : v4.to_string();
}

}  // namespace kgroup::http
