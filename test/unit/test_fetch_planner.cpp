// The Fetch planner (data/fetch_planner.hpp) step by step, with a fake clock and scripted broker
// answers: which requests go to which broker, what each Fetch answer does to a partition (the
// error ladder), and, with a fault injected at every step, that fetching recovers every partition
// from the right offset.
#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "data/fetch_planner.hpp"
#include "data/next_offset.hpp"
#include "kgroup/kafka_errc.hpp"
#include "record_batches.hpp"

using namespace kgroup;
using namespace kgroup::data;
using std::chrono::milliseconds;
using time_point = std::chrono::steady_clock::time_point;
using partition_data = protocol::fetch_response::fetchable_topic_response::partition_data;

namespace {

const TopicPartition t0{"t", 0};
const TopicPartition t1{"t", 1};
const TopicPartition u0{"u", 0};
const std::vector<TopicPartition> all_parts{t0, t1, u0};
constexpr std::int64_t log_size = 40;  // records [0, 40) in every partition's log
constexpr std::int64_t batch = 5;      // records per answer

std::int16_t code(kafka_errc e) {
  return static_cast<std::int16_t>(e);
}

fetch_planner_options options() {
  fetch_planner_options o;
  o.retry_backoff = milliseconds(100);
  return o;
}

// A cluster of two brokers (1, 2) holding t-0 (leader 1), t-1 and u-0 (leader 2), a fake clock,
// and the driver's other duties played by the test: committed offsets, ListOffsets for resets,
// OffsetForLeaderEpoch for validations, metadata refreshes and the user thread's positions.
struct world {
  fetch_positions fp{reset_policy::earliest, [this](const std::string& r) { refusals.push_back(r); }};
  fetch_planner planner{fp, options()};
  cluster_metadata md;
  time_point now{std::chrono::seconds(1000)};
  std::map<TopicPartition, std::int64_t> log_end;   // the log holds [0, log_end)
  std::map<TopicPartition, std::int64_t> consumed;  // the user thread's next offset
  std::map<TopicPartition, std::int32_t> replica;   // a follower a leader named (KIP-392), by partition
  std::deque<protocol::bytes> buffers;              // record bytes the answers view
  std::vector<std::string> refusals;

  world() {
    md.brokers[1].node_id = 1;
    md.brokers[2].node_id = 2;
    auto& t = md.topics["t"];
    t.name = "t";
    t.topic_id = protocol::uuid{1, 2};
    t.partitions = {partition_metadata{0, 0, 1, 0, {1, 2}, {1, 2}},
                    partition_metadata{1, 0, 2, 0, {1, 2}, {1, 2}}};
    auto& u = md.topics["u"];
    u.name = "u";  // no topic id (below Metadata v10): requests stay below Fetch v13
    u.partitions = {partition_metadata{0, 0, 2, 0, {1, 2}, {1, 2}}};
    fp.assign({all_parts.begin(), all_parts.end()});
    const std::map<TopicPartition, std::int64_t> committed{{t0, 0}, {t1, 10}, {u0, 3}};
    for (const auto& [tp, offset] : committed) {
      auto& p = *fp.find(tp);
      fp.committed_requested(tp, p);
      fp.committed(tp, p, offset, -1);
      consumed[tp] = offset;
      log_end[tp] = log_size;
    }
  }

  partition_metadata& meta(const TopicPartition& tp) {
    return md.topics.at(tp.topic).partitions.at(static_cast<std::size_t>(tp.partition));
  }
  // A leader election: the other broker leads `tp`, with the next leader epoch.
  void elect(const TopicPartition& tp) {
    auto& m = meta(tp);
    m.leader = m.leader == 1 ? 2 : 1;
    ++m.leader_epoch;
  }

  // What the driver's offsets part does between Fetches (fetch/fetcher_offsets.cpp).
  void housekeeping() {
    fp.for_each([&](const TopicPartition& tp, fetch_part& p) {
      if (p.state() == fetch_state::needs_reset) {
        fp.reset_requested(tp, p);
        fp.reset_answered(tp, p, 0, -1);  // earliest
        consumed[tp] = 0;                 // the user thread takes the reset position
      } else if (p.state() == fetch_state::needs_validation) {
        fp.validation_requested(tp, p);
        fp.validated(tp, p, meta(tp).leader_epoch, 0, p.epoch(), log_end[tp]);
      }
    });
  }

  // The broker's answer to `sent` at `node`: records from each fetch offset, NOT_LEADER_OR_FOLLOWER
  // from a broker that neither leads nor was named as the partition's replica.
  protocol::fetch_response answer(std::int32_t node, const data::fetch_set& sent) {
    protocol::fetch_response r;
    for (const auto& [tp, pf] : sent) {
      partition_data pd;
      pd.partition_index = tp.partition;
      pd.high_watermark = log_end[tp];
      const auto& m = meta(tp);
      const auto named = replica.find(tp);
      if (m.leader != node && (named == replica.end() || named->second != node)) {
        pd.error_code = code(kafka_errc::not_leader_or_follower);
      } else if (pf.fetch_offset > log_end[tp]) {
        pd.error_code = code(kafka_errc::offset_out_of_range);
      } else if (pf.fetch_offset < log_end[tp]) {
        auto& buf = buffers.emplace_back();
        test::append_batch(buf, pf.fetch_offset, std::min(batch, log_end[tp] - pf.fetch_offset),
                           m.leader_epoch);
        pd.records = protocol::records_view{buf};
      }
      put(r, tp, pd);
    }
    return r;
  }
  static partition_data& put(protocol::fetch_response& r, const TopicPartition& tp,
                             const partition_data& pd) {
    if (r.responses.empty() || r.responses.back().topic != tp.topic) {
      r.responses.emplace_back();
      r.responses.back().topic = tp.topic;
    }
    return r.responses.back().partitions.emplace_back(pd);
  }
  static partition_data& find(protocol::fetch_response& r, const TopicPartition& tp) {
    for (auto& t : r.responses) {
      for (auto& p : t.partitions) {
        if (t.topic == tp.topic && p.partition_index == tp.partition) return p;
      }
    }
    FAIL("no " << tp.topic << "-" << tp.partition << " in the answer");
    throw std::logic_error("unreachable");
  }

  // The user thread's side of an applied answer: every slice continues its partition's position.
  void deliver(const fetch_answer& a) {
    for (const auto& n : a.notes) {
      if (n.what == fetch_note::kind::log_end_cut) consumed[n.tp] = std::min(consumed[n.tp], n.end);
    }
    for (const auto& s : a.slices) {
      INFO(s.tp.topic << "-" << s.tp.partition);
      CHECK(s.fetch_offset == consumed[s.tp]);
      consumed[s.tp] = data::next_fetch_offset(s.data->records->data, s.fetch_offset);
      CHECK(fp.find(s.tp)->fetch_pos() == consumed[s.tp]);
    }
  }

  // The driver sends every planned request: its session writes the partition lists.
  fetch_plan send(fetch_plan plan) {
    for (const auto& r : plan.requests) {
      protocol::fetch_request req = r.request;
      planner.fill(r.node, req, 11, *r.partitions);
    }
    return plan;
  }

  // Every fetch answer or failure asks to be planned again, now or at a time.
  static void check_live(const fetch_answer& a) { CHECK((a.plan_again || a.retry_at)); }

  bool done() const {
    for (const auto& tp : all_parts) {
      if (consumed.at(tp) != log_end.at(tp)) return false;
    }
    return true;
  }
};

std::set<TopicPartition> keys(const data::fetch_set& s) {
  std::set<TopicPartition> out;
  for (const auto& [tp, pf] : s) out.insert(tp);
  return out;
}

}  // namespace

// ---- scripted steps -------------------------------------------------------------------------

TEST_CASE("fetch planner: one Fetch per leader, from each position, none while one is in flight",
          "[fetchplan]") {
  world w;
  auto plan = w.send(w.planner.plan(w.now, w.md));
  REQUIRE(plan.requests.size() == 2);
  CHECK_FALSE(plan.refresh_metadata);
  CHECK_FALSE(plan.retry_at);
  const auto& r1 = plan.requests[0];
  const auto& r2 = plan.requests[1];
  CHECK(r1.node == 1);
  CHECK(keys(*r1.partitions) == std::set<TopicPartition>{t0});
  CHECK(r1.partitions->at(t0).fetch_offset == 0);
  CHECK(r1.partitions->at(t0).topic_id == protocol::uuid{1, 2});
  CHECK(r1.max_version == -1);
  CHECK(r2.node == 2);
  CHECK(keys(*r2.partitions) == std::set<TopicPartition>{t1, u0});
  CHECK(r2.partitions->at(t1).fetch_offset == 10);
  CHECK(r2.partitions->at(u0).fetch_offset == 3);
  CHECK(r2.max_version == 12);  // u has no topic id
  CHECK(r1.request.max_wait_ms == 500);
  CHECK(r1.request.replica_id == -1);
  CHECK(w.planner.busy_nodes() == std::set<std::int32_t>{1, 2});
  CHECK(w.fp.find(t0)->in_flight());

  SECTION("nothing more while both are in flight") {
    CHECK(w.planner.plan(w.now, w.md).requests.empty());
  }
  SECTION("the session writes the partition lists") {
    protocol::fetch_request req = r2.request;
    w.planner.fill(2, req, 11, *r2.partitions);
    std::set<TopicPartition> listed;
    for (const auto& t : req.topics) {
      for (const auto& p : t.partitions) listed.insert({t.topic, p.partition});
    }
    CHECK(listed == std::set<TopicPartition>{t1, u0});
  }
  SECTION("an answer's records go to the user thread, and the next Fetch continues after them") {
    const auto r = w.answer(2, *r2.partitions);
    const auto a = w.planner.on_answer(w.now, w.md, 2, {}, r, *r2.partitions);
    CHECK(a.plan_again);
    CHECK(a.notes.empty());
    REQUIRE(a.slices.size() == 2);
    w.deliver(a);
    CHECK(w.consumed[t1] == 15);
    CHECK(w.consumed[u0] == 8);
    auto next = w.send(w.planner.plan(w.now, w.md));
    REQUIRE(next.requests.size() == 1);  // broker 1 still busy
    CHECK(next.requests[0].node == 2);
    CHECK(next.requests[0].partitions->at(t1).fetch_offset == 15);
  }
  SECTION("a request without a connection is undone") {
    const auto at = w.planner.not_sent(w.now, 1, *r1.partitions);
    CHECK(at == w.now + milliseconds(100));
    CHECK_FALSE(w.fp.find(t0)->in_flight());
    CHECK(w.planner.busy_nodes() == std::set<std::int32_t>{2});
    auto again = w.planner.plan(w.now, w.md);
    REQUIRE(again.requests.size() == 1);
    CHECK(again.requests[0].node == 1);
  }
}

TEST_CASE("fetch planner: a partition missing from metadata or without a known leader waits for metadata",
          "[fetchplan]") {
  world w;
  SECTION("leader not in the broker list") {
    w.md.brokers.erase(1);
  }
  SECTION("topic absent") {
    w.md.topics.erase("t");
  }
  auto plan = w.planner.plan(w.now, w.md);
  CHECK(plan.refresh_metadata);
  CHECK(plan.retry_at == w.now + milliseconds(100));
  CHECK(plan.report_missing.empty());  // subscribed, not manual
  for (const auto& r : plan.requests) CHECK(r.partitions->count(t0) == 0);
}

TEST_CASE("fetch planner: manual assignment reports a partition still missing after a later refresh, once",
          "[fetchplan]") {
  world w;
  w.planner.set_manual(true);
  w.md.topics.erase("u");
  CHECK(w.planner.plan(w.now, w.md).report_missing.empty());
  ++w.md.refreshes;  // may have been under way when it went missing
  CHECK(w.planner.plan(w.now, w.md).report_missing.empty());
  ++w.md.refreshes;
  CHECK(w.planner.plan(w.now, w.md).report_missing == std::vector<TopicPartition>{u0});
  ++w.md.refreshes;
  CHECK(w.planner.plan(w.now, w.md).report_missing.empty());  // once
}

TEST_CASE("fetch planner: a new leader epoch in metadata validates before fetching", "[fetchplan]") {
  world w;
  // One answer so that the positions carry leader epochs.
  auto plan = w.send(w.planner.plan(w.now, w.md));
  for (const auto& r : plan.requests)
    w.deliver(w.planner.on_answer(w.now, w.md, r.node, {}, w.answer(r.node, *r.partitions), *r.partitions));
  w.elect(t0);
  auto next = w.planner.plan(w.now, w.md);
  CHECK(next.validate);
  CHECK(w.fp.find(t0)->state() == fetch_state::needs_validation);
  for (const auto& r : next.requests) CHECK(r.partitions->count(t0) == 0);
}

TEST_CASE("fetch planner: the error ladder of a Fetch answer", "[fetchplan]") {
  world w;
  // A first answer gives the positions leader epochs.
  const auto first = w.send(w.planner.plan(w.now, w.md));
  for (const auto& q : first.requests)
    w.deliver(w.planner.on_answer(w.now, w.md, q.node, {}, w.answer(q.node, *q.partitions), *q.partitions));
  auto again = w.send(w.planner.plan(w.now, w.md));
  REQUIRE(again.requests.size() == 2);
  const auto sent = *again.requests[0].partitions;   // t-0 from broker 1
  const auto sent2 = *again.requests[1].partitions;  // t-1 and u-0 from broker 2, in flight
  auto r = w.answer(1, sent);
  auto& pd = world::find(r, t0);
  pd.records.reset();
  // The answer with `e` for t-0, applied.
  const auto answered_with = [&](kafka_errc e) {
    pd.error_code = code(e);
    return w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
  };

  SECTION("NOT_LEADER_OR_FOLLOWER: refresh metadata, retry after the backoff, same position") {
    const auto a = answered_with(kafka_errc::not_leader_or_follower);
    REQUIRE(a.notes.size() == 1);
    CHECK(a.notes[0].what == fetch_note::kind::leader_error);
    CHECK(a.refresh_metadata);
    CHECK(a.retry_at == w.now + milliseconds(100));
    CHECK(w.fp.find(t0)->state() == fetch_state::ready);
    CHECK(w.fp.find(t0)->fetch_pos() == 5);
  }
  SECTION("FENCED_LEADER_EPOCH: refresh metadata and validate the position") {
    const auto a = answered_with(kafka_errc::fenced_leader_epoch);
    CHECK(a.notes.at(0).what == fetch_note::kind::leader_error);
    CHECK(a.refresh_metadata);
    CHECK(w.fp.find(t0)->state() == fetch_state::needs_validation);
  }
  SECTION("UNKNOWN_TOPIC_OR_PARTITION: refresh metadata") {
    const auto a = answered_with(kafka_errc::unknown_topic_or_partition);
    CHECK(a.notes.at(0).what == fetch_note::kind::leader_error);
    CHECK(a.refresh_metadata);
  }
  SECTION("OFFSET_OUT_OF_RANGE inside the log: the reset policy applies") {
    const auto a = answered_with(kafka_errc::offset_out_of_range);
    CHECK(a.notes.at(0).what == fetch_note::kind::out_of_range);
    CHECK(a.notes.at(0).offset == 5);
    CHECK_FALSE(a.notes.at(0).halted);
    CHECK(w.fp.find(t0)->state() == fetch_state::needs_reset);
    CHECK(a.plan_again);
  }
  SECTION("OFFSET_OUT_OF_RANGE with the log ending below the position: a cut at its end") {
    pd.high_watermark = 3;
    const auto a = answered_with(kafka_errc::offset_out_of_range);
    CHECK(a.notes.at(0).what == fetch_note::kind::log_end_cut);
    CHECK(a.notes.at(0).offset == 5);
    CHECK(a.notes.at(0).end == 3);
    CHECK(w.fp.find(t0)->fetch_pos() == 3);
  }
  SECTION("another error: retried after the backoff") {
    const auto a = answered_with(kafka_errc::unknown_server_error);
    CHECK(a.notes.at(0).what == fetch_note::kind::other_error);
    CHECK_FALSE(a.refresh_metadata);
    CHECK(a.retry_at == w.now + milliseconds(100));
  }
  SECTION("a named replica is fetched from next, until it fails") {
    pd.preferred_read_replica = 2;
    const auto a = w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
    CHECK(a.notes.at(0).what == fetch_note::kind::replica_named);
    CHECK(a.notes.at(0).replica == 2);
    CHECK(w.planner.plan(w.now, w.md).requests.empty());  // broker 2 has a Fetch in flight
    w.deliver(w.planner.on_answer(w.now, w.md, 2, {}, w.answer(2, sent2), sent2));
    auto next = w.send(w.planner.plan(w.now, w.md));
    REQUIRE(next.requests.size() == 1);
    CHECK(next.requests[0].node == 2);
    CHECK(keys(*next.requests[0].partitions) == std::set<TopicPartition>{t0, t1, u0});
    // An error from the replica sends t-0 back to its leader, after the backoff.
    auto rr = w.answer(2, *next.requests[0].partitions);
    auto& rpd = world::find(rr, t0);
    rpd.records.reset();
    rpd.error_code = code(kafka_errc::not_leader_or_follower);
    const auto b = w.planner.on_answer(w.now, w.md, 2, {}, rr, *next.requests[0].partitions);
    CHECK(b.notes.at(0).what == fetch_note::kind::replica_dropped);
    CHECK(b.notes.at(0).replica == 2);
    CHECK(b.retry_at == w.now + milliseconds(100));
    w.deliver(b);
    auto later = w.send(w.planner.plan(w.now + milliseconds(100), w.md));
    REQUIRE_FALSE(later.requests.empty());
    CHECK(later.requests[0].node == 1);
    CHECK(keys(*later.requests[0].partitions) == std::set<TopicPartition>{t0});
  }
  SECTION("a replica metadata does not know: back off, refresh metadata") {
    pd.preferred_read_replica = 9;
    const auto a = w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
    CHECK(a.notes.at(0).what == fetch_note::kind::replica_unknown);
    CHECK(a.refresh_metadata);
    CHECK(a.retry_at);
  }
  SECTION("an answer naming a partition the request did not hold is dropped whole") {
    partition_data other;
    other.partition_index = 9;
    world::put(r, {"other", 9}, other);
    const auto a = w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
    CHECK(a.unknown_partition == "other-9");
    CHECK(a.slices.empty());
    CHECK(a.retry_at);
    CHECK_FALSE(a.plan_again);
    CHECK_FALSE(w.fp.find(t0)->in_flight());
  }
  SECTION("a top-level error resets the session; session errors do not refresh metadata") {
    r.error_code = code(kafka_errc::fetch_session_id_not_found);
    auto a = w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
    CHECK(a.error_code == r.error_code);
    CHECK_FALSE(a.refresh_metadata);
    CHECK(a.retry_at);
  }
  SECTION("a failed request: refresh metadata, retry") {
    const auto a =
        w.planner.on_answer(w.now, w.md, 1, std::make_error_code(std::errc::connection_reset), r, sent);
    CHECK(a.refresh_metadata);
    CHECK(a.retry_at == w.now + milliseconds(100));
    CHECK(a.notes.empty());
    CHECK(w.planner.busy_nodes().count(1) == 0);
  }
  SECTION("an answer for a position seeked away from meanwhile is ignored") {
    pd.error_code = code(kafka_errc::offset_out_of_range);
    w.fp.seek(t0, 20, -1);
    const auto a = w.planner.on_answer(w.now, w.md, 1, {}, r, sent);
    CHECK(a.notes.empty());
    CHECK(w.fp.find(t0)->fetch_pos() == 20);
  }
  CHECK(w.fp.invalid_transitions() == 0);
}

// ---- a fault at every step --------------------------------------------------------------------

namespace {

enum class fault {
  not_leader,       // NOT_LEADER_OR_FOLLOWER after a leader election
  fenced_epoch,     // FENCED_LEADER_EPOCH after a leader election
  unknown_epoch,    // UNKNOWN_LEADER_EPOCH
  unknown_topic,    // UNKNOWN_TOPIC_OR_PARTITION
  storage_error,    // KAFKA_STORAGE_ERROR
  out_of_range,     // OFFSET_OUT_OF_RANGE inside the log: reset to earliest
  log_truncated,    // OFFSET_OUT_OF_RANGE, the log now ends below the position
  server_error,     // UNKNOWN_SERVER_ERROR
  replica_named,    // the leader names the other broker as preferred read replica
  replica_unknown,  // the leader names a broker metadata does not know
  top_level_error,  // the answer's own error (UNKNOWN_SERVER_ERROR)
  session_error,    // FETCH_SESSION_ID_NOT_FOUND
  connection,       // the request failed (connection reset)
  mismatched,       // the answer names a partition the request did not hold
  not_sent,         // no connection to send the request on
};
const std::vector<std::pair<fault, const char*>> all_faults = {
    {fault::not_leader, "not leader"},
    {fault::fenced_epoch, "fenced leader epoch"},
    {fault::unknown_epoch, "unknown leader epoch"},
    {fault::unknown_topic, "unknown topic or partition"},
    {fault::storage_error, "storage error"},
    {fault::out_of_range, "offset out of range"},
    {fault::log_truncated, "log truncated"},
    {fault::server_error, "unknown server error"},
    {fault::replica_named, "replica named"},
    {fault::replica_unknown, "unknown replica named"},
    {fault::top_level_error, "top-level error"},
    {fault::session_error, "session id not found"},
    {fault::connection, "connection failure"},
    {fault::mismatched, "mismatched answer"},
    {fault::not_sent, "no connection"},
};

// Applies `f` to the answer `r` to `sent` from `node` (to its first partition). not_sent and
// connection replace the answer instead (run()).
void inject(world& w, fault f, std::int32_t node, const data::fetch_set& sent, protocol::fetch_response& r) {
  const auto tp = sent.begin()->first;
  auto& pd = world::find(r, tp);
  const auto error = [&](kafka_errc e) {
    pd.error_code = code(e);
    pd.records.reset();
  };
  switch (f) {
    case fault::not_leader:
      w.elect(tp);
      w.replica.erase(tp);
      error(kafka_errc::not_leader_or_follower);
      break;
    case fault::fenced_epoch:
      w.elect(tp);
      w.replica.erase(tp);
      error(kafka_errc::fenced_leader_epoch);
      break;
    case fault::unknown_epoch:
      error(kafka_errc::unknown_leader_epoch);
      break;
    case fault::unknown_topic:
      error(kafka_errc::unknown_topic_or_partition);
      break;
    case fault::storage_error:
      error(kafka_errc::kafka_storage_error);
      break;
    case fault::out_of_range:
      error(kafka_errc::offset_out_of_range);
      break;
    case fault::log_truncated: {
      const auto from = sent.begin()->second.fetch_offset;
      if (from == 0) break;  // nothing below to truncate to
      error(kafka_errc::offset_out_of_range);
      // An unclean election truncated the log below the position; it grows back afterwards.
      pd.high_watermark = from - 1;
      break;
    }
    case fault::server_error:
      error(kafka_errc::unknown_server_error);
      break;
    case fault::replica_named: {
      const auto other = w.meta(tp).leader == 1 ? 2 : 1;
      if (node != w.meta(tp).leader) break;
      w.replica[tp] = other;
      pd.preferred_read_replica = other;
      pd.records.reset();  // a leader naming a replica sends no records
      break;
    }
    case fault::replica_unknown:
      pd.preferred_read_replica = 9;
      pd.records.reset();
      break;
    case fault::top_level_error:
      r.error_code = code(kafka_errc::unknown_server_error);
      r.responses.clear();
      break;
    case fault::session_error:
      r.error_code = code(kafka_errc::fetch_session_id_not_found);
      r.responses.clear();
      break;
    case fault::mismatched: {
      partition_data other;
      other.partition_index = 9;
      world::put(r, {"other", 9}, other);
      break;
    }
    case fault::connection:
    case fault::not_sent:
      break;
  }
}

// Runs the fetch loop with `f` injected into the `at`-th request, and checks that every partition
// was read to its log's end, each slice continuing its partition's position.
void run(fault f, int at) {
  world w;
  int requests = 0;
  for (int step = 0; step < 300 && !w.done(); ++step) {
    w.now += milliseconds(50);
    w.housekeeping();
    auto plan = w.planner.plan(w.now, w.md);
    if (plan.refresh_metadata) ++w.md.refreshes;
    for (const auto& r : plan.requests) {
      INFO("request " << requests << " to broker " << r.node);
      const auto& m = *r.partitions;
      for (const auto& [tp, pf] : m) CHECK(pf.fetch_offset == w.fp.find(tp)->fetch_pos());
      const bool faulty = requests++ == at;
      if (faulty && f == fault::not_sent) {
        CHECK(w.planner.not_sent(w.now, r.node, m) == w.now + milliseconds(100));
        continue;
      }
      protocol::fetch_request req = r.request;
      w.planner.fill(r.node, req, 11, m);
      auto answer = w.answer(r.node, m);
      if (faulty) inject(w, f, r.node, m, answer);
      const std::error_code ec = faulty && f == fault::connection
                                     ? std::make_error_code(std::errc::connection_reset)
                                     : std::error_code{};
      const auto a = w.planner.on_answer(w.now, w.md, r.node, ec, answer, m);
      world::check_live(a);
      if (a.refresh_metadata) ++w.md.refreshes;
      w.deliver(a);
    }
  }
  for (const auto& tp : all_parts) {
    INFO(tp.topic << "-" << tp.partition);
    CHECK(w.consumed[tp] == log_size);
    CHECK(w.fp.find(tp)->fetch_pos() == log_size);
    CHECK(w.fp.find(tp)->state() == fetch_state::ready);
  }
  CHECK(w.fp.invalid_transitions() == 0);
  CHECK(w.refusals.empty());
}

}  // namespace

TEST_CASE(
    "fetch planner: a fault at every step, and every partition is still read to its end from the right "
    "offset",
    "[fetchplan]") {
  for (const auto& [f, name] : all_faults) {
    for (int at = 0; at < 12; ++at) {
      INFO("fault: " << name << " in request " << at);
      run(f, at);
    }
  }
}
