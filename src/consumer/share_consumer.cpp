// ShareConsumer (KIP-932): the facade of a share-group member. The background thread runs the
// share membership (net/share_group_driver) and the share fetch path (fetch/share_fetcher); the
// user thread decodes what was fetched, keeps the acknowledgement tracker
// (data/share_acks.hpp, under the shared mutex: the background thread completes what it sent)
// and runs the acknowledgement callback. See docs/DESIGN.md, "Share groups".
#include "kgroup/share_consumer.hpp"

#include <algorithm>
#include <deque>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "consumer/consumer_plan.hpp"
#include "consumer/observability.hpp"
#include "consumer/single_thread.hpp"
#include "data/share_acks.hpp"
#include "data/share_records.hpp"
#include "fetch/share_fetcher.hpp"
#include "net/cluster.hpp"
#include "net/share_group_driver.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
namespace share = data::share;

const char* to_string(AcknowledgeType t) noexcept {
  switch (t) {
    case AcknowledgeType::accept:
      return "accept";
    case AcknowledgeType::release:
      return "release";
    case AcknowledgeType::reject:
      return "reject";
    case AcknowledgeType::renew:
      return "renew";
  }
  return "unknown";
}

namespace {

// Keys Java's KafkaShareConsumer refuses: they belong to consumer groups (the share group's own
// settings live on the broker, as group configs).
constexpr std::pair<std::string_view, std::string_view> classic_only[] = {
    {"auto.offset.reset", "a share group starts where the group config share.auto.offset.reset says"},
    {"enable.auto.commit", "a share consumer acknowledges records instead of committing offsets"},
    {"auto.commit.interval.ms", "a share consumer acknowledges records instead of committing offsets"},
    {"group.instance.id", "share groups have no static membership"},
    {"isolation.level", "the share group config share.isolation.level decides"},
    {"partition.assignment.strategy", "the broker assigns partitions in share groups"},
    {"session.timeout.ms", "the broker sets the session timeout (group.share.session.timeout.ms)"},
    {"heartbeat.interval.ms", "the broker sets the heartbeat interval (group.share.heartbeat.interval.ms)"},
    {"group.protocol", "a share consumer always speaks the share group protocol"},
    {"group.remote.assignor", "the broker assigns partitions in share groups"},
};

// The public error of an acknowledgement outcome (the data cores' own codes are internal).
std::error_code public_error(std::error_code ec) {
  if (!ec || ec.category() != share::share_category()) return ec;
  switch (static_cast<share::share_errc>(ec.value())) {
    case share::share_errc::no_session:
      return make_error_code(kafka_errc::share_session_not_found);
    case share::share_errc::renew_not_supported:
      return make_error_code(kafka_errc::unsupported_version);
    case share::share_errc::acknowledgement_unanswered:
    case share::share_errc::unexpected_answer:
    case share::share_errc::malformed_acquired_records:
      return make_error_code(client_errc::protocol_violation);
    default:
      return make_error_code(client_errc::illegal_state);
  }
}

}  // namespace

namespace detail {
// The types below are members of ShareConsumer::impl: a named namespace, not an anonymous one (a
// member whose type has internal linkage is an error in the unity build, -Wsubobject-linkage).
// One partition of a ShareFetch answer, queued for the user thread.
struct share_ready_part {
  TopicPartition tp;
  std::int32_t node = -1;
  const share::share_session::fetch_partition_data* data = nullptr;
  std::shared_ptr<const void> keep;  // the answer and its bytes
  std::uint64_t generation = 0;      // of tp's records: a forget() since makes it stale
};

// Decoded records of one partition, handed out across polls (max.poll.records).
struct share_buffered_part {
  TopicPartition tp;  // the records' topic views point here: kept at a stable address
  std::int32_t node = -1;
  std::uint64_t generation = 0;
  std::vector<ConsumerRecord> records;
  std::vector<std::shared_ptr<const void>> owners;
  std::size_t next = 0;
};

}  // namespace detail

class ShareConsumer::impl {
 public:
  explicit impl(const Config& config);
  ~impl() { stop_thread(); }

  LogSink* log_sink() const noexcept { return config_.log_sink().get(); }
  detail::single_thread_check& thread_check() noexcept { return thread_check_; }

  void subscribe(const std::vector<std::string>& topics);
  void unsubscribe();
  std::vector<std::string> subscription() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.topics;
  }
  std::set<TopicPartition> assignment() const {
    std::lock_guard lock(shared_.mutex);
    return shared_.owned;
  }
  ConsumerRecords poll(std::chrono::milliseconds timeout);
  void acknowledge(const TopicPartition& tp, std::int64_t offset, AcknowledgeType type);
  AcknowledgementResults commit_sync(std::chrono::milliseconds timeout);
  void commit_async();
  void set_callback(AcknowledgementCommitCallback cb) { callback_ = std::move(cb); }
  std::optional<std::chrono::milliseconds> lock_timeout() const {
    std::lock_guard lock(shared_.mutex);
    return lock_timeout_;
  }
  void wakeup() {
    {
      std::lock_guard lock(shared_.mutex);
      shared_.woken = true;
    }
    shared_.cv.notify_all();
  }
  void close(std::chrono::milliseconds timeout);
  ShareConsumerMetrics metrics() const;

 private:
  void check_open() const {
    if (closed_) throw Error(make_error_code(client_errc::closed), "the share consumer is closed");
  }
  template <class F>
  void post(F&& f) {
    asio::post(io_, std::forward<F>(f));
  }
  void run();
  void stop_thread();
  // Background thread (the fetcher's hooks).
  bool on_answer(std::int32_t node, const share::share_session::answer_result& r,
                 std::shared_ptr<const void> keep);
  // User thread.
  void raise_fatal();  // with shared_.mutex held
  void acknowledge_previous_poll();
  void run_callback(std::vector<share::ack_outcome> outcomes, AcknowledgementResults* into = nullptr);
  bool fill(std::vector<ConsumerRecord>& out, std::vector<std::shared_ptr<const void>>& owners);
  void decode(detail::share_ready_part part);
  void return_nodes();
  bool wait_left(std::uint64_t before, clock::time_point deadline);
  static clock::time_point deadline_after(std::chrono::milliseconds t) {
    if (t <= std::chrono::milliseconds::zero()) return clock::now();
    return clock::now() + std::min<std::chrono::milliseconds>(t, std::chrono::hours(24 * 365));
  }

  Config config_;
  share::ack_mode mode_ = share::ack_mode::implicit_mode;
  std::size_t max_poll_records_ = 500;
  std::chrono::milliseconds max_poll_interval_{300000};
  std::optional<clock::time_point> last_poll_return_;  // user thread
  std::chrono::milliseconds default_timeout_{60000};
  data::share_read_options read_opts_;
  asio::io_context io_;
  std::shared_ptr<net::cluster> cluster_;
  mutable detail::shared_state shared_;
  std::shared_ptr<net::share_group_driver> driver_;
  std::shared_ptr<fetch::share_fetcher> fetcher_;
  std::unique_ptr<detail::observability_endpoint> endpoint_;  // after io_: destroyed before it
  std::thread thread_;
  detail::single_thread_check thread_check_;
  AcknowledgementCommitCallback callback_;
  bool closed_ = false;

  // Under shared_.mutex (both threads).
  share::ack_tracker tracker_;
  std::deque<detail::share_ready_part> ready_;
  std::map<TopicPartition, std::uint64_t> generation_;
  std::set<TopicPartition> assigned_;  // the membership's latest assignment (background thread writes)
  std::optional<std::chrono::milliseconds> lock_timeout_;
  std::uint64_t delivered_ = 0, redelivered_ = 0;
  std::map<std::int32_t, std::int32_t> epochs_;
  std::uint64_t fetches_ = 0, acknowledges_ = 0, resets_ = 0;
  std::uint64_t failed_ = 0, lock_expired_ = 0;

  // User thread only.
  std::deque<detail::share_buffered_part> buffer_;
  std::set<std::int32_t> delivered_from_;  // nodes whose records the last poll() returned
};

// ---- construction and the background thread --------------------------------------------------

ShareConsumer::impl::impl(const Config& config) : config_(config) {
  const detail::log_scope log_scope(log_sink());
  for (const auto& [key, why] : classic_only) {
    if (config_.is_set(key)) {
      throw Error(make_error_code(client_errc::invalid_config),
                  fmt::format("{} cannot be set for a share consumer: {}; remove it", key, why));
    }
  }
  config_.validate();
  if (config_.get("group.id").empty())
    throw Error(make_error_code(client_errc::invalid_config), "group.id: required by a share consumer");
  detail::default_client_id(config_);
  logger()->info("share consumer configuration: {}", config_.to_string());
  auto plan = detail::make_consumer_plan(config_, {});
  shared_.metrics.wire = plan.cluster.connection.wire;
  if (plan.cluster.connection.security) {
    plan.cluster.connection.security->on_fatal = [s = &shared_](std::error_code ec, const std::string& what) {
      s->push(detail::fatal_error{ec, what});
    };
  }
  cluster_ = std::make_shared<net::cluster>(io_, std::move(plan.cluster));
  mode_ = config_.get("share.acknowledgement.mode") == "explicit" ? share::ack_mode::explicit_mode
                                                                  : share::ack_mode::implicit_mode;
  max_poll_records_ = plan.max_poll_records;
  max_poll_interval_ = plan.max_poll_interval;
  default_timeout_ = plan.default_timeout;
  read_opts_.verify_crc = plan.cursor.verify_crc;
  read_opts_.max_batch_bytes = plan.cursor.max_batch_bytes;

  net::share_group_driver_options dopts;
  dopts.member.group_id = config_.get("group.id");
  if (const auto rack = config_.get("client.rack"); !rack.empty()) dopts.member.rack = rack;
  dopts.member.max_poll_interval = plan.max_poll_interval;
  dopts.member.retry_backoff = config_.get_ms("retry.backoff.ms");
  dopts.member.retry_backoff_max = config_.get_ms("retry.backoff.max.ms");
  dopts.request_timeout = plan.request_timeout;

  fetch::share_fetcher_options fo;
  fo.params.group_id = config_.get("group.id");
  fo.params.max_wait_ms = static_cast<std::int32_t>(config_.get_int("fetch.max.wait.ms"));
  fo.params.min_bytes = static_cast<std::int32_t>(config_.get_int("fetch.min.bytes"));
  fo.params.max_bytes = static_cast<std::int32_t>(config_.get_int("fetch.max.bytes"));
  fo.params.max_records = static_cast<std::int32_t>(max_poll_records_);
  fo.params.batch_size = static_cast<std::int32_t>(max_poll_records_);
  fo.request_timeout = plan.request_timeout;
  fo.retry_backoff = config_.get_ms("retry.backoff.ms");
  fo.retry_backoff_max = config_.get_ms("retry.backoff.max.ms");

  fetch::share_fetch_hooks hooks;
  hooks.take_acks = [this](const std::set<TopicPartition>& tps) {
    share::ack_map out;
    std::lock_guard lock(shared_.mutex);
    for (const auto& tp : tps) {
      auto batches = tracker_.take(tp);
      if (!batches.empty()) out[tp].batches = std::move(batches);
    }
    return out;
  };
  hooks.has_acks = [this](const std::set<TopicPartition>& tps) {
    std::lock_guard lock(shared_.mutex);
    return std::any_of(tps.begin(), tps.end(), [&](const auto& tp) { return tracker_.has_pending(tp); });
  };
  hooks.unresolved = [this](const std::set<TopicPartition>& tps) {
    std::set<TopicPartition> out;
    std::lock_guard lock(shared_.mutex);
    for (const auto& tp : tps) {
      if (tracker_.unresolved(tp)) out.insert(tp);
    }
    return out;
  };
  hooks.on_answer = [this](std::int32_t node, const share::share_session::answer_result& r,
                           std::shared_ptr<const void> keep) { return on_answer(node, r, std::move(keep)); };
  hooks.on_refused = [this](const std::vector<std::pair<TopicPartition, std::error_code>>& refused) {
    {
      std::lock_guard lock(shared_.mutex);
      for (const auto& [tp, ec] : refused) tracker_.complete(tp, ec);
    }
    shared_.cv.notify_all();
  };
  hooks.on_fatal = [this](std::error_code ec, std::string what) {
    shared_.push(detail::fatal_error{ec, std::move(what)});
  };
  fetcher_ = std::make_shared<fetch::share_fetcher>(io_, cluster_, std::move(fo), std::move(hooks));
  dopts.hooks.on_assignment_changed = [f = fetcher_, this](const group::share::share_assignment& owned,
                                                           bool rejoining) {
    share::partition_ids ids(owned.begin(), owned.end());
    {
      // What the member no longer owns: the records not yet handed out are dropped (with the
      // buffered copies: the generation moves on); those the application has keep their state,
      // so its acknowledgements still reach the leader, and the fetcher's session forgets the
      // partition only after them (Java's KafkaShareConsumer does the same). After a fence the
      // sessions stay (the member rejoins at once): what was not handed out is released by
      // acknowledgement instead, or the kept session would hold it until its lock expired.
      std::lock_guard lock(shared_.mutex);
      for (const auto& tp : assigned_) {
        if (!ids.count(tp)) {
          if (rejoining) {
            tracker_.release_undelivered(tp);
          } else {
            tracker_.drop_undelivered(tp);
          }
          ++generation_[tp];
        }
      }
      assigned_.clear();
      for (const auto& [tp, id] : ids) assigned_.insert(tp);
    }
    f->set_assignment(std::move(ids), rejoining);
  };
  driver_ = std::make_shared<net::share_group_driver>(io_, cluster_, std::move(dopts), shared_);
  fetcher_->set_member_id(driver_->member_id());
  // Its snapshots are taken on the background thread, under the shared mutex, as metrics() is.
  endpoint_ = std::make_unique<detail::observability_endpoint>(io_, config_, [this] { return metrics(); });
  thread_ = std::thread([this] {
    const detail::log_scope log_scope(log_sink());
    run();
  });
}

void ShareConsumer::impl::run() {
  auto guard = asio::make_work_guard(io_);
  try {
    io_.run();
  } catch (const std::exception& e) {
    logger()->critical("kgroup background thread stopped: {}", e.what());
    shared_.push(detail::fatal_error{make_error_code(client_errc::illegal_state),
                                     std::string("background thread failed: ") + e.what()});
  }
}

void ShareConsumer::impl::stop_thread() {
  if (!thread_.joinable()) return;
  post([this] {
    endpoint_->stop();
    driver_->shutdown();
    fetcher_->shutdown();
    cluster_->close();
    io_.stop();
  });
  thread_.join();
}

bool ShareConsumer::impl::on_answer(std::int32_t node, const share::share_session::answer_result& r,
                                    std::shared_ptr<const void> keep) {
  bool holds = false;
  {
    std::lock_guard lock(shared_.mutex);
    // Outcomes of what the request carried, then what the broker no longer holds for us.
    for (const auto& [tp, ec] : r.acks) tracker_.complete(tp, ec);
    for (const auto& tp : r.lost) {
      tracker_.forget(tp, r.error ? r.error : make_error_code(kafka_errc::share_session_not_found));
      ++generation_[tp];
    }
    for (const auto& [tp, pd] : r.fetched) {
      if (pd->error_code != 0) {
        logger()->debug("share fetch {}-{} from broker {}: {}", tp.topic, tp.partition, node,
                        kafka_error_name(pd->error_code));
      }
      // Fetched before the partition left the assignment: its session is being forgotten or
      // closed, which releases these records; they are not handed out.
      if (pd->acquired_records.empty() || !assigned_.count(tp)) continue;
      ready_.push_back(detail::share_ready_part{tp, node, pd, keep, generation_[tp]});
      holds = true;
    }
    if (r.acquisition_lock_timeout_ms > 0)
      lock_timeout_ = std::chrono::milliseconds(r.acquisition_lock_timeout_ms);
    epochs_ = fetcher_->session_epochs();
    fetches_ = fetcher_->fetches();
    acknowledges_ = fetcher_->acknowledges();
    resets_ = fetcher_->resets();
  }
  shared_.cv.notify_all();
  return holds;
}

// ---- the user thread -------------------------------------------------------------------------

void ShareConsumer::impl::raise_fatal() {
  if (shared_.fatal) throw Error(shared_.fatal->code, shared_.fatal->message);
  for (auto it = shared_.events.begin(); it != shared_.events.end(); ++it) {
    if (auto* f = std::get_if<detail::fatal_error>(&*it)) {
      shared_.fatal = *f;
      shared_.events.erase(it);
      throw Error(shared_.fatal->code, shared_.fatal->message);
    }
  }
  // Other events (left) are read by wait_left(); nothing else is queued for a share consumer.
}

void ShareConsumer::impl::subscribe(const std::vector<std::string>& topics) {
  check_open();
  for (const auto& t : topics) {
    if (t.empty())
      throw Error(make_error_code(client_errc::invalid_argument), "subscribe(): empty topic name");
  }
  if (topics.empty()) {
    unsubscribe();
    return;
  }
  post([d = driver_, topics] { d->subscribe(topics); });
}

void ShareConsumer::impl::unsubscribe() {
  check_open();
  {
    std::lock_guard lock(shared_.mutex);
    tracker_.release_all();
  }
  std::uint64_t before;
  {
    std::lock_guard lock(shared_.mutex);
    before = shared_.left_count;
  }
  post([f = fetcher_] { f->flush(); });
  post([d = driver_] { d->unsubscribe(); });
  wait_left(before, deadline_after(default_timeout_));
  buffer_.clear();
}

void ShareConsumer::impl::acknowledge_previous_poll() {
  std::vector<std::pair<TopicPartition, std::int64_t>> missing;
  {
    std::lock_guard lock(shared_.mutex);
    missing = tracker_.begin_poll(mode_);
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) {
      list += fmt::format("{}{}-{}@{}", i ? ", " : "", missing[i].first.topic, missing[i].first.partition,
                          missing[i].second);
    }
    if (missing.size() > 5) list += fmt::format(" and {} more", missing.size() - 5);
    throw Error(
        make_error_code(client_errc::illegal_state),
        fmt::format("share.acknowledgement.mode=explicit: acknowledge every record of the last poll() "
                    "before the next one; {} not acknowledged: {}",
                    missing.size(), list));
  }
}

void ShareConsumer::impl::return_nodes() {
  // A leader whose records this thread no longer holds, all acknowledged: fetch from it again.
  for (auto node : delivered_from_) {
    const bool still =
        std::any_of(buffer_.begin(), buffer_.end(), [&](const auto& b) { return b.node == node; });
    if (!still) post([f = fetcher_, node] { f->data_returned(node); });
  }
  delivered_from_.clear();
}

void ShareConsumer::impl::run_callback(std::vector<share::ack_outcome> outcomes,
                                       AcknowledgementResults* into) {
  if (outcomes.empty()) return;
  // One AcknowledgementResult carries one error for all its offsets, so outcomes of a partition
  // with different errors (an accept applied, a later one failed) go to the callback in separate
  // calls, one per error, in the order the errors first appear: merged, the applied offsets would
  // read as failed.
  std::vector<std::pair<std::error_code, AcknowledgementResults>> by_error;
  std::uint64_t failed = 0, lock_expired = 0;
  for (auto& o : outcomes) {
    const auto ec = public_error(o.error);
    auto it = std::find_if(by_error.begin(), by_error.end(), [&](const auto& e) { return e.first == ec; });
    if (it == by_error.end()) it = by_error.insert(by_error.end(), {ec, {}});
    auto& r = it->second[o.tp];
    r.offsets.insert(o.offsets.begin(), o.offsets.end());
    r.error = ec;
    if (ec) failed += o.offsets.size();
    if (share::lock_expired(ec)) lock_expired += o.offsets.size();
  }
  {
    std::lock_guard lock(shared_.mutex);
    failed_ += failed;
    lock_expired_ += lock_expired;
  }
  if (into) {
    // commit_sync()'s result has one entry per partition: the offsets of all outcomes, with an
    // error if any of them failed (the callback tells them apart).
    for (const auto& [ec, results] : by_error) {
      for (const auto& [tp, r] : results) {
        auto& mine = (*into)[tp];
        mine.offsets.insert(r.offsets.begin(), r.offsets.end());
        if (r.error) mine.error = r.error;
      }
    }
  }
  if (callback_) {
    for (const auto& [ec, results] : by_error) callback_(results);
  }
}

void ShareConsumer::impl::decode(detail::share_ready_part part) {
  const auto& pd = *part.data;
  if (!pd.records) return;
  // Every record of the answer's data; the tracker says which of them are this member's to see.
  detail::share_buffered_part b;
  b.tp = part.tp;
  b.node = part.node;
  b.generation = part.generation;
  buffer_.push_back(std::move(b));
  auto& slot = buffer_.back();
  auto read = data::read_share_records(slot.tp, *pd.records, part.keep, read_opts_);
  if (read.error) {
    logger()->warn(
        "share fetch {}-{}: corrupt record data from broker {} ({}); its records are not delivered "
        "and their locks will expire",
        part.tp.topic, part.tp.partition, part.node, read.error.message());
  }
  std::vector<std::int64_t> offsets;
  offsets.reserve(read.records.size());
  for (const auto& r : read.records) offsets.push_back(r.offset);
  share::ack_tracker::acquire_result acquired;
  {
    std::lock_guard lock(shared_.mutex);
    if (generation_[part.tp] != part.generation) {
      buffer_.pop_back();
      return;  // the session that acquired them is gone
    }
    acquired = tracker_.on_acquired(part.tp, pd.acquired_records, offsets);
  }
  if (acquired.error) {
    logger()->warn("share fetch {}-{} from broker {}: {}; the records are not delivered (their locks expire)",
                   part.tp.topic, part.tp.partition, part.node, acquired.error.message());
    buffer_.pop_back();
    return;
  }
  std::size_t i = 0;
  for (auto& r : read.records) {
    while (i < acquired.deliver.size() && acquired.deliver[i].offset < r.offset) ++i;
    if (i == acquired.deliver.size()) break;
    if (acquired.deliver[i].offset != r.offset) continue;
    r.delivery_count = acquired.deliver[i].delivery_count;
    slot.records.push_back(r);
  }
  slot.owners = std::move(read.owners);
  if (slot.records.empty()) buffer_.pop_back();
}

bool ShareConsumer::impl::fill(std::vector<ConsumerRecord>& out,
                               std::vector<std::shared_ptr<const void>>& owners) {
  while (out.size() < max_poll_records_) {
    if (buffer_.empty()) {
      std::optional<detail::share_ready_part> next;
      {
        std::lock_guard lock(shared_.mutex);
        if (ready_.empty()) break;
        next = std::move(ready_.front());
        ready_.pop_front();
      }
      const auto node = next->node;
      decode(std::move(*next));
      if (buffer_.empty()) {
        // Nothing of that answer is ours to see (gaps, duplicates): the leader may be fetched again.
        delivered_from_.insert(node);
      }
      continue;
    }
    auto& b = buffer_.front();
    std::uint64_t current;
    {
      std::lock_guard lock(shared_.mutex);
      current = generation_[b.tp];
    }
    if (current != b.generation) {
      delivered_from_.insert(b.node);
      buffer_.pop_front();
      continue;
    }
    std::vector<std::int64_t> offsets;
    const auto take = std::min(max_poll_records_ - out.size(), b.records.size() - b.next);
    for (std::size_t k = 0; k < take; ++k) {
      auto& r = b.records[b.next + k];
      offsets.push_back(r.offset);
      out.push_back(r);
      if (r.delivery_count.value_or(1) > 1) ++redelivered_;
    }
    {
      std::lock_guard lock(shared_.mutex);
      tracker_.on_polled(b.tp, offsets);
      delivered_ += take;
    }
    b.next += take;
    for (const auto& o : b.owners) owners.push_back(o);
    delivered_from_.insert(b.node);
    if (b.next == b.records.size()) buffer_.pop_front();
  }
  return !out.empty();
}

ConsumerRecords ShareConsumer::impl::poll(std::chrono::milliseconds timeout) {
  check_open();
  const auto deadline = deadline_after(timeout);
  {
    std::lock_guard lock(shared_.mutex);
    raise_fatal();
  }
  acknowledge_previous_poll();
  return_nodes();
  // The call and the return go on the poll board the driver reads before its core judges
  // max.poll.interval.ms (driver_base::sync_poll()). The call is also posted when the member may
  // have left on a poll timeout (the first poll() too), so that it rejoins at once; otherwise
  // an idle member's poll() wakes nothing (issue 37).
  bool may_have_left;
  {
    const auto now = clock::now();
    std::lock_guard lock(shared_.mutex);
    shared_.poll_began(now);
    may_have_left = !last_poll_return_ || now - *last_poll_return_ >= max_poll_interval_ ||
                    shared_.state == "poll_timed_out";
  }
  if (may_have_left) post([d = driver_] { d->poll_called(); });
  struct returned {
    impl* self;
    ~returned() {
      const auto now = clock::now();
      self->last_poll_return_ = now;
      std::lock_guard lock(self->shared_.mutex);
      self->shared_.poll_ended(now);
    }
  } on_return{this};
  std::vector<share::ack_outcome> outcomes;
  {
    std::lock_guard lock(shared_.mutex);
    outcomes = tracker_.take_outcomes();
  }
  run_callback(std::move(outcomes));
  std::vector<ConsumerRecord> records;
  std::vector<std::shared_ptr<const void>> owners;
  while (true) {
    if (fill(records, owners)) break;
    return_nodes();  // answers with nothing to deliver
    std::unique_lock lock(shared_.mutex);
    raise_fatal();
    if (shared_.woken) {
      shared_.woken = false;
      throw Error(make_error_code(client_errc::woken_up), "poll() woken up");
    }
    if (!ready_.empty()) continue;
    if (clock::now() >= deadline) break;
    shared_.cv.wait_until(lock, deadline);
  }
  return ConsumerRecords(std::move(records), std::move(owners), {});
}

void ShareConsumer::impl::acknowledge(const TopicPartition& tp, std::int64_t offset, AcknowledgeType type) {
  check_open();
  std::error_code ec;
  {
    std::lock_guard lock(shared_.mutex);
    ec = tracker_.acknowledge(tp, offset, static_cast<share::ack_type>(type));
  }
  if (ec) {
    throw Error(make_error_code(client_errc::illegal_state),
                fmt::format("acknowledge({}-{}@{}, {}): {}", tp.topic, tp.partition, offset, to_string(type),
                            ec.message()));
  }
}

AcknowledgementResults ShareConsumer::impl::commit_sync(std::chrono::milliseconds timeout) {
  check_open();
  const auto deadline = deadline_after(timeout);
  std::set<TopicPartition> waiting;
  {
    std::lock_guard lock(shared_.mutex);
    if (mode_ == share::ack_mode::implicit_mode) (void)tracker_.begin_poll(mode_);  // accept the last poll's
    for (const auto& tp : tracker_.pending_partitions()) waiting.insert(tp);
  }
  post([f = fetcher_] { f->flush(); });
  AcknowledgementResults results;
  while (true) {
    std::vector<share::ack_outcome> outcomes;
    {
      std::unique_lock lock(shared_.mutex);
      raise_fatal();
      outcomes = tracker_.take_outcomes();
      if (outcomes.empty()) {
        if (waiting.empty()) break;
        if (clock::now() >= deadline) break;
        shared_.cv.wait_until(lock, deadline);
        continue;
      }
    }
    for (const auto& o : outcomes) waiting.erase(o.tp);
    run_callback(std::move(outcomes), &results);
  }
  if (!waiting.empty()) {
    throw Error(
        make_error_code(client_errc::request_timed_out),
        fmt::format("commit_sync(): the acknowledgements of {} partition(s) were not answered within {} ms",
                    waiting.size(), timeout.count()));
  }
  return results;
}

void ShareConsumer::impl::commit_async() {
  check_open();
  {
    std::lock_guard lock(shared_.mutex);
    if (mode_ == share::ack_mode::implicit_mode) (void)tracker_.begin_poll(mode_);
  }
  post([f = fetcher_] { f->flush(); });
}

bool ShareConsumer::impl::wait_left(std::uint64_t before, clock::time_point deadline) {
  std::unique_lock lock(shared_.mutex);
  return shared_.cv.wait_until(lock, deadline, [&] { return shared_.left_count > before; });
}

void ShareConsumer::impl::close(std::chrono::milliseconds timeout) {
  if (closed_) return;
  const auto deadline = deadline_after(timeout);
  std::uint64_t before;
  {
    std::lock_guard lock(shared_.mutex);
    tracker_.release_all();  // the last poll's records go back (implicit mode too, as Java)
    before = shared_.left_count;
  }
  // Acknowledgements and the session close first (they need no membership), then the leave.
  post([f = fetcher_, d = driver_] { f->close([d] { d->close(); }); });
  if (!wait_left(before, deadline)) {
    logger()->warn("share group '{}': close() timed out after {} ms before leaving the group cleanly",
                   config_.get("group.id"), timeout.count());
  }
  std::vector<share::ack_outcome> outcomes;
  {
    std::lock_guard lock(shared_.mutex);
    outcomes = tracker_.take_outcomes();
  }
  try {
    run_callback(std::move(outcomes));
  } catch (const std::exception& e) {
    logger()->warn("close(): the acknowledgement callback threw: {}", e.what());
  }
  stop_thread();
  closed_ = true;
}

ShareConsumerMetrics ShareConsumer::impl::metrics() const {
  ShareConsumerMetrics m;
  std::lock_guard lock(shared_.mutex);
  m.client_id = config_.get("client.id");
  m.group_id = config_.get("group.id");
  m.http_endpoint = endpoint_ ? endpoint_->endpoint() : std::string();
  m.member_id = shared_.member_id;
  m.member_epoch = shared_.generation;
  m.state = shared_.state;
  m.assignment = shared_.owned;
  m.records_delivered = delivered_;
  m.records_redelivered = redelivered_;
  m.acknowledged_accept = tracker_.stats().accepted;
  m.acknowledged_release = tracker_.stats().released;
  m.acknowledged_reject = tracker_.stats().rejected;
  m.acknowledgements_failed = failed_;
  m.acknowledgements_lock_expired = lock_expired_;
  m.gaps_acknowledged = tracker_.stats().gaps;
  m.share_fetches = fetches_;
  m.share_acknowledges = acknowledges_;
  m.session_resets = resets_;
  m.session_epochs = epochs_;
  if (shared_.metrics.wire)
    m.rebootstraps_total = shared_.metrics.wire->rebootstraps.load(std::memory_order_relaxed);
  return m;
}

// ---- the public class ------------------------------------------------------------------------

namespace {
// Enters the single-thread check and the consumer's log sink for one public call.
struct call_scope {
  explicit call_scope(ShareConsumer::impl& i) : check(i.thread_check()), sink(i.log_sink()) { check.enter(); }
  ~call_scope() { check.leave(); }
  call_scope(const call_scope&) = delete;
  call_scope& operator=(const call_scope&) = delete;
  detail::single_thread_check& check;
  detail::log_scope sink;
};
}  // namespace

ShareConsumer::ShareConsumer(const Config& config) : impl_(std::make_unique<impl>(config)) {}

ShareConsumer::~ShareConsumer() {
  try {
    if (impl_) impl_->close(std::chrono::seconds(30));
  } catch (...) {
    // The destructor swallows errors, as documented.
  }
}

void ShareConsumer::subscribe(const std::vector<std::string>& topics) {
  call_scope s(*impl_);
  impl_->subscribe(topics);
}
void ShareConsumer::unsubscribe() {
  call_scope s(*impl_);
  impl_->unsubscribe();
}
std::vector<std::string> ShareConsumer::subscription() const {
  return impl_->subscription();
}
std::set<TopicPartition> ShareConsumer::assignment() const {
  return impl_->assignment();
}
ConsumerRecords ShareConsumer::poll(std::chrono::milliseconds timeout) {
  call_scope s(*impl_);
  return impl_->poll(timeout);
}
void ShareConsumer::acknowledge(const ConsumerRecord& record, AcknowledgeType type) {
  call_scope s(*impl_);
  impl_->acknowledge({std::string(record.topic), record.partition}, record.offset, type);
}
void ShareConsumer::acknowledge(const std::string& topic, std::int32_t partition, std::int64_t offset,
                                AcknowledgeType type) {
  call_scope s(*impl_);
  impl_->acknowledge({topic, partition}, offset, type);
}
AcknowledgementResults ShareConsumer::commit_sync(std::chrono::milliseconds timeout) {
  call_scope s(*impl_);
  return impl_->commit_sync(timeout);
}
void ShareConsumer::commit_async() {
  call_scope s(*impl_);
  impl_->commit_async();
}
void ShareConsumer::set_acknowledgement_commit_callback(AcknowledgementCommitCallback callback) {
  call_scope s(*impl_);
  impl_->set_callback(std::move(callback));
}
std::optional<std::chrono::milliseconds> ShareConsumer::acquisition_lock_timeout() const {
  return impl_->lock_timeout();
}
void ShareConsumer::wakeup() {
  impl_->wakeup();
}
void ShareConsumer::close(std::chrono::milliseconds timeout) {
  call_scope s(*impl_);
  impl_->close(timeout);
}
ShareConsumerMetrics ShareConsumer::metrics() const {
  return impl_->metrics();
}

}  // namespace kgroup
