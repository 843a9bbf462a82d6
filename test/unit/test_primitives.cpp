// Codec primitives (reader, writer, tagged-field skipping) and request/response headers,
// checked against literal byte vectors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "byte_builder.hpp"
#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"
#include "protocol/headers.hpp"
#include "protocol/primitives.hpp"

using namespace kgroup::protocol;
using kgroup::test::byte_builder;

namespace {

template <class F>
bytes written(F&& f) {
  bytes out;
  writer w(out);
  f(w);
  REQUIRE(w.ok());
  return out;
}

// Reads `in` completely with `f`; the reader must be ok with nothing left over.
template <class F>
void read_all(const bytes& in, F&& f) {
  reader r(in);
  f(r);
  CHECK(r.ok());
  CHECK(r.remaining() == 0);
}

// Every strict prefix of `in` must fail (and never read past the end).
void every_prefix_fails(const bytes& in, const std::function<void(reader&)>& f) {
  for (std::size_t n = 0; n < in.size(); ++n) {
    INFO("prefix length " << n << " of " << in.size());
    const bytes cut(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    reader r(cut);
    f(r);
    CHECK_FALSE(r.ok());
    CHECK((r.error() == codec_errc::truncated || r.error() == codec_errc::oversized));
    CHECK(r.remaining() == 0);
  }
}

codec_errc read_error(const bytes& in, const std::function<void(reader&)>& f) {
  reader r(in);
  f(r);
  return r.error();
}

}  // namespace

TEST_CASE("byte_builder matches literal bytes", "[codec]") {
  // The message tests trust this builder, so pin it down against literals first.
  CHECK(byte_builder{}.i8(-2).i16(0x0102).i32(-1).out == bytes{0xfe, 0x01, 0x02, 0xff, 0xff, 0xff, 0xff});
  CHECK(byte_builder{}.i64(0x0102030405060708).out == bytes{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(byte_builder{}.uvarint(300).varint(-1).varint(1).out == bytes{0xac, 0x02, 0x01, 0x02});
  CHECK(byte_builder{}.str("ab").cstr("ab").null_str().null_cstr().out ==
        bytes{0x00, 0x02, 'a', 'b', 0x03, 'a', 'b', 0xff, 0xff, 0x00});
  CHECK(byte_builder{}.byts({9}).cbyts({9}).null_b(false).null_b(true).out ==
        bytes{0, 0, 0, 1, 9, 2, 9, 0xff, 0xff, 0xff, 0xff, 0});
  CHECK(byte_builder{}.arr(false, -1).arr(true, -1).arr(true, 2).out == bytes{0xff, 0xff, 0xff, 0xff, 0, 3});
  CHECK(byte_builder{}.tag(5, byte_builder{}.i16(7)).out == bytes{5, 2, 0, 7});
}

TEST_CASE("fixed-width integers are big-endian", "[codec]") {
  const bytes expected{0x80,                                            // int8 -128
                       0x12, 0x34,                                      // int16
                       0xff, 0xfe,                                      // uint16 65534
                       0x80, 0x00, 0x00, 0x00,                          // int32 min
                       0xde, 0xad, 0xbe, 0xef,                          // uint32
                       0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,  // int64
                       0x3f, 0xf8, 0, 0, 0, 0, 0, 0,                    // float64 1.5
                       0x01, 0x00};                                     // bools
  auto out = written([](writer& w) {
    w.write_int8(-128);
    w.write_int16(0x1234);
    w.write_uint16(65534);
    w.write_int32(std::numeric_limits<std::int32_t>::min());
    w.write_uint32(0xdeadbeef);
    w.write_int64(0x7ffffffffffffffe);
    w.write_float64(1.5);
    w.write_bool(true);
    w.write_bool(false);
  });
  CHECK(out == expected);
  auto read_them = [](reader& r) {
    return std::tuple{r.read_int8(), r.read_int16(), r.read_uint16(), r.read_int32(), r.read_uint32(),
                      r.read_int64(), r.read_float64(), r.read_bool(), r.read_bool()};
  };
  read_all(expected, [&](reader& r) {
    CHECK(read_them(r) == std::tuple{std::int8_t{-128}, std::int16_t{0x1234}, std::uint16_t{65534},
                                     std::numeric_limits<std::int32_t>::min(), std::uint32_t{0xdeadbeef},
                                     std::int64_t{0x7ffffffffffffffe}, 1.5, true, false});
  });
  every_prefix_fails(expected, [&](reader& r) { (void)read_them(r); });
  // Any non-zero byte reads as true, as in the Java client.
  read_all(bytes{0x02}, [](reader& r) { CHECK(r.read_bool()); });
  CHECK(written([](writer& w) { w.write_int64(-2); }) == bytes{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe});
}

TEST_CASE("varint and varlong zigzag edge values", "[codec]") {
  struct case32 { std::int32_t v; bytes b; };
  const std::vector<case32> v32{
      {0, {0x00}},
      {-1, {0x01}},
      {1, {0x02}},
      {-64, {0x7f}},
      {64, {0x80, 0x01}},
      {std::numeric_limits<std::int32_t>::max(), {0xfe, 0xff, 0xff, 0xff, 0x0f}},
      {std::numeric_limits<std::int32_t>::min(), {0xff, 0xff, 0xff, 0xff, 0x0f}},
  };
  for (const auto& c : v32) {
    INFO("varint " << c.v);
    CHECK(written([&](writer& w) { w.write_varint(c.v); }) == c.b);
    read_all(c.b, [&](reader& r) { CHECK(r.read_varint() == c.v); });
    every_prefix_fails(c.b, [](reader& r) { r.read_varint(); });
  }
  struct case64 { std::int64_t v; bytes b; };
  const std::vector<case64> v64{
      {0, {0x00}},
      {-1, {0x01}},
      {1, {0x02}},
      {std::numeric_limits<std::int64_t>::max(), {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
      {std::numeric_limits<std::int64_t>::min(), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
      {std::numeric_limits<std::int32_t>::min() - std::int64_t{1}, {0x81, 0x80, 0x80, 0x80, 0x10}},
  };
  for (const auto& c : v64) {
    INFO("varlong " << c.v);
    CHECK(written([&](writer& w) { w.write_varlong(c.v); }) == c.b);
    read_all(c.b, [&](reader& r) { CHECK(r.read_varlong() == c.v); });
    every_prefix_fails(c.b, [](reader& r) { r.read_varlong(); });
  }
}

TEST_CASE("unsigned varint", "[codec]") {
  struct c { std::uint32_t v; bytes b; };
  for (const auto& [v, b] : std::vector<c>{{0, {0x00}},
                                           {127, {0x7f}},
                                           {128, {0x80, 0x01}},
                                           {300, {0xac, 0x02}},
                                           {16383, {0xff, 0x7f}},
                                           {16384, {0x80, 0x80, 0x01}},
                                           {0xffffffff, {0xff, 0xff, 0xff, 0xff, 0x0f}}}) {
    INFO("uvarint " << v);
    CHECK(written([&, v = v](writer& w) { w.write_uvarint(v); }) == b);
    CHECK(uvarint_size(v) == b.size());
    read_all(b, [v = v](reader& r) { CHECK(r.read_uvarint() == v); });
    every_prefix_fails(b, [](reader& r) { r.read_uvarint(); });
  }
  // A redundant (non-minimal) encoding within 5 bytes is still a valid value.
  read_all(bytes{0x81, 0x80, 0x00}, [](reader& r) { CHECK(r.read_uvarint() == 1); });
  read_all(bytes{0x80, 0x00}, [](reader& r) { CHECK(r.read_uvarint() == 0); });
  read_all(bytes{0xac, 0x02}, [](reader& r) { CHECK(r.read_uvarlong() == 300); });
  read_all(bytes{0xff, 0x7f}, [](reader& r) { CHECK(r.read_varlong() == -8192); });

  SECTION("longer than 5 bytes is bad_varint") {
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, [](reader& r) { r.read_uvarint(); }) ==
          codec_errc::bad_varint);
    CHECK(read_error({0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, [](reader& r) { r.read_uvarint(); }) ==
          codec_errc::bad_varint);
  }
  SECTION("a fifth byte carrying bits above 32 is bad_varint") {
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0x1f}, [](reader& r) { r.read_uvarint(); }) ==
          codec_errc::bad_varint);
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0x1f}, [](reader& r) { r.read_varint(); }) ==
          codec_errc::bad_varint);
  }
  SECTION("unsigned varlong: 10 bytes max") {
    const bytes max{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK(written([](writer& w) { w.write_uvarlong(~std::uint64_t{0}); }) == max);
    read_all(max, [](reader& r) { CHECK(r.read_uvarlong() == ~std::uint64_t{0}); });
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
                     [](reader& r) { r.read_uvarlong(); }) == codec_errc::bad_varint);
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x00},
                     [](reader& r) { r.read_varlong(); }) == codec_errc::bad_varint);
  }
}

TEST_CASE("strings: plain, nullable, compact", "[codec]") {
  const bytes expected{0x00, 0x03, 'a', 'b', 'c',  // STRING "abc"
                       0x00, 0x00,                 // STRING ""
                       0xff, 0xff,                 // NULLABLE_STRING null
                       0x00, 0x01, 'x',            // NULLABLE_STRING "x"
                       0x04, 'a', 'b', 'c',        // COMPACT_STRING "abc"
                       0x01,                       // COMPACT_STRING ""
                       0x00,                       // COMPACT_NULLABLE_STRING null
                       0x02, 'y'};                 // COMPACT_NULLABLE_STRING "y"
  auto out = written([](writer& w) {
    w.write_string("abc", false);
    w.write_string("", false);
    w.write_nullable_string(std::nullopt, false);
    w.write_nullable_string(std::string("x"), false);
    w.write_string("abc", true);
    w.write_string("", true);
    w.write_nullable_string(std::nullopt, true);
    w.write_nullable_string(std::string("y"), true);
  });
  CHECK(out == expected);
  auto read_them = [](reader& r) {
    return std::tuple{r.read_string(false),          r.read_string(false),
                      r.read_nullable_string(false), r.read_nullable_string(false),
                      r.read_string(true),           r.read_string(true),
                      r.read_nullable_string(true),  r.read_nullable_string(true)};
  };
  using opt = std::optional<std::string>;
  read_all(expected, [&](reader& r) {
    CHECK(read_them(r) == std::tuple{std::string("abc"), std::string(), opt(), opt("x"), std::string("abc"),
                                     std::string(), opt(), opt("y")});
  });
  every_prefix_fails(expected, [&](reader& r) { (void)read_them(r); });

  SECTION("a 300-byte compact string has a two-byte length") {
    const std::string s(300, 'q');
    auto b = written([&](writer& w) { w.write_string(s, true); });
    REQUIRE(b.size() == 302);
    CHECK(b[0] == 0xad);
    CHECK(b[1] == 0x02);
    read_all(b, [&](reader& r) { CHECK(r.read_string(true) == s); });
  }
  SECTION("null where a string is required reads as empty (deliberate leniency)") {
    // read_string accepts null as "" on purpose (librdkafka's mock cluster sends a null host in
    // error responses); only a real negative length is an error.
    read_all({0xff, 0xff, 0x00, 0x01}, [](reader& r) {
      CHECK(r.read_string(false).empty());
      CHECK(r.read_int16() == 1);
    });
    read_all({0x00, 0x02, 'z'}, [](reader& r) {
      CHECK(r.read_string(true).empty());
      CHECK(r.read_string(true) == "z");
    });
  }
  SECTION("negative lengths") {
    CHECK(read_error({0xff, 0xfe}, [](reader& r) { r.read_string(false); }) == codec_errc::negative_length);
    CHECK(read_error({0x80, 0x00}, [](reader& r) { r.read_nullable_string(false); }) ==
          codec_errc::negative_length);
  }
  SECTION("a length beyond the input is oversized") {
    CHECK(read_error({0x00, 0x05, 'a'}, [](reader& r) { r.read_string(false); }) == codec_errc::oversized);
    CHECK(read_error({0x7f, 0xff}, [](reader& r) { r.read_nullable_string(false); }) == codec_errc::oversized);
    CHECK(read_error({0x06, 'a'}, [](reader& r) { r.read_string(true); }) == codec_errc::oversized);
  }
  SECTION("compact lengths beyond int32 are oversized, never wrapped to null or empty") {
    // uvarint 0xffffffff: length 2^32-2; uvarint 0x80000001: length 2^31.
    const bytes huge{0xff, 0xff, 0xff, 0xff, 0x0f, 'a'};
    const bytes big{0x81, 0x80, 0x80, 0x80, 0x08, 'a'};
    for (const bytes& in : {huge, big}) {
      CHECK(read_error(in, [](reader& r) { r.read_string(true); }) == codec_errc::oversized);
      CHECK(read_error(in, [](reader& r) { r.read_nullable_string(true); }) == codec_errc::oversized);
      CHECK(read_error(in, [](reader& r) { r.read_bytes(true); }) == codec_errc::oversized);
      CHECK(read_error(in, [](reader& r) { r.read_nullable_bytes(true); }) == codec_errc::oversized);
      CHECK(read_error(in, [](reader& r) { r.read_records(true); }) == codec_errc::oversized);
      CHECK(read_error(in, [](reader& r) { r.read_array_length(true, true); }) == codec_errc::oversized);
    }
  }
  SECTION("writing a string longer than int16 fails") {
    bytes out2;
    writer w(out2);
    w.write_string(std::string(32768, 'z'), false);
    CHECK(w.error() == codec_errc::oversized);
    bytes out3;
    writer w3(out3);
    w3.write_string(std::string(32767, 'z'), false);
    CHECK(w3.ok());
    CHECK(out3.size() == 32769);
  }
}

TEST_CASE("bytes, nullable bytes and records", "[codec]") {
  const bytes expected{0x00, 0x00, 0x00, 0x02, 0xaa, 0xbb,  // BYTES
                       0x00, 0x00, 0x00, 0x00,              // BYTES empty
                       0xff, 0xff, 0xff, 0xff,              // NULLABLE_BYTES null
                       0x03, 0xaa, 0xbb,                    // COMPACT_BYTES
                       0x01,                                // COMPACT_BYTES empty
                       0x00,                                // COMPACT_NULLABLE_BYTES null
                       0x00, 0x00, 0x00, 0x01, 0x07,        // RECORDS (1 byte)
                       0x00,                                // COMPACT_RECORDS null
                       0x02, 0x09};                         // COMPACT_RECORDS (1 byte)
  const bytes ab{0xaa, 0xbb};
  const bytes seven{0x07};
  const bytes nine{0x09};
  auto out = written([&](writer& w) {
    w.write_bytes(ab, false);
    w.write_bytes(bytes{}, false);
    w.write_nullable_bytes(std::nullopt, false);
    w.write_bytes(ab, true);
    w.write_nullable_bytes(bytes{}, true);
    w.write_nullable_bytes(std::nullopt, true);
    w.write_records(records_view{seven}, false);
    w.write_records(std::nullopt, true);
    w.write_records(records_view{nine}, true);
  });
  CHECK(out == expected);
  auto read_them = [](reader& r) {
    return std::tuple{r.read_bytes(false),         r.read_bytes(false),   r.read_nullable_bytes(false),
                      r.read_bytes(true),          r.read_nullable_bytes(true), r.read_nullable_bytes(true),
                      r.read_records(false),       r.read_records(true),  r.read_records(true)};
  };
  using optb = std::optional<bytes>;
  using optr = std::optional<records_view>;
  read_all(expected, [&](reader& r) {
    CHECK(read_them(r) == std::tuple{ab, bytes{}, optb(), ab, optb(bytes{}), optb(), optr(records_view{seven}),
                                     optr(), optr(records_view{nine})});
  });
  every_prefix_fails(expected, [&](reader& r) { (void)read_them(r); });

  SECTION("records view points into the input") {
    const bytes in{0x00, 0x00, 0x00, 0x02, 0x05, 0x06};
    reader r(in);
    auto rec = r.read_records(false);
    REQUIRE(rec);
    CHECK(rec->data.data() == in.data() + 4);
    CHECK(rec->data.size() == 2);
  }
  SECTION("negative and null lengths") {
    CHECK(read_error({0xff, 0xff, 0xff, 0xfe}, [](reader& r) { r.read_bytes(false); }) ==
          codec_errc::negative_length);
    CHECK(read_error({0x80, 0x00, 0x00, 0x00}, [](reader& r) { r.read_nullable_bytes(false); }) ==
          codec_errc::negative_length);
    CHECK(read_error({0xff, 0xff, 0xff, 0xfe}, [](reader& r) { r.read_records(false); }) ==
          codec_errc::negative_length);
    // A null for non-nullable bytes reads leniently as empty (see reader::read_bytes).
    std::vector<std::uint8_t> null_len{0xff, 0xff, 0xff, 0xff};
    reader lenient(null_len);
    CHECK(lenient.read_bytes(false).empty());
    CHECK(lenient.ok());
    CHECK(lenient.remaining() == 0);
  }
  SECTION("length beyond the input") {
    CHECK(read_error({0x7f, 0xff, 0xff, 0xff, 0x01}, [](reader& r) { r.read_bytes(false); }) ==
          codec_errc::oversized);
    CHECK(read_error({0x00, 0x00, 0x00, 0x02, 0x01}, [](reader& r) { r.read_records(false); }) ==
          codec_errc::oversized);
  }
}

TEST_CASE("array lengths", "[codec]") {
  const bytes expected{0xff, 0xff, 0xff, 0xff,  // ARRAY null
                       0x00, 0x00, 0x00, 0x00,  // ARRAY empty
                       0x00, 0x00, 0x00, 0x02,  // ARRAY of 2 int16
                       0x00, 0x01, 0x00, 0x02,
                       0x00,                    // COMPACT_ARRAY null
                       0x01,                    // COMPACT_ARRAY empty
                       0x03, 0x00, 0x03, 0x00, 0x04};  // COMPACT_ARRAY of 2 int16
  auto out = written([](writer& w) {
    w.write_array_length(-1, false);
    w.write_array_length(0, false);
    w.write_array_length(2, false);
    w.write_int16(1);
    w.write_int16(2);
    w.write_array_length(-1, true);
    w.write_array_length(0, true);
    w.write_array_length(2, true);
    w.write_int16(3);
    w.write_int16(4);
  });
  CHECK(out == expected);
  auto read_them = [](reader& r) {
    return std::tuple{r.read_array_length(false, true, 2), r.read_array_length(false, true, 2),
                      r.read_array_length(false, false, 2), r.read_int16(), r.read_int16(),
                      r.read_array_length(true, true, 2), r.read_array_length(true, false, 2),
                      r.read_array_length(true, false, 2), r.read_int16(), r.read_int16()};
  };
  read_all(expected, [&](reader& r) {
    CHECK(read_them(r) == std::tuple{-1, 0, 2, std::int16_t{1}, std::int16_t{2}, -1, 0, 2, std::int16_t{3},
                                     std::int16_t{4}});
  });
  every_prefix_fails(expected, [&](reader& r) { (void)read_them(r); });

  SECTION("null where an array is required") {
    CHECK(read_error({0xff, 0xff, 0xff, 0xff}, [](reader& r) { r.read_array_length(false, false); }) ==
          codec_errc::null_not_allowed);
    CHECK(read_error({0x00}, [](reader& r) { r.read_array_length(true, false); }) ==
          codec_errc::null_not_allowed);
  }
  SECTION("negative count") {
    CHECK(read_error({0xff, 0xff, 0xff, 0xfe}, [](reader& r) { r.read_array_length(false, true); }) ==
          codec_errc::negative_length);
    CHECK(read_error({0x80, 0x00, 0x00, 0x00}, [](reader& r) { r.read_array_length(false, true); }) ==
          codec_errc::negative_length);
  }
  SECTION("a huge count with little input is oversized before anything is allocated") {
    const bytes in{0x7f, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01};
    reader r(in);
    CHECK(r.read_array_length(false, false, 4) == 0);
    CHECK(r.error() == codec_errc::oversized);
    // The bound uses the element size: 2 int32 need 8 bytes, 4 remain.
    CHECK(read_error({0x00, 0x00, 0x00, 0x02, 0, 0, 0, 1}, [](reader& rr) { rr.read_array_length(false, false, 4); }) ==
          codec_errc::oversized);
    read_all({0x00, 0x00, 0x00, 0x01, 0, 0, 0, 1}, [](reader& rr) {
      CHECK(rr.read_array_length(false, false, 4) == 1);
      rr.read_int32();
    });
    CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0x07}, [](reader& rr) { rr.read_array_length(true, false, 1); }) ==
          codec_errc::oversized);
  }
}

TEST_CASE("uuid", "[codec]") {
  uuid u;
  for (std::size_t i = 0; i < 16; ++i) u.bytes[i] = static_cast<std::uint8_t>(0xf0 + i);
  const bytes expected = byte_builder{}.uuid(0xf0).out;
  CHECK(written([&](writer& w) { w.write_uuid(u); }) == expected);
  read_all(expected, [&](reader& r) { CHECK(r.read_uuid() == u); });
  every_prefix_fails(expected, [](reader& r) { r.read_uuid(); });
  CHECK(uuid{}.is_zero());
  CHECK_FALSE(u.is_zero());
  uuid one;
  one.bytes[15] = 1;
  CHECK(one.to_string() == "AAAAAAAAAAAAAAAAAAAAAQ");
}

TEST_CASE("tagged-field skipping", "[codec]") {
  // Two tags (one with a 2-byte payload, one empty), then an int16 that must still be readable.
  const bytes in{0x02, 0x00, 0x02, 0xaa, 0xbb, 0x85, 0x01, 0x00, 0x12, 0x34};
  read_all(in, [](reader& r) {
    skip_tagged_fields(r);
    CHECK(r.read_int16() == 0x1234);
  });
  every_prefix_fails(in, [](reader& r) {
    skip_tagged_fields(r);
    r.read_int16();
  });
  read_all(bytes{0x00}, [](reader& r) { skip_tagged_fields(r); });
  CHECK(read_error({0x01, 0x00, 0x05, 0x01}, [](reader& r) { skip_tagged_fields(r); }) == codec_errc::oversized);
  CHECK(read_error({0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}, [](reader& r) { skip_tagged_fields(r); }) ==
        codec_errc::oversized);
  CHECK(read_error({0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00}, [](reader& r) { skip_tagged_fields(r); }) ==
        codec_errc::bad_varint);
}

TEST_CASE("reader errors are sticky", "[codec]") {
  const bytes in{0x00, 0x01, 0x02};
  reader r(in);
  CHECK(r.read_int32() == 0);
  CHECK(r.error() == codec_errc::truncated);
  CHECK(r.remaining() == 0);
  CHECK(r.read_int8() == 0);
  CHECK(r.read_string(false).empty());
  r.fail(codec_errc::oversized);
  CHECK(r.error() == codec_errc::truncated);  // the first error is kept

  // The inline varint paths (one and two bytes) read nothing once a reader has failed.
  const bytes two{0x05, 0x80, 0x01, 0x80, 0x01};
  reader f(two);
  f.fail(codec_errc::oversized);
  CHECK(f.read_uvarint() == 0);
  CHECK(f.read_uvarlong() == 0);
  CHECK(f.read_varint() == 0);
  CHECK(f.remaining() == 0);  // a failed reader is at its end
  CHECK(f.error() == codec_errc::oversized);
  CHECK(make_error_code(codec_errc::truncated).category().name() == std::string("kgroup.codec"));
  std::error_code ec = codec_errc::trailing_bytes;
  CHECK(ec == codec_errc::trailing_bytes);
  CHECK_FALSE(ec.message().empty());
}

TEST_CASE("skip, read_raw and varint lengths", "[codec]") {
  const bytes in{0x01, 0x02, 0x03, 0x04, 0x05};
  reader r(in);
  r.skip(1);
  auto raw = r.read_raw(2);
  REQUIRE(raw.size() == 2);
  CHECK(raw[0] == 0x02);
  CHECK(r.remaining() == 2);
  r.skip(3);
  CHECK(r.error() == codec_errc::truncated);

  read_all({0x01}, [](reader& rr) { CHECK(rr.read_varint_length() == -1); });
  read_all({0x04, 0xaa, 0xbb}, [](reader& rr) {
    CHECK(rr.read_varint_length() == 2);
    rr.skip(2);
  });
  CHECK(read_error({0x03}, [](reader& rr) { rr.read_varint_length(); }) == codec_errc::negative_length);
  CHECK(read_error({0x06, 0x00}, [](reader& rr) { rr.read_varint_length(); }) == codec_errc::oversized);
}

TEST_CASE("writer patch_int32 and buffer", "[codec]") {
  bytes out{0x09};
  writer w(out);
  w.write_int32(0);
  w.write_int8(1);
  w.patch_int32(1, 0x01020304);
  CHECK(out == bytes{0x09, 0x01, 0x02, 0x03, 0x04, 0x01});
  CHECK(w.size() == 6);
  w.fail(codec_errc::field_not_supported, "X");
  w.fail(codec_errc::oversized, "Y");
  CHECK(w.error() == codec_errc::field_not_supported);
  CHECK(std::string(w.error_field()) == "X");
}

TEST_CASE("request headers v0, v1, v2", "[codec]") {
  const request_header h{3, 12, 0x01020304, std::string("ab")};
  const bytes v0{0x00, 0x03, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04};
  const bytes v1{0x00, 0x03, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04, 0x00, 0x02, 'a', 'b'};
  // v2: client_id keeps its int16 length, then an empty tagged-field section.
  const bytes v2{0x00, 0x03, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04, 0x00, 0x02, 'a', 'b', 0x00};
  const bytes v1_null{0x00, 0x03, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04, 0xff, 0xff};
  const std::vector<std::pair<int, const bytes*>> cases{{0, &v0}, {1, &v1}, {2, &v2}};
  for (const auto& [ver, expected] : cases) {
    INFO("header v" << ver);
    CHECK(written([&, ver = ver](writer& w) { encode_request_header(w, h, ver); }) == *expected);
    request_header back;
    back.client_id = "junk";
    read_all(*expected, [&, ver = ver](reader& r) { decode_request_header(r, back, ver); });
    request_header want = h;
    if (ver == 0) want.client_id.reset();
    CHECK(back == want);
    every_prefix_fails(*expected, [ver = ver](reader& r) {
      request_header x;
      decode_request_header(r, x, ver);
    });
  }
  request_header null_id{3, 12, 0x01020304, std::nullopt};
  CHECK(written([&](writer& w) { encode_request_header(w, null_id, 1); }) == v1_null);
  // Unknown tags in a v2 header are skipped.
  const bytes v2_tags{0x00, 0x03, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0x01, 0x07, 0x01, 0xee};
  request_header back;
  read_all(v2_tags, [&](reader& r) { decode_request_header(r, back, 2); });
  CHECK(back == null_id);
  CHECK(request_header_version(false) == 1);
  CHECK(request_header_version(true) == 2);
}

TEST_CASE("response headers v0, v1", "[codec]") {
  const response_header h{-2};
  const bytes v0{0xff, 0xff, 0xff, 0xfe};
  const bytes v1{0xff, 0xff, 0xff, 0xfe, 0x00};
  CHECK(written([&](writer& w) { encode_response_header(w, h, 0); }) == v0);
  CHECK(written([&](writer& w) { encode_response_header(w, h, 1); }) == v1);
  response_header back;
  read_all(v0, [&](reader& r) { decode_response_header(r, back, 0); });
  CHECK(back == h);
  back = {};
  read_all(v1, [&](reader& r) { decode_response_header(r, back, 1); });
  CHECK(back == h);
  read_all({0, 0, 0, 5, 0x01, 0x03, 0x00}, [&](reader& r) { decode_response_header(r, back, 1); });
  CHECK(back.correlation_id == 5);
  every_prefix_fails(v1, [](reader& r) {
    response_header x;
    decode_response_header(r, x, 1);
  });
  std::int32_t cid = 0;
  CHECK(peek_correlation_id(v1, cid));
  CHECK(cid == -2);
  CHECK_FALSE(peek_correlation_id(std::span<const std::uint8_t>(v1.data(), 3), cid));
  // ApiVersions (key 18) always answers with header v0.
  CHECK(response_header_version(18, true) == 0);
  CHECK(response_header_version(18, false) == 0);
  CHECK(response_header_version(3, true) == 1);
  CHECK(response_header_version(3, false) == 0);
}

TEST_CASE("error_name names every error the library reports", "[codec]") {
  using kgroup::error_name;
  CHECK(error_name({}) == "NONE");
  CHECK(error_name(kgroup::make_error_code(kgroup::kafka_errc::rebalance_in_progress)) == "REBALANCE_IN_PROGRESS");
  CHECK(error_name(std::error_code(9999, kgroup::kafka_category())) == "UNKNOWN_ERROR_9999");
  CHECK(error_name(kgroup::make_error_code(kgroup::client_errc::commit_failed)) == "COMMIT_FAILED");
  CHECK(error_name(kgroup::make_error_code(kgroup::client_errc::partition_not_found)) == "PARTITION_NOT_FOUND");
  CHECK(error_name(std::error_code(999, kgroup::client_category())) == "CLIENT_ERROR_999");
  CHECK(error_name(make_error_code(codec_errc::trailing_bytes)) == "TRAILING_BYTES");
  CHECK(error_name(std::error_code(99, kgroup::protocol::codec_category())) == "KGROUP_CODEC_99");
  CHECK(error_name(std::make_error_code(std::errc::connection_refused)) ==
        "GENERIC_" + std::to_string(static_cast<int>(std::errc::connection_refused)));
  // Every client error has its own name.
  std::set<std::string> names;
  for (int v = 1; v <= static_cast<int>(kgroup::client_errc::invalid_argument); ++v) {
    const auto n = error_name(std::error_code(v, kgroup::client_category()));
    CHECK(n.rfind("CLIENT_ERROR_", 0) != 0);
    names.insert(n);
  }
  CHECK(names.size() == static_cast<std::size_t>(kgroup::client_errc::invalid_argument));
}

TEST_CASE("is_retriable and is_fatal classify every error a program can get", "[errors]") {
  using kgroup::client_errc;
  using kgroup::kafka_errc;
  auto k = [](kafka_errc e) { return kgroup::make_error_code(e); };
  auto cl = [](client_errc e) { return kgroup::make_error_code(e); };
  CHECK_FALSE(kgroup::is_retriable({}));
  CHECK_FALSE(kgroup::is_fatal({}));
  // Kafka's codes: the retriable flag of Kafka's table, the group-fatal class and authentication.
  CHECK(kgroup::is_retriable(k(kafka_errc::not_coordinator)));
  CHECK(kgroup::is_retriable(k(kafka_errc::coordinator_load_in_progress)));
  CHECK_FALSE(kgroup::is_fatal(k(kafka_errc::not_coordinator)));
  CHECK(kgroup::is_fatal(k(kafka_errc::fenced_instance_id)));
  CHECK(kgroup::is_fatal(k(kafka_errc::group_authorization_failed)));
  CHECK(kgroup::is_fatal(k(kafka_errc::sasl_authentication_failed)));
  CHECK_FALSE(kgroup::is_retriable(k(kafka_errc::fenced_instance_id)));
  CHECK_FALSE(kgroup::is_fatal(k(kafka_errc::rebalance_in_progress)));
  CHECK_FALSE(kgroup::is_fatal(k(kafka_errc::offset_out_of_range)));
  // Every client code: at most one of the two, and the expected class for each.
  const std::set<client_errc> retriable{
      client_errc::connection_failed,  client_errc::connection_closed,    client_errc::request_timed_out,
      client_errc::protocol_violation, client_errc::no_brokers_available, client_errc::coordinator_not_found};
  const std::set<client_errc> fatal{client_errc::invalid_config, client_errc::no_compatible_version,
                                    client_errc::tls_failed, client_errc::closed, client_errc::shutting_down};
  for (int v = 1; v <= static_cast<int>(client_errc::concurrent_access); ++v) {
    const auto e = static_cast<client_errc>(v);
    INFO(kgroup::error_name(cl(e)));
    CHECK(kgroup::is_retriable(cl(e)) == (retriable.count(e) > 0));
    CHECK(kgroup::is_fatal(cl(e)) == (fatal.count(e) > 0));
  }
  // A broker answer that could not be decoded: another try may decode.
  CHECK(kgroup::is_retriable(make_error_code(codec_errc::trailing_bytes)));
  CHECK_FALSE(kgroup::is_retriable(std::make_error_code(std::errc::connection_refused)));
  // Error: a fatal flag overrides the code's class (a KIP-848 topic refusal is fatal there).
  const kgroup::Error timeout(cl(client_errc::request_timed_out), "x");
  CHECK(timeout.is_retriable());
  CHECK_FALSE(timeout.is_fatal());
  const kgroup::Error refused(k(kafka_errc::topic_authorization_failed), "x", /*fatal=*/true);
  CHECK(refused.is_fatal());
  CHECK_FALSE(refused.is_retriable());
  CHECK(kgroup::Error(cl(client_errc::closed)).is_fatal());
}

TEST_CASE("error reactions: one table classifies every code for every layer", "[errors]") {
  using kgroup::protocol::reaction;
  using kgroup::protocol::reacts;
  auto c = [](kgroup::kafka_errc e) { return static_cast<std::int16_t>(e); };
  CHECK(reacts(c(kgroup::kafka_errc::not_coordinator), reaction::coordinator_moved));
  CHECK(reacts(c(kgroup::kafka_errc::coordinator_not_available), reaction::coordinator_moved));
  CHECK_FALSE(reacts(c(kgroup::kafka_errc::coordinator_load_in_progress), reaction::coordinator_moved));
  CHECK(reacts(c(kgroup::kafka_errc::coordinator_load_in_progress),
               reaction::coordinator_moved | reaction::coordinator_busy));
  CHECK(reacts(c(kgroup::kafka_errc::unknown_member_id), reaction::fenced));
  CHECK(reacts(c(kgroup::kafka_errc::illegal_generation), reaction::fenced));
  CHECK(reacts(c(kgroup::kafka_errc::fenced_member_epoch), reaction::fenced));
  CHECK_FALSE(reacts(c(kgroup::kafka_errc::rebalance_in_progress), reaction::fenced));
  CHECK(reacts(c(kgroup::kafka_errc::fenced_instance_id), reaction::group_fatal));
  CHECK(reacts(c(kgroup::kafka_errc::group_authorization_failed), reaction::group_fatal));
  CHECK_FALSE(reacts(c(kgroup::kafka_errc::request_timed_out), reaction::group_fatal));
  CHECK(reacts(c(kgroup::kafka_errc::not_leader_or_follower), reaction::refresh_metadata));
  CHECK(reacts(c(kgroup::kafka_errc::unknown_topic_id), reaction::refresh_metadata));
  CHECK_FALSE(reacts(c(kgroup::kafka_errc::offset_out_of_range), reaction::refresh_metadata));
  // No class for success or for a code Kafka does not define.
  CHECK_FALSE(reacts(0, reaction::coordinator_moved | reaction::coordinator_busy | reaction::fenced |
                            reaction::group_fatal | reaction::refresh_metadata));
  CHECK_FALSE(reacts(9999, reaction::group_fatal));
}
