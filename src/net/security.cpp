#include "net/security.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <filesystem>
#include <random>

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

std::shared_ptr<ssl::context> make_tls_context(const Config& cfg) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(ssl::verify_peer);
  const std::string ca_pem = cfg.get("ssl.ca.pem");
  const std::string ca = cfg.get("ssl.ca.location");
  if (!ca_pem.empty()) {
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
  const std::string password = cfg.get("ssl.key.password");
  if (!password.empty()) {
    ctx->set_password_callback([password](std::size_t, ssl::context::password_purpose) { return password; });
  }
  const std::string cert = cfg.get("ssl.certificate.location");
  const std::string cert_pem = cfg.get("ssl.certificate.pem");
  const std::string key = cfg.get("ssl.key.location");
  const std::string key_pem = cfg.get("ssl.key.pem");
  if (!cert_pem.empty()) {
    load("ssl.certificate.pem", "the client certificate",
         [&] { ctx->use_certificate_chain(boost::asio::buffer(cert_pem)); });
  } else if (!cert.empty()) {
    load("ssl.certificate.location", "the client certificate '" + cert + "'",
         [&] { ctx->use_certificate_chain_file(cert); });
  }
  if (!key_pem.empty()) {
    load("ssl.key.pem", "the client key (wrong ssl.key.password?)",
         [&] { ctx->use_private_key(boost::asio::buffer(key_pem), ssl::context::pem); });
  } else if (!key.empty()) {
    load("ssl.key.location", "the client key '" + key + "' (wrong ssl.key.password?)",
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
                                                                      const token_cache::fetch_done& done) {
      oidc(io, [done, with_extensions](const std::string& err, bool permanent, const security::oauth_token& t) {
        done(err, permanent, err.empty() ? with_extensions(t) : t);
      });
    };
  }
  if (const auto* provider = cfg.oauthbearer_token_provider()) {
    return [p = *provider, with_extensions](boost::asio::io_context&, const token_cache::fetch_done& done) {
      security::oauth_token t;
      try {
        t = with_extensions(from_public(p()));
      } catch (const std::exception& e) {
        done(std::string("the OAUTHBEARER token provider failed: ") + e.what(), false, {});
        return;
      }
      if (t.value.empty()) {
        done("the OAUTHBEARER token provider returned an empty token", false, {});
        return;
      }
      done({}, false, t);
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
  return [unsecured, with_extensions](boost::asio::io_context&, const token_cache::fetch_done& done) {
    done({}, false, with_extensions(security::make_unsecured_token(unsecured, std::chrono::system_clock::now())));
  };
}

}  // namespace

void token_cache::get(boost::asio::io_context& io, fetch_done done) {
  const auto now = std::chrono::system_clock::now();
  if (token_ && now < refresh_at_) {
    done({}, false, *token_);
    return;
  }
  waiting_.push_back(std::move(done));
  if (fetching_) return;
  fetching_ = true;
  fetch_(io, [this, keep = shared_from_this()](const std::string& err, bool permanent,
                                               const security::oauth_token& token) {
    fetching_ = false;
    if (err.empty()) {
      ++fetches_;
      const auto now = std::chrono::system_clock::now();
      if (token.expires_at <= now) {
        logger()->warn("OAUTHBEARER: the token for '{}' has already expired; brokers will refuse it", token.principal);
      }
      static thread_local std::mt19937 rng{std::random_device{}()};
      token_ = token;
      refresh_at_ = security::refresh_time(now, token.expires_at, factor_,
                                           std::uniform_real_distribution<double>(0, 1)(rng));
      logger()->info("OAUTHBEARER: new token for '{}', valid for {} s", token.principal,
                     std::chrono::duration_cast<std::chrono::seconds>(token.expires_at - now).count());
    } else {
      logger()->error("OAUTHBEARER: {}", err);
    }
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting) w(err, permanent, err.empty() ? *token_ : security::oauth_token{});
  });
}

std::shared_ptr<transport_security> make_transport_security(const Config& cfg) {
  const std::string protocol = cfg.get("security.protocol");
  if (protocol == "PLAINTEXT") return nullptr;
  auto s = std::make_shared<transport_security>();
  s->protocol = protocol;
  if (protocol == "SSL" || protocol == "SASL_SSL") {
    s->tls = make_tls_context(cfg);
    s->verify_hostname = cfg.get("ssl.endpoint.identification.algorithm") == "https";
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
    if (c.mechanism == "OAUTHBEARER") {
      std::map<std::string, std::string> extensions;
      if (!security::parse_extensions(cfg.get("sasl.oauthbearer.extensions"), extensions, why)) invalid(why);
      const double factor = std::stod(cfg.get("sasl.login.refresh.window.factor"));
      s->tokens = std::make_shared<token_cache>(make_token_fetcher(cfg, jaas ? &*jaas : nullptr, extensions), factor);
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
  }
  return s;
}

}  // namespace kgroup::net
