// Record batches for unit tests: bare ones that only need offsets and leader epochs right, and
// fetched data of described batches (values "v<offset>", so a test can tell which record came
// back) for the tests of the user thread's data path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "data/types.hpp"
#include "protocol/records.hpp"

namespace kgroup::test {

/// Appends to `out` a batch of `count` one-byte records at offsets `base`.., leader epoch `epoch`.
inline void append_batch(protocol::bytes& out, std::int64_t base, std::int64_t count, std::int32_t epoch) {
  static const std::uint8_t value[] = {'v'};
  std::vector<protocol::record_input> recs(
      static_cast<std::size_t>(count),
      protocol::record_input{std::nullopt, protocol::byte_view(value), 1, {}, {}});
  protocol::batch_encode_options o;
  o.base_offset = base;
  o.partition_leader_epoch = epoch;
  REQUIRE_FALSE(protocol::encode_record_batch(recs, o, out));
}

/// One record batch of `count` records at offsets `base`..
struct batch_spec {
  std::int64_t base = 0;
  int count = 1;
  std::int32_t epoch = 5;
  protocol::compression codec = protocol::compression::none;
  bool transactional = false;
  bool control = false;
  std::int64_t producer_id = -1;
  std::optional<std::int32_t> last_offset_delta{};  // past the last record: a compacted tail
};

/// Appends the batch `b` to `out`; its records' values are "v<offset>".
inline void append_batch(protocol::bytes& out, const batch_spec& b) {
  std::vector<std::string> values;
  for (int i = 0; i < b.count; ++i) values.push_back("v" + std::to_string(b.base + i));
  std::vector<protocol::record_input> recs;
  for (const auto& v : values) {
    recs.push_back({std::nullopt,
                    protocol::byte_view(reinterpret_cast<const std::uint8_t*>(v.data()), v.size()),
                    1,
                    {},
                    {}});
  }
  protocol::batch_encode_options o;
  o.base_offset = b.base;
  o.partition_leader_epoch = b.epoch;
  o.codec = b.codec;
  o.transactional = b.transactional;
  o.control = b.control;
  o.producer_id = b.producer_id;
  o.last_offset_delta = b.last_offset_delta;
  REQUIRE_FALSE(protocol::encode_record_batch(recs, o, out));
}

/// Fetched data of `tp` fetched at `fetch_offset`, holding `batches`.
inline std::shared_ptr<detail::fetched_data> fetched(const TopicPartition& tp, std::int64_t fetch_offset,
                                                     const std::vector<batch_spec>& batches) {
  auto frame = std::make_shared<protocol::bytes>();
  for (const auto& b : batches) append_batch(*frame, b);
  auto d = std::make_shared<detail::fetched_data>();
  d->tp = tp;
  d->fetch_offset = fetch_offset;
  d->records = *frame;
  d->frame = frame;
  d->bytes = frame->size();
  return d;
}

}  // namespace kgroup::test
