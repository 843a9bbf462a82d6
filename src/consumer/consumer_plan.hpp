// What a Consumer is made of, read from its Config in one place: every option struct the facade
// hands to the cores and drivers (membership, cluster, fetcher, record cursor), the eager or
// cooperative decision, and the user thread's own settings. One function of the configuration and
// the custom assignors: no I/O (beyond what the security options read from files named in the
// configuration), no threads, no clock. The hooks that capture the facade (listener, commit
// error, coordinator lookup, security's fatal errors) are the facade's, set after.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "consumer/make_metrics.hpp"
#include "data/record_cursor.hpp"
#include "fetch/fetcher.hpp"
#include "group/consumer_member.hpp"
#include "group/member.hpp"
#include "kgroup/assignor.hpp"
#include "kgroup/config.hpp"
#include "net/cluster.hpp"

namespace kgroup::detail {

struct consumer_plan {
  /// The classic core's options: its assignors (partition.assignment.strategy, custom ones first
  /// by name) and the rebalance protocol every one of them supports.
  group::member_options member;
  /// group.protocol=consumer: the KIP-848 core, with `kip848_member`, replaces the classic one.
  bool kip848 = false;
  group::kip848::consumer_member_options kip848_member;
  /// The membership driver's request timeout (request.timeout.ms).
  std::chrono::milliseconds request_timeout{30000};
  /// rebalance.listener.thread=heartbeat: listener callbacks run on the background thread.
  bool inline_listener = false;
  net::cluster_options cluster;
  /// Without its hooks (coordinator_unusable, commit_error).
  fetch::fetcher_options fetch;
  data::record_cursor::options cursor;
  // The user thread's settings.
  bool auto_commit = true;
  bool read_committed = false;
  std::size_t max_poll_records = 500;
  std::chrono::milliseconds max_poll_interval{300000};
  std::chrono::milliseconds default_timeout{60000};
  std::chrono::milliseconds statistics_interval{0};
  /// Without wall_minus_steady_ms (a clock reading: the facade takes it).
  metrics_identity metrics_id;
};

/// Reads a validated Config. Throws Error(invalid_config) for an unknown assignor name or an
/// empty partition.assignment.strategy, and what net::cluster_options::from_config throws.
/// client.id left empty (the default): a name unique in the process, as Java's
/// "consumer-<group.id>-<n>" ("consumer-<n>" without a group), n counting every Consumer and
/// ShareConsumer made so far from 1. Set in `config` before anything reads it.
void default_client_id(Config& config);

consumer_plan make_consumer_plan(const Config& config,
                                 const std::vector<std::shared_ptr<PartitionAssignor>>& custom);

}  // namespace kgroup::detail
