/// \file
/// The records poll() returns: ConsumerRecord (views into the fetched data), its headers and
/// OwnedRecord (a copy that owns its bytes). Included by kgroup/consumer.hpp.
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
enum class TimestampType {
  none = -1,           ///< no timestamp (legacy message format v0)
  create_time = 0,     ///< set by the producer (message.timestamp.type=CreateTime)
  log_append_time = 1  ///< set by the broker when it appended the record (LogAppendTime)
};

/// One record header. Views into the fetched data, valid as long as the ConsumerRecords that
/// returned it.
struct KGROUP_EXPORT Header {
  std::string_view key;                   ///< header name
  std::optional<std::string_view> value;  ///< header value; empty for a null value
};

struct OwnedRecord;

/// One record returned by poll(). `topic`, `key`, `value` and `headers` view the fetched buffer
/// (no copy for uncompressed data) and stay valid only as long as the ConsumerRecords batch that
/// holds them: keeping a ConsumerRecord (or a string_view taken from it) after that batch is
/// destroyed reads freed memory. To keep a record, take owned(), which copies it.
struct KGROUP_EXPORT ConsumerRecord {
  std::string_view topic;                                     ///< topic name
  std::int32_t partition = 0;                                 ///< partition number
  std::int64_t offset = 0;                                    ///< the record's offset
  std::int64_t timestamp = -1;                                ///< ms since the Unix epoch, -1 none
  TimestampType timestamp_type = TimestampType::create_time;  ///< who set `timestamp`
  std::int32_t leader_epoch = -1;                             ///< -1 when unknown (legacy message formats)
  std::optional<std::string_view> key;                        ///< empty for a null key
  std::optional<std::string_view> value;                      ///< empty for a null value (a tombstone)
  std::vector<Header> headers;  ///< empty (no allocation) for records without headers
  /// How many times a share group handed this record out, 1 the first time (ShareConsumer only;
  /// empty from a Consumer), as Java's ConsumerRecord.deliveryCount().
  std::optional<std::int16_t> delivery_count;

  /// A copy that owns its bytes and outlives the batch.
  OwnedRecord owned() const;
};

/// A record that owns its topic, key, value and headers (ConsumerRecord::owned()).
struct KGROUP_EXPORT OwnedRecord {
  std::string topic;                                          ///< topic name
  std::int32_t partition = 0;                                 ///< partition number
  std::int64_t offset = 0;                                    ///< the record's offset
  std::int64_t timestamp = -1;                                ///< ms since the Unix epoch, -1 none
  TimestampType timestamp_type = TimestampType::create_time;  ///< who set `timestamp`
  std::int32_t leader_epoch = -1;                             ///< -1 when unknown
  std::optional<std::string> key;                             ///< empty for a null key
  std::optional<std::string> value;                           ///< empty for a null value (a tombstone)
  /// Headers in record order: name and value (empty for a null value).
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
  /// How many times a share group handed the record out (ShareConsumer only).
  std::optional<std::int16_t> delivery_count;
  /// Field-wise equality.
  bool operator==(const OwnedRecord&) const = default;
};

inline OwnedRecord ConsumerRecord::owned() const {
  OwnedRecord r{std::string(topic), partition,    offset,       timestamp, timestamp_type,
                leader_epoch,       std::nullopt, std::nullopt, {},        delivery_count};
  if (key) r.key.emplace(*key);
  if (value) r.value.emplace(*value);
  r.headers.reserve(headers.size());
  for (const auto& h : headers)
    r.headers.emplace_back(std::string(h.key), h.value ? std::optional<std::string>(std::string(*h.value)) : std::nullopt);
  return r;
}

}  // namespace kgroup
