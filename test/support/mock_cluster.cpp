#include "mock_cluster.hpp"

#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace kgroup::test {
namespace {

using namespace std::string_literals;

// Records that cannot be delivered within this time fail (and produce() throws) rather than
// hanging a test forever, e.g. when a test left a broker down.
constexpr int message_timeout_ms = 60'000;

struct client_deleter {
  void operator()(rd_kafka_t* rk) const noexcept { rd_kafka_destroy(rk); }
};
using client_ptr = std::unique_ptr<rd_kafka_t, client_deleter>;

struct conf_deleter {
  void operator()(rd_kafka_conf_t* conf) const noexcept { rd_kafka_conf_destroy(conf); }
};
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;

struct metadata_deleter {
  void operator()(const rd_kafka_metadata_t* md) const noexcept { rd_kafka_metadata_destroy(md); }
};
using metadata_ptr = std::unique_ptr<const rd_kafka_metadata_t, metadata_deleter>;

[[noreturn]] void fail(const std::string& what, rd_kafka_resp_err_t err) {
  throw std::runtime_error(what + ": " + rd_kafka_err2str(err));
}

void check(rd_kafka_resp_err_t err, const std::string& what) {
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) fail(what, err);
}

const char* debug_contexts_from_env() {
  const char* text = std::getenv("KGROUP_MOCK_DEBUG");
  return text != nullptr && *text != '\0' ? text : nullptr;
}

int log_level_from_env() {
  if (debug_contexts_from_env() != nullptr) return 7;
  const char* text = std::getenv("KGROUP_MOCK_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return 3;
  const int level = std::atoi(text);
  return std::clamp(level, 0, 7);
}

void log_to_stderr(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  // Milliseconds since the epoch, to line the log up with a test's own output or a capture.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::fprintf(stderr, "[librdkafka %lld.%03lld %d %s %s] %s\n", static_cast<long long>(ms / 1000),
               static_cast<long long>(ms % 1000), level, rd_kafka_name(rk), facility, message);
}

client_ptr make_client(rd_kafka_type_t type, conf_ptr conf) {
  std::array<char, 512> errstr{};
  // librdkafka 2.5+ pushes its own client telemetry (KIP-714) to the mock by default; the mock's
  // log of decoded pushes (set_telemetry()) is for the clients under test alone. 2.0.2 does not
  // know the key: the refusal is ignored.
  rd_kafka_conf_set(conf.get(), "enable.metrics.push", "false", errstr.data(), errstr.size());
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), errstr.data(), errstr.size());
  if (rk == nullptr) throw std::runtime_error("rd_kafka_new: "s + errstr.data());
  conf.release();  // rd_kafka_new took ownership
  return client_ptr(rk);
}

// A short-lived client for Metadata and ListOffsets requests. Made per call rather than kept, so
// that no idle connection of ours reconnects to downed brokers or shows up in a test's traffic.
client_ptr make_query_client(const std::string& bootstrap_servers) {
  conf_ptr conf(rd_kafka_conf_new());
  apply_log_settings(conf.get());
  set_config(conf.get(), "bootstrap.servers", bootstrap_servers);
  set_config(conf.get(), "client.id", "kgroup-mock-query");
  return make_client(RD_KAFKA_PRODUCER, std::move(conf));
}

// Metadata for all topics: asking for one topic by name would auto-create it in the mock.
metadata_ptr fetch_metadata(rd_kafka_t* rk) {
  const rd_kafka_metadata_t* md = nullptr;
  check(rd_kafka_metadata(rk, 1, nullptr, &md, 10'000), "metadata request");
  return metadata_ptr(md);
}

int topic_partitions(const rd_kafka_metadata_t& md, const std::string& topic) {
  for (int i = 0; i < md.topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md.topics[i];
    if (topic != t.topic) continue;
    if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) fail("topic " + topic, t.err);
    return t.partition_cnt;
  }
  throw std::runtime_error("topic " + topic + " does not exist (create it first)");
}

std::uint64_t fnv1a_64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Appends expected_value(key, value_size) to `out`; produce() reuses one buffer for every record.
void append_value(std::string& out, std::string_view key, std::size_t value_size) {
  const std::size_t prefix = std::min(value_size, key.size());
  out.append(key.substr(0, prefix));
  if (value_size <= key.size()) return;
  out.push_back(':');
  // xorshift64*: its state must never be zero.
  std::uint64_t state = fnv1a_64(key);
  if (state == 0) state = 0x9e3779b97f4a7c15ULL;
  for (std::size_t i = key.size() + 1; i < value_size; ++i) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const std::uint64_t r = state * 0x2545f4914f6cdd1dULL;
    out.push_back(static_cast<char>('a' + (r >> 32) % 26));
  }
}

// Delivery reports, counted on the producing thread (dr_msg_cb runs inside rd_kafka_poll/flush).
struct delivery_state {
  std::int64_t delivered = 0;
  std::int64_t failed = 0;
  std::string first_error;
};

void on_delivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* msg, void* opaque) {
  auto* state = static_cast<delivery_state*>(opaque);
  if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    ++state->delivered;
    return;
  }
  if (state->failed++ == 0) {
    state->first_error = std::string(rd_kafka_topic_name(msg->rkt)) + " [" + std::to_string(msg->partition) +
                         "]: " + rd_kafka_err2str(msg->err);
  }
}

// The idempotent producer every seeding call uses: idempotence keeps each partition's records in
// order and free of duplicates across retries, which is what makes n equal the offset. With
// `compression` (produce()): sized for large seeds (the whole seed fits in the queue, full
// batches); without (produce_records()): defaults.
client_ptr make_seed_producer(const std::string& bootstrap, delivery_state& delivery, const std::string* compression) {
  conf_ptr conf(rd_kafka_conf_new());
  apply_log_settings(conf.get());
  set_config(conf.get(), "bootstrap.servers", bootstrap);
  set_config(conf.get(), "client.id", "kgroup-mock-seeder");
  set_config(conf.get(), "enable.idempotence", "true");
  if (compression) {
    set_config(conf.get(), "compression.codec", *compression);
    set_config(conf.get(), "queue.buffering.max.messages", "2000000");
    set_config(conf.get(), "queue.buffering.max.kbytes", "2097152");
    set_config(conf.get(), "batch.num.messages", "10000");
  }
  set_config(conf.get(), "linger.ms", "5");
  set_config(conf.get(), "message.timeout.ms", std::to_string(message_timeout_ms));
  set_config(conf.get(), "allow.auto.create.topics", "false");
  rd_kafka_conf_set_dr_msg_cb(conf.get(), on_delivery);
  rd_kafka_conf_set_opaque(conf.get(), &delivery);
  return make_client(RD_KAFKA_PRODUCER, std::move(conf));
}

// Flushes `producer` and throws unless all `count` records were acknowledged.
void wait_for_delivery(rd_kafka_t* producer, const delivery_state& delivery, std::int64_t count,
                       const std::string& topic) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(message_timeout_ms + 10'000);
  while (rd_kafka_outq_len(producer) > 0 && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_flush(producer, 500);
  }
  if (rd_kafka_outq_len(producer) > 0) {
    throw std::runtime_error("produce to " + topic + ": records still undelivered after " +
                             std::to_string(message_timeout_ms / 1000 + 10) + " s");
  }
  if (delivery.failed > 0) {
    throw std::runtime_error("produce to " + topic + ": " + std::to_string(delivery.failed) + " of " +
                             std::to_string(count) + " records failed; first: " + delivery.first_error);
  }
  if (delivery.delivered != count) {
    throw std::runtime_error("produce to " + topic + ": " + std::to_string(delivery.delivered) + " of " +
                             std::to_string(count) + " records acknowledged");
  }
}

// Ports of "127.0.0.1:P1,127.0.0.1:P2,...", which the mock lists in broker id order.
std::vector<std::uint16_t> ports_of(const std::string& bootstrap_servers) {
  std::vector<std::uint16_t> ports;
  std::size_t start = 0;
  while (start < bootstrap_servers.size()) {
    std::size_t end = bootstrap_servers.find(',', start);
    if (end == std::string::npos) end = bootstrap_servers.size();
    const std::string server = bootstrap_servers.substr(start, end - start);
    const std::size_t colon = server.rfind(':');
    if (colon != std::string::npos) {
      ports.push_back(static_cast<std::uint16_t>(std::stoi(server.substr(colon + 1))));
    }
    start = end + 1;
  }
  return ports;
}

// Opens and closes a connection to a loopback port: a listening mock broker's poll() wakes up.
void poke(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Refused at once by a downed broker; that is fine, another one may be up.
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::close(fd);
}

}  // namespace

std::string record_key(std::string_view topic, std::int32_t partition, std::int64_t n) {
  std::string key;
  key.reserve(topic.size() + 24);
  key.append(topic).append("-").append(std::to_string(partition)).append("-").append(std::to_string(n));
  return key;
}

std::string expected_value(std::string_view key, std::size_t value_size) {
  std::string value;
  value.reserve(value_size);
  append_value(value, key, value_size);
  return value;
}

void set_config(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  std::array<char, 512> errstr{};
  if (rd_kafka_conf_set(conf, name, value.c_str(), errstr.data(), errstr.size()) != RD_KAFKA_CONF_OK) {
    throw std::runtime_error("config "s + name + "=" + value + ": " + errstr.data());
  }
}

void apply_log_settings(rd_kafka_conf_t* conf) {
  // log_level filters inside librdkafka, so filtered lines are never even formatted.
  set_config(conf, "log_level", std::to_string(log_level_from_env()));
  if (const char* contexts = debug_contexts_from_env()) set_config(conf, "debug", contexts);
  rd_kafka_conf_set_log_cb(conf, log_to_stderr);
}

mock_cluster::mock_cluster(int broker_count) : broker_count_(broker_count) {
  if (broker_count < 1) throw std::invalid_argument("mock_cluster needs at least one broker");

  // The cluster is created through test.mock.num.brokers rather than rd_kafka_mock_cluster_new()
  // because only then is it torn down while its handle is terminating; 2.0.2's explicit
  // rd_kafka_mock_cluster_destroy() often sleeps a full second joining an internal broker
  // thread, which adds up over a test suite. The price: this handle, like any client, opens one
  // idle connection to a broker (client.id kgroup-mock-cluster) and reconnects it if needed.
  conf_ptr conf(rd_kafka_conf_new());
  apply_log_settings(conf.get());
  // Its connection's troubles (e.g. after broker_down) concern nobody: only show them when
  // debugging.
  if (log_level_from_env() < 7) set_config(conf.get(), "log_level", "2");
  owner_log_level_ = log_level_from_env() < 7 ? 2 : 7;
  // Routed through owner_log() (set_telemetry() collects the mock's telemetry lines there).
  rd_kafka_conf_set_opaque(conf.get(), this);
  rd_kafka_conf_set_log_cb(conf.get(), [](const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
    static_cast<mock_cluster*>(rd_kafka_opaque(rk))->owner_log(rk, level, fac, buf);
  });
  rd_kafka_conf_set_error_cb(conf.get(), [](rd_kafka_t*, int, const char*, void*) {});
  set_config(conf.get(), "client.id", "kgroup-mock-cluster");
  set_config(conf.get(), "test.mock.num.brokers", std::to_string(broker_count));
  set_config(conf.get(), "topic.metadata.refresh.interval.ms", "-1");
  set_config(conf.get(), "log.connection.close", "false");
  client_ptr owner = make_client(RD_KAFKA_PRODUCER, std::move(conf));

  cluster_ = rd_kafka_handle_mock_cluster(owner.get());
  if (cluster_ == nullptr) {
    throw std::runtime_error("librdkafka did not create the mock cluster (see its log on stderr)");
  }
  bootstrap_servers_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  ports_ = ports_of(bootstrap_servers_);
  if (ports_.size() != static_cast<std::size_t>(broker_count)) {
    throw std::runtime_error("unexpected mock bootstrap servers: " + bootstrap_servers_);
  }
  owner_ = owner.release();  // from here on the destructor owns it
  const char* no_caps = std::getenv("KGROUP_MOCK_NO_CAPS");
  if (no_caps == nullptr || std::string_view(no_caps) != "1") {
    for (const auto& cap : version_caps()) set_api_version(cap.api_key, cap.min_version, cap.max_version);
  }
  // Both mocks answer a follower's SyncGroup that arrives after the leader's with INVALID_REQUEST
  // (rdkafka_mock_cgrp.c: a SyncGroup in state Up; real Kafka returns the member's assignment).
  // librdkafka's own leader never wins that race (it fetches metadata on its main thread before
  // assigning); kgroup's leader refreshes metadata in well under a millisecond on loopback, so on
  // a loaded machine a follower whose thread waits for a CPU loses it, rejoins, and loses again
  // in every later rebalance. Metadata answers are delayed a little so the followers' SyncGroups
  // come first, as on a real network. Only 2.15.1 honours it (2.0.2's Metadata handler ignores
  // injected delays), so on 2.0.2 every broker gets a round trip of default_rtt_ms_202 instead,
  // which delays the leader's Metadata as much (and every other answer: a real network's cost).
  // Before, single tests that met the race set_rtt() themselves; then a CI run failed a group
  // test that had not (issue 19's session).
  // $KGROUP_MOCK_METADATA_DELAY_MS overrides (0: none).
  int metadata_delay_ms = default_metadata_delay_ms;
  if (const char* d = std::getenv("KGROUP_MOCK_METADATA_DELAY_MS"); d != nullptr && *d != '\0') {
    metadata_delay_ms = std::max(0, std::atoi(d));
  }
  if (!modern()) {
    int rtt_ms = default_rtt_ms_202;
    if (const char* r = std::getenv("KGROUP_MOCK_RTT_MS"); r != nullptr && *r != '\0') rtt_ms = std::max(0, std::atoi(r));
    if (rtt_ms > 0) set_rtt(-1, rtt_ms);
  }
  if (metadata_delay_ms > 0) {
    constexpr std::int16_t metadata_api = 3;
    for (std::int32_t b = 1; b <= broker_count; ++b) {
      for (int i = 0; i < metadata_delays_per_broker; ++i) {
        check(rd_kafka_mock_broker_push_request_error_rtts(cluster_, b, metadata_api, 1, RD_KAFKA_RESP_ERR_NO_ERROR,
                                                           metadata_delay_ms),
              "metadata delay on broker " + std::to_string(b));
      }
    }
  }
}

int mock_cluster::librdkafka_version() noexcept { return rd_kafka_version(); }

std::string mock_cluster::librdkafka_version_string() { return rd_kafka_version_str(); }

std::vector<mock_cluster::version_cap> mock_cluster::version_caps() {
  if (!modern()) {
    // librdkafka 2.0.2's mock writes the leader epoch of a ListOffsets v4/v5 answer as an int64
    // (the field is an int32), so every later field is misread.
    return {{2, 0, 3, "ListOffsets v4-5: the leader epoch written as an int64"}};
  }
  // librdkafka 2.15.1's mock (src/rdkafka_mock_handlers.c) advertises these versions but parses
  // them wrongly; librdkafka's own client never sends them. See DESIGN.md "Test clusters".
  return {
      {11, 0, 5, "JoinGroup v6: flexible protocols array read with an int32 count"},
      {14, 0, 3, "SyncGroup v4: flexible assignments array read with an int32 count"},
      {13, 0, 2, "LeaveGroup v3-4: read and answered with the v0-2 layout"},
      {9, 0, 4, "OffsetFetch v5-6: the partition's current leader epoch answered as the committed one"},
  };
}

void mock_cluster::set_api_version(std::int16_t api_key, std::int16_t min_version, std::int16_t max_version) {
  check(call_mock([&] { return rd_kafka_mock_set_apiversion(cluster_, api_key, min_version, max_version); }),
        "versions of API " + std::to_string(api_key));
}

rd_kafka_resp_err_t mock_cluster::call_mock(const std::function<rd_kafka_resp_err_t()>& op) {
  // Why all this: in librdkafka 2.0.2 the mock thread serves its command queue and only then
  // drains the pipe that signals new commands. A command queued in between (typically the next
  // one, issued as soon as the previous one was answered) loses its wake-up and waits for the
  // thread's next timer, up to a second; back-to-back commands hit this about a third of the
  // time. So commands are spaced a little, which avoids nearly all of it, and a command still
  // unanswered after a few milliseconds gets the thread woken by a connection to a broker port.
  std::lock_guard serial(op_mutex_);
  std::this_thread::sleep_until(last_op_done_ + std::chrono::milliseconds(1));

  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  rd_kafka_resp_err_t result = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::thread caller([&] {
    const rd_kafka_resp_err_t err = op();
    const std::lock_guard lock(done_mutex);
    result = err;
    done = true;
    done_cv.notify_one();
  });
  {
    std::unique_lock lock(done_mutex);
    while (!done_cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return done; })) {
      lock.unlock();
      for (const std::uint16_t port : ports_) poke(port);
      lock.lock();
    }
  }
  caller.join();
  last_op_done_ = std::chrono::steady_clock::now();
  return result;
}

mock_cluster::~mock_cluster() {
  // Destroys the mock cluster too, and joins every thread of both.
  rd_kafka_destroy(owner_);
}

broker_address mock_cluster::address_of(std::int32_t broker_id) const {
  if (broker_id < 1 || static_cast<std::size_t>(broker_id) > ports_.size()) {
    throw std::out_of_range("no broker " + std::to_string(broker_id));
  }
  return broker_address{"127.0.0.1", ports_[static_cast<std::size_t>(broker_id - 1)]};
}

void mock_cluster::create_topic(const std::string& name, int partitions, int replication_factor) {
  check(call_mock([&] {
          return rd_kafka_mock_topic_create(cluster_, name.c_str(), partitions, replication_factor);
        }),
        "create topic " + name);
}

int mock_cluster::partition_count(const std::string& topic) {
  const client_ptr rk = make_query_client(bootstrap_servers_);
  const metadata_ptr md = fetch_metadata(rk.get());
  return topic_partitions(*md, topic);
}

std::vector<watermark> mock_cluster::watermarks(const std::string& topic) {
  const client_ptr rk = make_query_client(bootstrap_servers_);
  const int partitions = topic_partitions(*fetch_metadata(rk.get()), topic);
  std::vector<watermark> result(static_cast<std::size_t>(partitions));
  for (int p = 0; p < partitions; ++p) {
    watermark& w = result[static_cast<std::size_t>(p)];
    check(rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &w.low, &w.high, 10'000),
          "watermarks of " + topic + " [" + std::to_string(p) + "]");
  }
  return result;
}

std::int64_t mock_cluster::total_records(const std::string& topic) {
  std::int64_t total = 0;
  for (const watermark& w : watermarks(topic)) total += w.high;
  return total;
}

std::vector<std::int64_t> mock_cluster::produce(const std::string& topic, std::int64_t count,
                                                const std::string& compression, std::int32_t partition,
                                                std::size_t value_size) {
  return produce_impl(topic, count, compression, partition, value_size, false);
}

std::vector<std::int64_t> mock_cluster::produce_with_headers(const std::string& topic, std::int64_t count,
                                                             const std::string& compression,
                                                             std::int32_t partition, std::size_t value_size) {
  return produce_impl(topic, count, compression, partition, value_size, true);
}

std::vector<std::int64_t> mock_cluster::produce_impl(const std::string& topic, std::int64_t count,
                                                     const std::string& compression, std::int32_t partition,
                                                     std::size_t value_size, bool with_headers) {
  if (count < 0) throw std::invalid_argument("produce: negative count");

  delivery_state delivery;
  const client_ptr producer = make_seed_producer(bootstrap_servers_, delivery, &compression);

  const int partitions = topic_partitions(*fetch_metadata(producer.get()), topic);
  if (partitions < 1) throw std::runtime_error("topic " + topic + " has no partitions");
  if (partition < -1 || partition >= partitions) {
    throw std::invalid_argument("produce: topic " + topic + " has no partition " + std::to_string(partition));
  }

  // Reserve the n ranges and the round-robin start under the lock, then produce without it, so
  // concurrent produce calls on one topic still get unique keys.
  std::vector<std::int64_t> seq;
  std::int32_t first_partition = partition;
  {
    std::lock_guard lock(mutex_);
    auto& next = next_seq_[topic];
    if (next.size() < static_cast<std::size_t>(partitions)) {
      next.resize(static_cast<std::size_t>(partitions), 0);
    }
    seq = next;
    if (partition == -1) {
      std::int32_t& cursor = next_partition_[topic];
      if (cursor >= partitions) cursor = 0;
      first_partition = cursor;
      for (std::int64_t i = 0; i < count; ++i) {
        ++next[static_cast<std::size_t>((first_partition + i) % partitions)];
      }
      cursor = static_cast<std::int32_t>((first_partition + count) % partitions);
    } else {
      next[static_cast<std::size_t>(partition)] += count;
    }
  }

  std::vector<std::int64_t> written(static_cast<std::size_t>(partitions), 0);
  std::string key;
  std::string value;
  std::string header_value;
  std::array<rd_kafka_vu_t, 6> vus{};
  for (std::int64_t i = 0; i < count; ++i) {
    const auto p =
        partition == -1 ? static_cast<std::int32_t>((first_partition + i) % partitions) : partition;
    const std::int64_t n = seq[static_cast<std::size_t>(p)]++;
    key = record_key(topic, p, n);
    value.clear();
    append_value(value, key, value_size);

    std::size_t vu_count = 0;
    vus[vu_count].vtype = RD_KAFKA_VTYPE_TOPIC;
    vus[vu_count++].u.cstr = topic.c_str();
    vus[vu_count].vtype = RD_KAFKA_VTYPE_PARTITION;
    vus[vu_count++].u.i32 = p;
    vus[vu_count].vtype = RD_KAFKA_VTYPE_KEY;
    vus[vu_count].u.mem.ptr = key.data();
    vus[vu_count++].u.mem.size = key.size();
    vus[vu_count].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[vu_count].u.mem.ptr = value.data();
    vus[vu_count++].u.mem.size = value.size();
    vus[vu_count].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vus[vu_count++].u.i = RD_KAFKA_MSG_F_COPY;
    if (with_headers) {
      header_value = std::to_string(n);
      vus[vu_count].vtype = RD_KAFKA_VTYPE_HEADER;
      vus[vu_count].u.header.name = seq_header_name;
      vus[vu_count].u.header.val = header_value.data();
      vus[vu_count++].u.header.size = static_cast<ssize_t>(header_value.size());
    }

    for (;;) {
      rd_kafka_error_t* error = rd_kafka_produceva(producer.get(), vus.data(), vu_count);
      if (error == nullptr) break;
      const rd_kafka_resp_err_t code = rd_kafka_error_code(error);
      const std::string message = rd_kafka_error_string(error);
      rd_kafka_error_destroy(error);
      if (code != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        throw std::runtime_error("produce to " + topic + " [" + std::to_string(p) + "]: " + message);
      }
      rd_kafka_poll(producer.get(), 10);  // let batches drain
    }
    ++written[static_cast<std::size_t>(p)];
    // Serve delivery reports now and then so they do not pile up until the flush.
    if ((i & 0x3fff) == 0) rd_kafka_poll(producer.get(), 0);
  }

  wait_for_delivery(producer.get(), delivery, count, topic);
  return written;
}

void mock_cluster::produce_records(const std::string& topic, std::int32_t partition,
                                   const std::vector<seed_record>& records) {
  delivery_state delivery;
  const client_ptr producer = make_seed_producer(bootstrap_servers_, delivery, nullptr);

  const int partitions = topic_partitions(*fetch_metadata(producer.get()), topic);
  if (partition < 0 || partition >= partitions) {
    throw std::invalid_argument("produce_records: topic " + topic + " has no partition " + std::to_string(partition));
  }
  {
    std::lock_guard lock(mutex_);
    auto& next = next_seq_[topic];
    if (next.size() < static_cast<std::size_t>(partitions)) next.resize(static_cast<std::size_t>(partitions), 0);
    next[static_cast<std::size_t>(partition)] += static_cast<std::int64_t>(records.size());
  }

  for (const auto& r : records) {
    std::vector<rd_kafka_vu_t> vus(6 + r.headers.size());
    std::size_t n = 0;
    vus[n].vtype = RD_KAFKA_VTYPE_TOPIC;
    vus[n++].u.cstr = topic.c_str();
    vus[n].vtype = RD_KAFKA_VTYPE_PARTITION;
    vus[n++].u.i32 = partition;
    // A null pointer is a null key or value; an empty string is an empty one.
    vus[n].vtype = RD_KAFKA_VTYPE_KEY;
    vus[n].u.mem.ptr = r.key ? const_cast<char*>(r.key->data()) : nullptr;
    vus[n++].u.mem.size = r.key ? r.key->size() : 0;
    vus[n].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[n].u.mem.ptr = r.value ? const_cast<char*>(r.value->data()) : nullptr;
    vus[n++].u.mem.size = r.value ? r.value->size() : 0;
    vus[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vus[n++].u.i = RD_KAFKA_MSG_F_COPY;
    for (const auto& [name, value] : r.headers) {
      vus[n].vtype = RD_KAFKA_VTYPE_HEADER;
      vus[n].u.header.name = name.c_str();
      vus[n].u.header.val = value ? value->data() : nullptr;
      vus[n++].u.header.size = value ? static_cast<ssize_t>(value->size()) : -1;
    }
    if (r.timestamp > 0) {
      vus[n].vtype = RD_KAFKA_VTYPE_TIMESTAMP;
      vus[n++].u.i64 = r.timestamp;
    }
    rd_kafka_error_t* error = rd_kafka_produceva(producer.get(), vus.data(), n);
    if (error != nullptr) {
      const std::string message = rd_kafka_error_string(error);
      rd_kafka_error_destroy(error);
      throw std::runtime_error("produce_records to " + topic + " [" + std::to_string(partition) + "]: " + message);
    }
  }
  wait_for_delivery(producer.get(), delivery, static_cast<std::int64_t>(records.size()), topic);
}

void mock_cluster::push_request_errors(std::int16_t api_key, const std::vector<std::int16_t>& codes) {
  std::vector<rd_kafka_resp_err_t> errors;
  errors.reserve(codes.size());
  for (const std::int16_t code : codes) errors.push_back(static_cast<rd_kafka_resp_err_t>(code));
  rd_kafka_mock_push_request_errors_array(cluster_, api_key, errors.size(), errors.data());
}

void mock_cluster::push_broker_request_errors(
    std::int32_t broker_id, std::int16_t api_key,
    const std::vector<std::pair<std::int16_t, int>>& codes_and_rtt_ms) {
  // The C call is variadic only; one call per entry appends in order, like one call with all.
  for (const auto& [code, rtt_ms] : codes_and_rtt_ms) {
    check(rd_kafka_mock_broker_push_request_error_rtts(cluster_, broker_id, api_key, 1,
                                                       static_cast<rd_kafka_resp_err_t>(code), rtt_ms),
          "push request errors on broker " + std::to_string(broker_id));
  }
}

std::size_t mock_cluster::broker_request_errors_left(std::int32_t broker_id, std::int16_t api_key) {
  std::size_t count = 0;
  check(rd_kafka_mock_broker_error_stack_cnt(cluster_, broker_id, api_key, &count),
        "error stack of broker " + std::to_string(broker_id));
  return count;
}

void mock_cluster::clear_request_errors(std::int16_t api_key) {
  rd_kafka_mock_clear_request_errors(cluster_, api_key);
}

void mock_cluster::broker_down(std::int32_t broker_id) {
  check(call_mock([&] { return rd_kafka_mock_broker_set_down(cluster_, broker_id); }),
        "broker " + std::to_string(broker_id) + " down");
}

void mock_cluster::broker_up(std::int32_t broker_id) {
  check(call_mock([&] { return rd_kafka_mock_broker_set_up(cluster_, broker_id); }),
        "broker " + std::to_string(broker_id) + " up");
}

void mock_cluster::set_rtt(std::int32_t broker_id, int ms) {
  check(call_mock([&] { return rd_kafka_mock_broker_set_rtt(cluster_, broker_id, ms); }),
        "rtt of broker " + std::to_string(broker_id));
}

bool mock_cluster::set_consumer_group_timers(int heartbeat_interval_ms, int session_timeout_ms) {
  using setter = void (*)(rd_kafka_mock_cluster_t*, int);
  auto* heartbeat = reinterpret_cast<setter>(dlsym(RTLD_DEFAULT, "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms"));
  auto* session = reinterpret_cast<setter>(dlsym(RTLD_DEFAULT, "rd_kafka_mock_set_group_consumer_session_timeout_ms"));
  if (heartbeat == nullptr || session == nullptr) return false;
  call_mock([&] {
    heartbeat(cluster_, heartbeat_interval_ms);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  });
  call_mock([&] {
    session(cluster_, session_timeout_ms);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  });
  return true;
}

namespace {
template <class F>
F* mock_symbol(const char* name) {
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}
}  // namespace

bool mock_cluster::delete_topic(const std::string& name) {
  using deleter = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, const char*);
  auto* del = mock_symbol<deleter>("rd_kafka_mock_topic_delete");
  if (del == nullptr) return false;
  check(call_mock([&] { return del(cluster_, name.c_str()); }), "delete topic " + name);
  std::lock_guard lock(mutex_);
  next_seq_.erase(name);
  return true;
}

void mock_cluster::owner_log(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  if (std::string_view(facility) == "MOCKTELEMETRY") {
    std::lock_guard lock(telemetry_mutex_);
    if (telemetry_capture_) telemetry_log_.emplace_back(message);
  }
  if (level <= owner_log_level_) log_to_stderr(rk, level, facility, message);
}

bool mock_cluster::set_telemetry(const std::vector<std::string>& requested_metrics, int push_interval_ms) {
  using metrics_setter = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, char**, std::size_t);
  using interval_setter = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, std::int64_t);
  auto* metrics = mock_symbol<metrics_setter>("rd_kafka_mock_telemetry_set_requested_metrics");
  auto* interval = mock_symbol<interval_setter>("rd_kafka_mock_telemetry_set_push_interval");
  if (metrics == nullptr || interval == nullptr) return false;
  std::vector<std::string> copies = requested_metrics;
  std::vector<char*> names;
  for (auto& m : copies) names.push_back(m.data());
  check(call_mock([&] { return metrics(cluster_, names.empty() ? nullptr : names.data(), names.size()); }),
        "telemetry requested metrics");
  check(call_mock([&] { return interval(cluster_, push_interval_ms); }), "telemetry push interval");
  {
    std::lock_guard lock(telemetry_mutex_);
    telemetry_capture_ = true;
  }
  // The mock logs what it decodes at LOG_INFO (6) through this handle.
  rd_kafka_set_log_level(owner_, 6);
  return true;
}

std::vector<std::string> mock_cluster::telemetry_log() {
  std::lock_guard lock(telemetry_mutex_);
  return telemetry_log_;
}

bool mock_cluster::decommission_broker(std::int32_t broker_id) {
  using call = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, std::int32_t);
  auto* f = mock_symbol<call>("rd_kafka_mock_broker_decommission");
  if (f == nullptr) return false;
  check(call_mock([&] { return f(cluster_, broker_id); }),
        "decommission broker " + std::to_string(broker_id));
  return true;
}

bool mock_cluster::remove_broker_from_metadata(std::int32_t broker_id) {
  using call = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, std::int32_t);
  auto* f = mock_symbol<call>("rd_kafka_mock_broker_remove_from_metadata");
  if (f == nullptr) return false;
  check(call_mock([&] { return f(cluster_, broker_id); }),
        "remove broker " + std::to_string(broker_id) + " from metadata");
  return true;
}

bool mock_cluster::set_share_groups(const share_group_settings& s) {
  using setter = void(rd_kafka_mock_cluster_t*, int);
  const std::pair<const char*, std::optional<int>> settings[] = {
      {"rd_kafka_mock_sharegroup_set_session_timeout", s.session_timeout_ms},
      {"rd_kafka_mock_sharegroup_set_heartbeat_interval", s.heartbeat_interval_ms},
      {"rd_kafka_mock_sharegroup_set_max_delivery_attempts", s.max_delivery_attempts},
      {"rd_kafka_mock_sharegroup_set_record_lock_duration", s.record_lock_duration_ms},
      {"rd_kafka_mock_sharegroup_set_max_size", s.max_size},
      {"rd_kafka_mock_sharegroup_set_max_fetch_sessions", s.max_fetch_sessions},
      {"rd_kafka_mock_sharegroup_set_max_record_locks", s.max_record_locks},
      {"rd_kafka_mock_sharegroup_set_auto_offset_reset",
       s.earliest ? std::optional<int>(*s.earliest ? 1 : 0) : std::nullopt},
  };
  for (const auto& [name, value] : settings) {
    auto* f = mock_symbol<setter>(name);
    if (f == nullptr) return false;
    if (!value) continue;
    call_mock([&] {
      f(cluster_, *value);
      return RD_KAFKA_RESP_ERR_NO_ERROR;
    });
  }
  return true;
}

std::vector<std::string> mock_cluster::share_group_member_ids(const std::string& group) {
  using getter = rd_kafka_resp_err_t(rd_kafka_mock_cluster_t*, const char*, char***, size_t*);
  auto* get = mock_symbol<getter>("rd_kafka_mock_sharegroup_get_member_ids");
  std::vector<std::string> out;
  if (get == nullptr) return out;
  char** ids = nullptr;
  size_t count = 0;
  if (get(cluster_, group.c_str(), &ids, &count) != RD_KAFKA_RESP_ERR_NO_ERROR) return out;
  for (size_t i = 0; i < count; ++i) {
    out.emplace_back(ids[i]);
    std::free(ids[i]);  // rd_free(): librdkafka allocates with the C library's malloc
  }
  std::free(ids);
  return out;
}

bool mock_cluster::share_group_assign(
    const std::string& group,
    const std::map<std::string, std::vector<std::pair<std::string, std::int32_t>>>& by_member) {
  using assigner =
      void(rd_kafka_mock_cluster_t*, const char*, const char**, rd_kafka_topic_partition_list_t**, size_t);
  auto* assign = mock_symbol<assigner>("rd_kafka_mock_sharegroup_target_assignment");
  if (assign == nullptr) return false;
  std::vector<const char*> members;
  std::vector<rd_kafka_topic_partition_list_t*> lists;
  for (const auto& [member, parts] : by_member) {
    members.push_back(member.c_str());
    auto* l = rd_kafka_topic_partition_list_new(static_cast<int>(parts.size()));
    for (const auto& [topic, partition] : parts)
      rd_kafka_topic_partition_list_add(l, topic.c_str(), partition);
    lists.push_back(l);
  }
  call_mock([&] {
    assign(cluster_, group.c_str(), members.data(), lists.data(), members.size());
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  });
  for (auto* l : lists) rd_kafka_topic_partition_list_destroy(l);
  return true;
}

void mock_cluster::set_coordinator(const std::string& group, std::int32_t broker_id) {
  check(call_mock([&] { return rd_kafka_mock_coordinator_set(cluster_, "group", group.c_str(), broker_id); }),
        "coordinator of group " + group);
}

void mock_cluster::set_partition_leader(const std::string& topic, std::int32_t partition,
                                        std::int32_t broker_id) {
  check(call_mock([&] {
          return rd_kafka_mock_partition_set_leader(cluster_, topic.c_str(), partition, broker_id);
        }),
        "leader of " + topic + " [" + std::to_string(partition) + "]");
}

void mock_cluster::set_partition_follower(const std::string& topic, std::int32_t partition,
                                          std::int32_t broker_id) {
  check(call_mock([&] {
          return rd_kafka_mock_partition_set_follower(cluster_, topic.c_str(), partition, broker_id);
        }),
        "follower of " + topic + " [" + std::to_string(partition) + "]");
}

void mock_cluster::set_topic_error(const std::string& topic, std::int16_t code) {
  call_mock([&] {
    rd_kafka_mock_topic_set_error(cluster_, topic.c_str(), static_cast<rd_kafka_resp_err_t>(code));
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  });
}

}  // namespace kgroup::test
