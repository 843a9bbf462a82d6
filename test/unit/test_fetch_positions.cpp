// The fetcher's position table (src/data/fetch_positions.*): the per-partition states and their
// transition table, the preferred-replica choice and the metadata-missing rule.
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
  fetch_positions fp([&](const std::string& m) { reported.push_back(m); });
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
