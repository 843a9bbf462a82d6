// The share session (KIP-932), step by step: the epoch sequence and its wrap, which partitions each
// ShareFetch lists and forgets, where acknowledgements may ride, one request at a time per broker,
// and the resets after SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH and transport errors.
#include <limits>
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "data/share_acks.hpp"
#include "data/share_session.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"

using kgroup::client_errc;
using kgroup::kafka_errc;
using kgroup::TopicPartition;
using kgroup::data::share::ack_batch;
using kgroup::data::share::ack_map;
using kgroup::data::share::fetch_params;
using kgroup::data::share::next_share_epoch;
using kgroup::data::share::partition_ids;
using kgroup::data::share::share_errc;
using kgroup::data::share::share_session;
using kgroup::protocol::share_acknowledge_request;
using kgroup::protocol::share_acknowledge_response;
using kgroup::protocol::share_fetch_request;
using kgroup::protocol::share_fetch_response;
using kgroup::protocol::uuid;

namespace {

uuid id_of(std::uint8_t fill) {
  uuid u;
  u.bytes.fill(fill);
  return u;
}
const uuid id_a = id_of(0xa1);
const uuid id_b = id_of(0xb2);
const TopicPartition a0{"a", 0}, a1{"a", 1}, b0{"b", 0};

fetch_params params() {
  fetch_params p;
  p.group_id = "g";
  p.member_id = "member-1";
  p.max_wait_ms = 500;
  p.min_bytes = 1;
  p.max_bytes = 1 << 20;
  p.max_records = 100;
  p.batch_size = 50;
  p.acquire_mode = 1;
  return p;
}

partition_ids ids(std::initializer_list<TopicPartition> tps) {
  partition_ids out;
  for (const auto& tp : tps) out[tp] = tp.topic == "a" ? id_a : id_b;
  return out;
}

// (topic id, partition) pairs a request lists, and the ones it forgets.
std::set<std::pair<uuid, std::int32_t>> listed(const share_fetch_request& r) {
  std::set<std::pair<uuid, std::int32_t>> out;
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) out.emplace(t.topic_id, p.partition_index);
  }
  return out;
}
std::set<std::pair<uuid, std::int32_t>> forgotten(const share_fetch_request& r) {
  std::set<std::pair<uuid, std::int32_t>> out;
  for (const auto& t : r.forgotten_topics_data) {
    for (auto p : t.partitions) out.emplace(t.topic_id, p);
  }
  return out;
}
std::set<std::pair<uuid, std::int32_t>> set_of(std::initializer_list<TopicPartition> tps) {
  std::set<std::pair<uuid, std::int32_t>> out;
  for (const auto& tp : tps) out.emplace(tp.topic == "a" ? id_a : id_b, tp.partition);
  return out;
}

ack_map acks_for(std::initializer_list<TopicPartition> tps, std::int8_t type = 1) {
  ack_map out;
  for (const auto& tp : tps) {
    out[tp].topic_id = tp.topic == "a" ? id_a : id_b;
    out[tp].batches = {ack_batch{10, 12, {type}}};
  }
  return out;
}

// An answer naming `tps` with an acknowledgement error code each.
share_fetch_response fetch_answer(std::initializer_list<std::pair<TopicPartition, std::int16_t>> tps,
                                  std::int16_t top = 0) {
  share_fetch_response r;
  r.error_code = top;
  r.acquisition_lock_timeout_ms = 30000;
  for (const auto& [tp, ack_error] : tps) {
    const uuid id = tp.topic == "a" ? id_a : id_b;
    if (r.responses.empty() || r.responses.back().topic_id != id) r.responses.emplace_back().topic_id = id;
    auto& p = r.responses.back().partitions.emplace_back();
    p.partition_index = tp.partition;
    p.acknowledge_error_code = ack_error;
  }
  return r;
}

std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

// Opens a session over `wanted` (epoch 0 -> 1).
void open(share_session& s, const partition_ids& wanted) {
  share_fetch_request req;
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), wanted, {}).error);
  REQUIRE(req.share_session_epoch == 0);
  auto res = s.on_fetch_answer(fetch_answer({}));
  REQUIRE_FALSE(res.error);
  REQUIRE(s.next_epoch() == 1);
}

}  // namespace

TEST_CASE("share session epochs: 0 opens, then 1, 2, ...; INT32_MAX wraps to 1", "[share_session]") {
  CHECK(next_share_epoch(0) == 1);
  CHECK(next_share_epoch(1) == 2);
  CHECK(next_share_epoch(41) == 42);
  CHECK(next_share_epoch(std::numeric_limits<std::int32_t>::max() - 1) ==
        std::numeric_limits<std::int32_t>::max());
  CHECK(next_share_epoch(std::numeric_limits<std::int32_t>::max()) == 1);
  CHECK(next_share_epoch(-1) == 1);

  share_session s(3);
  CHECK(s.node() == 3);
  CHECK(s.next_epoch() == 0);
  CHECK_FALSE(s.acks_allowed());
  const auto wanted = ids({a0, a1});
  for (std::int32_t expect = 0; expect < 5; ++expect) {
    share_fetch_request req;
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), wanted, {}).error);
    CHECK(req.share_session_epoch == expect);
    CHECK(s.busy());
    REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
    CHECK_FALSE(s.busy());
    CHECK(s.next_epoch() == expect + 1);
  }
  CHECK(s.opens() == 1);
  CHECK(s.resets() == 0);
}

TEST_CASE("share session: the opening request carries the parameters and every partition",
          "[share_session]") {
  share_session s;
  share_fetch_request req;
  REQUIRE_FALSE(s.build_fetch(req, 2, params(), ids({a0, a1, b0}), {}).error);
  CHECK(req.group_id == "g");
  CHECK(req.member_id == "member-1");
  CHECK(req.max_wait_ms == 500);
  CHECK(req.min_bytes == 1);
  CHECK(req.max_bytes == 1 << 20);
  CHECK(req.max_records == 100);
  CHECK(req.batch_size == 50);
  CHECK(req.share_acquire_mode == 1);
  CHECK_FALSE(req.is_renew_ack);
  CHECK(listed(req) == set_of({a0, a1, b0}));
  CHECK(forgotten(req).empty());
  // One topic entry per topic.
  REQUIRE(req.topics.size() == 2);
  CHECK(req.topics[0].partitions.size() == 2);

  // At v1 the acquire mode stays at its default (the field is v2's).
  share_session s1;
  REQUIRE_FALSE(s1.build_fetch(req, 1, params(), ids({a0}), {}).error);
  CHECK(req.share_acquire_mode == 0);
}

TEST_CASE("share session: incremental requests list added partitions and forget removed ones",
          "[share_session]") {
  share_session s;
  open(s, ids({a0, a1}));

  share_fetch_request req;
  SECTION("no change: nothing listed, nothing forgotten") {
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a0, a1}), {}).error);
    CHECK(req.share_session_epoch == 1);
    CHECK(listed(req).empty());
    CHECK(forgotten(req).empty());
  }
  SECTION("one added, one removed") {
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a1, b0}), {}).error);
    CHECK(listed(req) == set_of({b0}));
    CHECK(forgotten(req) == set_of({a0}));
    REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
    CHECK(s.partitions() == ids({a1, b0}));
    // And the next one is quiet again.
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a1, b0}), {}).error);
    CHECK(listed(req).empty());
    CHECK(forgotten(req).empty());
  }
  SECTION("a recreated topic (new id) is forgotten under its old id and added under the new one") {
    auto wanted = ids({a0, a1});
    wanted[a1] = id_of(0xcc);
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), wanted, {}).error);
    CHECK(listed(req) == std::set<std::pair<uuid, std::int32_t>>{{id_of(0xcc), 1}});
    CHECK(forgotten(req) == set_of({a1}));
  }
  SECTION("everything removed") {
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), {}, {}).error);
    CHECK(listed(req).empty());
    CHECK(forgotten(req) == set_of({a0, a1}));
  }
}

TEST_CASE("share session: acknowledgements ride only on an open session", "[share_session]") {
  share_session s;
  share_fetch_request req;

  SECTION("epoch 0: refused, the request goes out without them") {
    auto built = s.build_fetch(req, 1, params(), ids({a0}), acks_for({a0}));
    REQUIRE_FALSE(built.error);
    REQUIRE(built.refused.size() == 1);
    CHECK(built.refused[0].first == a0);
    CHECK(built.refused[0].second == share_errc::no_session);
    CHECK(req.share_session_epoch == 0);
    REQUIRE(req.topics.size() == 1);
    CHECK(req.topics[0].partitions[0].acknowledgement_batches.empty());
    auto res = s.on_fetch_answer(fetch_answer({{a0, 0}}));
    CHECK(res.acks.empty());  // nothing was carried
  }
  SECTION("an open session carries them, listing the partition even when it is not new") {
    open(s, ids({a0, a1}));
    auto built = s.build_fetch(req, 1, params(), ids({a0, a1}), acks_for({a1}));
    REQUIRE_FALSE(built.error);
    CHECK(built.refused.empty());
    CHECK(listed(req) == set_of({a1}));
    const auto& batches = req.topics.at(0).partitions.at(0).acknowledgement_batches;
    REQUIRE(batches.size() == 1);
    CHECK(batches[0].first_offset == 10);
    CHECK(batches[0].last_offset == 12);
    CHECK(batches[0].acknowledge_types == std::vector<std::int8_t>{1});
    CHECK_FALSE(req.is_renew_ack);
    auto res = s.on_fetch_answer(fetch_answer({{a1, code(kafka_errc::invalid_record_state)}}));
    REQUIRE(res.acks.size() == 1);
    CHECK(res.acks[0].first == a1);
    CHECK(res.acks[0].second == kafka_errc::invalid_record_state);
    CHECK(res.fetched.size() == 1);
    CHECK(res.acquisition_lock_timeout_ms == 30000);
  }
  SECTION("acknowledgements of a partition the fetch does not want go by ShareAcknowledge") {
    open(s, ids({a0}));
    auto built = s.build_fetch(req, 1, params(), ids({a0}), acks_for({b0}));
    REQUIRE(built.refused.size() == 1);
    CHECK(built.refused[0].first == b0);
    CHECK(listed(req).empty());
  }
  SECTION("RENEW needs v2; at v2 it sets IsRenewAck") {
    open(s, ids({a0}));
    auto built = s.build_fetch(req, 1, params(), ids({a0}), acks_for({a0}, 4));
    REQUIRE(built.refused.size() == 1);
    CHECK(built.refused[0].second == share_errc::renew_not_supported);
    REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
    built = s.build_fetch(req, 2, params(), ids({a0}), acks_for({a0}, 4));
    CHECK(built.refused.empty());
    CHECK(req.is_renew_ack);
  }
  SECTION("a partition whose acknowledgements the answer does not name: outcome unknown") {
    open(s, ids({a0, a1}));
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a0, a1}), acks_for({a0, a1})).error);
    auto res = s.on_fetch_answer(fetch_answer({{a0, 0}}));
    std::map<TopicPartition, std::error_code> got(res.acks.begin(), res.acks.end());
    CHECK_FALSE(got.at(a0));
    CHECK(got.at(a1) == share_errc::acknowledgement_unanswered);
  }
}

TEST_CASE("share session: one request in flight per broker, ShareFetch and ShareAcknowledge alike",
          "[share_session]") {
  share_session s;
  share_fetch_request req;
  share_acknowledge_request ack;
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a0}), {}).error);
  const auto before = req;
  CHECK(s.build_fetch(req, 1, params(), ids({a0}), {}).error == share_errc::request_in_flight);
  CHECK(req == before);  // untouched
  CHECK(s.build_acknowledge(ack, 1, params(), acks_for({a0})).error == share_errc::request_in_flight);
  // The wrong answer kind does not complete it.
  CHECK(s.on_acknowledge_answer(share_acknowledge_response{}).error == share_errc::unexpected_answer);
  CHECK(s.busy());
  REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
  CHECK(s.on_fetch_answer(fetch_answer({})).error == share_errc::unexpected_answer);
  CHECK(s.on_request_failed(client_errc::connection_closed).error == share_errc::unexpected_answer);
  CHECK(s.next_epoch() == 1);

  // ShareAcknowledge takes the slot and the epoch too.
  REQUIRE_FALSE(s.build_acknowledge(ack, 1, params(), acks_for({a0})).error);
  CHECK(ack.share_session_epoch == 1);
  CHECK(s.build_fetch(req, 1, params(), ids({a0}), {}).error == share_errc::request_in_flight);
  share_acknowledge_response ar;
  ar.responses.emplace_back().topic_id = id_a;
  ar.responses[0].partitions.emplace_back().partition_index = 0;
  auto res = s.on_acknowledge_answer(ar);
  REQUIRE_FALSE(res.error);
  REQUIRE(res.acks.size() == 1);
  CHECK_FALSE(res.acks[0].second);
  CHECK(res.acknowledged.size() == 1);
  CHECK(res.acquisition_lock_timeout_ms == -1);  // v1 answer
  CHECK(s.next_epoch() == 2);
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a0}), {}).error);
  CHECK(req.share_session_epoch == 2);
}

TEST_CASE("share session: 122, 123, 133 and transport errors reset to epoch 0", "[share_session]") {
  struct step {
    const char* what;
    std::int16_t top;  // 0: transport failure
  };
  for (const auto& st : {step{"SHARE_SESSION_NOT_FOUND", code(kafka_errc::share_session_not_found)},
                         step{"INVALID_SHARE_SESSION_EPOCH", code(kafka_errc::invalid_share_session_epoch)},
                         step{"SHARE_SESSION_LIMIT_REACHED", code(kafka_errc::share_session_limit_reached)},
                         step{"transport", 0}}) {
    INFO(st.what);
    share_session s;
    open(s, ids({a0, a1}));
    share_fetch_request req;
    // The request adds b0, removes a0 and acknowledges on a1.
    REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a1, b0}), acks_for({a1})).error);
    const auto res = st.top ? s.on_fetch_answer(fetch_answer({}, st.top))
                            : s.on_request_failed(make_error_code(client_errc::connection_closed));
    const std::error_code cause = st.top ? make_error_code(static_cast<kafka_errc>(st.top))
                                         : make_error_code(client_errc::connection_closed);
    CHECK(res.error == cause);
    CHECK(res.reset);
    CHECK(std::set<TopicPartition>(res.lost.begin(), res.lost.end()) == std::set<TopicPartition>{a0, a1, b0});
    REQUIRE(res.acks.size() == 1);
    CHECK(res.acks[0].second == cause);
    CHECK(s.next_epoch() == 0);
    CHECK_FALSE(s.acks_allowed());
    CHECK(s.reset_cause() == cause);
    CHECK(s.resets() == 1);
    CHECK(s.partitions().empty());

    // The next ShareFetch opens anew with the full set and cannot carry the acknowledgements.
    auto built = s.build_fetch(req, 1, params(), ids({a1, b0}), acks_for({a1}));
    CHECK(req.share_session_epoch == 0);
    CHECK(listed(req) == set_of({a1, b0}));
    CHECK(forgotten(req).empty());
    REQUIRE(built.refused.size() == 1);
    CHECK(built.refused[0].second == cause);
    // ShareAcknowledge cannot open a session.
    REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
    CHECK(s.next_epoch() == 1);
    CHECK(s.opens() == 2);
  }
}

TEST_CASE("share session: other top-level errors keep the epoch and undo the request's changes",
          "[share_session]") {
  share_session s;
  open(s, ids({a0, a1}));
  share_fetch_request req;
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a1, b0}), acks_for({a1})).error);
  auto res = s.on_fetch_answer(fetch_answer({}, code(kafka_errc::group_authorization_failed)));
  CHECK(res.error == kafka_errc::group_authorization_failed);
  CHECK_FALSE(res.reset);
  CHECK(res.lost.empty());
  REQUIRE(res.acks.size() == 1);
  CHECK(res.acks[0].second == kafka_errc::group_authorization_failed);
  CHECK(s.next_epoch() == 1);
  CHECK(s.partitions() == ids({a0, a1}));
  // The same change goes out again at the same epoch.
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a1, b0}), {}).error);
  CHECK(req.share_session_epoch == 1);
  CHECK(listed(req) == set_of({b0}));
  CHECK(forgotten(req) == set_of({a0}));
}

TEST_CASE("share session: partition errors do not stop the epoch; unknown partitions are ignored",
          "[share_session]") {
  share_session s;
  open(s, ids({a0}));
  share_fetch_request req;
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), ids({a0}), {}).error);
  auto answer = fetch_answer({{a0, 0}, {b0, 0}});
  answer.responses[0].partitions[0].error_code = code(kafka_errc::not_leader_or_follower);
  answer.responses.emplace_back().topic_id = id_of(0x77);
  answer.responses.back().partitions.emplace_back().partition_index = 9;
  auto res = s.on_fetch_answer(answer);
  REQUIRE_FALSE(res.error);
  REQUIRE(res.fetched.size() == 1);
  CHECK(res.fetched[0].first == a0);
  CHECK(res.fetched[0].second->error_code == code(kafka_errc::not_leader_or_follower));
  CHECK(res.unknown_partitions == 2);  // b0 (not in the session) and the unknown topic id
  CHECK(s.next_epoch() == 2);
}

TEST_CASE("share session: ShareAcknowledge, and closing with epoch -1", "[share_session]") {
  share_session s;
  share_acknowledge_request req;
  SECTION("at epoch 0 nothing can be acknowledged or closed") {
    auto built = s.build_acknowledge(req, 1, params(), acks_for({a0}));
    CHECK(built.error == share_errc::no_session);
    REQUIRE(built.refused.size() == 1);
    CHECK_FALSE(s.busy());
    CHECK(s.build_acknowledge(req, 1, params(), {}, true).error == share_errc::no_session);
  }
  SECTION("nothing to send") {
    open(s, ids({a0}));
    CHECK(s.build_acknowledge(req, 1, params(), {}).error == share_errc::nothing_to_send);
    CHECK_FALSE(s.busy());
  }
  SECTION("RENEW below v2 is refused; at v2 it sets IsRenewAck") {
    open(s, ids({a0}));
    auto built = s.build_acknowledge(req, 1, params(), acks_for({a0}, 4));
    CHECK(built.error == share_errc::renew_not_supported);
    CHECK_FALSE(s.busy());
    built = s.build_acknowledge(req, 2, params(), acks_for({a0}, 4));
    REQUIRE_FALSE(built.error);
    CHECK(req.is_renew_ack);
  }
  SECTION("close: epoch -1 with the last acknowledgements, then the session is gone") {
    open(s, ids({a0, a1}));
    REQUIRE_FALSE(s.build_acknowledge(req, 1, params(), acks_for({a0}), true).error);
    CHECK(req.share_session_epoch == -1);
    REQUIRE(req.topics.size() == 1);
    CHECK(req.topics[0].topic_id == id_a);
    CHECK(req.topics[0].partitions[0].acknowledgement_batches.size() == 1);
    share_acknowledge_response ar;
    ar.responses.emplace_back().topic_id = id_a;
    ar.responses[0].partitions.emplace_back().partition_index = 0;
    auto res = s.on_acknowledge_answer(ar);
    REQUIRE_FALSE(res.error);
    CHECK(res.reset);
    CHECK(std::set<TopicPartition>(res.lost.begin(), res.lost.end()) == std::set<TopicPartition>{a0, a1});
    CHECK(s.next_epoch() == 0);
    CHECK(s.resets() == 0);  // a close is not a reset
  }
  SECTION("an acknowledge-only partition outside the session is resolved by its own topic id") {
    open(s, ids({a0}));
    REQUIRE_FALSE(s.build_acknowledge(req, 1, params(), acks_for({b0})).error);
    share_acknowledge_response ar;
    ar.responses.emplace_back().topic_id = id_b;
    ar.responses[0].partitions.emplace_back().partition_index = 0;
    ar.responses[0].partitions[0].error_code = code(kafka_errc::invalid_record_state);
    auto res = s.on_acknowledge_answer(ar);
    REQUIRE(res.acks.size() == 1);
    CHECK(res.acks[0].first == b0);
    CHECK(res.acks[0].second == kafka_errc::invalid_record_state);
    CHECK(res.unknown_partitions == 0);
  }
  SECTION("a ShareAcknowledge answered with 123 resets the session") {
    open(s, ids({a0}));
    REQUIRE_FALSE(s.build_acknowledge(req, 1, params(), acks_for({a0})).error);
    share_acknowledge_response ar;
    ar.error_code = code(kafka_errc::invalid_share_session_epoch);
    auto res = s.on_acknowledge_answer(ar);
    CHECK(res.reset);
    CHECK(s.next_epoch() == 0);
    REQUIRE(res.acks.size() == 1);
    CHECK(res.acks[0].second == kafka_errc::invalid_share_session_epoch);
  }
}

TEST_CASE("share session: a partition leaving the assignment is forgotten only after its acknowledgements",
          "[share_session]") {
  // The fetcher's order at one broker when a0 leaves the assignment while the application holds
  // records of it: leaving() names it, deferred_forgets() keeps the ShareFetch back while the
  // tracker has records of it without an outcome, a ShareAcknowledge carries them, and only then
  // does a ShareFetch forget a0 (the broker releases what is still acquired there).
  using kgroup::data::share::ack_mode;
  using kgroup::data::share::ack_tracker;
  using kgroup::data::share::ack_type;
  using kgroup::data::share::acquired_range;

  share_session s;
  ack_tracker t;
  open(s, ids({a0, a1}));
  const std::vector<acquired_range> r{{0, 3, 1}};
  REQUIRE_FALSE(t.on_acquired(a0, r, std::vector<std::int64_t>{0, 1, 2, 3}).error);
  REQUIRE(t.on_polled(a0, std::vector<std::int64_t>{0, 1}) == 0);  // 2, 3 still buffered

  // a0 leaves: the buffer is dropped, the records handed out stay.
  CHECK(t.drop_undelivered(a0) == 2);
  const auto wanted = ids({a1});
  CHECK(s.leaving(wanted) == std::vector<TopicPartition>{a0});
  auto unresolved = [&] {
    std::set<TopicPartition> out;
    for (const auto& tp : s.leaving(wanted))
      if (t.unresolved(tp)) out.insert(tp);
    return out;
  };
  CHECK(s.deferred_forgets(wanted, unresolved()) == std::vector<TopicPartition>{a0});
  // Past the bound (the locks expired, or closing) the forget goes ahead.
  CHECK(s.deferred_forgets(wanted, unresolved(), {a0}).empty());

  // The next poll accepts them (implicit mode); they go by ShareAcknowledge, not by the fetch.
  CHECK(t.begin_poll(ack_mode::implicit_mode).empty());
  ack_map acks;
  acks[a0].topic_id = id_a;
  acks[a0].batches = t.take(a0);
  REQUIRE(acks[a0].batches == std::vector<ack_batch>{{0, 1, {1}}});
  CHECK(s.deferred_forgets(wanted, unresolved()) == std::vector<TopicPartition>{a0});  // in flight
  share_acknowledge_request ack_req;
  REQUIRE_FALSE(s.build_acknowledge(ack_req, 1, params(), acks).error);
  CHECK(s.deferred_forgets(wanted, unresolved()).empty());  // busy: nothing to decide now
  share_acknowledge_response ack_resp;
  ack_resp.responses.emplace_back().topic_id = id_a;
  ack_resp.responses.back().partitions.emplace_back().partition_index = 0;
  auto res = s.on_acknowledge_answer(ack_resp);
  REQUIRE_FALSE(res.error);
  REQUIRE(res.acks.size() == 1);
  t.complete(a0, res.acks[0].second);
  auto outcomes = t.take_outcomes();
  REQUIRE(outcomes.size() == 1);
  CHECK(outcomes[0].offsets == std::vector<std::int64_t>{0, 1});
  CHECK_FALSE(outcomes[0].error);  // applied by the broker, not failed with a session error

  // Nothing of a0 is left: the ShareFetch may forget it now.
  CHECK(s.deferred_forgets(wanted, unresolved()).empty());
  share_fetch_request req;
  REQUIRE_FALSE(s.build_fetch(req, 1, params(), wanted, {}).error);
  CHECK(forgotten(req) == set_of({a0}));
  REQUIRE_FALSE(s.on_fetch_answer(fetch_answer({})).error);
  CHECK(s.leaving(wanted).empty());

  // A new session (epoch 0) forgets nothing, whatever is wanted.
  share_session fresh;
  CHECK(fresh.leaving({}).empty());
  CHECK(fresh.deferred_forgets({}, {a0}).empty());
}
