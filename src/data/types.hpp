// The data path's vocabulary, shared by its pure cores (src/data), the runtime's cross-thread
// state and the facade. Plain values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kgroup/types.hpp"

namespace kgroup::detail {

/// An offset with its metadata and leader epoch (-1: none), as committed or read back.
struct offset_meta {
  std::int64_t offset = -1;
  std::string metadata;
  std::int32_t epoch = -1;
};
/// A position: the next offset and the leader epoch of the record before it (-1: unknown).
struct epoch_offset {
  std::int64_t offset = -1;
  std::int32_t epoch = -1;
  bool operator==(const epoch_offset&) const = default;
};

/// Records of one partition from one Fetch response, handed to the user thread undecoded (the
/// user thread parses them; the frame stays alive through `frame`).
struct fetched_data {
  TopicPartition tp;
  std::int64_t fetch_offset = 0;
  std::int64_t high_watermark = -1;
  std::int64_t last_stable_offset = -1;
  std::int64_t log_start_offset = -1;
  std::span<const std::uint8_t> records;
  std::vector<std::pair<std::int64_t, std::int64_t>> aborted;  // producer id, first offset
  std::shared_ptr<const void> frame;                           // keeps `records` alive
  std::size_t bytes = 0;
  std::int32_t replica = -1;  // the broker it was read from (the leader or a KIP-392 replica)
  // The log was found cut here (KIP-320 divergence, or its end below the fetcher's position)
  // after this data was fetched: records at or past `limit` are not the log's and are never
  // returned; reading it moves the position to `limit` at most (`limit_epoch`: the leader epoch of
  // the record before it). -1: no cut.
  std::int64_t limit = -1;
  std::int32_t limit_epoch = -1;
  // How many of the application's restarts of this partition's fetching (seek, seek_to_*, resume,
  // the refetch after corrupt data, the reset after a cut) the fetcher had received when it queued
  // this data. The user thread counts the same calls as it makes them (data_reader): data of an
  // earlier count was fetched by a chain of Fetches the application has since restarted, and is
  // never read, even when it starts at the new position (issue 33: the simulator found the
  // reader following the old chain while the fetcher followed the new one, and the partition
  // stalled).
  std::uint64_t chain = 0;
};

/// The per-partition count of fetched_data::chain, on each side of the queue.
class fetch_chains {
 public:
  std::uint64_t restart(const TopicPartition& tp) { return ++counts_[tp]; }
  std::uint64_t of(const TopicPartition& tp) const {
    auto it = counts_.find(tp);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::map<TopicPartition, std::uint64_t> counts_;  // never erased: a partition owned again keeps counting
};

}  // namespace kgroup::detail
