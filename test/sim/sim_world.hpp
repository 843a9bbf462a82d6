// One seed of the data-path simulation (sim.cpp says what is real and what is mirrored): a
// simulated cluster of 1-3 brokers and 1-3 partitions, a producer, faults from a seeded schedule,
// one consumer (the real data-path cores plus the sim's copy of the driver glue) and a seeded
// application, with the invariants checked after every step.
#pragma once

#include <cstdint>
#include <string>

namespace kgroup::sim {

struct run_result {
  bool ok = true;
  std::string invariant;  // the one that failed
  std::string message;
  std::string trace;  // the last events, one a line (only of a failed seed: printed only then)
  double simulated_seconds = 0;
};

/// A failed seed's result with its trace. A seed runs without its trace (the last events, which
/// only a failure prints) unless verbose; one that fails runs again keeping it, and `traced` is
/// that run's result: it is returned when it failed the same way (the same invariant at the same
/// simulated time), else `first`, saying so (the seed did not replay: a bug of the simulation).
inline run_result replay_traced(run_result first, run_result traced) {
  if (!traced.ok && traced.invariant == first.invariant &&
      traced.simulated_seconds == first.simulated_seconds)
    return traced;
  first.trace = "(none: the seed ran differently when run again to keep its trace)\n";
  return first;
}

/// Both auto-commit and sync commits in every seed (else one of them per seed).
extern bool mix_commits;
/// No broker crashes and restarts in the data world (else about 30 % of the seeds have them): the
/// seeds that have them run as before they existed (the regression seeds pinned in ctest).
extern bool no_restarts;

/// Every seed of the classic group simulation has static members (else a third of them do).
extern bool group_static;
/// Every group seed's applications unsubscribe() and subscribe() again now and then (else a third do).
extern bool group_unsubscribe;
/// Each group member runs the real data path (data_reader, fetch_positions, fetch_planner, the
/// Fetch codec) against simulated partition logs, instead of the model of it (--real-data).
extern bool group_real_data;

/// Runs seed `seed` to its end or its first failed invariant. Deterministic: the same seed (and
/// mutant) gives the same events in the same order.
run_result run_seed(std::uint64_t seed, bool verbose);

/// Runs seed `seed` of the group simulation (sim_group.cpp): several members of one group against
/// a simulated coordinator, of the classic protocol or (`consumer_protocol`) KIP-848's.
/// simulated_seconds counts member-seconds.
run_result run_group_seed(std::uint64_t seed, bool verbose, bool consumer_protocol = false);

}  // namespace kgroup::sim
