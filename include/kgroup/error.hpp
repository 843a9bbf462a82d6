// Errors: Kafka's protocol error codes and kgroup's own client errors, as std::error_code
// categories, plus the exception type the public API throws on the caller's thread.
#pragma once

#include "kgroup/export.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "kgroup/kafka_errc.hpp"

namespace kgroup {

/// Category of Kafka protocol error codes. message() is Kafka's description; the code's
/// name (e.g. "REBALANCE_IN_PROGRESS") is available from kafka_error_name().
KGROUP_EXPORT const std::error_category& kafka_category() noexcept;

inline std::error_code make_error_code(kafka_errc e) noexcept {
  return {static_cast<int>(e), kafka_category()};
}

/// Kafka's name for a code ("NOT_COORDINATOR"), or "UNKNOWN_ERROR_<n>" for codes not in the table.
KGROUP_EXPORT std::string kafka_error_name(int code);
/// Whether Kafka clients retry the operation that got this code (Java client's classification).
KGROUP_EXPORT bool is_retriable(kafka_errc e) noexcept;

/// Errors raised by the client itself (not sent by a broker).
enum class client_errc {
  invalid_config = 1,        // a configuration value or combination is invalid
  no_compatible_version,     // broker and client share no version of an API
  connection_failed,         // could not connect to any address of a broker
  connection_closed,         // the connection closed before the response arrived
  request_timed_out,         // no response within request.timeout.ms
  protocol_violation,        // the broker sent something the protocol does not allow
  no_brokers_available,      // no bootstrap server could be reached
  shutting_down,             // the client is closing
  coordinator_not_found,     // FindCoordinator returned no usable coordinator
  woken_up,                  // Consumer::wakeup() interrupted a blocking call
  closed,                    // the consumer was closed
  illegal_state,             // the call is not valid in the consumer's current state
  commit_failed,             // the commit cannot succeed: this member's generation is gone
  offset_out_of_range,       // no valid position and auto.offset.reset=none
  partition_not_found,       // a partition of the assignment disappeared from metadata
  invalid_argument,          // an argument of the call is invalid (empty topic, negative offset, ...)
  log_truncation,            // the log was truncated below the position and auto.offset.reset=none
  corrupt_record,            // record data at the position is corrupt (CRC mismatch, unparsable); seek past it
  tls_failed,                // the TLS handshake failed: the broker's certificate is not trusted, or it refused ours
  concurrent_access,         // a second thread called the Consumer while one was inside it (not thread-safe)
};

KGROUP_EXPORT const std::error_category& client_category() noexcept;
inline std::error_code make_error_code(client_errc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

/// The name of any error kgroup reports, for logs and machine-readable output: Kafka's name for a
/// Kafka code ("REBALANCE_IN_PROGRESS", see kafka_error_name), the client_errc enumerator in upper
/// case for a client error ("COMMIT_FAILED"), the codec's for a decoding error ("TRUNCATED");
/// otherwise the category's name and the value ("GENERIC_110"). "NONE" for no error.
KGROUP_EXPORT std::string error_name(const std::error_code& ec);

/// Exception thrown by the public API on the caller's thread. code() tells what happened.
class KGROUP_EXPORT Error : public std::runtime_error {
 public:
  Error(std::error_code ec, const std::string& what) : std::runtime_error(what), code_(ec) {}
  explicit Error(std::error_code ec) : std::runtime_error(ec.message()), code_(ec) {}
  const std::error_code& code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

}  // namespace kgroup

namespace std {
template <>
struct is_error_code_enum<kgroup::kafka_errc> : true_type {};
template <>
struct is_error_code_enum<kgroup::client_errc> : true_type {};
}  // namespace std
