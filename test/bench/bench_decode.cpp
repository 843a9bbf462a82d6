// kgroup-bench-decode: the cost per record of the data path, without sockets or a mock cluster
// (issue 37). Each case builds one Fetch response in memory (one topic, four partitions, batches of
// the records a producer would send) and then, many times over, runs it through what poll() runs:
// decode the response (the records stay views into its bytes), turn each partition's answer into
// the fetcher's fetched data (data::to_fetched), read it with the record cursor (batches,
// decompression, CRC-32C, the aborted-transaction filter under read_committed, the position
// table), and hand the records to an "application" that reads every key, value and header.
//
// One line per case:
//   case=NAME version=V codec=C size=B headers=H isolation=I records=N ns_per_record=X
//   wire_mb_s=W payload_mb_s=P memcpy_mb_s=M memcpy_ratio=R decompress_ns_per_record=D
// ns_per_record is the median over the runs; wire_mb_s the response's bytes per second through
// the whole path, payload_mb_s the record values' bytes per second; memcpy_mb_s copies the same
// response bytes with memcpy on this machine (the reference: reading the bytes once) and
// memcpy_ratio = wire_mb_s / memcpy_mb_s; decompress_ns_per_record is the decompression of the
// response's batches alone, per record (0 for codec none).
//
// Usage: kgroup-bench-decode [--quick] [--runs N] [--case SUBSTRING]
//   --quick  two small cases, one run each: ctest's check that it runs and reads every record.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/fetch_planner.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "protocol/compression.hpp"
#include "protocol/messages.hpp"
#include "protocol/records.hpp"

namespace {

using namespace kgroup;
namespace proto = kgroup::protocol;
using clock_type = std::chrono::steady_clock;

constexpr int partitions = 4;
const std::string topic = "bench";

struct bench_case {
  std::int16_t version;
  proto::compression codec;
  std::size_t record_bytes;
  bool headers;
  bool read_committed;  // with half of the transactions aborted
  std::size_t records_per_partition;

  std::string name() const {
    std::string n = "v" + std::to_string(version) + "-" + proto::to_string(codec) + "-" +
                    std::to_string(record_bytes) + "b" + (headers ? "-headers" : "");
    if (read_committed) n += "-read_committed";
    return n;
  }
};

struct built {
  proto::bytes frame;                    // the Fetch response's body
  std::vector<proto::bytes> compressed;  // each compressed batch's records (decompress reference)
  std::size_t returned = 0;              // records poll() returns (aborted ones excluded)
};

// Records of 100 B: a producer's 16 KiB batch holds about 160 of them; of 1 KB, about 16.
std::size_t records_per_batch(std::size_t record_bytes) {
  return record_bytes >= 1000 ? 16 : 160;
}

std::string value_text(std::size_t bytes, std::size_t i) {
  // Text that compresses as JSON-like records do (not all zeros, not random).
  std::string v = "{\"id\":" + std::to_string(i) + ",\"kind\":\"order\",\"payload\":\"";
  while (v.size() + 2 < bytes) v += static_cast<char>('a' + (i * 7 + v.size()) % 26);
  v += "\"}";
  v.resize(bytes, ' ');
  return v;
}

proto::byte_view view(const std::string& s) {
  return proto::byte_view(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

// One partition's records: data batches (transactional under read_committed, each followed by
// its commit or abort marker; every other transaction aborted).
void build_partition(
    const bench_case& c, std::int32_t p, built& out, proto::bytes& records,
    std::vector<proto::fetch_response::fetchable_topic_response::partition_data::aborted_transaction>&
        aborted) {
  const std::size_t per_batch = records_per_batch(c.record_bytes);
  std::vector<std::string> keys;
  std::vector<std::string> values;
  const std::string header_value = "trace-0123456789abcdef";
  const std::vector<proto::header_input> hdrs{{"trace-id", view(header_value)}, {"source", view(topic)}};
  std::int64_t offset = 0;
  std::size_t written = 0;
  std::int64_t producer = 1000 + p;
  int txn = 0;
  while (written < c.records_per_partition) {
    const std::size_t n = std::min(per_batch, c.records_per_partition - written);
    keys.clear();
    values.clear();
    for (std::size_t i = 0; i < n; ++i) {
      keys.push_back("key-" + std::to_string(written + i));
      values.push_back(value_text(c.record_bytes, written + i));
    }
    std::vector<proto::record_input> in;
    for (std::size_t i = 0; i < n; ++i) {
      proto::record_input r;
      r.key = view(keys[i]);
      r.value = view(values[i]);
      r.timestamp = 1700000000000 + static_cast<std::int64_t>(written + i);
      if (c.headers) r.headers = hdrs;
      in.push_back(r);
    }
    proto::batch_encode_options o;
    o.codec = c.codec;
    o.base_offset = offset;
    o.partition_leader_epoch = 3;
    const bool abort = c.read_committed && txn % 2 == 1;
    if (c.read_committed) {
      o.transactional = true;
      o.producer_id = producer;
      o.producer_epoch = 0;
      o.base_sequence = static_cast<std::int32_t>(written);
      if (abort) aborted.push_back({producer, offset});
    }
    const std::size_t before = records.size();
    if (proto::encode_record_batch(in, o, records)) {
      std::fprintf(stderr, "kgroup-bench-decode: encoding a batch failed\n");
      std::exit(1);
    }
    if (c.codec != proto::compression::none) {
      // The batch's records section starts after the 61-byte v2 batch header.
      out.compressed.emplace_back(records.begin() + static_cast<std::ptrdiff_t>(before) + 61, records.end());
    }
    offset += static_cast<std::int64_t>(n);
    written += n;
    if (!abort) out.returned += n;
    if (c.read_committed) {
      // The marker: a control batch of one record, key (version 0, type 0 abort / 1 commit).
      const std::uint8_t key[4] = {0, 0, 0, static_cast<std::uint8_t>(abort ? 0 : 1)};
      const std::uint8_t value[6] = {0, 0, 0, 0, 0, 0};
      proto::record_input marker;
      marker.key = proto::byte_view(key, sizeof key);
      marker.value = proto::byte_view(value, sizeof value);
      marker.timestamp = 1700000000000;
      proto::batch_encode_options m;
      m.base_offset = offset;
      m.partition_leader_epoch = 3;
      m.transactional = true;
      m.control = true;
      m.producer_id = producer;
      m.producer_epoch = 0;
      if (proto::encode_record_batch(std::span<const proto::record_input>(&marker, 1), m, records)) {
        std::fprintf(stderr, "kgroup-bench-decode: encoding a marker failed\n");
        std::exit(1);
      }
      offset += 1;
      ++txn;
    }
  }
}

built build(const bench_case& c) {
  built b;
  std::vector<proto::bytes> records(partitions);
  proto::fetch_response r;
  r.responses.emplace_back();
  auto& t = r.responses.back();
  t.topic = topic;
  for (std::int32_t p = 0; p < partitions; ++p) {
    t.partitions.emplace_back();
    auto& pd = t.partitions.back();
    pd.partition_index = p;
    std::vector<proto::fetch_response::fetchable_topic_response::partition_data::aborted_transaction> aborted;
    build_partition(c, p, b, records[static_cast<std::size_t>(p)], aborted);
    pd.high_watermark = 1 << 30;
    pd.last_stable_offset = 1 << 30;
    pd.log_start_offset = 0;
    pd.aborted_transactions = aborted;
    pd.records = proto::records_view{records[static_cast<std::size_t>(p)]};
  }
  if (auto ec = proto::encode(r, c.version, b.frame)) {
    std::fprintf(stderr, "kgroup-bench-decode: encoding the response failed: %s\n", ec.message().c_str());
    std::exit(1);
  }
  return b;
}

struct one_run {
  double seconds = 0;
  std::size_t records = 0;
  std::size_t payload = 0;
};

// What poll() does with the response, `loops` times; the application reads every field.
one_run decode_path(const bench_case& c, const built& b, int loops) {
  one_run out;
  const auto frame = std::make_shared<const proto::bytes>(b.frame);
  std::uint64_t sink = 0;
  const auto t0 = clock_type::now();
  for (int l = 0; l < loops; ++l) {
    proto::fetch_response r;
    if (auto ec = proto::decode(*frame, c.version, r)) {
      std::fprintf(stderr, "kgroup-bench-decode: decoding failed: %s\n", ec.message().c_str());
      std::exit(1);
    }
    data::position_table table;
    for (std::int32_t p = 0; p < partitions; ++p) {
      const TopicPartition tp{topic, p};
      table.own(tp);
      table.position_found(tp, 0, -1, /*forced=*/true);
    }
    data::record_cursor::options o;
    o.read_committed = c.read_committed;
    data::record_cursor cursor(o);
    for (const auto& pd : r.responses.front().partitions) {
      data::fetched_slice slice{TopicPartition{topic, pd.partition_index}, 0, &pd};
      cursor.start(std::make_shared<detail::fetched_data>(data::to_fetched(slice, frame, 0)));
      for (;;) {
        data::poll_batch batch;
        const auto stop = cursor.read(batch, 500, table);  // max.poll.records' default
        for (const auto& rec : batch.records) {
          sink += static_cast<std::uint64_t>(rec.offset) + (rec.key ? rec.key->size() : 0);
          if (rec.value) {
            sink += rec.value->size() + static_cast<unsigned char>(rec.value->back());
            out.payload += rec.value->size();
          }
          for (const auto& h : rec.headers) sink += h.key.size() + (h.value ? h.value->size() : 0);
        }
        out.records += batch.records.size();
        if (stop == data::record_cursor::stop::exhausted) break;
        if (stop != data::record_cursor::stop::full) {
          std::fprintf(stderr, "kgroup-bench-decode: the cursor stopped (%s)\n",
                       cursor.error().message().c_str());
          std::exit(1);
        }
      }
      cursor.finish();
    }
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (sink == 42) std::puts("");  // keeps the reads
  return out;
}

double memcpy_seconds(const proto::bytes& frame, int loops) {
  std::vector<std::uint8_t> dst(frame.size());
  const auto t0 = clock_type::now();
  for (int l = 0; l < loops; ++l) {
    std::memcpy(dst.data(), frame.data(), frame.size());
    asm volatile("" : : "r"(dst.data()) : "memory");
  }
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double decompress_seconds(const bench_case& c, const built& b, int loops) {
  if (c.codec == proto::compression::none) return 0;
  proto::bytes out;
  const auto t0 = clock_type::now();
  for (int l = 0; l < loops; ++l) {
    for (const auto& in : b.compressed) {
      if (proto::decompress(c.codec, in, 64 * 1024 * 1024, out)) {
        std::fprintf(stderr, "kgroup-bench-decode: decompressing failed\n");
        std::exit(1);
      }
    }
  }
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int runs = 5;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--case" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: kgroup-bench-decode [--quick] [--runs N] [--case SUBSTRING]\n");
      return 2;
    }
  }
  using proto::compression;
  std::vector<bench_case> cases;
  if (quick) {
    runs = 1;
    cases.push_back({12, compression::none, 100, true, false, 400});
    cases.push_back({4, compression::lz4, 1000, false, true, 100});
  } else {
    for (std::int16_t v : {std::int16_t{4}, std::int16_t{12}}) {
      for (auto codec :
           {compression::none, compression::lz4, compression::zstd, compression::snappy, compression::gzip}) {
        for (std::size_t size : {std::size_t{100}, std::size_t{1000}}) {
          cases.push_back(
              {v, codec, size, false, false, size == 100 ? std::size_t{4000} : std::size_t{1000}});
        }
      }
    }
    cases.push_back({12, compression::none, 100, true, false, 4000});
    cases.push_back({12, compression::lz4, 100, true, false, 4000});
    cases.push_back({12, compression::none, 100, false, true, 4000});
    cases.push_back({12, compression::lz4, 100, false, true, 4000});
  }
  int failures = 0;
  for (const auto& c : cases) {
    if (!only.empty() && c.name().find(only) == std::string::npos) continue;
    const built b = build(c);
    // About 0.2 s per run (one loop in --quick).
    int loops = 1;
    if (!quick) {
      const auto probe = decode_path(c, b, 1);
      loops = std::max(1, static_cast<int>(0.2 / std::max(probe.seconds, 1e-6)));
    }
    std::vector<double> per_record;
    one_run last;
    for (int r = 0; r < runs; ++r) {
      last = decode_path(c, b, loops);
      per_record.push_back(last.seconds * 1e9 / static_cast<double>(last.records));
    }
    const std::size_t expected = b.returned * static_cast<std::size_t>(loops);
    if (last.records != expected) {
      std::fprintf(stderr, "kgroup-bench-decode: case %s returned %zu records, expected %zu\n",
                   c.name().c_str(), last.records, expected);
      ++failures;
    }
    const double ns = median(per_record);
    const double records_per_loop = static_cast<double>(b.returned);
    const double loop_seconds = ns * records_per_loop / 1e9;
    const double wire = static_cast<double>(b.frame.size()) / loop_seconds / 1e6;
    const double payload =
        static_cast<double>(last.payload) / static_cast<double>(loops) / loop_seconds / 1e6;
    const int copy_loops = std::max(1, loops * 20);
    const double copy =
        static_cast<double>(b.frame.size()) * copy_loops / memcpy_seconds(b.frame, copy_loops) / 1e6;
    const double dec = decompress_seconds(c, b, loops) * 1e9 / (records_per_loop * loops);
    std::printf(
        "case=%s version=%d codec=%s size=%zu headers=%d isolation=%s records=%zu ns_per_record=%.1f "
        "wire_mb_s=%.0f payload_mb_s=%.0f memcpy_mb_s=%.0f memcpy_ratio=%.3f decompress_ns_per_record=%.1f\n",
        c.name().c_str(), c.version, proto::to_string(c.codec), c.record_bytes, c.headers ? 2 : 0,
        c.read_committed ? "read_committed" : "read_uncommitted", b.returned, ns, wire, payload, copy,
        wire / copy, dec);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
