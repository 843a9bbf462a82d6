#include "security/scram.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <stdexcept>

#include "base/base64.hpp"

namespace kgroup::security {

namespace {

const EVP_MD* md_of(scram_hash h) {
  switch (h) {
    case scram_hash::sha1:
      return EVP_sha1();
    case scram_hash::sha256:
      return EVP_sha256();
    case scram_hash::sha512:
      return EVP_sha512();
  }
  return EVP_sha256();
}

using bytes = std::vector<std::uint8_t>;

bytes hmac(scram_hash h, const bytes& key, std::string_view data) {
  bytes out(EVP_MAX_MD_SIZE);
  unsigned len = 0;
  if (!HMAC(md_of(h), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out.data(), &len))
    throw std::runtime_error("HMAC failed");
  out.resize(len);
  return out;
}

bytes digest(scram_hash h, const bytes& data) {
  bytes out(EVP_MAX_MD_SIZE);
  unsigned len = 0;
  if (!EVP_Digest(data.data(), data.size(), out.data(), &len, md_of(h), nullptr))
    throw std::runtime_error("digest failed");
  out.resize(len);
  return out;
}

bytes xor_bytes(bytes a, const bytes& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) a[i] ^= b[i];
  return a;
}

// saslname: ',' and '=' escaped (RFC 5802 5.1).
std::string escape_name(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c == '=') {
      out += "=3D";
    } else if (c == ',') {
      out += "=2C";
    } else {
      out += c;
    }
  }
  return out;
}

// The value of attribute `key` in a comma-separated "k=v" message; false if absent.
bool attribute(std::string_view msg, char key, std::string_view& value) {
  while (!msg.empty()) {
    const auto comma = msg.find(',');
    const auto part = msg.substr(0, comma);
    if (part.size() >= 2 && part[0] == key && part[1] == '=') {
      value = part.substr(2);
      return true;
    }
    if (comma == std::string_view::npos) break;
    msg.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool scram_hash_from_mechanism(std::string_view mechanism, scram_hash& out) {
  if (mechanism == "SCRAM-SHA-256") {
    out = scram_hash::sha256;
  } else if (mechanism == "SCRAM-SHA-512") {
    out = scram_hash::sha512;
  } else if (mechanism == "SCRAM-SHA-1") {
    out = scram_hash::sha1;
  } else {
    return false;
  }
  return true;
}

scram_client::scram_client(scram_hash hash, std::string username, std::string password, std::string nonce)
    : hash_(hash), username_(std::move(username)), password_(std::move(password)), nonce_(std::move(nonce)) {
  if (nonce_.empty()) {
    bytes raw(24);
    if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) throw std::runtime_error("no random bytes for the SCRAM nonce");
    nonce_ = base::base64_encode(raw);
  }
}

scram_client::~scram_client() {
  OPENSSL_cleanse(password_.data(), password_.size());
  OPENSSL_cleanse(salted_password_.data(), salted_password_.size());
}

std::string scram_client::client_first() {
  client_first_bare_ = "n=" + escape_name(username_) + ",r=" + nonce_;
  step_ = step::first_sent;
  return "n,," + client_first_bare_;  // gs2 header: no channel binding, no authzid
}

bool scram_client::client_final(std::string_view server_first, std::string& out, std::string& error) {
  if (step_ != step::first_sent) {
    error = "SCRAM: server-first message out of order";
    return false;
  }
  std::string_view e, r, s, i, m;
  if (attribute(server_first, 'e', e)) {
    error = "SCRAM: the server refused: " + std::string(e);
    return false;
  }
  if (attribute(server_first, 'm', m)) {
    // RFC 5802: a mandatory extension the client does not know ends the exchange.
    error = "SCRAM: the server asks for a mandatory extension (m=) this client does not support";
    return false;
  }
  if (!attribute(server_first, 'r', r) || !attribute(server_first, 's', s) || !attribute(server_first, 'i', i)) {
    error = "SCRAM: malformed server-first message (needs r=, s= and i=)";
    return false;
  }
  if (r.size() <= nonce_.size() || r.substr(0, nonce_.size()) != nonce_) {
    error = "SCRAM: the server's nonce does not extend the client's";
    return false;
  }
  if (s.size() > (max_salt_bytes + 2) / 3 * 4) {  // checked before decoding it
    error = "SCRAM: the server's salt is longer than " + std::to_string(max_salt_bytes) + " bytes";
    return false;
  }
  bytes salt;
  if (!base::base64_decode(s, salt) || salt.empty()) {
    error = "SCRAM: the server's salt is not base64";
    return false;
  }
  std::uint32_t iterations = 0;
  const auto [end, ec] = std::from_chars(i.data(), i.data() + i.size(), iterations);
  if (ec != std::errc{} || end != i.data() + i.size()) {
    error = "SCRAM: the server's iteration count is not a number";
    return false;
  }
  if (iterations < min_iterations) {
    error = "SCRAM: the server asks for " + std::to_string(iterations) + " iterations, fewer than " +
            std::to_string(min_iterations);
    return false;
  }
  if (iterations > max_iterations) {
    error = "SCRAM: the server asks for " + std::to_string(iterations) + " iterations, more than " +
            std::to_string(max_iterations) + " (Kafka's maximum); refused so the key derivation cannot stall the client";
    return false;
  }
  const EVP_MD* md = md_of(hash_);
  salted_password_.assign(static_cast<std::size_t>(EVP_MD_get_size(md)), 0);
  if (PKCS5_PBKDF2_HMAC(password_.data(), static_cast<int>(password_.size()), salt.data(), static_cast<int>(salt.size()),
                        static_cast<int>(iterations), md, static_cast<int>(salted_password_.size()),
                        salted_password_.data()) != 1) {
    error = "SCRAM: key derivation failed";
    return false;
  }
  const std::string client_final_bare = "c=biws,r=" + std::string(r);  // biws = base64("n,,")
  auth_message_ = client_first_bare_ + "," + std::string(server_first) + "," + client_final_bare;
  bytes client_key = hmac(hash_, salted_password_, "Client Key");
  const bytes stored_key = digest(hash_, client_key);
  const bytes client_signature = hmac(hash_, stored_key, auth_message_);
  out = client_final_bare + ",p=" + base::base64_encode(xor_bytes(client_key, client_signature));
  OPENSSL_cleanse(client_key.data(), client_key.size());  // with the proof, it stands in for the password
  step_ = step::final_sent;
  return true;
}

bool scram_client::verify_server_final(std::string_view server_final, std::string& error) {
  if (step_ != step::final_sent) {
    error = "SCRAM: server-final message out of order";
    return false;
  }
  std::string_view e, v;
  if (attribute(server_final, 'e', e)) {
    error = "SCRAM: the server refused: " + std::string(e);
    return false;
  }
  bytes signature;
  if (!attribute(server_final, 'v', v) || !base::base64_decode(v, signature)) {
    error = "SCRAM: malformed server-final message";
    return false;
  }
  const bytes server_key = hmac(hash_, salted_password_, "Server Key");
  const bytes expected = hmac(hash_, server_key, auth_message_);
  // Constant time: how much of a guessed signature matched must not show in the timing.
  if (expected.size() != signature.size() || CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) != 0) {
    error = "SCRAM: the server's signature does not match (it does not know this credential)";
    return false;
  }
  step_ = step::done;
  return true;
}

}  // namespace kgroup::security
