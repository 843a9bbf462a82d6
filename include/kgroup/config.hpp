/// \file
/// Configuration with Kafka's property names, the Java client's defaults and meanings.
#pragma once

#include "kgroup/export.hpp"
#include "kgroup/log.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kgroup {

/// Description of one configuration key (for documentation and validation).
struct KGROUP_EXPORT ConfigKey {
  std::string_view name;           ///< Kafka's property name ("session.timeout.ms")
  std::string_view default_value;  ///< as text; empty means "no default"
  std::string_view type;           ///< "string", "int", "long", "bool", "list", "enum"
  std::int64_t min = 0;            ///< for int/long
  std::int64_t max = 0;            ///< for int/long
  std::string_view allowed;        ///< for enum: comma-separated allowed values
  std::string_view doc;            ///< what the key means (one sentence or two)
};

/// An OAuth 2 bearer token for `sasl.mechanism=OAUTHBEARER`, as a token provider returns it.
struct KGROUP_EXPORT OAuthBearerToken {
  std::string value;                                   ///< the token sent to brokers (secret: never logged)
  std::chrono::system_clock::time_point expires_at{};  ///< when brokers stop accepting it
  std::string principal;                               ///< who the token is for (logs only)
  std::map<std::string, std::string> extensions;       ///< SASL extensions (KIP-342), e.g. logicalCluster
};

/// Returns a fresh token. Called on the Consumer's background thread whenever a connection needs
/// a token and the last one is past its refresh time (sasl.login.refresh.window.factor of its
/// lifetime), so it should be quick (return a token fetched in advance if getting one is slow).
/// Throwing (any exception) fails that connection attempt; it is retried with backoff, and the
/// exception's message is logged.
using OAuthBearerTokenProvider = std::function<OAuthBearerToken()>;

/// A set of configuration properties. Keys are Kafka's names ("bootstrap.servers",
/// "session.timeout.ms", ...). Values are strings, parsed and validated against the key table.
///
/// Thread-safety: a Config is a value; concurrent reads are safe, writes are not.
class KGROUP_EXPORT Config {
 public:
  Config() = default;
  /// Sets each `{key, value}` of `values` as set() does.
  /// \throws kgroup::Error client_errc::invalid_config naming the key on an unknown key (with a
  ///   did-you-mean suggestion) or an invalid value (fatal: fix the configuration).
  Config(std::initializer_list<std::pair<std::string, std::string>> values);

  /// Sets one property, replacing an earlier value. librdkafka's spellings of a key
  /// (fetch.wait.max.ms, fetch.message.max.bytes, sasl.mechanisms, ...) and KIP-651's PEM keys are
  /// the same setting as the key they stand for: the last one set wins. Booleans and enum values
  /// are accepted in any case ("TRUE", "Earliest"); partition.assignment.strategy also accepts the
  /// Java client's assignor class names (org.apache.kafka.clients.consumer.CooperativeStickyAssignor,
  /// ...) for the built-ins. Keys of other clients are refused here (a file read with
  /// from_properties() only warns about them). Combinations of keys are checked later, by validate() and the
  /// Consumer. \param key Kafka's property name ("session.timeout.ms") \param value its value as text
  /// ("45000") \returns `*this`, to chain calls \throws kgroup::Error client_errc::invalid_config for unknown
  /// keys (with a suggestion) and
  ///   values that do not parse or are out of range (fatal: fix the configuration); the message
  ///   names the key, never a secret's value.
  Config& set(const std::string& key, const std::string& value);

  /// The value of `key` (or of the key an other spelling stands for) as text: the explicitly set
  /// one, else the default (empty when it has none).
  /// \throws kgroup::Error client_errc::invalid_config for a key kgroup does not know.
  std::string get(std::string_view key) const;
  /// The value of an int or long key, as get() finds it.
  /// \throws kgroup::Error client_errc::invalid_config for an unknown key or a value that is not
  ///   an integer (a key of another type).
  std::int64_t get_int(std::string_view key) const;
  /// The value of a bool key: true when the value is "true" (set() stores booleans in lower
  /// case). \throws kgroup::Error client_errc::invalid_config for an unknown key.
  bool get_bool(std::string_view key) const;
  /// The value of a `*.ms` key as a duration (get_int() in milliseconds; same errors).
  std::chrono::milliseconds get_ms(std::string_view key) const;
  /// The value of a list key, split at commas with blanks trimmed (bootstrap.servers,
  /// partition.assignment.strategy). \throws kgroup::Error client_errc::invalid_config for an
  /// unknown key.
  std::vector<std::string> get_list(std::string_view key) const;
  /// Whether the user set `key` explicitly (false for a key only at its default, or unknown).
  bool is_set(std::string_view key) const;

  /// Reads a Java `.properties` text: `#`/`!` comments, `key=value`, `key: value` or `key value`,
  /// backslash escapes (`\t`, `\n`, `\uXXXX`, ...), lines continued by a trailing backslash. A file
  /// written for another Kafka client or a vendor's template works, as the Java client reads it: a
  /// key kgroup does not load (another client's, a Schema Registry key, a typo) is ignored with a
  /// warning per key naming it and its line (with a did-you-mean for a near miss), through the
  /// library's logger; the Java consumer's keys that mean nothing here (deserializers, metrics
  /// reporters, ...) are listed once at info, and so are the Java 4.x keys accepted but not acted on
  /// yet. librdkafka's spellings (`fetch.wait.max.ms`, `sasl.mechanisms`, ...) are read as the
  /// keys they stand for. Log lines name keys and lines, never values.
  /// \param text the file's contents
  /// \param ignored if not null, receives the keys ignored (a line whose key is not a property
  ///   name as "(line N)")
  /// \throws kgroup::Error client_errc::invalid_config naming the key and its line for a bad value
  ///   of a key kgroup knows, or a malformed `\u` escape (fatal: fix the file).
  static Config from_properties(std::string_view text, std::vector<std::string>* ignored = nullptr);
  /// from_properties() of the file at `path` (`ignored` as there).
  /// \throws kgroup::Error client_errc::invalid_config if the file cannot be read, and as
  ///   from_properties() for its contents.
  static Config load(const std::string& path, std::vector<std::string>* ignored = nullptr);

  /// The explicitly set keys as "key=value, ..." in key order, for logs; values of secret keys
  /// (passwords, tokens, JAAS lines) are shown as [redacted].
  std::string to_string() const;

  /// Checks combinations of keys (e.g. heartbeat.interval.ms below session.timeout.ms,
  /// bootstrap.servers present). The Consumer constructor calls it.
  /// \throws kgroup::Error client_errc::invalid_config naming the keys (fatal: fix the
  ///   configuration).
  void validate() const;

  /// All keys kgroup knows, with defaults, ranges and meaning.
  static const std::vector<ConfigKey>& keys();

  /// The token provider for sasl.mechanism=OAUTHBEARER with sasl.oauthbearer.method=default (a
  /// Config copy shares it). Without one, sasl.oauthbearer.config's unsecured token is used.
  /// \returns `*this`, to chain calls
  Config& set_oauthbearer_token_provider(OAuthBearerTokenProvider provider);
  /// The provider set_oauthbearer_token_provider() gave, or nullptr.
  const OAuthBearerTokenProvider* oauthbearer_token_provider() const noexcept { return token_provider_.get(); }

  /// Where the Consumer made from this Config (and describe_cluster() given it) logs, instead of
  /// the process-wide default sink (set_default_log_sink). A Config copy shares it; nullptr
  /// goes back to the default. See kgroup/log.hpp for what a sink must allow.
  /// \returns `*this`, to chain calls
  Config& set_log_sink(std::shared_ptr<LogSink> sink);
  /// The sink set_log_sink() gave; nullptr means the process-wide default.
  const std::shared_ptr<LogSink>& log_sink() const noexcept { return log_sink_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
  std::shared_ptr<const OAuthBearerTokenProvider> token_provider_;
  std::shared_ptr<LogSink> log_sink_;
};

}  // namespace kgroup
