/// \file
/// Errors: Kafka's protocol error codes and kgroup's own client errors, as std::error_code
/// categories, plus the exception type the public API throws on the caller's thread. What each
/// code means, which calls raise it and what to do: [Handling errors](../../docs/errors.md).
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

/// A std::error_code of kafka_category() for `e`; what makes `std::error_code ec = kafka_errc::...`
/// and comparisons such as `e.code() == kafka_errc::rebalance_in_progress` work.
inline std::error_code make_error_code(kafka_errc e) noexcept {
  return {static_cast<int>(e), kafka_category()};
}

/// Kafka's name for a code ("NOT_COORDINATOR"), or "UNKNOWN_ERROR_<n>" for codes not in the table.
KGROUP_EXPORT std::string kafka_error_name(int code);
/// Whether Kafka clients retry the operation that got this code (Java client's classification,
/// the retriable flag of Kafka's error table). Codes not in the table are not retriable.
KGROUP_EXPORT bool is_retriable(kafka_errc e) noexcept;

/// Errors raised by the client itself (not sent by a broker), in client_category(). Which are
/// retriable or fatal: is_retriable(), is_fatal(); what to do for each: docs/errors.md.
enum class client_errc {
  /// A configuration value or combination is invalid (the message names the key). Fatal.
  invalid_config = 1,
  /// Broker and client share no version of an API (e.g. group.protocol=consumer on a broker
  /// without KIP-848). Fatal.
  no_compatible_version,
  /// Could not connect to any address of a broker. Retriable.
  connection_failed,
  /// The connection closed before the response arrived. Retriable.
  connection_closed,
  /// No response within request.timeout.ms, or a blocking call's timeout passed. Retriable.
  request_timed_out,
  /// The broker sent something the protocol does not allow. Retriable.
  protocol_violation,
  /// No bootstrap server could be reached. Retriable.
  no_brokers_available,
  /// The client is closing. Fatal.
  shutting_down,
  /// FindCoordinator returned no usable coordinator. Retriable.
  coordinator_not_found,
  /// Consumer::wakeup() interrupted a blocking call. Neither retriable nor fatal.
  woken_up,
  /// The consumer was closed. Fatal.
  closed,
  /// The call is not valid in the consumer's current state (e.g. seek() of a partition not
  /// assigned). Neither retriable nor fatal: a bug in the calling program.
  illegal_state,
  /// The commit cannot succeed: this member's generation is gone (do not commit these offsets
  /// again; poll()). Neither retriable nor fatal.
  commit_failed,
  /// No valid position and auto.offset.reset=none (a PartitionError names the partition).
  /// Neither retriable nor fatal: seek().
  offset_out_of_range,
  /// A partition of the assignment disappeared from metadata (a PartitionError). Neither
  /// retriable nor fatal.
  partition_not_found,
  /// An argument of the call is invalid (empty topic, negative offset, ...). Neither retriable
  /// nor fatal: a bug in the calling program.
  invalid_argument,
  /// The log was truncated below the position and auto.offset.reset=none (a
  /// LogTruncationError). Neither retriable nor fatal: seek().
  log_truncation,
  /// Record data at the position is corrupt (CRC mismatch, unparsable; a PartitionError). Neither
  /// retriable nor fatal: seek past it.
  corrupt_record,
  /// The TLS handshake failed: the broker's certificate is not trusted, or it refused ours. Fatal.
  tls_failed,
  /// A second thread called the Consumer while one was inside it (not thread-safe). Neither
  /// retriable nor fatal: a bug in the calling program.
  concurrent_access,
};

/// Category of the client's own errors (client_errc); its name() is "kgroup", message() a short
/// description of the code.
KGROUP_EXPORT const std::error_category& client_category() noexcept;
/// A std::error_code of client_category() for `e` (so `e.code() == client_errc::woken_up` works).
inline std::error_code make_error_code(client_errc e) noexcept {
  return {static_cast<int>(e), client_category()};
}

/// The name of any error kgroup reports, for logs and machine-readable output: Kafka's name for a
/// Kafka code ("REBALANCE_IN_PROGRESS", see kafka_error_name), the client_errc enumerator in upper
/// case for a client error ("COMMIT_FAILED"), the codec's for a decoding error ("TRUNCATED");
/// otherwise the category's name and the value ("GENERIC_110"). "NONE" for no error.
KGROUP_EXPORT std::string error_name(const std::error_code& ec);

/// Whether the operation that failed with `ec` can succeed if the application tries it again
/// (after a backoff): Kafka's retriable codes (the Java client's RetriableException classes) and
/// the client's transient ones (connection_failed, connection_closed, request_timed_out,
/// no_brokers_available, coordinator_not_found, protocol_violation). False for an empty code.
KGROUP_EXPORT bool is_retriable(const std::error_code& ec) noexcept;
/// Whether an error with this code leaves the Consumer unusable: every later call raises it
/// again, and the application closes the Consumer and creates a new one once the cause (the
/// configuration, the credentials, the group's settings) is fixed. Kafka's group-fatal codes
/// (FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, INCONSISTENT_GROUP_PROTOCOL, ...) and
/// authentication failures; the client's invalid_config, no_compatible_version, tls_failed,
/// closed and shutting_down. Neither retriable nor fatal (commit_failed, offset_out_of_range,
/// log_truncation, corrupt_record, woken_up, ...): the application acts (seeks, polls again,
/// fixes the argument) and goes on with the same Consumer. See docs/errors.md.
KGROUP_EXPORT bool is_fatal(const std::error_code& ec) noexcept;

/// Exception thrown by the public API on the caller's thread. code() tells what happened;
/// is_retriable() and is_fatal() tell what the application can do next (see docs/errors.md).
/// Subclasses carry more for errors of one partition: PartitionError, LogTruncationError.
class KGROUP_EXPORT Error : public std::runtime_error {
 public:
  /// An error with code `ec` and message `what`; fatal when kgroup::is_fatal(ec).
  Error(std::error_code ec, const std::string& what)
      : std::runtime_error(what), code_(ec), fatal_(::kgroup::is_fatal(ec)) {}
  /// An error with code `ec` and the code's own message (ec.message()).
  explicit Error(std::error_code ec) : Error(ec, ec.message()) {}
  /// An error with code `ec` and message `what`; `fatal`: raised as fatal by this Consumer
  /// whatever its code (see is_fatal()).
  Error(std::error_code ec, const std::string& what, bool fatal)
      : std::runtime_error(what), code_(ec), fatal_(fatal || ::kgroup::is_fatal(ec)) {}
  /// What happened: a kafka_errc (a broker's answer), a client_errc (the client's own), or a
  /// decoding error of a broker's answer. error_name() gives a stable name for it.
  const std::error_code& code() const noexcept { return code_; }
  /// Whether trying the same call again can succeed (kgroup::is_retriable of the code; never for
  /// a fatal error).
  bool is_retriable() const noexcept { return !fatal_ && ::kgroup::is_retriable(code_); }
  /// Whether the Consumer that threw it is unusable from now on: close it (kgroup::is_fatal of the
  /// code, or an error this Consumer raised as fatal, such as a KIP-848 coordinator refusing a
  /// subscribed topic).
  bool is_fatal() const noexcept { return fatal_; }

 private:
  std::error_code code_;
  bool fatal_ = false;
};

}  // namespace kgroup

namespace std {
template <>
struct is_error_code_enum<kgroup::kafka_errc> : true_type {};
template <>
struct is_error_code_enum<kgroup::client_errc> : true_type {};
}  // namespace std
