// The data path's commit decisions (src/data/committer.*): when a commit may go out, the
// request it becomes, what an answer means, and what auto-commit picks.
#include <catch2/catch.hpp>

#include "data/committer.hpp"
#include "kgroup/error.hpp"

using namespace kgroup;
using namespace kgroup::data;

namespace {

group_identity member_of(std::int32_t generation, bool stable = true) {
  group_identity who;
  who.subscribed = true;
  who.generation = generation;
  who.member_id = "m1";
  who.instance_id = "i1";
  who.coordinator = 2;
  who.stable = stable;
  who.owned = {{"t", 0}, {"t", 1}, {"u", 0}};
  return who;
}

const commit_map some{{{"t", 0}, {10, "meta", 3}}, {{"t", 1}, {20, "", -1}}, {{"u", 0}, {5, "", 1}}};

}  // namespace

TEST_CASE("committer: a commit goes out only with a settled generation", "[committer]") {
  CHECK_FALSE(refuse_commit(member_of(4), some).has_value());
  // Manual assignment: generation -1 is the identity Java uses.
  group_identity manual;
  manual.subscribed = false;
  CHECK_FALSE(refuse_commit(manual, some).has_value());

  auto no_group = manual;
  no_group.group_mode = false;
  CHECK(refuse_commit(no_group, some)->code == make_error_code(client_errc::invalid_config));
  auto empty = refuse_commit(member_of(4), {});
  REQUIRE(empty.has_value());
  CHECK_FALSE(empty->code);  // nothing to send, nothing wrong

  CHECK(refuse_commit(member_of(4, false), some)->code == make_error_code(kafka_errc::rebalance_in_progress));
  auto joining = member_of(-1, false);
  CHECK(refuse_commit(joining, some)->code == make_error_code(kafka_errc::rebalance_in_progress));
  auto late = joining;
  late.poll_timed_out = true;
  auto r = refuse_commit(late, some);
  CHECK(r->code == make_error_code(client_errc::commit_failed));
  CHECK_THAT(r->message, Catch::Contains("max.poll.interval.ms"));
  auto removed = joining;
  removed.removed = true;
  CHECK_THAT(refuse_commit(removed, some)->message, Catch::Contains("removed this member"));
  auto fatal = joining;
  fatal.fatal = true;
  CHECK_THAT(refuse_commit(fatal, some)->message, Catch::Contains("fatal group error"));
}

// Found by kgroup-sim --group (seed 2051, invariant G2). A revoke callback ran longer than the
// rebalance timeout; the coordinator removed the member, the core gave the partitions up and
// rejoined, and the callback's commit_sync() then went out with the new generation, for partitions
// that generation had given to another member. The coordinator accepted it (the classic protocol
// checks the generation, not the partitions) and moved that member's committed offset back.
TEST_CASE("committer: a subscribed member commits only partitions its membership owns now",
          "[committer][sim_finding]") {
  auto who = member_of(5);
  who.owned = {{"t", 1}};
  auto r = refuse_commit(who, some);
  REQUIRE(r.has_value());
  CHECK(r->code == make_error_code(client_errc::commit_failed));
  CHECK_THAT(r->message, Catch::Contains("t-0"));
  CHECK_THAT(r->message, Catch::Contains("does not own"));
  CHECK_FALSE(refuse_commit(who, {{{"t", 1}, {20, "", -1}}}).has_value());
  // Outside a subscription (assign()) any partition may be committed, as in Java.
  group_identity manual;
  manual.subscribed = false;
  CHECK_FALSE(refuse_commit(manual, some).has_value());
}

TEST_CASE("committer: a membership that is gone fails the commit for good, whatever its generation",
          "[committer]") {
  // The KIP-848 core keeps epoch 0 after a fence or a poll timeout; both cores keep the generation
  // on a fatal error and while the leave is next. Retriable REBALANCE_IN_PROGRESS there would have
  // the application poll() and commit the lost partitions again with its next identity.
  struct row {
    const char* what;
    group_identity who;
    const char* says;
  };
  auto with = [](std::int32_t generation, bool stable, auto set) {
    auto who = member_of(generation, stable);
    set(who);
    return who;
  };
  const row rows[] = {
      {"KIP-848 fenced (epoch 0)", with(0, false, [](auto& w) { w.removed = true; }), "removed this member"},
      {"classic removed (generation -1)", with(-1, false, [](auto& w) { w.removed = true; }), "not rejoined yet"},
      {"KIP-848 poll timeout (epoch 0)", with(0, false, [](auto& w) { w.poll_timed_out = true; }),
       "max.poll.interval.ms"},
      {"fatal, generation kept", with(7, false, [](auto& w) { w.fatal = true; }), "fatal group error"},
      {"fatal, generation -1", with(-1, false, [](auto& w) { w.fatal = true; }), "fatal group error"},
      {"leaving, generation kept", with(7, true, [](auto& w) { w.left = true; }), "leaving the group"},
      {"leaving, epoch -1", with(-1, false, [](auto& w) { w.left = true; }), "leaving the group"},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    CHECK(r.who.gone());
    const auto refused = refuse_commit(r.who, some);
    REQUIRE(refused.has_value());
    CHECK(refused->code == make_error_code(client_errc::commit_failed));
    CHECK_THAT(refused->message, Catch::Contains(r.says));
    CHECK_FALSE(commit_retriable(refused->code));  // commit_sync() throws it at once
  }
  // Still retriable: a rebalance of a generation this member is in, and joining (epoch 0 or
  // generation -1, nothing gone).
  CHECK(refuse_commit(member_of(7, false), some)->code == make_error_code(kafka_errc::rebalance_in_progress));
  CHECK(refuse_commit(member_of(0, false), some)->code == make_error_code(kafka_errc::rebalance_in_progress));
  CHECK(refuse_commit(member_of(-1, false), some)->code == make_error_code(kafka_errc::rebalance_in_progress));
  // Auto-commit sends nothing for a membership that is gone, even one that still looks stable.
  auto_committer ac;
  const std::map<TopicPartition, detail::epoch_offset> consumed{{{"t", 0}, {10, 1}}};
  const std::set<TopicPartition> owned{{"t", 0}};
  CHECK(ac.due(consumed, owned, with(7, true, [](auto& w) { w.left = true; })).empty());
  CHECK(ac.due(consumed, owned, member_of(7)).size() == 1);
}

TEST_CASE("committer: the OffsetCommit request carries the identity and every offset", "[committer]") {
  auto req = make_commit_request("g", member_of(4), some);
  CHECK(req.group_id == "g");
  CHECK(req.generation_id_or_member_epoch == 4);
  CHECK(req.member_id == "m1");
  CHECK(req.group_instance_id == std::optional<std::string>("i1"));
  REQUIRE(req.topics.size() == 2);
  CHECK(req.topics[0].name == "t");
  REQUIRE(req.topics[0].partitions.size() == 2);
  CHECK(req.topics[0].partitions[0].committed_offset == 10);
  CHECK(req.topics[0].partitions[0].committed_leader_epoch == 3);
  CHECK(req.topics[0].partitions[0].committed_metadata == std::optional<std::string>("meta"));
  CHECK(req.topics[0].partitions[1].partition_index == 1);
  CHECK(req.topics[1].name == "u");
  auto v6 = req;
  fit_offset_commit(v6, 6);
  CHECK_FALSE(v6.group_instance_id.has_value());
  fit_offset_commit(req, 7);
  CHECK(req.group_instance_id.has_value());
}

TEST_CASE("committer: an OffsetCommit answer's first partition error decides", "[committer]") {
  protocol::offset_commit_response r;
  r.topics.push_back({"t", {{0, 0}, {1, 0}}});
  CHECK_FALSE(read_commit_response(r).has_value());

  auto with = [&](kafka_errc e) {
    auto x = r;
    x.topics[0].partitions[1].error_code = static_cast<std::int16_t>(e);
    return read_commit_response(x);
  };
  auto fenced = with(kafka_errc::illegal_generation);
  REQUIRE(fenced.has_value());
  CHECK(fenced->kafka_code == static_cast<std::int16_t>(kafka_errc::illegal_generation));
  CHECK(fenced->error.code == make_error_code(client_errc::commit_failed));
  CHECK_FALSE(fenced->coordinator_gone);
  CHECK(with(kafka_errc::fenced_instance_id)->error.code == make_error_code(client_errc::commit_failed));
  auto moved = with(kafka_errc::not_coordinator);
  CHECK(moved->coordinator_gone);
  CHECK(moved->error.code == make_error_code(kafka_errc::not_coordinator));
  auto other = with(kafka_errc::offset_metadata_too_large);
  CHECK(other->error.code == make_error_code(kafka_errc::offset_metadata_too_large));
  CHECK_THAT(other->error.message, Catch::Contains("t-1"));
}

TEST_CASE("committer: auto-commit commits the changed positions of owned partitions only", "[committer]") {
  const std::map<TopicPartition, detail::epoch_offset> consumed{
      {{"t", 0}, {10, 1}}, {{"t", 1}, {20, 1}}, {{"t", 2}, {30, -1}}};
  const std::set<TopicPartition> owned{{"t", 0}, {"t", 1}};  // t-2 was revoked
  const std::map<TopicPartition, std::int64_t> last{{{"t", 0}, 10}, {{"t", 1}, 15}};
  const auto due = auto_commit_due(consumed, owned, last);
  REQUIRE(due.size() == 1);
  CHECK(due.at({"t", 1}).offset == 20);
  CHECK(due.at({"t", 1}).epoch == 1);
  CHECK(auto_commit_due(consumed, owned, {}).size() == 2);
}

TEST_CASE("committer: auto-commit remembers what was committed, forgets revoked partitions, waits out rebalances",
          "[committer]") {
  const std::map<TopicPartition, detail::epoch_offset> consumed{{{"t", 0}, {10, 1}}, {{"t", 1}, {20, 1}}};
  const std::set<TopicPartition> owned{{"t", 0}, {"t", 1}};
  auto_committer ac;
  CHECK(ac.due(consumed, owned, member_of(3)).size() == 2);
  CHECK(ac.due(consumed, owned, member_of(3, false)).empty());  // rebalancing: nothing
  ac.committed({{{"t", 0}, {10, "", 1}}, {{"t", 1}, {20, "", 1}}});
  CHECK(ac.due(consumed, owned, member_of(3)).empty());
  ac.forget({"t", 1});
  CHECK(ac.last().count({"t", 1}) == 0);
  const auto due = ac.due(consumed, owned, member_of(3));
  REQUIRE(due.size() == 1);
  CHECK(due.count({"t", 1}) == 1);
}

TEST_CASE("committer: committed offsets: the request, the refusals, and what the answer means", "[committer]") {
  group_identity none;
  none.group_mode = false;
  REQUIRE(refuse_offset_fetch(none).has_value());
  CHECK(refuse_offset_fetch(none)->code == make_error_code(kafka_errc::invalid_group_id));
  CHECK_FALSE(refuse_offset_fetch(member_of(1)).has_value());
  CHECK(coordinator_unknown().code == make_error_code(kafka_errc::coordinator_not_available));

  const auto req = make_offset_fetch_request("g", {{"t", 2}, {"t", 0}, {"u", 1}});
  CHECK(req.group_id == "g");
  CHECK(req.require_stable);
  REQUIRE(req.topics->size() == 2);
  CHECK((*req.topics)[0].name == "t");
  CHECK((*req.topics)[0].partition_indexes == std::vector<std::int32_t>{0, 2});
  CHECK((*req.topics)[1].name == "u");

  protocol::offset_fetch_response r;
  r.topics.push_back({"t", {{0, 42, 3, "m", 0}, {2, -1, -1, "", 0}}});
  SECTION("offsets; a partition without one is absent") {
    const auto a = read_committed(r);
    CHECK_FALSE(a.error.code);
    CHECK_FALSE(a.coordinator_gone);
    REQUIRE(a.offsets.size() == 1);
    CHECK(a.offsets.at({"t", 0}).offset == 42);
    CHECK(a.offsets.at({"t", 0}).metadata == "m");
    CHECK(a.offsets.at({"t", 0}).epoch == 3);
  }
  SECTION("a partition's error fails the call") {
    r.topics[0].partitions[1].error_code = static_cast<std::int16_t>(kafka_errc::unstable_offset_commit);
    const auto a = read_committed(r);
    CHECK(a.error.code == make_error_code(kafka_errc::unstable_offset_commit));
    CHECK_THAT(a.error.message, Catch::Contains("t-2"));
  }
  SECTION("the group's error (v8+ layout): the coordinator moved") {
    protocol::offset_fetch_response g;
    g.groups.push_back({"g", {}, static_cast<std::int16_t>(kafka_errc::not_coordinator)});
    const auto a = read_committed(g);
    CHECK(a.coordinator_gone);
    CHECK(a.error.code == make_error_code(kafka_errc::not_coordinator));
  }
}

TEST_CASE("committer: which commit errors commit_sync() and committed() try again", "[committer]") {
  for (auto e : {kafka_errc::not_coordinator, kafka_errc::coordinator_not_available,
                 kafka_errc::coordinator_load_in_progress, kafka_errc::request_timed_out,
                 kafka_errc::unstable_offset_commit, kafka_errc::stale_member_epoch}) {
    CAPTURE(static_cast<int>(e));
    CHECK(commit_retriable(make_error_code(e)));
  }
  CHECK(commit_retriable(make_error_code(client_errc::connection_closed)));
  CHECK(commit_retriable(make_error_code(client_errc::request_timed_out)));
  for (auto e : {kafka_errc::unknown_member_id, kafka_errc::illegal_generation, kafka_errc::rebalance_in_progress,
                 kafka_errc::offset_metadata_too_large, kafka_errc::group_authorization_failed}) {
    CAPTURE(static_cast<int>(e));
    CHECK_FALSE(commit_retriable(make_error_code(e)));
  }
  CHECK_FALSE(commit_retriable(make_error_code(client_errc::commit_failed)));
}
