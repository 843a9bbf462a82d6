#include "net/security.hpp"

#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <openssl/crypto.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <fmt/format.h>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "net/oidc.hpp"

namespace kgroup::net {

namespace ssl = boost::asio::ssl;

namespace {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(make_error_code(client_errc::invalid_config), msg);
}

// OpenSSL's reason for the last failure ("no such file", "bad decrypt"): never contains the data.
std::string openssl_reason(const boost::system::system_error& e) {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code != 0) {
    if (const char* r = ERR_reason_error_string(code)) return r;
  }
  return e.code().message();
}

template <class F>
void load(const char* key, const std::string& what, F&& f) {
  try {
    f();
  } catch (const boost::system::system_error& e) {
    invalid(fmt::format("{}: cannot load {} ({})", key, what, openssl_reason(e)));
  }
}

template <class Message, class F>
void load_with(const Message& message, F&& f) {
  try {
    f();
  } catch (const boost::system::system_error& e) {
    invalid(message(openssl_reason(e)));
  }
}

// ssl.key.password for OpenSSL's passphrase callback; `asked` tells an encrypted key apart.
struct key_passphrase {
  std::string value;
  bool asked = false;
  explicit key_passphrase(std::string v) : value(std::move(v)) {}
  key_passphrase(const key_passphrase&) = delete;
  key_passphrase& operator=(const key_passphrase&) = delete;
  ~key_passphrase() { OPENSSL_cleanse(value.data(), value.size()); }

  static int callback(char* buf, int size, int /*rwflag*/, void* user) {
    auto* self = static_cast<key_passphrase*>(user);
    if (self == nullptr) return -1;  // after construction: nothing is decrypted any more
    self->asked = true;
    if (self->value.empty() || self->value.size() > static_cast<std::size_t>(size)) return -1;
    std::memcpy(buf, self->value.data(), self->value.size());
    return static_cast<int>(self->value.size());
  }
};

// A store's password, wiped when it goes.
struct store_password {
  std::string value;
  explicit store_password(std::string v) : value(std::move(v)) {}
  store_password(const store_password&) = delete;
  store_password& operator=(const store_password&) = delete;
  ~store_password() { OPENSSL_cleanse(value.data(), value.size()); }
};

// What a PKCS#12 file holds, owned.
struct pkcs12_contents {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, &EVP_PKEY_free};
  std::unique_ptr<X509, decltype(&X509_free)> cert{nullptr, &X509_free};
  std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> others{
      nullptr, [](STACK_OF(X509) * s) { sk_X509_pop_free(s, X509_free); }};
};

// Reads the PKCS#12 file at `path` (ssl.keystore.location or ssl.truststore.location, `key`) with
// `password_key`'s password; a truststore (`certificates_only`) may have none. Java's JKS format is refused
// with the command that converts it: OpenSSL cannot read it. Messages name keys and the path, never the
// password.
pkcs12_contents read_pkcs12(const char* key, const std::string& path, const char* password_key,
                            const std::string& password, bool certificates_only) {
  std::ifstream in(path, std::ios::binary);
  if (!in) invalid(fmt::format("{}: cannot read '{}'", key, path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() >= 4 && static_cast<unsigned char>(bytes[0]) == 0xFE &&
      static_cast<unsigned char>(bytes[1]) == 0xED && static_cast<unsigned char>(bytes[2]) == 0xFE &&
      static_cast<unsigned char>(bytes[3]) == 0xED) {
    invalid(
        fmt::format("{}: '{}' is a JKS keystore, which kgroup cannot read (OpenSSL reads PKCS#12 and PEM); "
                    "convert it with keytool -importkeystore -srckeystore '{}' -destkeystore store.p12 "
                    "-deststoretype PKCS12",
                    key, path, path));
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::unique_ptr<PKCS12, decltype(&PKCS12_free)> p12(
      d2i_PKCS12(nullptr, &data, static_cast<long>(bytes.size())), &PKCS12_free);
  if (!p12) {
    ERR_clear_error();
    invalid(fmt::format("{}: '{}' is not a PKCS#12 file (set {} to PEM for a PEM file)", key, path,
                        std::string(key).replace(std::string(key).rfind('.'), std::string::npos, ".type")));
  }
  // Java checks a store's integrity only when it has a password; so does kgroup.
  const char* pw = password.empty() ? nullptr : password.c_str();
  if (pw != nullptr && PKCS12_mac_present(p12.get()) == 1 &&
      PKCS12_verify_mac(p12.get(), pw, static_cast<int>(password.size())) != 1) {
    ERR_clear_error();
    invalid(fmt::format("{}: the integrity check of '{}' failed: wrong {}?", key, path, password_key));
  }
  pkcs12_contents out;
  if (pw == nullptr && certificates_only) {
    // A truststore without password, as Java reads one: the certificates of its unencrypted parts.
    std::unique_ptr<STACK_OF(PKCS7), void (*)(STACK_OF(PKCS7)*)> safes(
        PKCS12_unpack_authsafes(p12.get()), [](STACK_OF(PKCS7) * s) { sk_PKCS7_pop_free(s, PKCS7_free); });
    out.others.reset(sk_X509_new_null());
    bool encrypted = false;
    for (int i = 0; safes && i < sk_PKCS7_num(safes.get()); ++i) {
      PKCS7* safe = sk_PKCS7_value(safes.get(), i);
      if (OBJ_obj2nid(safe->type) != NID_pkcs7_data) {
        encrypted = true;
        continue;
      }
      std::unique_ptr<STACK_OF(PKCS12_SAFEBAG), void (*)(STACK_OF(PKCS12_SAFEBAG)*)> bags(
          PKCS12_unpack_p7data(safe),
          [](STACK_OF(PKCS12_SAFEBAG) * b) { sk_PKCS12_SAFEBAG_pop_free(b, PKCS12_SAFEBAG_free); });
      for (int j = 0; bags && j < sk_PKCS12_SAFEBAG_num(bags.get()); ++j) {
        const PKCS12_SAFEBAG* bag = sk_PKCS12_SAFEBAG_value(bags.get(), j);
        if (PKCS12_SAFEBAG_get_nid(bag) != NID_certBag) continue;
        if (X509* cert = PKCS12_SAFEBAG_get1_cert(bag)) sk_X509_push(out.others.get(), cert);
      }
    }
    ERR_clear_error();
    if (sk_X509_num(out.others.get()) == 0 && encrypted) {
      invalid(fmt::format("{}: the certificates in '{}' are encrypted and {} is not set", key, path,
                          password_key));
    }
    return out;
  }
  EVP_PKEY* k = nullptr;
  X509* c = nullptr;
  STACK_OF(X509)* others = nullptr;
  if (PKCS12_parse(p12.get(), pw, &k, &c, &others) != 1) {
    const unsigned long code = ERR_peek_last_error();
    ERR_clear_error();
    const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
    invalid(
        fmt::format("{}: cannot read '{}' ({}{}; a store written with old RC2 or 3DES encryption needs "
                    "converting, e.g. keytool -importkeystore with a current JDK)",
                    key, path, reason != nullptr ? reason : "unknown reason",
                    password.empty() ? fmt::format(", and {} is not set", password_key) : ""));
  }
  out.key.reset(k);
  out.cert.reset(c);
  out.others.reset(others);
  return out;
}

// ssl.enabled.protocols: the TLS versions allowed, as the lowest and highest of the list (OpenSSL
// sets a range, Java a set: the two agree for the versions a client can use, 1.2 and 1.3). Older
// versions are refused by name: kgroup never negotiates below TLS 1.2.
void set_protocols(SSL_CTX* ctx, const std::vector<std::string>& names) {
  int lo = 0, hi = 0;
  for (const auto& n : names) {
    int v = 0;
    if (n == "TLSv1.2")
      v = TLS1_2_VERSION;
    else if (n == "TLSv1.3")
      v = TLS1_3_VERSION;
    else if (n == "TLSv1" || n == "TLSv1.1" || n == "SSLv3")
      invalid(fmt::format("ssl.enabled.protocols: {} is not supported (kgroup needs TLSv1.2 or TLSv1.3)", n));
    else
      invalid(fmt::format("ssl.enabled.protocols: unknown protocol '{}' (use TLSv1.2, TLSv1.3)", n));
    if (lo == 0 || v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo == 0) invalid("ssl.enabled.protocols: empty (use TLSv1.2, TLSv1.3)");
  SSL_CTX_set_min_proto_version(ctx, lo);
  SSL_CTX_set_max_proto_version(ctx, hi);
}

// ssl.cipher.suites: Java names suites by their standard (IANA) names, librdkafka by OpenSSL's;
// both are accepted. TLS 1.3 suites (TLS_AES_128_GCM_SHA256, ...) go to OpenSSL's TLS 1.3 list,
// the rest to its TLS 1.2 list. A name OpenSSL does not know is refused by name.
void set_cipher_suites(SSL_CTX* ctx, const std::vector<std::string>& names) {
  if (names.empty()) return;
  // Every suite this OpenSSL offers, by both names.
  std::map<std::string, std::pair<std::string, bool>, std::less<>> known;  // name -> OpenSSL name, TLS 1.3
  {
    SSL_CTX* all = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_cipher_list(all, "ALL:@SECLEVEL=0");
    SSL* ssl = SSL_new(all);
    STACK_OF(SSL_CIPHER)* list = SSL_get1_supported_ciphers(ssl);
    for (int i = 0; list && i < sk_SSL_CIPHER_num(list); ++i) {
      const SSL_CIPHER* c = sk_SSL_CIPHER_value(list, i);
      const bool v13 = std::strcmp(SSL_CIPHER_get_version(c), "TLSv1.3") == 0;
      const std::string openssl = SSL_CIPHER_get_name(c);
      known[openssl] = {openssl, v13};
      if (const char* standard = SSL_CIPHER_standard_name(c)) known[standard] = {openssl, v13};
    }
    sk_SSL_CIPHER_free(list);
    SSL_free(ssl);
    SSL_CTX_free(all);
  }
  std::string v12, v13;
  for (const auto& n : names) {
    const auto it = known.find(n);
    if (it == known.end()) invalid(fmt::format("ssl.cipher.suites: unknown cipher suite '{}'", n));
    auto& out = it->second.second ? v13 : v12;
    if (!out.empty()) out += ':';
    out += it->second.first;
  }
  // Each version's list changes only when the key names suites of that version (OpenSSL keeps
  // one list per version); restrict the versions with ssl.enabled.protocols.
  if (!v12.empty() && SSL_CTX_set_cipher_list(ctx, v12.c_str()) != 1)
    invalid("ssl.cipher.suites: OpenSSL refused the list " + v12);
  if (!v13.empty() && SSL_CTX_set_ciphersuites(ctx, v13.c_str()) != 1)
    invalid("ssl.cipher.suites: OpenSSL refused the TLS 1.3 list " + v13);
}

std::shared_ptr<ssl::context> make_tls_context(const Config& cfg) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  set_protocols(ctx->native_handle(), cfg.get_list("ssl.enabled.protocols"));
  set_cipher_suites(ctx->native_handle(), cfg.get_list("ssl.cipher.suites"));
  // enable.ssl.certificate.verification=false (librdkafka's key): any certificate is accepted.
  ctx->set_verify_mode(cfg.get_bool("enable.ssl.certificate.verification") ? ssl::verify_peer
                                                                           : ssl::verify_none);
  const std::string ca_pem = cfg.get("ssl.ca.pem");
  const std::string ca = cfg.get("ssl.ca.location");
  const std::string truststore = cfg.get("ssl.truststore.location");
  if (!truststore.empty() && (!ca_pem.empty() || !ca.empty())) {
    invalid(fmt::format("ssl.truststore.location and {} both name the trusted CAs: set one",
                        ca_pem.empty() ? "ssl.ca.location" : "ssl.ca.pem (or ssl.truststore.certificates)"));
  }
  if (!truststore.empty() && cfg.get("ssl.truststore.type") == "PEM") {
    load("ssl.truststore.location", "the CA file '" + truststore + "'",
         [&] { ctx->load_verify_file(truststore); });
  } else if (!truststore.empty()) {
    const store_password password{cfg.get("ssl.truststore.password")};
    const auto store =
        read_pkcs12("ssl.truststore.location", truststore, "ssl.truststore.password", password.value,
                    /*certificates_only=*/true);
    X509_STORE* trusted = SSL_CTX_get_cert_store(ctx->native_handle());
    int added = 0;
    const auto add = [&](X509* cert) {
      if (X509_STORE_add_cert(trusted, cert) != 1) {
        ERR_clear_error();  // a duplicate
      } else {
        ++added;
      }
    };
    if (store.cert) add(store.cert.get());
    for (int i = 0; store.others && i < sk_X509_num(store.others.get()); ++i)
      add(sk_X509_value(store.others.get(), i));
    if (added == 0) invalid(fmt::format("ssl.truststore.location: '{}' holds no certificate", truststore));
  } else if (!ca_pem.empty()) {
    load("ssl.ca.pem", "the CA certificates", [&] { ctx->add_certificate_authority(boost::asio::buffer(ca_pem)); });
  } else if (!ca.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(ca, ec)) {
      load("ssl.ca.location", "the CA directory '" + ca + "'", [&] { ctx->add_verify_path(ca); });
    } else {
      load("ssl.ca.location", "the CA file '" + ca + "'", [&] { ctx->load_verify_file(ca); });
    }
  } else {
    load("ssl.ca.location", "the system trust store", [&] { ctx->set_default_verify_paths(); });
  }
  // The passphrase goes to OpenSSL through our own callback, never its default one (which
  // prompts on the terminal): without ssl.key.password an encrypted key is refused. It is
  // wiped once the key is loaded.
  key_passphrase passphrase{cfg.get("ssl.key.password")};
  SSL_CTX_set_default_passwd_cb(ctx->native_handle(), &key_passphrase::callback);
  SSL_CTX_set_default_passwd_cb_userdata(ctx->native_handle(), &passphrase);
  struct forget {
    SSL_CTX* ctx;
    ~forget() { SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr); }
  } forget_passphrase{ctx->native_handle()};
  const auto key_error = [&](const char* key, const std::string& what) {
    return [&passphrase, key, what](const std::string& reason) {
      if (passphrase.asked && passphrase.value.empty()) {
        return fmt::format("{}: {} is encrypted and ssl.key.password is not set", key, what);
      }
      return fmt::format("{}: cannot load {} (wrong ssl.key.password?) ({})", key, what, reason);
    };
  };
  const std::string cert = cfg.get("ssl.certificate.location");
  const std::string cert_pem = cfg.get("ssl.certificate.pem");
  const std::string key = cfg.get("ssl.key.location");
  const std::string key_pem = cfg.get("ssl.key.pem");
  const std::string keystore = cfg.get("ssl.keystore.location");
  if (!keystore.empty()) {
    if (!cert.empty() || !cert_pem.empty() || !key.empty() || !key_pem.empty()) {
      invalid(
          "ssl.keystore.location and ssl.certificate.* / ssl.key.location / ssl.key.pem (or "
          "ssl.keystore.certificate.chain / ssl.keystore.key) both name the client identity: set one");
    }
    if (cfg.get("ssl.keystore.type") == "PEM") {
      // KIP-651: one PEM file with the certificate chain and the key (encrypted: ssl.key.password).
      load("ssl.keystore.location", "the client certificate in '" + keystore + "'",
           [&] { ctx->use_certificate_chain_file(keystore); });
      load_with(key_error("ssl.keystore.location", "the client key in '" + keystore + "'"),
                [&] { ctx->use_private_key_file(keystore, ssl::context::pem); });
    } else {
      const store_password password{cfg.get("ssl.keystore.password")};
      const auto store =
          read_pkcs12("ssl.keystore.location", keystore, "ssl.keystore.password", password.value,
                      /*certificates_only=*/false);
      if (!store.cert || !store.key) {
        invalid(fmt::format("ssl.keystore.location: '{}' holds no {}", keystore,
                            store.cert ? "private key" : "certificate with its private key"));
      }
      SSL_CTX* native = ctx->native_handle();
      if (SSL_CTX_use_certificate(native, store.cert.get()) != 1 ||
          SSL_CTX_use_PrivateKey(native, store.key.get()) != 1) {
        ERR_clear_error();
        invalid(fmt::format("ssl.keystore.location: cannot use the certificate and key of '{}'", keystore));
      }
      for (int i = 0; store.others && i < sk_X509_num(store.others.get()); ++i) {
        if (SSL_CTX_add1_chain_cert(native, sk_X509_value(store.others.get(), i)) != 1) {
          ERR_clear_error();
          invalid(fmt::format("ssl.keystore.location: cannot use the certificate chain of '{}'", keystore));
        }
      }
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      invalid("ssl.keystore.location: the client key does not belong to the client certificate");
    }
    return ctx;
  }
  if (!cert_pem.empty()) {
    load("ssl.certificate.pem", "the client certificate",
         [&] { ctx->use_certificate_chain(boost::asio::buffer(cert_pem)); });
  } else if (!cert.empty()) {
    load("ssl.certificate.location", "the client certificate '" + cert + "'",
         [&] { ctx->use_certificate_chain_file(cert); });
  }
  if (!key_pem.empty()) {
    load_with(key_error("ssl.key.pem", "the client key"),
              [&] { ctx->use_private_key(boost::asio::buffer(key_pem), ssl::context::pem); });
  } else if (!key.empty()) {
    load_with(key_error("ssl.key.location", "the client key '" + key + "'"),
              [&] { ctx->use_private_key_file(key, ssl::context::pem); });
  }
  const bool has_cert = !cert.empty() || !cert_pem.empty();
  const bool has_key = !key.empty() || !key_pem.empty();
  if (has_cert != has_key) {
    invalid(has_cert ? "ssl.certificate.location: a client certificate needs its key (ssl.key.location or ssl.key.pem)"
                     : "ssl.key.location: a client key needs its certificate (ssl.certificate.location or "
                       "ssl.certificate.pem)");
  }
  if (has_cert && SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    invalid("ssl.key.location: the client key does not belong to the client certificate");
  }
  return ctx;
}

security::oauth_token from_public(const OAuthBearerToken& t) {
  security::oauth_token o;
  o.value = t.value;
  o.expires_at = t.expires_at;
  o.principal = t.principal;
  o.extensions = t.extensions;
  return o;
}

// OAUTHBEARER: where tokens come from.
token_cache::fetcher make_token_fetcher(const Config& cfg, const security::jaas_config* jaas,
                                        std::map<std::string, std::string> extensions) {
  const auto with_extensions = [extensions](security::oauth_token t) {
    for (const auto& [k, v] : extensions) t.extensions.emplace(k, v);
    return t;
  };
  if (cfg.get("sasl.oauthbearer.method") == "oidc") {
    oidc_options o;
    o.url = cfg.get("sasl.oauthbearer.token.endpoint.url");
    o.client_id = cfg.get("sasl.oauthbearer.client.id");
    o.client_secret = cfg.get("sasl.oauthbearer.client.secret");
    o.scope = cfg.get("sasl.oauthbearer.scope");
    if (jaas != nullptr) {  // Java's OAuthBearerLoginModule options
      const auto opt = [&](const char* name, std::string& into) {
        if (auto it = jaas->options.find(name); into.empty() && it != jaas->options.end()) into = it->second;
      };
      opt("clientId", o.client_id);
      opt("clientSecret", o.client_secret);
      opt("scope", o.scope);
    }
    std::string host, port, target, why;
    if (!security::parse_https_url(o.url, host, port, target, why)) invalid(why);
    if (o.client_id.empty() || o.client_secret.empty()) {
      invalid("sasl.oauthbearer.method=oidc needs sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret");
    }
    o.timeout = cfg.get_ms("request.timeout.ms");
    o.tls = std::make_shared<ssl::context>(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(o.tls->native_handle(), TLS1_2_VERSION);
    o.tls->set_verify_mode(ssl::verify_peer);
    const std::string ca = cfg.get("https.ca.location");
    if (ca.empty()) {
      load("https.ca.location", "the system trust store", [&] { o.tls->set_default_verify_paths(); });
    } else {
      load("https.ca.location", "the CA file '" + ca + "'", [&] { o.tls->load_verify_file(ca); });
    }
    return [oidc = make_oidc_fetcher(std::move(o)), with_extensions](boost::asio::io_context& io,
                                                                      const token_cache::fetched& done) {
      oidc(io, [done, with_extensions](token_cache::fetch_result r) {
        if (r.error.empty()) r.token = with_extensions(std::move(r.token));
        done(std::move(r));
      });
    };
  }
  if (const auto* provider = cfg.oauthbearer_token_provider()) {
    return [p = *provider, with_extensions](boost::asio::io_context&, const token_cache::fetched& done) {
      token_cache::fetch_result r;
      try {
        r.token = with_extensions(from_public(p()));
      } catch (const std::exception& e) {
        r.error = std::string("the OAUTHBEARER token provider failed: ") + e.what();
        done(std::move(r));
        return;
      }
      if (r.token.value.empty()) r.error = "the OAUTHBEARER token provider returned an empty token";
      done(std::move(r));
    };
  }
  security::unsecured_token_config unsecured;
  std::string why;
  if (!cfg.get("sasl.oauthbearer.config").empty()) {
    if (!security::parse_unsecured_config(cfg.get("sasl.oauthbearer.config"), unsecured, why)) invalid(why);
  } else if (jaas != nullptr && jaas->options.count("unsecuredLoginStringClaim_sub") != 0) {
    // Java's unsecured login module options.
    unsecured.principal = jaas->options.at("unsecuredLoginStringClaim_sub");
    if (auto it = jaas->options.find("unsecuredLoginListClaim_scope"); it != jaas->options.end()) {
      unsecured.scope = it->second;
    }
    if (auto it = jaas->options.find("unsecuredLoginLifetimeSeconds"); it != jaas->options.end()) {
      try {
        unsecured.life_seconds = std::stoll(it->second);
      } catch (const std::exception&) {
        invalid("sasl.jaas.config: unsecuredLoginLifetimeSeconds is not a number");
      }
      if (unsecured.life_seconds <= 0 || unsecured.life_seconds > 10LL * 366 * 24 * 3600) {
        invalid("sasl.jaas.config: unsecuredLoginLifetimeSeconds must be between 1 s and ten years");
      }
    }
  } else {
    invalid("sasl.mechanism=OAUTHBEARER needs a token: a token provider (Config::set_oauthbearer_token_provider), "
            "sasl.oauthbearer.method=oidc, or an unsecured token for tests (sasl.oauthbearer.config=principal=NAME)");
  }
  return [unsecured, with_extensions](boost::asio::io_context&, const token_cache::fetched& done) {
    token_cache::fetch_result r;
    r.token = with_extensions(security::make_unsecured_token(unsecured, std::chrono::system_clock::now()));
    done(std::move(r));
  };
}

}  // namespace

std::string configure_identity_check(SSL* ssl, const std::string& host, bool verify) {
  // Every failure is an error: a check that silently does not happen accepts any certificate
  // the trust store accepts.
  if (host.empty()) return "the broker's address is an empty host name: its certificate cannot be checked";
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  const bool ip = !ec;
  if (!ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {  // SNI
    ERR_clear_error();
    return fmt::format("cannot send the host name '{}' in the TLS handshake (SNI)", kgroup::detail::escape_nonprintable(host));
  }
  if (!verify) return {};
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  // OpenSSL takes an IP literal without a zone id ("fe80::1%eth0" has one) and a host name
  // without NUL bytes; anything else is refused here.
  const bool ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1
                     : host.find('\0') == std::string::npos && X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) == 1;
  if (!ok) {
    ERR_clear_error();
    return fmt::format("cannot check the certificate against the address '{}' (an IPv6 address with a zone id, or a "
                       "name OpenSSL cannot match); connect by a host name the certificate names",
                       kgroup::detail::escape_nonprintable(host));
  }
  return {};
}

void token_cache::get(boost::asio::io_context& io, fetch_done done) {
  const auto now = now_();
  if (token_ && now < refresh_at_) {
    done({}, false, *token_);
    return;
  }
  if (!fetching_ && now < retry_at_) {
    // A failed attempt asked for a pause (Retry-After or the backoff): the identity provider is
    // not asked again before it ends, however many connections ask.
    if (token_ && now < token_->expires_at) {
      done({}, false, *token_);
    } else {
      done(last_error_, last_permanent_, {});
    }
    return;
  }
  waiting_.push_back(std::move(done));
  if (fetching_) return;
  fetching_ = true;
  fetch_(io, [this, keep = shared_from_this()](fetch_result r) {
    fetching_ = false;
    const auto now = now_();
    if (r.error.empty() && !security::check_oauthbearer_token(r.token, r.error)) r.permanent = false;
    if (r.error.empty()) {
      const security::oauth_token& token = r.token;
      if (token.expires_at <= now) {
        logger()->warn("OAUTHBEARER: the token for '{}' has already expired; brokers will refuse it", token.principal);
      }
      static thread_local std::mt19937 rng{std::random_device{}()};
      if (token_) OPENSSL_cleanse(token_->value.data(), token_->value.size());
      token_ = token;
      refresh_at_ = security::refresh_time(now, token.expires_at, factor_,
                                           std::uniform_real_distribution<double>(0, 1)(rng));
      retry_at_ = {};
      backoff_.reset();
      logger()->info("OAUTHBEARER: new token for '{}', valid for {} s", token.principal,
                     std::chrono::duration_cast<std::chrono::seconds>(token.expires_at - now).count());
    } else {
      // The next attempt waits for the provider's Retry-After (at most max_retry_after) and at
      // least the backoff (sasl.login.retry.backoff.ms's defaults, 100 ms doubling to 10 s).
      auto wait = backoff_.next();
      if (r.retry_after.count() >= 0) wait = std::max(wait, std::min(r.retry_after, max_retry_after));
      retry_at_ = now + wait;
      last_error_ = r.error;
      last_permanent_ = r.permanent;
      if (token_ && now < token_->expires_at) {
        // Keep what works: connections go on with the current token until it expires.
        logger()->warn("OAUTHBEARER: refreshing the token failed ({}); the current token for '{}' stays in use (it "
                       "expires in {} s); next attempt in {} ms",
                       r.error, token_->principal,
                       std::chrono::duration_cast<std::chrono::seconds>(token_->expires_at - now).count(),
                       wait.count());
      } else {
        logger()->error("OAUTHBEARER: {}{}", r.error,
                        r.permanent ? std::string() : fmt::format(" (next attempt in {} ms)", wait.count()));
      }
    }
    const bool have = token_ && (r.error.empty() || now < token_->expires_at);
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting) {
      if (have) {
        w({}, false, *token_);
      } else {
        w(r.error, r.permanent, security::oauth_token{});
      }
    }
  });
}

token_cache::~token_cache() {
  if (token_) OPENSSL_cleanse(token_->value.data(), token_->value.size());
}

transport_security::~transport_security() {
  OPENSSL_cleanse(credentials.password.data(), credentials.password.size());
}

namespace {

// GSSAPI: librdkafka's sasl.kerberos.principal and sasl.kerberos.keytab, else Java's
// Krb5LoginModule line (useKeyTab=true keyTab="..." principal="..."; useTicketCache=true or no
// keytab: the ticket cache); sasl.kerberos.service.name, else the line's serviceName, else "kafka".
security::kerberos_settings kerberos_settings_of(const Config& cfg, const security::jaas_config* jaas) {
  security::kerberos_settings k;
  k.service_name = cfg.get("sasl.kerberos.service.name");
  k.principal = cfg.get("sasl.kerberos.principal");
  k.keytab = cfg.get("sasl.kerberos.keytab");
  if (jaas != nullptr) {
    const std::string& module = jaas->login_module;
    if (module != "com.sun.security.auth.module.Krb5LoginModule" &&
        module != "com.ibm.security.auth.module.Krb5LoginModule") {
      invalid(
          "sasl.jaas.config: sasl.mechanism=GSSAPI needs com.sun.security.auth.module.Krb5LoginModule, not " +
          module);
    }
    const auto option = [&](const char* key) -> std::string {
      const auto it = jaas->options.find(key);
      return it == jaas->options.end() ? std::string() : it->second;
    };
    const auto yes = [](const std::string& v) { return v == "true" || v == "TRUE" || v == "True"; };
    if (!cfg.is_set("sasl.kerberos.service.name") && !option("serviceName").empty()) {
      k.service_name = option("serviceName");
    }
    if (k.principal.empty()) k.principal = option("principal");
    if (k.keytab.empty() && yes(option("useKeyTab"))) {
      k.keytab = option("keyTab");
      if (k.keytab.empty())
        invalid("sasl.jaas.config: Krb5LoginModule with useKeyTab=true needs keyTab=\"<file>\"");
    }
  }
  return k;
}

}  // namespace

std::shared_ptr<transport_security> make_transport_security(const Config& cfg) {
  const std::string protocol = cfg.get("security.protocol");
  if (protocol == "PLAINTEXT") return nullptr;
  auto s = std::make_shared<transport_security>();
  s->protocol = protocol;
  if (protocol == "SSL" || protocol == "SASL_SSL") {
    s->tls = make_tls_context(cfg);
    const bool verify_certificates = cfg.get_bool("enable.ssl.certificate.verification");
    s->verify_hostname = verify_certificates && cfg.get("ssl.endpoint.identification.algorithm") == "https";
    if (!verify_certificates) {
      logger()->warn(
          "enable.ssl.certificate.verification=false: brokers' certificates are not verified at all, so "
          "any server can pose as a broker (a machine in the middle can read and change everything); "
          "for tests only");
    } else if (!s->verify_hostname) {
      logger()->warn("ssl.endpoint.identification.algorithm=none: brokers' certificates are not checked against their "
                     "addresses, so any certificate the trusted CAs signed is accepted (a machine in the middle "
                     "with one can read and change everything)");
    }
  }
  if (protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL") {
    s->sasl = true;
    auto& c = s->credentials;
    c.mechanism = cfg.get("sasl.mechanism");
    std::string why;
    if (!security::sasl_session::supported(c.mechanism, why)) invalid(why);
    std::optional<security::jaas_config> jaas;
    if (!cfg.get("sasl.jaas.config").empty()) {
      jaas.emplace();
      if (!security::parse_jaas(cfg.get("sasl.jaas.config"), *jaas, why)) invalid(why);
    }
    if (protocol == "SASL_PLAINTEXT" && (c.mechanism == "PLAIN" || c.mechanism == "OAUTHBEARER")) {
      logger()->warn("sasl.mechanism={} over security.protocol=SASL_PLAINTEXT: the {} crosses the network in "
                     "cleartext; use SASL_SSL",
                     c.mechanism, c.mechanism == "PLAIN" ? "password" : "token");
    }
    if (c.mechanism == "OAUTHBEARER") {
      std::map<std::string, std::string> extensions;
      if (!security::parse_extensions(cfg.get("sasl.oauthbearer.extensions"), extensions, why)) invalid(why);
      const double factor = std::stod(cfg.get("sasl.login.refresh.window.factor"));
      s->tokens = std::make_shared<token_cache>(make_token_fetcher(cfg, jaas ? &*jaas : nullptr, extensions), factor);
    } else if (c.mechanism == "GSSAPI") {
      s->kerberos = security::make_kerberos_login(kerberos_settings_of(cfg, jaas ? &*jaas : nullptr), why);
      if (!s->kerberos) invalid(why);
    } else {
      c.username = cfg.get("sasl.username");
      c.password = cfg.get("sasl.password");
      if (jaas && c.username.empty()) {
        if (auto it = jaas->options.find("username"); it != jaas->options.end()) c.username = it->second;
      }
      if (jaas && c.password.empty()) {
        if (auto it = jaas->options.find("password"); it != jaas->options.end()) c.password = it->second;
      }
      if (c.username.empty() || c.password.empty()) {
        invalid(fmt::format("sasl.mechanism={} needs sasl.username and sasl.password (or a sasl.jaas.config with "
                            "username and password)",
                            c.mechanism));
      }
    }
    if (jaas) {
      for (auto& [k, v] : jaas->options) OPENSSL_cleanse(v.data(), v.size());
    }
  }
  return s;
}

}  // namespace kgroup::net
