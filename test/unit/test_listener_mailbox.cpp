// listener_mailbox: the user thread's half of the listener handshake against the core's cancels
// (shared_state's cancelled_listeners / late_cancels), the callback and its first error.
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "consumer/commit_client.hpp"
#include "consumer/listener_mailbox.hpp"
#include "kgroup/error.hpp"

using kgroup::TopicPartition;
using kgroup::detail::listener_call;
using kgroup::detail::listener_mailbox;
using kgroup::group::listener_kind;

namespace {

struct recording_listener : kgroup::ConsumerRebalanceListener {
  std::vector<std::string> calls;
  bool throw_on_assign = false;
  void on_partitions_revoked(const std::vector<TopicPartition>& p) override {
    calls.push_back("revoked " + names(p));
  }
  void on_partitions_assigned(const std::vector<TopicPartition>& p) override {
    calls.push_back("assigned " + names(p));
    if (throw_on_assign) throw std::runtime_error("assign failed");
  }
  void on_partitions_lost(const std::vector<TopicPartition>& p) override {
    calls.push_back("lost " + names(p));
  }
  static std::string names(const std::vector<TopicPartition>& p) {
    std::string s;
    for (const auto& tp : p) s += (s.empty() ? "" : ",") + tp.topic + "-" + std::to_string(tp.partition);
    return s;
  }
};

const TopicPartition t0{"t", 0}, t1{"t", 1};

}  // namespace

TEST_CASE("listener mailbox: a superseded call is skipped; a started one is marked until finished",
          "[listener_mailbox]") {
  kgroup::detail::shared_state shared;
  listener_mailbox box(shared);
  listener_call revoke{listener_kind::revoked, {t0}, 1};
  shared.cancelled_listeners.insert(1);
  CHECK_FALSE(box.start(revoke));
  CHECK(shared.cancelled_listeners.empty());
  CHECK(shared.started_listeners.empty());

  listener_call assign{listener_kind::assigned, {t0}, 2};
  REQUIRE(box.start(assign));
  CHECK(shared.started_listeners.count(2) == 1);
  CHECK_FALSE(box.finish(assign));
  CHECK(shared.started_listeners.empty());
}

TEST_CASE(
    "listener mailbox: late cancels: a revoke's partitions are not lost again, an assignment is lost at once",
    "[listener_mailbox]") {
  kgroup::detail::shared_state shared;
  listener_mailbox box(shared);

  listener_call revoke{listener_kind::revoked, {t0}, 1};
  REQUIRE(box.start(revoke));
  shared.late_cancels.insert(1);  // the core cancelled it while it ran
  CHECK_FALSE(box.finish(revoke));
  CHECK(shared.late_cancels.empty());
  listener_call lost{listener_kind::lost, {t0, t1}, 2};
  REQUIRE(box.start(lost));
  CHECK(lost.partitions == std::vector<TopicPartition>{t1});  // t0 was given back by the revoke

  listener_call assign{listener_kind::assigned, {t0}, 3};
  REQUIRE(box.start(assign));
  shared.late_cancels.insert(3);
  auto then = box.finish(assign);
  REQUIRE(then);
  CHECK(then->kind == listener_kind::lost);
  CHECK(then->partitions == std::vector<TopicPartition>{t0});
}

TEST_CASE("listener mailbox: an assignment makes a late-revoked partition ours again", "[listener_mailbox]") {
  kgroup::detail::shared_state shared;
  listener_mailbox box(shared);
  listener_call revoke{listener_kind::revoked, {t0}, 1};
  REQUIRE(box.start(revoke));
  shared.late_cancels.insert(1);
  CHECK_FALSE(box.finish(revoke));
  listener_call assign{listener_kind::assigned, {t0}, 2};
  REQUIRE(box.start(assign));
  CHECK_FALSE(box.finish(assign));
  listener_call lost{listener_kind::lost, {t0}, 3};
  REQUIRE(box.start(lost));
  CHECK(lost.partitions == std::vector<TopicPartition>{t0});
}

TEST_CASE("listener mailbox: callbacks run, are timed, and the first error is kept for the caller",
          "[listener_mailbox]") {
  kgroup::detail::shared_state shared;
  listener_mailbox box(shared);
  box.call_listener({listener_kind::assigned, {t0}, 1});  // no listener: nothing runs
  auto l = std::make_shared<recording_listener>();
  l->throw_on_assign = true;
  box.set_listener(l);
  box.call_listener({listener_kind::assigned, {t0}, 2});
  box.call_listener({listener_kind::revoked, {t0}, 3});
  CHECK(l->calls == std::vector<std::string>{"assigned t-0", "revoked t-0"});
  CHECK_THROWS_WITH(box.rethrow_error(), "assign failed");
  CHECK_NOTHROW(box.rethrow_error());  // forgotten once rethrown

  box.run_inline({listener_kind::lost, {t1}, 4});
  CHECK(l->calls.back() == "lost t-1");
  REQUIRE(shared.events.size() == 1);
  const auto* bk = std::get_if<listener_call>(&shared.events.front());
  REQUIRE(bk);
  CHECK(bk->bookkeeping_only);
  CHECK(bk->kind == listener_kind::lost);
}

// Found by kgroup-sim --group (seed 4213, invariant G3). A revoke callback ran longer than the
// rebalance timeout; the coordinator removed the member, the core gave the partitions up, rejoined,
// and the new generation gave it the same partitions back. The commit_sync() inside the old
// callback then went out with the new generation for the old ownership's positions, and moved the
// group's committed offset back below what another member had committed in between.
TEST_CASE("listener mailbox: a commit from inside a callback the core superseded fails for good",
          "[listener_mailbox][sim_finding]") {
  kgroup::detail::shared_state shared;
  listener_mailbox box(shared);
  int sent = 0;
  kgroup::detail::commit_client commits(shared, box,
                                        [&](kgroup::detail::commit_client::fetcher_call) { ++sent; });
  const kgroup::fetch::commit_map offsets{{t0, {180, "", -1}}};

  listener_call revoke{listener_kind::revoked, {t0}, 1};
  REQUIRE(box.start(revoke));
  CHECK_FALSE(box.running_superseded());
  shared.late_cancels.insert(1);  // the core gave the partitions up while the callback runs
  CHECK(box.running_superseded());
  try {
    commits.commit_sync(offsets, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    FAIL("commit_sync() inside a superseded callback must throw");
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == kgroup::make_error_code(kgroup::client_errc::commit_failed));
    CHECK_THAT(std::string(e.what()), Catch::Contains("whose rebalance is over"));
  }
  // commit_async(): refused too, its callback told from poll() like any other answer.
  commits.commit_async(offsets, {{t0, {180, "", std::nullopt}}},
                       [](const kgroup::OffsetMap&, std::error_code) {});
  CHECK(sent == 0);
  REQUIRE(shared.events.size() == 1);
  const auto* done = std::get_if<kgroup::detail::commit_done>(&shared.events.front());
  REQUIRE(done != nullptr);
  CHECK(done->code == kgroup::make_error_code(kgroup::client_errc::commit_failed));

  CHECK_FALSE(box.finish(revoke));
  CHECK_FALSE(box.running_superseded());  // outside any callback: commits go out again
}
