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
      positions_(
          data::parse_reset_strategy(opts_.auto_offset_reset),
          [](const std::string& refused) { logger()->error("{}", refused); },
          data::fetch_timing{opts_.retry_backoff, opts_.preferred_replica_ttl}),
      planner_(positions_,
               data::fetch_planner_options{opts_.fetch_min_bytes, opts_.fetch_max_bytes,
                                           opts_.fetch_max_wait_ms, opts_.max_partition_fetch_bytes,
                                           opts_.isolation_level, opts_.client_rack, opts_.retry_backoff}),
      requests_(positions_, planner_, opts_.group_id, opts_.isolation_level),
      calls_{positions_, chains_, shared_},
      retry_timer_(io),
      auto_commit_timer_(io) {}

void fetcher::shutdown() {
  stopped_ = true;
  retry_timer_.cancel();
  auto_commit_timer_.cancel();
}

void fetcher::report_missing(const TopicPartition& tp) {
  shared_.push(detail::data_error{tp, make_error_code(client_errc::partition_not_found),
                                  tp.topic + "-" + std::to_string(tp.partition) +
                                      " is not in the cluster metadata (deleted, or never existed)"});
}

void fetcher::assign(const std::set<TopicPartition>& owned, bool manual) {
  planner_.set_manual(manual);
  calls_.assign(owned, auto_committer_);
  ids_dirty_ = true;
  arm_auto_commit();
  pump();
}

void fetcher::seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  if (calls_.seek(tp, offset, epoch)) pump();
}

void fetcher::refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  if (calls_.refetch(tp, offset, epoch)) pump();
}

void fetcher::cut_accepted(const TopicPartition& tp, std::int64_t offset) {
  if (calls_.cut_accepted(tp, offset)) pump();
}

void fetcher::reset_position(const TopicPartition& tp) {
  if (calls_.reset_position(tp)) pump();
}

void fetcher::seek_to(const std::set<TopicPartition>& tps, bool beginning) {
  if (calls_.seek_to(tps, beginning)) pump();
}

void fetcher::pause(const std::set<TopicPartition>& tps) {
  if (calls_.pause(tps)) pump();
}

void fetcher::resume(const std::map<TopicPartition, detail::epoch_offset>& positions) {
  if (calls_.resume(positions)) pump();
}

void fetcher::wake() {
  pump();
}

void fetcher::pump() {
  if (stopped_) return;
  check_topic_ids();
  send_offset_fetch();
  send_list_offsets();
  send_validations();
  send_fetches();
}

void fetcher::check_topic_ids() {
  const auto& md = cluster_->metadata();
  if (!ids_dirty_ && md.refreshes == ids_checked_refreshes_) return;
  ids_dirty_ = false;
  ids_checked_refreshes_ = md.refreshes;
  using verdict = data::fetch_positions::topic_id_verdict;
  positions_.for_each([&](const TopicPartition& tp, part& p) {
    const auto t = md.topics.find(tp.topic);
    if (t == md.topics.end()) return;
    const auto before = p.topic_id();
    const auto v = positions_.topic_id_seen(tp, p, t->second.topic_id);
    if (v == verdict::same) return;
    const std::string name = tp.topic + "-" + std::to_string(tp.partition);
    logger()->warn(
        "{}: topic {} was deleted and created again (topic id {} -> {}); the position and committed offset "
        "of the "
        "old topic do not apply to the new one, so auto.offset.reset={} applies",
        name, tp.topic, before.to_string(), t->second.topic_id.to_string(), opts_.auto_offset_reset);
    {
      std::lock_guard lock(shared_.mutex);
      ++shared_.metrics.topic_recreations;
    }
    // Never commit the old topic's position as the new one's: auto-commit starts afresh, and the
    // user thread drops what it queued and applies the reset to the application's position.
    auto_committer_.forget(tp);
    // With auto.offset.reset=none the fetcher waits for a seek, and poll() raises (the user thread).
    shared_.push_cut(tp, -1, -1, detail::cut_kind::recreated, v == verdict::recreated_waits);
  });
}

void fetcher::schedule_retry() {
  if (retry_armed_ || stopped_) return;
  arm(retry_timer_, &fetcher::retry_armed_, opts_.retry_backoff, [](fetcher& f) { f.pump(); });
}

void fetcher::schedule_retry_at(clock::time_point at) {
  if (retry_armed_ || stopped_) return;
  const auto after =
      std::chrono::ceil<std::chrono::milliseconds>(std::max(at - clock::now(), clock::duration::zero()));
  arm(retry_timer_, &fetcher::retry_armed_, after, [](fetcher& f) { f.pump(); });
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
  // The decisions are the planner's (data/fetch_planner.hpp); here they are carried out.
  auto plan = planner_.plan(clock::now(), cluster_->metadata());
  for (const auto& tp : plan.report_missing) report_missing(tp);
  if (plan.refresh_metadata) maybe_refresh_metadata();
  if (plan.retry_at) schedule_retry_at(*plan.retry_at);
  if (plan.validate) send_validations();
  for (auto& f : plan.requests) {
    const auto node = f.node;
    auto sent = f.partitions;
    auto conn = cluster_->broker(node);
    if (!conn) {
      // No connection to use (the node is unknown to the cluster, or closing): ask again after
      // fresh metadata instead of waiting for something else to wake the fetcher.
      const auto at = planner_.not_sent(clock::now(), node, *sent);
      maybe_refresh_metadata();
      schedule_retry_at(at);
      continue;
    }
    if (logger()->should_log(LogLevel::trace)) {
      std::string list;
      for (const auto& [tp, pf] : *sent)
        list += " " + tp.topic + "-" + std::to_string(tp.partition) + "@" + std::to_string(pf.fetch_offset);
      logger()->trace("fetch from broker {}:{}", node, list);
    }
    // The partition lists depend on the version (sessions from v7), so the planner's session
    // writes them once the version is chosen.
    conn->send_adjusted(
        std::move(f.request),
        [self = shared_from_this(), node, sent](protocol::fetch_request& r, std::int16_t version) {
          self->planner_.fill(node, r, version, *sent);
        },
        [self = shared_from_this(), node, sent, started = clock::now()](
            std::error_code ec, const protocol::fetch_response& r, const net::response_frame& frame) {
          if (!ec) self->record_fetch(clock::now() - started, r);
          self->on_fetch_response(node, ec, r, frame, *sent);
        },
        opts_.request_timeout + std::chrono::milliseconds(opts_.fetch_max_wait_ms), f.max_version);
  }
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
  m.fetch_latency_max_ms =
      std::max(m.fetch_latency_max_ms, std::chrono::duration<double, std::milli>(took).count());
  m.fetch_size_hist.observe(static_cast<double>(bytes));
  m.fetch_throttle_hist.observe(r.throttle_time_ms / 1000.0);
}

void fetcher::on_fetch_response(std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                                const net::response_frame& frame, const data::fetch_set& sent) {
  if (stopped_) return;
  const auto answer = planner_.on_answer(clock::now(), cluster_->metadata(), node, ec, r, sent);
  if (ec) logger()->debug("fetch from broker {} failed: {}", node, ec.message());
  if (!answer.unknown_partition.empty()) {
    // Dropped whole (logged by the session, counted here).
    if (auto conn = cluster_->broker(node)) {
      conn->note_mismatch(protocol::fetch_request::api_key, protocol::fetch_response::name, -1,
                          "partition " + answer.unknown_partition);
    }
  }
  if (answer.error_code != 0)
    logger()->debug("fetch from broker {} failed: {}", node, kafka_error_name(answer.error_code));
  for (const auto& [tp, pd] : answer.answered) {
    logger()->trace("{}-{}: fetch answer: error {}, high watermark {}, {} bytes", tp.topic, tp.partition,
                    pd->error_code, pd->high_watermark, pd->records ? pd->records->data.size() : 0);
  }
  using nk = data::fetch_note::kind;
  for (const auto& n : answer.notes) {
    const auto& tp = n.tp;
    switch (n.what) {
      case nk::replica_dropped:
        log_replica_dropped(
            tp, n.replica,
            n.error_code == 0 ? "the replica's connection failed" : kafka_error_name(n.error_code));
        break;
      case nk::replica_named:
        logger()->info("{}-{}: reading from replica {} (preferred by leader {})", tp.topic, tp.partition,
                       n.replica, node);
        break;
      case nk::replica_unknown:
        logger()->debug("{}-{}: preferred read replica {} is not in metadata; reading from the leader",
                        tp.topic, tp.partition, n.replica);
        break;
      case nk::log_end_cut:
        shared_.push_cut(tp, n.end, -1, detail::cut_kind::log_end, n.halted);
        logger()->warn(
            "{}-{}: offset {} out of range: the log now ends at offset {}; data fetched past it is "
            "dropped, and the position is checked against it",
            tp.topic, tp.partition, n.offset, n.end);
        break;
      case nk::out_of_range:
        logger()->info("{}-{}: offset {} out of range; applying auto.offset.reset={}", tp.topic, tp.partition,
                       n.offset, opts_.auto_offset_reset);
        if (n.halted) {
          shared_.push(detail::data_error{tp, make_error_code(client_errc::offset_out_of_range),
                                          "offset " + std::to_string(n.offset) + " of " + tp.topic + "-" +
                                              std::to_string(tp.partition) +
                                              " is out of range and auto.offset.reset=none",
                                          n.offset});
        }
        break;
      case nk::leader_error:
        logger()->debug("{}-{}: {}; refreshing metadata", tp.topic, tp.partition,
                        kafka_error_name(n.error_code));
        break;
      case nk::other_error:
        logger()->warn("{}-{}: fetch error {}", tp.topic, tp.partition, kafka_error_name(n.error_code));
        break;
    }
  }
  if (answer.refresh_metadata) maybe_refresh_metadata();
  if (answer.retry_at) schedule_retry_at(*answer.retry_at);
  calls_.deliver(answer.slices, frame.frame, node);
  if (answer.plan_again) pump();
}

}  // namespace kgroup::fetch
