// The user thread's data path: fetched data taken off the shared queue through the position
// table and the record cursor (src/data) into poll()'s records; what the application did to a
// partition (seek, pause, resume, ownership changes) applied to both; the fetcher's verdicts on a
// partition's log (positions, cuts) and the data errors poll() raises. The facade decides when;
// this decides what. The fetcher is reached only through a fetcher_port (the facade's posts each
// call onto the background thread), so nothing here runs there, and a unit test can stand in.
//
// Thread: the user thread only; what it touches in shared_state it touches under its mutex.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <set>

#include "consumer/poll_stats.hpp"
#include "data/committer.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "kgroup/consumer.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::detail {

/// What the data reader asks of the fetcher (fetch::fetcher's calls of the same names).
class fetcher_port {
 public:
  virtual ~fetcher_port() = default;
  /// Buffer space was freed.
  virtual void wake() = 0;
  virtual void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) = 0;
  virtual void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) = 0;
  virtual void seek_to(const std::set<TopicPartition>& tps, bool beginning) = 0;
  virtual void pause(const std::set<TopicPartition>& tps) = 0;
  virtual void resume(const std::map<TopicPartition, epoch_offset>& positions) = 0;
  virtual void cut_accepted(const TopicPartition& tp, std::int64_t offset) = 0;
  virtual void reset_position(const TopicPartition& tp) = 0;
};

class data_reader {
 public:
  struct options {
    data::record_cursor::options cursor;
    std::size_t max_poll_records = 500;
    bool read_committed = false;
  };

  data_reader(shared_state& shared, poll_stats& stats, fetcher_port& fetcher)
      : shared_(shared), stats_(stats), fetcher_(fetcher) {}

  void configure(const options& o) {
    cursor_ = data::record_cursor(o.cursor);
    max_poll_records_ = o.max_poll_records;
    read_committed_ = o.read_committed;
  }

  const data::position_table& positions() const { return positions_; }

  // ---- poll() ----

  /// At the start of poll(): what the last poll() returned becomes committable by auto-commit
  /// (Java's at-least-once rule: the application processed it before polling again).
  void publish_returned();
  /// Up to max.poll.records records of the fetched data (and at most poll_bytes), dropping stale
  /// data (revoked, paused, seeked).
  data::poll_batch drain();
  /// Raises the oldest data-path error of a partition still owned (one per call). Truncations
  /// queued together are raised as one LogTruncationError naming each partition and where its
  /// log diverged (Java's LogTruncationException).
  void raise_data_error();
  void push_error(data_error e) { pending_errors_.push_back(std::move(e)); }

  // ---- what the application did ----

  /// assign(): `tps` are owned from now on, nothing else is.
  void assign(const std::set<TopicPartition>& tps);
  /// A listener call's bookkeeping: assigned partitions are owned; revoked or lost ones are not,
  /// no record of theirs is returned from now on, and lost ones are never committed.
  void ownership_changed(const listener_call& call);
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  void seek_to(const std::set<TopicPartition>& tps, bool beginning);
  void pause(const std::set<TopicPartition>& tps);
  void resume(const std::set<TopicPartition>& tps);

  /// The metrics' per-partition figures of `assigned` (with shared_state::mutex held).
  void publish_partitions(metrics_state& m, const std::set<TopicPartition>& assigned) const;
  /// The positions of every owned partition whose position is known.
  OffsetMap current_positions() const;
  /// commit_sync()/commit_async() without offsets: current_positions(), and from now on auto-commit
  /// commits these, not the positions one poll() behind them (the application says it processed
  /// every record poll() returned). Else the next auto-commit moved the group's committed offset
  /// back (found by kgroup-sim --mix-commits; Java's commitSync() and auto-commit both commit the
  /// position, so neither goes below the other).
  OffsetMap positions_for_commit();
  /// commit_sync()/commit_async() of explicit offsets: auto-commit never commits below one of them
  /// that is within what poll() returned (the application processed the records before it), so
  /// the group's committed offset does not move back at the next auto-commit either.
  void offsets_committed(const OffsetMap& offsets);
  /// The same for `tps`, as the commit map an auto-commit sends (before a revoke, at close()):
  /// they become the consumed positions, as positions_for_commit() does, or the background
  /// auto-commit would commit the ones one poll() behind after them (found by kgroup-sim --group).
  data::commit_map commit_positions(const std::set<TopicPartition>& tps);

  // ---- what the fetcher found ----

  /// A position_event from the background thread; `owned`: the partition is assigned now.
  void position_event(const detail::position_event& e, bool owned);

 private:
  void drop_current(const TopicPartition& tp) {
    if (const auto* cur = cursor_.partition(); cur && *cur == tp) finish_cursor();
  }
  void finish_cursor();
  // Takes the next usable fetched data, dropping stale ones.
  bool next_cursor();
  // Auto-commit commits `at` for `tp` from now on (after a seek or a move back), never what was
  // returned past it. With shared_.mutex held.
  void consumed_is(const TopicPartition& tp, epoch_offset at);
  // The fetcher found the log of `e.tp` cut below its prefetch position (a KIP-320 divergence, or
  // its end): applied against the application's position (position_table::cut). At or below the
  // cut the position stays and the data fetched before it is read up to it; past it the position
  // moves back to a divergence (Java's rule), or with auto.offset.reset=none poll() raises and
  // nothing past the cut is returned until a seek; past a log's end the reset policy applies.
  void apply_cut(const detail::position_event& e);
  // Corrupt record data at the partition's position (a CRC mismatch under check.crcs, a batch or
  // record that does not parse): raised from poll() naming the partition and the offset, as Java
  // does. Nothing at or past it is returned or skipped: the position stays, and the fetcher reads
  // from it again, so every poll() raises it until the application seeks past it.
  void corrupt_data(const TopicPartition& tp, std::error_code ec, const char* what);

  shared_state& shared_;
  poll_stats& stats_;
  fetcher_port& fetcher_;
  data::position_table positions_;
  // The restarts of each partition's fetching asked of the fetcher so far (fetched_data::chain):
  // queued data of an earlier count is never read.
  fetch_chains chains_;
  // Positions after the records the last poll() returned; they become shared_.consumed (what
  // auto-commit commits) when poll() is called again.
  std::map<TopicPartition, epoch_offset> returned_;
  data::record_cursor cursor_{{}};
  std::deque<data_error> pending_errors_;  // raised by poll(), one call each
  std::size_t max_poll_records_ = 500;
  bool read_committed_ = false;
};

}  // namespace kgroup::detail
