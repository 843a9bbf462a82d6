#include "net/frame_pool.hpp"

#include <algorithm>
#include <utility>

namespace kgroup::net {

std::shared_ptr<protocol::bytes> frame_pool::acquire(std::size_t announced, std::size_t initial) {
  std::unique_ptr<protocol::bytes> buffer;
  std::vector<std::unique_ptr<protocol::bytes>> freed;  // released outside the lock
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
    if (announced >= min_pooled && !spares_.empty()) {
      // The smallest spare that holds the whole frame, or else the largest.
      auto best = spares_.end();
      for (auto it = spares_.begin(); it != spares_.end(); ++it) {
        const bool fits = (*it)->capacity() >= announced;
        if (best == spares_.end()) {
          best = it;
          continue;
        }
        const bool best_fits = (*best)->capacity() >= announced;
        if (fits ? !best_fits || (*it)->capacity() < (*best)->capacity()
                 : !best_fits && (*it)->capacity() > (*best)->capacity())
          best = it;
      }
      buffer = std::move(*best);
      spares_.erase(best);
    }
  }
  if (buffer && buffer->capacity() >= std::min(announced, max_reserve)) {
    // A spare that holds the frame keeps its size, the memory its frames touched (which may be
    // more than this frame: the frame is read into its beginning and carries its length), so
    // those bytes are not zero-filled again (a resize down and up again did: 13 % of the network
    // thread's samples); it grows within its capacity as bytes arrive; no allocation.
    if (buffer->size() < std::min(announced, initial)) buffer->resize(std::min(announced, initial));
  } else {
    // A new buffer, or a spare too small (its bytes are stale: nothing to copy), reserves what
    // the frame announced (address space only: no page is touched until bytes arrive) and is
    // sized `initial`; it grows within that reservation as the bytes arrive, so growing neither
    // reallocates nor copies what was read, and each page is faulted in once (growing by
    // reallocation touched every intermediate buffer and copied it: a third of the network
    // thread's CPU while a member caught up). Resident memory stays bounded by what arrived.
    if (buffer) {
      buffer->clear();
    } else {
      buffer = std::make_unique<protocol::bytes>();
    }
    buffer->reserve(std::min(announced, max_reserve));
    buffer->resize(std::min(announced, initial));
  }
  std::weak_ptr<frame_pool> self = weak_from_this();
  return {buffer.release(), [self = std::move(self)](protocol::bytes* b) { give_back(self, b); }};
}

void frame_pool::give_back(const std::weak_ptr<frame_pool>& pool, protocol::bytes* buffer) {
  std::unique_ptr<protocol::bytes> owned(buffer);
  auto p = pool.lock();
  if (!p || owned->capacity() < min_pooled) return;
  std::unique_ptr<protocol::bytes> freed;  // released outside the lock
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
