// The Consumer's single-thread check, as Java's KafkaConsumer.acquire(): a public call enters and
// leaves when it returns. Calls nest on one thread (a listener inside poll() calling
// commit_sync()); a call from a second thread while one is inside throws
// client_errc::concurrent_access. The read-only calls do not enter (see Consumer::self()).
#pragma once

#include <atomic>
#include <thread>

#include "kgroup/error.hpp"

namespace kgroup::detail {

class single_thread_check {
 public:
  void enter() {
    const auto me = std::this_thread::get_id();
    if (inside_.load(std::memory_order_acquire) == me) {
      ++depth_;
      return;
    }
    std::thread::id none;
    if (!inside_.compare_exchange_strong(none, me, std::memory_order_acq_rel)) {
      throw Error(make_error_code(client_errc::concurrent_access),
                  "the Consumer is being called from another thread: it is not safe for concurrent use "
                  "(only wakeup() and the read-only assignment(), subscription(), group_metadata(), "
                  "group_state(), metrics() and http_endpoint() may be called from any thread)");
    }
    last_.store(me, std::memory_order_relaxed);
    depth_ = 1;
  }

  void leave() noexcept {
    if (--depth_ == 0) inside_.store(std::thread::id{}, std::memory_order_release);
  }

  /// Whether the caller may touch the user thread's state: it is inside a call, or it is the
  /// thread that made the last one and no other thread is inside.
  bool on_user_thread() const noexcept {
    const auto me = std::this_thread::get_id();
    const auto inside = inside_.load(std::memory_order_acquire);
    return inside == me || (inside == std::thread::id{} && last_.load(std::memory_order_relaxed) == me);
  }

 private:
  std::atomic<std::thread::id> inside_{};  // the thread inside a public call
  std::atomic<std::thread::id> last_{};    // the last thread that entered
  int depth_ = 0;                          // how deeply; the inside thread's only
};

}  // namespace kgroup::detail
