// A local OIDC token endpoint for OAUTHBEARER tests (client credentials grant, RFC 6749 4.4),
// served over HTTPS with test_pki's broker certificate (SAN localhost, 127.0.0.1): clients trust
// it through test_pki::ca.
//
//   POST <path>  grant_type=client_credentials[&scope=S]
//     client id and secret through HTTP Basic auth, or as client_id/client_secret form fields
//   200 {"access_token":"<unsecured JWT>","token_type":"Bearer","expires_in":N[,"scope":S]}
//       the JWT: header {"alg":"none"}, payload {"sub":<client id>,"iat":..,"exp":..[,"scope":S]}
//   401 {"error":"invalid_client",...} for an unknown client or a wrong secret
//   400 {"error":"unsupported_grant_type"|"invalid_request",...}; 404 for another path
//   scripted answers first (script_next): 429/408/503 with an optional Retry-After, or a token
//   answer padded to a given size
//
// One io_context thread, async operations (test code; Beast stays inside the .cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup::test {

/// An unsecured JWT ("alg":"none", empty signature) as the front's OAUTHBEARER accepts: payload
/// {"sub":subject,"iat":now,"exp":now+lifetime_ms[,"scope":scope]} (seconds since the epoch; a
/// negative lifetime gives an expired token). Base64url without padding.
std::string unsecured_jwt(std::string_view subject, std::int64_t lifetime_ms, std::string_view scope = {});

struct oidc_token_endpoint_options {
  /// client id -> client secret.
  std::map<std::string, std::string> clients;
  /// Lifetime of the tokens issued (expires_in and the JWT's exp).
  std::int64_t token_lifetime_ms = 3'600'000;
  /// The scope granted when the request names none (empty: no scope claim).
  std::string default_scope;
  /// The token path.
  std::string path = "/oauth2/token";
};

/// An answer given instead of the normal one (see oidc_token_endpoint::script_next).
struct oidc_scripted_answer {
  /// HTTP status; 200 answers with a token as usual (then `pad_to_bytes` applies).
  int status = 503;
  /// "Retry-After: <seconds>" when >= 0.
  int retry_after_s = -1;
  /// A 200 answer's body is padded (an extra JSON field) to at least this many bytes.
  std::size_t pad_to_bytes = 0;
};

class oidc_token_endpoint {
 public:
  /// Listens on 127.0.0.1 (a port chosen by the kernel). Throws std::runtime_error.
  explicit oidc_token_endpoint(oidc_token_endpoint_options options);
  ~oidc_token_endpoint();
  oidc_token_endpoint(const oidc_token_endpoint&) = delete;
  oidc_token_endpoint& operator=(const oidc_token_endpoint&) = delete;

  /// "https://<host>:<port><path>"; the certificate covers localhost and 127.0.0.1.
  [[nodiscard]] std::string url(const std::string& host = "127.0.0.1") const;
  [[nodiscard]] std::uint16_t port() const;

  /// Changes the lifetime of tokens issued from now on (any thread).
  void set_token_lifetime_ms(std::int64_t ms);
  /// The next `count` requests get `answer` (before any check of the client), after the answers
  /// scripted before (any thread).
  void script_next(int count, oidc_scripted_answer answer);
  /// Every later request gets `answer` until cleared (nullopt), after the scripted ones.
  void set_permanent_answer(std::optional<oidc_scripted_answer> answer);
  /// When each request arrived (steady clock), in order.
  [[nodiscard]] std::vector<std::chrono::steady_clock::time_point> request_times() const;

  [[nodiscard]] int requests() const;           // HTTP requests answered
  [[nodiscard]] int tokens_issued() const;      // 200 answers
  [[nodiscard]] int rejected_requests() const;  // 4xx answers
  /// The scope of the last token issued ("" if none).
  [[nodiscard]] std::string last_scope() const;

  /// Closes the listener and every connection, joins the thread. Idempotent.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup::test
