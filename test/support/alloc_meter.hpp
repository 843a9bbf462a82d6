// Counts the bytes the process holds through operator new, for tests that bound the memory a peer
// can make kgroup allocate (issue 31). Linking alloc_meter.cpp replaces the global operator
// new/delete of the test binary with ones that count (malloc underneath, so sanitizers still see
// every allocation). The count covers every thread: the background thread's buffers too.
#pragma once

#include <cstddef>

namespace kgroup::test::alloc_meter {

/// Bytes held now through operator new.
std::size_t live();
/// The most bytes held at once since the last reset_peak().
std::size_t peak();
/// Starts a new peak measurement from the bytes held now.
void reset_peak();

}  // namespace kgroup::test::alloc_meter
