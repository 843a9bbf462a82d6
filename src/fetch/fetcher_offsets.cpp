// The fetcher, continued: where each partition starts (committed offsets, the reset policy,
// KIP-320 validation) and the offset queries of the Consumer API. See fetcher.hpp.
#include "fetch/fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "data/offset_fetch.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

// ---- committed offsets --------------------------------------------------------------------------

void fetcher::send_offset_fetch() {
  const auto wanted = requests_.committed_wanted();
  if (wanted.empty()) return;
  const auto id = identity_();
  if (!id.group_mode) {
    requests_.no_group(wanted);
    return;
  }
  auto conn = coordinator_connection(id);
  if (!conn) {
    schedule_retry();
    return;
  }
  conn->send_adjusted(
      requests_.request_committed(wanted), data::adjust_offset_fetch,
      [self = shared_from_this()](std::error_code ec, const protocol::offset_fetch_response& r,
                                  const net::response_frame&) {
        if (self->stopped_) {
          // The core's request ends here too (its in-flight mark, its partitions asked again).
          (void)self->requests_.on_committed(make_error_code(client_errc::shutting_down), r);
          return;
        }
        self->on_committed(ec, r);
      });
}

void fetcher::on_committed(std::error_code ec, const protocol::offset_fetch_response& r) {
  const auto got = requests_.on_committed(ec, r);
  if (got.error_code != 0) logger()->debug("OffsetFetch: {}", kafka_error_name(got.error_code));
  if (got.coordinator_failed) coordinator_unusable(true);
  for (const auto& c : got.offsets) {
    logger()->debug("{}-{}: committed offset {} (leader epoch {})", c.tp.topic, c.tp.partition, c.offset,
                    c.epoch);
    {
      std::lock_guard lock(shared_.mutex);
      shared_.metrics.committed[c.tp] = c.offset;
    }
    shared_.push(detail::position_event{c.tp, c.offset, false, c.epoch});
  }
  if (got.retry) schedule_retry();
  if (!ec && got.error_code == 0) pump();
}

// ---- resets ---------------------------------------------------------------------------------------

void fetcher::report_wants(const data::position_wants& wants) {
  for (const auto& r : wants.reports) {
    if (r.what == data::position_report::kind::missing) {
      report_missing(r.tp);
    } else {
      shared_.push(detail::data_error{r.tp, make_error_code(client_errc::offset_out_of_range),
                                      "no committed offset for " + r.tp.topic + "-" +
                                          std::to_string(r.tp.partition) + " and auto.offset.reset=none"});
    }
  }
  if (wants.missing) retry_after_metadata();
}

void fetcher::send_list_offsets() {
  const auto& md = cluster_->metadata();
  const auto wants = requests_.resets_wanted(md);
  report_wants(wants);
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  for (const auto& [leader, tps] : wants.by_leader) {
    auto conn = leader_connection(leader);
    if (!conn) continue;
    auto sent = std::make_shared<data::sent_resets>(requests_.request_resets(leader, tps, md, now_ms));
    conn->send_adjusted(
        sent->request, data::adjust_list_offsets,
        [self = shared_from_this(), sent](std::error_code ec, const protocol::list_offsets_response& r,
                                          const net::response_frame&) {
          if (self->stopped_) return;
          self->on_resets(*sent, ec, r);
        });
  }
}

void fetcher::on_resets(const data::sent_resets& sent, std::error_code ec,
                        const protocol::list_offsets_response& r) {
  if (ec) logger()->debug("ListOffsets failed: {}", ec.message());
  const auto got = requests_.on_resets(sent, ec, r);
  for (const auto& tp : got.found_nothing) {
    logger()->info("{}-{}: no record within auto.offset.reset's duration; reset to the log's end", tp.topic,
                   tp.partition);
  }
  for (const auto& p : got.positions) {
    logger()->debug("{}-{}: reset to offset {}", p.tp.topic, p.tp.partition, p.offset);
    shared_.push(detail::position_event{p.tp, p.offset, true, p.epoch});
  }
  if (got.refresh_metadata) maybe_refresh_metadata();
  if (got.retry) schedule_retry();
  pump();
}

// ---- validation (KIP-320) --------------------------------------------------------------------------

// A position with a leader epoch (the epoch of the record before it) is checked with the
// partition's leader before fetching from it after a leader change, a FENCED_LEADER_EPOCH, or when
// restored from a committed offset with its epoch: OffsetForLeaderEpoch returns where that epoch
// ends in the leader's log. An end below the position means the log was truncated under it.
void fetcher::send_validations() {
  const auto& md = cluster_->metadata();
  const auto wants = requests_.validations_wanted(md);
  report_wants(wants);
  for (const auto& [leader, tps] : wants.by_leader) {
    auto conn = leader_connection(leader);
    if (!conn) continue;
    auto sent = std::make_shared<data::sent_validations>(requests_.request_validations(leader, tps, md));
    conn->send(sent->request, [self = shared_from_this(), sent](
                                  std::error_code ec, const protocol::offset_for_leader_epoch_response& r) {
      if (self->stopped_) return;
      self->on_validations(*sent, ec, r);
    });
  }
}

void fetcher::on_validations(const data::sent_validations& sent, std::error_code ec,
                             const protocol::offset_for_leader_epoch_response& r) {
  const auto got = requests_.on_validations(sent, ec, r);
  if (got.unsupported) {
    logger()->debug("OffsetForLeaderEpoch v2+ not supported by the leader; positions are not validated");
  } else if (ec) {
    logger()->debug("OffsetForLeaderEpoch failed: {}", ec.message());
  }
  for (const auto& v : got.results) on_validated(v);
  if (got.refresh_metadata) maybe_refresh_metadata();
  if (got.retry) schedule_retry();
  pump();
}

void fetcher::on_validated(const data::validation_result::validated& v) {
  const auto& tp = v.tp;
  const auto& o = v.outcome;
  const std::string name = tp.topic + "-" + std::to_string(tp.partition);
  using verdict = data::validation_outcome::verdict;
  if (o.what == verdict::retry) {
    // FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...: asked again once metadata is fresh.
    logger()->debug("{}: OffsetForLeaderEpoch: {}", name, kafka_error_name(v.error_code));
    return;
  }
  // Counted once the outcome is published: an application that sees the count sees the cut too.
  struct count_on_return {
    detail::shared_state& shared;
    bool truncated;
    ~count_on_return() {
      std::lock_guard lock(shared.mutex);
      ++shared.metrics.offset_validations;
      if (truncated) ++shared.metrics.log_truncations;
    }
  } counted{shared_, o.what != verdict::valid};
  switch (o.what) {
    case verdict::retry:
    case verdict::valid:
      break;
    case verdict::reset:
      logger()->warn("{}: log truncation detected at offset {} (leader epoch {}); the leader cannot tell where its log "
                     "diverged, so auto.offset.reset={} applies",
                     name, o.position, o.epoch, opts_.auto_offset_reset);
      break;
    case verdict::resumed:
      logger()->warn(
          "{}: log truncation detected: position {} (leader epoch {}) is past the leader's log, which "
          "diverged at offset {} (epoch {}); resuming there",
          name, o.position, o.epoch, v.end_offset, v.end_epoch);
      break;
    case verdict::awaiting_seek:
      // auto.offset.reset=none: poll() raises LogTruncationError only if the application's
      // position is past the divergence (the user thread decides); otherwise the data before it
      // is read as usual.
      logger()->warn("{}: log truncation detected at offset {} (leader epoch {}): {}; auto.offset.reset=none",
                     name, o.position, o.epoch,
                     o.divergence_unknown
                         ? std::string("the leader cannot tell where its log diverged")
                         : "the leader's log diverged at offset " + std::to_string(v.end_offset) +
                               " (epoch " + std::to_string(v.end_epoch) + ")");
      break;
  }
  if (o.cut) shared_.push_cut(tp, o.cut->offset, o.cut->epoch, detail::cut_kind::diverged, o.cut->halted);
}

// ---- offset queries (beginning_offsets, end_offsets, offsets_for_times) ---------------------------

struct fetcher::offsets_query {
  std::map<TopicPartition, std::int64_t> wanted;  // not answered yet
  offsets_result got;
  clock::time_point deadline;
  offsets_done done;
  std::error_code last_error;
  std::string last_message;
  bool finished = false;

  void finish(std::error_code ec, const std::string& message) {
    if (finished) return;
    finished = true;
    done(ec, message, ec ? offsets_result{} : std::move(got));
  }
};

void fetcher::query_offsets(std::map<TopicPartition, std::int64_t> timestamps, clock::time_point deadline,
                            offsets_done done) {
  auto q = std::make_shared<offsets_query>();
  q->wanted = std::move(timestamps);
  q->deadline = deadline;
  q->done = std::move(done);
  run_query(std::move(q));
}

void fetcher::retry_query(std::shared_ptr<offsets_query> q) {
  if (clock::now() + opts_.retry_backoff >= q->deadline) {
    q->finish(q->last_error ? q->last_error : make_error_code(client_errc::request_timed_out),
              q->last_message.empty() ? "no answer in time" : q->last_message);
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io_, opts_.retry_backoff);
  timer->async_wait([self = shared_from_this(), q, timer](const boost::system::error_code&) { self->run_query(q); });
}

void fetcher::run_query(std::shared_ptr<offsets_query> q) {
  if (stopped_) return q->finish(make_error_code(client_errc::shutting_down), "the consumer is closing");
  if (q->wanted.empty()) return q->finish({}, "");
  std::set<std::string> topics;
  for (const auto& [tp, ts] : q->wanted) topics.insert(tp.topic);
  const auto timeout = std::min<std::chrono::milliseconds>(
      opts_.request_timeout,
      std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(q->deadline - clock::now())));
  cluster_->refresh_metadata(std::vector<std::string>(topics.begin(), topics.end()), timeout,
                             [self = shared_from_this(), q, timeout](std::error_code ec) {
    if (self->stopped_) return q->finish(make_error_code(client_errc::shutting_down), "the consumer is closing");
    if (ec) {
      q->last_error = ec;
      q->last_message = "metadata: " + ec.message();
      return self->retry_query(q);
    }
    const auto& md = self->cluster_->metadata();
    std::map<std::int32_t, std::vector<TopicPartition>> by_leader;
    for (const auto& [tp, ts] : q->wanted) {
      auto t = md.topics.find(tp.topic);
      if (t == md.topics.end() || t->second.error_code != 0 ||
          tp.partition >= static_cast<std::int32_t>(t->second.partitions.size())) {
        q->last_error = make_error_code(kafka_errc::unknown_topic_or_partition);
        q->last_message = tp.topic + "-" + std::to_string(tp.partition) + " is not in the cluster metadata";
        continue;
      }
      const auto leader = t->second.partitions[static_cast<std::size_t>(tp.partition)].leader;
      if (leader < 0 || md.brokers.count(leader) == 0) {
        q->last_error = make_error_code(kafka_errc::leader_not_available);
        q->last_message = tp.topic + "-" + std::to_string(tp.partition) + " has no leader";
        continue;
      }
      by_leader[leader].push_back(tp);
    }
    if (by_leader.empty()) return self->retry_query(q);
    auto pending = std::make_shared<std::size_t>(by_leader.size());
    auto one_done = [self, q, pending] {
      if (--*pending > 0) return;
      if (q->wanted.empty()) return q->finish({}, "");
      self->retry_query(q);
    };
    for (const auto& [leader, tps] : by_leader) {
      auto conn = self->cluster_->broker(leader);
      if (!conn) {
        one_done();
        continue;
      }
      protocol::list_offsets_request req;
      req.replica_id = -1;
      req.isolation_level = self->opts_.isolation_level;
      std::map<std::string, std::size_t> index;
      for (const auto& tp : tps) {
        auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
        if (inserted) req.topics.push_back({tp.topic, {}});
        const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
        req.topics[it->second].partitions.push_back({tp.partition, pi.leader_epoch, q->wanted.at(tp), 1});
      }
      conn->send_adjusted(
          std::move(req), data::adjust_list_offsets,
          [q, one_done](std::error_code ec, const protocol::list_offsets_response& r,
                        const net::response_frame&) {
            if (ec) {
              q->last_error = ec;
              q->last_message = "ListOffsets: " + ec.message();
            }
            for (const auto& t : r.topics) {
              for (const auto& p : t.partitions) {
                const TopicPartition tp{t.name, p.partition_index};
                if (!q->wanted.count(tp)) continue;
                if (p.error_code == 0) {
                  q->got[tp] = {p.offset, p.timestamp};
                  q->wanted.erase(tp);
                  continue;
                }
                const auto code = static_cast<kafka_errc>(p.error_code);
                q->last_error = make_error_code(code);
                q->last_message = "ListOffsets of " + tp.topic + "-" + std::to_string(tp.partition) + ": " +
                                  kafka_error_name(p.error_code);
                if (!is_retriable(code)) return q->finish(q->last_error, q->last_message);
              }
            }
            one_done();
          },
          timeout);
    }
  });
}

}  // namespace kgroup::fetch
