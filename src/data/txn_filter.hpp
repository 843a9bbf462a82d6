// read_committed filtering of fetched record batches (pure).
//
// Kafka's rule: a Fetch response lists, per partition, the aborted transactions (producer id and
// first offset) in the fetched range. Walking batches in offset order, a producer's transaction
// counts as aborted from its first offset until that producer's next control batch (its abort
// marker); transactional batches of an aborted producer are dropped, and control batches are
// never returned to the application.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "protocol/records.hpp"

namespace kgroup::data {

class aborted_filter {
 public:
  aborted_filter() = default;
  /// `aborted`: (producer id, first offset) pairs, in any order.
  explicit aborted_filter(const std::vector<std::pair<std::int64_t, std::int64_t>>& aborted) {
    for (const auto& [pid, first] : aborted) pending_.emplace_back(first, pid);
    std::sort(pending_.begin(), pending_.end());
  }

  /// Whether `batch` must be skipped under read_committed. Call for every batch, in order.
  bool skip(const protocol::record_batch_header& batch) {
    while (next_ < pending_.size() && pending_[next_].first <= batch.last_offset()) {
      aborting_.insert(pending_[next_].second);
      ++next_;
    }
    if (batch.is_control()) {
      aborting_.erase(batch.producer_id);  // the marker ends the producer's transaction
      return true;
    }
    return batch.is_transactional() && aborting_.count(batch.producer_id) > 0;
  }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> pending_;  // (first offset, producer id)
  std::size_t next_ = 0;
  std::set<std::int64_t> aborting_;
};

}  // namespace kgroup::data
