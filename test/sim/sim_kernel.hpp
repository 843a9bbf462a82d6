// What both simulations share (sim_world.cpp, the data path; sim_group.cpp, the group): the seeded
// source of every choice, the failure that ends a seed, and the simulated clock's event queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// One line of a seed's trace (the last events a failure prints): its time and text, formatted
// together only when printed.
struct trace_line {
  std::chrono::steady_clock::time_point at;
  std::string what;
};

// The events of a simulation in time order, ties in the order scheduled (so a seed replays the
// same run). The clock is the simulation's own: next() moves it to the event it returns, and an
// event scheduled in the past runs now. A binary heap of (time, sequence number, slot): the keys
// are unique, so the order is the one a sorted map of them gives; the events stay in their slots
// (reused), so the heap moves small keys only.
template <class Event>
class event_queue {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit event_queue(time_point& clock) : now_(clock) {}
  void at(time_point when, Event e) {
    std::uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(std::move(e));
    } else {
      slot = free_.back();
      free_.pop_back();
      slots_[slot] = std::move(e);
    }
    heap_.push_back(key{std::max(when, now_), seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  bool empty() const { return heap_.empty(); }
  Event next() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const key k = heap_.back();
    heap_.pop_back();
    now_ = k.when;
    free_.push_back(k.slot);
    return std::move(slots_[k.slot]);
  }

 private:
  struct key {
    time_point when;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  // The heap's top is the earliest (time, sequence number).
  static bool later(const key& a, const key& b) { return a.when != b.when ? a.when > b.when : a.seq > b.seq; }
  time_point& now_;
  std::uint64_t seq_ = 0;
  std::vector<key> heap_;
  std::vector<Event> slots_;
  std::vector<std::uint32_t> free_;
};

}  // namespace kgroup::sim
