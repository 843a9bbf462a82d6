// make_consumer_plan(): the configuration keys, field by field, into the options of each part.
#include "consumer/consumer_plan.hpp"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "kgroup/error.hpp"

namespace kgroup::detail {

namespace {

// partition.assignment.strategy, in order: a custom assignor of that name, else a built-in.
std::vector<std::shared_ptr<PartitionAssignor>> assignors_of(
    const Config& config, const std::vector<std::shared_ptr<PartitionAssignor>>& custom) {
  std::vector<std::shared_ptr<PartitionAssignor>> out;
  for (const auto& name : config.get_list("partition.assignment.strategy")) {
    std::shared_ptr<PartitionAssignor> a;
    for (const auto& c : custom) {
      if (c && c->name() == name) a = c;
    }
    if (!a) a = make_assignor(name);
    if (!a) {
      throw Error(
          make_error_code(client_errc::invalid_config),
          fmt::format("partition.assignment.strategy: unknown assignor '{}' (built-ins: range, roundrobin, "
                      "sticky, cooperative-sticky; or pass a custom PartitionAssignor)",
                      name));
    }
    out.push_back(std::move(a));
  }
  if (out.empty()) {
    throw Error(make_error_code(client_errc::invalid_config),
                "partition.assignment.strategy: no assignor given");
  }
  return out;
}

// The rebalance protocol is the best one every configured assignor supports (as in Java):
// "range,cooperative-sticky" stays eager until range is removed.
RebalanceProtocol protocol_of(const std::vector<std::shared_ptr<PartitionAssignor>>& assignors) {
  bool all_cooperative = true;
  for (const auto& a : assignors) {
    auto p = a->supported_protocols();
    if (std::find(p.begin(), p.end(), RebalanceProtocol::cooperative) == p.end()) all_cooperative = false;
  }
  return all_cooperative ? RebalanceProtocol::cooperative : RebalanceProtocol::eager;
}

}  // namespace

void default_client_id(Config& config) {
  if (!config.get("client.id").empty()) return;
  static std::atomic<std::uint64_t> sequence{0};
  const auto n = ++sequence;
  const auto group = config.get("group.id");
  config.set("client.id",
             group.empty() ? fmt::format("consumer-{}", n) : fmt::format("consumer-{}-{}", group, n));
}

consumer_plan make_consumer_plan(const Config& config,
                                 const std::vector<std::shared_ptr<PartitionAssignor>>& custom) {
  consumer_plan plan;
  // group.id is optional: manual assignment (assign()) works without one; subscribe() and
  // commits need it.
  group::member_options& mo = plan.member;
  mo.group_id = config.get("group.id");
  if (auto id = config.get("group.instance.id"); !id.empty()) mo.group_instance_id = id;
  if (auto rack = config.get("client.rack"); !rack.empty()) mo.rack = rack;
  mo.session_timeout = config.get_ms("session.timeout.ms");
  mo.heartbeat_interval = config.get_ms("heartbeat.interval.ms");
  mo.max_poll_interval = config.get_ms("max.poll.interval.ms");
  mo.retry_backoff = config.get_ms("retry.backoff.ms");
  mo.retry_backoff_max = config.get_ms("retry.backoff.max.ms");
  mo.assignors = assignors_of(config, custom);
  mo.protocol = protocol_of(mo.assignors);
  mo.request_timeout = config.get_ms("request.timeout.ms");
  mo.exclude_internal_topics = config.get_bool("exclude.internal.topics");
  plan.request_timeout = mo.request_timeout;
  plan.inline_listener = config.get("rebalance.listener.thread") == "heartbeat";

  plan.cluster = net::cluster_options::from_config(config);

  fetch::fetcher_options& fo = plan.fetch;
  fo.group_id = mo.group_id;
  fo.fetch_min_bytes = static_cast<std::int32_t>(config.get_int("fetch.min.bytes"));
  fo.fetch_max_bytes = static_cast<std::int32_t>(config.get_int("fetch.max.bytes"));
  fo.fetch_max_wait_ms = static_cast<std::int32_t>(config.get_int("fetch.max.wait.ms"));
  fo.max_partition_fetch_bytes = static_cast<std::int32_t>(config.get_int("max.partition.fetch.bytes"));
  fo.isolation_level = config.get("isolation.level") == "read_committed" ? 1 : 0;
  fo.auto_offset_reset = config.get("auto.offset.reset");
  fo.buffer_max_bytes = static_cast<std::size_t>(config.get_int("queued.max.messages.kbytes")) * 1024;
  fo.auto_commit = config.get_bool("enable.auto.commit");
  fo.auto_commit_interval = config.get_ms("auto.commit.interval.ms");
  fo.retry_backoff = mo.retry_backoff;
  fo.retry_backoff_max = mo.retry_backoff_max;
  fo.request_timeout = config.get_ms("request.timeout.ms");
  fo.client_rack = mo.rack.value_or("");
  fo.preferred_replica_ttl = config.get_ms("metadata.max.age.ms");
  plan.auto_commit = fo.auto_commit;
  plan.read_committed = fo.isolation_level == 1;
  plan.max_poll_records = static_cast<std::size_t>(config.get_int("max.poll.records"));
  plan.max_poll_interval = mo.max_poll_interval;
  {
    // The bounds on what a Fetch answer can make poll() hold (DESIGN.md, "Hostile peers: what
    // a broker controls is bounded"): a batch decompresses to at most what one fetch may carry
    // (never below 16 MiB, so a small fetch.max.bytes does not refuse ordinary compressed
    // batches); one poll() holds up to fetch.max.bytes, its first record whatever it costs
    // within that bound.
    const auto fetch_max = static_cast<std::size_t>(config.get_int("fetch.max.bytes"));
    const auto partition_max = static_cast<std::size_t>(config.get_int("max.partition.fetch.bytes"));
    plan.cursor = {.read_committed = plan.read_committed,
                   .verify_crc = config.get_bool("check.crcs"),
                   .max_batch_bytes = std::max({fetch_max, partition_max, std::size_t{16} << 20}),
                   .poll_bytes = fetch_max};
  }

  plan.kip848 = config.get("group.protocol") == "consumer";
  if (plan.kip848) {
    // KIP-848: the coordinator assigns; the classic keys (assignors, session and heartbeat
    // timers) were refused by validate().
    auto& km = plan.kip848_member;
    km.group_id = mo.group_id;
    km.group_instance_id = mo.group_instance_id;
    km.rack = mo.rack;
    if (auto a = config.get("group.remote.assignor"); !a.empty()) km.remote_assignor = a;
    km.max_poll_interval = mo.max_poll_interval;
    km.retry_backoff = mo.retry_backoff;
    km.retry_backoff_max = mo.retry_backoff_max;
  }

  plan.default_timeout = config.get_ms("default.api.timeout.ms");
  plan.statistics_interval = config.get_ms("statistics.interval.ms");
  auto& id = plan.metrics_id;
  id.client_id = config.get("client.id");
  id.group_id = mo.group_id;
  id.group_instance_id = mo.group_instance_id;
  id.protocol = plan.kip848                                     ? "consumer"
                : mo.protocol == RebalanceProtocol::cooperative ? "cooperative"
                                                                : "eager";
  id.max_poll_interval_ms = mo.max_poll_interval.count();
  return plan;
}

}  // namespace kgroup::detail
