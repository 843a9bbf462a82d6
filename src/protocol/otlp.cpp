// OTLP metrics encoder (see otlp.hpp). Each nested message is written into its own buffer first,
// then framed with its length: payloads are a few kilobytes, so the copies cost nothing worth a
// two-pass size computation.
#include "protocol/otlp.hpp"

#include <bit>
#include <cstring>

namespace kgroup::protocol::otlp {

namespace {

enum wire_type : std::uint8_t { varint = 0, fixed64 = 1, length_delimited = 2 };

void put_varint(bytes& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

void put_tag(bytes& out, std::uint32_t field, wire_type w) {
  put_varint(out, (std::uint64_t{field} << 3) | w);
}

void put_fixed64(bytes& out, std::uint32_t field, std::uint64_t v) {
  put_tag(out, field, fixed64);
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));  // little-endian
}

void put_bytes(bytes& out, std::uint32_t field, const std::uint8_t* data, std::size_t size) {
  put_tag(out, field, length_delimited);
  put_varint(out, size);
  out.insert(out.end(), data, data + size);
}

void put_message(bytes& out, std::uint32_t field, const bytes& msg) {
  put_bytes(out, field, msg.data(), msg.size());
}

void put_string(bytes& out, std::uint32_t field, const std::string& s) {
  if (s.empty()) return;  // proto3 default
  put_bytes(out, field, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

bytes key_value(const attribute& a) {
  bytes any;
  // AnyValue's string_value sits in a oneof: written even when empty, so the value is present.
  put_bytes(any, 1, reinterpret_cast<const std::uint8_t*>(a.value.data()), a.value.size());
  bytes kv;
  put_string(kv, 1, a.key);
  put_message(kv, 2, any);
  return kv;
}

bytes number_data_point(const data_point& p) {
  bytes out;
  if (p.start_time_unix_nano != 0) put_fixed64(out, 2, p.start_time_unix_nano);
  if (p.time_unix_nano != 0) put_fixed64(out, 3, p.time_unix_nano);
  // The value is a oneof: written even when zero.
  if (const auto* d = std::get_if<double>(&p.value)) {
    put_fixed64(out, 4, std::bit_cast<std::uint64_t>(*d));
  } else {
    put_fixed64(out, 6, static_cast<std::uint64_t>(std::get<std::int64_t>(p.value)));
  }
  for (const auto& a : p.attributes) put_message(out, 7, key_value(a));
  return out;
}

bytes metric_bytes(const metric& m) {
  bytes data;
  for (const auto& p : m.points) put_message(data, 1, number_data_point(p));
  if (m.kind == metric_kind::sum) {
    put_tag(data, 2, varint);
    put_varint(data, static_cast<std::uint64_t>(m.sum_temporality));
    if (m.monotonic) {
      put_tag(data, 3, varint);
      put_varint(data, 1);
    }
  }
  bytes out;
  put_string(out, 1, m.name);
  put_string(out, 2, m.description);
  put_string(out, 3, m.unit);
  put_message(out, m.kind == metric_kind::sum ? 7 : 5, data);
  return out;
}

}  // namespace

bytes encode(const metrics_data& data) {
  bytes resource;
  for (const auto& a : data.resource) put_message(resource, 1, key_value(a));
  bytes scope;
  put_string(scope, 1, data.scope_name);
  put_string(scope, 2, data.scope_version);
  bytes scope_metrics;
  put_message(scope_metrics, 1, scope);
  for (const auto& m : data.metrics) put_message(scope_metrics, 2, metric_bytes(m));
  bytes resource_metrics;
  put_message(resource_metrics, 1, resource);
  put_message(resource_metrics, 2, scope_metrics);
  bytes out;
  put_message(out, 1, resource_metrics);
  return out;
}

}  // namespace kgroup::protocol::otlp
