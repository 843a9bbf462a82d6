// The acknowledgement tracker of a share member: what a ShareFetch answer delivers (acquired
// records only, in offset order, GAPs for the rest), the application's acknowledgements and their
// errors, implicit and explicit mode, the batches taken for a request, the outcome per offset,
// forgetting a partition, close, and hostile AcquiredRecords.
#include <chrono>
#include <limits>
#include <map>
#include <random>
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
using kgroup::data::share::ack_mode;
using kgroup::data::share::ack_outcome;
using kgroup::data::share::ack_tracker;
using kgroup::data::share::ack_type;
using kgroup::data::share::acquired_range;
using kgroup::data::share::acquired_record;
using kgroup::data::share::share_errc;

namespace {

const TopicPartition tp{"t", 0};
const TopicPartition tp1{"t", 1};

using ranges = std::vector<acquired_range>;
using offsets = std::vector<std::int64_t>;
constexpr std::int8_t G = 0, A = 1, R = 2, J = 3, N = 4;  // gap, accept, release, reject, renew

std::vector<std::int64_t> offsets_of(const std::vector<acquired_record>& v) {
  std::vector<std::int64_t> out;
  for (const auto& r : v) out.push_back(r.offset);
  return out;
}

// Acquires [first, last] with records at `recs` and polls all delivered records.
void deliver(ack_tracker& t, const TopicPartition& p, std::int64_t first, std::int64_t last,
             const offsets& recs, std::int16_t count = 1) {
  const ranges r{{first, last, count}};
  auto res = t.on_acquired(p, r, recs);
  REQUIRE_FALSE(res.error);
  const auto got = offsets_of(res.deliver);
  REQUIRE(t.on_polled(p, got) == 0);
}

}  // namespace

TEST_CASE("share acks: only records inside acquired ranges are delivered, in offset order", "[share_acks]") {
  ack_tracker t;
  // Two ranges given out of order; records out of order, one duplicated, two outside.
  const ranges r{{20, 22, 2}, {10, 14, 1}};
  const offsets recs{14, 11, 10, 13, 21, 20, 22, 5, 16, 11};
  auto res = t.on_acquired(tp, r, recs);
  REQUIRE_FALSE(res.error);
  CHECK(res.deliver ==
        std::vector<acquired_record>{{10, 1}, {11, 1}, {13, 1}, {14, 1}, {20, 2}, {21, 2}, {22, 2}});
  CHECK(res.gap_offsets == 1);  // 12
  CHECK(res.outside == 2);      // 5 and 16
  CHECK(res.duplicate_offsets == 0);
  CHECK(t.held(tp) == 7);
  CHECK(t.delivery_count(tp, 20) == 2);
  CHECK(t.delivery_count(tp, 10) == 1);
  CHECK(t.delivery_count(tp, 12) == 0);  // a GAP is no record
  CHECK(t.stats().acquired == 7);
  CHECK(t.stats().redelivered == 3);
  CHECK(t.stats().gaps == 1);

  // The GAP is pending at once and goes out with the next request.
  CHECK(t.has_pending(tp));
  CHECK(t.take(tp) == std::vector<ack_batch>{{12, 12, {G}}});
  t.complete(tp, {});
  CHECK(t.take_outcomes().empty());  // GAPs have no outcome
}

TEST_CASE("share acks: an answer without acquired ranges delivers nothing", "[share_acks]") {
  ack_tracker t;
  auto res = t.on_acquired(tp, {}, offsets{1, 2, 3});
  REQUIRE_FALSE(res.error);
  CHECK(res.deliver.empty());
  CHECK(res.outside == 3);
  CHECK(t.held(tp) == 0);
  CHECK(t.pending_partitions().empty());
}

TEST_CASE("share acks: acknowledge errors", "[share_acks]") {
  ack_tracker t;
  const ranges r{{0, 3, 1}};
  REQUIRE_FALSE(t.on_acquired(tp, r, offsets{0, 1, 2}).error);
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::not_delivered);  // not polled yet
  REQUIRE(t.on_polled(tp, offsets{0, 1, 3}) == 1);                             // 3 is a GAP
  CHECK(t.acknowledge(tp, 3, ack_type::accept) == share_errc::not_acquired);
  CHECK(t.acknowledge(tp, 99, ack_type::accept) == share_errc::not_acquired);
  CHECK(t.acknowledge(tp1, 0, ack_type::accept) == share_errc::not_acquired);
  CHECK(t.acknowledge(tp, 0, ack_type::gap) == share_errc::invalid_ack_type);
  CHECK(t.acknowledge(tp, 0, static_cast<ack_type>(7)) == share_errc::invalid_ack_type);
  CHECK(t.acknowledge(tp, 0, ack_type::renew) == share_errc::renew_not_supported);
  CHECK_FALSE(t.acknowledge(tp, 0, ack_type::reject));
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::already_acknowledged);
  (void)t.take(tp);
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::already_acknowledged);  // in flight
  t.complete(tp, {});
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::not_acquired);  // done
  // The messages are readable.
  CHECK(make_error_code(share_errc::not_delivered).message().find("poll") != std::string::npos);
  CHECK(std::string(make_error_code(share_errc::not_acquired).category().name()) == "kgroup.share");
}

TEST_CASE("share acks: batches coalesce runs of one type and join mixed types", "[share_acks]") {
  ack_tracker t;
  SECTION("uniform: one batch, one type") {
    deliver(t, tp, 0, 9, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    for (std::int64_t o = 0; o < 10; ++o) REQUIRE_FALSE(t.acknowledge(tp, o, ack_type::accept));
    CHECK(t.take(tp) == std::vector<ack_batch>{{0, 9, {A}}});
  }
  SECTION("mixed adjacent types and GAPs: one batch with a type per offset") {
    deliver(t, tp, 0, 6, {1, 2, 3, 5});  // GAPs 0, 4, 6
    REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::accept));
    REQUIRE_FALSE(t.acknowledge(tp, 2, ack_type::release));
    REQUIRE_FALSE(t.acknowledge(tp, 3, ack_type::reject));
    REQUIRE_FALSE(t.acknowledge(tp, 5, ack_type::accept));
    CHECK(t.take(tp) == std::vector<ack_batch>{{0, 6, {G, A, R, J, G, A, G}}});
  }
  SECTION("holes split batches") {
    deliver(t, tp, 0, 9, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    for (std::int64_t o : {0, 1, 2, 6, 7}) REQUIRE_FALSE(t.acknowledge(tp, o, ack_type::accept));
    REQUIRE_FALSE(t.acknowledge(tp, 9, ack_type::release));
    CHECK(t.take(tp) == std::vector<ack_batch>{{0, 2, {A}}, {6, 7, {A}}, {9, 9, {R}}});
    // The rest goes out after the first take is answered.
    for (std::int64_t o : {3, 4, 5, 8}) REQUIRE_FALSE(t.acknowledge(tp, o, ack_type::reject));
    CHECK(t.take(tp).empty());  // one take in flight per partition
    CHECK_FALSE(t.has_pending(tp));
    t.complete(tp, {});
    CHECK(t.has_pending(tp));
    CHECK(t.take(tp) == std::vector<ack_batch>{{3, 5, {J}}, {8, 8, {J}}});
  }
  SECTION("a mixed batch spans at most max_mixed offsets") {
    deliver(t, tp, 0, 5, {0, 1, 2, 3, 4, 5});
    for (std::int64_t o = 0; o < 6; ++o)
      REQUIRE_FALSE(t.acknowledge(tp, o, o % 2 ? ack_type::accept : ack_type::release));
    CHECK(t.take(tp, 4) == std::vector<ack_batch>{{0, 3, {R, A, R, A}}, {4, 5, {R, A}}});
  }
}

TEST_CASE("share acks: outcome per offset", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 4, {0, 1, 3, 4});
  deliver(t, tp1, 0, 1, {0, 1});
  for (std::int64_t o : {0, 1, 3}) REQUIRE_FALSE(t.acknowledge(tp, o, ack_type::accept));
  for (std::int64_t o : {0, 1}) REQUIRE_FALSE(t.acknowledge(tp1, o, ack_type::release));
  CHECK(t.pending_partitions() == std::vector<TopicPartition>{tp, tp1});
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 3, {A, A, G, A}}});
  CHECK(t.take(tp1) == std::vector<ack_batch>{{0, 1, {R}}});
  t.complete(tp, {});
  t.complete(tp1, make_error_code(kafka_errc::invalid_record_state));
  t.complete(tp1, {});  // nothing in flight any more: no-op
  const auto out = t.take_outcomes();
  REQUIRE(out.size() == 2);
  CHECK(out[0].tp == tp);
  CHECK(out[0].offsets == offsets{0, 1, 3});  // no GAP
  CHECK_FALSE(out[0].error);
  CHECK(out[1].tp == tp1);
  CHECK(out[1].offsets == offsets{0, 1});
  CHECK(out[1].error == kafka_errc::invalid_record_state);
  CHECK(t.take_outcomes().empty());
  CHECK(t.held(tp) == 1);  // 4, not acknowledged
  CHECK(t.held(tp1) == 0);
  CHECK(t.stats().failed == 2);
  CHECK(t.stats().lock_expired == 2);
}

TEST_CASE("share acks: acknowledgements refused as too late are counted apart from other failures",
          "[share_acks]") {
  using kgroup::data::share::lock_expired;
  CHECK(lock_expired(make_error_code(kafka_errc::invalid_record_state)));
  CHECK_FALSE(lock_expired({}));
  CHECK_FALSE(lock_expired(make_error_code(kafka_errc::share_session_not_found)));
  CHECK_FALSE(lock_expired(make_error_code(kafka_errc::invalid_share_session_epoch)));
  CHECK_FALSE(lock_expired(make_error_code(client_errc::illegal_state)));

  ack_tracker t;
  const TopicPartition tp2{"t", 2};
  deliver(t, tp, 0, 2, {0, 1, 2});
  deliver(t, tp1, 0, 1, {0, 1});
  deliver(t, tp2, 0, 0, {0});
  for (std::int64_t o : {0, 1, 2}) REQUIRE_FALSE(t.acknowledge(tp, o, ack_type::accept));
  for (std::int64_t o : {0, 1}) REQUIRE_FALSE(t.acknowledge(tp1, o, ack_type::accept));
  REQUIRE_FALSE(t.acknowledge(tp2, 0, ack_type::reject));
  (void)t.take(tp);
  (void)t.take(tp1);
  (void)t.take(tp2);
  t.complete(tp, make_error_code(kafka_errc::invalid_record_state));  // the lock had expired
  t.complete(tp1, make_error_code(kafka_errc::invalid_request));      // failed otherwise
  t.complete(tp2, {});                                                // applied
  CHECK(t.take_outcomes().size() == 3);
  CHECK(t.stats().failed == 5);
  CHECK(t.stats().lock_expired == 3);

  // Records released with their session fail with its error: not a lock expiry.
  deliver(t, tp, 3, 4, {3, 4});
  t.forget(tp, make_error_code(kafka_errc::share_session_not_found));
  REQUIRE_FALSE(t.acknowledge(tp, 3, ack_type::accept));
  CHECK(t.take_outcomes().size() == 1);
  CHECK(t.stats().failed == 6);
  CHECK(t.stats().lock_expired == 3);
}

TEST_CASE("share acks: implicit mode accepts the previous poll at the next", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 3, {0, 1, 2, 3});
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::reject));  // explicit acknowledgements still count
  CHECK(t.begin_poll(ack_mode::implicit_mode).empty());
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 3, {A, J, A, A}}});
  // A second begin_poll has nothing left to accept.
  t.complete(tp, {});
  (void)t.take_outcomes();
  CHECK(t.begin_poll(ack_mode::implicit_mode).empty());
  CHECK(t.pending_partitions().empty());
  CHECK(t.stats().accepted == 3);
  CHECK(t.stats().rejected == 1);
}

TEST_CASE("share acks: explicit mode reports what the previous poll left unacknowledged", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 2, {0, 1, 2});
  deliver(t, tp1, 5, 5, {5});
  // Records acquired but not yet returned by poll() are not part of the previous poll.
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{10, 10, 1}}, offsets{10}).error);
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::accept));
  auto missing = t.begin_poll(ack_mode::explicit_mode);
  CHECK(missing == std::vector<std::pair<TopicPartition, std::int64_t>>{{tp, 0}, {tp, 2}, {tp1, 5}});
  // Nothing changed: still missing.
  CHECK(t.begin_poll(ack_mode::explicit_mode) == missing);
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::release));
  REQUIRE_FALSE(t.acknowledge(tp, 2, ack_type::accept));
  REQUIRE_FALSE(t.acknowledge(tp1, 5, ack_type::accept));
  CHECK(t.begin_poll(ack_mode::explicit_mode).empty());
  // The new poll returns 10; it is the one missing next time.
  REQUIRE(t.on_polled(tp, offsets{10}) == 0);
  CHECK(t.begin_poll(ack_mode::explicit_mode) ==
        std::vector<std::pair<TopicPartition, std::int64_t>>{{tp, 10}});
}

TEST_CASE("share acks: RENEW keeps the record acquired (v2)", "[share_acks]") {
  ack_tracker t(true);
  deliver(t, tp, 0, 1, {0, 1});
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::renew));
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::accept));
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 1, {N, A}}});
  t.complete(tp, {});
  auto out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0, 1});
  CHECK(t.held(tp) == 1);
  // Renewed: acknowledged again later, and explicit mode asks for it.
  CHECK(t.begin_poll(ack_mode::explicit_mode) ==
        std::vector<std::pair<TopicPartition, std::int64_t>>{{tp, 0}});
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::accept));
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 0, {A}}});
  // A failed RENEW ends the record's life here.
  ack_tracker u(true);
  deliver(u, tp, 0, 0, {0});
  REQUIRE_FALSE(u.acknowledge(tp, 0, ack_type::renew));
  (void)u.take(tp);
  u.complete(tp, make_error_code(kafka_errc::invalid_record_state));
  CHECK(u.held(tp) == 0);
  CHECK(t.stats().renewed == 1);
}

TEST_CASE("share acks: forgetting a partition (session reset, lost assignment)", "[share_acks]") {
  ack_tracker t;
  const auto why = make_error_code(kafka_errc::share_session_not_found);
  deliver(t, tp, 0, 5, {0, 1, 2, 3, 5});                                     // GAP 4
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{6, 7, 1}}, offsets{6, 7}).error);  // buffered, not polled
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::accept));
  (void)t.take(tp);                                        // 0 and GAP 4 in flight
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::release));  // pending
  t.forget(tp, why);

  auto out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0, 1});
  CHECK(out[0].error == why);
  CHECK(t.held(tp) == 3);  // 2, 3, 5 lost; 6, 7 gone
  CHECK_FALSE(t.has_pending(tp));
  CHECK(t.stats().lost == 3);
  // The late answer to the in-flight request changes nothing.
  t.complete(tp, {});
  CHECK(t.take_outcomes().empty());

  // The application acknowledges a lost record: accepted here, failed in the callback.
  CHECK_FALSE(t.acknowledge(tp, 2, ack_type::accept));
  CHECK(t.acknowledge(tp, 6, ack_type::accept) == share_errc::not_acquired);
  out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{2});
  CHECK(out[0].error == why);
  CHECK(t.pending_partitions().empty());

  // Explicit mode still asks for the lost ones; implicit mode completes them with the error.
  CHECK(t.begin_poll(ack_mode::explicit_mode) ==
        std::vector<std::pair<TopicPartition, std::int64_t>>{{tp, 3}, {tp, 5}});
  CHECK(t.begin_poll(ack_mode::implicit_mode).empty());
  out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{3, 5});
  CHECK(t.held(tp) == 0);
}

TEST_CASE("share acks: a partition leaving the assignment drops only what was not handed out",
          "[share_acks]") {
  // Java's KafkaShareConsumer: the records of a revoked partition already returned by poll() keep
  // their state and their acknowledgements still go to the leader with real outcomes; only the
  // records not yet returned are dropped.
  ack_tracker t;
  deliver(t, tp, 0, 5, {0, 1, 2, 3, 5});                                     // GAP 4
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{6, 7, 1}}, offsets{6, 7}).error);  // buffered, not polled
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::accept));
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 0, {A}}, {4, 4, {G}}});  // 0 and GAP 4 in flight
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::release));                 // pending
  CHECK(t.unresolved(tp));

  CHECK(t.drop_undelivered(tp) == 2);  // 6 and 7
  CHECK(t.take_outcomes().empty());    // nothing failed
  CHECK(t.held(tp) == 5);              // 0 in flight, 1 pending, 2, 3, 5 delivered
  CHECK(t.stats().lost == 0);
  CHECK(t.acknowledge(tp, 6, ack_type::accept) == share_errc::not_acquired);
  CHECK(t.unresolved(tp));

  // The in-flight answer applies; the rest is acknowledged as usual and sent.
  t.complete(tp, {});
  auto out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0});
  CHECK_FALSE(out[0].error);
  CHECK(t.acknowledge(tp, 2, ack_type::reject) == std::error_code{});
  CHECK(t.begin_poll(ack_mode::implicit_mode).empty());  // 3 and 5 accepted
  CHECK(t.take(tp) == std::vector<ack_batch>{{1, 3, {R, J, A}}, {5, 5, {A}}});
  CHECK(t.unresolved(tp));  // in flight
  const auto expired = make_error_code(kafka_errc::invalid_record_state);
  t.complete(tp, expired);
  out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{1, 2, 3, 5});
  CHECK(out[0].error == expired);  // the broker's answer, not a session error made up here
  CHECK_FALSE(t.unresolved(tp));
  CHECK(t.held(tp) == 0);
}

TEST_CASE("share acks: after a fence, what was not handed out is released by acknowledgement, silently",
          "[share_acks]") {
  // The member rejoins and its session stays: records fetched but not yet returned by poll() go
  // back to the broker as RELEASE (else the kept session would hold them until their locks
  // expire); the application never saw them, so no outcome reaches the callback. What it was
  // given keeps its state and its acknowledgements their outcomes.
  ack_tracker t;
  deliver(t, tp, 0, 2, {0, 1, 2});
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{3, 5, 1}}, offsets{3, 4, 5}).error);  // buffered, not polled
  CHECK(t.release_undelivered(tp) == 3);
  CHECK(t.release_undelivered(tp1) == 0);
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::accept));
  REQUIRE_FALSE(t.acknowledge(tp, 2, ack_type::reject));
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 0, {A}}, {2, 5, {J, R, R, R}}});
  t.complete(tp, {});
  auto out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0, 2});  // the released ones are not told
  CHECK_FALSE(out[0].error);
  CHECK(t.stats().released >= 3);
  CHECK(t.held(tp) == 1);  // 1, delivered and not yet acknowledged
  // A session lost before the answer: the silent releases are not told either.
  deliver(t, tp1, 0, 0, {0});
  REQUIRE_FALSE(t.on_acquired(tp1, ranges{{1, 1, 1}}, offsets{1}).error);
  CHECK(t.release_undelivered(tp1) == 1);
  REQUIRE_FALSE(t.acknowledge(tp1, 0, ack_type::accept));
  t.forget(tp1, make_error_code(kafka_errc::share_session_not_found));
  out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0});
}

TEST_CASE("share acks: unresolved() counts what the application was given, not the buffer or the lost",
          "[share_acks]") {
  ack_tracker t;
  CHECK_FALSE(t.unresolved(tp));
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{0, 1, 1}}, offsets{0, 1}).error);  // buffered only
  CHECK_FALSE(t.unresolved(tp));
  REQUIRE(t.on_polled(tp, offsets{0}) == 0);
  CHECK(t.unresolved(tp));  // 0 delivered
  CHECK(t.drop_undelivered(tp) == 1);
  CHECK(t.unresolved(tp));
  t.forget(tp, make_error_code(kafka_errc::share_session_not_found));
  CHECK_FALSE(t.unresolved(tp));  // lost: its session is gone, nothing to wait for
  CHECK(t.drop_undelivered(tp1) == 0);

  // A GAP alone (an acquired offset without a record) is an acknowledgement to send.
  REQUIRE_FALSE(t.on_acquired(tp1, ranges{{0, 2, 1}}, offsets{1}).error);
  CHECK(t.drop_undelivered(tp1) == 1);
  CHECK(t.unresolved(tp1));
  CHECK(t.take(tp1) == std::vector<ack_batch>{{0, 0, {G}}, {2, 2, {G}}});
  CHECK(t.unresolved(tp1));
  t.complete(tp1, {});
  CHECK_FALSE(t.unresolved(tp1));
  CHECK(t.take_outcomes().empty());  // GAPs have no outcome
}

TEST_CASE("share acks: a lost record acquired again is a new delivery", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 0, {0});
  t.forget(tp, make_error_code(client_errc::connection_closed));
  auto res = t.on_acquired(tp, ranges{{0, 0, 2}}, offsets{0});
  REQUIRE_FALSE(res.error);
  CHECK(res.deliver == std::vector<acquired_record>{{0, 2}});
  CHECK(t.delivery_count(tp, 0) == 2);
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::not_delivered);
}

TEST_CASE("share acks: close releases everything not acknowledged", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 3, {0, 1, 2, 3});
  REQUIRE_FALSE(t.on_acquired(tp, ranges{{4, 4, 1}}, offsets{4}).error);  // buffered
  REQUIRE_FALSE(t.acknowledge(tp, 1, ack_type::accept));
  t.release_all();
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 4, {R, A, R, R, R}}});
  CHECK(t.begin_poll(ack_mode::explicit_mode).empty());  // nothing left of the last poll
  t.complete(tp, {});
  auto out = t.take_outcomes();
  REQUIRE(out.size() == 1);
  CHECK(out[0].offsets == offsets{0, 1, 2, 3, 4});
  CHECK(t.held(tp) == 0);
}

TEST_CASE("share acks: offsets already held are not delivered again (mock fault M2)", "[share_acks]") {
  ack_tracker t;
  deliver(t, tp, 0, 4, {0, 1, 3, 4});  // GAP 2 pending
  REQUIRE_FALSE(t.acknowledge(tp, 0, ack_type::accept));
  // The same range again, plus new offsets 5..6.
  auto res = t.on_acquired(tp, ranges{{0, 6, 1}}, offsets{0, 1, 3, 4, 5, 6});
  REQUIRE_FALSE(res.error);
  CHECK(res.deliver == std::vector<acquired_record>{{5, 1}, {6, 1}});
  CHECK(res.duplicate_offsets == 5);
  CHECK(res.gap_offsets == 0);
  CHECK(res.outside == 0);
  CHECK(t.acknowledge(tp, 0, ack_type::accept) == share_errc::already_acknowledged);
  CHECK(t.take(tp) == std::vector<ack_batch>{{0, 0, {A}}, {2, 2, {G}}});
  // While GAP 2 is in flight it is held too.
  res = t.on_acquired(tp, ranges{{2, 2, 1}}, offsets{});
  CHECK(res.duplicate_offsets == 1);
  CHECK(res.gap_offsets == 0);
}

TEST_CASE("share acks: hostile AcquiredRecords", "[share_acks]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  ack_tracker t;
  deliver(t, tp, 100, 101, {100, 101});
  struct bad {
    const char* what;
    ranges r;
  };
  for (const auto& b : {bad{"last < first", {{10, 5, 1}}}, bad{"overlapping", {{0, 10, 1}, {10, 20, 1}}},
                        bad{"overlapping out of order", {{5, 30, 1}, {0, 10, 1}}},
                        bad{"negative", {{-5, 3, 1}}}, bad{"up to INT64_MAX", {{0, max, 1}}}}) {
    INFO(b.what);
    auto res = t.on_acquired(tp, b.r, offsets{0, 5, 10});
    CHECK(res.error == share_errc::malformed_acquired_records);
    CHECK(res.deliver.empty());
    // Nothing tracked, nothing lost: what was held before is untouched.
    CHECK(t.held(tp) == 2);
    CHECK_FALSE(t.has_pending(tp));
  }
  CHECK(t.stats().malformed == 5);

  SECTION("a range of 2^62 offsets costs a few GAP ranges, never an entry per offset") {
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t huge = std::int64_t{1} << 62;
    auto res = t.on_acquired(tp1, ranges{{0, huge, 1}}, offsets{5, std::int64_t{1} << 61});
    REQUIRE_FALSE(res.error);
    CHECK(res.deliver.size() == 2);
    CHECK(res.gap_offsets == static_cast<std::uint64_t>(huge) - 1);
    REQUIRE(t.on_polled(tp1, offsets{5}) == 0);
    REQUIRE_FALSE(t.acknowledge(tp1, 5, ack_type::accept));
    const auto batches = t.take(tp1);
    std::size_t types = 0;
    for (const auto& b : batches) types += b.types.size();
    CHECK(types <= 16);
    REQUIRE(batches.size() == 3);
    CHECK(batches[0] == ack_batch{0, 5, {G, G, G, G, G, A}});
    CHECK(batches[1] == ack_batch{6, (std::int64_t{1} << 61) - 1, {G}});
    CHECK(batches[2] == ack_batch{(std::int64_t{1} << 61) + 1, huge, {G}});
    // The same huge range again is all held: counted, not walked.
    res = t.on_acquired(tp1, ranges{{0, huge, 1}}, offsets{});
    CHECK(res.duplicate_offsets == static_cast<std::uint64_t>(huge) + 1);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
}

// The two cores together against a broker that answers at random (acquired ranges with holes,
// re-sent ranges, acknowledgement errors, session errors, top-level errors, lost connections), in
// explicit mode: every acknowledgement the application made ends in exactly one outcome, no
// outcome comes from nowhere, and every batch taken is well formed.
TEST_CASE("share acks and session: every acknowledgement ends in exactly one outcome", "[share_acks]") {
  using kgroup::data::share::ack_map;
  using kgroup::data::share::fetch_params;
  using kgroup::data::share::partition_ids;
  using kgroup::data::share::share_session;
  using kgroup::protocol::share_fetch_request;
  using kgroup::protocol::share_fetch_response;
  using kgroup::protocol::uuid;

  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
    const std::vector<TopicPartition> tps{tp, tp1};
    uuid id;
    id.bytes.fill(7);
    partition_ids wanted;
    for (const auto& p : tps) wanted[p] = id;
    fetch_params params;
    ack_tracker t;
    share_session s;
    std::map<TopicPartition, std::int64_t> next_offset;
    std::map<TopicPartition, std::vector<std::int64_t>> buffer;  // acquired, not yet polled
    std::multiset<std::pair<TopicPartition, std::int64_t>> awaiting;
    std::string problem;

    auto collect = [&] {
      for (const auto& o : t.take_outcomes()) {
        for (auto off : o.offsets) {
          auto it = awaiting.find({o.tp, off});
          if (it == awaiting.end()) {
            problem = "an outcome nobody waits for: " + std::to_string(off);
          } else {
            awaiting.erase(it);
          }
        }
      }
    };
    auto check_batches = [&](const std::vector<ack_batch>& bs) {
      for (std::size_t i = 0; i < bs.size(); ++i) {
        const auto& b = bs[i];
        const bool shape =
            b.first <= b.last &&
            (b.types.size() == 1 || static_cast<std::int64_t>(b.types.size()) == b.last - b.first + 1);
        const bool order = i == 0 || bs[i - 1].last < b.first;
        bool types = true;
        for (auto x : b.types) types = types && x >= 0 && x <= 3;
        if (!shape || !order || !types) problem = "malformed batch at " + std::to_string(b.first);
      }
    };
    auto apply = [&](const share_session::answer_result& res) {
      for (const auto& [p, ec] : res.acks) t.complete(p, ec);
      for (const auto& p : res.lost) {
        t.forget(p, s.reset_cause());
        buffer.erase(p);
      }
    };
    auto send_fetch = [&] {
      ack_map acks;
      if (s.acks_allowed()) {
        for (const auto& p : t.pending_partitions()) {
          acks[p].topic_id = id;
          acks[p].batches = t.take(p, 1 + pick(6));
          check_batches(acks[p].batches);
        }
      }
      share_fetch_request req;
      auto built = s.build_fetch(req, 1, params, wanted, acks);
      REQUIRE_FALSE(built.error);
      for (const auto& [p, ec] : built.refused) t.complete(p, ec);
    };
    auto answer = [&](bool clean) {
      const int kind = clean ? 0 : pick(10);
      if (kind == 8) {
        apply(s.on_request_failed(make_error_code(client_errc::connection_closed)));
        return;
      }
      share_fetch_response r;
      if (kind == 9) r.error_code = pick(2) ? 123 : 30;
      for (const auto& p : tps) {
        auto& topic = r.responses.empty() ? r.responses.emplace_back() : r.responses.back();
        topic.topic_id = id;
        auto& pd = topic.partitions.emplace_back();
        pd.partition_index = p.partition;
        pd.acknowledge_error_code = (!clean && pick(5) == 0) ? 121 : 0;
        if (clean || pick(2)) continue;
        // Acquired: a new range with holes, sometimes an old one again.
        std::int64_t first = next_offset[p];
        if (first > 0 && pick(4) == 0) first = std::max<std::int64_t>(0, first - 1 - pick(6));
        const std::int64_t last = std::max(next_offset[p], first) + pick(8);
        next_offset[p] = last + 1;
        pd.acquired_records.push_back({first, last, static_cast<std::int16_t>(1 + pick(3))});
      }
      auto res = s.on_fetch_answer(r);
      apply(res);
      for (const auto& [p, pd] : res.fetched) {
        std::vector<std::int64_t> recs;
        for (const auto& a : pd->acquired_records) {
          for (auto o = a.first_offset; o <= a.last_offset; ++o) {
            if (pick(4) != 0) recs.push_back(o);
          }
        }
        auto got = t.on_acquired(p, pd->acquired_records, recs);
        REQUIRE_FALSE(got.error);
        for (const auto& d : got.deliver) buffer[p].push_back(d.offset);
      }
    };

    for (int step = 0; step < 300 && problem.empty(); ++step) {
      switch (pick(4)) {
        case 0:
          if (!s.busy()) send_fetch();
          break;
        case 1:
          if (s.busy()) answer(false);
          break;
        case 2: {
          // poll: explicit mode; when something is missing the application acknowledges it.
          const auto missing = t.begin_poll(ack_mode::explicit_mode);
          for (const auto& [p, off] : missing) {
            const auto type = static_cast<ack_type>(1 + pick(3));
            if (!t.acknowledge(p, off, type)) awaiting.insert({p, off});
          }
          if (missing.empty()) {
            for (auto& [p, offs] : buffer) REQUIRE(t.on_polled(p, offs) == 0);
            buffer.clear();
          }
          break;
        }
        case 3:
          if (pick(3) == 0) {
            // The partition leaves the assignment (and comes back): what was not handed out is
            // dropped, the rest keeps its state and still gets its outcome.
            const auto& p = tps[static_cast<std::size_t>(pick(2))];
            t.drop_undelivered(p);
            buffer.erase(p);
          }
          break;
      }
      collect();
    }
    // Drain: acknowledge what is left, send and answer until nothing is pending.
    while (!t.begin_poll(ack_mode::explicit_mode).empty()) {
      for (const auto& [p, off] : t.begin_poll(ack_mode::explicit_mode)) {
        if (!t.acknowledge(p, off, ack_type::accept)) awaiting.insert({p, off});
      }
    }
    for (int round = 0; round < 10 && (s.busy() || !t.pending_partitions().empty()); ++round) {
      if (s.busy()) answer(true);
      if (!t.pending_partitions().empty()) {
        send_fetch();
        answer(true);
      }
    }
    collect();
    INFO(problem);
    CHECK(problem.empty());
    CHECK(awaiting.empty());
    CHECK(t.pending_partitions().empty());
  }
}
