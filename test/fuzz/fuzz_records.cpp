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
//   - for_each_record disagreeing with the manual loop;
//   - the read_committed filter (data/txn_filter.hpp), run over the decoded batch headers with an
//     aborted-transaction list drawn from them: returning a control batch, skipping a
//     non-transactional batch or one of a producer with no aborted transaction, or (for batches in
//     offset order, as brokers send them) deciding otherwise than the rule written out directly.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "data/txn_filter.hpp"
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

// The read_committed rule written out directly: a transactional batch is aborted when its producer
// has an aborted transaction starting at or before the batch's last offset that no control batch
// of that producer before it ended.
bool aborted_by_rule(const std::vector<record_batch_header>& headers, std::size_t i,
                     const std::vector<std::pair<std::int64_t, std::int64_t>>& aborted) {
  const auto& b = headers[i];
  if (b.is_control() || !b.is_transactional()) return false;
  for (const auto& [pid, first] : aborted) {
    if (pid != b.producer_id || first > b.last_offset()) continue;
    bool ended = false;
    for (std::size_t j = 0; j < i && !ended; ++j)
      ended = headers[j].is_control() && headers[j].producer_id == pid && headers[j].last_offset() >= first;
    if (!ended) return true;
  }
  return false;
}

void filter_transactions(const std::vector<record_batch_header>& headers) {
  // Aborted transactions drawn from the input: those of every transactional batch with an odd base
  // offset, and one of a producer no batch has.
  std::vector<std::pair<std::int64_t, std::int64_t>> aborted;
  for (const auto& h : headers) {
    if (h.is_transactional() && !h.is_control() && (h.base_offset & 1) != 0) aborted.emplace_back(h.producer_id, h.base_offset);
  }
  aborted.emplace_back(-12345, 0);
  bool in_order = true;  // each batch after the previous one, its last offset not below its base
  for (std::size_t i = 0; i < headers.size(); ++i) {
    in_order = in_order && headers[i].last_offset() >= headers[i].base_offset &&
               (i == 0 || headers[i].base_offset > headers[i - 1].last_offset());
  }
  kgroup::data::aborted_filter filter(aborted), none;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const auto& h = headers[i];
    const bool skip = filter.skip(h);
    check(none.skip(h) == h.is_control(), "without aborted transactions, a batch other than a control one was skipped");
    if (h.is_control()) check(skip, "a control batch was returned");
    if (!h.is_transactional()) check(!skip || h.is_control(), "a non-transactional batch was skipped");
    bool listed = false;
    for (const auto& a : aborted) listed = listed || a.first == h.producer_id;
    if (!listed) check(!skip || h.is_control(), "a batch of a producer without an aborted transaction was skipped");
    if (in_order && !h.is_control()) check(skip == aborted_by_rule(headers, i, aborted), "the filter broke the read_committed rule");
  }
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
  std::vector<record_batch_header> headers;
  while (batches.next(batch)) {
    if (batch.header().magic >= 2) headers.push_back(batch.header());
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
  filter_transactions(headers);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  decode_all(in, false);
  decode_all(in, true);
  return 0;
}
