// The fetcher's position table (src/data/fetch_positions.*): the per-partition states and their
// transition table, the decisions on events (committed offset, reset, validation, fetch errors,
// user calls), the preferred-replica choice and the metadata-missing rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "data/fetch_positions.hpp"

using namespace kgroup;
using namespace kgroup::data;
using std::chrono::milliseconds;
using fs = fetch_state;

namespace {

const TopicPartition t0{"t", 0};
const std::chrono::steady_clock::time_point t_start{std::chrono::seconds(1000)};

const std::vector<fs> all_states = {fs::needs_committed,  fs::fetching_committed, fs::needs_reset,
                                    fs::resetting,        fs::needs_validation,   fs::validating,
                                    fs::awaiting_seek,    fs::ready};

// Drives `p` into `target` along documented transitions only.
void reach(fetch_positions& fp, fetch_part& p, fs target) {
  const std::map<fs, std::vector<fs>> path = {
      {fs::needs_committed, {}},
      {fs::fetching_committed, {fs::fetching_committed}},
      {fs::needs_reset, {fs::needs_reset}},
      {fs::resetting, {fs::needs_reset, fs::resetting}},
      {fs::needs_validation, {fs::needs_validation}},
      {fs::validating, {fs::needs_validation, fs::validating}},
      {fs::awaiting_seek, {fs::needs_validation, fs::validating, fs::awaiting_seek}},
      {fs::ready, {fs::ready}},
  };
  for (auto s : path.at(target)) REQUIRE(fp.transition(t0, p, s, "test"));
  REQUIRE(p.state() == target);
}

// The entry of `tp` in `fp`, owned from now on.
fetch_part& owned(fetch_positions& fp, const TopicPartition& tp) {
  if (!fp.find(tp)) {
    std::set<TopicPartition> all{tp};
    for (const auto& [t, p] : fp.parts()) all.insert(t);
    fp.assign(all);
  }
  return *fp.find(tp);
}

}  // namespace

TEST_CASE("fetch positions: a new partition needs its committed offset", "[fetchpos]") {
  fetch_positions fp;
  auto& p = owned(fp, t0);
  CHECK(p.state() == fs::needs_committed);
  CHECK(p.fetch_pos() == -1);
  CHECK(p.epoch() == -1);
  CHECK(p.preferred_replica() == -1);
}

TEST_CASE("fetch positions: the transition table", "[fetchpos]") {
  // The in-flight states are entered only from their "needs" state; a user seek (ready,
  // needs_validation) and seek_to (needs_reset) are allowed from every state.
  const std::map<fs, std::vector<fs>> allowed = {
      {fs::needs_committed, {fs::fetching_committed}},
      {fs::fetching_committed, {fs::needs_committed}},
      {fs::needs_reset, {fs::resetting}},
      {fs::resetting, {}},
      {fs::needs_validation, {fs::validating}},
      {fs::validating, {fs::awaiting_seek}},
      {fs::awaiting_seek, {}},
      {fs::ready, {fs::awaiting_seek}},
  };
  for (auto from : all_states) {
    for (auto to : all_states) {
      const auto& extra = allowed.at(from);
      const bool expected = to == fs::ready || to == fs::needs_validation || to == fs::needs_reset ||
                            std::find(extra.begin(), extra.end(), to) != extra.end();
      INFO(to_string(from) << " -> " << to_string(to));
      CHECK(fetch_transition_allowed(from, to) == expected);
    }
  }
}

TEST_CASE("fetch positions: every documented transition is applied from every state", "[fetchpos]") {
  for (auto from : all_states) {
    for (auto to : all_states) {
      if (from == to || !fetch_transition_allowed(from, to)) continue;
      fetch_positions fp;
      auto& p = owned(fp, t0);
      reach(fp, p, from);
      INFO(to_string(from) << " -> " << to_string(to));
      CHECK(fp.transition(t0, p, to, "test"));
      CHECK(p.state() == to);
      CHECK(fp.invalid_transitions() == 0);
    }
  }
}

TEST_CASE("fetch positions: an illegal transition is refused, counted and reported", "[fetchpos]") {
  std::vector<std::string> reported;
  fetch_positions fp(reset_policy::latest, [&](const std::string& m) { reported.push_back(m); });
  auto& p = owned(fp, t0);

  SECTION("validating without needs_validation") {
    CHECK_FALSE(fp.transition(t0, p, fs::validating, "bug"));
    CHECK(p.state() == fs::needs_committed);
    REQUIRE(reported.size() == 1);
    CHECK(reported[0].find("t-0") != std::string::npos);
    CHECK(reported[0].find("needs_committed -> validating") != std::string::npos);
    CHECK(reported[0].find("bug") != std::string::npos);
    CHECK(fp.last_refusal() == reported[0]);
  }
  SECTION("awaiting_seek from needs_reset") {
    reach(fp, p, fs::needs_reset);
    CHECK_FALSE(fp.transition(t0, p, fs::awaiting_seek, "bug"));
    CHECK(p.state() == fs::needs_reset);
    CHECK(reported.size() == 1);
  }
  SECTION("a stale OffsetFetch answer cannot put a reset partition back to needs_committed") {
    reach(fp, p, fs::resetting);
    CHECK_FALSE(fp.transition(t0, p, fs::needs_committed, "bug"));
    CHECK(p.state() == fs::resetting);
  }
  CHECK(fp.invalid_transitions() == 1);
}

TEST_CASE("fetch positions: the same state is no transition", "[fetchpos]") {
  fetch_positions fp;
  auto& p = owned(fp, t0);
  reach(fp, p, fs::awaiting_seek);
  CHECK(fp.transition(t0, p, fs::awaiting_seek, "again"));
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: preferred read replica and its expiry", "[fetchpos]") {
  fetch_positions fp(reset_policy::latest, {}, fetch_timing{milliseconds(10), milliseconds(100)});
  auto& p = owned(fp, t0);
  SECTION("none: the leader") {
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 1);
  }
  SECTION("valid and known: the replica") {
    const auto o = fp.replica_answer(p, 1, 0, 3, true, t_start);
    CHECK(o.what == replica_outcome::verdict::replica_named);
    CHECK(o.changed);
    CHECK(o.replica == 3);
    CHECK(p.replica_until() == t_start + milliseconds(100));
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 3);
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start + milliseconds(99)) == 3);
    CHECK(p.preferred_replica() == 3);
    SECTION("expired: the leader, and the replica is forgotten") {
      CHECK(fetch_positions::fetch_node(p, 1, true, t_start + milliseconds(100)) == 1);
      CHECK(p.preferred_replica() == -1);
      CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 1);
    }
    SECTION("no longer in metadata: the leader, and the replica is forgotten") {
      CHECK(fetch_positions::fetch_node(p, 1, false, t_start) == 1);
      CHECK(p.preferred_replica() == -1);
    }
  }
}

TEST_CASE("fetch positions: missing from metadata is reported once, after a later refresh", "[fetchpos]") {
  fetch_part p;
  SECTION("manual assignment") {
    CHECK(fetch_positions::missing(p, false, 4, true) == missing_verdict::present);
    // First seen missing after 4 refreshes: not reported until a refresh made after that.
    CHECK(fetch_positions::missing(p, true, 4, true) == missing_verdict::missing);
    CHECK(fetch_positions::missing(p, true, 4, true) == missing_verdict::missing);
    CHECK(fetch_positions::missing(p, true, 5, true) == missing_verdict::missing);
    CHECK(fetch_positions::missing(p, true, 6, true) == missing_verdict::report_missing);
    CHECK(fetch_positions::missing(p, true, 7, true) == missing_verdict::missing);  // once
    CHECK(fetch_positions::missing(p, true, 9, true) == missing_verdict::missing);
    SECTION("back in metadata, then missing again: reported again") {
      CHECK(fetch_positions::missing(p, false, 10, true) == missing_verdict::present);
      CHECK(fetch_positions::missing(p, true, 10, true) == missing_verdict::missing);
      CHECK(fetch_positions::missing(p, true, 12, true) == missing_verdict::report_missing);
    }
  }
  SECTION("group assignment: never reported (a rebalance follows)") {
    for (std::uint64_t r = 1; r < 10; ++r) CHECK(fetch_positions::missing(p, true, r, false) == missing_verdict::missing);
  }
}

namespace {

// A partition of `fp` ready at `pos` (epoch `epoch`), fetched with leader epoch 3.
fetch_part& ready_at(fetch_positions& fp, std::int64_t pos, std::int32_t epoch) {
  fp.assign({t0});
  REQUIRE(fp.seek(t0, pos, epoch));
  auto& p = *fp.find(t0);
  fp.validation_skipped(t0, p, 3);  // ready, fetched with leader epoch 3
  REQUIRE(p.state() == fs::ready);
  REQUIRE(p.epoch() == epoch);
  REQUIRE(p.leader_epoch() == 3);
  return p;
}

// A partition of `fp` whose position `pos` (epoch `epoch`) is being validated; it was fetched
// with leader epoch 3 before.
fetch_part& validating_at(fetch_positions& fp, std::int64_t pos, std::int32_t epoch) {
  fp.assign({t0});
  REQUIRE(fp.seek(t0, pos, -1));
  auto& p = *fp.find(t0);
  REQUIRE_FALSE(fp.leader_epoch_seen(t0, p, 3));
  REQUIRE(fp.seek(t0, pos, epoch));
  REQUIRE(p.state() == fs::needs_validation);
  REQUIRE(p.leader_epoch() == 3);
  fp.validation_requested(t0, p);
  REQUIRE(p.state() == fs::validating);
  return p;
}

using verdict = validation_outcome::verdict;

}  // namespace

TEST_CASE("fetch positions: reset policy", "[fetchpos]") {
  CHECK(parse_reset_policy("earliest") == reset_policy::earliest);
  CHECK(parse_reset_policy("latest") == reset_policy::latest);
  CHECK(parse_reset_policy("none") == reset_policy::none);
  CHECK(reset_timestamp(reset_policy::earliest) == -2);
  CHECK(reset_timestamp(reset_policy::latest) == -1);
  CHECK(reset_timestamp(reset_policy::none) == -1);
}

TEST_CASE("fetch positions: assign keeps, adds and drops partitions", "[fetchpos]") {
  const TopicPartition t1{"t", 1};
  const TopicPartition t2{"t", 2};
  fetch_positions fp;
  CHECK(fp.assign({t0, t1}).empty());
  auto& p0 = *fp.find(t0);
  fp.committed_requested(t0, p0);
  fp.committed(t0, p0, 42, -1);
  const auto removed = fp.assign({t0, t2});
  CHECK(removed == std::vector<TopicPartition>{t1});
  REQUIRE(fp.parts().size() == 2);
  CHECK(fp.parts().at(t0).state() == fs::ready);  // kept as it was
  CHECK(fp.parts().at(t0).fetch_pos() == 42);
  CHECK(fp.parts().at(t2).state() == fs::needs_committed);
  // Events for a partition no longer owned change nothing.
  CHECK_FALSE(fp.seek(t1, 5, -1));
  CHECK_FALSE(fp.seek_to(t1, true));
  CHECK_FALSE(fp.refetch(t1, 5, -1));
  fp.pause(t1);
  fp.resume(t1, 5, -1);
  CHECK(fp.parts().count(t1) == 0);
}

TEST_CASE("fetch positions: committed offsets", "[fetchpos]") {
  fetch_positions fp(reset_policy::earliest);
  fp.assign({t0});
  auto& p = *fp.find(t0);
  fp.committed_requested(t0, p);
  CHECK(p.state() == fs::fetching_committed);
  SECTION("with a leader epoch: validated first") {
    fp.committed(t0, p, 100, 7);
    CHECK(p.state() == fs::needs_validation);
    CHECK(p.fetch_pos() == 100);
    CHECK(p.epoch() == 7);
  }
  SECTION("without: fetched at once") {
    fp.committed(t0, p, 100, -1);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 100);
  }
  SECTION("none committed: the reset policy, not forced") {
    REQUIRE(fp.seek_to(t0, false));  // forced, to the end
    REQUIRE(p.reset_forced());
    fp.committed(t0, p, -1, -1);
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_timestamp() == -2);
    CHECK_FALSE(p.reset_forced());
  }
  SECTION("failed: asked again; an answer after a seek changes nothing") {
    fp.committed_failed(t0, p);
    CHECK(p.state() == fs::needs_committed);
    REQUIRE(fp.seek(t0, 5, -1));
    fp.committed_failed(t0, p);
    CHECK(p.state() == fs::ready);
  }
  SECTION("no group: the reset policy") {
    fetch_positions g(reset_policy::latest);
    g.assign({t0});
    auto& q = *g.find(t0);
    g.no_group(t0, q);
    CHECK(q.state() == fs::needs_reset);
    CHECK(q.reset_timestamp() == -1);
  }
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: resets, the last ListOffsets counts", "[fetchpos]") {
  fetch_positions fp(reset_policy::latest);
  fp.assign({t0});
  auto& p = *fp.find(t0);
  fp.no_group(t0, p);
  REQUIRE(p.state() == fs::needs_reset);
  CHECK_FALSE(fp.reset_waits_for_seek(t0, p));
  const auto first = fp.reset_requested(t0, p);
  CHECK(p.state() == fs::resetting);
  CHECK(fp.reset_current(t0, first) == &p);

  SECTION("answered") {
    REQUIRE(fp.seek_to(t0, false));
    fp.reset_requested(t0, p);
    REQUIRE(p.reset_forced());
    fp.reset_answered(t0, p, 500, 4);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 500);
    CHECK(p.epoch() == 4);
    CHECK_FALSE(p.reset_forced());
    CHECK(fp.reset_current(t0, first) == nullptr);  // no longer resetting
  }
  SECTION("a seek_to while in flight: the older answer is stale") {
    REQUIRE(fp.seek_to(t0, true));
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_forced());
    CHECK(p.reset_timestamp() == -2);
    const auto second = fp.reset_requested(t0, p);
    CHECK(second == first + 1);
    CHECK(fp.reset_current(t0, first) == nullptr);
    CHECK(fp.reset_current(t0, second) == &p);
  }
  SECTION("a seek while in flight: no answer applies") {
    REQUIRE(fp.seek(t0, 7, -1));
    CHECK(fp.reset_current(t0, first) == nullptr);
    CHECK(p.fetch_pos() == 7);
  }
  SECTION("revoked: no answer applies") {
    fp.assign({});
    CHECK(fp.reset_current(t0, first) == nullptr);
  }
  SECTION("not answered: asked again") {
    fp.reset_failed(t0, p);
    CHECK(p.state() == fs::needs_reset);
  }
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: auto.offset.reset=none waits for a seek", "[fetchpos]") {
  fetch_positions fp(reset_policy::none);
  fp.assign({t0});
  auto& p = *fp.find(t0);
  fp.committed_requested(t0, p);
  fp.committed(t0, p, -1, -1);
  REQUIRE(p.state() == fs::needs_reset);
  CHECK(fp.reset_waits_for_seek(t0, p));
  CHECK(p.state() == fs::resetting);
  SECTION("a seek_to_* is forced: it is asked for") {
    REQUIRE(fp.seek_to(t0, false));
    CHECK_FALSE(fp.reset_waits_for_seek(t0, p));
    CHECK(p.state() == fs::needs_reset);
  }
  SECTION("a seek ends the wait") {
    REQUIRE(fp.seek(t0, 3, -1));
    CHECK(p.state() == fs::ready);
  }
}

TEST_CASE("fetch positions: offset out of range resets, forced", "[fetchpos]") {
  SECTION("earliest") {
    fetch_positions fp(reset_policy::earliest);
    auto& p = ready_at(fp, 100, 2);
    CHECK_FALSE(fp.offset_out_of_range(t0, p));
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_forced());
    CHECK(p.reset_timestamp() == -2);
    CHECK(p.fetch_pos() == 100);  // unchanged until the answer
  }
  SECTION("latest") {
    fetch_positions fp(reset_policy::latest);
    auto& p = ready_at(fp, 100, 2);
    CHECK_FALSE(fp.offset_out_of_range(t0, p));
    CHECK(p.reset_forced());
    CHECK(p.reset_timestamp() == -1);
  }
  SECTION("none: waits for a seek (reported), not forced") {
    fetch_positions fp(reset_policy::none);
    auto& p = ready_at(fp, 100, 2);
    CHECK(fp.offset_out_of_range(t0, p));
    CHECK(p.state() == fs::resetting);
    CHECK_FALSE(p.reset_forced());
    CHECK(fp.invalid_transitions() == 0);
  }
}

TEST_CASE("fetch positions: out of range past the log's end is a cut there, not a reset", "[fetchpos]") {
  SECTION("earliest or latest: fetched from the end, the user thread decides") {
    for (auto policy : {reset_policy::earliest, reset_policy::latest}) {
      fetch_positions fp(policy);
      auto& p = ready_at(fp, 100, 2);
      CHECK(fp.log_ended(t0, p, 60) == verdict::resumed);
      CHECK(p.state() == fs::ready);
      CHECK(p.fetch_pos() == 60);
      CHECK(p.epoch() == -1);
      CHECK_FALSE(p.reset_forced());
      // The application's position was past the end too: the reset policy, forced.
      CHECK_FALSE(fp.offset_out_of_range(t0, p));
      CHECK(p.state() == fs::needs_reset);
      CHECK(p.reset_forced());
      CHECK(fp.invalid_transitions() == 0);
    }
  }
  SECTION("none: waits at the end for the verdict") {
    fetch_positions fp(reset_policy::none);
    auto& p = ready_at(fp, 100, 2);
    CHECK(fp.log_ended(t0, p, 60) == verdict::awaiting_seek);
    CHECK(p.state() == fs::awaiting_seek);
    CHECK(fp.cut_accepted(t0, 60));
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 60);
    CHECK(fp.invalid_transitions() == 0);
  }
}

TEST_CASE("fetch positions: a leader change validates a position with an epoch", "[fetchpos]") {
  fetch_positions fp;
  SECTION("with an epoch") {
    auto& p = ready_at(fp, 100, 2);
    CHECK(fp.leader_changed(t0, p));
    CHECK(p.state() == fs::needs_validation);
  }
  SECTION("without: fetched as it is") {
    auto& p = ready_at(fp, 100, -1);
    CHECK_FALSE(fp.leader_changed(t0, p));
    CHECK(p.state() == fs::ready);
  }
}

TEST_CASE("fetch positions: validation outcomes", "[fetchpos]") {
  SECTION("not truncated: ready, leader epoch taken") {
    fetch_positions fp;
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, 2, 150);
    CHECK(o.what == verdict::valid);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 100);
    CHECK(p.leader_epoch() == 5);
  }
  SECTION("end exactly at the position: not truncated") {
    fetch_positions fp;
    auto& p = validating_at(fp, 100, 2);
    CHECK(fp.validated(t0, p, 5, 0, 2, 100).what == verdict::valid);
  }
  SECTION("FENCED/UNKNOWN_LEADER_EPOCH: validated again, nothing else changes") {
    fetch_positions fp;
    auto& p = validating_at(fp, 100, 2);
    for (std::int16_t err : {std::int16_t{74}, std::int16_t{76}, std::int16_t{6}}) {
      const auto o = fp.validated(t0, p, 5, err, -1, -1);
      CHECK(o.what == verdict::retry);
      CHECK(p.state() == fs::needs_validation);
      CHECK(p.leader_epoch() == 3);
      CHECK(p.fetch_pos() == 100);
      fp.validation_requested(t0, p);
    }
  }
  SECTION("truncated, divergence known: resumed there (earliest or latest alike)") {
    fetch_positions fp(reset_policy::earliest);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, 1, 80);
    CHECK(o.what == verdict::resumed);
    CHECK(o.position == 100);
    CHECK(o.epoch == 2);
    CHECK_FALSE(o.divergence_unknown);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 80);
    CHECK(p.epoch() == 1);
    // The user thread is told where, and reads on.
    REQUIRE(o.cut);
    CHECK(o.cut->offset == 80);
    CHECK(o.cut->epoch == 1);
    CHECK_FALSE(o.cut->halted);
  }
  SECTION("truncated, divergence unknown: the reset policy, forced") {
    fetch_positions fp(reset_policy::earliest);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, -1, -1);
    CHECK(o.what == verdict::reset);
    CHECK(o.divergence_unknown);
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_forced());
    CHECK(p.reset_timestamp() == -2);
    CHECK(p.fetch_pos() == 100);
  }
  // Found by kgroup-sim (data seeds 796444033341, 500000008731, 500000008887; mutant
  // reset_keeps_queued): the reset was only logged, so data fetched before an unclean election
  // stayed queued; when the reset landed on the application's own position that data still fit and
  // records of the lost branch were returned (or, landing elsewhere, the partition stalled).
  SECTION("[sim_finding] truncated, divergence unknown: an unknown cut drops the queued data") {
    fetch_positions fp(reset_policy::latest);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, 2, -1);
    CHECK(o.what == verdict::reset);
    REQUIRE(o.cut);
    CHECK(o.cut->offset == -1);  // every queued record of the partition is suspect
    CHECK(o.cut->epoch == -1);
    CHECK_FALSE(o.cut->halted);  // the user thread applies the reset policy to its position
  }
  SECTION("not truncated, or an error: nothing to publish") {
    fetch_positions fp(reset_policy::earliest);
    auto& p = validating_at(fp, 100, 2);
    CHECK_FALSE(fp.validated(t0, p, 5, 74, -1, -1).cut);
    fp.validation_requested(t0, p);
    CHECK_FALSE(fp.validated(t0, p, 5, 0, 2, 120).cut);
  }
  SECTION("truncated with auto.offset.reset=none: awaiting_seek until the user seeks") {
    fetch_positions fp(reset_policy::none);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, 1, 80);
    CHECK(o.what == verdict::awaiting_seek);
    CHECK_FALSE(o.divergence_unknown);
    CHECK(p.state() == fs::awaiting_seek);
    // Waits at the divergence: the user thread decides with the application's position.
    CHECK(p.fetch_pos() == 80);
    CHECK(p.epoch() == 1);
    CHECK_FALSE(fp.refetch(t0, 80, 1));
    fp.resume(t0, 70, 1);
    CHECK(p.state() == fs::awaiting_seek);
    CHECK(p.fetch_pos() == 80);
    const auto unknown = [&] {
      fetch_positions g(reset_policy::none);
      auto& q = validating_at(g, 100, 2);
      return g.validated(t0, q, 5, 0, 3, -1);
    }();
    CHECK(unknown.what == verdict::awaiting_seek);
    CHECK(unknown.divergence_unknown);
    REQUIRE(o.cut);
    CHECK(o.cut->offset == 80);
    CHECK(o.cut->halted);  // the fetcher waits for the user thread's verdict
    REQUIRE(unknown.cut);
    CHECK(unknown.cut->offset == -1);
    CHECK(unknown.cut->halted);
    REQUIRE(fp.seek(t0, 80, 1));
    CHECK(p.state() == fs::needs_validation);
    CHECK(fp.invalid_transitions() == 0);
  }
  SECTION("auto.offset.reset=none, the application's position at or below the divergence: fetched from it") {
    fetch_positions fp(reset_policy::none);
    auto& p = validating_at(fp, 100, 2);
    REQUIRE(fp.validated(t0, p, 5, 0, 1, 80).what == verdict::awaiting_seek);
    CHECK_FALSE(fp.cut_accepted(t0, 90));  // not where it waits
    CHECK(p.state() == fs::awaiting_seek);
    CHECK(fp.cut_accepted(t0, 80));
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 80);
    CHECK_FALSE(fp.cut_accepted(t0, 80));  // no longer waiting
    CHECK(fp.invalid_transitions() == 0);
  }
  SECTION("auto.offset.reset=none, divergence unknown: waits at the position; no verdict ends it") {
    fetch_positions fp(reset_policy::none);
    auto& p = validating_at(fp, 100, 2);
    REQUIRE(fp.validated(t0, p, 5, 0, -1, -1).what == verdict::awaiting_seek);
    CHECK(p.fetch_pos() == 100);
    CHECK_FALSE(fp.cut_accepted(t0, -1));
    CHECK(p.state() == fs::awaiting_seek);
  }
  SECTION("nothing to validate with, or not answered") {
    fetch_positions fp;
    fp.assign({t0});
    REQUIRE(fp.seek(t0, 100, 2));
    auto& p = *fp.find(t0);
    fp.validation_skipped(t0, p, 9);
    CHECK(p.state() == fs::ready);
    CHECK(p.leader_epoch() == 9);
    REQUIRE(fp.seek(t0, 100, 2));
    fp.validation_requested(t0, p);
    fp.validation_failed(t0, p);
    CHECK(p.state() == fs::needs_validation);
  }
}

TEST_CASE("fetch positions: resume and refetch while a prefetch position is validated validate the user "
          "thread's position instead",
          "[fetchpos]") {
  // Issue 30, item 7: paused at 120 (the application at 95), a leader change sends 120 to
  // validation; resume() or a refetch after corrupt data must not be dropped, or the fetcher goes
  // on from 120 and every answer is unusable to the application at 95: the partition falls silent.
  for (const bool by_resume : {true, false}) {
    for (const bool in_flight : {true, false}) {
      INFO((by_resume ? "resume" : "refetch") << ", validation in flight: " << in_flight);
      fetch_positions fp;
      auto& p = ready_at(fp, 120, 3);
      fp.pause(t0);
      REQUIRE(fp.leader_changed(t0, p));
      if (in_flight) fp.validation_requested(t0, p);
      if (by_resume) {
        fp.resume(t0, 95, 2);
        CHECK_FALSE(p.paused());
      } else {
        CHECK(fp.refetch(t0, 95, 2));
      }
      CHECK(p.state() == fs::needs_validation);
      CHECK(p.fetch_pos() == 95);
      CHECK(p.epoch() == 2);
      fp.validation_requested(t0, p);
      CHECK(fp.validated(t0, p, 4, 0, 2, 200).what == verdict::valid);
      CHECK(p.state() == fs::ready);
      CHECK(p.fetch_pos() == 95);
      CHECK(fp.invalid_transitions() == 0);
    }
  }
}

// Found by kgroup-sim's fresh seeds (796444033562, invariant 6; 796444033341, invariant 3): the
// application paused at 506 (leader epoch 4); a validation found epoch 4 ending at 495 (an unclean
// election) and the fetcher resumed at 495, pushing the cut. The application's resume(), made
// before it had applied that cut, then moved the fetcher back to its stale 506: past the
// divergence, where every answer was of no use to the application at 495 (a stall), or held
// records of the truncated branch.
TEST_CASE("fetch positions: a resume or refetch past a divergence found meanwhile is validated again",
          "[fetchpos][sim_finding]") {
  for (const bool by_resume : {true, false}) {
    INFO((by_resume ? "resume" : "refetch"));
    fetch_positions fp;
    auto& p = ready_at(fp, 506, 4);
    fp.pause(t0);
    REQUIRE(fp.leader_changed(t0, p));
    fp.validation_requested(t0, p);
    REQUIRE(fp.validated(t0, p, 5, 0, 4, 495).what == verdict::resumed);
    REQUIRE(p.fetch_pos() == 495);
    if (by_resume) {
      fp.resume(t0, 506, 4);
    } else {
      fp.refetch(t0, 506, 4);
    }
    // Validated again: the answer names the divergence once more, and the cut reaches the user
    // thread (it moves to 495 either way), instead of fetching the wrong side of it.
    CHECK(p.state() == fs::needs_validation);
    CHECK(p.fetch_pos() == 506);
    fp.validation_requested(t0, p);
    CHECK(fp.validated(t0, p, 5, 0, 4, 495).what == verdict::resumed);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 495);
    // A position the application reached on the new branch (epoch 5) is its own.
    fp.resume(t0, 510, 5);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos() == 510);
    CHECK(fp.invalid_transitions() == 0);
  }
}

TEST_CASE("fetch positions: seek, refetch, pause and resume", "[fetchpos]") {
  fetch_positions fp;
  auto& p = ready_at(fp, 100, 2);
  CHECK(fp.refetch(t0, 90, 1));
  CHECK(p.fetch_pos() == 90);
  CHECK(p.epoch() == 1);
  fp.pause(t0);
  CHECK(p.paused());
  fp.resume(t0, 120, 3);
  CHECK_FALSE(p.paused());
  CHECK(p.fetch_pos() == 120);
  CHECK(p.epoch() == 3);
  fp.resume(t0, -1, -1);  // position unknown on the user thread: kept
  CHECK(p.fetch_pos() == 120);
  SECTION("needs_validation with the user thread's position unknown: kept") {
    REQUIRE(fp.leader_changed(t0, p));
    CHECK_FALSE(fp.refetch(t0, -1, -1));
    fp.resume(t0, -1, -1);
    CHECK(p.fetch_pos() == 120);
    CHECK(p.state() == fs::needs_validation);
  }
  SECTION("not ready: refetch and resume keep the position") {
    REQUIRE(fp.seek_to(t0, true));
    CHECK_FALSE(fp.refetch(t0, 5, -1));
    fp.pause(t0);
    fp.resume(t0, 5, -1);
    CHECK_FALSE(p.paused());
    CHECK(p.fetch_pos() == 120);
    CHECK(p.state() == fs::needs_reset);
  }
}

TEST_CASE("fetch positions: which partitions are fetched, and leader epochs before a Fetch", "[fetchpos]") {
  fetch_positions fp(reset_policy::latest, {}, fetch_timing{milliseconds(10), milliseconds(100)});
  auto& p = owned(fp, t0);
  CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::skip);  // no position yet
  REQUIRE(fp.seek(t0, 10, -1));
  CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::fetch);
  SECTION("paused, then resumed") {
    fp.pause(t0);
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::skip);
    fp.resume(t0, 12, 1);
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::fetch);
    CHECK(p.fetch_pos() == 12);
  }
  SECTION("one Fetch at a time") {
    fp.fetch_sent(p);
    CHECK(p.in_flight());
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::skip);
    fp.fetch_ended(t0);
    CHECK_FALSE(p.in_flight());
    fp.fetch_ended({"other", 0});  // not owned: nothing happens
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::fetch);
  }
  SECTION("leader epochs: recorded; a new one with a known position epoch validates first") {
    CHECK_FALSE(fp.leader_epoch_seen(t0, p, 3));
    CHECK(p.leader_epoch() == 3);
    CHECK_FALSE(fp.leader_epoch_seen(t0, p, 3));
    // The position has no epoch (plain seek): nothing to validate with, fetched as it is.
    CHECK_FALSE(fp.leader_epoch_seen(t0, p, 4));
    CHECK(p.state() == fs::ready);
    CHECK(p.leader_epoch() == 4);
    REQUIRE(fp.seek(t0, 10, 2));
    fp.validation_skipped(t0, p, 4);
    CHECK_FALSE(fp.leader_epoch_seen(t0, p, -1));  // metadata without epochs: fetched
    CHECK(p.leader_epoch() == -1);
    CHECK_FALSE(fp.leader_epoch_seen(t0, p, 5));  // unknown before: recorded
    CHECK(fp.leader_epoch_seen(t0, p, 6));
    CHECK(p.state() == fs::needs_validation);
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::skip);
  }
  SECTION("an answer applies while the position is the one sent") {
    CHECK(fetch_positions::answer_applies(p, 10));
    CHECK_FALSE(fetch_positions::answer_applies(p, 9));
    REQUIRE(fp.seek_to(t0, true));
    CHECK_FALSE(fetch_positions::answer_applies(p, 10));
  }
  SECTION("fetched data moves the position, a partial batch does not") {
    CHECK_FALSE(fp.fetched(p, 10, 5));
    CHECK(p.epoch() == -1);
    CHECK(fp.fetched(p, 25, 5));
    CHECK(p.fetch_pos() == 25);
    CHECK(p.epoch() == 5);
  }
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: a Fetch answer's preferred read replica (KIP-392)", "[fetchpos]") {
  using rv = replica_outcome::verdict;
  fetch_positions fp(reset_policy::latest, {}, fetch_timing{milliseconds(10), milliseconds(100)});
  auto& p = owned(fp, t0);
  REQUIRE(fp.seek(t0, 10, -1));
  SECTION("no replica named: nothing") {
    CHECK(fp.replica_answer(p, 1, 0, -1, false, t_start).what == rv::none);
    CHECK(fp.replica_answer(p, 1, 0, 1, true, t_start).what == rv::none);  // the leader names itself
    CHECK(fp.replica_answer(p, 1, 6, -1, false, t_start).what == rv::none);  // the leader's error: not ours
    CHECK(p.preferred_replica() == -1);
    CHECK(fetch_positions::fetchable(p, t_start) == fetch_check::fetch);
  }
  SECTION("named and known: followed; the same again is no change") {
    CHECK(fp.replica_answer(p, 1, 0, 3, true, t_start).changed);
    const auto again = fp.replica_answer(p, 1, 0, 3, true, t_start + milliseconds(50));
    CHECK(again.what == rv::replica_named);
    CHECK_FALSE(again.changed);
    CHECK(p.replica_until() == t_start + milliseconds(150));  // the TTL starts again
    SECTION("an error from the replica: back to the leader after the backoff") {
      const auto o = fp.replica_answer(p, 3, 1, -1, false, t_start + milliseconds(60));
      CHECK(o.what == rv::replica_failed);
      CHECK(o.replica == 3);
      CHECK(p.preferred_replica() == -1);
      CHECK(fetch_positions::fetchable(p, t_start + milliseconds(69)) == fetch_check::backing_off);
      CHECK(fetch_positions::fetchable(p, t_start + milliseconds(70)) == fetch_check::fetch);
      CHECK(p.state() == fs::ready);  // an out-of-range from a follower is no reset
    }
    SECTION("its connection fails: back to the leader") {
      CHECK(fp.replica_unreachable(t0, 2) == -1);  // another broker
      CHECK(p.preferred_replica() == 3);
      CHECK(fp.replica_unreachable(t0, 3) == 3);
      CHECK(p.preferred_replica() == -1);
      CHECK(fp.replica_unreachable(t0, 3) == -1);
    }
  }
  SECTION("named but unknown to metadata: not followed, backoff") {
    const auto o = fp.replica_answer(p, 1, 0, 7, false, t_start);
    CHECK(o.what == rv::replica_unknown);
    CHECK(o.replica == 7);
    CHECK(p.preferred_replica() == -1);
    CHECK(fetch_positions::fetchable(p, t_start + milliseconds(5)) == fetch_check::backing_off);
  }
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE(
    "fetch positions: auto.offset.reset=by_duration asks for now minus the duration, and the log's end when "
    "nothing is that recent (KIP-1106)",
    "[fetchpos]") {
  const auto strategy = parse_reset_strategy("by_duration:PT1H");
  REQUIRE(strategy.policy == reset_policy::by_duration);
  CHECK(strategy.duration == std::chrono::hours(1));
  CHECK(parse_reset_strategy("earliest").policy == reset_policy::earliest);
  CHECK(parse_reset_strategy("by_duration:junk").policy == reset_policy::latest);  // validated before

  fetch_positions fp(strategy);
  fp.assign({t0});
  auto& p = *fp.find(t0);
  fp.committed_requested(t0, p);
  fp.committed(t0, p, -1, -1);  // nothing committed: the policy applies
  REQUIRE(p.state() == fs::needs_reset);
  CHECK(p.reset_timestamp() == reset_by_duration);
  CHECK(fp.list_offsets_timestamp(p, 10'000'000) == 10'000'000 - 3'600'000);
  CHECK(fp.list_offsets_timestamp(p, 1'000) == 0);  // never before the epoch, never negative
  CHECK_FALSE(fp.reset_waits_for_seek(t0, p));
  const auto seq = fp.reset_requested(t0, p);
  REQUIRE(fp.reset_current(t0, seq) == &p);
  CHECK(fp.reset_found_nothing(t0, p));
  CHECK(p.state() == fs::needs_reset);
  CHECK(p.reset_timestamp() == -1);  // the end, asked at once
  CHECK(fp.list_offsets_timestamp(p, 10'000'000) == -1);
  const auto seq2 = fp.reset_requested(t0, p);
  CHECK_FALSE(fp.reset_found_nothing(t0, *fp.reset_current(t0, seq2)));  // -1 for the end is a failure
  fp.reset_answered(t0, p, 42, 3);
  CHECK(p.state() == fs::ready);
  CHECK(p.fetch_pos() == 42);

  // A seek_to_*() is never by duration, whatever the policy.
  CHECK(fp.seek_to(t0, true));
  CHECK(fp.list_offsets_timestamp(p, 10'000'000) == -2);
  CHECK_FALSE(fp.reset_found_nothing(t0, p));
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE(
    "fetch positions: a topic deleted and created again (a new topic id) resets its partitions by the "
    "policy; "
    "one still fetching its committed offset only takes the new id (KIP-516)",
    "[fetchpos]") {
  using v = fetch_positions::topic_id_verdict;
  protocol::uuid old_id, new_id;
  old_id.bytes[0] = 1;
  new_id.bytes[0] = 2;
  const TopicPartition t1{"t", 1};
  for (const auto policy : {reset_policy::earliest, reset_policy::none}) {
    INFO(static_cast<int>(policy));
    fetch_positions fp(policy);
    fp.assign({t0, t1});
    auto& p = *fp.find(t0);
    auto& q = *fp.find(t1);
    CHECK(fp.topic_id_seen(t0, p, protocol::uuid{}) == v::same);  // a broker without topic ids
    CHECK(fp.topic_id_seen(t0, p, old_id) == v::same);            // the first id seen
    CHECK(fp.topic_id_seen(t1, q, old_id) == v::same);
    CHECK(p.topic_id() == old_id);
    fp.committed_requested(t0, p);
    fp.committed(t0, p, 50, -1);  // consumed up to 50 in the old topic
    REQUIRE(p.state() == fs::ready);
    fp.committed_requested(t1, q);  // its committed offset not answered yet
    CHECK(fp.topic_id_seen(t0, p, old_id) == v::same);
    CHECK(fp.topic_id_seen(t0, p, protocol::uuid{}) == v::same);  // no id in this answer: nothing known

    const auto verdict = fp.topic_id_seen(t0, p, new_id);
    CHECK(p.topic_id() == new_id);
    if (policy == reset_policy::none) {
      CHECK(verdict == v::recreated_waits);
      CHECK(p.state() == fs::resetting);  // until the user seeks
    } else {
      CHECK(verdict == v::recreated);
      CHECK(p.state() == fs::needs_reset);
      CHECK(p.reset_forced());
      CHECK(p.reset_timestamp() == -2);
    }
    CHECK(fp.topic_id_seen(t0, p, new_id) == v::same);  // once
    // The committed offset being fetched is the new topic's (the broker deleted the old one's).
    CHECK(fp.topic_id_seen(t1, q, new_id) == v::same);
    CHECK(q.state() == fs::fetching_committed);
    CHECK(q.topic_id() == new_id);
    CHECK(fp.invalid_transitions() == 0);
  }
}
