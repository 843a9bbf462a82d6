// The commit decisions of the data path, as pure functions: whether a commit may go
// out with the membership's identity, the OffsetCommit request, what its answer means, and what
// auto-commit commits. The fetcher (src/fetch) only sends and delivers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>

#include "data/types.hpp"
#include "data/offset_fetch.hpp"
#include "group/types.hpp"
#include "kgroup/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data {

/// The membership core's standing plus what only the facade knows.
struct group_identity : group::standing {
  bool group_mode = true;   // false without group.id (no commits possible)
  bool subscribed = false;  // partitions come from the group (subscribe()), not from assign()
};

/// Offsets to commit: offset, metadata and leader epoch per partition.
using commit_map = std::map<TopicPartition, detail::offset_meta>;

/// An error for the caller of a commit, with the message it sees.
struct commit_error {
  std::error_code code;
  std::string message;
};

/// Why a commit of `offsets` may not be sent now with `who`'s identity (before the coordinator
/// is even looked at), or nothing. An empty commit is refused with no error code: it succeeds
/// without a request. A subscribed member whose membership is gone (`who.gone()`: poll timeout,
/// fatal error, removed/fenced and not rejoined, leaving) gets client_errc::commit_failed, never
/// retried, whatever its generation; one joining or rebalancing gets REBALANCE_IN_PROGRESS
/// (poll(), then commit again).
std::optional<commit_error> refuse_commit(const group_identity& who, const commit_map& offsets);

/// The OffsetCommit request for `offsets` with `who`'s identity (generation -1 and no member id
/// outside a subscription, as Java's are).
protocol::offset_commit_request make_commit_request(const std::string& group_id, const group_identity& who,
                                                    const commit_map& offsets);
/// Keeps the fields `version` can carry (group.instance.id from v7).
void fit_offset_commit(protocol::offset_commit_request& r, std::int16_t version);

/// The first partition error of an OffsetCommit answer, or nothing when every offset was committed.
struct commit_failure {
  std::int16_t kafka_code = 0;    // for the membership core (member::commit_failed)
  bool coordinator_gone = false;  // rediscover the coordinator
  commit_error error;             // for the caller
};
std::optional<commit_failure> read_commit_response(const protocol::offset_commit_response& r);

/// Auto-commit: the consumed positions of owned partitions that differ from what was last
/// committed (never a partition this member no longer owns).
commit_map auto_commit_due(const std::map<TopicPartition, detail::epoch_offset>& consumed,
                           const std::set<TopicPartition>& owned,
                           const std::map<TopicPartition, std::int64_t>& last_committed);

/// Auto-commit's policy and memory: what was last committed per owned partition.
class auto_committer {
 public:
  /// What to commit now: auto_commit_due() of `consumed`, and nothing unless `who` is stable and
  /// its membership not gone (a commit during a rebalance would be refused; the revoke
  /// listener's commit covers it).
  commit_map due(const std::map<TopicPartition, detail::epoch_offset>& consumed,
                 const std::set<TopicPartition>& owned, const group_identity& who) const;
  /// `offsets` were committed (by auto-commit or the user).
  void committed(const commit_map& offsets);
  /// `tp` is no longer owned: a later owner of it starts afresh.
  void forget(const TopicPartition& tp) { last_.erase(tp); }
  const std::map<TopicPartition, std::int64_t>& last() const noexcept { return last_; }

 private:
  std::map<TopicPartition, std::int64_t> last_;
};

// ---- committed offsets (OffsetFetch) ----

/// Why committed offsets cannot be asked for with `who`'s identity (no group.id), or nothing.
std::optional<commit_error> refuse_offset_fetch(const group_identity& who);
/// The error of a commit or an OffsetFetch while no coordinator is known (commit_sync() and
/// committed() retry it until their deadline).
commit_error coordinator_unknown();
/// The error of a commit made inside a listener callback the membership core has superseded (the
/// member gave its partitions up and went on, maybe rejoined, while the callback ran): refused
/// when made (commit_client) and on every retry (fetcher::commit), never sent with a later
/// membership's identity (found by kgroup-sim --group).
commit_error superseded_callback_commit();
/// The OffsetFetch request for `tps`. KIP-447 require_stable: an offset with a transactional
/// commit pending comes back as UNSTABLE_OFFSET_COMMIT (retried) instead of a stale offset.
protocol::offset_fetch_request make_offset_fetch_request(const std::string& group_id,
                                                         const std::set<TopicPartition>& tps);
/// What an OffsetFetch answer says to committed(): the offsets committed (a partition with none
/// is absent), or the first error: the group's, else the first partition's (a partition error,
/// UNSTABLE_OFFSET_COMMIT say, fails the call instead of passing for "nothing committed").
struct committed_answer {
  commit_map offsets;
  commit_error error;             // no code: success
  bool coordinator_gone = false;  // rediscover the coordinator
};
committed_answer read_committed(const protocol::offset_fetch_response& r);

/// Whether a commit_sync() or committed() that failed with `ec` is tried again before its
/// deadline, as Java retries: the coordinator moved or is loading, a lost connection or a
/// timeout, and the codes of the reaction class retry_commit (REQUEST_TIMED_OUT,
/// UNSTABLE_OFFSET_COMMIT, and KIP-848's STALE_MEMBER_EPOCH: the retry carries the epoch of the
/// latest heartbeat).
bool commit_retriable(std::error_code ec);

}  // namespace kgroup::data
