// The share record reader: the records of one partition of a ShareFetch answer, as poll()
// returns them (ConsumerRecord viewing the answer's bytes or a decompressed batch). Which of them
// the member may see (those inside its acquired ranges, with their delivery counts) is the
// acknowledgement tracker's decision (data/share_acks.hpp); control batches are never records.
// Pure.
#pragma once

#include <cstdint>
#include <memory>
#include <system_error>
#include <vector>

#include "data/types.hpp"
#include "kgroup/record.hpp"
#include "protocol/records.hpp"

namespace kgroup::data {

/// What one partition's data decodes to.
struct share_read {
  /// The data records in offset order (each offset once), viewing `owners`' bytes; their topic
  /// views the TopicPartition given to read_share_records(), which must outlive them.
  std::vector<ConsumerRecord> records;
  std::vector<std::shared_ptr<const void>> owners;
  /// Corrupt data (CRC, unparsable, offsets outside their batch): `records` ends before it.
  std::error_code error;
};

struct share_read_options {
  bool verify_crc = true;                          // check.crcs
  std::size_t max_batch_bytes = 64 * 1024 * 1024;  // most bytes one batch may decompress to
};

/// Reads `records` (one partition's record data; `owner` keeps its bytes alive).
share_read read_share_records(const TopicPartition& tp, const protocol::records_view& records,
                              std::shared_ptr<const void> owner, const share_read_options& opts = {});

}  // namespace kgroup::data
