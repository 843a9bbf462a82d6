// The user thread's data path (src/consumer/data_reader.*): fetched data through the position table
// and the record cursor into poll()'s records, what the application and the fetcher do to a
// partition, the data errors poll() raises; and who a commit speaks for
// (fetch::commit_identity). The fetcher is a recording fetcher_port, the background thread is
// played by pushing into shared_state by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "consumer/data_reader.hpp"
#include "data/committer.hpp"
#include "fetch/standalone_coordinator.hpp"
#include "net/cluster.hpp"
#include "record_batches.hpp"

using namespace kgroup;
using kgroup::detail::cut_kind;
using kgroup::detail::epoch_offset;
using kgroup::group::listener_kind;
using kgroup::test::fetched;

namespace {

const TopicPartition t0{"t", 0};
const TopicPartition t1{"t", 1};

struct partition_at {
  TopicPartition tp;
  std::int64_t offset;
  std::int32_t epoch;
  bool operator==(const partition_at&) const = default;
};

// Records every call the data reader makes of the fetcher.
struct recording_fetcher final : detail::fetcher_port {
  int wakes = 0;
  std::vector<partition_at> refetches;
  std::vector<partition_at> seeks;
  std::vector<std::pair<std::set<TopicPartition>, bool>> seek_tos;
  std::vector<std::set<TopicPartition>> pauses;
  std::vector<std::map<TopicPartition, epoch_offset>> resumes;
  std::vector<std::pair<TopicPartition, std::int64_t>> accepted_cuts;
  std::vector<TopicPartition> resets;

  void wake() override { ++wakes; }
  void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    refetches.push_back({tp, offset, epoch});
  }
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) override {
    seeks.push_back({tp, offset, epoch});
  }
  void seek_to(const std::set<TopicPartition>& tps, bool beginning) override {
    seek_tos.emplace_back(tps, beginning);
  }
  void pause(const std::set<TopicPartition>& tps) override { pauses.push_back(tps); }
  void resume(const std::map<TopicPartition, epoch_offset>& positions) override {
    resumes.push_back(positions);
  }
  void cut_accepted(const TopicPartition& tp, std::int64_t offset) override {
    accepted_cuts.emplace_back(tp, offset);
  }
  void reset_position(const TopicPartition& tp) override { resets.push_back(tp); }
};

// One consumer's user thread: the reader, the state it shares with the (absent) background thread
// and the fetcher it asks.
struct reader_harness {
  detail::shared_state shared;
  detail::poll_stats stats;
  recording_fetcher fetcher;
  detail::data_reader reader{shared, stats, fetcher};

  explicit reader_harness(std::size_t max_poll_records = 500) {
    detail::data_reader::options o;
    o.max_poll_records = max_poll_records;
    o.cursor.verify_crc = true;
    reader.configure(o);
  }

  // A listener call the user thread ran.
  void owns(std::vector<TopicPartition> tps) {
    reader.ownership_changed({.kind = listener_kind::assigned, .partitions = std::move(tps)});
  }
  void gives_up(listener_kind kind, std::vector<TopicPartition> tps) {
    reader.ownership_changed({.kind = kind, .partitions = std::move(tps)});
  }
  // The committed offset (or a reset) the fetcher found for an owned partition.
  void position(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch = -1) {
    reader.position_event({.tp = tp, .offset = offset, .epoch = epoch}, /*owned=*/true);
  }
  void cut(const TopicPartition& tp, cut_kind kind, std::int64_t offset, std::int32_t epoch, bool halted) {
    reader.position_event({.tp = tp, .offset = offset, .epoch = epoch, .cut = kind, .halted = halted},
                          /*owned=*/true);
  }
  // The fetcher queues data and counts it against its buffer.
  std::size_t queue(const std::shared_ptr<detail::fetched_data>& d) {
    std::lock_guard lock(shared.mutex);
    shared.buffered_bytes += d->bytes;
    shared.fetched.push_back(*d);
    return d->bytes;
  }
  std::size_t buffered() {
    std::lock_guard lock(shared.mutex);
    return shared.buffered_bytes;
  }
  std::vector<std::int64_t> queued_offsets() {
    std::lock_guard lock(shared.mutex);
    std::vector<std::int64_t> out;
    for (const auto& d : shared.fetched) out.push_back(d.fetch_offset);
    return out;
  }
  std::map<TopicPartition, epoch_offset> consumed() {
    std::lock_guard lock(shared.mutex);
    return shared.consumed;
  }
  std::optional<epoch_offset> position_of(const TopicPartition& tp) const {
    return reader.positions().position(tp);
  }
};

std::vector<std::int64_t> offsets(const data::poll_batch& b) {
  std::vector<std::int64_t> out;
  for (const auto& r : b.records) out.push_back(r.offset);
  return out;
}

std::vector<std::pair<std::int32_t, std::int64_t>> partition_offsets(const data::poll_batch& b) {
  std::vector<std::pair<std::int32_t, std::int64_t>> out;
  for (const auto& r : b.records) out.emplace_back(r.partition, r.offset);
  return out;
}

}  // namespace

// ---- drain(): fetched data into records --------------------------------------------------------

TEST_CASE(
    "data_reader: usable data is returned up to max.poll.records and becomes committable at the next poll",
    "[data_reader]") {
  reader_harness h(/*max_poll_records=*/3);
  h.owns({t0});
  h.position(t0, 10);
  const auto bytes = h.queue(fetched(t0, 10, {{.base = 10, .count = 5, .epoch = 4}}));

  auto first = h.reader.drain();
  CHECK(offsets(first) == std::vector<std::int64_t>{10, 11, 12});
  CHECK(h.position_of(t0) == epoch_offset{13, 4});
  // The data is still being read: its bytes stay counted, the fetcher is not woken.
  CHECK(h.buffered() == bytes);
  CHECK(h.fetcher.wakes == 0);
  // Returned is not processed: auto-commit may not commit it before the application polls again.
  CHECK(h.consumed().empty());

  h.reader.publish_returned();  // the next poll()
  CHECK(h.consumed() == std::map<TopicPartition, epoch_offset>{{t0, {13, 4}}});

  auto second = h.reader.drain();
  CHECK(offsets(second) == std::vector<std::int64_t>{13, 14});
  CHECK(h.position_of(t0) == epoch_offset{15, 4});
  CHECK(h.consumed().at(t0) == epoch_offset{13, 4});  // still what the first poll returned
  // Read to its end: the bytes are freed and the fetcher, which may be waiting for room, woken.
  CHECK(h.buffered() == 0);
  CHECK(h.fetcher.wakes == 1);

  h.reader.publish_returned();
  CHECK(h.consumed().at(t0) == epoch_offset{15, 4});
  h.reader.publish_returned();  // nothing returned since: unchanged
  CHECK(h.consumed().at(t0) == epoch_offset{15, 4});
  CHECK(h.reader.current_positions() == OffsetMap{{t0, {15, "", 4}}});
  CHECK(h.reader.commit_positions({t0, t1}).size() == 1);
}

TEST_CASE("data_reader: stale data is dropped, its bytes freed and the fetcher woken", "[data_reader]") {
  reader_harness h;
  h.owns({t0, t1});
  h.position(t0, 10);
  h.position(t1, 0);

  SECTION("fetched from another offset") {
    h.queue(fetched(t0, 7, {{.base = 7, .count = 3}}));
    h.queue(fetched(t0, 10, {{.base = 10, .count = 2}}));
    auto b = h.reader.drain();
    CHECK(offsets(b) == std::vector<std::int64_t>{10, 11});
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 2);  // the dropped data, then the data read to its end
  }
  SECTION("of a paused partition") {
    h.reader.pause({t0});
    CHECK(h.fetcher.pauses == std::vector<std::set<TopicPartition>>{{t0}});
    h.queue(fetched(t0, 10, {{.base = 10, .count = 2}}));
    CHECK(h.reader.drain().records.empty());
    CHECK(h.queued_offsets().empty());
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 1);
    CHECK(h.position_of(t0) == epoch_offset{10, -1});
    // Resumed where it stopped.
    h.reader.resume({t0, TopicPartition{"other", 0}});
    REQUIRE(h.fetcher.resumes.size() == 1);
    CHECK(h.fetcher.resumes[0] == std::map<TopicPartition, epoch_offset>{{t0, {10, -1}}});
    auto after = fetched(t0, 10, {{.base = 10, .count = 2}});
    after->chain = 1;  // fetched after the fetcher received the resume
    h.queue(after);
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
  }
  SECTION("of a revoked partition") {
    h.gives_up(listener_kind::revoked, {t0});
    h.queue(fetched(t0, 10, {{.base = 10, .count = 2}}));
    h.queue(fetched(t1, 0, {{.base = 0, .count = 1}}));
    auto b = h.reader.drain();
    CHECK(partition_offsets(b) == std::vector<std::pair<std::int32_t, std::int64_t>>{{1, 0}});
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 2);
  }
  SECTION("of a partition whose position is not known yet") {
    h.owns({TopicPartition{"u", 0}});
    h.queue(fetched({"u", 0}, 0, {{.base = 0, .count = 1}}));
    CHECK(h.reader.drain().records.empty());
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 1);
  }
}

TEST_CASE("data_reader: data that only looks stale while its events are queued waits for them",
          "[data_reader]") {
  reader_harness h;
  h.owns({t0});
  h.position(t0, 10);
  // The background thread queued a position, then fetched from it; the answer arrived before
  // poll() ran the event.
  const detail::position_event reset{.tp = t0, .offset = 20, .forced = true};
  const auto bytes = h.queue(fetched(t0, 20, {{.base = 20, .count = 2}}));
  h.queue(fetched(t1, 0, {{.base = 0, .count = 1}}));  // of a partition whose assignment is queued
  const detail::listener_call assigned{.kind = listener_kind::assigned, .partitions = {t1}};

  SECTION("a position event") {
    h.shared.push(reset);
    auto b = h.reader.drain();
    // Nothing dropped, nothing read past it: the data is back in front, in its order.
    CHECK(b.records.empty());
    CHECK(h.queued_offsets() == std::vector<std::int64_t>{20, 0});
    CHECK(h.buffered() > bytes);
    CHECK(h.fetcher.wakes == 0);
    // poll() runs the event and drains again.
    h.shared.events.clear();
    h.reader.position_event(reset, true);
    h.shared.push(assigned);
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{20, 21});
    CHECK(h.queued_offsets() == std::vector<std::int64_t>{0});  // t1's data waits for its assignment
    h.shared.events.clear();
    h.reader.ownership_changed(assigned);
    h.position(t1, 0);
    CHECK(partition_offsets(h.reader.drain()) == std::vector<std::pair<std::int32_t, std::int64_t>>{{1, 0}});
    CHECK(h.buffered() == 0);
  }
  SECTION("a listener call") {
    h.shared.push(assigned);
    CHECK(h.reader.drain().records.empty());
    CHECK(h.queued_offsets() == std::vector<std::int64_t>{20, 0});
    CHECK(h.fetcher.wakes == 0);
  }
  SECTION("other events do not hold it: it is dropped") {
    h.shared.push(detail::data_error{
        .tp = t0, .code = make_error_code(client_errc::offset_out_of_range), .message = "x"});
    h.shared.push(detail::commit_done{});
    CHECK(h.reader.drain().records.empty());
    CHECK(h.queued_offsets().empty());
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 2);
  }
}

// ---- what the application does -----------------------------------------------------------------

TEST_CASE("data_reader: seek moves the position, tells the fetcher and what auto-commit commits",
          "[data_reader]") {
  reader_harness h(/*max_poll_records=*/2);
  h.owns({t0, t1});
  h.position(t0, 10);
  h.position(t1, 0);

  SECTION("nothing returned yet: nothing becomes committable") {
    h.reader.seek(t0, 4, 2);
    CHECK(h.position_of(t0) == epoch_offset{4, 2});
    CHECK(h.fetcher.seeks == std::vector<partition_at>{{t0, 4, 2}});
    CHECK(h.consumed().empty());
  }
  SECTION("consumed: the target is committed from now on") {
    h.queue(fetched(t0, 10, {{.base = 10, .count = 2}}));
    CHECK(h.reader.drain().records.size() == 2);
    h.reader.publish_returned();
    REQUIRE(h.consumed().at(t0).offset == 12);
    h.reader.seek(t0, 4, 2);
    CHECK(h.consumed() == std::map<TopicPartition, epoch_offset>{{t0, {4, 2}}});
    CHECK(h.fetcher.seeks == std::vector<partition_at>{{t0, 4, 2}});
  }
  SECTION("returned by the last poll only: the target, never what was returned past it") {
    const auto bytes = h.queue(fetched(t0, 10, {{.base = 10, .count = 5}}));
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
    REQUIRE(h.buffered() == bytes);
    h.reader.seek(t0, 4, 2);
    CHECK(h.consumed().at(t0) == epoch_offset{4, 2});
    // The data being read was fetched for the old position: let go of and the fetcher woken.
    CHECK(h.buffered() == 0);
    CHECK(h.fetcher.wakes == 1);
    h.reader.publish_returned();  // the next poll()
    CHECK(h.consumed().at(t0) == epoch_offset{4, 2});
    // Data fetched before the seek was applied is stale; the fetcher tags what it fetches after
    // it with its count of the application's restarts (one seek).
    h.queue(fetched(t0, 12, {{.base = 12, .count = 1}}));
    auto after = fetched(t0, 4, {{.base = 4, .count = 1}});
    after->chain = 1;
    h.queue(after);
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{4});
  }
  SECTION("positions the fetcher computed before applying the seek are ignored") {
    h.reader.seek(t0, 4, 2);
    h.reader.position_event({.tp = t0, .offset = 50, .forced = true}, true);
    CHECK(h.position_of(t0) == epoch_offset{4, 2});
    h.reader.position_event({.tp = t0, .seek_applied = true}, true);
    h.reader.position_event({.tp = t0, .offset = 50, .forced = true}, true);  // a reset after it
    CHECK(h.position_of(t0) == epoch_offset{50, -1});
  }
  SECTION("seek_to leaves the position to the fetcher") {
    h.reader.seek_to({t0}, /*beginning=*/true);
    CHECK_FALSE(h.position_of(t0).has_value());
    REQUIRE(h.fetcher.seek_tos.size() == 1);
    CHECK(h.fetcher.seek_tos[0] == std::pair<std::set<TopicPartition>, bool>{{t0}, true});
    h.reader.position_event({.tp = t0, .seek_applied = true}, true);
    h.reader.position_event({.tp = t0, .offset = 0, .forced = true}, true);
    CHECK(h.position_of(t0) == epoch_offset{0, -1});
  }
  SECTION("seek_to resolved by the fetcher: auto-commit commits the new position, as after a seek") {
    // Java's auto-commit commits the position (allConsumed) once the reset is resolved: after
    // seek_to_beginning() the old position must not stay committable, or a consumer that stops
    // before returning a record leaves the rewind uncommitted and the next owner skips it.
    h.queue(fetched(t0, 10, {{.base = 10, .count = 4}}));
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
    h.reader.publish_returned();
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{12, 13});  // returned, not yet published
    REQUIRE(h.consumed().at(t0).offset == 12);
    h.reader.seek_to({t0}, /*beginning=*/true);
    h.reader.position_event({.tp = t0, .seek_applied = true}, true);
    h.reader.position_event({.tp = t0, .offset = 0, .forced = true, .epoch = 1}, true);
    CHECK(h.consumed().at(t0) == epoch_offset{0, 1});
    h.reader.publish_returned();  // the next poll(): what was returned before the rewind is not committable
    CHECK(h.consumed().at(t0) == epoch_offset{0, 1});
    // A partition nothing was consumed of stays out of auto-commit until it returns records.
    h.reader.seek_to({t1}, /*beginning=*/false);
    h.reader.position_event({.tp = t1, .seek_applied = true}, true);
    h.reader.position_event({.tp = t1, .offset = 30, .forced = true}, true);
    CHECK(h.consumed().count(t1) == 0);
  }
}

TEST_CASE("data_reader: a revoked or lost partition is never committed nor returned again", "[data_reader]") {
  const auto kind = GENERATE(listener_kind::revoked, listener_kind::lost);
  CAPTURE(group::to_string(kind));
  reader_harness h(/*max_poll_records=*/1);
  h.owns({t0, t1});
  h.position(t0, 10);
  h.position(t1, 0);
  const auto bytes = h.queue(fetched(t0, 10, {{.base = 10, .count = 3}}));
  h.queue(fetched(t0, 13, {{.base = 13, .count = 1}}));
  h.queue(fetched(t1, 0, {{.base = 0, .count = 1}}));
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10});
  h.reader.publish_returned();
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{11});  // returned, not yet published
  REQUIRE(h.consumed().count(t0) == 1);
  REQUIRE(h.buffered() > bytes);

  h.gives_up(kind, {t0});
  CHECK(h.consumed().empty());
  CHECK_FALSE(h.reader.positions().owns(t0));
  CHECK(h.fetcher.wakes == 1);  // the data being read was let go of
  h.reader.publish_returned();  // what the last poll returned of it is not committable either
  CHECK(h.consumed().empty());
  // Its queued data is dropped; the other partition's is read.
  CHECK(partition_offsets(h.reader.drain()) == std::vector<std::pair<std::int32_t, std::int64_t>>{{1, 0}});
  CHECK(h.reader.drain().records.empty());
  CHECK(h.buffered() == 0);
  // A position for it queued behind the call does not bring it back.
  h.position(t0, 14);
  CHECK_FALSE(h.reader.positions().owns(t0));
  CHECK(h.reader.current_positions().count(t0) == 0);
}

TEST_CASE("data_reader: assign() owns exactly its partitions and forgets the others' commits",
          "[data_reader]") {
  reader_harness h;
  h.reader.assign({t0, t1});
  h.position(t0, 0);
  h.position(t1, 0);
  h.queue(fetched(t0, 0, {{.base = 0, .count = 1}}));
  h.queue(fetched(t1, 0, {{.base = 0, .count = 1}}));
  CHECK(h.reader.drain().records.size() == 2);
  h.reader.publish_returned();
  REQUIRE(h.consumed().size() == 2);
  h.reader.assign({t1});
  CHECK_FALSE(h.reader.positions().owns(t0));
  CHECK(h.reader.positions().owns(t1));
  CHECK(h.consumed() == std::map<TopicPartition, epoch_offset>{{t1, {1, 5}}});
}

TEST_CASE("data_reader: the published partition metrics follow the assignment and the positions",
          "[data_reader]") {
  // poll() publishes them every 100 ms; with the same partitions the entries are rewritten in
  // place (issue 37), which must still show every change.
  reader_harness h;
  const TopicPartition t2{"u", 2};
  h.owns({t0, t1});
  h.position(t0, 5);
  detail::metrics_state m;
  h.reader.publish_partitions(m, {t0, t1});
  REQUIRE(m.partitions.size() == 2);
  CHECK(m.partitions.at(t0).position == 5);
  CHECK(m.partitions.at(t1).position == -1);
  h.position(t1, 7);
  h.reader.publish_partitions(m, {t0, t1});
  REQUIRE(m.partitions.size() == 2);
  CHECK(m.partitions.at(t0).position == 5);
  CHECK(m.partitions.at(t1).position == 7);
  // Another set: exactly its partitions, the new one without a position yet.
  h.owns({t2});
  h.reader.publish_partitions(m, {t1, t2});
  REQUIRE(m.partitions.size() == 2);
  CHECK(m.partitions.count(t0) == 0);
  CHECK(m.partitions.at(t1).position == 7);
  CHECK(m.partitions.at(t2).position == -1);
  // The same set, a partition given up meanwhile: its entry goes back to no position.
  h.gives_up(listener_kind::revoked, {t1});
  h.reader.publish_partitions(m, {t1, t2});
  REQUIRE(m.partitions.size() == 2);
  CHECK(m.partitions.at(t1).position == -1);
  h.reader.publish_partitions(m, {});
  CHECK(m.partitions.empty());
}

// ---- what the fetcher finds: cuts -----------------------------------------------------------------

TEST_CASE("data_reader: a log cut against the application's position", "[data_reader]") {
  reader_harness h(/*max_poll_records=*/2);
  h.owns({t0});
  h.position(t0, 10);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 10, .epoch = 3}}));
  REQUIRE(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
  REQUIRE(h.position_of(t0) == epoch_offset{12, 3});

  SECTION("diverged past the position with auto.offset.reset=none: poll() raises LogTruncationError") {
    h.cut(t0, cut_kind::diverged, 11, 2, /*halted=*/true);
    CHECK(h.position_of(t0) == epoch_offset{12, 3});  // the application decides (seek)
    CHECK(h.fetcher.accepted_cuts.empty());
    CHECK(h.fetcher.resets.empty());
    CHECK(h.fetcher.wakes == 1);  // the data read from past the cut is let go of
    try {
      h.reader.raise_data_error();
      FAIL("no LogTruncationError");
    } catch (const LogTruncationError& e) {
      CHECK(e.code() == make_error_code(client_errc::log_truncation));
      CHECK(e.divergent_offsets() == OffsetMap{{t0, {11, "", 2}}});
      CHECK(std::string(e.what()).find("past offset 11") != std::string::npos);
    }
    CHECK_NOTHROW(h.reader.raise_data_error());  // raised once
    CHECK(h.reader.drain().records.empty());
  }
  SECTION("truncations of several partitions are raised as one; one given up since is not") {
    const TopicPartition t2{"t", 2};
    h.owns({t1, t2});
    h.position(t1, 30);
    h.position(t2, 40);
    h.cut(t0, cut_kind::diverged, 11, 2, true);
    h.cut(t1, cut_kind::diverged, -1, -1, true);  // where it diverged is unknown: not in the map
    h.cut(t2, cut_kind::diverged, 35, 1, true);
    h.gives_up(listener_kind::lost, {t2});
    try {
      h.reader.raise_data_error();
      FAIL("no LogTruncationError");
    } catch (const LogTruncationError& e) {
      CHECK(e.divergent_offsets() == OffsetMap{{t0, {11, "", 2}}});
      const std::string what = e.what();
      CHECK(what.find("t-0") != std::string::npos);
      CHECK(what.find("t-1") != std::string::npos);
      CHECK(what.find("t-2") == std::string::npos);
    }
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
  SECTION("diverged past the position with a reset policy: moved back to the divergence") {
    h.reader.publish_returned();
    REQUIRE(h.consumed().at(t0) == epoch_offset{12, 3});
    h.cut(t0, cut_kind::diverged, 11, 2, /*halted=*/false);
    CHECK(h.position_of(t0) == epoch_offset{11, 2});
    CHECK(h.consumed().at(t0) == epoch_offset{11, 2});  // never past the divergence
    CHECK_NOTHROW(h.reader.raise_data_error());
    CHECK(h.fetcher.accepted_cuts.empty());
    CHECK(h.fetcher.resets.empty());
  }
  SECTION("at or above the position, halted: accepted, and the data is read up to the cut") {
    h.cut(t0, cut_kind::diverged, 15, 3, /*halted=*/true);
    CHECK(h.fetcher.accepted_cuts == std::vector<std::pair<TopicPartition, std::int64_t>>{{t0, 15}});
    CHECK(h.position_of(t0) == epoch_offset{12, 3});
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{12, 13});
    CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{14});  // nothing at or past the cut
    CHECK(h.position_of(t0) == epoch_offset{15, 3});
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
  SECTION("at the position, not halted: nothing asked of the fetcher") {
    h.cut(t0, cut_kind::log_end, 12, 3, /*halted=*/false);
    CHECK(h.fetcher.accepted_cuts.empty());
    CHECK(h.fetcher.resets.empty());
    CHECK(h.position_of(t0) == epoch_offset{12, 3});
    CHECK(h.reader.drain().records.empty());  // the data ends at the cut
  }
  SECTION("the log ends below the position, not halted: the reset policy applies") {
    h.cut(t0, cut_kind::log_end, 11, -1, /*halted=*/false);
    CHECK(h.fetcher.resets == std::vector<TopicPartition>{t0});
    CHECK_FALSE(h.position_of(t0).has_value());  // until the fetcher's reset answers
    CHECK_NOTHROW(h.reader.raise_data_error());
    h.reader.position_event({.tp = t0, .seek_applied = true}, true);
    h.position(t0, 11);
    CHECK(h.position_of(t0) == epoch_offset{11, -1});
  }
  SECTION("the log ends below the position, halted: poll() raises offset out of range") {
    h.cut(t0, cut_kind::log_end, 11, -1, /*halted=*/true);
    CHECK(h.fetcher.resets.empty());
    CHECK(h.position_of(t0) == epoch_offset{12, 3});
    try {
      h.reader.raise_data_error();
      FAIL("no error");
    } catch (const LogTruncationError&) {
      FAIL("a log's end is not a truncation");
    } catch (const PartitionError& e) {
      CHECK(e.code() == make_error_code(client_errc::offset_out_of_range));
      // The partition and the position out of range as fields, not only in the message.
      CHECK(e.partition() == t0);
      CHECK(e.offset() == 12);
      CHECK_FALSE(e.is_retriable());
      CHECK_FALSE(e.is_fatal());
    }
  }
  SECTION("a seek in flight: the seek decides") {
    h.reader.seek(t0, 0, -1);
    h.cut(t0, cut_kind::diverged, 5, 2, true);
    CHECK(h.position_of(t0) == epoch_offset{0, -1});
    CHECK(h.fetcher.accepted_cuts.empty());
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
  SECTION("a cut of a partition not owned is ignored") {
    h.reader.position_event({.tp = t1, .offset = 1, .cut = cut_kind::diverged, .halted = true},
                            /*owned=*/false);
    CHECK(h.fetcher.accepted_cuts.empty());
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
}

// ---- what the fetcher finds: corrupt data ---------------------------------------------------------

TEST_CASE("data_reader: corrupt data is raised at the position, which stays, and fetched again",
          "[data_reader]") {
  reader_harness h;
  h.owns({t0});
  h.position(t0, 0);
  auto d = fetched(t0, 0, {{.base = 0, .count = 2, .epoch = 6}, {.base = 2, .count = 2, .epoch = 6}});
  // A flipped byte in the second batch's records: its CRC no longer matches (check.crcs).
  auto frame = std::make_shared<protocol::bytes>(d->records.begin(), d->records.end());
  frame->back() ^= 0xff;
  d->records = *frame;
  d->frame = frame;
  h.queue(d);

  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{0, 1});  // the good batch before it
  CHECK(h.position_of(t0) == epoch_offset{2, 6});
  CHECK(h.fetcher.refetches == std::vector<partition_at>{{t0, 2, 6}});
  CHECK(h.buffered() == 0);
  CHECK(h.fetcher.wakes == 1);

  SECTION("raised by the next poll()") {
    try {
      h.reader.raise_data_error();
      FAIL("no error");
    } catch (const PartitionError& e) {
      CHECK(e.code() == make_error_code(client_errc::corrupt_record));
      CHECK(e.partition() == t0);
      CHECK(e.offset() == 2);  // the corrupt record's: seek(offset() + 1) skips it
      const std::string what = e.what();
      CHECK(what.find("t-0") != std::string::npos);
      CHECK(what.find("at offset 2") != std::string::npos);
    }
    CHECK(h.position_of(t0) == epoch_offset{2, 6});
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
  SECTION("not raised once the partition is given up") {
    h.gives_up(listener_kind::revoked, {t0});
    CHECK_NOTHROW(h.reader.raise_data_error());
  }
}

// ---- who a commit speaks for ----------------------------------------------------------------------

// Found by the simulator (issue 33, kgroup-sim --seed 40): after pause() and resume() the
// fetcher fetches again from the application's position, while data it fetched before it received
// the resume is still queued. The reader read that old data (it starts at the position), moved past
// where the new chain starts, then dropped every chunk of the new chain as "fetched from another
// offset": the partition stalled for good. The old chain's data is never read once the application
// restarted the partition's fetching.
TEST_CASE("data_reader: after resume() only the fetcher's new chain of data is read, none is skipped",
          "[data_reader]") {
  reader_harness h(/*max_poll_records=*/100);
  h.owns({t0});
  h.position(t0, 10);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 5}}));  // fetched before the pause
  h.reader.pause({t0});
  h.reader.resume({t0});
  REQUIRE(h.fetcher.resumes.size() == 1);
  CHECK(h.fetcher.resumes[0] == std::map<TopicPartition, epoch_offset>{{t0, {10, -1}}});
  h.queue(fetched(t0, 15, {{.base = 15, .count = 5}}));  // the old chain, before the resume reached it
  // The new chain from the position, tagged with the fetcher's count of restarts.
  for (auto [base, count] : {std::pair<std::int64_t, int>{10, 8}, {18, 4}}) {
    auto d = fetched(t0, base, {{.base = base, .count = count}});
    d->chain = 1;
    h.queue(d);
  }
  std::vector<std::int64_t> read;
  for (int polls = 0; polls < 4; ++polls) {
    for (auto o : offsets(h.reader.drain())) read.push_back(o);
  }
  std::vector<std::int64_t> want;
  for (std::int64_t o = 10; o < 22; ++o) want.push_back(o);
  CHECK(read == want);
  CHECK(h.position_of(t0) == epoch_offset{22, 5});
  CHECK(h.queued_offsets().empty());
  CHECK(h.buffered() == 0);
}

// Found by kgroup-sim (issue 33; `kgroup-sim --mix-commits --seed 4`, invariant 4). commit_sync()
// without offsets commits the positions (past what the last poll() returned); auto-commit commits
// the consumed positions, which lag one poll() behind (records count as processed once the
// application polls again), so the next auto-commit moved the group's committed offset back, and a
// restart delivered the records between them twice. Java's auto-commit commits the position too.
TEST_CASE("data_reader: after commit_sync() of the positions, auto-commit commits from them, never below",
          "[data_reader][sim_finding]") {
  reader_harness h(/*max_poll_records=*/2);
  h.owns({t0, t1});
  h.position(t0, 10);
  h.position(t1, 0);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 4}}));
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
  h.reader.publish_returned();  // poll()
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{12, 13});
  REQUIRE(h.consumed().at(t0).offset == 12);  // one poll() behind
  const auto committed = h.reader.positions_for_commit();
  CHECK(committed.at(t0).offset == 14);
  CHECK(committed.at(t1).offset == 0);
  CHECK(h.consumed().at(t0) == epoch_offset{14, 5});
  CHECK(h.consumed().count(t1) == 0);  // nothing returned of it: auto-commit leaves it alone
  h.reader.publish_returned();         // the next poll() keeps it
  CHECK(h.consumed().at(t0) == epoch_offset{14, 5});
}

// Found by kgroup-sim --group (seed 58, invariant G3). close() (and unsubscribe()) revoke outside
// poll(): the auto-commit before the revoke commits the positions (commit_positions), but the
// consumed positions stayed one poll() behind, so the background auto-commit that fired while the
// revoke callback ran committed them and moved the group's offset back; the next owner read the
// records between them again.
TEST_CASE("data_reader: the auto-commit before a revoke leaves auto-commit nothing lower to commit",
          "[data_reader][sim_finding]") {
  reader_harness h(/*max_poll_records=*/2);
  h.owns({t0, t1});
  h.position(t0, 10);
  h.position(t1, 0);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 4}}));
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
  h.reader.publish_returned();  // poll()
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{12, 13});
  REQUIRE(h.consumed().at(t0).offset == 12);  // one poll() behind
  // close(): no poll() in between; the revoke commits the positions first.
  const auto revoke_commit = h.reader.commit_positions({t0, t1});
  CHECK(revoke_commit.at(t0).offset == 14);
  CHECK(revoke_commit.at(t1).offset == 0);
  CHECK(h.consumed().at(t0) == epoch_offset{14, 5});
  CHECK(h.consumed().count(t1) == 0);  // nothing returned of it: auto-commit leaves it alone
  const std::map<TopicPartition, std::int64_t> last{{t0, 14}, {t1, 0}};
  CHECK(data::auto_commit_due(h.consumed(), {t0, t1}, last).empty());
}

// Found by kgroup-sim --group (seed 2920, invariant G3). A revoke callback outlived the member's
// generation: the coordinator removed it, the core gave the partition up and rejoined, and the new
// generation assigned the same partition to it again while the callback still ran. The background
// auto-commit then committed what was consumed in the earlier ownership, under the new generation,
// below the offset the partition had been committed at meanwhile.
TEST_CASE("shared_state: a partition the fetcher gives up leaves nothing consumed for auto-commit",
          "[data_reader][sim_finding]") {
  detail::shared_state shared;
  shared.consumed[t0] = {209, 3};
  shared.consumed[t1] = {5, 3};
  shared.drop_fetched({t0});
  CHECK(shared.consumed.count(t0) == 0);
  CHECK(shared.consumed.at(t1).offset == 5);
  // Owned again: auto-commit has nothing of it until poll() publishes what the new ownership returned.
  CHECK(data::auto_commit_due(shared.consumed, {t0, t1}, {{t1, 5}}).empty());
}

// From the review of the fix above: a resume() that makes the fetcher fetch nothing again must not
// count as a restart on either side, or the data the fetcher queued before it (still the only
// chain) would be dropped and the partition stall.
TEST_CASE("data_reader: resume() of a running partition, or of one without a position, restarts nothing",
          "[data_reader]") {
  reader_harness h;
  h.owns({t0, t1});
  h.position(t0, 10);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 3}}));
  h.reader.resume({t0});  // not paused: nothing to do, as in Java
  REQUIRE(h.fetcher.resumes.size() == 1);
  CHECK(h.fetcher.resumes[0].empty());
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11, 12});
  // Paused before its committed offset is known: unpaused, and the fetcher goes on from where it
  // is (it fetches again only from a known position).
  h.reader.pause({t1});
  h.reader.resume({t1});
  REQUIRE(h.fetcher.resumes.size() == 2);
  CHECK(h.fetcher.resumes[1] == std::map<TopicPartition, epoch_offset>{{t1, {-1, -1}}});
  h.position(t1, 0);
  h.queue(fetched(t1, 0, {{.base = 0, .count = 2}}));
  CHECK(partition_offsets(h.reader.drain()) ==
        std::vector<std::pair<std::int32_t, std::int64_t>>{{1, 0}, {1, 1}});
}

// Also from that review: commits of explicit offsets (record.offset() + 1 after each record) left
// auto-commit one poll() behind them, so its next commit moved the group's offset back.
TEST_CASE("data_reader: after a commit of explicit offsets, auto-commit does not commit below them",
          "[data_reader][sim_finding]") {
  reader_harness h(/*max_poll_records=*/2);
  h.owns({t0});
  h.position(t0, 10);
  h.queue(fetched(t0, 10, {{.base = 10, .count = 4}}));
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{10, 11});
  h.reader.publish_returned();
  CHECK(offsets(h.reader.drain()) == std::vector<std::int64_t>{12, 13});
  REQUIRE(h.consumed().at(t0).offset == 12);
  h.reader.offsets_committed({{t0, {11, "", std::nullopt}}});  // below what auto-commit commits
  CHECK(h.consumed().at(t0).offset == 12);
  h.reader.offsets_committed({{t0, {20, "", std::nullopt}}});  // past what poll() returned
  CHECK(h.consumed().at(t0).offset == 12);
  h.reader.offsets_committed({{t0, {13, "", 5}}});
  CHECK(h.consumed().at(t0) == epoch_offset{13, 5});
  h.reader.publish_returned();  // the next poll()
  CHECK(h.consumed().at(t0) == epoch_offset{14, 5});
}

TEST_CASE("shared_state: a partition the fetcher no longer owns loses its queued data", "[data_reader]") {
  detail::shared_state shared;
  for (const auto& d : {fetched(t0, 0, {{.base = 0, .count = 1}}), fetched(t1, 0, {{.base = 0, .count = 1}}),
                        fetched(t0, 1, {{.base = 1, .count = 1}})}) {
    shared.fetched.push_back(*d);
    shared.buffered_bytes += d->bytes;
  }
  const auto t1_bytes = shared.fetched[1].bytes;
  shared.drop_fetched({t0});
  REQUIRE(shared.fetched.size() == 1);
  CHECK(shared.fetched.front().tp == t1);
  CHECK(shared.buffered_bytes == t1_bytes);
}

TEST_CASE("commit_identity: a subscription speaks for the membership, anything else for nobody",
          "[data_reader]") {
  boost::asio::io_context io;  // never run: a cluster without brokers answers at once
  auto cluster = std::make_shared<net::cluster>(io, net::cluster_options{});
  int lookups = 0;
  auto coordinator = std::make_unique<fetch::standalone_coordinator>(
      cluster, "g", std::chrono::milliseconds(1000), [&] { ++lookups; });
  const auto* standalone = coordinator.get();
  int standing_reads = 0;
  fetch::commit_identity who(/*group_mode=*/true);
  who.set_coordinator(std::move(coordinator));
  who.set_standing([&] {
    ++standing_reads;
    group::standing s;
    s.generation = 7;
    s.member_id = "m-1";
    s.coordinator = 3;
    s.stable = false;
    return s;
  });

  const auto mode = GENERATE(fetch::commit_identity::mode::none, fetch::commit_identity::mode::manual);
  who.set_mode(mode);
  SECTION("assign() or nothing: generation -1, no member, the standalone coordinator") {
    const auto id = who.identity();
    CHECK(id.generation == -1);
    CHECK(id.member_id.empty());
    CHECK_FALSE(id.instance_id.has_value());
    CHECK(id.coordinator == standalone->node());
    CHECK(id.stable);
    CHECK_FALSE(id.subscribed);
    CHECK(id.group_mode);
    CHECK(standing_reads == 0);
    // No usable coordinator: the standalone one is looked up (here it fails at once: no brokers).
    who.coordinator_unusable(/*failed=*/false);
    CHECK(lookups == 1);
    who.coordinator_unusable(/*failed=*/true);
    CHECK(lookups == 2);
  }
  SECTION("subscribed: the membership core's standing") {
    who.set_mode(fetch::commit_identity::mode::subscribed);
    const auto id = who.identity();
    CHECK(standing_reads == 1);
    CHECK(id.generation == 7);
    CHECK(id.member_id == "m-1");
    CHECK(id.coordinator == 3);
    CHECK_FALSE(id.stable);
    CHECK(id.subscribed);
    CHECK(id.group_mode);
    // The membership core looks its coordinator up: the standalone one is not asked.
    who.coordinator_unusable(/*failed=*/true);
    CHECK(lookups == 0);
    CHECK(who.current() == fetch::commit_identity::mode::subscribed);
  }
}

TEST_CASE("commit_identity: without a group.id nothing is looked up", "[data_reader]") {
  int lookups = 0;
  fetch::commit_identity who(/*group_mode=*/false);
  // No cluster at all: without a group nothing may reach it.
  who.set_coordinator(std::make_unique<fetch::standalone_coordinator>(
      nullptr, "", std::chrono::milliseconds(1000), [&] { ++lookups; }));
  who.set_mode(fetch::commit_identity::mode::manual);
  const auto id = who.identity();
  CHECK_FALSE(id.group_mode);
  CHECK(id.generation == -1);
  CHECK_FALSE(id.coordinator.has_value());
  who.coordinator_unusable(true);
  CHECK(lookups == 0);
}

// Found by kgroup-sim (issue 33; `kgroup-sim --seed 40`, invariant 6, liveness). After a seek (or a
// resume) the fetcher starts a new chain of Fetches from the position, but data it queued before
// still fits the position (same fetch offset) and is read; once that old chain ends inside a chunk
// of the new one, every later chunk is dropped as "other offset", nothing asks the fetcher to
// fetch from the position again, and the partition falls silent.
TEST_CASE("data_reader: data queued before a seek does not strand the position off the fetcher's new chain",
          "[data_reader][sim_finding]") {
  reader_harness h;
  h.owns({t0});
  h.position(t0, 0);
  // Prefetched before the seek: [0, 5) and [5, 10).
  h.queue(fetched(t0, 0, {{.base = 0, .count = 5}}));
  h.queue(fetched(t0, 5, {{.base = 5, .count = 5}}));
  h.reader.seek(t0, 0, -1);
  h.reader.position_event({.tp = t0, .seek_applied = true}, true);
  // The fetcher follows the seek from 0 with other chunk boundaries, [0, 3), [3, 8), [8, 12), and
  // tags them with its count of the application's restarts (one seek).
  for (auto [base, count] : {std::pair<std::int64_t, int>{0, 3}, {3, 5}, {8, 4}}) {
    auto d = fetched(t0, base, {{.base = base, .count = count}});
    d->chain = 1;
    h.queue(d);
  }
  std::vector<std::int64_t> got;
  for (int i = 0; i < 6; ++i) {
    for (auto o : offsets(h.reader.drain())) got.push_back(o);
  }
  INFO("returned " << got.size() << " records, position " << h.position_of(t0)->offset);
  CHECK(got == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(h.queued_offsets().empty());
}
