// Each decompressor of src/protocol/compression.hpp with a 1 MiB output bound: a decompression
// bomb must stop at the bound, never exhaust memory (run with -malloc_limit_mb, as .ci/fuzz does,
// so a large allocation is a finding too).
//
// Input: byte 0 = codec id as in batch attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; 5-7
// must be refused as unknown; larger values are rejected), the rest is the compressed data.
//
// Findings beyond memory errors and UB (each aborts):
//   - output above the bound on success, or above bound + 1 bytes ever;
//   - an unknown codec not reported as unknown_compression;
//   - the bound not exact: the same input with max_output = its output size must succeed, and with
//     one byte less must fail with decompression_bound;
//   - output that compress() (and, for snappy, the xerial framing) cannot round trip.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.hpp"
#include "protocol/compression.hpp"

using namespace kgroup::protocol;
using kgroup::fuzz::check;
using kgroup::fuzz::finding;

namespace {

constexpr std::size_t max_output = 1 << 20;

void round_trip(compression codec, const bytes& plain, bool xerial) {
  bytes packed;
  const auto ec = xerial ? compress_snappy_xerial(plain, packed, 4096) : compress(codec, plain, packed);
  if (ec) finding("compress failed:", ec.message().c_str());
  bytes unpacked;
  if (auto e = decompress(codec, packed, plain.size(), unpacked)) finding("own compressed output does not decompress:", e.message().c_str());
  check(unpacked == plain, "compress/decompress round trip changed the data");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || data[0] > 7) return -1;
  const auto codec = static_cast<compression>(data[0]);
  const std::span<const std::uint8_t> in(data + 1, size - 1);

  bytes out;
  const auto ec = decompress(codec, in, max_output, out);
  check(out.size() <= max_output + 1, "more than max_output + 1 bytes produced");
  if (data[0] > 4) {
    check(ec == codec_errc::unknown_compression, "an unknown codec was not refused");
    return 0;
  }
  if (ec) {
    check(ec != codec_errc::unknown_compression, "a known codec reported as unknown");
    return 0;
  }
  check(out.size() <= max_output, "success with output above max_output");

  // The bound is exact.
  bytes exact;
  if (auto e = decompress(codec, in, out.size(), exact)) finding("max_output = output size fails:", e.message().c_str());
  check(exact == out, "a second decompression gave different output");
  if (!out.empty()) {
    bytes cut;
    check(decompress(codec, in, out.size() - 1, cut) == codec_errc::decompression_bound,
          "max_output one below the output size is not decompression_bound");
  }

  round_trip(codec, out, false);
  if (codec == compression::snappy) round_trip(codec, out, true);
  return 0;
}
