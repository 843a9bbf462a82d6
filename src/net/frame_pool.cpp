#include "net/frame_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace kgroup::net {

frame_buffer::frame_buffer(std::size_t capacity) {
  allocate(capacity);
}

frame_buffer::~frame_buffer() {
  release();
}

void frame_buffer::allocate(std::size_t capacity) {
  if (capacity < mapped_from) {
    // Default-initialised: no zero-fill (the socket writes every byte that is read).
    data_ = new std::uint8_t[std::max<std::size_t>(capacity, 1)];
    capacity_ = capacity;
    mapped_ = 0;
    return;
  }
  // A mapping 2 MiB aligned: map one huge page more than needed and unmap the ends, so every
  // 2 MiB of the buffer can be one huge page. Anonymous memory reads as zeros and is not resident
  // until written.
  const std::size_t rounded = (capacity + huge_page - 1) / huge_page * huge_page;
  const std::size_t length = rounded + huge_page;
  void* p =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<std::uint8_t*>(p);
  const auto addr = reinterpret_cast<std::uintptr_t>(base);
  auto* aligned = reinterpret_cast<std::uint8_t*>((addr + huge_page - 1) / huge_page * huge_page);
  if (aligned != base) ::munmap(base, static_cast<std::size_t>(aligned - base));
  const std::size_t tail = static_cast<std::size_t>(base + length - (aligned + rounded));
  if (tail != 0) ::munmap(aligned + rounded, tail);
#ifdef MADV_HUGEPAGE
  // Huge pages for each 2 MiB of which the frame (its announced size) fills at least half: a frame
  // of 1-2 MiB is one fault instead of 256-512 (the frames of a member catching up are often that
  // size), and the resident memory a buffer holds beyond its frame's bytes stays under 1 MiB (the
  // rest of a tail under half of 2 MiB is in 4 KiB pages). Advice only: where THP is off (or the
  // call is refused), every page is a 4 KiB one.
  if (const std::size_t advised = (capacity + huge_page / 2) / huge_page * huge_page; advised != 0)
    (void)::madvise(aligned, advised, MADV_HUGEPAGE);
#endif
  data_ = aligned;
  capacity_ = rounded;
  mapped_ = rounded;
}

void frame_buffer::release() noexcept {
  if (mapped_ != 0) {
    ::munmap(data_, mapped_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = 0;
}

void frame_buffer::grow(std::size_t capacity, std::size_t keep) {
  frame_buffer bigger(capacity);
  std::memcpy(bigger.data_, data_, std::min({keep, capacity_, capacity}));
  std::swap(data_, bigger.data_);
  std::swap(capacity_, bigger.capacity_);
  std::swap(mapped_, bigger.mapped_);
}

std::shared_ptr<frame_buffer> frame_pool::acquire(std::size_t announced) {
  const std::size_t want = std::min(announced, max_reserve);
  std::unique_ptr<frame_buffer> buffer;
  std::vector<std::unique_ptr<frame_buffer>> freed;  // released outside the lock
  {
    std::lock_guard lock(mutex_);
    const std::size_t need = std::max(announced, min_pooled);
    for (auto it = spares_.begin(); it != spares_.end();) {
      if ((*it)->capacity() / oversize_factor > need) {
        freed.push_back(std::move(*it));
        it = spares_.erase(it);
      } else {
        ++it;
      }
    }
    if (announced >= min_pooled) {
      // The smallest spare that holds the frame (up to max_reserve); a spare too small stays
      // for a later frame (give_back keeps the largest max_spares).
      auto best = spares_.end();
      for (auto it = spares_.begin(); it != spares_.end(); ++it) {
        if ((*it)->capacity() >= want && (best == spares_.end() || (*it)->capacity() < (*best)->capacity()))
          best = it;
      }
      if (best != spares_.end()) {
        buffer = std::move(*best);
        spares_.erase(best);
      }
    }
  }
  // A new buffer reserves what the frame announced: no page of it is touched until bytes arrive.
  if (!buffer) buffer = std::make_unique<frame_buffer>(want);
  std::weak_ptr<frame_pool> self = weak_from_this();
  return {buffer.release(), [self = std::move(self)](frame_buffer* b) { give_back(self, b); }};
}

void frame_pool::give_back(const std::weak_ptr<frame_pool>& pool, frame_buffer* buffer) {
  std::unique_ptr<frame_buffer> owned(buffer);
  auto p = pool.lock();
  if (!p || owned->capacity() < min_pooled) return;
  std::unique_ptr<frame_buffer> freed;  // released outside the lock
  std::lock_guard lock(p->mutex_);
  p->spares_.push_back(std::move(owned));
  if (p->spares_.size() > max_spares) {
    auto smallest = std::min_element(p->spares_.begin(), p->spares_.end(), [](const auto& a, const auto& b) {
      return a->capacity() < b->capacity();
    });
    freed = std::move(*smallest);
    p->spares_.erase(smallest);
  }
}

std::size_t frame_pool::spares() const {
  std::lock_guard lock(mutex_);
  return spares_.size();
}

std::size_t frame_pool::spare_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& b : spares_) n += b->capacity();
  return n;
}

}  // namespace kgroup::net
