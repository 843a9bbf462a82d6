// Prometheus text and /status JSON from a ConsumerMetrics snapshot. See render.hpp.
#include "http/render.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "kgroup/version.hpp"

namespace kgroup::http {

namespace {

// Shortest representation that reads back as the same double; integers without a fraction.
void append_number(std::string& out, double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

void append_int(std::string& out, std::int64_t v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}

// ---- Prometheus text exposition format 0.0.4 ----

void append_prom_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    append_number(out, v);
  }
}

// Label values escape backslash, double quote and newline; nothing else.
void append_label_value(std::string& out, std::string_view v) {
  for (const char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

class prometheus_writer {
 public:
  // Every series carries who it belongs to (Prometheus joins on these labels).
  explicit prometheus_writer(const ConsumerMetrics& m)
      : prometheus_writer(m.client_id, m.group_id, m.member_id) {}
  prometheus_writer(std::string_view client_id, std::string_view group_id, std::string_view member_id) {
    labels_ = "client_id=\"";
    append_label_value(labels_, client_id);
    labels_ += "\",group_id=\"";
    append_label_value(labels_, group_id);
    labels_ += "\",member_id=\"";
    append_label_value(labels_, member_id);
    labels_ += '"';
  }

  // One metric family with one sample carrying the common labels.
  void gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help, value);
  }
  // A gauge whose negative value means "unknown" in ConsumerMetrics: the series is left out
  // instead (no sentinel values in Prometheus).
  void gauge_if_known(std::string_view name, std::string_view help, double value) {
    if (value >= 0) family(name, "gauge", help, value);
  }
  void counter(std::string_view name, std::string_view help, double value) {
    family(name, "counter", help, value);
  }
  void histogram(std::string_view name, std::string_view help, const Histogram& h) {
    header(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    for (std::size_t i = 0; i < h.bounds.size() && i < h.buckets.size(); ++i) {
      std::string le = "le=\"";
      append_number(le, h.bounds[i]);
      le += '"';
      sample(bucket, le, static_cast<double>(h.buckets[i]));
    }
    sample(bucket, "le=\"+Inf\"", static_cast<double>(h.count));
    sample(std::string(name) + "_sum", {}, h.sum);
    sample(std::string(name) + "_count", {}, static_cast<double>(h.count));
  }

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;  // static text: no backslash or newline to escape
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // A sample with the common labels plus `extra` (already escaped, without a leading comma).
  void sample(std::string_view name, std::string_view extra, double value) {
    out_ += name;
    out_ += '{';
    out_ += labels_;
    if (!extra.empty()) {
      out_ += ',';
      out_ += extra;
    }
    out_ += "} ";
    append_prom_value(out_, value);
    out_ += '\n';
  }

  std::string take() { return std::move(out_); }

 private:
  void family(std::string_view name, std::string_view type, std::string_view help, double value) {
    header(name, type, help);
    sample(name, {}, value);
  }

  std::string labels_;
  std::string out_;
};

// topic="..",partition=".." for per-partition series.
std::string partition_labels(const TopicPartition& tp) {
  std::string extra = "topic=\"";
  append_label_value(extra, tp.topic);
  extra += "\",partition=\"";
  append_int(extra, tp.partition);
  extra += '"';
  return extra;
}

// ---- JSON (Boost.JSON, written by base::append_json) ----

using boost::json::array;
using boost::json::object;
using boost::json::value;

// Every string taken from the metrics or the group view goes through text(): invalid UTF-8
// becomes U+FFFD, so the document always parses.
value text(std::string_view s) { return base::json_text(s); }

value optional_text(const std::optional<std::string>& s) {
  return s ? text(*s) : value(nullptr);
}

array partitions_json(const std::vector<TopicPartition>& parts) {
  array out;
  out.reserve(parts.size());
  for (const auto& tp : parts) out.push_back(object{{"topic", text(tp.topic)}, {"partition", tp.partition}});
  return out;
}

constexpr std::size_t max_rebalances = 50;

}  // namespace

// Metric names follow Prometheus conventions (base units, counters end in _total, histograms for
// latencies and sizes, no sentinel values) and keep the Java client's groups and meanings:
// kgroup_consumer_coordinator_* (consumer-coordinator-metrics), kgroup_consumer_fetch_manager_*
// (consumer-fetch-manager-metrics) and kgroup_consumer_* (consumer-metrics).
std::string render_prometheus(const ConsumerMetrics& m) {
  prometheus_writer p(m);
  const auto n = [](std::int64_t v) { return static_cast<double>(v); };
  constexpr std::string_view co = "kgroup_consumer_coordinator_";
  const auto c = [&](std::string_view s) { return std::string(co) + std::string(s); };

  // consumer-coordinator-metrics
  p.histogram(c("rebalance_latency_seconds"),
              "Time taken for a group to complete a rebalance, from leaving the stable state to stable again.",
              m.rebalance_latency);
  p.counter(c("rebalance_total"), "Rebalances this consumer completed.", n(m.rebalance_total));
  p.gauge(c("rebalance_rate_per_hour"), "Rebalances completed in the last hour.", m.rebalance_rate_per_hour);
  p.counter(c("failed_rebalance_total"), "Failed rebalance attempts (JoinGroup or SyncGroup failed).",
            n(m.failed_rebalance_total));
  p.gauge(c("failed_rebalance_rate_per_hour"), "Failed rebalance attempts in the last hour.",
          m.failed_rebalance_rate_per_hour);
  p.gauge_if_known(c("last_rebalance_seconds_ago"), "Seconds since the last completed rebalance.",
                   m.last_rebalance_seconds_ago);
  p.histogram(c("join_latency_seconds"), "Round trip of successful JoinGroup requests.", m.join_latency);
  p.counter(c("join_total"), "Successful JoinGroup requests.", n(m.join_total));
  p.histogram(c("sync_latency_seconds"), "Round trip of successful SyncGroup requests.", m.sync_latency);
  p.counter(c("sync_total"), "Successful SyncGroup requests.", n(m.sync_total));
  p.histogram(c("heartbeat_response_time_seconds"), "Time taken to receive a response to a heartbeat request.",
              m.heartbeat_latency);
  p.counter(c("heartbeat_total"), "Heartbeat responses received.", n(m.heartbeat_total));
  p.gauge_if_known(c("last_heartbeat_seconds_ago"), "Seconds since the last heartbeat response.",
                   m.last_heartbeat_seconds_ago);
  p.gauge(c("assigned_partitions"), "Partitions currently assigned to this consumer.", n(m.assigned_partitions));
  p.histogram(c("commit_latency_seconds"), "Time taken for a successful OffsetCommit.", m.commit_latency);
  p.counter(c("commit_total"), "Successful OffsetCommit requests.", n(m.commit_total));
  p.histogram(c("partition_assigned_latency_seconds"), "Time taken by the listener's on_partitions_assigned.",
              m.partitions_assigned_latency);
  p.histogram(c("partition_revoked_latency_seconds"), "Time taken by the listener's on_partitions_revoked.",
              m.partitions_revoked_latency);
  p.histogram(c("partition_lost_latency_seconds"), "Time taken by the listener's on_partitions_lost.",
              m.partitions_lost_latency);

  // consumer-fetch-manager-metrics
  constexpr std::string_view fm = "kgroup_consumer_fetch_manager_";
  const auto f = [&](std::string_view s) { return std::string(fm) + std::string(s); };
  p.counter(f("records_consumed_total"), "Records returned by poll().", n(m.records_consumed_total));
  p.counter(f("bytes_consumed_total"), "Record batch bytes returned by poll().", n(m.bytes_consumed_total));
  p.histogram(f("fetch_latency_seconds"), "Time from a Fetch request to its response.", m.fetch_latency);
  p.histogram(f("fetch_size_bytes"), "Record bytes in each Fetch response.", m.fetch_size);
  p.histogram(f("fetch_throttle_time_seconds"), "Time the broker throttled each Fetch request.",
              m.fetch_throttle_time);
  p.gauge_if_known(f("records_lag_max"), "The largest lag, in records, of any owned partition.", n(m.records_lag_max));
  p.gauge_if_known(f("records_lead_min"),
                   "The smallest lead (position minus log start offset), in records, of any owned partition.",
                   n(m.records_lead_min));
  p.header(f("records_lag"), "gauge", "The latest lag of the partition, in records (partitions with a known lag).");
  for (const auto& pm : m.partitions) {
    if (pm.lag >= 0) p.sample(f("records_lag"), partition_labels(pm.partition), n(pm.lag));
  }
  p.header(f("records_lead"), "gauge",
           "The latest lead of the partition (position minus log start offset), in records.");
  for (const auto& pm : m.partitions) {
    if (pm.lead >= 0) p.sample(f("records_lead"), partition_labels(pm.partition), n(pm.lead));
  }
  p.header(f("read_replica"), "gauge",
           "The broker id the partition's last records were read from: its leader, or the replica the leader "
           "named for client.rack (KIP-392).");
  for (const auto& pm : m.partitions) {
    if (pm.read_replica >= 0) p.sample(f("read_replica"), partition_labels(pm.partition), n(pm.read_replica));
  }

  // consumer-metrics (poll timing) and kgroup's own
  p.histogram("kgroup_consumer_time_between_poll_seconds", "Time between invocations of poll().",
              m.time_between_poll);
  p.gauge_if_known("kgroup_consumer_last_poll_seconds_ago", "Seconds since the last poll() invocation.",
                   m.last_poll_seconds_ago);
  p.gauge("kgroup_consumer_poll_idle_ratio_avg",
          "The average fraction of time poll() is idle (waiting for records) as opposed to the application "
          "processing them.",
          m.poll_idle_ratio_avg);
  p.gauge("kgroup_consumer_max_poll_interval_seconds", "The configured max.poll.interval.ms, in seconds.",
          static_cast<double>(m.max_poll_interval_ms) / 1000.0);
  p.counter("kgroup_consumer_offset_validations_total",
            "Positions checked against the partition leader's log (OffsetForLeaderEpoch) after a leader change.",
            n(m.offset_validations_total));
  p.counter("kgroup_consumer_log_truncations_total",
            "Validated positions found past the end of the leader's log (the log was truncated).",
            n(m.log_truncations_total));
  p.counter("kgroup_consumer_topic_recreations_total",
            "Owned partitions whose topic was deleted and created again (a new topic id): reset by "
            "auto.offset.reset.",
            n(m.topic_recreations_total));
  p.counter("kgroup_consumer_responses_with_trailing_bytes_total",
            "Broker responses that decoded completely with bytes left after their last field (accepted).",
            n(m.responses_with_trailing_bytes_total));
  p.counter("kgroup_consumer_responses_mismatched_total",
            "Broker responses dropped because they named what their request did not ask for (never applied).",
            n(m.responses_mismatched_total));
  p.counter("kgroup_consumer_authentications_total", "SASL authentications completed on broker connections.",
            n(m.authentications_total));
  p.counter("kgroup_consumer_reauthentications_total", "SASL re-authentications (KIP-368) on live connections.",
            n(m.reauthentications_total));
  p.counter("kgroup_consumer_authentication_failures_total",
            "Connections ended because a broker refused the credentials or its certificate was not trusted.",
            n(m.authentication_failures_total));
  p.counter("kgroup_consumer_rebootstraps_total",
            "Times the consumer went back to bootstrap.servers (metadata.recovery.strategy=rebootstrap).",
            n(m.rebootstraps_total));
  return p.take();
}

std::string render_status_json(const ConsumerMetrics& m) {
  object doc;
  doc["timestamp_ms"] = m.timestamp_ms;
  // The same version the library sends brokers (ApiVersions' ClientSoftwareVersion).
  doc["library_version"] = library_version();
  doc["client_id"] = text(m.client_id);
  doc["group"] = text(m.group_id);
  doc["member_id"] = text(m.member_id);
  doc["instance_id"] = optional_text(m.group_instance_id);
  doc["generation"] = m.generation;
  doc["state"] = text(m.state);
  doc["coordinator"] = m.coordinator;
  doc["protocol"] = text(m.protocol);
  doc["assignor"] = text(m.assignor);
  doc["leader"] = m.leader;
  doc["http_endpoint"] = text(m.http_endpoint);

  doc["assigned_partitions"] = m.assigned_partitions;
  array assignment;
  for (const auto& pm : m.partitions) {
    assignment.push_back(object{{"topic", text(pm.partition.topic)},
                                {"partition", pm.partition.partition},
                                {"position", pm.position},
                                {"committed", pm.committed},
                                {"high_watermark", pm.high_watermark},
                                {"lag", pm.lag},
                                {"read_replica", pm.read_replica},
                                {"lead", pm.lead},
                                {"paused", pm.paused}});
  }
  doc["assignment"] = std::move(assignment);

  doc["time_between_poll"] = object{{"avg_ms", m.time_between_poll_avg_ms},
                                    {"max_ms", m.time_between_poll_max_ms},
                                    {"last_poll_seconds_ago", m.last_poll_seconds_ago},
                                    {"poll_idle_ratio_avg", m.poll_idle_ratio_avg}};
  doc["max_poll_interval_ms"] = m.max_poll_interval_ms;

  doc["metrics"] = object{{"rebalance_total", m.rebalance_total},
                          {"failed_rebalance_total", m.failed_rebalance_total},
                          {"rebalance_latency_avg_ms", m.rebalance_latency_avg_ms},
                          {"rebalance_latency_max_ms", m.rebalance_latency_max_ms},
                          {"rebalance_latency_total_ms", m.rebalance_latency_total_ms},
                          {"rebalance_rate_per_hour", m.rebalance_rate_per_hour},
                          {"last_rebalance_seconds_ago", m.last_rebalance_seconds_ago},
                          {"join_time_avg_ms", m.join_time_avg_ms},
                          {"join_time_max_ms", m.join_time_max_ms},
                          {"sync_time_avg_ms", m.sync_time_avg_ms},
                          {"sync_time_max_ms", m.sync_time_max_ms},
                          {"heartbeat_response_time_max_ms", m.heartbeat_response_time_max_ms},
                          {"heartbeat_total", m.heartbeat_total},
                          {"last_heartbeat_seconds_ago", m.last_heartbeat_seconds_ago},
                          {"responses_with_trailing_bytes_total", m.responses_with_trailing_bytes_total},
                          {"responses_mismatched_total", m.responses_mismatched_total},
                          {"authentications_total", m.authentications_total},
                          {"reauthentications_total", m.reauthentications_total},
                          {"authentication_failures_total", m.authentication_failures_total},
                          {"rebootstraps_total", m.rebootstraps_total},
                          {"offset_validations_total", m.offset_validations_total},
                          {"log_truncations_total", m.log_truncations_total},
                          {"topic_recreations_total", m.topic_recreations_total},
                          {"commit_latency_avg_ms", m.commit_latency_avg_ms},
                          {"commit_latency_max_ms", m.commit_latency_max_ms},
                          {"commit_total", m.commit_total},
                          {"records_consumed_total", m.records_consumed_total},
                          {"records_consumed_rate", m.records_consumed_rate},
                          {"bytes_consumed_total", m.bytes_consumed_total},
                          {"bytes_consumed_rate", m.bytes_consumed_rate},
                          {"records_lag_max", m.records_lag_max},
                          {"records_lead_min", m.records_lead_min},
                          {"join_total", m.join_total},
                          {"sync_total", m.sync_total},
                          {"failed_rebalance_rate_per_hour", m.failed_rebalance_rate_per_hour}};

  array rebalances;
  const std::size_t skip = m.rebalances.size() > max_rebalances ? m.rebalances.size() - max_rebalances : 0;
  for (std::size_t i = skip; i < m.rebalances.size(); ++i) {
    const auto& r = m.rebalances[i];
    rebalances.push_back(object{{"cause", to_string(r.cause)},
                                {"detail", text(r.detail)},
                                {"start_ms", r.start_ms},
                                {"duration_ms", r.duration_ms},
                                {"generation", r.generation},
                                {"completed", r.completed},
                                {"revoked", partitions_json(r.revoked)},
                                {"assigned", partitions_json(r.assigned)},
                                {"lost", partitions_json(r.lost)}});
  }
  doc["rebalances"] = std::move(rebalances);
  return base::to_json(doc);
}

// ---- a share member (ShareConsumerMetrics) ----
// Its own kgroup_share_ series: a share member has no positions, lag, commits or rebalances, and
// the Java client's share-fetch-metrics count what is below (records acquired and
// acknowledged by type). The broker does not tell a member that its lock expired (the record
// just goes to another member): what the member sees is an acknowledgement afterwards failing
// with INVALID_RECORD_STATE, counted in acknowledgements_failed and, apart, in
// acknowledgements_lock_expired.

std::string render_share_prometheus(const ShareConsumerMetrics& m) {
  prometheus_writer p(m.client_id, m.group_id, m.member_id);
  const auto n = [](std::uint64_t v) { return static_cast<double>(v); };
  p.gauge("kgroup_share_member_epoch", "The member's epoch in its share group (0 while joining)",
          m.member_epoch);
  p.gauge("kgroup_share_assigned_partitions",
          "Partitions the share group gave this member (shared with others)", n(m.assignment.size()));
  p.counter("kgroup_share_records_delivered_total", "Records poll() returned: acquired for this member",
            n(m.records_delivered));
  p.counter("kgroup_share_records_redelivered_total",
            "Of the records delivered, those with a delivery count above 1 (released or lock expired before)",
            n(m.records_redelivered));
  p.header("kgroup_share_records_acknowledged_total", "counter",
           "Acknowledgements sent to brokers, by type (accept, release, reject)");
  p.sample("kgroup_share_records_acknowledged_total", "type=\"accept\"", n(m.acknowledged_accept));
  p.sample("kgroup_share_records_acknowledged_total", "type=\"release\"", n(m.acknowledged_release));
  p.sample("kgroup_share_records_acknowledged_total", "type=\"reject\"", n(m.acknowledged_reject));
  p.counter("kgroup_share_acknowledgements_failed_total",
            "Records whose acknowledgement failed (lock expired, session lost)",
            n(m.acknowledgements_failed));
  p.counter("kgroup_share_acknowledgements_lock_expired_total",
            "Of the failed acknowledgements, records acknowledged too late: lock expired or record moved "
            "on (INVALID_RECORD_STATE)",
            n(m.acknowledgements_lock_expired));
  p.counter("kgroup_share_gaps_acknowledged_total", "Acquired offsets without a record, acknowledged as gaps",
            n(m.gaps_acknowledged));
  p.counter("kgroup_share_fetch_requests_total", "ShareFetch requests sent", n(m.share_fetches));
  p.counter("kgroup_share_acknowledge_requests_total", "ShareAcknowledge requests sent",
            n(m.share_acknowledges));
  p.counter("kgroup_share_session_resets_total", "Share sessions that started over at epoch 0",
            n(m.session_resets));
  p.counter("kgroup_share_rebootstraps_total",
            "Times the member went back to bootstrap.servers (metadata.recovery.strategy=rebootstrap).",
            n(m.rebootstraps_total));
  if (!m.session_epochs.empty()) {
    p.header("kgroup_share_session_epoch", "gauge", "The next epoch of the share session with each broker");
    for (const auto& [broker, epoch] : m.session_epochs) {
      std::string extra = "broker=\"";
      append_int(extra, broker);
      extra += '"';
      p.sample("kgroup_share_session_epoch", extra, epoch);
    }
  }
  return p.take();
}

std::string render_share_status_json(const ShareConsumerMetrics& m) {
  object doc;
  doc["library_version"] = library_version();
  doc["group_type"] = "share";
  doc["client_id"] = text(m.client_id);
  doc["group"] = text(m.group_id);
  doc["member_id"] = text(m.member_id);
  doc["member_epoch"] = m.member_epoch;
  doc["state"] = text(m.state);
  doc["http_endpoint"] = text(m.http_endpoint);
  doc["assigned_partitions"] = m.assignment.size();
  doc["assignment"] = partitions_json({m.assignment.begin(), m.assignment.end()});
  doc["metrics"] = object{{"records_delivered_total", m.records_delivered},
                          {"records_redelivered_total", m.records_redelivered},
                          {"acknowledged_accept_total", m.acknowledged_accept},
                          {"acknowledged_release_total", m.acknowledged_release},
                          {"acknowledged_reject_total", m.acknowledged_reject},
                          {"acknowledgements_failed_total", m.acknowledgements_failed},
                          {"acknowledgements_lock_expired_total", m.acknowledgements_lock_expired},
                          {"gaps_acknowledged_total", m.gaps_acknowledged},
                          {"share_fetch_requests_total", m.share_fetches},
                          {"share_acknowledge_requests_total", m.share_acknowledges},
                          {"session_resets_total", m.session_resets},
                          {"rebootstraps_total", m.rebootstraps_total}};
  array epochs;
  for (const auto& [broker, epoch] : m.session_epochs)
    epochs.push_back(object{{"broker", broker}, {"epoch", epoch}});
  doc["session_epochs"] = std::move(epochs);
  return base::to_json(doc);
}

// ---- GET /group ----
// Kept apart from the /metrics and /status renderers above: it reads the group view, not a
// metrics snapshot.

namespace {

// Unknown numbers (negative) and absent strings (empty) are null.
value optional_int(std::int64_t v) { return v >= 0 ? value(v) : value(nullptr); }
value optional_string(const std::string& v) { return v.empty() ? value(nullptr) : text(v); }

}  // namespace

std::string render_group_json(const base::group_view& v) {
  array members;
  for (const auto& m : v.members) {
    members.push_back(object{{"member_id", text(m.member_id)},
                             {"client_id", text(m.client_id)},
                             {"host", text(m.host)},
                             {"instance_id", optional_text(m.instance_id)},
                             {"partitions", partitions_json(m.partitions)},
                             {"error", optional_string(m.error)}});
  }
  array partitions;
  for (const auto& p : v.partitions) {
    partitions.push_back(object{{"topic", text(p.partition.topic)},
                                {"partition", p.partition.partition},
                                {"owner", optional_string(p.owner)},
                                {"committed", optional_int(p.committed)},
                                {"end_offset", optional_int(p.end_offset)},
                                {"lag", optional_int(p.lag)}});
  }
  const object doc{{"group", text(v.group_id)},
                   {"member_id", text(v.member_id)},
                   {"state", text(v.state)},
                   {"protocol_type", text(v.protocol_type)},
                   {"protocol", text(v.protocol)},
                   {"generation", optional_int(v.generation)},
                   {"age_ms", optional_int(v.age_ms)},
                   {"error", optional_string(v.error)},
                   {"refreshing", v.refreshing},
                   {"members", std::move(members)},
                   {"partitions", std::move(partitions)}};
  return base::to_json(doc);
}

}  // namespace kgroup::http
