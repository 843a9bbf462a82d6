// What both simulations share (sim_world.cpp, the data path; sim_group.cpp, the group): the seeded
// source of every choice and the failure that ends a seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>

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

}  // namespace kgroup::sim
