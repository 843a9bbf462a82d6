#include "fetch/fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "data/offset_fetch.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;


fetcher::fetcher(asio::io_context& io, std::shared_ptr<net::cluster> c, fetcher_options opts,
                 detail::shared_state& shared, std::function<group_identity()> identity)
    : io_(io),
      cluster_(std::move(c)),
      opts_(std::move(opts)),
      shared_(shared),
      identity_(std::move(identity)),
      positions_(data::parse_reset_policy(opts_.auto_offset_reset),
                 [](const std::string& refused) { logger()->error("{}", refused); },
                 data::fetch_timing{opts_.retry_backoff, opts_.preferred_replica_ttl}),
      retry_timer_(io),
      auto_commit_timer_(io) {}

void fetcher::shutdown() {
  stopped_ = true;
  retry_timer_.cancel();
  auto_commit_timer_.cancel();
}

bool fetcher::missing(const TopicPartition& tp, part& p) {
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
  switch (data::fetch_positions::missing(p, absent, md.refreshes, manual_)) {
    case data::missing_verdict::present:
      return no_leader;
    case data::missing_verdict::report_missing:
      shared_.push(detail::data_error{tp, make_error_code(client_errc::partition_not_found),
                                      tp.topic + "-" + std::to_string(tp.partition) +
                                          " is not in the cluster metadata (deleted, or never existed)"});
      break;
    case data::missing_verdict::missing:
      break;
  }
  return true;
}

void fetcher::assign(const std::set<TopicPartition>& owned, bool manual) {
  manual_ = manual;
  for (const auto& tp : positions_.assign(owned)) auto_committer_.forget(tp);
  arm_auto_commit();
  pump();
}

void fetcher::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  shared_.push(detail::position_event{tp, offset, false, epoch, true});
  if (!positions_.seek(tp, offset, epoch)) return;
  pump();
}

void fetcher::refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  if (!positions_.refetch(tp, offset, epoch)) return;  // moved on meanwhile (reset, seek)
  pump();
}

void fetcher::cut_accepted(const TopicPartition& tp, std::int64_t offset) {
  if (positions_.cut_accepted(tp, offset)) pump();
}

void fetcher::reset_position(const TopicPartition& tp) {
  shared_.push(detail::position_event{tp, -1, false, -1, true});
  if (auto* p = positions_.find(tp)) positions_.offset_out_of_range(tp, *p);
  pump();
}

void fetcher::push_cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch, detail::cut_kind kind,
                       bool halted) {
  {
    std::lock_guard lock(shared_.mutex);
    auto& q = shared_.fetched;
    for (auto it = q.begin(); it != q.end();) {
      if (it->tp != tp) {
        ++it;
      } else if (offset < 0 || it->fetch_offset >= offset) {
        shared_.buffered_bytes -= std::min(shared_.buffered_bytes, it->bytes);
        it = q.erase(it);
      } else {
        if (it->limit < 0 || offset < it->limit) {
          it->limit = offset;
          it->limit_epoch = epoch;
        }
        ++it;
      }
    }
    detail::position_event e{tp, offset, false, epoch};
    e.cut = kind;
    e.halted = halted;
    shared_.events.push_back(std::move(e));
  }
  shared_.cv.notify_all();
}

void fetcher::seek_to(const std::set<TopicPartition>& tps, bool beginning) {
  for (const auto& tp : tps) {
    shared_.push(detail::position_event{tp, -1, false, -1, true});
    positions_.seek_to(tp, beginning);
  }
  pump();
}

void fetcher::pause(const std::set<TopicPartition>& tps) {
  for (const auto& tp : tps) positions_.pause(tp);
}

void fetcher::resume(const std::map<TopicPartition, detail::epoch_offset>& positions) {
  for (const auto& [tp, pos] : positions) positions_.resume(tp, pos.offset, pos.epoch);
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
  arm(retry_timer_, &fetcher::retry_armed_, opts_.retry_backoff, [](fetcher& f) { f.pump(); });
}

void fetcher::arm(boost::asio::steady_timer& timer, bool fetcher::*armed, std::chrono::milliseconds after,
                  void (*fire)(fetcher&)) {
  this->*armed = true;
  timer.expires_after(after);
  timer.async_wait([self = shared_from_this(), armed, fire](const boost::system::error_code& ec) {
    self.get()->*armed = false;
    if (ec || self->stopped_) return;
    fire(*self);
  });
}

std::shared_ptr<net::connection> fetcher::leader_connection(std::int32_t leader) {
  auto conn = cluster_->broker(leader);
  // No connection to use (the leader is unknown to the cluster, or closing): ask again after
  // fresh metadata instead of waiting for something else to wake the fetcher.
  if (!conn) retry_after_metadata();
  return conn;
}

void fetcher::retry_after_metadata() {
  maybe_refresh_metadata();
  schedule_retry();
}

void fetcher::maybe_refresh_metadata() {
  const auto now = clock::now();
  if (now - last_metadata_refresh_ < opts_.retry_backoff * 5) return;
  last_metadata_refresh_ = now;
  std::set<std::string> topics;
  for (const auto& [tp, p] : positions_.parts()) topics.insert(tp.topic);
  if (topics.empty()) return;
  cluster_->refresh_metadata(std::vector<std::string>(topics.begin(), topics.end()), opts_.request_timeout,
                             [self = shared_from_this()](std::error_code) {
                               if (!self->stopped_) self->pump();
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
  for (const auto& [tp, cp] : positions_.parts()) {
    const auto check = data::fetch_positions::fetchable(cp, now);
    if (check == data::fetch_check::skip) continue;
    if (check == data::fetch_check::backing_off) {
      backing_off = true;
      continue;
    }
    part& p = *positions_.find(tp);
    if (this->missing(tp, p)) {
      missing = true;
      continue;
    }
    const auto& t = md.topics.find(tp.topic)->second;
    const auto& pi = t.partitions[static_cast<std::size_t>(tp.partition)];
    if (positions_.leader_epoch_seen(tp, p, pi.leader_epoch)) {
      validate = true;  // a new leader: its log is checked against the position first (KIP-320)
      continue;
    }
    const auto node = fetch_node(p, pi.leader);
    if (fetching_nodes_.count(node)) continue;
    partition_fetch pf;
    pf.topic_id = t.topic_id;
    pf.fetch_offset = p.fetch_pos();
    pf.current_leader_epoch = pi.leader_epoch;  // -1 when metadata has none (before Metadata v7)
    pf.max_bytes = opts_.max_partition_fetch_bytes;
    by_leader[node].emplace(tp, pf);
  }
  if (missing) {
    retry_after_metadata();
  }
  if (backing_off) schedule_retry();
  if (validate) send_validations();
  for (auto& [leader, wanted] : by_leader) {
    auto conn = leader_connection(leader);
    if (!conn) continue;
    protocol::fetch_request req;
    req.replica_id = -1;
    req.max_wait_ms = opts_.fetch_max_wait_ms;
    req.min_bytes = opts_.fetch_min_bytes;
    req.max_bytes = opts_.fetch_max_bytes;
    req.isolation_level = opts_.isolation_level;
    req.rack_id = opts_.client_rack;  // v11+ (KIP-392)
    bool all_ids = true;
    for (const auto& [tp, pf] : wanted) {
      positions_.fetch_sent(*positions_.find(tp));
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
  const bool known = p.preferred_replica() >= 0 && cluster_->metadata().brokers.count(p.preferred_replica()) != 0;
  return data::fetch_positions::fetch_node(p, leader, known, std::chrono::steady_clock::now());
}

void fetcher::log_replica_dropped(const TopicPartition& tp, std::int32_t replica, std::string_view why) {
  if (replica < 0) return;
  logger()->info("{}-{}: reading from the leader again instead of replica {}: {}", tp.topic, tp.partition, replica,
                 why);
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
  for (const auto& [tp, pf] : sent) positions_.fetch_ended(tp);
  if (ec) {
    session(node).on_request_failed();
    logger()->debug("fetch from broker {} failed: {}", node, ec.message());
    // A replica that cannot be reached is left for the leader (KIP-392).
    for (const auto& [tp, pf] : sent)
      log_replica_dropped(tp, positions_.replica_unreachable(tp, node), "the replica's connection failed");
    retry_after_metadata();
    return;
  }
  // An answer naming partitions outside the session is dropped whole (logged there, counted
  // here); the session starts over, so its partitions are asked again in full.
  const auto result = session(node).on_response(r);
  if (result.unknown_partitions > 0) {
    if (auto conn = cluster_->broker(node)) {
      conn->note_mismatch(protocol::fetch_request::api_key, protocol::fetch_response::name, -1, "partition " + result.first_unknown);
    }
    schedule_retry();
    return;
  }
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
    part* pp = positions_.find(tp);
    auto s = sent.find(tp);
    if (!pp || s == sent.end()) continue;
    part& p = *pp;
    if (!data::fetch_positions::answer_applies(p, s->second.fetch_offset)) continue;  // seeked or reset meanwhile
    // KIP-392: the decisions are the position table's; here they are logged and acted on.
    const auto replica = positions_.replica_answer(
        p, node, pd.error_code, pd.preferred_read_replica,
        pd.preferred_read_replica >= 0 && cluster_->metadata().brokers.count(pd.preferred_read_replica) != 0,
        std::chrono::steady_clock::now());
    using rv = data::replica_outcome::verdict;
    if (replica.what == rv::replica_failed) {
      log_replica_dropped(tp, replica.replica, kafka_error_name(pd.error_code));
      schedule_retry();
      continue;
    }
    if (replica.what == rv::replica_named && replica.changed) {
      logger()->info("{}-{}: reading from replica {} (preferred by leader {})", tp.topic, tp.partition,
                     replica.replica, node);
    } else if (replica.what == rv::replica_unknown) {
      logger()->debug("{}-{}: preferred read replica {} is not in metadata; reading from the leader", tp.topic,
                      tp.partition, replica.replica);
      retry_after_metadata();
    }
    if (pd.error_code != 0) {
      if (pd.error_code == static_cast<std::int16_t>(kafka_errc::offset_out_of_range) && pd.high_watermark >= 0 &&
          pd.high_watermark < p.fetch_pos()) {
        // The log ends below the prefetch position: the application's position (behind it) may
        // still be in range. A cut at the log's end, decided against the application's position
        // by the user thread; the reset policy applies only when that is past the end too.
        const auto from = p.fetch_pos();
        const bool halted = positions_.log_ended(tp, p, pd.high_watermark) ==
                            data::validation_outcome::verdict::awaiting_seek;
        push_cut(tp, pd.high_watermark, -1, detail::cut_kind::log_end, halted);
        logger()->warn("{}-{}: offset {} out of range: the log now ends at offset {}; data fetched past it is "
                       "dropped, and the position is checked against it",
                       tp.topic, tp.partition, from, pd.high_watermark);
      } else if (pd.error_code == static_cast<std::int16_t>(kafka_errc::offset_out_of_range)) {
        logger()->info("{}-{}: offset {} out of range; applying auto.offset.reset={}", tp.topic, tp.partition,
                       p.fetch_pos(), opts_.auto_offset_reset);
        if (positions_.offset_out_of_range(tp, p)) {
          shared_.push(detail::data_error{tp, make_error_code(client_errc::offset_out_of_range),
                                          "offset " + std::to_string(p.fetch_pos()) + " of " + tp.topic + "-" +
                                              std::to_string(tp.partition) +
                                              " is out of range and auto.offset.reset=none"});
        }
      } else if (protocol::reacts(pd.error_code, protocol::reaction::refresh_metadata)) {
        logger()->debug("{}-{}: {}; refreshing metadata", tp.topic, tp.partition,
                        kafka_error_name(pd.error_code));
        // The leader epochs of this member and the broker differ: a leader change, after which
        // the new leader's log is checked against the position once metadata names it (KIP-320).
        if ((pd.error_code == static_cast<std::int16_t>(kafka_errc::fenced_leader_epoch) ||
             pd.error_code == static_cast<std::int16_t>(kafka_errc::unknown_leader_epoch)))
          positions_.leader_changed(tp, p);
        retry_after_metadata();
      } else {
        logger()->warn("{}-{}: fetch error {}", tp.topic, tp.partition, kafka_error_name(pd.error_code));
        schedule_retry();
      }
      continue;
    }
    if (!pd.records || pd.records->data.empty()) continue;
    std::int32_t last_epoch = p.epoch();
    const std::int64_t from = p.fetch_pos();
    const std::int64_t next = next_fetch_offset(pd.records->data, from, &last_epoch);
    if (!positions_.fetched(p, next, last_epoch)) continue;  // only a partial batch: fetch again (more bytes next time)
    detail::fetched_data d;
    d.tp = tp;
    d.fetch_offset = from;
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

}  // namespace kgroup::fetch
