// When the client rebootstraps (net/metadata_recovery.hpp, KIP-899 and KIP-1102), with a fake
// clock: the phases, the three reasons (no known broker reachable, metadata missing past the
// trigger, a broker's REBOOTSTRAP_REQUIRED), what counts as reachable, strategy none, and a
// scripted life with a verdict checked at every step.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "net/metadata_recovery.hpp"

using namespace kgroup::net;
using namespace std::chrono_literals;
using st = kgroup::net::connection_state;
using reason = metadata_recovery::reason;
using phase = metadata_recovery::phase;
using broker_link = metadata_recovery::broker_link;

namespace {

metadata_recovery::options with(metadata_recovery::strategy s, std::chrono::milliseconds trigger = 300000ms) {
  return {s, trigger};
}
const auto rebootstrap = metadata_recovery::strategy::rebootstrap;
const auto none = metadata_recovery::strategy::none;

const std::vector<broker_link> all_up = {{st::ready, 0}, {st::idle, 0}};
const std::vector<broker_link> all_down = {{st::backoff, 1}, {st::idle, 3}};

// The core after the first answer named the brokers.
struct fixture {
  metadata_recovery::time_point now = metadata_recovery::time_point{} + 1000s;
  metadata_recovery core;
  explicit fixture(metadata_recovery::options o = with(rebootstrap)) : core(o) {
    core.refresh_started(now);
    REQUIRE(core.before_request(now, {}) == reason::none);
    core.brokers_learned();
  }
};

}  // namespace

TEST_CASE("metadata recovery: the bootstrap servers until an answer names the brokers",
          "[metadata_recovery]") {
  metadata_recovery core(with(rebootstrap, 1000ms));
  auto now = metadata_recovery::time_point{} + 1000s;
  CHECK(core.current() == phase::bootstrapping);
  CHECK(core.use_bootstrap_servers());
  core.refresh_started(now);
  CHECK(core.wanted_since() == now);
  // While bootstrapping, unreachable bootstrap servers are no reason: their backoff paces retries.
  CHECK(core.before_request(now + 10ms, all_down) == reason::none);
  core.refresh_started(now + 500ms);  // another refresh: the clock keeps its start
  CHECK(core.wanted_since() == now);
  core.brokers_learned();
  CHECK(core.current() == phase::on_metadata);
  CHECK_FALSE(core.use_bootstrap_servers());
  CHECK_FALSE(core.wanted_since().has_value());
  CHECK(core.before_request(now + 1h, all_up) == reason::none);
  CHECK(core.rebootstraps() == 0);
}

TEST_CASE("metadata recovery: every known broker unreachable", "[metadata_recovery]") {
  fixture f;
  SECTION("one reachable broker is enough") {
    for (const auto s : {st::idle, st::resolving, st::connecting, st::tls_handshaking, st::handshaking,
                         st::authenticating, st::ready}) {
      INFO(to_string(s));
      CHECK(f.core.before_request(f.now, std::vector<broker_link>{{st::backoff, 2}, {s, 0}}) == reason::none);
    }
    // Connecting again after failures: the attempt is in progress.
    CHECK(f.core.before_request(f.now, std::vector<broker_link>{{st::backoff, 2}, {st::connecting, 4}}) ==
          reason::none);
    CHECK(f.core.rebootstraps() == 0);
  }
  SECTION("what counts as unreachable") {
    CHECK_FALSE(metadata_recovery::reachable({st::backoff, 1}));
    CHECK_FALSE(metadata_recovery::reachable({st::idle, 1}));  // its backoff is over, its last try failed
    CHECK_FALSE(metadata_recovery::reachable({st::closed, 0}));
    CHECK_FALSE(metadata_recovery::reachable({st::failed, 0}));
    CHECK(metadata_recovery::reachable({st::idle, 0}));  // never tried, or closed for idleness
    CHECK(metadata_recovery::reachable({}));             // no connection yet
  }
  SECTION("none reachable: rebootstrap, once, and back to the bootstrap servers") {
    CHECK(f.core.before_request(f.now, all_down) == reason::brokers_unreachable);
    CHECK(f.core.rebootstraps() == 1);
    CHECK(f.core.use_bootstrap_servers());
    CHECK(f.core.wanted_since() == f.now);  // metadata is wanted until a bootstrap server answers
    // Bootstrapping now: the same view of the old brokers is no new reason.
    CHECK(f.core.before_request(f.now + 10ms, all_down) == reason::none);
    CHECK(f.core.rebootstraps() == 1);
    f.core.brokers_learned();
    CHECK(f.core.before_request(f.now + 20ms, all_up) == reason::none);
  }
  SECTION("no known broker at all") {
    CHECK(f.core.before_request(f.now, {}) == reason::brokers_unreachable);
  }
}

TEST_CASE("metadata recovery: metadata missing for longer than the trigger", "[metadata_recovery]") {
  fixture f(with(rebootstrap, 1000ms));
  const auto start = f.now + 5s;
  f.core.refresh_started(start);
  CHECK(f.core.before_request(start + 1000ms, all_up) == reason::none);  // Java's test: more than the trigger
  f.core.refresh_started(start + 900ms);                                 // a retry does not restart the clock
  CHECK(f.core.before_request(start + 1001ms, all_up) == reason::metadata_stale);
  CHECK(f.core.rebootstraps() == 1);
  CHECK(f.core.use_bootstrap_servers());
  // The clock starts again at the rebootstrap: the bootstrap servers get a trigger's time too.
  CHECK(f.core.wanted_since() == start + 1001ms);
  CHECK(f.core.before_request(start + 2001ms, all_down) == reason::none);
  CHECK(f.core.before_request(start + 2002ms, all_down) == reason::metadata_stale);
  CHECK(f.core.rebootstraps() == 2);
  SECTION("an answer stops the clock") {
    f.core.brokers_learned();
    CHECK_FALSE(f.core.wanted_since().has_value());
    CHECK(f.core.before_request(start + 1h, all_up) == reason::none);
  }
  SECTION("a trigger of 0: any wait at all") {
    fixture g(with(rebootstrap, 0ms));
    g.core.refresh_started(g.now);
    CHECK(g.core.before_request(g.now, all_up) == reason::none);
    CHECK(g.core.before_request(g.now + 1ms, all_up) == reason::metadata_stale);
  }
}

TEST_CASE("metadata recovery: a broker's REBOOTSTRAP_REQUIRED", "[metadata_recovery]") {
  fixture f;
  CHECK(f.core.rebootstrap_required(f.now) == reason::broker_required);
  CHECK(f.core.use_bootstrap_servers());
  CHECK(f.core.rebootstraps() == 1);
  // A bootstrap server may ask again: each time counts (the connection's backoff paces them).
  CHECK(f.core.rebootstrap_required(f.now + 1ms) == reason::broker_required);
  CHECK(f.core.rebootstraps() == 2);
}

TEST_CASE("metadata recovery: strategy none never rebootstraps", "[metadata_recovery]") {
  fixture f(with(none, 1000ms));
  f.core.refresh_started(f.now);
  CHECK(f.core.before_request(f.now + 1h, all_down) == reason::none);
  CHECK(f.core.before_request(f.now + 1h, {}) == reason::none);
  CHECK(f.core.rebootstrap_required(f.now + 1h) == reason::none);
  CHECK(f.core.rebootstraps() == 0);
  // It still leaves the bootstrap servers once the brokers are known (Java's none does too).
  CHECK_FALSE(f.core.use_bootstrap_servers());
}

TEST_CASE("metadata recovery: a scripted life, the verdict at every step", "[metadata_recovery]") {
  // The brokers are replaced while the client runs: known brokers fail one after the other, a
  // rebootstrap finds the new ones, then a broker asks for one, then metadata goes stale.
  metadata_recovery core(with(rebootstrap, 2000ms));
  auto t = metadata_recovery::time_point{} + 1000s;
  struct step {
    const char* what;
    std::vector<broker_link> known;
    reason expect;
    phase after;
  };
  core.refresh_started(t);
  const step first[] = {
      {"bootstrap", {}, reason::none, phase::bootstrapping},
  };
  for (const auto& s : first) {
    INFO(s.what);
    CHECK(core.before_request(t, s.known) == s.expect);
    CHECK(core.current() == s.after);
  }
  core.brokers_learned();
  const step life[] = {
      {"all well", {{st::ready, 0}, {st::ready, 0}, {st::idle, 0}}, reason::none, phase::on_metadata},
      {"one broker lost",
       {{st::backoff, 1}, {st::ready, 0}, {st::idle, 0}},
       reason::none,
       phase::on_metadata},
      {"two lost, the third never tried",
       {{st::idle, 2}, {st::backoff, 1}, {st::idle, 0}},
       reason::none,
       phase::on_metadata},
      {"the third tried and failed",
       {{st::idle, 2}, {st::backoff, 1}, {st::backoff, 1}},
       reason::brokers_unreachable,
       phase::bootstrapping},
      {"the old brokers, still failing",
       {{st::backoff, 3}, {st::backoff, 2}, {st::idle, 1}},
       reason::none,
       phase::bootstrapping},
  };
  for (const auto& s : life) {
    INFO(s.what);
    t += 100ms;
    CHECK(core.before_request(t, s.known) == s.expect);
    CHECK(core.current() == s.after);
  }
  CHECK(core.rebootstraps() == 1);
  core.brokers_learned();  // the new brokers
  t += 100ms;
  CHECK(core.before_request(t, all_up) == reason::none);
  CHECK(core.rebootstrap_required(t) == reason::broker_required);
  CHECK(core.rebootstraps() == 2);
  core.brokers_learned();
  core.refresh_started(t);
  CHECK(core.before_request(t + 1999ms, all_up) == reason::none);
  CHECK(core.before_request(t + 2001ms, all_up) == reason::metadata_stale);
  CHECK(core.rebootstraps() == 3);
  CHECK(std::string(to_string(reason::metadata_stale)).find("trigger.ms") != std::string::npos);
}
