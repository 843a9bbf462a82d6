// Mutants for the deterministic simulation (test/sim, issue 33): known bugs that were fixed,
// re-introduced only in the simulator's own build of a few data-path sources, so that the
// simulator can show it catches them. The library is built without KGROUP_SIM_MUTANTS, and then
// neither this declaration nor any hook exists in it.
#pragma once

#ifdef KGROUP_SIM_MUTANTS
namespace kgroup::sim {
/// Whether the mutant `name` is switched on for this run (defined by the simulator).
bool mutant_enabled(const char* name) noexcept;
}  // namespace kgroup::sim
#endif
