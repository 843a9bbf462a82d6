// Kafka wire primitives: a bounds-checked reader and an appending writer.
//
// Pure code: no Asio, no threads. The reader never trusts a length: every size and count is
// checked against the bytes that remain before anything is allocated, and the first failure is
// sticky (later reads return zero values), so decoders check ok() once at the end.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace kgroup::protocol {

/// Why a decode or encode failed. Exposed as a std::error_category (codec_category()).
enum class codec_errc {
  ok = 0,
  truncated = 1,          // input ended inside a value
  negative_length = 2,    // a length or count below -1 (or -1 where null is not allowed)
  oversized = 3,          // a length or count larger than the bytes that remain or a hard bound
  bad_varint = 4,         // a varint longer than its type allows
  trailing_bytes = 5,     // bytes left over after a complete message
  unsupported_version = 6,// the message has no such version
  field_not_supported = 7,// a non-default value for a field this version cannot carry
  null_not_allowed = 8,   // null for a field that is not nullable in this version
  bad_tagged_field = 9,   // a tagged field whose declared size disagrees with its content
  bad_crc = 10,           // record batch checksum mismatch
  bad_magic = 11,         // unknown record batch / message set magic byte
  decompression_failed = 12,
  decompression_bound = 13, // decompressed output exceeded the configured bound
  unknown_compression = 14,
};

const std::error_category& codec_category() noexcept;
/// The enumerator's name ("trailing_bytes"), or nullptr for a value that is none.
const char* codec_error_name(int value) noexcept;
inline std::error_code make_error_code(codec_errc e) noexcept {
  return {static_cast<int>(e), codec_category()};
}

struct uuid {
  std::array<std::uint8_t, 16> bytes{};
  bool operator==(const uuid&) const = default;
  auto operator<=>(const uuid&) const = default;  // byte order, for maps keyed by topic id
  bool is_zero() const noexcept;
  std::string to_string() const;  // Kafka's base64url form, as the Java client prints it
};

/// A view of record data inside a received frame; the frame must outlive it.
struct records_view {
  std::span<const std::uint8_t> data;
  bool operator==(const records_view& o) const noexcept {
    return data.size() == o.data.size() &&
           std::equal(data.begin(), data.end(), o.data.begin());
  }
};

using bytes = std::vector<std::uint8_t>;

/// Bounds-checked reader over a byte span. The first error is kept and reported by error().
class reader {
 public:
  reader() = default;
  explicit reader(std::span<const std::uint8_t> in) noexcept
      : p_(in.data()), end_(in.data() + in.size()) {}

  bool ok() const noexcept { return err_ == codec_errc::ok; }
  codec_errc error() const noexcept { return err_; }
  const char* error_field() const noexcept { return err_field_; }
  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  const std::uint8_t* position() const noexcept { return p_; }
  void fail(codec_errc e, const char* field = nullptr) noexcept;

  // The readers a record's every field goes through are inline, with the common case (no error,
  // enough bytes, a one-byte varint) first: out of line they were a third of the cost per record
  // (kgroup-bench-decode, issue 37).
  std::int8_t read_int8() noexcept {
    if (!need(1)) return 0;
    return static_cast<std::int8_t>(*p_++);
  }
  std::int16_t read_int16() noexcept;
  std::uint16_t read_uint16() noexcept;
  std::int32_t read_int32() noexcept;
  std::uint32_t read_uint32() noexcept;
  std::int64_t read_int64() noexcept;
  double read_float64() noexcept;
  bool read_bool() noexcept;
  uuid read_uuid() noexcept;
  /// Unsigned varint, up to 5 bytes.
  std::uint32_t read_uvarint() noexcept {
    if (p_ != end_ && *p_ < 0x80 && err_ == codec_errc::ok) return *p_++;
    // Two bytes (128 to 16,383): a 1 KB record's length and its value's.
    if (end_ - p_ >= 2 && p_[1] < 0x80 && err_ == codec_errc::ok) {
      const std::uint32_t v = (p_[0] & 0x7fu) | (std::uint32_t{p_[1]} << 7);
      p_ += 2;
      return v;
    }
    return read_unsigned_varint<std::uint32_t>();
  }
  /// Zigzag varint.
  std::int32_t read_varint() noexcept {
    const std::uint32_t u = read_uvarint();
    return static_cast<std::int32_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  /// Zigzag varlong, up to 10 bytes.
  std::int64_t read_varlong() noexcept {
    const std::uint64_t u = read_uvarlong();
    return static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  std::uint64_t read_uvarlong() noexcept {
    if (p_ != end_ && *p_ < 0x80 && err_ == codec_errc::ok) return *p_++;
    // Two bytes (128 to 16,383): a 1 KB record's length and its value's.
    if (end_ - p_ >= 2 && p_[1] < 0x80 && err_ == codec_errc::ok) {
      const std::uint64_t v = (p_[0] & 0x7fu) | (std::uint64_t{p_[1]} << 7);
      p_ += 2;
      return v;
    }
    return read_unsigned_varint<std::uint64_t>();
  }

  /// Skips n bytes (fails if fewer remain).
  void skip(std::size_t n) noexcept {
    if (need(n)) p_ += n;
  }
  /// Takes n raw bytes as a view (fails if fewer remain).
  std::span<const std::uint8_t> read_raw(std::size_t n) noexcept {
    if (!need(n)) return {};
    std::span<const std::uint8_t> s(p_, n);
    p_ += n;
    return s;
  }

  // Length-prefixed values. `compact` selects the flexible-version encoding (uvarint length+1).
  std::string read_string(bool compact) noexcept;
  std::optional<std::string> read_nullable_string(bool compact) noexcept;
  bytes read_bytes(bool compact) noexcept;
  std::optional<bytes> read_nullable_bytes(bool compact) noexcept;
  std::optional<records_view> read_records(bool compact) noexcept;

  /// Reads an array length. Returns -1 for null (only when nullable), otherwise a count that is
  /// at most remaining() / min_element_size, so a hostile count can never force a big allocation.
  std::int32_t read_array_length(bool compact, bool nullable, std::size_t min_element_size = 1) noexcept;

  /// Reads a varint-prefixed length as used in records (-1 = null). Bounded by remaining().
  std::int32_t read_varint_length() noexcept {
    const std::int32_t n = read_varint();
    if (n >= -1 && (n <= 0 || static_cast<std::size_t>(n) <= remaining()) && ok()) return n;
    return bad_varint_length(n);
  }

 private:
  bool need(std::size_t n) noexcept {
    if (err_ == codec_errc::ok && remaining() >= n) return true;
    return need_failed(n);
  }
  bool need_failed(std::size_t n) noexcept;
  std::int32_t bad_varint_length(std::int32_t n) noexcept;
  template <class U>
  U read_unsigned_varint() noexcept;
  template <class U>
  U read_be() noexcept;
  std::int32_t read_length(bool compact, bool nullable, bool is_string, const char* what) noexcept;

  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* end_ = nullptr;
  codec_errc err_ = codec_errc::ok;
  const char* err_field_ = nullptr;
};

/// Appending writer. Encoders may fail (unsupported field for a version); the first failure is kept.
class writer {
 public:
  explicit writer(bytes& out) noexcept : out_(&out) {}

  bool ok() const noexcept { return err_ == codec_errc::ok; }
  codec_errc error() const noexcept { return err_; }
  const char* error_field() const noexcept { return err_field_; }
  void fail(codec_errc e, const char* field = nullptr) noexcept;
  bytes& buffer() noexcept { return *out_; }
  std::size_t size() const noexcept { return out_->size(); }

  void write_int8(std::int8_t v);
  void write_int16(std::int16_t v);
  void write_uint16(std::uint16_t v);
  void write_int32(std::int32_t v);
  void write_uint32(std::uint32_t v);
  void write_int64(std::int64_t v);
  void write_float64(double v);
  void write_bool(bool v) { write_int8(v ? 1 : 0); }
  void write_uuid(const uuid& v);
  void write_uvarint(std::uint32_t v);
  void write_uvarlong(std::uint64_t v);
  void write_varint(std::int32_t v);
  void write_varlong(std::int64_t v);
  void write_raw(std::span<const std::uint8_t> v);

  void write_string(std::string_view v, bool compact);
  void write_nullable_string(const std::optional<std::string>& v, bool compact);
  void write_bytes(std::span<const std::uint8_t> v, bool compact);
  void write_nullable_bytes(const std::optional<bytes>& v, bool compact);
  void write_records(const std::optional<records_view>& v, bool compact);
  void write_array_length(std::int32_t n, bool compact);  // n == -1 writes null

  /// Overwrites 4 bytes at `at` with a big-endian int32 (for size prefixes written afterwards).
  void patch_int32(std::size_t at, std::int32_t v);

 private:
  bytes* out_;
  codec_errc err_ = codec_errc::ok;
  const char* err_field_ = nullptr;
};

/// Reserves room for an array of `count` elements (from read_array_length) whose elements are
/// still to be read from `r`, but never more element storage than the bytes left in the frame:
/// a count is bounded by the frame only through each element's smallest wire size, and an element
/// in memory can be 16-32 times that. Past the reservation the vector grows as
/// elements are really read, so memory follows what the frame holds, not what it claims.
template <class Vec>
void reserve_for(Vec& vec, const reader& r, std::int32_t count) {
  if (count <= 0) return;
  const std::size_t by_bytes = r.remaining() / sizeof(typename Vec::value_type);
  vec.reserve(std::min(static_cast<std::size_t>(count), by_bytes));
}

/// Number of bytes write_uvarint(v) produces.
std::size_t uvarint_size(std::uint32_t v) noexcept;

/// Skips the tagged-field section of a flexible struct, for structs with no known tags.
void skip_tagged_fields(reader& r) noexcept;

}  // namespace kgroup::protocol

namespace std {
template <>
struct is_error_code_enum<kgroup::protocol::codec_errc> : true_type {};
}  // namespace std
