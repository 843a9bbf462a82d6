#include "fetch/share_fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "kgroup/error.hpp"

namespace kgroup::fetch {

namespace {

using clock = std::chrono::steady_clock;

// The acquisition lock when no answer has told it yet (the broker's default,
// group.share.record.lock.duration.ms).
constexpr std::chrono::milliseconds default_lock_timeout{30000};
using data::share::ack_map;
using data::share::partition_ids;
using data::share::share_session;

// Partition errors that say the leader moved or the partition is not known where it was asked:
// metadata is looked up again and the partition fetched from its new leader.
bool leader_moved(std::int16_t code) {
  switch (static_cast<kafka_errc>(code)) {
    case kafka_errc::not_leader_or_follower:
    case kafka_errc::unknown_topic_or_partition:
    case kafka_errc::fenced_leader_epoch:
    case kafka_errc::unknown_leader_epoch:
    case kafka_errc::unknown_topic_id:
    case kafka_errc::leader_not_available:
    case kafka_errc::kafka_storage_error:
      return true;
    default:
      return false;
  }
}

// The answer with its bytes: what the facade's views point into.
template <class Response>
struct kept_answer {
  Response response;
  std::shared_ptr<const void> frame;
};

}  // namespace

share_fetcher::share_fetcher(boost::asio::io_context& io, std::shared_ptr<net::cluster> cluster,
                             share_fetcher_options opts, share_fetch_hooks hooks)
    : io_(io), cluster_(std::move(cluster)), opts_(std::move(opts)), hooks_(std::move(hooks)), timer_(io) {}

void share_fetcher::set_assignment(partition_ids assignment, bool rejoining) {
  remember_ids(assignment);
  // The member left the group (a poll timeout, unsubscribe(), a fatal error): its sessions close
  // (epoch -1, with what is acknowledged), so the broker releases their records at once rather
  // than at their locks' expiry. Fetching opens new sessions when partitions come back. A fence
  // is not a leave: the member rejoins with the same id at once, and its sessions stay.
  const bool left = !rejoining && assignment.empty() && !assignment_.empty();
  const auto now = clock::now();
  for (const auto& [tp, id] : assignment_) {
    if (!assignment.count(tp)) left_at_.emplace(tp, now);
  }
  for (const auto& [tp, id] : assignment) left_at_.erase(tp);
  assignment_ = std::move(assignment);
  if (left) {
    for (auto& [id, n] : nodes_) n->close = true;
  }
  pump();
}

void share_fetcher::closed_one(node_state& n) {
  if (closing_) {
    n.closed = true;
    maybe_closed();
  } else {
    n.close = false;  // closed on leaving: the next assignment fetches again
    n.closed = false;
  }
}

void share_fetcher::data_returned(std::int32_t id) {
  if (auto it = nodes_.find(id); it != nodes_.end()) it->second->holding = false;
  pump();
}

void share_fetcher::flush() {
  for (auto& [id, n] : nodes_) n->flush = true;
  pump();
}

void share_fetcher::close(std::function<void()> done) {
  closing_ = true;
  close_done_ = std::move(done);
  for (auto& [id, n] : nodes_) n->close = true;
  pump();
  maybe_closed();
}

void share_fetcher::shutdown() {
  stopped_ = true;
  timer_.cancel();
}

std::map<std::int32_t, std::int32_t> share_fetcher::session_epochs() const {
  std::map<std::int32_t, std::int32_t> out;
  for (const auto& [id, n] : nodes_) out[id] = n->session.next_epoch();
  return out;
}

std::uint64_t share_fetcher::resets() const noexcept {
  std::uint64_t total = 0;
  for (const auto& [id, n] : nodes_) total += n->session.resets();
  return total;
}

share_fetcher::node_state& share_fetcher::node(std::int32_t id) {
  auto& slot = nodes_[id];
  if (!slot) {
    slot = std::make_unique<node_state>(id);
    slot->close = closing_;
  }
  return *slot;
}

partition_ids share_fetcher::wanted_from(std::int32_t id) const {
  partition_ids out;
  const auto& md = cluster_->metadata();
  for (const auto& [tp, topic_id] : assignment_) {
    const auto t = md.topics.find(tp.topic);
    if (t == md.topics.end()) continue;
    for (const auto& p : t->second.partitions) {
      if (p.partition == tp.partition && p.leader == id) out.emplace(tp, topic_id);
    }
  }
  return out;
}

void share_fetcher::refresh_leaders() {
  if (metadata_pending_ || stopped_) return;
  std::set<std::string> topics;
  for (const auto& [tp, id] : assignment_) topics.insert(tp.topic);
  if (topics.empty()) return;
  metadata_pending_ = true;
  cluster_->refresh_metadata(std::vector<std::string>(topics.begin(), topics.end()), opts_.request_timeout,
                             [self = shared_from_this()](std::error_code ec) {
                               self->metadata_pending_ = false;
                               if (self->stopped_) return;
                               if (ec) {
                                 logger()->debug("share fetch: metadata refresh failed: {}", ec.message());
                                 self->arm(clock::now() + self->opts_.retry_backoff);
                                 return;
                               }
                               self->pump();
                             });
}

void share_fetcher::pump() {
  if (stopped_) return;
  // Every leader of an assigned partition gets a session; partitions without a known leader
  // send us to the metadata.
  const auto& md = cluster_->metadata();
  bool unknown = false;
  for (const auto& [tp, id] : assignment_) {
    std::int32_t leader = -1;
    if (auto t = md.topics.find(tp.topic); t != md.topics.end()) {
      for (const auto& p : t->second.partitions)
        if (p.partition == tp.partition) leader = p.leader;
    }
    if (leader < 0)
      unknown = true;
    else
      node(leader);
  }
  if (unknown) refresh_leaders();
  for (auto& [id, n] : nodes_) pump(*n);
}

void share_fetcher::pump(node_state& n) {
  if (stopped_ || n.session.busy() || n.sending) return;
  const auto now = clock::now();
  if (now < n.backoff_until) {
    arm(n.backoff_until);
    return;
  }
  std::set<TopicPartition> here;
  for (const auto& [tp, node] : source_)
    if (node == n.session.node()) here.insert(tp);
  if (n.close) {
    if (n.closed) return;
    if (!n.session.acks_allowed()) {
      // No session to close: what is still acknowledged here cannot go out.
      if (!here.empty() && hooks_.take_acks) {
        auto acks = hooks_.take_acks(here);
        std::vector<std::pair<TopicPartition, std::error_code>> refused;
        const auto why = n.session.reset_cause() ? n.session.reset_cause()
                                                 : make_error_code(data::share::share_errc::no_session);
        for (const auto& [tp, a] : acks) refused.emplace_back(tp, why);
        if (!refused.empty() && hooks_.on_refused) hooks_.on_refused(refused);
      }
      closed_one(n);
      return;
    }
    send_acknowledge(n, here, true);
    return;
  }
  const auto wanted = wanted_from(n.session.node());
  const bool acks_waiting = hooks_.has_acks && !here.empty() && hooks_.has_acks(here);
  if (n.flush) {
    n.flush = false;
    if (acks_waiting) {
      send_acknowledge(n, here, false);
      return;
    }
  }
  if (n.holding) return;
  if (!wanted.empty()) {
    // Acknowledgements of partitions this fetch does not carry (no longer wanted here) go first.
    std::set<TopicPartition> elsewhere;
    for (const auto& tp : here)
      if (!wanted.count(tp)) elsewhere.insert(tp);
    if (!elsewhere.empty() && hooks_.has_acks(elsewhere) && n.session.acks_allowed()) {
      send_acknowledge(n, elsewhere, false);
      return;
    }
    if (forget_deferred(n, wanted)) return;
    send_fetch(n, wanted);
  } else if (acks_waiting) {
    send_acknowledge(n, here, false);
  }
}

bool share_fetcher::forget_deferred(node_state& n, const partition_ids& wanted) {
  if (!hooks_.unresolved) return false;
  const auto leaving = n.session.leaving(wanted);
  if (leaving.empty()) return false;
  const auto unresolved = hooks_.unresolved(std::set<TopicPartition>(leaving.begin(), leaving.end()));
  // Bounded by the acquisition lock: once it would have expired, the broker has released the
  // records anyway (their late acknowledgements then fail with INVALID_RECORD_STATE, a real
  // outcome), so waiting longer only stalls the leader's other partitions.
  const auto bound = lock_timeout_.value_or(default_lock_timeout);
  const auto now = clock::now();
  std::set<TopicPartition> overdue;
  auto earliest = clock::time_point::max();
  for (const auto& tp : leaving) {
    auto since = left_at_.try_emplace(tp, now).first->second;
    if (!unresolved.count(tp)) {
      left_at_.erase(tp);  // forgotten by this ShareFetch
      continue;
    }
    if (now - since >= bound) {
      overdue.insert(tp);  // its entry stays until it is assigned again: overdue it remains
      logger()->info(
          "share fetch: {}-{} left the assignment {} ms ago with records still unacknowledged; broker {}'s "
          "session forgets it now (their locks have expired)",
          tp.topic, tp.partition, std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count(),
          n.session.node());
    } else {
      earliest = std::min(earliest, since + bound);
    }
  }
  const auto deferred = n.session.deferred_forgets(wanted, unresolved, overdue);
  if (deferred.empty()) return false;
  const std::set<TopicPartition> waiting(deferred.begin(), deferred.end());
  if (hooks_.has_acks && hooks_.has_acks(waiting)) {
    send_acknowledge(n, waiting, false);
    return true;
  }
  logger()->debug(
      "share fetch: broker {}: {} partition(s) that left the assignment wait for acknowledgements; "
      "no ShareFetch until then",
      n.session.node(), deferred.size());
  // Acknowledgements made outside poll() (explicit mode) do not wake the fetcher: look again
  // after the retry backoff, and at the latest when the first lock runs out.
  arm(std::min(earliest, now + opts_.retry_backoff));
  return true;
}

void share_fetcher::send_fetch(node_state& n, const partition_ids& wanted) {
  auto conn = cluster_->broker(n.session.node());
  if (!conn) {
    refresh_leaders();
    return;
  }
  n.sending = true;
  const std::int32_t id = n.session.node();
  std::set<TopicPartition> carried;
  for (const auto& [tp, topic_id] : wanted) carried.insert(tp);
  ++fetches_;
  conn->send_adjusted(
      protocol::share_fetch_request{},
      [self = shared_from_this(), id, wanted, carried](protocol::share_fetch_request& r,
                                                       std::int16_t version) {
        auto& s = self->node(id);
        ack_map acks = self->hooks_.take_acks ? self->hooks_.take_acks(carried) : ack_map{};
        self->with_topic_ids(acks);
        const auto built = s.session.build_fetch(r, version, self->opts_.params, wanted, acks);
        s.built = !built.error;
        if (!built.refused.empty() && self->hooks_.on_refused) self->hooks_.on_refused(built.refused);
        return s.built;  // declined: nothing goes on the wire
      },
      [self = shared_from_this(), id](std::error_code ec, const protocol::share_fetch_response& r,
                                      const net::response_frame& frame) {
        auto& s = self->node(id);
        s.sending = false;
        if (self->stopped_) return;
        if (!s.built) {
          self->not_sent(s, ec, protocol::share_fetch_request::name);
          return;
        }
        s.built = false;
        if (ec) {
          self->answered(id, s.session.on_request_failed(ec), nullptr);
          return;
        }
        auto kept = std::make_shared<kept_answer<protocol::share_fetch_response>>(
            kept_answer<protocol::share_fetch_response>{r, frame.frame});
        self->answered(id, s.session.on_fetch_answer(kept->response), kept);
      },
      opts_.request_timeout + std::chrono::milliseconds(opts_.params.max_wait_ms));
}

void share_fetcher::send_acknowledge(node_state& n, const std::set<TopicPartition>& tps, bool close) {
  auto conn = cluster_->broker(n.session.node());
  if (!conn) {
    if (close) closed_one(n);
    return;
  }
  n.sending = true;
  const std::int32_t id = n.session.node();
  ++acknowledges_;
  conn->send_adjusted(
      protocol::share_acknowledge_request{},
      [self = shared_from_this(), id, tps, close](protocol::share_acknowledge_request& r,
                                                  std::int16_t version) {
        auto& s = self->node(id);
        ack_map acks = self->hooks_.take_acks ? self->hooks_.take_acks(tps) : ack_map{};
        self->with_topic_ids(acks);
        const auto built = s.session.build_acknowledge(r, version, self->opts_.params, acks, close);
        s.built = !built.error;
        if (!built.refused.empty() && self->hooks_.on_refused) self->hooks_.on_refused(built.refused);
        return s.built;  // declined (nothing to send, or no session): nothing goes on the wire
      },
      [self = shared_from_this(), id, close](std::error_code ec,
                                             const protocol::share_acknowledge_response& r,
                                             const net::response_frame& frame) {
        auto& s = self->node(id);
        s.sending = false;
        if (self->stopped_) return;
        if (!s.built) {
          self->not_sent(s, ec, protocol::share_acknowledge_request::name);
          if (close) self->closed_one(s);
          return;
        }
        s.built = false;
        if (close) self->closed_one(s);
        if (ec) {
          self->answered(id, s.session.on_request_failed(ec), nullptr);
        } else {
          auto kept = std::make_shared<kept_answer<protocol::share_acknowledge_response>>(
              kept_answer<protocol::share_acknowledge_response>{r, frame.frame});
          self->answered(id, s.session.on_acknowledge_answer(kept->response), kept);
        }
      },
      opts_.request_timeout);
}

void share_fetcher::with_topic_ids(ack_map& acks) const {
  for (auto& [tp, a] : acks) {
    if (auto it = ids_.find(tp); it != ids_.end()) a.topic_id = it->second;
  }
}

void share_fetcher::not_sent(node_state& n, std::error_code ec, const char* what) {
  // The request never went out (no connection, no common version, or the session declined to
  // write it): nothing of the session changed, and what it refused is already completed.
  if (ec == std::errc::operation_canceled) return;
  if (ec == client_errc::no_compatible_version) {
    if (hooks_.on_fatal) {
      hooks_.on_fatal(ec,
                      fmt::format("broker {} does not support share groups ({}; KIP-932 needs Kafka 4.1 or "
                                  "later with share groups enabled)",
                                  n.session.node(), what));
    }
    stopped_ = true;
    return;
  }
  logger()->debug("share fetch: {} to broker {} not sent: {}", what, n.session.node(), ec.message());
  n.backoff_until = clock::now() + std::min(opts_.retry_backoff * (1 << std::min(n.failures++, 10)),
                                            opts_.retry_backoff_max);
  arm(n.backoff_until);
}

void share_fetcher::answered(std::int32_t id, const share_session::answer_result& r,
                             std::shared_ptr<const void> frame) {
  auto& n = node(id);
  if (r.error) {
    logger()->debug("share request to broker {} failed: {}{}", id, r.error.message(),
                    r.reset ? " (session reset)" : "");
    n.backoff_until = clock::now() + std::min(opts_.retry_backoff * (1 << std::min(n.failures++, 10)),
                                              opts_.retry_backoff_max);
  } else {
    n.failures = 0;
  }
  if (r.acquisition_lock_timeout_ms >= 0)
    lock_timeout_ = std::chrono::milliseconds(r.acquisition_lock_timeout_ms);
  bool moved = false;
  for (const auto& [tp, pd] : r.fetched) {
    if (pd->error_code != 0 && leader_moved(pd->error_code)) moved = true;
    if (!pd->acquired_records.empty()) source_[tp] = id;
  }
  for (const auto& [tp, pd] : r.acknowledged) {
    if (pd->error_code != 0 && leader_moved(pd->error_code)) moved = true;
  }
  const bool holds = hooks_.on_answer ? hooks_.on_answer(id, r, std::move(frame)) : false;
  if (holds) n.holding = true;
  if (moved) refresh_leaders();
  pump();
}

void share_fetcher::maybe_closed() {
  if (!closing_ || !close_done_) return;
  for (const auto& [id, n] : nodes_) {
    if (!n->closed) return;
  }
  auto done = std::move(close_done_);
  close_done_ = nullptr;
  done();
}

void share_fetcher::arm(clock::time_point when) {
  if (stopped_) return;
  if (armed_ && armed_at_ <= when && armed_at_ > clock::now()) return;
  armed_ = true;
  armed_at_ = when;
  timer_.expires_at(when);
  timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    self->armed_ = false;
    if (!ec) self->pump();
  });
}

}  // namespace kgroup::fetch
