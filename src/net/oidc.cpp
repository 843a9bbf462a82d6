#include "net/oidc.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "base/base64.hpp"
#include "security/oauth.hpp"

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
  oidc_request(asio::io_context& io, const oidc_options& opts, token_cache::fetched done)
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
    if (const std::string error = configure_identity_check(stream_.native_handle(), host_, true); !error.empty()) {
      finish(error, /*permanent=*/true);
      return;
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
    std::string basic = form_encode(opts_.client_id) + ":" + form_encode(opts_.client_secret);
    std::string authorization = "Basic " + base::base64_encode(basic);
    req_.set(bhttp::field::authorization, authorization);
    // Our copies of the secret; Beast's copy in the request goes with the request.
    OPENSSL_cleanse(basic.data(), basic.size());
    OPENSSL_cleanse(authorization.data(), authorization.size());
    std::string body = "grant_type=client_credentials";
    if (!opts_.scope.empty()) body += "&scope=" + form_encode(opts_.scope);
    req_.body() = std::move(body);
    req_.prepare_payload();
    bhttp::async_write(stream_, req_, [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
      if (ec) return self->finish("cannot send to the token endpoint (" + ec.message() + ")");
      // An explicit bound (Beast's default body limit is 8 MB): a token answer is a few KiB.
      self->parser_.header_limit(static_cast<std::uint32_t>(max_oidc_response_bytes));
      self->parser_.body_limit(max_oidc_response_bytes);
      bhttp::async_read(self->stream_, self->buffer_, self->parser_,
                        [self](const beast::error_code& rec, std::size_t) { self->on_response(rec); });
    });
  }

  void on_response(const beast::error_code& ec) {
    if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit) {
      return finish(fmt::format("the token endpoint's answer is larger than {} bytes (refused)", max_oidc_response_bytes));
    }
    if (ec) return finish("no answer from the token endpoint (" + ec.message() + ")");
    const auto& res = parser_.get();
    if (res.result() != bhttp::status::ok) {
      // The error and its description (RFC 6749 5.2) say why; they never carry the secret.
      const std::string why = security::token_error_reason(res.body());
      const int status = res.result_int();
      // 408 (timeout), 429 (too many requests) and 5xx: the endpoint may answer later, retried
      // (honouring Retry-After). Other answers refuse this client or its configuration (RFC 6749
      // 5.2: 400, 401; a wrong path: 404; a redirect is not followed): retrying cannot help.
      const bool transient = status == 408 || status == 429 || status >= 500 || status < 300;
      const std::string text = fmt::format("the token endpoint answered HTTP {}{}{}", status, why.empty() ? "" : ": ", why);
      if (transient) return finish(text, false, retry_after(res));
      return finish(text + "; check sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id and "
                           "sasl.oauthbearer.client.secret",
                    true);
    }
    security::oauth_token token;
    std::string error;
    if (!security::parse_token_response(parser_.get().body(), opts_.client_id, std::chrono::system_clock::now(), token, error)) {
      return finish(error);
    }
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    auto done = std::move(done_);
    token_cache::fetch_result r;
    r.token = std::move(token);
    done(std::move(r));
  }

  // Retry-After in seconds (RFC 9110 10.2.3); an HTTP date, or garbage, counts as not said.
  static std::chrono::milliseconds retry_after(const bhttp::response<bhttp::string_body>& res) {
    const auto field = res[bhttp::field::retry_after];
    if (field.empty() || field.size() > 9 || field.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::chrono::milliseconds(-1);
    }
    return std::chrono::seconds(std::stoll(std::string(field)));
  }

  void finish(const std::string& error, bool permanent = false,
              std::chrono::milliseconds retry_after = std::chrono::milliseconds(-1)) {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    auto done = std::move(done_);
    token_cache::fetch_result r;
    r.error = "OIDC token request to " + host_ + ": " + error;
    r.permanent = permanent;
    r.retry_after = retry_after;
    if (done) done(std::move(r));
  }

  oidc_options opts_;
  asio::ip::tcp::resolver resolver_;
  asio::ssl::stream<beast::tcp_stream> stream_;
  token_cache::fetched done_;
  std::string host_, port_, target_;
  bhttp::request<bhttp::string_body> req_;
  bhttp::response_parser<bhttp::string_body> parser_;
  beast::flat_buffer buffer_;
};

}  // namespace

oidc_options::~oidc_options() {
  OPENSSL_cleanse(client_secret.data(), client_secret.size());
}

token_cache::fetcher make_oidc_fetcher(oidc_options opts) {
  return [opts = std::move(opts)](asio::io_context& io, token_cache::fetched done) {
    std::make_shared<oidc_request>(io, opts, std::move(done))->start();
  };
}

}  // namespace kgroup::net
