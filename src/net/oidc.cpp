#include "net/oidc.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "security/oauth.hpp"
#include "security/scram.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

// application/x-www-form-urlencoded (also what RFC 6749 2.3.1 asks for the Basic credentials).
std::string form_encode(const std::string& s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// One token request: resolve, connect, TLS, POST, read the answer; `done` once.
class oidc_request : public std::enable_shared_from_this<oidc_request> {
 public:
  oidc_request(asio::io_context& io, const oidc_options& opts, token_cache::fetch_done done)
      : opts_(opts), resolver_(io), stream_(io, *opts.tls), done_(std::move(done)) {}

  void start() {
    std::string error;
    if (!security::parse_https_url(opts_.url, host_, port_, target_, error)) {
      finish(error);
      return;
    }
    beast::get_lowest_layer(stream_).expires_after(opts_.timeout);
    resolver_.async_resolve(host_, port_, [self = shared_from_this()](const beast::error_code& ec,
                                                                      asio::ip::tcp::resolver::results_type r) {
      if (ec) return self->finish("cannot resolve the token endpoint's host (" + ec.message() + ")");
      beast::get_lowest_layer(self->stream_)
          .async_connect(r, [self](const beast::error_code& cec, const asio::ip::tcp::endpoint&) {
            if (cec) return self->finish("cannot connect to the token endpoint (" + cec.message() + ")");
            self->handshake();
          });
    });
  }

 private:
  void handshake() {
    SSL* ssl = stream_.native_handle();
    boost::system::error_code ip_ec;
    asio::ip::make_address(host_, ip_ec);
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (ip_ec) {
      SSL_set_tlsext_host_name(ssl, host_.c_str());
      X509_VERIFY_PARAM_set1_host(param, host_.c_str(), 0);
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(param, host_.c_str());
    }
    stream_.async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](const beast::error_code& ec) {
      if (ec) {
        const long v = SSL_get_verify_result(self->stream_.native_handle());
        return self->finish(v != X509_V_OK ? std::string("the token endpoint's certificate is not trusted: ") +
                                                 X509_verify_cert_error_string(v) + "; check https.ca.location"
                                           : "TLS with the token endpoint failed (" + ec.message() + ")");
      }
      self->send();
    });
  }

  void send() {
    req_.method(bhttp::verb::post);
    req_.target(target_);
    req_.version(11);
    req_.set(bhttp::field::host, host_);
    req_.set(bhttp::field::user_agent, "kgroup");
    req_.set(bhttp::field::accept, "application/json");
    req_.set(bhttp::field::content_type, "application/x-www-form-urlencoded");
    const std::string basic = form_encode(opts_.client_id) + ":" + form_encode(opts_.client_secret);
    req_.set(bhttp::field::authorization,
             "Basic " + security::base64_encode(std::vector<std::uint8_t>(basic.begin(), basic.end())));
    std::string body = "grant_type=client_credentials";
    if (!opts_.scope.empty()) body += "&scope=" + form_encode(opts_.scope);
    req_.body() = std::move(body);
    req_.prepare_payload();
    bhttp::async_write(stream_, req_, [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
      if (ec) return self->finish("cannot send to the token endpoint (" + ec.message() + ")");
      bhttp::async_read(self->stream_, self->buffer_, self->res_,
                        [self](const beast::error_code& rec, std::size_t) { self->on_response(rec); });
    });
  }

  void on_response(const beast::error_code& ec) {
    if (ec) return finish("no answer from the token endpoint (" + ec.message() + ")");
    if (res_.result() != bhttp::status::ok) {
      // The error and its description (RFC 6749 5.2) say why; they never carry the secret.
      const std::string why = security::token_error_reason(res_.body());
      // 4xx: the endpoint refuses this client (RFC 6749 5.2): retrying cannot help. 5xx: it may recover.
      const bool refused = res_.result_int() >= 400 && res_.result_int() < 500;
      return finish(fmt::format("the token endpoint answered HTTP {}{}{}; check sasl.oauthbearer.client.id and "
                                "sasl.oauthbearer.client.secret",
                                res_.result_int(), why.empty() ? "" : ": ", why),
                    refused);
    }
    security::oauth_token token;
    std::string error;
    if (!security::parse_token_response(res_.body(), opts_.client_id, std::chrono::system_clock::now(), token, error)) {
      return finish(error);
    }
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    auto done = std::move(done_);
    done({}, false, token);
  }

  void finish(const std::string& error, bool permanent = false) {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    auto done = std::move(done_);
    if (done) done("OIDC token request to " + host_ + ": " + error, permanent, {});
  }

  oidc_options opts_;
  asio::ip::tcp::resolver resolver_;
  asio::ssl::stream<beast::tcp_stream> stream_;
  token_cache::fetch_done done_;
  std::string host_, port_, target_;
  bhttp::request<bhttp::string_body> req_;
  bhttp::response<bhttp::string_body> res_;
  beast::flat_buffer buffer_;
};

}  // namespace

token_cache::fetcher make_oidc_fetcher(oidc_options opts) {
  return [opts = std::move(opts)](asio::io_context& io, token_cache::fetch_done done) {
    std::make_shared<oidc_request>(io, opts, std::move(done))->start();
  };
}

}  // namespace kgroup::net
