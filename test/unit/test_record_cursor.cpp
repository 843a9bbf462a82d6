// The user thread's data-path cores (src/data/positions.*, src/data/record_cursor.*): the
// position table poll() continues from, and the cursor that turns fetched data into records.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "data/next_offset.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "record_batches.hpp"

using namespace kgroup;
using namespace kgroup::data;
namespace proto = kgroup::protocol;
using kgroup::test::batch_spec;
using kgroup::test::fetched;

namespace {

const TopicPartition t0{"t", 0};
const TopicPartition t1{"t", 1};

// One legacy (magic 0 or 1) gzip wrapper message holding messages at `inner` (absolute offsets;
// the encoder stores them relative to the first for magic 1), its own offset then overwritten with
// `wrapper`: a broker's (or a hostile peer's) wrapper need not agree with what it holds, and the
// legacy CRC does not cover the offset.
std::shared_ptr<detail::fetched_data> legacy_fetched(std::int64_t fetch_offset, std::int8_t magic,
                                                     const std::vector<std::int64_t>& inner,
                                                     std::int64_t wrapper) {
  std::vector<std::string> values;
  for (auto o : inner) values.push_back("v" + std::to_string(o));
  std::vector<proto::legacy_message_input> msgs;
  for (const auto& v : values) {
    msgs.push_back(
        {0, 1, std::nullopt, proto::byte_view(reinterpret_cast<const std::uint8_t*>(v.data()), v.size())});
  }
  for (std::size_t i = 0; i < inner.size(); ++i) msgs[i].offset = inner[i];
  proto::legacy_encode_options o;
  o.magic = magic;
  o.codec = proto::compression::gzip;
  auto frame = std::make_shared<proto::bytes>();
  REQUIRE_FALSE(proto::encode_legacy_message_set(msgs, o, *frame));
  for (int i = 0; i < 8; ++i)
    (*frame)[static_cast<std::size_t>(i)] =
        static_cast<std::uint8_t>(static_cast<std::uint64_t>(wrapper) >> (56 - 8 * i));
  auto d = std::make_shared<detail::fetched_data>();
  d->tp = t0;
  d->fetch_offset = fetch_offset;
  d->records = *frame;
  d->frame = frame;
  d->bytes = frame->size();
  return d;
}

std::vector<std::int64_t> offsets(const poll_batch& b) {
  std::vector<std::int64_t> out;
  for (const auto& r : b.records) out.push_back(r.offset);
  return out;
}

position_table owning(const TopicPartition& tp, std::int64_t position) {
  position_table t;
  t.own(tp);
  t.position_found(tp, position, -1, /*forced=*/false);
  return t;
}

}  // namespace

// ---- the position table ------------------------------------------------------------------------

TEST_CASE("positions: ownership, retain and drop", "[positions]") {
  position_table t;
  t.own(t0);
  t.own(t1);
  t.position_found(t0, 7, 2, false);
  t.own(t0);  // keeps the existing entry
  REQUIRE(t.position(t0) == detail::epoch_offset{7, 2});
  CHECK_FALSE(t.position(t1).has_value());  // owned, position not known yet
  CHECK(t.retain({t1}) == std::set<TopicPartition>{t0});
  CHECK_FALSE(t.owns(t0));
  CHECK(t.owns(t1));
  t.drop(t1);
  CHECK(t.entries().empty());
}

// Issue 30, item 2: a position computed for a partition's previous ownership (a reset or
// committed-offset answer queued behind its revoke) re-created the entry after the revoke dropped
// it: commit_sync() then committed it for the new owner's generation, poll() returned its records.
TEST_CASE("positions: a position for a partition no longer owned is ignored, not re-created", "[positions]") {
  auto t = owning(t0, 10);
  t.drop(t0);  // revoked or lost
  CHECK_FALSE(t.position_found(t0, 42, 3, /*forced=*/false));
  CHECK_FALSE(t.position_found(t0, 43, 3, /*forced=*/true));
  CHECK_FALSE(t.owns(t0));
  CHECK(t.positions().empty());  // nothing for commit_sync() to commit
  detail::fetched_data d;
  d.tp = t0;
  d.fetch_offset = 42;
  CHECK(t.fit(d) == fetched_fit::not_owned);
}

TEST_CASE("positions: a user seek wins over positions the fetcher computed before it", "[positions]") {
  auto t = owning(t0, 10);
  t.seek(t0, 3, 1);
  REQUIRE(t.position(t0) == detail::epoch_offset{3, 1});
  // A reset answer computed before the fetcher applied the seek: ignored, even when forced.
  CHECK_FALSE(t.position_found(t0, 50, -1, /*forced=*/true));
  CHECK(t.position(t0)->offset == 3);
  t.seek_applied(t0);
  // The initial (committed) position never overrides a user seek...
  CHECK_FALSE(t.position_found(t0, 10, -1, /*forced=*/false));
  CHECK(t.position(t0)->offset == 3);
  // ...a reset does, and reports that data read from the old position is stale.
  CHECK(t.position_found(t0, 0, -1, /*forced=*/true));
  CHECK(t.position(t0)->offset == 0);
  CHECK_FALSE(t.position_found(t0, 0, -1, /*forced=*/true));  // unchanged: nothing stale
}

TEST_CASE("positions: seek_to leaves the position unknown until the fetcher resolves it", "[positions]") {
  auto t = owning(t0, 10);
  t.seek_to(t0);
  CHECK_FALSE(t.position(t0).has_value());
  CHECK_FALSE(t.position_found(t0, 0, -1, true));  // stale: computed before the seek applied
  t.seek_applied(t0);
  t.seek_applied(t0);  // one too many is harmless
  CHECK(t.position_found(t0, 0, -1, true));
  // seek_to clears a user seek: the committed position may set it again.
  CHECK(t.find(t0)->user_seeked == false);
}

TEST_CASE("positions: pause, resume and which fetched data fits", "[positions]") {
  auto t = owning(t0, 10);
  detail::fetched_data d;
  d.tp = t0;
  d.fetch_offset = 10;
  CHECK(t.fit(d) == fetched_fit::usable);
  d.fetch_offset = 9;
  CHECK(t.fit(d) == fetched_fit::other_offset);
  d.fetch_offset = 10;
  t.pause(t0);
  CHECK(t.fit(d) == fetched_fit::paused);
  CHECK(t.paused() == std::set<TopicPartition>{t0});
  CHECK(t.resume(t0) == detail::epoch_offset{10, -1});
  CHECK(t.paused().empty());
  CHECK_FALSE(t.resume(t1).has_value());  // not owned: nothing to resume
  d.tp = t1;
  CHECK(t.fit(d) == fetched_fit::not_owned);
  t.own(t1);
  CHECK(t.fit(d) == fetched_fit::position_unknown);
  CHECK(std::string(to_string(fetched_fit::other_offset)).find("offset") != std::string::npos);
}

TEST_CASE("positions: lag counts to the high watermark, or the last stable offset under read_committed",
          "[positions]") {
  auto t = owning(t0, 10);
  CHECK_FALSE(t.lag(t0).has_value());  // no fetched data yet
  detail::fetched_data d;
  d.tp = t0;
  d.high_watermark = 30;
  d.last_stable_offset = 20;
  d.log_start_offset = 4;
  d.replica = 3;
  t.note_fetched(d, /*read_committed=*/false);
  CHECK(t.lag(t0) == 20);
  t.note_fetched(d, /*read_committed=*/true);
  CHECK(t.lag(t0) == 10);
  CHECK(t.find(t0)->replica == 3);
  CHECK(t.find(t0)->log_start_offset == 4);
  t.position_found(t0, 40, -1, true);  // past the end (a reset to a newer end): never negative
  CHECK(t.lag(t0) == 0);
  CHECK(t.positions() == std::map<TopicPartition, detail::epoch_offset>{{t0, {40, -1}}});
}

TEST_CASE("positions: a cut below the fetcher's position is applied against the application's", "[positions]") {
  // Issue 30, item 1: the fetcher validated its prefetch position and found the log diverged at
  // 10 (epoch 7). Java validates the consumer's own position and only ever moves it back.
  SECTION("at or below the cut: the position stays") {
    auto t = owning(t0, 5);
    CHECK(t.cut(t0, 10, 7, true) == cut_verdict::before);
    CHECK(t.position(t0) == detail::epoch_offset{5, -1});
    CHECK(t.cut(t0, 5, 7, true) == cut_verdict::before);
    CHECK(t.position(t0)->offset == 5);
  }
  SECTION("past the cut: moved back to it, or left for the caller (auto.offset.reset=none)") {
    auto t = owning(t0, 15);
    CHECK(t.cut(t0, 10, 7, false) == cut_verdict::past);
    CHECK(t.position(t0)->offset == 15);
    CHECK(t.cut(t0, 10, 7, true) == cut_verdict::moved_back);
    CHECK(t.position(t0) == detail::epoch_offset{10, 7});
  }
  SECTION("where the log diverged is not known: past") {
    auto t = owning(t0, 5);
    CHECK(t.cut(t0, -1, -1, true) == cut_verdict::past);
    CHECK(t.position(t0)->offset == 5);
  }
  SECTION("position unknown: the cut is the position") {
    position_table t;
    t.own(t0);
    CHECK(t.cut(t0, 10, 7, false) == cut_verdict::before);
    CHECK(t.position(t0) == detail::epoch_offset{10, 7});
  }
  SECTION("a user seek in flight, or not owned: ignored") {
    auto t = owning(t0, 15);
    t.seek(t0, 3, -1);
    CHECK(t.cut(t0, 10, 7, true) == cut_verdict::stale);
    CHECK(t.position(t0)->offset == 3);
    CHECK(t.cut(t1, 10, 7, true) == cut_verdict::stale);
    CHECK_FALSE(t.owns(t1));
  }
}

// ---- the record cursor -------------------------------------------------------------------------

TEST_CASE("cursor: data fetched before a cut is read up to it; the data after the cut chains on", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  SECTION("limited before it was started (the fetcher marked the queued data)") {
    auto d = fetched(t0, 0, {{.base = 0, .count = 5}, {.base = 5, .count = 5}, {.base = 10, .count = 5}});
    d->limit = 8;
    d->limit_epoch = 7;
    c.start(d);
    poll_batch b;
    CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
    CHECK(offsets(b) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
    // The epoch of the record before it (the logs agree below a cut, so it is the cut's epoch in
    // practice; the test's differ to tell them apart).
    CHECK(t.position(t0) == detail::epoch_offset{8, 5});
    CHECK(b.advanced.at(t0) == detail::epoch_offset{8, 5});
    c.finish();
    // The new leader's data, fetched from the cut, continues the position.
    detail::fetched_data next;
    next.tp = t0;
    next.fetch_offset = 8;
    CHECK(t.fit(next) == fetched_fit::usable);
  }
  SECTION("cut while it is read (max.poll.records split it)") {
    c.start(fetched(t0, 0, {{.base = 0, .count = 10}}));
    poll_batch first;
    REQUIRE(c.read(first, 3, t) == record_cursor::stop::full);
    CHECK(offsets(first) == std::vector<std::int64_t>{0, 1, 2});
    c.cut(t1, 4, 7);  // another partition: nothing
    c.cut(t0, 6, 7);
    c.cut(t0, 8, 7);  // a later cut further on does not lift the first
    poll_batch second;
    CHECK(c.read(second, 500, t) == record_cursor::stop::exhausted);
    CHECK(offsets(second) == std::vector<std::int64_t>{3, 4, 5});
    CHECK(t.position(t0) == detail::epoch_offset{6, 5});
  }
  SECTION("the cut in a gap of the data (compaction): the position moves to the cut, no further") {
    auto d = fetched(t0, 0, {{.base = 0, .count = 2, .last_offset_delta = 3}, {.base = 9, .count = 3}});
    d->limit = 6;
    c.start(d);
    poll_batch b;
    CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
    CHECK(offsets(b) == std::vector<std::int64_t>{0, 1});
    CHECK(t.position(t0) == detail::epoch_offset{6, -1});  // moved to the cut: its epoch
  }
}

TEST_CASE("cursor: reads batches in order and moves the position past each record", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  c.start(fetched(t0, 0, {{.base = 0, .count = 3, .epoch = 4}, {.base = 3, .count = 2, .epoch = 6}}));
  REQUIRE(c.open());
  REQUIRE(*c.partition() == t0);
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(b.records[0].value == "v0");
  CHECK(b.records[0].topic == "t");
  CHECK(b.records[2].leader_epoch == 4);
  CHECK(b.records[3].leader_epoch == 6);
  CHECK(t.position(t0) == detail::epoch_offset{5, 6});
  CHECK(b.advanced.at(t0) == detail::epoch_offset{5, 6});
  CHECK_FALSE(b.owners.empty());  // the records view the fetched frame
  CHECK(c.finish() > 0);
  CHECK_FALSE(c.open());
}

TEST_CASE("cursor: max.poll.records splits a batch across polls, keeping its buffer alive", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  c.start(fetched(t0, 0, {{.base = 0, .count = 5, .codec = proto::compression::lz4}}));
  poll_batch first;
  REQUIRE(c.read(first, 2, t) == record_cursor::stop::full);
  CHECK(offsets(first) == std::vector<std::int64_t>{0, 1});
  CHECK(t.position(t0)->offset == 2);
  poll_batch second;
  REQUIRE(c.read(second, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(second) == std::vector<std::int64_t>{2, 3, 4});
  CHECK(second.records[0].value == "v2");
  // The half-read compressed batch's decompressed buffer is owned by the second poll's records
  // as well (the fetched frame, then the batch's buffer).
  CHECK(second.owners.size() >= 2);
}

// Issue 31, item 2: what one poll() holds is bounded by poll_bytes (fetch.max.bytes); the record
// that would pass it is given back and read by the next poll(), and the first record of a poll
// is always returned so no record is ever stuck.
TEST_CASE("cursor: a poll stops at its byte budget and the next one goes on, none lost", "[cursor]") {
  auto t = owning(t0, 0);
  auto d = fetched(t0, 0, {{.base = 0, .count = 3, .codec = proto::compression::lz4},
                           {.base = 3, .count = 3, .codec = proto::compression::lz4}});
  // The data, one decompressed batch (three short records, under 64 bytes) and two records fit; a
  // third record does not.
  static_assert(sizeof(ConsumerRecord) > 64);
  const std::size_t budget = d->bytes + 64 + 2 * sizeof(ConsumerRecord);
  record_cursor c({.poll_bytes = budget});
  c.start(d);
  std::vector<std::int64_t> all;
  std::size_t polls = 0;
  for (auto stop = record_cursor::stop::full; stop == record_cursor::stop::full; ++polls) {
    poll_batch b;
    stop = c.read(b, 500, t);
    CHECK_FALSE(b.records.empty());
    CHECK(b.records.size() <= 2);
    CHECK((b.held <= budget || b.records.size() == 1));
    for (const auto& r : b.records) CHECK(r.value == "v" + std::to_string(r.offset));
    const auto o = offsets(b);
    all.insert(all.end(), o.begin(), o.end());
  }
  CHECK(all == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(polls >= 3);
  CHECK(t.position(t0)->offset == 6);
  SECTION("a budget of nothing still returns one record per poll") {
    auto t2 = owning(t0, 0);
    record_cursor one({.poll_bytes = 0});
    one.start(fetched(t0, 0, {{.base = 0, .count = 2}}));
    poll_batch first, second;
    CHECK(one.read(first, 500, t2) == record_cursor::stop::full);
    CHECK(offsets(first) == std::vector<std::int64_t>{0});
    CHECK(one.read(second, 500, t2) != record_cursor::stop::corrupt);
    CHECK(offsets(second) == std::vector<std::int64_t>{1});
  }
}

TEST_CASE("cursor: a batch read only to be skipped is not held by the poll's records", "[cursor]") {
  auto t = owning(t0, 3);
  record_cursor c({});
  // 0-2 (compressed) lie before the position: decompressed, skipped, never pinned.
  c.start(fetched(t0, 3, {{.base = 0, .count = 3, .codec = proto::compression::lz4}, {.base = 3, .count = 2}}));
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{3, 4});
  CHECK(b.owners.size() == 1);  // the fetched data only
}

TEST_CASE("cursor: a compressed batch above max_batch_bytes, or a record whose headers would, is corrupt data",
          "[cursor]") {
  SECTION("the batch") {
    auto t = owning(t0, 0);
    record_cursor c({.max_batch_bytes = 8});
    c.start(fetched(t0, 0, {{.base = 0, .count = 3, .codec = proto::compression::lz4}}));
    poll_batch b;
    CHECK(c.read(b, 500, t) == record_cursor::stop::corrupt);
    // Refused for its declared count before decompression, or while decompressing.
    CHECK((c.error() == make_error_code(proto::codec_errc::decompression_bound) ||
           c.error() == make_error_code(proto::codec_errc::oversized)));
    CHECK(b.records.empty());
    CHECK(t.position(t0)->offset == 0);
  }
  SECTION("the headers") {
    std::vector<proto::header_input> headers(64, proto::header_input{"", std::nullopt});
    const proto::record_input rec{std::nullopt, std::nullopt, 1, headers, {}};
    auto frame = std::make_shared<proto::bytes>();
    proto::batch_encode_options o;
    o.base_offset = 0;
    REQUIRE_FALSE(proto::encode_record_batch(std::span(&rec, 1), o, *frame));
    auto d = std::make_shared<detail::fetched_data>();
    d->tp = t0;
    d->records = *frame;
    d->frame = frame;
    d->bytes = frame->size();
    auto t = owning(t0, 0);
    // 64 headers take 128 bytes on the wire and 64 x sizeof(Header) decoded.
    record_cursor refused({.max_batch_bytes = 63 * sizeof(Header)});
    refused.start(d);
    poll_batch b;
    CHECK(refused.read(b, 500, t) == record_cursor::stop::corrupt);
    CHECK(refused.error() == make_error_code(proto::codec_errc::oversized));
    CHECK(b.records.empty());
    record_cursor taken({.max_batch_bytes = 64 * sizeof(Header)});
    taken.start(d);
    poll_batch ok;
    CHECK(taken.read(ok, 500, t) == record_cursor::stop::exhausted);
    REQUIRE(ok.records.size() == 1);
    CHECK(ok.records[0].headers.size() == 64);
  }
}

TEST_CASE("cursor: records before the position are skipped, batches before it too", "[cursor]") {
  auto t = owning(t0, 4);
  record_cursor c({});
  // Fetched from 4 but the broker returned whole batches: 0-2 (before) and 3-5 (straddling).
  auto d = fetched(t0, 4, {{.base = 0, .count = 3}, {.base = 3, .count = 3}});
  c.start(d);
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{4, 5});
  CHECK(t.position(t0)->offset == 6);
}

TEST_CASE("cursor: control batches are never returned, the position moves past them", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  c.start(fetched(t0, 0,
                  {{.base = 0, .count = 2, .transactional = true, .producer_id = 9},
                   {.base = 2, .count = 1, .transactional = true, .control = true, .producer_id = 9}}));
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{0, 1});  // read_uncommitted: the data, not the marker
  CHECK(t.position(t0)->offset == 3);
  CHECK(b.advanced.at(t0).offset == 3);
}

TEST_CASE("cursor: read_committed skips aborted transactions and still advances", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({.read_committed = true});
  auto d = fetched(t0, 0,
                   {{.base = 0, .count = 2, .transactional = true, .producer_id = 9},
                    {.base = 2, .count = 1, .transactional = true, .control = true, .producer_id = 9},
                    {.base = 3, .count = 2}});
  d->aborted = {{9, 0}};
  c.start(d);
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{3, 4});
  CHECK(t.position(t0)->offset == 5);
}

TEST_CASE("cursor: a compacted batch's trailing gap is stepped over", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  // Records at 0 and 1 survive; the batch's last offset is 9.
  c.start(fetched(t0, 0, {{.base = 0, .count = 2, .last_offset_delta = 9}}));
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::exhausted);
  CHECK(offsets(b) == std::vector<std::int64_t>{0, 1});
  CHECK(t.position(t0)->offset == 10);
}

TEST_CASE("cursor: corrupt data stops at the position without moving past it", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({.verify_crc = true});
  auto d = fetched(t0, 0, {{.base = 0, .count = 2}, {.base = 2, .count = 2}});
  // Flip a byte in the second batch's records: its CRC no longer matches.
  auto frame = std::make_shared<proto::bytes>(d->records.begin(), d->records.end());
  frame->back() ^= 0xff;
  d->records = *frame;
  d->frame = frame;
  c.start(d);
  poll_batch b;
  REQUIRE(c.read(b, 500, t) == record_cursor::stop::corrupt);
  CHECK(offsets(b) == std::vector<std::int64_t>{0, 1});  // the good batch before it is returned
  CHECK(t.position(t0)->offset == 2);                    // and the position stops at the bad one
  CHECK(c.error());
  CHECK(std::string(c.error_what()) == "record batch");
}

TEST_CASE("cursor: a partition given up while its data is open is reported, nothing read", "[cursor]") {
  auto t = owning(t0, 0);
  record_cursor c({});
  c.start(fetched(t0, 0, {{.base = 0, .count = 2}}));
  t.drop(t0);
  poll_batch b;
  CHECK(c.read(b, 500, t) == record_cursor::stop::not_owned);
  CHECK(b.records.empty());
  CHECK(b.owners.empty());
}

TEST_CASE("cursor: offsets a position cannot follow are corrupt data (issue 31, kgroup-fuzz-broker)", "[cursor]") {
  // A broker's batch near the largest int64: the position after it overflowed (undefined behaviour).
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  auto t = owning(t0, max - 5);
  record_cursor c({});
  poll_batch b;
  SECTION("a batch whose last offset is past int64") {
    c.start(fetched(t0, max - 5, {{.base = max - 1, .count = 2, .last_offset_delta = 2}}));
    REQUIRE(c.read(b, 500, t) == record_cursor::stop::corrupt);
    CHECK(b.records.empty());
    CHECK(t.position(t0)->offset == max - 5);
    CHECK(std::string(c.error_what()) == "record batch");
  }
  SECTION("a batch whose last offset is the largest (a compacted tail up to it)") {
    c.start(fetched(t0, max - 5, {{.base = max - 3, .count = 1, .last_offset_delta = 3}}));
    REQUIRE(c.read(b, 500, t) == record_cursor::stop::corrupt);
    CHECK(b.records.empty());
    CHECK(t.position(t0)->offset == max - 5);
    CHECK(std::string(c.error_what()) == "record batch");
  }
}

TEST_CASE("cursor: a record outside its batch's offsets is corrupt data (issue 31, kgroup-fuzz-broker)", "[cursor]") {
  // The fetcher fetches next after the batch's last offset; a record past it moved the position
  // beyond that, and every later answer was dropped as data for another position (a stall).
  auto t = owning(t0, 0);
  record_cursor c({});
  c.start(fetched(t0, 0, {{.base = 0, .count = 2, .last_offset_delta = 0}}));  // records 0 and 1, last offset 0
  poll_batch b;
  REQUIRE(c.read(b, 500, t) == record_cursor::stop::corrupt);
  CHECK(offsets(b) == std::vector<std::int64_t>{0});
  CHECK(t.position(t0)->offset == 1);
  CHECK(std::string(c.error_what()) == "record (its offset is outside its batch)");
}

TEST_CASE("cursor: a legacy compressed wrapper ends where the fetcher goes on, or is corrupt",
          "[cursor][legacy]") {
  // The fetcher fetches next after a legacy wrapper's own offset (next_fetch_offset reads only the
  // outer message, as Java's lastOffset() is the wrapper's). Magic-0 inner offsets are absolute and
  // need not agree with it; a cursor that ended elsewhere left the position off the fetcher's, and
  // every later answer was dropped as data for another position: the partition stalled, silently.
  // Whatever the wrapper holds, the cursor either ends where the fetcher continues, returning no
  // record twice and none below the position, or stops at the wrapper as corrupt data.
  record_cursor c({});
  poll_batch b;
  auto read_all = [&](position_table& t, const std::shared_ptr<detail::fetched_data>& d) {
    c.finish();
    b = {};
    c.start(d);
    const auto stop = c.read(b, 500, t);
    if (stop == record_cursor::stop::exhausted) {
      const std::int64_t next = data::next_fetch_offset(d->records, d->fetch_offset);
      CHECK(t.position(t0)->offset == next);
      detail::fetched_data following;  // the fetcher's next answer for this partition
      following.tp = t0;
      following.fetch_offset = next;
      CHECK(t.fit(following) == fetched_fit::usable);
    }
    return stop;
  };
  SECTION("magic 0, the wrapper's offset past its last message: read, the position after the wrapper") {
    auto t = owning(t0, 50);
    REQUIRE(read_all(t, legacy_fetched(50, 0, {50, 51, 52}, 60)) == record_cursor::stop::exhausted);
    CHECK(offsets(b) == std::vector<std::int64_t>{50, 51, 52});
    CHECK(t.position(t0)->offset == 61);
  }
  SECTION("magic 0, the same wrapper with every message below the position") {
    auto t = owning(t0, 55);
    REQUIRE(read_all(t, legacy_fetched(55, 0, {50, 51, 52}, 60)) == record_cursor::stop::exhausted);
    CHECK(b.records.empty());
    CHECK(t.position(t0)->offset == 61);
  }
  SECTION("magic 0, consistent, fetched from the middle of the wrapper") {
    auto t = owning(t0, 52);
    REQUIRE(read_all(t, legacy_fetched(52, 0, {50, 51, 52, 53}, 53)) == record_cursor::stop::exhausted);
    CHECK(offsets(b) == std::vector<std::int64_t>{52, 53});
    CHECK(t.position(t0)->offset == 54);
  }
  SECTION("magic 1: the wrapper's offset makes the inner offsets absolute, so they end at it") {
    auto t = owning(t0, 50);
    REQUIRE(read_all(t, legacy_fetched(50, 1, {50, 51, 52}, 60)) == record_cursor::stop::exhausted);
    CHECK(offsets(b) == std::vector<std::int64_t>{58, 59, 60});
    CHECK(t.position(t0)->offset == 61);
  }
  auto corrupt = [&](const std::shared_ptr<detail::fetched_data>& d) {
    auto t = owning(t0, d->fetch_offset);
    REQUIRE(read_all(t, d) == record_cursor::stop::corrupt);
    CHECK(b.records.empty());
    CHECK(t.position(t0)->offset == d->fetch_offset);
    CHECK(std::string(c.error_what()) == "record batch");
  };
  SECTION("magic 0, the wrapper's offset below its last message (Java would move the position back)") {
    corrupt(legacy_fetched(50, 0, {50, 51, 52}, 51));
  }
  SECTION("magic 0, the wrapper's offset below its first message") {
    corrupt(legacy_fetched(50, 0, {50, 51, 52}, 40));
  }
  SECTION("magic 1, the wrapper below its last relative offset: negative offsets (Java refuses it too)") {
    corrupt(legacy_fetched(0, 1, {50, 51, 52}, 1));
  }
  SECTION("inner offsets not increasing: a record would be dropped or come out of order") {
    for (std::int8_t magic : {std::int8_t{0}, std::int8_t{1}}) {
      INFO("magic " << int{magic});
      corrupt(legacy_fetched(50, magic, {50, 50, 51}, 51));
      corrupt(legacy_fetched(50, magic, {50, 52, 51}, 52));
    }
  }
}
