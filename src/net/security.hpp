// How a client's connections are secured (issue 15): the TLS context, the SASL mechanism and
// credentials, and the OAUTHBEARER token cache, built once per client from its Config and shared
// by all its connections. The connection (net/connection.cpp) runs the handshakes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "kgroup/config.hpp"
#include "security/sasl.hpp"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}
}  // namespace boost::asio

namespace kgroup::net {

/// OAUTHBEARER tokens for every connection of a client: the provider is asked for a new one
/// when none is cached or the cached one is past its refresh time. Background thread only.
class token_cache : public std::enable_shared_from_this<token_cache> {
 public:
  /// Gets a token: `done(error, permanent, token)` with an empty error and the token, or with why
  /// there is none (never the token); `permanent` when retrying cannot help (the token endpoint
  /// refused the client's credentials).
  using fetch_done =
      std::function<void(const std::string& error, bool permanent, const security::oauth_token& token)>;
  /// Obtains a token, possibly asynchronously on `io`, and calls `done` once.
  using fetcher = std::function<void(boost::asio::io_context& io, fetch_done done)>;

  token_cache(fetcher fetch, double refresh_factor) : fetch_(std::move(fetch)), factor_(refresh_factor) {}

  /// Calls `done` with the current token, fetching a new one first if needed (callers that ask
  /// while a fetch runs wait for it).
  void get(boost::asio::io_context& io, fetch_done done);
  /// Tokens obtained so far.
  std::uint64_t fetches() const noexcept { return fetches_; }

 private:
  fetcher fetch_;
  double factor_;
  std::optional<security::oauth_token> token_;
  std::chrono::system_clock::time_point refresh_at_{};
  std::vector<fetch_done> waiting_;
  bool fetching_ = false;
  std::uint64_t fetches_ = 0;
};

struct transport_security {
  std::string protocol;  // SSL, SASL_PLAINTEXT, SASL_SSL
  /// Null without TLS.
  std::shared_ptr<boost::asio::ssl::context> tls;
  bool verify_hostname = true;
  bool sasl = false;
  /// mechanism, username and password (the OAUTHBEARER token comes from `tokens`).
  security::sasl_credentials credentials;
  std::shared_ptr<token_cache> tokens;
  /// Called (background thread) when a broker refuses the credentials or the TLS peer cannot be
  /// trusted: errors retrying cannot fix. The consumer makes them fatal.
  std::function<void(std::error_code, const std::string&)> on_fatal;
};

/// Null for PLAINTEXT. Throws kgroup::Error(invalid_config) naming the key when a file cannot be
/// read, a PEM does not parse, a key does not match its certificate, or credentials are missing;
/// messages never contain a secret.
std::shared_ptr<transport_security> make_transport_security(const Config& cfg);

}  // namespace kgroup::net
