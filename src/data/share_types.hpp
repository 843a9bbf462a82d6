// The vocabulary of the share-group data cores (KIP-932): acknowledgement types, one batch of
// acknowledgements as both ShareFetch and ShareAcknowledge carry it, and the cores' own errors.
// Pure values; the cores are data/share_session.hpp (one per broker) and data/share_acks.hpp (one
// per member).
#pragma once

#include <cstdint>
#include <system_error>
#include <vector>

namespace kgroup::data::share {

/// The types of AcknowledgementBatch.AcknowledgeTypes.
enum class ack_type : std::int8_t {
  gap = 0,      // an acquired offset with no data record (compacted, control record); client-only
  accept = 1,   // processed: archived
  release = 2,  // available again; its delivery count goes up at the next acquisition
  reject = 3,   // unprocessable: archived
  renew = 4,    // keep the record acquired, restart its lock (ShareFetch/ShareAcknowledge v2)
};

/// Whether `t` is one of the types above.
constexpr bool valid_ack_type(std::int8_t t) noexcept {
  return t >= 0 && t <= 4;
}

/// One AcknowledgementBatch: offsets first..last (inclusive) with one type for the whole range
/// (`types.size() == 1`) or one per offset (`types.size() == last - first + 1`).
struct ack_batch {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::vector<std::int8_t> types;
  bool operator==(const ack_batch&) const = default;
};

/// Errors of the share data cores, in share_category() ("kgroup.share"). None is a Kafka error
/// code: those travel as kafka_errc. The facade maps them to the public client_errc values.
enum class share_errc {
  /// A request to this broker is outstanding: ShareFetch and ShareAcknowledge share the session
  /// epoch, so one at a time.
  request_in_flight = 1,
  /// The session is at epoch 0 (new or reset): a request that opens a session cannot carry
  /// acknowledgements, and a ShareAcknowledge cannot open one. The records they acknowledge were
  /// acquired in a session that is gone.
  no_session,
  /// RENEW needs ShareFetch/ShareAcknowledge v2.
  renew_not_supported,
  /// An acknowledgement type outside 1..4 (GAP is the client's own).
  invalid_ack_type,
  /// The offset is not acquired by this member (never delivered, or its outcome is known).
  not_acquired,
  /// The record is acquired but the application has not been given it yet (poll).
  not_delivered,
  /// The record was acknowledged already.
  already_acknowledged,
  /// A ShareFetch answer's AcquiredRecords are malformed (last < first, a negative offset,
  /// overlapping ranges): nothing of the partition is delivered; the broker's locks expire and
  /// the records become available again.
  malformed_acquired_records,
  /// The answer does not name a partition whose acknowledgements the request carried: their
  /// outcome is unknown.
  acknowledgement_unanswered,
  /// An answer without an outstanding request.
  unexpected_answer,
  /// A ShareAcknowledge with no acknowledgements (and not a close): no request is needed.
  nothing_to_send,
};

const std::error_category& share_category() noexcept;
inline std::error_code make_error_code(share_errc e) noexcept {
  return {static_cast<int>(e), share_category()};
}

}  // namespace kgroup::data::share

template <>
struct std::is_error_code_enum<kgroup::data::share::share_errc> : std::true_type {};
