// What both simulations share (sim_world.cpp, the data path; sim_group.cpp, the group): the seeded
// source of every choice, the failure that ends a seed, and the simulated clock's event queue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
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

// An event's call: a move-only void() callable that holds a closure of up to 56 bytes inline (most
// of the sims' events: no allocation of their own, where std::function holds 16 bytes), a larger
// one on the heap. Called at most once per event, but may be called more often.
class event_fn {
 public:
  event_fn() noexcept = default;
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, event_fn>, int> = 0>
  event_fn(F&& f) {  // implicit, as std::function's
    using T = std::decay_t<F>;
    if constexpr (fits<T>) {
      ::new (static_cast<void*>(buf_)) T(std::forward<F>(f));
      ops_ = &inline_ops<T>;
    } else {
      ::new (static_cast<void*>(buf_)) T*(new T(std::forward<F>(f)));
      ops_ = &heap_ops<T>;
    }
  }
  event_fn(event_fn&& o) noexcept : ops_(o.ops_) {
    if (ops_ != nullptr) ops_->move(o.buf_, buf_);
    o.ops_ = nullptr;
  }
  event_fn& operator=(event_fn&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_ != nullptr) ops_->move(o.buf_, buf_);
      o.ops_ = nullptr;
    }
    return *this;
  }
  event_fn(const event_fn&) = delete;
  event_fn& operator=(const event_fn&) = delete;
  ~event_fn() { reset(); }
  void operator()() { ops_->call(buf_); }
  explicit operator bool() const noexcept { return ops_ != nullptr; }

 private:
  static constexpr std::size_t capacity = 56;
  struct ops {
    void (*call)(void*);
    void (*move)(void* from, void* to) noexcept;  // into raw storage; `from` is left destroyed
    void (*destroy)(void*) noexcept;
  };
  template <class T>
  static constexpr bool fits =
      sizeof(T) <= capacity &&
      alignof(T) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<T>;
  template <class T>
  static constexpr ops inline_ops{[](void* p) { (*static_cast<T*>(p))(); },
                                  [](void* from, void* to) noexcept {
                                    ::new (to) T(std::move(*static_cast<T*>(from)));
                                    static_cast<T*>(from)->~T();
                                  },
                                  [](void* p) noexcept { static_cast<T*>(p)->~T(); }};
  template <class T>
  static constexpr ops heap_ops{[](void* p) { (**static_cast<T**>(p))(); },
                                [](void* from, void* to) noexcept { ::new (to) T*(*static_cast<T**>(from)); },
                                [](void* p) noexcept { delete *static_cast<T**>(p); }};
  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(buf_);
    ops_ = nullptr;
  }
  alignas(std::max_align_t) unsigned char buf_[capacity];
  const ops* ops_ = nullptr;
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
