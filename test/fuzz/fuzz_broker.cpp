// A hostile broker (issue 31): the input is the broker's side of one connection, and the target
// plays the client's side as kgroup's connection (src/net/connection.cpp), fetcher
// (src/fetch/fetcher.cpp) and poll() (src/consumer/consumer_poll.cpp) do, with kgroup's own code
// for every decision: ApiVersions (decode, retry on UNSUPPORTED_VERSION, version choice through
// net::api_version_table), SaslHandshake and SaslAuthenticate rounds through security::sasl_session
// (PLAIN, SCRAM-SHA-512, SCRAM-SHA-256, OAUTHBEARER), the session-lifetime clamp and a KIP-368
// re-authentication, then Fetch rounds: the request written by data::fetch_session at a version
// chosen from the broker's ranges, the answer decoded by the generated codec, checked by the fetch
// session, applied to data::fetch_positions as the fetcher does, and read on the "user thread"
// through data::position_table and data::record_cursor with small byte budgets. No Asio: frames
// come from the input instead of a socket; a fake clock stands in for the timers.
//
// Input: 4 configuration bytes, then what the broker writes: int32 size + frame (correlation id,
// header, body), at most `max_frames` of them. Byte 0: bits 0-1 the mechanism (PLAIN, SCRAM-SHA-512,
// OAUTHBEARER, SCRAM-SHA-256), bit 2 read_committed, bit 3 topic ids known (Fetch v13+ allowed),
// bit 4 re-authenticate after every Fetch when the broker set a session lifetime, bit 5 check.crcs
// off. Byte 1: the cursor's budgets (poll_bytes from 256 B to 8 MiB, max_batch_bytes from 64 KiB to
// 1 MiB). Byte 2: max.poll.records - 1. Byte 3: the committed offset every partition starts at,
// and the re-authentication fraction. test/fuzz/broker_seeds.cpp writes the seed corpus.
//
// Bounds per input: at most `max_frames` frames of at most `max_frame_bytes`; decompression
// at most max_batch_bytes (1 MiB) per batch; SCRAM at most 16384 PBKDF2 iterations (checked
// below); libFuzzer's -malloc_limit_mb, -rss_limit_mb and -timeout (.ci/fuzz) on top.
//
// Findings beyond memory errors and UB (each aborts):
//   - an exception escapes (kgroup's decoders and cores never throw on peer bytes);
//   - a SCRAM client that accepts a server-first asking for more (or fewer) iterations than its cap;
//   - a SASL session `done` after an error code, or an error text holding the password;
//   - a re-authentication delay outside [500 ms, ten years] or one that overflows the clock;
//   - a Fetch after a failed authentication (the conversation must end there);
//   - a Fetch answer naming a partition outside the session that is not rejected whole, or one
//     naming only session partitions that is rejected;
//   - a poll() holding more than record_cursor::options::poll_bytes (beyond its first record,
//     which may cost up to max_batch_bytes twice plus its fetched data), or making no progress;
//   - data read to its end (not corrupt, not cut) leaving the application's position elsewhere
//     than where the fetcher fetches next (the next data would never fit: a stalled partition);
//   - a request kgroup cannot encode.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/fetch_planner.hpp"
#include "data/fetch_positions.hpp"
#include "data/fetch_session.hpp"
#include "data/next_offset.hpp"
#include "data/positions.hpp"
#include "data/record_cursor.hpp"
#include "fuzz_common.hpp"
#include "kgroup/log.hpp"
#include "net/api_versions.hpp"
#include "protocol/answer_check.hpp"
#include "protocol/headers.hpp"
#include "protocol/messages.hpp"
#include "security/sasl.hpp"
#include "security/scram.hpp"

// base/log.cpp's built-in sink comes from the stderr sink (base/stderr_sink.cpp), which the fuzz
// build does not compile: every line is formatted and escaped (base/log.cpp) and then dropped,
// not written to stderr at every input.
namespace kgroup {
namespace {
class quiet_sink final : public LogSink {
 public:
  LogLevel min_level() const noexcept override { return LogLevel::trace; }
  void log(LogLevel, std::string_view message) override { bytes_ += message.size(); }

 private:
  std::size_t bytes_ = 0;
};
}  // namespace
std::shared_ptr<LogSink> make_stderr_log_sink(LogLevel, std::string_view) {
  return std::make_shared<quiet_sink>();
}
}  // namespace kgroup

using namespace kgroup;
using kgroup::fuzz::check;

namespace {

// KGROUP_FUZZ_BROKER_TRACE=1: how far each input gets (to check that the seeds go deep).
const bool tracing = std::getenv("KGROUP_FUZZ_BROKER_TRACE") != nullptr;
template <class... A>
void trace(const char* format, A... a) {
  if (tracing) std::fprintf(stderr, format, a...);
}

constexpr int max_frames = 16;
constexpr std::size_t max_frame_bytes = 1 << 20;  // the connection's max_response_size here
const std::string password = "fuzz-pass-word";
const std::string scram_nonce = "fuzzclientnonce";  // fixed, so seeds can hold a valid exchange
using fake_clock = std::chrono::steady_clock;

struct config {
  std::string mechanism;
  bool read_committed = false;
  bool topic_ids = false;
  bool reauth = false;
  data::record_cursor::options cursor;
  std::size_t max_poll_records = 1;
  std::int64_t committed = 0;
  double reauth_fraction = 0.9;
};

config read_config(const std::uint8_t* b) {
  static const char* const mechanisms[] = {"PLAIN", "SCRAM-SHA-512", "OAUTHBEARER", "SCRAM-SHA-256"};
  config c;
  c.mechanism = mechanisms[b[0] & 3];
  c.read_committed = (b[0] & 4) != 0;
  c.topic_ids = (b[0] & 8) != 0;
  c.reauth = (b[0] & 16) != 0;
  c.cursor.read_committed = c.read_committed;
  c.cursor.verify_crc = (b[0] & 32) == 0;
  c.cursor.poll_bytes = std::size_t{256} << (b[1] & 15);
  c.cursor.max_batch_bytes = std::size_t{64 * 1024} << ((b[1] >> 4) % 5);
  c.max_poll_records = std::size_t{b[2]} + 1;
  c.committed = b[3] % 64;
  c.reauth_fraction = 0.85 + (b[3] % 11) / 100.0;
  return c;
}

// One received frame (net::response_frame without the net layer).
struct frame_view {
  std::shared_ptr<const protocol::bytes> frame;
  std::size_t body_offset = 0;
  std::span<const std::uint8_t> body() const { return std::span(*frame).subspan(body_offset); }
};

// The broker's byte stream, cut into frames as connection::start_read/read_body do.
class broker_stream {
 public:
  explicit broker_stream(std::span<const std::uint8_t> in) : in_(in) {}
  // nullptr: the connection ends (closed, a bad size, a frame cut short, or the frame cap).
  std::shared_ptr<protocol::bytes> next() {
    if (frames_++ >= max_frames || in_.size() < 4) return nullptr;
    const std::uint32_t size = (std::uint32_t{in_[0]} << 24) | (std::uint32_t{in_[1]} << 16) |
                               (std::uint32_t{in_[2]} << 8) | std::uint32_t{in_[3]};
    in_ = in_.subspan(4);
    if (size < 4 || size > max_frame_bytes || size > in_.size()) return nullptr;
    auto f = std::make_shared<protocol::bytes>(in_.begin(), in_.begin() + size);
    in_ = in_.subspan(size);
    return f;
  }

 private:
  std::span<const std::uint8_t> in_;
  int frames_ = 0;
};

// The records a poll() returned, read byte by byte after the cursor moved on (they view fetched
// frames and decompressed buffers that `owners` must keep alive).
std::size_t touch(const data::poll_batch& b) {
  std::size_t sum = 0;
  auto add = [&](std::string_view s) {
    for (char ch : s) sum += static_cast<unsigned char>(ch);
  };
  for (const auto& r : b.records) {
    add(r.topic);
    if (r.key) add(*r.key);
    if (r.value) add(*r.value);
    for (const auto& h : r.headers) {
      add(h.key);
      if (h.value) add(*h.value);
    }
  }
  return sum;
}

// The first "i=" attribute of a SCRAM server-first message, as a number (-1: none or not a number).
long long scram_iterations(const protocol::bytes& msg) {
  std::string_view s(reinterpret_cast<const char*>(msg.data()), msg.size());
  while (true) {
    const auto comma = s.find(',');
    const auto part = s.substr(0, comma);
    if (part.size() > 2 && part[0] == 'i' && part[1] == '=') {
      long long v = 0;
      for (char ch : part.substr(2)) {
        if (ch < '0' || ch > '9' || v > (1LL << 40)) return -1;
        v = v * 10 + (ch - '0');
      }
      return v;
    }
    if (comma == std::string_view::npos) return -1;
    s.remove_prefix(comma + 1);
  }
}

class client {
 public:
  client(const config& c, std::span<const std::uint8_t> broker) : cfg_(c), broker_(broker) {
    // Three partitions on broker 1, the leader; broker 2 exists too (a KIP-392 replica).
    for (int i = 0; i < 3; ++i) {
      const TopicPartition tp{i < 2 ? "t0" : "t1", i < 2 ? i : 0};
      owned_.insert(tp);
      protocol::uuid id{};
      if (cfg_.topic_ids) id.bytes[15] = static_cast<std::uint8_t>(i < 2 ? 1 : 2);
      topic_ids_[tp.topic] = id;
    }
  }

  void run() {
    if (!api_versions()) return;
    if (!authenticate(false)) return;
    start_positions();
    while (fetch_round()) {
      drain();
      if (reauth_due_ && !authenticate(true)) return;
    }
    drain();
    check(positions_.invalid_transitions() == 0, "fetch position table refused a transition:",
          positions_.last_refusal().c_str());
  }

 private:
  // ---- the connection (send_raw, on_frame, send_now) ----------------------------------------

  // Writes the request as send_raw does and takes the broker's next frame as on_frame does:
  // correlation id, then the response header. nullopt: the connection failed.
  template <class Request>
  std::optional<frame_view> exchange(const Request& req, std::int16_t version, bool flexible_response) {
    const std::int32_t corr = next_correlation_id_;
    next_correlation_id_ = next_correlation_id_ == INT32_MAX ? 1 : next_correlation_id_ + 1;
    protocol::bytes out;
    check(!protocol::encode_request(req, version, corr, std::optional<std::string>("kgroup"), out),
          "kgroup cannot encode its own request", Request::name);
    auto f = broker_.next();
    if (!f) return std::nullopt;
    std::int32_t got = 0;
    if (!protocol::peek_correlation_id(*f, got) || got != corr) return std::nullopt;
    protocol::reader r(*f);
    protocol::response_header h;
    protocol::decode_response_header(r, h, protocol::response_header_version(Request::api_key, flexible_response));
    if (!r.ok()) return std::nullopt;
    const std::size_t body_offset = f->size() - r.remaining();
    return frame_view{std::move(f), body_offset};
  }

  // send_now: the version both sides support (at most `max_version`), the answer decoded at it
  // and checked against the request (protocol/answer_check.hpp). nullopt: no common version, an
  // undecodable answer (the connection fails) or an answer about what was not asked.
  template <class Request>
  std::optional<typename Request::response_type> send_now(const Request& req, std::int16_t max_version,
                                                          frame_view* keep = nullptr,
                                                          std::int16_t* used_version = nullptr) {
    using response = typename Request::response_type;
    std::int16_t version = 0;
    if (versions_.pick<Request>(version)) return std::nullopt;
    if (max_version >= Request::lowest_version && version > max_version) version = max_version;
    if (used_version) *used_version = version;
    const bool flexible = response::first_flexible_version >= 0 && version >= response::first_flexible_version;
    auto f = exchange(req, version, flexible);
    if (!f) return std::nullopt;
    response resp;
    std::size_t trailing = 0;
    if (protocol::decode(f->body(), version, resp, &trailing)) return std::nullopt;
    if (!protocol::unasked(req, resp).empty()) return std::nullopt;
    if (keep) *keep = std::move(*f);
    return resp;
  }

  // start_handshake: ApiVersions at the highest version, a retry on UNSUPPORTED_VERSION with the
  // broker's range read in the v0 layout or the requested one, else v0.
  bool api_versions() {
    std::int16_t version = protocol::api_versions_request::highest_version;
    for (;;) {
      protocol::api_versions_request req;
      req.client_software_name = "kgroup";
      req.client_software_version = "0.1.0";
      auto f = exchange(req, version, /*flexible_response=*/false);
      if (!f) return false;
      protocol::reader peek(f->body());
      const std::int16_t err = peek.read_int16();
      if (!peek.ok()) return false;
      if (err == 35) {
        if (version == 0) return false;
        std::int16_t retry = 0;
        for (const std::int16_t layout : {std::int16_t{0}, version}) {
          protocol::api_versions_response advertised;
          std::size_t trailing = 0;
          if (protocol::decode(f->body(), layout, advertised, &trailing)) continue;
          const auto k = std::find_if(advertised.api_keys.begin(), advertised.api_keys.end(), [](const auto& e) {
            return e.api_key == protocol::api_versions_request::api_key;
          });
          if (k != advertised.api_keys.end() && k->max_version >= 0 && k->max_version < version) {
            retry = k->max_version;
            break;
          }
        }
        version = retry;  // lower every time: the retries end at v0
        continue;
      }
      protocol::api_versions_response resp;
      std::size_t trailing = 0;
      if (protocol::decode(f->body(), version, resp, &trailing)) return false;
      if (resp.error_code != 0) return false;
      versions_.assign(resp);
      trace("ApiVersions v%d: %zu APIs\n", version, resp.api_keys.size());
      return true;
    }
  }

  // start_sasl, sasl_handshake, sasl_authenticate, sasl_done. False: the connection failed or
  // ended for good (fatal), and nothing more is sent.
  bool authenticate(bool reauth) {
    reauth_due_ = false;
    std::int16_t v = 0;
    if (versions_.pick<protocol::sasl_authenticate_request>(v) ||
        versions_.pick<protocol::sasl_handshake_request>(v) || v < 1) {
      return fail_auth();
    }
    security::sasl_credentials creds;
    creds.mechanism = cfg_.mechanism;
    creds.username = "user";
    creds.password = password;
    creds.scram_nonce = scram_nonce;
    creds.token.value = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyIn0.";
    creds.token.principal = "user";
    auto sasl = std::make_unique<security::sasl_session>(creds);
    std::string error;
    const auto hs = send_now(sasl->handshake(), /*max_version=*/1);
    if (!hs) return fail_auth();
    if (!sasl->on_handshake(*hs, error)) {
      check(error.find(password) == std::string::npos, "password in a SaslHandshake error");
      return fail_auth();
    }
    for (int round = 1;; ++round) {
      protocol::sasl_authenticate_request req;
      req.auth_bytes = sasl->next();
      const auto r = send_now(req, -1);
      if (!r) return fail_auth();
      const auto st = sasl->on_authenticate(*r, error);
      if (st == security::sasl_session::status::failed) {
        check(error.find(password) == std::string::npos, "password in a SaslAuthenticate error");
        return fail_auth();
      }
      check(r->error_code == 0, "SASL goes on after an error code");
      if (round == 1 && st == security::sasl_session::status::more && cfg_.mechanism.starts_with("SCRAM")) {
        // The client derived its key from this server-first: the count must be within the cap.
        const long long i = scram_iterations(r->auth_bytes);
        check(i >= security::scram_client::min_iterations && i <= security::scram_client::max_iterations,
              "SCRAM accepted an iteration count outside its bounds");
      }
      if (st == security::sasl_session::status::done) break;
    }
    // sasl_done: KIP-368's re-authentication at a fraction of the session the broker granted.
    const std::int64_t lifetime = sasl->session_lifetime_ms();
    sasl.reset();
    if (lifetime > 0) {
      const auto delay = security::reauthentication_delay(lifetime, cfg_.reauth_fraction);
      check(delay >= std::chrono::milliseconds(500), "re-authentication sooner than 500 ms");
      check(delay <= std::chrono::hours(24 * 366 * 10), "re-authentication later than ten years");
      check(fake_clock::time_point::max() - now_ > delay, "re-authentication time overflows the clock");
      reauth_due_ = cfg_.reauth;
    }
    authenticated_ = true;
    trace("SASL %s %sauthenticated, session %lld ms\n", cfg_.mechanism.c_str(), reauth ? "re-" : "",
          static_cast<long long>(lifetime));
    return true;
  }

  bool fail_auth() {
    failed_ = true;  // connection::fatal (or fail): nothing more on this connection
    return false;
  }

  // ---- the fetcher (send_fetches, on_fetch_response) ----------------------------------------

  void start_positions() {
    (void)positions_.assign(owned_);
    positions_.for_each([&](const TopicPartition& tp, data::fetch_part& p) {
      positions_.committed_requested(tp, p);
      positions_.committed(tp, p, cfg_.committed, -1);
      table_.own(tp);
      (void)table_.position_found(tp, cfg_.committed, -1, false);
    });
  }

  // What the fetcher gets from ListOffsets and OffsetForLeaderEpoch (other connections, not
  // modelled): a reset lands at offset 0, a validation finds nothing to validate with.
  void settle_positions() {
    positions_.for_each([&](const TopicPartition& tp, data::fetch_part& p) {
      if (p.state() == data::fetch_state::needs_reset) {
        const bool forced = p.reset_forced();
        (void)positions_.reset_requested(tp, p);
        positions_.reset_answered(tp, p, 0, -1);
        (void)table_.position_found(tp, 0, -1, forced);
      } else if (p.state() == data::fetch_state::needs_validation) {
        positions_.validation_requested(tp, p);
        positions_.validation_skipped(tp, p, -1);
      }
    });
  }

  // One Fetch to broker 1 and its answer; false when the conversation is over.
  bool fetch_round() {
    check(!failed_ && (authenticated_ || cfg_.mechanism.empty()), "a Fetch after a failed authentication");
    now_ += std::chrono::seconds(1);  // backoffs (retry.backoff.ms) pass between rounds
    settle_positions();
    data::fetch_set wanted;
    bool all_ids = true;
    for (const auto& [tp, cp] : positions_.parts()) {
      if (data::fetch_positions::fetchable(cp, now_) != data::fetch_check::fetch) continue;
      data::fetch_part& p = *positions_.find(tp);
      if (positions_.leader_epoch_seen(tp, p, -1)) continue;
      const bool known = p.preferred_replica() == 2;
      if (data::fetch_positions::fetch_node(p, 1, known, now_) != 1) continue;  // another connection
      data::partition_fetch pf;
      pf.topic_id = topic_ids_[tp.topic];
      pf.fetch_offset = p.fetch_pos();
      pf.max_bytes = 1048576;
      wanted.emplace(tp, pf);
      all_ids = all_ids && !pf.topic_id.is_zero();
    }
    if (wanted.empty()) return false;
    protocol::fetch_request req;
    req.replica_id = -1;
    req.max_wait_ms = 500;
    req.min_bytes = 1;
    req.max_bytes = 52428800;
    req.isolation_level = cfg_.read_committed ? 1 : 0;
    for (const auto& [tp, pf] : wanted) positions_.fetch_sent(*positions_.find(tp));
    // send_adjusted with the fetcher's adjust: the session writes the partition lists.
    std::int16_t version = 0;
    if (versions_.pick<protocol::fetch_request>(version)) return false;
    const std::int16_t max_version = all_ids ? -1 : 12;
    if (max_version >= protocol::fetch_request::lowest_version && version > max_version) version = max_version;
    session_.fill(req, version, wanted);
    const data::fetch_set held = session_.partitions();
    const bool flexible = version >= protocol::fetch_response::first_flexible_version;
    auto f = exchange(req, version, flexible);
    std::optional<protocol::fetch_response> resp;
    if (f) {
      resp.emplace();
      std::size_t trailing = 0;
      if (protocol::decode(f->body(), version, *resp, &trailing)) resp.reset();
    }
    for (const auto& [tp, pf] : wanted) positions_.fetch_ended(tp);
    if (!resp) {
      session_.on_request_failed();
      return false;  // the connection failed
    }
    trace("Fetch v%d: %zu partitions asked, %zu topics answered\n", version, wanted.size(), resp->responses.size());
    on_fetch_response(*resp, *f, wanted, held);
    return true;
  }

  // Whether `r` names a partition outside `held`, the session's partitions (by name, or by topic
  // id through them).
  static bool names_outside(const protocol::fetch_response& r, const data::fetch_set& held) {
    for (const auto& t : r.responses) {
      std::optional<std::string> name;
      if (!t.topic.empty() || t.topic_id.is_zero()) {
        name = t.topic;
      } else {
        for (const auto& [tp, pf] : held)
          if (pf.topic_id == t.topic_id) name = tp.topic;
      }
      for (const auto& p : t.partitions)
        if (!name || !held.count(TopicPartition{*name, p.partition_index})) return true;
    }
    return false;
  }

  void on_fetch_response(const protocol::fetch_response& r, const frame_view& frame,
                         const data::fetch_set& sent, const data::fetch_set& held) {
    const bool outside = names_outside(r, held);
    const auto result = session_.on_response(r);
    if (result.error_code != 0) {
      check(result.partitions.empty(), "a Fetch answer with a top-level error hands on partitions");
      return;
    }
    check((result.unknown_partitions > 0) == outside,
          outside ? "a Fetch answer naming a partition outside the session is accepted"
                  : "a Fetch answer naming only session partitions is rejected");
    if (result.unknown_partitions > 0) {
      check(result.partitions.empty(), "a Fetch answer naming a partition outside the session is not dropped whole");
      return;
    }
    for (const auto& [tp, pdp] : result.partitions) {
      check(held.count(tp) == 1, "the fetch session hands on a partition it does not hold");
      const auto& pd = *pdp;
      data::fetch_part* pp = positions_.find(tp);
      auto s = sent.find(tp);
      if (!pp || s == sent.end()) continue;
      data::fetch_part& p = *pp;
      if (!data::fetch_positions::answer_applies(p, s->second.fetch_offset)) continue;
      const auto replica = positions_.replica_answer(p, 1, pd.error_code, pd.preferred_read_replica,
                                                     pd.preferred_read_replica == 2, now_);
      using rv = data::replica_outcome::verdict;
      if (replica.what == rv::replica_failed) continue;
      if (pd.error_code != 0) {
        if (pd.error_code == 1 /* OFFSET_OUT_OF_RANGE */ && pd.high_watermark >= 0 &&
            pd.high_watermark < p.fetch_pos()) {
          (void)positions_.log_ended(tp, p, pd.high_watermark);
          // push_cut: the queued data and the cursor stop at the cut; the user thread decides.
          for (auto& d : fetched_)
            if (d.tp == tp && (d.limit < 0 || pd.high_watermark < d.limit)) d.limit = pd.high_watermark;
          if (cursor_.partition() && *cursor_.partition() == tp) cur_limit_ = pd.high_watermark;
          cursor_.cut(tp, pd.high_watermark, -1);
          (void)table_.cut(tp, pd.high_watermark, -1, true);
        } else if (pd.error_code == 1) {
          (void)positions_.offset_out_of_range(tp, p);
        } else if (pd.error_code == 74 || pd.error_code == 76) {  // FENCED / UNKNOWN_LEADER_EPOCH
          (void)positions_.leader_changed(tp, p);
        }
        continue;
      }
      if (!pd.records || pd.records->data.empty()) continue;
      std::int32_t last_epoch = p.epoch();
      const std::int64_t from = p.fetch_pos();
      const std::int64_t next = data::next_fetch_offset(pd.records->data, from, &last_epoch);
      if (!positions_.fetched(p, next, last_epoch)) continue;
      fetched_.push_back(data::to_fetched({tp, from, &pd}, frame.frame, 1));
      fetched_next_.push_back(next);
    }
  }

  // ---- the user thread (Consumer::impl::drain, next_cursor, finish_cursor, corrupt_data) -----

  void drain() {
    for (int polls = 0; polls < 4096; ++polls) {
      data::poll_batch batch;
      bool progressed = false;
      while (batch.records.size() < cfg_.max_poll_records) {
        if (!cursor_.open() && !next_cursor()) break;
        progressed = true;
        const auto tp = *cursor_.partition();
        const auto stop = cursor_.read(batch, cfg_.max_poll_records, table_);
        check_budget(batch);
        if (stop == data::record_cursor::stop::full) {
          // Full by count or budget: this poll returns something (else poll() would spin).
          check(!batch.records.empty(), "record_cursor is full without returning a record");
          break;
        }
        if (stop == data::record_cursor::stop::corrupt) {
          trace("corrupt %s: %s\n", cursor_.error_what(), cursor_.error().message().c_str());
          const auto pos = table_.position(tp).value_or(detail::epoch_offset{});
          (void)positions_.refetch(tp, pos.offset, pos.epoch);
        } else if (stop == data::record_cursor::stop::exhausted && cur_limit_ < 0 && cur_next_ >= 0 &&
                   positions_.find(tp) != nullptr && positions_.find(tp)->fetch_pos() == cur_next_) {
          const auto pos = table_.position(tp);
          if (!pos || pos->offset != cur_next_) {
            char detail[160];
            std::snprintf(detail, sizeof detail, "(%s-%d: position %lld, next fetch at %lld)", tp.topic.c_str(),
                          tp.partition, pos ? static_cast<long long>(pos->offset) : -1LL,
                          static_cast<long long>(cur_next_));
            kgroup::fuzz::finding("data read to its end leaves the position where the fetcher does not fetch next",
                                  detail);
          }
        }
        (void)cursor_.finish();
      }
      // The application reads the previous poll's records after this one (they must stay valid).
      if (!batch.records.empty()) trace("poll: %zu records, %zu bytes held\n", batch.records.size(), batch.held);
      sink_ += touch(last_);
      last_ = std::move(batch);
      if (!progressed && !cursor_.open()) break;
    }
    sink_ += touch(last_);
    last_ = {};
  }

  bool next_cursor() {
    while (!fetched_.empty()) {
      detail::fetched_data d = std::move(fetched_.front());
      const std::int64_t next = fetched_next_.front();
      fetched_.pop_front();
      fetched_next_.pop_front();
      if (table_.fit(d) != data::fetched_fit::usable) continue;
      table_.note_fetched(d, cfg_.read_committed);
      cur_limit_ = d.limit;
      cur_next_ = next;
      cursor_.start(std::make_shared<detail::fetched_data>(std::move(d)));
      return true;
    }
    return false;
  }

  void check_budget(const data::poll_batch& b) {
    const auto& o = cfg_.cursor;
    if (b.records.size() >= 2) {
      check(b.held <= o.poll_bytes, "a poll holds more than poll_bytes");
    } else {
      check(b.held <= o.poll_bytes + sizeof(ConsumerRecord) + 2 * o.max_batch_bytes + max_frame_bytes,
            "a poll's first record costs more than its bound");
    }
  }

  const config& cfg_;
  broker_stream broker_;
  std::int32_t next_correlation_id_ = 1;
  net::api_version_table versions_;
  bool authenticated_ = false;
  bool failed_ = false;
  bool reauth_due_ = false;
  fake_clock::time_point now_{std::chrono::hours(1)};
  std::set<TopicPartition> owned_;
  std::map<std::string, protocol::uuid> topic_ids_;
  data::fetch_positions positions_{data::reset_policy::earliest};
  data::fetch_session session_{1};
  std::deque<detail::fetched_data> fetched_;
  std::deque<std::int64_t> fetched_next_;
  data::position_table table_;
  data::record_cursor cursor_{cfg_.cursor};
  std::int64_t cur_limit_ = -1;
  std::int64_t cur_next_ = -1;
  data::poll_batch last_;
  std::size_t sink_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const config cfg = read_config(data);
  try {
    client c(cfg, std::span<const std::uint8_t>(data + 4, size - 4));
    c.run();
  } catch (const std::exception& e) {
    kgroup::fuzz::finding("an exception escaped:", e.what());
  } catch (...) {
    kgroup::fuzz::finding("an exception escaped");
  }
  return 0;
}
