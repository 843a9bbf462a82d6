// poll_stats: the user thread's poll() figures (time between polls, idle ratio, records and bytes)
// as published into ConsumerMetrics' shared state, on a fake clock.
#include <memory>

#include <catch2/catch.hpp>

#include "consumer/poll_stats.hpp"

using kgroup::detail::poll_stats;
using std::chrono::milliseconds;

TEST_CASE("poll stats: time between polls, idle ratio, records and bytes", "[poll_stats]") {
  poll_stats s;
  kgroup::detail::metrics_state m;
  const auto t0 = poll_stats::clock::time_point{} + std::chrono::hours(1);
  CHECK(s.publish_due(t0));

  s.poll_started(t0);
  s.data_opened(100);
  s.poll_ended(t0, t0 + milliseconds(10), 5);
  s.poll_started(t0 + milliseconds(100));
  // 50 ms of the 150 since the previous poll() began were spent waiting inside this one.
  s.poll_ended(t0 + milliseconds(100), t0 + milliseconds(150), 0);
  s.publish(m, t0 + milliseconds(150));

  CHECK(m.records_total == 5);
  CHECK(m.bytes_total == 100);
  CHECK(m.between_poll_avg_ms == Approx(100));
  CHECK(m.between_poll_max_ms == Approx(100));
  CHECK(m.idle_ratio_avg == Approx(50.0 / 150.0));
  CHECK(m.records_rate > 0);
  CHECK(m.bytes_rate > 0);

  // At most every 100 ms.
  CHECK_FALSE(s.publish_due(t0 + milliseconds(249)));
  CHECK(s.publish_due(t0 + milliseconds(250)));

  // Bytes count once, when the poll() that opened them ends.
  s.poll_started(t0 + milliseconds(300));
  s.poll_ended(t0 + milliseconds(300), t0 + milliseconds(310), 0);
  s.publish(m, t0 + milliseconds(310));
  CHECK(m.bytes_total == 100);
}

namespace {
// What the callback below sees, kept outside it (static): read and written inside the callback
// after it removed itself, without touching its own captures.
bool statistics_capture_destroyed = false;
int statistics_calls = 0;
bool statistics_alive_after_removal = false;
poll_stats* statistics_owner = nullptr;
struct capture_guard {
  ~capture_guard() { statistics_capture_destroyed = true; }
};
}  // namespace

TEST_CASE("poll stats: a statistics callback may remove itself while it runs", "[poll_stats]") {
  // Found at review (session 32): the callback ran as the stored std::function, so removing it
  // from inside destroyed the function (and its captures) while it was still running.
  poll_stats s;
  const auto t0 = poll_stats::clock::time_point{} + std::chrono::hours(1);
  statistics_capture_destroyed = false;
  statistics_calls = 0;
  statistics_alive_after_removal = false;
  statistics_owner = &s;
  auto guard = std::make_shared<capture_guard>();
  s.set_statistics_callback(
      [guard](const kgroup::ConsumerMetrics&) {
        ++statistics_calls;
        // One report is enough.
        statistics_owner->set_statistics_callback(nullptr, milliseconds(0), poll_stats::clock::time_point{});
        statistics_alive_after_removal = !statistics_capture_destroyed;
      },
      milliseconds(10), t0);
  guard.reset();  // the callback's capture is the guard's only owner now
  s.report_statistics(t0 + milliseconds(20), [] { return kgroup::ConsumerMetrics{}; });
  CHECK(statistics_calls == 1);
  CHECK(statistics_alive_after_removal);
  CHECK(statistics_capture_destroyed);  // gone once the call returned
  s.report_statistics(t0 + milliseconds(40), [] { return kgroup::ConsumerMetrics{}; });
  CHECK(statistics_calls == 1);
}
