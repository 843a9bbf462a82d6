// net::frame_pool: response frame buffers reused across frames (issue 37), within bounds, and
// never zero-filled: only the pages a frame's bytes reach become resident.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "net/frame_pool.hpp"

using kgroup::net::frame_buffer;
using kgroup::net::frame_pool;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;

// Bytes of [p, p + n) resident in memory (mincore: per page).
std::size_t resident(const std::uint8_t* p, std::size_t n) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + n + page - 1) / page * page;
  std::vector<unsigned char> v((end - start) / page);
  REQUIRE(::mincore(reinterpret_cast<void*>(start), end - start, v.data()) == 0);
  std::size_t pages = 0;
  for (auto c : v) pages += c & 1;
  return pages * page;
}
}  // namespace

TEST_CASE("frame pool: a new buffer touches none of its memory until bytes arrive", "[net][frames]") {
  // The buffer used to be zero-filled as it grew (resize()): a third of the network thread's
  // samples while a member caught up, with the page faults it took. Now the socket's bytes are
  // the first writes to it.
  auto pool = std::make_shared<frame_pool>();
  auto f = pool->acquire(16 * MiB);
  REQUIRE(f->mapped());
  CHECK(f->capacity() >= 16 * MiB);
  CHECK(resident(f->data(), f->capacity()) == 0);
  // 1 MiB of the frame arrives: only the pages it reaches become resident (one 2 MiB huge page
  // where the kernel gives them).
  std::memset(f->data(), 0x5a, MiB);
  CHECK(resident(f->data(), f->capacity()) >= MiB);
  CHECK(resident(f->data(), f->capacity()) <= frame_buffer::huge_page);
  // Large buffers are 2 MiB aligned, so each 2 MiB of them can be one huge page.
  CHECK(reinterpret_cast<std::uintptr_t>(f->data()) % frame_buffer::huge_page == 0);
  // A tail under half of 2 MiB is in small pages: a frame of 2.5 MiB that arrived whole is
  // 2.5 MiB resident, not 4.
  auto g = pool->acquire(5 * MiB / 2);
  std::memset(g->data(), 0x5a, 5 * MiB / 2);
  CHECK(resident(g->data(), g->capacity()) >= 5 * MiB / 2);
  CHECK(resident(g->data(), g->capacity()) <= 5 * MiB / 2 + 4096);
  // A frame of 1.5 MiB is mapped too (one huge page where the kernel gives them): at most 2 MiB.
  auto h = pool->acquire(3 * MiB / 2);
  REQUIRE(h->mapped());
  std::memset(h->data(), 0x5a, 3 * MiB / 2);
  CHECK(resident(h->data(), h->capacity()) >= 3 * MiB / 2);
  CHECK(resident(h->data(), h->capacity()) <= 2 * MiB);
  // Under half a huge page, the heap: its freed memory comes back without new faults.
  CHECK(!pool->acquire(MiB / 2)->mapped());
}

TEST_CASE("frame pool: a large frame's buffer is reused by the next one, without a new allocation",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  const std::uint8_t* first_data = nullptr;
  {
    auto f = pool->acquire(3 * MiB);
    CHECK(f->capacity() >= 3 * MiB);     // the whole frame, reserved
    std::memset(f->data(), 0, 3 * MiB);  // the frame's bytes arrive
    f->data()[3 * MiB - 1] = 7;
    first_data = f->data();
    CHECK(pool->spares() == 0);
  }
  CHECK(pool->spares() == 1);
  CHECK(pool->spare_bytes() >= 3 * MiB);
  auto g = pool->acquire(2 * MiB);
  CHECK(g->data() == first_data);      // the same memory: the 2 MiB frame is read into its start
  CHECK(g->data()[3 * MiB - 1] == 7);  // and what it held is not zero-filled again
  CHECK(resident(g->data(), 3 * MiB) >= 3 * MiB - 4096);  // its pages stay resident: no new faults
  CHECK(pool->spares() == 0);
}

TEST_CASE("frame pool: past max_reserve a buffer grows by reallocation, keeping what was read",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  auto huge = pool->acquire(frame_pool::max_reserve * 2);
  CHECK(huge->capacity() >= frame_pool::max_reserve);
  CHECK(huge->capacity() < frame_pool::max_reserve * 2);
  CHECK(resident(huge->data(), huge->capacity()) == 0);
  huge->data()[0] = 1;
  huge->data()[frame_pool::max_reserve - 1] = 2;
  huge->grow(frame_pool::max_reserve * 2, frame_pool::max_reserve);  // connection.cpp, when it is full
  CHECK(huge->capacity() >= frame_pool::max_reserve * 2);
  CHECK(huge->data()[0] == 1);
  CHECK(huge->data()[frame_pool::max_reserve - 1] == 2);
  // Small buffers come from the heap, also unfilled, and grow the same way.
  frame_buffer small(100);
  CHECK(!small.mapped());
  CHECK(small.capacity() == 100);
  std::memset(small.data(), 3, 100);
  small.grow(300, 100);
  CHECK(small.capacity() == 300);
  CHECK(small.data()[99] == 3);
}

TEST_CASE("frame pool: small frames and small buffers stay out of it", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  {
    auto f = pool->acquire(100);
    CHECK(f->capacity() == 100);
  }
  CHECK(pool->spares() == 0);
  { auto f = pool->acquire(2 * MiB); }  // pooled
  CHECK(pool->spares() == 1);
  // A small frame does not take the spare.
  auto small = pool->acquire(200);
  CHECK(small->capacity() == 200);
  CHECK(pool->spares() == 1);
}

TEST_CASE("frame pool: at most max_spares wait; the largest are kept", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  std::vector<std::shared_ptr<frame_buffer>> held;
  for (std::size_t mb : {1, 2, 4, 6}) held.push_back(pool->acquire(mb * MiB));
  held.clear();
  CHECK(pool->spares() == frame_pool::max_spares);
  CHECK(pool->spare_bytes() >= 10 * MiB);  // 4 and 6 MiB kept
  CHECK(pool->spare_bytes() < 12 * MiB);
  // The smallest spare that holds a frame is taken: the 4 MiB one for 3 MiB.
  auto f = pool->acquire(3 * MiB);
  CHECK(f->capacity() >= 3 * MiB);
  CHECK(f->capacity() < 6 * MiB);
  // None holds 10 MiB: a new buffer; the 6 MiB spare stays for a later frame.
  auto g = pool->acquire(10 * MiB);
  CHECK(g->capacity() >= 10 * MiB);
  CHECK(pool->spares() == 1);
}

TEST_CASE("frame pool: a member that caught up gives its large buffers back", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  { auto f = pool->acquire(32 * MiB); }
  CHECK(pool->spares() == 1);
  // Frames far smaller than the spare (empty fetches, heartbeats): the spare is freed.
  { auto f = pool->acquire(500); }
  CHECK(pool->spares() == 0);
  CHECK(pool->spare_bytes() == 0);
  // One within the factor stays.
  { auto f = pool->acquire(8 * MiB); }
  { auto f = pool->acquire(2 * MiB); }
  CHECK(pool->spares() == 1);
}

TEST_CASE("frame pool: a buffer outliving its pool, or dropped on another thread, is freed or returned",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  auto f = pool->acquire(2 * MiB);
  std::thread([g = std::move(f)]() mutable { g.reset(); }).join();  // records dropped on the user thread
  CHECK(pool->spares() == 1);
  auto h = pool->acquire(2 * MiB);
  pool.reset();
  h.reset();  // no pool to return to: freed (ASan checks that nothing leaks or dangles)
}
