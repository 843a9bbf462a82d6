// The user thread's half of commits and committed(): requests numbered and posted to the fetcher
// (which sends them, and retries coordinator errors until the deadline: fetcher::commit()), their
// answers waited for in the shared event queue, and commit_async()'s callbacks run in the order the
// commits were made (Java's rule: commitSync() and close() run the callbacks of earlier async
// commits first).
//
// Thread: the user thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "consumer/listener_mailbox.hpp"
#include "fetch/fetcher.hpp"
#include "kgroup/consumer.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::detail {

class commit_client {
 public:
  using clock = std::chrono::steady_clock;
  using fetcher_call = std::function<void(fetch::fetcher&)>;

  commit_client(shared_state& shared, listener_mailbox& listeners,
                std::function<void(fetcher_call)> to_fetcher)
      : shared_(shared), listeners_(listeners), to_fetcher_(std::move(to_fetcher)) {}

  /// The user's offsets as the fetcher commits them; a negative offset is refused
  /// (client_errc::invalid_argument) before anything is sent, as Java's OffsetAndMetadata.
  static fetch::commit_map to_commit_map(const OffsetMap& offsets);

  /// Commits `offsets` and waits until `deadline` (coordinator errors retried until then); throws
  /// what it failed with, or request_timed_out.
  void commit_and_wait(fetch::commit_map offsets, clock::time_point deadline);
  /// commit_sync(): commit_and_wait(), and the callbacks of earlier commit_async() calls run first.
  void commit_sync(fetch::commit_map offsets, clock::time_point deadline);
  /// The committed offsets of `tps` (retried as commits).
  std::map<TopicPartition, offset_meta> committed(std::set<TopicPartition> tps, clock::time_point deadline);

  /// An auto-commit of `offsets` (nothing when empty): waited for until `deadline`, or sent
  /// without waiting when none is given; a failure is logged (naming `what`), never thrown.
  void auto_commit(fetch::commit_map offsets, std::optional<clock::time_point> deadline, const char* what);
  /// Sends a commit whose answer runs `cb` (on this thread, from poll() or a blocking call; what
  /// it throws is rethrown by the next poll(), as a listener's is). A null `cb`: nobody awaits it
  /// (a manual assignment's auto-commit), but close() still waits for it.
  void commit_async(fetch::commit_map m, const OffsetMap& offsets, CommitCallback cb);
  /// An answer taken off the event queue: its async commit's callback runs (or, for a timed
  /// auto-commit's report, the auto-commit callback).
  void complete(const commit_done& done);
  /// The callback every auto-commit's outcome goes to (null: none; Consumer::set_auto_commit_callback).
  void set_auto_commit_callback(CommitCallback cb);
  /// Runs the callbacks of every async commit made so far, in order, waiting for the answers
  /// still out until `deadline`.
  void finish_async(clock::time_point deadline) { finish_async(next_id_, deadline); }

 private:
  void finish_async(std::uint64_t up_to, clock::time_point deadline);
  // Runs the auto-commit callback (if any) for an auto-commit's outcome; what it throws is kept
  // for the next poll(), as a listener's is.
  void report_auto_commit(const OffsetMap& offsets, std::error_code ec);
  static OffsetMap to_offset_map(const fetch::commit_map& offsets);
  // Waits for the commit_done event `id`, leaving every other event queued.
  std::optional<commit_done> wait(std::uint64_t id, clock::time_point deadline);
  // Posts `send(fetcher, id)` with a fresh id and waits for its answer; throws its error.
  commit_done request(std::function<void(fetch::fetcher&, std::uint64_t)> send, clock::time_point deadline,
                      const char* what);

  shared_state& shared_;
  listener_mailbox& listeners_;
  std::function<void(fetcher_call)> to_fetcher_;
  std::map<std::uint64_t, std::pair<OffsetMap, CommitCallback>> async_;
  std::uint64_t next_id_ = 0;
  CommitCallback auto_commit_cb_;
};

}  // namespace kgroup::detail
