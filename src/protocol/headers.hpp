// Request and response headers and whole-frame helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "protocol/primitives.hpp"

namespace kgroup::protocol {

/// Request header v1 (non-flexible APIs) or v2 (flexible: adds a tagged-field section).
/// client_id keeps its int16-length encoding in both versions.
struct request_header {
  std::int16_t api_key = 0;
  std::int16_t api_version = 0;
  std::int32_t correlation_id = 0;
  std::optional<std::string> client_id;
  bool operator==(const request_header&) const = default;
};

/// Response header v0 (correlation id) or v1 (plus tagged fields).
struct response_header {
  std::int32_t correlation_id = 0;
  bool operator==(const response_header&) const = default;
};

void encode_request_header(writer& w, const request_header& h, int header_version);
void decode_request_header(reader& r, request_header& h, int header_version);
void encode_response_header(writer& w, const response_header& h, int header_version);
void decode_response_header(reader& r, response_header& h, int header_version);

/// Header versions for an API at a version. ApiVersions responses always use header v0 so a
/// client that asked with too new a version can still read the error.
int request_header_version(bool flexible) noexcept;
int response_header_version(std::int16_t api_key, bool flexible) noexcept;

/// Builds a complete request frame: int32 size, header, body of `msg` at `version`.
template <class Message>
std::error_code encode_request(const Message& msg, std::int16_t version, std::int32_t correlation_id,
                               const std::optional<std::string>& client_id, bytes& out) {
  const bool flexible = Message::first_flexible_version >= 0 && version >= Message::first_flexible_version;
  const std::size_t start = out.size();
  writer w(out);
  w.write_int32(0);
  encode_request_header(w, {Message::api_key, version, correlation_id, client_id},
                        request_header_version(flexible));
  if (auto ec = encode(msg, version, out)) {
    out.resize(start);
    return ec;
  }
  w.patch_int32(start, static_cast<std::int32_t>(out.size() - start - 4));
  return {};
}

/// Splits a response frame (without its size prefix) into the correlation id and the body.
/// Returns false on a truncated header.
bool peek_correlation_id(std::span<const std::uint8_t> frame, std::int32_t& correlation_id) noexcept;

/// Decodes a response frame (without size prefix) for `Message` at `version`.
template <class Message>
std::error_code decode_response(std::span<const std::uint8_t> frame, std::int16_t version,
                                response_header& header, Message& out) {
  const bool flexible = Message::first_flexible_version >= 0 && version >= Message::first_flexible_version;
  reader r(frame);
  decode_response_header(r, header, response_header_version(Message::api_key, flexible));
  if (!r.ok()) return r.error();
  return decode(frame.subspan(frame.size() - r.remaining()), version, out);
}

}  // namespace kgroup::protocol
