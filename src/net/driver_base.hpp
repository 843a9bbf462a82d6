// What the membership drivers share (classic net/group_driver, KIP-848
// net/consumer_group_driver, share groups net/share_group_driver): the user calls every core
// takes alike (unsubscribe, close, the poll board, shutdown), the loop that drains a core's
// actions and arms its timer, FindCoordinator, the requests to the coordinator, the snapshot for
// the user thread, and the actions the cores emit alike (a listener call and its cancellation, an
// error, the end of a leave, a changed assignment). Each driver adds its own core's actions
// (requests, the assignor, topic names) and the calls whose meaning differs by protocol
// (subscribe).
//
// Two layers: driver_base is the common part; membership_driver_base adds what the Consumer
// facade asks of the classic and KIP-848 drivers (net/membership_driver.hpp: listener
// notifications, commit failures, enforce_rebalance(), standing()). What a commit failure or
// enforce_rebalance() means is each core's decision. The share driver has no listener and no
// commits, so it derives from driver_base alone.
//
// CRTP: `Derived` derives from driver_base<Derived, Core> (or membership_driver_base) and from
// std::enable_shared_from_this<Derived>, and gives the base (a friend) `apply(action&)`,
// `on_coordinator(node)`, `cluster_` and `opts_`. Everything runs on the io_context's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.hpp"
#include "group/types.hpp"
#include "kgroup/error.hpp"
#include "net/cluster.hpp"
#include "net/membership_driver.hpp"
#include "runtime/shared_state.hpp"

namespace kgroup::net {

/// The Consumer facade's hooks into the membership, the same for the classic and KIP-848
/// protocols (the share driver has its own: net/share_group_driver.hpp).
struct membership_hooks {
  /// Run listener callbacks here, on the background thread (rebalance.listener.thread=heartbeat).
  std::function<void(const detail::listener_call&)> run_listener_inline;
  /// The owned set changed (the data path starts or stops fetching).
  std::function<void(const std::set<TopicPartition>&)> on_assignment_changed;
};

template <class Derived, class Core>
class driver_base {
 public:
  using clock = std::chrono::steady_clock;

  void unsubscribe() {
    if (member_.state() == decltype(member_.state())::unsubscribed) {
      signal_left();  // nothing to leave; the waiting user thread is still told it is done
      return;
    }
    core().unsubscribe(clock::now());
    process();
  }
  void close() {
    core().close(clock::now());
    process();
  }
  /// poll() was called after it may have left the group (a poll timeout): the core hears of it
  /// now (a rejoin), not at its next event. The user thread wrote the call to the poll board.
  void poll_called() {
    sync_poll();
    process();
  }
  /// Stops (see stop()) and stops watching metadata.
  void shutdown() {
    stop();
    derived().cluster_->on_metadata(nullptr);
  }

 protected:
  using action = typename decltype(std::declval<Core&>().take_actions())::value_type;

  template <class... CoreArgs>
  driver_base(boost::asio::io_context& io, detail::shared_state& shared, membership_hooks hooks,
              CoreArgs&&... core_args)
      : shared_(shared), hooks_(std::move(hooks)), member_(std::forward<CoreArgs>(core_args)...), timer_(io) {}

  /// The core, told first what poll() did since it last heard (sync_poll()). Every event goes to
  /// the core through this; reads may use member_.
  Core& core() {
    sync_poll();
    return member_;
  }

  /// Gives the core the poll() calls and returns the user thread wrote to the poll board since
  /// the last look (issue 37: poll() no longer posts to this thread; the core's max.poll.interval.ms
  /// judgement must not see a stale clock, so this runs before every event reaches it). Only the
  /// latest call and return matter to its clock; a call also rejoins after a poll timeout.
  void sync_poll() {
    const auto version = shared_.poll_version.load(std::memory_order_acquire);
    if (version == poll_version_seen_) return;
    detail::poll_board board;
    {
      std::lock_guard lock(shared_.mutex);
      board = shared_.poll;
      poll_version_seen_ = shared_.poll_version.load(std::memory_order_relaxed);
    }
    if (board.calls != poll_seen_.calls) member_.poll_called(board.called);
    if (board.returns != poll_seen_.returns && !board.in_poll()) member_.poll_returned(board.returned);
    poll_seen_ = board;
  }

  /// Carries out the core's actions until it has none (applying one can feed it again, e.g. an
  /// inline listener), then publishes the snapshot and re-arms the timer.
  void process() {
    if (stopped_) return;
    for (int rounds = 0; rounds < 64; ++rounds) {
      auto actions = member_.take_actions();
      if (actions.empty()) break;
      for (auto& a : actions) derived().apply(a);
      if (stopped_) return;
    }
    publish_snapshot();
    arm_timer();
  }

  /// Carries out one action (the driver's apply(a) calls it): the ones both cores emit here,
  /// FindCoordinator with its answer to the driver's on_coordinator(node), the rest through
  /// `own(act)`. Completion handlers check stopped_ so nothing reaches the core after shutdown.
  template <class Own>
  void apply_with(action& a, Own&& own) {
    auto self = derived().shared_from_this();
    std::visit(
        [&](auto& act) {
          using T = std::decay_t<decltype(act)>;
          if (apply_shared(act)) return;
          if constexpr (std::is_same_v<T, group::find_coordinator>) {
            find_coordinator(*derived().cluster_, derived().opts_.request_timeout,
                             [](Derived& d, std::int32_t node) { d.on_coordinator(node); });
          } else {
            own(act);
          }
        },
        a);
  }

  /// Whether a request makes the answers to the ones sent before it stale.
  enum class supersede { none, earlier };

  /// Sends a membership request to the coordinator on the group connection; its answer goes to
  /// `deliver(core, response)`, a failure (or no coordinator) to the core's request_failed.
  /// Answers to requests sent before abandon_requests() (or, with supersede::earlier, before
  /// this one), or after stop, reach nobody.
  template <class Request, class Adjust, class Deliver>
  void send_to_coordinator(Request request, Adjust adjust, Deliver deliver, std::chrono::milliseconds timeout = {},
                           supersede s = supersede::none) {
    auto node = member_.coordinator();
    auto conn = node ? derived().cluster_->broker(*node, channel::group) : nullptr;
    if (!conn) {
      core().request_failed(clock::now(), make_error_code(client_errc::coordinator_not_found));
      return;
    }
    if (s == supersede::earlier) abandon_requests();
    conn->send_adjusted(
        std::move(request), std::move(adjust),
        [self = derived().shared_from_this(), epoch = request_epoch_, deliver = std::move(deliver)](
            std::error_code ec, const typename Request::response_type& r, const response_frame&) {
          if (self->stopped_ || epoch != self->request_epoch_) return;
          if (ec) {
            self->core().request_failed(clock::now(), ec);
          } else {
            deliver(self->core(), r);
          }
          self->process();
        },
        timeout);
  }
  /// Answers to the coordinator requests sent so far reach nobody.
  void abandon_requests() noexcept { ++request_epoch_; }

  /// What the user thread reads of the membership (under the shared mutex), in one shape for
  /// both cores.
  void publish_snapshot() {
    std::lock_guard lock(shared_.mutex);
    shared_.owned = member_.owned();
    shared_.topics = member_.subscription();
    shared_.member_id = member_.member_id();
    shared_.generation = member_.generation();
    shared_.state = to_string(member_.state());
    // What only the consumer cores have (commits' standing, an assignor, a leader).
    if constexpr (requires { member_.standing(); }) shared_.standing = member_.standing();
    auto& m = shared_.metrics;
    m.coordinator = member_.coordinator().value_or(-1);
    if constexpr (requires { member_.protocol_name(); }) m.assignor = member_.protocol_name();
    if constexpr (requires { member_.is_leader(); }) m.leader = member_.is_leader();
    if (m.group.version != member_.stats().version) m.group = member_.stats();
  }

  /// Nothing reaches the core afterwards: completion handlers and the timer check stopped_.
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }

  /// FindCoordinator for the group: a failure goes to the core, a node to `found(driver, node)`.
  template <class Found>
  void find_coordinator(cluster& c, std::chrono::milliseconds timeout, Found found) {
    c.find_coordinator(member_.options().group_id, timeout,
                       [self = derived().shared_from_this(), found](std::error_code ec, std::int32_t node) {
                         if (self->stopped_) return;
                         if (ec) {
                           self->core().coordinator_failed(clock::now(), ec);
                           self->process();
                           return;
                         }
                         found(*self, node);
                       });
  }

  /// Handles `act` if it is one of the actions both cores emit; false when it is the driver's own.
  template <class T>
  bool apply_shared(T& act) {
    if constexpr (std::is_same_v<T, group::run_listener>) {
      detail::listener_call call{act.kind, std::move(act.partitions), act.seq};
      call.stale_claim = act.stale_claim;
      // The callback sees the membership it is told about: assignment(), group_metadata() and
      // position() inside on_partitions_assigned already know the new generation or epoch.
      publish_snapshot();
      if (hooks_.run_listener_inline) {
        hooks_.run_listener_inline(call);
        core().listener_done(clock::now(), call.seq);
      } else {
        shared_.push(std::move(call));
      }
      return true;
    } else if constexpr (std::is_same_v<T, group::assignment_changed>) {
      // The snapshot is published after this batch (process()).
      if (hooks_.on_assignment_changed) hooks_.on_assignment_changed(act.owned);
      return true;
    } else if constexpr (std::is_same_v<T, group::report_error>) {
      if (act.fatal) {
        shared_.push(detail::fatal_error{act.code, act.message});
      } else {
        logger()->warn("group '{}': {}", member_.options().group_id, act.message);
      }
      return true;
    } else if constexpr (std::is_same_v<T, group::cancel_listener>) {
      std::lock_guard lock(shared_.mutex);
      if (shared_.started_listeners.count(act.seq)) {
        shared_.late_cancels.insert(act.seq);  // the user thread is running it already
      } else {
        shared_.cancelled_listeners.insert(act.seq);
      }
      return true;
    } else if constexpr (std::is_same_v<T, group::left_group>) {
      signal_left();
      return true;
    } else {
      return false;
    }
  }

  detail::shared_state& shared_;
  membership_hooks hooks_;
  Core member_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  // Bumped by abandon_requests(): answers to coordinator requests sent before it are ignored.
  std::uint64_t request_epoch_ = 0;
  // The poll board as the core last heard it (sync_poll()), and when to look again while the
  // application is inside poll() (its return is not posted: see arm_timer()).
  std::uint64_t poll_version_seen_ = 0;
  detail::poll_board poll_seen_;
  clock::time_point poll_recheck_{};

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }

  void arm_timer() {
    auto when = member_.next_deadline();
    // Inside poll() the core's poll clock does not run, and the return that starts it again is
    // not posted: look at the board again within 80% of max.poll.interval.ms of the call (a
    // longer poll() is looked at again as often), so a member that returns and then stops
    // polling is still warned and leaves on time.
    if (poll_seen_.in_poll()) {
      const auto now = clock::now();
      const auto every = member_.options().max_poll_interval * 8 / 10;
      if (poll_recheck_ <= now) poll_recheck_ = std::max(poll_seen_.called + every, now + every);
      if (!when || poll_recheck_ < *when) when = poll_recheck_;
    }
    if (!when) {
      timer_.cancel();
      return;
    }
    timer_.expires_at(*when);
    timer_.async_wait([self = derived().shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->stopped_) return;
      self->core().tick(clock::now());
      self->process();
    });
  }

  /// The user thread waits for left_count to move (unsubscribe(), close()).
  void signal_left() {
    {
      std::lock_guard lock(shared_.mutex);
      ++shared_.left_count;
    }
    shared_.push(detail::left_event{});
  }
};

/// driver_base with the Consumer facade's interface (net/membership_driver.hpp): the classic
/// and KIP-848 drivers derive from this.
template <class Derived, class Core>
class membership_driver_base : public driver_base<Derived, Core>, public membership_driver {
  using base = driver_base<Derived, Core>;

 public:
  using typename base::clock;

  void unsubscribe() override { base::unsubscribe(); }
  void close(group::close_membership op) override {
    this->core().close(std::chrono::steady_clock::now(), op);
    this->process();
  }
  void poll_called() override { base::poll_called(); }
  void shutdown() override { base::shutdown(); }
  void listener_done(std::uint64_t seq) override {
    this->core().listener_done(clock::now(), seq);
    this->process();
  }
  void commit_failed(std::int32_t generation, std::int16_t code) override {
    if (this->stopped_) return;
    this->core().commit_failed(clock::now(), generation, code);
    this->process();
  }
  void enforce_rebalance(std::string reason) override {
    this->core().enforce_rebalance(clock::now(), std::move(reason));
    this->process();
  }
  void listener_started(std::uint64_t seq) override {
    if (this->stopped_) return;
    this->core().listener_started(clock::now(), seq);
    this->process();  // the poll timer may run again (a callback inside poll())
  }
  group::standing standing() const override { return this->member_.standing(); }

 protected:
  using base::base;
};

}  // namespace kgroup::net
