#include "data/share_records.hpp"

#include "data/make_record.hpp"

namespace kgroup::data {

share_read read_share_records(const TopicPartition& tp, const protocol::records_view& records,
                              std::shared_ptr<const void> owner, const share_read_options& opts) {
  share_read out;
  protocol::decode_options decode;
  decode.verify_crc = opts.verify_crc;
  decode.max_decompressed_batch_bytes = opts.max_batch_bytes;
  protocol::batch_reader batches(records, decode);
  std::int64_t next_min = 0;  // records must ascend: a repeated or earlier offset is dropped
  bool data_pinned = false;
  const void* pinned_batch = nullptr;
  protocol::record_batch batch;
  while (batches.next(batch)) {
    const auto& h = batch.header();
    if (!offsets_fit(h)) {
      out.error = make_error_code(protocol::codec_errc::oversized);
      return out;
    }
    if (h.is_control()) continue;  // transaction markers are never records
    protocol::record_iterator it = batch.records();
    protocol::record r;
    while (it.next(r)) {
      if (r.offset < h.base_offset || r.offset > h.last_offset()) {
        out.error = make_error_code(protocol::codec_errc::oversized);
        return out;
      }
      if (r.offset < next_min) continue;
      next_min = r.offset + 1;
      if (!data_pinned && owner) {
        out.owners.push_back(owner);
        data_pinned = true;
      }
      if (const auto& dec = batch.decompressed_owner(); dec && dec.get() != pinned_batch) {
        out.owners.push_back(dec);
        pinned_batch = dec.get();
      }
      out.records.push_back(make_record(tp, h, r));
    }
    if (it.error()) {
      out.error = it.error();
      return out;
    }
  }
  if (batches.error()) out.error = batches.error();
  return out;
}

}  // namespace kgroup::data
