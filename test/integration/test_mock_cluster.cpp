// Tests of the mock cluster wrapper itself (test/support/mock_cluster.*), checked with plain
// librdkafka clients and with hand-written requests on raw sockets, so that later integration
// tests can trust what it seeds and injects.
#include "mock_cluster.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using kgroup::test::mock_cluster;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// ---- a minimal raw Kafka client: enough to observe the mock without librdkafka's retries ----

constexpr std::int16_t api_find_coordinator = 10;
constexpr std::int16_t api_api_versions = 18;

constexpr std::int16_t err_coordinator_not_available = 15;
constexpr std::int16_t err_not_coordinator = 16;
constexpr std::int16_t err_unknown_topic_or_partition = 3;

void put_i16(std::vector<std::uint8_t>& out, std::int16_t v) {
  const auto u = static_cast<std::uint16_t>(v);
  out.push_back(static_cast<std::uint8_t>(u >> 8));
  out.push_back(static_cast<std::uint8_t>(u));
}

void put_i32(std::vector<std::uint8_t>& out, std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(u >> shift));
}

void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put_i16(out, static_cast<std::int16_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

std::int16_t get_i16(const std::vector<std::uint8_t>& in, std::size_t at) {
  return static_cast<std::int16_t>((in.at(at) << 8) | in.at(at + 1));
}

std::int32_t get_i32(const std::vector<std::uint8_t>& in, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | in.at(at + i);
  return static_cast<std::int32_t>(v);
}

// One TCP connection to a loopback port; every call gives up after `timeout`.
class raw_connection {
 public:
  raw_connection(std::uint16_t port, milliseconds timeout) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~raw_connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  [[nodiscard]] bool connected() const { return fd_ >= 0; }

  // Sends one request (header v1) and returns the response body after the correlation id, or
  // nothing if the connection fails, closes or times out.
  std::optional<std::vector<std::uint8_t>> request(std::int16_t api_key, std::int16_t version,
                                                   const std::vector<std::uint8_t>& body) {
    if (fd_ < 0) return std::nullopt;
    const std::int32_t correlation_id = ++correlation_id_;
    std::vector<std::uint8_t> frame;
    put_i32(frame, 0);  // size, patched below
    put_i16(frame, api_key);
    put_i16(frame, version);
    put_i32(frame, correlation_id);
    put_string(frame, "raw-test");
    frame.insert(frame.end(), body.begin(), body.end());
    const auto size = static_cast<std::int32_t>(frame.size() - 4);
    for (int i = 0; i < 4; ++i)
      frame[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(size >> (24 - 8 * i));
    if (::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(frame.size())) {
      return std::nullopt;
    }
    std::vector<std::uint8_t> header(4);
    if (!read_exactly(header)) return std::nullopt;
    const std::int32_t length = get_i32(header, 0);
    if (length < 4 || length > (1 << 20)) return std::nullopt;
    std::vector<std::uint8_t> response(static_cast<std::size_t>(length));
    if (!read_exactly(response)) return std::nullopt;
    if (get_i32(response, 0) != correlation_id) return std::nullopt;
    response.erase(response.begin(), response.begin() + 4);
    return response;
  }

 private:
  bool read_exactly(std::vector<std::uint8_t>& out) {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::recv(fd_, out.data() + done, out.size() - done, 0);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  std::int32_t correlation_id_ = 0;
};

// True if the broker accepts a connection and answers ApiVersions v0 with no error.
bool answers_api_versions(std::uint16_t port, milliseconds timeout = milliseconds(2000)) {
  raw_connection conn(port, timeout);
  const auto response = conn.request(api_api_versions, 0, {});
  return response && response->size() >= 2 && get_i16(*response, 0) == 0;
}

struct coordinator_answer {
  std::int16_t error = -1;
  std::int32_t node_id = -1;
};

// FindCoordinator v0 for a consumer group, sent to one broker.
std::optional<coordinator_answer> find_coordinator(raw_connection& conn, const std::string& group) {
  std::vector<std::uint8_t> body;
  put_string(body, group);
  const auto response = conn.request(api_find_coordinator, 0, body);
  if (!response || response->size() < 6) return std::nullopt;
  return coordinator_answer{get_i16(*response, 0), get_i32(*response, 2)};
}

// ---- librdkafka clients to check the wrapper independently of its own helpers --------------

struct client_deleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using client_ptr = std::unique_ptr<rd_kafka_t, client_deleter>;

client_ptr make_consumer(const mock_cluster& cluster) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  kgroup::test::apply_log_settings(conf);
  kgroup::test::set_config(conf, "bootstrap.servers", cluster.bootstrap_servers());
  kgroup::test::set_config(conf, "group.id", "mock-cluster-test-reader");
  kgroup::test::set_config(conf, "enable.auto.commit", "false");
  kgroup::test::set_config(conf, "enable.partition.eof", "false");
  kgroup::test::set_config(conf, "fetch.wait.max.ms", "20");
  std::array<char, 512> errstr{};
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr.data(), errstr.size());
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    FAIL("rd_kafka_new: " << errstr.data());
  }
  rd_kafka_poll_set_consumer(rk);
  return client_ptr(rk);
}

struct consumed_record {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::string key;
  std::string value;
  std::optional<std::string> seq_header;
};

// Reads `expected` records from every partition of `topic`, from the beginning.
std::vector<consumed_record> consume_all(const mock_cluster& cluster, const std::string& topic,
                                         int partitions, std::size_t expected) {
  const client_ptr consumer = make_consumer(cluster);
  // Learn the leaders first: partitions assigned before that wait out librdkafka's 500 ms offset
  // query retry.
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(consumer.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t md_err = rd_kafka_metadata(consumer.get(), 0, rkt, &md, 10'000);
  rd_kafka_topic_destroy(rkt);
  REQUIRE(md_err == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_metadata_destroy(md);

  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  const rd_kafka_resp_err_t err = rd_kafka_assign(consumer.get(), list);
  rd_kafka_topic_partition_list_destroy(list);
  REQUIRE(err == RD_KAFKA_RESP_ERR_NO_ERROR);

  std::vector<consumed_record> records;
  records.reserve(expected);
  const auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (records.size() < expected && steady_clock::now() < deadline) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), 100);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      consumed_record r;
      r.partition = msg->partition;
      r.offset = msg->offset;
      r.key.assign(static_cast<const char*>(msg->key), msg->key_len);
      r.value.assign(static_cast<const char*>(msg->payload), msg->len);
      rd_kafka_headers_t* headers = nullptr;
      if (rd_kafka_message_headers(msg, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const void* value = nullptr;
        std::size_t size = 0;
        if (rd_kafka_header_get_last(headers, mock_cluster::seq_header_name, &value, &size) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
          r.seq_header = std::string(static_cast<const char*>(value), size);
        }
      }
      records.push_back(std::move(r));
    }
    rd_kafka_message_destroy(msg);
  }
  rd_kafka_consumer_close(consumer.get());
  return records;
}

int metadata_partition_count(const mock_cluster& cluster, const std::string& topic,
                             rd_kafka_resp_err_t* topic_error = nullptr,
                             std::vector<std::int32_t>* leaders = nullptr) {
  const client_ptr rk = make_consumer(cluster);
  const rd_kafka_metadata_t* md = nullptr;
  REQUIRE(rd_kafka_metadata(rk.get(), 1, nullptr, &md, 10'000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  int count = -1;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md->topics[i];
    if (topic != t.topic) continue;
    count = t.partition_cnt;
    if (topic_error) *topic_error = t.err;
    if (leaders) {
      leaders->assign(static_cast<std::size_t>(t.partition_cnt), -2);
      for (int p = 0; p < t.partition_cnt; ++p) {
        leaders->at(static_cast<std::size_t>(t.partitions[p].id)) = t.partitions[p].leader;
      }
    }
  }
  rd_kafka_metadata_destroy(md);
  return count;
}

// Broker id -> "host:port", from a Metadata request.
std::map<std::int32_t, std::string> metadata_brokers(const mock_cluster& cluster) {
  const client_ptr rk = make_consumer(cluster);
  const rd_kafka_metadata_t* md = nullptr;
  REQUIRE(rd_kafka_metadata(rk.get(), 1, nullptr, &md, 10'000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  std::map<std::int32_t, std::string> brokers;
  for (int i = 0; i < md->broker_cnt; ++i) {
    brokers[md->brokers[i].id] = std::string(md->brokers[i].host) + ":" + std::to_string(md->brokers[i].port);
  }
  rd_kafka_metadata_destroy(md);
  return brokers;
}

std::vector<std::int64_t> high_watermarks(const mock_cluster& cluster, const std::string& topic,
                                          int partitions) {
  const client_ptr rk = make_consumer(cluster);
  std::vector<std::int64_t> highs;
  for (int p = 0; p < partitions; ++p) {
    std::int64_t low = -1;
    std::int64_t high = -1;
    REQUIRE(rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &low, &high, 10'000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR);
    CHECK(low == 0);
    highs.push_back(high);
  }
  return highs;
}

std::int64_t sum(const std::vector<std::int64_t>& v) {
  std::int64_t total = 0;
  for (const std::int64_t x : v) total += x;
  return total;
}

// Splits "<topic>-<partition>-<n>" from the right, since topic names may contain '-'.
bool parse_key(const std::string& key, std::string& topic, std::int32_t& partition, std::int64_t& n) {
  const auto last = key.rfind('-');
  if (last == std::string::npos || last == 0) return false;
  const auto middle = key.rfind('-', last - 1);
  if (middle == std::string::npos) return false;
  topic = key.substr(0, middle);
  const char* begin = key.data();
  auto [p_end, p_err] = std::from_chars(begin + middle + 1, begin + last, partition);
  auto [n_end, n_err] = std::from_chars(begin + last + 1, begin + key.size(), n);
  return p_err == std::errc{} && n_err == std::errc{} && p_end == begin + last && n_end == begin + key.size();
}

// Checks every record against the documented scheme; with a fresh topic n equals the offset.
void check_scheme(const std::vector<consumed_record>& records, const std::string& topic,
                  std::size_t value_size) {
  for (const consumed_record& r : records) {
    std::string key_topic;
    std::int32_t key_partition = -1;
    std::int64_t n = -1;
    INFO("key " << r.key << " at " << r.partition << "/" << r.offset);
    REQUIRE(parse_key(r.key, key_topic, key_partition, n));
    REQUIRE(key_topic == topic);
    REQUIRE(key_partition == r.partition);
    REQUIRE(n == r.offset);
    REQUIRE(r.value == kgroup::test::expected_value(r.key, value_size));
  }
}

int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

}  // namespace

TEST_CASE("expected_value is a documented pure function of the key", "[mock]") {
  using kgroup::test::expected_value;
  using kgroup::test::record_key;

  CHECK(record_key("orders", 3, 42) == "orders-3-42");
  const std::string key = record_key("orders", 3, 42);

  CHECK(expected_value(key, 0).empty());
  CHECK(expected_value(key, 4) == "orde");
  CHECK(expected_value(key, key.size()) == key);
  CHECK(expected_value(key, key.size() + 1) == key + ":");

  const std::string value = expected_value(key, 100);
  REQUIRE(value.size() == 100);
  CHECK(value.rfind(key + ":", 0) == 0);
  for (std::size_t i = key.size() + 1; i < value.size(); ++i) {
    REQUIRE(value[i] >= 'a');
    REQUIRE(value[i] <= 'z');
  }
  CHECK(expected_value(key, 100) == value);
  // A longer value extends a shorter one, and other keys get other filler.
  CHECK(expected_value(key, 1000).substr(0, 100) == value);
  CHECK(expected_value(record_key("orders", 3, 43), 100).substr(key.size() + 1) !=
        value.substr(key.size() + 1));
}

TEST_CASE("mock_cluster starts brokers and tears down without leaking threads", "[mock]") {
  const int threads_before = thread_count();
  {
    mock_cluster cluster(4);
    CHECK(cluster.broker_count() == 4);
    CHECK(cluster.handle() != nullptr);
    // Four comma-separated loopback addresses, one per broker id in order, as Metadata says.
    const auto brokers = metadata_brokers(cluster);
    REQUIRE(brokers.size() == 4);
    std::string expected;
    for (int id = 1; id <= 4; ++id) {
      const auto address = cluster.address_of(id);
      CHECK(address.host == "127.0.0.1");
      CHECK(brokers.at(id) == address.host + ":" + std::to_string(address.port));
      CHECK(answers_api_versions(address.port));
      if (!expected.empty()) expected += ",";
      expected += address.host + ":" + std::to_string(address.port);
    }
    CHECK(cluster.bootstrap_servers() == expected);
    CHECK_THROWS_AS(cluster.address_of(5), std::out_of_range);
    CHECK_THROWS_AS(cluster.address_of(0), std::out_of_range);

    cluster.create_topic("t", 2);
    cluster.produce("t", 10);
    CHECK(thread_count() > threads_before);
  }
  CHECK(thread_count() == threads_before);
  CHECK_THROWS_AS(mock_cluster(0), std::invalid_argument);
}

TEST_CASE("create_topic creates topics with the requested partition count", "[mock]") {
  mock_cluster cluster(3);
  cluster.create_topic("one", 1);
  cluster.create_topic("three", 3, 3);
  cluster.create_topic("orders-eu", 12, 2);

  CHECK(metadata_partition_count(cluster, "one") == 1);
  CHECK(metadata_partition_count(cluster, "three") == 3);
  CHECK(metadata_partition_count(cluster, "orders-eu") == 12);
  CHECK(metadata_partition_count(cluster, "missing") == -1);

  CHECK(cluster.partition_count("orders-eu") == 12);
  CHECK_THROWS_AS(cluster.partition_count("missing"), std::runtime_error);
  CHECK(cluster.total_records("orders-eu") == 0);
  CHECK(cluster.watermarks("three").size() == 3);
}

TEST_CASE("produce delivers exactly count records with each codec, spread evenly", "[mock]") {
  // One cluster for all codecs: tearing a mock cluster down can take a second (see the header).
  mock_cluster cluster(3);
  for (const std::string codec : {"none", "gzip", "snappy", "lz4", "zstd"}) {
    INFO("codec " << codec);
    const std::string topic = "seed-" + codec;
    cluster.create_topic(topic, 4);

    // 1001 is not a multiple of 4: the first partition gets the extra record.
    const auto written = cluster.produce(topic, 1001, codec);
    CHECK(written == std::vector<std::int64_t>{251, 250, 250, 250});

    const auto highs = high_watermarks(cluster, topic, 4);
    CHECK(highs == written);
    CHECK(sum(highs) == 1001);
    CHECK(cluster.total_records(topic) == 1001);

    const auto records = consume_all(cluster, topic, 4, 1001);
    REQUIRE(records.size() == 1001);
    check_scheme(records, topic, 100);
  }
}

TEST_CASE("produce continues round-robin across calls and honours an explicit partition", "[mock]") {
  mock_cluster cluster(2);
  cluster.create_topic("rr", 4);

  CHECK(cluster.produce("rr", 6) == std::vector<std::int64_t>{2, 2, 1, 1});
  CHECK(cluster.produce("rr", 2) == std::vector<std::int64_t>{0, 0, 1, 1});
  CHECK(cluster.produce("rr", 5, "none", 1) == std::vector<std::int64_t>{0, 5, 0, 0});
  CHECK(high_watermarks(cluster, "rr", 4) == std::vector<std::int64_t>{2, 7, 2, 2});

  // Keys keep counting per partition across calls, so n is still the offset.
  const auto records = consume_all(cluster, "rr", 4, 13);
  REQUIRE(records.size() == 13);
  check_scheme(records, "rr", 100);
}

TEST_CASE("produce honours value_size and produce_with_headers adds the seq header", "[mock]") {
  mock_cluster cluster(1);

  // short values
  cluster.create_topic("short", 2);
  cluster.produce("short", 20, "none", -1, 5);
  auto records = consume_all(cluster, "short", 2, 20);
  REQUIRE(records.size() == 20);
  check_scheme(records, "short", 5);
  CHECK(records.front().value.size() == 5);
  CHECK_FALSE(records.front().seq_header.has_value());

  // large compressed values
  cluster.create_topic("large", 2);
  cluster.produce("large", 20, "zstd", -1, 10'000);
  records = consume_all(cluster, "large", 2, 20);
  REQUIRE(records.size() == 20);
  check_scheme(records, "large", 10'000);

  // headers
  cluster.create_topic("headers", 2);
  cluster.produce_with_headers("headers", 30, "snappy");
  records = consume_all(cluster, "headers", 2, 30);
  REQUIRE(records.size() == 30);
  check_scheme(records, "headers", 100);
  for (const auto& r : records) {
    REQUIRE(r.seq_header.has_value());
    CHECK(*r.seq_header == std::to_string(r.offset));
  }
}

TEST_CASE("produce reports bad arguments as exceptions", "[mock]") {
  mock_cluster cluster(1);
  cluster.create_topic("t", 2);
  CHECK_THROWS_AS(cluster.produce("missing", 10), std::runtime_error);
  CHECK_THROWS_WITH(cluster.produce("t", 10, "brotli"), Catch::Contains("compression.codec"));
  CHECK_THROWS_AS(cluster.produce("t", 10, "none", 2), std::invalid_argument);
  CHECK_THROWS_AS(cluster.produce("t", -1), std::invalid_argument);
  CHECK(cluster.produce("t", 0) == std::vector<std::int64_t>{0, 0});
  CHECK(cluster.total_records("t") == 0);
}

TEST_CASE("produce seeds hundreds of thousands of records in seconds", "[mock]") {
  mock_cluster cluster(3);
  // 24 partitions keep each under the mock's 5 MB per-partition limit, so nothing is dropped.
  cluster.create_topic("bulk", 24);
  const auto start = steady_clock::now();
  const auto written = cluster.produce("bulk", 300'000, "lz4");
  const auto elapsed = steady_clock::now() - start;
  CHECK(elapsed < std::chrono::seconds(20));
  CHECK(sum(written) == 300'000);
  const auto marks = cluster.watermarks("bulk");
  for (const auto& w : marks) {
    CHECK(w.low == 0);
    CHECK(w.high == 12'500);
  }
}

TEST_CASE("broker_down makes a broker unreachable and broker_up brings it back", "[mock]") {
  mock_cluster cluster(3);
  const auto port1 = cluster.address_of(1).port;
  const auto port2 = cluster.address_of(2).port;
  REQUIRE(answers_api_versions(port2));

  // An open connection is closed too, not only new ones refused.
  raw_connection open(port2, milliseconds(2000));
  REQUIRE(open.request(api_api_versions, 0, {}).has_value());

  cluster.broker_down(2);
  CHECK_FALSE(answers_api_versions(port2, milliseconds(500)));
  CHECK_FALSE(open.request(api_api_versions, 0, {}).has_value());
  CHECK(answers_api_versions(port1));

  cluster.broker_up(2);
  CHECK(answers_api_versions(port2));
  CHECK(cluster.address_of(2).port == port2);

  cluster.broker_down(-1);
  CHECK_FALSE(answers_api_versions(port1, milliseconds(500)));
  cluster.broker_up(-1);
  CHECK(answers_api_versions(port1));

  CHECK_THROWS_AS(cluster.broker_down(9), std::runtime_error);
}

TEST_CASE("back-to-back fault injection commands are answered in milliseconds", "[mock]") {
  // Without call_mock()'s workaround about a third of these wait a full second.
  mock_cluster cluster(3);
  const auto start = steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    cluster.broker_down(2);
    cluster.broker_up(2);
    cluster.broker_down(-1);
    cluster.broker_up(-1);
  }
  CHECK(steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(answers_api_versions(cluster.address_of(2).port));
}

TEST_CASE("set_rtt delays a broker's responses", "[mock]") {
  mock_cluster cluster(2);
  const auto port = cluster.address_of(1).port;
  raw_connection conn(port, milliseconds(3000));

  cluster.set_rtt(1, 300);
  auto start = steady_clock::now();
  REQUIRE(conn.request(api_api_versions, 0, {}).has_value());
  CHECK(steady_clock::now() - start >= milliseconds(250));

  // Only broker 1 is slow.
  raw_connection other(cluster.address_of(2).port, milliseconds(3000));
  start = steady_clock::now();
  REQUIRE(other.request(api_api_versions, 0, {}).has_value());
  CHECK(steady_clock::now() - start < milliseconds(200));

  cluster.set_rtt(1, 0);
  start = steady_clock::now();
  REQUIRE(conn.request(api_api_versions, 0, {}).has_value());
  CHECK(steady_clock::now() - start < milliseconds(200));
}

TEST_CASE("request errors and coordinators are injected", "[mock]") {
  mock_cluster cluster(3);
  raw_connection conn1(cluster.address_of(1).port, milliseconds(3000));
  raw_connection conn2(cluster.address_of(2).port, milliseconds(3000));

  SECTION("cluster-wide error sequence, in order, then success") {
    cluster.push_request_errors(api_find_coordinator, {err_coordinator_not_available, err_not_coordinator});
    auto a = find_coordinator(conn1, "g");
    auto b = find_coordinator(conn2, "g");
    auto c = find_coordinator(conn1, "g");
    REQUIRE((a && b && c));
    CHECK(a->error == err_coordinator_not_available);
    CHECK(b->error == err_not_coordinator);
    CHECK(c->error == 0);
  }
  SECTION("clear_request_errors drops queued errors") {
    cluster.push_request_errors(api_find_coordinator, {err_coordinator_not_available});
    cluster.clear_request_errors(api_find_coordinator);
    auto a = find_coordinator(conn1, "g");
    REQUIRE(a);
    CHECK(a->error == 0);
  }
  SECTION("per-broker errors with delay") {
    cluster.push_broker_request_errors(1, api_find_coordinator, {{err_not_coordinator, 0}, {0, 300}});
    CHECK(cluster.broker_request_errors_left(1, api_find_coordinator) == 2);
    auto other = find_coordinator(conn2, "g");
    REQUIRE(other);
    CHECK(other->error == 0);

    auto first = find_coordinator(conn1, "g");
    REQUIRE(first);
    CHECK(first->error == err_not_coordinator);
    const auto start = steady_clock::now();
    auto second = find_coordinator(conn1, "g");
    REQUIRE(second);
    CHECK(second->error == 0);
    CHECK(steady_clock::now() - start >= milliseconds(250));
    CHECK(cluster.broker_request_errors_left(1, api_find_coordinator) == 0);
    CHECK_THROWS_AS(cluster.push_broker_request_errors(7, api_find_coordinator, {{16, 0}}),
                    std::runtime_error);

    // The documented caveat: broker 1's now empty stack hides cluster-wide errors there.
    cluster.push_request_errors(api_find_coordinator, {err_coordinator_not_available});
    auto hidden = find_coordinator(conn1, "g");
    auto seen = find_coordinator(conn2, "g");
    REQUIRE((hidden && seen));
    CHECK(hidden->error == 0);
    CHECK(seen->error == err_coordinator_not_available);
  }
  SECTION("set_coordinator") {
    for (const std::int32_t id : {1, 3, 2}) {
      cluster.set_coordinator("payments", id);
      auto answer = find_coordinator(conn1, "payments");
      REQUIRE(answer);
      CHECK(answer->error == 0);
      CHECK(answer->node_id == id);
    }
  }
}

TEST_CASE("set_partition_leader and set_topic_error show in metadata", "[mock]") {
  mock_cluster cluster(3);
  cluster.create_topic("moves", 3);

  cluster.set_partition_leader("moves", 0, 3);
  cluster.set_partition_leader("moves", 1, 3);
  cluster.set_partition_leader("moves", 2, 1);
  std::vector<std::int32_t> leaders;
  REQUIRE(metadata_partition_count(cluster, "moves", nullptr, &leaders) == 3);
  CHECK(leaders == std::vector<std::int32_t>{3, 3, 1});

  // Seeding follows the new leaders.
  CHECK(cluster.produce("moves", 30) == std::vector<std::int64_t>{10, 10, 10});

  cluster.set_topic_error("moves", err_unknown_topic_or_partition);
  rd_kafka_resp_err_t topic_error = RD_KAFKA_RESP_ERR_NO_ERROR;
  metadata_partition_count(cluster, "moves", &topic_error);
  CHECK(topic_error == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  CHECK_THROWS_AS(cluster.partition_count("moves"), std::runtime_error);

  cluster.set_topic_error("moves", 0);
  CHECK(cluster.partition_count("moves") == 3);
}
