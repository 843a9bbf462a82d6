#include "oidc_token_endpoint.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "base/base64.hpp"
#include "base/json.hpp"
#include "test_pki.hpp"

namespace kgroup::test {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

std::string url_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> parse_form(std::string_view body) {
  std::map<std::string, std::string> out;
  for (std::size_t start = 0; start < body.size();) {
    const std::size_t amp = body.find('&', start);
    const std::string_view pair = body.substr(start, amp - start);
    const std::size_t eq = pair.find('=');
    try {
      if (eq != std::string_view::npos) out[url_decode(pair.substr(0, eq))] = url_decode(pair.substr(eq + 1));
    } catch (const std::exception&) {  // bad percent escape: the field is ignored
    }
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  return out;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string unsecured_jwt(std::string_view subject, std::int64_t lifetime_ms, std::string_view scope) {
  const std::int64_t now = now_ms();
  boost::json::object payload{{"sub", base::json_text(subject)}, {"iat", now / 1000}, {"exp", (now + lifetime_ms) / 1000}};
  if (!scope.empty()) payload["scope"] = base::json_text(scope);
  const boost::json::object header{{"alg", "none"}};
  return base::base64url_encode(base::to_json(header)) + "." +
         base::base64url_encode(base::to_json(payload)) + ".";
}

struct oidc_token_endpoint::impl {
  oidc_token_endpoint_options options;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<std::weak_ptr<asio::ssl::stream<tcp::socket>>> connections;  // io thread only
  std::thread thread;
  std::uint16_t port = 0;
  std::atomic<std::int64_t> lifetime_ms{0};
  std::atomic<int> requests{0}, issued{0}, rejected{0};
  mutable std::mutex mutex;
  std::string last_scope;
  std::deque<oidc_scripted_answer> scripted;               // guarded by mutex
  std::optional<oidc_scripted_answer> permanent_answer;    // guarded by mutex
  std::vector<std::chrono::steady_clock::time_point> times;  // guarded by mutex

  std::optional<oidc_scripted_answer> next_scripted() {
    std::lock_guard lock(mutex);
    times.push_back(std::chrono::steady_clock::now());
    if (!scripted.empty()) {
      auto a = scripted.front();
      scripted.pop_front();
      return a;
    }
    return permanent_answer;
  }

  http::response<http::string_body> handle(const http::request<http::string_body>& req) {
    http::response<http::string_body> res;
    res.version(req.version());
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(false);
    const auto reply = [&](http::status status, std::string body) {
      res.result(status);
      res.body() = std::move(body);
      res.prepare_payload();
      if (status == http::status::ok) {
        ++issued;
      } else {
        ++rejected;
      }
      return res;
    };
    const auto error = [&](http::status status, const char* code, const std::string& text) {
      return reply(status, base::to_json(boost::json::object{{"error", code}, {"error_description", base::json_text(text)}}));
    };
    const auto script = next_scripted();
    if (script && script->status != 200) {
      if (script->retry_after_s >= 0) res.set(http::field::retry_after, std::to_string(script->retry_after_s));
      return error(static_cast<http::status>(script->status), "temporarily_unavailable", "scripted answer");
    }
    if (std::string(req.target()) != options.path) return error(http::status::not_found, "not_found", "no such path");
    if (req.method() != http::verb::post) return error(http::status::method_not_allowed, "invalid_request", "POST only");
    auto form = parse_form(req.body());
    if (form["grant_type"] != "client_credentials") {
      return error(http::status::bad_request, "unsupported_grant_type", "grant_type must be client_credentials");
    }
    std::string id = form["client_id"];
    std::string secret = form["client_secret"];
    if (const auto auth = req[http::field::authorization]; auth.size() > 6 && auth.substr(0, 6) == "Basic ") {
      std::vector<std::uint8_t> raw;
      if (base::base64_decode(std::string_view(auth.data() + 6, auth.size() - 6), raw)) {
        const std::string pair(raw.begin(), raw.end());
        const std::size_t colon = pair.find(':');
        if (colon != std::string::npos) {
          id = url_decode(pair.substr(0, colon));
          secret = url_decode(pair.substr(colon + 1));
        }
      }
    }
    const auto client = options.clients.find(id);
    if (id.empty() || client == options.clients.end() || client->second != secret) {
      res.set(http::field::www_authenticate, "Basic realm=\"kgroup-test\"");
      return error(http::status::unauthorized, "invalid_client", "client authentication failed");
    }
    const std::string scope = form.count("scope") ? form["scope"] : options.default_scope;
    const std::int64_t lifetime = lifetime_ms.load();
    {
      std::lock_guard lock(mutex);
      last_scope = scope;
    }
    boost::json::object body{
        {"access_token", unsecured_jwt(id, lifetime, scope)}, {"token_type", "Bearer"}, {"expires_in", lifetime / 1000}};
    if (!scope.empty()) body["scope"] = base::json_text(scope);
    if (script && script->pad_to_bytes > 0) body["padding"] = std::string(script->pad_to_bytes, 'x');
    return reply(http::status::ok, base::to_json(body));
  }

  static awaitable<void> serve(impl& self, std::shared_ptr<asio::ssl::stream<tcp::socket>> stream) {
    try {
      co_await stream->async_handshake(asio::ssl::stream_base::server, use_awaitable);
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> req;
      co_await http::async_read(*stream, buffer, req, use_awaitable);
      ++self.requests;
      auto res = self.handle(req);
      co_await http::async_write(*stream, res, use_awaitable);
      co_await stream->async_shutdown(use_awaitable);
    } catch (const std::exception&) {
    }
    boost::system::error_code ignored;
    stream->lowest_layer().close(ignored);
  }

  awaitable<void> accept_loop() {
    try {
      for (;;) {
        tcp::socket s = co_await acceptor.async_accept(use_awaitable);
        auto stream = std::make_shared<asio::ssl::stream<tcp::socket>>(std::move(s), tls);
        std::erase_if(connections, [](const auto& w) { return w.expired(); });
        connections.push_back(stream);
        asio::co_spawn(io, serve(*this, stream), asio::detached);
      }
    } catch (const std::exception&) {
    }
  }
};

oidc_token_endpoint::oidc_token_endpoint(oidc_token_endpoint_options options) : impl_(std::make_unique<impl>()) {
  impl& f = *impl_;
  f.options = std::move(options);
  f.lifetime_ms = f.options.token_lifetime_ms;
  const test_pki& pki = test_pki::get();
  f.tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  f.tls.use_certificate_chain(asio::buffer(pki.broker.cert_pem));
  f.tls.use_private_key(asio::buffer(pki.broker.key_pem), asio::ssl::context::pem);
  f.acceptor.open(tcp::v4());
  f.acceptor.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  f.acceptor.listen();
  f.port = f.acceptor.local_endpoint().port();
  asio::co_spawn(f.io, f.accept_loop(), asio::detached);
  f.thread = std::thread([&f] { f.io.run(); });
}

oidc_token_endpoint::~oidc_token_endpoint() { stop(); }

std::string oidc_token_endpoint::url(const std::string& host) const {
  return "https://" + host + ":" + std::to_string(impl_->port) + impl_->options.path;
}

std::uint16_t oidc_token_endpoint::port() const { return impl_->port; }
void oidc_token_endpoint::set_token_lifetime_ms(std::int64_t ms) { impl_->lifetime_ms = ms; }

void oidc_token_endpoint::script_next(int count, oidc_scripted_answer answer) {
  std::lock_guard lock(impl_->mutex);
  for (int i = 0; i < count; ++i) impl_->scripted.push_back(answer);
}

void oidc_token_endpoint::set_permanent_answer(std::optional<oidc_scripted_answer> answer) {
  std::lock_guard lock(impl_->mutex);
  impl_->permanent_answer = answer;
}

std::vector<std::chrono::steady_clock::time_point> oidc_token_endpoint::request_times() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->times;
}
int oidc_token_endpoint::requests() const { return impl_->requests; }
int oidc_token_endpoint::tokens_issued() const { return impl_->issued; }
int oidc_token_endpoint::rejected_requests() const { return impl_->rejected; }

std::string oidc_token_endpoint::last_scope() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->last_scope;
}

void oidc_token_endpoint::stop() {
  impl& f = *impl_;
  if (!f.thread.joinable()) return;
  std::promise<void> closed;
  asio::post(f.io, [&f, &closed] {
    boost::system::error_code ignored;
    f.acceptor.close(ignored);
    for (auto& w : f.connections) {
      if (auto s = w.lock()) s->lowest_layer().close(ignored);
    }
    closed.set_value();
  });
  closed.get_future().wait();
  f.io.stop();
  f.thread.join();
}

}  // namespace kgroup::test
