// The one retry schedule (src/base/backoff.hpp; issue 17): exponential, capped, optional jitter.
#include <catch2/catch.hpp>

#include <random>

#include "base/backoff.hpp"
#include "base/lazy_rng.hpp"

using kgroup::base::backoff;
using ms = std::chrono::milliseconds;

TEST_CASE("backoff: doubles from the initial delay up to the cap, and starts over after reset", "[backoff]") {
  backoff b(ms(100), ms(1000));
  CHECK(b.attempts() == 0);
  CHECK(b.next() == ms(100));
  CHECK(b.next() == ms(200));
  CHECK(b.next() == ms(400));
  CHECK(b.next() == ms(800));
  CHECK(b.next() == ms(1000));
  CHECK(b.next() == ms(1000));
  CHECK(b.attempts() == 6);
  b.reset();
  CHECK(b.attempts() == 0);
  CHECK(b.next() == ms(100));
}

TEST_CASE("backoff: delay(n) is the schedule without state or jitter", "[backoff]") {
  const backoff b(ms(50), ms(1000), 0.2);
  CHECK(b.delay(1) == ms(50));
  CHECK(b.delay(2) == ms(100));
  CHECK(b.delay(5) == ms(800));
  CHECK(b.delay(6) == ms(1000));
  CHECK(b.delay(1000) == ms(1000));  // no overflow for a long outage
  CHECK(b.delay(0) == ms(50));
}

TEST_CASE("backoff: jitter stays within its bounds around the schedule", "[backoff]") {
  backoff b(ms(1000), ms(8000), 0.2, 42);
  for (int i = 1; i <= 200; ++i) {
    const auto d = b.next();
    const auto base = b.delay(i);
    INFO("attempt " << i << ": " << d.count() << " ms around " << base.count() << " ms");
    CHECK(d.count() >= base.count() * 8 / 10);
    CHECK(d.count() <= base.count() * 12 / 10);
  }
  // Two schedules with different seeds do not move in lockstep.
  backoff x(ms(1000), ms(8000), 0.2, 1), y(ms(1000), ms(8000), 0.2, 2);
  int same = 0;
  for (int i = 0; i < 20; ++i) same += x.next() == y.next() ? 1 : 0;
  CHECK(same < 20);
}

TEST_CASE("backoff: a cap below the initial delay and a negative delay are sane", "[backoff]") {
  backoff b(ms(500), ms(100));
  CHECK(b.next() == ms(500));  // the cap is raised to the initial delay
  CHECK(b.next() == ms(500));
  backoff z(ms(-5), ms(0));
  CHECK(z.next() == ms(0));
  CHECK(z.next() == ms(0));
}

TEST_CASE(
    "backoff: the jitter's generator is made at the first jittered delay, and draws std::mt19937's numbers",
    "[backoff]") {
  // Issue 37: the 5,000 bytes of a std::mt19937 per schedule only once a jittered delay is drawn.
  CHECK(sizeof(backoff) < 100);
  backoff plain(ms(100), ms(1000));
  plain.next();
  CHECK_FALSE(plain.drew());  // no jitter: never drawn
  backoff a(ms(1000), ms(8000), 0.2, 7);
  CHECK_FALSE(a.drew());
  CHECK(a.delay(3) == ms(4000));
  CHECK_FALSE(a.drew());
  // The same delays as the eager std::mt19937 with the same seed gave.
  std::mt19937 eager(7);
  for (int i = 1; i <= 20; ++i) {
    const auto d = a.next();
    CHECK(a.drew());
    std::uniform_real_distribution<double> factor(1.0 - 0.2, 1.0 + 0.2);  // as backoff::next() makes it
    CHECK(d == ms(static_cast<std::int64_t>(static_cast<double>(a.delay(i).count()) * factor(eager))));
  }
}

TEST_CASE(
    "lazy_mt19937: a copy continues the same sequence; a copy made before the first draw starts it afresh",
    "[backoff]") {
  kgroup::base::lazy_mt19937 g(99);
  const kgroup::base::lazy_mt19937 unstarted = g;
  std::mt19937 ref(99);
  for (int i = 0; i < 5; ++i) CHECK(g() == ref());
  kgroup::base::lazy_mt19937 copy = g;
  kgroup::base::lazy_mt19937 assigned(1);
  assigned = g;
  for (int i = 0; i < 5; ++i) {
    const auto want = ref();
    CHECK(g() == want);
    CHECK(copy() == want);
    CHECK(assigned() == want);
  }
  CHECK_FALSE(unstarted.started());
  kgroup::base::lazy_mt19937 fresh = unstarted;
  CHECK(fresh() == std::mt19937(99)());
}
