// The record data of a Fetch response (src/protocol/records.hpp): record batches (magic 2) and
// legacy message sets (magic 0/1), compressed or not.
//
// Input: the records bytes as they would sit in a Fetch partition. Each input is decoded twice:
// with CRC checks off (so mutations reach everything behind the checksum) and on (what the data
// path does). Every batch and every record is iterated, headers included, and every byte a view
// points at is read, so a view past its data is an ASan report.
//
// Findings beyond memory errors and UB (each aborts):
//   - a decompressed batch larger than max_decompressed_batch_bytes;
//   - inconsistent bookkeeping: consumed() past the input, a batch's raw() outside the input,
//     more records than the header declared, headers_view iterating a count other than size();
//   - a copy of the previous batch whose records read differently after the reader moved on (the
//     decompression buffer was reused while a copy still pointed into it);
//   - for_each_record disagreeing with the manual loop.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "fuzz_common.hpp"
#include "protocol/records.hpp"

using namespace kgroup::protocol;
using kgroup::fuzz::check;

namespace {

constexpr std::size_t max_batch_bytes = 1 << 20;

// A digest of everything a consumer would read from a record; touching every byte is the point.
std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001b3ull; }
std::uint64_t mix(std::uint64_t h, const nullable_byte_view& v) {
  if (!v) return mix(h, 0xffffffffffffffffull);
  h = mix(h, v->size());
  for (std::uint8_t b : *v) h = mix(h, b);
  return h;
}

struct batch_digest {
  std::uint64_t hash = 0;
  std::int32_t records = 0;
  std::error_code error;
};

batch_digest read_records(const record_batch& batch) {
  batch_digest d;
  d.hash = 0xcbf29ce484222325ull;
  auto it = batch.records();
  record rec;
  while (it.next(rec)) {
    ++d.records;
    d.hash = mix(d.hash, static_cast<std::uint64_t>(rec.offset));
    d.hash = mix(d.hash, static_cast<std::uint64_t>(rec.timestamp));
    d.hash = mix(d.hash, static_cast<std::uint64_t>(rec.attributes));
    d.hash = mix(d.hash, rec.key);
    d.hash = mix(d.hash, rec.value);
    std::size_t headers = 0;
    for (const record_header& h : rec.headers) {
      ++headers;
      for (char c : h.key) d.hash = mix(d.hash, static_cast<std::uint8_t>(c));
      d.hash = mix(d.hash, h.value);
    }
    check(headers == rec.headers.size(), "headers_view iterated a count other than size()");
    if (batch.header().is_control()) (void)parse_control_record_key(rec.key);
  }
  check(d.records <= batch.header().record_count, "more records than the batch declared");
  d.error = it.error();
  if (!d.error) check(it.remaining() == 0, "a clean end with records left");
  return d;
}

void decode_all(std::span<const std::uint8_t> data, bool verify_crc) {
  decode_options opts;
  opts.max_decompressed_batch_bytes = max_batch_bytes;
  opts.verify_crc = verify_crc;

  batch_reader batches(data, opts);
  record_batch batch;
  std::optional<record_batch> previous;
  batch_digest previous_digest;
  std::uint64_t total = 0;
  std::error_code record_error;
  while (batches.next(batch)) {
    check(batches.consumed() <= data.size(), "consumed() past the input");
    check(batch.raw().data() >= data.data() && batch.raw().data() + batch.raw().size() <= data.data() + data.size(),
          "a batch's raw() outside the input");
    check(batch.record_data().size() <= max_batch_bytes || batch.header().codec() == compression::none,
          "a decompressed batch above max_decompressed_batch_bytes");
    if (previous) {
      const auto again = read_records(*previous);
      check(again.hash == previous_digest.hash && again.records == previous_digest.records,
            "a copy of the previous batch changed after next()");
    }
    const auto d = read_records(batch);
    total += static_cast<std::uint64_t>(d.records);
    if (d.error) {
      record_error = d.error;
      break;
    }
    previous = batch;
    previous_digest = d;
  }

  // for_each_record is the same loop; it must see the same records and stop at the same place.
  std::uint64_t counted = 0;
  const auto result = for_each_record(data, opts, [&](const record_batch&, const record&) { ++counted; });
  check(counted == total, "for_each_record saw a different number of records");
  if (record_error) {
    check(result.error == record_error, "for_each_record reported a different record error");
  } else {
    check(result.error == batches.error(), "for_each_record reported a different batch error");
    check(result.partial == batches.partial(), "for_each_record disagrees on partial");
    check(result.consumed == batches.consumed(), "for_each_record disagrees on consumed()");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  decode_all(in, false);
  decode_all(in, true);
  return 0;
}
