// What crosses between the user's thread and the background thread of one Consumer.
//
// Background -> user: `events` (listener calls to run, fatal errors, "left the group", positions,
// data errors, commit outcomes), `fetched` data and the snapshot fields. User -> background: calls
// go through asio::post() onto the io_context; what the user thread writes here is state the
// background thread reads when it next decides: `consumed` (auto-commit's positions),
// `started_listeners` (a listener call that began and may no longer be cancelled) and
// `buffered_bytes` (how much fetched data waits, for the fetcher's bound); besides, the user thread
// keeps `woken` (wakeup()), `fatal` once poll() has raised it and the user-thread half of
// `metrics` here. Every field
// is guarded by `mutex`; the background thread is the only producer of events and the only writer
// of the snapshot fields; the user thread is the only consumer of events.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "base/histogram.hpp"
#include "data/types.hpp"
#include "group/types.hpp"
#include "kgroup/types.hpp"
#include "runtime/wire_stats.hpp"

namespace kgroup::detail {

struct listener_call {
  group::listener_kind kind;
  std::vector<TopicPartition> partitions;
  std::uint64_t seq = 0;
  bool bookkeeping_only = false;  // heartbeat-thread listeners: the user thread only updates its state
  bool stale_claim = false;       // group::run_listener::stale_claim: no auto-commit before the revoke
};
struct fatal_error {
  std::error_code code;
  std::string message;
};
struct left_event {};
/// What a position_event says about the log the fetcher read `tp` from.
enum class cut_kind : std::uint8_t {
  none,       // a position (committed offset, reset, seek_to_*)
  diverged,   // KIP-320: the leader's log diverges from what was fetched at `offset` (-1: unknown where)
  log_end,    // OFFSET_OUT_OF_RANGE past the log's end: the log now ends at `offset`
  recreated,  // the topic was deleted and created again (a new topic id; offset -1): nothing read
              // before applies, and the reset policy applies to the application's position
};
/// The background thread established where `tp` is read from (committed offset, reset, seek_to_*),
/// or found the log cut below its own (prefetch) position. `forced` positions (resets, seek_to_*)
/// override a position the user set; initial ones do not. A cut is applied by the user thread
/// against the application's position: at or below it the position stays and data fetched before
/// the cut is read up to it; past it the position moves back (or, with `halted`, poll() raises).
/// The fetcher has already dropped the queued data of `tp` that starts at or past the cut and
/// limited the rest to it (fetched_data::limit).
struct position_event {
  TopicPartition tp;
  std::int64_t offset = 0;
  bool forced = false;
  std::int32_t epoch = -1;  // leader epoch of the record before `offset`; -1 unknown
  // Not a position: the fetcher applied one of the user's seeks here. Position events of the
  // partition queued before it were computed before that seek and are stale.
  bool seek_applied = false;
  cut_kind cut = cut_kind::none;
  // A cut with auto.offset.reset=none: the fetcher waits at the cut for the user thread's verdict
  // (fetcher::cut_accepted() when the application's position is at or below it; else a seek).
  bool halted = false;
};
/// A per-partition data-path error for poll() to raise (offset out of range with reset none,
/// partition gone from metadata, log truncation with reset none).
struct data_error {
  TopicPartition tp;
  std::error_code code;
  std::string message;
  // The offset concerned (out of range, corrupt); -1 none (PartitionError::offset()).
  std::int64_t offset = -1;
  // client_errc::log_truncation: the first offset known to diverge and its epoch (-1: unknown).
  std::int64_t divergent_offset = -1;
  std::int32_t divergent_epoch = -1;
};
/// Outcome of a commit or committed() request started by the user thread.
struct commit_done {
  /// The id of a timed auto-commit's report (Consumer::set_auto_commit_callback).
  static constexpr std::uint64_t auto_commit_report_id = ~std::uint64_t{0};
  std::uint64_t id = 0;
  std::map<TopicPartition, offset_meta> offsets;  // committed()
  std::error_code code;
  std::string message;
};

using user_event =
    std::variant<listener_call, fatal_error, left_event, position_event, data_error, commit_done>;

/// The data for ConsumerMetrics, published under shared_state::mutex. Group and commit fields are
/// written by the background thread, poll and partition fields by the user thread.
struct metrics_state {
  // Background thread: the membership core's view.
  group::member_stats group;
  std::int32_t coordinator = -1;
  std::string assignor;
  bool leader = false;
  std::int64_t commits = 0;
  std::int64_t offset_validations = 0;  // positions checked with OffsetForLeaderEpoch (KIP-320)
  std::int64_t log_truncations = 0;     // of those, logs found truncated below the position
  std::int64_t topic_recreations = 0;   // owned partitions whose topic came back with a new id (KIP-516)
  double commit_latency_total_ms = 0;
  double commit_latency_max_ms = 0;
  double fetch_latency_max_ms = 0;  // background thread (the fetcher)
  // Distributions: commits and fetches (background thread), listener callbacks (the thread that
  // runs them), poll intervals (user thread, copied at publish).
  detail::histogram commit_hist;
  detail::histogram fetch_latency_hist;
  detail::histogram fetch_size_hist{detail::size_bounds_bytes};
  detail::histogram fetch_throttle_hist;
  detail::histogram assigned_hist, revoked_hist, lost_hist;
  detail::histogram between_poll_hist;
  std::map<TopicPartition, std::int64_t> committed;  // last committed (or fetched as committed) offsets
  std::string http_endpoint;
  std::shared_ptr<const net::wire_stats> wire;  // the connections' counters (atomic, no lock needed)
  // User thread (published by poll(), at most every 100 ms, and by metrics()).
  struct partition {
    std::int64_t position = -1;
    std::int64_t high_watermark = -1;
    std::int32_t replica = -1;  // broker the last records came from
    std::int64_t log_start_offset = -1;
    bool paused = false;
  };
  std::map<TopicPartition, partition> partitions;
  std::int64_t records_total = 0;
  std::int64_t bytes_total = 0;
  double records_rate = 0;
  double bytes_rate = 0;
  double between_poll_avg_ms = 0;
  double between_poll_max_ms = 0;
  double idle_ratio_avg = 0;
  std::optional<std::chrono::steady_clock::time_point> last_poll;
};

/// What poll() did, as the user thread last wrote it (under the shared mutex): the membership
/// driver reads it before it gives its core any event (driver_base::sync_poll()), so poll() posts
/// nothing to the background thread in the common case (issue 37: a thread wakeup per call).
struct poll_board {
  std::uint64_t calls = 0;    // poll() calls begun
  std::uint64_t returns = 0;  // of them, returned (by records, timeout or exception)
  std::chrono::steady_clock::time_point called{};
  std::chrono::steady_clock::time_point returned{};
  bool in_poll() const noexcept { return calls != returns; }
};

struct shared_state {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<user_event> events;
  // Snapshot, written by the background thread after each batch of core events.
  std::set<TopicPartition> owned;
  std::vector<std::string> topics;
  std::string member_id;
  std::int32_t generation = -1;
  std::string state = "unsubscribed";  // the core's state name, for display (metrics, /status)
  // The core's standing (group::standing): what the user thread decides on, instead of the
  // display string above (may_have_left_group() reads poll_timed_out).
  group::standing standing;
  std::optional<fatal_error> fatal;  // sticky: every poll() after a fatal error throws it
  std::uint64_t left_count = 0;      // bumped on every left_group action
  bool woken = false;                // wakeup() was called and not yet consumed by poll()
  std::uint64_t poll_acked = 0;      // the last poll() (by number) the background thread handled
  poll_board poll;                   // user thread writes (under the mutex), then bumps poll_version
  std::atomic<std::uint64_t> poll_version{0};  // the driver locks to read `poll` only when it moved
  std::deque<fetched_data> fetched;  // data path: background -> user
  std::size_t buffered_bytes = 0;    // bytes in `fetched` plus the one the user is reading
  // Positions (next offset) after the records of every poll() but the latest, for auto-commit on
  // the background thread: records count as processed once the application polls again.
  // Written by the user thread only.
  std::map<TopicPartition, epoch_offset> consumed;
  // The user registered an auto-commit callback: the fetcher's timed auto-commits are reported to
  // the user thread (commit_done with auto_commit_report_id).
  bool report_auto_commits = false;
  metrics_state metrics;
  // Listener calls queued for the user thread that the core has since superseded (a revoke
  // overtaken by the loss of the partitions): skipped, not run. Background thread writes.
  std::set<std::uint64_t> cancelled_listeners;
  // Listener calls the user thread has started and not finished (user thread writes), and those
  // of them the core cancelled anyway (background thread writes; the user thread settles them).
  std::set<std::uint64_t> started_listeners;
  std::set<std::uint64_t> late_cancels;

  /// The user thread, holding `mutex`: poll() begins / returns at `now`.
  void poll_began(std::chrono::steady_clock::time_point now) {
    ++poll.calls;
    poll.called = now;
    poll_version.fetch_add(1, std::memory_order_release);
  }
  void poll_ended(std::chrono::steady_clock::time_point now) {
    poll.returns = poll.calls;
    poll.returned = now;
    poll_version.fetch_add(1, std::memory_order_release);
  }

  void push(user_event e) {
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(e));
    }
    cv.notify_all();
  }

  /// The fetcher no longer owns `tps`: their queued data is dropped (a partition owned again must
  /// not read data fetched for the earlier ownership, which may start at the new position), and so
  /// is what was consumed of them: auto-commit must not commit it if the partition comes back
  /// while the user thread is still inside the revoke callback of the earlier ownership (found by
  /// kgroup-sim --group, seed 2920: the group's committed offset moved back).
  void drop_fetched(const std::vector<TopicPartition>& tps) {
    std::lock_guard lock(mutex);
    for (const auto& tp : tps) consumed.erase(tp);
    for (auto it = fetched.begin(); it != fetched.end();) {
      if (std::find(tps.begin(), tps.end(), it->tp) == tps.end()) {
        ++it;
        continue;
      }
      buffered_bytes -= std::min(buffered_bytes, it->bytes);
      it = fetched.erase(it);
    }
  }

  /// The fetcher found the log of `tp` cut at `offset` (position_event's cut): the queued data of
  /// `tp` that starts at or past the cut is dropped (all of it for -1), the rest limited to the
  /// cut, and the cut goes to the user thread (which applies it against the application's
  /// position), in one step under the lock so that no data escapes between.
  void push_cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch, cut_kind kind,
                bool halted) {
    {
      std::lock_guard lock(mutex);
      for (auto it = fetched.begin(); it != fetched.end();) {
        if (it->tp != tp) {
          ++it;
        } else if (offset < 0 || it->fetch_offset >= offset) {
          buffered_bytes -= std::min(buffered_bytes, it->bytes);
          it = fetched.erase(it);
        } else {
          if (it->limit < 0 || offset < it->limit) {
            it->limit = offset;
            it->limit_epoch = epoch;
          }
          ++it;
        }
      }
      position_event e{tp, offset, false, epoch};
      e.cut = kind;
      e.halted = halted;
      events.push_back(std::move(e));
    }
    cv.notify_all();
  }
};

}  // namespace kgroup::detail
