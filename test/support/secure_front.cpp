#include "secure_front.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#if KGROUP_TEST_GSSAPI
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#endif

#include "base/base64.hpp"
#include "base/json.hpp"
#include "kafka_relay.hpp"
#include "mock_cluster.hpp"
#include "test_pki.hpp"

namespace kgroup::test {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using bytes = kafka_relay::bytes;
using steady = std::chrono::steady_clock;

constexpr std::int16_t err_unsupported_sasl_mechanism = 33;
constexpr std::int16_t err_illegal_sasl_state = 34;
constexpr std::int16_t err_sasl_authentication_failed = 58;
constexpr int scram_iterations = 4096;

std::string to_string(std::span<const std::uint8_t> b) { return std::string(b.begin(), b.end()); }
bytes to_bytes(std::string_view s) { return bytes(s.begin(), s.end()); }

// ---- crypto (libcrypto) --------------------------------------------------------------------

const EVP_MD* digest_of(const std::string& mechanism) {
  return mechanism == "SCRAM-SHA-512" ? EVP_sha512() : EVP_sha256();
}

bytes hmac(const EVP_MD* md, const bytes& key, std::string_view data) {
  bytes out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out.data(), &len);
  out.resize(len);
  return out;
}

bytes digest(const EVP_MD* md, const bytes& data) {
  bytes out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, md, nullptr);
  out.resize(len);
  return out;
}

bytes random_bytes(std::size_t n) {
  bytes out(n);
  RAND_bytes(out.data(), static_cast<int>(n));
  return out;
}

// What a broker stores for a SCRAM user (Kafka's ScramCredential): never the password.
struct scram_credential {
  bytes salt;
  int iterations = scram_iterations;
  bytes stored_key;
  bytes server_key;
};

scram_credential make_scram_credential(const std::string& mechanism, const std::string& password) {
  const EVP_MD* md = digest_of(mechanism);
  scram_credential c;
  c.salt = random_bytes(16);
  bytes salted(static_cast<std::size_t>(EVP_MD_get_size(md)));
  PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), c.salt.data(), static_cast<int>(c.salt.size()),
                    c.iterations, md, static_cast<int>(salted.size()), salted.data());
  c.stored_key = digest(md, hmac(md, salted, "Client Key"));
  c.server_key = hmac(md, salted, "Server Key");
  return c;
}

// ---- the JSON parts of unsecured test JWTs (Boost.JSON) -----------------------------------

// `text` as a JSON object; an empty one if it is not one, so every claim is then missing.
boost::json::object json_object(std::string_view text) {
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.get_object());
}

std::optional<std::string> json_string(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string().data(), v->get_string().size());
}

std::optional<double> json_number(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

// "scope": "a b" or ["a", "b"].
std::vector<std::string> json_scopes(const boost::json::object& o) {
  std::vector<std::string> out;
  const auto* v = o.if_contains("scope");
  if (v == nullptr) return out;
  if (v->is_string()) {
    const std::string s(v->get_string().data(), v->get_string().size());
    for (std::size_t start = 0; start < s.size();) {
      const std::size_t sp = s.find(' ', start);
      if (sp != start) out.push_back(s.substr(start, sp - start));
      if (sp == std::string::npos) break;
      start = sp + 1;
    }
  } else if (v->is_array()) {
    for (const auto& e : v->get_array()) {
      if (e.is_string()) out.emplace_back(e.get_string().data(), e.get_string().size());
    }
  }
  return out;
}

// As Java's Base64.getUrlDecoder(), which a broker's unsecured-token validator uses: padding optional.
bool base64url_decode(std::string_view text, std::string& out) {
  for (int pad = 0; pad < 2 && !text.empty() && text.back() == '='; ++pad) text.remove_suffix(1);
  bytes raw;
  if (!base::base64url_decode(text, raw)) return false;
  out.assign(raw.begin(), raw.end());
  return true;
}

// ---- the broker side of one SASL exchange --------------------------------------------------

struct front_state;

class sasl_authenticator {
 public:
  enum class outcome { challenge, success, failure };
  struct result {
    outcome kind = outcome::failure;
    bytes out;
    std::string error;
  };

  sasl_authenticator(const front_state& front, std::string mechanism) : front_(front), mechanism_(std::move(mechanism)) {}
  ~sasl_authenticator();
  sasl_authenticator(const sasl_authenticator&) = delete;
  sasl_authenticator& operator=(const sasl_authenticator&) = delete;

  result step(std::span<const std::uint8_t> in);

  const std::string& mechanism() const { return mechanism_; }
  const std::string& principal() const { return principal_; }
  /// OAUTHBEARER: the token's expiry (epoch ms); 0 for other mechanisms.
  std::int64_t credential_expiry_ms() const { return expiry_ms_; }

 private:
  result plain(std::string_view msg);
  result scram_first(std::string_view msg);
  result scram_final(std::string_view msg);
  result oauthbearer(std::string_view msg);
  result gssapi(std::span<const std::uint8_t> in);
  static result fail(std::string error) { return {outcome::failure, {}, std::move(error)}; }

  const front_state& front_;
  std::string mechanism_;
  std::string principal_;
  std::int64_t expiry_ms_ = 0;
  int round_ = 0;
  // SCRAM
  std::string client_first_bare_, server_first_, nonce_, gs2_header_;
  const scram_credential* credential_ = nullptr;
  // OAUTHBEARER: the error sent as challenge, reported when the client acknowledges it
  std::string oauth_error_;
#if KGROUP_TEST_GSSAPI
  // GSSAPI: 0 context tokens, 1 the context is complete and its last token sent (the client's
  // empty answer is due), 2 the security-layer offer sent (the client's wrapped answer is due)
  gss_ctx_id_t gss_ctx_ = GSS_C_NO_CONTEXT;
  int gss_stage_ = 0;
#endif
};

struct front_state {
  secure_front_options options;
#if KGROUP_TEST_GSSAPI
  gss_cred_id_t gss_acceptor = GSS_C_NO_CREDENTIAL;  // from options.gssapi_keytab
  ~front_state() {
    OM_uint32 minor = 0;
    if (gss_acceptor != GSS_C_NO_CREDENTIAL) gss_release_cred(&minor, &gss_acceptor);
  }
#endif
  // mechanism -> user -> credential
  std::map<std::string, std::map<std::string, scram_credential>> scram;

  mutable std::mutex counters_mutex;
  secure_front_counters counters;
  int cuts_done = 0;  // io thread only

  template <class F>
  void count(F f) {
    std::lock_guard lock(counters_mutex);
    f(counters);
  }
};

sasl_authenticator::~sasl_authenticator() {
#if KGROUP_TEST_GSSAPI
  OM_uint32 minor = 0;
  if (gss_ctx_ != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &gss_ctx_, GSS_C_NO_BUFFER);
#endif
}

#if KGROUP_TEST_GSSAPI
namespace {
std::string gss_text(OM_uint32 major, OM_uint32 minor) {
  std::string out;
  for (const auto& [code, type] : {std::pair{major, GSS_C_GSS_CODE}, std::pair{minor, GSS_C_MECH_CODE}}) {
    OM_uint32 ctx = 0;
    do {
      OM_uint32 m = 0;
      gss_buffer_desc b = GSS_C_EMPTY_BUFFER;
      if (GSS_ERROR(gss_display_status(&m, code, type, gss_mech_krb5, &ctx, &b))) break;
      out += (out.empty() ? "" : "; ") + std::string(static_cast<const char*>(b.value), b.length);
      gss_release_buffer(&m, &b);
    } while (ctx != 0);
  }
  return out;
}
bytes take_buffer(gss_buffer_desc& b) {
  bytes out(static_cast<const std::uint8_t*>(b.value), static_cast<const std::uint8_t*>(b.value) + b.length);
  OM_uint32 m = 0;
  gss_release_buffer(&m, &b);
  return out;
}
}  // namespace

// Kafka's GSSAPI server (the JDK's GssKrb5Server, QOP auth): accept the context; its last token
// (the AP-REP) is answered by the client with an empty message; then the wrapped offer "no layer,
// max 65536"; the client's wrapped answer must choose no layer (any authzid: Kafka's callback
// handler authorizes the authenticated principal whatever the client asks for).
sasl_authenticator::result sasl_authenticator::gssapi(std::span<const std::uint8_t> in) {
  const std::string invalid =
      "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI";
  OM_uint32 minor = 0;
  const auto send_offer = [&]() -> result {
    bytes offer{0x01, 0x01, 0x00, 0x00};
    gss_buffer_desc inb{offer.size(), offer.data()};
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    const OM_uint32 major = gss_wrap(&minor, gss_ctx_, 0, GSS_C_QOP_DEFAULT, &inb, nullptr, &out);
    if (GSS_ERROR(major)) return fail(invalid + ": gss_wrap: " + gss_text(major, minor));
    gss_stage_ = 2;
    return {outcome::challenge, take_buffer(out), {}};
  };
  if (gss_stage_ == 0) {
    gss_buffer_desc inb{in.size(), const_cast<std::uint8_t*>(in.data())};
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    gss_name_t client = GSS_C_NO_NAME;
    OM_uint32 time_rec = 0;
    const OM_uint32 major =
        gss_accept_sec_context(&minor, &gss_ctx_, front_.gss_acceptor, &inb, GSS_C_NO_CHANNEL_BINDINGS,
                               &client, nullptr, &out, nullptr, &time_rec, nullptr);
    if (GSS_ERROR(major)) {
      // A failed accept can still hand back a token (the KRB-ERROR for the client): released too
      // (LeakSanitizer found it at the stale-keytab case).
      OM_uint32 ignored = 0;
      gss_release_buffer(&ignored, &out);
      if (client != GSS_C_NO_NAME) gss_release_name(&ignored, &client);
      return fail(invalid + ": " + gss_text(major, minor));
    }
    bytes token = take_buffer(out);
    if ((major & GSS_S_CONTINUE_NEEDED) != 0) return {outcome::challenge, std::move(token), {}};
    gss_buffer_desc name = GSS_C_EMPTY_BUFFER;
    gss_display_name(&minor, client, &name, nullptr);
    principal_.assign(static_cast<const char*>(name.value), name.length);
    gss_release_buffer(&minor, &name);
    gss_release_name(&minor, &client);
    // The session cannot outlive the client's ticket (Kafka caps connections.max.reauth.ms so).
    if (time_rec != GSS_C_INDEFINITE) {
      expiry_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count() +
                   std::int64_t{time_rec} * 1000;
    }
    if (!token.empty()) {
      gss_stage_ = 1;
      return {outcome::challenge, std::move(token), {}};
    }
    return send_offer();
  }
  if (gss_stage_ == 1) return send_offer();  // (the client's empty answer to the AP-REP)
  gss_buffer_desc inb{in.size(), const_cast<std::uint8_t*>(in.data())};
  gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
  const OM_uint32 major = gss_unwrap(&minor, gss_ctx_, &inb, &out, nullptr, nullptr);
  if (GSS_ERROR(major)) return fail(invalid + ": gss_unwrap: " + gss_text(major, minor));
  const bytes answer = take_buffer(out);
  if (answer.size() < 4 || answer[0] != 0x01)
    return fail(invalid + ": the client did not choose the offered layer");
  gss_stage_ = 3;
  return {outcome::success, {}, {}};
}
#else
sasl_authenticator::result sasl_authenticator::gssapi(std::span<const std::uint8_t>) {
  return fail("GSSAPI is not available in this build");
}
#endif

sasl_authenticator::result sasl_authenticator::step(std::span<const std::uint8_t> in) {
  if (mechanism_ == "GSSAPI") {
    ++round_;
    return gssapi(in);
  }
  const std::string msg = to_string(in);
  const int round = round_++;
  if (mechanism_ == "PLAIN") return plain(msg);
  if (mechanism_ == "OAUTHBEARER") {
    if (round > 0 || !oauth_error_.empty()) return fail(oauth_error_.empty() ? "Unexpected OAUTHBEARER message" : oauth_error_);
    return oauthbearer(msg);
  }
  if (round == 0) return scram_first(msg);
  if (round == 1) return scram_final(msg);
  return fail("Unexpected SCRAM message after authentication completed");
}

sasl_authenticator::result sasl_authenticator::plain(std::string_view msg) {
  // authzid \0 authcid \0 passwd (RFC 4616)
  const std::size_t a = msg.find('\0');
  const std::size_t b = a == std::string_view::npos ? a : msg.find('\0', a + 1);
  if (b == std::string_view::npos) return fail("Invalid SASL/PLAIN response: expected 3 tokens");
  const std::string authzid(msg.substr(0, a));
  const std::string user(msg.substr(a + 1, b - a - 1));
  const std::string password(msg.substr(b + 1));
  if (user.empty() || password.empty()) return fail("Authentication failed: username or password not specified");
  const auto& users = front_.options.users;
  const auto it = users.find(user);
  if (it == users.end() || it->second != password) return fail("Authentication failed: Invalid username or password");
  if (!authzid.empty() && authzid != user) return fail("Authentication failed: Client requested an authorization id that is different from username");
  principal_ = user;
  return {outcome::success, {}, {}};
}

// Parses "k=v,k=v" SCRAM attributes.
std::map<char, std::string> scram_attributes(std::string_view text) {
  std::map<char, std::string> out;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(start, comma - start);
    if (part.size() >= 2 && part[1] == '=') out.emplace(part[0], std::string(part.substr(2)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

sasl_authenticator::result sasl_authenticator::scram_first(std::string_view msg) {
  const std::string invalid = "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism_;
  // gs2-header "n,," or "n,a=authzid," then client-first-bare
  const std::size_t c1 = msg.find(',');
  const std::size_t c2 = c1 == std::string_view::npos ? c1 : msg.find(',', c1 + 1);
  if (c2 == std::string_view::npos || msg.empty() || (msg[0] != 'n' && msg[0] != 'y')) {
    return fail("Invalid SCRAM client first message");
  }
  gs2_header_ = std::string(msg.substr(0, c2 + 1));
  client_first_bare_ = std::string(msg.substr(c2 + 1));
  auto attrs = scram_attributes(client_first_bare_);
  if (!attrs.count('n') || !attrs.count('r') || attrs['r'].empty()) return fail("Invalid SCRAM client first message");
  std::string user;
  const std::string& raw_user = attrs['n'];
  for (std::size_t i = 0; i < raw_user.size(); ++i) {  // "=2C" -> ',', "=3D" -> '='
    if (raw_user.compare(i, 3, "=2C") == 0) {
      user += ',';
      i += 2;
    } else if (raw_user.compare(i, 3, "=3D") == 0) {
      user += '=';
      i += 2;
    } else {
      user += raw_user[i];
    }
  }
  const auto& creds = front_.scram.at(mechanism_);
  const auto it = creds.find(user);
  if (it == creds.end()) return fail(invalid);
  credential_ = &it->second;
  principal_ = user;
  nonce_ = attrs['r'] + base::base64_encode(random_bytes(18));
  server_first_ = "r=" + nonce_ + ",s=" + base::base64_encode(credential_->salt) +
                  ",i=" + std::to_string(credential_->iterations);
  return {outcome::challenge, to_bytes(server_first_), {}};
}

sasl_authenticator::result sasl_authenticator::scram_final(std::string_view msg) {
  const std::string invalid = "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism_;
  const std::size_t p = msg.rfind(",p=");
  if (p == std::string_view::npos) return fail("Invalid SCRAM client final message");
  const std::string without_proof(msg.substr(0, p));
  auto attrs = scram_attributes(without_proof);
  bytes channel_binding;
  if (!base::base64_decode(attrs['c'], channel_binding) || to_string(channel_binding) != gs2_header_) {
    return fail("Invalid SCRAM client final message: channel binding does not match");
  }
  // Kafka's ScramSaslServer only checks that the nonce ends with the server-first nonce:
  // librdkafka sends its client nonce in front of the server's whole nonce again.
  const std::string& final_nonce = attrs['r'];
  if (final_nonce.size() < nonce_.size() || final_nonce.compare(final_nonce.size() - nonce_.size(), nonce_.size(), nonce_) != 0) {
    return fail("Invalid SCRAM client final message: nonce does not match");
  }
  bytes proof;
  if (!base::base64_decode(msg.substr(p + 3), proof)) return fail(invalid);
  const EVP_MD* md = digest_of(mechanism_);
  const std::string auth_message = client_first_bare_ + "," + server_first_ + "," + without_proof;
  const bytes client_signature = hmac(md, credential_->stored_key, auth_message);
  if (proof.size() != client_signature.size()) return fail(invalid);
  bytes client_key(proof.size());
  for (std::size_t i = 0; i < proof.size(); ++i) client_key[i] = proof[i] ^ client_signature[i];
  if (digest(md, client_key) != credential_->stored_key) return fail(invalid);
  const bytes server_signature = hmac(md, credential_->server_key, auth_message);
  return {outcome::success, to_bytes("v=" + base::base64_encode(server_signature)), {}};
}

sasl_authenticator::result sasl_authenticator::oauthbearer(std::string_view msg) {
  // gs2-header, then \x01-separated key=value pairs, ending in \x01\x01 (RFC 7628 3.1)
  const std::size_t c1 = msg.find(',');
  const std::size_t c2 = c1 == std::string_view::npos ? c1 : msg.find(',', c1 + 1);
  if (c2 == std::string_view::npos || msg.size() < c2 + 3 || msg[c2 + 1] != '\x01' ||
      msg.substr(msg.size() - 2) != "\x01\x01") {
    return fail("Invalid OAUTHBEARER client first message");
  }
  std::string token;
  const std::string_view kvs = msg.substr(c2 + 2, msg.size() - c2 - 4);
  for (std::size_t start = 0; start <= kvs.size();) {
    const std::size_t sep = kvs.find('\x01', start);
    const std::string_view kv = kvs.substr(start, sep - start);
    if (kv.rfind("auth=", 0) == 0) {
      const std::string_view value = kv.substr(5);
      if (value.size() > 7 && (value.substr(0, 7) == "Bearer " || value.substr(0, 7) == "bearer ")) {
        token = std::string(value.substr(7));
      }
    }
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  if (token.empty()) return fail("Invalid OAUTHBEARER client first message: no auth=Bearer token");

  // Kafka's answer to a token it rejects: the RFC 7628 error status as challenge; the client
  // then sends \x01 and gets the failure.
  const auto reject = [&](const std::string& why, const char* status = "invalid_token") {
    oauth_error_ = "Authentication failed: " + why;
    return result{outcome::challenge, to_bytes(base::to_json(boost::json::object{{"status", status}})), {}};
  };
  const std::size_t d1 = token.find('.');
  const std::size_t d2 = d1 == std::string::npos ? d1 : token.find('.', d1 + 1);
  if (d2 == std::string::npos) return reject("the token is not a JWS compact serialization");
  std::string header_text;
  std::string payload_text;
  if (!base64url_decode(std::string_view(token).substr(0, d1), header_text) ||
      !base64url_decode(std::string_view(token).substr(d1 + 1, d2 - d1 - 1), payload_text)) {
    return reject("the token is not base64url");
  }
  const boost::json::object header = json_object(header_text);
  const boost::json::object payload = json_object(payload_text);
  if (json_string(header, "alg").value_or("") != "none") return reject("only unsecured tokens (alg none) are accepted");
  const auto sub = json_string(payload, "sub");
  if (!sub || sub->empty()) return reject("the token has no sub claim");
  const auto exp = json_number(payload, "exp");
  if (!exp) return reject("the token has no exp claim");
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto exp_ms = static_cast<std::int64_t>(*exp * 1000.0);
  if (exp_ms <= now_ms) return reject("the token expired");
  if (const auto& scope = front_.options.oauth_required_scope; !scope.empty()) {
    const auto scopes = json_scopes(payload);
    if (std::find(scopes.begin(), scopes.end(), scope) == scopes.end()) {
      return reject("the token's scope does not include the required scope " + scope, "insufficient_scope");
    }
  }
  principal_ = *sub;
  expiry_ms_ = exp_ms;
  return {outcome::success, {}, {}};
}

}  // namespace

// ---- the front -------------------------------------------------------------------------------

struct secure_front::impl : front_state {
  struct listener {
    explicit listener(asio::io_context& io) : acceptor(io) {}
    tcp::acceptor acceptor;
    tcp::endpoint upstream;
    std::uint16_t port = 0;
  };

  struct connection;

  // Before io: the connections still in io's handlers when it is destroyed use the context.
  asio::ssl::context tls_context{asio::ssl::context::tls_server};  // configured only with options.tls
  asio::io_context io;
  std::map<std::int32_t, std::int32_t> port_map;  // mock broker port -> front port
  std::vector<std::unique_ptr<listener>> listeners;
  std::vector<std::weak_ptr<connection>> connections;  // io thread only
  std::thread thread;
  bool stopped = false;

  awaitable<void> accept_loop(listener& l);
};

struct secure_front::impl::connection : std::enable_shared_from_this<connection> {
  connection(impl& f, const listener& l, tcp::socket socket)
      : front(f), upstream(l.upstream), stream(std::move(socket), f.tls_context), broker(f.io), wake(f.io) {}

  struct pending {
    std::int16_t api_key = 0;
    std::int16_t version = 0;
    bool relayed = false;
    std::optional<bytes> answer;
    bool close_after = false;
  };

  impl& front;
  tcp::endpoint upstream;
  asio::ssl::stream<tcp::socket> stream;
  tcp::socket broker;
  asio::steady_timer wake;  // the writer waits on it; cancel() wakes it
  std::deque<pending> queue;
  bool closed = false;
  bool stop_reading = false;

  // SASL state
  std::optional<sasl_authenticator> sasl;  // between SaslHandshake and the end of the exchange
  bool raw_tokens = false;                 // SaslHandshake v0: raw tokens follow
  bool authenticated = false;
  std::string principal;
  steady::time_point session_expiry = steady::time_point::max();

  bool tls() const { return front.options.tls; }
  bool sasl_enabled() const { return !front.options.sasl_mechanisms.empty(); }

  void close() {
    if (closed) return;
    closed = true;
    boost::system::error_code ignored;
    stream.lowest_layer().close(ignored);
    broker.close(ignored);
    wake.cancel();
  }

  awaitable<void> read_exact(asio::mutable_buffer b) {
    if (tls()) {
      co_await asio::async_read(stream, b, use_awaitable);
    } else {
      co_await asio::async_read(stream.next_layer(), b, use_awaitable);
    }
  }

  awaitable<void> write_all(std::array<asio::const_buffer, 2> b) {
    if (tls()) {
      co_await asio::async_write(stream, b, use_awaitable);
    } else {
      co_await asio::async_write(stream.next_layer(), b, use_awaitable);
    }
  }

  static awaitable<bool> read_frame_from(connection& c, bool from_broker, bytes& frame) {
    std::uint8_t size_buf[4];
    if (from_broker) {
      co_await asio::async_read(c.broker, asio::buffer(size_buf), use_awaitable);
    } else {
      co_await c.read_exact(asio::buffer(size_buf));
    }
    const std::uint32_t size = kafka_relay::read_be32(size_buf);
    if (size > kafka_relay::max_frame_size) co_return false;
    frame.resize(size);
    if (from_broker) {
      co_await asio::async_read(c.broker, asio::buffer(frame), use_awaitable);
    } else {
      co_await c.read_exact(asio::buffer(frame));
    }
    co_return true;
  }

  void answer(std::int16_t api_key, std::int16_t version, bytes frame, bool close_after = false) {
    queue.push_back({api_key, version, false, std::move(frame), close_after});
    if (close_after) stop_reading = true;
    wake.cancel();
  }

  static awaitable<void> run(std::shared_ptr<connection> self) {
    connection& c = *self;
    try {
      if (c.tls()) {
        try {
          co_await c.stream.async_handshake(asio::ssl::stream_base::server, use_awaitable);
        } catch (const boost::system::system_error& e) {
          // A TLS error (an alert, a refused certificate) counts; a client that merely went away
          // mid-handshake (EOF, truncated stream: librdkafka closing a spare connection) does not.
          if (e.code().category() == asio::error::get_ssl_category()) {
            c.front.count([](auto& n) { ++n.tls_handshake_failures; });
          }
          c.close();
          co_return;
        }
        const bool verified_client = c.front.options.require_client_certificate &&
                                     SSL_get_verify_result(c.stream.native_handle()) == X509_V_OK;
        c.front.count([&](auto& n) {
          ++n.tls_handshakes;
          if (verified_client) ++n.client_certificates_verified;
        });
      }
      co_await c.broker.async_connect(c.upstream, use_awaitable);
      auto ex = co_await asio::this_coro::executor;
      asio::co_spawn(ex, broker_loop(self), asio::detached);
      asio::co_spawn(ex, writer_loop(self), asio::detached);
      bytes frame;
      while (!c.closed && !c.stop_reading) {
        if (!co_await read_frame_from(c, false, frame)) break;
        if (c.closed) break;
        if (!co_await c.on_request(frame)) break;
      }
    } catch (const std::exception&) {
    }
    if (!c.stop_reading) c.close();  // else the writer closes after the last answer
  }

  static awaitable<void> broker_loop(std::shared_ptr<connection> self) {
    connection& c = *self;
    try {
      bytes frame;
      while (!c.closed) {
        if (!co_await read_frame_from(c, true, frame)) break;
        auto it = std::find_if(c.queue.begin(), c.queue.end(), [](const pending& p) { return p.relayed && !p.answer; });
        if (it == c.queue.end()) break;  // an answer nobody asked for
        c.rewrite(*it, frame);
        it->answer = std::move(frame);
        frame = {};
        c.wake.cancel();
      }
    } catch (const std::exception&) {
    }
    c.close();
  }

  static awaitable<void> writer_loop(std::shared_ptr<connection> self) {
    connection& c = *self;
    try {
      while (!c.closed) {
        while (!c.queue.empty() && c.queue.front().answer) {
          pending p = std::move(c.queue.front());
          c.queue.pop_front();
          const auto size = kafka_relay::be32(static_cast<std::uint32_t>(p.answer->size()));
          co_await c.write_all({asio::buffer(size), asio::buffer(*p.answer)});
          if (p.close_after) {
            c.close();
            co_return;
          }
        }
        if (c.closed) break;
        boost::system::error_code ec;
        c.wake.expires_at(steady::time_point::max());
        co_await c.wake.async_wait(asio::redirect_error(use_awaitable, ec));
      }
    } catch (const std::exception&) {
    }
    c.close();
  }

  void rewrite(const pending& p, bytes& frame) {
    if (p.api_key == protocol::api_versions_request::api_key && sasl_enabled()) {
      protocol::api_versions_response m;
      protocol::response_header h;
      if (!kafka_relay::decode_response(frame, p.version, h, m) || m.error_code != 0) return;
      std::erase_if(m.api_keys, [](const auto& k) {
        return k.api_key == protocol::sasl_handshake_request::api_key || k.api_key == protocol::sasl_authenticate_request::api_key;
      });
      m.api_keys.push_back({protocol::sasl_handshake_request::api_key, 0, 1});
      m.api_keys.push_back({protocol::sasl_authenticate_request::api_key, 0, 2});
      std::sort(m.api_keys.begin(), m.api_keys.end(), [](const auto& a, const auto& b) { return a.api_key < b.api_key; });
      if (auto out = kafka_relay::encode_response(m, p.version, h.correlation_id); !out.empty()) frame = std::move(out);
      return;
    }
    kafka_relay::rewrite_broker_addresses(
        p.api_key, p.version, frame,
        [this](std::int32_t port) {
          auto it = front.port_map.find(port);
          return it == front.port_map.end() ? port : it->second;
        },
        front.options.advertised_host);
  }

  // Returns false to stop reading (the connection is closed or closes after its answers).
  awaitable<bool> on_request(bytes& frame) {
    if (raw_tokens) {
      on_raw_token(frame);
      co_return !closed && !stop_reading;
    }
    kafka_relay::request_start rs;
    if (!kafka_relay::peek_request(frame, rs)) co_return false;
    if (rs.api_key == protocol::sasl_handshake_request::api_key) {
      on_handshake(frame, rs);
      co_return !closed && !stop_reading;
    }
    if (rs.api_key == protocol::sasl_authenticate_request::api_key) {
      on_authenticate(frame, rs);
      co_return !closed && !stop_reading;
    }
    if (sasl_enabled()) {
      if (!authenticated && rs.api_key != protocol::api_versions_request::api_key) {
        front.count([](auto& n) { ++n.unauthenticated_requests; });
        close();
        co_return false;
      }
      if (authenticated && steady::now() >= session_expiry) {
        front.count([](auto& n) { ++n.expired_sessions; });
        close();
        co_return false;
      }
    }
    queue.push_back({rs.api_key, rs.version, true, std::nullopt, false});
    const auto size = kafka_relay::be32(static_cast<std::uint32_t>(frame.size()));
    co_await asio::async_write(broker, std::array<asio::const_buffer, 2>{asio::buffer(size), asio::buffer(frame)}, use_awaitable);
    co_return true;
  }

  void fail_authentication() { front.count([](auto& n) { ++n.failed_authentications; }); }

  void on_handshake(const bytes& frame, const kafka_relay::request_start& rs) {
    protocol::sasl_handshake_request req;
    if (!kafka_relay::decode_request(frame, rs.version, req)) {
      close();
      return;
    }
    protocol::sasl_handshake_response resp;
    resp.mechanisms = front.options.sasl_mechanisms;
    if (!sasl_enabled()) {  // what a broker's PLAINTEXT/SSL listener answers
      resp.mechanisms.clear();
      resp.error_code = err_illegal_sasl_state;
      answer(rs.api_key, rs.version, kafka_relay::encode_response(resp, rs.version, rs.correlation_id));
      return;
    }
    if (front.cuts_done < front.options.cut_handshake_connections) {
      ++front.cuts_done;
      front.count([](auto& n) { ++n.cut_handshakes; });
      close();
      return;
    }
    // A second handshake in one exchange, or re-authentication with v0 (which cannot carry it).
    if (sasl || (authenticated && rs.version == 0)) {
      fail_authentication();
      close();
      return;
    }
    const auto& enabled = front.options.sasl_mechanisms;
    if (std::find(enabled.begin(), enabled.end(), req.mechanism) == enabled.end()) {
      fail_authentication();
      resp.error_code = err_unsupported_sasl_mechanism;
      answer(rs.api_key, rs.version, kafka_relay::encode_response(resp, rs.version, rs.correlation_id), true);
      return;
    }
    sasl.emplace(front, req.mechanism);
    raw_tokens = rs.version == 0;
    answer(rs.api_key, rs.version, kafka_relay::encode_response(resp, rs.version, rs.correlation_id));
  }

  // Records a completed exchange; returns an error text if it may not complete.
  std::optional<std::string> complete(std::int64_t& lifetime_ms) {
    const bool reauth = authenticated;
    if (reauth && sasl->principal() != principal) {
      return "Cannot change principals during re-authentication from " + principal + " to " + sasl->principal();
    }
    lifetime_ms = front.options.session_lifetime_ms;
    if (lifetime_ms > 0 && sasl->credential_expiry_ms() > 0) {
      const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      lifetime_ms = std::max<std::int64_t>(0, std::min(lifetime_ms, sasl->credential_expiry_ms() - now_ms));
    }
    session_expiry = lifetime_ms > 0 ? steady::now() + std::chrono::milliseconds(lifetime_ms) : steady::time_point::max();
    authenticated = true;
    principal = sasl->principal();
    front.count([&](auto& n) {
      ++(reauth ? n.reauthentications : n.authentications);
      ++n.authentications_by_principal[principal];
      ++n.authentications_by_mechanism[sasl->mechanism()];
    });
    sasl.reset();
    return std::nullopt;
  }

  void on_authenticate(const bytes& frame, const kafka_relay::request_start& rs) {
    protocol::sasl_authenticate_request req;
    if (!sasl_enabled() || !sasl || !kafka_relay::decode_request(frame, rs.version, req)) {
      fail_authentication();
      close();
      return;
    }
    protocol::sasl_authenticate_response resp;
    auto r = sasl->step(req.auth_bytes);
    std::int64_t lifetime_ms = 0;
    if (r.kind == sasl_authenticator::outcome::success) {
      if (auto err = complete(lifetime_ms)) r = {sasl_authenticator::outcome::failure, {}, *err};
    }
    if (r.kind == sasl_authenticator::outcome::failure) {
      fail_authentication();
      resp.error_code = err_sasl_authentication_failed;
      resp.error_message = r.error;
      answer(rs.api_key, rs.version, kafka_relay::encode_response(resp, rs.version, rs.correlation_id), true);
      return;
    }
    resp.auth_bytes = std::move(r.out);
    if (rs.version >= 1) resp.session_lifetime_ms = lifetime_ms;
    answer(rs.api_key, rs.version, kafka_relay::encode_response(resp, rs.version, rs.correlation_id));
  }

  // After SaslHandshake v0: raw tokens both ways; a failure closes the connection unanswered.
  void on_raw_token(const bytes& frame) {
    auto r = sasl->step(frame);
    std::int64_t lifetime_ms = 0;
    if (r.kind == sasl_authenticator::outcome::success) {
      if (complete(lifetime_ms)) r.kind = sasl_authenticator::outcome::failure;
      raw_tokens = false;
    }
    if (r.kind == sasl_authenticator::outcome::failure) {
      fail_authentication();
      close();
      return;
    }
    answer(-1, 0, std::move(r.out));
  }
};

awaitable<void> secure_front::impl::accept_loop(listener& l) {
  try {
    for (;;) {
      tcp::socket s = co_await l.acceptor.async_accept(use_awaitable);
      if (stopped) co_return;
      count([](auto& n) { ++n.connections_accepted; });
      s.set_option(tcp::no_delay(true));
      auto c = std::make_shared<connection>(*this, l, std::move(s));
      std::erase_if(connections, [](const auto& w) { return w.expired(); });
      connections.push_back(c);
      asio::co_spawn(io, connection::run(c), asio::detached);
    }
  } catch (const std::exception&) {
  }
}

bool secure_front::gssapi_available() {
  return KGROUP_TEST_GSSAPI != 0;
}

secure_front::secure_front(const mock_cluster& cluster, secure_front_options options)
    : secure_front(
          [&cluster] {
            std::vector<broker_address> up;
            for (std::int32_t id = 1; id <= cluster.broker_count(); ++id) up.push_back(cluster.address_of(id));
            return up;
          }(),
          std::move(options)) {}

secure_front::secure_front(const std::vector<broker_address>& upstream, secure_front_options options)
    : impl_(std::make_unique<impl>()) {
  impl& f = *impl_;
  f.options = std::move(options);
  static const std::vector<std::string> known = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                                                 "GSSAPI"};
  for (const auto& m : f.options.sasl_mechanisms) {
    if (std::find(known.begin(), known.end(), m) == known.end()) throw std::runtime_error("secure_front: unknown SASL mechanism " + m);
    if (m == "GSSAPI") {
#if KGROUP_TEST_GSSAPI
      if (f.options.gssapi_keytab.empty())
        throw std::runtime_error("secure_front: GSSAPI needs gssapi_keytab");
      gss_key_value_element_desc element{"keytab", f.options.gssapi_keytab.c_str()};
      gss_key_value_set_desc store{1, &element};
      OM_uint32 minor = 0;
      const OM_uint32 major = gss_acquire_cred_from(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, GSS_C_NO_OID_SET,
                                                    GSS_C_ACCEPT, &store, &f.gss_acceptor, nullptr, nullptr);
      if (GSS_ERROR(major))
        throw std::runtime_error("secure_front: GSSAPI acceptor: " + gss_text(major, minor));
#else
      throw std::runtime_error("secure_front: GSSAPI needs a build with MIT Kerberos");
#endif
    }
    if (m.rfind("SCRAM-", 0) == 0) {
      auto& creds = f.scram[m];
      for (const auto& [user, password] : f.options.users) creds[user] = make_scram_credential(m, password);
    }
  }
  if (f.options.tls) {
    const test_pki& pki = test_pki::get();
    const cert_and_key& server = f.options.certificate == front_certificate::expired      ? pki.expired_broker
                                 : f.options.certificate == front_certificate::wrong_name ? pki.wrong_name_broker
                                 : f.options.certificate == front_certificate::untrusted  ? pki.untrusted_broker
                                                                                           : pki.broker;
    auto& ctx = f.tls_context;
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                    asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    ctx.use_certificate_chain(asio::buffer(server.cert_pem));
    ctx.use_private_key(asio::buffer(server.key_pem), asio::ssl::context::pem);
    SSL_CTX* native = ctx.native_handle();
    SSL_CTX_set_min_proto_version(native, f.options.tls_versions == front_tls_versions::tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(native, f.options.tls_versions == front_tls_versions::tls12_only ? TLS1_2_VERSION : TLS1_3_VERSION);
    if (f.options.require_client_certificate) {
      ctx.add_certificate_authority(asio::buffer(pki.ca.cert_pem));
      ctx.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
  }
  for (const broker_address& up : upstream) {
    auto l = std::make_unique<impl::listener>(f.io);
    l->upstream = tcp::endpoint(asio::ip::make_address(up.host), up.port);
    l->acceptor.open(tcp::v4());
    l->acceptor.set_option(tcp::acceptor::reuse_address(true));
    l->acceptor.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    l->acceptor.listen();
    l->port = l->acceptor.local_endpoint().port();
    f.port_map[up.port] = l->port;
    f.listeners.push_back(std::move(l));
  }
  for (auto& l : f.listeners) asio::co_spawn(f.io, f.accept_loop(*l), asio::detached);
  f.thread = std::thread([&f] { f.io.run(); });
}

secure_front::~secure_front() { stop(); }

std::string secure_front::bootstrap_servers() const {
  std::string out;
  for (const auto& l : impl_->listeners) {
    out += (out.empty() ? "" : ",") + impl_->options.advertised_host + ":" + std::to_string(l->port);
  }
  return out;
}

std::uint16_t secure_front::port_of(std::int32_t broker_id) const {
  return impl_->listeners.at(static_cast<std::size_t>(broker_id - 1))->port;
}

const secure_front_options& secure_front::options() const { return impl_->options; }

secure_front_counters secure_front::counters() const {
  std::lock_guard lock(impl_->counters_mutex);
  return impl_->counters;
}

void secure_front::stop() {
  impl& f = *impl_;
  if (!f.thread.joinable()) return;
  std::promise<void> closed;
  asio::post(f.io, [&f, &closed] {
    f.stopped = true;
    boost::system::error_code ignored;
    for (auto& l : f.listeners) l->acceptor.close(ignored);
    for (auto& w : f.connections) {
      if (auto c = w.lock()) c->close();
    }
    closed.set_value();
  });
  closed.get_future().wait();
  f.io.stop();
  f.thread.join();
}

}  // namespace kgroup::test
