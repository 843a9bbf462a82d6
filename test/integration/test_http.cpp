// The embedded HTTP endpoint (src/http): a server on an io_context running in its own thread, as
// on the consumer's background thread, serving a fake snapshot; a Beast client checks every
// route and every limit. The dashboard is checked in a real browser (headless chromium).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <catch2/catch.hpp>

#include "assign/consumer_protocol.hpp"
#include "base/boost_json.hpp"
#include "base/group_view.hpp"
#include "browser.hpp"
#include "fetch/group_observer.hpp"
#include "group_harness.hpp"
#include "group_proxy.hpp"
#include "http/render.hpp"
#include "http/server.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/share_consumer.hpp"
#include "kgroup/version.hpp"
#include "mock_cluster.hpp"
#include "rdkafka_member.hpp"
#include "test_config.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Two owned partitions, two rebalances (the first join, then another member left), lag known.
kgroup::ConsumerMetrics fake_metrics() {
  kgroup::ConsumerMetrics m;
  const auto now = now_ms();
  m.timestamp_ms = now;
  m.client_id = "client-1";
  m.group_id = "orders-app";
  m.member_id = "client-1-5f2c";
  m.generation = 7;
  m.state = "stable";
  m.coordinator = 1;
  m.protocol = "cooperative";
  m.assignor = "cooperative-sticky";
  m.leader = true;
  m.partitions = {{{"orders", 3}, 100, 90, 142, 42, false}, {{"orders", 7}, 5, 5, 5, 0, true}};
  m.assigned_partitions = 2;
  m.rebalance_total = 2;
  m.failed_rebalance_total = 1;
  m.rebalance_latency_avg_ms = 185;
  m.rebalance_latency_max_ms = 250;
  m.rebalance_latency_total_ms = 370;
  m.rebalance_rate_per_hour = 2;
  m.last_rebalance_seconds_ago = 29.88;
  m.join_time_avg_ms = 100.5;
  m.join_time_max_ms = 150;
  m.sync_time_avg_ms = 12.25;
  m.sync_time_max_ms = 20;
  m.heartbeat_response_time_max_ms = 3;
  m.heartbeat_total = 40;
  m.last_heartbeat_seconds_ago = 0.5;
  m.commit_latency_avg_ms = 4;
  m.commit_latency_max_ms = 9;
  m.commit_total = 12;
  m.records_consumed_total = 1234;
  m.bytes_consumed_total = 56789;
  m.records_consumed_rate = 41.5;
  m.bytes_consumed_rate = 1893;
  m.records_lag_max = 42;
  m.time_between_poll_avg_ms = 120;
  m.time_between_poll_max_ms = 800;
  m.last_poll_seconds_ago = 0.2;
  m.poll_idle_ratio_avg = 0.75;
  m.max_poll_interval_ms = 300000;
  m.join_total = 3;
  m.sync_total = 3;
  m.failed_rebalance_rate_per_hour = 1;
  m.partitions[0].lead = 100;
  m.partitions[0].read_replica = 2;
  // Two rebalances of 0.25 s and 0.12 s, on latency bounds 0.1, 0.25, 0.5.
  m.rebalance_latency = {{0.1, 0.25, 0.5}, {0, 2, 2}, 2, 0.37};
  m.fetch_size = {{1024, 4096}, {5, 7}, 9, 20000};

  kgroup::RebalanceRecord first;
  first.cause = kgroup::RebalanceCause::member_joined;
  first.detail = "subscribed to orders";
  first.start_ms = now - 120000;
  first.duration_ms = 250;
  first.generation = 6;
  first.completed = true;
  first.assigned = {{"orders", 3}, {"orders", 5}, {"orders", 7}};
  kgroup::RebalanceRecord second;
  second.cause = kgroup::RebalanceCause::member_left;
  second.detail = "client-2 left: the consumer is being closed";
  second.start_ms = now - 30000;
  second.duration_ms = 120;
  second.generation = 7;
  second.completed = true;
  second.revoked = {{"orders", 5}};
  m.rebalances = {first, second};
  return m;
}

// A server on an io_context run by its own thread, like the consumer's background thread.
class running_server {
 public:
  explicit running_server(kgroup::http::server_options opts, kgroup::ConsumerMetrics metrics = fake_metrics())
      : metrics_(std::move(metrics)), server_(io_, std::move(opts), [this] {
          ++snapshots;
          return metrics_;
        }) {
    const auto ec = server_.start();
    REQUIRE_FALSE(ec);
    thread_ = std::thread([this] { io_.run(); });
  }
  // Any member's endpoint (a share member's): /metrics and /status are `documents`.
  running_server(kgroup::http::server_options opts, kgroup::http::pages documents)
      : server_(io_, std::move(opts), std::move(documents)) {
    const auto ec = server_.start();
    REQUIRE_FALSE(ec);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~running_server() {
    asio::post(io_, [this] { server_.stop(); });
    guard_.reset();
    thread_.join();
  }

  std::string endpoint() const { return server_.endpoint(); }

  // Runs `f` on the server's thread and returns its result.
  template <class F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }
  std::size_t connections() {
    return on_io([this] { return server_.connection_count(); });
  }
  std::size_t idle_connections() {
    return on_io([this] { return server_.idle_connection_count(); });
  }
  void stop() {
    on_io([this] {
      server_.stop();
      return 0;
    });
  }

  std::atomic<int> snapshots{0};

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_ = asio::make_work_guard(io_);
  const kgroup::ConsumerMetrics metrics_;
  kgroup::http::server server_;
  std::thread thread_;
};

// A synchronous-looking Beast client: every operation runs on its own io_context under a 10 s
// deadline, so a misbehaving server fails the test instead of hanging it.
class client {
 public:
  // `source`: the local address to connect from (another loopback address such as 127.0.0.2
  // makes another peer); empty: the system's choice.
  explicit client(const std::string& endpoint, const std::string& source = {}) {
    const auto colon = endpoint.rfind(':');
    std::string host = endpoint.substr(0, colon);
    if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
    const tcp::endpoint ep(asio::ip::make_address(host),
                           static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1))));
    beast::error_code ec;
    if (!source.empty()) {
      stream_.socket().open(ep.protocol());
      stream_.socket().bind(tcp::endpoint(asio::ip::make_address(source), 0));
    }
    stream_.expires_after(10s);
    stream_.async_connect(ep, [&](beast::error_code e) { ec = e; });
    run();
    REQUIRE_FALSE(ec);
  }

  beast::error_code send(const bhttp::request<bhttp::string_body>& req) {
    beast::error_code ec;
    stream_.expires_after(10s);
    bhttp::async_write(stream_, req, [&](beast::error_code e, std::size_t) { ec = e; });
    run();
    return ec;
  }
  beast::error_code send_raw(const std::string& bytes) {
    beast::error_code ec;
    stream_.expires_after(10s);
    asio::async_write(stream_, asio::buffer(bytes), [&](beast::error_code e, std::size_t) { ec = e; });
    run();
    return ec;
  }
  beast::error_code read(bhttp::response<bhttp::string_body>& res, bool head = false) {
    beast::error_code ec;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(16 * 1024 * 1024);
    parser.skip(head);
    stream_.expires_after(10s);
    bhttp::async_read(stream_, buffer_, parser, [&](beast::error_code e, std::size_t) { ec = e; });
    run();
    if (!ec) res = parser.release();
    return ec;
  }
  bhttp::response<bhttp::string_body> get(const std::string& target, bhttp::verb method = bhttp::verb::get) {
    bhttp::request<bhttp::string_body> req(method, target, 11);
    req.set(bhttp::field::host, "localhost");
    req.keep_alive(true);
    REQUIRE_FALSE(send(req));
    bhttp::response<bhttp::string_body> res;
    const auto ec = read(res, method == bhttp::verb::head);
    INFO(ec.message());
    REQUIRE_FALSE(ec);
    return res;
  }
  // Reads until the server closes the connection; returns the error that ended the read (eof
  // or reset when the server closed it, timeout when it did not within 10 s).
  beast::error_code read_until_closed() {
    beast::error_code ec;
    std::function<void()> next;
    next = [&] {
      stream_.async_read_some(asio::buffer(scratch_), [&](beast::error_code e, std::size_t) {
        if (e) {
          ec = e;
        } else {
          next();
        }
      });
    };
    stream_.expires_after(10s);
    next();
    run();
    return ec;
  }
  void close() { stream_.close(); }

 private:
  void run() {
    io_.restart();
    io_.run();
  }

  asio::io_context io_;
  beast::tcp_stream stream_{io_};
  beast::flat_buffer buffer_;
  std::array<char, 4096> scratch_{};
};

bool closed_by_peer(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == bhttp::error::end_of_stream;
}

// Sends `request` (raw bytes) on a new connection and reads the response.
bhttp::response<bhttp::string_body> raw_exchange(const std::string& endpoint, const std::string& request) {
  client c(endpoint);
  REQUIRE_FALSE(c.send_raw(request));
  bhttp::response<bhttp::string_body> res;
  const auto ec = c.read(res);
  INFO(ec.message());
  REQUIRE_FALSE(ec);
  return res;
}

// GET `target` with the given Host header line ("Host: x"), or none when `host_line` is empty.
bhttp::response<bhttp::string_body> get_with_host(const std::string& endpoint, const std::string& host_line,
                                                  const std::string& target = "/metrics") {
  INFO("request with " << (host_line.empty() ? std::string("no Host") : host_line));
  return raw_exchange(endpoint, "GET " + target + " HTTP/1.1\r\n" +
                                    (host_line.empty() ? "" : host_line + "\r\n") +
                                    "Connection: close\r\n\r\n");
}

// The port of an endpoint "host:port".
std::string port_of(const std::string& endpoint) {
  return endpoint.substr(endpoint.rfind(':') + 1);
}

// ---- documents parsed by Boost.JSON, read through a small tree (a missing key fails the test) ----

struct json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<json>, std::map<std::string, json>> v;
  const json& operator[](const std::string& key) const {
    const auto& obj = std::get<std::map<std::string, json>>(v);
    const auto it = obj.find(key);
    if (it == obj.end()) FAIL("missing JSON key " << key);
    return it->second;
  }
  const json& operator[](std::size_t i) const { return std::get<std::vector<json>>(v).at(i); }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
  bool boolean() const { return std::get<bool>(v); }
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  std::size_t size() const { return std::get<std::vector<json>>(v).size(); }
  bool has(const std::string& key) const { return std::get<std::map<std::string, json>>(v).count(key) != 0; }
};

json from_boost(const boost::json::value& v) {
  json j;
  switch (v.kind()) {
    case boost::json::kind::null: j.v = nullptr; break;
    case boost::json::kind::bool_: j.v = v.get_bool(); break;
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_: j.v = v.to_number<double>(); break;
    case boost::json::kind::string: j.v = std::string(v.get_string().data(), v.get_string().size()); break;
    case boost::json::kind::array: {
      std::vector<json> items;
      for (const auto& e : v.get_array()) items.push_back(from_boost(e));
      j.v = std::move(items);
      break;
    }
    case boost::json::kind::object: {
      std::map<std::string, json> members;
      for (const auto& kv : v.get_object()) members.emplace(std::string(kv.key().data(), kv.key().size()), from_boost(kv.value()));
      j.v = std::move(members);
      break;
    }
  }
  return j;
}

json parse_json(std::string_view s) {
  boost::json::error_code ec;
  const boost::json::value v = boost::json::parse(s, ec);
  if (ec) FAIL("invalid JSON (" << ec.message() << "): " << s);
  return from_boost(v);
}

// ---- Prometheus text: every line parsed ----

struct prom_sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped
  double value = 0;
};

std::vector<prom_sample> parse_prometheus(const std::string& text,
                                          std::map<std::string, std::string>& types) {
  static const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$)");
  static const std::regex label_re(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$))re");
  static const std::regex type_re(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|untyped|summary|histogram)$)");
  std::vector<prom_sample> out;
  std::size_t start = 0;
  REQUIRE((!text.empty() && text.back() == '\n'));
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    INFO("line: " << line);
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      REQUIRE(std::regex_match(line, m, type_re));
      REQUIRE(types.emplace(m[1], m[2]).second);  // one TYPE per family
      continue;
    }
    REQUIRE(std::regex_match(line, m, sample_re));
    prom_sample s;
    s.name = m[1];
    // TYPE comes before the samples; a histogram's samples are its family name + _bucket, _sum
    // or _count.
    std::string family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string_view sv(suffix);
      if (types.count(family) == 0 && family.size() > sv.size() &&
          family.compare(family.size() - sv.size(), sv.size(), sv) == 0) {
        const auto base = family.substr(0, family.size() - sv.size());
        if (types.count(base) == 1 && types.at(base) == "histogram") family = base;
      }
    }
    REQUIRE(types.count(family) == 1);
    const std::string labels = m[2];
    const std::string value = m[3];
    char* vend = nullptr;
    s.value = std::strtod(value.c_str(), &vend);
    REQUIRE(*vend == '\0');
    std::size_t consumed = 0;
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label_re); it != std::sregex_iterator();
         ++it) {
      REQUIRE(static_cast<std::size_t>(it->position()) == consumed);
      consumed += static_cast<std::size_t>(it->length());
      std::string raw = (*it)[2], v;
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '\\') {
          const char e = raw[++i];
          v += e == 'n' ? '\n' : e;
        } else {
          v += raw[i];
        }
      }
      s.labels[(*it)[1]] = v;
    }
    REQUIRE(consumed == labels.size());
    out.push_back(std::move(s));
  }
  return out;
}

const prom_sample* find_sample(const std::vector<prom_sample>& samples, const std::string& name,
                               const std::map<std::string, std::string>& extra = {}) {
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : extra) {
      const auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) match = false;
    }
    if (match) return &s;
  }
  return nullptr;
}

// Whether the element that starts with `opening` contains `text` before its first `close` tag
// (enough for the flat SVG groups the dashboard draws; no regex over a whole page).
bool element_contains(const std::string& dom, const std::string& opening, const std::string& text,
                      const std::string& close = "</g>") {
  const auto start = dom.find(opening);
  if (start == std::string::npos) return false;
  const auto end = dom.find(close, start);
  return end != std::string::npos && dom.substr(start, end - start).find(text) != std::string::npos;
}

// The part of `dom` from `opening` to the first `close` after it; empty when `opening` is absent.
std::string element_of(const std::string& dom, const std::string& opening, const std::string& close) {
  const auto start = dom.find(opening);
  if (start == std::string::npos) return {};
  const auto end = dom.find(close, start);
  return dom.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::string render_json_error(const json& j) {
  return j["error"].is_null() ? std::string("error: null") : "error: " + j["error"].str();
}

// Three members (one whose assignment bytes did not decode), two topics, one unowned partition,
// one partition without a committed offset.
kgroup::base::group_view fake_group_view() {
  kgroup::base::group_view v;
  v.group_id = "orders-app";
  v.member_id = "app-1-aaaa";
  v.state = "Stable";
  v.protocol_type = "consumer";
  v.protocol = "range";
  v.generation = 7;
  v.age_ms = 1500;
  v.members = {
      {"app-1-aaaa", "app-1", "/10.0.0.1", std::nullopt, {{"audit", 0}, {"orders", 0}, {"orders", 1}}, ""},
      {"app-2-bbbb", "app-2 \"blue\"\n", "/10.0.0.2", "pod-2", {{"orders", 2}, {"orders", 3}}, ""},
      {"rdkafka-cccc", "rdkafka-x", "/10.0.0.3", std::nullopt, {},
       "assignment of 5 bytes does not decode: truncated input"},
  };
  v.partitions = {
      {{"audit", 0}, "app-1-aaaa", 7, 9, 2},       {{"audit", 1}, "", 3, 40, 37},
      {{"orders", 0}, "app-1-aaaa", 90, 142, 52}, {{"orders", 1}, "app-1-aaaa", -1, 10, -1},
      {{"orders", 2}, "app-2-bbbb", 5, 5, 0},     {{"orders", 3}, "app-2-bbbb", 0, 1000000, 1000000},
  };
  return v;
}

kgroup::http::server_options test_options() {
  kgroup::http::server_options o;
  o.listen = "127.0.0.1:0";
  return o;
}

}  // namespace

TEST_CASE("http: GET /metrics serves the Prometheus text format with Java's metric meanings", "[http]") {
  running_server srv(test_options());
  client c(srv.endpoint());
  const auto res = c.get("/metrics");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(res[bhttp::field::cache_control] == "no-store");

  std::map<std::string, std::string> types;
  const auto samples = parse_prometheus(res.body(), types);
  for (const auto& s : samples) {
    INFO(s.name);
    CHECK(s.labels.at("client_id") == "client-1");
    CHECK(s.labels.at("group_id") == "orders-app");
    CHECK(s.labels.at("member_id") == "client-1-5f2c");
  }
  const std::map<std::string, std::pair<std::string, double>> expected = {
      {"kgroup_consumer_coordinator_rebalance_total", {"counter", 2}},
      {"kgroup_consumer_coordinator_rebalance_rate_per_hour", {"gauge", 2}},
      {"kgroup_consumer_coordinator_failed_rebalance_total", {"counter", 1}},
      {"kgroup_consumer_coordinator_failed_rebalance_rate_per_hour", {"gauge", 1}},
      {"kgroup_consumer_coordinator_last_rebalance_seconds_ago", {"gauge", 29.88}},
      {"kgroup_consumer_coordinator_join_total", {"counter", 3}},
      {"kgroup_consumer_coordinator_sync_total", {"counter", 3}},
      {"kgroup_consumer_coordinator_heartbeat_total", {"counter", 40}},
      {"kgroup_consumer_coordinator_last_heartbeat_seconds_ago", {"gauge", 0.5}},
      {"kgroup_consumer_coordinator_assigned_partitions", {"gauge", 2}},
      {"kgroup_consumer_coordinator_commit_total", {"counter", 12}},
      {"kgroup_consumer_fetch_manager_records_consumed_total", {"counter", 1234}},
      {"kgroup_consumer_fetch_manager_bytes_consumed_total", {"counter", 56789}},
      {"kgroup_consumer_fetch_manager_records_lag_max", {"gauge", 42}},
      {"kgroup_consumer_last_poll_seconds_ago", {"gauge", 0.2}},
      {"kgroup_consumer_poll_idle_ratio_avg", {"gauge", 0.75}},
      {"kgroup_consumer_max_poll_interval_seconds", {"gauge", 300}},
  };
  for (const auto& [name, tv] : expected) {
    INFO(name);
    REQUIRE(types.count(name) == 1);
    CHECK(types.at(name) == tv.first);
    const auto* s = find_sample(samples, name);
    REQUIRE(s != nullptr);
    CHECK(s->value == Approx(tv.second));
  }
  // Prometheus conventions: every counter ends in _total; no unit but seconds and bytes; no
  // avg/max gauges; latencies are histograms.
  for (const auto& [name, type] : types) {
    INFO(name);
    if (type == "counter") CHECK(name.size() > 6);
    if (type == "counter") CHECK(name.substr(name.size() - 6) == "_total");
    CHECK(name.find("_ms") == std::string::npos);
    CHECK(name.find("_avg") == (name == "kgroup_consumer_poll_idle_ratio_avg" ? name.size() - 4 : std::string::npos));
    // (records_lag_max is Java's maximum over partitions, not over time.)
    if (name != "kgroup_consumer_fetch_manager_records_lag_max")
      CHECK_FALSE((name.size() > 4 && name.compare(name.size() - 4, 4, "_max") == 0));
  }
  for (const char* h : {"kgroup_consumer_coordinator_rebalance_latency_seconds",
                        "kgroup_consumer_coordinator_join_latency_seconds",
                        "kgroup_consumer_coordinator_sync_latency_seconds",
                        "kgroup_consumer_coordinator_heartbeat_response_time_seconds",
                        "kgroup_consumer_coordinator_commit_latency_seconds",
                        "kgroup_consumer_coordinator_partition_assigned_latency_seconds",
                        "kgroup_consumer_coordinator_partition_revoked_latency_seconds",
                        "kgroup_consumer_coordinator_partition_lost_latency_seconds",
                        "kgroup_consumer_fetch_manager_fetch_latency_seconds",
                        "kgroup_consumer_fetch_manager_fetch_size_bytes",
                        "kgroup_consumer_fetch_manager_fetch_throttle_time_seconds",
                        "kgroup_consumer_time_between_poll_seconds"}) {
    INFO(h);
    REQUIRE(types.count(h) == 1);
    CHECK(types.at(h) == "histogram");
    REQUIRE(find_sample(samples, std::string(h) + "_count") != nullptr);
    REQUIRE(find_sample(samples, std::string(h) + "_bucket", {{"le", "+Inf"}}) != nullptr);
  }
  // Buckets are cumulative, +Inf is the count.
  const std::string rl = "kgroup_consumer_coordinator_rebalance_latency_seconds";
  CHECK(find_sample(samples, rl + "_bucket", {{"le", "0.1"}})->value == 0);
  CHECK(find_sample(samples, rl + "_bucket", {{"le", "0.25"}})->value == 2);
  CHECK(find_sample(samples, rl + "_bucket", {{"le", "0.5"}})->value == 2);
  CHECK(find_sample(samples, rl + "_bucket", {{"le", "+Inf"}})->value == 2);
  CHECK(find_sample(samples, rl + "_sum")->value == Approx(0.37));
  CHECK(find_sample(samples, rl + "_count")->value == 2);
  CHECK(find_sample(samples, "kgroup_consumer_fetch_manager_fetch_size_bytes_bucket", {{"le", "4096"}})->value == 7);
  // Unknown values (-1 in ConsumerMetrics) leave their series out: no sentinels.
  CHECK(types.count("kgroup_consumer_fetch_manager_records_lead_min") == 0);
  CHECK(find_sample(samples, "kgroup_consumer_fetch_manager_records_lead_min") == nullptr);
  // Per-partition lead and read replica, only where known.
  const auto* lead3 = find_sample(samples, "kgroup_consumer_fetch_manager_records_lead",
                                  {{"topic", "orders"}, {"partition", "3"}});
  REQUIRE(lead3 != nullptr);
  CHECK(lead3->value == 100);
  CHECK(find_sample(samples, "kgroup_consumer_fetch_manager_records_lead", {{"topic", "orders"}, {"partition", "7"}}) ==
        nullptr);
  CHECK(find_sample(samples, "kgroup_consumer_fetch_manager_read_replica", {{"topic", "orders"}, {"partition", "3"}})
            ->value == 2);
  CHECK(types.at("kgroup_consumer_fetch_manager_records_lag") == "gauge");
  const auto* lag3 = find_sample(samples, "kgroup_consumer_fetch_manager_records_lag",
                                 {{"topic", "orders"}, {"partition", "3"}});
  const auto* lag7 = find_sample(samples, "kgroup_consumer_fetch_manager_records_lag",
                                 {{"topic", "orders"}, {"partition", "7"}});
  REQUIRE(lag3 != nullptr);
  REQUIRE(lag7 != nullptr);
  CHECK(lag3->value == 42);
  CHECK(lag7->value == 0);
  CHECK(srv.snapshots.load() >= 1);
}

TEST_CASE("http: label values and JSON strings are escaped; non-finite numbers stay valid", "[http]") {
  auto m = fake_metrics();
  m.group_id = "we\"ird\\group\nname\x01\t";
  m.client_id = "caf\xc3\xa9 \xff";  // valid UTF-8, then an invalid byte
  m.partitions[0].partition.topic = "a\"b";
  m.rebalances[1].detail = "left: \"shutdown\"\r\n";
  m.rebalance_rate_per_hour = std::nan("");
  m.poll_idle_ratio_avg = HUGE_VAL;
  m.rebalance_latency_avg_ms = std::nan("");  // /status
  m.join_time_max_ms = HUGE_VAL;
  running_server srv(test_options(), m);
  client c(srv.endpoint());

  const auto metrics = c.get("/metrics");
  std::map<std::string, std::string> types;
  const auto samples = parse_prometheus(metrics.body(), types);
  CHECK(metrics.body().find(R"(group_id="we\"ird\\group\nname)") != std::string::npos);
  for (const auto& s : samples) CHECK(s.labels.at("group_id") == m.group_id);
  CHECK(find_sample(samples, "kgroup_consumer_fetch_manager_records_lag", {{"topic", "a\"b"}}) != nullptr);
  REQUIRE(find_sample(samples, "kgroup_consumer_coordinator_rebalance_rate_per_hour") != nullptr);
  CHECK(std::isnan(find_sample(samples, "kgroup_consumer_coordinator_rebalance_rate_per_hour")->value));
  REQUIRE(find_sample(samples, "kgroup_consumer_poll_idle_ratio_avg") != nullptr);
  CHECK(std::isinf(find_sample(samples, "kgroup_consumer_poll_idle_ratio_avg")->value));

  const auto status = c.get("/status");
  CHECK(status.body().find("\\u0001") != std::string::npos);
  const auto j = parse_json(status.body());
  CHECK(j["group"].str() == m.group_id);
  CHECK(j["client_id"].str() == "caf\xc3\xa9 \xef\xbf\xbd");  // the invalid byte became U+FFFD
  CHECK(j["assignment"][0]["topic"].str() == "a\"b");
  CHECK(j["rebalances"][1]["detail"].str() == m.rebalances[1].detail);
  CHECK(j["metrics"]["rebalance_latency_avg_ms"].is_null());
  CHECK(j["metrics"]["join_time_max_ms"].is_null());
}

TEST_CASE("http: GET /status serves the member's state, assignment and rebalance history as JSON", "[http]") {
  auto m = fake_metrics();
  m.group_instance_id = "instance-a";
  running_server srv(test_options(), m);
  client c(srv.endpoint());
  const auto res = c.get("/status");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res[bhttp::field::cache_control] == "no-store");
  const auto j = parse_json(res.body());

  CHECK(j["group"].str() == "orders-app");
  CHECK(j["library_version"].str() == KGROUP_VERSION_STRING);
  CHECK(j["client_id"].str() == "client-1");
  CHECK(j["member_id"].str() == "client-1-5f2c");
  CHECK(j["instance_id"].str() == "instance-a");
  CHECK(j["generation"].num() == 7);
  CHECK(j["state"].str() == "stable");
  CHECK(j["coordinator"].num() == 1);
  CHECK(j["protocol"].str() == "cooperative");
  CHECK(j["assignor"].str() == "cooperative-sticky");
  CHECK(j["leader"].boolean());
  CHECK(j["timestamp_ms"].num() == static_cast<double>(m.timestamp_ms));

  REQUIRE(j["assignment"].size() == 2);
  const auto& p3 = j["assignment"][0];
  CHECK(p3["topic"].str() == "orders");
  CHECK(p3["partition"].num() == 3);
  CHECK(p3["position"].num() == 100);
  CHECK(p3["committed"].num() == 90);
  CHECK(p3["high_watermark"].num() == 142);
  CHECK(p3["lag"].num() == 42);
  CHECK_FALSE(p3["paused"].boolean());
  CHECK(j["assignment"][1]["paused"].boolean());

  CHECK(j["time_between_poll"]["avg_ms"].num() == 120);
  CHECK(j["time_between_poll"]["max_ms"].num() == 800);
  CHECK(j["time_between_poll"]["last_poll_seconds_ago"].num() == Approx(0.2));
  CHECK(j["max_poll_interval_ms"].num() == 300000);
  CHECK(j["metrics"]["rebalance_total"].num() == 2);
  CHECK(j["metrics"]["records_lag_max"].num() == 42);

  REQUIRE(j["rebalances"].size() == 2);
  const auto& r0 = j["rebalances"][0];
  CHECK(r0["cause"].str() == "member joined");
  CHECK(r0["detail"].str() == "subscribed to orders");
  CHECK(r0["start_ms"].num() == static_cast<double>(m.rebalances[0].start_ms));
  CHECK(r0["duration_ms"].num() == 250);
  CHECK(r0["generation"].num() == 6);
  CHECK(r0["completed"].boolean());
  REQUIRE(r0["assigned"].size() == 3);
  CHECK(r0["assigned"][1]["topic"].str() == "orders");
  CHECK(r0["assigned"][1]["partition"].num() == 5);
  CHECK(r0["revoked"].size() == 0);
  CHECK(r0["lost"].size() == 0);
  const auto& r1 = j["rebalances"][1];
  CHECK(r1["cause"].str() == "member left");
  REQUIRE(r1["revoked"].size() == 1);
  CHECK(r1["revoked"][0]["partition"].num() == 5);

  SECTION("only the last 50 rebalances are served") {
    auto many = fake_metrics();
    many.rebalances.clear();
    for (int i = 0; i < 60; ++i) {
      kgroup::RebalanceRecord r;
      r.cause = kgroup::RebalanceCause::metadata_change;
      r.start_ms = 1000 * i;
      many.rebalances.push_back(r);
    }
    const auto doc = parse_json(kgroup::http::render_status_json(many));
    REQUIRE(doc["rebalances"].size() == 50);
    CHECK(doc["rebalances"][0]["start_ms"].num() == 10000);
    CHECK(doc["rebalances"][0]["cause"].str() == "metadata change");
    CHECK(doc["rebalances"][0]["duration_ms"].num() == -1);
  }
}

TEST_CASE("http: GET / serves a self-contained dashboard page", "[http]") {
  running_server srv(test_options());
  client c(srv.endpoint());
  const auto res = c.get("/");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "text/html; charset=utf-8");
  const auto& body = res.body();
  CHECK(body.rfind("<!doctype html>", 0) == 0);
  // Its script and style come from the endpoint itself.
  const auto script = c.get("/dashboard.js");
  const auto style = c.get("/dashboard.css");
  CHECK(script.result() == bhttp::status::ok);
  CHECK(style.result() == bhttp::status::ok);
  const std::string all = body + script.body() + style.body();
  for (const char* hook : {"poll-gauge", "partition-row", "rebalance-marker", "fetch(\"status\""}) {
    INFO(hook);
    CHECK(all.find(hook) != std::string::npos);
  }
  // No external resources: the only linked script and style are the endpoint's own; no fonts or
  // images.
  CHECK(count_of(body, "<script src=") == 1);
  CHECK(count_of(body, "<link") == 1);
  for (const char* external :
       {"src=\"http", "href=\"http", "src=\"/", "href=\"/", "url(", "@import", "//cdn", "https://"}) {
    INFO(external);
    CHECK(all.find(external) == std::string::npos);
  }
  CHECK(srv.snapshots.load() == 0);  // the page itself reads no snapshot
}

TEST_CASE("http: unknown paths are 404, other methods 405, HEAD and keep-alive work", "[http]") {
  running_server srv(test_options());
  client c(srv.endpoint());
  // All on one keep-alive connection.
  const auto missing = c.get("/nope");
  CHECK(missing.result() == bhttp::status::not_found);
  CHECK(c.get("/metrics?x=1").result() == bhttp::status::ok);
  const auto head = c.get("/status", bhttp::verb::head);
  CHECK(head.result() == bhttp::status::ok);
  CHECK(head.body().empty());
  CHECK(std::stoul(std::string(head[bhttp::field::content_length])) > 100);
  CHECK(c.get("/status").result() == bhttp::status::ok);

  for (const auto method : {bhttp::verb::post, bhttp::verb::put, bhttp::verb::delete_}) {
    client other(srv.endpoint());
    bhttp::request<bhttp::string_body> req(method, "/metrics", 11);
    req.set(bhttp::field::host, "localhost");
    req.body() = "x=1";
    req.prepare_payload();
    REQUIRE_FALSE(other.send(req));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(other.read(res));
    CHECK(res.result() == bhttp::status::method_not_allowed);
    CHECK(res[bhttp::field::allow] == "GET, HEAD");
    CHECK(closed_by_peer(other.read_until_closed()));
  }
}

namespace {

// A share member's figures: two partitions, acknowledgements of every type, sessions with two
// brokers.
kgroup::ShareConsumerMetrics fake_share_metrics() {
  kgroup::ShareConsumerMetrics m;
  m.client_id = "worker-1";
  m.group_id = "jobs-app";
  m.member_id = "Zm9vYmFyYmF6cXV4MTIzNA";
  m.member_epoch = 4;
  m.state = "stable";
  m.assignment = {{"jobs", 0}, {"jobs", 2}};
  m.records_delivered = 120;
  m.records_redelivered = 7;
  m.acknowledged_accept = 100;
  m.acknowledged_release = 9;
  m.acknowledged_reject = 3;
  m.acknowledgements_failed = 2;
  m.acknowledgements_lock_expired = 1;
  m.gaps_acknowledged = 1;
  m.share_fetches = 40;
  m.share_acknowledges = 5;
  m.session_resets = 1;
  m.session_epochs = {{1, 17}, {3, 2}};
  m.rebootstraps_total = 2;
  m.http_endpoint = "127.0.0.1:9464";
  return m;
}

}  // namespace

// A share member's endpoint as the ShareConsumer sets it up (observability.cpp): its pages and
// its dashboard.
kgroup::http::server_options share_options() {
  auto so = test_options();
  so.dashboard = kgroup::http::server_options::dashboard_page::share;
  return so;
}
kgroup::http::pages share_pages(std::function<kgroup::ShareConsumerMetrics()> snapshot) {
  return {[snapshot] { return kgroup::http::render_share_prometheus(snapshot()); },
          [snapshot] { return kgroup::http::render_share_status_json(snapshot()); }};
}

TEST_CASE("http: a share member's endpoint serves its figures on /metrics and /status, its own dashboard",
          "[http]") {
  const auto m = fake_share_metrics();
  running_server srv(share_options(), share_pages([&] { return m; }));

  client c(srv.endpoint());
  const auto res = c.get("/metrics");
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res[bhttp::field::content_type] == "text/plain; version=0.0.4; charset=utf-8");
  std::map<std::string, std::string> types;
  const auto samples = parse_prometheus(res.body(), types);
  for (const auto& smp : samples) {
    INFO(smp.name);
    CHECK(smp.labels.at("client_id") == "worker-1");
    CHECK(smp.labels.at("group_id") == "jobs-app");
    CHECK(smp.labels.at("member_id") == "Zm9vYmFyYmF6cXV4MTIzNA");
  }
  const std::vector<std::tuple<std::string, std::map<std::string, std::string>, std::string, double>>
      expected = {
          {"kgroup_share_member_epoch", {}, "gauge", 4},
          {"kgroup_share_assigned_partitions", {}, "gauge", 2},
          {"kgroup_share_records_delivered_total", {}, "counter", 120},
          {"kgroup_share_records_redelivered_total", {}, "counter", 7},
          {"kgroup_share_records_acknowledged_total", {{"type", "accept"}}, "counter", 100},
          {"kgroup_share_records_acknowledged_total", {{"type", "release"}}, "counter", 9},
          {"kgroup_share_records_acknowledged_total", {{"type", "reject"}}, "counter", 3},
          {"kgroup_share_acknowledgements_failed_total", {}, "counter", 2},
          {"kgroup_share_acknowledgements_lock_expired_total", {}, "counter", 1},
          {"kgroup_share_gaps_acknowledged_total", {}, "counter", 1},
          {"kgroup_share_fetch_requests_total", {}, "counter", 40},
          {"kgroup_share_acknowledge_requests_total", {}, "counter", 5},
          {"kgroup_share_session_resets_total", {}, "counter", 1},
          {"kgroup_share_rebootstraps_total", {}, "counter", 2},
          {"kgroup_share_session_epoch", {{"broker", "1"}}, "gauge", 17},
          {"kgroup_share_session_epoch", {{"broker", "3"}}, "gauge", 2},
      };
  for (const auto& [name, labels, type, value] : expected) {
    INFO(name);
    const auto* found = find_sample(samples, name, labels);
    REQUIRE(found != nullptr);
    CHECK(found->value == value);
    CHECK(types[name] == type);
  }
  CHECK(samples.size() == expected.size());

  const auto status = c.get("/status");
  CHECK(status.result() == bhttp::status::ok);
  CHECK(status[bhttp::field::content_type] == "application/json");
  const auto j = parse_json(status.body());
  CHECK(j["group_type"].str() == "share");
  CHECK(j["client_id"].str() == "worker-1");
  CHECK(j["group"].str() == "jobs-app");
  CHECK(j["member_id"].str() == "Zm9vYmFyYmF6cXV4MTIzNA");
  CHECK(j["member_epoch"].num() == 4);
  CHECK(j["state"].str() == "stable");
  CHECK(j["http_endpoint"].str() == "127.0.0.1:9464");
  CHECK(j["library_version"].str() == kgroup::library_version());
  REQUIRE(j["assignment"].size() == 2);
  CHECK(j["assignment"][1]["topic"].str() == "jobs");
  CHECK(j["assignment"][1]["partition"].num() == 2);
  CHECK(j["metrics"]["records_delivered_total"].num() == 120);
  CHECK(j["metrics"]["records_redelivered_total"].num() == 7);
  CHECK(j["metrics"]["acknowledged_accept_total"].num() == 100);
  CHECK(j["metrics"]["acknowledged_release_total"].num() == 9);
  CHECK(j["metrics"]["acknowledged_reject_total"].num() == 3);
  CHECK(j["metrics"]["acknowledgements_failed_total"].num() == 2);
  CHECK(j["metrics"]["acknowledgements_lock_expired_total"].num() == 1);
  CHECK(j["metrics"]["session_resets_total"].num() == 1);
  CHECK(j["metrics"]["rebootstraps_total"].num() == 2);
  REQUIRE(j["session_epochs"].size() == 2);
  CHECK(j["session_epochs"][0]["broker"].num() == 1);
  CHECK(j["session_epochs"][0]["epoch"].num() == 17);

  // The share page, not the consumer's: its own hooks, the same style, nothing of a group view.
  const auto page = c.get("/");
  CHECK(page.result() == bhttp::status::ok);
  CHECK(page[bhttp::field::content_type] == "text/html; charset=utf-8");
  const auto script = c.get("/dashboard.js");
  CHECK(script[bhttp::field::content_type] == "text/javascript; charset=utf-8");
  const auto style = c.get("/dashboard.css");
  CHECK(style.result() == bhttp::status::ok);
  const std::string all = page.body() + script.body();
  for (const char* hook :
       {"share-rates", "ack-mix", "share-partitions", "share-sessions", "fetch(\"status\""}) {
    INFO(hook);
    CHECK(all.find(hook) != std::string::npos);
  }
  for (const char* consumer_only : {"poll-gauge", "group-map", "rebalance-marker", "fetch(\"group\""}) {
    INFO(consumer_only);
    CHECK(all.find(consumer_only) == std::string::npos);
  }
  CHECK(count_of(page.body(), "<script src=") == 1);
  CHECK(count_of(page.body(), "<link") == 1);
  // A share member has no group view.
  const auto group = c.get("/group");
  CHECK(group.result() == bhttp::status::not_found);
  CHECK(group.body() == "not found; try /, /metrics or /status\n");
}

TEST_CASE("http: a share member's endpoint without a dashboard answers 404 on its paths", "[http]") {
  auto so = share_options();
  so.dashboard = kgroup::http::server_options::dashboard_page::none;
  running_server srv(so, share_pages(fake_share_metrics));
  client c(srv.endpoint());
  for (const char* path : {"/", "/dashboard.js", "/dashboard.css", "/group"}) {
    INFO(path);
    const auto r = c.get(path);
    CHECK(r.result() == bhttp::status::not_found);
    CHECK(r.body() == "not found; try /metrics or /status\n");
  }
  CHECK(c.get("/status").result() == bhttp::status::ok);
}

TEST_CASE("http: a share member's dashboard in headless chromium draws its figures, rates, acks and sessions",
          "[http][browser]") {
  // Each /status answer delivers 50 more records (10 of them redelivered) and accepts 40, so the
  // page sees rates; the names are hostile, so they must arrive as text, not markup.
  std::atomic<int> calls{0};
  auto snapshot = [&] {
    auto m = fake_share_metrics();
    const int n = calls++;
    m.client_id = "<img src=x onerror=alert(1)>";
    m.assignment = {{"jobs<b>", 0}, {"jobs<b>", 2}};
    m.records_delivered += 50u * static_cast<unsigned>(n);
    m.records_redelivered += 10u * static_cast<unsigned>(n);
    m.acknowledged_accept += 40u * static_cast<unsigned>(n);
    return m;
  };
  running_server srv(share_options(), share_pages(snapshot));
  std::string dom;
  try {
    dom = kgroup::test::dump_dom("http://" + srv.endpoint() + "/");
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  INFO(dom.substr(0, 6000));
  REQUIRE(calls.load() >= 3);  // the page kept polling /status
  CHECK(dom.find(">jobs-app</span>") != std::string::npos);
  // Every figure, by its /status key; the counters that do not move keep their values.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"assigned_partitions", "2"},
                                                        {"acknowledged_release_total", "9"},
                                                        {"acknowledged_reject_total", "3"},
                                                        {"acknowledgements_failed_total", "2"},
                                                        {"acknowledgements_lock_expired_total", "1"},
                                                        {"session_resets_total", "1"},
                                                        {"rebootstraps_total", "2"},
                                                        {"share_fetch_requests_total", "40"}}) {
    INFO(key);
    CHECK(element_contains(dom, "<div class=\"stat\" data-stat=\"" + key + "\"", "<b>" + value + "</b>",
                           "</div>"));
  }
  CHECK(dom.find("data-stat=\"records_delivered_total\"") != std::string::npos);
  // A rate series per counter, with its legend; the moving ones drew a line.
  for (const char* series :
       {"delivered", "redelivered", "accepted", "released", "rejected", "lock expired"}) {
    INFO(series);
    CHECK(element_contains(dom, std::string("<g class=\"rate-series\" data-series=\"") + series + "\"",
                           std::string(">") + series + "<"));
  }
  CHECK(element_contains(dom, "<g class=\"rate-series\" data-series=\"delivered\"", "<polyline"));
  CHECK(dom.find(">gathering…</text>") == std::string::npos);
  // The acknowledgement mix: a part per type with acknowledgements.
  for (const char* type : {"accept", "release", "reject", "failed"}) {
    INFO(type);
    CHECK(dom.find(std::string("class=\"ack-part\" data-type=\"") + type + "\"") != std::string::npos);
  }
  // The assignment and the share sessions, in order.
  CHECK(element_contains(dom, "<tbody id=\"share-partitions\">", "<td>jobs&lt;b&gt;-0</td>", "</tbody>"));
  CHECK(element_contains(dom, "<tbody id=\"share-partitions\">", "<td>jobs&lt;b&gt;-2</td>", "</tbody>"));
  CHECK(element_contains(dom, "<tbody id=\"share-sessions\">", "<td class=\"num\">17</td>", "</tbody>"));
  CHECK(element_contains(dom, "<tbody id=\"share-sessions\">", "<td class=\"num\">2</td>", "</tbody>"));
  // Hostile names are text.
  CHECK(dom.find("<img src=x") == std::string::npos);
  CHECK(dom.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  CHECK(dom.find("<b>jobs") == std::string::npos);
}

// librdkafka 2.15.1's mock ([share]: the share@2.15 entries).
TEST_CASE("http: a live share member serves its acknowledgements and session epochs", "[share]") {
  kgroup::test::mock_cluster mc(1);
  kgroup::test::mock_cluster::share_group_settings settings;
  settings.heartbeat_interval_ms = 500;
  settings.earliest = true;
  if (!mc.set_share_groups(settings)) {
    WARN("this librdkafka's mock has no share groups (run with librdkafka 2.15.1)");
    return;
  }
  mc.create_topic("jobs", 1);
  mc.produce("jobs", 9);  // before the member starts (the mock's fault M1)
  kgroup::ShareConsumer c(kgroup::test::test_config(mc.bootstrap_servers())
                              .group("g-share-http")
                              .client_id("share-http")
                              .retry_backoff(50ms)
                              .set("share.acknowledgement.mode", "explicit")
                              .set("observability.http.listen", "127.0.0.1:0"));
  const std::string ep = c.metrics().http_endpoint;
  REQUIRE(ep.rfind("127.0.0.1:", 0) == 0);
  CHECK(ep != "127.0.0.1:0");
  c.subscribe({"jobs"});
  // Offsets 0, 3, 6 accepted, 1, 4, 7 released once (then accepted), 2, 5, 8 rejected.
  std::size_t settled = 0;
  std::size_t redelivered = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (settled < 9 && std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : c.poll(100ms)) {
      const bool again = r.delivery_count.value_or(1) > 1;
      redelivered += again ? 1 : 0;
      const auto type = again || r.offset % 3 == 0 ? kgroup::AcknowledgeType::accept
                        : r.offset % 3 == 1        ? kgroup::AcknowledgeType::release
                                                   : kgroup::AcknowledgeType::reject;
      c.acknowledge(r, type);
      settled += type == kgroup::AcknowledgeType::release ? 0 : 1;
    }
  }
  REQUIRE(settled == 9);
  c.commit_sync(10s);
  CHECK(redelivered == 3);

  // Served on the consumer's background thread while this one does not poll.
  client cl(ep);
  std::map<std::string, std::string> types;
  const auto samples = parse_prometheus(cl.get("/metrics").body(), types);
  const auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    const auto* s = find_sample(samples, name, labels);
    INFO(name);
    REQUIRE(s != nullptr);
    CHECK(s->labels.at("client_id") == "share-http");
    CHECK(s->labels.at("group_id") == "g-share-http");
    return s->value;
  };
  CHECK(value("kgroup_share_records_delivered_total") == 12);
  CHECK(value("kgroup_share_records_redelivered_total") == 3);
  CHECK(value("kgroup_share_records_acknowledged_total", {{"type", "accept"}}) == 6);
  CHECK(value("kgroup_share_records_acknowledged_total", {{"type", "release"}}) == 3);
  CHECK(value("kgroup_share_records_acknowledged_total", {{"type", "reject"}}) == 3);
  CHECK(value("kgroup_share_assigned_partitions") == 1);
  CHECK(value("kgroup_share_member_epoch") >= 1);
  CHECK(value("kgroup_share_fetch_requests_total") >= 2);
  CHECK(value("kgroup_share_session_epoch", {{"broker", "1"}}) >= 1);

  const auto j = parse_json(cl.get("/status").body());
  CHECK(j["group_type"].str() == "share");
  CHECK(j["group"].str() == "g-share-http");
  CHECK(j["member_id"].str() == c.metrics().member_id);
  CHECK(j["state"].str() == c.metrics().state);
  CHECK(j["http_endpoint"].str() == ep);
  REQUIRE(j["assignment"].size() == 1);
  CHECK(j["assignment"][0]["topic"].str() == "jobs");
  CHECK(j["metrics"]["acknowledged_reject_total"].num() == 3);
  REQUIRE(j["session_epochs"].size() == 1);
  CHECK(j["session_epochs"][0]["broker"].num() == 1);

  // Its dashboard, drawn in headless chromium from the live /status.
  std::string dom;
  try {
    dom = kgroup::test::dump_dom("http://" + ep + "/", 90s, 2500);
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  INFO(dom.substr(0, 4000));
  CHECK(dom.find(">g-share-http</span>") != std::string::npos);
  CHECK(element_contains(dom, "<div class=\"stat\" data-stat=\"acknowledged_reject_total\"", "<b>3</b>",
                         "</div>"));
  CHECK(element_contains(dom, "<tbody id=\"share-partitions\">", "<td>jobs-0</td>", "</tbody>"));
  CHECK(element_contains(dom, "<tbody id=\"share-sessions\">", "<td>1</td>", "</tbody>"));
  c.close(10s);
}

TEST_CASE("http: oversized requests and too many header fields are refused", "[http]") {
  auto opts = test_options();
  opts.max_request_bytes = 4096;
  opts.max_header_count = 16;
  running_server srv(opts);

  SECTION("a request larger than max_request_bytes") {
    client c(srv.endpoint());
    REQUIRE_FALSE(
        c.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(10000, 'a') + "\r\n\r\n"));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(c.read(res));
    CHECK(res.result() == bhttp::status::request_header_fields_too_large);
    CHECK(closed_by_peer(c.read_until_closed()));
  }
  SECTION("an endless request line") {
    client c(srv.endpoint());
    REQUIRE_FALSE(c.send_raw("GET /" + std::string(20000, 'a')));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(c.read(res));
    CHECK(res.result() == bhttp::status::request_header_fields_too_large);
  }
  SECTION("more header fields than max_header_count") {
    client c(srv.endpoint());
    std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 20; ++i) req += "X-H" + std::to_string(i) + ": v\r\n";
    REQUIRE_FALSE(c.send_raw(req + "\r\n"));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(c.read(res));
    CHECK(res.result() == bhttp::status::request_header_fields_too_large);
    CHECK(closed_by_peer(c.read_until_closed()));
  }
  SECTION("a malformed request") {
    client c(srv.endpoint());
    REQUIRE_FALSE(c.send_raw("GET\x01 / HTTP/1.1\r\n\r\n"));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(c.read(res));
    CHECK(res.result() == bhttp::status::bad_request);
  }
  SECTION("a GET with a body") {
    client c(srv.endpoint());
    REQUIRE_FALSE(c.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(c.read(res));
    CHECK(res.result() == bhttp::status::bad_request);
  }
  // The server still serves normal requests afterwards.
  client after(srv.endpoint());
  CHECK(after.get("/metrics").result() == bhttp::status::ok);
}

TEST_CASE("http: a slow client is dropped after the request timeout without blocking others", "[http]") {
  auto opts = test_options();
  opts.request_timeout = 300ms;
  running_server srv(opts);

  client silent(srv.endpoint());  // connects and sends nothing
  client slow(srv.endpoint());    // sends half a request
  REQUIRE_FALSE(slow.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\n"));

  // Meanwhile another client is served (several times, on one connection within the timeout).
  client fast(srv.endpoint());
  for (int i = 0; i < 3; ++i) CHECK(fast.get("/status").result() == bhttp::status::ok);

  // The slow ones are closed by the server (their own 10 s read deadline would say timeout).
  CHECK(closed_by_peer(slow.read_until_closed()));
  CHECK(closed_by_peer(silent.read_until_closed()));

  SECTION("a client trickling bytes is dropped too") {
    client trickle(srv.endpoint());
    beast::error_code ec;
    const std::string request =
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(200, 'p') + "\r\n\r\n";
    std::size_t sent = 0;
    // One byte every 20 ms would take over 5 s for the whole request; the server's 300 ms
    // deadline covers the whole request, so the writes start failing long before.
    for (; sent < request.size() && !ec; ++sent) {
      ec = trickle.send_raw(request.substr(sent, 1));
      std::this_thread::sleep_for(20ms);
    }
    if (!ec) ec = trickle.read_until_closed();
    INFO(ec.message() << " after " << sent << " bytes");
    CHECK(sent < request.size());
  }
}

TEST_CASE("http: a scrape is served while 200 idle connections are open", "[http]") {
  auto opts = test_options();
  opts.request_timeout = 60s;  // the idle connections are not timed out during the test
  running_server srv(opts);
  const auto ep_text = srv.endpoint();
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"),
                         static_cast<std::uint16_t>(std::stoi(port_of(ep_text))));
  // 200 connections that never send a byte, from the scraper's own address.
  asio::io_context io;
  std::vector<tcp::socket> idle;
  for (int i = 0; i < 200; ++i) {
    idle.emplace_back(io);
    beast::error_code ec;
    idle.back().connect(ep, ec);
    REQUIRE_FALSE(ec);
  }
  const auto started = std::chrono::steady_clock::now();
  client scraper(ep_text);
  const auto res = scraper.get("/metrics");
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body().find("kgroup_") != std::string::npos);
  CHECK(took < 5s);
  // The server holds no more than its cap: the evicted sockets were closed.
  CHECK(srv.connections() <= opts.max_connections);
}

TEST_CASE("http: the number of connections is capped; a new one evicts the oldest idle one", "[http]") {
  auto opts = test_options();
  opts.max_connections = 4;
  opts.max_connections_per_peer = 2;
  opts.request_timeout = 60s;  // idle connections stay open for the whole test
  running_server srv(opts);
  const auto ep = srv.endpoint();
  // Each peer is its own loopback address. After opening one, wait_for() waits until the server
  // has accepted it, so that the connections' idle times are ordered as they are opened.
  const auto open = [&](const std::string& source) { return std::make_unique<client>(ep, source); };
  const auto wait_for = [&](std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (srv.connections() != n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(2ms);
    REQUIRE(srv.connections() == n);
  };
  // Waits until the server has read the first bytes of the requests just begun.
  const auto wait_for_idle = [&](std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (srv.idle_connections() != n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(2ms);
    REQUIRE(srv.idle_connections() == n);
  };
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n";  // mid-request: not idle

  SECTION("full: the oldest idle connection is evicted, never one mid-request") {
    auto a = open("127.0.0.2");
    wait_for(1);
    auto b = open("127.0.0.3");
    wait_for(2);
    auto c = open("127.0.0.4");
    wait_for(3);
    auto d = open("127.0.0.5");
    wait_for(4);
    // a, the oldest, is in the middle of a request: b is the oldest idle one.
    REQUIRE_FALSE(a->send_raw(partial));
    wait_for_idle(3);
    auto e = open("127.0.0.6");
    CHECK(e->get("/metrics").result() == bhttp::status::ok);
    CHECK(closed_by_peer(b->read_until_closed()));
    // a finishes its request and is answered.
    REQUIRE_FALSE(a->send_raw("\r\n"));
    bhttp::response<bhttp::string_body> res;
    REQUIRE_FALSE(a->read(res));
    CHECK(res.result() == bhttp::status::ok);
    // Now c is the oldest idle one (a and e were answered after c and d were opened).
    auto f = open("127.0.0.7");
    CHECK(f->get("/status").result() == bhttp::status::ok);
    CHECK(closed_by_peer(c->read_until_closed()));
    CHECK(d->get("/metrics").result() == bhttp::status::ok);
    CHECK(srv.connections() == 4);

    // With every connection mid-request, a new one is refused.
    wait_for_idle(4);  // all answered and waiting again
    for (auto* busy : {a.get(), d.get(), e.get(), f.get()}) REQUIRE_FALSE(busy->send_raw(partial));
    wait_for_idle(0);
    auto refused = open("127.0.0.8");
    CHECK(closed_by_peer(refused->read_until_closed()));
    for (auto* busy : {a.get(), d.get(), e.get(), f.get()}) {
      REQUIRE_FALSE(busy->send_raw("\r\n"));
      bhttp::response<bhttp::string_body> r;
      REQUIRE_FALSE(busy->read(r));
      CHECK(r.result() == bhttp::status::ok);
    }
  }

  SECTION("per peer: a peer at its limit evicts its own oldest idle connection") {
    auto other = open("127.0.0.3");  // the oldest idle connection, from another peer
    wait_for(1);
    auto p1 = open("127.0.0.2");
    wait_for(2);
    auto p2 = open("127.0.0.2");
    wait_for(3);
    auto p3 = open("127.0.0.2");  // over the peer's limit of 2: p1 goes, not `other`
    CHECK(p3->get("/metrics").result() == bhttp::status::ok);
    CHECK(closed_by_peer(p1->read_until_closed()));
    CHECK(p2->get("/metrics").result() == bhttp::status::ok);
    CHECK(other->get("/metrics").result() == bhttp::status::ok);
    CHECK(srv.connections() == 3);  // the total cap of 4 was never reached

    // Both of the peer's connections mid-request: its next one is refused, others are served.
    wait_for_idle(3);  // all answered and waiting again
    REQUIRE_FALSE(p2->send_raw(partial));
    REQUIRE_FALSE(p3->send_raw(partial));
    wait_for_idle(1);  // `other` only
    auto p4 = open("127.0.0.2");
    CHECK(closed_by_peer(p4->read_until_closed()));
    auto another = open("127.0.0.4");
    CHECK(another->get("/metrics").result() == bhttp::status::ok);
  }
}

TEST_CASE("http: stop() closes open connections", "[http]") {
  running_server srv(test_options());
  client idle(srv.endpoint());
  client used(srv.endpoint());
  CHECK(used.get("/status").result() == bhttp::status::ok);
  while (srv.connections() < 2) std::this_thread::sleep_for(5ms);
  srv.stop();
  CHECK(closed_by_peer(idle.read_until_closed()));
  CHECK(closed_by_peer(used.read_until_closed()));
  // The closed connections are released once their aborted handlers have run.
  while (srv.connections() > 0) std::this_thread::sleep_for(5ms);
}

TEST_CASE("http: listen addresses: port 0 reports the real port, bad input is an error", "[http]") {
  SECTION("port 0 picks a port and endpoint() reports it") {
    running_server srv(test_options());
    const auto ep = srv.endpoint();
    REQUIRE(ep.rfind("127.0.0.1:", 0) == 0);
    const auto port = std::stoi(ep.substr(10));
    CHECK(port > 0);
    CHECK(port <= 65535);
    client c(ep);
    CHECK(c.get("/metrics").result() == bhttp::status::ok);
  }
  SECTION("localhost means 127.0.0.1") {
    auto opts = test_options();
    opts.listen = "localhost:0";
    running_server srv(opts);
    CHECK(srv.endpoint().rfind("127.0.0.1:", 0) == 0);
  }
  SECTION("malformed addresses are refused with invalid_config, never thrown") {
    for (const char* bad :
         {"", "nonsense", "127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:65536", "127.0.0.1:-1",
          "127.0.0.1:+80", "127.0.0.1:80x", "example.com:9464", "::1:9464", "[::1", "[::1]9464",
          "[::1]:", "300.1.1.1:80", "127.0.0.1:99999999999999999999"}) {
      INFO("listen=" << bad);
      std::string why;
      CHECK_FALSE(kgroup::http::parse_listen_address(bad, why).has_value());
      CHECK(why.find("invalid listen address") == 0);
      asio::io_context io;
      kgroup::http::server_options opts;
      opts.listen = bad;
      kgroup::http::server s(io, opts, fake_metrics);
      std::error_code ec;
      REQUIRE_NOTHROW(ec = s.start());
      CHECK(ec == kgroup::client_errc::invalid_config);
      CHECK(s.endpoint().empty());
    }
    std::string why;
    const auto v6 = kgroup::http::parse_listen_address("[::1]:9464", why);
    REQUIRE(v6.has_value());
    CHECK(v6->host == "::1");
    CHECK(v6->port == 9464);
  }
  SECTION("a port in use is reported") {
    running_server first(test_options());
    asio::io_context io;
    kgroup::http::server_options opts;
    opts.listen = first.endpoint();
    kgroup::http::server second(io, opts, fake_metrics);
    const auto ec = second.start();
    CHECK(ec == std::errc::address_in_use);
    CHECK(second.endpoint().empty());
  }
  SECTION("IPv6 loopback, where the machine has it") {
    asio::io_context io;
    kgroup::http::server_options opts;
    opts.listen = "[::1]:0";
    kgroup::http::server s(io, opts, fake_metrics);
    const auto ec = s.start();
    if (!ec) {
      CHECK(s.endpoint().rfind("[::1]:", 0) == 0);
    } else {
      WARN("no IPv6 loopback here: " << ec.message());
    }
  }
}

TEST_CASE("http: only Host names of the bound address or the allowed list are served (DNS rebinding)",
          "[http]") {
  auto opts = test_options();
  opts.allowed_hosts = {"metrics.internal", "Scrape.Example"};
  running_server srv(opts);
  const auto ep = srv.endpoint();
  const auto port = port_of(ep);
  const auto refused = [&](const std::string& host_line, const std::string& target = "/metrics") {
    const auto res = get_with_host(ep, host_line, target);
    INFO((host_line.empty() ? std::string("no Host") : host_line) << " " << target << ": " << res.body());
    CHECK(res.result() == bhttp::status::misdirected_request);
    CHECK(res[bhttp::field::content_type] == "text/plain; charset=utf-8");
    CHECK(res.body().size() < 200);
    CHECK(res.body().find("kgroup_") == std::string::npos);
    CHECK(res.body().find("orders") == std::string::npos);
  };
  const auto served = [&](const std::string& host_line) {
    const auto res = get_with_host(ep, host_line);
    INFO(host_line);
    CHECK(res.result() == bhttp::status::ok);
    CHECK(res.body().find("kgroup_") != std::string::npos);
  };
  // A web page on evil.example whose name now resolves to 127.0.0.1: its requests name it.
  for (const char* target : {"/metrics", "/status", "/group", "/", "/dashboard.js", "/nope"}) {
    refused("Host: evil.example", target);
  }
  refused("Host: evil.example:" + port);
  refused("");  // no Host at all
  refused("Host: ");
  refused("Host: 127.0.0.1.evil.example:" + port);
  refused("Host: localhost.evil.example");
  refused("Host: metrics.internal.evil.example");
  refused("Host: 127.0.0.2:" + port);  // not the bound address
  refused("Host: [::1]:" + port);
  refused("Host: 127.0.0.1:" + port + "x");
  refused("Host: 127.0.0.1:" + port + "\r\nHost: evil.example");  // two Host fields
  CHECK(srv.snapshots.load() == 0);  // nothing was rendered for a refused request

  served("Host: 127.0.0.1:" + port);
  served("Host: 127.0.0.1");
  served("Host: localhost:" + port);  // bound to loopback
  served("Host: LocalHost");
  served("Host: metrics.internal");
  served("Host: metrics.internal:9464");  // a port-forward may change the port; the name counts
  served("Host: scrape.example:" + port);
  served("Host: SCRAPE.EXAMPLE");

  SECTION("bound to IPv6 loopback, where the machine has it") {
    auto v6 = test_options();
    v6.listen = "[::1]:0";
    asio::io_context probe;
    kgroup::http::server s(probe, v6, fake_metrics);
    if (s.start()) {
      WARN("no IPv6 loopback here");
    } else {
      s.stop();
      running_server srv6(v6);
      const auto ep6 = srv6.endpoint();
      const auto port6 = port_of(ep6);
      CHECK(get_with_host(ep6, "Host: [::1]:" + port6).result() == bhttp::status::ok);
      CHECK(get_with_host(ep6, "Host: [::1]").result() == bhttp::status::ok);
      CHECK(get_with_host(ep6, "Host: localhost:" + port6).result() == bhttp::status::ok);
      CHECK(get_with_host(ep6, "Host: ::1").result() == bhttp::status::misdirected_request);  // no brackets
      CHECK(get_with_host(ep6, "Host: 127.0.0.1:" + port6).result() == bhttp::status::misdirected_request);
      CHECK(get_with_host(ep6, "Host: evil.example").result() == bhttp::status::misdirected_request);
    }
  }
}

TEST_CASE("http: every response has a strict Content-Security-Policy", "[http]") {
  auto opts = test_options();
  opts.group_view = fake_group_view;
  running_server srv(opts);
  const auto ep = srv.endpoint();
  const auto strict = [](const bhttp::response<bhttp::string_body>& res) {
    INFO("status " << res.result_int());
    const std::string csp(res["Content-Security-Policy"]);
    INFO("Content-Security-Policy: " << csp);
    CHECK(csp.rfind("default-src 'none'", 0) == 0);
    CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
    CHECK(csp.find("unsafe") == std::string::npos);  // no 'unsafe-inline', 'unsafe-eval', 'unsafe-hashes'
    CHECK(csp.find('*') == std::string::npos);
    CHECK(res["X-Content-Type-Options"] == "nosniff");
    CHECK(res["X-Frame-Options"] == "DENY");
    CHECK(res["Referrer-Policy"] == "no-referrer");
  };
  client c(ep);
  for (const char* target :
       {"/", "/metrics", "/status", "/group", "/dashboard.js", "/dashboard.css", "/nope"}) {
    INFO(target);
    strict(c.get(target));
  }
  strict(c.get("/status", bhttp::verb::head));
  strict(raw_exchange(ep, "POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"));  // 405
  strict(raw_exchange(ep, "GET\x01 / HTTP/1.1\r\n\r\n"));                                              // 400
  strict(raw_exchange(ep, "GET /" + std::string(20000, 'a')));                                         // 431
  strict(get_with_host(ep, "Host: evil.example"));                                                     // 421

  // The dashboard's script and style are served from their own paths: nothing inline that the
  // policy would have to allow.
  const auto page = c.get("/");
  const auto& html = page.body();
  CHECK(html.find("<script src=\"dashboard.js\"></script>") != std::string::npos);
  CHECK(count_of(html, "<script") == 1);
  CHECK(html.find("<link rel=\"stylesheet\" href=\"dashboard.css\">") != std::string::npos);
  CHECK(html.find("<style") == std::string::npos);
  CHECK(html.find(" style=") == std::string::npos);
  CHECK_FALSE(std::regex_search(html, std::regex(R"( on[a-z]+=)")));  // no inline event handlers
  const std::string csp(page["Content-Security-Policy"]);
  CHECK(csp.find("script-src 'self'") != std::string::npos);
  CHECK(csp.find("style-src 'self'") != std::string::npos);
  const auto js = c.get("/dashboard.js");
  CHECK(js.result() == bhttp::status::ok);
  CHECK(js[bhttp::field::content_type] == "text/javascript; charset=utf-8");
  CHECK(js.body().find("fetch(\"status\"") != std::string::npos);
  CHECK(js.body().find("setAttribute(\"style\"") == std::string::npos);
  CHECK(js.body().find("style: ") == std::string::npos);  // no style attributes set through el()
  const auto css = c.get("/dashboard.css");
  CHECK(css.result() == bhttp::status::ok);
  CHECK(css[bhttp::field::content_type] == "text/css; charset=utf-8");
  CHECK(css.body().find("#group-map") != std::string::npos);
}

TEST_CASE("http: observability.http.allowed.hosts reaches the endpoint", "[http]") {
  kgroup::test::mock_cluster mc(1);
  std::unique_ptr<kgroup::Consumer> c;
  try {
    c = std::make_unique<kgroup::Consumer>(
        kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()},
                       {"group.id", "g-allowed-hosts"},
                       {"observability.http.listen", "127.0.0.1:0"},
                       {"observability.http.allowed.hosts", "kgroup.test, Other.Example"}});
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  const auto ep = c->http_endpoint();
  REQUIRE(ep.rfind("127.0.0.1:", 0) == 0);
  CHECK(get_with_host(ep, "Host: kgroup.test:" + port_of(ep)).result() == bhttp::status::ok);
  CHECK(get_with_host(ep, "Host: other.example").result() == bhttp::status::ok);
  CHECK(get_with_host(ep, "Host: 127.0.0.1:" + port_of(ep)).result() == bhttp::status::ok);
  CHECK(get_with_host(ep, "Host: evil.example").result() == bhttp::status::misdirected_request);
  c->close(5s);

  // An entry that is not a host name or IP address is a configuration error.
  for (const char* bad : {"kgroup.test:9464", "http://kgroup.test", "a b", "kgroup.test/x", "[::1"}) {
    INFO(bad);
    try {
      kgroup::Consumer bad_consumer(kgroup::Config{{"bootstrap.servers", mc.bootstrap_servers()},
                                                   {"group.id", "g-allowed-hosts"},
                                                   {"observability.http.listen", "127.0.0.1:0"},
                                                   {"observability.http.allowed.hosts", bad}});
      FAIL("accepted");
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == kgroup::client_errc::invalid_config);
      CHECK(std::string(e.what()).find("observability.http.allowed.hosts") != std::string::npos);
    }
  }
}

TEST_CASE("http: the dashboard in headless chromium shows the member's partitions and rebalances",
          "[http][browser]") {
  running_server srv(test_options());
  const std::string url = "http://" + srv.endpoint() + "/";
  std::string dom;
  try {
    dom = kgroup::test::dump_dom(url);
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  INFO(dom.substr(0, 4000));
  CHECK(srv.snapshots.load() >= 1);  // the page fetched /status
  // The owned partitions and the one revoked by the second rebalance each have a timeline row.
  for (const char* p : {"orders-3", "orders-7", "orders-5"}) {
    INFO(p);
    CHECK(element_contains(dom, std::string("<g class=\"partition-row\" data-partition=\"") + p + "\"",
                           std::string(">") + p + "</text>"));
  }
  CHECK(dom.find("data-partition=\"orders-3\" data-owned=\"true\"") != std::string::npos);
  CHECK(dom.find("data-partition=\"orders-5\" data-owned=\"false\"") != std::string::npos);
  // Both rebalances are marked and labelled with their cause.
  for (const char* cause : {"member joined", "member left"}) {
    INFO(cause);
    CHECK(element_contains(dom, std::string("<g class=\"rebalance-marker\" data-cause=\"") + cause + "\"",
                           std::string(">") + cause + "</text>"));
  }
  // Ownership bars and the poll gauge were drawn.
  CHECK(dom.find("class=\"own-bar\"") != std::string::npos);
  CHECK(element_contains(dom, "<svg id=\"poll-gauge\"", ">since last poll()</text>", "</svg>"));
  CHECK(dom.find("orders-app") != std::string::npos);
}

TEST_CASE("http: the dashboard of a KIP-848 member speaks of reconciliations and epochs", "[http][browser]") {
  auto m = fake_metrics();
  m.protocol = "consumer";
  m.leader = false;
  running_server srv(test_options(), m);
  std::string dom;
  try {
    dom = kgroup::test::dump_dom("http://" + srv.endpoint() + "/");
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  INFO(dom.substr(0, 4000));
  CHECK(dom.find(">Reconciliations (newest first)</h2>") != std::string::npos);
  CHECK(dom.find("id=\"generation-column\">epoch</th>") != std::string::npos);
  CHECK(dom.find(">reconciliations</span>") != std::string::npos);
  CHECK(dom.find(">last reconciliation</span>") != std::string::npos);
  CHECK(dom.find(">Rebalances (newest first)<") == std::string::npos);
  // The classic page keeps its words.
  running_server classic(test_options());
  const auto classic_dom = kgroup::test::dump_dom("http://" + classic.endpoint() + "/");
  CHECK(classic_dom.find(">Rebalances (newest first)</h2>") != std::string::npos);
  CHECK(classic_dom.find("id=\"generation-column\">generation</th>") != std::string::npos);
}

TEST_CASE("http: a live consumer serves its metrics, status and dashboard", "[http][browser][live]") {
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 4);
  mc.produce("orders", 200);
  kgroup::Consumer c(kgroup::test::test_config(mc.bootstrap_servers())
                         .group("g-live-http")
                         .client_id("live-app")
                         .short_session()
                         .earliest()
                         .strategy("cooperative-sticky")
                         .set("observability.http.listen", "127.0.0.1:0"));
  const std::string ep = c.http_endpoint();
  REQUIRE(ep.rfind("127.0.0.1:", 0) == 0);
  CHECK(ep != "127.0.0.1:0");  // the port the system picked
  c.subscribe({"orders"});
  // The consumer belongs to this thread; HTTP requests come from another (as a scraper would).
  std::int64_t consumed = 0;
  bool enforced = false;
  std::atomic<bool> done{false};
  auto http_side = std::async(std::launch::async, [&] {
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      client cl(ep);
      const auto j = parse_json(cl.get("/status").body());
      if (j["rebalances"].size() >= 2 && j["rebalances"][1]["completed"].boolean() && j["assignment"].size() == 4 &&
          j["metrics"]["records_consumed_total"].num() == 200) {
        break;
      }
      std::this_thread::sleep_for(200ms);
    }
    client cl(ep);
    const auto status = parse_json(cl.get("/status").body());
    std::map<std::string, std::string> types;
    const auto samples = parse_prometheus(cl.get("/metrics").body(), types);
    std::string dom;
    try {
      dom = kgroup::test::dump_dom("http://" + ep + "/");
    } catch (const std::exception& e) {
      dom = std::string("ERROR: ") + e.what();
    }
    done = true;
    return std::make_tuple(status, samples, dom);
  });
  while (!done) {
    consumed += static_cast<std::int64_t>(c.poll(50ms).size());
    if (!enforced && consumed == 200) {
      c.enforce_rebalance("live test");
      enforced = true;
    }
  }
  const auto [status, samples, dom] = http_side.get();
  CHECK(consumed == 200);
  CHECK(status["group"].str() == "g-live-http");
  CHECK(status["client_id"].str() == "live-app");
  CHECK(status["state"].str() == "stable");
  CHECK(status["assignment"].size() == 4);
  REQUIRE(status["rebalances"].size() >= 2);
  CHECK(status["rebalances"][0]["cause"].str() == "member joined");
  CHECK(status["rebalances"][1]["cause"].str() == "enforce_rebalance");
  CHECK(status["rebalances"][1]["detail"].str() == "enforce_rebalance: live test");
  const auto* records = find_sample(samples, "kgroup_consumer_fetch_manager_records_consumed_total",
                                    {{"client_id", "live-app"}, {"group_id", "g-live-http"}});
  REQUIRE(records != nullptr);
  CHECK(records->value == 200);
  const auto* assigned = find_sample(samples, "kgroup_consumer_coordinator_assigned_partitions");
  REQUIRE(assigned != nullptr);
  CHECK(assigned->value == 4);
  // The distributions are recorded by a live consumer: two rebalances (each a JoinGroup and a
  // SyncGroup), fetches, polls; every partition has a lead.
  const auto value = [&](const std::string& name) {
    const auto* s = find_sample(samples, name);
    return s ? s->value : -1.0;
  };
  CHECK(value("kgroup_consumer_coordinator_rebalance_latency_seconds_count") >= 2);
  CHECK(value("kgroup_consumer_coordinator_join_latency_seconds_count") >= 2);
  CHECK(value("kgroup_consumer_coordinator_join_total") >= 2);
  CHECK(value("kgroup_consumer_coordinator_sync_latency_seconds_count") >= 2);
  CHECK(value("kgroup_consumer_fetch_manager_fetch_latency_seconds_count") >= 1);
  CHECK(value("kgroup_consumer_fetch_manager_fetch_size_bytes_sum") > 0);
  CHECK(value("kgroup_consumer_time_between_poll_seconds_count") >= 1);
  CHECK(value("kgroup_consumer_fetch_manager_records_lead_min") >= 0);
  // The rendered page shows the member's four partitions and both rebalances with their causes.
  INFO(dom.substr(0, 4000));
  for (int p = 0; p < 4; ++p) {
    const std::string name = "orders-" + std::to_string(p);
    INFO(name);
    CHECK(element_contains(dom, "<g class=\"partition-row\" data-partition=\"" + name + "\"", ">" + name + "</text>"));
  }
  for (const char* cause : {"member joined", "enforce_rebalance"}) {
    INFO(cause);
    CHECK(element_contains(dom, std::string("<g class=\"rebalance-marker\" data-cause=\"") + cause + "\"",
                           std::string(">") + cause + "</text>"));
  }
  c.close(5s);
}

TEST_CASE("http: GET /group serves the group view and the dashboard draws it as a member x partition map",
          "[http][browser]") {
  auto opts = test_options();
  std::atomic<int> asked{0};
  opts.group_view = [&asked] {
    ++asked;
    return fake_group_view();
  };
  running_server srv(opts);

  SECTION("GET /group: members with their partitions, per partition owner, offsets and lag; unknown is null") {
    client cl(srv.endpoint());
    const auto res = cl.get("/group");
    REQUIRE(res.result_int() == 200);
    CHECK(res[bhttp::field::content_type] == "application/json");
    CHECK(res[bhttp::field::cache_control] == "no-store");
    CHECK(asked.load() == 1);
    const auto j = parse_json(res.body());
    CHECK(j["group"].str() == "orders-app");
    CHECK(j["member_id"].str() == "app-1-aaaa");
    CHECK(j["state"].str() == "Stable");
    CHECK(j["protocol_type"].str() == "consumer");
    CHECK(j["protocol"].str() == "range");
    CHECK(j["generation"].num() == 7);
    CHECK(j["age_ms"].num() == 1500);
    CHECK(j["error"].is_null());
    REQUIRE(j["members"].size() == 3);
    const auto& m1 = j["members"][0];
    CHECK(m1["member_id"].str() == "app-1-aaaa");
    CHECK(m1["client_id"].str() == "app-1");
    CHECK(m1["host"].str() == "/10.0.0.1");
    CHECK(m1["instance_id"].is_null());
    CHECK(m1["error"].is_null());
    REQUIRE(m1["partitions"].size() == 3);
    CHECK(m1["partitions"][0]["topic"].str() == "audit");
    CHECK(m1["partitions"][2]["partition"].num() == 1);
    CHECK(j["members"][1]["client_id"].str() == "app-2 \"blue\"\n");  // escaped in the document
    CHECK(j["members"][1]["instance_id"].str() == "pod-2");
    CHECK(j["members"][2]["partitions"].size() == 0);
    CHECK(j["members"][2]["error"].str().find("does not decode") != std::string::npos);
    REQUIRE(j["partitions"].size() == 6);
    const auto& unowned = j["partitions"][1];
    CHECK(unowned["topic"].str() == "audit");
    CHECK(unowned["partition"].num() == 1);
    CHECK(unowned["owner"].is_null());
    CHECK(unowned["lag"].num() == 37);
    const auto& o0 = j["partitions"][2];
    CHECK(o0["owner"].str() == "app-1-aaaa");
    CHECK(o0["committed"].num() == 90);
    CHECK(o0["end_offset"].num() == 142);
    CHECK(o0["lag"].num() == 52);
    CHECK(j["partitions"][3]["committed"].is_null());
    CHECK(j["partitions"][3]["lag"].is_null());
    CHECK(j["partitions"][3]["end_offset"].num() == 10);
  }

  SECTION("the view of a DescribeGroups answer: bad bytes, another protocol type, double claims, unowned") {
    using described = kgroup::protocol::describe_groups_response::described_group;
    const auto assignment = [](std::vector<kgroup::TopicPartitions> parts) {
      kgroup::MemberAssignment a;
      a.partitions = std::move(parts);
      kgroup::protocol::bytes out;
      REQUIRE_FALSE(kgroup::assign::encode_assignment(a, 1, out));
      return out;
    };
    kgroup::MemberSubscription sub;
    sub.topics = {"orders", "audit"};
    kgroup::protocol::bytes sub_bytes;
    REQUIRE_FALSE(kgroup::assign::encode_subscription(sub, 1, sub_bytes));
    described g;
    g.group_id = "orders-app";
    g.group_state = "Stable";
    g.protocol_type = "consumer";
    g.protocol_data = "range";
    g.members.push_back({"a", std::nullopt, "app-a", "/10.0.0.1", sub_bytes, assignment({{"orders", {1, 0}}})});
    // Version 0, then a topic count far beyond the bytes: must be this member's error only.
    g.members.push_back({"b", "pod-b", "app-b", "/10.0.0.2", {0xff}, {0x00, 0x00, 0x7f, 0xff, 0xff, 0xff}});
    g.members.push_back({"c", std::nullopt, "app-c", "/10.0.0.3", {}, {}});  // left out by the leader: empty
    g.members.push_back({"d", std::nullopt, "app-d", "/10.0.0.4", sub_bytes, assignment({{"orders", {1, 2}}})});
    kgroup::base::group_view v;
    kgroup::fetch::build_members(g, {{"orders", 4}, {"audit", 2}, {"other", 9}}, v);
    REQUIRE(v.members.size() == 4);
    CHECK(v.members[0].partitions == std::vector<kgroup::TopicPartition>{{"orders", 0}, {"orders", 1}});
    CHECK(v.members[0].error.empty());
    CHECK(v.members[1].partitions.empty());
    CHECK(v.members[1].error.find("6 bytes does not decode") != std::string::npos);
    CHECK(v.members[1].instance_id == "pod-b");
    CHECK(v.members[2].partitions.empty());
    CHECK(v.members[2].error.empty());
    CHECK(v.members[3].partitions == std::vector<kgroup::TopicPartition>{{"orders", 1}, {"orders", 2}});
    std::vector<std::pair<std::string, std::string>> owners;  // "topic-p", owner
    for (const auto& p : v.partitions) {
      owners.emplace_back(p.partition.topic + "-" + std::to_string(p.partition.partition), p.owner);
      CHECK(p.committed == -1);
      CHECK(p.lag == -1);
    }
    // Subscribed topics' partitions nobody owns are listed too; "other" is nobody's subscription.
    CHECK(owners == std::vector<std::pair<std::string, std::string>>{{"audit-0", ""},
                                                                      {"audit-1", ""},
                                                                      {"orders-0", "a"},
                                                                      {"orders-1", "a"},
                                                                      {"orders-2", "d"},
                                                                      {"orders-3", ""}});
    // Another protocol's bytes are not read at all.
    g.protocol_type = "connect";
    kgroup::fetch::build_members(g, {{"orders", 4}}, v);
    REQUIRE(v.members.size() == 4);
    for (const auto& m : v.members) {
      CHECK(m.partitions.empty());
      CHECK(m.error.find("not the consumer protocol") != std::string::npos);
    }
    CHECK(v.partitions.empty());
  }

  SECTION("without a group view (no provider) /group is 404 and the page hides its group section") {
    running_server plain(test_options());
    client cl(plain.endpoint());
    CHECK(cl.get("/group").result_int() == 404);
  }

  SECTION("headless chromium: one row per member, one cell per partition, the owner's cell filled with its lag") {
    std::string dom;
    try {
      dom = kgroup::test::dump_dom("http://" + srv.endpoint() + "/");
    } catch (const std::exception& e) {
      FAIL(e.what());
    }
    const auto map = element_of(dom, "<table id=\"group-map\"", "</table>");
    INFO(map.substr(0, 6000));
    CHECK(asked.load() >= 1);  // the page asked for /group
    // Columns: a header cell per partition, grouped under its topic.
    for (const char* p : {"audit-0", "audit-1", "orders-0", "orders-1", "orders-2", "orders-3"}) {
      CHECK(map.find(std::string("<th class=\"pnum\" data-partition=\"") + p + "\"") != std::string::npos);
    }
    CHECK(map.find(">orders</th>") != std::string::npos);
    // Rows: the three members and one for the unowned partition.
    CHECK(count_of(map, "<tr class=\"group-member\"") == 4);
    const std::map<std::string, std::set<std::string>> owned = {
        {"app-1-aaaa", {"audit-0", "orders-0", "orders-1"}},
        {"app-2-bbbb", {"orders-2", "orders-3"}},
        {"rdkafka-cccc", {}},
        {"", {"audit-1"}},
    };
    const std::map<std::string, std::string> lag_text = {{"audit-0", "2"},  {"audit-1", "37"}, {"orders-0", "52"},
                                                         {"orders-1", "?"}, {"orders-2", "0"}, {"orders-3", "1.0M"}};
    for (const auto& [member, parts] : owned) {
      INFO("member " << member);
      const auto row = element_of(map, "<tr class=\"group-member\" data-member=\"" + member + "\"", "</tr>");
      REQUIRE_FALSE(row.empty());
      CHECK(row.find(std::string("data-self=\"") + (member == "app-1-aaaa" ? "true" : "false") + "\"") !=
            std::string::npos);
      CHECK(count_of(row, "<td class=\"group-cell\"") == 6);
      for (const auto& [p, text] : lag_text) {
        INFO(p);
        const std::regex cell("<td class=\"group-cell\" data-partition=\"" + p + "\" data-owned=\"(true|false)\"[^>]*>([^<]*)</td>");
        std::smatch m;
        REQUIRE(std::regex_search(row, m, cell));
        CHECK((m[1] == "true") == (parts.count(p) == 1));
        CHECK(m[2] == (parts.count(p) ? text : ""));
      }
    }
    // The member whose assignment could not be read says so; the summary names state and assignor.
    CHECK(element_contains(map, "<tr class=\"group-member\" data-member=\"rdkafka-cccc\"", "does not decode", "</tr>"));
    CHECK(element_contains(dom, "<div class=\"ident\" id=\"group-summary\"", "Stable · range · 3 members · 6 partitions",
                           "</div>"));
  }
}

namespace {

// Polls `m`'s /group until `done(view)` holds (each request keeps the view wanted); the last view.
json group_of(kgroup::test::polling_member& m, const std::function<bool(const json&)>& done) {
  json j;
  kgroup::test::eventually(
      [&] {
        client cl(m.consumer().http_endpoint());
        j = parse_json(cl.get("/group").body());
        return done(j);
      },
      30s, 200ms);
  return j;
}

std::map<std::string, const json*> members_by_id(const json& j) {
  std::map<std::string, const json*> out;
  for (std::size_t i = 0; i < j["members"].size(); ++i) out[j["members"][i]["member_id"].str()] = &j["members"][i];
  return out;
}

std::set<kgroup::TopicPartition> partitions_of(const json& member) {
  std::set<kgroup::TopicPartition> out;
  for (std::size_t i = 0; i < member["partitions"].size(); ++i) {
    const auto& p = member["partitions"][i];
    out.insert({p["topic"].str(), static_cast<std::int32_t>(p["partition"].num())});
  }
  return out;
}

// partition -> owner ("" for none) in a view.
std::map<kgroup::TopicPartition, std::string> owner_in(const json& j) {
  std::map<kgroup::TopicPartition, std::string> out;
  for (std::size_t i = 0; i < j["partitions"].size(); ++i) {
    const auto& p = j["partitions"][i];
    out[{p["topic"].str(), static_cast<std::int32_t>(p["partition"].num())}] =
        p["owner"].is_null() ? std::string() : p["owner"].str();
  }
  return out;
}

}  // namespace

// The mocks cannot describe groups: group_proxy relays everything to them and answers
// DescribeGroups from the JoinGroup and SyncGroup traffic it relayed (see group_proxy.hpp).
TEST_CASE("http: /group of a live mixed group lists every member, owner and lag; bad bytes are reported per member",
          "[http][live][browser]") {
  using kgroup::test::eventually;
  kgroup::test::mock_cluster mc(3);
  mc.create_topic("orders", 6);
  mc.create_topic("audit", 2);
  mc.produce("orders", 6 * 20);  // 20 records per partition
  mc.produce("audit", 2 * 10);   // 10
  kgroup::test::group_proxy proxy(mc);
  const std::string group = "g-group-view";
  const std::string bootstrap = proxy.bootstrap_servers();

  // Committed offsets before anyone joins: orders-p at p + 1, audit-0 at 4, nothing for audit-1.
  std::map<kgroup::TopicPartition, std::int64_t> committed;
  for (int p = 0; p < 6; ++p) committed[{"orders", p}] = p + 1;
  committed[{"audit", 0}] = 4;
  {
    // The seeder talks to the mock directly: without the proxy nobody can describe the group, and
    // its view says so (found through its own coordinator lookup: it is not a member).
    kgroup::Consumer seeder({{"bootstrap.servers", mc.bootstrap_servers()},
                             {"group.id", group},
                             {"client.id", "seeder"},
                             {"observability.http.listen", "127.0.0.1:0"}});
    kgroup::OffsetMap offsets;
    for (const auto& [tp, off] : committed) offsets[tp].offset = off;
    seeder.commit_sync(offsets, 30s);
    json j;
    CHECK(eventually(
        [&] {
          client cl(seeder.http_endpoint());
          j = parse_json(cl.get("/group").body());
          return !j["error"].is_null();
        },
        20s, 100ms));
    INFO(render_json_error(j));
    CHECK(j["error"].str().find("the coordinator cannot describe groups") == 0);
    CHECK(j["age_ms"].is_null());
    CHECK(j["members"].size() == 0);
    seeder.close(5s);
  }
  const auto end_offset = [](const kgroup::TopicPartition& tp) { return tp.topic == "orders" ? 20 : 10; };
  std::set<kgroup::TopicPartition> all = kgroup::test::all_partitions("orders", 6);
  for (const auto& tp : kgroup::test::all_partitions("audit", 2)) all.insert(tp);

  const auto config = [&](const std::string& client_id) -> kgroup::Config {
    return kgroup::test::test_config(bootstrap)
        .group(group)
        .client_id(client_id)
        .short_session()
        .manual_commit()
        .earliest()
        .strategy("range")
        .set("observability.http.listen", "127.0.0.1:0");
  };
  kgroup::test::timeline tl;
  kgroup::test::polling_member a("a", config("app-a"), {"orders", "audit"}, tl);
  kgroup::test::polling_member b("b", config("app-b"), {"orders", "audit"}, tl);
  const auto union_owned = [&](std::set<kgroup::TopicPartition> extra = {}) {
    for (auto* m : {&a, &b}) {
      const auto o = m->listener().owned();
      extra.insert(o.begin(), o.end());
    }
    return extra;
  };
  REQUIRE(eventually([&] { return !a.listener().owned().empty() && !b.listener().owned().empty() && union_owned() == all; },
                     60s));

  // Two kgroup members: every member and partition, owners as each member's assignment, lag.
  {
    const auto a_id = a.consumer().group_metadata().member_id;
    const auto b_id = b.consumer().group_metadata().member_id;
    const auto j = group_of(a, [&](const json& v) {
      return !v["age_ms"].is_null() && v["members"].size() == 2 && v["partitions"].size() == all.size() &&
             v["error"].is_null() && members_by_id(v).count(a_id) && members_by_id(v).count(b_id);
    });
    INFO(render_json_error(j));
    CHECK(j["group"].str() == group);
    CHECK(j["state"].str() == "Stable");
    CHECK(j["protocol_type"].str() == "consumer");
    CHECK(j["protocol"].str() == "range");
    CHECK(j["member_id"].str() == a_id);
    CHECK(j["generation"].num() == a.consumer().group_metadata().generation_id);
    const auto members = members_by_id(j);
    REQUIRE(members.size() == 2);
    for (auto* m : {&a, &b}) {
      const auto id = m->consumer().group_metadata().member_id;
      REQUIRE(members.count(id));
      const auto& e = *members.at(id);
      CHECK(e["client_id"].str() == (m == &a ? "app-a" : "app-b"));
      CHECK(e["host"].str() == "/127.0.0.1");
      CHECK(e["instance_id"].is_null());
      CHECK(e["error"].is_null());
      CHECK(partitions_of(e) == m->listener().owned());
    }
    REQUIRE(j["partitions"].size() == all.size());
    for (std::size_t i = 0; i < j["partitions"].size(); ++i) {
      const auto& p = j["partitions"][i];
      const kgroup::TopicPartition tp{p["topic"].str(), static_cast<std::int32_t>(p["partition"].num())};
      INFO(tp.topic << "-" << tp.partition);
      REQUIRE_FALSE(p["owner"].is_null());
      CHECK(p["owner"].str() == (a.listener().owned().count(tp) ? a_id : b_id));
      CHECK(p["end_offset"].num() == end_offset(tp));
      if (committed.count(tp)) {
        CHECK(p["committed"].num() == committed.at(tp));
        CHECK(p["lag"].num() == end_offset(tp) - committed.at(tp));
      } else {
        CHECK(p["committed"].is_null());
        CHECK(p["lag"].is_null());
      }
    }
  }

  // A librdkafka member joins: it shows with its partitions, on the other member's view too.
  kgroup::test::rdkafka_member c("c", bootstrap, group, "range", {"orders", "audit"}, tl);
  REQUIRE(eventually(
      [&] {
        return c.stable() && !c.owned().empty() && !a.listener().owned().empty() && !b.listener().owned().empty() &&
               union_owned(c.owned()) == all;
      },
      60s));
  const auto c_id = c.member_id();
  {
    const auto j = group_of(b, [&](const json& v) {
      const auto members = members_by_id(v);
      return v["members"].size() == 3 && members.count(c_id) && partitions_of(*members.at(c_id)) == c.owned() &&
             v["error"].is_null();
    });
    const auto members = members_by_id(j);
    REQUIRE(members.count(c_id));
    CHECK((*members.at(c_id))["client_id"].str() == "rdkafka-c");
    CHECK((*members.at(c_id))["error"].is_null());
    CHECK(partitions_of(*members.at(c_id)) == c.owned());
    CHECK(j["member_id"].str() == b.consumer().group_metadata().member_id);
    const auto owners = owner_in(j);
    for (const auto& tp : c.owned()) CHECK(owners.at(tp) == c_id);

    // The same map in a's dashboard: a row per member (a's marked as this member), a cell per
    // partition, filled where that member owns it. (a's view is brought up to date first: the
    // page's polls run on virtual time and would all see an older view.)
    group_of(a, [&](const json& v) { return v["members"].size() == 3 && members_by_id(v).count(c_id); });
    std::string dom;
    try {
      dom = kgroup::test::dump_dom("http://" + a.consumer().http_endpoint() + "/");
    } catch (const std::exception& e) {
      FAIL(e.what());
    }
    const auto map = element_of(dom, "<table id=\"group-map\"", "</table>");
    INFO(map.substr(0, 6000));
    const std::map<std::string, std::set<kgroup::TopicPartition>> rows = {
        {a.consumer().group_metadata().member_id, a.listener().owned()},
        {b.consumer().group_metadata().member_id, b.listener().owned()},
        {c_id, c.owned()}};
    CHECK(count_of(map, "<tr class=\"group-member\"") == 3);
    for (const auto& [id, parts] : rows) {
      const auto row = element_of(map, "<tr class=\"group-member\" data-member=\"" + id + "\"", "</tr>");
      INFO(id);
      REQUIRE_FALSE(row.empty());
      CHECK(row.find(std::string("data-self=\"") + (id == a.consumer().group_metadata().member_id ? "true" : "false")) !=
            std::string::npos);
      CHECK(count_of(row, "<td class=\"group-cell\"") == all.size());
      CHECK(count_of(row, "data-owned=\"true\"") == parts.size());
      for (const auto& tp : parts) {
        CHECK(row.find("data-partition=\"" + tp.topic + "-" + std::to_string(tp.partition) + "\" data-owned=\"true\"") !=
              std::string::npos);
      }
    }
  }

  // Garbage assignment bytes for the librdkafka member: it is reported with an error, its
  // partitions lose their owner, everybody else is intact.
  proxy.set_tamper([&](kgroup::test::group_proxy::described_group& d) {
    for (auto& m : d.members) {
      if (m.member_id == c_id) m.member_assignment = {0x00, 0x00, 0x00, 0x00, 0x7f, 0xff};
    }
  });
  {
    const auto j = group_of(a, [&](const json& v) {
      const auto members = members_by_id(v);
      return members.count(c_id) && !(*members.at(c_id))["error"].is_null();
    });
    const auto members = members_by_id(j);
    REQUIRE(members.size() == 3);
    CHECK((*members.at(c_id))["error"].str().find("does not decode") != std::string::npos);
    CHECK((*members.at(c_id))["partitions"].size() == 0);
    const auto owners = owner_in(j);
    CHECK(owners.size() == all.size());  // its partitions still listed (the subscriptions name the topics)
    for (const auto& tp : c.owned()) CHECK(owners.at(tp).empty());
    CHECK(partitions_of(*members.at(a.consumer().group_metadata().member_id)) == a.listener().owned());
  }

  // A rebalancing group: the last map stays, the state and the reason are shown.
  proxy.set_tamper([](kgroup::test::group_proxy::described_group& d) {
    d.group_state = "PreparingRebalance";
    d.members.clear();
  });
  {
    const auto j = group_of(a, [&](const json& v) { return v["state"].str() == "PreparingRebalance"; });
    REQUIRE_FALSE(j["error"].is_null());
    CHECK(j["error"].str() == "group is rebalancing: state PreparingRebalance");
    CHECK(j["members"].size() == 3);
  }
  proxy.set_tamper(nullptr);
  CHECK(proxy.describe_requests() > 0);
  c.stop();
  a.stop();
  b.stop();
  CHECK_FALSE(a.poll_error());
  CHECK_FALSE(b.poll_error());
}

// KIP-848: the view comes from ConsumerGroupDescribe (group_proxy answers it from the
// ConsumerGroupHeartbeat traffic it relays; topics by id only, so the member names them).
TEST_CASE("http: /group of a KIP-848 group (ConsumerGroupDescribe) lists every member, owner and lag",
          "[kip848][live]") {
  if (!kgroup::test::mock_cluster::modern()) {
    WARN("skipped: librdkafka " << kgroup::test::mock_cluster::librdkafka_version_string()
                                << "'s mock has no ConsumerGroupHeartbeat (KIP-848); run with librdkafka 2.15.1");
    return;
  }
  using kgroup::test::eventually;
  kgroup::test::mock_cluster mc(3);
  REQUIRE(mc.set_consumer_group_timers(500, 45000));
  mc.create_topic("orders", 6);
  mc.produce("orders", 6 * 20);  // 20 records per partition
  kgroup::test::group_proxy proxy(mc);
  const std::string group = "g-group-view-848";
  const auto config = [&](const std::string& client_id) {
    return kgroup::Config({{"bootstrap.servers", proxy.bootstrap_servers()},
                           {"group.id", group},
                           {"client.id", client_id},
                           {"group.protocol", "consumer"},
                           {"auto.offset.reset", "earliest"},
                           {"auto.commit.interval.ms", "200"},
                           {"observability.http.listen", "127.0.0.1:0"}});
  };
  const auto all = kgroup::test::all_partitions("orders", 6);
  kgroup::test::timeline tl;
  kgroup::test::polling_member a("a", config("app-a"), {"orders"}, tl);
  kgroup::test::polling_member b("b", config("app-b"), {"orders"}, tl);
  REQUIRE(eventually(
      [&] {
        auto both = a.listener().owned();
        const auto ob = b.listener().owned();
        both.insert(ob.begin(), ob.end());
        return !a.listener().owned().empty() && !ob.empty() && both == all;
      },
      30s));
  const auto a_id = a.consumer().group_metadata().member_id;
  const auto b_id = b.consumer().group_metadata().member_id;
  // Every record consumed and auto-committed: lag 0 everywhere, owners as the listeners say.
  const auto j = group_of(a, [&](const json& v) {
    if (v["age_ms"].is_null() || !v["error"].is_null() || v["members"].size() != 2 || v["partitions"].size() != 6)
      return false;
    for (std::size_t i = 0; i < v["partitions"].size(); ++i) {
      if (v["partitions"][i]["lag"].is_null() || v["partitions"][i]["lag"].num() != 0) return false;
    }
    return true;
  });
  INFO(render_json_error(j));
  CHECK(j["group"].str() == group);
  CHECK(j["state"].str() == "Stable");
  CHECK(j["protocol_type"].str() == "consumer");
  CHECK(j["member_id"].str() == a_id);
  CHECK(j["generation"].num() == a.consumer().group_metadata().generation_id);  // the member epoch
  const auto members = members_by_id(j);
  REQUIRE(members.size() == 2);
  for (auto* m : {&a, &b}) {
    const auto id = m->consumer().group_metadata().member_id;
    REQUIRE(members.count(id));
    const auto& e = *members.at(id);
    CHECK(e["client_id"].str() == (m == &a ? "app-a" : "app-b"));
    CHECK(e["host"].str() == "/127.0.0.1");
    CHECK(e["error"].is_null());
    CHECK(partitions_of(e) == m->listener().owned());
  }
  const auto owners = owner_in(j);
  REQUIRE(owners.size() == 6);
  for (const auto& [tp, owner] : owners) {
    INFO(tp.topic << "-" << tp.partition);
    CHECK(owner == (a.listener().owned().count(tp) ? a_id : b_id));
  }
  for (std::size_t i = 0; i < j["partitions"].size(); ++i) {
    CHECK(j["partitions"][i]["end_offset"].num() == 20);
    CHECK(j["partitions"][i]["committed"].num() == 20);
  }
  CHECK(proxy.describe_requests() > 0);

  // b leaves: a's view shows one member owning everything.
  b.stop();
  const auto after = group_of(a, [&](const json& v) {
    return v["members"].size() == 1 && owner_in(v).size() == 6 && partitions_of(v["members"][0]) == all;
  });
  INFO(render_json_error(after));
  CHECK(after["members"].size() == 1);
  for (const auto& [tp, owner] : owner_in(after)) CHECK(owner == a_id);
  a.stop();
  CHECK(tl.overlaps().empty());
}

TEST_CASE("http: the view of a ConsumerGroupDescribe answer: topics named by the answer or by id, unknown ids per member",
          "[http]") {
  using described = kgroup::protocol::consumer_group_describe_response::described_group;
  kgroup::protocol::uuid orders_id, audit_id, gone_id;
  orders_id.bytes[0] = 1;
  audit_id.bytes[0] = 2;
  gone_id.bytes[0] = 3;
  described g;
  g.group_id = "orders-app";
  g.group_state = "Reconciling";
  g.assignor_name = "uniform";
  described::member a;
  a.member_id = "a";
  a.client_id = "app-a";
  a.client_host = "/10.0.0.1";
  a.subscribed_topic_names = {"orders", "audit"};
  a.assignment.topic_partitions = {{orders_id, "orders", {1, 0}}};  // named by the broker
  described::member b;
  b.member_id = "b";
  b.instance_id = "pod-b";
  b.client_id = "app-b";
  b.client_host = "/10.0.0.2";
  b.subscribed_topic_names = {"orders"};
  // Named through metadata; an id metadata does not know is b's error, its other topics stay.
  b.assignment.topic_partitions = {{orders_id, "", {2}}, {gone_id, "", {0}}};
  // The target assignment is not the current one: only what a member owns is shown.
  b.target_assignment.topic_partitions = {{audit_id, "audit", {0, 1}}};
  g.members = {a, b};
  kgroup::base::group_view v;
  kgroup::fetch::build_members(g, {{"orders", 4}, {"audit", 2}, {"other", 3}}, {{orders_id, "orders"}}, v);
  REQUIRE(v.members.size() == 2);
  CHECK(v.members[0].partitions == std::vector<kgroup::TopicPartition>{{"orders", 0}, {"orders", 1}});
  CHECK(v.members[0].error.empty());
  CHECK(v.members[1].partitions == std::vector<kgroup::TopicPartition>{{"orders", 2}});
  CHECK(v.members[1].error == "topic id " + gone_id.to_string() + " not in metadata; those partitions not shown");
  CHECK(v.members[1].instance_id == "pod-b");
  CHECK(v.members[1].host == "/10.0.0.2");
  std::vector<std::pair<std::string, std::string>> owners;
  for (const auto& p : v.partitions) owners.emplace_back(p.partition.topic + "-" + std::to_string(p.partition.partition), p.owner);
  CHECK(owners == std::vector<std::pair<std::string, std::string>>{{"audit-0", ""},
                                                                    {"audit-1", ""},
                                                                    {"orders-0", "a"},
                                                                    {"orders-1", "a"},
                                                                    {"orders-2", "b"},
                                                                    {"orders-3", ""}});
}
