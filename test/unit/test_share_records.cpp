// The share record reader (data/share_records): a ShareFetch answer's partition data decoded
// into the records poll() returns.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "data/share_records.hpp"
#include "record_batches.hpp"

using namespace kgroup;
using kgroup::test::batch_spec;

namespace {

struct answer {
  std::shared_ptr<protocol::bytes> bytes = std::make_shared<protocol::bytes>();
  protocol::records_view view() const { return {*bytes}; }
};

answer batches(const std::vector<batch_spec>& specs) {
  answer a;
  for (const auto& b : specs) kgroup::test::append_batch(*a.bytes, b);
  return a;
}

std::vector<std::int64_t> offsets(const data::share_read& r) {
  std::vector<std::int64_t> out;
  for (const auto& rec : r.records) out.push_back(rec.offset);
  return out;
}

const TopicPartition tp{"queue", 3};

}  // namespace

TEST_CASE("a partition's data decodes to its records, viewing the answer's bytes", "[share_records]") {
  const auto a = batches({batch_spec{.base = 10, .count = 3}, batch_spec{.base = 13, .count = 2}});
  const auto r = data::read_share_records(tp, a.view(), a.bytes);
  CHECK(offsets(r) == std::vector<std::int64_t>{10, 11, 12, 13, 14});
  CHECK(r.records[0].value == std::optional<std::string_view>("v10"));
  CHECK(r.records[0].topic == "queue");
  CHECK(r.records[0].partition == 3);
  CHECK_FALSE(r.records[0].delivery_count);  // the tracker's to set
  CHECK_FALSE(r.error);
  CHECK(r.owners.size() == 1);  // the answer's bytes, pinned once
}

TEST_CASE("transaction markers are not records; compacted offsets are simply absent", "[share_records]") {
  const auto a =
      batches({batch_spec{.base = 20, .count = 2},
               batch_spec{.base = 22, .count = 1, .transactional = true, .control = true, .producer_id = 7},
               batch_spec{.base = 23, .count = 1, .last_offset_delta = 2}});
  const auto r = data::read_share_records(tp, a.view(), a.bytes);
  CHECK(offsets(r) == std::vector<std::int64_t>{20, 21, 23});
}

TEST_CASE("compressed batches keep their decompressed bytes alive", "[share_records]") {
  const auto a = batches({batch_spec{.base = 0, .count = 50, .codec = protocol::compression::lz4}});
  auto r = data::read_share_records(tp, a.view(), a.bytes);
  REQUIRE(r.records.size() == 50);
  CHECK(r.owners.size() == 2);  // the answer and the decompressed batch
  CHECK(r.records[49].value == std::optional<std::string_view>("v49"));
}

TEST_CASE("a batch repeated in the answer gives its records once", "[share_records]") {
  const auto a = batches({batch_spec{.base = 0, .count = 3}, batch_spec{.base = 0, .count = 3}});
  const auto r = data::read_share_records(tp, a.view(), a.bytes);
  CHECK(offsets(r) == std::vector<std::int64_t>{0, 1, 2});
}

TEST_CASE("corrupt data: the records before it are returned, with the error", "[share_records]") {
  auto a = batches({batch_spec{.base = 0, .count = 3}, batch_spec{.base = 3, .count = 3}});
  a.bytes->back() ^= 0xff;  // the second batch's CRC no longer matches
  const auto r = data::read_share_records(tp, a.view(), a.bytes);
  CHECK(offsets(r) == std::vector<std::int64_t>{0, 1, 2});
  CHECK(r.error);
}
