#include <algorithm>
#include <array>

#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"
#include "protocol/primitives.hpp"

namespace kgroup {

namespace {

using protocol::reaction;

struct error_row {
  int code;
  const char* name;
  bool retriable;
  reaction reactions;
  const char* message;
};

constexpr error_row kafka_errors[] = {
#include "protocol/kafka_error_table.inc"
};

const error_row* find_row(int code) noexcept {
  auto it = std::find_if(std::begin(kafka_errors), std::end(kafka_errors),
                         [code](const error_row& r) { return r.code == code; });
  return it == std::end(kafka_errors) ? nullptr : it;
}

class kafka_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "kafka"; }
  std::string message(int ev) const override {
    const error_row* r = find_row(ev);
    if (r == nullptr) return "unknown Kafka error code " + std::to_string(ev);
    return std::string(r->name) + ": " + r->message;
  }
};

class client_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "kgroup"; }
  std::string message(int ev) const override {
    switch (static_cast<client_errc>(ev)) {
      case client_errc::invalid_config: return "invalid configuration";
      case client_errc::no_compatible_version: return "no API version supported by both broker and client";
      case client_errc::connection_failed: return "connection to broker failed";
      case client_errc::connection_closed: return "connection closed before the response arrived";
      case client_errc::request_timed_out: return "request timed out (request.timeout.ms)";
      case client_errc::protocol_violation: return "broker violated the Kafka protocol";
      case client_errc::no_brokers_available: return "no broker could be reached";
      case client_errc::shutting_down: return "client is shutting down";
      case client_errc::coordinator_not_found: return "group coordinator not found";
      case client_errc::woken_up: return "woken up by Consumer::wakeup()";
      case client_errc::closed: return "the consumer is closed";
      case client_errc::illegal_state: return "not valid in the consumer's current state";
      case client_errc::commit_failed: return "commit failed: this member is no longer part of the group generation";
      case client_errc::offset_out_of_range: return "offset out of range and auto.offset.reset=none";
      case client_errc::partition_not_found: return "partition no longer exists in the cluster metadata";
      case client_errc::invalid_argument: return "invalid argument";
      case client_errc::log_truncation: return "log truncation detected";
      case client_errc::corrupt_record: return "corrupt record data";
      case client_errc::tls_failed: return "TLS handshake failed";
      case client_errc::concurrent_access: return "the consumer is not safe for concurrent use from several threads";
    }
    return "unknown client error";
  }
};

}  // namespace

const std::error_category& kafka_category() noexcept {
  static const kafka_category_impl c;
  return c;
}

const std::error_category& client_category() noexcept {
  static const client_category_impl c;
  return c;
}

std::string kafka_error_name(int code) {
  const error_row* r = find_row(code);
  return r ? std::string(r->name) : "UNKNOWN_ERROR_" + std::to_string(code);
}

namespace {

const char* client_error_name(client_errc e) noexcept {
  switch (e) {  // no default: -Wswitch names a client_errc added without a name here
    case client_errc::invalid_config: return "INVALID_CONFIG";
    case client_errc::no_compatible_version: return "NO_COMPATIBLE_VERSION";
    case client_errc::connection_failed: return "CONNECTION_FAILED";
    case client_errc::connection_closed: return "CONNECTION_CLOSED";
    case client_errc::request_timed_out: return "REQUEST_TIMED_OUT";
    case client_errc::protocol_violation: return "PROTOCOL_VIOLATION";
    case client_errc::no_brokers_available: return "NO_BROKERS_AVAILABLE";
    case client_errc::shutting_down: return "SHUTTING_DOWN";
    case client_errc::coordinator_not_found: return "COORDINATOR_NOT_FOUND";
    case client_errc::woken_up: return "WOKEN_UP";
    case client_errc::closed: return "CLOSED";
    case client_errc::illegal_state: return "ILLEGAL_STATE";
    case client_errc::commit_failed: return "COMMIT_FAILED";
    case client_errc::offset_out_of_range: return "OFFSET_OUT_OF_RANGE";
    case client_errc::partition_not_found: return "PARTITION_NOT_FOUND";
    case client_errc::invalid_argument: return "INVALID_ARGUMENT";
    case client_errc::log_truncation: return "LOG_TRUNCATION";
    case client_errc::corrupt_record: return "CORRUPT_RECORD";
    case client_errc::tls_failed: return "TLS_FAILED";
    case client_errc::concurrent_access: return "CONCURRENT_ACCESS";
  }
  return nullptr;
}

std::string upper(std::string s) {
  for (auto& ch : s) {
    if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    if (ch == '.') ch = '_';
  }
  return s;
}

}  // namespace

std::string error_name(const std::error_code& ec) {
  if (!ec) return "NONE";
  if (ec.category() == kafka_category()) return kafka_error_name(ec.value());
  if (ec.category() == client_category()) {
    if (const char* n = client_error_name(static_cast<client_errc>(ec.value()))) return n;
    return "CLIENT_ERROR_" + std::to_string(ec.value());
  }
  if (ec.category() == protocol::codec_category()) {
    if (const char* n = protocol::codec_error_name(ec.value())) return upper(n);
  }
  return upper(ec.category().name()) + "_" + std::to_string(ec.value());
}

bool is_retriable(kafka_errc e) noexcept {
  const error_row* r = find_row(static_cast<int>(e));
  return r != nullptr && r->retriable;
}

bool is_retriable(const std::error_code& ec) noexcept {
  if (!ec) return false;
  if (ec.category() == kafka_category()) return is_retriable(static_cast<kafka_errc>(ec.value()));
  // A broker's answer that could not be decoded: another broker, or the same one later, may
  // answer well (as protocol_violation; Java's CorruptRecordException is retriable too).
  if (ec.category() == protocol::codec_category()) return true;
  if (ec.category() != client_category()) return false;
  switch (static_cast<client_errc>(ec.value())) {
    case client_errc::connection_failed:
    case client_errc::connection_closed:
    case client_errc::request_timed_out:
    case client_errc::protocol_violation:
    case client_errc::no_brokers_available:
    case client_errc::coordinator_not_found:
      return true;
    default:
      return false;
  }
}

bool is_fatal(const std::error_code& ec) noexcept {
  if (!ec) return false;
  if (ec.category() == kafka_category()) {
    if (protocol::reacts(static_cast<std::int16_t>(ec.value()), reaction::group_fatal)) return true;
    switch (static_cast<kafka_errc>(ec.value())) {
      case kafka_errc::sasl_authentication_failed:
      case kafka_errc::unsupported_sasl_mechanism:
      case kafka_errc::illegal_sasl_state:
        return true;
      default:
        return false;
    }
  }
  if (ec.category() != client_category()) return false;
  switch (static_cast<client_errc>(ec.value())) {
    case client_errc::invalid_config:
    case client_errc::no_compatible_version:
    case client_errc::tls_failed:
    case client_errc::closed:
    case client_errc::shutting_down:
      return true;
    default:
      return false;
  }
}

namespace protocol {

bool reacts(std::int16_t code, reaction r) noexcept {
  const error_row* row = find_row(code);
  return row != nullptr && (static_cast<std::uint8_t>(row->reactions) & static_cast<std::uint8_t>(r)) != 0;
}

}  // namespace protocol

}  // namespace kgroup
