// What a broker, a token endpoint or a configuration line can hand the security code
// (src/security/): SCRAM server messages, SaslHandshake/SaslAuthenticate answers, the OAUTHBEARER
// error challenge, token endpoint answers and JWT payloads, JAAS lines, sasl.oauthbearer.config,
// extensions and endpoint URLs.
//
// Input: byte 0 selects the parser, the rest is its input.
//
// Findings beyond memory errors and UB (each aborts):
//   - a SCRAM exchange that accepts a server-final message without the right signature (any
//     fuzzed "v=" must be refused: the fuzzer cannot know the key);
//   - an error text that contains the password (the SASL session scrubs even a broker's echo;
//     the SCRAM core may quote the server's own text);
//   - a SASL session that reports `done` after an error code;
//   - a token endpoint answer accepted without a token or a lifetime.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/base64.hpp"
#include "fuzz_common.hpp"
#include "security/oauth.hpp"
#include "security/sasl.hpp"
#include "security/scram.hpp"

using namespace kgroup::security;
using kgroup::fuzz::check;

namespace {

const std::string password = "fuzz-pass-word";

void scram(std::string_view in) {
  // The fuzzed bytes are split at the first NUL: server-first, then server-final.
  const auto nul = in.find('\0');
  const std::string_view first = in.substr(0, nul);
  const std::string_view final_msg = nul == std::string_view::npos ? std::string_view{} : in.substr(nul + 1);
  scram_client c(scram_hash::sha256, "user", password, "clientnonce");
  (void)c.client_first();
  std::string out, error;
  // No skip of long iteration counts: the client refuses more than scram_client::max_iterations
  // itself (issue 31), so a fuzzed "i=4000000000" must be refused at once, not time out.
  // (The server's own text is echoed: the client-final carries its nonce, errors quote "e=".
  // The password may appear only where the server put it.)
  const bool echoed = in.find(password) != std::string_view::npos;
  if (!c.client_final(first, out, error)) {
    check(echoed || error.find(password) == std::string::npos, "scram: password in client_final error");
    return;
  }
  check(echoed || out.find(password) == std::string::npos, "scram: password in client-final");
  const bool ok = c.verify_server_final(final_msg, error);
  check(!ok, "scram: a fuzzed server signature was accepted");
  check(echoed || error.find(password) == std::string::npos, "scram: password in verify error");
}

void session(std::string_view in, const char* mechanism) {
  sasl_credentials creds;
  creds.mechanism = mechanism;
  creds.username = "user";
  creds.password = password;
  creds.token.value = "header.payload.";
  sasl_session s(creds);
  kgroup::protocol::sasl_handshake_response hs;
  std::string error;
  if (!s.on_handshake(hs, error)) return;
  // Each answer: 2 bytes error code, 1 byte length, auth bytes.
  for (int round = 0; round < 4 && in.size() >= 3; ++round) {
    (void)s.next();
    kgroup::protocol::sasl_authenticate_response r;
    r.error_code = static_cast<std::int16_t>((static_cast<unsigned char>(in[0]) << 8) | static_cast<unsigned char>(in[1]));
    const std::size_t len = std::min<std::size_t>(static_cast<unsigned char>(in[2]), in.size() - 3);
    r.auth_bytes.assign(in.begin() + 3, in.begin() + 3 + static_cast<std::ptrdiff_t>(len));
    r.error_message = std::string(in.substr(3, len));
    in.remove_prefix(3 + len);
    const auto st = s.on_authenticate(r, error);
    check(!(st == sasl_session::status::done && r.error_code != 0), "sasl: done after an error code");
    if (st != sasl_session::status::more) {
      if (st == sasl_session::status::failed) {
        check(error.find(password) == std::string::npos, "sasl: password in error");
      }
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string error;
  switch (data[0] % 10) {
    case 0:
      scram(in);
      break;
    case 1:
      session(in, "SCRAM-SHA-512");
      break;
    case 2:
      session(in, "OAUTHBEARER");
      break;
    case 3: {
      oauth_token t;
      const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
      if (parse_token_response(std::string(in), "client", now, t, error)) {
        check(!t.value.empty(), "token response accepted without a token");
        check(t.expires_at != std::chrono::system_clock::time_point{}, "token response accepted without a lifetime");
      }
      (void)token_error_reason(std::string(in));
      break;
    }
    case 4: {
      std::string sub;
      std::int64_t exp = 0;
      (void)read_jwt_claims(in, sub, exp);
      break;
    }
    case 5: {
      jaas_config j;
      (void)parse_jaas(in, j, error);
      break;
    }
    case 6: {
      unsecured_token_config c;
      if (parse_unsecured_config(in, c, error)) {
        check(!c.principal.empty(), "unsecured config accepted without a principal");
        const auto t = make_unsecured_token(c, std::chrono::system_clock::now());
        std::string sub;
        std::int64_t exp = 0;
        check(read_jwt_claims(t.value, sub, exp) && sub == c.principal, "unsecured token does not round-trip");
      }
      break;
    }
    case 7: {
      std::map<std::string, std::string> ext;
      (void)parse_extensions(in, ext, error);
      break;
    }
    case 8: {
      std::string host, port, target;
      (void)parse_https_url(std::string(in), host, port, target, error);
      break;
    }
    case 9: {
      std::vector<std::uint8_t> out;
      if (kgroup::base::base64_decode(in, out)) {
        check(kgroup::base::base64_encode(out) == in, "base64 does not round-trip");
      }
      if (kgroup::base::base64url_decode(in, out)) {
        check(kgroup::base::base64url_encode(std::string(out.begin(), out.end())) == in,
              "base64url does not round-trip");
      }
      break;
    }
  }
  return 0;
}
