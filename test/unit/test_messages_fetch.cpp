// Generated message codecs, Fetch: the request and response with the most version history
// (topic names -> topic ids at 13, tagged fields inside nested structs, records), golden bytes
// written by hand from the schemas at every supported version, plus tagged-field edge cases and
// hostile counts.
#define KGROUP_TEST_MESSAGE_CHECKS
#include "byte_builder.hpp"

using namespace kgroup::protocol;
using namespace kgroup::test;
using errc = kgroup::protocol::codec_errc;

namespace {

uuid make_uuid(std::uint8_t fill) {
  uuid u;
  for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
  return u;
}

fetch_request make_fetch_request(std::int16_t v) {
  fetch_request m;
  if (v >= 12) m.cluster_id = "cluster-x";
  if (v <= 14) m.replica_id = 5;
  if (v >= 15) m.replica_state = {7, 3};
  m.max_wait_ms = 500;
  m.min_bytes = 1;
  m.max_bytes = 52428800;
  m.isolation_level = 1;
  if (v >= 7) {
    m.session_id = 123;
    m.session_epoch = 4;
  }
  fetch_request::fetch_topic t;
  if (v <= 12) t.topic = "orders";
  if (v >= 13) t.topic_id = make_uuid(0x50);
  t.partitions.resize(2);
  auto& p0 = t.partitions[0];
  p0.partition = 0;
  p0.fetch_offset = 100;
  p0.partition_max_bytes = 1048576;
  if (v >= 9) p0.current_leader_epoch = 5;
  if (v >= 12) p0.last_fetched_epoch = 4;
  if (v >= 5) p0.log_start_offset = 10;
  if (v >= 17) p0.replica_directory_id = make_uuid(0x60);
  auto& p1 = t.partitions[1];
  p1.partition = 1;
  p1.fetch_offset = 200;
  p1.partition_max_bytes = 65536;
  if (v >= 5) p1.log_start_offset = 0;
  m.topics = {t};
  if (v >= 7) {
    fetch_request::forgotten_topic ft;
    if (v <= 12) ft.topic = "payments";
    if (v >= 13) ft.topic_id = make_uuid(0x70);
    ft.partitions = {3, 4};
    m.forgotten_topics_data = {ft};
  }
  if (v >= 11) m.rack_id = "rack-a";
  return m;
}

bytes fetch_request_wire(std::int16_t v) {
  const bool f = v >= 12;
  byte_builder b;
  if (v <= 14) b.i32(5);
  b.i32(500).i32(1).i32(52428800).i8(1);
  if (v >= 7) b.i32(123).i32(4);
  b.arr(f, 1);
  if (v <= 12) b.s(f, "orders");
  if (v >= 13) b.uuid(0x50);
  b.arr(f, 2);
  b.i32(0);
  if (v >= 9) b.i32(5);
  b.i64(100);
  if (v >= 12) b.i32(4);
  if (v >= 5) b.i64(10);
  b.i32(1048576);
  if (v >= 17) b.uvarint(1).tag(0, byte_builder{}.uuid(0x60));
  else b.tags0(f);
  b.i32(1);
  if (v >= 9) b.i32(-1);
  b.i64(200);
  if (v >= 12) b.i32(-1);
  if (v >= 5) b.i64(0);
  b.i32(65536).tags0(f);
  b.tags0(f);  // topic
  if (v >= 7) {
    b.arr(f, 1);
    if (v <= 12) b.s(f, "payments");
    if (v >= 13) b.uuid(0x70);
    b.arr(f, 2).i32(3).i32(4).tags0(f);
  }
  if (v >= 11) b.s(f, "rack-a");
  if (f) {
    b.uvarint(v >= 15 ? 2 : 1);
    b.tag(0, byte_builder{}.cstr("cluster-x"));
    if (v >= 15) b.tag(1, byte_builder{}.i32(7).i64(3).uvarint(0));
  }
  return b.out;
}

const bytes record_bytes{0xde, 0xad, 0xbe, 0xef};

fetch_response make_fetch_response(std::int16_t v) {
  using resp = fetch_response;
  resp m;
  m.throttle_time_ms = 2;
  if (v >= 7) {
    m.error_code = 70;
    m.session_id = 123;
  }
  resp::fetchable_topic_response t;
  if (v <= 12) t.topic = "orders";
  if (v >= 13) t.topic_id = make_uuid(0x50);
  t.partitions.resize(2);
  auto& p0 = t.partitions[0];
  p0.partition_index = 0;
  p0.error_code = 0;
  p0.high_watermark = 1000;
  p0.last_stable_offset = 990;
  if (v >= 5) p0.log_start_offset = 5;
  if (v >= 12) {
    p0.diverging_epoch = {3, 900};
    p0.current_leader = {1, 4};
    p0.snapshot_id = {800, 2};
  }
  p0.aborted_transactions = std::vector<resp::fetchable_topic_response::partition_data::aborted_transaction>{
      {77, 950}};
  if (v >= 11) p0.preferred_read_replica = 2;
  p0.records = records_view{record_bytes};
  auto& p1 = t.partitions[1];
  p1.partition_index = 1;
  p1.error_code = 6;
  p1.high_watermark = -1;
  p1.aborted_transactions.reset();
  p1.records.reset();
  m.responses = {t};
  if (v >= 16) m.node_endpoints = {{1, "b1", 9092, "rack-a"}, {2, "b2", 9093, std::nullopt}};
  return m;
}

bytes fetch_response_wire(std::int16_t v) {
  const bool f = v >= 12;
  byte_builder b;
  b.i32(2);
  if (v >= 7) b.i16(70).i32(123);
  b.arr(f, 1);
  if (v <= 12) b.s(f, "orders");
  if (v >= 13) b.uuid(0x50);
  b.arr(f, 2);
  // partition 0
  b.i32(0).i16(0).i64(1000).i64(990);
  if (v >= 5) b.i64(5);
  b.arr(f, 1).i64(77).i64(950).tags0(f);
  if (v >= 11) b.i32(2);
  b.b(f, record_bytes);
  if (f) {
    b.uvarint(3);
    b.tag(0, byte_builder{}.i32(3).i64(900).uvarint(0));
    b.tag(1, byte_builder{}.i32(1).i32(4).uvarint(0));
    b.tag(2, byte_builder{}.i64(800).i32(2).uvarint(0));
  }
  // partition 1
  b.i32(1).i16(6).i64(-1).i64(-1);
  if (v >= 5) b.i64(-1);
  b.arr(f, -1);
  if (v >= 11) b.i32(-1);
  b.null_b(f).tags0(f);
  b.tags0(f);  // topic
  if (v >= 16) {
    byte_builder eps;
    eps.arr(true, 2).i32(1).cstr("b1").i32(9092).cstr("rack-a").uvarint(0);
    eps.i32(2).cstr("b2").i32(9093).null_cstr().uvarint(0);
    b.uvarint(1).tag(0, eps);
  } else {
    b.tags0(f);
  }
  return b.out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fetch (key 1), 4-17, flexible from 12.

TEST_CASE("FetchRequest", "[codec]") {
  check_all_versions<fetch_request>(make_fetch_request, fetch_request_wire);

  SECTION("non-ignorable fields at versions that lack them") {
    auto m = make_fetch_request(15);
    m.replica_id = 5;  // v0-14
    check_encode_fails(m, 15, errc::field_not_supported);
    m = make_fetch_request(11);
    m.topics[0].partitions[0].last_fetched_epoch = 4;  // v12+
    check_encode_fails(m, 11, errc::field_not_supported);
    m = make_fetch_request(6);
    m.forgotten_topics_data.emplace_back();  // v7+
    check_encode_fails(m, 6, errc::field_not_supported);
    // ReplicaState is a non-ignorable tagged field (v15+): silently dropping it would change
    // which replica the broker thinks is fetching.
    m = make_fetch_request(14);
    m.replica_state = {7, 3};
    check_encode_fails(m, 14, errc::field_not_supported);
    m = make_fetch_request(11);
    m.replica_state = {7, 3};
    check_encode_fails(m, 11, errc::field_not_supported);
  }
  SECTION("ignorable fields are dropped") {
    // Topic names end at v12, topic ids start at v13; both are ignorable.
    auto m = make_fetch_request(12);
    m.topics[0].topic_id = make_uuid(1);
    check_dropped(m, make_fetch_request(12), 12);
    auto n = make_fetch_request(16);
    n.topics[0].partitions[0].replica_directory_id = make_uuid(2);  // tagged from v17, ignorable
    check_dropped(n, make_fetch_request(16), 16);
    auto c = make_fetch_request(11);
    c.cluster_id = "x";  // tagged from v12, ignorable
    check_dropped(c, make_fetch_request(11), 11);
  }
  SECTION("a null cluster id is simply not written") {
    auto m = make_fetch_request(12);
    m.cluster_id.reset();
    bytes expected = fetch_request_wire(12);
    // Replace the tag section (count 1, tag 0, size 10, "cluster-x" as compact string) by 0.
    const std::size_t tags_len = 1 + 1 + 1 + 10;
    expected.resize(expected.size() - tags_len);
    expected.push_back(0);
    check_wire(m, 12, expected);
  }
  SECTION("tagged fields: unknown tags skipped, bad sizes rejected") {
    const bytes base = fetch_request_wire(15);
    // Top-level tags are the last bytes: 02, tag 0 (size 10), tag 1 (size 13).
    const std::size_t tags_at = base.size() - (1 + 2 + 10 + 2 + 13);
    REQUIRE(base[tags_at] == 0x02);
    bytes body(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(tags_at));
    auto with_tags = [&](const byte_builder& tags) {
      bytes in = body;
      in.insert(in.end(), tags.out.begin(), tags.out.end());
      return in;
    };
    fetch_request back;
    // An unknown tag between the two known ones.
    const bytes mixed = with_tags(byte_builder{}
                                      .uvarint(3)
                                      .tag(0, byte_builder{}.cstr("cluster-x"))
                                      .tag(1, byte_builder{}.i32(7).i64(3).uvarint(0))
                                      .tag(40, byte_builder{}.raw({1, 2, 3})));
    REQUIRE_FALSE(decode(mixed, 15, back));
    CHECK(back == make_fetch_request(15));
    // A tagged struct with its own unknown tag inside.
    const bytes nested = with_tags(byte_builder{}
                                       .uvarint(2)
                                       .tag(0, byte_builder{}.cstr("cluster-x"))
                                       .tag(1, byte_builder{}.i32(7).i64(3).uvarint(1).tag(9, byte_builder{}.i8(1))));
    REQUIRE_FALSE(decode(nested, 15, back));
    CHECK(back == make_fetch_request(15));
    // Declared size larger than the value.
    check_decode_fails<fetch_request>(
        with_tags(byte_builder{}.uvarint(1).tag(0, byte_builder{}.cstr("x").i8(0))), 15, errc::bad_tagged_field);
    // Declared size smaller than the value.
    check_decode_fails<fetch_request>(
        with_tags(byte_builder{}.uvarint(1).uvarint(0).uvarint(1).raw({0x05}).raw({'a', 'b', 'c', 'd'})), 15,
        errc::oversized);
    // Declared size beyond the input.
    check_decode_fails<fetch_request>(with_tags(byte_builder{}.uvarint(1).uvarint(0).uvarint(50).raw({0x01})), 15,
                                      errc::oversized);
    // A tag count larger than the input.
    check_decode_fails<fetch_request>(with_tags(byte_builder{}.uvarint(1000)), 15, errc::oversized);
    // A known tag at a version where it is not defined (ReplicaState at v14) is skipped like an
    // unknown one.
    const bytes v14 = fetch_request_wire(14);
    bytes v14_in(v14.begin(), v14.end() - (1 + 2 + 10));
    byte_builder tags14;
    tags14.uvarint(2).tag(0, byte_builder{}.cstr("cluster-x")).tag(1, byte_builder{}.i32(7).i64(3).uvarint(0));
    v14_in.insert(v14_in.end(), tags14.out.begin(), tags14.out.end());
    REQUIRE_FALSE(decode(v14_in, 14, back));
    CHECK(back == make_fetch_request(14));
  }
}

TEST_CASE("FetchResponse", "[codec]") {
  check_all_versions<fetch_response>(make_fetch_response, fetch_response_wire);

  SECTION("non-ignorable fields at versions that lack them") {
    auto m = make_fetch_response(10);
    m.responses[0].partitions[0].preferred_read_replica = 2;  // v11+
    check_encode_fails(m, 10, errc::field_not_supported);
    m = make_fetch_response(6);
    m.session_id = 5;  // v7+
    check_encode_fails(m, 6, errc::field_not_supported);
    // Tagged, non-ignorable: DivergingEpoch, CurrentLeader, SnapshotId (v12+), NodeEndpoints (v16+).
    m = make_fetch_response(11);
    m.responses[0].partitions[0].diverging_epoch = {3, 900};
    check_encode_fails(m, 11, errc::field_not_supported);
    m = make_fetch_response(11);
    m.responses[0].partitions[0].current_leader = {1, 4};
    check_encode_fails(m, 11, errc::field_not_supported);
    m = make_fetch_response(4);
    m.responses[0].partitions[0].snapshot_id = {800, 2};
    check_encode_fails(m, 4, errc::field_not_supported);
    m = make_fetch_response(15);
    m.node_endpoints = {{1, "b1", 9092, std::nullopt}};
    check_encode_fails(m, 15, errc::field_not_supported);
  }
  SECTION("ignorable fields are dropped") {
    auto m = make_fetch_response(6);
    m.error_code = 70;  // v7+, ignorable
    check_dropped(m, make_fetch_response(6), 6);
  }
  SECTION("records view points into the decoded frame") {
    const bytes in = fetch_response_wire(12);
    fetch_response back;
    REQUIRE_FALSE(decode(in, 12, back));
    const auto& rec = back.responses.at(0).partitions.at(0).records;
    REQUIRE(rec.has_value());
    CHECK(rec->data.data() >= in.data());
    CHECK(rec->data.data() + rec->data.size() <= in.data() + in.size());
    CHECK(bytes(rec->data.begin(), rec->data.end()) == record_bytes);
  }
  SECTION("only non-default tagged fields are written") {
    auto m = make_fetch_response(12);
    auto& p0 = m.responses[0].partitions[0];
    p0.diverging_epoch = {};
    p0.snapshot_id = {};
    bytes out;
    REQUIRE_FALSE(encode(m, 12, out));
    fetch_response back;
    REQUIRE_FALSE(decode(out, 12, back));
    CHECK(back == m);
    CHECK(out.size() == fetch_response_wire(12).size() - (2 + 13) - (2 + 13));
  }
  SECTION("unknown tags inside a partition are skipped") {
    // v12, partition 1's (empty) tag section replaced by an unknown tag.
    auto m = make_fetch_response(12);
    const bool f = true;
    byte_builder b;
    b.i32(2).i16(70).i32(123).arr(f, 1).cstr("orders").arr(f, 1);
    b.i32(1).i16(6).i64(-1).i64(-1).i64(-1).arr(f, -1).i32(-1).null_b(f);
    b.uvarint(1).tag(77, byte_builder{}.raw({0xaa, 0xbb}));
    b.uvarint(0).uvarint(0);
    fetch_response back;
    REQUIRE_FALSE(decode(b.out, 12, back));
    m.responses[0].partitions.erase(m.responses[0].partitions.begin());
    CHECK(back == m);
  }
}

TEST_CASE("hostile counts are rejected before allocation", "[codec]") {
  SECTION("array counts") {
    // Huge counts with a few bytes of input: top-level and nested, compact and not.
    check_decode_fails<fetch_response>(byte_builder{}.i32(0).i32(0x7fffffff).i32(0).out, 4, errc::oversized);
    check_decode_fails<fetch_response>(
        byte_builder{}.i32(0).i16(0).i32(0).uvarint(0xfffffffe).uvarint(0).out, 12, errc::oversized);
    check_decode_fails<metadata_response>(
        byte_builder{}.i32(1).i32(1).str("b").i32(9092).null_str().i32(0).i32(0x10000000).i32(0).out, 1,
        errc::oversized);
    check_decode_fails<consumer_protocol_assignment>(byte_builder{}.i32(1).str("t").i32(0x40000000).i32(0).out, 0,
                                                     errc::oversized);
  }
  SECTION("struct arrays are bounded by the element's minimum size") {
    // A MetadataResponse v1 broker is at least int32 + string + int32 + nullable string = 12
    // bytes; 4 brokers cannot fit in 20 bytes.
    byte_builder b;
    b.i32(4);
    for (int k = 0; k < 5; ++k) b.i32(0);
    check_decode_fails<metadata_response>(b.out, 1, errc::oversized);
    // OffsetCommit partitions at v8 need int32 + int64 + int32 + compact string + tags = 18 bytes.
    byte_builder c;
    c.cstr("g").i32(0).cstr("m").null_cstr().arr(true, 1).cstr("t").arr(true, 3);
    for (int k = 0; k < 40; ++k) c.i8(0);
    check_decode_fails<offset_commit_request>(c.out, 8, errc::oversized);
  }
  SECTION("negative counts and lengths") {
    check_decode_fails<heartbeat_request>(byte_builder{}.i16(-2).out, 0, errc::negative_length);
    check_decode_fails<describe_groups_request>(byte_builder{}.i32(-2).out, 0, errc::negative_length);
    check_decode_fails<sync_group_response>(byte_builder{}.i32(0).i16(0).i32(-7).out, 1, errc::negative_length);
    check_decode_fails<describe_groups_request>(byte_builder{}.i32(-1).out, 0, errc::null_not_allowed);
  }
}
