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

}  // namespace

TEST_CASE("fetch positions: a new partition needs its committed offset", "[fetchpos]") {
  fetch_positions fp;
  auto& p = fp.parts()[t0];
  CHECK(p.state() == fs::needs_committed);
  CHECK(p.fetch_pos == -1);
  CHECK(p.epoch == -1);
  CHECK(p.preferred_replica == -1);
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
      {fs::ready, {}},
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
      auto& p = fp.parts()[t0];
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
  auto& p = fp.parts()[t0];

  SECTION("validating without needs_validation") {
    CHECK_FALSE(fp.transition(t0, p, fs::validating, "bug"));
    CHECK(p.state() == fs::needs_committed);
    REQUIRE(reported.size() == 1);
    CHECK(reported[0].find("t-0") != std::string::npos);
    CHECK(reported[0].find("needs_committed -> validating") != std::string::npos);
    CHECK(reported[0].find("bug") != std::string::npos);
    CHECK(fp.last_refusal() == reported[0]);
  }
  SECTION("awaiting_seek from ready") {
    reach(fp, p, fs::ready);
    CHECK_FALSE(fp.transition(t0, p, fs::awaiting_seek, "bug"));
    CHECK(p.state() == fs::ready);
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
  auto& p = fp.parts()[t0];
  reach(fp, p, fs::awaiting_seek);
  CHECK(fp.transition(t0, p, fs::awaiting_seek, "again"));
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: preferred read replica and its expiry", "[fetchpos]") {
  fetch_part p;
  SECTION("none: the leader") {
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 1);
  }
  SECTION("valid and known: the replica") {
    p.preferred_replica = 3;
    p.replica_until = t_start + milliseconds(100);
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 3);
    CHECK(fetch_positions::fetch_node(p, 1, true, t_start + milliseconds(99)) == 3);
    CHECK(p.preferred_replica == 3);
    SECTION("expired: the leader, and the replica is forgotten") {
      CHECK(fetch_positions::fetch_node(p, 1, true, t_start + milliseconds(100)) == 1);
      CHECK(p.preferred_replica == -1);
      CHECK(fetch_positions::fetch_node(p, 1, true, t_start) == 1);
    }
    SECTION("no longer in metadata: the leader, and the replica is forgotten") {
      CHECK(fetch_positions::fetch_node(p, 1, false, t_start) == 1);
      CHECK(p.preferred_replica == -1);
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
  REQUIRE(fp.seek(t0, pos, -1));
  auto& p = fp.parts().at(t0);
  p.epoch = epoch;
  p.leader_epoch = 3;
  REQUIRE(p.state() == fs::ready);
  return p;
}

// A partition of `fp` whose position `pos` (epoch `epoch`) is being validated.
fetch_part& validating_at(fetch_positions& fp, std::int64_t pos, std::int32_t epoch) {
  fp.assign({t0});
  REQUIRE(fp.seek(t0, pos, epoch));
  auto& p = fp.parts().at(t0);
  REQUIRE(p.state() == fs::needs_validation);
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
  auto& p0 = fp.parts().at(t0);
  fp.committed_requested(t0, p0);
  fp.committed(t0, p0, 42, -1);
  const auto removed = fp.assign({t0, t2});
  CHECK(removed == std::vector<TopicPartition>{t1});
  REQUIRE(fp.parts().size() == 2);
  CHECK(fp.parts().at(t0).state() == fs::ready);  // kept as it was
  CHECK(fp.parts().at(t0).fetch_pos == 42);
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
  auto& p = fp.parts().at(t0);
  fp.committed_requested(t0, p);
  CHECK(p.state() == fs::fetching_committed);
  SECTION("with a leader epoch: validated first") {
    fp.committed(t0, p, 100, 7);
    CHECK(p.state() == fs::needs_validation);
    CHECK(p.fetch_pos == 100);
    CHECK(p.epoch == 7);
  }
  SECTION("without: fetched at once") {
    fp.committed(t0, p, 100, -1);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos == 100);
  }
  SECTION("none committed: the reset policy, not forced") {
    p.reset_forced = true;
    fp.committed(t0, p, -1, -1);
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_timestamp == -2);
    CHECK_FALSE(p.reset_forced);
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
    auto& q = g.parts().at(t0);
    g.no_group(t0, q);
    CHECK(q.state() == fs::needs_reset);
    CHECK(q.reset_timestamp == -1);
  }
  CHECK(fp.invalid_transitions() == 0);
}

TEST_CASE("fetch positions: resets, the last ListOffsets counts", "[fetchpos]") {
  fetch_positions fp(reset_policy::latest);
  fp.assign({t0});
  auto& p = fp.parts().at(t0);
  fp.no_group(t0, p);
  REQUIRE(p.state() == fs::needs_reset);
  CHECK_FALSE(fp.reset_waits_for_seek(t0, p));
  const auto first = fp.reset_requested(t0, p);
  CHECK(p.state() == fs::resetting);
  CHECK(fp.reset_current(t0, first) == &p);

  SECTION("answered") {
    p.reset_forced = true;
    fp.reset_answered(t0, p, 500, 4);
    CHECK(p.state() == fs::ready);
    CHECK(p.fetch_pos == 500);
    CHECK(p.epoch == 4);
    CHECK_FALSE(p.reset_forced);
    CHECK(fp.reset_current(t0, first) == nullptr);  // no longer resetting
  }
  SECTION("a seek_to while in flight: the older answer is stale") {
    REQUIRE(fp.seek_to(t0, true));
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_forced);
    CHECK(p.reset_timestamp == -2);
    const auto second = fp.reset_requested(t0, p);
    CHECK(second == first + 1);
    CHECK(fp.reset_current(t0, first) == nullptr);
    CHECK(fp.reset_current(t0, second) == &p);
  }
  SECTION("a seek while in flight: no answer applies") {
    REQUIRE(fp.seek(t0, 7, -1));
    CHECK(fp.reset_current(t0, first) == nullptr);
    CHECK(p.fetch_pos == 7);
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
  auto& p = fp.parts().at(t0);
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
    CHECK(p.reset_forced);
    CHECK(p.reset_timestamp == -2);
    CHECK(p.fetch_pos == 100);  // unchanged until the answer
  }
  SECTION("latest") {
    fetch_positions fp(reset_policy::latest);
    auto& p = ready_at(fp, 100, 2);
    CHECK_FALSE(fp.offset_out_of_range(t0, p));
    CHECK(p.reset_forced);
    CHECK(p.reset_timestamp == -1);
  }
  SECTION("none: waits for a seek (reported), not forced") {
    fetch_positions fp(reset_policy::none);
    auto& p = ready_at(fp, 100, 2);
    CHECK(fp.offset_out_of_range(t0, p));
    CHECK(p.state() == fs::resetting);
    CHECK_FALSE(p.reset_forced);
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
    CHECK(p.fetch_pos == 100);
    CHECK(p.leader_epoch == 5);
  }
  SECTION("end exactly at the position: not truncated") {
    fetch_positions fp;
    auto& p = validating_at(fp, 100, 2);
    CHECK(fp.validated(t0, p, 5, 0, 2, 100).what == verdict::valid);
  }
  SECTION("FENCED/UNKNOWN_LEADER_EPOCH: validated again, nothing else changes") {
    fetch_positions fp;
    auto& p = validating_at(fp, 100, 2);
    p.leader_epoch = 3;
    for (std::int16_t err : {std::int16_t{74}, std::int16_t{76}, std::int16_t{6}}) {
      const auto o = fp.validated(t0, p, 5, err, -1, -1);
      CHECK(o.what == verdict::retry);
      CHECK(p.state() == fs::needs_validation);
      CHECK(p.leader_epoch == 3);
      CHECK(p.fetch_pos == 100);
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
    CHECK(p.fetch_pos == 80);
    CHECK(p.epoch == 1);
  }
  SECTION("truncated, divergence unknown: the reset policy, forced") {
    fetch_positions fp(reset_policy::earliest);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, -1, -1);
    CHECK(o.what == verdict::reset);
    CHECK(o.divergence_unknown);
    CHECK(p.state() == fs::needs_reset);
    CHECK(p.reset_forced);
    CHECK(p.reset_timestamp == -2);
    CHECK(p.fetch_pos == 100);
  }
  SECTION("truncated with auto.offset.reset=none: awaiting_seek until the user seeks") {
    fetch_positions fp(reset_policy::none);
    auto& p = validating_at(fp, 100, 2);
    const auto o = fp.validated(t0, p, 5, 0, 1, 80);
    CHECK(o.what == verdict::awaiting_seek);
    CHECK_FALSE(o.divergence_unknown);
    CHECK(p.state() == fs::awaiting_seek);
    CHECK(p.fetch_pos == 100);  // not moved: the application decides
    CHECK_FALSE(fp.refetch(t0, 80, 1));
    const auto unknown = [&] {
      fetch_positions g(reset_policy::none);
      auto& q = validating_at(g, 100, 2);
      return g.validated(t0, q, 5, 0, 3, -1);
    }();
    CHECK(unknown.what == verdict::awaiting_seek);
    CHECK(unknown.divergence_unknown);
    REQUIRE(fp.seek(t0, 80, 1));
    CHECK(p.state() == fs::needs_validation);
    CHECK(fp.invalid_transitions() == 0);
  }
  SECTION("nothing to validate with, or not answered") {
    fetch_positions fp;
    fp.assign({t0});
    REQUIRE(fp.seek(t0, 100, 2));
    auto& p = fp.parts().at(t0);
    fp.validation_skipped(t0, p, 9);
    CHECK(p.state() == fs::ready);
    CHECK(p.leader_epoch == 9);
    REQUIRE(fp.seek(t0, 100, 2));
    fp.validation_requested(t0, p);
    fp.validation_failed(t0, p);
    CHECK(p.state() == fs::needs_validation);
  }
}

TEST_CASE("fetch positions: seek, refetch, pause and resume", "[fetchpos]") {
  fetch_positions fp;
  auto& p = ready_at(fp, 100, 2);
  CHECK(fp.refetch(t0, 90, 1));
  CHECK(p.fetch_pos == 90);
  CHECK(p.epoch == 1);
  fp.pause(t0);
  CHECK(p.paused);
  fp.resume(t0, 120, 3);
  CHECK_FALSE(p.paused);
  CHECK(p.fetch_pos == 120);
  CHECK(p.epoch == 3);
  fp.resume(t0, -1, -1);  // position unknown on the user thread: kept
  CHECK(p.fetch_pos == 120);
  SECTION("not ready: refetch and resume keep the position") {
    REQUIRE(fp.seek_to(t0, true));
    CHECK_FALSE(fp.refetch(t0, 5, -1));
    fp.pause(t0);
    fp.resume(t0, 5, -1);
    CHECK_FALSE(p.paused);
    CHECK(p.fetch_pos == 120);
    CHECK(p.state() == fs::needs_reset);
  }
}
