// One SASL authentication on one broker connection, sans I/O: what to send in SaslHandshake and
// each SaslAuthenticate, and what the answers mean. The connection driver sends the requests
// (after ApiVersions, before anything else) and feeds the answers back.
//
//   handshake() -> on_handshake() -> [ next() -> on_authenticate() ]... -> done | failed
//
// PLAIN and OAUTHBEARER are one round; SCRAM-SHA-256/512 two (client-first, client-final), and the second
// answer is checked for the server's signature. GSSAPI (Kerberos, security/gssapi.hpp) takes as many rounds
// as the security context needs, then the security-layer message; its first token is computed by prepare(),
// before the SaslHandshake, since getting it may fail (no ticket, unknown principal).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocol/messages.hpp"
#include "security/gssapi.hpp"
#include "security/oauth.hpp"
#include "security/scram.hpp"

namespace kgroup::security {

struct sasl_credentials {
  std::string mechanism;  // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI
  std::string username;
  std::string password;
  std::string scram_nonce;  // tests only: a fixed SCRAM client nonce
  oauth_token token;        // OAUTHBEARER: the token to present
  // (GSSAPI's credentials are the Kerberos login's: transport_security::kerberos.)
};

class sasl_session {
 public:
  enum class status { more, done, failed };

  /// `gss`: GSSAPI's security context with this broker (null for the other mechanisms).
  explicit sasl_session(sasl_credentials creds, std::unique_ptr<gss_context> gss = nullptr);
  /// Wipes its copies of the password and the token.
  ~sasl_session();
  sasl_session(const sasl_session&) = delete;
  sasl_session& operator=(const sasl_session&) = delete;

  /// False with a reason if the mechanism is not one this client implements.
  static bool supported(const std::string& mechanism, std::string& why);

  /// Before handshake(): false when the first message cannot be made (GSSAPI: no Kerberos
  /// credentials or ticket: `error` with the GSS status, `retriable` when the KDC did not answer).
  bool prepare(std::string& error, bool& retriable);
  protocol::sasl_handshake_request handshake() const;
  /// False when the broker refuses the mechanism: `error` names the broker's enabled mechanisms.
  bool on_handshake(const protocol::sasl_handshake_response& r, std::string& error);
  /// The auth_bytes of the next SaslAuthenticate request.
  protocol::bytes next();
  /// done: authenticated (session_lifetime_ms() says for how long; 0: no limit); more: call
  /// next() again; failed: `error` says why (the broker's message for
  /// SASL_AUTHENTICATION_FAILED; never the password).
  status on_authenticate(const protocol::sasl_authenticate_response& r, std::string& error);
  std::int64_t session_lifetime_ms() const noexcept { return session_lifetime_ms_; }

 private:
  status step(const protocol::sasl_authenticate_response& r, std::string& error);
  // A string the broker sent, for an error: without the secrets, control characters escaped.
  std::string peer_text(std::string text) const;

  sasl_credentials creds_;
  std::unique_ptr<scram_client> scram_;
  std::unique_ptr<gss_context> gss_;       // until prepare() hands it to gssapi_
  std::unique_ptr<gssapi_client> gssapi_;  // GSSAPI
  protocol::bytes pending_;                // the next SCRAM or GSSAPI message
  int round_ = 0;
  std::string oauth_challenge_;  // OAUTHBEARER: the server's error challenge, if any
  std::int64_t session_lifetime_ms_ = 0;
};

/// When to re-authenticate (KIP-368) after the broker granted a session of `session_lifetime_ms`
/// (> 0): `fraction` (Java's window: a random 0.85 to 0.95) of it, but no sooner than 500 ms and
/// no later than ten years (a broker's value cannot overflow the clock or cause a storm).
std::chrono::milliseconds reauthentication_delay(std::int64_t session_lifetime_ms, double fraction);

}  // namespace kgroup::security
