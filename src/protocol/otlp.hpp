// A minimal OpenTelemetry (OTLP) metrics encoder for client telemetry (KIP-714): the protobuf
// wire form of opentelemetry.proto.metrics.v1.MetricsData with one ResourceMetrics, one
// ScopeMetrics, and Gauge or Sum metrics of NumberDataPoints whose attributes are strings.
// Written by hand (no protobuf library): only what a PushTelemetry payload needs.
//
// Field numbers (proto3, from the OTLP .proto files):
//   MetricsData      1 resource_metrics
//   ResourceMetrics  1 resource, 2 scope_metrics
//   Resource         1 attributes (KeyValue)
//   ScopeMetrics     1 scope, 2 metrics
//   InstrumentationScope 1 name, 2 version
//   Metric           1 name, 2 description, 3 unit, 5 gauge, 7 sum
//   Gauge            1 data_points
//   Sum              1 data_points, 2 aggregation_temporality (1 delta, 2 cumulative), 3 is_monotonic
//   NumberDataPoint  2 start_time_unix_nano (fixed64), 3 time_unix_nano (fixed64),
//                    4 as_double (double), 6 as_int (sfixed64), 7 attributes
//   KeyValue         1 key, 2 value (AnyValue: 1 string_value)
// Fields are written in field-number order; empty strings and zero scalars are omitted, as
// proto3 encoders do. Pure code, never throws except std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "protocol/primitives.hpp"

namespace kgroup::protocol::otlp {

/// A string attribute (a resource attribute or a data point's label).
struct attribute {
  std::string key;
  std::string value;
  bool operator==(const attribute&) const = default;
};

/// Gauge: a value at a time. Sum: a monotonic counter (delta or cumulative).
enum class metric_kind { gauge, sum };

enum class temporality : std::int32_t { delta = 1, cumulative = 2 };

struct data_point {
  std::vector<attribute> attributes;
  std::uint64_t start_time_unix_nano = 0;  ///< sums: the start of the interval (0 for gauges)
  std::uint64_t time_unix_nano = 0;
  std::variant<std::int64_t, double> value = std::int64_t{0};
};

struct metric {
  std::string name;
  std::string description;
  std::string unit;
  metric_kind kind = metric_kind::gauge;
  temporality sum_temporality = temporality::cumulative;  ///< sums only
  bool monotonic = true;                                  ///< sums only
  std::vector<data_point> points;
};

struct metrics_data {
  std::vector<attribute> resource;  ///< the client's resource attributes
  std::string scope_name;
  std::string scope_version;
  std::vector<metric> metrics;
};

/// The protobuf bytes of a MetricsData holding `data` (one ResourceMetrics, one ScopeMetrics).
bytes encode(const metrics_data& data);

}  // namespace kgroup::protocol::otlp
