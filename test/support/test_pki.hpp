// A test PKI generated at run time with OpenSSL's API (no openssl command, nothing committed):
// a CA, broker and client certificates signed by it, and the broken variants the TLS tests need.
// Keys are EC P-256, signatures ECDSA-SHA256. Everything is written as PEM files into one
// temporary directory per process (removed at exit), and kept as PEM strings too.
#pragma once

#include <string>

namespace kgroup::test {

/// A certificate and its private key, as PEM text and as files in test_pki::directory.
struct cert_and_key {
  std::string cert_pem;
  std::string key_pem;  // unencrypted PKCS#8 ("BEGIN PRIVATE KEY")
  std::string cert_path;
  std::string key_path;
};

class test_pki {
 public:
  /// The process's PKI, generated on first use (tens of milliseconds). Thread-safe.
  /// Throws std::runtime_error if OpenSSL or the file system fails.
  static const test_pki& get();

  /// The temporary directory holding every file below.
  std::string directory;

  /// The trusted test CA (CN "kgroup test CA"): give cert_path to clients as ssl.ca.location.
  cert_and_key ca;
  /// Broker certificate signed by `ca`: CN localhost, SAN DNS:localhost and IP:127.0.0.1,
  /// serverAuth, valid from a day ago for ten years.
  cert_and_key broker;
  /// Like `broker`, but expired: valid from 3 days ago until yesterday.
  cert_and_key expired_broker;
  /// Signed by `ca`, valid, but for another name: CN and SAN DNS:wrong.example only.
  cert_and_key wrong_name_broker;
  /// A second CA that no client trusts (CN "kgroup untrusted CA").
  cert_and_key untrusted_ca;
  /// Signed by `untrusted_ca`, otherwise like `broker` (right names, valid).
  cert_and_key untrusted_broker;
  /// Client certificate for mTLS signed by `ca`: CN "kgroup-test-client", clientAuth.
  cert_and_key client;
  /// A client certificate signed by `untrusted_ca` (CN "kgroup-untrusted-client").
  cert_and_key untrusted_client;

  /// `client`'s key again, as encrypted PKCS#8 PEM (AES-256-CBC, "BEGIN ENCRYPTED PRIVATE KEY")
  /// under client_key_password, for ssl.key.password.
  std::string client_key_encrypted_pem;
  std::string client_key_encrypted_path;
  std::string client_key_password;

  /// Java's stores (issue 35): `client`'s key, certificate and the CA as a PKCS#12 keystore
  /// (ssl.keystore.location) under keystore_password; the CA alone as a PKCS#12 truststore
  /// (ssl.truststore.location) under truststore_password; `client`'s certificate and key in one
  /// PEM file (ssl.keystore.type=PEM, KIP-651).
  std::string client_keystore_p12_path;
  std::string keystore_password;
  std::string ca_truststore_p12_path;
  std::string truststore_password;
  std::string client_keystore_pem_path;

  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;
  ~test_pki();

 private:
  test_pki();
};

}  // namespace kgroup::test
