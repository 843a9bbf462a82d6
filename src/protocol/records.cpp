#include "protocol/records.hpp"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <new>

#include "protocol/crc32c.hpp"
#include "protocol/records_internal.hpp"

#ifdef KGROUP_SIM_MUTANTS
// base/sim_mutants.hpp's declaration, repeated: the codec layer includes nothing above it.
namespace kgroup::sim {
bool mutant_enabled(const char* name) noexcept;
}
#endif

namespace kgroup::protocol {

using namespace records_detail;

namespace {

// int32-length-prefixed nullable bytes of a legacy message, as a view.
nullable_byte_view read_bytes32(reader& r) noexcept {
  std::int32_t n = r.read_int32();
  if (!r.ok() || n == -1) return std::nullopt;
  if (n < -1) {
    r.fail(codec_errc::negative_length, "message bytes");
    return std::nullopt;
  }
  if (static_cast<std::size_t>(n) > r.remaining()) {
    r.fail(codec_errc::oversized, "message bytes");
    return std::nullopt;
  }
  return r.read_raw(static_cast<std::size_t>(n));
}

// varint-length-prefixed nullable bytes of a magic-2 record, as a view.
nullable_byte_view read_varbytes(reader& r) noexcept {
  std::int32_t n = r.read_varint_length();
  if (!r.ok() || n < 0) return std::nullopt;
  return r.read_raw(static_cast<std::size_t>(n));
}

struct legacy_message {
  std::int64_t offset = 0;
  std::int32_t size = 0;
  std::uint32_t crc = 0;
  std::int8_t magic = 0;
  std::int8_t attributes = 0;
  std::int64_t timestamp = -1;
  nullable_byte_view key;
  nullable_byte_view value;
};

// Parses one legacy message (offset, size, body) from `r`. The body must be complete: in a nested
// message set a cut message is corruption, and top-level callers pass exactly one message.
std::error_code parse_legacy_message(reader& r, legacy_message& m, bool verify_crc) noexcept {
  m.offset = r.read_int64();
  m.size = r.read_int32();
  if (!r.ok()) return err(codec_errc::truncated);
  if (m.size < 0) return err(codec_errc::negative_length);
  if (static_cast<std::size_t>(m.size) > r.remaining()) return err(codec_errc::truncated);
  byte_view body = r.read_raw(static_cast<std::size_t>(m.size));

  reader b(body);
  m.crc = b.read_uint32();
  m.magic = b.read_int8();
  if (!b.ok()) return err(codec_errc::truncated);
  if (m.magic != 0 && m.magic != 1) return err(codec_errc::bad_magic);
  if (m.size < (m.magic == 0 ? v0_min_message_size : v1_min_message_size)) return err(codec_errc::truncated);
  // Checked before the lengths inside, so that a damaged length reads as the corruption it is.
  if (verify_crc && legacy_crc(body.subspan(4)) != m.crc) return err(codec_errc::bad_crc);
  m.attributes = b.read_int8();
  m.timestamp = m.magic == 1 ? b.read_int64() : -1;
  m.key = read_bytes32(b);
  m.value = read_bytes32(b);
  if (!b.ok()) return err(b.error());
  if (b.remaining() != 0) return err(codec_errc::trailing_bytes);
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// headers_view

headers_view::iterator::iterator(byte_view rest, std::uint32_t left) noexcept : rest_(rest), left_(left) {
  if (left_ > 0) parse();
}

void headers_view::iterator::parse() noexcept {
  // The record decoder validated these bytes; a failure here would only yield empty views.
  reader r(rest_);
  std::int32_t klen = r.read_varint_length();
  auto key = r.read_raw(klen > 0 ? static_cast<std::size_t>(klen) : 0);
  current_.key = std::string_view(reinterpret_cast<const char*>(key.data()), key.size());
  current_.value = read_varbytes(r);
  rest_ = rest_.subspan(rest_.size() - r.remaining());
}

headers_view::iterator& headers_view::iterator::operator++() noexcept {
  if (left_ > 0 && --left_ > 0) parse();
  return *this;
}

// ---------------------------------------------------------------------------------------------
// control records

std::optional<control_record_key> parse_control_record_key(const nullable_byte_view& key) noexcept {
  if (!key || key->size() < 4) return std::nullopt;
  reader r(*key);
  control_record_key k;
  k.version = r.read_int16();
  k.type = r.read_int16();
  if (k.version < 0) return std::nullopt;
  return k;
}

// ---------------------------------------------------------------------------------------------
// record_iterator

bool record_iterator::fail(std::error_code ec) noexcept {
  if (!err_) err_ = ec;
  left_ = 0;
  rest_ = {};
  return false;
}

bool record_iterator::next(record& out) noexcept {
  if (err_) return false;
  if (left_ <= 0) {
    // Bytes after the declared records mean the count or the framing is wrong.
    if (!rest_.empty()) return fail(err(codec_errc::trailing_bytes));
    return false;
  }
  if (rest_.empty()) return fail(err(codec_errc::truncated));
  return magic_ >= 2 ? next_v2(out) : next_legacy(out);
}

bool record_iterator::next_v2(record& out) noexcept {
  reader r(rest_);
  std::int32_t length = r.read_varint_length();
  if (!r.ok()) return fail(err(r.error()));
  if (length < 0) return fail(err(codec_errc::negative_length));
  byte_view body = r.read_raw(static_cast<std::size_t>(length));
  rest_ = rest_.subspan(rest_.size() - r.remaining());

  reader b(body);
  out.attributes = b.read_int8();
  std::int64_t timestamp_delta = b.read_varlong();
  std::int32_t offset_delta = b.read_varint();
  out.key = read_varbytes(b);
  out.value = read_varbytes(b);
  std::int32_t header_count = b.read_varint();
  if (!b.ok()) return fail(err(b.error()));
  if (header_count < 0) return fail(err(codec_errc::negative_length));
  // Each header takes at least two bytes (two lengths).
  if (static_cast<std::size_t>(header_count) > b.remaining() / 2) return fail(err(codec_errc::oversized));
  const std::uint8_t* headers_begin = b.position();
  for (std::int32_t i = 0; i < header_count; ++i) {
    std::int32_t klen = b.read_varint_length();
    if (b.ok() && klen < 0) return fail(err(codec_errc::negative_length));  // header keys are not nullable
    b.skip(static_cast<std::size_t>(std::max(klen, 0)));
    std::int32_t vlen = b.read_varint_length();
    b.skip(static_cast<std::size_t>(std::max(vlen, 0)));
    if (!b.ok()) return fail(err(b.error()));
  }
  byte_view headers(headers_begin, static_cast<std::size_t>(b.position() - headers_begin));
  if (b.remaining() != 0) return fail(err(codec_errc::trailing_bytes));

  out.offset = wrap_add(base_offset_, offset_delta);
  out.timestamp = use_max_timestamp_ ? max_timestamp_ : wrap_add(base_timestamp_, timestamp_delta);
  out.headers = headers_view(headers, static_cast<std::uint32_t>(header_count));
  --left_;
  return true;
}

bool record_iterator::next_legacy(record& out) noexcept {
  reader r(rest_);
  legacy_message m;
  // Already validated (and checksummed) by batch_reader; parse again without the CRC.
  if (auto ec = parse_legacy_message(r, m, false)) return fail(ec);
  rest_ = rest_.subspan(rest_.size() - r.remaining());
  out.offset = wrap_add(base_offset_, m.offset);
  out.timestamp = use_max_timestamp_ ? max_timestamp_ : m.timestamp;
  out.attributes = m.attributes;
  out.key = m.key;
  out.value = m.value;
  out.headers = headers_view();
  --left_;
  return true;
}

// ---------------------------------------------------------------------------------------------
// record_batch

record_iterator record_batch::records() const noexcept {
  record_iterator it;
  it.rest_ = records_;
  it.left_ = header_.record_count;
  it.magic_ = header_.magic;
  it.max_timestamp_ = header_.max_timestamp;
  if (header_.magic >= 2) {
    it.base_offset_ = header_.base_offset;
    it.base_timestamp_ = header_.base_timestamp;
    it.use_max_timestamp_ = header_.ts_type() == timestamp_type::log_append_time;
  } else {
    it.base_offset_ = legacy_offset_base_;
    it.use_max_timestamp_ = legacy_wrapper_log_append_;
  }
  return it;
}

// ---------------------------------------------------------------------------------------------
// batch_reader

bool batch_reader::fail(std::error_code ec) noexcept {
  err_ = ec;
  state_ = state::error;
  return false;
}

bool batch_reader::next(record_batch& out) noexcept {
  if (state_ != state::more) return false;
  try {
    const std::size_t rem = data_.size() - pos_;
    if (rem == 0) {
      state_ = state::end;
      return false;
    }
    if (rem < log_overhead) {
      state_ = state::partial;
      return false;
    }
    reader r(data_.subspan(pos_, log_overhead));
    r.read_int64();
    const std::int32_t size = r.read_int32();
    if (size < 0) return fail(err(codec_errc::negative_length));
    // The magic byte may lie beyond a partial tail; when it is there, reject garbage early.
    std::int8_t magic = -1;
    if (rem > magic_position) {
      magic = static_cast<std::int8_t>(data_[pos_ + magic_position]);
      if (magic < 0 || magic > 2) return fail(err(codec_errc::bad_magic));
    }
    const std::int32_t min_size = magic == 2 ? v2_min_batch_length : magic == 1 ? v1_min_message_size
                                                                                : v0_min_message_size;
    if (size < min_size) return fail(err(codec_errc::truncated));
    if (static_cast<std::size_t>(size) > rem - log_overhead) {
      state_ = state::partial;
      return false;
    }
    // A complete batch: from here on every problem is corruption. (size >= 14 implies the magic
    // byte was inside the data.)
    byte_view batch = data_.subspan(pos_, log_overhead + static_cast<std::size_t>(size));
    auto ec = magic == 2 ? decode_v2(batch, out) : decode_legacy(batch, out);
    if (ec) return fail(ec);
    out.raw_ = batch;
    out.input_owner_ = owner_;
    pos_ += batch.size();
    return true;
  } catch (const std::bad_alloc&) {
    return fail(std::make_error_code(std::errc::not_enough_memory));
  }
}

std::error_code batch_reader::decompress_into(record_batch& out, compression codec, byte_view input) {
  std::shared_ptr<bytes> buf;
  // Reuse out's buffer only if no copy of the previous batch still points into it.
  if (out.decompressed_ && out.decompressed_.use_count() == 1) {
    buf = std::move(out.decompressed_);
  } else {
    out.decompressed_.reset();
    buf = spare_ ? std::move(spare_) : std::make_shared<bytes>();
  }
  if (auto ec = decompress(codec, input, opts_.max_decompressed_batch_bytes, *buf)) {
    spare_ = std::move(buf);
    out.records_ = {};
    return ec;
  }
  out.decompressed_ = std::move(buf);
  out.records_ = *out.decompressed_;
  return {};
}

namespace {
// An uncompressed batch keeps no buffer: a copy of it must not pin an old decompression buffer.
void take_back_buffer(std::shared_ptr<bytes>& spare, std::shared_ptr<bytes>& held) noexcept {
  if (held && held.use_count() == 1 && !spare) spare = std::move(held);
  held.reset();
}
}  // namespace

std::error_code batch_reader::decode_v2(byte_view batch, record_batch& out) {
  reader r(batch);
  record_batch_header h;
  h.base_offset = r.read_int64();
  h.batch_length = r.read_int32();
  h.partition_leader_epoch = r.read_int32();
  h.magic = r.read_int8();
  h.crc = r.read_uint32();
  // The CRC covers attributes to the end, so check it before believing any of those fields.
  if (opts_.verify_crc && crc32c(batch.subspan(v2_crc_start)) != h.crc) return err(codec_errc::bad_crc);
  h.attributes = r.read_int16();
  h.last_offset_delta = r.read_int32();
  h.base_timestamp = r.read_int64();
  h.max_timestamp = r.read_int64();
  h.producer_id = r.read_int64();
  h.producer_epoch = r.read_int16();
  h.base_sequence = r.read_int32();
  h.record_count = r.read_int32();
  if (!r.ok()) return err(codec_errc::truncated);  // cannot happen: the caller checked the size

  auto codec = compression_from_attributes(h.attributes);
  if (!codec) return err(codec_errc::unknown_compression);
  if (h.record_count < 0) return err(codec_errc::negative_length);
  byte_view body = batch.subspan(v2_header_size);
  const auto count = static_cast<std::size_t>(h.record_count);

  if (*codec == compression::none) {
    if (count > body.size() / v2_min_record_size) return err(codec_errc::oversized);
    take_back_buffer(spare_, out.decompressed_);
    out.records_ = body;
  } else {
    // Reject an impossible count before spending time on decompression.
    if (count > opts_.max_decompressed_batch_bytes / v2_min_record_size) return err(codec_errc::oversized);
    if (auto ec = decompress_into(out, *codec, body)) return ec;
    if (count > out.records_.size() / v2_min_record_size) return err(codec_errc::oversized);
  }
  out.header_ = h;
  out.legacy_offset_base_ = 0;
  out.legacy_wrapper_log_append_ = false;
  return {};
}

std::error_code batch_reader::decode_legacy(byte_view batch, record_batch& out) {
  reader r(batch);
  legacy_message m;
  if (auto ec = parse_legacy_message(r, m, opts_.verify_crc)) return ec;

  record_batch_header h;
  h.base_offset = m.offset;
  h.batch_length = m.size;
  h.partition_leader_epoch = -1;
  h.magic = m.magic;
  h.crc = m.crc;
  h.attributes = static_cast<std::int16_t>(static_cast<std::uint8_t>(m.attributes));
  h.last_offset_delta = 0;
  h.base_timestamp = m.timestamp;
  h.max_timestamp = m.timestamp;
  h.record_count = 1;

  const int codec_id = m.attributes & batch_attribute::compression_mask;
  if (codec_id == static_cast<int>(compression::none)) {
    take_back_buffer(spare_, out.decompressed_);
    out.records_ = batch;  // the message itself is a one-message set
    out.header_ = h;
    out.legacy_offset_base_ = 0;
    out.legacy_wrapper_log_append_ = false;
    return {};
  }
  // zstd (4) arrived with magic 2; a legacy message cannot carry it.
  if (codec_id > static_cast<int>(compression::lz4)) return err(codec_errc::unknown_compression);
  if (!m.value) return err(codec_errc::null_not_allowed);
  if (auto ec = decompress_into(out, static_cast<compression>(codec_id), *m.value)) return ec;

  // Validate the whole inner set now, so iteration cannot fail, and find the offsets the
  // relative-offset arithmetic needs (the last inner offset).
  reader inner(out.records_);
  std::size_t count = 0;
  std::int64_t first_offset = 0, last_offset = 0, first_timestamp = -1;
  while (inner.remaining() > 0) {
    legacy_message im;
    if (auto ec = parse_legacy_message(inner, im, opts_.verify_crc)) return ec;
    if (im.magic != m.magic) return err(codec_errc::bad_magic);
    // Nested compression never existed on the wire; refuse it rather than recurse.
    if ((im.attributes & batch_attribute::compression_mask) != 0) return err(codec_errc::field_not_supported);
    if (count == 0) {
      first_offset = im.offset;
      first_timestamp = im.timestamp;
    } else if (im.offset <= last_offset) {
      // Brokers wrote increasing inner offsets. Others would have the cursor drop a record silently
      // (at an offset it has passed) or return records out of order: corrupt, like the offset
      // checks below.
      return err(codec_errc::oversized);
    }
    last_offset = im.offset;
    ++count;
  }
  if (count == 0) return err(codec_errc::truncated);  // a wrapper must hold a message
  if (count > max_int32) return err(codec_errc::oversized);

  // The batch ends at the wrapper's offset for both magics, as Java's lastOffset() does: the
  // fetcher continues after it (next_fetch_offset reads only the outer message), so the cursor
  // must move the position there too, or the next answer fits no position and the partition
  // stalls. Magic 1 wrappers (KIP-31) hold offsets relative to the first inner message and carry
  // the absolute offset of the last one, so they end there by construction; a wrapper below the
  // last relative offset gives negative offsets (Java refuses it too). Magic 0 inner offsets are
  // absolute and a broker's bytes need not agree with the wrapper: one past the last message is
  // read as Java reads it (no record lies between); one below it is corrupt, as Java would move
  // the position back behind records it returned and return them again.
  const std::int64_t inner_span = wrap_sub(last_offset, first_offset);
  if (inner_span < 0 || inner_span > std::numeric_limits<std::int32_t>::max())
    return err(codec_errc::oversized);
  const std::int64_t adjust = m.magic == 1 ? wrap_sub(m.offset, last_offset) : 0;
  const std::int64_t base = m.magic == 1 ? wrap_sub(m.offset, inner_span) : first_offset;
  if (base < 0 || m.offset < base) return err(codec_errc::oversized);  // no position is negative
  if (m.magic == 0 && m.offset < last_offset) return err(codec_errc::oversized);
  std::int64_t span = m.offset - base;  // both non-negative: cannot overflow
#ifdef KGROUP_SIM_MUTANTS
  // kgroup-sim's legacy_wrapper_end mutant: a magic-0 wrapper's batch ends at its last message.
  if (m.magic == 0 && sim::mutant_enabled("legacy_wrapper_end")) span = inner_span;
#endif
  if (span > std::numeric_limits<std::int32_t>::max()) return err(codec_errc::oversized);
  const bool log_append = m.magic == 1 && (m.attributes & batch_attribute::timestamp_type) != 0;

  h.base_offset = base;
  h.last_offset_delta = static_cast<std::int32_t>(span);
  h.base_timestamp = log_append ? m.timestamp : first_timestamp;
  h.record_count = static_cast<std::int32_t>(count);
  out.header_ = h;
  out.legacy_offset_base_ = adjust;
  out.legacy_wrapper_log_append_ = log_append;
  return {};
}

// ---------------------------------------------------------------------------------------------
// encoders

}  // namespace kgroup::protocol
