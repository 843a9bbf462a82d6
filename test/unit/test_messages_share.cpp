// Generated message codecs, ShareFetch (key 78) and ShareAcknowledge (key 79), v1 and v2, flexible
// throughout: golden bytes written by hand from the schemas. v1 is the first stable version
// (KIP-932; v0 is gone); v2 adds ShareAcquireMode (int8, ignorable) and IsRenewAck (bool) to the
// ShareFetch request, IsRenewAck to the ShareAcknowledge request and AcquisitionLockTimeoutMs to
// the ShareAcknowledge response (the ShareFetch response has it from v1).
#define KGROUP_TEST_MESSAGE_CHECKS
#include "byte_builder.hpp"

using namespace kgroup::protocol;
using namespace kgroup::test;
using errc = kgroup::protocol::codec_errc;

namespace {

uuid share_uuid(std::uint8_t fill) {
  uuid u;
  for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
  return u;
}

// Record bytes are opaque to the message codec (COMPACT_RECORDS): any bytes do.
const bytes record_bytes{0xde, 0xad, 0xbe, 0xef, 0x01};

}  // namespace

TEST_CASE("ShareFetchRequest", "[codec]") {
  using req = share_fetch_request;
  auto make = [](std::int16_t v) {
    req m;
    m.group_id = "g";
    m.member_id = "m";
    m.share_session_epoch = 3;
    m.max_wait_ms = 500;
    m.min_bytes = 1;
    m.max_bytes = 1048576;
    m.max_records = 200;
    m.batch_size = 100;
    if (v >= 2) {
      m.share_acquire_mode = 1;
      m.is_renew_ack = true;
    }
    req::fetch_topic t;
    t.topic_id = share_uuid(0x10);
    req::fetch_topic::fetch_partition p0;
    p0.partition_index = 0;
    p0.acknowledgement_batches = {{10, 12, {1}}, {13, 15, {0, v >= 2 ? std::int8_t{4} : std::int8_t{2}, 3}}};
    req::fetch_topic::fetch_partition p1;
    p1.partition_index = 2;
    t.partitions = {p0, p1};
    m.topics = {t};
    m.forgotten_topics_data = {{share_uuid(0x30), {4, 5}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.cstr("g").cstr("m").i32(3).i32(500).i32(1).i32(1048576).i32(200).i32(100);
    if (v >= 2) b.i8(1).boolean(true);
    b.uvarint(2).uuid(0x10);
    b.uvarint(3);
    // partition 0: two batches
    b.i32(0).uvarint(3);
    b.i64(10).i64(12).uvarint(2).i8(1).tags0(true);
    b.i64(13).i64(15).uvarint(4).i8(0).i8(v >= 2 ? 4 : 2).i8(3).tags0(true);
    b.tags0(true);
    // partition 2: no batches
    b.i32(2).uvarint(1).tags0(true);
    b.tags0(true);  // topic
    b.uvarint(2).uuid(0x30).uvarint(3).i32(4).i32(5).tags0(true);
    b.tags0(true);
    return b.out;
  };
  check_all_versions<req>(make, wire);
  check_unknown_top_tags<req>(make, wire);

  // IsRenewAck cannot travel in v1; ShareAcquireMode is ignorable and is dropped there.
  req renew = make(1);
  renew.is_renew_ack = true;
  check_encode_fails(renew, 1, errc::field_not_supported);
  req mode = make(1);
  mode.share_acquire_mode = 1;
  check_dropped(mode, make(1), 1);

  // Null group id (the schema's default), empty member id.
  req bare;
  bare.member_id = "";
  byte_builder b;
  b.null_cstr().cstr("").i32(0).i32(0).i32(0).i32(2147483647).i32(0).i32(0).i8(0).boolean(false);
  b.uvarint(1).uvarint(1).tags0(true);
  check_wire(bare, 2, b.out);
}

TEST_CASE("ShareFetchResponse", "[codec]") {
  using resp = share_fetch_response;
  auto make = [](std::int16_t) {
    resp m;
    m.throttle_time_ms = 7;
    m.error_code = 0;
    m.acquisition_lock_timeout_ms = 30000;
    resp::share_fetchable_topic_response t;
    t.topic_id = share_uuid(0x40);
    resp::share_fetchable_topic_response::partition_data p;
    p.partition_index = 1;
    p.error_code = 0;
    p.acknowledge_error_code = 121;  // INVALID_RECORD_STATE
    p.acknowledge_error_message = "lock expired";
    p.current_leader = {3, 9};
    p.records = records_view{record_bytes};
    p.acquired_records = {{100, 104, 1}, {106, 106, 2}};
    resp::share_fetchable_topic_response::partition_data q;
    q.partition_index = 2;
    q.error_code = 6;  // NOT_LEADER_OR_FOLLOWER
    q.error_message = "moved";
    q.current_leader = {4, 10};
    q.records = std::nullopt;
    t.partitions = {p, q};
    m.responses = {t};
    m.node_endpoints = {{4, "broker4", 9092, std::nullopt}, {5, "broker5", 9093, "rack-b"}};
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.i32(7).i16(0).null_cstr().i32(30000);
    b.uvarint(2).uuid(0x40).uvarint(3);
    // partition 1
    b.i32(1).i16(0).null_cstr().i16(121).cstr("lock expired");
    b.i32(3).i32(9).tags0(true);  // CurrentLeader
    b.cbyts(record_bytes);
    b.uvarint(3).i64(100).i64(104).i16(1).tags0(true).i64(106).i64(106).i16(2).tags0(true);
    b.tags0(true);
    // partition 2
    b.i32(2).i16(6).cstr("moved").i16(0).null_cstr();
    b.i32(4).i32(10).tags0(true);
    b.uvarint(0);  // null records
    b.uvarint(1);  // no acquired records
    b.tags0(true);
    b.tags0(true);  // topic
    b.uvarint(3);
    b.i32(4).cstr("broker4").i32(9092).null_cstr().tags0(true);
    b.i32(5).cstr("broker5").i32(9093).cstr("rack-b").tags0(true);
    b.tags0(true);
    return b.out;
  };
  check_all_versions<resp>(make, wire);
  check_unknown_top_tags<resp>(make, wire);

  // A top-level error with nothing else.
  resp err;
  err.error_code = 122;  // SHARE_SESSION_NOT_FOUND
  err.error_message = "no session";
  byte_builder b;
  b.i32(0).i16(122).cstr("no session").i32(0).uvarint(1).uvarint(1).tags0(true);
  for (std::int16_t v = 1; v <= 2; ++v) check_wire(err, v, b.out);
}

TEST_CASE("ShareAcknowledgeRequest", "[codec]") {
  using req = share_acknowledge_request;
  auto make = [](std::int16_t v) {
    req m;
    m.group_id = "g";
    m.member_id = "m";
    m.share_session_epoch = -1;
    if (v >= 2) m.is_renew_ack = true;
    req::acknowledge_topic t;
    t.topic_id = share_uuid(0x50);
    req::acknowledge_topic::acknowledge_partition p;
    p.partition_index = 3;
    p.acknowledgement_batches = {{0, 0, {v >= 2 ? std::int8_t{4} : std::int8_t{1}}}, {5, 7, {2, 0, 3}}};
    t.partitions = {p};
    m.topics = {t};
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.cstr("g").cstr("m").i32(-1);
    if (v >= 2) b.boolean(true);
    b.uvarint(2).uuid(0x50).uvarint(2).i32(3).uvarint(3);
    b.i64(0).i64(0).uvarint(2).i8(v >= 2 ? 4 : 1).tags0(true);
    b.i64(5).i64(7).uvarint(4).i8(2).i8(0).i8(3).tags0(true);
    b.tags0(true);  // partition
    b.tags0(true);  // topic
    b.tags0(true);
    return b.out;
  };
  check_all_versions<req>(make, wire);
  check_unknown_top_tags<req>(make, wire);
  req renew = make(1);
  renew.is_renew_ack = true;
  check_encode_fails(renew, 1, errc::field_not_supported);
}

TEST_CASE("ShareAcknowledgeResponse", "[codec]") {
  using resp = share_acknowledge_response;
  auto make = [](std::int16_t v) {
    resp m;
    m.throttle_time_ms = 1;
    if (v >= 2) m.acquisition_lock_timeout_ms = 15000;
    resp::share_acknowledge_topic_response t;
    t.topic_id = share_uuid(0x60);
    resp::share_acknowledge_topic_response::partition_data p;
    p.partition_index = 0;
    p.error_code = 121;
    p.error_message = "not owner";
    p.current_leader = {1, 2};
    t.partitions = {p};
    m.responses = {t};
    m.node_endpoints = {{1, "b1", 9092, "r"}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.i32(1).i16(0).null_cstr();
    if (v >= 2) b.i32(15000);
    b.uvarint(2).uuid(0x60).uvarint(2);
    b.i32(0).i16(121).cstr("not owner").i32(1).i32(2).tags0(true).tags0(true);
    b.tags0(true);  // topic
    b.uvarint(2).i32(1).cstr("b1").i32(9092).cstr("r").tags0(true);
    b.tags0(true);
    return b.out;
  };
  check_all_versions<resp>(make, wire);
  check_unknown_top_tags<resp>(make, wire);
  // The lock timeout cannot travel in v1.
  check_encode_fails(make(2), 1, errc::field_not_supported);
}
