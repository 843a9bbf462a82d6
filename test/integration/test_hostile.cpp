// A hostile broker (issue 31): what one Fetch answer can make a consumer hold. A few kilobytes of
// compressed zeros decompress to gigabytes, and a record of empty headers costs far more decoded
// than on the wire; poll() must stay within a stated bound (a partition-level error, or fewer
// records per poll), measured with a counting allocator, and lose nothing it can read.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "alloc_meter.hpp"
#include "fake_broker.hpp"
#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "protocol/compression.hpp"
#include "protocol/crc32c.hpp"
#include "protocol/records.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
namespace proto = kgroup::protocol;
namespace meter = kgroup::test::alloc_meter;
using kgroup::client_errc;
using kgroup::TopicPartition;
using kgroup::test::fake_broker;
using kgroup::test::test_config;
using reply = fake_broker::reply;
using request = fake_broker::request;

namespace {

constexpr std::size_t mib = 1024 * 1024;

// ---- raw record batches: the wire form written by hand, so a test can say anything ------------

void put_varint(proto::bytes& out, std::int64_t v) {
  auto z = (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
  while (z >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(z | 0x80));
    z >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(z));
}

template <class T>
void put_be(proto::bytes& out, T v) {
  const auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (int shift = (sizeof(T) - 1) * 8; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(u >> shift));
}

// One record (offset delta 0, no key) with a value of `value_bytes` zeros and `headers` empty
// headers (empty key, null value: two bytes each on the wire).
proto::bytes record_section(std::size_t value_bytes, std::int64_t headers) {
  proto::bytes body;
  body.push_back(0);  // attributes
  put_varint(body, 0);  // timestamp delta
  put_varint(body, 0);  // offset delta
  put_varint(body, -1);  // null key
  put_varint(body, static_cast<std::int64_t>(value_bytes));
  body.resize(body.size() + value_bytes, 0);
  put_varint(body, headers);
  for (std::int64_t i = 0; i < headers; ++i) {
    body.push_back(0);  // key length 0
    body.push_back(1);  // value length -1 (null)
  }
  proto::bytes out;
  put_varint(out, static_cast<std::int64_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

// A magic-2 batch of one record at `base`, its records compressed with zstd.
proto::bytes zstd_batch(std::int64_t base, const proto::bytes& records) {
  proto::bytes packed;
  if (proto::compress(proto::compression::zstd, records, packed)) throw std::runtime_error("zstd failed");
  proto::bytes tail;  // attributes .. end: what the CRC covers
  put_be<std::int16_t>(tail, 4);  // zstd
  put_be<std::int32_t>(tail, 0);  // last offset delta
  put_be<std::int64_t>(tail, 1000);
  put_be<std::int64_t>(tail, 1000);
  put_be<std::int64_t>(tail, -1);  // producer id
  put_be<std::int16_t>(tail, -1);
  put_be<std::int32_t>(tail, -1);
  put_be<std::int32_t>(tail, 1);  // one record
  tail.insert(tail.end(), packed.begin(), packed.end());
  proto::bytes out;
  put_be<std::int64_t>(out, base);
  put_be<std::int32_t>(out, static_cast<std::int32_t>(4 + 1 + 4 + tail.size()));
  put_be<std::int32_t>(out, 0);  // partition leader epoch
  out.push_back(2);              // magic
  put_be<std::uint32_t>(out, proto::crc32c(tail));
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// Copies of `batch` at offsets 0..count-1: the CRC does not cover the base offset.
proto::bytes repeated(const proto::bytes& batch, std::int64_t count) {
  proto::bytes out;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto at = out.size();
    out.insert(out.end(), batch.begin(), batch.end());
    for (int b = 0; b < 8; ++b) out[at + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(i) >> (56 - 8 * b));
  }
  return out;
}

// A leader of topic "t" (one partition) whose log is `batches` (`count` batches of one record,
// offsets 0..count-1, each `batch_size` bytes on the wire): every Fetch gets the batches from its
// offset on, all in one answer.
class hostile_leader {
 public:
  hostile_leader(proto::bytes batches, std::size_t batch_size)
      : batches_(std::move(batches)),
        batch_size_(batch_size),
        fb_([this](const request& r) { return handle(r); }, {{"t", 1}}) {}

  std::string bootstrap() const { return fb_.bootstrap(); }

 private:
  std::optional<reply> handle(const request& r) {
    if (r.api_key != proto::fetch_request::api_key) return std::nullopt;
    proto::fetch_request req;
    if (!r.decode(req)) return std::nullopt;
    proto::fetch_response resp;
    const std::int64_t count = static_cast<std::int64_t>(batches_.size() / batch_size_);
    bool any = false;
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic = t.topic;
      for (const auto& p : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = p.partition;
        rp.high_watermark = count;
        rp.last_stable_offset = count;
        rp.log_start_offset = 0;
        rp.records = proto::records_view{};
        if (p.fetch_offset < 0 || p.fetch_offset > count) {
          rp.error_code = 1;
          continue;
        }
        const auto from = static_cast<std::size_t>(p.fetch_offset) * batch_size_;
        if (from < batches_.size()) {
          rp.records = proto::records_view{proto::byte_view(batches_).subspan(from)};
          any = true;
        }
      }
    }
    return reply{fake_broker::response(r, resp), false, any ? 0ms : 50ms};
  }

  proto::bytes batches_;
  std::size_t batch_size_;
  fake_broker fb_;  // last: its threads call handle()
};

kgroup::Config config_for(const hostile_leader& leader) {
  return test_config(leader.bootstrap())
      .manual_commit()
      .retry_backoff(20ms)
      .reconnect_backoff(10ms)
      .fetch_wait(50ms);
}

const TopicPartition t0{"t", 0};

}  // namespace

TEST_CASE("500 compressed batches of 64 MiB of zeros: poll() raises a bounded error, it never pins them all",
          "[hostile]") {
  // About 2 KiB each on the wire; 32 GiB decompressed (each just under the old fixed 64 MiB bound).
  const auto one = zstd_batch(0, record_section(64 * mib - 64, 0));
  hostile_leader leader(repeated(one, 500), one.size());
  kgroup::Consumer c(config_for(leader));
  c.assign({t0});
  c.seek(t0, 0);
  meter::reset_peak();
  const auto before = meter::live();
  std::size_t records = 0;
  std::string error;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (error.empty() && records < 500 && std::chrono::steady_clock::now() < deadline) {
    try {
      records += c.poll(50ms).size();
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == make_error_code(client_errc::corrupt_record));
      error = e.what();
    }
  }
  const auto held = meter::peak() - before;
  INFO("records " << records << ", error: " << error << ", peak held " << held / mib << " MiB");
  // Each batch decompresses to more than max(fetch.max.bytes, max.partition.fetch.bytes) (50 MiB by
  // default): refused at the first one, with the partition and offset to seek past.
  CHECK(records == 0);
  CHECK(error.find("t-0 at offset 0") != std::string::npos);
  CHECK(error.find("decompress") != std::string::npos);
  // The partial decompression of the refused batch and the fetched answers; never two batches.
  CHECK(held < 150 * mib);
  CHECK(c.position(t0) == 0);
  c.close(5s);
}

TEST_CASE("compressed batches of 8 MiB of zeros: each poll() returns records up to fetch.max.bytes, none lost",
          "[hostile]") {
  const auto one = zstd_batch(0, record_section(8 * mib, 0));
  hostile_leader leader(repeated(one, 60), one.size());
  auto cfg = config_for(leader);
  cfg.set("fetch.max.bytes", std::to_string(20 * mib));
  kgroup::Consumer c(cfg);
  c.assign({t0});
  c.seek(t0, 0);
  meter::reset_peak();
  const auto before = meter::live();
  std::vector<std::int64_t> offsets;
  std::size_t largest = 0;
  // A bound for a stuck consumer, not a speed goal: under ASan on a loaded two-core machine the 60
  // decompressions took longer than 30 s (52 records read).
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (offsets.size() < 60 && std::chrono::steady_clock::now() < deadline) {
    const auto got = c.poll(50ms);
    largest = std::max(largest, got.size());
    for (const auto& rec : got) {
      CHECK(rec.value->size() == 8 * mib);
      offsets.push_back(rec.offset);
    }
  }
  const auto held = meter::peak() - before;
  INFO("records " << offsets.size() << ", largest poll " << largest << ", peak held " << held / mib << " MiB");
  std::vector<std::int64_t> expected;
  for (std::int64_t o = 0; o < 60; ++o) expected.push_back(o);
  CHECK(offsets == expected);
  // 20 MiB of budget: two records fit, the third (which would pass it) waits for the next poll.
  CHECK(largest <= 3);
  CHECK(largest >= 2);
  // One poll's records (under 20 MiB + one 8 MiB batch) and the one returned before it, still
  // held by the loop while the next poll runs; without the budget, 60 x 8 MiB.
  CHECK(held < 100 * mib);
  c.close(5s);
}

TEST_CASE("a record of millions of empty headers is refused with an error, not decoded into a gigabyte",
          "[hostile]") {
  // 20 million headers: 40 MB decompressed (under the batch bound), 800 MB as Header values.
  const auto one = zstd_batch(0, record_section(0, 20'000'000));
  hostile_leader leader(one, one.size());
  kgroup::Consumer c(config_for(leader));
  c.assign({t0});
  c.seek(t0, 0);
  meter::reset_peak();
  const auto before = meter::live();
  std::string error;
  std::size_t records = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (error.empty() && records == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      records += c.poll(50ms).size();
    } catch (const kgroup::Error& e) {
      CHECK(e.code() == make_error_code(client_errc::corrupt_record));
      error = e.what();
    }
  }
  const auto held = meter::peak() - before;
  INFO("records " << records << ", error: " << error << ", peak held " << held / mib << " MiB");
  CHECK(records == 0);
  CHECK(error.find("t-0 at offset 0") != std::string::npos);
  CHECK(held < 150 * mib);
  c.close(5s);
}
