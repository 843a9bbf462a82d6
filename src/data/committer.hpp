// The commit decisions of the data path, as pure functions (issue 17): whether a commit may go
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
/// without a request.
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

}  // namespace kgroup::data
