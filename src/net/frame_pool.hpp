// Response frame buffers of one connection, reused (issue 37). A Fetch response of many
// megabytes used to get a fresh buffer, zero-filled by resize() and freed when its records were
// consumed: large buffers are mmap()ed and munmap()ed by the allocator, so every frame paid its
// size again in first-touch page faults and zeroing (the largest cost of consuming uncompressed
// records, above the records' own decoding). A frame's buffer now goes back to its connection's
// pool when the last reference to it (the records sliced from it) is dropped, on any thread, and
// the next large frame reads into it.
//
// Bounds: at most `max_spares` buffers wait in a pool, and a spare much larger than the frames now
// arriving is freed when such a frame is read, so a member that has caught up (small, empty
// fetches) gives its large buffers back. A buffer's size is the memory it touched: a new one's is
// at most what its frame announced; a reused one keeps its size, which may exceed the frame (the
// connection reads the frame into its beginning, and response_frame carries the frame's length),
// so its resident bytes are not zero-filled again for each frame. A new buffer reserves the
// announced size (up to `max_reserve`: address space, not memory), starts at `initial` bytes and
// grows within the reservation with the bytes that arrive (connection.cpp), so a peer announcing
// a huge frame and sending nothing still costs no resident memory.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "protocol/primitives.hpp"

namespace kgroup::net {

class frame_pool : public std::enable_shared_from_this<frame_pool> {
 public:
  frame_pool() { spares_.reserve(max_spares + 1); }  // give_back() must not allocate

  /// Frames below this size get a buffer of their own (the allocator serves them without mmap).
  static constexpr std::size_t min_pooled = std::size_t{256} << 10;
  static constexpr std::size_t max_spares = 2;
  /// A spare more than this many times larger than a frame that arrives is freed.
  static constexpr std::size_t oversize_factor = 8;
  /// A new buffer reserves (without touching) at most this much of what its frame announced;
  /// past it, it grows by reallocation.
  static constexpr std::size_t max_reserve = std::size_t{64} << 20;

  /// A buffer for a frame that announced `announced` bytes, sized min(announced, initial) or, when
  /// a spare that holds the frame is reused, at least that and as large as it already was. The
  /// buffer returns to this pool when the last copy of the pointer is dropped (or is freed, if the
  /// pool is gone by then).
  std::shared_ptr<protocol::bytes> acquire(std::size_t announced, std::size_t initial);

  /// Buffers waiting to be reused, and their capacities in all (for tests and metrics).
  std::size_t spares() const;
  std::size_t spare_bytes() const;

 private:
  static void give_back(const std::weak_ptr<frame_pool>& pool, protocol::bytes* buffer);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<protocol::bytes>> spares_;
};

}  // namespace kgroup::net
