// The client's view of a Kafka cluster: bootstrap, broker connections, metadata, coordinators.
//
// Runs on the background thread's io_context; not thread-safe. Connections are kept per broker
// and per channel: group requests (JoinGroup, Heartbeat, ...) use their own connection to the
// coordinator, so a long Fetch never delays a heartbeat (the Java client does the same).
//
// Metadata and FindCoordinator requests go to the bootstrap servers until an answer names the
// cluster's brokers, then to those brokers only. When they cannot be reached, metadata has been
// missing for too long or a broker says so, the cluster rebootstraps (KIP-899, KIP-1102): it
// forgets the brokers it knows and goes back to bootstrap.servers. The decisions are
// net/metadata_recovery.hpp's; connections that still work (the coordinator's) are kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "data/cluster_metadata.hpp"
#include "net/connection.hpp"
#include "net/metadata_recovery.hpp"

namespace kgroup {
class Config;
}

namespace kgroup::net {

struct cluster_options {
  std::vector<std::pair<std::string, std::uint16_t>> bootstrap;
  connection_options connection;
  std::chrono::milliseconds retry_backoff{100};
  std::chrono::milliseconds retry_backoff_max{1000};
  std::chrono::milliseconds metadata_max_age{300000};
  bool allow_auto_create_topics = true;
  /// metadata.recovery.strategy and metadata.recovery.rebootstrap.trigger.ms.
  metadata_recovery::options recovery;
  /// client.dns.lookup=resolve_canonical_bootstrap_servers_only: the servers as configured, whose
  /// canonical names `bootstrap` holds; resolved again at every rebootstrap. Empty otherwise.
  std::vector<std::pair<std::string, std::uint16_t>> canonicalize;

  /// Reads the network keys of a validated Config. With
  /// client.dns.lookup=resolve_canonical_bootstrap_servers_only it resolves the bootstrap names
  /// (blocking, as Java does in the consumer's constructor): see canonical_bootstrap().
  static cluster_options from_config(const Config& cfg);
};

/// client.dns.lookup=resolve_canonical_bootstrap_servers_only, as Java's ClientUtils: each name is
/// replaced by the canonical name of each of its addresses (a reverse lookup; the address itself
/// when it has no name), in the resolver's order, without repeats. Kerberos users need it when the
/// bootstrap name is an alias (a load balancer's) and the brokers' principals carry their own
/// names. A name that does not resolve is kept as it is, with a warning (Java drops it, and fails
/// when none resolves; kgroup's connections retry resolving instead). Blocking.
std::vector<std::pair<std::string, std::uint16_t>> canonical_bootstrap(
    const std::vector<std::pair<std::string, std::uint16_t>>& servers);

// The metadata vocabulary is pure (the data layer's fetch planner reads it): data/cluster_metadata.hpp.
using data::broker_address;
using data::cluster_metadata;
using data::partition_metadata;
using data::topic_metadata;

/// Connections per broker: fetches (data), group membership (group: JoinGroup, which the
/// coordinator may hold for the whole rebalance timeout, SyncGroup, Heartbeat, LeaveGroup) and
/// offsets (OffsetCommit, OffsetFetch), so that committed() and commits never wait behind a held
/// JoinGroup on the same connection.
enum class channel { data = 0, group = 1, offsets = 2 };

class cluster : public std::enable_shared_from_this<cluster> {
 public:
  using done_handler = std::function<void(std::error_code)>;
  using coordinator_handler = std::function<void(std::error_code, std::int32_t node_id)>;

  cluster(boost::asio::io_context& io, cluster_options opts);
  ~cluster();
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  /// Fetches metadata for `topics` (nullopt: all topics) from the least loaded broker, retrying
  /// other brokers with backoff until `timeout`. Updates metadata() before calling `done`.
  void refresh_metadata(std::optional<std::vector<std::string>> topics, std::chrono::milliseconds timeout,
                        done_handler done);

  /// Refreshes all-topic metadata every metadata.max.age.ms until close().
  void start_periodic_refresh();

  /// Finds the coordinator of `group`, retrying COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
  /// COORDINATOR_LOAD_IN_PROGRESS and connection failures with backoff until `timeout`.
  void find_coordinator(const std::string& group, std::chrono::milliseconds timeout,
                        coordinator_handler done);

  const cluster_metadata& metadata() const noexcept { return metadata_; }

  /// The connection to broker `node_id` on `ch` (created on first use), or nullptr if the broker
  /// is not known from metadata or a FindCoordinator answer.
  std::shared_ptr<connection> broker(std::int32_t node_id, channel ch = channel::data);

  /// A connection for a Metadata or FindCoordinator request: to a broker known from metadata, or
  /// while bootstrapping also to a bootstrap server; ready ones with the fewest requests in flight
  /// first. Rebootstraps first when metadata_recovery says so.
  std::shared_ptr<connection> least_loaded();

  /// Rebootstraps so far (see net/metadata_recovery.hpp).
  std::uint64_t rebootstraps() const noexcept { return recovery_.rebootstraps(); }
  /// Whether requests go to the bootstrap servers (no answer has named the brokers since the
  /// start or the last rebootstrap).
  bool bootstrapping() const noexcept { return recovery_.use_bootstrap_servers(); }

  /// Closes every connection and stops timers; pending operations complete with shutting_down.
  void close();

  /// Called after every successful metadata refresh (for regex subscriptions and the leader's
  /// check for partition count changes).
  void on_metadata(std::function<void()> cb) { on_metadata_ = std::move(cb); }

  /// Number of connections currently open or opening (for tests).
  std::size_t connection_count() const noexcept { return connections_.size() + bootstrap_.size(); }

 private:
  struct metadata_attempt;
  struct coordinator_attempt;

  void metadata_try(std::shared_ptr<metadata_attempt> a);
  void coordinator_try(std::shared_ptr<coordinator_attempt> a);
  /// `all_topics`: the answer to a request for every topic (topics it leaves out are forgotten).
  void apply_metadata(const protocol::metadata_response& r, bool all_topics);
  void learn_broker(const broker_address& b);
  /// Closes and forgets every connection to `node_id`.
  void drop_connections(std::int32_t node_id);
  std::shared_ptr<connection> make_connection(std::int32_t node_id, const std::string& host,
                                              std::uint16_t port);
  /// The brokers known from metadata as their data connections (the ones Metadata requests use)
  /// stand, for metadata_recovery.
  std::vector<metadata_recovery::broker_link> known_brokers() const;
  /// A broker answered REBOOTSTRAP_REQUIRED (`node_id`; its connection's hook for ApiVersions).
  /// True when the cluster rebootstrapped.
  bool rebootstrap_required(std::int32_t node_id);
  /// Carries out metadata_recovery's verdict: forgets the brokers known from metadata (their
  /// connections stay, for whoever still uses them) and goes back to the bootstrap servers.
  void rebootstrap(metadata_recovery::reason why, std::int32_t node_id = -1);
  std::chrono::milliseconds backoff_for(int attempt) const;
  void arm_periodic();

  boost::asio::io_context& io_;
  cluster_options opts_;
  cluster_metadata metadata_;
  metadata_recovery recovery_;
  // Made on first use (their hook needs the shared_ptr), in bootstrap.servers' order.
  std::vector<std::shared_ptr<connection>> bootstrap_;
  std::map<std::pair<std::int32_t, int>, std::shared_ptr<connection>> connections_;
  boost::asio::steady_timer periodic_;
  bool periodic_on_ = false;
  bool closed_ = false;
  std::size_t rotate_ = 0;  // spreads attempts over brokers
  std::function<void()> on_metadata_;
};

}  // namespace kgroup::net
