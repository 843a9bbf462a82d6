#include "protocol/headers.hpp"

namespace kgroup::protocol {

namespace {
constexpr std::int16_t api_versions_key = 18;
}

int request_header_version(bool flexible) noexcept { return flexible ? 2 : 1; }

int response_header_version(std::int16_t api_key, bool flexible) noexcept {
  if (api_key == api_versions_key) return 0;
  return flexible ? 1 : 0;
}

void encode_request_header(writer& w, const request_header& h, int header_version) {
  w.write_int16(h.api_key);
  w.write_int16(h.api_version);
  w.write_int32(h.correlation_id);
  if (header_version >= 1) w.write_nullable_string(h.client_id, /*compact=*/false);
  if (header_version >= 2) w.write_uvarint(0);  // no tagged fields
}

void decode_request_header(reader& r, request_header& h, int header_version) {
  h.api_key = r.read_int16();
  h.api_version = r.read_int16();
  h.correlation_id = r.read_int32();
  h.client_id.reset();
  if (header_version >= 1) h.client_id = r.read_nullable_string(false);
  if (header_version >= 2) skip_tagged_fields(r);
}

void encode_response_header(writer& w, const response_header& h, int header_version) {
  w.write_int32(h.correlation_id);
  if (header_version >= 1) w.write_uvarint(0);
}

void decode_response_header(reader& r, response_header& h, int header_version) {
  h.correlation_id = r.read_int32();
  if (header_version >= 1) skip_tagged_fields(r);
}

bool peek_correlation_id(std::span<const std::uint8_t> frame, std::int32_t& correlation_id) noexcept {
  reader r(frame);
  correlation_id = r.read_int32();
  return r.ok();
}

}  // namespace kgroup::protocol
