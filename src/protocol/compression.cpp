#include "protocol/compression.hpp"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <lz4frame.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>

namespace kgroup::protocol {

namespace {

constexpr std::size_t max_compress_input = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());

std::error_code failed() noexcept { return make_error_code(codec_errc::decompression_failed); }
std::error_code bound() noexcept { return make_error_code(codec_errc::decompression_bound); }

// Grows `out` geometrically up to max_output + 1 bytes. Allowing one byte past the bound is what
// tells "exactly max_output" (fine) from "more than max_output" (a bomb) without asking the codec
// for the decompressed size, which the formats do not reliably carry.
class bounded_sink {
 public:
  bounded_sink(bytes& out, std::size_t max_output, std::size_t input_size) noexcept
      : out_(out),
        limit_(max_output == std::numeric_limits<std::size_t>::max() ? max_output : max_output + 1),
        max_(max_output) {
    out_.clear();
    // A first guess of 4x the input (at least 4 KiB) avoids most regrowth for typical ratios.
    first_ = input_size > limit_ / 4 ? limit_ : std::max<std::size_t>(input_size * 4, 4096);
    first_ = std::min(first_, limit_);
  }

  // Free space to write into; empty only when the limit has been reached.
  std::span<std::uint8_t> space() {
    if (produced_ == out_.size()) {
      std::size_t want = out_.empty() ? first_ : (out_.size() > limit_ / 2 ? limit_ : out_.size() * 2);
      want = std::min(want, limit_);
      if (want > out_.size()) {
        out_.reserve(want);  // exact, so capacity never overshoots the bound
        out_.resize(want);
      }
    }
    return {out_.data() + produced_, out_.size() - produced_};
  }
  void commit(std::size_t n) noexcept { produced_ += n; }
  bool exceeded() const noexcept { return produced_ > max_; }
  void finish() { out_.resize(produced_); }

 private:
  bytes& out_;
  std::size_t limit_;
  std::size_t max_;
  std::size_t first_ = 0;
  std::size_t produced_ = 0;
};

// ---------------------------------------------------------------------------------------------
// gzip

std::error_code gunzip(std::span<const std::uint8_t> input, bounded_sink& sink) {
  z_stream zs{};
  // 15 + 32: maximum window, and let zlib detect the gzip (or zlib) header.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return std::make_error_code(std::errc::not_enough_memory);
  struct guard {
    z_stream* z;
    ~guard() { inflateEnd(z); }
  } g{&zs};

  const std::uint8_t* in = input.data();
  std::size_t in_left = input.size();
  if (in_left == 0) return failed();
  for (;;) {
    auto space = sink.space();
    zs.next_in = const_cast<Bytef*>(in);  // zlib's API is not const-correct; it does not write
    zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in_left, UINT_MAX));
    zs.next_out = space.data();
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(space.size(), UINT_MAX));
    const uInt avail_in_before = zs.avail_in;
    const uInt avail_out_before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    std::size_t consumed = avail_in_before - zs.avail_in;
    std::size_t produced = avail_out_before - zs.avail_out;
    in += consumed;
    in_left -= consumed;
    sink.commit(produced);
    if (sink.exceeded()) return bound();
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated gzip files are valid gzip).
      if (in_left >= 2 && in[0] == 0x1f && in[1] == 0x8b) {
        if (inflateReset(&zs) != Z_OK) return failed();
        continue;
      }
      break;
    }
    if (rc == Z_MEM_ERROR) return std::make_error_code(std::errc::not_enough_memory);
    if (rc != Z_OK && rc != Z_BUF_ERROR) return failed();  // Z_DATA_ERROR, Z_NEED_DICT, ...
    // Z_BUF_ERROR or no progress with output space available means the input ended early.
    if (consumed == 0 && produced == 0) return failed();
  }
  sink.finish();
  return {};
}

std::error_code gzip(std::span<const std::uint8_t> input, bytes& out) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return std::make_error_code(std::errc::not_enough_memory);
  struct guard {
    z_stream* z;
    ~guard() { deflateEnd(z); }
  } g{&zs};
  // input is at most 2^31-1 bytes here, so it fits uInt and the bound is a valid single output.
  out.resize(deflateBound(&zs, static_cast<uLong>(input.size())));
  zs.next_in = const_cast<Bytef*>(input.data());
  zs.avail_in = static_cast<uInt>(input.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) return make_error_code(codec_errc::oversized);
  out.resize(zs.total_out);
  return {};
}

// ---------------------------------------------------------------------------------------------
// snappy

constexpr std::array<std::uint8_t, 8> xerial_magic{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
constexpr std::size_t xerial_header_size = 16;  // magic, int32 version, int32 compatible version

std::uint32_t load_be32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | static_cast<std::uint32_t>(p[3]);
}
void store_be32(std::uint8_t* p, std::uint32_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

// Appends one raw snappy block to out, keeping the total within max_output.
std::error_code unsnappy_block(std::span<const std::uint8_t> block, std::size_t max_output, bytes& out) {
  const char* src = reinterpret_cast<const char*>(block.data());
  std::size_t n = 0;
  // The length is only the block's varint header; snappy_uncompress validates it against the data.
  if (snappy_uncompressed_length(src, block.size(), &n) != SNAPPY_OK) return failed();
  if (n > max_output - out.size()) return bound();
  // The densest snappy element, a copy with a 2-byte offset, is 3 bytes for at most 64 output
  // bytes. A claim above that ratio is a lie; refuse it before allocating for it.
  if (n / 22 > block.size()) return failed();
  const std::size_t at = out.size();
  out.resize(at + n);
  std::size_t written = n;
  if (snappy_uncompress(src, block.size(), reinterpret_cast<char*>(out.data() + at), &written) != SNAPPY_OK ||
      written != n)
    return failed();
  return {};
}

std::error_code unsnappy(std::span<const std::uint8_t> input, std::size_t max_output, bytes& out) {
  out.clear();
  if (input.size() >= xerial_magic.size() &&
      std::equal(xerial_magic.begin(), xerial_magic.end(), input.begin())) {
    if (input.size() < xerial_header_size) return failed();
    // Version fields are not checked: every xerial version so far uses this block layout.
    std::size_t pos = xerial_header_size;
    while (pos < input.size()) {
      if (input.size() - pos < 4) return failed();
      std::uint32_t len = load_be32(input.data() + pos);
      pos += 4;
      if (len > input.size() - pos) return failed();
      if (len > 0) {
        if (auto ec = unsnappy_block(input.subspan(pos, len), max_output, out)) return ec;
      }
      pos += len;
    }
    return {};
  }
  if (input.empty()) return failed();
  return unsnappy_block(input, max_output, out);
}

std::error_code snappy_raw(std::span<const std::uint8_t> input, bytes& out) {
  out.resize(snappy_max_compressed_length(input.size()));
  std::size_t n = out.size();
  if (snappy_compress(reinterpret_cast<const char*>(input.data()), input.size(),
                      reinterpret_cast<char*>(out.data()), &n) != SNAPPY_OK)
    return make_error_code(codec_errc::oversized);
  out.resize(n);
  return {};
}

// ---------------------------------------------------------------------------------------------
// lz4

constexpr std::uint32_t lz4_frame_magic = 0x184D2204u;

std::uint32_t load_le32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

// If `input` starts with an LZ4 frame whose header checksum is the pre-0.10 Kafka one (hashed from
// the magic number instead of from the flag byte), returns the offset of that checksum byte and
// the correct value; otherwise nullopt (including when the checksum is right or just wrong).
std::optional<std::pair<std::size_t, std::uint8_t>> legacy_lz4_header(std::span<const std::uint8_t> input) noexcept {
  if (input.size() < 7 || load_le32(input.data()) != lz4_frame_magic) return std::nullopt;
  const std::uint8_t flg = input[4];
  std::size_t hc_pos = 6;                 // magic(4) FLG BD
  if (flg & 0x08) hc_pos += 8;            // content size
  if (flg & 0x01) hc_pos += 4;            // dictionary id
  if (input.size() <= hc_pos) return std::nullopt;
  auto correct = static_cast<std::uint8_t>(detail::xxh32(input.subspan(4, hc_pos - 4), 0) >> 8);
  if (input[hc_pos] == correct) return std::nullopt;
  auto broken = static_cast<std::uint8_t>(detail::xxh32(input.subspan(0, hc_pos), 0) >> 8);
  if (input[hc_pos] != broken) return std::nullopt;
  return std::make_pair(hc_pos, correct);
}

std::error_code unlz4(std::span<const std::uint8_t> input, bounded_sink& sink) {
  if (input.empty()) return failed();
  bytes patched;  // only for legacy frames: a copy with the header checksum corrected
  if (auto fix = legacy_lz4_header(input)) {
    patched.assign(input.begin(), input.end());
    patched[fix->first] = fix->second;
    input = patched;
  }
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION)))
    return std::make_error_code(std::errc::not_enough_memory);
  std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> ctx(raw, &LZ4F_freeDecompressionContext);

  const std::uint8_t* in = input.data();
  std::size_t in_left = input.size();
  for (;;) {
    auto space = sink.space();
    std::size_t produced = space.size();
    std::size_t consumed = in_left;
    std::size_t rc = LZ4F_decompress(ctx.get(), space.data(), &produced, in, &consumed, nullptr);
    if (LZ4F_isError(rc)) return failed();
    in += consumed;
    in_left -= consumed;
    sink.commit(produced);
    if (sink.exceeded()) return bound();
    // 0 means a frame ended and is fully flushed; another frame may follow.
    if (rc == 0 && in_left == 0) break;
    if (consumed == 0 && produced == 0) return failed();  // input ended inside a frame
  }
  sink.finish();
  return {};
}

std::error_code lz4(std::span<const std::uint8_t> input, bytes& out) {
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  out.resize(LZ4F_compressFrameBound(input.size(), &prefs));
  std::size_t n = LZ4F_compressFrame(out.data(), out.size(), input.data(), input.size(), &prefs);
  if (LZ4F_isError(n)) return make_error_code(codec_errc::oversized);
  out.resize(n);
  return {};
}

// ---------------------------------------------------------------------------------------------
// zstd

// libzstd may be built with support for the pre-1.0 formats (Debian's is). Such a legacy frame
// bypasses ZSTD_d_windowLogMax: its decoder allocates whatever window the header claims, 128 MiB
// from a 17-byte input. Kafka only ever wrote zstd 1.x frames, so a frame must start with the 1.x
// magic or a skippable frame's; anything else is refused before zstd sees it. Fewer than four
// bytes cannot hold any magic and are left to zstd to reject as truncated.
bool zstd_frame_start_allowed(std::span<const std::uint8_t> rest) noexcept {
  if (rest.size() < 4) return true;
  const std::uint32_t magic = load_le32(rest.data());
  return magic == 0xFD2FB528u || (magic & 0xFFFFFFF0u) == 0x184D2A50u;
}

std::error_code unzstd(std::span<const std::uint8_t> input, std::size_t max_output, bounded_sink& sink) {
  if (input.empty()) return failed();
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!ctx) return std::make_error_code(std::errc::not_enough_memory);
  // The window is memory the decoder allocates up front from an untrusted header. Cap it by the
  // output bound, but never below 8 MiB (what zstd's own levels up to 19 use) and never above
  // zstd's default 128 MiB.
  int window_log = max_output == 0 ? 0 : static_cast<int>(std::bit_width(max_output - 1));
  window_log = std::clamp(window_log, 23, 27);
  if (ZSTD_isError(ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, window_log))) return failed();

  ZSTD_inBuffer in{input.data(), input.size(), 0};
  bool frame_start = true;
  for (;;) {
    if (frame_start && !zstd_frame_start_allowed(input.subspan(in.pos))) return failed();
    auto space = sink.space();
    ZSTD_outBuffer o{space.data(), space.size(), 0};
    const std::size_t in_before = in.pos;
    std::size_t rc = ZSTD_decompressStream(ctx.get(), &o, &in);
    if (ZSTD_isError(rc)) {
      if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) return bound();
      if (ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation)
        return std::make_error_code(std::errc::not_enough_memory);
      return failed();
    }
    sink.commit(o.pos);
    if (sink.exceeded()) return bound();
    // 0 means a frame ended and is fully flushed (in.pos is just past it); another may follow.
    if (rc == 0 && in.pos == in.size) break;
    if (o.pos == 0 && in.pos == in_before) return failed();  // input ended inside a frame
    frame_start = rc == 0;
  }
  sink.finish();
  return {};
}

std::error_code zstd(std::span<const std::uint8_t> input, bytes& out) {
  out.resize(ZSTD_compressBound(input.size()));
  std::size_t n = ZSTD_compress(out.data(), out.size(), input.data(), input.size(), 3);
  if (ZSTD_isError(n)) {
    return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation
               ? std::make_error_code(std::errc::not_enough_memory)
               : make_error_code(codec_errc::oversized);
  }
  out.resize(n);
  return {};
}

std::uint32_t rotl32(std::uint32_t v, int r) noexcept { return std::rotl(v, r); }

}  // namespace

std::optional<compression> compression_from_attributes(std::int16_t attributes) noexcept {
  int id = attributes & 0x07;
  if (id > static_cast<int>(compression::zstd)) return std::nullopt;
  return static_cast<compression>(id);
}

const char* to_string(compression codec) noexcept {
  switch (codec) {
    case compression::none: return "none";
    case compression::gzip: return "gzip";
    case compression::snappy: return "snappy";
    case compression::lz4: return "lz4";
    case compression::zstd: return "zstd";
  }
  return "unknown";
}

std::error_code decompress(compression codec, std::span<const std::uint8_t> input,
                           std::size_t max_output, bytes& out) noexcept {
  try {
    switch (codec) {
      case compression::none: {
        out.clear();
        if (input.size() > max_output) return bound();
        out.assign(input.begin(), input.end());
        return {};
      }
      case compression::gzip: {
        bounded_sink sink(out, max_output, input.size());
        return gunzip(input, sink);
      }
      case compression::snappy: return unsnappy(input, max_output, out);
      case compression::lz4: {
        bounded_sink sink(out, max_output, input.size());
        return unlz4(input, sink);
      }
      case compression::zstd: {
        bounded_sink sink(out, max_output, input.size());
        return unzstd(input, max_output, sink);
      }
    }
    return make_error_code(codec_errc::unknown_compression);
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::length_error&) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
}

std::error_code compress(compression codec, std::span<const std::uint8_t> input, bytes& out) noexcept {
  try {
    out.clear();
    if (input.size() > max_compress_input) return make_error_code(codec_errc::oversized);
    switch (codec) {
      case compression::none: out.assign(input.begin(), input.end()); return {};
      case compression::gzip: return gzip(input, out);
      case compression::snappy: return snappy_raw(input, out);
      case compression::lz4: return lz4(input, out);
      case compression::zstd: return zstd(input, out);
    }
    return make_error_code(codec_errc::unknown_compression);
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::length_error&) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
}

std::error_code compress_snappy_xerial(std::span<const std::uint8_t> input, bytes& out,
                                       std::size_t block_size) noexcept {
  try {
    out.clear();
    if (input.size() > max_compress_input) return make_error_code(codec_errc::oversized);
    if (block_size == 0) block_size = 32 * 1024;
    out.assign(xerial_magic.begin(), xerial_magic.end());
    out.resize(xerial_header_size);
    store_be32(out.data() + 8, 1);   // version
    store_be32(out.data() + 12, 1);  // compatible version
    for (std::size_t pos = 0; pos < input.size(); pos += block_size) {
      auto chunk = input.subspan(pos, std::min(block_size, input.size() - pos));
      const std::size_t at = out.size();
      out.resize(at + 4 + snappy_max_compressed_length(chunk.size()));
      std::size_t n = out.size() - at - 4;
      if (snappy_compress(reinterpret_cast<const char*>(chunk.data()), chunk.size(),
                          reinterpret_cast<char*>(out.data() + at + 4), &n) != SNAPPY_OK)
        return make_error_code(codec_errc::oversized);
      store_be32(out.data() + at, static_cast<std::uint32_t>(n));
      out.resize(at + 4 + n);
    }
    return {};
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::length_error&) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
}

namespace detail {

std::uint32_t xxh32(std::span<const std::uint8_t> data, std::uint32_t seed) noexcept {
  constexpr std::uint32_t p1 = 2654435761u, p2 = 2246822519u, p3 = 3266489917u, p4 = 668265263u,
                          p5 = 374761393u;
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  std::uint32_t h;
  if (n >= 16) {
    std::uint32_t v1 = seed + p1 + p2, v2 = seed + p2, v3 = seed, v4 = seed - p1;
    auto round = [&](std::uint32_t acc, const std::uint8_t* q) {
      return rotl32(acc + load_le32(q) * p2, 13) * p1;
    };
    while (n >= 16) {
      v1 = round(v1, p);
      v2 = round(v2, p + 4);
      v3 = round(v3, p + 8);
      v4 = round(v4, p + 12);
      p += 16;
      n -= 16;
    }
    h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
  } else {
    h = seed + p5;
  }
  h += static_cast<std::uint32_t>(data.size());
  while (n >= 4) {
    h = rotl32(h + load_le32(p) * p3, 17) * p4;
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    h = rotl32(h + *p * p5, 11) * p1;
    ++p;
    --n;
  }
  h ^= h >> 15;
  h *= p2;
  h ^= h >> 13;
  h *= p3;
  h ^= h >> 16;
  return h;
}

}  // namespace detail

}  // namespace kgroup::protocol
