// The Consumer's cluster queries. See cluster_queries.hpp.
#include "consumer/cluster_queries.hpp"

#include <algorithm>
#include <future>

namespace kgroup::detail {

namespace {

// Runs `start(promise)` on the background thread (through `post`) and waits for its result until
// `deadline`, plus a second for the answer to cross threads.
template <class T, class Start>
T wait_for_answer(const cluster_queries::post_fn& post, Start start,
                  cluster_queries::clock::time_point deadline, const std::string& what) {
  auto promise = std::make_shared<std::promise<T>>();
  auto result = promise->get_future();
  post([start = std::move(start), promise]() mutable { start(promise); });
  if (result.wait_until(deadline + std::chrono::seconds(1)) != std::future_status::ready)
    throw Error(make_error_code(client_errc::request_timed_out), what + ": no answer in time");
  return result.get();
}

}  // namespace

fetch::fetcher::offsets_result cluster_queries::query_offsets(
    std::map<TopicPartition, std::int64_t> timestamps, clock::time_point deadline, const std::string& what) {
  if (timestamps.empty()) return {};
  return wait_for_answer<fetch::fetcher::offsets_result>(
      post_,
      [f = fetcher_, timestamps = std::move(timestamps), deadline, what](auto promise) mutable {
        f->query_offsets(
            std::move(timestamps), deadline,
            [promise, what](std::error_code ec, const std::string& message,
                            fetch::fetcher::offsets_result r) {
              if (ec)
                promise->set_exception(std::make_exception_ptr(Error(ec, what + ": " + message)));
              else
                promise->set_value(std::move(r));
            });
      },
      deadline, what);
}

std::map<TopicPartition, std::int64_t> cluster_queries::offsets_at(const std::set<TopicPartition>& tps,
                                                                   std::int64_t which,
                                                                   clock::time_point deadline,
                                                                   const std::string& what) {
  std::map<TopicPartition, std::int64_t> want;
  for (const auto& tp : tps) want[tp] = which;
  std::map<TopicPartition, std::int64_t> out;
  for (const auto& [tp, r] : query_offsets(std::move(want), deadline, what)) out[tp] = r.first;
  return out;
}

std::map<TopicPartition, std::optional<OffsetAndTimestamp>> cluster_queries::offsets_for_times(
    const std::map<TopicPartition, std::int64_t>& timestamps, clock::time_point deadline) {
  for (const auto& [tp, ts] : timestamps) {
    if (ts < 0)
      throw Error(make_error_code(client_errc::invalid_argument),
                  "offsets_for_times(): negative timestamp " + std::to_string(ts) + " for " + tp.topic + "-" +
                      std::to_string(tp.partition));
  }
  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> out;
  for (const auto& [tp, r] : query_offsets(timestamps, deadline, "offsets_for_times()")) {
    out[tp] = r.first >= 0 ? std::optional<OffsetAndTimestamp>(OffsetAndTimestamp{r.first, r.second})
                           : std::nullopt;
  }
  return out;
}

std::map<std::string, std::vector<PartitionInfo>> cluster_queries::topic_partitions(
    std::optional<std::vector<std::string>> topics, clock::time_point deadline, const std::string& what) {
  using result = std::map<std::string, std::vector<PartitionInfo>>;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  const auto request_timeout = std::max(std::chrono::milliseconds(1), std::min(request_timeout_, left));
  return wait_for_answer<result>(
      post_,
      [c = cluster_, topics, request_timeout, what](auto promise) {
        // The cluster owns this callback: a raw pointer back to it, not a cycle.
        c->refresh_metadata(
            topics, request_timeout, [cl = c.get(), topics, promise, what](std::error_code ec) {
              if (ec) {
                promise->set_exception(
                    std::make_exception_ptr(Error(ec, what + ": metadata: " + ec.message())));
                return;
              }
              result out;
              for (const auto& [name, t] : cl->metadata().topics) {
                if (t.error_code != 0) continue;  // unknown (or unauthorized) topic: absent
                if (topics && std::find(topics->begin(), topics->end(), name) == topics->end()) continue;
                auto& parts = out[name];
                for (const auto& p : t.partitions)
                  parts.push_back({p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.error_code});
              }
              promise->set_value(std::move(out));
            });
      },
      deadline, what);
}

}  // namespace kgroup::detail
