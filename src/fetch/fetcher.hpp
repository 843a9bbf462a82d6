// The data path on the background thread: positions of owned partitions (OffsetFetch for the
// committed offset, ListOffsets for auto.offset.reset), Fetch requests to each partition's
// leader with a bound on buffered bytes, and commits (OffsetCommit) for the user thread.
//
// Records are not decoded here: each partition's record bytes go to the user thread with the
// frame that holds them (runtime/shared_state.hpp), which parses them inside poll(). This thread
// only reads batch headers to know where the next Fetch starts.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "data/committer.hpp"
#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/fetch_session.hpp"
#include "data/next_offset.hpp"
#include "data/position_requests.hpp"
#include "fetch/position_calls.hpp"
#include "net/cluster.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::fetch {

struct fetcher_options {
  std::string group_id;
  std::int32_t fetch_min_bytes = 1;
  std::int32_t fetch_max_bytes = 52428800;
  std::int32_t fetch_max_wait_ms = 500;
  std::int32_t max_partition_fetch_bytes = 1048576;
  std::int8_t isolation_level = 0;  // 0 read_uncommitted, 1 read_committed
  std::string auto_offset_reset = "latest";
  std::size_t buffer_max_bytes = 64 * 1024 * 1024;
  bool auto_commit = true;
  std::chrono::milliseconds auto_commit_interval{5000};
  std::chrono::milliseconds retry_backoff{100};
  std::chrono::milliseconds retry_backoff_max{1000};  // commit_sync()'s retries double up to it
  std::chrono::milliseconds request_timeout{30000};
  /// client.rack: sent with every Fetch (v11+) so the leader can name a replica in this rack to
  /// read from (KIP-392). Empty: the leader is always read from.
  std::string client_rack;
  /// How long a preferred read replica is followed before asking the leader again (Java: the
  /// metadata max age).
  std::chrono::milliseconds preferred_replica_ttl{300000};
  /// A group request (OffsetFetch, OffsetCommit) found no usable coordinator: `failed` is true
  /// when the one it used answered NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or its connection
  /// failed, false when none was known. Outside a subscription the consumer looks it up again.
  std::function<void(bool failed)> coordinator_unusable;
  /// An OffsetCommit of a subscribed member, sent with `generation`, failed with Kafka error `c`
  /// (the membership core reacts: rejoin, or the membership is gone).
  std::function<void(std::int32_t generation, std::int16_t c)> commit_error;
};

/// Who this member is in the group right now (for commits), read from the membership core.
using data::group_identity;

using data::commit_map;


class fetcher : public std::enable_shared_from_this<fetcher> {
 public:
  fetcher(boost::asio::io_context& io, std::shared_ptr<net::cluster> c, fetcher_options opts,
          detail::shared_state& shared, std::function<group_identity()> identity);

  // All on the background thread.
  /// The owned set changed: new partitions start at their committed offset (or the reset
  /// policy); removed ones stop fetching at once.
  /// `manual`: assign() without a group; a partition missing from metadata is then reported as
  /// an error from poll() instead of waiting for a rebalance.
  void assign(const std::set<TopicPartition>& owned, bool manual = false);
  /// With `epoch` (the leader epoch of the record before `offset`) the position is validated
  /// against the leader's log before fetching (KIP-320).
  void seek(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch = -1);
  void seek_to(const std::set<TopicPartition>& tps, bool beginning);
  /// Fetches `tp` again from `offset` (the user thread's position, `epoch` its leader epoch),
  /// without validation: the data after it could not be read (corrupt).
  void refetch(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  /// The user thread found the application's position of `tp` at or below the cut at `offset`
  /// where the fetcher waits (auto.offset.reset=none): fetching goes on from the cut.
  void cut_accepted(const TopicPartition& tp, std::int64_t offset);
  /// The application's position of `tp` is past the end of its log (a log_end cut): the reset
  /// policy applies to it, forced, as for OFFSET_OUT_OF_RANGE. The user thread counts it as a
  /// seek_to (a seek_applied event comes first).
  void reset_position(const TopicPartition& tp);
  /// Paused partitions stop fetching; on resume they fetch again from `positions` (the user
  /// thread drops what was buffered while paused).
  void pause(const std::set<TopicPartition>& tps);
  void resume(const std::map<TopicPartition, detail::epoch_offset>& positions);
  /// Commits `offsets`; when `id` is non-zero a commit_done event reports the outcome. Until
  /// `retry_until`, coordinator errors (being looked up, moved, loading: data::commit_retriable)
  /// are retried after retry.backoff.ms, doubling up to retry.backoff.max.ms, as long as the
  /// retry comes before it (commit_sync(), as Java's); without it the commit is tried once
  /// (commit_async() and auto-commit, as Java's). `listener_seq`: the listener call the user
  /// thread made it in (0: none); once the core has cancelled that call late (shared_state's
  /// late_cancels), no attempt goes out: it would carry a later membership's identity.
  void commit(std::uint64_t id, commit_map offsets,
              std::optional<std::chrono::steady_clock::time_point> retry_until = std::nullopt,
              std::uint64_t listener_seq = 0);
  /// Reads committed offsets; reports them in a commit_done event with `id`. Retried as commit().
  void fetch_committed(std::uint64_t id, std::set<TopicPartition> tps,
                       std::optional<std::chrono::steady_clock::time_point> retry_until = std::nullopt);
  /// Offset (and its timestamp) per partition for `timestamps` (-2 earliest, -1 latest, else the
  /// first offset with a timestamp at or after it), asked of each partition's leader with the
  /// consumer's isolation level; metadata and leader errors are retried until `deadline`. -1 for
  /// a partition without such an offset. `done` runs once, on this thread.
  using offsets_result = std::map<TopicPartition, std::pair<std::int64_t, std::int64_t>>;
  using offsets_done = std::function<void(std::error_code, const std::string&, offsets_result)>;
  void query_offsets(std::map<TopicPartition, std::int64_t> timestamps,
                     std::chrono::steady_clock::time_point deadline, offsets_done done);
  /// The user thread freed buffer space.
  void wake();
  void shutdown();

 private:
  // Per-partition state, its transition table and the decisions on it: data/fetch_positions.hpp.
  using pstate = data::fetch_state;
  using part = data::fetch_part;
  /// Logs that `tp` reads from its leader again instead of `replica` (-1: nothing to log).
  void log_replica_dropped(const TopicPartition& tp, std::int32_t replica, std::string_view why);

  void pump();
  // OffsetFetch, ListOffsets and OffsetForLeaderEpoch: the requests_ core decides, these send,
  // log, count and tell the user thread.
  void send_offset_fetch();
  void on_committed(std::error_code ec, const protocol::offset_fetch_response& r);
  void send_list_offsets();
  void on_resets(const data::sent_resets& sent, std::error_code ec, const protocol::list_offsets_response& r);
  void send_validations();
  void on_validations(const data::sent_validations& sent, std::error_code ec,
                      const protocol::offset_for_leader_epoch_response& r);
  void on_validated(const data::validation_result::validated& v);
  /// Reports what `wants` names missing (manual assignment) and refreshes metadata for the rest.
  void report_wants(const data::position_wants& wants);
  void send_fetches();
  void on_fetch_response(std::int32_t node, std::error_code ec, const protocol::fetch_response& r,
                         const net::response_frame& frame, const data::fetch_set& sent);
  /// Fetch latency, size and throttle time for the metrics.
  void record_fetch(std::chrono::steady_clock::duration took, const protocol::fetch_response& r);
  void schedule_retry();
  /// Arms the retry timer for `at` (unless armed).
  void schedule_retry_at(std::chrono::steady_clock::time_point at);
  /// Reports `tp` absent from metadata (client_errc::partition_not_found).
  void report_missing(const TopicPartition& tp);
  void maybe_refresh_metadata();
  // Refreshes metadata (unless one is under way) and tries again after the retry backoff.
  void retry_after_metadata();
  // The leader's connection; none (nullptr) schedules retry_after_metadata().
  std::shared_ptr<net::connection> leader_connection(std::int32_t leader);
  // Sets *armed until `timer` fires after `after`, then runs `fire` unless stopped.
  void arm(boost::asio::steady_timer& timer, bool fetcher::*armed, std::chrono::milliseconds after,
           void (*fire)(fetcher&));
  struct offsets_query;
  void run_query(std::shared_ptr<offsets_query> q);
  void retry_query(std::shared_ptr<offsets_query> q);
  void auto_commit();
  void arm_auto_commit();
  // One coordinator request (commit or committed offsets), its outcome passed to `done`.
  using coordinator_done = std::function<void(detail::commit_done)>;
  void commit_once(const commit_map& offsets, coordinator_done done);
  void fetch_committed_once(const std::set<TopicPartition>& tps, coordinator_done done);
  // A coordinator request tried again after coordinator errors until a deadline (see commit()).
  struct retried;
  void attempt(std::shared_ptr<retried> r);

  boost::asio::io_context& io_;
  std::shared_ptr<net::cluster> cluster_;
  fetcher_options opts_;
  detail::shared_state& shared_;
  std::function<group_identity()> identity_;
  void coordinator_unusable(bool failed);
  /// The coordinator's offsets connection for `who`; none (nullptr) reports coordinator_unusable(false).
  std::shared_ptr<net::connection> coordinator_connection(const group_identity& who);
  data::fetch_positions positions_;
  // The application's restarts of each partition's fetching received so far (fetched_data::chain).
  detail::fetch_chains chains_;
  // The Fetch path's decisions (per-broker requests, sessions, the answers' error ladder).
  data::fetch_planner planner_;
  // Where partitions start: OffsetFetch, ListOffsets, OffsetForLeaderEpoch (their decisions).
  data::position_requests requests_;
  // The data reader's calls (seek, pause, resume, ...) applied to the positions.
  position_calls calls_;
  boost::asio::steady_timer retry_timer_;
  bool retry_armed_ = false;
  boost::asio::steady_timer auto_commit_timer_;
  bool auto_commit_armed_ = false;
  data::auto_committer auto_committer_;
  std::chrono::steady_clock::time_point last_metadata_refresh_{};
  // Topic recreation (KIP-516): the owned partitions' topic ids are compared with metadata after
  // every refresh and every assignment (check_topic_ids()).
  void check_topic_ids();
  std::uint64_t ids_checked_refreshes_ = 0;
  bool ids_dirty_ = true;
  bool stopped_ = false;
};

}  // namespace kgroup::fetch
