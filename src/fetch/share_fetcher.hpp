// The share fetch path on the background thread (KIP-932): one share session per partition
// leader (data/share_session.hpp), ShareFetch to each leader of the member's assigned partitions,
// carrying the acknowledgements made since, ShareAcknowledge when the application commits them
// or a session must carry them without fetching, and the session close (epoch -1) at close().
//
// What it does not decide: what was acquired and what the application acknowledged is the
// acknowledgement tracker's (the facade's, on the user thread); records are decoded by the user
// thread. This file only schedules requests, applies answers to the sessions and hands the
// results to the facade through its hooks.
//
// The mock cluster's fault M2 (every answer re-sends what the member still holds) and Java's own
// model agree on one rule: a leader is fetched from again only once the application has been
// given everything of its last answer and has acknowledged it (data_returned()), and the next
// ShareFetch carries those acknowledgements.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/backoff.hpp"
#include "data/share_session.hpp"
#include "net/cluster.hpp"

namespace kgroup::fetch {

struct share_fetcher_options {
  data::share::fetch_params params;  // member_id is set by set_member_id()
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds retry_backoff{100};
  std::chrono::milliseconds retry_backoff_max{1000};
};

/// One partition of one answer, for the user thread.
struct share_fetched_partition {
  TopicPartition tp;
  std::int32_t node = -1;
  const data::share::share_session::fetch_partition_data* data = nullptr;  // valid while `frame` lives
};

/// What the facade gives the fetcher: the acknowledgement tracker's side.
struct share_fetch_hooks {
  /// The acknowledgements made for `tps` since they were last taken (the tracker's take).
  std::function<data::share::ack_map(const std::set<TopicPartition>& tps)> take_acks;
  /// Whether acknowledgements for any of `tps` wait to be taken.
  std::function<bool(const std::set<TopicPartition>& tps)> has_acks;
  /// An answer (or a failed request) of broker `node`: outcomes of the acknowledgements it
  /// carried, partitions whose acquired records are gone, and (ShareFetch) the data. `frame`
  /// keeps the answer (and its bytes) alive. Returns whether the user thread now holds records
  /// of this answer: the leader is not fetched from again until data_returned(node).
  std::function<bool(std::int32_t node, const data::share::share_session::answer_result&,
                     std::shared_ptr<const void> frame)>
      on_answer;
  /// Of `tps` (partitions a ShareFetch would forget), those the application still holds records
  /// of that have no acknowledgement outcome yet (the tracker's unresolved()): the session keeps
  /// them until then, so their acknowledgements reach the broker before it releases them.
  std::function<std::set<TopicPartition>(const std::set<TopicPartition>& tps)> unresolved;
  /// Acknowledgements that could not go out (refused by the session), with their error.
  std::function<void(const std::vector<std::pair<TopicPartition, std::error_code>>&)> on_refused;
  /// A fatal problem (no broker speaks ShareFetch): raised from poll().
  std::function<void(std::error_code, std::string)> on_fatal;
};

class share_fetcher : public std::enable_shared_from_this<share_fetcher> {
 public:
  share_fetcher(boost::asio::io_context& io, std::shared_ptr<net::cluster> cluster,
                share_fetcher_options opts, share_fetch_hooks hooks);

  /// The member id the group driver made (ShareFetch names the member).
  void set_member_id(std::string id) { opts_.params.member_id = std::move(id); }
  /// The partitions the group gives this member, with their topic ids. An assignment that
  /// becomes empty closes the sessions (the member left: the broker releases what they hold at
  /// once), unless `rejoining` (a fence: the member comes back at once with the same id, and its
  /// sessions and the records the application holds stay, as Java's do).
  void set_assignment(data::share::partition_ids assignment, bool rejoining = false);
  /// Topic ids of partitions once assigned (acknowledgements of a partition no longer assigned
  /// still name its topic by id).
  void remember_ids(const data::share::partition_ids& ids) {
    for (const auto& [tp, id] : ids) ids_[tp] = id;
  }
  /// The user thread was given all of `node`'s last answer and acknowledged it (so far as the
  /// mode asks): that leader may be fetched from again, with the acknowledgements.
  void data_returned(std::int32_t node);
  /// Sends the acknowledgements made so far at once (ShareAcknowledge where no ShareFetch is due
  /// to carry them): commit_sync()/commit_async().
  void flush();
  /// Sends the acknowledgements left and closes every session (epoch -1), then `done`.
  void close(std::function<void()> done);
  /// Stops for good: timers cancelled, answers ignored.
  void shutdown();

  /// Per broker: the epoch its session's next request carries (for metrics).
  std::map<std::int32_t, std::int32_t> session_epochs() const;
  std::uint64_t fetches() const noexcept { return fetches_; }
  std::uint64_t acknowledges() const noexcept { return acknowledges_; }
  std::uint64_t resets() const noexcept;
  /// The acquisition lock duration the last answer gave, if any.
  std::optional<std::chrono::milliseconds> lock_timeout() const noexcept { return lock_timeout_; }

 private:
  struct node_state {
    explicit node_state(std::int32_t id) : session(id) {}
    data::share::share_session session;
    bool holding = false;  // the user thread has an answer of this node not yet returned
    bool flush = false;    // acknowledgements to send without waiting for a fetch
    bool close = false;    // close the session (epoch -1)
    bool closed = false;   // closed, or nothing to close
    bool sending = false;  // a request is queued on the connection (built once it is written)
    bool built = false;    // ... and the session wrote it (so its answer goes to the session)
    std::chrono::steady_clock::time_point backoff_until{};
    int failures = 0;
  };

  void pump();
  void pump(node_state& n);
  data::share::partition_ids wanted_from(std::int32_t node) const;
  /// Whether the ShareFetch for `wanted` must wait: it would forget a partition whose records the
  /// application still holds unacknowledged (or whose acknowledgements are unanswered), and that
  /// partition left the assignment less than an acquisition lock ago. Arms the timer for then.
  bool forget_deferred(node_state& n, const data::share::partition_ids& wanted);
  void send_fetch(node_state& n, const data::share::partition_ids& wanted);
  void send_acknowledge(node_state& n, const std::set<TopicPartition>& tps, bool close);
  void with_topic_ids(data::share::ack_map& acks) const;
  void not_sent(node_state& n, std::error_code ec, const char* what);
  void answered(std::int32_t node, const data::share::share_session::answer_result& r,
                std::shared_ptr<const void> frame);
  void refresh_leaders();
  void arm(std::chrono::steady_clock::time_point when);
  void maybe_closed();
  /// `n`'s session is closed (or had nothing to close): at close() that counts towards the end;
  /// after the member left the group, the node goes back to fetching when partitions return.
  void closed_one(node_state& n);
  node_state& node(std::int32_t id);

  boost::asio::io_context& io_;
  std::shared_ptr<net::cluster> cluster_;
  share_fetcher_options opts_;
  share_fetch_hooks hooks_;
  data::share::partition_ids assignment_;
  data::share::partition_ids ids_;                 // every partition's topic id seen
  std::map<TopicPartition, std::int32_t> source_;  // where each partition's records came from
  // Partitions that left the assignment and are still in a session, with when they left.
  std::map<TopicPartition, std::chrono::steady_clock::time_point> left_at_;
  std::optional<std::chrono::milliseconds> lock_timeout_;
  bool armed_ = false;
  std::chrono::steady_clock::time_point armed_at_{};
  std::map<std::int32_t, std::unique_ptr<node_state>> nodes_;
  boost::asio::steady_timer timer_;
  bool metadata_pending_ = false;
  bool stopped_ = false;
  bool closing_ = false;
  std::function<void()> close_done_;
  std::uint64_t fetches_ = 0;
  std::uint64_t acknowledges_ = 0;
};

}  // namespace kgroup::fetch
