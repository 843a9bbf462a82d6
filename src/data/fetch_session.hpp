// Incremental fetch sessions (KIP-227), one per broker. Pure: no Asio, no threads, no clock.
//
// The broker remembers, per session, the partitions it serves and the parameters last sent for
// each (fetch offset, max bytes, leader epoch...). A request then lists only the partitions that
// were added or whose parameters changed, plus `forgotten_topics_data` for those removed, and the
// answer lists only the partitions with news (records, a changed watermark, an error).
//
//   session_id  session_epoch   meaning
//   0           -1              full fetch, no session (also every request below Fetch v7)
//   0            0              full fetch, create a session (the broker answers its id, or 0
//                               when it will not keep one: the next request is full again)
//   id           0              close session `id` and create a new one (full fetch)
//   id          >0              incremental fetch in session `id`; the epoch grows by one per
//                               answered request (wrapping from INT32_MAX to 1)
//   id          -1              close session `id` (full fetch, no new session)
//
// Errors that reset the session (the next request is full, epoch 0): FETCH_SESSION_ID_NOT_FOUND
// (forget the id), INVALID_FETCH_SESSION_EPOCH and any other top-level error, a failed request
// (timeout, broken connection: the broker may or may not have applied it), and an answer naming a
// partition the session does not hold (the two views disagree).
//
// Order (fairness): the broker fills an answer in the order of its partition list and stops adding
// records once `max_bytes` is reached, so the partitions late in that order get nothing while the
// early ones have backlog. A full request therefore lists the partitions in a rotation order, not
// sorted: a partition whose answer carried record bytes moves to the end of the order, and one new
// to the order joins at the end (Java's consumer does the same with its assignment order). Within
// a session the broker keeps its own order and rotates it the same way (KIP-227), so an
// incremental request, which lists only added and changed partitions, needs no order of its own;
// it uses the same one, and answers to it rotate the order too, so a full request after a session
// reset carries on fairly. A topic whose partitions are not adjacent in the order appears more
// than once in the request's topic list, as in Java's requests.
//
// Use: fill() writes the partition lists of the next request from the complete set of partitions
// wanted from this broker; on_response() or on_request_failed() applies the outcome. At most one
// request per session is outstanding (the fetcher keeps one Fetch in flight per broker).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kgroup/types.hpp"
#include "protocol/messages.hpp"

namespace kgroup::data {

/// What one partition's entry in a Fetch request carries. A change in any field makes an
/// incremental request list the partition again.
struct partition_fetch {
  protocol::uuid topic_id{};  // zero when metadata has no topic ids
  std::int64_t fetch_offset = 0;
  std::int32_t current_leader_epoch = -1;  // from metadata; -1 unknown (Fetch v9+)
  std::int32_t max_bytes = 0;
  std::int64_t log_start_offset = -1;  // consumers send -1
  bool operator==(const partition_fetch&) const = default;
};

/// The complete set of partitions to fetch from one broker, with their parameters.
using fetch_set = std::map<TopicPartition, partition_fetch>;

/// The first Fetch version with sessions.
inline constexpr std::int16_t first_session_fetch_version = 7;

class fetch_session {
 public:
  using partition_data = protocol::fetch_response::fetchable_topic_response::partition_data;

  explicit fetch_session(std::int32_t node = -1) : node_(node) {}

  /// Writes session_id, session_epoch, topics and forgotten_topics_data of `req` for a request at
  /// `version` wanting exactly `wanted`. Afterwards the session assumes the broker holds `wanted`.
  void fill(protocol::fetch_request& req, std::int16_t version, const fetch_set& wanted);

  /// The outcome of a response.
  struct response_result {
    /// The top-level error (0 none). On an error the partitions are empty.
    std::int16_t error_code = 0;
    /// The partitions the response names that belong to the request, resolved to names (topic
    /// ids are resolved through the session's own partitions).
    std::vector<std::pair<TopicPartition, const partition_data*>> partitions;
    /// Partitions named by the response but unknown to the session (ignored; logged).
    std::size_t unknown_partitions = 0;
    std::string first_unknown;  // "topic-partition" of the first of them
  };
  /// Applies the answer to the last fill(). The pointers in the result point into `r`.
  response_result on_response(const protocol::fetch_response& r);

  /// The last request failed without an answer (connection error, timeout).
  void on_request_failed();

  /// Writes a request that closes the session (epoch -1, no partitions) and forgets it. Returns
  /// false (and writes nothing) when there is no session to close.
  bool close(protocol::fetch_request& req);

  std::int32_t id() const noexcept { return id_; }
  /// The epoch the next request will carry (0: full).
  std::int32_t next_epoch() const noexcept { return epoch_; }
  /// Whether the next request will be incremental.
  bool incremental() const noexcept { return id_ != 0 && epoch_ > 0; }
  /// The partitions the broker is assumed to hold (after the last fill()).
  const fetch_set& partitions() const noexcept { return partitions_; }

 private:
  void reset(bool forget_id, const char* why);
  /// The entries of `wanted` in rotation order; partitions new to the order join at its end (in
  /// (topic, partition) order) and partitions not in `wanted` leave it.
  std::vector<const fetch_set::value_type*> in_order(const fetch_set& wanted);

  std::int32_t node_;
  std::int32_t id_ = 0;     // 0: no session
  std::int32_t epoch_ = 0;  // the next request's epoch; 0 asks for a (new) session
  fetch_set partitions_;
  // Rotation order of the partitions of the last fill(): a lower rank is listed earlier. A
  // partition gets the next rank when it joins and again whenever an answer carries its records.
  std::map<TopicPartition, std::uint64_t> rank_;
  std::uint64_t next_rank_ = 0;
  bool pending_ = false;              // a fill() awaits its answer
  bool pending_full_ = true;          // ... and that request was a full one
  bool pending_sessionless_ = false;  // ... below Fetch v7
};

}  // namespace kgroup::data
