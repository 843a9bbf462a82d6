// CRC-32C and the compression codecs: vectors, round trips, the xerial snappy framing, the
// decompression bound, corrupt and truncated input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/compression.hpp"
#include "protocol/crc32c.hpp"

using namespace kgroup::protocol;

namespace {

bytes to_bytes(std::string_view s) { return bytes(s.begin(), s.end()); }

// Mixed content: a compressible text part and a pseudo-random part.
bytes sample_data(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  bytes b;
  b.reserve(n);
  static constexpr std::string_view words = "kafka consumer group rebalance offset commit fetch ";
  while (b.size() < n) {
    if (rng() % 4 == 0) {
      for (int i = 0; i < 16 && b.size() < n; ++i) b.push_back(static_cast<std::uint8_t>(rng()));
    } else {
      for (char c : words.substr(rng() % 20)) {
        if (b.size() == n) break;
        b.push_back(static_cast<std::uint8_t>(c));
      }
    }
  }
  return b;
}

const compression all_codecs[] = {compression::none, compression::gzip, compression::snappy, compression::lz4,
                                  compression::zstd};
const compression real_codecs[] = {compression::gzip, compression::snappy, compression::lz4, compression::zstd};

}  // namespace

// ---------------------------------------------------------------------------------------------
// CRC-32C

TEST_CASE("crc32c: standard check value and RFC 3720 vectors", "[compression][crc32c]") {
  CHECK(crc32c(to_bytes("123456789")) == 0xE3069283u);
  CHECK(crc32c({}) == 0u);
  CHECK(crc32c(to_bytes("a")) == 0xC1D04330u);

  // RFC 3720, appendix B.4.
  bytes zeros(32, 0x00), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
    dec[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(31 - i);
  }
  CHECK(crc32c(zeros) == 0x8A9136AAu);
  CHECK(crc32c(ones) == 0x62A8AB43u);
  CHECK(crc32c(inc) == 0x46DD794Eu);
  CHECK(crc32c(dec) == 0x113FDB5Cu);
  // The iSCSI SCSI Read (10) command PDU of the same appendix.
  const bytes pdu = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                     0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
                     0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(crc32c(pdu) == 0xD9963A56u);
}

TEST_CASE("crc32c: portable and dispatched paths agree, extend composes", "[compression][crc32c]") {
  INFO("hardware crc32 instruction in use: " << detail::crc32c_hardware_available());
  const bytes data = sample_data(4096 + 13, 7);
  const std::span<const std::uint8_t> all(data);
  // Every small length and misalignment, to cover the 8-byte loop and the byte tail.
  for (std::size_t off = 0; off < 9; ++off) {
    for (std::size_t len = 0; len < 80; ++len) {
      auto s = all.subspan(off, len);
      REQUIRE(crc32c(s) == detail::crc32c_extend_portable(0, s));
    }
  }
  REQUIRE(crc32c(all) == detail::crc32c_extend_portable(0, all));
  // Around the hardware path's rounds of three 512-byte stripes read side by side.
  const bytes big = sample_data(3 * 1536 + 40, 11);
  for (std::size_t len : {1535u, 1536u, 1537u, 1544u, 3071u, 3072u, 3080u, 4607u, 4608u, 4615u}) {
    for (std::size_t off : {0u, 3u, 8u}) {
      auto s = std::span<const std::uint8_t>(big).subspan(off, len);
      REQUIRE(crc32c(s) == detail::crc32c_extend_portable(0, s));
      REQUIRE(crc32c_extend(crc32c(s.first(100)), s.subspan(100)) == crc32c(s));
    }
  }
  for (std::size_t split : {0u, 1u, 7u, 8u, 9u, 1000u, 4109u}) {
    REQUIRE(crc32c_extend(crc32c(all.first(split)), all.subspan(split)) == crc32c(all));
    REQUIRE(detail::crc32c_extend_portable(crc32c(all.first(split)), all.subspan(split)) == crc32c(all));
  }
}

namespace {

// Every path this CPU can run, portable first.
std::vector<detail::crc32c_path> supported_paths() {
  std::vector<detail::crc32c_path> paths;
  for (auto p : {detail::crc32c_path::portable, detail::crc32c_path::sse42, detail::crc32c_path::fold512}) {
    if (detail::crc32c_path_supported(p)) paths.push_back(p);
  }
  return paths;
}

}  // namespace

TEST_CASE("crc32c: every path agrees with the portable one at every length 0..2048",
          "[compression][crc32c]") {
  INFO("selected path " << static_cast<int>(detail::crc32c_selected_path()));
  std::mt19937_64 rng(37);
  bytes buf(2048 + 64);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  for (auto path : supported_paths()) {
    CHECK(detail::crc32c_extend_along(path, 0, to_bytes("123456789")) == 0xE3069283u);
    for (std::size_t len = 0; len <= 2048; ++len) {
      // A random alignment and a random finished CRC to extend (from zero for every 8th length).
      const std::size_t off = rng() % 64;
      const auto crc = len % 8 == 0 ? 0u : static_cast<std::uint32_t>(rng());
      const auto s = std::span<const std::uint8_t>(buf).subspan(off, len);
      INFO("path " << static_cast<int>(path) << " length " << len << " offset " << off << " crc " << crc);
      REQUIRE(detail::crc32c_extend_along(path, crc, s) == detail::crc32c_extend_portable(crc, s));
    }
  }
}

TEST_CASE("crc32c: every path agrees on large inputs and composes with extend", "[compression][crc32c]") {
  std::mt19937_64 rng(38);
  bytes buf(3 * 65536 + 128);  // the longest input (3 * 65536 + 63) at the largest offset (63)
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  const std::span<const std::uint8_t> all(buf);
  for (auto path : supported_paths()) {
    for (std::size_t len : {65536u + 1u, 65536u + 13u, 65536u + 255u, 2 * 65536u + 77u, 3 * 65536u + 63u}) {
      const std::size_t off = rng() % 64;
      const auto crc = static_cast<std::uint32_t>(rng());
      const auto s = all.subspan(off, len);
      INFO("path " << static_cast<int>(path) << " length " << len << " offset " << off << " crc " << crc);
      const auto expected = detail::crc32c_extend_portable(crc, s);
      REQUIRE(detail::crc32c_extend_along(path, crc, s) == expected);
      // Split anywhere: the first part's CRC extended by the rest is the whole's.
      const std::size_t split = rng() % len;
      REQUIRE(detail::crc32c_extend_along(path, detail::crc32c_extend_along(path, crc, s.first(split)),
                                          s.subspan(split)) == expected);
    }
  }
  // Long runs of zeros and of ones (no all-zero lane may vanish from the fold).
  for (std::uint8_t fill : {std::uint8_t{0x00}, std::uint8_t{0xFF}}) {
    const bytes same(65536 + 5, fill);
    for (auto path : supported_paths()) {
      REQUIRE(detail::crc32c_extend_along(path, 0x12345678u, same) ==
              detail::crc32c_extend_portable(0x12345678u, same));
    }
  }
}

TEST_CASE("crc32c: the dispatch takes the folding path where the CPU has it", "[compression][crc32c]") {
  CHECK(detail::crc32c_path_supported(detail::crc32c_path::portable));
  CHECK(detail::crc32c_path_supported(detail::crc32c_selected_path()));
  CHECK(detail::crc32c_fold_threshold() == 256u);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool sse42 = __builtin_cpu_supports("sse4.2");
  const bool fold = sse42 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
  INFO("sse4.2 " << sse42 << ", avx512f+avx512vl+vpclmulqdq+pclmul " << fold);
  if (fold) {
    CHECK(detail::crc32c_selected_path() == detail::crc32c_path::fold512);
  } else if (sse42) {
    CHECK(detail::crc32c_selected_path() == detail::crc32c_path::sse42);
  } else {
    CHECK(detail::crc32c_selected_path() == detail::crc32c_path::portable);
  }
  CHECK(detail::crc32c_hardware_available() == sse42);
#else
  CHECK(detail::crc32c_selected_path() == detail::crc32c_path::portable);
#endif
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST_CASE("compression: round trip for every codec", "[compression]") {
  const std::vector<bytes> inputs = {bytes{}, to_bytes("x"), to_bytes("hello hello hello hello"),
                                     sample_data(100'000, 1), bytes(300'000, 0x61), sample_data(1'500'000, 2)};
  for (compression codec : all_codecs) {
    for (const bytes& in : inputs) {
      INFO(to_string(codec) << " input size " << in.size());
      bytes packed, unpacked{1, 2, 3};  // out is replaced, not appended to
      REQUIRE_FALSE(compress(codec, in, packed));
      if (codec != compression::none && in.size() >= 100'000) CHECK(packed.size() < in.size());
      REQUIRE_FALSE(decompress(codec, packed, in.size(), unpacked));  // the exact size is within bound
      REQUIRE(unpacked == in);
    }
  }
}

TEST_CASE("compression: names and attribute bits", "[compression]") {
  CHECK(std::string(to_string(compression::zstd)) == "zstd");
  CHECK(std::string(to_string(static_cast<compression>(6))) == "unknown");
  CHECK(compression_from_attributes(0x0003) == compression::lz4);
  CHECK(compression_from_attributes(0x00F4) == compression::zstd);  // other bits ignored
  CHECK_FALSE(compression_from_attributes(0x0005).has_value());
  CHECK_FALSE(compression_from_attributes(0x0007).has_value());
}

TEST_CASE("compression: unknown codec", "[compression]") {
  bytes out;
  const bytes in = to_bytes("abc");
  CHECK(decompress(static_cast<compression>(5), in, 100, out) == codec_errc::unknown_compression);
  CHECK(compress(static_cast<compression>(7), in, out) == codec_errc::unknown_compression);
}

TEST_CASE("compression: concatenated gzip members and zstd frames decode as one stream", "[compression]") {
  for (compression codec : {compression::gzip, compression::zstd, compression::lz4}) {
    INFO(to_string(codec));
    bytes a, b;
    REQUIRE_FALSE(compress(codec, to_bytes("first part, "), a));
    REQUIRE_FALSE(compress(codec, to_bytes("second part"), b));
    a.insert(a.end(), b.begin(), b.end());
    bytes out;
    REQUIRE_FALSE(decompress(codec, a, 1000, out));
    CHECK(out == to_bytes("first part, second part"));
  }
}

// ---------------------------------------------------------------------------------------------
// snappy: raw and xerial

TEST_CASE("snappy: hand-built raw block and xerial frame", "[compression][snappy]") {
  // Raw snappy: varint uncompressed length 3, literal tag ((3-1) << 2), "abc".
  const bytes raw_abc = {0x03, 0x08, 'a', 'b', 'c'};
  bytes out;
  REQUIRE_FALSE(decompress(compression::snappy, raw_abc, 3, out));
  CHECK(out == to_bytes("abc"));

  // Java's xerial framing: magic, version 1, compatible 1, then big-endian length + raw block.
  const bytes framed = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0x00, 0, 0, 0, 1, 0, 0, 0, 1,
                        0, 0, 0, 5, 0x03, 0x08, 'a', 'b', 'c',
                        0, 0, 0, 5, 0x03, 0x08, 'd', 'e', 'f'};
  REQUIRE_FALSE(decompress(compression::snappy, framed, 6, out));
  CHECK(out == to_bytes("abcdef"));
  // Bound applies to the sum of the blocks.
  CHECK(decompress(compression::snappy, framed, 5, out) == codec_errc::decompression_bound);

  // A frame with only the header holds no data.
  const bytes empty_frame(framed.begin(), framed.begin() + 16);
  REQUIRE_FALSE(decompress(compression::snappy, empty_frame, 0, out));
  CHECK(out.empty());

  // A block length past the end, a cut length field, a cut header.
  bytes bad_len = framed;
  bad_len[19] = 50;
  CHECK(decompress(compression::snappy, bad_len, 100, out) == codec_errc::decompression_failed);
  const bytes cut_len(framed.begin(), framed.begin() + 27);
  CHECK(decompress(compression::snappy, cut_len, 100, out) == codec_errc::decompression_failed);
  const bytes cut_header(framed.begin(), framed.begin() + 12);
  CHECK(decompress(compression::snappy, cut_header, 100, out) == codec_errc::decompression_failed);
}

TEST_CASE("snappy: xerial encoder round trip with many blocks", "[compression][snappy]") {
  const bytes in = sample_data(200'000, 3);
  bytes framed, out;
  REQUIRE_FALSE(compress_snappy_xerial(in, framed, 16 * 1024));
  REQUIRE(framed.size() > 16);
  CHECK(framed[0] == 0x82);
  REQUIRE_FALSE(decompress(compression::snappy, framed, in.size(), out));
  CHECK(out == in);
  CHECK(decompress(compression::snappy, framed, in.size() - 1, out) == codec_errc::decompression_bound);

  // Every cut inside a block is an error; a cut exactly at a block boundary is a shorter stream.
  std::vector<std::size_t> boundaries{16};
  for (std::size_t pos = 16; pos < framed.size();) {
    std::uint32_t len = static_cast<std::uint32_t>(framed[pos]) << 24 | static_cast<std::uint32_t>(framed[pos + 1]) << 16 |
                        static_cast<std::uint32_t>(framed[pos + 2]) << 8 | framed[pos + 3];
    pos += 4 + len;
    boundaries.push_back(pos);
  }
  for (std::size_t cut = 0; cut < framed.size(); cut += 97) {
    bytes part(framed.begin(), framed.begin() + static_cast<std::ptrdiff_t>(cut));
    auto ec = decompress(compression::snappy, part, in.size(), out);
    if (std::find(boundaries.begin(), boundaries.end(), cut) != boundaries.end()) {
      CHECK_FALSE(ec);
    } else {
      CHECK(ec == codec_errc::decompression_failed);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The bound

TEST_CASE("compression: a decompression bomb hits the bound", "[compression][bound]") {
  const bytes zeros(10 * 1024 * 1024, 0);
  constexpr std::size_t one_mb = 1024 * 1024;
  for (compression codec : real_codecs) {
    INFO(to_string(codec));
    bytes packed, out;
    REQUIRE_FALSE(compress(codec, zeros, packed));
    CHECK(packed.size() < 600 * 1024);  // small input, 10 MB output
    CHECK(decompress(codec, packed, one_mb, out) == codec_errc::decompression_bound);
    // The output buffer never grew far past the bound.
    CHECK(out.capacity() <= one_mb + 1);
  }
  bytes out;
  CHECK(decompress(compression::none, zeros, one_mb, out) == codec_errc::decompression_bound);
}

TEST_CASE("compression: output of exactly max_output is accepted, one byte more is not", "[compression][bound]") {
  const bytes in = sample_data(50'000, 4);
  for (compression codec : all_codecs) {
    INFO(to_string(codec));
    bytes packed, out;
    REQUIRE_FALSE(compress(codec, in, packed));
    CHECK_FALSE(decompress(codec, packed, in.size(), out));
    CHECK(out.size() == in.size());
    CHECK(decompress(codec, packed, in.size() - 1, out) == codec_errc::decompression_bound);
    CHECK(decompress(codec, packed, 0, out) == codec_errc::decompression_bound);
  }
}

TEST_CASE("compression: hand-built zstd frames, unknown content size and an RLE bomb", "[compression][bound]") {
  // Frame header descriptor 0: no content size, not single-segment, no checksum; window
  // descriptor 0 (1 KiB); one last raw block of 5 bytes (header 1 | raw << 1 | 5 << 3).
  const bytes hello = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
  bytes out;
  REQUIRE_FALSE(decompress(compression::zstd, hello, 5, out));
  CHECK(out == to_bytes("hello"));
  CHECK(decompress(compression::zstd, hello, 4, out) == codec_errc::decompression_bound);

  // Window 128 KiB (exponent 7), then 100 RLE blocks of 128 KiB each: 4 input bytes per block,
  // 12.5 MiB of output.
  bytes bomb = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38};
  for (int i = 0; i < 100; ++i) {
    std::uint32_t header = (i == 99 ? 1u : 0u) | (1u << 1) | (131072u << 3);
    bomb.push_back(static_cast<std::uint8_t>(header));
    bomb.push_back(static_cast<std::uint8_t>(header >> 8));
    bomb.push_back(static_cast<std::uint8_t>(header >> 16));
    bomb.push_back('z');
  }
  REQUIRE_FALSE(decompress(compression::zstd, bomb, 100 * 131072, out));
  CHECK(out.size() == 100u * 131072u);
  bytes fresh;
  CHECK(decompress(compression::zstd, bomb, 1024 * 1024, fresh) == codec_errc::decompression_bound);
  CHECK(fresh.capacity() <= 1024 * 1024 + 1);
}

TEST_CASE("compression: legacy (pre-1.0) zstd frames are refused, skippable frames are not", "[compression][bound]") {
  // Found by fuzzing: Debian's libzstd decodes the v0.7 format, whose decoder ignores
  // ZSTD_d_windowLogMax and allocated the 128 MiB window this 17-byte frame claims.
  // v0.7 frame: magic FD2FB527, descriptor 0, window byte (log 10 + (byte >> 3)), one raw block
  // of 5 bytes (type 1 << 6, 24-bit size), the end block (type 3 << 6).
  for (std::uint8_t window : {std::uint8_t{0x00}, std::uint8_t{0x88}}) {
    CAPTURE(window);
    const bytes legacy = {0x27, 0xB5, 0x2F, 0xFD, 0x00, window, 0x40, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o', 0xC0, 0x00, 0x00};
    bytes out;
    CHECK(decompress(compression::zstd, legacy, 1024 * 1024, out) == codec_errc::decompression_failed);
    CHECK(out.capacity() <= 1024 * 1024 + 1);
  }

  // The same refusal for a legacy frame after a valid one; a skippable frame (magic 184D2A5x,
  // int32 length, content) before a valid one is still fine.
  const bytes hello = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
  bytes then_legacy = hello;
  for (std::uint8_t b : {0x27, 0xB5, 0x2F, 0xFD, 0x00, 0x00, 0xC0, 0x00, 0x00}) then_legacy.push_back(b);
  bytes out;
  CHECK(decompress(compression::zstd, then_legacy, 1024, out) == codec_errc::decompression_failed);

  bytes skippable = {0x5A, 0x2A, 0x4D, 0x18, 0x03, 0x00, 0x00, 0x00, 'x', 'y', 'z'};
  skippable.insert(skippable.end(), hello.begin(), hello.end());
  REQUIRE_FALSE(decompress(compression::zstd, skippable, 1024, out));
  CHECK(out == to_bytes("hello"));
}

TEST_CASE("compression: raw snappy claiming a huge length is bounded before allocating", "[compression][bound]") {
  // varint 0xFFFFFFFF (about 4 GiB) followed by one literal byte.
  const bytes claim = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, 'a'};
  bytes out;
  CHECK(decompress(compression::snappy, claim, 1024 * 1024, out) == codec_errc::decompression_bound);
  CHECK(out.capacity() < 1024);
  // Within the bound, a claim far beyond snappy's densest ratio is corruption, refused before
  // allocating for it.
  CHECK(decompress(compression::snappy, claim, std::size_t{1} << 33, out) == codec_errc::decompression_failed);
  CHECK(out.capacity() < 1024);
}

// ---------------------------------------------------------------------------------------------
// Corrupt input

TEST_CASE("compression: every truncation of a stream is an error", "[compression][corrupt]") {
  const bytes in = sample_data(20'000, 5);
  for (compression codec : real_codecs) {
    INFO(to_string(codec));
    bytes packed, out;
    REQUIRE_FALSE(compress(codec, in, packed));
    for (std::size_t cut = 0; cut < packed.size(); ++cut) {
      const std::span<const std::uint8_t> part(packed.data(), cut);
      INFO("cut at " << cut << " of " << packed.size());
      REQUIRE(decompress(codec, part, in.size() * 2, out) == codec_errc::decompression_failed);
    }
  }
}

TEST_CASE("compression: garbage and flipped bytes never crash", "[compression][corrupt]") {
  const bytes garbage = to_bytes("this is not compressed data at all, not even close.");
  bytes out;
  for (compression codec : real_codecs) {
    INFO(to_string(codec));
    CHECK(decompress(codec, garbage, 1 << 20, out) == codec_errc::decompression_failed);
    CHECK(decompress(codec, bytes{}, 1 << 20, out) == codec_errc::decompression_failed);
  }

  const bytes in = sample_data(5'000, 6);
  std::mt19937 rng(42);
  for (compression codec : real_codecs) {
    INFO(to_string(codec));
    bytes packed;
    REQUIRE_FALSE(compress(codec, in, packed));
    for (int round = 0; round < 300; ++round) {
      bytes bad = packed;
      const int flips = 1 + static_cast<int>(rng() % 3);
      // gzip header bytes 4-9 (mtime, flags, OS) are not checksummed; damage the rest.
      const std::size_t from = codec == compression::gzip ? 10 : 0;
      for (int f = 0; f < flips; ++f)
        bad[from + rng() % (bad.size() - from)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      auto ec = decompress(codec, bad, 1 << 20, out);
      // gzip checks a CRC-32 of the content, so damage is always detected; the others detect
      // most damage, and what they accept stays within the bound.
      if (codec == compression::gzip) {
        REQUIRE(ec);
      }
      if (!ec) {
        REQUIRE(out.size() <= (1u << 20));
      } else {
        REQUIRE((ec == codec_errc::decompression_failed || ec == codec_errc::decompression_bound));
      }
    }
  }
}

TEST_CASE("compression: specific corruptions per codec", "[compression][corrupt]") {
  const bytes in = sample_data(10'000, 8);
  bytes out;

  SECTION("gzip trailer CRC mismatch") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::gzip, in, packed));
    packed[packed.size() - 6] ^= 0x01;  // the CRC-32 in the trailer
    CHECK(decompress(compression::gzip, packed, 1 << 20, out) == codec_errc::decompression_failed);
  }
  SECTION("gzip tolerates trailing garbage after the member, as Java does") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::gzip, in, packed));
    packed.push_back(0);
    packed.push_back(0);
    CHECK_FALSE(decompress(compression::gzip, packed, 1 << 20, out));
    CHECK(out == in);
  }
  SECTION("lz4 bad magic and bad header checksum") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::lz4, in, packed));
    bytes bad_magic = packed;
    bad_magic[0] ^= 0xFF;
    CHECK(decompress(compression::lz4, bad_magic, 1 << 20, out) == codec_errc::decompression_failed);
  }
  SECTION("zstd bad magic") {
    bytes packed;
    REQUIRE_FALSE(compress(compression::zstd, in, packed));
    packed[1] ^= 0xFF;
    CHECK(decompress(compression::zstd, packed, 1 << 20, out) == codec_errc::decompression_failed);
  }
  SECTION("snappy literal running past the end") {
    const bytes bad = {0x05, 0x10, 'a', 'b'};  // claims 5 bytes, literal of 5, only 2 present
    CHECK(decompress(compression::snappy, bad, 100, out) == codec_errc::decompression_failed);
  }
}

// ---------------------------------------------------------------------------------------------
// lz4: the pre-0.10 Kafka header checksum

TEST_CASE("xxh32: published vectors", "[compression][lz4]") {
  CHECK(detail::xxh32({}, 0) == 0x02CC5D05u);
  CHECK(detail::xxh32(to_bytes("abc"), 0) == 0x32D153FFu);
  CHECK(detail::xxh32(to_bytes("Nobody inspects the spammish repetition"), 0) == 0xE2293B2Fu);
}

TEST_CASE("lz4: legacy Kafka frames with the checksum over the magic are accepted", "[compression][lz4]") {
  const bytes in = sample_data(3'000, 9);
  bytes packed, out;
  REQUIRE_FALSE(compress(compression::lz4, in, packed));
  // Our frames: magic(4) FLG BD HC, no content size, no dictionary id.
  REQUIRE((packed[4] & 0x09) == 0);
  const std::span<const std::uint8_t> p(packed);
  const auto correct = static_cast<std::uint8_t>(detail::xxh32(p.subspan(4, 2), 0) >> 8);
  REQUIRE(packed[6] == correct);  // our xxh32 agrees with liblz4's
  const auto broken = static_cast<std::uint8_t>(detail::xxh32(p.subspan(0, 6), 0) >> 8);
  REQUIRE(broken != correct);

  bytes legacy = packed;
  legacy[6] = broken;
  REQUIRE_FALSE(decompress(compression::lz4, legacy, in.size(), out));
  CHECK(out == in);

  // Any other wrong checksum is still rejected.
  bytes wrong = packed;
  wrong[6] = 0;
  while (wrong[6] == correct || wrong[6] == broken) ++wrong[6];
  CHECK(decompress(compression::lz4, wrong, in.size(), out) == codec_errc::decompression_failed);
}
