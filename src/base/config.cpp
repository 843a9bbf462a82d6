#include "kgroup/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "base/iso_duration.hpp"
#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "kgroup_build_config.hpp"

namespace kgroup {

namespace {

constexpr std::int64_t i32max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t i64max = std::numeric_limits<std::int64_t>::max();

// One key per line, as docs/configuration.md has one row per key.
// clang-format off
// Defaults and meanings follow the Java consumer unless noted.
const std::vector<ConfigKey> key_table = {
    {"bootstrap.servers", "", "list", 0, 0, "", "host:port pairs used to discover the cluster"},
    {"client.id", "", "string", 0, 0, "", "name sent with every request, for broker logs and quotas; empty: consumer-<group.id>-<n>, unique in the process, as Java"},
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
    // Java 4.x keys (values checked as Java checks them; issue 35): metadata recovery (item 1) and
    // the connection keys (item 2) are acted on; not_acted_on() says for which values of the
    // others kgroup does nothing yet, and a properties file that sets them says so once at info.
    {"metadata.recovery.strategy", "rebootstrap", "enum", 0, 0, "none,rebootstrap", "rebootstrap: go back to bootstrap.servers when no broker known from metadata can be reached, metadata is missing for metadata.recovery.rebootstrap.trigger.ms, or a broker asks; none: keep retrying the known brokers"},
    {"metadata.recovery.rebootstrap.trigger.ms", "300000", "long", 0, i64max, "", "rebootstrap when a metadata refresh has had no answer for this long"},
    {"client.dns.lookup", "use_all_dns_ips", "enum", 0, 0, "use_all_dns_ips,resolve_canonical_bootstrap_servers_only", "use_all_dns_ips: every connect resolves again and tries each address in turn; resolve_canonical_bootstrap_servers_only: bootstrap names become the canonical names of their addresses"},
    {"connections.max.idle.ms", "540000", "long", -1, i64max, "", "close connections with nothing in flight this long (reopened on use); -1 = never"},
    {"send.buffer.bytes", "131072", "int", -1, i32max, "", "socket send buffer (SO_SNDBUF); -1 = the OS default"},
    {"receive.buffer.bytes", "65536", "int", -1, i32max, "", "socket receive buffer (SO_RCVBUF); -1 = the OS default"},
    {"socket.connection.setup.timeout.max.ms", "30000", "long", 0, i64max, "", "cap of the growing connection setup timeout (not acted on yet: the timeout stays socket.connection.setup.timeout.ms)"},
    // librdkafka's key (Java sets SO_KEEPALIVE on every socket).
    {"socket.keepalive.enable", "false", "bool", 0, 0, "", "TCP keep-alive on broker connections (SO_KEEPALIVE)"},
    {"enable.metrics.push", "true", "bool", 0, 0, "", "push client metrics to brokers that ask for them (KIP-714; Consumer only)"},
    // Not a Java key: which codecs KIP-714 pushes may use (the broker's order of preference decides).
    {"internal.metrics.push.compression.types", "zstd,lz4,gzip,snappy", "list", 0, 0, "", "codecs client telemetry pushes may use (zstd, lz4, gzip, snappy; empty = uncompressed); for brokers that advertise a codec they cannot read"},
    // Not a Java key (Java bounds responses by fetch sizes only); librdkafka's name and default.
    {"receive.message.max.bytes", "100000000", "int", 1024, i32max, "", "largest response frame accepted; a larger one closes the connection"},
    {"enable.auto.commit", "true", "bool", 0, 0, "", "commit positions periodically and before revocation"},
    {"auto.commit.interval.ms", "5000", "int", 0, i32max, "", "interval of automatic commits"},
    {"auto.offset.reset", "latest", "enum", 0, 0, "earliest,latest,none", "where to start without a committed offset; also by_duration:<ISO-8601 duration> (KIP-1106): the first record at most that long ago, else the end"},
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
    {"ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "list", 0, 0, "", "TLS versions the client may negotiate (TLSv1.2, TLSv1.3)"},
    {"ssl.cipher.suites", "", "list", 0, 0, "", "cipher suites allowed, by their standard (IANA) or OpenSSL names; empty = OpenSSL's defaults"},
    {"ssl.endpoint.identification.algorithm", "https", "enum", 0, 0, "https,none", "https: the broker's certificate must name the address connected to; none: not checked"},
    // librdkafka's key: false accepts any broker certificate (chain and name unchecked).
    {"enable.ssl.certificate.verification", "true", "bool", 0, 0, "", "false: brokers' certificates are not verified at all (librdkafka's key; for tests only)"},
    // Java's stores. JKS is Java's default type: under it kgroup reads a PKCS#12 file (as Java 9+
    // does) and refuses a real JKS file, which OpenSSL cannot read.
    {"ssl.keystore.location", "", "string", 0, 0, "", "client certificate and key as a PKCS#12 file (or PEM with ssl.keystore.type=PEM)"},
    {"ssl.keystore.password", "", "string", 0, 0, "", "password of the PKCS#12 keystore"},
    {"ssl.keystore.type", "JKS", "enum", 0, 0, "JKS,PKCS12,PEM", "format of ssl.keystore.location: PKCS12 (also read under JKS, Java's default) or PEM"},
    {"ssl.truststore.location", "", "string", 0, 0, "", "trusted CA certificates as a PKCS#12 file (or PEM with ssl.truststore.type=PEM)"},
    {"ssl.truststore.password", "", "string", 0, 0, "", "password of the PKCS#12 truststore (empty: its integrity is not checked)"},
    {"ssl.truststore.type", "JKS", "enum", 0, 0, "JKS,PKCS12,PEM", "format of ssl.truststore.location: PKCS12 (also read under JKS, Java's default) or PEM"},
    {"sasl.mechanism", "GSSAPI", "enum", 0, 0, "GSSAPI,PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", "SASL mechanism (GSSAPI: Kerberos, in builds with MIT Kerberos)"},
    {"sasl.kerberos.service.name", "kafka", "string", 0, 0, "", "GSSAPI: the brokers' Kerberos service name (their principal is service/host@REALM)"},
    {"sasl.kerberos.principal", "", "string", 0, 0, "", "GSSAPI: the client's Kerberos principal (librdkafka's key); empty: the ticket cache's"},
    {"sasl.kerberos.keytab", "", "string", 0, 0, "", "GSSAPI: keytab of sasl.kerberos.principal, tickets are obtained and renewed from it (librdkafka's key); empty: the ticket cache"},
    {"sasl.username", "", "string", 0, 0, "", "SASL user for PLAIN and SCRAM"},
    {"sasl.password", "", "string", 0, 0, "", "SASL password for PLAIN and SCRAM"},
    {"sasl.jaas.config", "", "string", 0, 0, "", "Java's JAAS line: PlainLoginModule/ScramLoginModule username and password, OAuthBearerLoginModule options, Krb5LoginModule keyTab and principal"},
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

// Other spellings of keys in the table: librdkafka's names people copy from its .conf files, and
// KIP-651's PEM keys. An alias is the same setting: set() stores under the table's name, so the
// last one set wins whichever spelling it used (docs/DESIGN.md, "The config files users have").
struct key_alias {
  std::string_view name;
  std::string_view key;
  std::string_view origin;  // for messages: whose name it is
};
constexpr key_alias aliases[] = {
    {"metadata.broker.list", "bootstrap.servers", "librdkafka's name"},
    {"topic.metadata.refresh.interval.ms", "metadata.max.age.ms", "librdkafka's name"},
    {"fetch.wait.max.ms", "fetch.max.wait.ms", "librdkafka's name"},
    {"fetch.message.max.bytes", "max.partition.fetch.bytes", "librdkafka's name"},
    {"sasl.mechanisms", "sasl.mechanism", "librdkafka's name"},
    {"ssl.keystore.key", "ssl.key.pem", "Java's PEM keystore key (KIP-651)"},
    {"ssl.keystore.certificate.chain", "ssl.certificate.pem", "Java's PEM keystore key (KIP-651)"},
    {"ssl.truststore.certificates", "ssl.ca.pem", "Java's PEM truststore key (KIP-651)"},
};

const key_alias* find_alias(std::string_view name) {
  for (const auto& a : aliases) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// The table's name of `name` (itself unless it is an alias).
std::string_view canonical(std::string_view name) {
  const key_alias* a = find_alias(name);
  return a != nullptr ? a->key : name;
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

// The table key `name` is probably a typo of, if any.
const ConfigKey* near_miss(std::string_view name) {
  const ConfigKey* best = nullptr;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& k : key_table) {
    std::size_t d = edit_distance(name, k.name);
    if (d < best_d) {
      best_d = d;
      best = &k;
    }
  }
  return best != nullptr && best_d <= std::max<std::size_t>(3, name.size() / 4) ? best : nullptr;
}

const ConfigKey& require_key(std::string_view name) {
  if (const ConfigKey* k = find_key(canonical(name))) return *k;
  if (const ConfigKey* best = near_miss(name)) {
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

// auto.offset.reset=by_duration:<ISO-8601 duration> (KIP-1106).
constexpr std::string_view by_duration_prefix = "by_duration:";

// The value as stored: booleans and enum values in the table's spelling whatever their case,
// Java assignor class names as the built-ins' names.
std::string normalize(const ConfigKey& k, const std::string& value) {
  if (k.type == "bool") {
    const auto v = lower(value);
    return v == "true" || v == "false" ? v : value;
  }
  if (k.name == "auto.offset.reset") {
    // librdkafka's other names for the same values.
    const auto v = lower(value);
    if (v == "smallest" || v == "beginning") return "earliest";
    if (v == "largest" || v == "end") return "latest";
    if (v == "error") return "none";
    if (v.rfind(by_duration_prefix, 0) == 0)
      return std::string(by_duration_prefix) + value.substr(by_duration_prefix.size());
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

// The Java consumer's keys that change nothing kgroup does (deserializer and metrics classes,
// JMX, JCA algorithm names, login tuning): a file read with from_properties() may carry them, and
// they are listed once at info. Not in the key table, so Config::set() refuses them.
bool java_consumer_unused(std::string_view key) {
  static const std::string_view keys[] = {"key.deserializer",
                                          "value.deserializer",
                                          "metric.reporters",
                                          "metrics.num.samples",
                                          "metrics.sample.window.ms",
                                          "metrics.recording.level",
                                          "auto.include.jmx.reporter",
                                          "internal.leave.group.on.close",
                                          "internal.throw.on.fetch.stable.offset.unsupported",
                                          "ssl.protocol",
                                          "ssl.provider",
                                          "ssl.keymanager.algorithm",
                                          "ssl.trustmanager.algorithm",
                                          "ssl.secure.random.implementation",
                                          "sasl.login.refresh.window.jitter",
                                          "sasl.login.refresh.min.period.seconds",
                                          "sasl.login.refresh.buffer.seconds",
                                          "sasl.login.connect.timeout.ms",
                                          "sasl.login.read.timeout.ms",
                                          "sasl.login.retry.backoff.ms",
                                          "sasl.login.retry.backoff.max.ms",
                                          "sasl.oauthbearer.scope.claim.name",
                                          "sasl.oauthbearer.sub.claim.name",
                                          "sasl.oauthbearer.header.urlencode",
                                          "sasl.oauthbearer.clock.skew.seconds"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

// The Java consumer's keys that would change what the client does but that kgroup does not
// implement (Java classes it cannot load, Kerberos): warned about.
bool java_consumer_unsupported(std::string_view key) {
  static const std::string_view keys[] = {"interceptor.classes",
                                          "security.providers",
                                          "ssl.engine.factory.class",
                                          "sasl.client.callback.handler.class",
                                          "sasl.login.callback.handler.class",
                                          "sasl.login.class",
                                          "sasl.kerberos.kinit.cmd",
                                          "sasl.kerberos.ticket.renew.window.factor",
                                          "sasl.kerberos.ticket.renew.jitter",
                                          "sasl.kerberos.min.time.before.relogin"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

// Keys of the other Java clients (producer, admin, Streams, Connect) that are near misses of a
// consumer key: warned about as other clients' keys, without a did-you-mean.
bool other_client_key(std::string_view key) {
  static const std::string_view keys[] = {
      "metadata.max.idle.ms",   "max.request.size",    "retries",      "batch.size",
      "buffer.memory",          "delivery.timeout.ms", "max.block.ms", "bootstrap.controllers",
      "transaction.timeout.ms", "linger.ms",           "acks"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

// A key as Kafka's clients spell keys. Anything else in a file is most likely part of a value
// (a JAAS line broken without its continuation backslash) and is never quoted in a log line.
bool property_name(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
  });
}

// Whether kgroup does not act on `key` set to `value` yet (issue 35): it is accepted and
// kept, and behaves as the value named in the docs.
bool not_acted_on(std::string_view key, std::string_view /*value*/) {
  return key == "socket.connection.setup.timeout.max.ms";
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
  } else if (k.name == "auto.offset.reset" && value.rfind(by_duration_prefix, 0) == 0) {
    if (!base::parse_iso8601_duration(std::string_view(value).substr(by_duration_prefix.size())))
      invalid(
          fmt::format("{}: '{}' is not by_duration:<duration> with a non-negative ISO-8601 duration such as "
                      "PT1H or P1DT12H (days, hours, minutes, seconds)",
                      k.name, value));
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
  if (const key_alias* alias = find_alias(key)) {
    try {
      check_value(k, stored);
    } catch (const Error& e) {
      invalid(fmt::format("{} ({} for {}): {}", key, alias->origin, k.name, e.what()));
    }
  } else {
    check_value(k, stored);
  }
  values_[std::string(k.name)] = stored;
  return *this;
}

Config Config::from_properties(std::string_view text, std::vector<std::string>* ignored) {
  Config c;
  std::vector<std::string> skipped;
  std::vector<std::string> unused;  // the Java consumer's keys that change nothing here
  // Where each table key was last set, and under which spelling (an alias or its own name).
  struct origin {
    std::string spelling;
    std::string value;
    int line = 0;
  };
  std::map<std::string, origin, std::less<>> set_at;
  for (const auto& p : parse_properties(text)) {
    if (const ConfigKey* k = find_key(canonical(p.key))) {
      try {
        c.set(p.key, p.value);
      } catch (const Error& e) {
        invalid(fmt::format("line {}: {}", p.line, e.what()));
      }
      // Two spellings of one setting: the later line wins, as for a repeated key; different
      // values are worth a warning (names and lines only: the values may be secrets).
      auto [it, first] = set_at.try_emplace(std::string(k->name), origin{p.key, p.value, p.line});
      if (!first) {
        if (it->second.spelling != p.key && it->second.value != p.value) {
          logger()->warn(
              "configuration line {}: {} overrides {} of line {}, the same setting ({}); the last line wins",
              p.line, p.key, it->second.spelling, it->second.line, k->name);
        }
        it->second = origin{p.key, p.value, p.line};
      }
      continue;
    }
    // As the Java client, a key that is not the consumer's is ignored with a warning ("supplied
    // but isn't a known config"); kgroup also names the key a near miss probably meant. Never a
    // value: a Schema Registry's user info or a broken JAAS line may be one.
    if (!property_name(p.key)) {
      skipped.push_back(fmt::format("(line {})", p.line));
      logger()->warn(
          "configuration line {}: a key that is not a property name (not shown: it may be part of a value "
          "split from its line, e.g. a JAAS line continued without a backslash); ignored",
          p.line);
      continue;
    }
    skipped.push_back(p.key);
    if (java_consumer_unused(p.key)) {
      unused.push_back(p.key);
    } else if (java_consumer_unsupported(p.key)) {
      logger()->warn("configuration line {}: '{}' is a Java consumer key kgroup does not implement; ignored",
                     p.line, p.key);
    } else {
      const ConfigKey* meant = other_client_key(p.key) ? nullptr : near_miss(p.key);
      logger()->warn(
          "configuration line {}: '{}' is not a consumer key (another client's or a typo){}; ignored", p.line,
          p.key, meant != nullptr ? fmt::format(" (did you mean '{}'?)", meant->name) : "");
    }
  }
  const auto joined = [](const std::vector<std::string>& keys) {
    std::string names;
    for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
    return names;
  };
  if (!unused.empty()) {
    logger()->info("configuration: the Java consumer's {} mean nothing to kgroup and are ignored: {}",
                   unused.size() == 1 ? "key" : "keys", joined(unused));
  }
  std::vector<std::string> accepted;
  for (const auto& [key, value] : c.values_) {
    if (not_acted_on(key, value)) accepted.push_back(key);
  }
  if (!accepted.empty()) {
    logger()->info(
        "configuration: accepted but not acted on yet (see docs/configuration.md for what kgroup does "
        "instead): {}",
        joined(accepted));
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
  auto it = values_.find(k.name);
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

bool Config::is_set(std::string_view key) const {
  return values_.find(canonical(key)) != values_.end();
}

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
    if (mechanism == "GSSAPI" && !KGROUP_WITH_GSSAPI) {
      invalid(fmt::format(
          "sasl.mechanism=GSSAPI{}: this kgroup was built without Kerberos (MIT Kerberos' GSS-API, "
          "Debian's libkrb5-dev, was not found when it was built); rebuild with it, or set "
          "sasl.mechanism to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
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
