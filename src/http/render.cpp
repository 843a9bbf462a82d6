// Prometheus text and /status JSON from a ConsumerMetrics snapshot. See render.hpp.
#include "http/render.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

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
  explicit prometheus_writer(const ConsumerMetrics& m) {
    labels_ = "client_id=\"";
    append_label_value(labels_, m.client_id);
    labels_ += "\",group_id=\"";
    append_label_value(labels_, m.group_id);
    labels_ += "\",member_id=\"";
    append_label_value(labels_, m.member_id);
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
std::string partition_labels(const topic_partition& tp) {
  std::string extra = "topic=\"";
  append_label_value(extra, tp.topic);
  extra += "\",partition=\"";
  append_int(extra, tp.partition);
  extra += '"';
  return extra;
}

// ---- JSON ----

// Appends `s` as a JSON string: quotes, backslash and control characters escaped, invalid UTF-8
// replaced by U+FFFD so the document always parses.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 0xf];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // Multi-byte sequence: validate lead byte, continuation bytes, overlongs and surrogates.
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok && len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (ok && len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ok = false;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

// A small streaming writer: it places commas and colons so callers only say what comes next.
class json_writer {
 public:
  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  json_writer& key(std::string_view k) {
    separate();
    append_json_string(out_, k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  json_writer& value(std::string_view s) {
    separate();
    append_json_string(out_, s);
    return *this;
  }
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }
  json_writer& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_writer& value(std::int64_t v) {
    separate();
    append_int(out_, v);
    return *this;
  }
  json_writer& value(std::int32_t v) { return value(static_cast<std::int64_t>(v)); }
  json_writer& value(double v) {
    separate();
    if (std::isfinite(v)) {
      append_number(out_, v);
    } else {
      out_ += "null";
    }
    return *this;
  }
  json_writer& null() {
    separate();
    out_ += "null";
    return *this;
  }

  template <class T>
  json_writer& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  std::string take() { return std::move(out_); }

 private:
  json_writer& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  json_writer& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }

  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

void write_partitions(json_writer& w, std::string_view name, const std::vector<topic_partition>& parts) {
  w.key(name).begin_array();
  for (const auto& tp : parts) {
    w.begin_object().field("topic", tp.topic).field("partition", tp.partition).end_object();
  }
  w.end_array();
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
  p.counter("kgroup_consumer_responses_with_trailing_bytes_total",
            "Broker responses that decoded completely with bytes left after their last field (accepted).",
            n(m.responses_with_trailing_bytes_total));
  p.counter("kgroup_consumer_authentications_total", "SASL authentications completed on broker connections.",
            n(m.authentications_total));
  p.counter("kgroup_consumer_reauthentications_total", "SASL re-authentications (KIP-368) on live connections.",
            n(m.reauthentications_total));
  p.counter("kgroup_consumer_authentication_failures_total",
            "Connections ended because a broker refused the credentials or its certificate was not trusted.",
            n(m.authentication_failures_total));
  return p.take();
}

std::string render_status_json(const ConsumerMetrics& m) {
  json_writer w;
  w.begin_object();
  w.field("timestamp_ms", m.timestamp_ms);
  w.field("client_id", m.client_id);
  w.field("group", m.group_id);
  w.field("member_id", m.member_id);
  w.key("instance_id");
  if (m.group_instance_id) {
    w.value(*m.group_instance_id);
  } else {
    w.null();
  }
  w.field("generation", m.generation);
  w.field("state", m.state);
  w.field("coordinator", m.coordinator);
  w.field("protocol", m.protocol);
  w.field("assignor", m.assignor);
  w.field("leader", m.leader);
  w.field("http_endpoint", m.http_endpoint);

  w.field("assigned_partitions", m.assigned_partitions);
  w.key("assignment").begin_array();
  for (const auto& pm : m.partitions) {
    w.begin_object()
        .field("topic", pm.partition.topic)
        .field("partition", pm.partition.partition)
        .field("position", pm.position)
        .field("committed", pm.committed)
        .field("high_watermark", pm.high_watermark)
        .field("lag", pm.lag)
        .field("read_replica", pm.read_replica)
        .field("lead", pm.lead)
        .field("paused", pm.paused)
        .end_object();
  }
  w.end_array();

  w.key("time_between_poll").begin_object();
  w.field("avg_ms", m.time_between_poll_avg_ms);
  w.field("max_ms", m.time_between_poll_max_ms);
  w.field("last_poll_seconds_ago", m.last_poll_seconds_ago);
  w.field("poll_idle_ratio_avg", m.poll_idle_ratio_avg);
  w.end_object();
  w.field("max_poll_interval_ms", m.max_poll_interval_ms);

  w.key("metrics").begin_object();
  w.field("rebalance_total", m.rebalance_total);
  w.field("failed_rebalance_total", m.failed_rebalance_total);
  w.field("rebalance_latency_avg_ms", m.rebalance_latency_avg_ms);
  w.field("rebalance_latency_max_ms", m.rebalance_latency_max_ms);
  w.field("rebalance_latency_total_ms", m.rebalance_latency_total_ms);
  w.field("rebalance_rate_per_hour", m.rebalance_rate_per_hour);
  w.field("last_rebalance_seconds_ago", m.last_rebalance_seconds_ago);
  w.field("join_time_avg_ms", m.join_time_avg_ms);
  w.field("join_time_max_ms", m.join_time_max_ms);
  w.field("sync_time_avg_ms", m.sync_time_avg_ms);
  w.field("sync_time_max_ms", m.sync_time_max_ms);
  w.field("heartbeat_response_time_max_ms", m.heartbeat_response_time_max_ms);
  w.field("heartbeat_total", m.heartbeat_total);
  w.field("last_heartbeat_seconds_ago", m.last_heartbeat_seconds_ago);
  w.field("responses_with_trailing_bytes_total", m.responses_with_trailing_bytes_total);
  w.field("authentications_total", m.authentications_total);
  w.field("reauthentications_total", m.reauthentications_total);
  w.field("authentication_failures_total", m.authentication_failures_total);
  w.field("offset_validations_total", m.offset_validations_total);
  w.field("log_truncations_total", m.log_truncations_total);
  w.field("commit_latency_avg_ms", m.commit_latency_avg_ms);
  w.field("commit_latency_max_ms", m.commit_latency_max_ms);
  w.field("commit_total", m.commit_total);
  w.field("records_consumed_total", m.records_consumed_total);
  w.field("records_consumed_rate", m.records_consumed_rate);
  w.field("bytes_consumed_total", m.bytes_consumed_total);
  w.field("bytes_consumed_rate", m.bytes_consumed_rate);
  w.field("records_lag_max", m.records_lag_max);
  w.field("records_lead_min", m.records_lead_min);
  w.field("join_total", m.join_total);
  w.field("sync_total", m.sync_total);
  w.field("failed_rebalance_rate_per_hour", m.failed_rebalance_rate_per_hour);
  w.end_object();

  w.key("rebalances").begin_array();
  const std::size_t skip = m.rebalances.size() > max_rebalances ? m.rebalances.size() - max_rebalances : 0;
  for (std::size_t i = skip; i < m.rebalances.size(); ++i) {
    const auto& r = m.rebalances[i];
    w.begin_object();
    w.field("cause", to_string(r.cause));
    w.field("detail", r.detail);
    w.field("start_ms", r.start_ms);
    w.field("duration_ms", r.duration_ms);
    w.field("generation", r.generation);
    w.field("completed", r.completed);
    write_partitions(w, "revoked", r.revoked);
    write_partitions(w, "assigned", r.assigned);
    write_partitions(w, "lost", r.lost);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}


// ---- GET /group ----
// Kept apart from the /metrics and /status renderers above: it reads the group view, not a
// metrics snapshot.

namespace {

void optional_int(json_writer& w, std::string_view k, std::int64_t v) {
  w.key(k);
  if (v >= 0) {
    w.value(v);
  } else {
    w.null();
  }
}

void optional_string(json_writer& w, std::string_view k, const std::string& v) {
  w.key(k);
  if (v.empty()) {
    w.null();
  } else {
    w.value(v);
  }
}

}  // namespace

std::string render_group_json(const base::group_view& v) {
  json_writer w;
  w.begin_object();
  w.field("group", v.group_id);
  w.field("member_id", v.member_id);
  w.field("state", v.state);
  w.field("protocol_type", v.protocol_type);
  w.field("protocol", v.protocol);
  optional_int(w, "generation", v.generation);
  optional_int(w, "age_ms", v.age_ms);
  optional_string(w, "error", v.error);
  w.field("refreshing", v.refreshing);
  w.key("members").begin_array();
  for (const auto& m : v.members) {
    w.begin_object();
    w.field("member_id", m.member_id);
    w.field("client_id", m.client_id);
    w.field("host", m.host);
    w.key("instance_id");
    if (m.instance_id) {
      w.value(*m.instance_id);
    } else {
      w.null();
    }
    write_partitions(w, "partitions", m.partitions);
    optional_string(w, "error", m.error);
    w.end_object();
  }
  w.end_array();
  w.key("partitions").begin_array();
  for (const auto& p : v.partitions) {
    w.begin_object();
    w.field("topic", p.partition.topic);
    w.field("partition", p.partition.partition);
    optional_string(w, "owner", p.owner);
    optional_int(w, "committed", p.committed);
    optional_int(w, "end_offset", p.end_offset);
    optional_int(w, "lag", p.lag);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace kgroup::http
