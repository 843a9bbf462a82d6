// Kafka record data: the `records` field of a Fetch response partition, and encoders for it.
//
// Pure code: no Asio, no threads. Decoders never throw and never trust a length or count.
//
// Formats: record batches (magic 2) and legacy message sets (magic 0 and 1, including compressed
// wrapper messages). A legacy top-level message is presented as a batch of its own, so callers
// see one shape for all three magics (as the Java client does).
//
// Reading, in two levels:
//
//   batch_reader batches(partition.records->data, opts);
//   record_batch batch;          // reused: keeps its decompression buffer between batches
//   record rec;
//   while (batches.next(batch)) {
//     if (batch.header().is_control()) { ... }
//     auto it = batch.records();
//     while (it.next(rec)) use(rec.offset, rec.key, rec.value, rec.headers);
//     if (it.error()) ...;        // a corrupt record inside a well-framed batch
//   }
//   if (batches.error()) ...;     // a complete but corrupt batch
//   // batches.partial(): the broker cut the last batch at its size limit; not an error.
//
// Lifetimes (zero copy): a record's key, value and header views point
//   - into the input span for uncompressed batches, so the input must outlive them;
//   - into the record_batch's decompression buffer for compressed batches, so that batch object
//     (or a copy of it: copies share the buffer) must outlive them, and the next next(batch) call
//     on the same object releases it.
// A record_batch copy is cheap (a header, spans and two shared_ptrs) and keeps its views valid as
// long as the input is alive; pass the input's owner to batch_reader (e.g. the
// std::shared_ptr<const bytes> of a fetch response) and each batch keeps the input alive too.
// No heap allocation happens per record, nor per uncompressed batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>

#include "protocol/compression.hpp"
#include "protocol/primitives.hpp"

namespace kgroup::protocol {

using byte_view = std::span<const std::uint8_t>;
/// Nullable bytes: std::nullopt is null (length -1 on the wire); an empty span is empty bytes.
using nullable_byte_view = std::optional<byte_view>;

enum class timestamp_type : std::int8_t {
  none = -1,            // magic 0 messages carry no timestamp
  create_time = 0,      // set by the producer
  log_append_time = 1,  // set by the broker; for a batch it is max_timestamp
};

/// Bits of the int16 attributes of a magic-2 batch (bits 0-3 also of legacy int8 attributes).
namespace batch_attribute {
inline constexpr std::int16_t compression_mask = 0x07;
inline constexpr std::int16_t timestamp_type = 0x08;
inline constexpr std::int16_t transactional = 0x10;
inline constexpr std::int16_t control = 0x20;
inline constexpr std::int16_t delete_horizon = 0x40;  // KIP-534: base_timestamp is the delete horizon
}  // namespace batch_attribute

/// The fixed header of a batch. For a legacy message (magic 0/1) the fields are derived the way
/// the Java client derives them: base_offset is the first (inner) record's offset, batch_length
/// the message size, max_timestamp the (wrapper) message timestamp, producer fields -1.
struct record_batch_header {
  std::int64_t base_offset = 0;
  std::int32_t batch_length = 0;  // bytes after this field
  std::int32_t partition_leader_epoch = -1;
  std::int8_t magic = 2;
  std::uint32_t crc = 0;  // CRC-32C for magic 2, CRC-32 (of the outer message) for magic 0/1
  std::int16_t attributes = 0;
  std::int32_t last_offset_delta = 0;
  std::int64_t base_timestamp = -1;
  std::int64_t max_timestamp = -1;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t base_sequence = -1;
  std::int32_t record_count = 0;

  /// Compression codec from the attributes (a decoded batch always has a known one).
  compression codec() const noexcept { return static_cast<compression>(attributes & batch_attribute::compression_mask); }
  timestamp_type ts_type() const noexcept {
    if (magic == 0) return timestamp_type::none;
    return (attributes & batch_attribute::timestamp_type) ? timestamp_type::log_append_time
                                                           : timestamp_type::create_time;
  }
  /// Part of a transaction: the data path filters aborted ones by producer_id.
  bool is_transactional() const noexcept { return magic >= 2 && (attributes & batch_attribute::transactional); }
  /// A control batch (transaction markers): its records are not user data.
  bool is_control() const noexcept { return magic >= 2 && (attributes & batch_attribute::control); }
  bool has_delete_horizon() const noexcept { return magic >= 2 && (attributes & batch_attribute::delete_horizon); }
  /// Offset of the last record the batch covered when written (compaction may have removed it).
  std::int64_t last_offset() const noexcept {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(base_offset) + static_cast<std::uint64_t>(last_offset_delta));
  }
  std::int64_t next_offset() const noexcept {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(last_offset()) + 1);
  }
};

/// One record header. Views follow the record's lifetime rules.
struct record_header {
  std::string_view key;
  nullable_byte_view value;
};

/// The headers of one record, parsed lazily from bytes validated when the record was decoded
/// (so iterating cannot fail). A forward range of record_header.
class headers_view {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = record_header;
    using difference_type = std::ptrdiff_t;
    using pointer = const record_header*;
    using reference = const record_header&;

    iterator() = default;
    reference operator*() const noexcept { return current_; }
    pointer operator->() const noexcept { return &current_; }
    iterator& operator++() noexcept;
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& o) const noexcept { return left_ == o.left_; }

   private:
    friend class headers_view;
    iterator(byte_view rest, std::uint32_t left) noexcept;
    void parse() noexcept;

    byte_view rest_;         // encoded headers not yet parsed
    std::uint32_t left_ = 0; // headers left including current_; 0 is the end
    record_header current_;
  };

  headers_view() = default;
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  iterator begin() const noexcept { return {data_, count_}; }
  iterator end() const noexcept { return {}; }
  /// The encoded headers (without the count), e.g. to copy them out cheaply.
  byte_view raw() const noexcept { return data_; }

 private:
  friend class record_iterator;
  headers_view(byte_view data, std::uint32_t count) noexcept : data_(data), count_(count) {}

  byte_view data_;
  std::uint32_t count_ = 0;
};

/// One decoded record. Views follow the lifetime rules at the top of this file.
struct record {
  std::int64_t offset = 0;
  std::int64_t timestamp = -1;  // -1 for magic 0
  std::int8_t attributes = 0;   // record attributes (magic 2: unused) or legacy message attributes
  nullable_byte_view key;
  nullable_byte_view value;
  headers_view headers;         // always empty for magic 0/1
};

/// Control record types (the int16 after the version in a control record key).
enum class control_record_type : std::int16_t { abort = 0, commit = 1 };

/// The key of a record in a control batch.
struct control_record_key {
  std::int16_t version = 0;
  std::int16_t type = 0;  // compare with control_record_type; other values are KRaft-internal
  bool is_abort() const noexcept { return type == static_cast<std::int16_t>(control_record_type::abort); }
  bool is_commit() const noexcept { return type == static_cast<std::int16_t>(control_record_type::commit); }
};

/// Parses a control record key (int16 version >= 0, int16 type; later versions may append
/// fields, which are ignored). std::nullopt for a null or short key or a negative version.
std::optional<control_record_key> parse_control_record_key(const nullable_byte_view& key) noexcept;

/// Decoder limits and checks.
struct decode_options {
  /// Most bytes one compressed batch may decompress to; more is codec_errc::decompression_bound.
  /// The data path derives it from its fetch size configuration (record_cursor::options).
  std::size_t max_decompressed_batch_bytes = 64 * 1024 * 1024;
  /// Verify batch and message checksums (Java's check.crcs). Disable only for trusted data.
  bool verify_crc = true;
};

/// Yields the records of one batch in order. Obtained from record_batch::records(); it holds views
/// into the batch's data, so the batch must outlive it.
class record_iterator {
 public:
  record_iterator() = default;

  /// Decodes the next record into `out`. Returns false at the end of the batch or on error; then
  /// error() tells which. Errors: truncated (fewer records than declared), trailing_bytes (bytes
  /// after the declared records, or inside a record after its last header), negative_length,
  /// oversized, bad_varint. Never throws; no allocation.
  bool next(record& out) noexcept;
  /// The first error met, or {} (a clean end or not finished yet).
  std::error_code error() const noexcept { return err_; }
  /// Records declared but not yet returned.
  std::int32_t remaining() const noexcept { return left_; }

 private:
  friend class record_batch;
  bool next_v2(record& out) noexcept;
  bool next_legacy(record& out) noexcept;
  bool fail(std::error_code ec) noexcept;

  byte_view rest_;
  std::int32_t left_ = 0;
  std::int8_t magic_ = 2;
  // magic 2: the batch base offset; legacy: added to each message's offset (non-zero only for the
  // relative inner offsets of a magic-1 wrapper).
  std::int64_t base_offset_ = 0;
  std::int64_t base_timestamp_ = -1;
  std::int64_t max_timestamp_ = -1;  // log-append time (magic 2) or the wrapper's timestamp
  bool use_max_timestamp_ = false;   // log-append time: every record takes max_timestamp_
  std::error_code err_;
};

/// One batch produced by batch_reader. Copyable; copies share the decompressed data.
class record_batch {
 public:
  record_batch() = default;

  const record_batch_header& header() const noexcept { return header_; }
  /// An iterator over the records. Valid while this batch (or a copy) and the input live.
  record_iterator records() const noexcept;
  /// The whole batch as received (from base offset to its end), in the input.
  byte_view raw() const noexcept { return raw_; }
  /// The (decompressed) record bytes: for magic 2 the records section, for legacy data a message
  /// set (the message itself when uncompressed).
  byte_view record_data() const noexcept { return records_; }
  /// The decompressed buffer of a compressed batch (nullptr otherwise): holding it keeps the
  /// views of this batch's records valid after the batch object is gone.
  std::shared_ptr<const void> decompressed_owner() const noexcept { return decompressed_; }
  /// The bytes of that buffer (0 for an uncompressed batch).
  std::size_t decompressed_size() const noexcept { return decompressed_ ? decompressed_->size() : 0; }

 private:
  friend class batch_reader;

  record_batch_header header_;
  byte_view raw_;
  byte_view records_;
  std::shared_ptr<bytes> decompressed_;       // owns records_ for compressed batches
  std::shared_ptr<const void> input_owner_;   // optional: keeps the input alive
  std::int64_t legacy_offset_base_ = 0;       // see record_iterator::base_offset_
  bool legacy_wrapper_log_append_ = false;    // magic-1 wrapper with log-append time
};

/// Splits record data into batches. Stops cleanly at a partial trailing batch (a Fetch response is
/// cut at the broker's size limit), and with an error at a complete batch that is corrupt.
/// Not thread-safe; one reader per thread.
class batch_reader {
 public:
  /// `data` must outlive the reader and every view taken from it. `input_owner`, if given, is
  /// shared with every batch produced, so batches keep the input alive.
  explicit batch_reader(byte_view data, decode_options opts = {},
                        std::shared_ptr<const void> input_owner = nullptr) noexcept
      : data_(data), opts_(opts), owner_(std::move(input_owner)) {}
  explicit batch_reader(const records_view& records, decode_options opts = {},
                        std::shared_ptr<const void> input_owner = nullptr) noexcept
      : batch_reader(records.data, opts, std::move(input_owner)) {}

  /// Decodes the next batch into `out`. Returns false when there is none: at the end of the data,
  /// at a partial trailing batch (partial() is true) or on error (error() is set). A decompression
  /// buffer held by `out` and shared with no copy is reused.
  ///
  /// Errors: bad_magic; bad_crc; truncated (a batch length too small for its own header or
  /// content); negative_length; oversized (a record count the data cannot hold);
  /// unknown_compression; decompression_failed; decompression_bound (above
  /// decode_options::max_decompressed_batch_bytes); null_not_allowed (legacy wrapper without a
  /// value); field_not_supported (a compressed message inside a legacy wrapper); and the
  /// truncated/trailing_bytes/... of a malformed legacy inner message; std::errc::not_enough_memory.
  /// Never throws. Record-level errors of magic-2 batches surface from record_iterator instead.
  bool next(record_batch& out) noexcept;

  std::error_code error() const noexcept { return err_; }
  /// True when reading stopped at an incomplete trailing batch; consumed() excludes it.
  bool partial() const noexcept { return state_ == state::partial; }
  /// True once next() has returned false.
  bool done() const noexcept { return state_ != state::more; }
  /// Bytes of complete batches returned so far (the offset of the first byte not yet decoded).
  std::size_t consumed() const noexcept { return pos_; }

 private:
  enum class state {
    more,     // next() may return another batch
    end,      // all data consumed
    partial,  // stopped before an incomplete trailing batch
    error,    // stopped at a corrupt batch; err_ says why
  };

  bool fail(std::error_code ec) noexcept;
  std::error_code decode_v2(byte_view batch, record_batch& out);
  std::error_code decode_legacy(byte_view batch, record_batch& out);
  std::error_code decompress_into(record_batch& out, compression codec, byte_view input);

  byte_view data_;
  decode_options opts_;
  std::shared_ptr<const void> owner_;
  std::size_t pos_ = 0;
  state state_ = state::more;
  std::error_code err_;
  // A decompression buffer taken back from a batch nobody else shares, for the next compressed
  // batch: avoids one allocation per compressed batch in the common reuse pattern.
  std::shared_ptr<bytes> spare_;
};

/// What for_each_record saw.
struct decode_result {
  std::error_code error;     // first batch- or record-level error, {} if none
  std::size_t consumed = 0;  // batch_reader::consumed() at the stop
  bool partial = false;      // stopped at an incomplete trailing batch
};

/// Calls fn(const record_batch&, const record&) for every record of every batch (control batches
/// included; check batch.header().is_control()). Stops at the first error. Throws only what fn
/// throws.
template <class Fn>
decode_result for_each_record(byte_view data, const decode_options& opts, Fn&& fn) {
  batch_reader batches(data, opts);
  record_batch batch;
  record rec;
  while (batches.next(batch)) {
    auto it = batch.records();
    while (it.next(rec)) fn(static_cast<const record_batch&>(batch), static_cast<const record&>(rec));
    if (it.error()) return {it.error(), batches.consumed(), false};
  }
  return {batches.error(), batches.consumed(), batches.partial()};
}

// ---------------------------------------------------------------------------------------------
// Encoding (tests now, a producer maybe later). Encoders append to `out`.

struct header_input {
  std::string_view key;
  nullable_byte_view value;
};

struct record_input {
  nullable_byte_view key;
  nullable_byte_view value;
  std::int64_t timestamp = 0;
  std::span<const header_input> headers;
  /// Offset relative to the batch base offset; defaults to the record's index (gaps model a
  /// compacted batch).
  std::optional<std::int32_t> offset_delta;
};

struct batch_encode_options {
  compression codec = compression::none;
  std::int64_t base_offset = 0;
  std::int32_t partition_leader_epoch = -1;
  timestamp_type ts_type = timestamp_type::create_time;
  /// With log_append_time: the batch max_timestamp (the broker's append time).
  std::int64_t log_append_time = -1;
  bool transactional = false;
  bool control = false;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t base_sequence = -1;
  /// Defaults to the largest offset delta (0 for an empty batch).
  std::optional<std::int32_t> last_offset_delta;
};

/// Appends one magic-2 record batch holding `records` to `out`, with a correct CRC-32C.
/// base_timestamp is the first record's timestamp (-1 if none), max_timestamp the largest (or
/// log_append_time). Returns {} or codec_errc::oversized (a size beyond int32),
/// codec_errc::unknown_compression, std::errc::not_enough_memory; on error `out` is restored.
std::error_code encode_record_batch(std::span<const record_input> records, const batch_encode_options& opts,
                                    bytes& out) noexcept;

struct legacy_message_input {
  std::int64_t offset = 0;      // absolute offset
  std::int64_t timestamp = -1;  // ignored for magic 0
  nullable_byte_view key;
  nullable_byte_view value;
};

struct legacy_encode_options {
  std::int8_t magic = 1;  // 0 or 1
  /// none: one message per input. gzip/snappy/lz4: one wrapper message whose offset is the last
  /// input's offset and whose value is the compressed inner message set; inner offsets are
  /// relative to the first input for magic 1 and absolute for magic 0, as brokers wrote them.
  compression codec = compression::none;
  timestamp_type ts_type = timestamp_type::create_time;  // magic 1 only
  /// With log_append_time: the wrapper timestamp; otherwise the wrapper carries the largest
  /// inner timestamp.
  std::int64_t log_append_time = -1;
  /// A compressed wrapper's offset other than the last input's: a magic-0 wrapper past its last
  /// message, as compaction leaves one whose last messages it removed.
  std::optional<std::int64_t> wrapper_offset;
};

/// Appends a legacy (magic 0 or 1) message set to `out`, with correct CRC-32s. For tests of the
/// legacy decoder. Returns {} or unsupported_version (magic not 0/1), unknown_compression (zstd
/// or an unknown codec), oversized, std::errc::not_enough_memory; on error `out` is restored.
std::error_code encode_legacy_message_set(std::span<const legacy_message_input> messages,
                                          const legacy_encode_options& opts, bytes& out) noexcept;

}  // namespace kgroup::protocol
