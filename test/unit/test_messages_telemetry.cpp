// Generated message codecs, GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), v0, flexible
// (KIP-714): golden bytes written by hand from the schemas.
#define KGROUP_TEST_MESSAGE_CHECKS
#include "byte_builder.hpp"

using namespace kgroup::protocol;
using namespace kgroup::test;

namespace {

uuid telemetry_uuid(std::uint8_t fill) {
  uuid u;
  for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
  return u;
}

}  // namespace

TEST_CASE("GetTelemetrySubscriptionsRequest", "[codec]") {
  using req = get_telemetry_subscriptions_request;
  auto make = [](std::int16_t) {
    req m;
    m.client_instance_id = telemetry_uuid(0x21);
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.uuid(0x21).tags0(true);
    return b.out;
  };
  check_all_versions<req>(make, wire);
  check_unknown_top_tags<req>(make, wire);

  // The first request carries the zero Uuid.
  byte_builder b;
  b.raw(std::vector<std::uint8_t>(16, 0)).tags0(true);
  check_wire(req{}, 0, b.out);
}

TEST_CASE("GetTelemetrySubscriptionsResponse", "[codec]") {
  using resp = get_telemetry_subscriptions_response;
  auto make = [](std::int16_t) {
    resp m;
    m.throttle_time_ms = 5;
    m.error_code = 0;
    m.client_instance_id = telemetry_uuid(0x40);
    m.subscription_id = -7;
    m.accepted_compression_types = {4, 3, 1};
    m.push_interval_ms = 30000;
    m.telemetry_max_bytes = 1048576;
    m.delta_temporality = true;
    m.requested_metrics = {"org.apache.kafka.consumer.", ""};
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.i32(5).i16(0).uuid(0x40).i32(-7);
    b.uvarint(4).i8(4).i8(3).i8(1);
    b.i32(30000).i32(1048576).boolean(true);
    b.uvarint(3).cstr("org.apache.kafka.consumer.").cstr("");
    b.tags0(true);
    return b.out;
  };
  check_all_versions<resp>(make, wire);
  check_unknown_top_tags<resp>(make, wire);

  // An error answer: empty arrays (no metrics requested, no compression accepted).
  resp e;
  e.error_code = 117;
  byte_builder b;
  b.i32(0).i16(117).raw(std::vector<std::uint8_t>(16, 0)).i32(0).uvarint(1).i32(0).i32(0).boolean(false);
  b.uvarint(1).tags0(true);
  check_wire(e, 0, b.out);
}

TEST_CASE("PushTelemetryRequest", "[codec]") {
  using req = push_telemetry_request;
  auto make = [](std::int16_t) {
    req m;
    m.client_instance_id = telemetry_uuid(0x60);
    m.subscription_id = 12345;
    m.terminating = true;
    m.compression_type = 4;
    m.metrics = {0x0a, 0x02, 0x0a, 0x00};
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.uuid(0x60).i32(12345).boolean(true).i8(4).cbyts({0x0a, 0x02, 0x0a, 0x00});
    b.tags0(true);
    return b.out;
  };
  check_all_versions<req>(make, wire);
  check_unknown_top_tags<req>(make, wire);
}

TEST_CASE("PushTelemetryResponse", "[codec]") {
  using resp = push_telemetry_response;
  auto make = [](std::int16_t) {
    resp m;
    m.throttle_time_ms = 100;
    m.error_code = 118;  // TELEMETRY_TOO_LARGE
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.i32(100).i16(118).tags0(true);
    return b.out;
  };
  check_all_versions<resp>(make, wire);
  check_unknown_top_tags<resp>(make, wire);
}
