// The record cursor: reads the records poll() returns out of fetched data, one partition's
// data at a time, across poll() calls. It skips what poll() must never return (records before
// the position, control batches, aborted transactions under read_committed), moves the
// partition's position in the position table past every batch it reads or skips, and stops at
// corrupt data without moving past it. Pure: the facade hands it fetched data and collects what
// it returns.
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "data/positions.hpp"
#include "data/txn_filter.hpp"
#include "data/types.hpp"
#include "kgroup/record.hpp"
#include "protocol/records.hpp"

namespace kgroup::data {

/// What one poll() collects: the records, what keeps their bytes alive, and the positions they
/// advanced (auto-commit commits those from the next poll() on). `held`: the bytes these records
/// keep alive (fetched data and decompressed batches they view, the records and their headers),
/// checked against record_cursor::options::poll_bytes.
struct poll_batch {
  std::vector<ConsumerRecord> records;
  std::vector<std::shared_ptr<const void>> owners;
  std::map<TopicPartition, detail::epoch_offset> advanced;
  std::size_t held = 0;
};

class record_cursor {
 public:
  struct options {
    bool read_committed = false;  // isolation.level=read_committed: aborted records skipped
    bool verify_crc = true;       // check.crcs
    /// Most bytes one compressed batch may decompress to, and most bytes one record's decoded
    /// headers may take (a record of empty headers costs ~20x its wire size as Header values).
    /// More is corrupt data (stop::corrupt): a peer's few kilobytes must not cost gigabytes.
    std::size_t max_batch_bytes = 64 * 1024 * 1024;
    /// What one poll() may hold (poll_batch::held): past it the read stops with stop::full, and
    /// the next poll() goes on. Like Java's fetch.max.bytes, not absolute: a poll's first record
    /// is returned whatever it costs (within max_batch_bytes), so every record can be read.
    std::size_t poll_bytes = std::numeric_limits<std::size_t>::max();
  };
  explicit record_cursor(options opts) : opts_(opts) {}

  /// Starts reading `data` (the previous data must be finished).
  void start(std::shared_ptr<detail::fetched_data> data);
  /// Whether data is being read.
  bool open() const { return cur_.has_value(); }
  /// The partition being read, if any.
  const TopicPartition* partition() const { return cur_ ? &cur_->data->tp : nullptr; }
  /// The log of `tp` was found cut at `offset` (`epoch`: of the record before it) after the data
  /// being read was fetched: its records at or past the cut are not returned (fetched_data::limit).
  /// Nothing when no data of `tp` is being read.
  void cut(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch);
  /// Lets go of the data being read; returns its size in bytes (0 if none).
  std::size_t finish();

  enum class stop {
    full,       // `out` holds `max_records` records or its byte budget; the data may hold more
    exhausted,  // the data is read to its end (finish() it and start the next)
    not_owned,  // the partition is gone from the position table
    corrupt,    // corrupt data at the position; error() says what
  };
  /// Appends the data's records to `out` (up to `max_records` in all), advancing positions in
  /// `table`. Data with a limit ends there: the position moves to the limit at most, and to it
  /// once the data reaches it (the logs agree below a cut, so nothing before it is skipped).
  stop read(poll_batch& out, std::size_t max_records, position_table& table);
  /// With stop::corrupt: the decoding error, and "record batch" or "record".
  std::error_code error() const { return error_; }
  const char* error_what() const { return error_what_; }

 private:
  struct state {
    std::shared_ptr<detail::fetched_data> data;
    protocol::batch_reader batches;
    protocol::record_batch batch;
    protocol::record_iterator records;
    bool in_batch = false;
    std::shared_ptr<const void> batch_owner;  // decompressed records of the current batch
    data::aborted_filter aborted;             // read_committed only
  };
  options opts_;
  std::optional<state> cur_;
  std::error_code error_;
  const char* error_what_ = "";
};

}  // namespace kgroup::data
