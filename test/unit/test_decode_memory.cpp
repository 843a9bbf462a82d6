// Issue 31, item 3: a decoder must not reserve element storage for a count before the elements
// are there. An array count is bounded by the frame only through each element's smallest wire
// size (2 bytes for a string), while the element in memory is 16-32 times that; a count as large
// as the frame allows, followed by bytes that are no element at all, used to allocate
// count x sizeof(element) at once. Measured with the counting operator new (alloc_meter).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "alloc_meter.hpp"
#include "assign/consumer_protocol.hpp"
#include "assign/sticky_user_data.hpp"
#include "byte_builder.hpp"
#include "protocol/messages.hpp"

namespace meter = kgroup::test::alloc_meter;
using kgroup::test::byte_builder;

namespace {

constexpr std::size_t frame_bytes = 256 * 1024;

// `prefix`, then an int32 array count as large as `frame_bytes` allows for elements of
// `min_element` wire bytes, then a first "element" that is not one (a string of length -5), then
// padding up to frame_bytes.
std::vector<std::uint8_t> claiming_frame(byte_builder prefix, std::size_t min_element) {
  const std::size_t head = prefix.out.size() + 4;
  prefix.i32(static_cast<std::int64_t>((frame_bytes - head) / min_element));
  prefix.i16(-5);
  prefix.out.resize(frame_bytes, 0xff);
  return prefix.out;
}

// The most bytes held at once while `decode` runs, above what was held before.
template <class F>
std::size_t peak_of(F&& decode) {
  const std::size_t before = meter::live();
  meter::reset_peak();
  decode();
  return meter::peak() - before;
}

}  // namespace

TEST_CASE("decoders: a count as large as the frame allows reserves no more than the frame", "[codec][hostile]") {
  SECTION("SaslHandshake's mechanism list, read before authentication") {
    const auto frame = claiming_frame(byte_builder{}.i16(0), 2);
    std::error_code ec;
    const std::size_t peak = peak_of([&] {
      kgroup::protocol::sasl_handshake_response m;
      ec = kgroup::protocol::decode(frame, 1, m);
    });
    CHECK(ec);
    // Before the fix: 131,070 strings reserved, 4 MiB for a 256 KiB frame.
    CHECK(peak <= 2 * frame_bytes);
  }
  SECTION("another member's subscription (a version the codec knows, and a newer one)") {
    for (const int version : {1, 9}) {
      INFO("subscription version " << version);
      const auto frame = claiming_frame(byte_builder{}.i16(version), 2);
      std::error_code ec;
      const std::size_t peak = peak_of([&] {
        kgroup::MemberSubscription s;
        ec = kgroup::assign::decode_subscription(frame, s);
      });
      CHECK(ec);
      CHECK(peak <= 2 * frame_bytes);
    }
  }
  SECTION("the sticky assignor's user data from another member") {
    const auto frame = claiming_frame(byte_builder{}, 6);
    std::error_code ec;
    const std::size_t peak = peak_of([&] {
      kgroup::assign::sticky_user_data d;
      ec = kgroup::assign::decode_sticky_user_data(frame, d);
    });
    CHECK(ec);
    CHECK(peak <= 2 * frame_bytes);
  }
}

TEST_CASE("decoders: arrays longer than their reservation still decode whole", "[codec]") {
  // Strings of 20 bytes each: the reservation (bytes left / sizeof(std::string)) is smaller than
  // the count, so the vector grows while reading; every element must still arrive.
  byte_builder b;
  b.i16(0).i32(40);
  for (int i = 0; i < 40; ++i) b.str("MECHANISM-NUMBER-" + std::to_string(100 + i));
  kgroup::protocol::sasl_handshake_response m;
  REQUIRE_FALSE(kgroup::protocol::decode(b.out, 1, m));
  REQUIRE(m.mechanisms.size() == 40);
  CHECK(m.mechanisms.front() == "MECHANISM-NUMBER-100");
  CHECK(m.mechanisms.back() == "MECHANISM-NUMBER-139");
}
