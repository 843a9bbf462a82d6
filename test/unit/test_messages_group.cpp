// Generated message codecs, group-membership APIs: golden bytes written by hand from the Kafka
// schemas (field order, version ranges, compact encodings, tagged sections) at every supported
// version, truncation at every byte, trailing bytes, and version-dependent field rules.
// Plus whole frames through encode_request / decode_response.
#define KGROUP_TEST_MESSAGE_CHECKS
#include "byte_builder.hpp"

using namespace kgroup::protocol;
using namespace kgroup::test;
using errc = kgroup::protocol::codec_errc;

// ---------------------------------------------------------------------------------------------
// ApiVersions (key 18), 0-4, flexible from 3. Response tags 0-3 from v3.

TEST_CASE("ApiVersionsRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    api_versions_request m;
    if (v >= 3) {
      m.client_software_name = "kgroup";
      m.client_software_version = "0.1.0";
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 3;
    byte_builder b;
    if (v >= 3) b.cstr("kgroup").cstr("0.1.0");
    b.tags0(f);
    return b.out;
  };
  check_all_versions<api_versions_request>(make, wire);
  check_unknown_top_tags<api_versions_request>(make, wire);
  // Literal: v3 is two compact strings and an empty tag section.
  CHECK(wire(3) == bytes{0x07, 'k', 'g', 'r', 'o', 'u', 'p', 0x06, '0', '.', '1', '.', '0', 0x00});
  CHECK(wire(0).empty());
  // Both fields are ignorable: dropped before v3.
  check_dropped(make(4), make(2), 2);
  check_dropped(make(4), make(0), 0);
}

TEST_CASE("ApiVersionsResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    api_versions_response m;
    m.error_code = 35;
    m.api_keys = {{1, 4, 17}, {18, 0, 4}};
    if (v >= 1) m.throttle_time_ms = 100;
    if (v >= 3) {
      m.supported_features = {{"metadata.version", 1, 20}};
      m.finalized_features_epoch = 42;
      m.finalized_features = {{"metadata.version", 20, 1}};
      m.zk_migration_ready = true;
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 3;
    byte_builder b;
    b.i16(35).arr(f, 2);
    b.i16(1).i16(4).i16(17).tags0(f);
    b.i16(18).i16(0).i16(4).tags0(f);
    if (v >= 1) b.i32(100);
    if (f) {
      b.uvarint(4);
      b.tag(0, byte_builder{}.arr(true, 1).cstr("metadata.version").i16(1).i16(20).uvarint(0));
      b.tag(1, byte_builder{}.i64(42));
      b.tag(2, byte_builder{}.arr(true, 1).cstr("metadata.version").i16(20).i16(1).uvarint(0));
      b.tag(3, byte_builder{}.i8(1));
    }
    return b.out;
  };
  check_all_versions<api_versions_response>(make, wire);
  // All tagged fields are ignorable: dropped before v3, and only non-default ones are written.
  check_dropped(make(3), make(2), 2);
  api_versions_response one = make(0);
  one.zk_migration_ready = true;
  check_wire(one, 3,
             byte_builder{}.i16(35).arr(true, 2).i16(1).i16(4).i16(17).uvarint(0).i16(18).i16(0).i16(4).uvarint(0)
                 .i32(0).uvarint(1).tag(3, byte_builder{}.i8(1)).out);
  SECTION("unknown tags after known ones are skipped") {
    byte_builder ok;
    ok.i16(0).arr(true, 0).i32(0).uvarint(2);
    ok.tag(1, byte_builder{}.i64(7));
    ok.tag(9, byte_builder{}.raw({0x01, 0x02, 0x03}));
    api_versions_response back;
    REQUIRE_FALSE(decode(ok.out, 3, back));
    CHECK(back.finalized_features_epoch == 7);
  }
  SECTION("a known tag whose size disagrees with its content") {
    byte_builder b;
    b.i16(0).arr(true, 0).i32(0).uvarint(1).tag(1, byte_builder{}.i64(7).i8(0));
    check_decode_fails<api_versions_response>(b.out, 3, errc::bad_tagged_field);
    byte_builder c;
    c.i16(0).arr(true, 0).i32(0).uvarint(1).tag(1, byte_builder{}.i32(7));
    check_decode_fails<api_versions_response>(c.out, 3, errc::truncated);
  }
}

// ---------------------------------------------------------------------------------------------
// FindCoordinator (key 10), 0-6, flexible from 3; batched keys from 4.

TEST_CASE("FindCoordinatorRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    find_coordinator_request m;
    if (v <= 3) m.key = "group-a";
    if (v >= 1) m.key_type = 1;
    if (v >= 4) m.coordinator_keys = {"g1", "g2"};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 3;
    byte_builder b;
    if (v <= 3) b.s(f, "group-a");
    if (v >= 1) b.i8(1);
    if (v >= 4) b.arr(f, 2).cstr("g1").cstr("g2");
    b.tags0(f);
    return b.out;
  };
  check_all_versions<find_coordinator_request>(make, wire);
  check_unknown_top_tags<find_coordinator_request>(make, wire);
  CHECK(wire(0) == bytes{0x00, 0x07, 'g', 'r', 'o', 'u', 'p', '-', 'a'});
  // Nothing here is ignorable.
  auto m = make(0);
  m.key_type = 1;
  check_encode_fails(m, 0, errc::field_not_supported);
  m = make(4);
  m.key = "group-a";
  check_encode_fails(m, 4, errc::field_not_supported);
  m = make(3);
  m.coordinator_keys = {"g1"};
  check_encode_fails(m, 3, errc::field_not_supported);
}

TEST_CASE("FindCoordinatorResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    find_coordinator_response m;
    if (v >= 1) m.throttle_time_ms = 10;
    if (v <= 3) {
      m.error_code = 15;
      if (v >= 1) m.error_message = v == 3 ? std::nullopt : std::optional<std::string>("not available");
      m.node_id = 3;
      m.host = "broker3";
      m.port = 9094;
    }
    if (v >= 4) {
      m.coordinators = {{"g1", 1, "h1", 9092, 0, std::nullopt}, {"g2", -1, "", -1, 15, "not available"}};
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 3;
    byte_builder b;
    if (v >= 1) b.i32(10);
    if (v <= 3) {
      b.i16(15);
      if (v == 3) b.null_s(f);
      else if (v >= 1) b.s(f, "not available");
      b.i32(3).s(f, "broker3").i32(9094);
    }
    if (v >= 4) {
      b.arr(f, 2);
      b.cstr("g1").i32(1).cstr("h1").i32(9092).i16(0).null_cstr().uvarint(0);
      b.cstr("g2").i32(-1).cstr("").i32(-1).i16(15).cstr("not available").uvarint(0);
    }
    b.tags0(f);
    return b.out;
  };
  check_all_versions<find_coordinator_response>(make, wire);
  check_unknown_top_tags<find_coordinator_response>(make, wire);
  auto m = make(4);
  m.node_id = 3;  // v0-3 only, not ignorable
  check_encode_fails(m, 4, errc::field_not_supported);
  m = make(3);
  m.coordinators.emplace_back();
  check_encode_fails(m, 3, errc::field_not_supported);
  // ErrorMessage and ThrottleTimeMs are ignorable: dropped at v0.
  check_dropped(make(1), make(0), 0);
  // A null Host (never nullable) reads as "": the reader's deliberate leniency for brokers that
  // send one with an error (librdkafka's mock cluster).
  find_coordinator_response back;
  REQUIRE_FALSE(decode(byte_builder{}.i16(15).i32(-1).null_str().i32(-1).out, 0, back));
  CHECK(back.error_code == 15);
  CHECK(back.host.empty());
}

// ---------------------------------------------------------------------------------------------
// JoinGroup (key 11), 0-9, flexible from 6.

TEST_CASE("JoinGroupRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    join_group_request m;
    m.group_id = "grp";
    m.session_timeout_ms = 45000;
    if (v >= 1) m.rebalance_timeout_ms = 300000;
    m.member_id = "m-1";
    if (v >= 5 && v != 6) m.group_instance_id = "inst-1";
    m.protocol_type = "consumer";
    m.protocols = {{"range", {0, 1, 2}}, {"cooperative-sticky", {}}};
    if (v >= 8) m.reason = "rejoin";
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    b.s(f, "grp").i32(45000);
    if (v >= 1) b.i32(300000);
    b.s(f, "m-1");
    if (v >= 5) {
      if (v == 6) b.null_s(f);
      else b.s(f, "inst-1");
    }
    b.s(f, "consumer").arr(f, 2);
    b.s(f, "range").b(f, {0, 1, 2}).tags0(f);
    b.s(f, "cooperative-sticky").b(f, {}).tags0(f);
    if (v >= 8) b.s(f, "rejoin");
    b.tags0(f);
    return b.out;
  };
  check_all_versions<join_group_request>(make, wire);
  check_unknown_top_tags<join_group_request>(make, wire);
  auto m = make(4);
  m.group_instance_id = "inst-1";  // static membership needs v5; not ignorable
  check_encode_fails(m, 4, errc::field_not_supported);
  check_dropped(make(8), make(7), 7);  // Reason is ignorable
  check_dropped(make(1), make(0), 0);  // RebalanceTimeoutMs is ignorable
  SECTION("unknown tags inside an array element are skipped") {
    byte_builder b;
    b.cstr("grp").i32(45000).i32(300000).cstr("m-1").null_cstr().cstr("consumer").arr(true, 1);
    b.cstr("range").cbyts({7}).uvarint(1).tag(5, byte_builder{}.raw({1, 2}));
    b.uvarint(0);
    join_group_request back;
    REQUIRE_FALSE(decode(b.out, 6, back));
    REQUIRE(back.protocols.size() == 1);
    CHECK(back.protocols[0].metadata == bytes{7});
    CHECK(back.group_instance_id == std::nullopt);
  }
}

TEST_CASE("JoinGroupResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    join_group_response m;
    if (v >= 2) m.throttle_time_ms = 20;
    m.error_code = 79;
    m.generation_id = 5;
    if (v >= 7) m.protocol_type = "consumer";
    m.protocol_name = v == 8 ? std::nullopt : std::optional<std::string>("range");
    m.leader = "m-1";
    if (v >= 9) m.skip_assignment = true;
    m.member_id = "m-2";
    m.members = {{"m-1", v >= 5 ? std::optional<std::string>("inst-1") : std::nullopt, {1, 2}},
                 {"m-2", std::nullopt, {}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 6;
    byte_builder b;
    if (v >= 2) b.i32(20);
    b.i16(79).i32(5);
    if (v >= 7) b.s(f, "consumer");
    if (v == 8) b.null_s(f);
    else b.s(f, "range");
    b.s(f, "m-1");
    if (v >= 9) b.boolean(true);
    b.s(f, "m-2").arr(f, 2);
    b.s(f, "m-1");
    if (v >= 5) b.s(f, "inst-1");
    b.b(f, {1, 2}).tags0(f);
    b.s(f, "m-2");
    if (v >= 5) b.null_s(f);
    b.b(f, {}).tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<join_group_response>(make, wire);
  check_unknown_top_tags<join_group_response>(make, wire);
  auto m = make(8);
  m.skip_assignment = true;  // v9+, not ignorable
  check_encode_fails(m, 8, errc::field_not_supported);
  m = make(6);
  m.protocol_name = std::nullopt;  // nullable only from v7
  check_encode_fails(m, 6, errc::null_not_allowed);
  // On the wire, a null ProtocolName at v6 decodes leniently as "" (librdkafka's mock sends
  // null strings in error responses; see reader::read_string).
  byte_builder b;
  b.i32(20).i16(79).i32(5).null_cstr().cstr("m-1").cstr("m-2").arr(true, 0).uvarint(0);
  {
    join_group_response lenient;
    REQUIRE_FALSE(decode(b.out, 6, lenient));
    CHECK(lenient.protocol_name == std::optional<std::string>(""));
    CHECK(lenient.error_code == 79);
  }
  byte_builder b0;
  b0.i16(0).i32(1).str("range").str("m-1").str("m-2").i32(0);
  join_group_response back;
  REQUIRE_FALSE(decode(b0.out, 0, back));
  b0.out[6] = 0xff;  // ProtocolName length -1 at v0: the 5 name bytes are now trailing
  b0.out[7] = 0xff;
  {
    join_group_response shifted;
    CHECK(decode(b0.out, 0, shifted));  // the rest no longer lines up: an error, not a crash
  }
}

// ---------------------------------------------------------------------------------------------
// SyncGroup (key 14), 0-5, flexible from 4.

TEST_CASE("SyncGroupRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    sync_group_request m;
    m.group_id = "grp";
    m.generation_id = 5;
    m.member_id = "m-1";
    if (v >= 3 && v != 4) m.group_instance_id = "inst-1";
    if (v >= 5) {
      m.protocol_type = "consumer";
      m.protocol_name = "range";
    }
    m.assignments = {{"m-1", {0, 0, 1}}, {"m-2", {}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    b.s(f, "grp").i32(5).s(f, "m-1");
    if (v >= 3) {
      if (v == 4) b.null_s(f);
      else b.s(f, "inst-1");
    }
    if (v >= 5) b.s(f, "consumer").s(f, "range");
    b.arr(f, 2).s(f, "m-1").b(f, {0, 0, 1}).tags0(f).s(f, "m-2").b(f, {}).tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<sync_group_request>(make, wire);
  check_unknown_top_tags<sync_group_request>(make, wire);
  auto m = make(2);
  m.group_instance_id = "inst-1";
  check_encode_fails(m, 2, errc::field_not_supported);
  check_dropped(make(5), [&] { auto r = make(5); r.protocol_type.reset(); r.protocol_name.reset(); return r; }(), 4);
}

TEST_CASE("SyncGroupResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    sync_group_response m;
    if (v >= 1) m.throttle_time_ms = 30;
    m.error_code = 27;
    if (v >= 5) {
      m.protocol_type = "consumer";
      m.protocol_name = "range";
    }
    m.assignment = {0, 1, 0, 0};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    if (v >= 1) b.i32(30);
    b.i16(27);
    if (v >= 5) b.s(f, "consumer").s(f, "range");
    b.b(f, {0, 1, 0, 0}).tags0(f);
    return b.out;
  };
  check_all_versions<sync_group_response>(make, wire);
  check_unknown_top_tags<sync_group_response>(make, wire);
  sync_group_response nulls = make(5);
  nulls.protocol_type.reset();
  nulls.protocol_name.reset();
  check_wire(nulls, 5, byte_builder{}.i32(30).i16(27).null_cstr().null_cstr().cbyts({0, 1, 0, 0}).uvarint(0).out);
}

// ---------------------------------------------------------------------------------------------
// Heartbeat (key 12), 0-4, flexible from 4.

TEST_CASE("HeartbeatRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    heartbeat_request m;
    m.group_id = "grp";
    m.generation_id = 7;
    m.member_id = "m-1";
    if (v >= 3) m.group_instance_id = "inst-1";
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    b.s(f, "grp").i32(7).s(f, "m-1");
    if (v >= 3) b.s(f, "inst-1");
    b.tags0(f);
    return b.out;
  };
  check_all_versions<heartbeat_request>(make, wire);
  check_unknown_top_tags<heartbeat_request>(make, wire);
  // Literal bytes for the edges, as a check on the builder-based expectations.
  CHECK(wire(0) == bytes{0x00, 0x03, 'g', 'r', 'p', 0x00, 0x00, 0x00, 0x07, 0x00, 0x03, 'm', '-', '1'});
  CHECK(wire(4) == bytes{0x04, 'g', 'r', 'p', 0x00, 0x00, 0x00, 0x07, 0x04, 'm', '-', '1',
                         0x07, 'i', 'n', 's', 't', '-', '1', 0x00});
  auto m = make(2);
  m.group_instance_id = "inst-1";
  check_encode_fails(m, 2, errc::field_not_supported);
  heartbeat_request null_instance = make(4);
  null_instance.group_instance_id.reset();
  check_wire(null_instance, 4, byte_builder{}.cstr("grp").i32(7).cstr("m-1").null_cstr().uvarint(0).out);
}

TEST_CASE("HeartbeatResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    heartbeat_response m;
    if (v >= 1) m.throttle_time_ms = 40;
    m.error_code = 27;
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    if (v >= 1) b.i32(40);
    b.i16(27).tags0(v >= 4);
    return b.out;
  };
  check_all_versions<heartbeat_response>(make, wire);
  check_unknown_top_tags<heartbeat_response>(make, wire);
  check_dropped(make(1), make(0), 0);
}

// ---------------------------------------------------------------------------------------------
// LeaveGroup (key 13), 0-5, flexible from 4; batched members from 3.

TEST_CASE("LeaveGroupRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    leave_group_request m;
    m.group_id = "grp";
    if (v <= 2) m.member_id = "m-1";
    if (v >= 3) {
      m.members = {{"m-1", "inst-1", v >= 5 ? std::optional<std::string>("bye") : std::nullopt},
                   {"m-2", std::nullopt, std::nullopt}};
    }
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    b.s(f, "grp");
    if (v <= 2) b.s(f, "m-1");
    if (v >= 3) {
      b.arr(f, 2).s(f, "m-1").s(f, "inst-1");
      if (v >= 5) b.s(f, "bye");
      b.tags0(f).s(f, "m-2").null_s(f);
      if (v >= 5) b.null_s(f);
      b.tags0(f);
    }
    b.tags0(f);
    return b.out;
  };
  check_all_versions<leave_group_request>(make, wire);
  check_unknown_top_tags<leave_group_request>(make, wire);
  auto m = make(3);
  m.member_id = "m-1";
  check_encode_fails(m, 3, errc::field_not_supported);
  m = make(2);
  m.members = {{"m-1", std::nullopt, std::nullopt}};
  check_encode_fails(m, 2, errc::field_not_supported);
  check_dropped(make(5), make(4), 4);  // Reason is ignorable
}

TEST_CASE("LeaveGroupResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    leave_group_response m;
    if (v >= 1) m.throttle_time_ms = 1;
    m.error_code = 25;
    if (v >= 3) m.members = {{"m-1", "inst-1", 0}, {"m-2", std::nullopt, 25}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 4;
    byte_builder b;
    if (v >= 1) b.i32(1);
    b.i16(25);
    if (v >= 3) {
      b.arr(f, 2).s(f, "m-1").s(f, "inst-1").i16(0).tags0(f);
      b.s(f, "m-2").null_s(f).i16(25).tags0(f);
    }
    b.tags0(f);
    return b.out;
  };
  check_all_versions<leave_group_response>(make, wire);
  check_unknown_top_tags<leave_group_response>(make, wire);
  auto m = make(2);
  m.members = {{"m-1", "", 0}};
  check_encode_fails(m, 2, errc::field_not_supported);
}

// ---------------------------------------------------------------------------------------------
// DescribeGroups (key 15), 0-5, flexible from 5.

TEST_CASE("DescribeGroupsRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    describe_groups_request m;
    m.groups = {"grp", "grp2"};
    if (v >= 3) m.include_authorized_operations = true;
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 5;
    byte_builder b;
    b.arr(f, 2).s(f, "grp").s(f, "grp2");
    if (v >= 3) b.boolean(true);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<describe_groups_request>(make, wire);
  check_unknown_top_tags<describe_groups_request>(make, wire);
  auto m = make(2);
  m.include_authorized_operations = true;
  check_encode_fails(m, 2, errc::field_not_supported);
}

TEST_CASE("DescribeGroupsResponse", "[codec]") {
  auto make = [](std::int16_t v) {
    describe_groups_response m;
    if (v >= 1) m.throttle_time_ms = 3;
    describe_groups_response::described_group g;
    g.error_code = 0;
    g.group_id = "grp";
    g.group_state = "Stable";
    g.protocol_type = "consumer";
    g.protocol_data = "range";
    g.members = {{"m-1", v >= 4 ? std::optional<std::string>("inst-1") : std::nullopt, "cli", "/10.0.0.1",
                  {0, 1}, {0, 2}},
                 {"m-2", std::nullopt, "cli2", "/10.0.0.2", {}, {}}};
    if (v >= 3) g.authorized_operations = 0x0f;
    describe_groups_response::described_group dead;
    dead.error_code = 16;
    dead.group_id = "gone";
    dead.group_state = "Dead";
    if (v >= 3) dead.authorized_operations = 0;
    m.groups = {g, dead};
    return m;
  };
  auto wire = [](std::int16_t v) {
    const bool f = v >= 5;
    byte_builder b;
    if (v >= 1) b.i32(3);
    b.arr(f, 2);
    b.i16(0).s(f, "grp").s(f, "Stable").s(f, "consumer").s(f, "range").arr(f, 2);
    b.s(f, "m-1");
    if (v >= 4) b.s(f, "inst-1");
    b.s(f, "cli").s(f, "/10.0.0.1").b(f, {0, 1}).b(f, {0, 2}).tags0(f);
    b.s(f, "m-2");
    if (v >= 4) b.null_s(f);
    b.s(f, "cli2").s(f, "/10.0.0.2").b(f, {}).b(f, {}).tags0(f);
    if (v >= 3) b.i32(0x0f);
    b.tags0(f);
    b.i16(16).s(f, "gone").s(f, "Dead").s(f, "").s(f, "").arr(f, 0);
    if (v >= 3) b.i32(0);
    b.tags0(f);
    b.tags0(f);
    return b.out;
  };
  check_all_versions<describe_groups_response>(make, wire);
  check_unknown_top_tags<describe_groups_response>(make, wire);
  auto m = make(2);
  m.groups[0].authorized_operations = 0;  // v3+, not ignorable
  check_encode_fails(m, 2, errc::field_not_supported);
}

// ---------------------------------------------------------------------------------------------
// Consumer protocol (embedded in JoinGroup/SyncGroup bytes), 0-3, never flexible.

TEST_CASE("ConsumerProtocolSubscription", "[codec]") {
  auto make = [](std::int16_t v) {
    consumer_protocol_subscription m;
    m.topics = {"orders", "payments"};
    if (v != 2) m.user_data = bytes{1, 2, 3};
    if (v >= 1) m.owned_partitions = {{"orders", {0, 2}}, {"payments", {}}};
    if (v >= 2) m.generation_id = 9;
    if (v >= 3) m.rack_id = "rack-a";
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.i32(2).str("orders").str("payments");
    if (v != 2) b.byts({1, 2, 3});
    else b.i32(-1);
    if (v >= 1) b.i32(2).str("orders").i32(2).i32(0).i32(2).str("payments").i32(0);
    if (v >= 2) b.i32(9);
    if (v >= 3) b.str("rack-a");
    return b.out;
  };
  check_all_versions<consumer_protocol_subscription>(make, wire);
  STATIC_REQUIRE(consumer_protocol_subscription::first_flexible_version == -1);
  // Everything after v0 is ignorable: a v3 subscription written as v0 keeps topics and user data.
  check_dropped(make(3), make(0), 0);
  auto no_rack = make(3);
  no_rack.rack_id.reset();
  check_wire(no_rack, 3, byte_builder{}.i32(2).str("orders").str("payments").byts({1, 2, 3}).i32(2).str("orders")
                             .i32(2).i32(0).i32(2).str("payments").i32(0).i32(9).null_str().out);
}

TEST_CASE("ConsumerProtocolAssignment", "[codec]") {
  auto make = [](std::int16_t v) {
    consumer_protocol_assignment m;
    m.assigned_partitions = {{"orders", {0, 2}}, {"payments", {}}};
    if (v != 1) m.user_data = bytes{9};
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.i32(2).str("orders").i32(2).i32(0).i32(2).str("payments").i32(0);
    if (v != 1) b.byts({9});
    else b.i32(-1);
    return b.out;
  };
  check_all_versions<consumer_protocol_assignment>(make, wire);
  STATIC_REQUIRE(consumer_protocol_assignment::first_flexible_version == -1);
}

// ---------------------------------------------------------------------------------------------
// Whole frames.

TEST_CASE("encode_request frames: size, header v1 or v2, body", "[codec]") {
  heartbeat_request hb;
  hb.group_id = "g";
  hb.generation_id = 1;
  hb.member_id = "m";
  SECTION("non-flexible version: header v1") {
    bytes out{0xaa};  // appended after existing bytes
    REQUIRE_FALSE(encode_request(hb, 0, 0x01020304, std::optional<std::string>("cli"), out));
    const bytes body = byte_builder{}.str("g").i32(1).str("m").out;
    const bytes expected = byte_builder{}
                               .i8(0xaa)
                               .i32(static_cast<std::int64_t>(2 + 2 + 4 + 5 + body.size()))
                               .i16(12).i16(0).i32(0x01020304).str("cli")
                               .raw(body).out;
    CHECK(hex(out) == hex(expected));
  }
  SECTION("flexible version: header v2 keeps a non-compact client id, adds tags") {
    bytes out;
    REQUIRE_FALSE(encode_request(hb, 4, 7, std::nullopt, out));
    const bytes expected = byte_builder{}.i32(2 + 2 + 4 + 2 + 1 + 2 + 4 + 2 + 1 + 1)
                               .i16(12).i16(4).i32(7).null_str().uvarint(0)
                               .cstr("g").i32(1).cstr("m").null_cstr().uvarint(0).out;
    CHECK(hex(out) == hex(expected));
  }
  SECTION("ApiVersions v3 request uses header v2") {
    api_versions_request av;
    av.client_software_name = "k";
    av.client_software_version = "1";
    bytes out;
    REQUIRE_FALSE(encode_request(av, 3, 1, std::optional<std::string>("c"), out));
    const bytes expected =
        byte_builder{}.i32(17).i16(18).i16(3).i32(1).str("c").uvarint(0).cstr("k").cstr("1").uvarint(0).out;
    CHECK(hex(out) == hex(expected));
  }
  SECTION("a failed body leaves the output untouched") {
    hb.group_instance_id = "inst";
    bytes out{0x01, 0x02};
    CHECK(encode_request(hb, 2, 1, std::nullopt, out) == codec_errc::field_not_supported);
    CHECK(out == bytes{0x01, 0x02});
    CHECK(encode_request(hb, 9, 1, std::nullopt, out) == codec_errc::unsupported_version);
    CHECK(out == bytes{0x01, 0x02});
  }
}

TEST_CASE("decode_response: header v0 or v1, ApiVersions always v0", "[codec]") {
  SECTION("flexible Heartbeat response has a tagged header") {
    const bytes frame = byte_builder{}.i32(77).uvarint(0).i32(5).i16(27).uvarint(0).out;
    response_header h;
    heartbeat_response r;
    REQUIRE_FALSE(decode_response(frame, 4, h, r));
    CHECK(h.correlation_id == 77);
    CHECK(r.throttle_time_ms == 5);
    CHECK(r.error_code == 27);
    // The same body behind a v0 header does not parse as v4.
    const bytes v0_header = byte_builder{}.i32(77).i32(5).i16(27).uvarint(0).out;
    CHECK(decode_response(v0_header, 4, h, r));
  }
  SECTION("non-flexible Heartbeat response has header v0") {
    const bytes frame = byte_builder{}.i32(78).i32(5).i16(27).out;
    response_header h;
    heartbeat_response r;
    REQUIRE_FALSE(decode_response(frame, 3, h, r));
    CHECK(h.correlation_id == 78);
    CHECK(r.error_code == 27);
  }
  SECTION("ApiVersions v3 response: header v0, flexible body") {
    const bytes frame =
        byte_builder{}.i32(1).i16(0).arr(true, 1).i16(18).i16(0).i16(4).uvarint(0).i32(0).uvarint(0).out;
    response_header h;
    api_versions_response r;
    REQUIRE_FALSE(decode_response(frame, 3, h, r));
    CHECK(h.correlation_id == 1);
    REQUIRE(r.api_keys.size() == 1);
    CHECK(r.api_keys[0].max_version == 4);
  }
  SECTION("ApiVersions v0 error answer to a too-new request") {
    // A broker that does not know v4 answers UNSUPPORTED_VERSION (35) in v0 format.
    const bytes frame = byte_builder{}.i32(2).i16(35).i32(1).i16(18).i16(0).i16(3).out;
    response_header h;
    api_versions_response r;
    REQUIRE_FALSE(decode_response(frame, 0, h, r));
    CHECK(r.error_code == 35);
    CHECK(r.api_keys == std::vector<api_versions_response::api_version>{{18, 0, 3}});
  }
  SECTION("a truncated header is an error") {
    const bytes frame{0x00, 0x00, 0x01};
    response_header h;
    heartbeat_response r;
    CHECK(decode_response(frame, 0, h, r) == codec_errc::truncated);
    const bytes flex_frame{0x00, 0x00, 0x00, 0x01};
    CHECK(decode_response(flex_frame, 4, h, r) == codec_errc::truncated);
  }
}

// ---------------------------------------------------------------------------------------------
// ConsumerGroupHeartbeat (key 68), 0-1, flexible throughout (KIP-848). v1 adds
// SubscribedTopicRegex. The response's Assignment is a nullable struct (int8 -1 / 1 marker).

namespace {
uuid cgh_uuid(std::uint8_t fill) {
  uuid u;
  for (std::size_t k = 0; k < 16; ++k) u.bytes[k] = static_cast<std::uint8_t>(fill + k);
  return u;
}
}  // namespace

TEST_CASE("ConsumerGroupHeartbeatRequest", "[codec]") {
  auto make = [](std::int16_t v) {
    consumer_group_heartbeat_request m;
    m.group_id = "g";
    m.member_id = "m";
    m.member_epoch = 7;
    m.rack_id = "r1";
    m.rebalance_timeout_ms = 300000;
    m.subscribed_topic_names = std::vector<std::string>{"a", "b"};
    if (v >= 1) m.subscribed_topic_regex = "t.*";
    m.topic_partitions = std::vector<consumer_group_heartbeat_request::topic_partitions_t>{{cgh_uuid(0x10), {0, 2}}};
    return m;
  };
  auto wire = [](std::int16_t v) {
    byte_builder b;
    b.cstr("g").cstr("m").i32(7).null_cstr().cstr("r1").i32(300000);
    b.uvarint(3).cstr("a").cstr("b");
    if (v >= 1) b.cstr("t.*");
    b.null_cstr();  // server assignor
    b.uvarint(2).uuid(0x10).uvarint(3).i32(0).i32(2).tags0(true);
    b.tags0(true);
    return b.out;
  };
  check_all_versions<consumer_group_heartbeat_request>(make, wire);
  check_unknown_top_tags<consumer_group_heartbeat_request>(make, wire);
  // The regex cannot travel in v0.
  check_encode_fails(make(1), 0, errc::field_not_supported);
}

TEST_CASE("ConsumerGroupHeartbeatResponse", "[codec]") {
  auto make = [](std::int16_t) {
    consumer_group_heartbeat_response m;
    m.throttle_time_ms = 5;
    m.member_id = "m";
    m.member_epoch = 8;
    m.heartbeat_interval_ms = 5000;
    consumer_group_heartbeat_response::assignment_t a;
    a.topic_partitions.push_back({cgh_uuid(0x20), {1}});
    m.assignment = a;
    return m;
  };
  auto wire = [](std::int16_t) {
    byte_builder b;
    b.i32(5).i16(0).null_cstr().cstr("m").i32(8).i32(5000);
    b.i8(1).uvarint(2).uuid(0x20).uvarint(2).i32(1).tags0(true).tags0(true);
    b.tags0(true);
    return b.out;
  };
  check_all_versions<consumer_group_heartbeat_response>(make, wire);
  // No assignment (null): only the -1 marker.
  consumer_group_heartbeat_response none;
  none.error_code = 110;  // FENCED_MEMBER_EPOCH
  byte_builder b;
  b.i32(0).i16(110).null_cstr().null_cstr().i32(0).i32(0).i8(-1).tags0(true);
  consumer_group_heartbeat_response got;
  REQUIRE_FALSE(decode(b.out, 1, got));
  CHECK(got == none);
}
