#include "kgroup/config.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "kgroup/error.hpp"

namespace kgroup {

namespace {

constexpr std::int64_t i32max = std::numeric_limits<std::int32_t>::max();

// Defaults and meanings follow the Java consumer unless noted.
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
    {"observability.http.listen", "", "string", 0, 0, "", "host:port of the embedded HTTP endpoint (/metrics, /status, dashboard); empty = off, port 0 = any free port"},
};

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
  throw error(make_error_code(client_errc::invalid_config), msg);
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
  check_value(k, value);
  values_[key] = value;
  return *this;
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
}

const std::vector<ConfigKey>& Config::keys() { return key_table; }

}  // namespace kgroup
