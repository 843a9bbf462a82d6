// Base64 (src/base/base64.hpp): RFC 4648's test vectors in both forms, padding, and the inputs the
// decoders refuse.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "base/base64.hpp"

using kgroup::base::base64_decode;
using kgroup::base::base64_encode;
using kgroup::base::base64url_decode;
using kgroup::base::base64url_encode;

namespace {

std::string text(const std::vector<std::uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

}  // namespace

TEST_CASE("base64: RFC 4648 test vectors, padded, round trip", "[base64]") {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    INFO(plain);
    CHECK(base64_encode(plain) == encoded);
    CHECK(base64_encode(std::vector<std::uint8_t>(plain.begin(), plain.end())) == encoded);
    std::vector<std::uint8_t> out{1, 2, 3};
    REQUIRE(base64_decode(encoded, out));
    CHECK(text(out) == plain);
  }
  // Every byte value, and the two alphabets' last digits.
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  std::vector<std::uint8_t> back;
  REQUIRE(base64_decode(base64_encode(all), back));
  CHECK(back == all);
  CHECK(base64_encode(std::vector<std::uint8_t>{0xfb, 0xff}) == "+/8=");
}

TEST_CASE("base64: malformed input is refused", "[base64]") {
  std::vector<std::uint8_t> out;
  for (const char* bad : {"Zg", "Zg=", "Zm9vY", "Zg=a", "Z===", "====", "=Zg=", "Zg==Zm9v",
                          "Zm9v!A==", "Zm 9", "-_8=", "Zh==", "Zm9=", "Zg==="}) {
    INFO(bad);
    CHECK_FALSE(base64_decode(bad, out));
  }
}

TEST_CASE("base64url: no padding, URL-safe digits", "[base64]") {
  CHECK(base64url_encode("") == "");
  CHECK(base64url_encode("f") == "Zg");
  CHECK(base64url_encode("fo") == "Zm8");
  CHECK(base64url_encode("foobar") == "Zm9vYmFy");
  CHECK(base64url_encode("\xfb\xff") == "-_8");
  std::vector<std::uint8_t> out;
  REQUIRE(base64url_decode("Zm8", out));
  CHECK(text(out) == "fo");
  REQUIRE(base64url_decode("-_8", out));
  CHECK(out == std::vector<std::uint8_t>{0xfb, 0xff});
  REQUIRE(base64url_decode("", out));
  CHECK(out.empty());
  for (const char* bad : {"Z", "Zm9vY", "Zg==", "Zm8=", "+/8", "Zh", "Zm9", "Zm.v"}) {
    INFO(bad);
    CHECK_FALSE(base64url_decode(bad, out));
  }
}
