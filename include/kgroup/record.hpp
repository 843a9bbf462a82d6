// The records poll() returns: ConsumerRecord (views into the fetched data), its headers and
// OwnedRecord (a copy that owns its bytes). Included by kgroup/consumer.hpp.
#pragma once

#include "kgroup/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kgroup {

/// How a record's timestamp was set.
enum class TimestampType { none = -1, create_time = 0, log_append_time = 1 };

/// One record header. Views into the fetched data, valid as long as the ConsumerRecords that
/// returned it.
struct KGROUP_EXPORT Header {
  std::string_view key;
  std::optional<std::string_view> value;
};

struct OwnedRecord;

/// One record returned by poll(). `topic`, `key`, `value` and `headers` view the fetched buffer
/// (no copy for uncompressed data) and stay valid only as long as the ConsumerRecords batch that
/// holds them: keeping a ConsumerRecord (or a string_view taken from it) after that batch is
/// destroyed reads freed memory. To keep a record, take owned(), which copies it.
struct KGROUP_EXPORT ConsumerRecord {
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp = -1;
  TimestampType timestamp_type = TimestampType::create_time;
  std::int32_t leader_epoch = -1;  // -1 when unknown (legacy message formats)
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;
  std::vector<Header> headers;     // empty (no allocation) for records without headers

  /// A copy that owns its bytes and outlives the batch.
  OwnedRecord owned() const;
};

/// A record that owns its topic, key, value and headers (ConsumerRecord::owned()).
struct KGROUP_EXPORT OwnedRecord {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp = -1;
  TimestampType timestamp_type = TimestampType::create_time;
  std::int32_t leader_epoch = -1;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
  bool operator==(const OwnedRecord&) const = default;
};

inline OwnedRecord ConsumerRecord::owned() const {
  OwnedRecord r{std::string(topic), partition, offset, timestamp, timestamp_type, leader_epoch, std::nullopt, std::nullopt, {}};
  if (key) r.key.emplace(*key);
  if (value) r.value.emplace(*value);
  r.headers.reserve(headers.size());
  for (const auto& h : headers)
    r.headers.emplace_back(std::string(h.key), h.value ? std::optional<std::string>(std::string(*h.value)) : std::nullopt);
  return r;
}

}  // namespace kgroup
