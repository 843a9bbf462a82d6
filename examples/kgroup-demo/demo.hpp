// kgroup-demo: what the story's parent process and its member processes share.
//
// Each group member runs in a child process (this binary re-executed with --member) and reports
// what happens to it as lines of text on its stdout, which is a pipe to the parent. Every line
// starts with a tag and a CLOCK_MONOTONIC timestamp in nanoseconds (std::chrono::steady_clock is
// the same clock in every process on Linux), so the parent can merge all members into one
// timeline:
//
//   I <ns> <member_id|-> <http_endpoint|->          identity (at start and when the member id changes)
//   A <ns> <generation> <partitions>                on_partitions_assigned started
//   V <ns> <partitions>                             on_partitions_revoked returned
//   L <ns> <partitions>                             on_partitions_lost returned
//   C <ns> <partition> <first> <last> <bad>         poll() returned offsets first..last of a partition;
//                                                   bad = records whose key was not the one produced there
//   S <ns> <state> <generation> <rebalance_total> <records_consumed_total> <leader 0|1>
//                                                   status from Consumer::metrics(), every 250 ms
//   H <ns> <start_ns> <duration_ms> <generation> <completed 0|1> <cause>\t<detail>
//                                                   one rebalance from Consumer::metrics() history
//   P <ns> begin|end <ms>                           the scripted stall of the poll loop
//   E <ns> <text>                                   an error the member saw (poll, close)
//   X <ns>                                          closed cleanly, about to exit
//
// <partitions> is a comma-separated list of partition numbers of the demo topic, or '-'.
//
// A share-group member (--share, a kgroup::ShareConsumer in implicit mode: the share story,
// share_story.cpp) sends I, E and X lines as above, and:
//   R <ns> <bad> <p>:<offset>:<count>,...           poll() returned these records (delivery counts);
//                                                   bad = records whose key was not the one produced there
//   K <ns> <partition> <offsets> <code> <text>      an acknowledgement outcome (the commit callback):
//                                                   <offsets> as "a-b,c"; code 0 = applied, else the
//                                                   Kafka error code (or -1 for another error) and its text
//   M <ns> <epoch> <delivered> <redelivered> <accepted> <released> <failed> <lock_expired> <state>
//                                                   ShareConsumer::metrics(), every 250 ms
//   P <ns> begin <ms> <last_poll_ns>                the scripted stall starts; its last poll() returned at
//   P <ns> end <ms>                                 <last_poll_ns>, and it polls no more until end
//
// The parent writes commands to the member's stdin: "stall <ms>" and "leave". EOF on stdin
// (the parent is gone) also makes the member leave.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace demo {

using steady = std::chrono::steady_clock;

inline constexpr const char* topic_name = "orders";
inline constexpr const char* share_topic_name = "jobs";  // the share story's queue

inline std::int64_t to_ns(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline steady::time_point from_ns(std::int64_t ns) {
  return steady::time_point(std::chrono::duration_cast<steady::duration>(std::chrono::nanoseconds(ns)));
}

/// "3,7,11" or "-".
inline std::string encode_partitions(const std::vector<std::int32_t>& parts) {
  if (parts.empty()) return "-";
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(parts[i]);
  }
  return out;
}

inline std::vector<std::int32_t> decode_partitions(std::string_view text) {
  std::vector<std::int32_t> out;
  if (text == "-" || text.empty()) return out;
  std::int32_t v = 0;
  bool any = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      any = true;
    } else if (c == ',') {
      if (any) out.push_back(v);
      v = 0;
      any = false;
    }
  }
  if (any) out.push_back(v);
  return out;
}

/// What a member process needs to know (passed on its command line).
struct member_options {
  std::string name;       // member-N, also its client.id
  std::string bootstrap;  // bootstrap.servers
  std::string group;
  std::string strategy;   // partition.assignment.strategy
  int session_timeout_ms = 6000;
  int heartbeat_interval_ms = 500;
  int max_poll_interval_ms = 8000;
  std::vector<std::pair<std::string, std::string>> settings;  // more consumer keys (security)
  bool share = false;  // a share-group member (kgroup::ShareConsumer): --share
};

/// A share member's pretend work per record (it sleeps this long for each record a poll()
/// returned), so three members take the story's minute to work through the queue.
inline constexpr std::chrono::milliseconds share_work_per_record{25};

/// The member process's main loop (see the line protocol above). Returns the exit status.
int run_member(const member_options& options);

}  // namespace demo
