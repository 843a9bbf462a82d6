#include "kgroup/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "base/log.hpp"
#include "kgroup/error.hpp"

namespace kgroup {

namespace {

constexpr std::int64_t i32max = std::numeric_limits<std::int32_t>::max();

// Defaults and meanings follow the Java consumer unless noted. One key per line, as a table.
// clang-format off
const std::vector<ConfigKey> key_table = {
    {"bootstrap.servers", "", "list", 0, 0, "", "host:port pairs used to discover the cluster"},
    {"client.id", "kgroup", "string", 0, 0, "", "name sent with every request, for broker logs and quotas"},
    {"client.rack", "", "string", 0, 0, "", "rack of this client, for rack-aware assignment"},
    {"group.id", "", "string", 0, 0, "", "consumer group to join"},
    {"group.instance.id", "", "string", 0, 0, "", "static membership id (KIP-345); empty = dynamic member"},
    {"session.timeout.ms", "45000", "int", 1, i32max, "", "coordinator removes a member it has not heard from for this long"},
    {"heartbeat.interval.ms", "3000", "int", 1, i32max, "", "time between heartbeats; below session.timeout.ms"},
    {"max.poll.interval.ms", "300000", "int", 1, i32max, "", "a member that does not call poll() for this long leaves the group"},
    {"max.poll.records", "500", "int", 1, i32max, "", "most records one poll() returns"},
    {"partition.assignment.strategy", "range,cooperative-sticky", "list", 0, 0, "", "assignors in preference order"},
    // KIP-848: "consumer" runs net/consumer_group_driver; validate() refuses the
    // classic-only keys with it.
    {"group.protocol", "classic", "enum", 0, 0, "classic,consumer", "group membership protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848)"},
    {"share.acknowledgement.mode", "implicit", "enum", 0, 0, "implicit,explicit", "ShareConsumer: implicit accepts every record of a poll() at the next one; explicit requires acknowledge() of each"},
    {"group.remote.assignor", "", "string", 0, 0, "", "group.protocol=consumer: the broker-side assignor (uniform, range); empty = the broker's default"},
    {"retry.backoff.ms", "100", "int", 0, i32max, "", "wait before retrying a failed request"},
    {"retry.backoff.max.ms", "1000", "int", 0, i32max, "", "cap of the exponential retry backoff"},
    {"request.timeout.ms", "30000", "int", 1, i32max, "", "a request without response after this long fails and its connection is closed"},
    {"default.api.timeout.ms", "60000", "int", 0, i32max, "", "timeout of blocking calls that take no timeout argument"},
    {"reconnect.backoff.ms", "50", "int", 0, i32max, "", "initial wait before reconnecting to a broker"},
    {"reconnect.backoff.max.ms", "1000", "int", 0, i32max, "", "cap of the exponential reconnect backoff (with 20% jitter)"},
    {"socket.connection.setup.timeout.ms", "10000", "int", 1, i32max, "", "a connection attempt (resolve, connect, ApiVersions) that takes longer fails"},
    {"metadata.max.age.ms", "300000", "int", 0, i32max, "", "metadata is refreshed at least this often"},
    // Not a Java key (Java bounds responses by fetch sizes only); librdkafka's name and default.
    {"receive.message.max.bytes", "100000000", "int", 1024, i32max, "", "largest response frame accepted; a larger one closes the connection"},
    {"enable.auto.commit", "true", "bool", 0, 0, "", "commit positions periodically and before revocation"},
    {"auto.commit.interval.ms", "5000", "int", 0, i32max, "", "interval of automatic commits"},
    {"auto.offset.reset", "latest", "enum", 0, 0, "earliest,latest,none", "where to start without a committed offset"},
    {"fetch.min.bytes", "1", "int", 0, i32max, "", "broker waits for this much data before answering a Fetch"},
    {"fetch.max.bytes", "52428800", "int", 0, i32max, "", "most data one Fetch response may carry"},
    {"fetch.max.wait.ms", "500", "int", 0, i32max, "", "longest a broker waits for fetch.min.bytes"},
    {"max.partition.fetch.bytes", "1048576", "int", 0, i32max, "", "most data per partition in one Fetch"},
    {"isolation.level", "read_uncommitted", "enum", 0, 0, "read_uncommitted,read_committed", "whether records of aborted transactions are returned"},
    {"allow.auto.create.topics", "true", "bool", 0, 0, "", "let Metadata requests auto-create subscribed topics"},
    {"check.crcs", "true", "bool", 0, 0, "", "verify record batch CRCs"},
    // librdkafka's name (Java has no byte bound on prefetched data): the most fetched bytes kept
    // waiting for poll(), whatever the application's pace.
    {"queued.max.messages.kbytes", "65536", "int", 1, 2097151, "", "bound of prefetched, not yet polled data (KiB)"},
    {"exclude.internal.topics", "true", "bool", 0, 0, "", "regex subscriptions never match internal topics"},
    // kgroup's own key: where rebalance listener callbacks run. "poll" (default): on the user's
    // thread inside poll()/close()/unsubscribe(). "heartbeat": on the background thread, so a
    // rebalance never waits for the poll loop; callbacks must then synchronise with the
    // application themselves and may call only Consumer::assignment(), group_metadata() and wakeup().
    {"rebalance.listener.thread", "poll", "enum", 0, 0, "poll,heartbeat", "where rebalance listener callbacks run"},
    // kgroup's own keys (librdkafka has statistics.interval.ms with the same meaning).
    {"statistics.interval.ms", "0", "int", 0, 86400000, "", "interval of the statistics callback (Consumer::set_statistics_callback); 0 = off"},
    // Security: Java's names and defaults; librdkafka's where Java has none.
    {"security.protocol", "PLAINTEXT", "enum", 0, 0, "PLAINTEXT,SSL,SASL_PLAINTEXT,SASL_SSL", "how connections to brokers are secured"},
    {"ssl.ca.location", "", "string", 0, 0, "", "CA certificate file or directory that signs the brokers' certificates; empty = the system trust store"},
    {"ssl.ca.pem", "", "string", 0, 0, "", "CA certificate(s) as PEM text (instead of ssl.ca.location)"},
    {"ssl.certificate.location", "", "string", 0, 0, "", "client certificate (chain) file, PEM, for mutual TLS"},
    {"ssl.certificate.pem", "", "string", 0, 0, "", "client certificate (chain) as PEM text"},
    {"ssl.key.location", "", "string", 0, 0, "", "client private key file, PEM"},
    {"ssl.key.pem", "", "string", 0, 0, "", "client private key as PEM text"},
    {"ssl.key.password", "", "string", 0, 0, "", "password of an encrypted client private key"},
    {"ssl.endpoint.identification.algorithm", "https", "enum", 0, 0, "https,none", "https: the broker's certificate must name the address connected to; none: not checked"},
    {"sasl.mechanism", "GSSAPI", "enum", 0, 0, "GSSAPI,PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", "SASL mechanism (GSSAPI, Java's default, is not implemented: choose another)"},
    {"sasl.username", "", "string", 0, 0, "", "SASL user for PLAIN and SCRAM"},
    {"sasl.password", "", "string", 0, 0, "", "SASL password for PLAIN and SCRAM"},
    {"sasl.jaas.config", "", "string", 0, 0, "", "Java's JAAS line: PlainLoginModule/ScramLoginModule username and password, OAuthBearerLoginModule options"},
    {"sasl.oauthbearer.method", "default", "enum", 0, 0, "default,oidc", "default: token provider callback or an unsecured token (sasl.oauthbearer.config); oidc: client credentials from the token endpoint"},
    {"sasl.oauthbearer.config", "", "string", 0, 0, "", "unsecured token for tests: principal=NAME [scope=S] [lifeSeconds=N] [extension_K=V]"},
    {"sasl.oauthbearer.token.endpoint.url", "", "string", 0, 0, "", "OIDC token endpoint (https://...)"},
    {"sasl.oauthbearer.client.id", "", "string", 0, 0, "", "OIDC client id"},
    {"sasl.oauthbearer.client.secret", "", "string", 0, 0, "", "OIDC client secret"},
    {"sasl.oauthbearer.scope", "", "string", 0, 0, "", "OIDC scope requested"},
    {"https.ca.location", "", "string", 0, 0, "", "CA file for the OIDC token endpoint's certificate; empty = the system trust store"},
    {"sasl.oauthbearer.extensions", "", "string", 0, 0, "", "SASL extensions sent with the token: key=value,..."},
    {"sasl.login.refresh.window.factor", "0.8", "string", 0, 0, "", "a token is refreshed after this fraction of its lifetime (0.5 to 1.0)"},
    {"observability.http.listen", "", "string", 0, 0, "", "host:port of the embedded HTTP endpoint (/metrics, /status, /group, dashboard); empty = off, port 0 = any free port"},
    {"observability.http.allowed.hosts", "", "list", 0, 0, "", "Host header names the HTTP endpoint answers besides its bound address (and localhost on loopback); others get 421 (DNS rebinding)"},
};
// clang-format on

const ConfigKey* find_key(std::string_view name) {
  auto it = std::find_if(key_table.begin(), key_table.end(), [&](const ConfigKey& k) { return k.name == name; });
  return it == key_table.end() ? nullptr : &*it;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(make_error_code(client_errc::invalid_config), msg);
}

const ConfigKey& require_key(std::string_view name) {
  if (const ConfigKey* k = find_key(name)) return *k;
  const ConfigKey* best = nullptr;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& k : key_table) {
    std::size_t d = edit_distance(name, k.name);
    if (d < best_d) {
      best_d = d;
      best = &k;
    }
  }
  if (best != nullptr && best_d <= std::max<std::size_t>(3, name.size() / 4)) {
    invalid(fmt::format("unknown configuration key '{}' (did you mean '{}'?)", name, best->name));
  }
  invalid(fmt::format("unknown configuration key '{}'", name));
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(',', start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Java's assignor classes (fully qualified or not) for kgroup's built-in assignors.
std::string builtin_assignor(const std::string& name) {
  static const std::pair<std::string_view, std::string_view> classes[] = {
      {"RangeAssignor", "range"},
      {"RoundRobinAssignor", "roundrobin"},
      {"StickyAssignor", "sticky"},
      {"CooperativeStickyAssignor", "cooperative-sticky"},
  };
  const auto dot = name.rfind('.');
  const std::string_view simple = dot == std::string::npos ? std::string_view(name) : std::string_view(name).substr(dot + 1);
  for (const auto& [cls, builtin] : classes) {
    if (simple == cls && (dot == std::string::npos || name.rfind("org.apache.kafka.clients.consumer.", 0) == 0))
      return std::string(builtin);
  }
  return name;
}

// The value as stored: booleans and enum values in the table's spelling whatever their case,
// Java assignor class names as the built-ins' names.
std::string normalize(const ConfigKey& k, const std::string& value) {
  if (k.type == "bool") {
    const auto v = lower(value);
    return v == "true" || v == "false" ? v : value;
  }
  if (k.type == "enum") {
    for (const auto& allowed : split_list(k.allowed)) {
      if (lower(allowed) == lower(value)) return allowed;
    }
    return value;
  }
  if (k.name == "partition.assignment.strategy") {
    std::string out;
    for (const auto& item : split_list(value)) out += (out.empty() ? "" : ",") + builtin_assignor(item);
    return out;
  }
  return value;
}

// Keys of the Java clients (consumer, producer, admin, common) that kgroup does not use. A
// properties file written for another client may carry them: they are skipped with a warning.
bool foreign_key(std::string_view key) {
  static const std::string_view keys[] = {
      "key.deserializer", "value.deserializer", "key.serializer", "value.serializer", "interceptor.classes",
      "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
      "auto.include.jmx.reporter", "enable.metrics.push", "client.dns.lookup", "connections.max.idle.ms",
      "send.buffer.bytes", "receive.buffer.bytes", "socket.connection.setup.timeout.max.ms",
      "security.providers", "internal.leave.group.on.close", "internal.throw.on.fetch.stable.offset.unsupported",
      "acks", "linger.ms", "batch.size", "buffer.memory", "compression.type",
      "max.block.ms", "max.in.flight.requests.per.connection", "delivery.timeout.ms", "enable.idempotence",
      "transactional.id", "transaction.timeout.ms", "partitioner.class", "partitioner.ignore.keys",
      "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms", "max.request.size",
      "retries", "metadata.max.idle.ms", "bootstrap.controllers"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

bool secret_key(std::string_view key) {
  // ssl.key.pem is a private key; sasl.oauthbearer.config may carry extensions with secrets.
  static const std::string_view marks[] = {"password", "secret", "token", "jaas", "credential", "key.pem",
                                           "oauthbearer.config", "oauthbearer.extensions"};
  return std::any_of(std::begin(marks), std::end(marks),
                     [&](std::string_view m) { return key.find(m) != std::string_view::npos; });
}

// Appends the UTF-8 encoding of `cp` (a \uXXXX escape; surrogates are kept as they come).
void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

struct property {
  std::string key;
  std::string value;
  int line = 0;  // where the logical line starts
};

bool blank(char c) { return c == ' ' || c == '\t' || c == '\f'; }

// Java's Properties.load rules, for UTF-8 text.
std::vector<property> parse_properties(std::string_view text) {
  // Natural lines, joined into logical lines where one ends with an odd number of backslashes.
  std::vector<property> out;
  std::size_t pos = 0;
  int line_no = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= text.size()) return false;
    std::size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    line = text.substr(pos, end - pos);
    // A line ends with \n, \r or \r\n.
    pos = end == text.size() ? end : end + (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n' ? 2 : 1);
    ++line_no;
    return true;
  };
  std::string_view natural;
  while (next_line(natural)) {
    std::size_t i = 0;
    while (i < natural.size() && blank(natural[i])) ++i;
    if (i == natural.size() || natural[i] == '#' || natural[i] == '!') continue;
    const int start_line = line_no;
    std::string logical;
    std::string_view rest = natural.substr(i);
    for (;;) {
      std::size_t slashes = 0;
      while (slashes < rest.size() && rest[rest.size() - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) {
        logical.append(rest);
        break;
      }
      logical.append(rest.substr(0, rest.size() - 1));  // drop the continuation backslash
      std::string_view cont;
      if (!next_line(cont)) break;
      std::size_t j = 0;
      while (j < cont.size() && blank(cont[j])) ++j;
      rest = cont.substr(j);
    }
    // Key: up to the first unescaped '=', ':' or blank; then blanks, at most one '=' or ':', blanks.
    std::size_t k = 0;
    bool escaped = false;
    for (; k < logical.size(); ++k) {
      const char c = logical[k];
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '=' || c == ':' || blank(c)) {
        break;
      }
    }
    std::size_t v = k;
    while (v < logical.size() && blank(logical[v])) ++v;
    if (v < logical.size() && (logical[v] == '=' || logical[v] == ':')) ++v;
    while (v < logical.size() && blank(logical[v])) ++v;
    auto unescape = [start_line](std::string_view s) {
      // The four hex digits after the 'u' at s[n]; n is left on the last one.
      auto hex4 = [&s](std::size_t& n) {
        unsigned cp = 0;
        std::size_t digits = 0;
        while (digits < 4 && n + 1 < s.size() && std::isxdigit(static_cast<unsigned char>(s[n + 1]))) {
          const char h = s[n + 1];
          cp = cp * 16 + static_cast<unsigned>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          ++n;
          ++digits;
        }
        if (digits != 4) invalid("malformed \\uXXXX escape in a properties file");
        return cp;
      };
      std::string r;
      for (std::size_t n = 0; n < s.size(); ++n) {
        if (s[n] != '\\' || n + 1 == s.size()) {
          if (s[n] != '\\') r += s[n];
          continue;
        }
        const char e = s[++n];
        switch (e) {
          case 't':
            r += '\t';
            break;
          case 'n':
            r += '\n';
            break;
          case 'r':
            r += '\r';
            break;
          case 'f':
            r += '\f';
            break;
          case 'u': {
            // \u escapes are UTF-16 code units: a character above U+FFFF is a high surrogate
            // escape followed at once by a low one, and becomes one 4-byte UTF-8 sequence. Java
            // keeps a lone half as it is, in a String; UTF-8 has no form for it (encoding it
            // alone gives invalid UTF-8 a broker may refuse), so it is a config error, with the
            // line (docs/DESIGN.md, "Configuration").
            unsigned cp = hex4(n);
            const auto lone = [&](unsigned half) {
              invalid(
                  fmt::format("line {}: \\u{:04X} is half of a UTF-16 surrogate pair without its other half "
                              "(a character above U+FFFF is written as two escapes, high then low: "
                              "\\uD83D\\uDE00 for U+1F600)",
                              start_line, half));
            };
            if (cp >= 0xDC00 && cp <= 0xDFFF) lone(cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (n + 2 >= s.size() || s[n + 1] != '\\' || s[n + 2] != 'u') lone(cp);
              std::size_t m = n + 2;
              const unsigned low = hex4(m);
              if (low < 0xDC00 || low > 0xDFFF) lone(cp);
              n = m;
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(r, cp);
            break;
          }
          default:
            r += e;  // \\, \=, \:, \#, \!, \<space>, and any other character as itself
        }
      }
      return r;
    };
    out.push_back({unescape(std::string_view(logical).substr(0, k)), unescape(std::string_view(logical).substr(v)),
                   start_line});
  }
  return out;
}

void check_value(const ConfigKey& k, const std::string& value) {
  if (k.type == "int" || k.type == "long") {
    auto v = parse_int(value);
    if (!v) invalid(fmt::format("{}: '{}' is not an integer", k.name, value));
    if (*v < k.min || *v > k.max) {
      invalid(fmt::format("{}: {} is out of range [{}, {}]", k.name, *v, k.min, k.max));
    }
  } else if (k.type == "bool") {
    if (value != "true" && value != "false") invalid(fmt::format("{}: '{}' is not true or false", k.name, value));
  } else if (k.type == "enum") {
    auto allowed = split_list(k.allowed);
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      invalid(fmt::format("{}: '{}' is not one of {}", k.name, value, k.allowed));
    }
  }
}

}  // namespace

Config::Config(std::initializer_list<std::pair<std::string, std::string>> values) {
  for (const auto& [k, v] : values) set(k, v);
}

Config& Config::set(const std::string& key, const std::string& value) {
  const ConfigKey& k = require_key(key);
  const std::string stored = normalize(k, value);
  check_value(k, stored);
  values_[key] = stored;
  return *this;
}

Config Config::from_properties(std::string_view text, std::vector<std::string>* ignored) {
  Config c;
  std::vector<std::string> skipped;
  const auto props = parse_properties(text);
  std::string security = "PLAINTEXT";
  for (const auto& p : props) {
    if (p.key == "security.protocol") security = lower(p.value);
  }
  for (const auto& p : props) {
    // Java's key and trust stores (JKS, PKCS12) are not read: a secured connection without the
    // trust or identity the file asks for must not start, so they are an error, with the keys to
    // use instead.
    if (security != "plaintext" && find_key(p.key) == nullptr &&
        (p.key.rfind("ssl.truststore.", 0) == 0 || p.key.rfind("ssl.keystore.", 0) == 0)) {
      invalid(fmt::format("line {}: {}: Java key and trust stores are not supported; use ssl.ca.location "
                          "(trusted CAs, PEM) and ssl.certificate.location + ssl.key.location (client identity, PEM)",
                          p.line, p.key));
    }
    if (find_key(p.key) == nullptr &&
        (foreign_key(p.key) || p.key.rfind("ssl.", 0) == 0 || p.key.rfind("sasl.", 0) == 0)) {
      skipped.push_back(p.key);
      continue;
    }
    try {
      c.set(p.key, p.value);
    } catch (const Error& e) {
      invalid(fmt::format("line {}: {}", p.line, e.what()));
    }
  }
  if (!skipped.empty()) {
    std::string names;
    for (const auto& k : skipped) names += (names.empty() ? "" : ", ") + k;
    logger()->warn("configuration: {} key(s) of other Kafka clients ignored (supplied but not used by kgroup): {}",
                   skipped.size(), names);
  }
  if (ignored != nullptr) *ignored = std::move(skipped);
  return c;
}

Config Config::load(const std::string& path, std::vector<std::string>* ignored) {
  std::ifstream in(path, std::ios::binary);
  if (!in) invalid(fmt::format("cannot read the properties file '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) invalid(fmt::format("cannot read the properties file '{}'", path));
  try {
    return from_properties(text.str(), ignored);
  } catch (const Error& e) {
    invalid(fmt::format("{}: {}", path, e.what()));
  }
}

std::string Config::to_string() const {
  std::string out;
  for (const auto& [k, v] : values_) {
    out += (out.empty() ? "" : ", ") + k + "=" + (secret_key(k) ? std::string("[redacted]") : v);
  }
  return out;
}

std::string Config::get(std::string_view key) const {
  const ConfigKey& k = require_key(key);
  auto it = values_.find(key);
  return it != values_.end() ? it->second : std::string(k.default_value);
}

std::int64_t Config::get_int(std::string_view key) const {
  auto v = parse_int(get(key));
  if (!v) invalid(fmt::format("{}: not an integer", key));
  return *v;
}

bool Config::get_bool(std::string_view key) const { return get(key) == "true"; }

std::chrono::milliseconds Config::get_ms(std::string_view key) const {
  return std::chrono::milliseconds(get_int(key));
}

std::vector<std::string> Config::get_list(std::string_view key) const { return split_list(get(key)); }

bool Config::is_set(std::string_view key) const { return values_.find(key) != values_.end(); }

void Config::validate() const {
  auto servers = get_list("bootstrap.servers");
  if (servers.empty()) invalid("bootstrap.servers: required (host:port[,host:port...])");
  for (const auto& s : servers) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || !parse_int(std::string_view(s).substr(colon + 1))) {
      invalid(fmt::format("bootstrap.servers: '{}' is not host:port", s));
    }
  }
  if (get_int("heartbeat.interval.ms") >= get_int("session.timeout.ms")) {
    invalid(fmt::format("heartbeat.interval.ms ({}) must be lower than session.timeout.ms ({})",
                        get_int("heartbeat.interval.ms"), get_int("session.timeout.ms")));
  }
  if (get_int("reconnect.backoff.ms") > get_int("reconnect.backoff.max.ms")) {
    invalid("reconnect.backoff.ms must not exceed reconnect.backoff.max.ms");
  }
  if (get_int("retry.backoff.ms") > get_int("retry.backoff.max.ms")) {
    invalid("retry.backoff.ms must not exceed retry.backoff.max.ms");
  }
  {
    const std::string f = get("sasl.login.refresh.window.factor");
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (f.empty() || end != f.c_str() + f.size() || !(v >= 0.5 && v <= 1.0)) {
      invalid(fmt::format("sasl.login.refresh.window.factor: '{}' is not a number in [0.5, 1.0]", f));
    }
  }
  if (get("group.protocol") == "consumer") {
    // As Java: the keys of the classic protocol that the broker owns under KIP-848 are refused,
    // not ignored (a value the user relies on would silently not apply).
    static const std::pair<std::string_view, std::string_view> classic_only[] = {
        {"session.timeout.ms", "the broker sets the session timeout (its group.consumer.session.timeout.ms)"},
        {"heartbeat.interval.ms", "the broker sets the heartbeat interval (its group.consumer.heartbeat.interval.ms)"},
        {"partition.assignment.strategy",
         "the broker computes the assignment; choose its assignor with group.remote.assignor"},
    };
    for (const auto& [key, why] : classic_only) {
      if (is_set(key)) {
        invalid(fmt::format("{} cannot be set with group.protocol=consumer: {}; remove it or use group.protocol=classic",
                            key, why));
      }
    }
  } else if (!get("group.remote.assignor").empty()) {
    invalid("group.remote.assignor applies only with group.protocol=consumer (the broker's assignor); with "
            "group.protocol=classic the assignors are partition.assignment.strategy");
  }
  const std::string protocol = get("security.protocol");
  if (protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL") {
    const std::string mechanism = get("sasl.mechanism");
    if (mechanism == "GSSAPI") {
      invalid(fmt::format("sasl.mechanism=GSSAPI{}: Kerberos is not supported; set sasl.mechanism to PLAIN, "
                          "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
                          is_set("sasl.mechanism") ? "" : " (the default)"));
    }
  }
}

const std::vector<ConfigKey>& Config::keys() { return key_table; }

Config& Config::set_oauthbearer_token_provider(OAuthBearerTokenProvider provider) {
  if (provider) {
    token_provider_ = std::make_shared<const OAuthBearerTokenProvider>(std::move(provider));
  } else {
    token_provider_.reset();
  }
  return *this;
}

Config& Config::set_log_sink(std::shared_ptr<LogSink> sink) {
  log_sink_ = std::move(sink);
  return *this;
}

}  // namespace kgroup
