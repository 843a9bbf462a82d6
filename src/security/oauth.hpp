// OAUTHBEARER pieces that need no I/O: the unsecured token of `sasl.oauthbearer.config` (for
// tests and local clusters, like Java's unsecured login module), SASL extensions, the client's
// message (RFC 7628), Java JAAS lines, and when a token is refreshed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace kgroup::security {

/// A token and what the client needs to know about it. `value` is secret: never logged.
struct oauth_token {
  std::string value;
  std::chrono::system_clock::time_point expires_at{};
  std::string principal;  // for logs
  std::map<std::string, std::string> extensions;
};

/// `sasl.oauthbearer.config`: "principal=NAME [scope=S1,S2] [lifeSeconds=N] [extension_K=V]...",
/// space-separated. False with a reason (naming the bad part, never a value) when malformed.
struct unsecured_token_config {
  std::string principal;
  std::string scope;
  std::int64_t life_seconds = 3600;
  std::map<std::string, std::string> extensions;
};
bool parse_unsecured_config(std::string_view text, unsecured_token_config& out, std::string& error);

/// An unsecured JWT (header {"alg":"none"}, no signature) with sub, iat, exp and scope.
oauth_token make_unsecured_token(const unsecured_token_config& cfg, std::chrono::system_clock::time_point now);

/// "key=value,key=value" (sasl.oauthbearer.extensions). Keys must be alphabetic and not "auth",
/// values printable (valid_extension); false with a reason otherwise.
bool parse_extensions(std::string_view text, std::map<std::string, std::string>& out, std::string& error);

/// RFC 7628 3.1 and KIP-342: extension keys are ALPHA and not "auth", values one or more of
/// VCHAR, SP, HTAB, CR, LF; the token is one or more VCHAR. Anything else (a \x01 above all,
/// which would end a key=value pair and inject others into the message) is refused: false with
/// a reason that names the key, never a value or the token.
bool valid_extension(std::string_view key, std::string_view value);
bool check_oauthbearer_token(const oauth_token& token, std::string& error);

/// The client's first and only message: "n,,\x01auth=Bearer <token>\x01[key=value\x01]...\x01".
std::string oauthbearer_client_message(const oauth_token& token);

/// Java's `sasl.jaas.config`: "<LoginModule class> required key="value" key=value ...;".
struct jaas_config {
  std::string login_module;  // the class name as written
  std::map<std::string, std::string> options;
};
bool parse_jaas(std::string_view text, jaas_config& out, std::string& error);

/// When a token obtained at `obtained` and expiring at `expires` is refreshed: after `factor` of
/// its lifetime plus up to 5% jitter (`jitter` in [0, 1)), as Java's refreshing login does, but
/// never later than 10 s before it expires and never earlier than `obtained` + 1 s.
std::chrono::system_clock::time_point refresh_time(std::chrono::system_clock::time_point obtained,
                                                   std::chrono::system_clock::time_point expires, double factor,
                                                   double jitter);

/// The claims of a JWT payload kgroup reads (for logs and refresh times): sub, exp (seconds since
/// the epoch; 0 if absent). False if `jwt` is not three base64url parts with a JSON payload.
bool read_jwt_claims(std::string_view jwt, std::string& sub, std::int64_t& exp);

/// Splits an https URL (RFC 3986, parsed by Boost.URL) into what an HTTP request needs: `host`
/// (percent-decoded; an IPv6 address without its brackets), `port` (443 unless given; 1-65535)
/// and `target` (path and query as written, "/" when empty; a fragment is dropped). False with
/// the reason, which never quotes the URL, for anything else: not a URL, another scheme,
/// credentials in the URL, no host, a bad port.
bool parse_https_url(const std::string& url, std::string& host, std::string& port, std::string& target,
                     std::string& error);

/// The body of a token response: access_token, and its lifetime from expires_in or the JWT's
/// exp claim; the principal is the JWT's sub claim, else `client_id`. False with the reason
/// (never the token) otherwise.
bool parse_token_response(const std::string& body, const std::string& client_id,
                          std::chrono::system_clock::time_point now, security::oauth_token& out, std::string& error);

/// The error and error_description of a token endpoint's error answer (RFC 6749 5.2), at most
/// 200 characters; empty when the body is not such an answer.
std::string token_error_reason(const std::string& body);

}  // namespace kgroup::security
