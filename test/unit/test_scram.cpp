// SCRAM client core against the example exchanges of RFC 5802 (SHA-1) and RFC 7677 (SHA-256),
// and its refusals of bad server messages.
#include <catch2/catch.hpp>

#include "base/base64.hpp"
#include "security/scram.hpp"

using kgroup::base::base64_encode;
using kgroup::security::scram_client;
using kgroup::security::scram_hash;

TEST_CASE("scram: the RFC 7677 SCRAM-SHA-256 example exchange", "[scram]") {
  scram_client c(scram_hash::sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
  CHECK(c.client_first() == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  std::string final_msg, error;
  REQUIRE(c.client_final("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                         final_msg, error));
  CHECK(final_msg ==
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  CHECK(c.verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", error));
}

TEST_CASE("scram: the RFC 5802 SCRAM-SHA-1 example exchange", "[scram]") {
  scram_client c(scram_hash::sha1, "user", "pencil", "fyko+d2lbbFgONRv9qkxdawL");
  CHECK(c.client_first() == "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL");
  std::string final_msg, error;
  REQUIRE(c.client_final("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096", final_msg, error));
  CHECK(final_msg == "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=");
  CHECK(c.verify_server_final("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", error));
}

TEST_CASE("scram: bad server messages are refused with a reason that never shows the password", "[scram]") {
  const std::string first_ok = "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
  std::string out, error;
  SECTION("a nonce that does not extend the client's") {
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    c.client_first();
    CHECK_FALSE(c.client_final("r=zzzzzzXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", out, error));
    CHECK(error.find("nonce") != std::string::npos);
  }
  SECTION("too few iterations") {
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    c.client_first();
    CHECK_FALSE(c.client_final("r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", out, error));
    CHECK(error.find("iterations") != std::string::npos);
  }
  SECTION("more iterations than Kafka's maximum (a hostile server stalling the client)") {
    // Issue 31, item 1: accepted before, and i=2147483647 ran PBKDF2 for many minutes.
    for (const char* count : {"16385", "1000000", "2147483647", "4294967295"}) {
      INFO(count);
      scram_client c(scram_hash::sha512, "u", "s3cret-pw", "abcdef");
      c.client_first();
      CHECK_FALSE(c.client_final(std::string("r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=") + count, out, error));
      CHECK(error.find("more than 16384") != std::string::npos);
    }
    scram_client c(scram_hash::sha512, "u", "s3cret-pw", "abcdef");
    c.client_first();
    CHECK(c.client_final("r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16384", out, error));  // the maximum itself
  }
  SECTION("a salt longer than any server uses (issue 31: bounded)") {
    const std::string long_salt = base64_encode(std::vector<std::uint8_t>(4096, 7));
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    c.client_first();
    CHECK_FALSE(c.client_final("r=abcdefXYZ,s=" + long_salt + ",i=4096", out, error));
    CHECK(error.find("salt") != std::string::npos);
    scram_client ok(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    ok.client_first();
    CHECK(ok.client_final("r=abcdefXYZ,s=" + base64_encode(std::vector<std::uint8_t>(128, 7)) + ",i=4096", out, error));
  }
  SECTION("a mandatory extension the client does not know (RFC 5802)") {
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    c.client_first();
    CHECK_FALSE(c.client_final("m=ext-x,r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", out, error));
    CHECK(error.find("mandatory extension") != std::string::npos);
  }
  SECTION("missing or malformed attributes") {
    for (const char* bad : {"", "r=abcdefXYZ", "r=abcdefXYZ,s=!!!!,i=4096", "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x",
                            "e=other-error"}) {
      INFO(bad);
      scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
      c.client_first();
      CHECK_FALSE(c.client_final(bad, out, error));
      CHECK(error.find("s3cret") == std::string::npos);
    }
  }
  SECTION("a server signature that does not match, and a server error") {
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    c.client_first();
    REQUIRE(c.client_final(first_ok, out, error));
    CHECK_FALSE(c.verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", error));
    CHECK(error.find("signature") != std::string::npos);
    scram_client d(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    d.client_first();
    REQUIRE(d.client_final(first_ok, out, error));
    CHECK_FALSE(d.verify_server_final("e=invalid-proof", error));
    CHECK(error.find("invalid-proof") != std::string::npos);
  }
  SECTION("messages out of order") {
    scram_client c(scram_hash::sha256, "u", "s3cret-pw", "abcdef");
    CHECK_FALSE(c.client_final(first_ok, out, error));
    CHECK_FALSE(c.verify_server_final("v=AAAA", error));
  }
}

TEST_CASE("scram: user names escape ',' and '='; random nonces differ", "[scram]") {
  scram_client c(scram_hash::sha512, "a,b=c", "pw", "n0nce");
  CHECK(c.client_first() == "n,,n=a=2Cb=3Dc,r=n0nce");
  scram_client r1(scram_hash::sha512, "u", "pw"), r2(scram_hash::sha512, "u", "pw");
  CHECK(r1.client_first() != r2.client_first());
  kgroup::security::scram_hash h{};
  CHECK(kgroup::security::scram_hash_from_mechanism("SCRAM-SHA-512", h));
  CHECK(h == scram_hash::sha512);
  CHECK_FALSE(kgroup::security::scram_hash_from_mechanism("PLAIN", h));
}

// ---- the SASL session: handshake and authenticate rounds ----

#include "security/sasl.hpp"

using kgroup::security::sasl_session;

namespace {

kgroup::protocol::sasl_authenticate_response auth_answer(const std::string& bytes, std::int16_t error = 0,
                                                         std::string message = {}) {
  kgroup::protocol::sasl_authenticate_response r;
  r.error_code = error;
  r.error_message = std::move(message);
  r.auth_bytes.assign(bytes.begin(), bytes.end());
  return r;
}

std::string text(const kgroup::protocol::bytes& b) {
  return std::string(b.begin(), b.end());
}

}  // namespace

TEST_CASE("sasl: PLAIN is one round with the NUL-separated credentials", "[scram]") {
  sasl_session s({"PLAIN", "alice", "alice-secret", {}, {}});
  CHECK(s.handshake().mechanism == "PLAIN");
  std::string error;
  kgroup::protocol::sasl_handshake_response hs;
  REQUIRE(s.on_handshake(hs, error));
  CHECK(text(s.next()) == std::string("\0alice\0alice-secret", 19));
  auto ok = auth_answer("");
  ok.session_lifetime_ms = 60000;
  CHECK(s.on_authenticate(ok, error) == sasl_session::status::done);
  CHECK(s.session_lifetime_ms() == 60000);
}

TEST_CASE("sasl: SCRAM-SHA-256 runs the RFC 7677 exchange over SaslAuthenticate", "[scram]") {
  sasl_session s({"SCRAM-SHA-256", "user", "pencil", "rOprNGfwEbeRWgbNEkqO", {}});
  std::string error;
  REQUIRE(s.on_handshake({}, error));
  CHECK(text(s.next()) == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  CHECK(s.on_authenticate(
            auth_answer("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
            error) == sasl_session::status::more);
  CHECK(text(s.next()) ==
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  CHECK(s.on_authenticate(auth_answer("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="), error) ==
        sasl_session::status::done);
}

TEST_CASE("sasl: a refused mechanism names the broker's list; a failed authentication its message", "[scram]") {
  std::string error;
  sasl_session s({"SCRAM-SHA-512", "u", "p4ssw0rd", {}, {}});
  kgroup::protocol::sasl_handshake_response hs;
  hs.error_code = 33;  // UNSUPPORTED_SASL_MECHANISM
  hs.mechanisms = {"PLAIN", "SCRAM-SHA-256"};
  CHECK_FALSE(s.on_handshake(hs, error));
  CHECK(error.find("SCRAM-SHA-512") != std::string::npos);
  CHECK(error.find("PLAIN, SCRAM-SHA-256") != std::string::npos);

  sasl_session p({"PLAIN", "u", "p4ssw0rd", {}, {}});
  REQUIRE(p.on_handshake({}, error));
  (void)p.next();
  CHECK(p.on_authenticate(auth_answer("", 58, "Authentication failed: Invalid username or password"), error) ==
        sasl_session::status::failed);
  CHECK(error.find("SASL_AUTHENTICATION_FAILED") != std::string::npos);
  CHECK(error.find("Invalid username or password") != std::string::npos);
  CHECK(error.find("p4ssw0rd") == std::string::npos);
  std::string why;
  // GSSAPI: in builds with MIT Kerberos; without, the reason says so.
  CHECK(sasl_session::supported("GSSAPI", why) == kgroup::security::kerberos_available());
  if (!kgroup::security::kerberos_available()) CHECK(why.find("GSSAPI") != std::string::npos);
  CHECK_FALSE(sasl_session::supported("NTLM", why));
  CHECK(why.find("NTLM") != std::string::npos);
}

// Issue 31, lower items: a broker's message cannot forge log lines or terminal escapes in the
// error the application gets.
TEST_CASE("sasl: control characters in the broker's error message are escaped", "[scram]") {
  std::string error;
  sasl_session p({"PLAIN", "u", "p4ssw0rd", {}, {}});
  REQUIRE(p.on_handshake({}, error));
  (void)p.next();
  CHECK(p.on_authenticate(auth_answer("", 58, "denied\n[2024-01-01 00:00:00] [info] forged\x1b[2J"), error) ==
        sasl_session::status::failed);
  INFO(error);
  CHECK(error.find('\n') == std::string::npos);
  CHECK(error.find('\x1b') == std::string::npos);
  CHECK(error.find("denied\\x0a[2024") != std::string::npos);
}
