// The user thread's position table: for each partition poll() may return records of, the next
// offset to return, whether the user paused it, and what the last fetched data said about the
// log (for lag and metrics). A pure class: the facade feeds it the user's calls and the
// fetcher's events, and asks it which fetched data is usable. No locks (user thread only).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "data/types.hpp"
#include "kgroup/types.hpp"

namespace kgroup::data {

struct partition_position {
  std::int64_t position = -1;          // next offset poll() returns; -1 until known
  std::int32_t epoch = -1;             // leader epoch of the record before `position`; -1 unknown
  std::int64_t high_watermark = -1;    // from the last fetched data (lag, metrics)
  std::int32_t replica = -1;           // broker the last fetched data came from (metrics)
  std::int64_t log_start_offset = -1;  // from the last fetched data (metrics: records-lead)
  bool paused = false;
  bool user_seeked = false;  // a user seek() wins over the initial committed position
  // seek()/seek_to_*() calls the fetcher has not applied yet: position events until then were
  // computed before them (a reset answer in flight) and are ignored.
  int seeks_in_flight = 0;
};

/// Why fetched data can or cannot be returned by poll().
enum class fetched_fit {
  usable,
  not_owned,         // revoked, lost or unassigned since it was fetched
  paused,            // the user paused the partition
  position_unknown,  // no position yet (a reset or the committed offset is still coming)
  other_offset,      // fetched from an offset that is no longer the position (seek, reset)
};
const char* to_string(fetched_fit f) noexcept;

/// Where the log was found cut (position_table::cut) lies against the application's position.
enum class cut_verdict {
  stale,       // a user seek is in flight: the seek decides, the cut is ignored
  before,      // the position is at or below the cut (or was unknown: it is the cut now): kept
  moved_back,  // the position was past the cut and moved back to it
  past,        // the position is past the cut (or the cut is unknown) and was left as it is
};

class position_table {
 public:
  using map = std::map<TopicPartition, partition_position>;

  /// Ownership. own() keeps an existing entry; retain() drops every partition not in `keep` and
  /// returns the dropped ones.
  void own(const TopicPartition& tp) { parts_.try_emplace(tp); }
  std::set<TopicPartition> retain(const std::set<TopicPartition>& keep);
  void drop(const TopicPartition& tp) { parts_.erase(tp); }
  bool owns(const TopicPartition& tp) const { return parts_.count(tp) > 0; }

  const partition_position* find(const TopicPartition& tp) const;
  partition_position* find(const TopicPartition& tp);
  const map& entries() const { return parts_; }

  /// The position poll() continues from, if known.
  std::optional<detail::epoch_offset> position(const TopicPartition& tp) const;
  /// Every known position, as Consumer::commit_sync() without arguments commits them.
  std::map<TopicPartition, detail::epoch_offset> positions() const;
  /// High watermark (or last stable offset) minus position, when both are known.
  std::optional<std::int64_t> lag(const TopicPartition& tp) const;

  // ---- the user's calls ----
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  /// seek_to_beginning()/seek_to_end(): the position is unknown until the fetcher resolves it.
  void seek_to(const TopicPartition& tp);
  void pause(const TopicPartition& tp) { parts_[tp].paused = true; }  // the caller checks ownership
  /// Unpauses an owned partition; returns where its fetching resumes (nullopt: not owned, or not
  /// paused: resuming a partition that runs does nothing, as in Java).
  std::optional<detail::epoch_offset> resume(const TopicPartition& tp);
  std::set<TopicPartition> paused() const;

  // ---- the fetcher's events ----
  /// The fetcher applied one of the user's seeks.
  void seek_applied(const TopicPartition& tp);
  /// Whether a user seek of `tp` is still to be applied by the fetcher (position events until
  /// then are stale and ignored).
  bool seek_in_flight(const TopicPartition& tp) const;
  /// The fetcher established a position (committed offset, reset, seek_to_*). Ignored for a
  /// partition not owned (never creates an entry), while a user seek is in flight, and, unless
  /// `forced`, after a user seek. Returns true when the position changed (data read from the old
  /// one is stale).
  bool position_found(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch, bool forced);
  /// The fetcher found the log cut at `offset` (-1: unknown where), below its own position: a
  /// KIP-320 divergence or the log's end. Java validates the consumer's own position and only
  /// ever moves it back; the fetcher validated its prefetch position, so the verdict is taken
  /// here, against the application's: at or below the cut the position stays (`before`), past it
  /// it moves back to the cut when `move_back` (`moved_back`), else stays (`past`: the caller
  /// raises or resets). The caller checks ownership.
  cut_verdict cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch, bool move_back);
  /// Whether `d` continues a partition's position.
  fetched_fit fit(const detail::fetched_data& d) const;
  /// Takes the log's ends from usable data. Under read_committed lag counts to the last stable
  /// offset (records past it are not readable yet; Java's records-lag does the same).
  void note_fetched(const detail::fetched_data& d, bool read_committed);

 private:
  map parts_;
};

}  // namespace kgroup::data
