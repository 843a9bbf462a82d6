// A test-only security front for librdkafka's mock cluster, which speaks PLAINTEXT only: per mock
// broker one loopback listener that terminates TLS and runs the broker side of SASL, then relays
// every other request to its mock broker (and rewrites broker addresses in Metadata and
// FindCoordinator answers to the fronts' own listeners, kafka_relay.hpp).
//
// What it does as a Kafka broker does (SaslServerAuthenticator, KIP-368):
//   - ApiVersions is relayed; with SASL the answer also offers SaslHandshake 0-1 and
//     SaslAuthenticate 0-2.
//   - SaslHandshake: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list for a mechanism that is
//     not enabled, then the connection is closed. v0 means raw SASL tokens follow (size-prefixed,
//     no Kafka header; kafka-python does this), v1 means SaslAuthenticate requests follow. On a
//     front without SASL: ILLEGAL_SASL_STATE (34).
//   - GSSAPI (Kerberos): the JDK server's exchange (context tokens, an empty client answer to the
//     AP-REP, the wrapped offer "no security layer", the client's wrapped choice), with a service
//     keytab (test_kdc); the session lifetime is capped by the client's ticket.
//   - SaslAuthenticate: PLAIN (authzid empty or the user), SCRAM-SHA-256/512 (two rounds, the
//     server holds only salt, 4096 iterations, StoredKey and ServerKey; server-final "v=..."),
//     OAUTHBEARER (RFC 7628 "n,,\x01auth=Bearer <jwt>\x01\x01" with an unsecured JWT: header alg
//     "none", payload "sub" and a future "exp", optionally a required scope). Failures answer
//     SASL_AUTHENTICATION_FAILED (58) with a message and close the connection. An invalid
//     OAUTHBEARER token is first answered, as Kafka does, with error 0 and the RFC 7628 JSON
//     status as challenge; the client's "\x01" then gets error 58.
//   - Any other request before authentication closes the connection.
//   - session_lifetime_ms (connections.max.reauth.ms): SaslAuthenticate v1+ answers carry the
//     lifetime (for OAUTHBEARER at most the token's remaining life); once it has passed, the next
//     request other than SaslHandshake/SaslAuthenticate closes the connection. SaslHandshake v1 +
//     SaslAuthenticate on an authenticated connection re-authenticate (same principal required)
//     and renew the lifetime, while other requests are in flight; answers go back in request
//     order.
//
// Threads: one io_context thread per front runs every connection with async operations (so no
// OpenSSL object is used by two threads). Counters may be read from any thread.
// Test code: links kgroup_internal (codec, base64) and OpenSSL; no Asio in this header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kgroup::test {

class mock_cluster;
struct broker_address;

/// Which test_pki certificate the front's TLS listeners present.
enum class front_certificate {
  good,        // test_pki::broker
  expired,     // test_pki::expired_broker
  wrong_name,  // test_pki::wrong_name_broker (SAN DNS:wrong.example only)
  untrusted,   // test_pki::untrusted_broker (signed by a CA nobody trusts)
};

enum class front_tls_versions { tls12_and_13, tls12_only, tls13_only };

struct secure_front_options {
  // ---- TLS ----
  bool tls = false;
  front_certificate certificate = front_certificate::good;
  /// mTLS: the client must present a certificate signed by test_pki::ca.
  bool require_client_certificate = false;
  front_tls_versions tls_versions = front_tls_versions::tls12_and_13;

  // ---- SASL ----
  /// Enabled mechanisms: any of "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
  /// "GSSAPI" (with gssapi_keytab, in builds with MIT Kerberos: gssapi_available()).
  /// Empty: no SASL (requests are relayed right away).
  std::vector<std::string> sasl_mechanisms;
  /// Users for PLAIN and SCRAM: name -> password. For SCRAM the front keeps only the salted
  /// credential (random salt, 4096 iterations, StoredKey, ServerKey).
  std::map<std::string, std::string> users;
  /// OAUTHBEARER: if not empty, the token's "scope" claim (space-separated string or array) must
  /// contain it.
  std::string oauth_required_scope;
  /// GSSAPI: the brokers' service keytab (test_kdc::service_keytab()); the acceptor takes any of
  /// its principals (kafka/<host the client connected to>). The principal is the client's full
  /// Kerberos name (alice@REALM).
  std::string gssapi_keytab;
  /// KIP-368 (connections.max.reauth.ms); 0 = sessions do not expire. (For OAUTHBEARER and
  /// GSSAPI at most the token's or the ticket's remaining life.)
  std::int64_t session_lifetime_ms = 0;

  // ---- faults ----
  /// The first N connections that send a SaslHandshake are closed right after it, unanswered.
  int cut_handshake_connections = 0;

  /// Host put into Metadata and FindCoordinator answers (the listeners are on 127.0.0.1; use
  /// "localhost" to check names against DNS SANs).
  std::string advertised_host = "127.0.0.1";
};

/// A snapshot of the front's counters.
struct secure_front_counters {
  int connections_accepted = 0;
  int tls_handshakes = 0;                // completed TLS handshakes
  int tls_handshake_failures = 0;        // e.g. the client rejected the certificate, no client cert
  int client_certificates_verified = 0;  // mTLS handshakes with a verified client certificate
  int authentications = 0;               // first authentications on a connection that succeeded
  int reauthentications = 0;             // KIP-368 re-authentications that succeeded
  int failed_authentications = 0;        // SASL_AUTHENTICATION_FAILED, unknown mechanism, bad state
  int cut_handshakes = 0;                // connections cut by cut_handshake_connections
  int expired_sessions = 0;              // connections closed because the session had expired
  int unauthenticated_requests = 0;      // connections closed for a request before authentication
  std::map<std::string, int> authentications_by_principal;  // successes incl. re-authentications
  std::map<std::string, int> authentications_by_mechanism;  // successes incl. re-authentications
};

class secure_front {
 public:
  /// One listener per broker of `cluster` on 127.0.0.1 (ports chosen by the kernel). `cluster`
  /// must outlive the front. Throws std::runtime_error (bad mechanism name, TLS setup).
  secure_front(const mock_cluster& cluster, secure_front_options options);
  /// The same in front of other listeners (e.g. a group_proxy's), one per address in broker id
  /// order; Metadata and FindCoordinator answers must name exactly these addresses.
  secure_front(const std::vector<broker_address>& upstream, secure_front_options options);
  /// stop().
  ~secure_front();
  secure_front(const secure_front&) = delete;
  secure_front& operator=(const secure_front&) = delete;

  /// "127.0.0.1:PORT,..." (or advertised_host:PORT) of the front's listeners.
  [[nodiscard]] std::string bootstrap_servers() const;
  /// The listener port in front of broker `broker_id` (1..N).
  [[nodiscard]] std::uint16_t port_of(std::int32_t broker_id) const;
  [[nodiscard]] const secure_front_options& options() const;
  /// Whether the front can run GSSAPI (test support built with MIT Kerberos).
  static bool gssapi_available();

  [[nodiscard]] secure_front_counters counters() const;

  /// Closes every connection (clients see them closed) and every listener, joins the thread.
  /// Idempotent.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kgroup::test
