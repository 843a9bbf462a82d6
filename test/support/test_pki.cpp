#include "test_pki.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kgroup::test {
namespace {

struct pkey_free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct x509_free {
  void operator()(X509* p) const { X509_free(p); }
};
struct bio_free {
  void operator()(BIO* p) const { BIO_free(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;
using bio_ptr = std::unique_ptr<BIO, bio_free>;

[[noreturn]] void fail(const std::string& what) {
  char buf[256] = "";
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error("test_pki: " + what + ": " + buf);
}

pkey_ptr new_key() {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) fail("EVP_EC_gen");
  return key;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) fail(std::string("extension ") + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

struct cert_spec {
  std::string common_name;
  bool ca = false;
  std::string san;             // e.g. "DNS:localhost,IP:127.0.0.1"; empty: none
  std::string extended_usage;  // "serverAuth", "clientAuth" or empty
  long not_before_days = -1;   // relative to now
  long not_after_days = 3650;
};

// Issues a certificate for `key`; `issuer`/`issuer_key` null means self-signed.
x509_ptr issue(const cert_spec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  static long serial = 1;
  x509_ptr cert(X509_new());
  if (!cert) fail("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_time_adj_ex(X509_getm_notBefore(cert.get()), static_cast<int>(spec.not_before_days), 0, nullptr);
  X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(spec.not_after_days), 0, nullptr);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("kgroup tests"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_ext(cert.get(), signer, NID_subject_key_identifier, "hash");
  add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (spec.ca) {
    add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyAgreement");
    if (!spec.extended_usage.empty()) add_ext(cert.get(), signer, NID_ext_key_usage, spec.extended_usage.c_str());
    if (!spec.san.empty()) add_ext(cert.get(), signer, NID_subject_alt_name, spec.san.c_str());
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) fail("X509_sign");
  return cert;
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string cert_pem(X509* cert) {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) fail("PEM_write_bio_X509");
  return bio_text(bio.get());
}

std::string key_pem(EVP_PKEY* key, const std::string& password = {}) {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  const int ok = password.empty()
                     ? PEM_write_bio_PKCS8PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                     : PEM_write_bio_PKCS8PrivateKey(bio.get(), key, EVP_aes_256_cbc(), nullptr, 0, nullptr,
                                                     const_cast<char*>(password.c_str()));
  if (ok != 1) fail("PEM_write_bio_PKCS8PrivateKey");
  return bio_text(bio.get());
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("test_pki: cannot write " + path);
  return path;
}

struct issued {
  pkey_ptr key;
  x509_ptr cert;
};

issued make(const cert_spec& spec, const issued* issuer) {
  issued out;
  out.key = new_key();
  out.cert = issue(spec, out.key.get(), issuer != nullptr ? issuer->cert.get() : nullptr,
                   issuer != nullptr ? issuer->key.get() : nullptr);
  return out;
}

// A PKCS#12 store (AES-256-CBC, PBKDF2, a MAC under `password`): with `key`, a keystore (the
// key, `cert` and `chain`, all encrypted); without, a truststore of `cert`, not encrypted (as
// `openssl pkcs12 -export -certpbe NONE` writes one), readable without its password as Java reads it.
std::string pkcs12_der(EVP_PKEY* key, X509* cert, X509* chain, const std::string& password) {
  std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> cas(sk_X509_new_null(),
                                                                 [](STACK_OF(X509) * s) { sk_X509_free(s); });
  if (chain != nullptr) sk_X509_push(cas.get(), chain);
  if (key == nullptr) sk_X509_push(cas.get(), cert);
  std::unique_ptr<PKCS12, decltype(&PKCS12_free)> p12(
      PKCS12_create(password.c_str(), "kgroup", key, key != nullptr ? cert : nullptr, cas.get(),
                    NID_aes_256_cbc, key != nullptr ? NID_aes_256_cbc : -1, PKCS12_DEFAULT_ITER,
                    PKCS12_DEFAULT_ITER, 0),
      &PKCS12_free);
  if (!p12) fail("PKCS12_create");
  unsigned char* der = nullptr;
  const int n = i2d_PKCS12(p12.get(), &der);
  if (n <= 0) fail("i2d_PKCS12");
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

cert_and_key save(const std::string& dir, const std::string& name, const issued& i) {
  cert_and_key out;
  out.cert_pem = cert_pem(i.cert.get());
  out.key_pem = key_pem(i.key.get());
  out.cert_path = write_file(dir, name + ".crt", out.cert_pem);
  out.key_path = write_file(dir, name + ".key", out.key_pem);
  return out;
}

}  // namespace

const test_pki& test_pki::get() {
  static const test_pki pki;
  return pki;
}

test_pki::test_pki() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kgroup-pki-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("test_pki: mkdtemp failed for " + templ);
  directory = buf.data();

  const std::string good_names = "DNS:localhost,IP:127.0.0.1";
  const issued ca_i = make({"kgroup test CA", true, "", "", -1, 3650}, nullptr);
  const issued untrusted_ca_i = make({"kgroup untrusted CA", true, "", "", -1, 3650}, nullptr);
  ca = save(directory, "ca", ca_i);
  untrusted_ca = save(directory, "untrusted-ca", untrusted_ca_i);
  broker = save(directory, "broker", make({"localhost", false, good_names, "serverAuth", -1, 3650}, &ca_i));
  expired_broker = save(directory, "expired-broker", make({"localhost", false, good_names, "serverAuth", -3, -1}, &ca_i));
  wrong_name_broker =
      save(directory, "wrong-name-broker", make({"wrong.example", false, "DNS:wrong.example", "serverAuth", -1, 3650}, &ca_i));
  untrusted_broker =
      save(directory, "untrusted-broker", make({"localhost", false, good_names, "serverAuth", -1, 3650}, &untrusted_ca_i));
  const issued client_i = make({"kgroup-test-client", false, "", "clientAuth", -1, 3650}, &ca_i);
  client = save(directory, "client", client_i);
  untrusted_client =
      save(directory, "untrusted-client", make({"kgroup-untrusted-client", false, "", "clientAuth", -1, 3650}, &untrusted_ca_i));
  client_key_password = "kgroup-test-key-password";
  client_key_encrypted_pem = key_pem(client_i.key.get(), client_key_password);
  client_key_encrypted_path = write_file(directory, "client-encrypted.key", client_key_encrypted_pem);
  keystore_password = "kgroup-test-keystore-password";
  truststore_password = "kgroup-test-truststore-password";
  client_keystore_p12_path =
      write_file(directory, "client.keystore.p12",
                 pkcs12_der(client_i.key.get(), client_i.cert.get(), ca_i.cert.get(), keystore_password));
  ca_truststore_p12_path = write_file(directory, "ca.truststore.p12",
                                      pkcs12_der(nullptr, ca_i.cert.get(), nullptr, truststore_password));
  client_keystore_pem_path = write_file(directory, "client.keystore.pem", client.cert_pem + client.key_pem);
}

test_pki::~test_pki() {
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
}

}  // namespace kgroup::test
