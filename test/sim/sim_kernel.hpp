// What both simulations share (sim_world.cpp, the data path; sim_group.cpp, the group): the seeded
// source of every choice, the failure that ends a seed, and the simulated clock's event queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
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
// event scheduled in the past runs now. A binary heap of (time, sequence number, slot) keys: the
// (time, sequence number) pairs are unique, so the order is the one a sorted map of them gives; the
// events stay in their slots (reused), so the heap moves small keys only. A key is one unsigned
// 128-bit number, compared at once: the time's ticks (sign bit flipped, so unsigned order is the
// signed one) above, then the sequence number (40 bits) and the slot (24 bits), which the order
// never reaches as sequence numbers are unique.
template <class Event>
class event_queue {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit event_queue(time_point& clock) : now_(clock) {}
  void at(time_point when, Event e) {
    std::uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<std::uint32_t>(slots_.size());
      if (slot >= (1u << slot_bits)) throw std::length_error("event_queue: too many events pending");
      slots_.push_back(std::move(e));
    } else {
      slot = free_.back();
      free_.pop_back();
      slots_[slot] = std::move(e);
    }
    if (seq_ >> (64 - slot_bits) != 0) throw std::length_error("event_queue: too many events");
    const auto ticks = static_cast<std::uint64_t>(std::max(when, now_).time_since_epoch().count()) ^ sign_bit;
    heap_.push_back(static_cast<key>(ticks) << 64 | (seq_++ << slot_bits | slot));
    std::push_heap(heap_.begin(), heap_.end(), std::greater<key>{});
  }
  bool empty() const { return heap_.empty(); }
  Event next() {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<key>{});
    const key k = heap_.back();
    heap_.pop_back();
    now_ = time_point(
        time_point::duration(static_cast<time_point::rep>(static_cast<std::uint64_t>(k >> 64) ^ sign_bit)));
    const auto slot = static_cast<std::uint32_t>(k & ((1u << slot_bits) - 1));
    free_.push_back(slot);
    return std::move(slots_[slot]);
  }

 private:
  using key = __uint128_t;
  static constexpr int slot_bits = 24;
  static constexpr std::uint64_t sign_bit = std::uint64_t{1} << 63;
  static_assert(sizeof(time_point::rep) == 8);
  time_point& now_;
  std::uint64_t seq_ = 0;
  std::vector<key> heap_;
  std::vector<Event> slots_;
  std::vector<std::uint32_t> free_;
};

}  // namespace kgroup::sim
