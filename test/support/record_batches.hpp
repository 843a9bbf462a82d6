// Record batches for unit tests that only need offsets and leader epochs right.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

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

}  // namespace kgroup::test
