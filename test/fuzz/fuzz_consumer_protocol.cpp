// The consumer-protocol messages a misbehaving member or leader can send: the Subscription in
// JoinGroup metadata, the Assignment in SyncGroup, and the sticky assignors' user data inside a
// Subscription (src/assign/consumer_protocol.hpp, src/assign/sticky_user_data.hpp).
//
// Input: byte 0 selects the decoder (0 subscription, 1 assignment, 2 sticky user data; other
// values are rejected), the rest is what the decoder gets.
//
// Findings beyond memory errors and UB (each aborts):
//   - fields the decoder must leave alone (member_id, group_instance_id) changed;
//   - after an error, fields not reset to their defaults as documented;
//   - a decoded value that does not encode again (at its version, or at 3 for newer versions), or
//     whose encoding decodes to something else;
//   - for versions 0..3, a proper prefix of accepted input decoding without error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "assign/consumer_protocol.hpp"
#include "assign/sticky_user_data.hpp"
#include "fuzz_common.hpp"

using namespace kgroup;
using kgroup::fuzz::check;
using kgroup::fuzz::finding;

namespace {

bool same_fields(const MemberSubscription& a, const MemberSubscription& b) {
  return a.topics == b.topics && a.user_data == b.user_data && a.owned_partitions == b.owned_partitions &&
         a.generation == b.generation && a.rack == b.rack;
}

void subscription(std::span<const std::uint8_t> in) {
  MemberSubscription s;
  s.member_id = "member";
  s.group_instance_id = "instance";
  std::int16_t version = -100;
  const auto ec = assign::decode_subscription(in, s, &version);
  check(s.member_id == "member" && s.group_instance_id == "instance", "subscription: identity fields changed");
  if (ec) {
    check(same_fields(s, MemberSubscription{}), "subscription: fields not reset after an error");
    return;
  }
  // What a sticky leader does with another member's user data.
  (void)assign::interpret_user_data(s.user_data);

  const auto at = std::min(version, assign::subscription_version_max);
  protocol::bytes out;
  if (auto e = assign::encode_subscription(s, at, out)) finding("subscription: decoded value does not encode:", e.message().c_str());
  MemberSubscription again;
  if (auto e = assign::decode_subscription(out, again)) finding("subscription: re-encoded bytes do not decode:", e.message().c_str());
  check(same_fields(s, again), "subscription: round trip changed the value");

  if (version <= assign::subscription_version_max) {
    MemberSubscription scratch;
    check(static_cast<bool>(assign::decode_subscription(in.first(in.size() - 1), scratch)),
          "subscription: input cut by one byte decodes");
  }
}

void assignment(std::span<const std::uint8_t> in) {
  MemberAssignment a;
  a.member_id = "member";
  std::int16_t version = -100;
  const auto ec = assign::decode_assignment(in, a, &version);
  check(a.member_id == "member", "assignment: member_id changed");
  if (ec) {
    check(a.partitions.empty() && !a.user_data, "assignment: fields not reset after an error");
    return;
  }
  if (in.empty()) {
    check(a.partitions.empty() && !a.user_data, "assignment: empty input is not an empty assignment");
    return;
  }
  const auto at = std::min(version, assign::assignment_version_max);
  protocol::bytes out;
  if (auto e = assign::encode_assignment(a, at, out)) finding("assignment: decoded value does not encode:", e.message().c_str());
  MemberAssignment again;
  if (auto e = assign::decode_assignment(out, again)) finding("assignment: re-encoded bytes do not decode:", e.message().c_str());
  check(again.partitions == a.partitions && again.user_data == a.user_data, "assignment: round trip changed the value");

  // Cut to zero bytes is the (valid) empty assignment, so only cuts that keep a byte count.
  if (version <= assign::assignment_version_max && in.size() > 1) {
    MemberAssignment scratch;
    check(static_cast<bool>(assign::decode_assignment(in.first(in.size() - 1), scratch)),
          "assignment: input cut by one byte decodes");
  }
}

void sticky_user_data(std::span<const std::uint8_t> in) {
  (void)assign::interpret_user_data(std::vector<std::uint8_t>(in.begin(), in.end()));
  assign::sticky_user_data d;
  if (assign::decode_sticky_user_data(in, d)) {
    check(d == assign::sticky_user_data{}, "sticky user data: not reset after an error");
    return;
  }
  const auto out = assign::encode_sticky_user_data(d.partitions, d.generation);
  assign::sticky_user_data again;
  if (auto e = assign::decode_sticky_user_data(out, again)) finding("sticky user data: re-encoded bytes do not decode:", e.message().c_str());
  check(again == d, "sticky user data: round trip changed the value");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return -1;
  const std::span<const std::uint8_t> in(data + 1, size - 1);
  switch (data[0]) {
    case 0: subscription(in); return 0;
    case 1: assignment(in); return 0;
    case 2: sticky_user_data(in); return 0;
    default: return -1;
  }
}
