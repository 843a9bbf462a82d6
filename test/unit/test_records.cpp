// Record batches (magic 2) and legacy message sets (magic 0/1): literal vectors from the format
// description, encoder round trips, truncation, corruption and hostile lengths.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/crc32c.hpp"
#include "protocol/records.hpp"

using namespace kgroup::protocol;

namespace {

bytes to_bytes(std::string_view s) { return bytes(s.begin(), s.end()); }
byte_view view(std::string_view s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }
std::string to_string(byte_view v) { return std::string(v.begin(), v.end()); }
std::optional<std::string> to_opt_string(const nullable_byte_view& v) {
  if (!v) return std::nullopt;
  return to_string(*v);
}

// Independent test-side writers: big-endian integers and a bitwise CRC-32 (IEEE, as zlib's), so the
// hand-built legacy messages share no code with the library.
void put_be(bytes& b, std::uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
std::uint32_t crc32_ieee(byte_view data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::uint8_t x : data) {
    c ^= x;
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}
void set_be32(bytes& b, std::size_t at, std::uint32_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 24);
  b[at + 1] = static_cast<std::uint8_t>(v >> 16);
  b[at + 2] = static_cast<std::uint8_t>(v >> 8);
  b[at + 3] = static_cast<std::uint8_t>(v);
}

// Appends a legacy message built by hand: offset, size, crc, magic, attributes, [timestamp], key, value.
void put_legacy(bytes& out, std::int64_t offset, std::int8_t magic, std::int8_t attributes, std::int64_t timestamp,
                const std::optional<bytes>& key, const std::optional<bytes>& value) {
  bytes body;
  put_be(body, 0, 4);  // crc placeholder
  body.push_back(static_cast<std::uint8_t>(magic));
  body.push_back(static_cast<std::uint8_t>(attributes));
  if (magic == 1) put_be(body, static_cast<std::uint64_t>(timestamp), 8);
  for (const auto* v : {&key, &value}) {
    if (!*v) {
      put_be(body, 0xFFFFFFFFu, 4);
    } else {
      put_be(body, (*v)->size(), 4);
      body.insert(body.end(), (*v)->begin(), (*v)->end());
    }
  }
  set_be32(body, 0, crc32_ieee(byte_view(body).subspan(4)));
  put_be(out, static_cast<std::uint64_t>(offset), 8);
  put_be(out, body.size(), 4);
  out.insert(out.end(), body.begin(), body.end());
}

// Recomputes the CRC-32C of a magic-2 batch at `at` (after a test edits it on purpose).
void fix_v2_crc(bytes& b, std::size_t at = 0) {
  set_be32(b, at + 17, crc32c(byte_view(b).subspan(at + 21)));
}

struct decoded_record {
  std::int64_t offset = 0;
  std::int64_t timestamp = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

struct decoded {
  std::vector<record_batch_header> batches;
  std::vector<decoded_record> records;
  std::error_code error;
  bool partial = false;
  std::size_t consumed = 0;
};

decoded decode_all(byte_view data, decode_options opts = {}) {
  decoded d;
  batch_reader reader(data, opts);
  record_batch batch;
  record rec;
  while (reader.next(batch)) {
    d.batches.push_back(batch.header());
    auto it = batch.records();
    while (it.next(rec)) {
      decoded_record r{rec.offset, rec.timestamp, to_opt_string(rec.key), to_opt_string(rec.value), {}};
      for (const record_header& h : rec.headers) r.headers.emplace_back(std::string(h.key), to_opt_string(h.value));
      CHECK(r.headers.size() == rec.headers.size());
      d.records.push_back(std::move(r));
    }
    if (it.error()) {
      d.error = it.error();
      break;
    }
  }
  if (!d.error) d.error = reader.error();
  d.partial = reader.partial();
  d.consumed = reader.consumed();
  return d;
}

// Inputs with storage for the views record_input holds.
struct test_record {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::int64_t timestamp = 0;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
  std::optional<std::int32_t> offset_delta;
};

bytes encode(const std::vector<test_record>& recs, const batch_encode_options& opts) {
  std::vector<std::vector<header_input>> header_storage;
  std::vector<record_input> inputs;
  header_storage.reserve(recs.size());
  for (const auto& r : recs) {
    auto& hs = header_storage.emplace_back();
    for (const auto& [k, v] : r.headers) {
      hs.push_back({k, v ? nullable_byte_view(view(*v)) : std::nullopt});
    }
    record_input in;
    if (r.key) in.key = view(*r.key);
    if (r.value) in.value = view(*r.value);
    in.timestamp = r.timestamp;
    in.headers = hs;
    in.offset_delta = r.offset_delta;
    inputs.push_back(in);
  }
  bytes out;
  REQUIRE_FALSE(encode_record_batch(inputs, opts, out));
  return out;
}

std::vector<test_record> sample_records() {
  return {
      {"key-0", "value-0", 1000, {{"h1", "x"}, {"h2", std::nullopt}}, std::nullopt},
      {std::nullopt, "only a value", 1005, {}, std::nullopt},
      {"tombstone", std::nullopt, 999, {}, std::nullopt},
      {"", "", 1001, {{"", ""}}, std::nullopt},
  };
}

std::vector<test_record> many_records(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<test_record> v;
  for (int i = 0; i < n; ++i) {
    test_record r;
    if (rng() % 5 != 0) r.key = "key-" + std::to_string(rng() % 100);
    if (rng() % 7 != 0) r.value = std::string(rng() % 300, static_cast<char>('a' + rng() % 26));
    r.timestamp = 1'700'000'000'000 + static_cast<std::int64_t>(rng() % 100'000) - 50'000;
    for (std::uint32_t h = rng() % 3; h > 0; --h) {
      r.headers.emplace_back("hdr" + std::to_string(h), rng() % 2 ? std::optional<std::string>("val")
                                                                  : std::nullopt);
    }
    v.push_back(std::move(r));
  }
  return v;
}

void check_records_equal(const std::vector<decoded_record>& got, const std::vector<test_record>& want,
                         std::int64_t base_offset) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("record " << i);
    CHECK(got[i].offset == base_offset + want[i].offset_delta.value_or(static_cast<std::int32_t>(i)));
    CHECK(got[i].timestamp == want[i].timestamp);
    CHECK(got[i].key == want[i].key);
    CHECK(got[i].value == want[i].value);
    CHECK(got[i].headers == want[i].headers);
  }
}

const compression all_codecs[] = {compression::none, compression::gzip, compression::snappy, compression::lz4,
                                  compression::zstd};

// The magic-2 batch of the literal test, written out from the format description (CRC-32C computed
// independently with a bitwise implementation).
const bytes literal_v2_batch = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,  // base offset 5
    0x00, 0x00, 0x00, 0x46,                          // batch length 70
    0x00, 0x00, 0x00, 0x03,                          // partition leader epoch 3
    0x02,                                            // magic 2
    0xAD, 0x5C, 0xF1, 0xCD,                          // CRC-32C of the rest
    0x00, 0x00,                                      // attributes: none, create time
    0x00, 0x00, 0x00, 0x01,                          // last offset delta 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xE8,  // base timestamp 1000
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x14,  // max timestamp 1300
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,  // producer id 7
    0x00, 0x01,                                      // producer epoch 1
    0x00, 0x00, 0x00, 0x00,                          // base sequence 0
    0x00, 0x00, 0x00, 0x02,                          // record count 2
    // record 0: length 12, attributes 0, timestamp delta 0, offset delta 0, key "k",
    // value "v1", 1 header: key "h", value null
    0x18, 0x00, 0x00, 0x00, 0x02, 'k', 0x04, 'v', '1', 0x02, 0x02, 'h', 0x01,
    // record 1: length 7, attributes 0, timestamp delta 300 (zigzag 600), offset delta 1,
    // key null, value empty, no headers
    0x0E, 0x00, 0xD8, 0x04, 0x02, 0x01, 0x00, 0x00,
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Literal vectors

TEST_CASE("records: literal magic-2 batch decoded field by field", "[records]") {
  REQUIRE(literal_v2_batch.size() == 82);
  batch_reader reader(literal_v2_batch);
  record_batch batch;
  REQUIRE(reader.next(batch));
  const record_batch_header& h = batch.header();
  CHECK(h.base_offset == 5);
  CHECK(h.batch_length == 70);
  CHECK(h.partition_leader_epoch == 3);
  CHECK(h.magic == 2);
  CHECK(h.crc == 0xAD5CF1CDu);
  CHECK(h.attributes == 0);
  CHECK(h.codec() == compression::none);
  CHECK(h.ts_type() == timestamp_type::create_time);
  CHECK_FALSE(h.is_transactional());
  CHECK_FALSE(h.is_control());
  CHECK(h.last_offset_delta == 1);
  CHECK(h.last_offset() == 6);
  CHECK(h.next_offset() == 7);
  CHECK(h.base_timestamp == 1000);
  CHECK(h.max_timestamp == 1300);
  CHECK(h.producer_id == 7);
  CHECK(h.producer_epoch == 1);
  CHECK(h.base_sequence == 0);
  CHECK(h.record_count == 2);
  CHECK(batch.raw().data() == literal_v2_batch.data());
  CHECK(batch.raw().size() == 82);

  auto it = batch.records();
  CHECK(it.remaining() == 2);
  record r;
  REQUIRE(it.next(r));
  CHECK(r.offset == 5);
  CHECK(r.timestamp == 1000);
  CHECK(r.attributes == 0);
  REQUIRE(r.key);
  CHECK(to_string(*r.key) == "k");
  REQUIRE(r.value);
  CHECK(to_string(*r.value) == "v1");
  REQUIRE(r.headers.size() == 1);
  CHECK(r.headers.begin()->key == "h");
  CHECK_FALSE(r.headers.begin()->value.has_value());
  // Zero copy: the views point into the input.
  CHECK(r.key->data() == literal_v2_batch.data() + 66);
  CHECK(r.value->data() == literal_v2_batch.data() + 68);

  REQUIRE(it.next(r));
  CHECK(r.offset == 6);
  CHECK(r.timestamp == 1300);
  CHECK_FALSE(r.key.has_value());
  REQUIRE(r.value.has_value());
  CHECK(r.value->empty());
  CHECK(r.headers.empty());
  CHECK(r.headers.begin() == r.headers.end());

  CHECK_FALSE(it.next(r));
  CHECK_FALSE(it.error());
  CHECK_FALSE(reader.next(batch));
  CHECK_FALSE(reader.error());
  CHECK_FALSE(reader.partial());
  CHECK(reader.done());
  CHECK(reader.consumed() == 82);
}

TEST_CASE("records: literal legacy magic-1 and magic-0 messages", "[records][legacy]") {
  const bytes data = {
      // magic 1: offset 42, size 25, crc, magic 1, attributes 0, timestamp 1234, key "k", value "vv"
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2A, 0x00, 0x00, 0x00, 0x19, 0x28, 0x7C, 0x41, 0x66,
      0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xD2, 0x00, 0x00, 0x00, 0x01, 'k',
      0x00, 0x00, 0x00, 0x02, 'v', 'v',
      // magic 0: offset 43, size 17, crc, magic 0, attributes 0, key null, value "abc"
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2B, 0x00, 0x00, 0x00, 0x11, 0x43, 0xDC, 0x3F, 0xAF,
      0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x03, 'a', 'b', 'c'};
  auto d = decode_all(data);
  REQUIRE_FALSE(d.error);
  CHECK_FALSE(d.partial);
  CHECK(d.consumed == data.size());
  REQUIRE(d.batches.size() == 2);
  CHECK(d.batches[0].magic == 1);
  CHECK(d.batches[0].base_offset == 42);
  CHECK(d.batches[0].crc == 0x287C4166u);
  CHECK(d.batches[0].batch_length == 25);
  CHECK(d.batches[0].record_count == 1);
  CHECK(d.batches[0].ts_type() == timestamp_type::create_time);
  CHECK(d.batches[0].producer_id == -1);
  CHECK(d.batches[0].partition_leader_epoch == -1);
  CHECK(d.batches[1].magic == 0);
  CHECK(d.batches[1].ts_type() == timestamp_type::none);
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[0].offset == 42);
  CHECK(d.records[0].timestamp == 1234);
  CHECK(d.records[0].key == "k");
  CHECK(d.records[0].value == "vv");
  CHECK(d.records[1].offset == 43);
  CHECK(d.records[1].timestamp == -1);
  CHECK_FALSE(d.records[1].key.has_value());
  CHECK(d.records[1].value == "abc");

  // Our encoder produces the same bytes for the same messages.
  bytes enc;
  const legacy_message_input m1{42, 1234, view("k"), view("vv")};
  REQUIRE_FALSE(encode_legacy_message_set(
      {&m1, 1}, {1, compression::none, timestamp_type::create_time, -1, std::nullopt}, enc));
  const legacy_message_input m0{43, -1, std::nullopt, view("abc")};
  REQUIRE_FALSE(encode_legacy_message_set(
      {&m0, 1}, {0, compression::none, timestamp_type::create_time, -1, std::nullopt}, enc));
  CHECK(enc == data);
}

TEST_CASE("records: encoder reproduces the literal batch", "[records]") {
  const std::vector<test_record> recs = {
      {"k", "v1", 1000, {{"h", std::nullopt}}, std::nullopt},
      {std::nullopt, "", 1300, {}, std::nullopt},
  };
  batch_encode_options opts;
  opts.base_offset = 5;
  opts.partition_leader_epoch = 3;
  opts.producer_id = 7;
  opts.producer_epoch = 1;
  opts.base_sequence = 0;
  CHECK(encode(recs, opts) == literal_v2_batch);
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST_CASE("records: round trip with nulls and headers for every codec", "[records]") {
  const auto recs = sample_records();
  for (compression codec : all_codecs) {
    INFO(to_string(codec));
    batch_encode_options opts;
    opts.codec = codec;
    opts.base_offset = 1'000'000'000'000;
    opts.partition_leader_epoch = 12;
    opts.producer_id = 4242;
    opts.producer_epoch = 2;
    opts.base_sequence = 17;
    const bytes data = encode(recs, opts);
    auto d = decode_all(data);
    REQUIRE_FALSE(d.error);
    REQUIRE(d.batches.size() == 1);
    const auto& h = d.batches[0];
    CHECK(h.codec() == codec);
    CHECK(h.base_offset == 1'000'000'000'000);
    CHECK(h.partition_leader_epoch == 12);
    CHECK(h.last_offset_delta == 3);
    CHECK(h.base_timestamp == 1000);
    CHECK(h.max_timestamp == 1005);
    CHECK(h.producer_id == 4242);
    CHECK(h.producer_epoch == 2);
    CHECK(h.base_sequence == 17);
    CHECK(h.record_count == 4);
    CHECK(h.batch_length == static_cast<std::int32_t>(data.size() - 12));
    check_records_equal(d.records, recs, opts.base_offset);
  }
}

TEST_CASE("records: many records and many batches for every codec", "[records]") {
  bytes data;
  std::vector<std::vector<test_record>> all;
  std::int64_t base = 0;
  std::vector<std::int64_t> bases;
  for (int round = 0; round < 3; ++round) {
    for (compression codec : all_codecs) {
      auto recs = many_records(round == 1 ? 1000 : 37, static_cast<std::uint32_t>(round * 10 + static_cast<int>(codec)));
      batch_encode_options opts;
      opts.codec = codec;
      opts.base_offset = base;
      bytes b = encode(recs, opts);
      data.insert(data.end(), b.begin(), b.end());
      bases.push_back(base);
      base += static_cast<std::int64_t>(recs.size());
      all.push_back(std::move(recs));
    }
  }
  auto d = decode_all(data);
  REQUIRE_FALSE(d.error);
  CHECK_FALSE(d.partial);
  CHECK(d.consumed == data.size());
  REQUIRE(d.batches.size() == all.size());
  std::size_t at = 0;
  for (std::size_t b = 0; b < all.size(); ++b) {
    INFO("batch " << b);
    CHECK(d.batches[b].base_offset == bases[b]);
    std::vector<decoded_record> part(d.records.begin() + static_cast<std::ptrdiff_t>(at),
                                     d.records.begin() + static_cast<std::ptrdiff_t>(at + all[b].size()));
    check_records_equal(part, all[b], bases[b]);
    at += all[b].size();
  }
  CHECK(at == d.records.size());
}

TEST_CASE("records: offset gaps, log-append time and empty batches", "[records]") {
  SECTION("compacted batch with offset gaps") {
    std::vector<test_record> recs = {{"a", "1", 10, {}, 0}, {"b", "2", 11, {}, 3}, {"c", "3", 12, {}, 7}};
    batch_encode_options opts;
    opts.base_offset = 100;
    opts.last_offset_delta = 9;  // the last two records were compacted away
    auto d = decode_all(encode(recs, opts));
    REQUIRE_FALSE(d.error);
    check_records_equal(d.records, recs, 100);
    CHECK(d.batches[0].last_offset() == 109);
    CHECK(d.batches[0].next_offset() == 110);
  }
  SECTION("log-append time: every record takes the batch max timestamp") {
    for (compression codec : {compression::none, compression::zstd}) {
      batch_encode_options opts;
      opts.codec = codec;
      opts.ts_type = timestamp_type::log_append_time;
      opts.log_append_time = 5000;
      auto d = decode_all(encode(sample_records(), opts));
      REQUIRE_FALSE(d.error);
      CHECK(d.batches[0].ts_type() == timestamp_type::log_append_time);
      CHECK(d.batches[0].max_timestamp == 5000);
      REQUIRE(d.records.size() == 4);
      for (const auto& r : d.records) CHECK(r.timestamp == 5000);
    }
  }
  SECTION("an empty batch (all records compacted away) still advances the offset") {
    batch_encode_options opts;
    opts.base_offset = 40;
    opts.last_offset_delta = 4;
    opts.producer_id = 9;
    auto d = decode_all(encode({}, opts));
    REQUIRE_FALSE(d.error);
    REQUIRE(d.batches.size() == 1);
    CHECK(d.batches[0].record_count == 0);
    CHECK(d.batches[0].next_offset() == 45);
    CHECK(d.records.empty());
  }
  SECTION("negative timestamp deltas and a large base offset") {
    std::vector<test_record> recs = {{"a", "1", 5000, {}, std::nullopt}, {"b", "2", 10, {}, std::nullopt},
                                     {"c", "3", -1, {}, std::nullopt}};
    batch_encode_options opts;
    opts.base_offset = (std::int64_t{1} << 62);
    auto d = decode_all(encode(recs, opts));
    REQUIRE_FALSE(d.error);
    check_records_equal(d.records, recs, opts.base_offset);
    CHECK(d.batches[0].max_timestamp == 5000);
  }
}

// ---------------------------------------------------------------------------------------------
// Control and transactional batches

TEST_CASE("records: control batches and transactional flags", "[records][control]") {
  const std::uint8_t commit_key[] = {0x00, 0x00, 0x00, 0x01};  // version 0, type 1 (commit)
  const std::uint8_t abort_key[] = {0x00, 0x00, 0x00, 0x00};   // version 0, type 0 (abort)
  const std::uint8_t marker_value[] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x05};  // version 0, coordinator epoch 5

  for (const auto* key : {commit_key, abort_key}) {
    record_input in;
    in.key = byte_view(key, 4);
    in.value = byte_view(marker_value);
    in.timestamp = 77;
    batch_encode_options opts;
    opts.base_offset = 30;
    opts.control = true;
    opts.transactional = true;
    opts.producer_id = 123;
    opts.producer_epoch = 4;
    bytes data;
    REQUIRE_FALSE(encode_record_batch({&in, 1}, opts, data));

    batch_reader reader(data);
    record_batch batch;
    REQUIRE(reader.next(batch));
    CHECK(batch.header().is_control());
    CHECK(batch.header().is_transactional());
    CHECK(batch.header().producer_id == 123);
    CHECK(batch.header().producer_epoch == 4);
    CHECK((batch.header().attributes & 0x30) == 0x30);
    auto it = batch.records();
    record r;
    REQUIRE(it.next(r));
    auto ck = parse_control_record_key(r.key);
    REQUIRE(ck);
    CHECK(ck->version == 0);
    CHECK(ck->is_commit() == (key == commit_key));
    CHECK(ck->is_abort() == (key == abort_key));
  }

  SECTION("transactional data batch is not a control batch") {
    batch_encode_options opts;
    opts.transactional = true;
    opts.producer_id = 5;
    auto d = decode_all(encode(sample_records(), opts));
    REQUIRE_FALSE(d.error);
    CHECK(d.batches[0].is_transactional());
    CHECK_FALSE(d.batches[0].is_control());
    CHECK(d.batches[0].producer_id == 5);
  }
  SECTION("malformed control keys") {
    const std::uint8_t short_key[] = {0x00, 0x00, 0x00};
    const std::uint8_t negative_version[] = {0xFF, 0xFF, 0x00, 0x01};
    const std::uint8_t longer_key[] = {0x00, 0x01, 0x00, 0x00, 0xAA};  // a later version may append
    CHECK_FALSE(parse_control_record_key(std::nullopt));
    CHECK_FALSE(parse_control_record_key(byte_view(short_key)));
    CHECK_FALSE(parse_control_record_key(byte_view(negative_version)));
    auto k = parse_control_record_key(byte_view(longer_key));
    REQUIRE(k);
    CHECK(k->version == 1);
    CHECK(k->is_abort());
  }
  SECTION("legacy messages never report transactional or control bits") {
    bytes data;
    put_legacy(data, 1, 1, 0x30, 5, std::nullopt, to_bytes("x"));
    auto d = decode_all(data);
    REQUIRE_FALSE(d.error);
    CHECK_FALSE(d.batches[0].is_control());
    CHECK_FALSE(d.batches[0].is_transactional());
  }
}

// ---------------------------------------------------------------------------------------------
// Legacy message sets

TEST_CASE("records: hand-built magic-1 gzip wrapper with relative inner offsets", "[records][legacy]") {
  for (bool gaps : {false, true}) {
    INFO("offset gaps: " << gaps);
    // Inner relative offsets 0,1,2 (or 0,2,5 after compaction); the wrapper holds the absolute
    // offset of the last inner message.
    const std::int64_t rel[3] = {0, gaps ? 2 : 1, gaps ? 5 : 2};
    const std::int64_t wrapper_offset = gaps ? 205 : 102;
    bytes inner;
    put_legacy(inner, rel[0], 1, 0, 1000, to_bytes("k0"), to_bytes("v0"));
    put_legacy(inner, rel[1], 1, 0, 1001, std::nullopt, to_bytes("v1"));
    put_legacy(inner, rel[2], 1, 0, 1002, to_bytes("k2"), std::nullopt);
    bytes packed;
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    bytes data;
    put_legacy(data, wrapper_offset, 1, 1 /* gzip */, 1002, std::nullopt, packed);

    auto d = decode_all(data);
    REQUIRE_FALSE(d.error);
    REQUIRE(d.batches.size() == 1);
    const auto& h = d.batches[0];
    CHECK(h.magic == 1);
    CHECK(h.codec() == compression::gzip);
    CHECK(h.record_count == 3);
    CHECK(h.base_offset == wrapper_offset - rel[2]);
    CHECK(h.last_offset() == wrapper_offset);
    CHECK(h.max_timestamp == 1002);
    CHECK(h.base_timestamp == 1000);
    REQUIRE(d.records.size() == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(d.records[static_cast<std::size_t>(i)].offset == wrapper_offset - rel[2] + rel[i]);
      CHECK(d.records[static_cast<std::size_t>(i)].timestamp == 1000 + i);
    }
    CHECK(d.records[0].key == "k0");
    CHECK(d.records[1].key == std::nullopt);
    CHECK(d.records[1].value == "v1");
    CHECK(d.records[2].value == std::nullopt);
  }
}

TEST_CASE("records: hand-built magic-0 gzip wrapper with absolute inner offsets", "[records][legacy]") {
  bytes inner;
  put_legacy(inner, 50, 0, 0, -1, to_bytes("a"), to_bytes("1"));
  put_legacy(inner, 51, 0, 0, -1, to_bytes("b"), to_bytes("2"));
  put_legacy(inner, 52, 0, 0, -1, to_bytes("c"), to_bytes("3"));
  bytes packed;
  REQUIRE_FALSE(compress(compression::gzip, inner, packed));
  bytes data;
  put_legacy(data, 52, 0, 1, -1, std::nullopt, packed);
  auto d = decode_all(data);
  REQUIRE_FALSE(d.error);
  REQUIRE(d.records.size() == 3);
  CHECK(d.batches[0].base_offset == 50);
  CHECK(d.batches[0].last_offset() == 52);
  CHECK(d.batches[0].ts_type() == timestamp_type::none);
  for (int i = 0; i < 3; ++i) {
    CHECK(d.records[static_cast<std::size_t>(i)].offset == 50 + i);
    CHECK(d.records[static_cast<std::size_t>(i)].timestamp == -1);
  }
  CHECK(d.records[2].value == "3");
}

TEST_CASE("records: a legacy wrapper's offset is its batch's last offset, or it is corrupt",
          "[records][legacy]") {
  // Java's AbstractLegacyRecordBatch: lastOffset() is the wrapper's offset for both magics (the
  // fetch position continues after it); magic-1 inner offsets are relative to it, and a wrapper
  // offset below the last relative one (negative offsets) is refused.
  auto wrapper = [](std::int8_t magic, std::int64_t offset,
                    std::initializer_list<std::int64_t> inner_offsets) {
    bytes inner;
    for (auto o : inner_offsets) put_legacy(inner, o, magic, 0, 7, std::nullopt, to_bytes("x"));
    bytes packed;
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    bytes out;
    put_legacy(out, offset, magic, 1 /* gzip */, 7, std::nullopt, packed);
    return out;
  };
  SECTION("magic 0, the wrapper past its last message: read, the batch ends at the wrapper") {
    auto d = decode_all(wrapper(0, 60, {50, 51, 52}));
    REQUIRE_FALSE(d.error);
    REQUIRE(d.batches.size() == 1);
    CHECK(d.batches[0].base_offset == 50);
    CHECK(d.batches[0].last_offset() == 60);
    CHECK(d.batches[0].record_count == 3);
    REQUIRE(d.records.size() == 3);
    CHECK(d.records[2].offset == 52);
  }
  SECTION(
      "magic 0 from the encoder, its wrapper_offset past the last message (kgroup-sim's compacted history)") {
    const bytes x = to_bytes("x");
    std::vector<legacy_message_input> msgs;
    for (std::int64_t o : {50, 51, 52}) msgs.push_back({o, -1, std::nullopt, byte_view(x)});
    legacy_encode_options opts;
    opts.magic = 0;
    opts.codec = compression::gzip;
    opts.wrapper_offset = 60;
    bytes data;
    REQUIRE_FALSE(encode_legacy_message_set(msgs, opts, data));
    auto d = decode_all(data);
    REQUIRE_FALSE(d.error);
    REQUIRE(d.batches.size() == 1);
    CHECK(d.batches[0].base_offset == 50);
    CHECK(d.batches[0].last_offset() == 60);
    REQUIRE(d.records.size() == 3);
    CHECK(d.records[2].offset == 52);
  }
  SECTION("magic 1, a wrapper at 0 holding one message at 0 (what librdkafka produced)") {
    auto d = decode_all(wrapper(1, 0, {0}));
    REQUIRE_FALSE(d.error);
    REQUIRE(d.records.size() == 1);
    CHECK(d.records[0].offset == 0);
    CHECK(d.batches[0].last_offset() == 0);
  }
  SECTION("corrupt") {
    CHECK(decode_all(wrapper(0, 51, {50, 51, 52})).error == codec_errc::oversized);  // below its last message
    CHECK(decode_all(wrapper(0, 40, {50, 51, 52})).error == codec_errc::oversized);  // below its first
    CHECK(decode_all(wrapper(1, 1, {0, 1, 2})).error == codec_errc::oversized);      // offsets -1, 0, 1
    for (std::int8_t magic : {std::int8_t{0}, std::int8_t{1}}) {
      INFO("magic " << int{magic});
      CHECK(decode_all(wrapper(magic, 51, {50, 50, 51})).error == codec_errc::oversized);  // not increasing
      CHECK(decode_all(wrapper(magic, 52, {50, 52, 51})).error == codec_errc::oversized);
    }
  }
}

TEST_CASE("records: legacy encoder round trips, every legacy codec", "[records][legacy]") {
  const std::string keys[] = {"k1", "k2", "k3", "k4"};
  for (std::int8_t magic : {std::int8_t{0}, std::int8_t{1}}) {
    for (compression codec : {compression::none, compression::gzip, compression::snappy, compression::lz4}) {
      INFO("magic " << int(magic) << " " << to_string(codec));
      std::vector<legacy_message_input> msgs;
      for (int i = 0; i < 4; ++i) {
        legacy_message_input m;
        m.offset = 300 + i * 2;  // gaps
        m.timestamp = 2000 + i;
        if (i != 1) m.key = view(keys[i]);
        if (i != 2) m.value = view(keys[i]);
        msgs.push_back(m);
      }
      bytes data;
      legacy_encode_options opts;
      opts.magic = magic;
      opts.codec = codec;
      REQUIRE_FALSE(encode_legacy_message_set(msgs, opts, data));
      auto d = decode_all(data);
      REQUIRE_FALSE(d.error);
      CHECK(d.batches.size() == (codec == compression::none ? 4u : 1u));
      REQUIRE(d.records.size() == 4);
      for (int i = 0; i < 4; ++i) {
        const auto& r = d.records[static_cast<std::size_t>(i)];
        CHECK(r.offset == 300 + i * 2);
        CHECK(r.timestamp == (magic == 1 ? 2000 + i : -1));
        CHECK(r.key == (i != 1 ? std::optional<std::string>(keys[i]) : std::nullopt));
        CHECK(r.value == (i != 2 ? std::optional<std::string>(keys[i]) : std::nullopt));
      }
      CHECK(d.batches.back().last_offset() == 306);
    }
  }
}

TEST_CASE("records: legacy magic-1 wrapper with log-append time", "[records][legacy]") {
  std::vector<legacy_message_input> msgs = {{10, 1, view("a"), view("x")}, {11, 2, view("b"), view("y")}};
  legacy_encode_options opts;
  opts.codec = compression::gzip;
  opts.ts_type = timestamp_type::log_append_time;
  opts.log_append_time = 99'999;
  bytes data;
  REQUIRE_FALSE(encode_legacy_message_set(msgs, opts, data));
  auto d = decode_all(data);
  REQUIRE_FALSE(d.error);
  CHECK(d.batches[0].ts_type() == timestamp_type::log_append_time);
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[0].timestamp == 99'999);
  CHECK(d.records[1].timestamp == 99'999);
}

TEST_CASE("records: malformed legacy wrappers", "[records][legacy]") {
  bytes out;
  SECTION("wrapper without a value") {
    put_legacy(out, 5, 1, 1, 0, std::nullopt, std::nullopt);
    CHECK(decode_all(out).error == codec_errc::null_not_allowed);
  }
  SECTION("nested compression") {
    bytes inner, packed;
    put_legacy(inner, 0, 1, 1, 0, std::nullopt, to_bytes("x"));
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    put_legacy(out, 5, 1, 1, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::field_not_supported);
  }
  SECTION("inner magic differs from the wrapper's") {
    bytes inner, packed;
    put_legacy(inner, 0, 0, 0, 0, std::nullopt, to_bytes("x"));
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    put_legacy(out, 5, 1, 1, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::bad_magic);
  }
  SECTION("empty inner set") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::gzip, bytes{}, packed));
    put_legacy(out, 5, 1, 1, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::truncated);
  }
  SECTION("inner message cut short") {
    bytes inner, packed;
    put_legacy(inner, 0, 1, 0, 0, std::nullopt, to_bytes("xyz"));
    inner.pop_back();
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    put_legacy(out, 5, 1, 1, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::truncated);
  }
  SECTION("inner message with a bad CRC") {
    bytes inner, packed;
    put_legacy(inner, 0, 1, 0, 0, std::nullopt, to_bytes("xyz"));
    inner.back() ^= 1;
    REQUIRE_FALSE(compress(compression::gzip, inner, packed));
    put_legacy(out, 5, 1, 1, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::bad_crc);
  }
  SECTION("zstd cannot appear in a legacy message") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::zstd, to_bytes("x"), packed));
    put_legacy(out, 5, 1, 4, 0, std::nullopt, packed);
    CHECK(decode_all(out).error == codec_errc::unknown_compression);
    legacy_encode_options opts;
    opts.codec = compression::zstd;
    const legacy_message_input m{0, 0, std::nullopt, view("x")};
    bytes enc;
    CHECK(encode_legacy_message_set({&m, 1}, opts, enc) == codec_errc::unknown_compression);
    CHECK(enc.empty());
  }
  SECTION("legacy key length larger than the message") {
    put_legacy(out, 5, 1, 0, 0, to_bytes("key"), to_bytes("value"));
    set_be32(out, 12 + 14, 0x7FFFFFF0);  // key length field of the magic-1 body
    set_be32(out, 12, crc32_ieee(byte_view(out).subspan(16)));
    CHECK(decode_all(out).error == codec_errc::oversized);
  }
}

TEST_CASE("records: legacy and magic-2 batches mixed in one fetch", "[records][legacy]") {
  bytes data;
  const legacy_message_input m{0, 10, view("old"), view("format")};
  legacy_encode_options lopts;
  lopts.codec = compression::snappy;
  REQUIRE_FALSE(encode_legacy_message_set({&m, 1}, lopts, data));
  batch_encode_options opts;
  opts.base_offset = 1;
  opts.codec = compression::lz4;
  bytes v2 = encode(sample_records(), opts);
  data.insert(data.end(), v2.begin(), v2.end());
  auto d = decode_all(data);
  REQUIRE_FALSE(d.error);
  REQUIRE(d.batches.size() == 2);
  CHECK(d.batches[0].magic == 1);
  CHECK(d.batches[1].magic == 2);
  REQUIRE(d.records.size() == 5);
  CHECK(d.records[0].value == "format");
  CHECK(d.records[1].offset == 1);
  CHECK(d.records[4].offset == 4);
}

// ---------------------------------------------------------------------------------------------
// Truncation, corruption, hostile lengths

TEST_CASE("records: truncation at every byte stops cleanly at the last complete batch", "[records][truncation]") {
  bytes data;
  std::vector<std::size_t> ends;
  {
    batch_encode_options opts;
    opts.codec = compression::gzip;
    bytes b = encode(sample_records(), opts);
    data.insert(data.end(), b.begin(), b.end());
    ends.push_back(data.size());
    opts.codec = compression::none;
    opts.base_offset = 4;
    b = encode(sample_records(), opts);
    data.insert(data.end(), b.begin(), b.end());
    ends.push_back(data.size());
    std::vector<legacy_message_input> msgs = {{8, 1, view("a"), view("b")}, {9, 2, view("c"), view("d")}};
    legacy_encode_options lopts;
    lopts.codec = compression::gzip;
    REQUIRE_FALSE(encode_legacy_message_set(msgs, lopts, data));
    ends.push_back(data.size());
    lopts.codec = compression::none;
    lopts.magic = 0;
    msgs = {{10, 1, view("e"), view("f")}};
    REQUIRE_FALSE(encode_legacy_message_set(msgs, lopts, data));
    ends.push_back(data.size());
  }
  const std::size_t records_per_batch[] = {4, 4, 2, 1};

  for (std::size_t cut = 0; cut <= data.size(); ++cut) {
    INFO("cut at " << cut);
    // A copy of exactly `cut` bytes, so that reading past the end is a heap overflow that
    // sanitizers catch.
    const bytes part(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(cut));
    auto d = decode_all(part);
    REQUIRE_FALSE(d.error);
    std::size_t complete = 0, expected_records = 0, boundary = 0;
    for (std::size_t i = 0; i < ends.size() && ends[i] <= cut; ++i) {
      ++complete;
      expected_records += records_per_batch[i];
      boundary = ends[i];
    }
    REQUIRE(d.batches.size() == complete);
    REQUIRE(d.records.size() == expected_records);
    REQUIRE(d.consumed == boundary);
    REQUIRE(d.partial == (cut != boundary));
  }
}

TEST_CASE("records: a shortened but self-consistent batch is an error, never a crash", "[records][truncation]") {
  for (compression codec : all_codecs) {
    INFO(to_string(codec));
    batch_encode_options opts;
    opts.codec = codec;
    const bytes full = encode(sample_records(), opts);
    for (std::size_t drop = 1; drop <= full.size() - 61; ++drop) {
      INFO("dropped " << drop);
      bytes b(full.begin(), full.end() - static_cast<std::ptrdiff_t>(drop));
      set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
      fix_v2_crc(b);
      auto d = decode_all(b);
      REQUIRE(d.error);
      CHECK_FALSE(d.partial);
    }
  }
}

TEST_CASE("records: a flipped byte is a bad CRC", "[records][corruption]") {
  batch_encode_options opts;
  opts.codec = compression::none;
  const bytes v2 = encode(sample_records(), opts);
  for (std::size_t i = 16; i < v2.size(); ++i) {
    INFO("flipped byte " << i);
    bytes b = v2;
    b[i] ^= 0xFF;
    auto d = decode_all(b);
    CHECK(d.error == (i == 16 ? codec_errc::bad_magic : codec_errc::bad_crc));
    CHECK(d.records.empty());
  }
  // Bytes before the CRC-covered part: the base offset and the leader epoch are not covered.
  {
    bytes b = v2;
    b[7] ^= 0x01;
    auto d = decode_all(b);
    REQUIRE_FALSE(d.error);
    CHECK(d.batches[0].base_offset == 1);
  }

  bytes legacy;
  const legacy_message_input m{3, 4, view("key"), view("value")};
  REQUIRE_FALSE(encode_legacy_message_set({&m, 1}, {}, legacy));
  for (std::size_t i = 16; i < legacy.size(); ++i) {
    INFO("flipped legacy byte " << i);
    bytes b = legacy;
    b[i] ^= 0xFF;
    CHECK(decode_all(b).error == (i == 16 ? codec_errc::bad_magic : codec_errc::bad_crc));
  }
  for (std::size_t i = 12; i < 16; ++i) {
    bytes b = legacy;
    b[i] ^= 0x10;
    CHECK(decode_all(b).error == codec_errc::bad_crc);
  }

  SECTION("with CRC checks disabled the damage reaches the data") {
    bytes b = v2;
    b[b.size() - 1] ^= 0x01;  // the last header's value length: empty (0) becomes null (-1)
    decode_options no_crc;
    no_crc.verify_crc = false;
    auto d = decode_all(b, no_crc);
    REQUIRE_FALSE(d.error);
    REQUIRE(d.records.size() == 4);
    REQUIRE(d.records[3].headers.size() == 1);
    CHECK_FALSE(d.records[3].headers[0].second.has_value());
    CHECK(decode_all(b).error == codec_errc::bad_crc);
  }
}

TEST_CASE("records: hostile counts and lengths fail without big allocations", "[records][hostile]") {
  batch_encode_options opts;
  const bytes one = encode({{"k", "v", 1, {}, std::nullopt}}, opts);
  // Offsets inside `one`: record count at 57, then the record: length at 61, attributes 62,
  // timestamp delta 63, offset delta 64, key length 65, key 66, value length 67, value 68,
  // header count 69.
  REQUIRE(one.size() == 70);
  REQUIRE(one[61] == 0x10);  // record length 8

  SECTION("record count far beyond the bytes") {
    bytes b = one;
    set_be32(b, 57, 0x7FFFFFFF);
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::oversized);
  }
  SECTION("negative record count") {
    bytes b = one;
    set_be32(b, 57, 0xFFFFFFFF);
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::negative_length);
  }
  SECTION("record count beyond the decompression bound, before decompressing") {
    batch_encode_options z;
    z.codec = compression::zstd;
    bytes b = encode({{"k", "v", 1, {}, std::nullopt}}, z);
    set_be32(b, 57, 0x7FFFFFFF);
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::oversized);
  }
  SECTION("record count one more than the records present") {
    // Large enough a record that the count passes the bytes-per-record bound.
    bytes b = encode({{"k", "a value of some length", 1, {}, std::nullopt}}, opts);
    set_be32(b, 57, 2);
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::truncated);
  }
  SECTION("record count one less than the records present") {
    const bytes two = encode({{"k", "v", 1, {}, std::nullopt}, {"k", "v", 1, {}, std::nullopt}}, opts);
    bytes b = two;
    set_be32(b, 57, 1);
    fix_v2_crc(b);
    auto d = decode_all(b);
    CHECK(d.error == codec_errc::trailing_bytes);
    CHECK(d.records.size() == 1);
  }
  SECTION("record length claiming 1 GiB") {
    bytes b(one.begin(), one.begin() + 61);
    b.insert(b.end(), {0x80, 0x80, 0x80, 0x80, 0x08});  // zigzag varint 2^30
    b.insert(b.end(), one.begin() + 62, one.end());
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::oversized);
  }
  SECTION("key length claiming 1 GiB") {
    bytes b(one.begin(), one.begin() + 65);
    b.insert(b.end(), {0x80, 0x80, 0x80, 0x80, 0x08});
    b.insert(b.end(), one.begin() + 66, one.end());
    b[61] = static_cast<std::uint8_t>(b[61] + 8);  // record length +4 bytes (zigzag)
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::oversized);
  }
  SECTION("header count claiming 2^30 headers") {
    bytes b(one.begin(), one.begin() + 69);
    b.insert(b.end(), {0x80, 0x80, 0x80, 0x80, 0x08});
    b[61] = static_cast<std::uint8_t>(b[61] + 8);
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::oversized);
  }
  SECTION("negative header count and null header key") {
    bytes b = one;
    b[69] = 0x01;  // -1
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::negative_length);

    const bytes with_header = encode({{"k", "v", 1, {{"h", "x"}}, std::nullopt}}, opts);
    bytes c = with_header;
    REQUIRE(c[70] == 0x02);  // header key length 1
    c[70] = 0x01;            // -1: null header key
    fix_v2_crc(c);
    CHECK(decode_all(c).error == codec_errc::negative_length);
  }
  SECTION("a byte left inside a record after its headers") {
    bytes b(one.begin(), one.end());
    b.push_back(0x00);
    b[61] = static_cast<std::uint8_t>(b[61] + 2);  // record length 9
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::trailing_bytes);
  }
  SECTION("an overlong varint") {
    bytes b(one.begin(), one.begin() + 64);
    b.insert(b.end(), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01});  // offset delta: 6 bytes
    b.insert(b.end(), one.begin() + 65, one.end());
    b[61] = static_cast<std::uint8_t>(b[61] + 10);
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::bad_varint);
  }
  SECTION("unknown compression codec") {
    bytes b = one;
    b[22] = 0x05;
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::unknown_compression);
  }
  SECTION("batch length below the header size") {
    bytes b = one;
    set_be32(b, 8, 30);
    CHECK(decode_all(b).error == codec_errc::truncated);
  }
  SECTION("negative batch length") {
    bytes b = one;
    set_be32(b, 8, 0xFFFFFFF0);
    CHECK(decode_all(b).error == codec_errc::negative_length);
  }
  SECTION("huge batch length is a partial tail, not an allocation") {
    bytes b = one;
    set_be32(b, 8, 0x7FFFFFFF);
    auto d = decode_all(b);
    CHECK_FALSE(d.error);
    CHECK(d.partial);
    CHECK(d.consumed == 0);
  }
  SECTION("unknown magic, even in a partial tail") {
    bytes b = one;
    b[16] = 3;
    CHECK(decode_all(b).error == codec_errc::bad_magic);
    bytes tail(one.begin(), one.begin() + 20);
    tail[16] = 0x7F;
    CHECK(decode_all(tail).error == codec_errc::bad_magic);
  }
}

TEST_CASE("records: decompression bound per batch", "[records][hostile]") {
  const std::string big(2 * 1024 * 1024, 'z');
  for (compression codec : {compression::gzip, compression::snappy, compression::lz4, compression::zstd}) {
    INFO(to_string(codec));
    batch_encode_options opts;
    opts.codec = codec;
    const bytes data = encode({{"k", big, 1, {}, std::nullopt}}, opts);
    CHECK(data.size() < 200 * 1024);
    decode_options small;
    small.max_decompressed_batch_bytes = 1024 * 1024;
    CHECK(decode_all(data, small).error == codec_errc::decompression_bound);
    decode_options large;
    large.max_decompressed_batch_bytes = 4 * 1024 * 1024;
    auto d = decode_all(data, large);
    REQUIRE_FALSE(d.error);
    REQUIRE(d.records.size() == 1);
    CHECK(d.records[0].value == big);
  }
}

TEST_CASE("records: corrupt compressed payload with a valid CRC", "[records][corruption]") {
  for (compression codec : {compression::gzip, compression::snappy, compression::lz4, compression::zstd}) {
    INFO(to_string(codec));
    batch_encode_options opts;
    opts.codec = codec;
    bytes b = encode(sample_records(), opts);
    b.erase(b.end() - 3, b.end());  // cut the compressed stream, keep the batch self-consistent
    set_be32(b, 8, static_cast<std::uint32_t>(b.size() - 12));
    fix_v2_crc(b);
    CHECK(decode_all(b).error == codec_errc::decompression_failed);
  }
}

TEST_CASE("records: random damage with CRC checks off never crashes", "[records][corruption]") {
  bytes data;
  for (compression codec : all_codecs) {
    batch_encode_options opts;
    opts.codec = codec;
    bytes b = encode(many_records(20, static_cast<std::uint32_t>(codec)), opts);
    data.insert(data.end(), b.begin(), b.end());
  }
  const legacy_message_input m{0, 1, view("k"), view("v")};
  legacy_encode_options lopts;
  lopts.codec = compression::gzip;
  REQUIRE_FALSE(encode_legacy_message_set({&m, 1}, lopts, data));

  decode_options no_crc;
  no_crc.verify_crc = false;
  no_crc.max_decompressed_batch_bytes = 1 << 20;
  std::mt19937 rng(1234);
  for (int round = 0; round < 2000; ++round) {
    bytes b = data;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<std::uint8_t>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    auto d = decode_all(b, no_crc);
    // Whatever happened, every record came from a batch and nothing ran past the data.
    CHECK(d.consumed <= b.size());
  }
}

// ---------------------------------------------------------------------------------------------
// Zero copy, buffer lifetimes and the callback helper

TEST_CASE("records: uncompressed views point into the input; no copies", "[records][lifetime]") {
  batch_encode_options opts;
  const bytes data = encode(many_records(50, 9), opts);
  batch_reader reader(data);
  record_batch batch;
  REQUIRE(reader.next(batch));
  CHECK(batch.record_data().data() == data.data() + 61);
  auto it = batch.records();
  record r;
  while (it.next(r)) {
    for (const auto& v : {r.key, r.value}) {
      if (v && !v->empty()) {
        CHECK(v->data() >= data.data());
        CHECK(v->data() + v->size() <= data.data() + data.size());
      }
    }
  }
  CHECK_FALSE(it.error());
}

TEST_CASE("records: decompressed data lives as long as any copy of its batch", "[records][lifetime]") {
  bytes data;
  for (int i = 0; i < 3; ++i) {
    batch_encode_options opts;
    opts.codec = compression::zstd;
    opts.base_offset = i * 10;
    const std::string value = "batch-" + std::to_string(i) + std::string(1000, static_cast<char>('a' + i));
    bytes b = encode({{"k", value, 1, {}, std::nullopt}}, opts);
    data.insert(data.end(), b.begin(), b.end());
  }
  batch_reader reader(data);
  record_batch batch;
  REQUIRE(reader.next(batch));
  const record_batch kept = batch;  // shares the first batch's buffer
  const std::uint8_t* first_buffer = batch.record_data().data();

  REQUIRE(reader.next(batch));  // `kept` still holds the buffer: a new one is used
  CHECK(batch.record_data().data() != first_buffer);
  const std::uint8_t* second_buffer = batch.record_data().data();
  REQUIRE(reader.next(batch));  // nobody shares the second buffer: reused
  CHECK(batch.record_data().data() == second_buffer);

  auto it = kept.records();
  record r;
  REQUIRE(it.next(r));
  CHECK(r.offset == 0);
  CHECK(to_string(*r.value).substr(0, 7) == "batch-0");
  CHECK(to_string(*r.value).back() == 'a');
}

TEST_CASE("records: a batch keeps a shared input alive", "[records][lifetime]") {
  batch_encode_options opts;
  auto input = std::make_shared<const bytes>(encode(sample_records(), opts));
  record_batch batch;
  {
    batch_reader reader(*input, {}, input);
    REQUIRE(reader.next(batch));
  }
  const std::weak_ptr<const bytes> weak = input;
  input.reset();
  CHECK_FALSE(weak.expired());  // the batch holds it
  auto it = batch.records();
  record r;
  REQUIRE(it.next(r));
  CHECK(to_string(*r.value) == "value-0");
  batch = record_batch();
  CHECK(weak.expired());
}

TEST_CASE("records: for_each_record visits every record with its batch", "[records]") {
  bytes data;
  batch_encode_options opts;
  opts.codec = compression::snappy;
  bytes b = encode(sample_records(), opts);
  data.insert(data.end(), b.begin(), b.end());
  opts.base_offset = 4;
  opts.control = true;
  const std::uint8_t commit_key[] = {0, 0, 0, 1};
  record_input marker;
  marker.key = byte_view(commit_key);
  marker.value = byte_view(commit_key);
  REQUIRE_FALSE(encode_record_batch({&marker, 1}, opts, data));
  data.insert(data.end(), b.begin(), b.begin() + 30);  // a partial tail

  std::vector<std::int64_t> offsets;
  int control = 0;
  auto result = for_each_record(data, {}, [&](const record_batch& batch, const record& r) {
    offsets.push_back(r.offset);
    if (batch.header().is_control()) ++control;
  });
  CHECK_FALSE(result.error);
  CHECK(result.partial);
  CHECK(result.consumed == data.size() - 30);
  CHECK(offsets == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(control == 1);
}

TEST_CASE("records: encoder validates its options and restores the output", "[records]") {
  bytes out = {1, 2, 3};
  batch_encode_options opts;
  opts.codec = static_cast<compression>(6);
  const record_input in;
  CHECK(encode_record_batch({&in, 1}, opts, out) == codec_errc::unknown_compression);
  CHECK(out == bytes{1, 2, 3});
  legacy_encode_options lopts;
  lopts.magic = 2;
  const legacy_message_input m;
  CHECK(encode_legacy_message_set({&m, 1}, lopts, out) == codec_errc::unsupported_version);
  CHECK(out == bytes{1, 2, 3});
}
