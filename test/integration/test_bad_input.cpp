// Bad input from the network (issue 7): a fake broker on loopback sends frames larger than
// receive.message.max.bytes, wrong correlation ids, truncated responses, garbage, responses to
// requests never sent, assignments naming topics the member never subscribed to, and negative or
// huge counts. Each must give a logged error, a closed connection or a rejected assignment, and
// recovery; never a crash or a hang.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "assign/consumer_protocol.hpp"
#include "fake_broker.hpp"
#include "io_wait.hpp"
#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/log.hpp"
#include "log_capture.hpp"
#include "net/cluster.hpp"
#include "protocol/records.hpp"
#include "test_config.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
using kgroup::client_errc;
using kgroup::net::connection;
using kgroup::protocol::bytes;
using kgroup::test::fake_broker;
using kgroup::test::log_capture;
using kgroup::test::run_until;
using kgroup::test::test_config;
using reply = fake_broker::reply;
using request = fake_broker::request;

namespace {

// ---- a client connection -------------------------------------------------------------------------

// One kgroup connection to the fake broker, driven on the test thread.
struct client {
  asio::io_context io;
  std::shared_ptr<connection> conn;

  explicit client(const fake_broker& fb, std::size_t max_response = 1 << 20) {
    kgroup::net::connection_options opts;
    opts.request_timeout = 3s;
    opts.connect_timeout = 3s;
    opts.max_response_size = max_response;
    opts.reconnect_backoff = 5ms;
    opts.reconnect_backoff_max = 20ms;
    conn = std::make_shared<connection>(io, 1, "127.0.0.1", fb.port(), opts);
  }
  ~client() {
    conn->close();
    io.poll();
  }

  // Sends a Metadata request for all topics; returns its outcome and the response.
  std::pair<std::error_code, kgroup::protocol::metadata_response> metadata() {
    bool done = false;
    std::error_code result;
    kgroup::protocol::metadata_response resp;
    // No topics (the fake answers with its topics anyway); a null list trips a gcc
    // -Wmaybe-uninitialized false positive on std::optional<std::vector> moves.
    conn->send(kgroup::protocol::metadata_request{}, [&](std::error_code ec, const kgroup::protocol::metadata_response& r) {
      result = ec;
      resp = r;
      done = true;
    });
    // Well below the request timeout: a hang would show up as this failing.
    const bool answered = run_until(io, [&] { return done; }, 8s);
    if (!answered) {
      conn->close();  // runs the handler now, while its captures are alive
      io.poll();
    }
    REQUIRE(answered);
    return {result, resp};
  }

  // A request that must succeed, proving the connection recovered.
  void expect_recovered() {
    auto [ec, resp] = metadata();
    INFO(ec.message());
    REQUIRE_FALSE(ec);
    CHECK(resp.brokers.size() == 1);
  }
};

bool is_metadata(const request& r) { return r.api_key == kgroup::protocol::metadata_request::api_key; }

}  // namespace

// ---- 1. frames larger than receive.message.max.bytes ---------------------------------------------

TEST_CASE("a response frame above receive.message.max.bytes closes the connection; the next request reconnects",
          "[badinput]") {
  log_capture logs;
  struct bad_size {
    std::uint32_t size;
    std::string logged;
  };
  auto bad = GENERATE(bad_size{2'000'000, "response frame of 2000000 bytes (limit 1048576, receive.message.max.bytes)"},
                      bad_size{0x80000000u, "response frame of -2147483648 bytes"},  // negative as an int32
                      bad_size{2, "response frame of 2 bytes"});                     // shorter than a header
  fake_broker fb([&](const request& r) -> std::optional<reply> {
    if (!is_metadata(r) || r.index != 1) return std::nullopt;
    // Only the size prefix (and a few bytes): kgroup must not wait for, nor allocate, the rest.
    bytes b{static_cast<std::uint8_t>(bad.size >> 24), static_cast<std::uint8_t>(bad.size >> 16),
            static_cast<std::uint8_t>(bad.size >> 8), static_cast<std::uint8_t>(bad.size), 0, 0, 0, 0};
    return reply{b};
  });
  client c(fb);
  auto [ec, resp] = c.metadata();
  CHECK(ec == make_error_code(client_errc::connection_closed));
  CHECK(c.conn->current_state() == connection::state::backoff);
  CHECK(logs.has_error({bad.logged}));
  CHECK(logs.has_warning({"bad frame size"}));
  c.expect_recovered();
  CHECK(fb.connections() == 2);
  CHECK(c.conn->connects() == 2);
}

TEST_CASE("receive.message.max.bytes from the Config bounds metadata responses; the refresh retries and recovers",
          "[badinput]") {
  log_capture logs;
  // The first Metadata answer is a frame just past the configured limit; the retry (on a new
  // connection) gets a normal one.
  fake_broker fb(
      [&](const request& r) -> std::optional<reply> {
        if (!is_metadata(r) || r.index != 1) return std::nullopt;
        bytes body(1500, 'x');
        return reply{fake_broker::frame_with_header(r, body)};
      },
      {{"orders", 3}});
  kgroup::Config cfg = test_config(fb.bootstrap())
                           .set("receive.message.max.bytes", "1024")
                           .reconnect_backoff(5ms)
                           .retry_backoff(5ms)
                           .set("request.timeout.ms", "3000");
  cfg.validate();
  asio::io_context io;
  auto cl = std::make_shared<kgroup::net::cluster>(io, kgroup::net::cluster_options::from_config(cfg));
  bool done = false;
  std::error_code result;
  cl->refresh_metadata(std::nullopt, 5s, [&](std::error_code ec) {
    result = ec;
    done = true;
  });
  REQUIRE(run_until(io, [&] { return done; }));
  CHECK_FALSE(result);
  CHECK(cl->metadata().topics.at("orders").partitions.size() == 3);
  CHECK(logs.has_error({"(limit 1024, receive.message.max.bytes)"}));
  CHECK(fb.requests(kgroup::protocol::metadata_request::api_key) == 2);
  cl->close();
  io.poll();
}

// ---- 2. wrong correlation id ---------------------------------------------------------------------

TEST_CASE("a response with the wrong correlation id closes the connection; the next request recovers", "[badinput]") {
  log_capture logs;
  auto offset = GENERATE(1000, -1, 1);  // far off, a stale id, the id of a request not yet sent
  fake_broker fb([&](const request& r) -> std::optional<reply> {
    if (!is_metadata(r) || r.index != 1) return std::nullopt;
    kgroup::protocol::metadata_response m;
    return reply{fake_broker::response(r, m, r.correlation_id + offset)};
  });
  client c(fb);
  auto [ec, resp] = c.metadata();
  CHECK(ec == make_error_code(client_errc::connection_closed));
  CHECK(logs.has_error({"response correlation id", "but expected"}));
  CHECK(logs.has_warning({"correlation id mismatch"}));
  c.expect_recovered();
  CHECK(fb.connections() == 2);
}

// ---- 3. truncated responses ----------------------------------------------------------------------

TEST_CASE("a frame cut short by the broker closing the connection fails the request; the next one recovers",
          "[badinput]") {
  log_capture logs;
  std::atomic<std::size_t> full_size{0};
  fake_broker fb;  // only for its metadata(); the broker under test is below
  const auto good = fb.metadata();
  auto keep = GENERATE(0, 2, 4, 10, 30);  // bytes of the announced frame (after its size) actually sent
  fake_broker cut([&](const request& r) -> std::optional<reply> {
    if (!is_metadata(r) || r.index != 1) return std::nullopt;
    bytes f = fake_broker::response(r, good);
    full_size = f.size();
    f.resize(4 + static_cast<std::size_t>(keep));  // the size prefix still announces the whole frame
    return reply{f, /*close=*/true};
  });
  client c(cut);
  auto [ec, resp] = c.metadata();
  REQUIRE(full_size > 4 + 30u);
  CHECK(ec == make_error_code(client_errc::connection_closed));
  CHECK(logs.has_error({"connection closed by broker inside a response frame (" + std::to_string(keep) + " of " +
                        std::to_string(full_size - 4) + " bytes)"}));
  c.expect_recovered();
}

TEST_CASE("a response cut inside any field is a decode error, logged, and the connection recovers", "[badinput]") {
  log_capture logs;
  fake_broker shape({}, {{"orders", 2}});
  const auto good = shape.metadata();
  // Every strict prefix of a correct Metadata body, each framed consistently (the frame size
  // matches what is sent): the decoder runs out of input inside some field.
  // Shared with the broker's thread.
  std::atomic<std::size_t> cut_at{0};
  std::atomic<std::size_t> body_size{0};
  fake_broker fb(
      [&](const request& r) -> std::optional<reply> {
        if (!is_metadata(r)) return std::nullopt;
        bytes body;
        if (kgroup::protocol::encode(good, r.api_version, body)) return std::nullopt;
        body_size = body.size();
        if (cut_at >= body.size()) return std::nullopt;
        body.resize(cut_at);
        return reply{fake_broker::frame_with_header(r, body)};
      },
      {{"orders", 2}});
  client c(fb);
  for (;; ++cut_at) {
    auto [ec, resp] = c.metadata();
    if (cut_at >= body_size) {
      REQUIRE_FALSE(ec);  // the whole body: recovered
      CHECK(resp.topics.size() == 1);
      break;
    }
    INFO("body cut after " << cut_at.load() << " of " << body_size.load() << " bytes");
    REQUIRE(ec == make_error_code(client_errc::protocol_violation));
  }
  CHECK(body_size > 40);
  CHECK(logs.has_error({"undecodable response to api 3", "input ends inside a value"}));
  CHECK(logs.has_warning({"undecodable response"}));
  CHECK(fb.connections() == static_cast<int>(body_size.load()) + 1);
}

// ---- 4. garbage ----------------------------------------------------------------------------------

TEST_CASE("garbage bytes from a broker fail the request without a crash or a hang; the next request recovers",
          "[badinput]") {
  log_capture logs;
  enum class kind { raw, framed, framed_with_id };
  auto k = GENERATE(kind::raw, kind::framed, kind::framed_with_id);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> length(0, 200);
  std::atomic<bool> garbage_next{true};
  fake_broker fb([&](const request& r) -> std::optional<reply> {
    if (!is_metadata(r) || !garbage_next) return std::nullopt;
    bytes g(length(rng));
    for (auto& b : g) b = static_cast<std::uint8_t>(byte(rng));
    switch (k) {
      case kind::raw:  // no framing at all; then the broker hangs up
        return reply{g, true};
      case kind::framed:  // a consistent size prefix around random bytes
        return reply{fake_broker::frame(g), true};
      case kind::framed_with_id:  // the right header, a random body
        return reply{fake_broker::frame_with_header(r, g), true};
    }
    return std::nullopt;
  });
  client c(fb);
  for (int i = 0; i < 30; ++i) {
    garbage_next = true;
    auto [ec, resp] = c.metadata();
    // A random body could in theory decode; what matters is an answer, no crash, no hang.
    if (k != kind::framed_with_id) CHECK(ec);
    CHECK(ec != make_error_code(client_errc::request_timed_out));
    garbage_next = false;
    c.expect_recovered();
  }
  CHECK(!logs.problems().empty());
  if (k == kind::framed_with_id) CHECK(logs.has_error({"undecodable response to api 3"}));
}

// ---- 5. responses to requests never sent ---------------------------------------------------------

TEST_CASE("a response to a request never sent closes the connection with a logged error; then it recovers",
          "[badinput]") {
  log_capture logs;
  SECTION("an extra response after a good answer, with nothing in flight") {
    fake_broker fb([&](const request& r) -> std::optional<reply> {
      if (!is_metadata(r) || r.index != 1) return std::nullopt;
      bytes both = fake_broker::response(r, kgroup::protocol::metadata_response{});
      const bytes extra = fake_broker::response(r, kgroup::protocol::metadata_response{}, 777);
      both.insert(both.end(), extra.begin(), extra.end());
      return reply{both};
    });
    client c(fb);
    auto [ec, resp] = c.metadata();
    CHECK_FALSE(ec);  // the real answer comes first
    REQUIRE(run_until(c.io, [&] { return c.conn->current_state() == connection::state::backoff; }, 5s));
    CHECK(logs.has_error({"response with correlation id 777 to no request"}));
    CHECK(logs.has_warning({"unsolicited response"}));
    c.expect_recovered();
    CHECK(fb.connections() == 2);
  }
  SECTION("a response sent right after connect, before the ApiVersions answer") {
    fake_broker fb([&](const request& r) -> std::optional<reply> {
      if (r.api_key != kgroup::protocol::api_versions_request::api_key || r.index != 1) return std::nullopt;
      request meta = r;
      meta.api_key = kgroup::protocol::metadata_request::api_key;
      meta.api_version = 1;
      return reply{fake_broker::response(meta, kgroup::protocol::metadata_response{}, 4242)};
    });
    client c(fb);
    auto [ec, resp] = c.metadata();
    CHECK(ec);
    CHECK(logs.has_error({"response correlation id 4242 but expected"}));
    c.expect_recovered();
  }
}

// ---- 7. negative and huge counts in a Metadata response ------------------------------------------

namespace {

// A Metadata v8 response body (non-flexible: int32 counts) with one topic "t" whose partition
// array claims `count` entries while `actual` follow.
bytes metadata_v8(std::uint16_t port, std::int32_t count, int actual) {
  bytes out;
  kgroup::protocol::writer w(out);
  w.write_int32(0);  // throttle_time_ms
  w.write_int32(1);  // brokers
  w.write_int32(1);
  w.write_string("127.0.0.1", false);
  w.write_int32(port);
  w.write_nullable_string(std::nullopt, false);  // rack
  w.write_nullable_string(std::string("fake"), false);  // cluster_id
  w.write_int32(1);                                     // controller_id
  w.write_int32(1);                                     // topics
  w.write_int16(0);
  w.write_string("t", false);
  w.write_bool(false);  // is_internal
  w.write_int32(count);
  for (int p = 0; p < actual; ++p) {
    w.write_int16(0);  // error_code
    w.write_int32(p);  // partition_index
    w.write_int32(1);  // leader_id
    w.write_int32(0);  // leader_epoch
    w.write_int32(1);  // replica_nodes
    w.write_int32(1);
    w.write_int32(1);  // isr_nodes
    w.write_int32(1);
    w.write_int32(0);  // offline_replicas
  }
  w.write_int32(std::numeric_limits<std::int32_t>::min());  // topic_authorized_operations
  w.write_int32(std::numeric_limits<std::int32_t>::min());  // cluster_authorized_operations
  return out;
}

std::vector<kgroup::protocol::api_versions_response::api_version> versions_with(std::int16_t api_key, std::int16_t max) {
  auto v = fake_broker::default_versions();
  for (auto& a : v) {
    if (a.api_key == api_key) a.max_version = max;
  }
  return v;
}

}  // namespace

TEST_CASE("a Metadata response with a negative or huge partition count is rejected; the refresh retries and recovers",
          "[badinput]") {
  log_capture logs;
  struct bad_count {
    std::int32_t count;
    std::string error;
  };
  auto bad = GENERATE(bad_count{-5, "negative length or count"}, bad_count{-1, "null value for a non-nullable field"},
                      bad_count{0x7fffffff, "length or count larger than the remaining input"},
                      bad_count{1000, "length or count larger than the remaining input"});
  std::atomic<std::uint16_t> port{0};
  std::atomic<int> version{-1};
  fake_broker fb(
      [&](const request& r) -> std::optional<reply> {
        if (!is_metadata(r)) return std::nullopt;
        version = r.api_version;
        if (r.index == 1) return reply{fake_broker::frame_with_header(r, metadata_v8(port, bad.count, 2))};
        return reply{fake_broker::frame_with_header(r, metadata_v8(port, 2, 2))};
      },
      {}, versions_with(kgroup::protocol::metadata_request::api_key, 8));
  port = fb.port();
  {
    // The hand-written good answer is what the codec expects.
    kgroup::protocol::metadata_response check;
    REQUIRE_FALSE(kgroup::protocol::decode(metadata_v8(port, 2, 2), 8, check));
    REQUIRE(check.topics.at(0).partitions.size() == 2);
  }
  asio::io_context io;
  kgroup::net::cluster_options opts;
  opts.bootstrap = {{"127.0.0.1", fb.port()}};
  opts.retry_backoff = 5ms;
  opts.connection.reconnect_backoff = 5ms;
  opts.connection.request_timeout = 3s;
  auto cl = std::make_shared<kgroup::net::cluster>(io, opts);
  bool done = false;
  std::error_code result;
  cl->refresh_metadata(std::nullopt, 5s, [&](std::error_code ec) {
    result = ec;
    done = true;
  });
  REQUIRE(run_until(io, [&] { return done; }));
  INFO(logs.problems());
  CHECK_FALSE(result);
  REQUIRE(cl->metadata().topics.count("t") == 1);
  CHECK(cl->metadata().topics.at("t").partitions.size() == 2);
  CHECK(logs.has_error({"undecodable response to api 3", bad.error}));
  CHECK(fb.requests(kgroup::protocol::metadata_request::api_key) == 2);
  CHECK(version == 8);
  cl->close();
  io.poll();
}

// ---- 6 and 7: a whole Consumer against a fake group coordinator ----------------------------------

namespace {

namespace proto = kgroup::protocol;

// Consumer-protocol Assignment bytes (v0..3) naming these partitions.
bytes assignment_bytes(const std::vector<kgroup::TopicPartitions>& parts) {
  kgroup::MemberAssignment a;
  a.partitions = parts;
  bytes out;
  if (kgroup::assign::encode_assignment(a, 3, out)) throw std::runtime_error("cannot encode an assignment");
  return out;
}

// int16 version 0, then an int32 array count of -5: a consumer-protocol Subscription (topics) or
// Assignment (topic partitions) that claims a negative number of entries.
bytes negative_count_message() {
  bytes out;
  proto::writer w(out);
  w.write_int16(0);
  w.write_int32(-5);
  return out;
}

// A JoinGroup v2..5 response body (non-flexible) whose member array claims -5 entries.
bytes join_group_negative_members(std::int16_t version) {
  bytes out;
  proto::writer w(out);
  if (version >= 2) w.write_int32(0);  // throttle_time_ms
  w.write_int16(0);                    // error_code
  w.write_int32(1);                    // generation_id
  w.write_string("range", false);      // protocol_name
  w.write_string("m1", false);         // leader
  w.write_string("m1", false);         // member_id
  w.write_int32(-5);                   // members
  return out;
}

// A group coordinator and partition leader for topics "mine" and "secret" (one partition each,
// three records each), with this member as the only real member. The test scripts JoinGroup and
// SyncGroup; everything else gets a plausible answer. State is read under `mutex` (the broker
// serialises handler calls, the test thread reads concurrently).
struct fake_coordinator {
  std::mutex mutex;
  // JoinGroup number n (from 1): a hand-written body instead of the normal answer, if set.
  std::function<std::optional<bytes>(int n, std::int16_t version)> join_body;
  // The leader the JoinGroup answers name; "" means this member leads.
  std::string leader = "m1";
  // Other members listed (with their subscription bytes) when this member leads.
  std::vector<std::pair<std::string, bytes>> others;
  // The assignment bytes SyncGroup number n gives this member (when it does not lead).
  std::function<bytes(int n)> assignment;

  // Observations.
  int joins = 0;
  int syncs = 0;
  std::vector<proto::sync_group_request> sync_requests;
  std::set<std::string> fetched_topics;

  std::optional<reply> handle(const request& r) {
    std::lock_guard lock(mutex);
    switch (r.api_key) {
      case proto::join_group_request::api_key: {
        proto::join_group_request req;
        if (!r.decode(req) || req.protocols.empty()) return std::nullopt;
        ++joins;
        if (join_body) {
          if (auto b = join_body(joins, r.api_version)) return reply{fake_broker::frame_with_header(r, *b)};
        }
        proto::join_group_response resp;
        resp.generation_id = joins;
        resp.protocol_type = "consumer";
        resp.protocol_name = req.protocols.front().name;
        resp.member_id = "m1";
        resp.leader = leader.empty() ? "m1" : leader;
        if (leader.empty()) {
          resp.members.push_back({"m1", std::nullopt, req.protocols.front().metadata});
          for (const auto& [id, meta] : others) resp.members.push_back({id, std::nullopt, meta});
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::sync_group_request::api_key: {
        proto::sync_group_request req;
        if (!r.decode(req)) return std::nullopt;
        ++syncs;
        sync_requests.push_back(req);
        proto::sync_group_response resp;
        resp.protocol_type = "consumer";
        resp.protocol_name = req.protocol_name;
        if (leader.empty()) {
          for (const auto& a : req.assignments) {
            if (a.member_id == req.member_id) resp.assignment = a.assignment;
          }
        } else {
          resp.assignment = assignment(syncs);
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::heartbeat_request::api_key:
        return reply{fake_broker::response(r, proto::heartbeat_response{})};
      case proto::leave_group_request::api_key:
        return reply{fake_broker::response(r, proto::leave_group_response{})};
      case proto::offset_fetch_request::api_key: {
        proto::offset_fetch_request req;
        if (!r.decode(req) || !req.topics) return std::nullopt;
        proto::offset_fetch_response resp;
        for (const auto& t : *req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (auto p : t.partition_indexes) rt.partitions.push_back({p, -1, -1, std::string{}, 0});
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::list_offsets_request::api_key: {
        proto::list_offsets_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::list_offsets_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, 0, {}, -1, 0, -1});
        }
        return reply{fake_broker::response(r, resp)};
      }
      case proto::fetch_request::api_key: {
        proto::fetch_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::fetch_response resp;
        std::vector<bytes> batches;
        batches.reserve(64);
        bool any = false;
        for (const auto& t : req.topics) {
          fetched_topics.insert(t.topic);
          auto& rt = resp.responses.emplace_back();
          rt.topic = t.topic;
          for (const auto& p : t.partitions) {
            auto& rp = rt.partitions.emplace_back();
            rp.partition_index = p.partition;
            rp.high_watermark = 3;
            rp.last_stable_offset = 3;
            rp.log_start_offset = 0;
            if (p.fetch_offset < 3 && batches.size() < batches.capacity()) {
              static constexpr std::uint8_t value[] = {'v'};
              std::vector<proto::record_input> recs;
              for (auto o = p.fetch_offset; o < 3; ++o) recs.push_back({std::nullopt, proto::byte_view(value), 1000 + o, {}, {}});
              proto::batch_encode_options bo;
              bo.base_offset = p.fetch_offset;
              auto& b = batches.emplace_back();
              if (proto::encode_record_batch(recs, bo, b)) return std::nullopt;
              rp.records = proto::records_view{b};
              any = true;
            } else {
              rp.records = proto::records_view{};
            }
          }
        }
        return reply{fake_broker::response(r, resp), false, any ? 0ms : 100ms};
      }
      case proto::offset_commit_request::api_key: {
        proto::offset_commit_request req;
        if (!r.decode(req)) return std::nullopt;
        proto::offset_commit_response resp;
        for (const auto& t : req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, 0});
        }
        return reply{fake_broker::response(r, resp)};
      }
      default:
        return std::nullopt;
    }
  }
};

std::vector<proto::api_versions_response::api_version> coordinator_versions() {
  auto v = fake_broker::default_versions();
  for (auto& a : v) {
    // JoinGroup v5 has int32 counts (a negative member count is representable); OffsetFetch v7
    // has the single-group layout.
    if (a.api_key == proto::join_group_request::api_key) a.max_version = 5;
    if (a.api_key == proto::offset_fetch_request::api_key) a.max_version = 7;
  }
  return v;
}

kgroup::Config consumer_config(const fake_broker& fb) {
  return test_config(fb.bootstrap())
      .group("g")
      .strategy("range")
      .earliest()
      .manual_commit()
      .short_session(200ms)
      .quick_recovery()
      .fetch_wait(100ms);
}

// Remembers every partition the listener was told about.
struct told_listener : kgroup::ConsumerRebalanceListener {
  std::set<kgroup::TopicPartition> assigned_ever;
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& ps) override {
    assigned_ever.insert(ps.begin(), ps.end());
  }
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>&) override {}
};

// Polls until three records of mine-0 arrived (or 20 s); returns the topics of all records seen.
std::multiset<std::string> poll_until_mine(kgroup::Consumer& c) {
  std::multiset<std::string> topics;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (topics.count("mine") < 3 && std::chrono::steady_clock::now() < deadline) {
    for (const auto& rec : c.poll(100ms)) topics.insert(std::string(rec.topic));
  }
  return topics;
}

}  // namespace

TEST_CASE("a leader's assignment naming an unsubscribed topic, or malformed, is rejected; the member rejoins",
          "[badinput][group]") {
  log_capture logs;
  fake_coordinator fc;
  fc.leader = "someone-else";
  fc.join_body = [](int n, std::int16_t version) -> std::optional<bytes> {
    // The first JoinGroup answer claims -5 members.
    if (n == 1) return join_group_negative_members(version);
    return std::nullopt;
  };
  fc.assignment = [](int n) {
    if (n == 1) return assignment_bytes({{"mine", {0}}, {"secret", {0}}});  // a topic never subscribed to
    if (n == 2) return negative_count_message();                             // -5 topics
    return assignment_bytes({{"mine", {0}}});
  };
  fake_broker fb([&](const request& r) { return fc.handle(r); }, {{"mine", 1}, {"secret", 1}}, coordinator_versions());
  auto listener = std::make_shared<told_listener>();
  {
    kgroup::Consumer consumer(consumer_config(fb));
    consumer.subscribe({"mine"}, listener);
    const auto topics = poll_until_mine(consumer);
    INFO(logs.problems());
    CHECK(topics.count("mine") == 3);
    CHECK(topics.count("secret") == 0);
    CHECK(consumer.assignment() == std::set<kgroup::TopicPartition>{{"mine", 0}});
    consumer.close();
  }
  INFO(logs.problems());
  CHECK(listener->assigned_ever == std::set<kgroup::TopicPartition>{{"mine", 0}});
  {
    std::lock_guard lock(fc.mutex);
    CHECK(fc.fetched_topics == std::set<std::string>{"mine"});
    CHECK(fc.joins >= 4);  // the malformed answer, then one per rejected assignment, then the good one
    CHECK(fc.syncs >= 3);
  }
  CHECK(logs.has_error({"undecodable response to api 11", "negative length or count"}));
  CHECK(logs.has_error({"the group leader assigned topic 'secret', which this member did not subscribe to",
                        "rejecting it and rejoining"}));
  CHECK(logs.has_error({"malformed assignment from the group leader", "negative length or count"}));
}

TEST_CASE("as leader, a member whose subscription is malformed gets no partitions; the group still works",
          "[badinput][group]") {
  log_capture logs;
  fake_coordinator fc;
  fc.leader = "";  // this member leads
  // One member with a negative topic count, one with a negative version, one cut short.
  bytes cut = negative_count_message();
  cut.resize(3);
  bytes negative_version{0xff, 0xff, 0, 0, 0, 0};
  fc.others = {{"bad-count", negative_count_message()}, {"bad-version", negative_version}, {"bad-cut", cut}};
  fake_broker fb([&](const request& r) { return fc.handle(r); }, {{"mine", 1}, {"secret", 1}}, coordinator_versions());
  auto listener = std::make_shared<told_listener>();
  {
    kgroup::Consumer consumer(consumer_config(fb));
    consumer.subscribe({"mine"}, listener);
    const auto topics = poll_until_mine(consumer);
    INFO(logs.problems());
    CHECK(topics.count("mine") == 3);
    CHECK(consumer.assignment() == std::set<kgroup::TopicPartition>{{"mine", 0}});
    consumer.close();
  }
  INFO(logs.problems());
  CHECK(listener->assigned_ever == std::set<kgroup::TopicPartition>{{"mine", 0}});
  {
    std::lock_guard lock(fc.mutex);
    REQUIRE_FALSE(fc.sync_requests.empty());
    const auto& sync = fc.sync_requests.front();
    REQUIRE(sync.assignments.size() == 4);
    for (const auto& a : sync.assignments) {
      kgroup::MemberAssignment decoded;
      REQUIRE_FALSE(kgroup::assign::decode_assignment(a.assignment, decoded));
      if (a.member_id == "m1") {
        CHECK(decoded.partitions == std::vector<kgroup::TopicPartitions>{{"mine", {0}}});
      } else {
        CHECK(decoded.partitions.empty());
      }
    }
  }
  CHECK(logs.has_error({"member 'bad-count' sent an unreadable subscription", "negative length or count"}));
  CHECK(logs.has_error({"member 'bad-version' sent an unreadable subscription"}));
  CHECK(logs.has_error({"member 'bad-cut' sent an unreadable subscription"}));
}

// Issue 31, item 7: librdkafka 2.0.2's mock writes a ListOffsets v4/v5 partition's leader epoch as
// an int64. A two-partition answer then decodes "cleanly": the first partition right, the second
// from shifted bytes (partition -1, garbage offsets), 8 trailing bytes. The old code applied
// what it could read of such an answer; an answer about what was not asked is dropped whole,
// counted, and the request asked again.
TEST_CASE("a ListOffsets answer naming a partition not asked for is dropped whole, counted, and asked again",
          "[badinput]") {
  std::atomic<int> answers{0};
  auto versions = fake_broker::default_versions();
  for (auto& v : versions) {
    if (v.api_key == kgroup::protocol::list_offsets_request::api_key) v.max_version = 4;
  }
  fake_broker fb(
      [&](const request& r) -> std::optional<reply> {
        if (r.api_key != kgroup::protocol::list_offsets_request::api_key) return std::nullopt;
        kgroup::protocol::list_offsets_request req;
        if (!r.decode(req)) return std::nullopt;
        const int n = ++answers;
        bytes body;
        kgroup::protocol::writer w(body);
        w.write_int32(0);  // throttle
        w.write_int32(static_cast<std::int32_t>(req.topics.size()));
        for (const auto& t : req.topics) {
          w.write_string(t.name, false);
          w.write_int32(static_cast<std::int32_t>(t.partitions.size()));
          for (const auto& p : t.partitions) {
            w.write_int32(p.partition_index);
            w.write_int16(0);
            w.write_int64(-1);                                    // timestamp
            w.write_int64(n == 1 ? 900 + p.partition_index : 10 + p.partition_index);  // offset
            if (n == 1)
              w.write_int64(-1);  // the mock's int64 leader epoch
            else
              w.write_int32(-1);
          }
        }
        return reply{fake_broker::frame_with_header(r, body)};
      },
      {{"t", 2}}, versions);
  kgroup::Consumer c(test_config(fb.bootstrap()).retry_backoff(20ms));
  const auto offsets = c.beginning_offsets({{"t", 0}, {"t", 1}}, 10s);
  // Before: {t-0: 900 (read from the misaligned answer), t-1: 11}.
  CHECK(offsets == std::map<kgroup::TopicPartition, std::int64_t>{{{"t", 0}, 10}, {{"t", 1}, 11}});
  CHECK(answers.load() == 2);
  const auto m = c.metrics();
  CHECK(m.responses_mismatched_total == 1);
  c.close();
}
