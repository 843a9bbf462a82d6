// The SASL exchange of a connection (SaslHandshake, then SaslAuthenticate rounds through the
// SASL session of src/security), at setup and for KIP-368 re-authentication; its timing is the
// connection core's (connection_core.hpp).
#include <optional>
#include <random>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "net/connection.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

void connection::start_sasl(bool reauth) {
  if (reauth) {
    core_.reauth_started();
  } else {
    core_.step(state::authenticating);
  }
  const auto& sec = *opts_.security;
  std::int16_t v = 0;
  if (versions_.pick<protocol::sasl_authenticate_request>(v) ||
      versions_.pick<protocol::sasl_handshake_request>(v) || v < 1) {
    fatal(make_error_code(client_errc::no_compatible_version),
          "the broker does not offer SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 or later), which SASL "
          "needs; "
          "check security.protocol");
    return;
  }
  if (!sec.tokens) {
    sasl_ = std::make_unique<security::sasl_session>(sec.credentials);
    sasl_handshake(reauth);
    return;
  }
  sec.tokens->get(io_, [self = shared_from_this(), gen = generation_, reauth](
                           const std::string& err, bool permanent, const security::oauth_token& token) {
    if (gen != self->generation_ || self->core_.current() == state::closed) return;
    if (!err.empty() && permanent) {
      self->fatal(make_error_code(kafka_errc::sasl_authentication_failed), err);
      return;
    }
    if (!err.empty()) {
      // The provider may recover (a token endpoint that is down): retried with backoff. (The
      // cache hands out the current token while it is valid, so a failed refresh gets here only
      // once no valid token is left: a healthy connection is never torn down for it.)
      self->fail(make_error_code(client_errc::connection_failed), "no OAUTHBEARER token");
      return;
    }
    auto creds = self->opts_.security->credentials;
    creds.token = token;
    self->sasl_ = std::make_unique<security::sasl_session>(std::move(creds));
    self->sasl_handshake(reauth);
  });
}

void connection::sasl_handshake(bool reauth) {
  send_now(
      sasl_->handshake(), [](protocol::sasl_handshake_request&, std::int16_t) {},
      [self = shared_from_this(), gen = generation_, reauth](
          std::error_code ec, const protocol::sasl_handshake_response& r, const response_frame&) {
        if (ec || gen != self->generation_) return;  // a lost connection is handled by fail()
        std::string error;
        if (!self->sasl_->on_handshake(r, error)) {
          const auto code = r.error_code != 0 ? make_error_code(static_cast<kafka_errc>(r.error_code))
                                              : make_error_code(kafka_errc::unsupported_sasl_mechanism);
          asio::post(self->io_, [self, gen, code, error = error + "; check sasl.mechanism"] {
            if (gen == self->generation_) self->fatal(code, error);
          });
          return;
        }
        self->sasl_authenticate(reauth);
      },
      {}, /*max_version=*/1);
}

void connection::sasl_authenticate(bool reauth) {
  protocol::sasl_authenticate_request req;
  req.auth_bytes = sasl_->next();
  send_now(
      std::move(req), [](protocol::sasl_authenticate_request&, std::int16_t) {},
      [self = shared_from_this(), gen = generation_, reauth](
          std::error_code ec, const protocol::sasl_authenticate_response& r, const response_frame&) {
        if (ec || gen != self->generation_) return;
        std::string error;
        switch (self->sasl_->on_authenticate(r, error)) {
          case security::sasl_session::status::more:
            self->sasl_authenticate(reauth);
            return;
          case security::sasl_session::status::done:
            self->sasl_done(reauth);
            return;
          case security::sasl_session::status::failed: {
            const auto code = r.error_code != 0 ? make_error_code(static_cast<kafka_errc>(r.error_code))
                                                : make_error_code(kafka_errc::sasl_authentication_failed);
            const char* key = self->opts_.security->credentials.mechanism == "OAUTHBEARER"
                                  ? "the OAUTHBEARER token"
                                  : "sasl.username and sasl.password";
            asio::post(self->io_, [self, gen, code, error = fmt::format("{}; check {}", error, key)] {
              if (gen == self->generation_) self->fatal(code, error);
            });
            return;
          }
        }
      },
      {}, /*max_version=*/-1);
}

void connection::sasl_done(bool reauth) {
  const std::int64_t lifetime = sasl_->session_lifetime_ms();
  sasl_.reset();
  std::optional<std::chrono::milliseconds> reauth_in;
  if (lifetime > 0) {
    // KIP-368: re-authenticate at 85-95% of the session, as the Java client does.
    static thread_local std::mt19937 rng{std::random_device{}()};
    const double at = std::uniform_real_distribution<double>(0.85, 0.95)(rng);
    reauth_in = security::reauthentication_delay(lifetime, at);
  }
  core_.authenticated(clock::now(), reauth_in);
  if (opts_.wire) ++(reauth ? opts_.wire->reauthentications : opts_.wire->authentications);
  logger()->debug("broker {} ({}:{}): SASL {} {}authenticated{}", node_id_, host_, port_,
                  opts_.security->credentials.mechanism, reauth ? "re-" : "",
                  lifetime > 0 ? fmt::format(" for {} ms", lifetime) : std::string());
  if (!reauth) {
    become_ready();
    return;
  }
  arm_timer();
  flush_waiters({});
}

}  // namespace kgroup::net
