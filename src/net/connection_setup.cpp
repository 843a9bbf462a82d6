#include "net/connection_setup.hpp"

#include <algorithm>
#include <utility>

#include "kgroup/error.hpp"
#include "kgroup/version.hpp"

namespace kgroup::net {

namespace {
constexpr std::int16_t unsupported_version_code = 35;
constexpr std::int16_t rebootstrap_required_code = 129;
}  // namespace

const char* to_string(setup_action::kind k) noexcept {
  using kd = setup_action::kind;
  switch (k) {
    case kd::none:
      return "none";
    case kd::send_api_versions:
      return "send_api_versions";
    case kd::get_token:
      return "get_token";
    case kd::send_sasl_handshake:
      return "send_sasl_handshake";
    case kd::send_sasl_authenticate:
      return "send_sasl_authenticate";
    case kd::ready:
      return "ready";
    case kd::reauthenticated:
      return "reauthenticated";
    case kd::undecodable:
      return "undecodable";
    case kd::fail:
      return "fail";
    case kd::fatal:
      return "fatal";
  }
  return "?";
}

const char* to_string(connection_setup::step s) noexcept {
  using st = connection_setup::step;
  switch (s) {
    case st::idle:
      return "idle";
    case st::api_versions:
      return "api_versions";
    case st::token:
      return "token";
    case st::sasl_handshake:
      return "sasl_handshake";
    case st::sasl_authenticate:
      return "sasl_authenticate";
    case st::done:
      return "done";
  }
  return "?";
}

connection_setup::connection_setup(connection_core& core, options o) : core_(core), opts_(o), rng_(o.seed) {}

setup_action connection_setup::connected() {
  sasl_.reset();
  reauth_ = false;
  core_.step(connection_state::handshaking);
  return send_api_versions(protocol::api_versions_request::highest_version);
}

void connection_setup::lost() noexcept {
  step_ = step::idle;
  sasl_.reset();
}

setup_action connection_setup::end(kind what, std::error_code ec, std::string message) {
  lost();
  setup_action a;
  a.what = what;
  a.error = ec;
  a.message = std::move(message);
  return a;
}

setup_action connection_setup::answer(time_point now, std::span<const std::uint8_t> body) {
  switch (step_) {
    case step::api_versions:
      return on_api_versions(body);
    case step::sasl_handshake:
      return on_handshake(body);
    case step::sasl_authenticate:
      return on_authenticate(now, body);
    case step::idle:
    case step::token:
    case step::done:
      break;
  }
  return {};  // nothing of ours is in flight: an answer to an exchange that ended
}

// ---- ApiVersions ----

setup_action connection_setup::send_api_versions(std::int16_t version) {
  step_ = step::api_versions;
  version_ = version;
  setup_action a;
  a.what = kind::send_api_versions;
  a.version = version;
  a.api_versions.client_software_name = "kgroup";
  a.api_versions.client_software_version = library_version();
  return a;
}

setup_action connection_setup::on_api_versions(std::span<const std::uint8_t> body) {
  const std::int16_t version = version_;
  protocol::reader peek(body);
  const std::int16_t err = peek.read_int16();
  if (!peek.ok()) return end(kind::undecodable, make_error_code(protocol::codec_errc::truncated), {});
  if (err == unsupported_version_code) {
    // The broker answered with its own range for ApiVersions: retry at once with the highest
    // version it supports. Real brokers write this answer in the v0 format; others use the
    // requested version's format, so both are tried (tolerating trailing bytes). When neither
    // carries a usable range, retry with v0, which every broker answers (as Java's NetworkClient
    // does): one more round trip at most, never one per version.
    if (version == 0) return end(kind::undecodable, make_error_code(client_errc::no_compatible_version), {});
    std::int16_t retry = 0;
    for (const std::int16_t layout : {std::int16_t{0}, version}) {
      protocol::api_versions_response advertised;
      std::size_t trailing = 0;
      if (protocol::decode(body, layout, advertised, &trailing)) continue;
      const auto k = std::find_if(advertised.api_keys.begin(), advertised.api_keys.end(), [](const auto& e) {
        return e.api_key == protocol::api_versions_request::api_key;
      });
      if (k != advertised.api_keys.end() && k->max_version >= 0 && k->max_version < version) {
        retry = k->max_version;
        break;
      }
    }
    auto a = send_api_versions(retry);
    a.note.refused_version = version;
    return a;
  }
  protocol::api_versions_response resp;
  std::size_t trailing = 0;
  if (auto dec = protocol::decode(body, version, resp, &trailing)) return end(kind::undecodable, dec, {});
  setup_action a;
  if (resp.error_code != 0) {
    // REBOOTSTRAP_REQUIRED (KIP-1102) keeps its code, so the driver tells the cluster (which may
    // rebootstrap) and the requests that waited see why.
    a = resp.error_code == rebootstrap_required_code
            ? end(kind::fail, make_error_code(kafka_errc::rebootstrap_required),
                  "ApiVersions: rebootstrap required")
            : end(kind::fail, make_error_code(client_errc::connection_failed), "ApiVersions error");
    a.note.api_versions_error = resp.error_code;
  } else {
    versions_.assign(resp);
    if (opts_.sasl) {
      a = begin_sasl(/*reauth=*/false);
    } else {
      step_ = step::done;
      core_.became_ready();
      a.what = kind::ready;
    }
    a.note.versions_at = version;
    a.note.apis = resp.api_keys.size();
  }
  a.note.trailing = trailing;
  return a;
}

// ---- SASL ----

setup_action connection_setup::reauthenticate() {
  if (step_ != step::done || !opts_.sasl) return {};
  core_.reauth_started();
  return begin_sasl(/*reauth=*/true);
}

setup_action connection_setup::begin_sasl(bool reauth) {
  reauth_ = reauth;
  if (!reauth) core_.step(connection_state::authenticating);
  std::int16_t v = 0;
  if (versions_.pick<protocol::sasl_authenticate_request>(v) ||
      versions_.pick<protocol::sasl_handshake_request>(v) || v < 1) {
    return end(
        kind::fatal, make_error_code(client_errc::no_compatible_version),
        "the broker does not offer SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 or later), which SASL "
        "needs; check security.protocol");
  }
  if (opts_.token_provider) {
    step_ = step::token;
    setup_action a;
    a.what = kind::get_token;
    return a;
  }
  if (auto failed = new_session(*opts_.sasl)) return std::move(*failed);
  return send_handshake();
}

std::optional<setup_action> connection_setup::new_session(security::sasl_credentials creds) {
  std::unique_ptr<security::gss_context> gss;
  if (creds.mechanism == "GSSAPI" && opts_.gss) gss = opts_.gss();
  sasl_ = std::make_unique<security::sasl_session>(std::move(creds), std::move(gss));
  std::string error;
  bool retriable = false;
  if (sasl_->prepare(error, retriable)) return std::nullopt;
  // GSSAPI without a ticket: an unreachable KDC is retried with the backoff; a refused principal
  // or key, a missing ticket cache, is not something retrying fixes.
  error +=
      "; check sasl.kerberos.principal, sasl.kerberos.keytab (or the ticket cache), "
      "sasl.kerberos.service.name and krb5.conf";
  if (retriable) return end(kind::fail, make_error_code(client_errc::connection_failed), error);
  return end(kind::fatal, make_error_code(kafka_errc::sasl_authentication_failed), error);
}

setup_action connection_setup::token(const std::string& error, bool permanent,
                                     const security::oauth_token& t) {
  if (step_ != step::token) return {};
  if (!error.empty() && permanent)
    return end(kind::fatal, make_error_code(kafka_errc::sasl_authentication_failed), error);
  if (!error.empty()) {
    // The provider may recover (a token endpoint that is down): retried with backoff. (The cache
    // hands out the current token while it is valid, so a failed refresh gets here only once no
    // valid token is left: a healthy connection is never torn down for it.)
    return end(kind::fail, make_error_code(client_errc::connection_failed), "no OAUTHBEARER token");
  }
  auto creds = *opts_.sasl;
  creds.token = t;
  if (auto failed = new_session(std::move(creds))) return std::move(*failed);
  return send_handshake();
}

setup_action connection_setup::send_handshake() {
  // SaslHandshake v1: the SASL tokens travel in SaslAuthenticate (v0's raw framing is not spoken).
  std::int16_t v = 0;
  (void)versions_.pick<protocol::sasl_handshake_request>(v);
  step_ = step::sasl_handshake;
  version_ = std::min<std::int16_t>(v, 1);
  setup_action a;
  a.what = kind::send_sasl_handshake;
  a.version = version_;
  a.handshake = sasl_->handshake();
  return a;
}

setup_action connection_setup::on_handshake(std::span<const std::uint8_t> body) {
  protocol::sasl_handshake_response r;
  std::size_t trailing = 0;
  if (auto dec = protocol::decode(body, version_, r, &trailing)) return end(kind::undecodable, dec, {});
  std::string error;
  setup_action a;
  if (!sasl_->on_handshake(r, error)) {
    const auto code = r.error_code != 0 ? make_error_code(static_cast<kafka_errc>(r.error_code))
                                        : make_error_code(kafka_errc::unsupported_sasl_mechanism);
    a = end(kind::fatal, code, error + "; check sasl.mechanism");
  } else {
    a = send_authenticate();
  }
  a.note.trailing = trailing;
  return a;
}

setup_action connection_setup::send_authenticate() {
  std::int16_t v = 0;
  (void)versions_.pick<protocol::sasl_authenticate_request>(v);
  step_ = step::sasl_authenticate;
  version_ = v;
  setup_action a;
  a.what = kind::send_sasl_authenticate;
  a.version = v;
  a.authenticate.auth_bytes = sasl_->next();
  return a;
}

setup_action connection_setup::on_authenticate(time_point now, std::span<const std::uint8_t> body) {
  protocol::sasl_authenticate_response r;
  std::size_t trailing = 0;
  if (auto dec = protocol::decode(body, version_, r, &trailing)) return end(kind::undecodable, dec, {});
  std::string error;
  setup_action a;
  switch (sasl_->on_authenticate(r, error)) {
    case security::sasl_session::status::more:
      a = send_authenticate();
      break;
    case security::sasl_session::status::failed: {
      const auto code = r.error_code != 0 ? make_error_code(static_cast<kafka_errc>(r.error_code))
                                          : make_error_code(kafka_errc::sasl_authentication_failed);
      const std::string& m = opts_.sasl->mechanism;
      const char* key = m == "OAUTHBEARER" ? "the OAUTHBEARER token"
                        : m == "GSSAPI"    ? "sasl.kerberos.principal, sasl.kerberos.keytab and "
                                             "sasl.kerberos.service.name (the broker's Kerberos service)"
                                           : "sasl.username and sasl.password";
      a = end(kind::fatal, code, error + "; check " + key);
      break;
    }
    case security::sasl_session::status::done: {
      const std::int64_t lifetime = sasl_->session_lifetime_ms();
      sasl_.reset();
      std::optional<std::chrono::milliseconds> reauth_in;
      if (lifetime > 0) {
        // KIP-368: re-authenticate at 85-95% of the session, as the Java client does.
        const double at = std::uniform_real_distribution<double>(0.85, 0.95)(rng_);
        reauth_in = security::reauthentication_delay(lifetime, at);
      }
      core_.authenticated(now, reauth_in);
      step_ = step::done;
      if (reauth_) {
        a.what = kind::reauthenticated;
      } else {
        core_.became_ready();
        a.what = kind::ready;
      }
      a.note.authenticated = true;
      a.note.reauth = reauth_;
      a.note.session_lifetime_ms = lifetime;
      break;
    }
  }
  a.note.trailing = trailing;
  return a;
}

}  // namespace kgroup::net
