// kgroup-demo: the scripted story (three members join, a fourth joins, one leaves, one is
// killed, one stalls), told as a timeline with a report per step and a summary at the end.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mock_cluster.hpp"

namespace demo {

struct options {
  std::string protocol = "cooperative";  // eager, cooperative, or consumer (KIP-848)
  bool serve = false;
  bool compare = true;  // --protocol consumer: tell it again with classic and compare
  int rate = 400;  // records per second
  std::string security_protocol = "PLAINTEXT";
  std::string sasl_mechanism = "SCRAM-SHA-256";
  bool share = false;  // --share: the share group's story (share_story.cpp) instead
};

/// One step's measures, for comparing two runs of the story.
struct step_result {
  std::string title;
  double settle_s = -1;        // from the step's action to the last ownership change
  int paused = 0;              // partitions paused (by a previous owner) that resumed within the step
  double paused_s = 0;         // their pauses, summed (partition-seconds)
  double longest_s = 0;        // the longest of them
};

/// Tells the story with members that connect to `member_bootstrap` (the group proxy in front of
/// `cluster`, or a security front before it) with `member_settings` added to their configuration;
/// with --serve keeps them running afterwards until SIGINT or SIGTERM. Returns the failures (empty:
/// it ran as scripted).
std::vector<std::string> tell_story(const options& opt, kgroup::test::mock_cluster& cluster,
                                    const std::string& member_bootstrap, const std::string& log_dir,
                                    std::vector<std::pair<std::string, std::string>> member_settings,
                                    std::vector<step_result>* steps = nullptr);

/// The share group's story (KIP-932) on a mock cluster of its own (librdkafka 2.15's): a queue
/// worked by three ShareConsumer members, one stalls past the acquisition lock, one is killed.
/// With --serve keeps the members running afterwards until SIGINT or SIGTERM. Returns the
/// failures (empty: it ran as scripted, every record accepted).
std::vector<std::string> tell_share_story(const options& opt, const std::string& log_dir);

}  // namespace demo
