// read_committed filtering (data/txn_filter.hpp) on crafted batch headers. The mock cluster's
// Fetch does not report aborted transactions, so this is where the rule is tested.
#include <catch2/catch.hpp>

#include "data/txn_filter.hpp"

using kgroup::data::aborted_filter;
using kgroup::protocol::record_batch_header;
namespace attr = kgroup::protocol::batch_attribute;

namespace {

record_batch_header batch(std::int64_t first, std::int64_t last, std::int64_t pid, bool txn, bool control = false) {
  record_batch_header h;
  h.base_offset = first;
  h.last_offset_delta = static_cast<std::int32_t>(last - first);
  h.producer_id = pid;
  h.attributes = static_cast<std::int16_t>((txn ? attr::transactional : 0) | (control ? attr::control : 0));
  return h;
}

}  // namespace

TEST_CASE("aborted transactions and control batches are skipped; committed data is kept", "[txn]") {
  aborted_filter f({{7, 10}});
  CHECK_FALSE(f.skip(batch(0, 9, 5, true)));     // another producer's committed transaction
  CHECK(f.skip(batch(10, 19, 7, true)));         // the aborted transaction
  CHECK(f.skip(batch(20, 20, 7, true, true)));   // its abort marker: never returned
  CHECK_FALSE(f.skip(batch(21, 30, 7, true)));   // the producer's next transaction is not aborted
  CHECK_FALSE(f.skip(batch(31, 35, 5, false)));  // non-transactional data
}

TEST_CASE("interleaved producers end their aborted transactions at their own markers", "[txn]") {
  aborted_filter f({{8, 15}, {7, 10}});  // any order
  CHECK(f.skip(batch(10, 14, 7, true)));
  CHECK(f.skip(batch(15, 19, 8, true)));
  CHECK_FALSE(f.skip(batch(20, 24, 9, true)));
  CHECK(f.skip(batch(25, 25, 7, true, true)));  // producer 7's marker
  CHECK_FALSE(f.skip(batch(26, 27, 7, true)));
  CHECK(f.skip(batch(28, 28, 8, true)));        // producer 8 still aborting
  CHECK(f.skip(batch(29, 29, 8, true, true)));
  CHECK_FALSE(f.skip(batch(30, 30, 8, true)));
}

TEST_CASE("an aborted transaction counts only from its first offset", "[txn]") {
  aborted_filter f({{7, 100}});
  CHECK_FALSE(f.skip(batch(0, 5, 7, true)));     // before the aborted transaction began
  CHECK(f.skip(batch(6, 6, 7, true, true)));     // commit marker of that earlier transaction: control
  CHECK(f.skip(batch(95, 105, 7, true)));        // a batch reaching into the aborted range
  CHECK_FALSE(f.skip(batch(106, 110, 3, true))); // someone else
}

TEST_CASE("without an aborted list only control batches are skipped", "[txn]") {
  aborted_filter f;
  CHECK_FALSE(f.skip(batch(0, 9, 7, true)));
  CHECK(f.skip(batch(10, 10, 7, true, true)));
  CHECK_FALSE(f.skip(batch(11, 12, 7, false)));
}
