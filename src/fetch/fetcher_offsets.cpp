// The fetcher, continued: where each partition starts (committed offsets, the reset policy,
// KIP-320 validation) and the offset queries of the Consumer API. See fetcher.hpp.
#include "fetch/fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "data/offset_fetch.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

// ---- committed offsets --------------------------------------------------------------------------

void fetcher::send_offset_fetch() {
  if (offset_fetch_in_flight_) return;
  std::set<TopicPartition> wanted;
  for (const auto& [tp, p] : positions_.parts()) {
    if (p.state() == pstate::needs_committed) wanted.insert(wanted.end(), tp);
  }
  if (wanted.empty()) return;
  const auto id = identity_();
  if (!id.group_mode) {
    positions_.for_each([&](const TopicPartition& tp, part& p) {
      if (p.state() == pstate::needs_committed) positions_.no_group(tp, p);
    });
    return;
  }
  auto conn = coordinator_connection(id);
  if (!conn) {
    schedule_retry();
    return;
  }
  for (const auto& tp : wanted) positions_.committed_requested(tp, *positions_.find(tp));
  offset_fetch_in_flight_ = true;
  conn->send_adjusted(
      data::make_offset_fetch_request(opts_.group_id, wanted), data::adjust_offset_fetch,
      [self = shared_from_this()](std::error_code ec, const protocol::offset_fetch_response& r,
                                  const net::response_frame&) {
        self->offset_fetch_in_flight_ = false;
        if (self->stopped_) return;
        auto retry_all = [&] {
          self->positions_.for_each(
              [&](const TopicPartition& tp, part& p) { self->positions_.committed_failed(tp, p); });
          self->schedule_retry();
        };
        if (ec) {
          self->coordinator_unusable(true);
          retry_all();
          return;
        }
        std::int16_t top = r.error_code;
        if (!r.groups.empty()) top = r.groups.front().error_code;
        if (top != 0) {
          logger()->debug("OffsetFetch: {}", kafka_error_name(top));
          if (protocol::reacts(top, protocol::reaction::coordinator_moved)) self->coordinator_unusable(true);
          retry_all();
          return;
        }
        auto apply = [&](const std::string& topic, std::int32_t partition, std::int64_t offset,
                         const std::optional<std::string>&, std::int32_t epoch, std::int16_t err) {
          const TopicPartition tp{topic, partition};
          part* fp = self->positions_.find(tp);
          if (!fp || fp->state() != pstate::fetching_committed) return;
          if (err != 0) {
            self->positions_.committed_failed(tp, *fp);  // e.g. UNSTABLE_OFFSET_COMMIT: retry
            self->schedule_retry();
            return;
          }
          self->positions_.committed(tp, *fp, offset, epoch);
          if (offset >= 0) {
            logger()->debug("{}-{}: committed offset {} (leader epoch {})", topic, partition, offset, epoch);
            {
              std::lock_guard lock(self->shared_.mutex);
              self->shared_.metrics.committed[{topic, partition}] = offset;
            }
            self->shared_.push(detail::position_event{{topic, partition}, offset, false, epoch});
          }
        };
        data::for_each_committed(r, apply);
        // Anything the broker did not answer is asked again.
        self->positions_.for_each(
            [&](const TopicPartition& tp, part& p) { self->positions_.committed_failed(tp, p); });
        self->pump();
      });
}

// ---- resets ---------------------------------------------------------------------------------------

void fetcher::send_list_offsets() {
  std::map<std::int32_t, std::vector<TopicPartition>> by_leader;
  const auto& md = cluster_->metadata();
  bool missing = false;
  positions_.for_each([&](const TopicPartition& tp, part& p) {
    if (p.state() != pstate::needs_reset) return;
    if (positions_.reset_waits_for_seek(tp, p)) {
      shared_.push(detail::data_error{tp, make_error_code(client_errc::offset_out_of_range),
                                      "no committed offset for " + tp.topic + "-" +
                                          std::to_string(tp.partition) + " and auto.offset.reset=none"});
      return;
    }
    if (this->missing(tp, p)) {
      missing = true;
      return;
    }
    auto t = md.topics.find(tp.topic);
    by_leader[t->second.partitions[static_cast<std::size_t>(tp.partition)].leader].push_back(tp);
  });
  if (missing) {
    retry_after_metadata();
  }
  for (auto& [leader, tps] : by_leader) {
    auto conn = leader_connection(leader);
    if (!conn) continue;
    protocol::list_offsets_request req;
    req.replica_id = -1;
    req.isolation_level = opts_.isolation_level;
    std::map<std::string, std::size_t> index;
    // Each request's answer applies only while it is the partition's latest: a seek_to_*() can
    // start a new reset while an older one is in flight (the older answer is then stale).
    std::map<TopicPartition, std::uint64_t> seqs;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    for (const auto& tp : tps) {
      auto& p = *positions_.find(tp);
      seqs[tp] = positions_.reset_requested(tp, p);
      auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
      if (inserted) req.topics.push_back({tp.topic, {}});
      // current_leader_epoch travels from v4 on (the leader fences a stale one).
      const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
      req.topics[it->second].partitions.push_back(
          {tp.partition, pi.leader_epoch, positions_.list_offsets_timestamp(p, now_ms), 1});
    }
    conn->send_adjusted(
        std::move(req),
        [](protocol::list_offsets_request& r, std::int16_t version) {
          if (version < 2) r.isolation_level = 0;
        },
        [self = shared_from_this(), tps, seqs](std::error_code ec, const protocol::list_offsets_response& r,
                                               const net::response_frame&) {
          if (self->stopped_) return;
          const auto current = [&](const TopicPartition& tp) -> part* {
            const auto s = seqs.find(tp);
            return s == seqs.end() ? nullptr : self->positions_.reset_current(tp, s->second);
          };
          std::set<TopicPartition> answered;
          if (ec) {
            // The broker could not be reached or the request was lost: its leadership may have
            // moved (a broker gone for good), so ask for fresh metadata before the retry, as for
            // Fetch and OffsetForLeaderEpoch (Java refreshes on every disconnect). Without it the
            // retry went to the same broker until metadata.max.age.ms (found by kgroup-sim).
            logger()->debug("ListOffsets failed: {}", ec.message());
            self->maybe_refresh_metadata();
          } else {
            for (const auto& t : r.topics) {
              for (const auto& p : t.partitions) {
                TopicPartition tp{t.name, p.partition_index};
                part* cur = current(tp);
                if (cur == nullptr) continue;
                if (p.error_code == 0 && p.offset < 0 && self->positions_.reset_found_nothing(tp, *cur)) {
                  // auto.offset.reset=by_duration found no record that recent: the log's end.
                  logger()->info(
                      "{}-{}: no record within auto.offset.reset's duration; reset to the log's end",
                      tp.topic, tp.partition);
                  answered.insert(tp);  // not a failure: pump() below asks for the end at once
                  continue;
                }
                if (p.error_code != 0 || p.offset < 0) {
                  if (protocol::reacts(p.error_code, protocol::reaction::refresh_metadata)) self->maybe_refresh_metadata();
                  continue;
                }
                answered.insert(tp);
                logger()->debug("{}-{}: reset to offset {}", tp.topic, tp.partition, p.offset);
                self->positions_.reset_answered(tp, *cur, p.offset, p.leader_epoch);  // epoch: v4+; -1 before
                self->shared_.push(detail::position_event{tp, p.offset, true, p.leader_epoch});
              }
            }
          }
          for (const auto& tp : tps) {
            if (answered.count(tp)) continue;
            if (auto* p = current(tp)) self->positions_.reset_failed(tp, *p);
          }
          if (answered.size() != tps.size()) self->schedule_retry();
          self->pump();
        });
  }
}

// ---- validation (KIP-320) --------------------------------------------------------------------------

// A position with a leader epoch (the epoch of the record before it) is checked with the
// partition's leader before fetching from it after a leader change, a FENCED_LEADER_EPOCH, or when
// restored from a committed offset with its epoch: OffsetForLeaderEpoch returns where that epoch
// ends in the leader's log. An end below the position means the log was truncated under it.
void fetcher::send_validations() {
  const auto& md = cluster_->metadata();
  std::map<std::int32_t, std::vector<TopicPartition>> by_leader;
  bool missing = false;
  positions_.for_each([&](const TopicPartition& tp, part& p) {
    if (p.state() != pstate::needs_validation) return;
    if (this->missing(tp, p)) {
      missing = true;
      return;
    }
    const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
    if (p.epoch() < 0 || pi.leader_epoch < 0) {
      // Nothing to check with: a position without an epoch (legacy records, a plain seek), or
      // metadata without leader epochs (Metadata before v7). Fetched as it is, as Java does.
      positions_.validation_skipped(tp, p, pi.leader_epoch);
      return;
    }
    by_leader[pi.leader].push_back(tp);
  });
  if (missing) {
    retry_after_metadata();
  }
  struct sent_part {
    std::int64_t position;
    std::int32_t leader_epoch;
  };
  for (auto& [leader, tps] : by_leader) {
    auto conn = leader_connection(leader);
    if (!conn) continue;
    protocol::offset_for_leader_epoch_request req;
    req.replica_id = -1;  // a consumer (v3+)
    std::map<std::string, std::size_t> index;
    auto sent = std::make_shared<std::map<TopicPartition, sent_part>>();
    for (const auto& tp : tps) {
      auto& p = *positions_.find(tp);
      const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
      positions_.validation_requested(tp, p);
      auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
      if (inserted) req.topics.push_back({tp.topic, {}});
      req.topics[it->second].partitions.push_back({tp.partition, pi.leader_epoch, p.epoch()});
      sent->emplace(tp, sent_part{p.fetch_pos(), pi.leader_epoch});
    }
    conn->send(std::move(req), [self = shared_from_this(), sent](std::error_code ec,
                                                                const protocol::offset_for_leader_epoch_response& r) {
      if (self->stopped_) return;
      // Still waiting for this answer: not seeked, reset or revoked meanwhile.
      auto waiting = [&](const TopicPartition& tp) -> part* {
        part* p = self->positions_.find(tp);
        auto s = sent->find(tp);
        if (!p || s == sent->end() || p->state() != pstate::validating || p->fetch_pos() != s->second.position)
          return nullptr;
        return p;
      };
      if (ec == make_error_code(client_errc::no_compatible_version)) {
        // A broker older than OffsetForLeaderEpoch v2 (Kafka 2.1) cannot validate: fetch as is.
        logger()->debug("OffsetForLeaderEpoch v2+ not supported by the leader; positions are not validated");
        for (const auto& [tp, sp] : *sent) {
          if (part* p = waiting(tp); p != nullptr) {
            self->positions_.validation_skipped(tp, *p, sp.leader_epoch);
          }
        }
        self->pump();
        return;
      }
      if (!ec) {
        for (const auto& t : r.topics) {
          for (const auto& e : t.partitions) {
            const TopicPartition tp{t.topic, e.partition};
            part* p = waiting(tp);
            if (p == nullptr) continue;
            self->on_validated(tp, *p, sent->at(tp).leader_epoch, e.error_code, e.leader_epoch, e.end_offset);
          }
        }
      } else {
        logger()->debug("OffsetForLeaderEpoch failed: {}", ec.message());
        self->maybe_refresh_metadata();
      }
      bool retry = false;
      for (const auto& [tp, sp] : *sent) {
        if (part* p = waiting(tp); p != nullptr) {  // not answered: asked again
          self->positions_.validation_failed(tp, *p);
          retry = true;
        }
      }
      if (retry) self->schedule_retry();
      self->pump();
    });
  }
}

void fetcher::on_validated(const TopicPartition& tp, part& p, std::int32_t leader_epoch, std::int16_t error_code,
                           std::int32_t end_epoch, std::int64_t end_offset) {
  const std::string name = tp.topic + "-" + std::to_string(tp.partition);
  using verdict = data::validation_outcome::verdict;
  const auto o = positions_.validated(tp, p, leader_epoch, error_code, end_epoch, end_offset);
  if (o.what == verdict::retry) {
    // FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...: asked again once metadata is fresh.
    logger()->debug("{}: OffsetForLeaderEpoch: {}", name, kafka_error_name(error_code));
    if (protocol::reacts(error_code, protocol::reaction::refresh_metadata)) maybe_refresh_metadata();
    schedule_retry();
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
          name, o.position, o.epoch, end_offset, end_epoch);
      break;
    case verdict::awaiting_seek:
      // auto.offset.reset=none: poll() raises LogTruncationError only if the application's
      // position is past the divergence (the user thread decides); otherwise the data before it
      // is read as usual.
      logger()->warn("{}: log truncation detected at offset {} (leader epoch {}): {}; auto.offset.reset=none",
                     name, o.position, o.epoch,
                     o.divergence_unknown
                         ? std::string("the leader cannot tell where its log diverged")
                         : "the leader's log diverged at offset " + std::to_string(end_offset) + " (epoch " +
                               std::to_string(end_epoch) + ")");
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
          std::move(req),
          [](protocol::list_offsets_request& r, std::int16_t version) {
            if (version < 2) r.isolation_level = 0;
          },
          [q, one_done](std::error_code ec, const protocol::list_offsets_response& r, const net::response_frame&) {
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
