// Data safety (issue 19): transactions under read_committed, log truncation after an unclean
// leader election (KIP-320), leader epochs in commits, and positions out of range; and the
// offset queries (beginning/end offsets, offsets by time), which need a leader that keeps
// timestamps and a log start the mocks do not have. No mock cluster
// produces these, so a fake leader serves hand-built logs: record batches with producer ids,
// commit and abort markers, aborted-transaction lists, a last stable offset, and a leader epoch
// history it answers OffsetForLeaderEpoch from. The consumers use assign() with a group.id
// (commits and committed offsets, no membership), so the tests see the data path alone.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "fake_broker.hpp"
#include "group_harness.hpp"
#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/metrics.hpp"
#include "log_capture.hpp"
#include "protocol/records.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
namespace proto = kgroup::protocol;
using kgroup::client_errc;
using kgroup::TopicPartition;
using kgroup::test::eventually;
using kgroup::test::fake_broker;
using kgroup::test::log_capture;
using kgroup::test::test_config;
using reply = fake_broker::reply;
using request = fake_broker::request;

namespace {

// ---- the fake leader's logs ------------------------------------------------------------------------

struct batch_spec {
  enum class kind { data, commit_marker, abort_marker };
  std::int64_t base = 0;
  std::int32_t count = 1;
  std::int32_t epoch = 0;   // partition leader epoch written in the batch
  std::int64_t pid = -1;    // transactional when >= 0
  kind type = kind::data;
  std::string tag;          // record values are "<tag>-<offset>"
  bool corrupt = false;     // one byte of the first value flipped after the CRC was computed
  std::int64_t last() const { return base + count - 1; }
};

// One partition's log as its leader has it.
struct partition_log {
  std::vector<batch_spec> batches;
  std::int64_t log_start = 0;
  std::int64_t lso = -1;  // last stable offset; -1: the log end
  std::vector<std::pair<std::int64_t, std::int64_t>> aborted;  // producer id, first offset

  std::int64_t end() const { return batches.empty() ? log_start : batches.back().last() + 1; }
  std::int64_t stable() const { return lso >= 0 ? lso : end(); }

  void append(std::int32_t count, std::int32_t epoch, std::string tag, std::int64_t pid = -1) {
    batches.push_back({end(), count, epoch, pid, batch_spec::kind::data, std::move(tag)});
  }
  void marker(std::int64_t pid, bool commit, std::int32_t epoch) {
    batches.push_back({end(), 1, epoch, pid, commit ? batch_spec::kind::commit_marker : batch_spec::kind::abort_marker, ""});
  }

  // OffsetForLeaderEpoch: the largest epoch of this log at or below `epoch` and the offset where
  // it ends (where the next epoch starts, or the log end for the leader's current epoch);
  // (-1, -1) when the log has no such epoch.
  std::pair<std::int32_t, std::int64_t> epoch_end(std::int32_t epoch, std::int32_t leader_epoch) const {
    std::map<std::int32_t, std::int64_t> starts;  // epoch -> first offset
    for (const auto& b : batches) starts.emplace(b.epoch, b.base);
    starts.emplace(leader_epoch, end());
    auto next = starts.upper_bound(epoch);
    if (next == starts.begin()) return {-1, -1};
    const auto found = std::prev(next);
    return {found->first, next == starts.end() ? end() : next->second};
  }
};

// Every record's timestamp: 1000 + 10 x its offset (for offsets_for_times), unless a test moves
// the times near the wall clock (auto.offset.reset=by_duration) with record_times.
std::atomic<std::int64_t> record_time_base{1000};
std::atomic<std::int64_t> record_time_step{10};
std::int64_t record_time(std::int64_t offset) {
  return record_time_base + record_time_step * offset;
}

// Record `offset`'s time is `at`, and one more each `step` after; restored at scope exit.
struct record_times {
  record_times(std::int64_t offset, std::chrono::system_clock::time_point at,
               std::chrono::milliseconds step) {
    const auto at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
    record_time_step = step.count();
    record_time_base = at_ms - step.count() * offset;
  }
  ~record_times() {
    record_time_base = 1000;
    record_time_step = 10;
  }
  record_times(const record_times&) = delete;
  record_times& operator=(const record_times&) = delete;
};

// Appends the wire form of `b` to `out`.
void encode_batch(const batch_spec& b, proto::bytes& out) {
  std::vector<std::string> values;
  std::vector<proto::record_input> recs;
  static const std::uint8_t commit_key[] = {0, 0, 0, 1}, abort_key[] = {0, 0, 0, 0};
  static const std::uint8_t marker_value[] = {0, 0, 0, 0, 0, 0};
  if (b.type == batch_spec::kind::data) {
    values.reserve(static_cast<std::size_t>(b.count));
    for (std::int32_t i = 0; i < b.count; ++i) values.push_back(b.tag + "-" + std::to_string(b.base + i));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto& v = values[i];
      recs.push_back({std::nullopt, proto::byte_view(reinterpret_cast<const std::uint8_t*>(v.data()), v.size()),
                      record_time(b.base + static_cast<std::int64_t>(i)), {}, {}});
    }
  } else {
    recs.push_back({proto::byte_view(b.type == batch_spec::kind::commit_marker ? commit_key : abort_key),
                    proto::byte_view(marker_value), 1000, {}, {}});
  }
  proto::batch_encode_options o;
  o.base_offset = b.base;
  o.partition_leader_epoch = b.epoch;
  o.transactional = b.pid >= 0;
  o.control = b.type != batch_spec::kind::data;
  o.producer_id = b.pid;
  o.producer_epoch = b.pid >= 0 ? 0 : -1;
  const auto start = out.size();
  if (proto::encode_record_batch(recs, o, out)) throw std::runtime_error("encode_record_batch failed");
  if (b.corrupt && !values.empty()) {
    const auto at = std::search(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(), values[0].begin(), values[0].end());
    if (at == out.end()) throw std::runtime_error("value not found in the encoded batch");
    *at = static_cast<std::uint8_t>('X');  // "<tag>-<offset>" becomes "X<ag>-<offset>"
  }
}

struct commit_seen {
  TopicPartition tp;
  std::int64_t offset;
  std::int32_t epoch;
};

// A fake leader (and group coordinator) for topic "t" serving `logs`. Tests change the state
// through edit(), under the same lock the handler takes.
class log_leader {
 public:
  explicit log_leader(std::int32_t partitions)
      : fb_([this](const request& r) { return handle(r); }, {{"t", partitions}}, versions()) {
    for (std::int32_t p = 0; p < partitions; ++p) logs_[p];
  }

  struct state {
    std::map<std::int32_t, partition_log>& logs;
    std::int32_t& leader_epoch;
    std::map<std::int32_t, std::pair<std::int64_t, std::int32_t>>& committed;  // offset, epoch
    int& hide_broker;  // Metadata answers left that list the partitions' leader but not the broker
    bool& topic_deleted;  // Metadata answers leave topic "t" out
    std::chrono::milliseconds& validation_delay;  // OffsetForLeaderEpoch answers wait this long
  };
  template <class F>
  void edit(F f) {
    std::lock_guard lock(mutex_);
    f(state{logs_, leader_epoch_, committed_, hide_broker_, topic_deleted_, validation_delay_});
  }
  int metadata_requests() const {
    std::lock_guard lock(mutex_);
    return metadata_requests_;
  }
  std::vector<commit_seen> commits() const {
    std::lock_guard lock(mutex_);
    return commits_;
  }
  int validations() const {
    std::lock_guard lock(mutex_);
    return validations_;
  }
  std::string bootstrap() const { return fb_.bootstrap(); }

 private:
  static std::vector<proto::api_versions_response::api_version> versions() {
    auto v = fake_broker::default_versions();
    for (auto& a : v) {
      if (a.api_key == proto::offset_fetch_request::api_key) a.max_version = 7;  // the single-group layout
    }
    return v;
  }

  std::optional<reply> handle(const request& r) {
    std::lock_guard lock(mutex_);
    switch (r.api_key) {
      case proto::metadata_request::api_key: {
        auto m = fb_.metadata();
        ++metadata_requests_;
        for (auto& t : m.topics)
          for (auto& p : t.partitions) p.leader_epoch = leader_epoch_;
        if (topic_deleted_) m.topics.clear();
        if (hide_broker_ > 0) {
          --hide_broker_;
          m.brokers.clear();  // as for a leader that is down
        }
        return reply{fake_broker::response(r, m)};
      }
      case proto::offset_fetch_request::api_key: {
        proto::offset_fetch_request req;
        if (!r.decode(req) || !req.topics) return std::nullopt;
        proto::offset_fetch_response resp;
        for (const auto& t : *req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (auto p : t.partition_indexes) {
            auto it = committed_.find(p);
            if (it == committed_.end())
              rt.partitions.push_back({p, -1, -1, std::string{}, 0});
            else
              rt.partitions.push_back({p, it->second.first, it->second.second, std::string{}, 0});
          }
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::offset_commit_request::api_key: {
        proto::offset_commit_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::offset_commit_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) {
            commits_.push_back({{t.name, p.partition_index}, p.committed_offset, p.committed_leader_epoch});
            committed_[p.partition_index] = {p.committed_offset, p.committed_leader_epoch};
            rt.partitions.push_back({p.partition_index, 0});
          }
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::list_offsets_request::api_key: {
        proto::list_offsets_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::list_offsets_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) {
            const auto& log = logs_[p.partition_index];
            std::int64_t off = p.timestamp == -2 ? log.log_start : req.isolation_level == 1 ? log.stable() : log.end();
            std::int64_t ts = -1;
            if (p.timestamp >= 0) {  // the first data record at or after that time
              off = -1;
              for (const auto& b : log.batches) {
                if (b.type != batch_spec::kind::data || off >= 0) continue;
                for (auto o = std::max(b.base, log.log_start); o <= b.last(); ++o) {
                  if (record_time(o) >= p.timestamp) {
                    off = o;
                    ts = record_time(o);
                    break;
                  }
                }
              }
            }
            rt.partitions.push_back({p.partition_index, 0, {}, ts, off, leader_epoch_});
          }
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::offset_for_leader_epoch_request::api_key: {
        proto::offset_for_leader_epoch_request req;
        if (!r.decode(req)) return std::nullopt;
        ++validations_;
        proto::offset_for_leader_epoch_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.topic = t.topic;
          for (const auto& p : t.partitions) {
            auto& e = rt.partitions.emplace_back();
            e.partition = p.partition;
            if (p.current_leader_epoch >= 0 && p.current_leader_epoch < leader_epoch_) {
              e.error_code = 74;  // FENCED_LEADER_EPOCH
            } else if (p.current_leader_epoch > leader_epoch_) {
              e.error_code = 75;  // UNKNOWN_LEADER_EPOCH
            } else {
              std::tie(e.leader_epoch, e.end_offset) = logs_[p.partition].epoch_end(p.leader_epoch, leader_epoch_);
            }
          }
        }
        return reply{fake_broker::response(r, resp), false, validation_delay_};
      }
      case proto::fetch_request::api_key:
        return fetch(r);
      default:
        return std::nullopt;
    }
  }

  std::optional<reply> fetch(const request& r) {
    proto::fetch_request req;
    if (!r.decode(req)) return std::nullopt;
    proto::fetch_response resp;
    std::deque<proto::bytes> data;  // stable addresses for the records views
    bool any = false;
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic = t.topic;
      for (const auto& p : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = p.partition;
        rp.records = proto::records_view{};
        const auto& log = logs_[p.partition];
        rp.high_watermark = log.end();
        rp.last_stable_offset = log.stable();
        rp.log_start_offset = log.log_start;
        if (p.current_leader_epoch >= 0 && p.current_leader_epoch < leader_epoch_) {
          rp.error_code = 74;  // FENCED_LEADER_EPOCH: the consumer's metadata is older
          continue;
        }
        if (p.current_leader_epoch > leader_epoch_) {
          rp.error_code = 75;  // UNKNOWN_LEADER_EPOCH
          continue;
        }
        if (p.fetch_offset < log.log_start || p.fetch_offset > log.end()) {
          rp.error_code = 1;  // OFFSET_OUT_OF_RANGE
          continue;
        }
        const std::int64_t limit = req.isolation_level == 1 ? log.stable() : log.end();
        auto& bytes = data.emplace_back();
        for (const auto& b : log.batches) {
          if (b.last() >= p.fetch_offset && b.last() < limit) encode_batch(b, bytes);
        }
        if (req.isolation_level == 1) {
          rp.aborted_transactions.emplace();
          for (const auto& [pid, first] : log.aborted) rp.aborted_transactions->push_back({pid, first});
        }
        if (!bytes.empty()) {
          rp.records = proto::records_view{bytes};
          any = true;
        }
      }
    }
    return reply{fake_broker::response(r, resp), false, any ? 0ms : 50ms};
  }

  mutable std::mutex mutex_;
  std::map<std::int32_t, partition_log> logs_;
  std::int32_t leader_epoch_ = 0;
  std::map<std::int32_t, std::pair<std::int64_t, std::int32_t>> committed_;
  std::vector<commit_seen> commits_;
  int validations_ = 0;
  int hide_broker_ = 0;
  bool topic_deleted_ = false;
  std::chrono::milliseconds validation_delay_{0};
  int metadata_requests_ = 0;
  fake_broker fb_;  // last: its threads call handle(), which uses the members above
};

kgroup::Config config_for(const log_leader& leader, const std::string& reset, const std::string& isolation = "read_uncommitted") {
  return test_config(leader.bootstrap())
      .group("g")
      .set("auto.offset.reset", reset)
      .set("isolation.level", isolation)
      .manual_commit()
      .quick_recovery()
      .fetch_wait(50ms);
}

struct got {
  std::int32_t partition;
  std::int64_t offset;
  std::string value;
  std::int32_t epoch;
};

// Polls until `done(records so far)` or `limit`; returns every record in order.
template <class Done>
std::vector<got> poll_until(kgroup::Consumer& c, Done done, std::chrono::milliseconds limit = 10s) {
  std::vector<got> out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done(out) && std::chrono::steady_clock::now() < deadline) {
    for (const auto& rec : c.poll(50ms))
      out.push_back({rec.partition, rec.offset, std::string(rec.value.value_or("")), rec.leader_epoch});
  }
  return out;
}

std::vector<std::int64_t> offsets_of(const std::vector<got>& records, std::int32_t partition) {
  std::vector<std::int64_t> out;
  for (const auto& r : records) {
    if (r.partition == partition) out.push_back(r.offset);
  }
  return out;
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to_inclusive) {
  std::vector<std::int64_t> out;
  for (auto o = from; o <= to_inclusive; ++o) out.push_back(o);
  return out;
}

std::vector<std::int64_t> cat(std::initializer_list<std::vector<std::int64_t>> parts) {
  std::vector<std::int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

kgroup::PartitionMetrics partition_metrics(kgroup::Consumer& c, const TopicPartition& tp) {
  for (const auto& p : c.metrics().partitions) {
    if (p.partition == tp) return p;
  }
  return {};
}

const TopicPartition t0{"t", 0}, t1{"t", 1};

// Partition 0: producer 1's transaction commits, producer 2's (interleaved) aborts, producer 1
// commits another, then plain records. Partition 1: producers 3 and 4 interleave batch by batch;
// 3 aborts, 4 commits. Offsets:
//   p0: 0-2 pid1 | 3-5 pid2 | 6 commit(1) | 7 abort(2) | 8-9 pid1 | 10 commit(1) | 11-12 plain
//   p1: 0-1 pid3 | 2-3 pid4 | 4-5 pid3 | 6 abort(3) | 7 pid4 | 8 commit(4)
void interleaved_transactions(log_leader::state s) {
  auto& p0 = s.logs[0];
  p0.append(3, 0, "committed", 1);
  p0.append(3, 0, "aborted", 2);
  p0.marker(1, true, 0);
  p0.marker(2, false, 0);
  p0.append(2, 0, "committed", 1);
  p0.marker(1, true, 0);
  p0.append(2, 0, "plain");
  p0.aborted = {{2, 3}};
  auto& p1 = s.logs[1];
  p1.append(2, 0, "aborted", 3);
  p1.append(2, 0, "committed", 4);
  p1.append(2, 0, "aborted", 3);
  p1.marker(3, false, 0);
  p1.append(1, 0, "committed", 4);
  p1.marker(4, true, 0);
  p1.aborted = {{3, 0}};
}

}  // namespace

TEST_CASE("read_committed never returns a record of an aborted transaction or a control record; read_uncommitted "
          "returns every data record",
          "[datasafety]") {
  log_leader leader(2);
  leader.edit(interleaved_transactions);
  const bool committed_only = GENERATE(true, false);
  INFO("isolation.level=" << (committed_only ? "read_committed" : "read_uncommitted"));
  kgroup::Consumer c(config_for(leader, "earliest", committed_only ? "read_committed" : "read_uncommitted"));
  c.assign({t0, t1});
  // Every position lands past the last marker: 13 and 9.
  const auto records = poll_until(c, [&](const std::vector<got>&) {
    return c.position(t0) == 13 && c.position(t1) == 9;
  });
  c.poll(200ms);  // nothing further arrives
  if (committed_only) {
    CHECK(offsets_of(records, 0) == cat({range(0, 2), range(8, 9), range(11, 12)}));
    CHECK(offsets_of(records, 1) == cat({range(2, 3), {7}}));
    for (const auto& r : records) CHECK(r.value.rfind("aborted", 0) == std::string::npos);
  } else {
    CHECK(offsets_of(records, 0) == cat({range(0, 5), range(8, 9), range(11, 12)}));  // no 6, 7, 10: markers
    CHECK(offsets_of(records, 1) == cat({range(0, 5), {7}}));                         // no 6, 8
  }
  for (const auto& r : records) CHECK(r.value == (r.value.substr(0, r.value.find('-')) + "-" + std::to_string(r.offset)));
  // The positions are past the markers, and that is what is committed.
  c.commit_sync();
  const auto committed = c.committed({t0, t1});
  CHECK(committed.at(t0).offset == 13);
  CHECK(committed.at(t1).offset == 9);
  c.close(5s);
}

TEST_CASE(
    "next_offsets() names each partition's next offset after a batch, past markers and aborted records; "
    "records(topic) selects one topic",
    "[datasafety]") {
  log_leader leader(2);
  leader.edit(interleaved_transactions);
  kgroup::Consumer c(config_for(leader, "earliest", "read_committed"));
  c.assign({t0, t1});
  std::map<TopicPartition, kgroup::OffsetAndMetadata> next;
  std::size_t returned = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline &&
         !(next.count(t0) && next[t0].offset == 13 && next.count(t1) && next[t1].offset == 9)) {
    const auto batch = c.poll(100ms);
    returned += batch.size();
    CHECK(batch.records("t").size() == batch.size());
    CHECK(batch.records("other").empty());
    for (const auto& tp : batch.partitions()) {
      // Every partition with records in the batch has a next offset just past its last record
      // (or further, past markers read after it), with that record's leader epoch.
      REQUIRE(batch.next_offsets().count(tp));
      const auto last = batch.records(tp).back().get();
      CHECK(batch.next_offsets().at(tp).offset > last.offset);
      CHECK(batch.next_offsets().at(tp).leader_epoch == std::optional<std::int32_t>(last.leader_epoch));
    }
    for (const auto& [tp, o] : batch.next_offsets()) next[tp] = o;
  }
  // Past the last marker of each partition (13 and 9), though its last record is 12 and 7: an
  // application committing next_offsets() after each batch commits past the markers too.
  REQUIRE(next.count(t0));
  REQUIRE(next.count(t1));
  CHECK(next[t0].offset == 13);
  CHECK(next[t1].offset == 9);
  CHECK(returned == 7 + 3);
  c.commit_sync(next);
  const auto committed = c.committed({t0, t1});
  CHECK(committed.at(t0).offset == 13);
  CHECK(committed.at(t1).offset == 9);
  c.close(5s);
}

TEST_CASE("an open transaction holds read_committed at the last stable offset until its marker; lag counts to the "
          "LSO",
          "[datasafety]") {
  log_leader leader(1);
  leader.edit([](log_leader::state s) {
    auto& p0 = s.logs[0];
    p0.append(5, 0, "plain");          // 0-4
    p0.append(3, 0, "open", 9);        // 5-7, producer 9's transaction still open
    p0.lso = 5;
    p0.aborted = {};
  });
  SECTION("read_committed") {
    kgroup::Consumer c(config_for(leader, "earliest", "read_committed"));
    c.assign({t0});
    auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
    c.poll(300ms);  // the open transaction's records are not returned
    CHECK(offsets_of(records, 0) == range(0, 4));
    CHECK(c.position(t0) == 5);
    // Lag is measured to the last stable offset (5), not the high watermark (8).
    CHECK(eventually([&] { c.poll(10ms); return partition_metrics(c, t0).high_watermark == 5; }, 5s));
    CHECK(partition_metrics(c, t0).lag == 0);

    leader.edit([](log_leader::state s) {
      s.logs[0].marker(9, true, 0);  // 8: the transaction commits
      s.logs[0].lso = -1;
    });
    const auto rest = poll_until(c, [&](const std::vector<got>&) { return c.position(t0) == 9; });
    CHECK(offsets_of(rest, 0) == range(5, 7));
    c.close(5s);
  }
  SECTION("read_uncommitted") {
    kgroup::Consumer c(config_for(leader, "earliest", "read_uncommitted"));
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 8; });
    CHECK(offsets_of(records, 0) == range(0, 7));
    CHECK(eventually([&] { c.poll(10ms); return partition_metrics(c, t0).high_watermark == 8; }, 5s));
    c.close(5s);
  }
}

namespace {

// The leader's log before the election: 0-9 written in epoch 0, 10-19 in epoch 1 (leader epoch 1).
void before_election(log_leader::state s) {
  s.leader_epoch = 1;
  auto& p0 = s.logs[0];
  p0.append(10, 0, "old");
  p0.append(10, 1, "old");
}

// An unclean election: the new leader (epoch 2) never had epoch 1's records 10-19. Its log is
// 0-9 from epoch 0, then 10-17 written in epoch 2 (other records at the same offsets).
void unclean_election(log_leader::state s) {
  s.leader_epoch = 2;
  auto& p0 = s.logs[0];
  p0.batches.resize(1);
  p0.append(8, 2, "new");
}

// A clean leader change: the new leader (epoch 2) has everything, and adds 20-24.
void clean_election(log_leader::state s) {
  s.leader_epoch = 2;
  s.logs[0].append(5, 2, "new");
}

}  // namespace

TEST_CASE("log truncation below the position after an unclean leader election is detected (KIP-320)",
          "[datasafety]") {
  log_capture logs;
  log_leader leader(1);
  leader.edit(before_election);
  const std::string reset = GENERATE(as<std::string>{}, "earliest", "latest", "none");
  INFO("auto.offset.reset=" << reset);
  kgroup::Consumer c(config_for(leader, reset));
  c.assign({t0});
  c.seek(t0, 0);
  const auto before = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 20; });
  REQUIRE(offsets_of(before, 0) == range(0, 19));
  CHECK(before.back().epoch == 1);
  REQUIRE(c.position(t0) == 20);
  const int validations_before = leader.validations();

  // The next Fetch is refused (FENCED_LEADER_EPOCH); the consumer learns the new leader epoch and
  // validates its position (epoch 1, offset 20): epoch 1 ends at offset 10 in the new log.
  leader.edit(unclean_election);
  if (reset != "none") {
    // As Java: the consumer resumes at the first offset known to diverge, so every record the new
    // leader has from there is read (not the log's start, not its end).
    const auto after = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 8; });
    CHECK(offsets_of(after, 0) == range(10, 17));
    for (const auto& r : after) CHECK(r.value == "new-" + std::to_string(r.offset));
    CHECK(c.position(t0) == 18);
    CHECK(logs.has_warning({"t-0", "log truncation", "position 20", "diverged at offset 10"}));
  } else {
    // Raised from poll() with the divergent offset; nothing of t-0 is returned until a seek.
    std::optional<kgroup::LogTruncationError> raised;
    std::vector<got> meanwhile;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!raised && std::chrono::steady_clock::now() < deadline) {
      try {
        for (const auto& rec : c.poll(50ms)) meanwhile.push_back({rec.partition, rec.offset, "", rec.leader_epoch});
      } catch (const kgroup::LogTruncationError& e) {
        raised = e;
      }
    }
    REQUIRE(raised);
    CHECK(raised->code() == make_error_code(client_errc::log_truncation));
    CHECK(std::string(raised->what()).find("t-0") != std::string::npos);
    REQUIRE(raised->divergent_offsets().count(t0) == 1);
    CHECK(raised->divergent_offsets().at(t0).offset == 10);
    CHECK(raised->divergent_offsets().at(t0).leader_epoch == std::optional<std::int32_t>(0));
    CHECK(meanwhile.empty());
    for (int i = 0; i < 5; ++i) CHECK(c.poll(50ms).empty());
    CHECK(c.position(t0) == 20);
    // The application decides: here, the divergent offset (validated again: it is in the log).
    c.seek(t0, raised->divergent_offsets().at(t0));
    const auto after = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 8; });
    CHECK(offsets_of(after, 0) == range(10, 17));
    CHECK(c.position(t0) == 18);
  }
  CHECK(leader.validations() > validations_before);
  const auto m = c.metrics();
  CHECK(m.log_truncations_total == 1);
  CHECK(m.offset_validations_total >= 1);
  c.close(5s);
}

// Issue 30, item 1: the fetcher reads ahead of the application (max.poll.records=5: it holds
// 0-19 while poll() returned 0-4). The truncation it finds at its own position (20, diverged at
// 10) is applied against the application's: nothing before 10 is skipped, nothing the new leader
// does not have is returned.
TEST_CASE("a truncation found at the prefetch position is applied at the application's position (issue 30)",
          "[datasafety]") {
  log_capture logs;
  log_leader leader(1);
  leader.edit(before_election);
  const std::string reset = GENERATE(as<std::string>{}, "earliest", "latest", "none");
  INFO("auto.offset.reset=" << reset);
  auto cfg = config_for(leader, reset);
  cfg.set("max.poll.records", "5");
  kgroup::Consumer c(cfg);
  c.assign({t0});
  c.seek(t0, 0);
  // Polls as the application does, collecting records and the LogTruncationError raised.
  std::optional<kgroup::LogTruncationError> raised;
  auto poll_some = [&](std::size_t want) {
    std::vector<got> out;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (out.size() < want && !raised && std::chrono::steady_clock::now() < deadline) {
      try {
        for (const auto& rec : c.poll(50ms))
          out.push_back({rec.partition, rec.offset, std::string(rec.value.value_or("")), rec.leader_epoch});
      } catch (const kgroup::LogTruncationError& e) {
        raised = e;
      }
    }
    return out;
  };
  // The fetcher holds 0-19 before the application has read past 10, so the cut is found with data
  // of the old leader still queued.
  auto prefetched = [&] { return partition_metrics(c, t0).high_watermark == 20; };

  SECTION("the application's position below the divergence: the old leader's records up to it, then the new "
          "leader's; no error, whatever the policy") {
    const auto first = poll_some(5);
    REQUIRE(offsets_of(first, 0) == range(0, 4));
    REQUIRE(eventually(prefetched, 5s));
    leader.edit(unclean_election);
    REQUIRE(eventually([&] { return c.metrics().log_truncations_total == 1; }, 10s));
    const auto after = poll_some(13);
    CHECK_FALSE(raised);
    CHECK(offsets_of(after, 0) == range(5, 17));
    for (const auto& r : after) CHECK(r.value == (r.offset < 10 ? "old-" : "new-") + std::to_string(r.offset));
    CHECK(c.position(t0) == 18);
    c.commit_sync();
    CHECK(leader.commits().back().offset == 18);
  }
  SECTION("the application's position past the divergence") {
    const auto first = poll_some(15);
    REQUIRE(offsets_of(first, 0) == range(0, 14));
    leader.edit(unclean_election);
    REQUIRE(eventually([&] { return c.metrics().log_truncations_total == 1; }, 10s));
    if (reset != "none") {
      // Moved back to the divergence (Java's rule): the new leader's records from there, none of
      // the old leader's 15-19 that were still queued.
      const auto after = poll_some(8);
      CHECK(offsets_of(after, 0) == range(10, 17));
      for (const auto& r : after) CHECK(r.value == "new-" + std::to_string(r.offset));
      CHECK(c.position(t0) == 18);
    } else {
      // Raised with the divergent offset; the position stays (as Java); no record at or past 10 is
      // returned (neither the old leader's 15-19 still queued nor new data) until the seek.
      const auto meanwhile = poll_some(1);
      REQUIRE(raised);
      CHECK(meanwhile.empty());
      REQUIRE(raised->divergent_offsets().count(t0) == 1);
      CHECK(raised->divergent_offsets().at(t0).offset == 10);
      CHECK(c.position(t0) == 15);
      for (int i = 0; i < 5; ++i) CHECK(c.poll(50ms).empty());
      CHECK(c.position(t0) == 15);
      raised.reset();
      c.seek(t0, 10);
      const auto after = poll_some(8);
      CHECK_FALSE(raised);
      CHECK(offsets_of(after, 0) == range(10, 17));
      for (const auto& r : after) CHECK(r.value == "new-" + std::to_string(r.offset));
    }
  }
  c.close(5s);
}

// Issue 30, item 1: OFFSET_OUT_OF_RANGE at the prefetch position while the application's
// position is still in the log: a cut at the log's end, not a reset of the application's position.
TEST_CASE("out of range at the prefetch position with the application's position in the log is no reset (issue 30)",
          "[datasafety]") {
  log_capture logs;
  log_leader leader(1);
  leader.edit([](log_leader::state s) {
    s.logs[0].append(20, 0, "old");  // 0-19, no epoch change to validate with
  });
  const std::string reset = GENERATE(as<std::string>{}, "earliest", "latest", "none");
  INFO("auto.offset.reset=" << reset);
  auto cfg = config_for(leader, reset);
  cfg.set("max.poll.records", "5");
  kgroup::Consumer c(cfg);
  c.assign({t0});
  c.seek(t0, 0);
  const auto first = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
  REQUIRE(offsets_of(first, 0) == range(0, 4));
  REQUIRE(eventually([&] { return partition_metrics(c, t0).high_watermark == 20; }, 5s));
  // The log now ends at 12 (12-19 lost; what is below is the same).
  leader.edit([](log_leader::state s) {
    auto& p0 = s.logs[0];
    p0.batches.clear();
    p0.append(12, 0, "old");
  });
  // The application reads on only once the fetcher has met the end (it logs after queuing the cut).
  REQUIRE(eventually([&] { return logs.has_warning({"t-0", "offset 20 out of range", "ends at offset 12"}); }, 10s));
  auto after = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 7; });
  CHECK(offsets_of(after, 0) == range(5, 11));
  CHECK(c.position(t0) == 12);
  // Then it grows again: read from its end on.
  leader.edit([](log_leader::state s) { s.logs[0].append(3, 0, "new"); });
  const auto more = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 3; });
  after.insert(after.end(), more.begin(), more.end());
  CHECK(offsets_of(after, 0) == range(5, 14));
  for (const auto& r : after) CHECK(r.value == (r.offset < 12 ? "old-" : "new-") + std::to_string(r.offset));
  CHECK(c.position(t0) == 15);
  c.close(5s);
}

// Issue 30, item 7: resume() that reached the fetcher while it validated its (prefetch) position
// after a leader change was dropped: the fetcher went on from its own position, whose data the
// application (behind it) cannot use, and the partition fell silent until the next seek.
TEST_CASE("resume() during a validation after a leader change is not lost (issue 30)", "[datasafety]") {
  log_leader leader(1);
  leader.edit(before_election);
  auto cfg = config_for(leader, "none");
  cfg.set("max.poll.records", "5");
  kgroup::Consumer c(cfg);
  c.assign({t0});
  c.seek(t0, 0);
  const auto first = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
  REQUIRE(offsets_of(first, 0) == range(0, 4));
  REQUIRE(eventually([&] { return partition_metrics(c, t0).high_watermark == 20; }, 5s));
  // A leader change: the fetcher's next Fetch (at 20) is fenced, and it validates 20. The answer
  // takes 500 ms; meanwhile the application pauses (its buffered data is dropped) and resumes.
  const int validations_before = leader.validations();
  leader.edit([](log_leader::state s) {
    s.validation_delay = 500ms;
    clean_election(s);
  });
  REQUIRE(eventually([&] { return leader.validations() > validations_before; }, 10s));
  c.pause({t0});
  c.resume({t0});
  const auto after = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 20; });
  CHECK(offsets_of(after, 0) == range(5, 24));
  c.close(5s);
}

TEST_CASE("a clean leader change is validated and changes nothing: no record skipped or read twice", "[datasafety]") {
  log_leader leader(1);
  leader.edit(before_election);
  kgroup::Consumer c(config_for(leader, "none"));
  c.assign({t0});
  c.seek(t0, 0);
  auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 20; });
  leader.edit(clean_election);
  const auto after = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
  records.insert(records.end(), after.begin(), after.end());
  c.poll(200ms);
  CHECK(offsets_of(records, 0) == range(0, 24));
  const auto m = c.metrics();
  CHECK(m.offset_validations_total >= 1);
  CHECK(m.log_truncations_total == 0);
  CHECK(leader.validations() >= 1);
  c.close(5s);
}

TEST_CASE("a committed offset is validated with its leader epoch before the next owner fetches", "[datasafety]") {
  log_leader leader(1);
  leader.edit(before_election);
  leader.edit(unclean_election);
  SECTION("an epoch the new leader's log diverged from: resumes at the divergence, not at the reset point") {
    // A previous owner committed 20 in epoch 1, before the unclean election.
    leader.edit([](log_leader::state s) { s.committed[0] = {20, 1}; });
    kgroup::Consumer c(config_for(leader, "earliest"));
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 8; });
    CHECK(offsets_of(records, 0) == range(10, 17));
    CHECK(c.metrics().log_truncations_total == 1);
    c.close(5s);
  }
  SECTION("an epoch that still matches: the committed offset is kept") {
    leader.edit([](log_leader::state s) { s.committed[0] = {5, 0}; });
    kgroup::Consumer c(config_for(leader, "earliest"));
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 13; });
    CHECK(offsets_of(records, 0) == range(5, 17));
    CHECK(leader.validations() == 1);
    const auto m = c.metrics();
    CHECK(m.offset_validations_total == 1);
    CHECK(m.log_truncations_total == 0);
    c.close(5s);
  }
}

TEST_CASE("commits carry the leader epoch of the last consumed record; an application's epoch is sent; committed() "
          "returns it",
          "[datasafety]") {
  log_leader leader(1);
  leader.edit(before_election);
  kgroup::Consumer c(config_for(leader, "earliest"));
  c.assign({t0});
  poll_until(c, [](const std::vector<got>& r) { return r.size() >= 20; });
  c.commit_sync();
  auto commits = leader.commits();
  REQUIRE(commits.size() == 1);
  CHECK(commits.back().offset == 20);
  CHECK(commits.back().epoch == 1);  // offset 19 was written in epoch 1
  auto committed = c.committed({t0});
  CHECK(committed.at(t0).offset == 20);
  CHECK(committed.at(t0).leader_epoch == std::optional<std::int32_t>(1));

  c.commit_sync({{t0, {7, "meta", 0}}});
  commits = leader.commits();
  REQUIRE(commits.size() == 2);
  CHECK(commits.back().offset == 7);
  CHECK(commits.back().epoch == 0);
  c.commit_sync({{t0, {8, "", std::nullopt}}});
  CHECK(leader.commits().back().epoch == -1);
  c.close(5s);
}

TEST_CASE("positions out of range (OFFSET_OUT_OF_RANGE, below the log start after retention) follow "
          "auto.offset.reset",
          "[datasafety]") {
  log_leader leader(2);
  leader.edit([](log_leader::state s) {
    for (auto& [p, log] : s.logs) {
      log.log_start = 100;  // retention deleted 0-99
      log.batches.push_back({100, 10, 0, -1, batch_spec::kind::data, "kept"});
    }
    s.committed[0] = {50, -1};   // below the log start
    s.committed[1] = {500, -1};  // past the log end
  });
  SECTION("earliest") {
    kgroup::Consumer c(config_for(leader, "earliest"));
    c.assign({t0, t1});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 20; });
    CHECK(offsets_of(records, 0) == range(100, 109));
    CHECK(offsets_of(records, 1) == range(100, 109));
    c.close(5s);
  }
  SECTION("latest") {
    kgroup::Consumer c(config_for(leader, "latest"));
    c.assign({t0, t1});
    CHECK(eventually([&] { c.poll(20ms); return c.position(t0) == 110 && c.position(t1) == 110; }, 10s));
    leader.edit([](log_leader::state s) { s.logs[0].append(2, 0, "more"); });
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 2; });
    CHECK(offsets_of(records, 0) == range(110, 111));
    c.close(5s);
  }
  SECTION("none: each partition raised from poll(), by name") {
    kgroup::Consumer c(config_for(leader, "none"));
    c.assign({t0, t1});
    std::vector<std::string> raised;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (raised.size() < 2 && std::chrono::steady_clock::now() < deadline) {
      try {
        const auto records = c.poll(50ms);
        CHECK(records.empty());
      } catch (const kgroup::Error& e) {
        CHECK(e.code() == make_error_code(client_errc::offset_out_of_range));
        raised.push_back(e.what());
      }
    }
    REQUIRE(raised.size() == 2);
    std::sort(raised.begin(), raised.end());
    CHECK(raised[0].find("offset 50 of t-0") != std::string::npos);
    CHECK(raised[1].find("offset 500 of t-1") != std::string::npos);
    // A seek brings the partition back.
    c.seek(t0, 105);
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
    CHECK(offsets_of(records, 0) == range(105, 109));
    c.close(5s);
  }
}

TEST_CASE("a corrupt record batch is raised from poll() with its partition and offset; nothing past it is skipped",
          "[datasafety]") {
  log_leader leader(1);
  leader.edit([](log_leader::state s) {
    auto& p0 = s.logs[0];
    p0.append(5, 0, "ok");     // 0-4
    p0.append(5, 0, "bad");    // 5-9, its CRC no longer matches
    p0.batches.back().corrupt = true;
    p0.append(5, 0, "ok");     // 10-14
  });
  SECTION("check.crcs=true (the default)") {
    kgroup::Consumer c(config_for(leader, "earliest"));
    c.assign({t0});
    std::vector<got> records;
    std::vector<std::string> errors;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (errors.size() < 3 && std::chrono::steady_clock::now() < deadline) {
      try {
        for (const auto& rec : c.poll(50ms)) records.push_back({rec.partition, rec.offset, "", rec.leader_epoch});
      } catch (const kgroup::Error& e) {
        CHECK(e.code() == make_error_code(client_errc::corrupt_record));
        errors.push_back(e.what());
      }
    }
    // Raised again by every poll() until the application decides; the records before it arrived.
    REQUIRE(errors.size() == 3);
    CHECK(errors[0].find("t-0 at offset 5") != std::string::npos);
    CHECK(offsets_of(records, 0) == range(0, 4));
    CHECK(c.position(t0) == 5);
    c.seek(t0, 10);  // skip the corrupt batch
    const auto rest = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
    CHECK(offsets_of(rest, 0) == range(10, 14));
    c.close(5s);
  }
  SECTION("check.crcs=false: the batch is returned as it is") {
    auto cfg = config_for(leader, "earliest");
    cfg.set("check.crcs", "false");
    kgroup::Consumer c(cfg);
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 15; });
    CHECK(offsets_of(records, 0) == range(0, 14));
    REQUIRE(records.size() >= 6);
    CHECK(records[5].value == "Xad-5");
    c.close(5s);
  }
}

TEST_CASE("a partition whose leader is missing from the metadata's broker list is fetched once a refresh names it",
          "[datasafety]") {
  // Kafka (and the mock clusters) leave a broker that is down out of the broker list while its
  // partitions still name it as leader. Such a partition was skipped without a metadata refresh
  // and stalled until metadata.max.age.ms.
  log_leader leader(1);
  leader.edit([](log_leader::state s) {
    s.logs[0].append(5, 0, "x");
    s.hide_broker = 3;
  });
  kgroup::Consumer c(test_config(leader.bootstrap())
                         .earliest()
                         .set("metadata.max.age.ms", "600000")
                         .retry_backoff(20ms, 100ms)
                         .fetch_wait(50ms));
  c.assign({t0});
  const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
  CHECK(offsets_of(records, 0) == range(0, 4));
  CHECK(leader.metadata_requests() > 3);
  c.close(5s);
}

TEST_CASE(
    "auto.offset.reset=by_duration:<ISO-8601> starts at the first record that recent, else at the log's end "
    "(KIP-1106)",
    "[datasafety]") {
  using namespace std::chrono;
  log_leader leader(1);
  leader.edit([](log_leader::state s) {
    s.logs[0].log_start = 100;
    s.logs[0].batches.push_back({100, 10, 0, -1, batch_spec::kind::data, "kept"});
  });
  // Offsets 100-109 written a minute apart, the last one a minute ago.
  const record_times times(100, system_clock::now() - minutes(10), minutes(1));
  SECTION("a record within the duration: the first one that recent") {
    kgroup::Consumer c(config_for(leader, "by_duration:PT5M30S"));
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 5; });
    CHECK(offsets_of(records, 0) == range(105, 109));
    c.close(5s);
  }
  SECTION("days and fractions of seconds, any case") {
    kgroup::Consumer c(config_for(leader, "BY_DURATION:p0dt0h7m30.5s"));
    c.assign({t0});
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 7; });
    CHECK(offsets_of(records, 0) == range(103, 109));
    c.close(5s);
  }
  SECTION("nothing that recent: the log's end") {
    kgroup::Consumer c(config_for(leader, "by_duration:PT20S"));
    c.assign({t0});
    CHECK(eventually(
        [&] {
          c.poll(20ms);
          return c.position(t0) == 110;
        },
        10s));
    leader.edit([](log_leader::state s) { s.logs[0].append(2, 0, "more"); });
    const auto records = poll_until(c, [](const std::vector<got>& r) { return r.size() >= 2; });
    CHECK(offsets_of(records, 0) == range(110, 111));
    c.close(5s);
  }
}

TEST_CASE("beginning_offsets, end_offsets (LSO under read_committed), offsets_for_times, partitions_for and "
          "list_topics",
          "[datasafety]") {
  log_leader leader(2);
  leader.edit([](log_leader::state s) {
    for (auto& [p, log] : s.logs) {
      log.log_start = 100;  // 0-99 deleted by retention
      log.batches.push_back({100, 10, 0, -1, batch_spec::kind::data, "kept"});  // 100-109, times 2000-2090
    }
    s.logs[1].append(3, 0, "open", 5);  // 110-112: an open transaction
    s.logs[1].lso = 110;
  });
  const std::set<TopicPartition> both{t0, t1};
  for (const std::string& level : std::vector<std::string>{"read_uncommitted", "read_committed"}) {
    INFO(level);
    kgroup::Consumer c(config_for(leader, "earliest", level));
    CHECK(c.beginning_offsets(both) == std::map<TopicPartition, std::int64_t>{{t0, 100}, {t1, 100}});
    const std::int64_t end1 = level == "read_committed" ? 110 : 113;
    CHECK(c.end_offsets(both, 5s) == std::map<TopicPartition, std::int64_t>{{t0, 110}, {t1, end1}});
    c.close(5s);
  }

  kgroup::Consumer c(config_for(leader, "earliest"));
  // Offset 105's record has time 2050: asking for 2045 or 2050 finds it; past the last record, none.
  const auto found = c.offsets_for_times({{t0, 2045}, {t1, 2050}});
  REQUIRE(found.at(t0).has_value());
  CHECK(*found.at(t0) == kgroup::OffsetAndTimestamp{105, 2050});
  CHECK(*found.at(t1) == kgroup::OffsetAndTimestamp{105, 2050});
  CHECK_FALSE(c.offsets_for_times({{t0, 999999}}).at(t0).has_value());
  CHECK_THROWS_AS(c.offsets_for_times({{t0, -5}}), kgroup::Error);

  const auto parts = c.partitions_for("t");
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].partition == 0);
  CHECK(parts[1].leader == 1);
  CHECK(c.partitions_for("no-such-topic", 2s).empty());
  const auto topics = c.list_topics();
  REQUIRE(topics.count("t") == 1);
  CHECK(topics.at("t").size() == 2);
  // A topic the cluster no longer names is gone from the next list (the view is not only merged).
  leader.edit([](log_leader::state s) { s.topic_deleted = true; });
  CHECK(c.list_topics().count("t") == 0);
  CHECK(c.partitions_for("t").empty());
  leader.edit([](log_leader::state s) { s.topic_deleted = false; });

  // A partition that does not exist: retried until the timeout, then its error.
  try {
    c.end_offsets({{"t", 9}}, 500ms);
    FAIL("end_offsets() of a missing partition returned");
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == make_error_code(kgroup::kafka_errc::unknown_topic_or_partition));
    CHECK(std::string(e.what()).find("t-9") != std::string::npos);
  }
  c.close(5s);
}
