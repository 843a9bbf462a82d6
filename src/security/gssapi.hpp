// SASL GSSAPI (Kerberos V5, RFC 4752) on one broker connection, sans I/O: the client side of the
// security-context exchange and of the security-layer negotiation that follows it. The GSS-API
// calls themselves sit behind `gss_context` (MIT Kerberos in gssapi_krb5.cpp; a fake in the unit
// tests), so this state machine never touches a KDC, a keytab or a socket.
//
//   start()                 -> first context token (gss_init_sec_context without input)
//   on_server(token)...     -> more context tokens until the context is established (the
//                              token that completes it, e.g. the AP-REP, gets an empty answer)
//   on_server(offer)        -> the server's wrapped 4-byte offer is unwrapped; the answer is
//                              the wrapped "no security layer, max size 0, authzid"
//   on_server(final)        -> done (Kafka answers the last message with empty bytes)
//
// kgroup never negotiates an integrity or confidentiality layer: Kafka's brokers do not offer one
// (their GSSAPI server has auth only), and TLS is the way to protect the connection.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "protocol/messages.hpp"

namespace kgroup::security {

/// Where a client's Kerberos credentials come from (sasl.kerberos.* or a Krb5LoginModule line).
struct kerberos_settings {
  std::string service_name = "kafka";  // the broker's service: target name service@host
  std::string principal;               // the client's principal; empty: the default credentials'
  std::string keytab;                  // client keytab file; empty: the ticket cache (kinit)
};

/// What one GSS-API call gave.
struct gss_result {
  bool ok = false;
  bool complete = false;   // init: the security context is established
  bool retriable = false;  // !ok: a transient failure (the KDC did not answer)
  protocol::bytes token;   // init: the token to send (may be empty); wrap/unwrap: the message
  std::string error;       // !ok: the GSS major and minor status texts, never a key
};

/// One GSS-API security context with one broker (initiator side), and the credentials it uses.
class gss_context {
 public:
  virtual ~gss_context() = default;
  /// gss_init_sec_context: `input` empty for the first call, then each token of the server.
  virtual gss_result init(std::span<const std::uint8_t> input) = 0;
  /// gss_unwrap of a message of the server.
  virtual gss_result unwrap(std::span<const std::uint8_t> input) = 0;
  /// gss_wrap without confidentiality (integrity only), as RFC 4752 asks for the client's answer.
  virtual gss_result wrap(std::span<const std::uint8_t> message) = 0;
};

class gssapi_client {
 public:
  enum class status { send, done, failed };

  /// `authzid`: the authorization identity sent in the security-layer answer (empty: the
  /// authenticated principal, which is what Kafka uses either way).
  explicit gssapi_client(std::unique_ptr<gss_context> gss, std::string authzid = {});

  /// The first token (`out`); failed when no context can start (no credentials, unknown
  /// principal, unreachable KDC: `error`, `retriable`).
  status start(protocol::bytes& out, std::string& error);
  /// A token of the server: send (`out`, possibly empty), done, or failed (`error`).
  status on_server(std::span<const std::uint8_t> token, protocol::bytes& out, std::string& error);
  /// The last failure was transient (the KDC did not answer): retrying may help.
  bool retriable() const noexcept { return retriable_; }

  /// The documented states, for tests and logs.
  enum class state {
    initial,   // start() not called yet
    context,   // context tokens are exchanged
    offer,     // the context is established: the next server token is the security-layer offer
    answered,  // the security-layer answer was sent: the server's next answer ends the exchange
    done,      // authenticated
    failed,    // the exchange failed; nothing more is sent
  };
  state current() const noexcept { return state_; }

 private:
  status fail(std::string& error, std::string what, bool retriable = false);

  std::unique_ptr<gss_context> gss_;
  std::string authzid_;
  state state_ = state::initial;
  bool retriable_ = false;
  int empty_offers_ = 0;  // empty server tokens answered in the offer state
};

/// The RFC 4752 security-layer bits.
inline constexpr std::uint8_t gssapi_layer_none = 0x01;
inline constexpr std::uint8_t gssapi_layer_integrity = 0x02;
inline constexpr std::uint8_t gssapi_layer_confidentiality = 0x04;

/// The client's Kerberos login (credentials acquired once, shared by its connections) and the
/// factory of one security context per broker connection. Built from MIT Kerberos
/// (gssapi_krb5.cpp) when kgroup has it; otherwise make_kerberos_login says why it cannot.
class kerberos_login {
 public:
  virtual ~kerberos_login() = default;
  /// A context for the broker at `host` (target name `service@host`, host-based service).
  virtual std::unique_ptr<gss_context> context_for(const std::string& host) = 0;
};

/// Null with `error` set when Kerberos is not available in this build or `settings` cannot work
/// (a keytab that cannot be read). Does not contact the KDC: credentials are acquired by the
/// first connection (and again from the keytab when they near expiry).
std::shared_ptr<kerberos_login> make_kerberos_login(const kerberos_settings& settings, std::string& error);

/// True when this kgroup was built with MIT Kerberos' GSS-API.
bool kerberos_available() noexcept;

}  // namespace kgroup::security
