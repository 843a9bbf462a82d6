#include "security/gssapi.hpp"

#include <utility>

namespace kgroup::security {

gssapi_client::gssapi_client(std::unique_ptr<gss_context> gss, std::string authzid)
    : gss_(std::move(gss)), authzid_(std::move(authzid)) {}

gssapi_client::status gssapi_client::fail(std::string& error, std::string what, bool retriable) {
  state_ = state::failed;
  retriable_ = retriable;
  error = std::move(what);
  return status::failed;
}

gssapi_client::status gssapi_client::start(protocol::bytes& out, std::string& error) {
  if (state_ != state::initial) return fail(error, "SASL GSSAPI: the exchange was already started");
  if (!gss_) return fail(error, "SASL GSSAPI: no Kerberos context");
  gss_result r = gss_->init({});
  if (!r.ok)
    return fail(error, "SASL GSSAPI: cannot start a Kerberos security context: " + r.error, r.retriable);
  out = std::move(r.token);
  // (Kerberos always needs the server's AP-REP for mutual authentication; a mechanism done in one
  // token goes straight to the offer.)
  state_ = r.complete ? state::offer : state::context;
  return status::send;
}

gssapi_client::status gssapi_client::on_server(std::span<const std::uint8_t> token, protocol::bytes& out,
                                               std::string& error) {
  out.clear();
  switch (state_) {
    case state::context: {
      gss_result r = gss_->init(token);
      if (!r.ok)
        return fail(error, "SASL GSSAPI: the broker's Kerberos token was refused: " + r.error, r.retriable);
      out = std::move(r.token);  // empty once the context is complete: the server then sends its offer
      if (r.complete) state_ = state::offer;
      return status::send;
    }
    case state::offer: {
      if (token.empty()) {
        // A server that still owes its offer (its context completed on our last token): answer
        // empty, but not forever.
        if (++empty_offers_ > 2) return fail(error, "SASL GSSAPI: the broker sent no security-layer offer");
        return status::send;
      }
      gss_result r = gss_->unwrap(token);
      if (!r.ok)
        return fail(error, "SASL GSSAPI: cannot unwrap the broker's security-layer offer: " + r.error);
      if (r.token.size() != 4) {
        return fail(error, "SASL GSSAPI: the broker's security-layer offer has " +
                               std::to_string(r.token.size()) + " bytes, not 4");
      }
      if ((r.token[0] & gssapi_layer_none) == 0) {
        return fail(
            error,
            "SASL GSSAPI: the broker requires a GSS-API integrity or confidentiality layer, which kgroup "
            "does not implement (use TLS, security.protocol=SASL_SSL, to protect the connection)");
      }
      // RFC 4752 3.1: the layer chosen, the largest message the client can receive (0 without a
      // layer), then the authorization identity.
      protocol::bytes answer{gssapi_layer_none, 0, 0, 0};
      answer.insert(answer.end(), authzid_.begin(), authzid_.end());
      gss_result w = gss_->wrap(answer);
      if (!w.ok) return fail(error, "SASL GSSAPI: cannot wrap the security-layer answer: " + w.error);
      out = std::move(w.token);
      state_ = state::answered;
      return status::send;
    }
    case state::answered:
      // Kafka's answer to the last message is empty; anything it says is not a further step.
      state_ = state::done;
      return status::done;
    case state::initial:
    case state::done:
    case state::failed:
      break;
  }
  return fail(error, "SASL GSSAPI: a broker token arrived outside the exchange");
}

}  // namespace kgroup::security
