#include "alloc_meter.hpp"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace kgroup::test::alloc_meter {
namespace {

std::atomic<std::size_t> live_bytes{0};
std::atomic<std::size_t> peak_bytes{0};

void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const std::size_t now = live_bytes.fetch_add(malloc_usable_size(p), std::memory_order_relaxed) + malloc_usable_size(p);
  std::size_t seen = peak_bytes.load(std::memory_order_relaxed);
  while (now > seen && !peak_bytes.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  return p;
}

void release(void* p) noexcept {
  if (!p) return;
  live_bytes.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}

void* aligned(std::size_t size, std::align_val_t align) {
  const auto a = static_cast<std::size_t>(align);
  const std::size_t rounded = (size + a - 1) / a * a;
  return counted(std::aligned_alloc(a, rounded == 0 ? a : rounded));
}

}  // namespace

std::size_t live() { return live_bytes.load(std::memory_order_relaxed); }
std::size_t peak() { return peak_bytes.load(std::memory_order_relaxed); }
void reset_peak() { peak_bytes.store(live(), std::memory_order_relaxed); }

}  // namespace kgroup::test::alloc_meter

namespace meter = kgroup::test::alloc_meter;

void* operator new(std::size_t size) { return meter::counted(std::malloc(size == 0 ? 1 : size)); }
void* operator new[](std::size_t size) { return meter::counted(std::malloc(size == 0 ? 1 : size)); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new[](size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t a) { return meter::aligned(size, a); }
void* operator new[](std::size_t size, std::align_val_t a) { return meter::aligned(size, a); }
void operator delete(void* p) noexcept { meter::release(p); }
void operator delete[](void* p) noexcept { meter::release(p); }
void operator delete(void* p, std::size_t) noexcept { meter::release(p); }
void operator delete[](void* p, std::size_t) noexcept { meter::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { meter::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { meter::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { meter::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { meter::release(p); }
