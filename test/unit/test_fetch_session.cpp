// The fetch session (KIP-227), step by step: which partitions each request lists and forgets, how
// answers move the session id and epoch, and how errors and odd answers reset it.
#include <limits>
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "data/fetch_session.hpp"
#include "data/next_offset.hpp"
#include "kgroup/kafka_errc.hpp"
#include "protocol/records.hpp"
#include "record_batches.hpp"

namespace Catch {
template <>
struct StringMaker<kgroup::TopicPartition> {
  static std::string convert(const kgroup::TopicPartition& tp) { return tp.topic + "-" + std::to_string(tp.partition); }
};
}  // namespace Catch

using kgroup::TopicPartition;
using kgroup::data::fetch_session;
using kgroup::data::fetch_set;
using kgroup::data::partition_fetch;
using kgroup::protocol::fetch_request;
using kgroup::protocol::fetch_response;

namespace {

constexpr std::int16_t v11 = 11;

partition_fetch at(std::int64_t offset, std::int32_t max_bytes = 1048576, std::int32_t epoch = -1) {
  partition_fetch p;
  p.fetch_offset = offset;
  p.max_bytes = max_bytes;
  p.current_leader_epoch = epoch;
  return p;
}

// The partitions a request lists, with their fetch offsets.
std::map<TopicPartition, std::int64_t> listed(const fetch_request& r) {
  std::map<TopicPartition, std::int64_t> out;
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) out[{t.topic, p.partition}] = p.fetch_offset;
  }
  return out;
}

// The partitions a request lists, in the order it lists them.
std::vector<TopicPartition> listed_order(const fetch_request& r) {
  std::vector<TopicPartition> out;
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) out.push_back({t.topic, p.partition});
  }
  return out;
}

std::set<TopicPartition> forgotten(const fetch_request& r) {
  std::set<TopicPartition> out;
  for (const auto& t : r.forgotten_topics_data) {
    for (auto p : t.partitions) out.insert({t.topic, p});
  }
  return out;
}

// An answer naming `parts` (each with no error and no records).
fetch_response answer(std::int32_t session_id, const std::vector<TopicPartition>& parts = {},
                      std::int16_t error = 0) {
  fetch_response r;
  r.session_id = session_id;
  r.error_code = error;
  for (const auto& tp : parts) {
    if (r.responses.empty() || r.responses.back().topic != tp.topic) {
      r.responses.emplace_back();
      r.responses.back().topic = tp.topic;
    }
    fetch_response::fetchable_topic_response::partition_data pd;
    pd.partition_index = tp.partition;
    r.responses.back().partitions.push_back(pd);
  }
  return r;
}

// Gives the answer's entries for `with` record bytes (the bytes are not parsed here).
fetch_response& with_records(fetch_response& r, const std::set<TopicPartition>& with) {
  static const std::vector<std::uint8_t> some_bytes(64, 0x5a);
  for (auto& t : r.responses) {
    for (auto& p : t.partitions) {
      if (with.count(TopicPartition{t.topic, p.partition_index})) p.records = kgroup::protocol::records_view{some_bytes};
    }
  }
  return r;
}

std::vector<TopicPartition> names(const fetch_session::response_result& res) {
  std::vector<TopicPartition> out;
  for (const auto& [tp, pd] : res.partitions) out.push_back(tp);
  return out;
}

const TopicPartition a0{"a", 0}, a1{"a", 1}, b0{"b", 0};

// A session with id 42 established over {a0 @ 10, a1 @ 20, b0 @ 30}; returns the wanted set.
fetch_set establish(fetch_session& s) {
  fetch_set wanted{{a0, at(10)}, {a1, at(20)}, {b0, at(30)}};
  fetch_request req;
  s.fill(req, v11, wanted);
  REQUIRE(req.session_id == 0);
  REQUIRE(req.session_epoch == 0);
  REQUIRE(listed(req).size() == 3);
  auto res = s.on_response(answer(42, {a0, a1, b0}));
  REQUIRE(res.error_code == 0);
  REQUIRE(s.id() == 42);
  REQUIRE(s.next_epoch() == 1);
  return wanted;
}

}  // namespace

TEST_CASE("fetch session: the first request is full with epoch 0, later ones incremental",
          "[fetch_session]") {
  fetch_session s(1);
  auto wanted = establish(s);
  CHECK(s.incremental());

  // Nothing changed: the incremental request lists no partition and forgets none.
  fetch_request req;
  s.fill(req, v11, wanted);
  CHECK(req.session_id == 42);
  CHECK(req.session_epoch == 1);
  CHECK(req.topics.empty());
  CHECK(req.forgotten_topics_data.empty());
  // The answer lists only partitions with news; they are all accepted.
  auto res = s.on_response(answer(42, {a1}));
  CHECK(res.error_code == 0);
  CHECK(names(res) == std::vector<TopicPartition>{a1});
  CHECK(res.unknown_partitions == 0);
  CHECK(s.next_epoch() == 2);

  // a1 got records: its offset moved, so it alone is listed.
  wanted[a1] = at(25);
  s.fill(req, v11, wanted);
  CHECK(req.session_epoch == 2);
  CHECK(listed(req) == std::map<TopicPartition, std::int64_t>{{a1, 25}});
  s.on_response(answer(42));
  CHECK(s.next_epoch() == 3);
}

TEST_CASE("fetch session: added, removed and changed partitions", "[fetch_session]") {
  fetch_session s(1);
  auto wanted = establish(s);
  const TopicPartition c3{"c", 3};
  wanted.erase(a1);                 // removed (revoked, paused, moved leader)
  wanted[c3] = at(7);               // added
  wanted[a0] = at(10, 1048576, 5);  // leader epoch changed
  wanted[b0] = at(30, 4096);        // max bytes changed
  fetch_request req;
  s.fill(req, v11, wanted);
  CHECK(req.session_epoch == 1);
  CHECK(listed(req) == std::map<TopicPartition, std::int64_t>{{a0, 10}, {b0, 30}, {c3, 7}});
  CHECK(forgotten(req) == std::set<TopicPartition>{a1});
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions) {
      if (t.topic == "a") CHECK(p.current_leader_epoch == 5);
      if (t.topic == "b") CHECK(p.partition_max_bytes == 4096);
    }
  }
  CHECK(s.partitions() == wanted);
  // A response about the forgotten partition is not accepted any more.
  auto res = s.on_response(answer(42, {a0, c3}));
  CHECK(names(res) == std::vector<TopicPartition>{a0, c3});

  // Everything removed: one request forgets all of them.
  s.fill(req, v11, {});
  CHECK(req.topics.empty());
  CHECK(forgotten(req) == std::set<TopicPartition>{a0, b0, c3});
}

TEST_CASE("fetch session: errors reset the session to a full fetch", "[fetch_session]") {
  fetch_session s(1);
  auto wanted = establish(s);
  fetch_request req;

  SECTION("FETCH_SESSION_ID_NOT_FOUND forgets the id") {
    s.fill(req, v11, wanted);
    auto res = s.on_response(
        answer(0, {}, static_cast<std::int16_t>(kgroup::kafka_errc::fetch_session_id_not_found)));
    CHECK(res.error_code == static_cast<std::int16_t>(kgroup::kafka_errc::fetch_session_id_not_found));
    CHECK(res.partitions.empty());
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 0);
    CHECK(req.session_epoch == 0);
    CHECK(listed(req).size() == 3);
    CHECK(req.forgotten_topics_data.empty());
  }
  SECTION("INVALID_FETCH_SESSION_EPOCH closes the session and asks for a new one") {
    s.fill(req, v11, wanted);
    s.on_response(answer(42, {}, static_cast<std::int16_t>(kgroup::kafka_errc::invalid_fetch_session_epoch)));
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 42);
    CHECK(req.session_epoch == 0);
    CHECK(listed(req).size() == 3);
    // The broker answers with a new session, which then goes incremental from epoch 1.
    s.on_response(answer(43, {a0}));
    CHECK(s.id() == 43);
    CHECK(s.next_epoch() == 1);
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 43);
    CHECK(req.session_epoch == 1);
    CHECK(req.topics.empty());
  }
  SECTION("a failed request (timeout, broken connection) makes the next one full") {
    s.fill(req, v11, wanted);
    s.on_request_failed();
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 42);
    CHECK(req.session_epoch == 0);
    CHECK(listed(req).size() == 3);
  }
  SECTION("the broker closing the session (id 0 in an incremental answer)") {
    s.fill(req, v11, wanted);
    auto res = s.on_response(answer(0, {b0}));
    CHECK(names(res) == std::vector<TopicPartition>{b0});  // its data is still good
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 0);
    CHECK(req.session_epoch == 0);
    CHECK(listed(req).size() == 3);
  }
}

TEST_CASE("fetch session: a broker that answers session id 0 gets full fetches", "[fetch_session]") {
  // librdkafka's mock cluster echoes the request's session id, so it always answers 0.
  fetch_session s(1);
  fetch_set wanted{{a0, at(10)}, {a1, at(20)}};
  for (int round = 0; round < 3; ++round) {
    fetch_request req;
    s.fill(req, v11, wanted);
    CHECK(req.session_id == 0);
    CHECK(req.session_epoch == 0);
    CHECK(listed(req).size() == 2);
    CHECK(req.forgotten_topics_data.empty());
    auto res = s.on_response(answer(0, {a0, a1}));
    CHECK(names(res).size() == 2);
    CHECK_FALSE(s.incremental());
    wanted[a0].fetch_offset += 5;
  }
}

TEST_CASE("fetch session: a partition whose answer carried records goes to the end of the next full request",
          "[fetch_session]") {
  // Issue 30 item 9: the broker fills an answer in request order up to fetch.max.bytes, so with a
  // fixed (sorted) order the partitions late in it starve while the early ones have backlog.
  const std::int16_t version = GENERATE(std::int16_t{6}, std::int16_t{11});  // sessionless; no session kept
  INFO("Fetch v" << version);
  using order = std::vector<TopicPartition>;
  fetch_session s(1);
  fetch_set wanted{{a0, at(10)}, {a1, at(20)}, {b0, at(30)}};
  fetch_request req;
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{a0, a1, b0});
  // Only a0 had room in the answer.
  auto r1 = answer(0, {a0, a1, b0});
  s.on_response(with_records(r1, {a0}));
  wanted[a0].fetch_offset = 15;
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{a1, b0, a0});
  // a1, b0 and a0 are no longer grouped by topic: "a" is listed twice, as in Java's requests.
  REQUIRE(req.topics.size() == 3);
  CHECK(req.topics[0].topic == "a");
  CHECK(req.topics[1].topic == "b");
  CHECK(req.topics[2].topic == "a");

  // Answers name partitions without records too (a moved watermark, an error): they keep their place.
  auto r2 = answer(0, {a1, b0, a0});
  s.on_response(with_records(r2, {a1}));
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{b0, a0, a1});
  // Several with records keep their relative order at the end.
  auto r3 = answer(0, {b0, a0, a1});
  s.on_response(with_records(r3, {b0, a0}));
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{a1, b0, a0});
  s.on_response(answer(0));

  // A partition new to the order joins at its end; one no longer wanted leaves it.
  const TopicPartition a2{"a", 2};
  wanted.erase(b0);
  wanted[a2] = at(40);
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{a1, a0, a2});
  s.on_response(answer(0));
  wanted[b0] = at(30);
  s.fill(req, version, wanted);
  CHECK(listed_order(req) == order{a1, a0, a2, b0});
}

TEST_CASE("fetch session: answers to incremental requests rotate the order a later full request uses",
          "[fetch_session]") {
  // Within a session the broker rotates its own order (KIP-227); the client's order matters again
  // once the session is reset and the next request is full.
  fetch_session s(1);
  auto wanted = establish(s);
  fetch_request req;
  s.fill(req, v11, wanted);
  REQUIRE(s.next_epoch() == 1);
  auto r = answer(42, {a0});
  s.on_response(with_records(r, {a0}));
  wanted[a0].fetch_offset = 12;
  s.fill(req, v11, wanted);
  CHECK(listed_order(req) == std::vector<TopicPartition>{a0});  // incremental: only the changed one
  s.on_request_failed();                                         // reset: the next request is full
  s.fill(req, v11, wanted);
  CHECK(req.session_epoch == 0);
  CHECK(listed_order(req) == std::vector<TopicPartition>{a1, b0, a0});
}

TEST_CASE("fetch session: below Fetch v7 every request is a sessionless full fetch", "[fetch_session]") {
  fetch_session s(1);
  fetch_set wanted{{a0, at(10)}};
  fetch_request req;
  s.fill(req, 6, wanted);
  CHECK(req.session_id == 0);
  CHECK(req.session_epoch == -1);
  CHECK(listed(req).size() == 1);
  s.on_response(answer(0, {a0}));
  s.fill(req, 6, wanted);
  CHECK(req.session_epoch == -1);
  CHECK(listed(req).size() == 1);
}

TEST_CASE("fetch session: a response naming a partition the session does not hold", "[fetch_session]") {
  fetch_session s(1);
  auto wanted = establish(s);
  fetch_request req;
  s.fill(req, v11, wanted);
  const TopicPartition stranger{"zzz", 9};
  auto res = s.on_response(answer(42, {a0, stranger, b0}));
  // Issue 31, item 7: the answer is dropped whole (its entries cannot be trusted once one of
  // them is not what was asked); the stranger is counted and named, nothing throws.
  CHECK(names(res).empty());
  CHECK(res.unknown_partitions == 1);
  CHECK(res.first_unknown == "zzz-9");
  // The views disagree: the next request is full and closes the old session.
  s.fill(req, v11, wanted);
  CHECK(req.session_id == 42);
  CHECK(req.session_epoch == 0);
  CHECK(listed(req).size() == 3);

  SECTION("also for a full request, and for an unknown topic id") {
    s.fill(req, v11, wanted);
    kgroup::protocol::uuid id;
    id.bytes[0] = 7;
    auto r = answer(44, {a0});
    r.responses.emplace_back();
    r.responses.back().topic_id = id;  // Fetch v13+ style, an id nobody knows
    r.responses.back().partitions.emplace_back();
    auto res2 = s.on_response(r);
    CHECK(names(res2).empty());
    CHECK(res2.unknown_partitions == 1);
  }
  SECTION("a response with no outstanding request is ignored") {
    s.on_response(answer(44, {a0}));
    auto res2 = s.on_response(answer(44, {a0}));
    CHECK(res2.partitions.empty());
    CHECK(res2.unknown_partitions == 1);
  }
}

TEST_CASE("fetch session: topic ids (Fetch v13+) resolve through the session's partitions",
          "[fetch_session]") {
  fetch_session s(1);
  kgroup::protocol::uuid id_a;
  id_a.bytes[15] = 1;
  fetch_set wanted{{a0, at(10)}, {a1, at(20)}};
  for (auto& [tp, pf] : wanted) pf.topic_id = id_a;
  fetch_request req;
  s.fill(req, 13, wanted);
  REQUIRE(req.topics.size() == 1);
  CHECK(req.topics[0].topic_id == id_a);
  fetch_response r;
  r.session_id = 5;
  r.responses.emplace_back();
  r.responses[0].topic_id = id_a;
  r.responses[0].partitions.resize(1);
  r.responses[0].partitions[0].partition_index = 1;
  auto res = s.on_response(r);
  CHECK(names(res) == std::vector<TopicPartition>{a1});
  // Forgetting at v13 names the topic id too.
  wanted.erase(a0);
  s.fill(req, 13, wanted);
  REQUIRE(req.forgotten_topics_data.size() == 1);
  CHECK(req.forgotten_topics_data[0].topic_id == id_a);
  CHECK(req.forgotten_topics_data[0].partitions == std::vector<std::int32_t>{0});
}

TEST_CASE("fetch session: closing sends epoch -1 and forgets the session", "[fetch_session]") {
  fetch_session s(1);
  fetch_request req;
  CHECK_FALSE(s.close(req));  // nothing to close yet
  auto wanted = establish(s);
  REQUIRE(s.close(req));
  CHECK(req.session_id == 42);
  CHECK(req.session_epoch == -1);
  CHECK(req.topics.empty());
  CHECK(s.id() == 0);
  s.fill(req, v11, wanted);
  CHECK(req.session_id == 0);
  CHECK(req.session_epoch == 0);
  CHECK(listed(req).size() == 3);
}

TEST_CASE("fetch session: requests encode at the session versions", "[fetch_session]") {
  fetch_session s(1);
  auto wanted = establish(s);
  wanted.erase(a1);
  wanted[a0].fetch_offset = 11;
  fetch_request req;
  req.max_wait_ms = 500;
  req.min_bytes = 1;
  s.fill(req, v11, wanted);
  for (std::int16_t v : {std::int16_t{7}, std::int16_t{11}, std::int16_t{12}}) {
    kgroup::protocol::bytes out;
    REQUIRE_FALSE(kgroup::protocol::encode(req, v, out));
    fetch_request back;
    REQUIRE_FALSE(kgroup::protocol::decode(out, v, back));
    CHECK(back.session_id == 42);
    CHECK(back.session_epoch == 1);
    CHECK(listed(back) == listed(req));
    CHECK(forgotten(back) == std::set<TopicPartition>{a1});
  }
}

// ---- where the next Fetch starts (data/next_offset.hpp) ----------------------------------------

using kgroup::test::append_batch;

TEST_CASE("next_fetch_offset: after the last complete batch, with that batch's leader epoch", "[fetch]") {
  using kgroup::data::next_fetch_offset;
  kgroup::protocol::bytes data;
  append_batch(data, 10, 5, 3);  // 10-14, epoch 3
  append_batch(data, 15, 2, 4);  // 15-16, epoch 4
  std::int32_t epoch = -7;
  CHECK(next_fetch_offset(data, 10, &epoch) == 17);
  CHECK(epoch == 4);

  SECTION("a partial batch at the end is not counted") {
    const auto complete = data.size();
    append_batch(data, 17, 3, 5);
    data.resize(complete + 20);
    epoch = -7;
    CHECK(next_fetch_offset(data, 10, &epoch) == 17);
    CHECK(epoch == 4);
  }
  SECTION("nothing complete: the position and the epoch stay") {
    data.resize(30);
    epoch = -7;
    CHECK(next_fetch_offset(data, 10, &epoch) == 10);
    CHECK(epoch == -7);
  }
  SECTION("batches wholly before the position do not move it back, nor set the epoch") {
    epoch = -7;
    CHECK(next_fetch_offset(data, 20, &epoch) == 20);
    CHECK(epoch == -7);
  }
  SECTION("a batch whose offsets leave int64 ends the data (issue 31, kgroup-fuzz-broker: overflowed)") {
    constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
    append_batch(data, max - 1, 3, 5);  // its last offset would be max + 1
    CHECK(next_fetch_offset(data, 10, &epoch) == 17);
    kgroup::protocol::bytes last;
    append_batch(last, max, 1, 5);  // no offset can follow it
    CHECK(next_fetch_offset(last, max - 4) == max - 4);
  }
  SECTION("legacy message sets have no epoch") {
    namespace proto = kgroup::protocol;
    proto::bytes legacy;
    static const std::uint8_t value[] = {'v'};
    const proto::legacy_message_input msgs[] = {{40, 1, std::nullopt, proto::byte_view(value)},
                                                {41, 2, std::nullopt, proto::byte_view(value)}};
    REQUIRE_FALSE(proto::encode_legacy_message_set(msgs, {}, legacy));
    epoch = -7;
    CHECK(next_fetch_offset(legacy, 40, &epoch) == 42);
    CHECK(epoch == -1);
  }
}
