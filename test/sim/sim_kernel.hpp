// What both simulations share (sim_world.cpp, the data path; sim_group.cpp, the group): the seeded
// source of every choice, the failure that ends a seed, and the simulated clock's event queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>

namespace kgroup::sim {

// A failed invariant: ends the seed.
struct violation {
  std::string invariant;
  std::string message;
};

// The seeded source of every choice. std::mt19937_64's output is fixed by the standard; the
// reductions below are ours (the standard distributions may differ between libraries).
struct prng {
  std::mt19937_64 gen;
  explicit prng(std::uint64_t seed) : gen(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::int64_t below(std::int64_t n) {
    return n <= 1 ? 0 : static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(n));
  }
  std::int64_t between(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }
  bool chance(double p) { return static_cast<double>(gen() >> 11) * 0x1.0p-53 < p; }
};

// The events of a simulation in time order, ties in the order scheduled (so a seed replays the
// same run). The clock is the simulation's own: next() moves it to the event it returns, and an
// event scheduled in the past runs now.
template <class Event>
class event_queue {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit event_queue(time_point& clock) : now_(clock) {}
  void at(time_point when, Event e) {
    events_.emplace(std::make_pair(std::max(when, now_), seq_++), std::move(e));
  }
  bool empty() const { return events_.empty(); }
  Event next() {
    auto it = events_.begin();
    now_ = it->first.first;
    Event e = std::move(it->second);
    events_.erase(it);
    return e;
  }

 private:
  time_point& now_;
  std::uint64_t seq_ = 0;
  std::map<std::pair<time_point, std::uint64_t>, Event> events_;
};

}  // namespace kgroup::sim
