// The conversation that sets up a broker connection, without sockets, timers or threads: the
// ApiVersions handshake with its version fallback, then, with SASL, SaslHandshake and the
// SaslAuthenticate rounds through the SASL session of src/security, at setup and for a KIP-368
// re-authentication. The driver (connection_setup_driver.cpp) reports what happened (the
// transport is up, a setup answer's bytes, a token, the attempt is over) and carries out the one
// action it gets back (send this request at this version, ask for a token, ready, fail). The
// lifecycle states, deadlines and request timeouts are connection_core's; this class moves it
// through handshaking, authenticating and ready. Time is an argument.
//
//   connected() -> ApiVersions [-> ApiVersions again at the broker's version]
//     -> ready                                                    (no SASL)
//     -> [get_token -> token()] -> SaslHandshake -> SaslAuthenticate... -> ready
//   reauthenticate() -> [get_token -> token()] -> SaslHandshake -> SaslAuthenticate... -> reauthenticated
//
// Any error ends the exchange (fail or fatal, or undecodable for a malformed answer); from then on,
// and after lost(), answers and tokens are ignored and nothing more is sent.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <system_error>

#include "base/lazy_rng.hpp"
#include "net/api_versions.hpp"
#include "net/connection_core.hpp"
#include "protocol/messages.hpp"
#include "security/sasl.hpp"

namespace kgroup::net {

/// What the driver does next. Only the fields of `what` are set.
struct setup_action {
  enum class kind {
    none,                    // nothing to do: wait for the next event
    send_api_versions,       // send `api_versions` at `version`
    get_token,               // ask the OAUTHBEARER token provider, then report token()
    send_sasl_handshake,     // send `handshake` at `version`
    send_sasl_authenticate,  // send `authenticate` at `version` (secret: never logged)
    ready,                   // the connection is set up: requests flow
    reauthenticated,         // a re-authentication is done: the requests that waited go
    undecodable,             // the answer is malformed (`error`): close as a protocol violation
    fail,                    // the attempt failed (`error`, `message`); retried after the backoff
    fatal,                   // retrying cannot help (`error`, `message`: the key to check, no secret)
  };
  kind what = kind::none;
  std::int16_t version = -1;
  protocol::api_versions_request api_versions;
  protocol::sasl_handshake_request handshake;
  protocol::sasl_authenticate_request authenticate;
  std::error_code error;
  std::string message;

  /// What the driver logs and counts; the action does not depend on it.
  struct notes {
    std::size_t trailing = 0;             // the answer had bytes after its last field
    std::int16_t refused_version = -1;    // the broker refused ApiVersions at this version
    std::int16_t api_versions_error = 0;  // the broker answered ApiVersions with this error
    std::int16_t versions_at = -1;        // ApiVersions answered at this version, with `apis` APIs
    std::size_t apis = 0;
    bool authenticated = false;  // SASL succeeded (`reauth`: a re-authentication)
    bool reauth = false;
    std::int64_t session_lifetime_ms = 0;  // 0: the broker set no limit
  } note;
};
const char* to_string(setup_action::kind k) noexcept;

class connection_setup {
 public:
  using time_point = connection_core::time_point;
  using kind = setup_action::kind;

  struct options {
    /// The SASL mechanism and credentials; null without SASL. Owned by the client's transport
    /// security, which outlives every connection.
    const security::sasl_credentials* sasl = nullptr;
    /// OAUTHBEARER tokens come from a provider (get_token) rather than from `sasl`.
    bool token_provider = false;
    /// Draws when to re-authenticate within the session (tests fix it).
    std::uint32_t seed = std::random_device{}();
    /// GSSAPI: a new Kerberos security context with this broker, one per exchange (the
    /// connection binds its host name).
    std::function<std::unique_ptr<security::gss_context>()> gss;
  };

  /// The step whose answer the setup waits for.
  enum class step {
    idle,               // no exchange runs: answers and tokens are ignored, nothing is sent
    api_versions,       // ApiVersions sent, waiting for the broker's version ranges
    token,              // waiting for an OAUTHBEARER token from the provider
    sasl_handshake,     // SaslHandshake sent, waiting for the broker's word on the mechanism
    sasl_authenticate,  // a SaslAuthenticate round sent
    done,               // set up: requests flow; a re-authentication may start
  };

  connection_setup(connection_core& core, options o);

  step current() const noexcept { return step_; }
  /// The version ranges of the last ApiVersions answer accepted.
  const api_version_table& versions() const noexcept { return versions_; }

  // ---- events ----

  /// The transport is up (TCP, and TLS if any): ApiVersions at the highest version kgroup knows.
  setup_action connected();
  /// The body of the answer to the setup request in flight.
  setup_action answer(time_point now, std::span<const std::uint8_t> body);
  /// The token provider's answer to get_token: `error` empty and the token, or why there is none
  /// (never the token) and whether retrying can help.
  setup_action token(const std::string& error, bool permanent, const security::oauth_token& t);
  /// connection_core decided a KIP-368 re-authentication starts now (nothing is in flight).
  setup_action reauthenticate();
  /// The attempt is over (the connection failed or closed, a setup request failed or timed out):
  /// the exchange is forgotten, its secrets wiped.
  void lost() noexcept;

 private:
  setup_action on_api_versions(std::span<const std::uint8_t> body);
  setup_action on_handshake(std::span<const std::uint8_t> body);
  setup_action on_authenticate(time_point now, std::span<const std::uint8_t> body);
  setup_action begin_sasl(bool reauth);
  // A new SASL session for this exchange, its first message prepared; the failure otherwise.
  std::optional<setup_action> new_session(security::sasl_credentials creds);
  setup_action send_api_versions(std::int16_t version);
  setup_action send_handshake();
  setup_action send_authenticate();
  setup_action end(kind what, std::error_code ec, std::string message);

  connection_core& core_;
  options opts_;
  step step_ = step::idle;
  std::int16_t version_ = -1;  // of the request in flight
  bool reauth_ = false;        // the SASL exchange is a re-authentication
  api_version_table versions_;
  std::unique_ptr<security::sasl_session> sasl_;
  base::lazy_mt19937 rng_;  // made at the first re-authentication draw (base/lazy_rng.hpp)
};
const char* to_string(connection_setup::step s) noexcept;

}  // namespace kgroup::net
