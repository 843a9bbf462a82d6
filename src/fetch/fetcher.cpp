#include "fetch/fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "fetch/offset_fetch.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

std::int64_t load_i64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}
std::int32_t load_i32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return static_cast<std::int32_t>(v);
}

bool refresh_worthy(std::int16_t code) {
  return protocol::reacts(code, protocol::reaction::refresh_metadata);
}

}  // namespace

std::int64_t next_fetch_offset(std::span<const std::uint8_t> records, std::int64_t from,
                               std::int32_t* last_epoch) noexcept {
  // Batch and legacy message layouts share the first 17 bytes: offset, length, (epoch|crc), magic.
  std::int64_t next = from;
  std::size_t pos = 0;
  while (records.size() - pos >= 17) {
    const std::uint8_t* p = records.data() + pos;
    const std::int64_t base = load_i64(p);
    const std::int32_t length = load_i32(p + 8);
    if (length < 0 || static_cast<std::size_t>(length) > records.size() - pos - 12) break;  // partial tail
    const std::int8_t magic = static_cast<std::int8_t>(p[16]);
    std::int64_t last = base;
    std::int32_t epoch = -1;
    if (magic >= 2) {
      if (length < 15) break;
      last = base + load_i32(p + 23);  // last offset delta
      epoch = load_i32(p + 12);        // partition leader epoch
    }
    if (last_epoch != nullptr && last + 1 > next) *last_epoch = epoch;
    next = std::max(next, last + 1);
    pos += 12 + static_cast<std::size_t>(length);
  }
  return next;
}

namespace {
bool coordinator_gone(std::int16_t code) {
  return protocol::reacts(code, protocol::reaction::coordinator_moved);
}
}  // namespace

fetcher::fetcher(asio::io_context& io, std::shared_ptr<net::cluster> c, fetcher_options opts,
                 detail::shared_state& shared, std::function<group_identity()> identity)
    : io_(io),
      cluster_(std::move(c)),
      opts_(std::move(opts)),
      shared_(shared),
      identity_(std::move(identity)),
      retry_timer_(io),
      auto_commit_timer_(io) {}

void fetcher::shutdown() {
  stopped_ = true;
  retry_timer_.cancel();
  auto_commit_timer_.cancel();
}

bool fetcher::missing(const topic_partition& tp, part& p) {
  const auto& md = cluster_->metadata();
  auto t = md.topics.find(tp.topic);
  const bool absent = t == md.topics.end() || t->second.error_code != 0 ||
                      tp.partition >= static_cast<std::int32_t>(t->second.partitions.size());
  // A leader the broker list does not name (a broker that is down: Kafka's metadata, like the
  // mock's, then lists the partition's leader but not the broker) is no leader either: metadata is
  // refreshed until it names one that can be reached. Before, such a partition was skipped with no
  // refresh, and stalled until metadata.max.age.ms (found by the chaos test on librdkafka 2.15.1).
  const bool no_leader = !absent && [&] {
    const auto leader = t->second.partitions[static_cast<std::size_t>(tp.partition)].leader;
    return leader < 0 || md.brokers.count(leader) == 0;
  }();
  if (!absent) {
    p.missing_since = 0;
    p.reported_missing = false;
    return no_leader;
  }
  if (p.missing_since == 0) {
    p.missing_since = md.refreshes + 1;
  } else if (manual_ && !p.reported_missing && md.refreshes > p.missing_since) {
    p.reported_missing = true;
    shared_.push(detail::data_error{tp, make_error_code(client_errc::partition_not_found),
                                    tp.topic + "-" + std::to_string(tp.partition) +
                                        " is not in the cluster metadata (deleted, or never existed)"});
  }
  return true;
}

std::int64_t fetcher::reset_timestamp() const {
  return opts_.auto_offset_reset == "earliest" ? -2 : -1;
}

void fetcher::assign(const std::set<topic_partition>& owned, bool manual) {
  manual_ = manual;
  for (auto it = parts_.begin(); it != parts_.end();) {
    if (!owned.count(it->first)) {
      last_auto_committed_.erase(it->first);
      it = parts_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& tp : owned) {
    if (!parts_.count(tp)) parts_.emplace(tp, part{});
  }
  arm_auto_commit();
  pump();
}

void fetcher::seek(const topic_partition& tp, std::int64_t offset, std::int32_t epoch) {
  shared_.push(detail::position_event{tp, offset, false, epoch, true});
  auto it = parts_.find(tp);
  if (it == parts_.end()) return;
  it->second.state = epoch >= 0 ? pstate::needs_validation : pstate::ready;
  it->second.fetch_pos = offset;
  it->second.epoch = epoch;
  pump();
}

void fetcher::refetch(const topic_partition& tp, std::int64_t offset, std::int32_t epoch) {
  auto it = parts_.find(tp);
  if (it == parts_.end() || it->second.state != pstate::ready) return;  // moved on meanwhile (reset, seek)
  it->second.fetch_pos = offset;
  it->second.epoch = epoch;
  pump();
}

void fetcher::seek_to(const std::set<topic_partition>& tps, bool beginning) {
  for (const auto& tp : tps) {
    shared_.push(detail::position_event{tp, -1, false, -1, true});
    auto it = parts_.find(tp);
    if (it == parts_.end()) continue;
    it->second.state = pstate::needs_reset;
    it->second.reset_forced = true;
    it->second.reset_timestamp = beginning ? -2 : -1;
  }
  pump();
}

void fetcher::pause(const std::set<topic_partition>& tps) {
  for (const auto& tp : tps) {
    if (auto it = parts_.find(tp); it != parts_.end()) it->second.paused = true;
  }
}

void fetcher::resume(const std::map<topic_partition, detail::epoch_offset>& positions) {
  for (const auto& [tp, pos] : positions) {
    auto it = parts_.find(tp);
    if (it == parts_.end()) continue;
    it->second.paused = false;
    if (pos.offset >= 0 && it->second.state == pstate::ready) {
      it->second.fetch_pos = pos.offset;
      it->second.epoch = pos.epoch;
    }
  }
  pump();
}

void fetcher::wake() {
  pump();
}

void fetcher::pump() {
  if (stopped_) return;
  send_offset_fetch();
  send_list_offsets();
  send_validations();
  send_fetches();
}

void fetcher::schedule_retry() {
  if (retry_armed_ || stopped_) return;
  retry_armed_ = true;
  retry_timer_.expires_after(opts_.retry_backoff);
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->retry_armed_ = false;
    if (ec || self->stopped_) return;
    self->pump();
  });
}

void fetcher::no_connection() {
  // The leader has no connection to use (unknown to the cluster, or it is closing): ask again
  // after fresh metadata instead of waiting for something else to wake the fetcher.
  maybe_refresh_metadata();
  schedule_retry();
}

void fetcher::maybe_refresh_metadata() {
  const auto now = clock::now();
  if (now - last_metadata_refresh_ < opts_.retry_backoff * 5) return;
  last_metadata_refresh_ = now;
  std::set<std::string> topics;
  for (const auto& [tp, p] : parts_) topics.insert(tp.topic);
  if (topics.empty()) return;
  cluster_->refresh_metadata(std::vector<std::string>(topics.begin(), topics.end()), opts_.request_timeout,
                             [self = shared_from_this()](std::error_code) {
                               if (!self->stopped_) self->pump();
                             });
}

// ---- committed offsets --------------------------------------------------------------------------

void fetcher::send_offset_fetch() {
  if (offset_fetch_in_flight_) return;
  std::map<std::string, std::vector<std::int32_t>> wanted;
  for (auto& [tp, p] : parts_) {
    if (p.state == pstate::needs_committed) wanted[tp.topic].push_back(tp.partition);
  }
  if (wanted.empty()) return;
  const auto id = identity_();
  if (!id.group_mode) {
    for (auto& [tp, p] : parts_) {
      if (p.state == pstate::needs_committed) {
        p.state = pstate::needs_reset;
        p.reset_timestamp = reset_timestamp();
      }
    }
    return;
  }
  auto conn = id.coordinator ? cluster_->broker(*id.coordinator, net::channel::offsets) : nullptr;
  if (!conn) {
    coordinator_unusable(false);
    schedule_retry();
    return;
  }
  protocol::offset_fetch_request req;
  req.group_id = opts_.group_id;
  for (auto& [topic, parts] : wanted) {
    req.topics->push_back({topic, parts});
    for (auto pi : parts) parts_[{topic, pi}].state = pstate::fetching_committed;
  }
  req.require_stable = true;
  offset_fetch_in_flight_ = true;
  conn->send_adjusted(
      std::move(req), adjust_offset_fetch,
      [self = shared_from_this()](std::error_code ec, const protocol::offset_fetch_response& r,
                                  const net::response_frame&) {
        self->offset_fetch_in_flight_ = false;
        if (self->stopped_) return;
        auto retry_all = [&] {
          for (auto& [tp, p] : self->parts_) {
            if (p.state == pstate::fetching_committed) p.state = pstate::needs_committed;
          }
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
          if (coordinator_gone(top)) self->coordinator_unusable(true);
          retry_all();
          return;
        }
        auto apply = [&](const std::string& topic, std::int32_t partition, std::int64_t offset,
                         const std::optional<std::string>&, std::int32_t epoch, std::int16_t err) {
          auto it = self->parts_.find({topic, partition});
          if (it == self->parts_.end() || it->second.state != pstate::fetching_committed) return;
          if (err != 0) {
            it->second.state = pstate::needs_committed;  // e.g. UNSTABLE_OFFSET_COMMIT: retry
            self->schedule_retry();
            return;
          }
          if (offset >= 0) {
            // A committed offset with its leader epoch (OffsetFetch v5+) is validated against the
            // leader's log first: the log may have been truncated below it since (KIP-320).
            it->second.state = epoch >= 0 ? pstate::needs_validation : pstate::ready;
            it->second.fetch_pos = offset;
            it->second.epoch = epoch;
            logger()->debug("{}-{}: committed offset {} (leader epoch {})", topic, partition, offset, epoch);
            {
              std::lock_guard lock(self->shared_.mutex);
              self->shared_.metrics.committed[{topic, partition}] = offset;
            }
            self->shared_.push(detail::position_event{{topic, partition}, offset, false, epoch});
          } else {
            it->second.state = pstate::needs_reset;
            it->second.reset_timestamp = self->reset_timestamp();
            it->second.reset_forced = false;
          }
        };
        for_each_committed(r, apply);
        // Anything the broker did not answer is asked again.
        for (auto& [tp, p] : self->parts_) {
          if (p.state == pstate::fetching_committed) p.state = pstate::needs_committed;
        }
        self->pump();
      });
}

// ---- resets ---------------------------------------------------------------------------------------

void fetcher::send_list_offsets() {
  std::map<std::int32_t, std::vector<topic_partition>> by_leader;
  const auto& md = cluster_->metadata();
  bool missing = false;
  for (auto& [tp, p] : parts_) {
    if (p.state != pstate::needs_reset) continue;
    if (p.reset_timestamp == -1 && opts_.auto_offset_reset == "none" && !p.reset_forced) {
      p.state = pstate::resetting;  // stays until the user seeks
      shared_.push(detail::data_error{tp, make_error_code(client_errc::offset_out_of_range),
                                      "no committed offset for " + tp.topic + "-" +
                                          std::to_string(tp.partition) + " and auto.offset.reset=none"});
      continue;
    }
    if (this->missing(tp, p)) {
      missing = true;
      continue;
    }
    auto t = md.topics.find(tp.topic);
    by_leader[t->second.partitions[static_cast<std::size_t>(tp.partition)].leader].push_back(tp);
  }
  if (missing) {
    maybe_refresh_metadata();
    schedule_retry();
  }
  for (auto& [leader, tps] : by_leader) {
    auto conn = cluster_->broker(leader);
    if (!conn) {
      no_connection();
      continue;
    }
    protocol::list_offsets_request req;
    req.replica_id = -1;
    req.isolation_level = opts_.isolation_level;
    std::map<std::string, std::size_t> index;
    // Each request's answer applies only while it is the partition's latest: a seek_to_*() can
    // start a new reset while an older one is in flight (the older answer is then stale).
    std::map<topic_partition, std::uint64_t> seqs;
    for (const auto& tp : tps) {
      auto& p = parts_[tp];
      p.state = pstate::resetting;
      seqs[tp] = ++p.reset_seq;
      auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
      if (inserted) req.topics.push_back({tp.topic, {}});
      // current_leader_epoch travels from v4 on (the leader fences a stale one).
      const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
      req.topics[it->second].partitions.push_back({tp.partition, pi.leader_epoch, p.reset_timestamp, 1});
    }
    conn->send_adjusted(
        std::move(req),
        [](protocol::list_offsets_request& r, std::int16_t version) {
          if (version < 2) r.isolation_level = 0;
        },
        [self = shared_from_this(), tps, seqs](std::error_code ec, const protocol::list_offsets_response& r,
                                               const net::response_frame&) {
          if (self->stopped_) return;
          const auto current = [&](const topic_partition& tp) -> part* {
            auto it = self->parts_.find(tp);
            const auto s = seqs.find(tp);
            if (it == self->parts_.end() || s == seqs.end() || it->second.state != pstate::resetting ||
                it->second.reset_seq != s->second)
              return nullptr;
            return &it->second;
          };
          std::set<topic_partition> answered;
          if (!ec) {
            for (const auto& t : r.topics) {
              for (const auto& p : t.partitions) {
                topic_partition tp{t.name, p.partition_index};
                auto it = self->parts_.find(tp);
                if (!current(tp)) continue;
                if (p.error_code != 0 || p.offset < 0) {
                  if (refresh_worthy(p.error_code)) self->maybe_refresh_metadata();
                  continue;
                }
                answered.insert(tp);
                logger()->debug("{}-{}: reset to offset {}", tp.topic, tp.partition, p.offset);
                it->second.state = pstate::ready;
                it->second.fetch_pos = p.offset;
                it->second.epoch = p.leader_epoch;  // v4+; -1 before
                self->shared_.push(detail::position_event{tp, p.offset, true, p.leader_epoch});
                it->second.reset_forced = false;
              }
            }
          }
          for (const auto& tp : tps) {
            if (answered.count(tp)) continue;
            if (auto* p = current(tp)) p->state = pstate::needs_reset;
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
  std::map<std::int32_t, std::vector<topic_partition>> by_leader;
  bool missing = false;
  for (auto& [tp, p] : parts_) {
    if (p.state != pstate::needs_validation) continue;
    if (this->missing(tp, p)) {
      missing = true;
      continue;
    }
    const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
    if (p.epoch < 0 || pi.leader_epoch < 0) {
      // Nothing to check with: a position without an epoch (legacy records, a plain seek), or
      // metadata without leader epochs (Metadata before v7). Fetched as it is, as Java does.
      p.state = pstate::ready;
      p.leader_epoch = pi.leader_epoch;
      continue;
    }
    by_leader[pi.leader].push_back(tp);
  }
  if (missing) {
    maybe_refresh_metadata();
    schedule_retry();
  }
  struct sent_part {
    std::int64_t position;
    std::int32_t leader_epoch;
  };
  for (auto& [leader, tps] : by_leader) {
    auto conn = cluster_->broker(leader);
    if (!conn) {
      no_connection();
      continue;
    }
    protocol::offset_for_leader_epoch_request req;
    req.replica_id = -1;  // a consumer (v3+)
    std::map<std::string, std::size_t> index;
    auto sent = std::make_shared<std::map<topic_partition, sent_part>>();
    for (const auto& tp : tps) {
      auto& p = parts_[tp];
      const auto& pi = md.topics.find(tp.topic)->second.partitions[static_cast<std::size_t>(tp.partition)];
      p.state = pstate::validating;
      auto [it, inserted] = index.emplace(tp.topic, req.topics.size());
      if (inserted) req.topics.push_back({tp.topic, {}});
      req.topics[it->second].partitions.push_back({tp.partition, pi.leader_epoch, p.epoch});
      sent->emplace(tp, sent_part{p.fetch_pos, pi.leader_epoch});
    }
    conn->send(std::move(req), [self = shared_from_this(), sent](std::error_code ec,
                                                                const protocol::offset_for_leader_epoch_response& r) {
      if (self->stopped_) return;
      // Still waiting for this answer: not seeked, reset or revoked meanwhile.
      auto waiting = [&](const topic_partition& tp) -> part* {
        auto it = self->parts_.find(tp);
        auto s = sent->find(tp);
        if (it == self->parts_.end() || s == sent->end() || it->second.state != pstate::validating ||
            it->second.fetch_pos != s->second.position)
          return nullptr;
        return &it->second;
      };
      if (ec == make_error_code(client_errc::no_compatible_version)) {
        // A broker older than OffsetForLeaderEpoch v2 (Kafka 2.1) cannot validate: fetch as is.
        logger()->debug("OffsetForLeaderEpoch v2+ not supported by the leader; positions are not validated");
        for (const auto& [tp, sp] : *sent) {
          if (part* p = waiting(tp); p != nullptr) {
            p->state = pstate::ready;
            p->leader_epoch = sp.leader_epoch;
          }
        }
        self->pump();
        return;
      }
      if (!ec) {
        for (const auto& t : r.topics) {
          for (const auto& e : t.partitions) {
            const topic_partition tp{t.topic, e.partition};
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
          p->state = pstate::needs_validation;
          retry = true;
        }
      }
      if (retry) self->schedule_retry();
      self->pump();
    });
  }
}

void fetcher::on_validated(const topic_partition& tp, part& p, std::int32_t leader_epoch, std::int16_t error_code,
                           std::int32_t end_epoch, std::int64_t end_offset) {
  const std::string name = tp.topic + "-" + std::to_string(tp.partition);
  if (error_code != 0) {
    // FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...: asked again once metadata is fresh.
    logger()->debug("{}: OffsetForLeaderEpoch: {}", name, kafka_error_name(error_code));
    p.state = pstate::needs_validation;
    if (refresh_worthy(error_code)) maybe_refresh_metadata();
    schedule_retry();
    return;
  }
  p.leader_epoch = leader_epoch;
  const bool unknown = end_offset < 0 || end_epoch < 0;
  const bool truncated = unknown || end_offset < p.fetch_pos;
  {
    std::lock_guard lock(shared_.mutex);
    ++shared_.metrics.offset_validations;
    if (truncated) ++shared_.metrics.log_truncations;
  }
  if (!truncated) {
    p.state = pstate::ready;
    return;
  }
  if (opts_.auto_offset_reset != "none") {
    if (unknown) {
      logger()->warn("{}: log truncation detected at offset {} (leader epoch {}); the leader cannot tell where its log "
                     "diverged, so auto.offset.reset={} applies",
                     name, p.fetch_pos, p.epoch, opts_.auto_offset_reset);
      p.state = pstate::needs_reset;
      p.reset_timestamp = reset_timestamp();
      p.reset_forced = true;
    } else {
      // As Java: resume at the first offset known to diverge (not at the log's start or end), so
      // no record the new leader has is skipped.
      logger()->warn("{}: log truncation detected: position {} (leader epoch {}) is past the leader's log, which "
                     "diverged at offset {} (epoch {}); resuming there",
                     name, p.fetch_pos, p.epoch, end_offset, end_epoch);
      p.state = pstate::ready;
      p.fetch_pos = end_offset;
      p.epoch = end_epoch;
      shared_.push(detail::position_event{tp, end_offset, true, end_epoch});
    }
    return;
  }
  p.state = pstate::awaiting_seek;
  std::string message = "log truncation detected for " + name + " at offset " + std::to_string(p.fetch_pos) +
                        " (leader epoch " + std::to_string(p.epoch) + ")";
  message += unknown ? ": the leader cannot tell where its log diverged"
                     : ": the leader's log diverged at offset " + std::to_string(end_offset) + " (epoch " +
                           std::to_string(end_epoch) + ")";
  message += "; auto.offset.reset=none, so the partition waits for seek()";
  logger()->warn("{}", message);
  shared_.push(detail::data_error{tp, make_error_code(client_errc::log_truncation), message,
                                  unknown ? -1 : end_offset, unknown ? -1 : end_epoch});
}

// ---- offset queries (beginning_offsets, end_offsets, offsets_for_times) ---------------------------

struct fetcher::offsets_query {
  std::map<topic_partition, std::int64_t> wanted;  // not answered yet
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

void fetcher::query_offsets(std::map<topic_partition, std::int64_t> timestamps, clock::time_point deadline,
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
    std::map<std::int32_t, std::vector<topic_partition>> by_leader;
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
                const topic_partition tp{t.name, p.partition_index};
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

// ---- fetching -------------------------------------------------------------------------------------

void fetcher::send_fetches() {
  {
    std::lock_guard lock(shared_.mutex);
    if (shared_.buffered_bytes >= opts_.buffer_max_bytes) return;  // the user thread wakes us
  }
  const auto& md = cluster_->metadata();
  std::map<std::int32_t, fetch_set> by_leader;
  bool missing = false;
  bool validate = false;
  bool backing_off = false;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [tp, p] : parts_) {
    if (p.state != pstate::ready || p.paused || p.in_flight) continue;
    if (now < p.backoff_until) {
      backing_off = true;
      continue;
    }
    if (this->missing(tp, p)) {
      missing = true;
      continue;
    }
    const auto& t = md.topics.find(tp.topic)->second;
    const auto& pi = t.partitions[static_cast<std::size_t>(tp.partition)];
    if (pi.leader_epoch >= 0 && p.leader_epoch >= 0 && pi.leader_epoch != p.leader_epoch && p.epoch >= 0) {
      // A new leader (epoch): the log it has may end below this position, if an unclean election
      // truncated it. Validated first (KIP-320), as Java does after every leader change.
      p.state = pstate::needs_validation;
      validate = true;
      continue;
    }
    p.leader_epoch = pi.leader_epoch;
    const auto node = fetch_node(p, pi.leader);
    if (fetching_nodes_.count(node)) continue;
    partition_fetch pf;
    pf.topic_id = t.topic_id;
    pf.fetch_offset = p.fetch_pos;
    pf.current_leader_epoch = pi.leader_epoch;  // -1 when metadata has none (before Metadata v7)
    pf.max_bytes = opts_.max_partition_fetch_bytes;
    by_leader[node].emplace(tp, pf);
  }
  if (missing) {
    maybe_refresh_metadata();
    schedule_retry();
  }
  if (backing_off) schedule_retry();
  if (validate) send_validations();
  for (auto& [leader, wanted] : by_leader) {
    auto conn = cluster_->broker(leader);
    if (!conn) {
      no_connection();
      continue;
    }
    protocol::fetch_request req;
    req.replica_id = -1;
    req.max_wait_ms = opts_.fetch_max_wait_ms;
    req.min_bytes = opts_.fetch_min_bytes;
    req.max_bytes = opts_.fetch_max_bytes;
    req.isolation_level = opts_.isolation_level;
    req.rack_id = opts_.client_rack;  // v11+ (KIP-392)
    bool all_ids = true;
    for (const auto& [tp, pf] : wanted) {
      parts_[tp].in_flight = true;
      all_ids = all_ids && !pf.topic_id.is_zero();
    }
    fetching_nodes_.insert(leader);
    if (logger()->should_log(LogLevel::trace)) {
      std::string list;
      for (const auto& [tp, pf] : wanted) list += " " + tp.topic + "-" + std::to_string(tp.partition) + "@" + std::to_string(pf.fetch_offset);
      logger()->trace("fetch from broker {}:{}", leader, list);
    }
    // The partition lists depend on the version (sessions from v7), so the session writes them
    // once the version is chosen. Fetch v13+ names topics by id only: without ids stay below v13.
    auto sent = std::make_shared<const fetch_set>(std::move(wanted));
    conn->send_adjusted(
        std::move(req),
        [self = shared_from_this(), leader, sent](protocol::fetch_request& r, std::int16_t version) {
          self->session(leader).fill(r, version, *sent);
        },
        [self = shared_from_this(), leader, sent, started = std::chrono::steady_clock::now()](
            std::error_code ec, const protocol::fetch_response& r, const net::response_frame& frame) {
          if (!ec) self->record_fetch(std::chrono::steady_clock::now() - started, r);
          self->on_fetch_response(leader, ec, r, frame, *sent);
        },
        opts_.request_timeout + std::chrono::milliseconds(opts_.fetch_max_wait_ms), all_ids ? -1 : 12);
  }
}

std::int32_t fetcher::fetch_node(part& p, std::int32_t leader) {
  if (p.preferred_replica < 0) return leader;
  if (std::chrono::steady_clock::now() >= p.replica_until || !cluster_->metadata().brokers.count(p.preferred_replica)) {
    // Expired (ask the leader again, as Java does after metadata.max.age.ms) or no longer a
    // broker of the cluster.
    p.preferred_replica = -1;
    return leader;
  }
  return p.preferred_replica;
}

void fetcher::clear_preferred_replica(const topic_partition& tp, part& p, std::string_view why) {
  if (p.preferred_replica < 0) return;
  logger()->info("{}-{}: reading from the leader again instead of replica {}: {}", tp.topic, tp.partition,
                 p.preferred_replica, why);
  p.preferred_replica = -1;
}

void fetcher::record_fetch(std::chrono::steady_clock::duration took, const protocol::fetch_response& r) {
  std::size_t bytes = 0;
  for (const auto& t : r.responses) {
    for (const auto& p : t.partitions) bytes += p.records ? p.records->data.size() : 0;
  }
  std::lock_guard lock(shared_.mutex);
  auto& m = shared_.metrics;
  m.fetch_latency_hist.observe(std::chrono::duration<double>(took).count());
  m.fetch_size_hist.observe(static_cast<double>(bytes));
  m.fetch_throttle_hist.observe(r.throttle_time_ms / 1000.0);
}

fetch_session& fetcher::session(std::int32_t node) {
  return sessions_.try_emplace(node, node).first->second;
}

void fetcher::on_fetch_response(std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                                const net::response_frame& frame, const fetch_set& sent) {
  fetching_nodes_.erase(node);
  if (stopped_) return;
  for (const auto& [tp, pf] : sent) {
    if (auto it = parts_.find(tp); it != parts_.end()) it->second.in_flight = false;
  }
  if (ec) {
    session(node).on_request_failed();
    logger()->debug("fetch from broker {} failed: {}", node, ec.message());
    // A replica that cannot be reached is left for the leader (KIP-392).
    for (const auto& [tp, pf] : sent) {
      if (auto it = parts_.find(tp); it != parts_.end() && it->second.preferred_replica == node)
        clear_preferred_replica(tp, it->second, "the replica's connection failed");
    }
    maybe_refresh_metadata();
    schedule_retry();
    return;
  }
  // Partitions the answer names but the request did not cover are dropped (and logged) here.
  const auto result = session(node).on_response(r);
  if (result.error_code != 0) {
    logger()->debug("fetch from broker {} failed: {}", node, kafka_error_name(result.error_code));
    const auto code = static_cast<kafka_errc>(result.error_code);
    if (code != kafka_errc::fetch_session_id_not_found && code != kafka_errc::invalid_fetch_session_epoch) {
      maybe_refresh_metadata();
    }
    schedule_retry();  // the session was reset: the next request is a full one
    return;
  }
  std::size_t pushed_bytes = 0;
  std::vector<detail::fetched_data> out;
  for (const auto& [tp, pdp] : result.partitions) {
    const auto& pd = *pdp;
    logger()->trace("{}-{}: fetch answer: error {}, high watermark {}, {} bytes", tp.topic, tp.partition, pd.error_code,
                    pd.high_watermark, pd.records ? pd.records->data.size() : 0);
    auto it = parts_.find(tp);
    auto s = sent.find(tp);
    if (it == parts_.end() || s == sent.end()) continue;
    part& p = it->second;
    if (p.state != pstate::ready || p.fetch_pos != s->second.fetch_offset)
      continue;  // seeked or reset meanwhile
    const bool from_replica = p.preferred_replica == node;
    if (pd.error_code != 0 && from_replica) {
      // Any error from a follower (it lags behind the position, it no longer follows, ...) sends
      // the partition back to its leader, which may name a replica again (KIP-392; Java and
      // librdkafka do the same). An offset out of range on a follower is not a reset.
      clear_preferred_replica(tp, p, kafka_error_name(pd.error_code));
      p.backoff_until = std::chrono::steady_clock::now() + opts_.retry_backoff;
      schedule_retry();
      continue;
    }
    if (pd.preferred_read_replica >= 0 && pd.preferred_read_replica != node) {
      // The leader names a replica closer to this client's rack (KIP-392): fetch from it until
      // it fails or preferred_replica_ttl passes. A broker metadata does not know is ignored.
      if (cluster_->metadata().brokers.count(pd.preferred_read_replica)) {
        if (p.preferred_replica != pd.preferred_read_replica)
          logger()->info("{}-{}: reading from replica {} (preferred by leader {})", tp.topic, tp.partition,
                         pd.preferred_read_replica, node);
        p.preferred_replica = pd.preferred_read_replica;
        p.replica_until = std::chrono::steady_clock::now() + opts_.preferred_replica_ttl;
      } else {
        logger()->debug("{}-{}: preferred read replica {} is not in metadata; reading from the leader",
                        tp.topic, tp.partition, pd.preferred_read_replica);
        p.backoff_until = std::chrono::steady_clock::now() + opts_.retry_backoff;
        maybe_refresh_metadata();
        schedule_retry();
      }
    }
    if (pd.error_code != 0) {
      if (pd.error_code == static_cast<std::int16_t>(kafka_errc::offset_out_of_range)) {
        logger()->info("{}-{}: offset {} out of range; applying auto.offset.reset={}", tp.topic, tp.partition,
                       p.fetch_pos, opts_.auto_offset_reset);
        p.state = pstate::needs_reset;
        p.reset_timestamp = reset_timestamp();
        p.reset_forced = opts_.auto_offset_reset != "none";
        if (opts_.auto_offset_reset == "none") {
          p.state = pstate::resetting;
          shared_.push(detail::data_error{tp, make_error_code(client_errc::offset_out_of_range),
                                          "offset " + std::to_string(p.fetch_pos) + " of " + tp.topic + "-" +
                                              std::to_string(tp.partition) +
                                              " is out of range and auto.offset.reset=none"});
        }
      } else if (refresh_worthy(pd.error_code)) {
        logger()->debug("{}-{}: {}; refreshing metadata", tp.topic, tp.partition,
                        kafka_error_name(pd.error_code));
        // The leader epochs of this member and the broker differ: a leader change, after which
        // the new leader's log is checked against the position once metadata names it (KIP-320).
        if ((pd.error_code == static_cast<std::int16_t>(kafka_errc::fenced_leader_epoch) ||
             pd.error_code == static_cast<std::int16_t>(kafka_errc::unknown_leader_epoch)) &&
            p.epoch >= 0)
          p.state = pstate::needs_validation;
        maybe_refresh_metadata();
        schedule_retry();
      } else {
        logger()->warn("{}-{}: fetch error {}", tp.topic, tp.partition, kafka_error_name(pd.error_code));
        schedule_retry();
      }
      continue;
    }
    if (!pd.records || pd.records->data.empty()) continue;
    std::int32_t last_epoch = p.epoch;
    const std::int64_t next = next_fetch_offset(pd.records->data, p.fetch_pos, &last_epoch);
    if (next == p.fetch_pos) continue;  // only a partial batch: fetch again (more bytes next time)
    p.epoch = last_epoch;
    detail::fetched_data d;
    d.tp = tp;
    d.fetch_offset = p.fetch_pos;
    d.high_watermark = pd.high_watermark;
    d.last_stable_offset = pd.last_stable_offset;
    d.log_start_offset = pd.log_start_offset;
    d.records = pd.records->data;
    if (pd.aborted_transactions) {
      for (const auto& a : *pd.aborted_transactions) d.aborted.emplace_back(a.producer_id, a.first_offset);
    }
    d.frame = frame.frame;
    d.replica = node;
    d.bytes = pd.records->data.size();
    pushed_bytes += d.bytes;
    p.fetch_pos = next;
    out.push_back(std::move(d));
  }
  if (!out.empty()) {
    {
      std::lock_guard lock(shared_.mutex);
      for (auto& d : out) shared_.fetched.push_back(std::move(d));
      shared_.buffered_bytes += pushed_bytes;
    }
    shared_.cv.notify_all();
  }
  pump();
}

// ---- commits ----------------------------------------------------------------------------------------

void fetcher::coordinator_unusable(bool failed) {
  if (opts_.coordinator_unusable) opts_.coordinator_unusable(failed);
}

void fetcher::commit(std::uint64_t id, commit_map offsets) {
  const auto who = identity_();
  auto report = [this, id](std::error_code ec, std::string msg) {
    if (id != 0)
      shared_.push(detail::commit_done{id, {}, ec, std::move(msg)});
    else if (ec)
      logger()->warn("auto-commit failed: {}", msg);
  };
  if (auto refused = data::refuse_commit(who, offsets)) {
    report(refused->code, std::move(refused->message));
    return;
  }
  auto conn = who.coordinator ? cluster_->broker(*who.coordinator, net::channel::offsets) : nullptr;
  if (!conn) {
    coordinator_unusable(false);
    report(make_error_code(kafka_errc::coordinator_not_available), "the group coordinator is not known yet");
    return;
  }
  conn->send_adjusted(
      data::make_commit_request(opts_.group_id, who, offsets), data::fit_offset_commit,
      [self = shared_from_this(), report, offsets, started = std::chrono::steady_clock::now(),
       generation = who.subscribed ? who.generation : -1](
          std::error_code ec, const protocol::offset_commit_response& r, const net::response_frame&) {
        if (ec) {
          self->coordinator_unusable(true);
          report(ec, "OffsetCommit failed: " + ec.message());
          return;
        }
        if (auto failed = data::read_commit_response(r)) {
          if (failed->coordinator_gone) self->coordinator_unusable(true);
          if (generation >= 0 && self->opts_.commit_error) self->opts_.commit_error(generation, failed->kafka_code);
          report(failed->error.code, std::move(failed->error.message));
          return;
        }
        for (const auto& [tp, om] : offsets) self->last_auto_committed_[tp] = om.offset;
        {
          const double took =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
          std::lock_guard lock(self->shared_.mutex);
          auto& m = self->shared_.metrics;
          ++m.commits;
          m.commit_latency_total_ms += took;
          m.commit_latency_max_ms = std::max(m.commit_latency_max_ms, took);
          m.commit_hist.observe(took / 1000.0);
          for (const auto& [tp, om] : offsets) m.committed[tp] = om.offset;
        }
        report({}, "");
      });
}

void fetcher::fetch_committed(std::uint64_t id, std::set<topic_partition> tps) {
  const auto who = identity_();
  auto conn = who.coordinator ? cluster_->broker(*who.coordinator, net::channel::offsets) : nullptr;
  if (!who.group_mode || !conn) {
    if (who.group_mode) coordinator_unusable(false);
    shared_.push(
        detail::commit_done{id,
                            {},
                            make_error_code(who.group_mode ? kafka_errc::coordinator_not_available
                                                           : kafka_errc::invalid_group_id),
                            who.group_mode ? "the group coordinator is not known yet" : "no group.id"});
    return;
  }
  protocol::offset_fetch_request req;
  req.group_id = opts_.group_id;
  // KIP-447: offsets of pending transactional commits come back as UNSTABLE_OFFSET_COMMIT
  // (retried) instead of a stale committed offset (issue 13, item 8).
  req.require_stable = true;
  std::map<std::string, std::size_t> index;
  for (const auto& tp : tps) {
    auto [it, inserted] = index.emplace(tp.topic, req.topics->size());
    if (inserted) req.topics->push_back({tp.topic, {}});
    (*req.topics)[it->second].partition_indexes.push_back(tp.partition);
  }
  conn->send_adjusted(
      std::move(req), adjust_offset_fetch,
      [self = shared_from_this(), id](std::error_code ec, const protocol::offset_fetch_response& r,
                                      const net::response_frame&) {
        detail::commit_done done{id, {}, ec, ec ? ec.message() : ""};
        std::int16_t top = r.error_code;
        if (!r.groups.empty()) top = r.groups.front().error_code;
        if (ec || coordinator_gone(top)) self->coordinator_unusable(true);
        if (!ec && top != 0) {
          done.code = make_error_code(static_cast<kafka_errc>(top));
          done.message = "OffsetFetch failed: " + kafka_error_name(top);
        }
        auto add = [&](const std::string& topic, std::int32_t p, std::int64_t off,
                       const std::optional<std::string>& m, std::int32_t epoch, std::int16_t err) {
          if (err == 0 && off >= 0) done.offsets[{topic, p}] = {off, m.value_or(""), epoch};
          // A partition's error (UNSTABLE_OFFSET_COMMIT under require_stable, ...) fails the call
          // instead of passing for "nothing committed".
          if (err != 0 && !done.code) {
            done.code = make_error_code(static_cast<kafka_errc>(err));
            done.message =
                "OffsetFetch of " + topic + "-" + std::to_string(p) + " failed: " + kafka_error_name(err);
          }
        };
        for_each_committed(r, add);
        self->shared_.push(std::move(done));
      });
}

void fetcher::arm_auto_commit() {
  if (!opts_.auto_commit || auto_commit_armed_ || stopped_) return;
  auto_commit_armed_ = true;
  auto_commit_timer_.expires_after(opts_.auto_commit_interval);
  auto_commit_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->auto_commit_armed_ = false;
    if (ec || self->stopped_) return;
    self->auto_commit();
    self->arm_auto_commit();
  });
}

void fetcher::auto_commit() {
  std::set<topic_partition> owned;
  for (const auto& [tp, p] : parts_) owned.insert(owned.end(), tp);
  commit_map offsets;
  {
    std::lock_guard lock(shared_.mutex);
    offsets = data::auto_commit_due(shared_.consumed, owned, last_auto_committed_);
  }
  const auto who = identity_();
  if (offsets.empty() || !who.stable) return;
  commit(0, std::move(offsets));
}

}  // namespace kgroup::fetch
