#include "security/sasl.hpp"

#include <openssl/crypto.h>

#include <algorithm>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"

namespace kgroup::security {

namespace {

protocol::bytes to_bytes(const std::string& s) {
  return protocol::bytes(s.begin(), s.end());
}

std::string to_string(const protocol::bytes& b) {
  return std::string(b.begin(), b.end());
}

// A broker (or a proxy) may echo what it got: its messages are scrubbed of the secrets.
void scrub(std::string& text, const std::string& secret) {
  if (secret.empty()) return;
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[redacted]");
    at += 10;
  }
}

void wipe(std::string& s) {
  OPENSSL_cleanse(s.data(), s.size());
}

}  // namespace

std::chrono::milliseconds reauthentication_delay(std::int64_t session_lifetime_ms, double fraction) {
  // Computed in double and capped before converting: a broker's 2^63-1 must not overflow the
  // clock (a session longer than ten years is re-authenticated after ten years), and a tiny
  // lifetime must not make a re-authentication loop (at most two per second per connection;
  // a broker that really ends sessions that soon closes the connection, which reconnects with
  // backoff).
  constexpr double ten_years_ms = 10.0 * 366 * 24 * 3600 * 1000;
  constexpr double min_ms = 500;
  const double at = static_cast<double>(session_lifetime_ms) * std::clamp(fraction, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::clamp(at, min_ms, ten_years_ms)));
}

sasl_session::~sasl_session() {
  wipe(creds_.password);
  wipe(creds_.token.value);
}

std::string sasl_session::peer_text(std::string text) const {
  // Scrubbed of the secrets first (a broker may echo them), then escaped: the escaped form of a
  // secret with control characters would not be found.
  scrub(text, creds_.password);
  scrub(text, creds_.token.value);
  return detail::escape_nonprintable(text);
}

sasl_session::status sasl_session::on_authenticate(const protocol::sasl_authenticate_response& r,
                                                   std::string& error) {
  const status st = step(r, error);
  if (st == status::failed) {
    scrub(error, creds_.password);
    scrub(error, creds_.token.value);
  }
  return st;
}

sasl_session::sasl_session(sasl_credentials creds, std::unique_ptr<gss_context> gss)
    : creds_(std::move(creds)), gss_(std::move(gss)) {
  scram_hash h{};
  if (scram_hash_from_mechanism(creds_.mechanism, h))
    scram_ = std::make_unique<scram_client>(h, creds_.username, creds_.password, creds_.scram_nonce);
}

bool sasl_session::supported(const std::string& mechanism, std::string& why) {
  if (mechanism == "PLAIN" || mechanism == "SCRAM-SHA-256" || mechanism == "SCRAM-SHA-512" ||
      mechanism == "OAUTHBEARER")
    return true;
  if (mechanism == "GSSAPI") {
    if (kerberos_available()) return true;
    (void)make_kerberos_login({}, why);  // says why
    return false;
  }
  why = "sasl.mechanism '" + mechanism +
        "' is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER" +
        (kerberos_available() ? ", GSSAPI)" : ")");
  return false;
}

bool sasl_session::prepare(std::string& error, bool& retriable) {
  retriable = false;
  if (creds_.mechanism != "GSSAPI") return true;
  if (!gss_) {
    error = "SASL GSSAPI: no Kerberos login";
    return false;
  }
  gssapi_ = std::make_unique<gssapi_client>(std::move(gss_));
  if (gssapi_->start(pending_, error) == gssapi_client::status::failed) {
    retriable = gssapi_->retriable();
    return false;
  }
  return true;
}

protocol::sasl_handshake_request sasl_session::handshake() const {
  protocol::sasl_handshake_request r;
  r.mechanism = creds_.mechanism;
  return r;
}

bool sasl_session::on_handshake(const protocol::sasl_handshake_response& r, std::string& error) {
  if (r.error_code == 0) return true;
  std::string list;
  for (const auto& m : r.mechanisms) list += (list.empty() ? "" : ", ") + peer_text(m);
  error = "the broker does not enable sasl.mechanism " + creds_.mechanism + " (" + kafka_error_name(r.error_code) +
          "); it offers: " + (list.empty() ? "none" : list);
  return false;
}

protocol::bytes sasl_session::next() {
  ++round_;
  if (gssapi_) return std::move(pending_);
  if (creds_.mechanism == "OAUTHBEARER") {
    // After the server's error challenge, RFC 7628 3.2.3: a single 0x01 ends the exchange.
    return round_ == 1 ? to_bytes(oauthbearer_client_message(creds_.token)) : protocol::bytes{0x01};
  }
  if (!scram_) {
    // PLAIN (RFC 4616): authzid (empty), authcid, password, NUL-separated.
    std::string msg;
    msg += '\0';
    msg += creds_.username;
    msg += '\0';
    msg += creds_.password;
    auto out = to_bytes(msg);
    wipe(msg);
    return out;
  }
  if (round_ == 1) return to_bytes(scram_->client_first());
  return pending_;  // client-final, computed from the server-first answer
}

sasl_session::status sasl_session::step(const protocol::sasl_authenticate_response& r, std::string& error) {
  if (r.error_code != 0) {
    error = "SASL " + creds_.mechanism + " authentication failed (" + kafka_error_name(r.error_code) + ")";
    if (r.error_message && !r.error_message->empty()) error += ": " + peer_text(*r.error_message);
    if (!oauth_challenge_.empty()) error += " (the broker's challenge: " + oauth_challenge_ + ")";
    return status::failed;
  }
  session_lifetime_ms_ = r.session_lifetime_ms;
  if (gssapi_) {
    switch (gssapi_->on_server(r.auth_bytes, pending_, error)) {
      case gssapi_client::status::send:
        return status::more;
      case gssapi_client::status::done:
        return status::done;
      case gssapi_client::status::failed:
        return status::failed;
    }
  }
  if (creds_.mechanism == "OAUTHBEARER") {
    if (round_ == 1 && !r.auth_bytes.empty()) {
      // An error challenge (RFC 7628 3.2.2: JSON with status, scope): the broker wants the
      // client's 0x01, then answers SASL_AUTHENTICATION_FAILED.
      oauth_challenge_ = peer_text(to_string(r.auth_bytes).substr(0, 200));
      return status::more;
    }
    if (round_ > 1) {
      error = "SASL OAUTHBEARER authentication failed: the broker's challenge: " + oauth_challenge_;
      return status::failed;
    }
    return status::done;
  }
  if (!scram_) return status::done;
  if (round_ == 1) {
    // The answer to client-first is server-first; the next request carries client-final.
    std::string final_msg;
    if (!scram_->client_final(to_string(r.auth_bytes), final_msg, error)) {
      error = peer_text(error);
      return status::failed;
    }
    pending_ = to_bytes(final_msg);
    return status::more;
  }
  if (!scram_->verify_server_final(to_string(r.auth_bytes), error)) {
    error = peer_text(error);
    return status::failed;
  }
  return status::done;
}

}  // namespace kgroup::security
