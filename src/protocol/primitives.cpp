#include "protocol/primitives.hpp"

#include <bit>
#include <cstring>
#include <limits>

namespace kgroup::protocol {

namespace {

class codec_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "kgroup.codec"; }
  std::string message(int ev) const override {
    switch (static_cast<codec_errc>(ev)) {
      case codec_errc::ok: return "success";
      case codec_errc::truncated: return "input ends inside a value";
      case codec_errc::negative_length: return "negative length or count";
      case codec_errc::oversized: return "length or count larger than the remaining input or a bound";
      case codec_errc::bad_varint: return "varint longer than its type allows";
      case codec_errc::trailing_bytes: return "trailing bytes after a complete message";
      case codec_errc::unsupported_version: return "unsupported message version";
      case codec_errc::field_not_supported: return "field value cannot be carried by this message version";
      case codec_errc::null_not_allowed: return "null value for a non-nullable field";
      case codec_errc::bad_tagged_field: return "tagged field size does not match its content";
      case codec_errc::bad_crc: return "record batch CRC mismatch";
      case codec_errc::bad_magic: return "unknown record batch magic byte";
      case codec_errc::decompression_failed: return "decompression failed";
      case codec_errc::decompression_bound: return "decompressed size exceeds the configured bound";
      case codec_errc::unknown_compression: return "unknown compression codec";
    }
    return "unknown codec error";
  }
};

inline std::uint16_t bswap(std::uint16_t v) noexcept { return __builtin_bswap16(v); }
inline std::uint32_t bswap(std::uint32_t v) noexcept { return __builtin_bswap32(v); }
inline std::uint64_t bswap(std::uint64_t v) noexcept { return __builtin_bswap64(v); }

template <class U>
U load_be(const std::uint8_t* p) noexcept {
  U v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little) v = bswap(v);
  return v;
}

template <class U>
void store_be(bytes& out, U v) {
  if constexpr (std::endian::native == std::endian::little) v = bswap(v);
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

const char* codec_error_name(int value) noexcept {
  switch (static_cast<codec_errc>(value)) {  // no default: -Wswitch names a new enumerator
    case codec_errc::ok: return "ok";
    case codec_errc::truncated: return "truncated";
    case codec_errc::negative_length: return "negative_length";
    case codec_errc::oversized: return "oversized";
    case codec_errc::bad_varint: return "bad_varint";
    case codec_errc::trailing_bytes: return "trailing_bytes";
    case codec_errc::unsupported_version: return "unsupported_version";
    case codec_errc::field_not_supported: return "field_not_supported";
    case codec_errc::null_not_allowed: return "null_not_allowed";
    case codec_errc::bad_tagged_field: return "bad_tagged_field";
    case codec_errc::bad_crc: return "bad_crc";
    case codec_errc::bad_magic: return "bad_magic";
    case codec_errc::decompression_failed: return "decompression_failed";
    case codec_errc::decompression_bound: return "decompression_bound";
    case codec_errc::unknown_compression: return "unknown_compression";
  }
  return nullptr;
}

const std::error_category& codec_category() noexcept {
  static const codec_category_impl instance;
  return instance;
}

bool uuid::is_zero() const noexcept {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

std::string uuid::to_string() const {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string s;
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      s.push_back(alphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) s.push_back(alphabet[(acc << (6 - bits)) & 0x3f]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// reader

void reader::fail(codec_errc e, const char* field) noexcept {
  if (err_ == codec_errc::ok) {
    err_ = e;
    err_field_ = field;
  }
  p_ = end_;
}

bool reader::need_failed(std::size_t n) noexcept {
  if (err_ != codec_errc::ok) return false;
  if (remaining() < n) {
    fail(codec_errc::truncated);
    return false;
  }
  return true;
}

template <class U>
U reader::read_be() noexcept {
  if (!need(sizeof(U))) return 0;
  const auto v = load_be<U>(p_);
  p_ += sizeof(U);
  return v;
}

std::int16_t reader::read_int16() noexcept { return static_cast<std::int16_t>(read_uint16()); }
std::uint16_t reader::read_uint16() noexcept { return read_be<std::uint16_t>(); }
std::int32_t reader::read_int32() noexcept { return static_cast<std::int32_t>(read_uint32()); }
std::uint32_t reader::read_uint32() noexcept { return read_be<std::uint32_t>(); }
std::int64_t reader::read_int64() noexcept { return static_cast<std::int64_t>(read_be<std::uint64_t>()); }
double reader::read_float64() noexcept {
  auto bits = static_cast<std::uint64_t>(read_int64());
  return std::bit_cast<double>(bits);
}
bool reader::read_bool() noexcept { return read_int8() != 0; }

uuid reader::read_uuid() noexcept {
  uuid u;
  if (!need(16)) return u;
  std::memcpy(u.bytes.data(), p_, 16);
  p_ += 16;
  return u;
}

template <class U>
U reader::read_unsigned_varint() noexcept {
  constexpr int bits = static_cast<int>(sizeof(U) * 8);
  constexpr int last_shift = (bits - 1) / 7 * 7;  // the shift of the last byte that fits
  // Bits of the last byte beyond the type: set means the value would overflow.
  constexpr std::uint8_t overflow = static_cast<std::uint8_t>(0x7f & ~((1u << (bits - last_shift)) - 1));
  U v = 0;
  for (int shift = 0; shift <= last_shift; shift += 7) {
    if (!need(1)) return 0;
    const std::uint8_t b = *p_++;
    if (shift == last_shift && (b & overflow) != 0) break;
    v |= static_cast<U>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail(codec_errc::bad_varint);
  return 0;
}

template std::uint32_t reader::read_unsigned_varint<std::uint32_t>() noexcept;
template std::uint64_t reader::read_unsigned_varint<std::uint64_t>() noexcept;

std::int32_t reader::read_length(bool compact, bool nullable, bool is_string,
                                 const char* what) noexcept {
  // Non-flexible strings carry an int16 length; bytes, records and arrays an int32.
  std::int64_t n;
  if (compact) {
    n = static_cast<std::int64_t>(read_uvarint()) - 1;
  } else if (is_string) {
    n = read_int16();
  } else {
    n = read_int32();
  }
  if (!ok()) return 0;
  if (n < -1 || (n == -1 && !nullable)) {
    fail(n == -1 ? codec_errc::null_not_allowed : codec_errc::negative_length, what);
    return 0;
  }
  // A compact length is a uvarint up to 2^32-1; anything past int32 cannot fit in the input and
  // must not wrap around to a negative (null or empty) value.
  if (n > std::numeric_limits<std::int32_t>::max()) {
    fail(codec_errc::oversized, what);
    return 0;
  }
  return static_cast<std::int32_t>(n);
}

std::string reader::read_string(bool compact) noexcept {
  // Leniency on purpose: a null where a non-nullable string is expected reads as "". Some broker
  // implementations (librdkafka's mock cluster, for one) send a null host in error responses.
  std::int32_t n = read_length(compact, true, true, "string");
  if (!ok() || n <= 0) return {};
  if (static_cast<std::size_t>(n) > remaining()) {
    fail(codec_errc::oversized, "string");
    return {};
  }
  std::string s(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
  p_ += n;
  return s;
}

std::optional<std::string> reader::read_nullable_string(bool compact) noexcept {
  const std::uint8_t* start = p_;
  std::int32_t n = read_length(compact, true, true, "string");
  if (!ok() || n < 0) return std::nullopt;
  p_ = start;  // re-read through the non-null path
  // Read again as a non-nullable string: lengths are identical for non-null values.
  return read_string(compact);
}

bytes reader::read_bytes(bool compact) noexcept {
  // Lenient like read_string: a null where bytes may not be null reads as empty (librdkafka's
  // mock sends a null SyncGroup assignment with its error responses).
  std::int32_t n = read_length(compact, true, false, "bytes");
  if (!ok() || n <= 0) return {};
  if (static_cast<std::size_t>(n) > remaining()) {
    fail(codec_errc::oversized, "bytes");
    return {};
  }
  bytes b(p_, p_ + n);
  p_ += n;
  return b;
}

std::optional<bytes> reader::read_nullable_bytes(bool compact) noexcept {
  const std::uint8_t* start = p_;
  std::int32_t n = read_length(compact, true, false, "bytes");
  if (!ok() || n < 0) return std::nullopt;
  p_ = start;
  return read_bytes(compact);
}

std::optional<records_view> reader::read_records(bool compact) noexcept {
  std::int32_t n = read_length(compact, true, false, "records");
  if (!ok() || n < 0) return std::nullopt;
  if (static_cast<std::size_t>(n) > remaining()) {
    fail(codec_errc::oversized, "records");
    return std::nullopt;
  }
  records_view v{std::span<const std::uint8_t>(p_, static_cast<std::size_t>(n))};
  p_ += n;
  return v;
}

std::int32_t reader::read_array_length(bool compact, bool nullable, std::size_t min_element_size) noexcept {
  std::int32_t n = read_length(compact, nullable, false, "array");
  if (!ok()) return 0;
  if (n > 0 && static_cast<std::size_t>(n) > remaining() / (min_element_size ? min_element_size : 1)) {
    fail(codec_errc::oversized, "array");
    return 0;
  }
  return n;
}

std::int32_t reader::bad_varint_length(std::int32_t n) noexcept {
  if (!ok()) return 0;
  if (n < -1) {
    fail(codec_errc::negative_length, "varint length");
    return 0;
  }
  fail(codec_errc::oversized, "varint length");
  return 0;
}

void skip_tagged_fields(reader& r) noexcept {
  std::uint32_t count = r.read_uvarint();
  if (count > r.remaining()) {
    r.fail(codec_errc::oversized, "tagged fields");
    return;
  }
  for (std::uint32_t i = 0; i < count && r.ok(); ++i) {
    r.read_uvarint();  // tag
    std::uint32_t size = r.read_uvarint();
    if (size > r.remaining()) {
      r.fail(codec_errc::oversized, "tagged field");
      return;
    }
    r.skip(size);
  }
}

// ---------------------------------------------------------------------------------------------
// writer

void writer::fail(codec_errc e, const char* field) noexcept {
  if (err_ == codec_errc::ok) {
    err_ = e;
    err_field_ = field;
  }
}

void writer::write_int8(std::int8_t v) { out_->push_back(static_cast<std::uint8_t>(v)); }
void writer::write_int16(std::int16_t v) { store_be(*out_, static_cast<std::uint16_t>(v)); }
void writer::write_uint16(std::uint16_t v) { store_be(*out_, v); }
void writer::write_int32(std::int32_t v) { store_be(*out_, static_cast<std::uint32_t>(v)); }
void writer::write_uint32(std::uint32_t v) { store_be(*out_, v); }
void writer::write_int64(std::int64_t v) { store_be(*out_, static_cast<std::uint64_t>(v)); }
void writer::write_float64(double v) { store_be(*out_, std::bit_cast<std::uint64_t>(v)); }
void writer::write_uuid(const uuid& v) { out_->insert(out_->end(), v.bytes.begin(), v.bytes.end()); }

void writer::write_uvarlong(std::uint64_t v) {
  while (v >= 0x80) {
    out_->push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out_->push_back(static_cast<std::uint8_t>(v));
}
void writer::write_uvarint(std::uint32_t v) { write_uvarlong(v); }
void writer::write_varint(std::int32_t v) {
  write_uvarint((static_cast<std::uint32_t>(v) << 1) ^ static_cast<std::uint32_t>(v >> 31));
}
void writer::write_varlong(std::int64_t v) {
  write_uvarlong((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}
void writer::write_raw(std::span<const std::uint8_t> v) { out_->insert(out_->end(), v.begin(), v.end()); }

void writer::write_array_length(std::int32_t n, bool compact) {
  if (compact) {
    write_uvarint(static_cast<std::uint32_t>(n + 1));
  } else {
    write_int32(n);
  }
}

void writer::write_string(std::string_view v, bool compact) {
  if (compact) {
    write_uvarint(static_cast<std::uint32_t>(v.size() + 1));
  } else {
    if (v.size() > static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max())) {
      fail(codec_errc::oversized, "string");
      return;
    }
    write_int16(static_cast<std::int16_t>(v.size()));
  }
  out_->insert(out_->end(), v.begin(), v.end());
}

void writer::write_nullable_string(const std::optional<std::string>& v, bool compact) {
  if (v) {
    write_string(*v, compact);
  } else if (compact) {
    write_uvarint(0);
  } else {
    write_int16(-1);
  }
}

void writer::write_bytes(std::span<const std::uint8_t> v, bool compact) {
  write_array_length(static_cast<std::int32_t>(v.size()), compact);
  write_raw(v);
}

void writer::write_nullable_bytes(const std::optional<bytes>& v, bool compact) {
  if (v) {
    write_bytes(*v, compact);
  } else {
    write_array_length(-1, compact);
  }
}

void writer::write_records(const std::optional<records_view>& v, bool compact) {
  if (v) {
    write_bytes(v->data, compact);
  } else {
    write_array_length(-1, compact);
  }
}

void writer::patch_int32(std::size_t at, std::int32_t v) {
  auto u = static_cast<std::uint32_t>(v);
  (*out_)[at] = static_cast<std::uint8_t>(u >> 24);
  (*out_)[at + 1] = static_cast<std::uint8_t>(u >> 16);
  (*out_)[at + 2] = static_cast<std::uint8_t>(u >> 8);
  (*out_)[at + 3] = static_cast<std::uint8_t>(u);
}

std::size_t uvarint_size(std::uint32_t v) noexcept {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

}  // namespace kgroup::protocol
