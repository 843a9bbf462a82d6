// Fetch of seeded records in every compression codec, decoded by kgroup's record-batch decoder,
// from the librdkafka mock cluster (records produced by librdkafka's producer).
#include <chrono>
#include <map>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "io_wait.hpp"
#include "kgroup/config.hpp"
#include "mock_cluster.hpp"
#include "net/cluster.hpp"
#include "protocol/records.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace proto = kgroup::protocol;

using kgroup::test::run_until;

TEST_CASE("Fetch returns every seeded record, in order and intact, for each codec", "[net][fetch]") {
  const std::string codec = GENERATE("none", "gzip", "snappy", "lz4", "zstd");
  constexpr int partitions = 4;
  constexpr std::int64_t records = 3000;
  constexpr std::size_t value_size = 100;
  kgroup::test::mock_cluster mc(3);
  const std::string topic = "fetch-" + codec;
  mc.create_topic(topic, partitions);
  const auto per_partition = mc.produce(topic, records, codec, -1, value_size);
  REQUIRE(per_partition.size() == partitions);

  asio::io_context io;
  kgroup::Config cfg{{"bootstrap.servers", mc.bootstrap_servers()}, {"request.timeout.ms", "5000"}};
  auto c = std::make_shared<kgroup::net::cluster>(io, kgroup::net::cluster_options::from_config(cfg));
  bool refreshed = false;
  c->refresh_metadata(std::vector<std::string>{topic}, 5s, [&](std::error_code ec) {
    REQUIRE_FALSE(ec);
    refreshed = true;
  });
  REQUIRE(run_until(io, [&] { return refreshed; }));
  const auto& tm = c->metadata().topics.at(topic);
  REQUIRE(tm.partitions.size() == partitions);

  std::int64_t total = 0;
  std::size_t compressed_batches = 0;
  for (const auto& pm : tm.partitions) {
    auto conn = c->broker(pm.leader);
    REQUIRE(conn);
    std::int64_t next = 0;
    std::int64_t high = -1;
    int rounds = 0;
    while (high < 0 || next < high) {
      REQUIRE(++rounds < 10000);
      proto::fetch_request req;
      req.max_wait_ms = 100;
      req.min_bytes = 1;
      req.max_bytes = 1 << 20;
      proto::fetch_request::fetch_topic ft;
      ft.topic = topic;
      proto::fetch_request::fetch_topic::fetch_partition fp;
      fp.partition = pm.partition;
      fp.fetch_offset = next;
      fp.partition_max_bytes = 256 * 1024;
      ft.partitions.push_back(fp);
      req.topics.push_back(ft);
      bool done = false;
      conn->send_keep_frame(req, [&](std::error_code ec, const proto::fetch_response& resp,
                                     const kgroup::net::response_frame& frame) {
        done = true;
        REQUIRE_FALSE(ec);
        REQUIRE(frame.frame);
        REQUIRE(resp.responses.size() == 1);
        REQUIRE(resp.responses[0].partitions.size() == 1);
        const auto& pd = resp.responses[0].partitions[0];
        REQUIRE(pd.error_code == 0);
        high = pd.high_watermark;
        if (!pd.records) return;
        proto::batch_reader batches(*pd.records);
        proto::record_batch batch;
        while (batches.next(batch)) {
          if (batch.header().codec() != proto::compression::none) ++compressed_batches;
          auto it = batch.records();
          proto::record rec;
          while (it.next(rec)) {
            if (rec.offset < next) continue;  // a batch may start before the fetch offset
            REQUIRE(rec.offset == next);
            const std::string key = kgroup::test::record_key(topic, pm.partition, rec.offset);
            REQUIRE(rec.key);
            REQUIRE(std::string(rec.key->begin(), rec.key->end()) == key);
            REQUIRE(rec.value);
            REQUIRE(std::string(rec.value->begin(), rec.value->end()) == kgroup::test::expected_value(key, value_size));
            ++next;
            ++total;
          }
          REQUIRE_FALSE(it.error());
        }
        REQUIRE_FALSE(batches.error());
      });
      REQUIRE(run_until(io, [&] { return done; }));
    }
    CHECK(next == per_partition[static_cast<std::size_t>(pm.partition)]);
  }
  CHECK(total == records);
  if (codec != "none") CHECK(compressed_batches > 0);
  c->close();
}
