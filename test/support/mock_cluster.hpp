// A C++ wrapper over librdkafka's mock cluster, for tests, benchmarks and the kgroup-mock tool.
//
// librdkafka is a test and demo dependency only: nothing under src/ or include/ may include this
// header. What the mock itself does and does not do (librdkafka 2.0.2): it answers only
// non-flexible API versions, the first join of a group waits 3 s and a rebalance of a stable group
// waits session.timeout.ms - 1 s, and a partition keeps at most 5 MB or 100,000 message sets
// (older data is dropped; about 43,000 uncompressed 100-byte records), so spread big seeds over
// enough partitions or compress them. A Metadata request that names an unknown topic creates it
// with 4 partitions, even from a consumer with allow.auto.create.topics=false (the mock's
// Metadata versions cannot carry that flag), so create topics before clients look them up.
//
// Seeded record scheme (produce()), so tests can check what they consume:
//   key    = "<topic>-<partition>-<n>"                     (record_key())
//   value  = expected_value(key, value_size): the key, ':', then lowercase letters drawn from a
//            xorshift64* generator seeded with the FNV-1a hash of the key, cut to value_size bytes
//            (so a value shorter than the key is a prefix of "key:").
//   header = (produce_with_headers() only) one header named seq_header_name whose value is the
//            decimal n.
// n counts the records this mock_cluster object has produced to that partition, from 0, across
// all produce calls. If nothing else writes to the partition and the mock has not dropped old data
// (it keeps at most 5 MB or 100,000 message sets per partition), n is the record's offset.
// The letters make values look like text (they compress like text, not like zeros) while staying a
// pure function of the key.
#pragma once

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kgroup::test {

/// The key produce() gives the n-th record it writes to a partition: "<topic>-<partition>-<n>".
std::string record_key(std::string_view topic, std::int32_t partition, std::int64_t n);

/// The value produce() pairs with `key` (see the scheme at the top of this file). Pure function.
std::string expected_value(std::string_view key, std::size_t value_size);

/// Configures a librdkafka client config the way every handle in this wrapper is configured:
/// logs go to stderr, never stdout (stdout belongs to the test runner and to kgroup-mock's
/// protocol), at syslog levels up to $KGROUP_MOCK_LOG_LEVEL (default 3 = errors; 7 = debug).
/// $KGROUP_MOCK_DEBUG, if set, is passed as librdkafka's `debug` contexts (e.g. "broker,protocol"
/// or "all") and implies level 7. Use it for librdkafka clients that tests create themselves.
/// Throws std::runtime_error.
void apply_log_settings(rd_kafka_conf_t* conf);

/// Sets one librdkafka config property; throws std::runtime_error with librdkafka's message.
void set_config(rd_kafka_conf_t* conf, const char* name, const std::string& value);

/// The address a mock broker listens on.
struct broker_address {
  std::string host;
  std::uint16_t port = 0;
};

/// Low and high watermark of one partition, as ListOffsets reports them.
struct watermark {
  std::int64_t low = 0;
  std::int64_t high = 0;
};

/// A librdkafka mock cluster of N brokers (ids 1..N) listening on 127.0.0.1, plus helpers to seed
/// records and inject faults.
///
/// Thread-safety: all members may be called from any thread, concurrently, except construction
/// and destruction. The fault-injection calls are applied by the mock's own thread before they
/// return (rd_kafka_mock_* calls are synchronous), so a request sent afterwards sees them.
/// Errors: every failure is reported as std::runtime_error carrying librdkafka's message.
/// Connections: the librdkafka handle that owns the cluster keeps one idle connection to one
/// broker (client.id "kgroup-mock-cluster"); tests that look at connections should allow for it.
/// produce() and the query helpers open short-lived clients of their own ("kgroup-mock-seeder",
/// "kgroup-mock-query") and close them before returning.
class mock_cluster {
 public:
  /// Starts `broker_count` (>= 1) brokers on loopback ports chosen by the kernel.
  explicit mock_cluster(int broker_count = 3);
  /// Stops the brokers and joins librdkafka's threads (fast: milliseconds). Clients still
  /// connected see their connections closed.
  ~mock_cluster();

  mock_cluster(const mock_cluster&) = delete;
  mock_cluster& operator=(const mock_cluster&) = delete;
  mock_cluster(mock_cluster&&) = delete;
  mock_cluster& operator=(mock_cluster&&) = delete;

  /// "127.0.0.1:PORT,127.0.0.1:PORT,..." for a client's bootstrap.servers.
  [[nodiscard]] const std::string& bootstrap_servers() const noexcept { return bootstrap_servers_; }
  [[nodiscard]] int broker_count() const noexcept { return broker_count_; }

  /// The librdkafka whose mock this is (the process loads one: Debian's 2.0.2, or 2.15.1 from
  /// .ci/rdkafka-2.15 through LD_LIBRARY_PATH), as rd_kafka_version() reports it.
  [[nodiscard]] static int librdkafka_version() noexcept;
  [[nodiscard]] static std::string librdkafka_version_string();
  /// True on librdkafka 2.15 or later (flexible versions, KIP-848).
  [[nodiscard]] static bool modern() noexcept { return librdkafka_version() >= 0x020f0000; }

  /// Limits the versions the brokers offer for `api_key` (rd_kafka_mock_set_apiversion). The
  /// constructor already caps what each mock mis-implements (see version_caps() and DESIGN.md).
  void set_api_version(std::int16_t api_key, std::int16_t min_version, std::int16_t max_version);

  /// The caps the constructor applies on this librdkafka: {api_key, min, max}. Each is a fault of
  /// that mock's request parsing, never of kgroup. $KGROUP_MOCK_NO_CAPS=1 disables them.
  struct version_cap {
    std::int16_t api_key;
    std::int16_t min_version;
    std::int16_t max_version;
    const char* why;
  };
  [[nodiscard]] static std::vector<version_cap> version_caps();

  /// Every broker delays its next `metadata_delays_per_broker` Metadata answers by this much (see
  /// the constructor: the mocks' late-follower SyncGroup fault). Tests that count Metadata
  /// requests or inject Metadata errors per broker must know: that per-broker stack is in use.
  static constexpr int default_metadata_delay_ms = 25;
  static constexpr int metadata_delays_per_broker = 5000;
  /// On librdkafka 2.0.2's mock, which ignores the Metadata delay, every broker answers after this
  /// round trip instead (the same race, see the constructor); $KGROUP_MOCK_RTT_MS overrides (0 =
  /// none). Tests may still set_rtt() their own.
  static constexpr int default_rtt_ms_202 = 20;
  /// Where broker `broker_id` (1..N) listens; the port stays the same while the broker is down.
  /// Throws std::out_of_range for an unknown id.
  [[nodiscard]] broker_address address_of(std::int32_t broker_id) const;

  /// The raw handle, for mock features this class does not wrap. Valid until destruction.
  /// Wrap raw rd_kafka_mock_* calls that act through the mock's thread (most setters) in
  /// call_mock().
  [[nodiscard]] rd_kafka_mock_cluster_t* handle() const noexcept { return cluster_; }

  /// Runs `op`, one rd_kafka_mock_* call, and returns its result. librdkafka 2.0.2's mock thread
  /// can miss the wake-up for a command issued right after another one and then answers it only
  /// at its next timer, up to a second later (a third of back-to-back commands did). This spaces
  /// commands by 1 ms and wakes the thread if the answer takes longer than 5 ms, so commands take
  /// milliseconds. Every setter of this class goes through it.
  rd_kafka_resp_err_t call_mock(const std::function<rd_kafka_resp_err_t()>& op);

  // ---- topics and records --------------------------------------------------------------------

  /// Creates a topic. The mock does not check replication_factor against broker_count().
  void create_topic(const std::string& name, int partitions, int replication_factor = 1);
  /// Deletes `name` with its records and committed offsets (librdkafka 2.15.1's
  /// rd_kafka_mock_topic_delete; false on 2.0.2's mock, which has none). produce() numbers a
  /// topic created again under the name from 0.
  bool delete_topic(const std::string& name);

  /// Partition count of an existing topic, from a Metadata request. Throws if the topic is
  /// unknown (or has an error set with set_topic_error()).
  [[nodiscard]] int partition_count(const std::string& topic);

  /// Low and high watermarks of every partition of `topic` (index = partition).
  [[nodiscard]] std::vector<watermark> watermarks(const std::string& topic);

  /// Sum of the high watermarks of `topic`: the number of records in it if nothing was dropped.
  [[nodiscard]] std::int64_t total_records(const std::string& topic);

  /// Produces `count` records (scheme at the top of this file) to an existing topic through a
  /// librdkafka producer with compression.codec = `compression` (none, gzip, snappy, lz4, zstd),
  /// and returns once every record is acknowledged. partition = -1 spreads the records
  /// round-robin over all partitions, continuing where the previous call on this topic stopped,
  /// so repeated calls stay balanced. The producer is idempotent, so records reach each
  /// partition once and in order. Returns the number of records written per partition (index =
  /// partition). Throws std::runtime_error if any record fails (e.g. its broker is down for
  /// longer than 60 s, or an injected Produce error is not retriable).
  std::vector<std::int64_t> produce(const std::string& topic, std::int64_t count,
                                    const std::string& compression = "none", std::int32_t partition = -1,
                                    std::size_t value_size = 100);

  /// Name of the header produce_with_headers() adds to each record; its value is the decimal n.
  static constexpr const char* seq_header_name = "kgroup-seq";

  /// Like produce(), and each record carries one header, seq_header_name = "<n>".
  std::vector<std::int64_t> produce_with_headers(const std::string& topic, std::int64_t count,
                                                 const std::string& compression = "none",
                                                 std::int32_t partition = -1, std::size_t value_size = 100);

  /// A record for produce_records(); std::nullopt is a null key, value or header value.
  struct seed_record {
    std::optional<std::string> key;
    std::optional<std::string> value;
    std::vector<std::pair<std::string, std::optional<std::string>>> headers;
    std::int64_t timestamp = 0;  // CreateTime, epoch ms; 0: the producer's clock
  };

  /// Produces `records`, in order and uncompressed, to one partition of an existing topic, and
  /// returns once every one is acknowledged. They count towards the partition's n (see the top of
  /// this file), so produce() afterwards keeps n equal to the offset. Throws like produce().
  void produce_records(const std::string& topic, std::int32_t partition, const std::vector<seed_record>& records);

  // ---- fault injection -----------------------------------------------------------------------

  /// The next codes.size() requests with `api_key`, to any broker, fail with codes[0], codes[1],
  /// ... in order. Code -195 (librdkafka's _TRANSPORT) makes the broker close the connection
  /// instead. Caveat of the mock: once a broker has a per-broker stack for an api key (see
  /// push_broker_request_errors), that stack, even empty, hides the cluster-wide one there.
  void push_request_errors(std::int16_t api_key, const std::vector<std::int16_t>& codes);

  /// Per-broker variant: the next requests with `api_key` to `broker_id` get the given error code
  /// (0 = no error) after the given extra delay in milliseconds. Takes precedence over the
  /// cluster-wide errors.
  void push_broker_request_errors(std::int32_t broker_id, std::int16_t api_key,
                                  const std::vector<std::pair<std::int16_t, int>>& codes_and_rtt_ms);

  /// Errors still queued for `api_key` on `broker_id` by push_broker_request_errors().
  [[nodiscard]] std::size_t broker_request_errors_left(std::int32_t broker_id, std::int16_t api_key);

  /// Forgets the cluster-wide errors queued for `api_key`.
  void clear_request_errors(std::int16_t api_key);

  /// Closes the broker's connections and refuses new ones (the port stays reserved), without
  /// moving partition leadership or coordinators. -1 means every broker.
  void broker_down(std::int32_t broker_id);
  /// Accepts connections again on the same port. -1 means every broker.
  void broker_up(std::int32_t broker_id);
  /// Delays every response of the broker by `ms` milliseconds. -1 means every broker.
  void set_rtt(std::int32_t broker_id, int ms);
  /// Removes the broker for good (librdkafka 2.15's mock only, looked up at run time): its
  /// connections and listener close, it leaves Metadata answers, its partitions move to the
  /// brokers left and the coordinators it held move by hashing. Groups keep their members (the
  /// mock keeps group state per cluster, not per broker). Returns false on a mock without it.
  bool decommission_broker(std::int32_t broker_id);
  /// Hides the broker from Metadata answers and moves its partitions away, keeping its listener
  /// and connections, so it still answers whoever talks to it (librdkafka 2.15's mock only; a
  /// coordinator set with set_coordinator() stays there). Returns false on a mock without it.
  bool remove_broker_from_metadata(std::int32_t broker_id);

  /// KIP-848 `consumer` groups (librdkafka 2.15's mock only): the heartbeat interval the
  /// coordinator hands its members and the session timeout after which it fences a silent one
  /// (the mock's defaults are the broker's, 5 s and 45 s). Looked up at run time: this wrapper is
  /// built against 2.0.2's headers. Returns false on a mock without them.
  bool set_consumer_group_timers(int heartbeat_interval_ms, int session_timeout_ms);

  /// Share groups (KIP-932; librdkafka 2.15's mock only, looked up at run time like the KIP-848
  /// timers). Unset fields keep the mock's values. The session timeout and heartbeat interval
  /// apply only to groups created afterwards (MOCK-CLUSTER.md, SHARE-GROUPS.md M9): set them
  /// before members join.
  struct share_group_settings {
    std::optional<int> session_timeout_ms;
    std::optional<int> heartbeat_interval_ms;
    std::optional<int> max_delivery_attempts;  // 0: unlimited
    std::optional<int> record_lock_duration_ms;
    std::optional<int> max_size;  // members per group; 0: unlimited
    std::optional<int> max_fetch_sessions;
    std::optional<int> max_record_locks;
    std::optional<bool> earliest;  // where a share-partition starts: true earliest, false latest
  };
  /// Applies `s`. Returns false on a mock without share groups (librdkafka 2.0.2).
  bool set_share_groups(const share_group_settings& s);
  /// The member ids of share group `group` (empty if unknown or without share groups).
  std::vector<std::string> share_group_member_ids(const std::string& group);
  /// Assigns partitions by hand (the mock's automatic assignment gives each partition to one
  /// member; sharing one needs this, and the group stays on manual assignment for good, M3).
  /// Returns false on a mock without share groups.
  bool share_group_assign(
      const std::string& group,
      const std::map<std::string, std::vector<std::pair<std::string, std::int32_t>>>& by_member);

  /// Client telemetry (KIP-714; librdkafka 2.15's mock only, looked up at run time): the metric
  /// name prefixes GetTelemetrySubscriptions answers request ("" first: all; none: no metrics)
  /// and its PushIntervalMs. From then on the lines the mock logs while decoding PushTelemetry
  /// payloads (facility MOCKTELEMETRY: "string value: <name>", "NumberDataPoint int value: <v>
  /// time: <t>", ...) are kept for telemetry_log(). Returns false on a mock without telemetry
  /// (librdkafka 2.0.2). The mock answers every client with the same instance id, subscription
  /// id 0, codecs zstd, lz4, gzip, snappy (it cannot read zstd as built by .ci/rdkafka-2.15),
  /// TelemetryMaxBytes 10000 and delta temporality; a payload it cannot decode aborts the process.
  bool set_telemetry(const std::vector<std::string>& requested_metrics, int push_interval_ms);
  /// The MOCKTELEMETRY lines logged since set_telemetry(), oldest first.
  std::vector<std::string> telemetry_log();

  /// Makes `broker_id` the coordinator of consumer group `group` (FindCoordinator answers it).
  /// The id does not have to exist, to test clients against a bogus coordinator.
  void set_coordinator(const std::string& group, std::int32_t broker_id);
  /// Moves partition leadership; -1 leaves the partition without a leader. Creates the topic if
  /// it does not exist.
  void set_partition_leader(const std::string& topic, std::int32_t partition, std::int32_t broker_id);
  /// Metadata responses report `code` for the topic (0 clears it).
  /// Makes `broker_id` the partition's follower: the leader names it as preferred read replica in
  /// Fetch v11+ answers (KIP-392) and it serves fetches; -1 removes the follower.
  void set_partition_follower(const std::string& topic, std::int32_t partition, std::int32_t broker_id);
  void set_topic_error(const std::string& topic, std::int16_t code);

 private:
  std::vector<std::int64_t> produce_impl(const std::string& topic, std::int64_t count,
                                         const std::string& compression, std::int32_t partition,
                                         std::size_t value_size, bool with_headers);

  // The handle that owns the mock cluster (test.mock.num.brokers) and its thread.
  rd_kafka_t* owner_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  int broker_count_ = 0;
  std::string bootstrap_servers_;
  // Broker ports, index = id - 1 (the mock lists its bootstrap servers in id order).
  std::vector<std::uint16_t> ports_;

  // Serialises call_mock(); guards last_op_done_.
  std::mutex op_mutex_;
  std::chrono::steady_clock::time_point last_op_done_{};

  // Guards the fields below.
  std::mutex mutex_;
  // Per topic: the next n for each partition (record_key()).
  std::map<std::string, std::vector<std::int64_t>, std::less<>> next_seq_;
  // Per topic: the partition the next round-robin record goes to.
  std::map<std::string, std::int32_t, std::less<>> next_partition_;

 public:
  /// The owner handle's log callback (internal): keeps MOCKTELEMETRY lines once set_telemetry()
  /// asked for them, passes the rest to stderr at the configured level.
  void owner_log(const rd_kafka_t* rk, int level, const char* facility, const char* message);

 private:
  // The owner's configured log level (lines above it are dropped even while telemetry raises
  // librdkafka's level to see the mock's info lines).
  int owner_log_level_ = 2;
  // Guards the fields below; taken on the mock's thread (its log lines).
  std::mutex telemetry_mutex_;
  bool telemetry_capture_ = false;
  std::vector<std::string> telemetry_log_;
};

}  // namespace kgroup::test
