#include "data/record_cursor.hpp"

#include "base/sim_mutants.hpp"
#include "data/make_record.hpp"

#include <algorithm>
#include <limits>
#include <string_view>

namespace kgroup::data {

void record_cursor::start(std::shared_ptr<detail::fetched_data> data) {
  protocol::decode_options decode;
  decode.verify_crc = opts_.verify_crc;
  decode.max_decompressed_batch_bytes = opts_.max_batch_bytes;
  protocol::batch_reader batches(data->records, decode);
  cur_.emplace(state{std::move(data), std::move(batches), {}, {}, false, nullptr, {}});
  if (opts_.read_committed) cur_->aborted = data::aborted_filter(cur_->data->aborted);
}

void record_cursor::cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) {
  if (!cur_ || cur_->data->tp != tp || offset < 0) return;
  auto& d = *cur_->data;
  if (d.limit < 0 || offset < d.limit) {
    d.limit = offset;
    d.limit_epoch = epoch;
  }
}

std::size_t record_cursor::finish() {
  if (!cur_) return 0;
  const std::size_t bytes = cur_->data->bytes;
  cur_.reset();
  return bytes;
}

record_cursor::stop record_cursor::read(poll_batch& out, std::size_t max_records, position_table& table) {
  state& c = *cur_;
  // The partition's entries are looked up once per call, not once per record: those lookups
  // compare topic strings and took about a tenth of a consumer's CPU (kgroup-bench-consume).
  partition_position* pos = table.find(c.data->tp);
  if (!pos) return stop::not_owned;
  // What the records returned now keep alive, pinned (and counted in out.held) by the first record
  // that needs it: the fetched data (their topic, and the bytes of uncompressed batches) and the
  // decompressed buffer of each compressed batch they come from, also one the previous poll()
  // left half-read (the cursor lets go of it at its next batch; without this its records pointed
  // into freed memory). A batch read only to be skipped is never pinned.
  bool data_pinned = false;
  const void* pinned_batch = nullptr;
  detail::epoch_offset* advanced = nullptr;  // out.advanced[tp], created at the first advance
  auto advance_to = [&](std::int64_t position, std::int32_t epoch) {
    pos->position = position;
    pos->epoch = epoch;
    if (!advanced) advanced = &out.advanced[c.data->tp];
    *advanced = {position, epoch};
  };
  // A cut found after this data was fetched: nothing at or past it is the log's.
  const std::int64_t limit = c.data->limit >= 0 ? c.data->limit : std::numeric_limits<std::int64_t>::max();
  auto advance_below_limit = [&](std::int64_t position, std::int32_t epoch) {
    if (position >= limit) advance_to(limit, c.data->limit_epoch);
    else advance_to(position, epoch);
  };
  auto at_limit = [&] {
    if (pos->position < limit) advance_to(limit, c.data->limit_epoch);
    c.in_batch = false;
    return stop::exhausted;
  };
  auto fail = [&](std::error_code ec, const char* what) {
    error_ = ec;
    error_what_ = what;
    return stop::corrupt;
  };
  while (out.records.size() < max_records) {
    if (pos->position >= limit) return at_limit();
    if (!c.in_batch) {
      if (!c.batches.next(c.batch)) {
        if (c.batches.error()) return fail(c.batches.error(), "record batch");
        return stop::exhausted;
      }
      if (!offsets_fit(c.batch.header())) return fail(make_error_code(protocol::codec_errc::oversized), "record batch");
      c.in_batch = true;
      c.records = c.batch.records();
      c.batch_owner = c.batch.decompressed_owner();
      const auto& h = c.batch.header();
      bool skip = h.last_offset() < pos->position;
      if (opts_.read_committed) {
        // Every batch goes through the filter (it tracks transactions across batches).
        if (c.aborted.skip(h)) skip = true;
      } else if (h.is_control()) {
        skip = true;  // control records are never returned
      }
      if (skip) {
        // Still advance past it so the position moves beyond skipped (aborted or control) data.
        if (h.last_offset() >= pos->position) advance_below_limit(h.last_offset() + 1, batch_epoch(h));
        c.in_batch = false;
        continue;
      }
    }
    protocol::record r;
    const protocol::record_iterator before = c.records;  // to give the record back (budget)
    if (!c.records.next(r)) {
      if (c.records.error()) return fail(c.records.error(), "record");
      // The next position is past the batch's last offset, also when compaction removed its
      // trailing records (the fetcher continues from there too).
      const auto& h = c.batch.header();
#ifdef KGROUP_SIM_MUTANTS
      // kgroup-sim's compacted_tail mutant: the position stays after the batch's last record.
      if (sim::mutant_enabled("compacted_tail")) {
        c.in_batch = false;
        continue;
      }
#endif
      if (h.last_offset() >= pos->position) advance_below_limit(h.last_offset() + 1, batch_epoch(h));
      c.in_batch = false;
      continue;
    }
    // A record outside its batch's offsets (a broker's bytes): the position would jump past where
    // the fetcher fetches next (after the batch's last offset), and every later answer would be
    // dropped as data for another position, the partition stalled (kgroup-fuzz-broker, issue 31).
    if (r.offset < c.batch.header().base_offset || r.offset > c.batch.header().last_offset())
      return fail(make_error_code(protocol::codec_errc::oversized), "record (its offset is outside its batch)");
    if (r.offset < pos->position) continue;
    if (r.offset >= limit) return at_limit();
    // What this record costs the poll. Its decoded headers are bounded on their own: a record of
    // empty headers takes two bytes per header on the wire and sizeof(Header) decoded.
    const std::size_t header_bytes = std::size_t{r.headers.size()} * sizeof(Header);
    if (header_bytes > opts_.max_batch_bytes)
      return fail(make_error_code(protocol::codec_errc::oversized), "record (its headers)");
    const bool pin_batch = c.batch_owner && pinned_batch != c.batch_owner.get();
    const std::size_t cost = sizeof(ConsumerRecord) + header_bytes + (data_pinned ? 0 : c.data->bytes) +
                             (pin_batch ? c.batch.decompressed_size() : 0);
    if (!out.records.empty() && cost > opts_.poll_bytes - std::min(opts_.poll_bytes, out.held)) {
      c.records = before;  // read again by the next poll()
      return stop::full;
    }
    out.held += cost;
    if (!data_pinned) {
      out.owners.push_back(c.data);
      data_pinned = true;
    }
    if (pin_batch) {
      out.owners.push_back(c.batch_owner);
      pinned_batch = c.batch_owner.get();
    }
    // Reserved at the first record, not per poll(): most polls of an idle consumer return nothing.
    if (out.records.capacity() == 0) out.records.reserve(std::min<std::size_t>(max_records, 1024));
    out.records.push_back(make_record(c.data->tp, c.batch.header(), r));
    advance_to(r.offset + 1, out.records.back().leader_epoch);
  }
  return stop::full;
}

}  // namespace kgroup::data
