// The kgroup::Config of a test consumer, built in one chain: the bootstrap servers, then what the
// test needs. The timings the integration tests share have one meaning each here, so a group
// settles, and a broken connection heals, in a test's seconds rather than a production
// client's minutes.
//
//   kgroup::Config cfg = test_config(mc.bootstrap_servers()).group("g").short_session().earliest();
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "kgroup/config.hpp"

namespace kgroup::test {

class test_config {
 public:
  using ms = std::chrono::milliseconds;

  explicit test_config(const std::string& bootstrap_servers) {
    cfg_.set("bootstrap.servers", bootstrap_servers);
  }

  /// Any other key.
  test_config& set(const std::string& key, const std::string& value) {
    cfg_.set(key, value);
    return *this;
  }

  test_config& group(const std::string& id) { return set("group.id", id); }
  test_config& client_id(const std::string& id) { return set("client.id", id); }
  test_config& strategy(const std::string& name) { return set("partition.assignment.strategy", name); }
  /// A new group reads what was produced before it joined.
  test_config& earliest() { return set("auto.offset.reset", "earliest"); }
  /// Commits only when the test says so.
  test_config& manual_commit() { return set("enable.auto.commit", "false"); }

  /// session.timeout.ms at 6 s, the smallest a broker accepts by default
  /// (group.min.session.timeout.ms), and a heartbeat every `heartbeat`: a member that dies or
  /// leaves is noticed, and a rebalance ends, within seconds.
  test_config& short_session(ms heartbeat = ms(500)) {
    set("session.timeout.ms", "6000");
    return set("heartbeat.interval.ms", count(heartbeat));
  }

  /// retry.backoff.ms, and retry.backoff.max.ms when given.
  test_config& retry_backoff(ms base, std::optional<ms> max = std::nullopt) {
    set("retry.backoff.ms", count(base));
    return max ? set("retry.backoff.max.ms", count(*max)) : *this;
  }
  /// reconnect.backoff.ms, and reconnect.backoff.max.ms when given.
  test_config& reconnect_backoff(ms base, std::optional<ms> max = std::nullopt) {
    set("reconnect.backoff.ms", count(base));
    return max ? set("reconnect.backoff.max.ms", count(*max)) : *this;
  }
  /// fetch.max.wait.ms: how long a broker holds a Fetch with no records.
  test_config& fetch_wait(ms wait) { return set("fetch.max.wait.ms", count(wait)); }

  /// For a fake broker that closes connections and answers wrongly on purpose: retries and
  /// reconnects at most 100 ms apart, and requests and blocking calls that give up after 5 s
  /// (not the defaults' 30 s and 60 s), so each recovery a test waits for is quick.
  test_config& quick_recovery() {
    retry_backoff(ms(20), ms(100));
    reconnect_backoff(ms(10), ms(100));
    set("request.timeout.ms", "5000");
    return set("default.api.timeout.ms", "5000");
  }

  // Implicit, so a test_config goes wherever a Config is taken.
  operator Config() const { return cfg_; }

 private:
  static std::string count(ms d) { return std::to_string(d.count()); }

  Config cfg_;
};

}  // namespace kgroup::test
