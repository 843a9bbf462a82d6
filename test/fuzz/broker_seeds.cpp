// Writes the seed corpus of kgroup-fuzz-broker (test/fuzz/corpus/broker): whole conversations of
// a well-behaved broker (and a few that refuse or misbehave once), so fuzzing starts past the
// handshakes, inside SCRAM's second round and in the Fetch answers. The messages are encoded with
// kgroup's own codec; the SCRAM server-final carries the real server signature for the target's
// fixed password and client nonce. Layout of each file: fuzz_broker.cpp's header.
//
//   cmake --build build-fuzz --target kgroup-fuzz-broker-seeds
//   build-fuzz/test/fuzz/kgroup-fuzz-broker-seeds test/fuzz/corpus/broker
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/base64.hpp"
#include "protocol/headers.hpp"
#include "protocol/messages.hpp"
#include "protocol/records.hpp"
#include "security/scram.hpp"

using namespace kgroup;
using protocol::bytes;

namespace {

const std::string password = "fuzz-pass-word";     // as in fuzz_broker.cpp
const std::string client_nonce = "fuzzclientnonce";  // as in fuzz_broker.cpp

// Config byte 0 (fuzz_broker.cpp).
enum : std::uint8_t { plain = 0, scram512 = 1, oauth = 2, scram256 = 3, read_committed = 4, topic_ids = 8, reauth = 16 };

class conversation {
 public:
  conversation(std::uint8_t flags, std::uint8_t budgets, std::uint8_t max_records, std::uint8_t committed)
      : out_{flags, budgets, max_records, committed} {}

  // One response frame: size, correlation id, header tagged fields (flexible), body.
  template <class Message>
  void answer(const Message& m, std::int16_t version, bool flexible_header) {
    bytes frame;
    protocol::writer w(frame);
    w.write_int32(0);
    w.write_int32(corr_++);
    if (flexible_header) frame.push_back(0);  // no tagged fields
    if (protocol::encode(m, version, frame)) {
      std::fprintf(stderr, "cannot encode %s v%d\n", Message::name, version);
      std::exit(1);
    }
    w.patch_int32(0, static_cast<std::int32_t>(frame.size() - 4));
    out_.insert(out_.end(), frame.begin(), frame.end());
  }
  std::int16_t auth_version = 2;  // SaslAuthenticate's, from the ranges the broker announced
  void write(const std::string& dir, const char* name) const {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(out_.data()), static_cast<std::streamsize>(out_.size()));
  }

 private:
  bytes out_;
  std::int32_t corr_ = 1;
};

protocol::api_versions_response versions(std::int16_t fetch_max, std::int16_t auth_max = 2) {
  protocol::api_versions_response r;
  r.api_keys = {{18, 0, 4}, {17, 0, 1}, {36, 0, auth_max}, {1, 4, fetch_max}};
  return r;
}

void api_versions(conversation& c, std::int16_t fetch_max, std::int16_t auth_max = 2) {
  c.auth_version = auth_max;
  c.answer(versions(fetch_max, auth_max), 4, false);  // ApiVersions: header v0 always
}

void handshake(conversation& c, const char* mechanism) {
  protocol::sasl_handshake_response r;
  r.mechanisms = {mechanism};
  c.answer(r, 1, false);
}

void authenticated(conversation& c, const std::string& auth_bytes, std::int64_t lifetime = 0) {
  protocol::sasl_authenticate_response r;
  r.auth_bytes.assign(auth_bytes.begin(), auth_bytes.end());
  r.session_lifetime_ms = lifetime;
  c.answer(r, c.auth_version, c.auth_version >= 2);
}

bytes hmac(const EVP_MD* md, const bytes& key, const std::string& data) {
  unsigned int len = 0;
  bytes out(EVP_MAX_MD_SIZE);
  HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out.data(), &len);
  out.resize(len);
  return out;
}

// The two SCRAM answers: server-first, then a server-final with the right signature.
void scram(conversation& c, bool sha512, std::int64_t lifetime = 0) {
  const EVP_MD* md = sha512 ? EVP_sha512() : EVP_sha256();
  const std::string server_first = "r=" + client_nonce + "servernonce,s=c2FsdHNhbHQ=,i=4096";
  security::scram_client client(sha512 ? security::scram_hash::sha512 : security::scram_hash::sha256, "user",
                                password, client_nonce);
  const std::string client_first = client.client_first();
  std::string client_final, error;
  if (!client.client_final(server_first, client_final, error)) {
    std::fprintf(stderr, "scram: %s\n", error.c_str());
    std::exit(1);
  }
  bytes salted(static_cast<std::size_t>(EVP_MD_get_size(md)));
  const std::string salt = "saltsalt";
  PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                    reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()), 4096, md,
                    static_cast<int>(salted.size()), salted.data());
  const std::string auth_message =
      client_first.substr(3) + "," + server_first + "," + client_final.substr(0, client_final.find(",p="));
  const bytes server_key = hmac(md, salted, "Server Key");
  const bytes signature = hmac(md, server_key, auth_message);
  authenticated(c, server_first);
  authenticated(c, "v=" + base::base64_encode(signature), lifetime);
}

// A magic-2 batch of `n` records from `base`.
bytes batch(std::int64_t base, int n, protocol::compression codec = protocol::compression::none,
            bool transactional = false, std::int64_t producer = -1) {
  static const std::string key = "key", value = "value-value-value-value", hkey = "h";
  const auto kb = protocol::byte_view(reinterpret_cast<const std::uint8_t*>(key.data()), key.size());
  const auto vb = protocol::byte_view(reinterpret_cast<const std::uint8_t*>(value.data()), value.size());
  const protocol::header_input headers[] = {{hkey, vb}};
  std::vector<protocol::record_input> records(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    records[static_cast<std::size_t>(i)].key = kb;
    records[static_cast<std::size_t>(i)].value = vb;
    records[static_cast<std::size_t>(i)].timestamp = 1700000000000 + i;
    if (i == 0) records[0].headers = headers;
  }
  protocol::batch_encode_options o;
  o.codec = codec;
  o.base_offset = base;
  o.partition_leader_epoch = 3;
  o.transactional = transactional;
  o.producer_id = producer;
  o.producer_epoch = producer >= 0 ? 0 : -1;
  bytes out;
  if (protocol::encode_record_batch(records, o, out)) std::exit(1);
  return out;
}

// An abort marker of `producer` at `offset`.
bytes abort_marker(std::int64_t offset, std::int64_t producer) {
  static const std::uint8_t key[] = {0, 0, 0, 0};           // version 0, type 0 (abort)
  static const std::uint8_t value[] = {0, 0, 0, 0, 0, 0};   // version 0, coordinator epoch 0
  protocol::record_input r;
  r.key = protocol::byte_view(key);
  r.value = protocol::byte_view(value);
  protocol::batch_encode_options o;
  o.base_offset = offset;
  o.transactional = true;
  o.control = true;
  o.producer_id = producer;
  o.producer_epoch = 0;
  bytes out;
  if (protocol::encode_record_batch(std::span(&r, 1), o, out)) std::exit(1);
  return out;
}

using fetch_response = protocol::fetch_response;
using topic_response = fetch_response::fetchable_topic_response;
using partition_data = topic_response::partition_data;

partition_data partition(std::int32_t index, const bytes& records, std::int64_t hw) {
  partition_data p;
  p.partition_index = index;
  p.high_watermark = hw;
  p.last_stable_offset = hw;
  p.log_start_offset = 0;
  p.records = protocol::records_view{records};
  return p;
}

// Topic entries named as the request named them: by name below v13, by id (t0: ...01, t1: ...02) from v13.
topic_response topic(const char* name, std::int16_t version, std::vector<partition_data> parts) {
  topic_response t;
  if (version >= 13) {
    t.topic_id.bytes[15] = name[1] == '0' ? 1 : 2;
  } else {
    t.topic = name;
  }
  t.partitions = std::move(parts);
  return t;
}

void fetch(conversation& c, std::int16_t version, fetch_response r, std::int32_t session = 7) {
  r.session_id = version >= 7 ? session : 0;
  c.answer(r, version, version >= 12);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const bytes t0p0 = batch(0, 3), t0p1 = batch(0, 2, protocol::compression::zstd), t1p0 = batch(0, 4, protocol::compression::gzip);

  {  // PLAIN, Fetch v12 (the last version naming topics without ids known), two rounds.
    conversation c(plain, 0x3a, 9, 0);
    api_versions(c, 12);
    handshake(c, "PLAIN");
    authenticated(c, "");
    fetch_response r;
    r.responses = {topic("t0", 12, {partition(0, t0p0, 3), partition(1, t0p1, 2)}), topic("t1", 12, {partition(0, t1p0, 4)})};
    fetch(c, 12, r);
    fetch_response empty;  // the incremental answer: nothing new
    fetch(c, 12, empty);
    c.write(dir, "plain_fetch_v12");
  }
  {  // SCRAM-SHA-512 with a valid signature, topic ids, Fetch v17; lz4 and snappy batches.
    conversation c(scram512 | topic_ids, 0x14, 1, 0);
    api_versions(c, 17);
    handshake(c, "SCRAM-SHA-512");
    scram(c, true);
    const bytes a = batch(0, 5, protocol::compression::lz4), b = batch(0, 2, protocol::compression::snappy);
    fetch_response r;
    r.responses = {topic("t0", 17, {partition(0, a, 5), partition(1, b, 2)})};
    fetch(c, 17, r);
    c.write(dir, "scram512_fetch_v17_ids");
  }
  {  // SCRAM-SHA-256, a session lifetime and re-authentication after the first Fetch; v4 (no sessions).
    conversation c(scram256 | reauth, 0x00, 255, 0);
    api_versions(c, 4, 1);
    handshake(c, "SCRAM-SHA-256");
    scram(c, false, 3600000);
    fetch_response r;
    r.responses = {topic("t1", 4, {partition(0, t1p0, 4)})};
    fetch(c, 4, r);
    handshake(c, "SCRAM-SHA-256");
    scram(c, false, 3600000);
    fetch(c, 4, fetch_response{});
    c.write(dir, "scram256_reauth_fetch_v4");
  }
  {  // OAUTHBEARER, read_committed: an aborted transaction and its marker, then committed data.
    conversation c(oauth | read_committed, 0x25, 31, 0);
    api_versions(c, 11, 1);
    handshake(c, "OAUTHBEARER");
    protocol::sasl_authenticate_response ok;
    ok.session_lifetime_ms = 60000;
    c.answer(ok, 1, false);
    bytes data = batch(0, 2, protocol::compression::none, true, 42);
    const bytes marker = abort_marker(2, 42), rest = batch(3, 2);
    data.insert(data.end(), marker.begin(), marker.end());
    data.insert(data.end(), rest.begin(), rest.end());
    partition_data p = partition(0, data, 5);
    p.aborted_transactions = std::vector<partition_data::aborted_transaction>{{42, 0}};
    fetch_response r;
    r.responses = {topic("t0", 11, {p})};
    fetch(c, 11, r);
    c.write(dir, "oauth_read_committed_fetch_v11");
  }
  {  // ApiVersions v4 refused (UNSUPPORTED_VERSION with the broker's range, v0 layout), then v3.
    conversation c(plain, 0x00, 9, 0);
    protocol::api_versions_response refused;
    refused.error_code = 35;
    refused.api_keys = {{18, 0, 3}};
    c.answer(refused, 0, false);
    c.answer(versions(12), 3, false);
    handshake(c, "PLAIN");
    authenticated(c, "");
    fetch_response r;
    r.responses = {topic("t0", 12, {partition(0, t0p0, 3)})};
    fetch(c, 12, r);
    c.write(dir, "api_versions_retry");
  }
  {  // A Fetch answer naming a partition outside the session (dropped whole), then a good one.
    conversation c(plain, 0x00, 9, 0);
    api_versions(c, 12);
    handshake(c, "PLAIN");
    authenticated(c, "");
    fetch_response bad;
    bad.responses = {topic("t0", 12, {partition(0, t0p0, 3), partition(7, t0p0, 3)})};
    fetch(c, 12, bad);
    fetch_response r;
    r.responses = {topic("t0", 12, {partition(0, t0p0, 3)})};
    fetch(c, 12, r);
    c.write(dir, "fetch_outside_session");
  }
  {  // The log ends below the position (OFFSET_OUT_OF_RANGE, high watermark 2 < 5), a legacy message set.
    conversation c(plain, 0x00, 9, 5);
    api_versions(c, 12);
    handshake(c, "PLAIN");
    authenticated(c, "");
    partition_data cut = partition(0, {}, 2);
    cut.error_code = 1;
    cut.records.reset();
    static const std::string v = "legacy";
    const protocol::legacy_message_input m[] = {
        {5, 1700000000000, std::nullopt, protocol::byte_view(reinterpret_cast<const std::uint8_t*>(v.data()), v.size())},
        {6, 1700000000001, std::nullopt, protocol::byte_view(reinterpret_cast<const std::uint8_t*>(v.data()), v.size())}};
    bytes legacy;
    if (protocol::encode_legacy_message_set(m, protocol::legacy_encode_options{}, legacy)) return 1;
    fetch_response r;
    r.responses = {topic("t0", 12, {cut, partition(1, legacy, 7)})};
    fetch(c, 12, r);
    c.write(dir, "fetch_log_end_legacy");
  }
  {  // SCRAM refused: the server asks for too many iterations (the client must refuse at once).
    conversation c(scram512, 0x00, 9, 0);
    api_versions(c, 12);
    handshake(c, "SCRAM-SHA-512");
    authenticated(c, "r=" + client_nonce + "servernonce,s=c2FsdHNhbHQ=,i=2147483647");
    c.write(dir, "scram_iterations_refused");
  }
  {  // The broker refuses the mechanism.
    conversation c(oauth, 0x00, 9, 0);
    api_versions(c, 12);
    protocol::sasl_handshake_response r;
    r.error_code = 33;
    r.mechanisms = {"PLAIN", "SCRAM-SHA-256"};
    c.answer(r, 1, false);
    c.write(dir, "handshake_refused");
  }
  return 0;
}
