// What crosses between the user's thread and the background thread of one Consumer.
//
// Background -> user: `events` (listener calls to run, fatal errors, "left the group"), and the
// snapshot fields. User -> background: asio::post() onto the io_context (never through here).
// Every field below is guarded by `mutex`; the background thread is the only writer of the
// snapshot fields and the only producer of events; the user thread is the only consumer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "group/member.hpp"
#include "kgroup/types.hpp"

namespace kgroup::detail {

struct listener_call {
  group::listener_kind kind;
  std::vector<topic_partition> partitions;
  std::uint64_t seq = 0;
};
struct fatal_error {
  std::error_code code;
  std::string message;
};
struct left_event {};

using user_event = std::variant<listener_call, fatal_error, left_event>;

struct shared_state {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<user_event> events;
  // Snapshot, written by the background thread after each batch of core events.
  std::set<topic_partition> owned;
  std::vector<std::string> topics;
  std::string member_id;
  std::int32_t generation = -1;
  std::string state = "unsubscribed";
  std::optional<fatal_error> fatal;  // sticky: every poll() after a fatal error throws it
  std::uint64_t left_count = 0;      // bumped on every left_group action
  bool woken = false;                // wakeup() was called and not yet consumed by poll()

  void push(user_event e) {
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(e));
    }
    cv.notify_all();
  }
};

}  // namespace kgroup::detail
