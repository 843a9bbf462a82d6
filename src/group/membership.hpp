// What every membership core shares (the classic core, member.hpp; the KIP-848 core,
// consumer_member.hpp; a share-group core next): the actions they have in common and the
// skeleton each core derives from. The skeleton owns the state and its transition table check,
// the actions queue, the one listener call outstanding with the user thread, the poll clock
// (max.poll.interval.ms), the coordinator lookup, the retry backoff, the statistics and the policy
// for error codes no reaction handles. A core keeps only its protocol: its states and table, its
// requests, its answers and its predicates (when it is a member, what it owns).
//
// Pure like the cores: no I/O, no threads, no clock reads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "base/backoff.hpp"
#include "base/log.hpp"
#include "group/listener_handshake.hpp"
#include "group/poll_clock.hpp"
#include "group/types.hpp"
#include "kgroup/error.hpp"
#include "kgroup/types.hpp"

namespace kgroup::group {

// ---- the actions every core emits ------------------------------------------------------------

/// Look the group's coordinator up (FindCoordinator); answer with coordinator_found/_failed.
struct find_coordinator {};
/// Run the user's listener on the user's thread (or wherever the facade runs it), then call
/// listener_done(seq).
struct run_listener {
  listener_kind kind;
  std::vector<TopicPartition> partitions;
  std::uint64_t seq = 0;
  /// Revoked only: the member's claim on these partitions was older than the generation before
  /// the one that revokes them (it missed a generation), so the assignor may have given them to a
  /// member with a newer claim already. The library commits nothing of theirs on its own.
  bool stale_claim = false;
};
/// The set of partitions this member owns changed (for the fetcher and assignment()).
struct assignment_changed {
  partition_set owned;
};
/// Something the user should hear about: fatal errors are raised from poll(); others are logged.
struct report_error {
  std::error_code code;
  std::string message;
  bool fatal = false;
};
/// Leave/close work finished: the facade may stop the thread.
struct left_group {};
/// A run_listener not yet acknowledged is void: skip it if it has not started (a revoke whose
/// partitions were lost meanwhile; the lost listener that follows covers them).
struct cancel_listener {
  std::uint64_t seq = 0;
};

/// A Kafka error code as the wire carries it.
constexpr std::int16_t code_of(kafka_errc e) noexcept { return static_cast<std::int16_t>(e); }

// ---- transition tables --------------------------------------------------------------------------

/// A core's transition table: for each state, a bit set of the states it may move to. `State` is
/// an enum whose last value is `closed` and which has `fatal`; at most 32 states.
template <class State>
struct transition_table {
  static constexpr std::size_t count = static_cast<std::size_t>(State::closed) + 1;
  static_assert(count <= 32);
  using rows = std::array<std::uint32_t, count>;

  static constexpr std::uint32_t bit(State s) { return 1u << static_cast<unsigned>(s); }
  template <class... S>
  static constexpr std::uint32_t any_of(S... s) {
    return (bit(s) | ...);
  }
  static constexpr std::size_t at(State s) { return static_cast<std::size_t>(s); }
  /// The rules every core shares, added to `t`: staying is always allowed; every state may close,
  /// and every state but closed may become fatal.
  static constexpr rows with_common_rules(rows t) {
    for (std::size_t from = 0; from < count; ++from) {
      t[from] |= (1u << from) | bit(State::closed);
      if (static_cast<State>(from) != State::closed) t[from] |= bit(State::fatal);
    }
    return t;
  }
  static constexpr bool allowed(const rows& t, State from, State to) noexcept {
    return at(from) < count && at(to) < count && (t[at(from)] & bit(to)) != 0;
  }
};

/// The bit set of `states` (one row of a transition table, or part of one).
template <class State, class... More>
constexpr std::uint32_t states_of(State s, More... more) {
  return transition_table<State>::any_of(s, more...);
}

// ---- the skeleton -------------------------------------------------------------------------------

/// The shared part of a membership core. `Derived` (CRTP) provides, to the skeleton only (make
/// it a friend):
///   const std::string& group_id() const;      for log lines and messages
///   std::string who() const;                  the member as log lines name it
///   void requests_dropped();                  forget the request in flight (the core stopped)
///   void set_owned(Parts);                    what the member owns, with assignment_changed
///   void disown(const Parts&);                no longer owns these
///   partition_set named(const Parts&) const;  the partitions as the application sees them
///   bool poll_interval_applies() const;       whether the member is one max.poll.interval.ms binds
///   void after_listener(time_point, Then);    the core's next step once a listener call is done
///   void pump(time_point);
///   void fatal(time_point, std::error_code, std::string);
/// and a free function `bool transition_allowed(State, State) noexcept` and `to_string(State)`
/// found by argument-dependent lookup.
template <class Derived, class State, class Action, class Parts, class Then>
class membership_skeleton {
 public:
  State state() const noexcept { return state_; }
  /// Transitions refused by the table so far (a bug if ever non-zero; tests check it).
  std::uint64_t invalid_transitions() const noexcept { return invalid_transitions_; }
  std::vector<Action> take_actions() {
    std::vector<Action> out;
    out.swap(actions_);
    return out;
  }
  std::optional<std::int32_t> coordinator() const noexcept { return coord_.node(); }
  /// What the core measured, for metrics (one shape for every core).
  const member_stats& stats() const noexcept { return stats_; }
  /// Last time poll() was called or returned (for metrics and the 80% warning).
  time_point last_poll() const noexcept { return poll_.last(); }

  /// poll() returned (with records, empty, or by throwing): the poll interval starts from `now`.
  void poll_returned(time_point now) {
    poll_.returned(now);
    derived().pump(now);
  }
  /// The user thread began running listener `seq`: from now on it is not cancelled (a revoke the
  /// application is running finishes as a revoke), and inside poll() the callback's time counts
  /// toward max.poll.interval.ms.
  void listener_started(time_point now, std::uint64_t seq) {
    if (listener_.start(seq)) poll_.callback_moment(now);
  }
  /// The user thread finished listener `seq` (a stale one is ignored): a revoked or lost
  /// partition is no longer owned, then the core goes on (Derived::after_listener).
  void listener_done(time_point now, std::uint64_t seq) {
    const auto done = listener_.finish(seq);
    if (!done) return;  // stale (cancelled or superseded)
    poll_.callback_moment(now);
    if (done->kind == listener_kind::lost) {
      derived().set_owned(Parts{});
    } else if (done->kind == listener_kind::revoked) {
      derived().disown(done->parts);
    }
    derived().after_listener(now, done->after);
  }

 protected:
  membership_skeleton(ms retry_backoff, ms retry_backoff_max)
      : retry_backoff_(retry_backoff, retry_backoff_max) {}  // no jitter: deterministic tests

  Derived& derived() noexcept { return static_cast<Derived&>(*this); }
  const Derived& derived() const noexcept { return static_cast<const Derived&>(*this); }

  /// Moves to `to`. One the table refuses is a bug in the core: it is not applied, the member
  /// stops (fatal, raised from poll() with the transition named) instead of going on in a state
  /// the table does not know, and invalid_transitions() counts it.
  void transition(State to, std::string_view reason) {
    if (to == state_) return;
    if (!transition_allowed(state_, to)) {
      ++invalid_transitions_;
      const std::string what = std::string("internal error: invalid membership transition ") + to_string(state_) +
                               " -> " + to_string(to) + " (" + std::string(reason) + ")";
      logger()->error("group '{}': {}", derived().group_id(), what);
      if (state_ != State::closed && state_ != State::fatal) {
        derived().requests_dropped();
        listener_.drop();
        state_ = State::fatal;
        actions_.emplace_back(report_error{make_error_code(client_errc::illegal_state), what, true});
      }
      return;
    }
    logger()->debug("group '{}' {}: {} -> {} ({})", derived().group_id(), derived().who(), to_string(state_),
                    to_string(to), reason);
    state_ = to;
  }

  // ---- the listener call outstanding with the user thread ----

  /// Asks the user thread for `kind` on `parts`, replacing any call still outstanding; `next` is
  /// what the core does when it is done.
  void request_listener(listener_kind kind, const Parts& parts, Then next, bool stale_claim = false) {
    const std::uint64_t seq = next_seq_++;
    listener_.request(seq, kind, parts, next);
    const partition_set named = derived().named(parts);
    stats_.listener_called(kind, named);
    actions_.emplace_back(run_listener{kind, {named.begin(), named.end()}, seq, stale_claim});
  }
  /// A new callback replaces the pending one: cancelled if not started, else its effect on
  /// ownership applied now (listener_handshake::release).
  void supersede_pending_listener() { release_listener(false); }
  /// The call the user thread has not started yet is cancelled; a running one goes on.
  void cancel_unstarted_listener() { release_listener(true); }

  // ---- max.poll.interval.ms ----

  /// Whether max.poll.interval.ms is running: the member is one it binds, and the application is
  /// outside poll() or inside a listener callback.
  bool poll_timer_running() const noexcept {
    return derived().poll_interval_applies() && (!poll_.in_poll() || listener_.running());
  }
  /// The milliseconds since the last poll() once they reach max.poll.interval.ms (logged), else
  /// nullopt (the 80% warning goes out on the way).
  std::optional<std::int64_t> poll_interval_exceeded(time_point now, ms max_poll_interval) {
    if (!poll_timer_running()) return std::nullopt;
    return poll_.exceeded(now, max_poll_interval, derived().group_id());
  }

  // ---- coordinator and retries ----

  /// The coordinator in use stopped answering as one: look it up again.
  void forget_coordinator(std::string_view why) {
    if (coord_.known()) {
      logger()->info("group '{}': coordinator {} unusable ({}); rediscovering", derived().group_id(),
                     coord_.node().value_or(-1), why);
    }
    coord_.forget();
  }
  void backoff(time_point now) { backoff_until_ = now + retry_backoff_.next(); }

  /// A code no reaction of the core handles, answered to `api`. Java raises "Unexpected error in
  /// ... response" and rejoins on the next poll(). Here a code the error table marks retriable is
  /// logged and retried after a backoff; any other is retried too, but the tenth unexpected answer
  /// in a row from the same API (no success of it in between, unexpected_cleared()) is fatal,
  /// named, raised from poll(): never a retry loop without end. Returns true when fatal.
  bool unexpected_error(time_point now, std::int16_t c, const char* api,
                        const std::optional<std::string>& broker_message = std::nullopt) {
    const auto e = static_cast<kafka_errc>(c);
    const std::string said = broker_message && !broker_message->empty() ? " (" + *broker_message + ")" : "";
    int& in_a_row = unexpected_in_a_row_[api];
    if (!is_retriable(e) && ++in_a_row >= max_unexpected_in_a_row) {
      derived().fatal(now, make_error_code(e),
                      "group '" + derived().group_id() + "': unexpected error in " + api +
                          " response: " + kafka_error_name(c) +
                          (said.empty() ? " (" + make_error_code(e).message() + ")" : said) + ", " +
                          std::to_string(in_a_row) + " times in a row");
      return true;
    }
    actions_.emplace_back(report_error{
        make_error_code(e), std::string("unexpected error in ") + api + " response: " + kafka_error_name(c) + said +
                                "; retrying",
        false});
    return false;
  }
  /// `api` answered without error: its unexpected answers are no longer in a row.
  void unexpected_cleared(const char* api) { unexpected_in_a_row_.erase(api); }
  static constexpr int max_unexpected_in_a_row = 10;

  State state_{};
  std::uint64_t invalid_transitions_ = 0;
  std::vector<Action> actions_;
  listener_handshake<Parts, Then> listener_;  // the listener call the user thread has
  std::uint64_t next_seq_ = 1;
  poll_clock poll_;  // max.poll.interval.ms
  coordinator_lookup coord_;
  base::backoff retry_backoff_;
  time_point backoff_until_{};
  member_stats stats_;
  bool closing_ = false;  // leaving is for close(), not unsubscribe()
  // close()'s KIP-1092 operation (unsubscribe() leaves as default_operation); set before close()
  // starts the leave, kept: close is final.
  close_membership close_op_ = close_membership::default_operation;
  // The coordinator removed (fenced) this member and it has not joined again: commits fail for
  // good until then (standing::removed).
  bool removed_ = false;

 private:
  void release_listener(bool unstarted_only) {
    const auto cancelled =
        listener_.release(unstarted_only, [&](const Parts& parts) { derived().disown(parts); });
    if (cancelled) actions_.emplace_back(cancel_listener{*cancelled});
  }

  std::map<std::string, int, std::less<>> unexpected_in_a_row_;  // per API, since its last success
};

}  // namespace kgroup::group
