// The chaos test's members (test_chaos.cpp): one kgroup or librdkafka consumer with its poll
// loop, reporting what happens to it as lines. The same code runs in the test process and in
// child processes (the hidden test case "chaos member process").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace chaos {

using namespace std::chrono_literals;

using steady = std::chrono::steady_clock;

inline constexpr int partition_count = 32;
inline const std::string chaos_topic = "chaos";
inline constexpr int session_timeout_ms = 6000;
inline constexpr int heartbeat_ms = 500;
inline constexpr int max_poll_interval_ms = 8000;
inline constexpr auto kgroup_close_timeout = 20s;
// librdkafka's rd_kafka_consumer_close() has no timeout argument; this is the bound we hold it to.
inline constexpr auto rdkafka_close_bound = 25s;
inline constexpr auto settle_limit = 30s;
inline constexpr int baseline_rtt_ms = 10;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch()).count();
}

inline double seconds_since(std::int64_t t0) {
  return static_cast<double>(now_ns() - t0) / 1e9;
}

// ---------------------------------------------------------------------------------------------
// Members (both clients), emitting event lines. The same code runs in this process and in child
// processes. Lines (timestamps are steady_clock nanoseconds):
//   A <t> <p,p,..|->   assign callback started          R <t> <parts>  revoke callback returned
//   L <t> <parts>      lost callback returned           C <p> <first> <last>  consumed offsets
//   S <t> <last_poll_start> <ms>  stall begins           W <t>  stall over, polling again
//   T <0|1>            settled from the member's view (state stable, callbacks agree with it)
//   N <text>           a noteworthy but expected error (commit refused during a rebalance, ...)
//   K <t> <p:o,p:o,..> offsets a commit stored (kgroup: commit_sync()/commit_async() succeeded,
//                      librdkafka: its offset commit callback), for invariant 3's report
//   E <text>           a member failure (poll() threw, a record with the wrong key, ...)
//   X <ok|error text> <ms>   close() returned after <ms>
// ---------------------------------------------------------------------------------------------

using emit_fn = std::function<void(const std::string&)>;

struct member_spec {
  std::string client;  // "kgroup" or "librdkafka"
  std::string name;
  std::string bootstrap;
  std::string group;
  std::string strategy;
  std::string commit;  // kgroup: "sync", "async" or "auto"; librdkafka: "store"

  std::string encode() const {
    return client + " " + name + " " + bootstrap + " " + group + " " + strategy + " " + commit;
  }
  static member_spec decode(const std::string& text) {
    std::istringstream in(text);
    member_spec s;
    in >> s.client >> s.name >> s.bootstrap >> s.group >> s.strategy >> s.commit;
    return s;
  }
};

class chaos_member {
 public:
  chaos_member(member_spec spec, emit_fn emit) : spec_(std::move(spec)), emit_(std::move(emit)) {}
  virtual ~chaos_member() = default;
  chaos_member(const chaos_member&) = delete;
  chaos_member& operator=(const chaos_member&) = delete;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  /// The poll loop sleeps `ms` after its current iteration (an honest stall: no poll() calls).
  void stall(int ms) { stall_ms_ = ms; }
  /// Stops the poll loop, closes the consumer and emits X. Idempotent.
  void leave() {
    if (left_) return;
    left_ = true;
    running_ = false;
    if (thread_.joinable()) thread_.join();
    const auto start = steady::now();
    std::string error = close_consumer();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
    emit_("X " + (error.empty() ? std::string("ok") : error) + " " + std::to_string(ms));
  }

 protected:
  // One iteration: poll for up to ~100 ms, process (emit C), commit when due.
  virtual void poll_once() = 0;
  virtual bool settled() = 0;
  // Closes; returns an error text or empty.
  virtual std::string close_consumer() = 0;
  virtual void before_stall() {}
  void mark_poll() { last_poll_start_ = now_ns(); }
  // Reports a generation this member joined (a successful JoinGroup answer), once per generation.
  void joined_generation(std::int32_t generation, std::int64_t at) {
    if (generation <= 0) return;
    std::int32_t last = last_generation_.load();
    while (generation > last) {
      if (last_generation_.compare_exchange_weak(last, generation)) {
        emit_("G " + std::to_string(at) + " " + std::to_string(generation));
        return;
      }
    }
  }
  // The key must be a record of this partition, "chaos-<p>-<n>" with n <= offset: n is the
  // offset unless the mock stored a batch twice (its idempotent-producer emulation does not
  // deduplicate a batch retried after a broker outage or RTT spike; seen in a two-minute run).
  void check_key(std::int32_t p, std::int64_t offset, const std::optional<std::string_view>& key) {
    const std::string prefix = chaos_topic + "-" + std::to_string(p) + "-";
    bool ok = key && key->size() > prefix.size() && key->compare(0, prefix.size(), prefix) == 0;
    if (ok) {
      const std::string n(key->substr(prefix.size()));
      char* end = nullptr;
      const long long v = std::strtoll(n.c_str(), &end, 10);
      ok = end != nullptr && *end == '\0' && v >= 0 && v <= offset;
    }
    if (!ok) {
      emit_("E record " + std::to_string(p) + "@" + std::to_string(offset) + " has key " +
            (key ? std::string(*key) : std::string("(null)")) + ", not a record of partition " +
            std::to_string(p));
    }
  }

  member_spec spec_;
  emit_fn emit_;

 private:
  void run() {
    int last = -1;
    while (running_) {
      if (const int ms = stall_ms_.exchange(0); ms > 0) {
        before_stall();
        emit_("S " + std::to_string(now_ns()) + " " + std::to_string(last_poll_start_) + " " +
              std::to_string(ms));
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        emit_("W " + std::to_string(now_ns()));
      }
      poll_once();
      const int s = settled() ? 1 : 0;
      if (s != last) {
        emit_("T " + std::to_string(s));
        last = s;
      }
    }
  }

  std::thread thread_;
  std::atomic<bool> running_{true};
  std::atomic<int> stall_ms_{0};
  std::atomic<std::int64_t> last_poll_start_{0};
  std::atomic<std::int32_t> last_generation_{0};
  bool left_ = false;
};

/// A member of `spec.client` ("kgroup" or "librdkafka"), not started yet.
std::unique_ptr<chaos_member> make_member(const member_spec& spec, emit_fn emit);

}  // namespace chaos
