#include "security/oauth.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "base/base64.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "security/boost_url.hpp"

namespace kgroup::security {

namespace {

bool base64url_decode(std::string_view text, std::string& out) {
  std::vector<std::uint8_t> bytes;
  if (!base::base64url_decode(text, bytes)) return false;
  out.assign(bytes.begin(), bytes.end());
  return true;
}

bool alpha_key(std::string_view k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
}

// A number of seconds from JSON (integer, float or numeric string), within [0, 10^12]: larger
// values (and garbage) cannot overflow what is computed from them.
std::int64_t json_seconds(const boost::json::value& v) {
  constexpr std::int64_t cap = 1'000'000'000'000;
  if (v.is_int64()) return std::clamp<std::int64_t>(v.get_int64(), 0, cap);
  if (v.is_uint64()) return static_cast<std::int64_t>(std::min<std::uint64_t>(v.get_uint64(), cap));
  if (v.is_double()) {
    const double d = v.get_double();
    return d > 0 && d < static_cast<double>(cap) ? static_cast<std::int64_t>(d) : (d >= static_cast<double>(cap) ? cap : 0);
  }
  if (v.is_string()) {
    std::int64_t n = 0;
    const auto str = v.get_string();
    const auto [p, ec] = std::from_chars(str.data(), str.data() + str.size(), n);
    if (ec == std::errc::result_out_of_range) return cap;
    if (ec != std::errc{} || p != str.data() + str.size()) return 0;
    return std::clamp<std::int64_t>(n, 0, cap);
  }
  return 0;
}

std::string base_escape(std::string_view s) {
  return detail::escape_nonprintable(s);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

bool parse_unsecured_config(std::string_view text, unsecured_token_config& out, std::string& error) {
  out = {};
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size()) break;
    std::size_t end = i;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    const std::string_view part = text.substr(i, end - i);
    i = end;
    const auto eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = "sasl.oauthbearer.config: expected key=value parts (principal=..., scope=..., lifeSeconds=..., "
              "extension_NAME=...)";
      return false;
    }
    const std::string_view key = part.substr(0, eq);
    const std::string_view value = part.substr(eq + 1);
    if (key == "principal") {
      out.principal = std::string(value);
    } else if (key == "scope") {
      out.scope = std::string(value);
    } else if (key == "lifeSeconds") {
      std::int64_t n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || p != value.data() + value.size() || n <= 0 || n > 10LL * 366 * 24 * 3600) {
        error = "sasl.oauthbearer.config: lifeSeconds must be a positive number of seconds (at most ten years)";
        return false;
      }
      out.life_seconds = n;
    } else if (key.rfind("extension_", 0) == 0 && alpha_key(key.substr(10)) && key.substr(10) != "auth") {
      if (!valid_extension(key.substr(10), value)) {
        error = "sasl.oauthbearer.config: the value of '" + std::string(key) +
                "' must be printable ASCII (RFC 7628, KIP-342)";
        return false;
      }
      out.extensions[std::string(key.substr(10))] = std::string(value);
    } else {
      error = "sasl.oauthbearer.config: unknown part '" + std::string(key) + "'";
      return false;
    }
  }
  if (out.principal.empty()) {
    error = "sasl.oauthbearer.config: principal=NAME is required";
    return false;
  }
  // The claims go into JSON as they are: printable ASCII only (a test token's names).
  const auto printable = [](const std::string& v) {
    return std::all_of(v.begin(), v.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  };
  if (!printable(out.principal) || !printable(out.scope)) {
    error = "sasl.oauthbearer.config: principal and scope must be printable ASCII";
    return false;
  }
  return true;
}

oauth_token make_unsecured_token(const unsecured_token_config& cfg, std::chrono::system_clock::time_point now) {
  const std::int64_t iat = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const std::int64_t exp = iat + cfg.life_seconds;
  boost::json::object payload{{"sub", cfg.principal}, {"iat", iat}, {"exp", exp}};
  if (!cfg.scope.empty()) payload["scope"] = cfg.scope;
  oauth_token t;
  const boost::json::object header{{"alg", "none"}};
  t.value = base::base64url_encode(base::to_json(header)) + "." +
            base::base64url_encode(base::to_json(payload)) + ".";
  t.expires_at = std::chrono::system_clock::time_point(std::chrono::seconds(exp));
  t.principal = cfg.principal;
  t.extensions = cfg.extensions;
  return t;
}

bool valid_extension(std::string_view key, std::string_view value) {
  const auto value_char = [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 0x21 && c <= 0x7e) || c == ' ' || c == '\t' || c == '\r' || c == '\n';
  };
  return alpha_key(key) && key != "auth" && !value.empty() && std::all_of(value.begin(), value.end(), value_char);
}

bool check_oauthbearer_token(const oauth_token& token, std::string& error) {
  const auto vchar = [](char ch) { return static_cast<unsigned char>(ch) >= 0x21 && static_cast<unsigned char>(ch) <= 0x7e; };
  if (token.value.empty() || !std::all_of(token.value.begin(), token.value.end(), vchar)) {
    error = "the OAUTHBEARER token is empty or has characters a bearer token cannot have (RFC 6750: printable ASCII "
            "without spaces)";
    return false;
  }
  for (const auto& [k, v] : token.extensions) {
    if (!valid_extension(k, v)) {
      error = "the OAUTHBEARER extension '" + base_escape(k) +
              "' is not allowed: names are letters (not 'auth'), values printable ASCII, space, tab, CR or LF "
              "(RFC 7628, KIP-342)";
      return false;
    }
  }
  return true;
}

bool parse_extensions(std::string_view text, std::map<std::string, std::string>& out, std::string& error) {
  out.clear();
  while (!trim(text).empty()) {
    const auto comma = text.find(',');
    const std::string_view part = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    const std::string_view key = eq == std::string_view::npos ? part : part.substr(0, eq);
    if (eq == std::string_view::npos || !valid_extension(key, part.substr(eq + 1))) {
      error = "sasl.oauthbearer.extensions: each extension is NAME=VALUE with an alphabetic NAME other than auth and a "
              "VALUE of printable ASCII, space, tab, CR or LF (RFC 7628, KIP-342)";
      return false;
    }
    out[std::string(key)] = std::string(part.substr(eq + 1));
  }
  return true;
}

std::string oauthbearer_client_message(const oauth_token& token) {
  std::string m = "n,,\x01" "auth=Bearer " + token.value + "\x01";
  for (const auto& [k, v] : token.extensions) m += k + "=" + v + "\x01";
  return m + "\x01";
}

bool parse_jaas(std::string_view text, jaas_config& out, std::string& error) {
  out = {};
  text = trim(text);
  std::size_t i = 0;
  const auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  const auto word = [&] {
    const std::size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != '=' && text[i] != ';') ++i;
    return text.substr(start, i - start);
  };
  out.login_module = std::string(word());
  skip_space();
  const std::string_view flag = word();
  if (out.login_module.empty() ||
      (flag != "required" && flag != "requisite" && flag != "sufficient" && flag != "optional")) {
    error = "sasl.jaas.config: expected '<LoginModule class> required key=\"value\" ...;'";
    return false;
  }
  for (;;) {
    skip_space();
    if (i >= text.size()) break;
    if (text[i] == ';') {
      ++i;
      skip_space();
      if (i != text.size()) {
        error = "sasl.jaas.config: only one login module is supported";
        return false;
      }
      break;
    }
    const std::string key(word());
    skip_space();
    if (key.empty() || i >= text.size() || text[i] != '=') {
      error = "sasl.jaas.config: expected key=value after the control flag";
      return false;
    }
    ++i;
    skip_space();
    std::string value;
    // Java's JAAS parser (a StreamTokenizer) takes both quote characters; Confluent Cloud's
    // templates use single quotes.
    if (i < text.size() && (text[i] == '"' || text[i] == '\'')) {
      const char quote = text[i++];
      bool closed = false;
      while (i < text.size()) {
        const char c = text[i++];
        if (c == '\\' && i < text.size()) {
          value += text[i++];
        } else if (c == quote) {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) {
        error = "sasl.jaas.config: unterminated quoted value of option '" + key + "'";
        return false;
      }
    } else {
      value = std::string(word());
    }
    out.options[key] = std::move(value);
  }
  return true;
}

std::chrono::system_clock::time_point refresh_time(std::chrono::system_clock::time_point obtained,
                                                   std::chrono::system_clock::time_point expires, double factor,
                                                   double jitter) {
  using namespace std::chrono;
  const auto life = duration_cast<milliseconds>(expires - obtained);
  auto at = obtained + milliseconds(static_cast<std::int64_t>(static_cast<double>(life.count()) *
                                                              (factor + 0.05 * jitter)));
  at = std::min(at, expires - seconds(10));
  return std::max(at, obtained + seconds(1));
}

bool read_jwt_claims(std::string_view jwt, std::string& sub, std::int64_t& exp) {
  sub.clear();
  exp = 0;
  const auto dot1 = jwt.find('.');
  const auto dot2 = dot1 == std::string_view::npos ? dot1 : jwt.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return false;
  std::string payload;
  if (!base64url_decode(jwt.substr(dot1 + 1, dot2 - dot1 - 1), payload)) return false;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(payload, ec);
  if (ec || !v.is_object()) return false;
  const auto& o = v.get_object();
  if (const auto* s = o.if_contains("sub"); s != nullptr && s->is_string()) sub = std::string(s->get_string());
  if (const auto* e = o.if_contains("exp"); e != nullptr) exp = json_seconds(*e);
  return true;
}

bool parse_https_url(const std::string& url, std::string& host, std::string& port, std::string& target,
                     std::string& error) {
  // The messages never quote the URL: it may carry credentials.
  const std::string expected = "expected https://host[:port][/path][?query]";
  const auto parsed = boost::urls::parse_uri(url);
  if (!parsed) {
    error = "sasl.oauthbearer.token.endpoint.url is not a valid URL (RFC 3986); " + expected;
    return false;
  }
  const boost::urls::url_view& u = *parsed;
  // After an authority the path is empty or starts with '/' (RFC 3986 3.3); Boost.URL 1.81 lets
  // "https://[::1]x/token" through with the path "x/token".
  if (u.has_authority() && !u.encoded_path().empty() && u.encoded_path().front() != '/') {
    error = "sasl.oauthbearer.token.endpoint.url is not a valid URL (RFC 3986); " + expected;
    return false;
  }
  if (u.scheme_id() != boost::urls::scheme::https) {
    error = "sasl.oauthbearer.token.endpoint.url must be an https:// URL";
    return false;
  }
  if (u.has_userinfo()) {
    error = "sasl.oauthbearer.token.endpoint.url must not carry credentials (use sasl.oauthbearer.client.id/secret)";
    return false;
  }
  if (u.host_type() == boost::urls::host_type::ipvfuture || u.encoded_host().empty()) {
    error = "sasl.oauthbearer.token.endpoint.url: no host name or IP address; " + expected;
    return false;
  }
  port = "443";
  if (u.has_port()) {
    unsigned number = 0;
    const std::string_view digits(u.port().data(), u.port().size());
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || number == 0 ||
        number > 65535) {
      error = "sasl.oauthbearer.token.endpoint.url: the port must be 1-65535; " + expected;
      return false;
    }
    port = std::to_string(number);
  }
  host = u.host_address();  // percent-decoded; an IPv6 address without its brackets
  // The request target is the path and query as written (a fragment is never sent, RFC 9110 7.1).
  const auto resource = u.encoded_target();
  target.assign(resource.data(), resource.size());
  if (target.empty() || target.front() != '/') target.insert(0, "/");  // "https://idp?x": "/?x"
  return true;
}

bool parse_token_response(const std::string& body, const std::string& client_id,
                          std::chrono::system_clock::time_point now, security::oauth_token& out, std::string& error) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) {
    error = "the token endpoint's answer is not a JSON object";
    return false;
  }
  const auto& o = v.get_object();
  const auto* token = o.if_contains("access_token");
  if (token == nullptr || !token->is_string() || token->get_string().empty()) {
    error = "the token endpoint's answer has no access_token";
    return false;
  }
  out = {};
  out.value = std::string(token->get_string());
  std::string sub;
  std::int64_t exp = 0;
  (void)read_jwt_claims(out.value, sub, exp);  // opaque tokens are fine too
  std::int64_t expires_in = 0;
  if (const auto* e = o.if_contains("expires_in"); e != nullptr) expires_in = json_seconds(*e);
  // Lifetimes beyond ten years are read as ten years (and cannot overflow the clock).
  constexpr std::int64_t ten_years_s = 10LL * 366 * 24 * 3600;
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (expires_in > 0) {
    out.expires_at = now + std::chrono::seconds(std::min(expires_in, ten_years_s));
  } else if (exp > 0) {
    out.expires_at = std::chrono::system_clock::time_point(std::chrono::seconds(std::min(exp, now_s + ten_years_s)));
  } else {
    error = "the token endpoint's answer says neither expires_in nor an exp claim: the token's lifetime is unknown";
    return false;
  }
  out.principal = sub.empty() ? client_id : sub;
  return true;
}

std::string token_error_reason(const std::string& body) {
  std::string why;
  boost::system::error_code ec;
  const auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return why;
  const auto& o = v.get_object();
  if (const auto* e = o.if_contains("error"); e != nullptr && e->is_string()) why = std::string(e->get_string());
  if (const auto* d = o.if_contains("error_description"); d != nullptr && d->is_string()) {
    why += (why.empty() ? "" : ": ") + std::string(d->get_string());
  }
  // The identity provider's words go into errors and logs: no control characters.
  return base_escape(why.substr(0, 200));
}

}  // namespace kgroup::security
