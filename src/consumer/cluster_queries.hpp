// The Consumer's questions to the cluster that are not about its group: offsets by time or
// position (ListOffsets through the fetcher) and topics with their partitions (Metadata). Each is
// started on the background thread and waited for on the caller's; the answer crosses in a
// promise.
//
// Thread: the user thread; what it posts runs on the background thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "kgroup/consumer.hpp"
#include "net/cluster.hpp"

namespace kgroup::detail {

class cluster_queries {
 public:
  using clock = std::chrono::steady_clock;
  /// Runs a function on the background thread.
  using post_fn = std::function<void(std::function<void()>)>;

  cluster_queries(post_fn post, std::shared_ptr<fetch::fetcher> fetcher,
                  std::shared_ptr<net::cluster> cluster, std::chrono::milliseconds request_timeout)
      : post_(std::move(post)),
        fetcher_(std::move(fetcher)),
        cluster_(std::move(cluster)),
        request_timeout_(request_timeout) {}

  /// beginning_offsets() (which = -2) and end_offsets() (which = -1).
  std::map<TopicPartition, std::int64_t> offsets_at(const std::set<TopicPartition>& tps, std::int64_t which,
                                                    clock::time_point deadline, const std::string& what);

  std::map<TopicPartition, std::optional<OffsetAndTimestamp>> offsets_for_times(
      const std::map<TopicPartition, std::int64_t>& timestamps, clock::time_point deadline);

  /// Fresh metadata of `topics` (all when none), as PartitionInfo lists per existing topic.
  std::map<std::string, std::vector<PartitionInfo>> topic_partitions(
      std::optional<std::vector<std::string>> topics, clock::time_point deadline, const std::string& what);

 private:
  fetch::fetcher::offsets_result query_offsets(std::map<TopicPartition, std::int64_t> timestamps,
                                               clock::time_point deadline, const std::string& what);

  post_fn post_;
  std::shared_ptr<fetch::fetcher> fetcher_;
  std::shared_ptr<net::cluster> cluster_;
  std::chrono::milliseconds request_timeout_;
};

}  // namespace kgroup::detail
