// How a client's connections are secured: the TLS context, the SASL mechanism and
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

#include "base/backoff.hpp"
#include "kgroup/config.hpp"
#include "security/sasl.hpp"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}
}  // namespace boost::asio

struct ssl_st;

namespace kgroup::net {

/// Sets up SNI (for a host name) and, with `verify`, the check that the peer's certificate names
/// `host` (a DNS name or an IP literal) on a client connection before its handshake. Returns why
/// the check cannot be set up (empty when it is).
std::string configure_identity_check(ssl_st* ssl, const std::string& host, bool verify);

/// OAUTHBEARER tokens for every connection of a client: the provider is asked for a new one
/// when none is cached or the cached one is past its refresh time. Background thread only.
class token_cache : public std::enable_shared_from_this<token_cache> {
 public:
  /// Gets a token: `done(error, permanent, token)` with an empty error and the token, or with why
  /// there is none (never the token); `permanent` when retrying cannot help (the token endpoint
  /// refused the client's credentials).
  using fetch_done =
      std::function<void(const std::string& error, bool permanent, const security::oauth_token& token)>;
  /// What one attempt of the provider gave.
  struct fetch_result {
    std::string error;  // empty: `token` is the new token; else why there is none (never a secret)
    bool permanent = false;
    /// How long the provider asked to be left alone (HTTP Retry-After); negative: it did not say.
    std::chrono::milliseconds retry_after{-1};
    security::oauth_token token;
  };
  using fetched = std::function<void(fetch_result)>;
  /// Obtains a token, possibly asynchronously on `io`, and calls `done` once.
  using fetcher = std::function<void(boost::asio::io_context& io, fetched done)>;
  /// The wall clock tokens' expiry times are compared with (tests inject their own).
  using clock_fn = std::function<std::chrono::system_clock::time_point()>;

  /// The longest pause a provider's Retry-After can impose.
  static constexpr std::chrono::milliseconds max_retry_after{60'000};

  token_cache(fetcher fetch, double refresh_factor, clock_fn now = {})
      : fetch_(std::move(fetch)), factor_(refresh_factor), now_(std::move(now)) {
    if (!now_) now_ = [] { return std::chrono::system_clock::now(); };
  }
  /// Wipes the cached token.
  ~token_cache();
  token_cache(const token_cache&) = delete;
  token_cache& operator=(const token_cache&) = delete;

  /// Calls `done` with the current token, fetching a new one first if needed (callers that ask
  /// while a fetch runs wait for it). A failed fetch keeps the current token while it is valid
  /// (callers get it); the next fetch waits for the provider's Retry-After (at most
  /// max_retry_after) and at least a backoff (100 ms doubling to 10 s, Java's
  /// sasl.login.retry.backoff defaults); until then callers get the current token, or without a
  /// valid one the last error. A token or extension that fails check_oauthbearer_token counts
  /// as a failed fetch.
  void get(boost::asio::io_context& io, fetch_done done);

 private:
  fetcher fetch_;
  double factor_;
  clock_fn now_;
  std::optional<security::oauth_token> token_;
  std::chrono::system_clock::time_point refresh_at_{};
  std::vector<fetch_done> waiting_;
  bool fetching_ = false;
  base::backoff backoff_{std::chrono::milliseconds(100), std::chrono::milliseconds(10'000), 0.2};
  std::chrono::system_clock::time_point retry_at_{};  // no fetch before (after a failure)
  std::string last_error_;                            // of the last failed fetch
  bool last_permanent_ = false;
};

struct transport_security {
  transport_security() = default;
  transport_security(const transport_security&) = delete;
  transport_security& operator=(const transport_security&) = delete;
  /// Wipes the password.
  ~transport_security();

  std::string protocol;  // SSL, SASL_PLAINTEXT, SASL_SSL
  /// Null without TLS.
  std::shared_ptr<boost::asio::ssl::context> tls;
  bool verify_hostname = true;
  bool sasl = false;
  /// mechanism, username and password (the OAUTHBEARER token comes from `tokens`).
  security::sasl_credentials credentials;
  std::shared_ptr<token_cache> tokens;
  /// GSSAPI: the client's Kerberos login (its credentials, shared by its connections).
  std::shared_ptr<security::kerberos_login> kerberos;
  /// Called (background thread) when a broker refuses the credentials or the TLS peer cannot be
  /// trusted: errors retrying cannot fix. The consumer makes them fatal.
  std::function<void(std::error_code, const std::string&)> on_fatal;
};

/// Null for PLAINTEXT. Throws kgroup::Error(invalid_config) naming the key when a file cannot be
/// read, a PEM does not parse, a key does not match its certificate, or credentials are missing;
/// messages never contain a secret.
std::shared_ptr<transport_security> make_transport_security(const Config& cfg);

}  // namespace kgroup::net
