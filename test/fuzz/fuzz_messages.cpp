// Every Kafka response decoder of src/protocol/messages.hpp (and, with the top bit of the first
// byte set, the request decoders too: the same generated code, exercised by the tests' fake
// brokers).
//
// Input: byte 0 = api key (bit 7: request instead of response), byte 1 = version, the rest is the
// message body. A selector naming no message or a version outside the supported range is rejected.
//
// Findings beyond memory errors and UB (each aborts):
//   - a decoded value that cannot be encoded again at the same version;
//   - re-encoded bytes that do not decode, or decode to a different value;
//   - a proper prefix of an accepted body, or the body plus one byte, decoding without error.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_common.hpp"
#include "protocol/messages.hpp"

using namespace kgroup::protocol;

namespace {

template <class M>
int run(std::span<const std::uint8_t> body, std::int16_t version) {
  if (version < M::lowest_version || version > M::highest_version) return -1;
  const std::string what = std::string(M::name) + " v" + std::to_string(version);
  M m;
  if (decode(body, version, m)) return 0;

  bytes encoded;
  if (auto ec = encode(m, version, encoded)) kgroup::fuzz::finding("decoded value does not encode:", (what + ": " + ec.message()).c_str());
  M again;
  if (auto ec = decode(encoded, version, again)) kgroup::fuzz::finding("re-encoded bytes do not decode:", (what + ": " + ec.message()).c_str());
  kgroup::fuzz::check(again == m, "round trip changed the value:", what.c_str());

  // Decoding reads left to right and must consume everything, so a cut body is always an error
  // and one more byte is always trailing.
  M scratch;
  if (!body.empty()) {
    kgroup::fuzz::check(static_cast<bool>(decode(body.first(body.size() - 1), version, scratch)),
                        "a body cut by one byte decodes:", what.c_str());
    kgroup::fuzz::check(static_cast<bool>(decode(body.first(body.size() / 2), version, scratch)),
                        "half a body decodes:", what.c_str());
  }
  bytes longer(body.begin(), body.end());
  longer.push_back(0);
  kgroup::fuzz::check(static_cast<bool>(decode(longer, version, scratch)), "a body with a trailing byte decodes:",
                      what.c_str());
  return 0;
}

template <class... Ms>
struct message_list {};

using responses = message_list<api_versions_response, metadata_response, find_coordinator_response,
                               join_group_response, sync_group_response, heartbeat_response,
                               leave_group_response, offset_commit_response, offset_fetch_response,
                               list_offsets_response, fetch_response, offset_for_leader_epoch_response,
                               describe_groups_response, share_fetch_response, share_acknowledge_response>;
using requests =
    message_list<api_versions_request, metadata_request, find_coordinator_request, join_group_request,
                 sync_group_request, heartbeat_request, leave_group_request, offset_commit_request,
                 offset_fetch_request, list_offsets_request, fetch_request, offset_for_leader_epoch_request,
                 describe_groups_request, share_fetch_request, share_acknowledge_request>;

template <class... Ms>
int dispatch(message_list<Ms...>, int api_key, std::int16_t version, std::span<const std::uint8_t> body) {
  int rc = -1;
  (void)((Ms::api_key == api_key ? (rc = run<Ms>(body, version), true) : false) || ...);
  return rc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return -1;
  const int api_key = data[0] & 0x7f;
  const bool request = (data[0] & 0x80) != 0;
  const auto version = static_cast<std::int16_t>(data[1]);
  const std::span<const std::uint8_t> body(data + 2, size - 2);
  return request ? dispatch(requests{}, api_key, version, body) : dispatch(responses{}, api_key, version, body);
}
