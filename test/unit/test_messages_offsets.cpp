// Generated message codecs, metadata and offset APIs: golden bytes written by hand from the Kafka
// schemas at every supported version, truncation at every byte, trailing bytes, and
// version-dependent field rules (non-ignorable fields, nullable versions).
#define KGROUP_TEST_MESSAGE_CHECKS
#include "byte_builder.hpp"

#include <limits>

using namespace kgroup::protocol;
using namespace kgroup::test;
using errc = kgroup::protocol::codec_errc;

namespace {
uuid make_uuid(std::uint8_t fill) {
  uuid u;
  for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
  return u;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Metadata (key 3), 1-13, flexible from 9. v13 (KIP-1102) is v12 plus the answer's top-level
// ErrorCode.

TEST_CASE("MetadataRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    metadata_request m;
    metadata_request::metadata_request_topic a, b;
    a.name = "orders";
    b.name = v >= 10 ? std::nullopt : std::optional<std::string>("payments");
    if (v >= 10) {
      a.topic_id = make_uuid(0x10);
      b.topic_id = make_uuid(0x20);
    }
    m.topics = std::vector<metadata_request::metadata_request_topic>{a, b};
    if (v >= 4) m.allow_auto_topic_creation = false;
    if (v >= 8 && v <= 10) m.include_cluster_authorized_operations = true;
    if (v >= 8) m.include_topic_authorized_operations = true;
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 9;
    byte_builder b;
    b.arr(f, 2);
    if (v >= 10) b.uuid(0x10);
    b.s(f, "orders").tags0(f);
    if (v >= 10) b.uuid(0x20).null_s(f);
    else b.s(f, "payments");
    b.tags0(f);
    if (v >= 4) b.boolean(false);
    if (v >= 8 && v <= 10) b.boolean(true);
    if (v >= 8) b.boolean(true);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<metadata_request>(make, wire);
  check_unknown_top_tags<metadata_request>(make, wire);

  SECTION("null topics (all topics) and empty topics") {
    metadata_request all;
    all.topics.reset();
    check_wire(all, 1, byte_builder{}.i32(-1).out);
    check_wire(all, 9, byte_builder{}.uvarint(0).boolean(true).boolean(false).boolean(false).uvarint(0).out);
    metadata_request none;
    check_wire(none, 1, byte_builder{}.i32(0).out);
    check_wire(none, 12, byte_builder{}.uvarint(1).boolean(true).boolean(false).uvarint(0).out);
  }
  SECTION("version rules") {
    auto m = make(3);
    m.allow_auto_topic_creation = false;  // v4+, not ignorable (default true)
    check_encode_fails(m, 3, errc::field_not_supported);
    m = make(11);
    m.include_cluster_authorized_operations = true;  // v8-10 only
    check_encode_fails(m, 11, errc::field_not_supported);
    m = make(7);
    m.include_topic_authorized_operations = true;
    check_encode_fails(m, 7, errc::field_not_supported);
    m = make(9);
    m.topics->at(0).name.reset();  // topic names are nullable from v10
    check_encode_fails(m, 9, errc::null_not_allowed);
    {
      metadata_request lenient;  // a null name before v10 decodes as "" (see reader::read_string)
      REQUIRE_FALSE(decode(byte_builder{}.arr(true, 1).null_cstr().uvarint(0).boolean(true).boolean(false).boolean(false).uvarint(0).out,
                           9, lenient));
      CHECK(lenient.topics->at(0).name == std::optional<std::string>(""));
    }
    // TopicId is ignorable: dropped before v10.
    auto with_id = make(9);
    with_id.topics->at(0).topic_id = make_uuid(1);
    check_dropped(with_id, make(9), 9);
  }
}

TEST_CASE("MetadataResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    metadata_response m;
    if (v >= 3) m.throttle_time_ms = 5;
    m.brokers = {{1, "b1", 9092, "rack-a"}, {2, "b2", 9093, std::nullopt}};
    if (v >= 2) m.cluster_id = "cluster-x";
    m.controller_id = 2;
    metadata_response::metadata_response_topic t1;
    t1.error_code = 0;
    t1.name = "orders";
    if (v >= 10) t1.topic_id = make_uuid(0x30);
    t1.is_internal = true;
    metadata_response::metadata_response_topic::metadata_response_partition p;
    p.error_code = 9;
    p.partition_index = 4;
    p.leader_id = 1;
    if (v >= 7) p.leader_epoch = 7;
    p.replica_nodes = {1, 2};
    p.isr_nodes = {1};
    if (v >= 5) p.offline_replicas = {2};
    t1.partitions = {p};
    if (v >= 8) t1.topic_authorized_operations = 0x0f;
    metadata_response::metadata_response_topic t2;
    t2.error_code = 3;
    t2.name = v >= 12 ? std::nullopt : std::optional<std::string>("gone");
    if (v >= 10) t2.topic_id = make_uuid(0x40);
    if (v >= 8) t2.topic_authorized_operations = 0;
    m.topics = {t1, t2};
    if (v >= 8 && v <= 10) m.cluster_authorized_operations = 0x1f;
    if (v >= 13) m.error_code = 129;  // REBOOTSTRAP_REQUIRED
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 9;
    byte_builder b;
    if (v >= 3) b.i32(5);
    b.arr(f, 2);
    b.i32(1).s(f, "b1").i32(9092).s(f, "rack-a").tags0(f);
    b.i32(2).s(f, "b2").i32(9093).null_s(f).tags0(f);
    if (v >= 2) b.s(f, "cluster-x");
    b.i32(2);
    b.arr(f, 2);
    // topic 1
    b.i16(0).s(f, "orders");
    if (v >= 10) b.uuid(0x30);
    b.boolean(true).arr(f, 1);
    b.i16(9).i32(4).i32(1);
    if (v >= 7) b.i32(7);
    b.arr(f, 2).i32(1).i32(2).arr(f, 1).i32(1);
    if (v >= 5) b.arr(f, 1).i32(2);
    b.tags0(f);
    if (v >= 8) b.i32(0x0f);
    b.tags0(f);
    // topic 2
    b.i16(3);
    if (v >= 12) b.null_s(f);
    else b.s(f, "gone");
    if (v >= 10) b.uuid(0x40);
    b.boolean(false).arr(f, 0);
    if (v >= 8) b.i32(0);
    b.tags0(f);
    if (v >= 8 && v <= 10) b.i32(0x1f);
    if (v >= 13) b.i16(129);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<metadata_response>(make, wire);
  check_unknown_top_tags<metadata_response>(make, wire);

  auto m = make(11);
  m.cluster_authorized_operations = 0x1f;  // v8-10 only, not ignorable
  check_encode_fails(m, 11, errc::field_not_supported);
  m = make(7);
  m.topics[0].topic_authorized_operations = 0;
  check_encode_fails(m, 7, errc::field_not_supported);
  m = make(11);
  m.topics[0].name.reset();  // nullable from v12
  check_encode_fails(m, 11, errc::null_not_allowed);
  // Defaults come back for fields a version lacks.
  metadata_response back;
  REQUIRE_FALSE(decode(wire(1), 1, back));
  CHECK(back.cluster_id == std::nullopt);
  CHECK(back.topics[0].partitions[0].leader_epoch == -1);
  CHECK(back.topics[0].topic_authorized_operations == std::numeric_limits<std::int32_t>::min());
  CHECK(back.cluster_authorized_operations == std::numeric_limits<std::int32_t>::min());
  CHECK(back.error_code == 0);
  // The top-level ErrorCode is ignorable: dropped before v13.
  auto with_error = make(12);
  with_error.error_code = 129;
  check_dropped(with_error, make(12), 12);
}

// ---------------------------------------------------------------------------------------------
// OffsetCommit (key 8), 2-9, flexible from 8.

TEST_CASE("OffsetCommitRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    offset_commit_request m;
    m.group_id = "grp";
    m.generation_id_or_member_epoch = 7;
    m.member_id = "m-1";
    if (v >= 7) m.group_instance_id = "inst-1";
    if (v <= 4) m.retention_time_ms = 86400000;
    offset_commit_request::offset_commit_request_topic t;
    t.name = "orders";
    t.partitions.resize(2);
    t.partitions[0].partition_index = 0;
    t.partitions[0].committed_offset = 100;
    t.partitions[0].committed_metadata = "m";
    t.partitions[1].partition_index = 1;
    t.partitions[1].committed_offset = 200;
    t.partitions[1].committed_metadata = std::nullopt;
    if (v >= 6) {
      t.partitions[0].committed_leader_epoch = 3;
      t.partitions[1].committed_leader_epoch = 4;
    }
    offset_commit_request::offset_commit_request_topic empty;
    empty.name = "payments";
    m.topics = {t, empty};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 8;
    byte_builder b;
    b.s(f, "grp").i32(7).s(f, "m-1");
    if (v >= 7) b.s(f, "inst-1");
    if (v <= 4) b.i64(86400000);
    b.arr(f, 2).s(f, "orders").arr(f, 2);
    b.i32(0).i64(100);
    if (v >= 6) b.i32(3);
    b.s(f, "m").tags0(f);
    b.i32(1).i64(200);
    if (v >= 6) b.i32(4);
    b.null_s(f).tags0(f);
    b.tags0(f);
    b.s(f, "payments").arr(f, 0).tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<offset_commit_request>(make, wire);
  check_unknown_top_tags<offset_commit_request>(make, wire);
  auto m = make(2);
  m.topics[0].partitions[0].commit_timestamp = 5;  // v1 only, not ignorable
  check_encode_fails(m, 2, errc::field_not_supported);
  m = make(6);
  m.group_instance_id = "inst-1";
  check_encode_fails(m, 6, errc::field_not_supported);
  check_dropped(make(4), [&] { auto r = make(4); r.retention_time_ms = -1; return r; }(), 5);
}

TEST_CASE("OffsetCommitResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    offset_commit_response m;
    if (v >= 3) m.throttle_time_ms = 6;
    m.topics = {{"orders", {{0, 0}, {1, 22}}}, {"payments", {}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 8;
    byte_builder b;
    if (v >= 3) b.i32(6);
    b.arr(f, 2).s(f, "orders").arr(f, 2).i32(0).i16(0).tags0(f).i32(1).i16(22).tags0(f).tags0(f);
    b.s(f, "payments").arr(f, 0).tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<offset_commit_response>(make, wire);
  check_unknown_top_tags<offset_commit_response>(make, wire);
}

// ---------------------------------------------------------------------------------------------
// OffsetFetch (key 9), 1-9, flexible from 6; batched groups from 8.

TEST_CASE("OffsetFetchRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    offset_fetch_request m;
    if (v <= 7) {
      m.group_id = "grp";
      m.topics = std::vector<offset_fetch_request::offset_fetch_request_topic>{{"orders", {0, 1}}, {"payments", {}}};
    }
    if (v >= 7) m.require_stable = true;
    if (v >= 8) {
      offset_fetch_request::offset_fetch_request_group g1, g2;
      g1.group_id = "grp";
      if (v >= 9) {
        g1.member_id = "m-1";
        g1.member_epoch = 3;
      }
      g1.topics = std::vector<offset_fetch_request::offset_fetch_request_group::offset_fetch_request_topics>{
          {"orders", {0, 1}}};
      g2.group_id = "grp2";
      g2.topics.reset();  // all topics
      m.groups = {g1, g2};
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    if (v <= 7) {
      b.s(f, "grp").arr(f, 2);
      b.s(f, "orders").arr(f, 2).i32(0).i32(1).tags0(f);
      b.s(f, "payments").arr(f, 0).tags0(f);
    }
    if (v >= 8) {
      b.arr(f, 2).s(f, "grp");
      if (v >= 9) b.s(f, "m-1").i32(3);
      b.arr(f, 1).s(f, "orders").arr(f, 2).i32(0).i32(1).tags0(f).tags0(f);
      b.s(f, "grp2");
      if (v >= 9) b.null_s(f).i32(-1);
      b.arr(f, -1).tags0(f);
    }
    if (v >= 7) b.boolean(true);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<offset_fetch_request>(make, wire);
  check_unknown_top_tags<offset_fetch_request>(make, wire);

  offset_fetch_request all;
  all.group_id = "grp";
  all.topics.reset();
  check_wire(all, 2, byte_builder{}.str("grp").i32(-1).out);
  check_wire(all, 7, byte_builder{}.cstr("grp").uvarint(0).boolean(false).uvarint(0).out);
  check_encode_fails(all, 1, errc::null_not_allowed);  // nullable from v2
  check_decode_fails<offset_fetch_request>(byte_builder{}.str("grp").i32(-1).out, 1, errc::null_not_allowed);
  all.topics.reset();
  check_encode_fails(all, 8, errc::field_not_supported);  // GroupId and Topics end at v7

  auto m = make(8);
  m.group_id = "grp";
  check_encode_fails(m, 8, errc::field_not_supported);
  m = make(7);
  m.groups.emplace_back();
  check_encode_fails(m, 7, errc::field_not_supported);
  m = make(6);
  m.require_stable = true;  // v7+, not ignorable
  check_encode_fails(m, 6, errc::field_not_supported);
  // MemberId / MemberEpoch are ignorable: dropped at v8.
  auto r8 = make(8);
  check_dropped(make(9), r8, 8);
}

TEST_CASE("OffsetFetchResponse", "[codec]") {
  using resp = offset_fetch_response;
  auto make = [](std::int16_t v) {
    resp m;
    if (v >= 3) m.throttle_time_ms = 9;
    if (v <= 7) {
      resp::offset_fetch_response_topic t;
      t.name = "orders";
      t.partitions.resize(2);
      t.partitions[0] = {0, 100, v >= 5 ? 2 : -1, "meta", 0};
      t.partitions[1] = {1, -1, v >= 5 ? 5 : -1, std::nullopt, 3};
      m.topics = {t};
    }
    if (v >= 2 && v <= 7) m.error_code = 16;
    if (v >= 8) {
      resp::offset_fetch_response_group g;
      g.group_id = "grp";
      resp::offset_fetch_response_group::offset_fetch_response_topics t;
      t.name = "orders";
      t.partitions = {{0, 100, 2, "meta", 0}, {1, -1, 5, std::nullopt, 3}};
      g.topics = {t};
      g.error_code = 16;
      resp::offset_fetch_response_group g2;
      g2.group_id = "grp2";
      m.groups = {g, g2};
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    if (v >= 3) b.i32(9);
    auto partitions = [&](bool epoch) {
      b.arr(f, 2).i32(0).i64(100);
      if (epoch) b.i32(2);
      b.s(f, "meta").i16(0).tags0(f);
      b.i32(1).i64(-1);
      if (epoch) b.i32(5);
      b.null_s(f).i16(3).tags0(f);
    };
    if (v <= 7) {
      b.arr(f, 1).s(f, "orders");
      partitions(v >= 5);
      b.tags0(f);
    }
    if (v >= 2 && v <= 7) b.i16(16);
    if (v >= 8) {
      b.arr(f, 2).s(f, "grp").arr(f, 1).s(f, "orders");
      partitions(true);
      b.tags0(f).i16(16).tags0(f);
      b.s(f, "grp2").arr(f, 0).i16(0).tags0(f);
    }
    b.tags0(f);
    return b.out;
  };
  check_all_versions<resp>(make, wire);
  check_unknown_top_tags<resp>(make, wire);
  auto m = make(8);
  m.topics = make(7).topics;
  check_encode_fails(m, 8, errc::field_not_supported);
  m = make(7);
  m.groups = make(8).groups;
  check_encode_fails(m, 7, errc::field_not_supported);
}

// ---------------------------------------------------------------------------------------------
// ListOffsets (key 2), 1-10, flexible from 6.

TEST_CASE("ListOffsetsRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    list_offsets_request m;
    m.replica_id = -1;
    if (v >= 2) m.isolation_level = 1;
    list_offsets_request::list_offsets_topic t;
    t.name = "orders";
    t.partitions.resize(2);
    t.partitions[0].partition_index = 0;
    t.partitions[0].timestamp = -1;
    t.partitions[1].partition_index = 1;
    t.partitions[1].timestamp = 1700000000000;
    if (v >= 4) {
      t.partitions[0].current_leader_epoch = 5;
      t.partitions[1].current_leader_epoch = 6;
    }
    m.topics = {t};
    if (v >= 10) m.timeout_ms = 30000;
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    b.i32(-1);
    if (v >= 2) b.i8(1);
    b.arr(f, 1).s(f, "orders").arr(f, 2);
    b.i32(0);
    if (v >= 4) b.i32(5);
    b.i64(-1).tags0(f);
    b.i32(1);
    if (v >= 4) b.i32(6);
    b.i64(1700000000000).tags0(f);
    b.tags0(f);
    if (v >= 10) b.i32(30000);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<list_offsets_request>(make, wire);
  check_unknown_top_tags<list_offsets_request>(make, wire);
  auto m = make(1);
  m.isolation_level = 1;  // v2+, not ignorable
  check_encode_fails(m, 1, errc::field_not_supported);
  m = make(1);
  m.topics[0].partitions[0].max_num_offsets = 5;  // v0 only
  check_encode_fails(m, 1, errc::field_not_supported);
  check_dropped(make(10), [&] { auto r = make(10); r.timeout_ms = 0; return r; }(), 9);
}

TEST_CASE("ListOffsetsResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    list_offsets_response m;
    if (v >= 2) m.throttle_time_ms = 11;
    list_offsets_response::list_offsets_topic_response t;
    t.name = "orders";
    t.partitions.resize(2);
    t.partitions[0].partition_index = 0;
    t.partitions[0].timestamp = 1700000000000;
    t.partitions[0].offset = 42;
    t.partitions[1].partition_index = 1;
    t.partitions[1].error_code = 6;
    t.partitions[1].timestamp = 0;
    t.partitions[1].offset = 0;
    if (v >= 4) {
      t.partitions[0].leader_epoch = 3;
      t.partitions[1].leader_epoch = 0;
    }
    m.topics = {t};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    if (v >= 2) b.i32(11);
    b.arr(f, 1).s(f, "orders").arr(f, 2);
    b.i32(0).i16(0).i64(1700000000000).i64(42);
    if (v >= 4) b.i32(3);
    b.tags0(f);
    b.i32(1).i16(6).i64(0).i64(0);
    if (v >= 4) b.i32(0);
    b.tags0(f);
    b.tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<list_offsets_response>(make, wire);
  check_unknown_top_tags<list_offsets_response>(make, wire);
  auto m = make(1);
  m.topics[0].partitions[0].old_style_offsets = {1, 2};  // v0 only
  check_encode_fails(m, 1, errc::field_not_supported);
  m = make(3);
  m.topics[0].partitions[0].leader_epoch = 3;  // v4+, not ignorable
  check_encode_fails(m, 3, errc::field_not_supported);
}

// ---------------------------------------------------------------------------------------------
// OffsetForLeaderEpoch (key 23), 2-4, flexible from 4.

TEST_CASE("OffsetForLeaderEpochRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    offset_for_leader_epoch_request m;
    if (v >= 3) m.replica_id = -1;
    m.topics = {{"orders", {{0, 5, 4}, {1, 6, 5}}}, {"payments", {}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    if (v >= 3) b.i32(-1);
    b.arr(f, 2).s(f, "orders").arr(f, 2);
    b.i32(0).i32(5).i32(4).tags0(f).i32(1).i32(6).i32(5).tags0(f).tags0(f);
    b.s(f, "payments").arr(f, 0).tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<offset_for_leader_epoch_request>(make, wire);
  check_unknown_top_tags<offset_for_leader_epoch_request>(make, wire);
  offset_for_leader_epoch_request def;
  CHECK(def.replica_id == -2);  // schema default
  check_dropped(make(3), make(2), 2);
}

TEST_CASE("OffsetForLeaderEpochResponse", "[codec]") {
  auto make = [](std::int16_t) {
    offset_for_leader_epoch_response m;
    m.throttle_time_ms = 12;
    m.topics = {{"orders", {{0, 0, 4, 1000}, {75, 1, 2, -1}}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    b.i32(12).arr(f, 1).s(f, "orders").arr(f, 2);
    b.i16(0).i32(0).i32(4).i64(1000).tags0(f);
    b.i16(75).i32(1).i32(2).i64(-1).tags0(f);
    b.tags0(f).tags0(f);
    return b.out;
  };
  check_all_versions<offset_for_leader_epoch_response>(make, wire);
  check_unknown_top_tags<offset_for_leader_epoch_response>(make, wire);
}

// ---------------------------------------------------------------------------------------------
// Schema defaults: what a default-constructed struct holds, and what a decoder fills in for
// fields a version lacks (README: ints 0, strings "", arrays empty, records null, unless the
// schema says otherwise; "null" only where the field is nullable).

TEST_CASE("schema defaults", "[codec]") {
  SECTION("custom defaults in structs") {
    const fetch_request f;
    CHECK(f.replica_id == -1);
    CHECK(f.max_bytes == 0x7fffffff);
    CHECK(f.session_id == 0);
    CHECK(f.session_epoch == -1);
    CHECK(f.cluster_id == std::nullopt);
    CHECK(f.replica_state.replica_id == -1);
    CHECK(f.replica_state.replica_epoch == -1);
    CHECK(f.rack_id.empty());
    const fetch_request::fetch_topic::fetch_partition fp;
    CHECK(fp.current_leader_epoch == -1);
    CHECK(fp.last_fetched_epoch == -1);
    CHECK(fp.log_start_offset == -1);
    CHECK(fp.replica_directory_id.is_zero());
    const fetch_response::fetchable_topic_response::partition_data pd;
    CHECK(pd.last_stable_offset == -1);
    CHECK(pd.preferred_read_replica == -1);
    REQUIRE(pd.aborted_transactions.has_value());  // nullable array without a default: empty, not null
    CHECK(pd.aborted_transactions->empty());
    CHECK_FALSE(pd.records.has_value());                 // records default to null
    CHECK(pd.diverging_epoch.epoch == -1);
    CHECK(pd.snapshot_id.end_offset == -1);
    CHECK(metadata_request{}.allow_auto_topic_creation);
    CHECK(metadata_request{}.topics.has_value());
    CHECK(metadata_response::metadata_response_topic{}.topic_authorized_operations == INT32_MIN);
    CHECK(metadata_response{}.controller_id == -1);
    CHECK(metadata_response{}.cluster_id == std::nullopt);
    CHECK(join_group_request{}.rebalance_timeout_ms == -1);
    CHECK(join_group_request{}.group_instance_id == std::nullopt);
    CHECK(join_group_response{}.generation_id == -1);
    CHECK(join_group_response{}.protocol_type == std::nullopt);
    CHECK(join_group_response{}.protocol_name == std::optional<std::string>(""));  // nullable, no null default
    CHECK(leave_group_response::member_response{}.group_instance_id == std::optional<std::string>(""));
    CHECK(find_coordinator_response{}.error_message == std::optional<std::string>(""));
    CHECK(offset_commit_request{}.generation_id_or_member_epoch == -1);
    CHECK(offset_commit_request{}.retention_time_ms == -1);
    const offset_commit_request::offset_commit_request_topic::offset_commit_request_partition cp;
    CHECK(cp.committed_leader_epoch == -1);
    CHECK(cp.commit_timestamp == -1);
    CHECK(cp.committed_metadata == std::optional<std::string>(""));
    const list_offsets_request::list_offsets_topic::list_offsets_partition lp;
    CHECK(lp.current_leader_epoch == -1);
    CHECK(lp.max_num_offsets == 1);
    CHECK(list_offsets_response::list_offsets_topic_response::list_offsets_partition_response{}.offset == -1);
    CHECK(offset_for_leader_epoch_request{}.replica_id == -2);
    CHECK(api_versions_response{}.finalized_features_epoch == -1);
    CHECK(consumer_protocol_subscription{}.generation_id == -1);
    CHECK(consumer_protocol_subscription{}.user_data == std::nullopt);
    CHECK(describe_groups_response::described_group{}.authorized_operations == INT32_MIN);
    CHECK(offset_fetch_request{}.topics.has_value());
    CHECK(offset_fetch_request::offset_fetch_request_group{}.member_epoch == -1);
  }
  SECTION("default structs encode to the schema defaults") {
    check_wire(fetch_request{}, 4,
               byte_builder{}.i32(-1).i32(0).i32(0).i32(0x7fffffff).i8(0).i32(0).out);
    check_wire(metadata_request{}, 4, byte_builder{}.i32(0).boolean(true).out);
    check_wire(join_group_request{}, 1,
               byte_builder{}.str("").i32(0).i32(-1).str("").str("").i32(0).out);
    check_wire(join_group_response{}, 7,
               byte_builder{}.i32(0).i16(0).i32(-1).null_cstr().cstr("").cstr("").cstr("").arr(true, 0)
                   .uvarint(0).out);
    check_wire(offset_for_leader_epoch_request{}, 3, byte_builder{}.i32(-2).i32(0).out);
    check_wire(consumer_protocol_subscription{}, 3,
               byte_builder{}.i32(0).i32(-1).i32(0).i32(-1).null_str().out);
  }
}

// ---------------------------------------------------------------------------------------------
// Issue 31, item 7: an answer naming what its request did not ask for is dropped whole
// (protocol/answer_check.hpp, checked by the connection for every API).

#include "protocol/answer_check.hpp"

TEST_CASE("answer check: entries not asked for, or named twice, are found for every API that lists them",
          "[codec][answer_check]") {
  list_offsets_request lo;
  lo.topics = {{"t", {{0, -1, -2, 1}, {1, -1, -2, 1}}}};
  list_offsets_response lr;
  lr.topics = {{"t", {{0, 0, {}, -1, 5, 0}, {1, 0, {}, -1, 7, 0}}}};
  CHECK(unasked(lo, lr).empty());
  lr.topics[0].partitions.pop_back();
  CHECK(unasked(lo, lr).empty());  // fewer is an answer the caller asks again for
  lr.topics[0].partitions.push_back({-1, 0, {}, -1, 123456789, 0});  // librdkafka 2.0.2's misread second partition
  CHECK(unasked(lo, lr) == "partition t--1 (not asked, or named twice)");
  lr.topics[0].partitions.back().partition_index = 0;  // a duplicate
  CHECK_FALSE(unasked(lo, lr).empty());
  lr.topics = {{"u", {{0, 0, {}, -1, 5, 0}}}};
  CHECK_FALSE(unasked(lo, lr).empty());

  offset_for_leader_epoch_request oe;
  oe.topics = {{"t", {{3, 1, 1}}}};
  offset_for_leader_epoch_response oer;
  oer.topics = {{"t", {{0, 3, 1, 10}}}};
  CHECK(unasked(oe, oer).empty());
  oer.topics[0].partitions[0].partition = 4;
  CHECK_FALSE(unasked(oe, oer).empty());

  offset_commit_request oc;
  oc.topics = {{"t", {{0, 10, -1, -1, ""}}}};
  offset_commit_response ocr;
  ocr.topics = {{"t", {{0, 0}}}};
  CHECK(unasked(oc, ocr).empty());
  ocr.topics[0].partitions.push_back({2, 0});
  CHECK_FALSE(unasked(oc, ocr).empty());

  offset_fetch_request of;
  of.topics = std::vector<offset_fetch_request::offset_fetch_request_topic>{{"t", {0}}};
  offset_fetch_response ofr;
  ofr.topics = {{"t", {{0, 5, -1, "", 0}}}};
  CHECK(unasked(of, ofr).empty());
  ofr.topics[0].partitions[0].partition_index = 9;
  CHECK_FALSE(unasked(of, ofr).empty());
  offset_fetch_request of8;
  of8.topics->clear();
  of8.groups = {{"g", std::nullopt, -1, std::vector<offset_fetch_request::offset_fetch_request_group::offset_fetch_request_topics>{{"t", {0}}}}};
  offset_fetch_response of8r;
  of8r.groups = {{"g", {{"t", {{0, 5, -1, "", 0}}}}, 0}};
  CHECK(unasked(of8, of8r).empty());
  of8r.groups[0].group_id = "other";
  CHECK(unasked(of8, of8r) == "group other (not asked, or named twice)");
  of8r.groups[0].group_id = "g";
  of8r.groups[0].topics[0].partitions[0].partition_index = 1;
  CHECK_FALSE(unasked(of8, of8r).empty());
  offset_fetch_request all;
  all.topics = std::nullopt;  // every committed offset of the group
  CHECK(unasked(all, ofr).empty());

  find_coordinator_request fc;
  fc.coordinator_keys = {"g"};
  find_coordinator_response fcr;
  fcr.coordinators.emplace_back().key = "g";
  CHECK(unasked(fc, fcr).empty());
  fcr.coordinators.emplace_back().key = "g";
  CHECK_FALSE(unasked(fc, fcr).empty());

  describe_groups_request dg;
  dg.groups = {"g"};
  describe_groups_response dgr;
  dgr.groups.emplace_back().group_id = "h";
  CHECK_FALSE(unasked(dg, dgr).empty());

  consumer_group_describe_request cg;
  cg.group_ids = {"g"};
  consumer_group_describe_response cgr;
  cgr.groups.emplace_back().group_id = "g";
  CHECK(unasked(cg, cgr).empty());

  // APIs whose answers list nothing of the request's always match.
  CHECK(unasked(heartbeat_request{}, heartbeat_response{}).empty());
}
