// OAUTHBEARER tokens from an OIDC token endpoint (sasl.oauthbearer.method=oidc): the OAuth 2
// client credentials grant (RFC 6749 4.4) over HTTPS, asynchronously on the client's
// background thread (Beast). The endpoint's certificate is checked against https.ca.location
// (or the system trust store) and its name.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "net/security.hpp"

namespace kgroup::net {

struct oidc_options {
  std::string url;  // https://host[:port]/path
  std::string client_id;
  std::string client_secret;  // secret: never logged
  std::string scope;
  std::chrono::milliseconds timeout{30000};
  std::shared_ptr<boost::asio::ssl::context> tls;

  oidc_options() = default;
  oidc_options(const oidc_options&) = default;
  oidc_options(oidc_options&&) = default;
  oidc_options& operator=(const oidc_options&) = default;
  oidc_options& operator=(oidc_options&&) = default;
  ~oidc_options();  // wipes the secret
};

/// The largest token endpoint answer read (headers and body each): a token answer is a few KiB.
inline constexpr std::size_t max_oidc_response_bytes = std::size_t{1} << 20;

/// A token_cache fetcher that asks the endpoint.
token_cache::fetcher make_oidc_fetcher(oidc_options opts);

}  // namespace kgroup::net
