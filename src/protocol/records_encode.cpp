// Encoding record batches (magic 2) and legacy message sets (magic 0 and 1): what tests, the
// benchmarks and the fake broker write; the client itself only decodes (records.cpp).
#include <algorithm>
#include <limits>

#include "protocol/crc32c.hpp"
#include "protocol/records.hpp"
#include "protocol/records_internal.hpp"

namespace kgroup::protocol {

using namespace records_detail;

namespace {

bool known_codec(compression c) noexcept {
  return static_cast<int>(c) >= 0 && static_cast<int>(c) <= static_cast<int>(compression::zstd);
}

byte_view as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

bool write_varbytes(writer& w, const nullable_byte_view& v) {
  if (!v) {
    w.write_varint(-1);
    return true;
  }
  if (v->size() > max_int32) return false;
  w.write_varint(static_cast<std::int32_t>(v->size()));
  w.write_raw(*v);
  return true;
}

std::error_code encode_v2(std::span<const record_input> records, const batch_encode_options& opts,
                          bytes& out) {
  if (!known_codec(opts.codec)) return err(codec_errc::unknown_compression);
  if (records.size() > max_int32) return err(codec_errc::oversized);

  std::int64_t base_ts = records.empty() ? -1 : records.front().timestamp;
  std::int64_t max_ts = -1;
  std::int32_t last_delta = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    max_ts = i == 0 ? records[i].timestamp : std::max(max_ts, records[i].timestamp);
    last_delta = std::max(last_delta, records[i].offset_delta.value_or(static_cast<std::int32_t>(i)));
  }
  if (opts.last_offset_delta) last_delta = *opts.last_offset_delta;
  if (opts.ts_type == timestamp_type::log_append_time) max_ts = opts.log_append_time;

  auto attributes = static_cast<std::int16_t>(static_cast<int>(opts.codec));
  if (opts.ts_type == timestamp_type::log_append_time) attributes |= batch_attribute::timestamp_type;
  if (opts.transactional) attributes |= batch_attribute::transactional;
  if (opts.control) attributes |= batch_attribute::control;

  const std::size_t start = out.size();
  writer w(out);
  w.write_int64(opts.base_offset);
  w.write_int32(0);  // batch length, patched below
  w.write_int32(opts.partition_leader_epoch);
  w.write_int8(2);
  w.write_uint32(0);  // crc, patched below
  w.write_int16(attributes);
  w.write_int32(last_delta);
  w.write_int64(base_ts);
  w.write_int64(max_ts);
  w.write_int64(opts.producer_id);
  w.write_int16(opts.producer_epoch);
  w.write_int32(opts.base_sequence);
  w.write_int32(static_cast<std::int32_t>(records.size()));

  bytes plain;  // uncompressed records, only when compressing
  writer body(opts.codec == compression::none ? out : plain);
  bytes rec;  // one record, reused: room for a small one at once (it grows for a larger one)
  rec.reserve(64);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const record_input& in = records[i];
    rec.clear();
    writer rw(rec);
    rw.write_int8(0);
    rw.write_varlong(wrap_sub(in.timestamp, base_ts));
    rw.write_varint(in.offset_delta.value_or(static_cast<std::int32_t>(i)));
    if (!write_varbytes(rw, in.key) || !write_varbytes(rw, in.value)) return err(codec_errc::oversized);
    if (in.headers.size() > max_int32) return err(codec_errc::oversized);
    rw.write_varint(static_cast<std::int32_t>(in.headers.size()));
    for (const header_input& hdr : in.headers) {
      if (!write_varbytes(rw, as_bytes(hdr.key)) || !write_varbytes(rw, hdr.value))
        return err(codec_errc::oversized);
    }
    if (rec.size() > max_int32) return err(codec_errc::oversized);
    body.write_varint(static_cast<std::int32_t>(rec.size()));
    body.write_raw(rec);
  }
  if (opts.codec != compression::none) {
    bytes packed;
    if (auto ec = compress(opts.codec, plain, packed)) return ec;
    w.write_raw(packed);
  }

  const std::size_t length = out.size() - start - log_overhead;
  if (length > max_int32) return err(codec_errc::oversized);
  w.patch_int32(start + 8, static_cast<std::int32_t>(length));
  const std::uint32_t crc = crc32c(byte_view(out).subspan(start + v2_crc_start));
  w.patch_int32(start + 17, static_cast<std::int32_t>(crc));
  return {};
}

// Appends one legacy message: offset, size, crc, magic, attributes, [timestamp], key, value.
std::error_code write_legacy_message(bytes& out, std::int8_t magic, std::int8_t attributes,
                                     std::int64_t offset, std::int64_t timestamp,
                                     const nullable_byte_view& key, const nullable_byte_view& value) {
  writer w(out);
  w.write_int64(offset);
  const std::size_t size_at = out.size();
  w.write_int32(0);
  const std::size_t body_at = out.size();
  w.write_uint32(0);
  w.write_int8(magic);
  w.write_int8(attributes);
  if (magic == 1) w.write_int64(timestamp);
  for (const auto* v : {&key, &value}) {
    if (!*v) {
      w.write_int32(-1);
      continue;
    }
    if ((*v)->size() > max_int32) return err(codec_errc::oversized);
    w.write_int32(static_cast<std::int32_t>((*v)->size()));
    w.write_raw(**v);
  }
  const std::size_t size = out.size() - body_at;
  if (size > max_int32) return err(codec_errc::oversized);
  w.patch_int32(size_at, static_cast<std::int32_t>(size));
  w.patch_int32(body_at, static_cast<std::int32_t>(legacy_crc(byte_view(out).subspan(body_at + 4))));
  return {};
}

std::error_code encode_legacy(std::span<const legacy_message_input> messages,
                              const legacy_encode_options& opts, bytes& out) {
  if (opts.magic != 0 && opts.magic != 1) return err(codec_errc::unsupported_version);
  if (!known_codec(opts.codec) || opts.codec == compression::zstd)
    return err(codec_errc::unknown_compression);
  const bool log_append = opts.magic == 1 && opts.ts_type == timestamp_type::log_append_time;
  const std::int8_t ts_bit = log_append ? static_cast<std::int8_t>(batch_attribute::timestamp_type) : 0;

  if (opts.codec == compression::none) {
    for (const auto& m : messages) {
      std::int64_t ts = log_append ? opts.log_append_time : m.timestamp;
      if (auto ec = write_legacy_message(out, opts.magic, ts_bit, m.offset, ts, m.key, m.value)) return ec;
    }
    return {};
  }
  if (messages.empty()) return {};

  bytes inner;
  std::int64_t max_ts = messages.front().timestamp;
  for (const auto& m : messages) {
    std::int64_t offset = opts.magic == 1 ? wrap_sub(m.offset, messages.front().offset) : m.offset;
    if (auto ec = write_legacy_message(inner, opts.magic, 0, offset, m.timestamp, m.key, m.value)) return ec;
    max_ts = std::max(max_ts, m.timestamp);
  }
  bytes packed;
  if (auto ec = compress(opts.codec, inner, packed)) return ec;
  const auto attributes = static_cast<std::int8_t>(static_cast<int>(opts.codec) | ts_bit);
  return write_legacy_message(out, opts.magic, attributes,
                              opts.wrapper_offset.value_or(messages.back().offset),
                              log_append ? opts.log_append_time : max_ts, std::nullopt, byte_view(packed));
}

}  // namespace

namespace {

// Runs an encoder that appends to `out`; on any error (out of memory included) `out` is as before.
template <class Encode>
std::error_code encode_or_restore(bytes& out, Encode encode) noexcept {
  const std::size_t start = out.size();
  std::error_code ec;
  try {
    ec = encode();
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::length_error&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
  if (ec) out.resize(start);
  return ec;
}

}  // namespace

std::error_code encode_record_batch(std::span<const record_input> records, const batch_encode_options& opts,
                                    bytes& out) noexcept {
  return encode_or_restore(out, [&] { return encode_v2(records, opts, out); });
}

std::error_code encode_legacy_message_set(std::span<const legacy_message_input> messages,
                                          const legacy_encode_options& opts, bytes& out) noexcept {
  return encode_or_restore(out, [&] { return encode_legacy(messages, opts, out); });
}

}  // namespace kgroup::protocol
