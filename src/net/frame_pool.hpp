// Response frame buffers of one connection, reused (issue 37). A Fetch response of many
// megabytes used to get a fresh buffer, zero-filled by resize() and freed when its records were
// consumed: large buffers are mmap()ed and munmap()ed by the allocator, so every frame paid its
// size again in first-touch page faults and zeroing (the largest cost of consuming uncompressed
// records, above the records' own decoding). A frame's buffer now goes back to its connection's
// pool when the last reference to it (the records sliced from it) is dropped, on any thread, and
// the next large frame reads into it.
//
// The memory itself (frame_buffer): a buffer is never zero-filled; the socket writes the frame's
// bytes into it and nothing reads past them (response_frame carries the frame's length). A large
// buffer (from `mapped_from`, 1 MiB: half a huge page) is an anonymous mapping of its own, 2 MiB aligned,
// with transparent huge pages advised (madvise MADV_HUGEPAGE, which takes effect where the kernel's THP
// setting is `madvise` or `always`) over each 2 MiB of which its frame fills at least half: its
// pages are faulted in as the bytes arrive, one fault per 2 MiB instead of one per 4 KiB, and a
// tail under 1 MiB stays in 4 KiB pages (the resident memory beyond a frame's bytes stays under
// 1 MiB per buffer). On a virtual machine a 4 KiB fault costs 5-15 us; consuming uncompressed
// records, those faults and the zero-fill were most of the network thread's CPU while a member
// caught up (docs/DESIGN.md, "Cost per record").
//
// Bounds: at most `max_spares` buffers wait in a pool, and a spare much larger than the frames now
// arriving is freed when such a frame is read, so a member that has caught up (small, empty
// fetches) gives its large buffers back. A buffer reserves what its frame announced (at most
// `max_reserve`: address space, not memory); only the pages the frame's bytes reach become
// resident (with huge pages, rounded up to 2 MiB), so a peer announcing a huge frame and sending
// nothing costs no resident memory. A frame announced past `max_reserve` grows its buffer by
// reallocation as its bytes arrive (connection.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kgroup::net {

/// Memory for one response frame: `capacity()` bytes, uninitialised until written.
class frame_buffer {
 public:
  /// Capacities from this size get a mapping of their own, with huge pages advised (the frame
  /// fills at least half of its first 2 MiB). Smaller ones come from the heap, whose freed memory
  /// the allocator hands out again without new page faults.
  static constexpr std::size_t mapped_from = std::size_t{1} << 20;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;

  /// Throws std::bad_alloc when the memory cannot be had.
  explicit frame_buffer(std::size_t capacity);
  ~frame_buffer();
  frame_buffer(const frame_buffer&) = delete;
  frame_buffer& operator=(const frame_buffer&) = delete;

  std::uint8_t* data() noexcept { return data_; }
  const std::uint8_t* data() const noexcept { return data_; }
  std::size_t capacity() const noexcept { return capacity_; }
  /// Whether the memory is a mapping of its own (capacity() >= mapped_from).
  bool mapped() const noexcept { return mapped_ != 0; }

  /// Replaces the memory with `capacity` bytes (more than now), keeping the first `keep`.
  void grow(std::size_t capacity, std::size_t keep);

 private:
  void allocate(std::size_t capacity);
  void release() noexcept;

  std::uint8_t* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t mapped_ = 0;  // the mapping's length; 0: from the heap
};

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

  /// A buffer for a frame that announced `announced` bytes, holding min(announced, max_reserve)
  /// of them: the smallest spare that does, or a new one of that capacity. The buffer returns to
  /// this pool when the last copy of the pointer is dropped (or is freed, if the pool is gone by
  /// then).
  std::shared_ptr<frame_buffer> acquire(std::size_t announced);

  /// Buffers waiting to be reused, and their capacities in all (for tests and metrics).
  std::size_t spares() const;
  std::size_t spare_bytes() const;

 private:
  static void give_back(const std::weak_ptr<frame_pool>& pool, frame_buffer* buffer);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<frame_buffer>> spares_;
};

}  // namespace kgroup::net
