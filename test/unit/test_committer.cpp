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
