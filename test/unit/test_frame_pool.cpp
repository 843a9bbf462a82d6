// net::frame_pool: response frame buffers reused across frames (issue 37), within bounds.
#include <catch2/catch.hpp>

#include <thread>

#include "net/frame_pool.hpp"

using kgroup::net::frame_pool;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;
}

TEST_CASE("frame pool: a large frame's buffer is reused by the next one, without a new allocation",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  const std::uint8_t* first_data = nullptr;
  {
    auto f = pool->acquire(3 * MiB, MiB);
    CHECK(f->size() == MiB);  // a new buffer starts at `initial` and grows with what arrives
    f->resize(3 * MiB);
    f->back() = 7;
    first_data = f->data();
    CHECK(pool->spares() == 0);
  }
  CHECK(pool->spares() == 1);
  CHECK(pool->spare_bytes() >= 3 * MiB);
  auto g = pool->acquire(2 * MiB, MiB);
  CHECK(g->data() == first_data);  // the same memory
  CHECK(g->size() == 3 * MiB);     // its size kept (what it touched): the 2 MiB frame is read into its start
  CHECK(g->back() == 7);           // and what it held is not zero-filled again
  CHECK(pool->spares() == 0);
  // A new buffer never has more than its frame announced.
  CHECK(pool->acquire(MiB + 5, MiB)->size() == MiB);
  CHECK(std::make_shared<frame_pool>()->acquire(MiB / 2 + 5, MiB)->size() == MiB / 2 + 5);
}

TEST_CASE("frame pool: a new buffer grows within a reservation of what its frame announced, without a copy",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  auto f = pool->acquire(3 * MiB, MiB);
  CHECK(f->size() == MiB);          // resident: what `initial` says, grown as bytes arrive
  CHECK(f->capacity() >= 3 * MiB);  // reserved: the whole frame
  CHECK(f->capacity() < 3 * MiB + MiB);
  const std::uint8_t* data = f->data();
  (*f)[MiB - 1] = 42;
  f->resize(2 * MiB);  // connection.cpp grows it by doubling, up to the frame's size
  f->resize(3 * MiB);
  CHECK(f->data() == data);  // never reallocated, so nothing read so far was copied
  CHECK((*f)[MiB - 1] == 42);
  // The reservation has a bound: past it the buffer grows by reallocation, as before.
  auto huge = pool->acquire(frame_pool::max_reserve * 2, MiB);
  CHECK(huge->size() == MiB);
  CHECK(huge->capacity() >= frame_pool::max_reserve);
  CHECK(huge->capacity() < frame_pool::max_reserve * 2);
}

TEST_CASE("frame pool: a reused buffer starts at the size the frame before left it, not at its capacity",
          "[net][frames]") {
  // A peer that announced a large frame and sent little left a large reservation behind, mostly
  // untouched: the next frame must not touch it all at once either.
  auto pool = std::make_shared<frame_pool>();
  { auto f = pool->acquire(16 * MiB, MiB); }  // announced 16 MiB, 1 MiB arrived (the frame failed)
  CHECK(pool->spares() == 1);
  auto g = pool->acquire(16 * MiB, MiB);
  CHECK(g->capacity() >= 16 * MiB);
  CHECK(g->size() == MiB);
}

TEST_CASE("frame pool: small frames and small buffers stay out of it", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  {
    auto f = pool->acquire(100, MiB);
    CHECK(f->size() == 100);
  }
  CHECK(pool->spares() == 0);
  { auto f = pool->acquire(2 * MiB, MiB); }  // a buffer of 1 MiB (2 reserved): pooled
  CHECK(pool->spares() == 1);
  // A small frame does not take the spare.
  auto small = pool->acquire(200, MiB);
  CHECK(small->size() == 200);
  CHECK(pool->spares() == 1);
}

TEST_CASE("frame pool: at most max_spares wait; the largest are kept", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  std::vector<std::shared_ptr<kgroup::protocol::bytes>> held;
  for (std::size_t mb : {1, 2, 3, 4}) {
    held.push_back(pool->acquire(mb * MiB, mb * MiB));
    CHECK(held.back()->size() == mb * MiB);
  }
  held.clear();
  CHECK(pool->spares() == frame_pool::max_spares);
  CHECK(pool->spare_bytes() >= 7 * MiB);  // 3 and 4 MiB kept
  CHECK(pool->spare_bytes() < 9 * MiB);
  // The smallest spare that holds a frame is taken: the 3 MiB one for 2.5 MiB.
  auto f = pool->acquire(5 * MiB / 2, MiB);
  CHECK(f->capacity() < 4 * MiB);
  CHECK(f->size() == 3 * MiB);  // as large as it was
  // None holds 10 MiB: the largest is taken, its stale bytes dropped rather than copied, and it
  // reserves the whole frame, sized `initial` until bytes arrive.
  auto g = pool->acquire(10 * MiB, MiB);
  CHECK(g->capacity() >= 10 * MiB);
  CHECK(g->size() == MiB);
  CHECK(pool->spares() == 0);
}

TEST_CASE("frame pool: a member that caught up gives its large buffers back", "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  { auto f = pool->acquire(32 * MiB, 32 * MiB); }
  CHECK(pool->spares() == 1);
  // Frames far smaller than the spare (empty fetches, heartbeats): the spare is freed.
  { auto f = pool->acquire(500, MiB); }
  CHECK(pool->spares() == 0);
  CHECK(pool->spare_bytes() == 0);
  // One within the factor stays.
  { auto f = pool->acquire(8 * MiB, 8 * MiB); }
  { auto f = pool->acquire(2 * MiB, MiB); }
  CHECK(pool->spares() == 1);
}

TEST_CASE("frame pool: a buffer outliving its pool, or dropped on another thread, is freed or returned",
          "[net][frames]") {
  auto pool = std::make_shared<frame_pool>();
  auto f = pool->acquire(2 * MiB, 2 * MiB);
  std::thread([g = std::move(f)]() mutable { g.reset(); }).join();  // records dropped on the user thread
  CHECK(pool->spares() == 1);
  auto h = pool->acquire(2 * MiB, 2 * MiB);
  pool.reset();
  h.reset();  // no pool to return to: freed (ASan checks that nothing leaks or dangles)
}
