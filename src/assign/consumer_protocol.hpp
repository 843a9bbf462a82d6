// Between the public assignor types and the consumer protocol's embedded messages: the
// Subscription a member puts in JoinGroup's protocol metadata and the Assignment the leader puts in
// SyncGroup. On the wire both are an int16 version followed by the message body.
//
// Versions: a member encodes its subscription at 0..3 (the group core picks the version; fields a
// version cannot carry, such as the rack below v3, are left out). Decoding accepts 0..3 exactly
// (trailing bytes are an error) and any newer version by reading the v3 fields and ignoring what
// follows, as Kafka's compatibility rule asks (newer versions only append fields). A negative
// version, a truncated body or a bad length is an error: bytes from a misbehaving member or leader
// never crash and never allocate more than their own size.
#pragma once

#include <cstdint>
#include <span>
#include <system_error>
#include <vector>

#include "kgroup/assignor.hpp"
#include "protocol/messages.hpp"

namespace kgroup::assign {

inline constexpr std::int16_t subscription_version_max = 3;
inline constexpr std::int16_t assignment_version_max = 3;

/// Message fields of a member's subscription (member_id and group_instance_id are not in it).
protocol::consumer_protocol_subscription to_message(const MemberSubscription& s);
/// Fills the subscription fields of `out` from `m`; leaves member_id and group_instance_id alone.
void from_message(protocol::consumer_protocol_subscription&& m, MemberSubscription& out);
protocol::consumer_protocol_assignment to_message(const MemberAssignment& a);
/// Fills partitions and user_data of `out`; leaves member_id alone.
void from_message(protocol::consumer_protocol_assignment&& m, MemberAssignment& out);

/// Appends version + body. Errors: codec_errc::unsupported_version outside 0..3.
std::error_code encode_subscription(const MemberSubscription& s, std::int16_t version, protocol::bytes& out);
/// Decodes version + body into the subscription fields of `out` (member_id and group_instance_id
/// untouched). On error those fields are reset to their defaults. `version`, if given, receives the
/// version read.
std::error_code decode_subscription(std::span<const std::uint8_t> in, MemberSubscription& out,
                                    std::int16_t* version = nullptr);

/// Appends version + body. Errors: codec_errc::unsupported_version outside 0..3.
std::error_code encode_assignment(const MemberAssignment& a, std::int16_t version, protocol::bytes& out);
/// Decodes version + body into partitions and user_data of `out`. Empty input is an empty
/// assignment (what SyncGroup gives a member the leader left out), not an error.
std::error_code decode_assignment(std::span<const std::uint8_t> in, MemberAssignment& out,
                                  std::int16_t* version = nullptr);

}  // namespace kgroup::assign
