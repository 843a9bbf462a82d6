// The public Consumer: construction, move, the destructor's quiet close, and every public
// method forwarded to Consumer::impl (consumer_impl.hpp) inside its log scope and, unless the call
// is read-only, its single-thread check.
#include "consumer/consumer_impl.hpp"

namespace kgroup {

Consumer::Consumer(const Config& config) : Consumer(config, {}) {}

Consumer::Consumer(const Config& config, std::vector<std::shared_ptr<PartitionAssignor>> custom_assignors)
    : impl_(std::make_unique<impl>(config, std::move(custom_assignors))) {}

Consumer::~Consumer() {
  close_quietly();
}

Consumer::Consumer(Consumer&& other) noexcept = default;

Consumer& Consumer::operator=(Consumer&& other) noexcept {
  if (this != &other) {
    close_quietly();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

// Closes and destroys the impl, both in this Consumer's log scope: what the impl's members log
// as they go reaches its sink too (config_, which owns the sink, is the first member: the last
// destroyed; nothing logs after it).
void Consumer::close_quietly() noexcept {
  if (!impl_) return;  // moved from
  const detail::log_scope log_scope(impl_->log_sink());
  try {
    impl_->close(std::chrono::seconds(30));
  } catch (const std::exception& e) {
    logger()->warn("error while closing the consumer in its destructor: {}", e.what());
  }
  impl_.reset();
}

// The impl, with this Consumer's log sink the calling thread's until the end of the public
// method's full expression, so what the call logs on the user's thread reaches that sink.
// Unless `any_thread`, the call also enters the impl's single-thread check (impl::enter()) and
// leaves it at the end of the full expression.
class Consumer::call {
 public:
  call(impl& i, bool any_thread) : scope_(i.log_sink()), impl_(i), guarded_(!any_thread) {
    if (guarded_) impl_.thread_check().enter();
  }
  call(const call&) = delete;
  call& operator=(const call&) = delete;
  ~call() {
    if (guarded_) impl_.thread_check().leave();
  }
  impl* operator->() const noexcept { return &impl_; }

 private:
  detail::log_scope scope_;
  impl& impl_;
  bool guarded_;
};

Consumer::call Consumer::self(bool any_thread) const {
  if (!impl_) throw Error(make_error_code(client_errc::illegal_state), "this Consumer was moved from");
  return call(*impl_, any_thread);
}

void Consumer::subscribe(const std::vector<std::string>& topics,
                         std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(topics, std::move(listener));
}
void Consumer::subscribe(const std::regex& pattern, std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(pattern, std::move(listener));
}
void Consumer::subscribe(const SubscriptionPattern& pattern,
                         std::shared_ptr<ConsumerRebalanceListener> listener) {
  self()->subscribe(pattern, std::move(listener));
}
void Consumer::unsubscribe() {
  self()->unsubscribe();
}
void Consumer::assign(const std::set<TopicPartition>& partitions) {
  self()->assign(partitions);
}
void Consumer::unassign() {
  self()->unassign();
}
ConsumerRecords Consumer::poll(std::chrono::milliseconds timeout) {
  return self()->poll(timeout);
}
void Consumer::commit_sync() {
  self()->commit_sync(self()->default_timeout());
}
void Consumer::commit_sync(std::chrono::milliseconds timeout) {
  self()->commit_sync(timeout);
}
void Consumer::commit_sync(const OffsetMap& offsets) {
  self()->commit_sync(offsets, self()->default_timeout());
}
void Consumer::commit_sync(const OffsetMap& offsets, std::chrono::milliseconds timeout) {
  self()->commit_sync(offsets, timeout);
}
void Consumer::commit_async(CommitCallback callback) {
  self()->commit_async(std::move(callback));
}
void Consumer::commit_async(const OffsetMap& offsets, CommitCallback callback) {
  self()->commit_async(offsets, std::move(callback));
}
OffsetMap Consumer::committed(const std::set<TopicPartition>& partitions) {
  return self()->committed(partitions, self()->default_timeout());
}
OffsetMap Consumer::committed(const std::set<TopicPartition>& partitions, std::chrono::milliseconds timeout) {
  return self()->committed(partitions, timeout);
}
std::int64_t Consumer::position(const TopicPartition& partition) {
  return self()->position(partition, self()->default_timeout());
}
std::int64_t Consumer::position(const TopicPartition& partition, std::chrono::milliseconds timeout) {
  return self()->position(partition, timeout);
}
std::optional<std::int64_t> Consumer::current_lag(const TopicPartition& partition) const {
  return self()->current_lag(partition);
}
std::map<TopicPartition, std::int64_t> Consumer::beginning_offsets(
    const std::set<TopicPartition>& partitions) {
  return beginning_offsets(partitions, self()->default_timeout());
}
std::map<TopicPartition, std::int64_t> Consumer::beginning_offsets(const std::set<TopicPartition>& partitions,
                                                                   std::chrono::milliseconds timeout) {
  return self()->queries().offsets_at(partitions, -2, impl::deadline_after(timeout), "beginning_offsets()");
}
std::map<TopicPartition, std::int64_t> Consumer::end_offsets(const std::set<TopicPartition>& partitions) {
  return end_offsets(partitions, self()->default_timeout());
}
std::map<TopicPartition, std::int64_t> Consumer::end_offsets(const std::set<TopicPartition>& partitions,
                                                             std::chrono::milliseconds timeout) {
  return self()->queries().offsets_at(partitions, -1, impl::deadline_after(timeout), "end_offsets()");
}
std::map<TopicPartition, std::optional<OffsetAndTimestamp>> Consumer::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps) {
  return offsets_for_times(timestamps, self()->default_timeout());
}
std::map<TopicPartition, std::optional<OffsetAndTimestamp>> Consumer::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps, std::chrono::milliseconds timeout) {
  return self()->queries().offsets_for_times(timestamps, impl::deadline_after(timeout));
}
std::vector<PartitionInfo> Consumer::partitions_for(const std::string& topic) {
  return partitions_for(topic, self()->default_timeout());
}
std::vector<PartitionInfo> Consumer::partitions_for(const std::string& topic,
                                                    std::chrono::milliseconds timeout) {
  auto all = self()->queries().topic_partitions(std::vector<std::string>{topic},
                                                impl::deadline_after(timeout), "partitions_for()");
  auto it = all.find(topic);
  return it == all.end() ? std::vector<PartitionInfo>{} : std::move(it->second);
}
std::map<std::string, std::vector<PartitionInfo>> Consumer::list_topics() {
  return list_topics(self()->default_timeout());
}
std::map<std::string, std::vector<PartitionInfo>> Consumer::list_topics(std::chrono::milliseconds timeout) {
  return self()->queries().topic_partitions(std::nullopt, impl::deadline_after(timeout), "list_topics()");
}
void Consumer::seek(const TopicPartition& partition, std::int64_t offset) {
  self()->seek(partition, offset);
}
void Consumer::seek(const TopicPartition& partition, const OffsetAndMetadata& offset) {
  self()->seek(partition, offset.offset, offset.leader_epoch.value_or(-1));
}
void Consumer::seek_to_beginning(const std::set<TopicPartition>& partitions) {
  self()->seek_to(partitions, true);
}
void Consumer::seek_to_end(const std::set<TopicPartition>& partitions) {
  self()->seek_to(partitions, false);
}
void Consumer::pause(const std::set<TopicPartition>& partitions) {
  self()->pause(partitions);
}
void Consumer::resume(const std::set<TopicPartition>& partitions) {
  self()->resume(partitions);
}
std::set<TopicPartition> Consumer::paused() const {
  return self()->paused();
}
std::set<TopicPartition> Consumer::assignment() const {
  return self(/*any_thread=*/true)->assignment();
}
std::vector<std::string> Consumer::subscription() const {
  return self(/*any_thread=*/true)->subscription();
}
ConsumerGroupMetadata Consumer::group_metadata() const {
  return self(/*any_thread=*/true)->group_metadata();
}
void Consumer::enforce_rebalance(const std::string& reason) {
  self()->enforce_rebalance(reason);
}
void Consumer::wakeup() {
  self(/*any_thread=*/true)->wakeup();
}
void Consumer::close(std::chrono::milliseconds timeout) {
  self()->close(timeout);
}
void Consumer::close(const CloseOptions& options) {
  self()->close(options.timeout, options.group_membership_operation);
}
std::string Consumer::group_state() const {
  return self(/*any_thread=*/true)->state();
}
ConsumerMetrics Consumer::metrics() const {
  return self(/*any_thread=*/true)->metrics();
}
void Consumer::set_auto_commit_callback(CommitCallback callback) {
  self()->set_auto_commit_callback(std::move(callback));
}
void Consumer::set_statistics_callback(StatisticsCallback callback) {
  self()->set_statistics_callback(std::move(callback));
}
std::string Consumer::http_endpoint() const {
  return self(/*any_thread=*/true)->http_endpoint();
}
std::optional<std::string> Consumer::client_instance_id(std::chrono::milliseconds timeout) {
  return self()->client_instance_id(timeout);
}

}  // namespace kgroup
