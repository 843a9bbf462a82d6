// Where the next Fetch of a partition starts, read from record batch headers only (pure; the
// background thread never decodes records).
#pragma once

#include <cstdint>
#include <span>

namespace kgroup::data {

/// The offset following the last complete batch in `records` (at least `from`), and in
/// `last_epoch` (when given and such a batch exists) that batch's partition leader epoch (-1 for
/// the legacy formats). A partial batch at the end is ignored.
std::int64_t next_fetch_offset(std::span<const std::uint8_t> records, std::int64_t from,
                               std::int32_t* last_epoch = nullptr) noexcept;

}  // namespace kgroup::data
