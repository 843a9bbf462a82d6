// The connection's side of its setup (connection_setup.hpp decides): sends the ApiVersions and
// SASL requests it asks for, feeds it their answers and the OAUTHBEARER tokens, logs what it
// notes and carries out its verdicts (ready, fail, fatal), at setup and for KIP-368
// re-authentication.
#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "net/connection.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

template <class Request>
void connection::send_setup(Request req, std::int16_t version) {
  // Kept until the answer arrives (the SASL bytes too: the request is encoded when it is sent).
  auto sent = std::make_shared<const Request>(std::move(req));
  send_raw(
      Request::api_key, version,
      [sent, version](std::int32_t corr, const std::optional<std::string>& cid, protocol::bytes& out) {
        return protocol::encode_request(*sent, version, corr, cid, out);
      },
      response_header_flexible<Request>(version),  // (ApiVersions answers always use header v0)
      [this, version](std::error_code ec, const response_frame& f) -> std::error_code {
        if (ec) {
          // The connection failure (or the timeout) is handled by fail(); the exchange is over.
          setup_.lost();
          return {};
        }
        return on_setup_answer(Request::api_key, Request::response_type::name, version,
                               setup_.answer(clock::now(), f.body()));
      });
}

std::error_code connection::on_setup_answer(std::int16_t api_key, const char* answer_name,
                                            std::int16_t version, setup_action a) {
  using kind = setup_action::kind;
  if (a.note.trailing != 0) note_trailing_bytes(api_key, answer_name, version, a.note.trailing);
  log_notes(a);
  // Returned, the error closes the connection as a protocol violation, logging the answer's bytes.
  if (a.what == kind::undecodable) return a.error;
  if (a.what == kind::fail || a.what == kind::fatal || a.what == kind::get_token) {
    // Not from inside the frame handler: fail() closes the socket and runs every handler, fatal()
    // also calls the owner, and the token cache may answer at once with either.
    asio::post(io_, [self = shared_from_this(), gen = generation_, a = std::move(a)]() mutable {
      if (gen == self->generation_) self->run(std::move(a));
    });
    return {};
  }
  run(std::move(a));
  return {};
}

void connection::log_notes(const setup_action& a) {
  const auto& n = a.note;
  if (n.refused_version >= 0) {
    logger()->debug("broker {}: ApiVersions v{} unsupported, retrying with v{}", node_id_, n.refused_version,
                    a.version);
  }
  if (n.api_versions_error != 0) {
    logger()->warn("broker {}: ApiVersions failed: {}", node_id_, kafka_error_name(n.api_versions_error));
  }
  if (n.versions_at >= 0) {
    logger()->debug("broker {} ({}:{}): ApiVersions v{}, {} APIs", node_id_, host_, port_, n.versions_at,
                    n.apis);
  }
  if (n.authenticated) {
    if (opts_.wire) ++(n.reauth ? opts_.wire->reauthentications : opts_.wire->authentications);
    logger()->debug(
        "broker {} ({}:{}): SASL {} {}authenticated{}", node_id_, host_, port_,
        opts_.security->credentials.mechanism, n.reauth ? "re-" : "",
        n.session_lifetime_ms > 0 ? fmt::format(" for {} ms", n.session_lifetime_ms) : std::string());
  }
}

void connection::run(setup_action a) {
  using kind = setup_action::kind;
  switch (a.what) {
    case kind::none:
      return;
    case kind::send_api_versions:
      send_setup(std::move(a.api_versions), a.version);
      return;
    case kind::get_token:
      get_token();
      return;
    case kind::send_sasl_handshake:
      send_setup(std::move(a.handshake), a.version);
      return;
    case kind::send_sasl_authenticate:
      send_setup(std::move(a.authenticate), a.version);
      return;
    case kind::ready:
      become_ready();
      return;
    case kind::reauthenticated:
      arm_timer();
      flush_waiters({});
      return;
    case kind::undecodable:
      fail(make_error_code(client_errc::protocol_violation), "undecodable response");
      return;
    case kind::fail:
      if (a.error == make_error_code(kafka_errc::rebootstrap_required) && opts_.on_rebootstrap_required) {
        opts_.on_rebootstrap_required(node_id_);
      }
      fail(a.error, a.message.c_str());
      return;
    case kind::fatal:
      fatal(a.error, a.message);
      return;
  }
}

void connection::get_token() {
  opts_.security->tokens->get(
      io_, [self = shared_from_this(), gen = generation_](const std::string& err, bool permanent,
                                                          const security::oauth_token& token) {
        if (gen != self->generation_ || self->core_.current() == state::closed) return;
        self->run(self->setup_.token(err, permanent, token));
      });
}

void connection::become_ready() {
  logger()->debug("broker {} ({}:{}): ready", node_id_, host_, port_);
  arm_timer();
  flush_waiters({});
}

}  // namespace kgroup::net
