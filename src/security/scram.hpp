// SCRAM (RFC 5802; SHA-256 and SHA-512 as in RFC 7677) client side, as Kafka's SASL/SCRAM uses it:
// a sans-I/O core that turns the server's messages into the client's, with no socket and no
// clock. The connection layer carries the messages in SaslAuthenticate requests.
//
// Exchange: client-first -> server-first -> client-final -> server-final. The client proves it
// knows the password without sending it, and checks the server's signature, so a server that
// does not know the stored credential cannot pretend the authentication succeeded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup::security {

enum class scram_hash { sha1, sha256, sha512 };

/// "SCRAM-SHA-256" -> sha256, "SCRAM-SHA-512" -> sha512 (sha1 only for the RFC 5802 test
/// vectors; Kafka does not offer it). False for another name.
bool scram_hash_from_mechanism(std::string_view mechanism, scram_hash& out);

class scram_client {
 public:
  /// `nonce`: the client nonce (printable ASCII without ','); empty draws 24 random bytes,
  /// base64-encoded. A fixed nonce is for tests only.
  scram_client(scram_hash hash, std::string username, std::string password, std::string nonce = {});
  /// Wipes the password and the salted password.
  ~scram_client();
  scram_client(const scram_client&) = delete;
  scram_client& operator=(const scram_client&) = delete;

  /// The client-first message: "n,,n=<user>,r=<nonce>".
  std::string client_first();

  /// Takes the server-first message ("r=<nonce>,s=<salt>,i=<iterations>") and returns the
  /// client-final message with the proof. On a malformed message, a server nonce that does not
  /// extend ours, or too few iterations, returns false and says why in `error` (never the
  /// password or anything derived from it).
  bool client_final(std::string_view server_first, std::string& out, std::string& error);

  /// Checks the server-final message ("v=<signature>", or "e=<error>"): true when the server
  /// proved it knows the credential.
  bool verify_server_final(std::string_view server_final, std::string& error);

  /// The fewest iterations accepted: Kafka's minimum (4096).
  static constexpr std::uint32_t min_iterations = 4096;
  /// The most iterations accepted: Kafka's maximum (16384; brokers refuse to store more). The count
  /// comes from the server, and each iteration is an HMAC on the background thread: without a cap
  /// a hostile server's i=2147483647 froze heartbeats, connections and close() for many minutes.
  static constexpr std::uint32_t max_iterations = 16384;
  /// The longest salt accepted, in bytes (Kafka's are 20-odd; RFC 5802 sets no bound).
  static constexpr std::size_t max_salt_bytes = 1024;

 private:
  scram_hash hash_;
  std::string username_;
  std::string password_;
  std::string nonce_;
  std::string client_first_bare_;
  std::string auth_message_;
  std::vector<std::uint8_t> salted_password_;
  enum class step { initial, first_sent, final_sent, done } step_ = step::initial;
};

}  // namespace kgroup::security
