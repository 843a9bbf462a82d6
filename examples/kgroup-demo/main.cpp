// kgroup-demo: a consumer group's life on an embedded mock Kafka cluster, told as a timeline.
//
// The parent process starts librdkafka's mock cluster (3 brokers, topic 'orders' with 12
// partitions), a producer that writes continuously, and then runs a scripted story with kgroup
// members:
//   1. three members join          4. one is killed (SIGKILL: no revoke, no LeaveGroup)
//   2. a fourth member joins       5. one stalls in its poll loop past max.poll.interval.ms
//   3. one leaves cleanly
// Steps 3-5 pick members that are not the group leader (preferably member-2, member-3, member-1),
// so the leader, the only member that sees the member list, can name who left and joined.
// It prints each listener call as it happens, then for every step the rebalances it caused (why,
// per member, from Consumer::metrics()), how long each partition went without a consuming owner,
// and at the end a summary table and record totals (produced, consumed, duplicates, missing).
//
// Decision: every member runs in its own child process (this binary re-executed with --member, a
// fork+exec, so no thread of the parent - the mock cluster's, the producer's - is duplicated).
// That makes "killed" a real SIGKILL: a kgroup Consumer has no public way to stop heartbeating
// without leaving the group, and a crashed process is what the story means. Members report over
// a pipe as lines of text with CLOCK_MONOTONIC timestamps (demo.hpp); the parent merges them.
//
// Every figure is measured: listener calls and records come from the members, rebalance causes
// and durations from each member's Consumer::metrics() history, "paused" is computed by the
// parent from those timestamps. A partition is paused from the moment its owner stops consuming
// it (revoke/lost callback returned, the owner was killed, or the owner's poll loop stalled)
// until an assign callback for it starts on another (or the same) member. The mock's own timers
// dominate the durations: a first join waits 3 s and every later rebalance waits
// session.timeout.ms - 1 s (librdkafka's mock group coordinator), so compare the protocols side by
// side (--protocol eager vs cooperative), not against real Kafka. --protocol consumer tells the
// story with KIP-848 members (librdkafka 2.15's mock only), then again with the classic protocol
// (cooperative-sticky) on a fresh cluster, and compares the steps in a table at the end.
// --share tells a share group's story instead (KIP-932, librdkafka 2.15's mock only: a queue
// worked by three ShareConsumer members, one stalls past the acquisition lock, one is killed;
// share_story.cpp).
//
// Exit status 0 when the story ran as scripted (every step settled with every partition owned by a
// live member, no partition owned by two live members at once, every produced record consumed,
// every record's key the one produced at its offset); 1 otherwise, with the reason.
//
// The parts: parent.hpp (settings and helpers), timeline.hpp (the members' reports merged),
// processes.hpp (member processes, the producer), story.cpp (the steps and their reports),
// share_story.cpp (the share story, its cluster and its verdict), this file (options, the
// cluster and its fronts); member.cpp is the member process's side.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "../long_options.hpp"
#include "demo.hpp"
#include "group_proxy.hpp"
#include "mock_cluster.hpp"
#include "parent.hpp"
#include "secure_front.hpp"
#include "story.hpp"
#include "test_pki.hpp"

namespace {

void on_sigint(int) { demo::g_interrupted = 1; }

void usage(std::FILE* to) {
  std::fputs(
      "usage: kgroup-demo [--protocol cooperative|eager|consumer] [--serve] [--rate N]\n"
      "       kgroup-demo --share [--serve]\n"
      "  Starts a mock Kafka cluster (librdkafka's: 3 brokers, topic 'orders' with 12 partitions, a\n"
      "  producer writing N records/s, default 400) and tells a consumer group's story with kgroup\n"
      "  members: three join, a fourth joins, one leaves cleanly, one is killed, one stalls past\n"
      "  max.poll.interval.ms. Prints a timeline and a summary; takes about a minute.\n"
      "  --protocol  cooperative (cooperative-sticky, the default), eager (range), or consumer\n"
      "              (KIP-848, group.protocol=consumer; needs librdkafka 2.15's mock, see .ci/demo): the\n"
      "              story is then told again with the classic protocol and the two are compared\n"
      "  --no-compare  with --protocol consumer, skip the classic run and the comparison\n"
      "  --serve     after the story, keep the members and their dashboards running until Ctrl-C\n"
      "  --security-protocol SSL|SASL_PLAINTEXT|SASL_SSL\n"
      "              members reach the cluster through a TLS/SASL front (test/support/secure_front.hpp)\n"
      "              with a CA generated at start-up and the user demo / demo-secret\n"
      "  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER (default SCRAM-SHA-256)\n"
      "  --share     a share group's story instead (KIP-932, queues; needs librdkafka 2.15's mock, see\n"
      "              .ci/demo): a queue of records worked by three kgroup::ShareConsumer members with a\n"
      "              short acquisition lock; one stalls past the lock and its records go to the others\n"
      "              with delivery count 2, one is killed; then every record must have been accepted.\n"
      "              Not with the options above but --serve\n",
      to);
}

// "a,b,c": session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms.
void parse_timeouts(const std::string& text, demo::member_options& o) {
  char end = 0;
  if (std::sscanf(text.c_str(), "%d,%d,%d%c", &o.session_timeout_ms, &o.heartbeat_interval_ms,
                  &o.max_poll_interval_ms, &end) != 3) {
    throw std::invalid_argument("--timeouts wants SESSION,HEARTBEAT,MAX_POLL (ms), not \"" + text + "\"");
  }
}

// The hidden member mode's options (processes.hpp writes them): --member NAME --bootstrap B
// --group G --strategy S --timeouts A,B,C [--share] [--set KEY=VALUE]...
demo::member_options parse_member_options(int argc, char** argv) {
  enum : int { member = 256, bootstrap, group, strategy, timeouts, set, share };
  static const ::option table[] = {
      {"member", required_argument, nullptr, member},
      {"share", no_argument, nullptr, share},
      {"bootstrap", required_argument, nullptr, bootstrap},
      {"group", required_argument, nullptr, group},
      {"strategy", required_argument, nullptr, strategy},
      {"timeouts", required_argument, nullptr, timeouts},
      {"set", required_argument, nullptr, set},
      {nullptr, 0, nullptr, 0},
  };
  demo::member_options o;
  kgroup::examples::read_long_options(argc, argv, "", table, [&](int code, const std::string& value) {
    switch (code) {
      case member:
        o.name = value;
        break;
      case bootstrap:
        o.bootstrap = value;
        break;
      case group:
        o.group = value;
        break;
      case strategy:
        o.strategy = value;
        break;
      case timeouts:
        parse_timeouts(value, o);
        break;
      case share:
        o.share = true;
        break;
      case set: {
        const auto eq = value.find('=');
        if (eq == std::string::npos || eq == 0) {
          throw std::invalid_argument("--set wants KEY=VALUE, not \"" + value + "\"");
        }
        o.settings.emplace_back(value.substr(0, eq), value.substr(eq + 1));
        break;
      }
    }
    return true;
  });
  return o;
}

// Returns nothing when --help was given.
std::optional<demo::options> parse_options(int argc, char** argv) {
  enum : int { protocol = 256, no_compare, serve, security_protocol, sasl_mechanism, rate, share };
  static const ::option table[] = {
      {"help", no_argument, nullptr, 'h'},
      {"protocol", required_argument, nullptr, protocol},
      {"no-compare", no_argument, nullptr, no_compare},
      {"serve", no_argument, nullptr, serve},
      {"security-protocol", required_argument, nullptr, security_protocol},
      {"sasl-mechanism", required_argument, nullptr, sasl_mechanism},
      {"rate", required_argument, nullptr, rate},
      {"share", no_argument, nullptr, share},
      {nullptr, 0, nullptr, 0},
  };
  demo::options opt;
  bool help = false;
  std::vector<std::string> group_only;  // the consumer-group story's options given, by name
  kgroup::examples::read_long_options(argc, argv, "h", table, [&](int code, const std::string& value) {
    if (code != 'h' && code != share && code != serve) {
      for (const auto* o = table; o->name != nullptr; ++o) {
        if (o->val == code) group_only.push_back(std::string("--") + o->name);
      }
    }
    switch (code) {
      case 'h':
        help = true;
        return false;
      case share:
        opt.share = true;
        break;
      case protocol:
        opt.protocol = kgroup::examples::one_of("--protocol", value, {"eager", "cooperative", "consumer"});
        break;
      case no_compare:
        opt.compare = false;
        break;
      case serve:
        opt.serve = true;
        break;
      case security_protocol:
        opt.security_protocol =
            kgroup::examples::one_of("--security-protocol", value, kgroup::examples::security_protocols);
        break;
      case sasl_mechanism:
        opt.sasl_mechanism =
            kgroup::examples::one_of("--sasl-mechanism", value, kgroup::examples::sasl_mechanisms);
        break;
      case rate: {
        int n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > 20000) {
          throw std::invalid_argument("--rate must be an integer 1..20000, not \"" + value + "\"");
        }
        opt.rate = n;
        break;
      }
    }
    return true;
  });
  if (help) return std::nullopt;
  // The share story has no rebalance protocol to pick, no producer rate (its queue is written
  // before the members start: the mock drops every share session when a connection closes) and
  // no security front.
  if (opt.share && !group_only.empty()) {
    throw std::invalid_argument(
        "--share cannot be combined with " + group_only.front() +
        " (the share story has no rebalance protocol, producer rate or security front)");
  }
  return opt;
}

// Runs the story once on a fresh mock cluster (and its fronts); returns the failures.
std::vector<std::string> run_story(const demo::options& opt, const std::string& log_dir,
                                   std::vector<demo::step_result>* steps) {
  // KIP-848: the coordinator's timers, the same as the classic members' own (story.cpp).
  constexpr int opt_heartbeat_ms = 500;
  constexpr int opt_session_ms = 6000;
  try {
    kgroup::test::mock_cluster cluster(demo::broker_count);
    cluster.create_topic(demo::topic_name, demo::partition_count);
    // librdkafka 2.0.2's mock answers INVALID_REQUEST to a follower whose SyncGroup arrives after
    // the leader's, which forces another rebalance; 10 ms on every response keeps the leader's
    // SyncGroup (it fetches metadata first) behind the followers', as the benchmarks do.
    cluster.set_rtt(-1, 10);
    if (opt.protocol == "consumer" && !cluster.set_consumer_group_timers(opt_heartbeat_ms, opt_session_ms)) {
      return {"--protocol consumer needs librdkafka 2.15's mock cluster (KIP-848); librdkafka " +
              kgroup::test::mock_cluster::librdkafka_version_string() +
              " is loaded. .ci/demo --protocol consumer builds 2.15.1 and runs the demo with it"};
    }
    // The mocks cannot describe groups (DescribeGroups), which every member's dashboard needs for
    // its group map: the members reach the cluster through a proxy that answers DescribeGroups
    // from the JoinGroup/SyncGroup traffic it relays (test/support/group_proxy.hpp).
    kgroup::test::group_proxy proxy(cluster);
    fmt::print("kgroup-demo: mock Kafka cluster of {} brokers at {} (members use {}), topic '{}' with {} partitions\n",
               demo::broker_count, cluster.bootstrap_servers(), proxy.bootstrap_servers(), demo::topic_name, demo::partition_count);

    // With --security-protocol, the members' connections go through a TLS/SASL front chained
    // before the proxy; the producer stays on the mock's own listeners.
    std::unique_ptr<kgroup::test::secure_front> front;
    std::vector<std::pair<std::string, std::string>> settings;
    std::string member_bootstrap = proxy.bootstrap_servers();
    if (opt.security_protocol != "PLAINTEXT") {
      kgroup::test::secure_front_options fo;
      fo.tls = opt.security_protocol == "SSL" || opt.security_protocol == "SASL_SSL";
      const bool sasl = opt.security_protocol.rfind("SASL_", 0) == 0;
      if (sasl) {
        fo.sasl_mechanisms = {opt.sasl_mechanism};
        fo.users = {{"demo", "demo-secret"}};
      }
      front = std::make_unique<kgroup::test::secure_front>(proxy.addresses(), fo);
      member_bootstrap = front->bootstrap_servers();
      settings.emplace_back("security.protocol", opt.security_protocol);
      if (fo.tls) settings.emplace_back("ssl.ca.location", kgroup::test::test_pki::get().ca.cert_path);
      if (sasl) {
        settings.emplace_back("sasl.mechanism", opt.sasl_mechanism);
        if (opt.sasl_mechanism == "OAUTHBEARER") {
          settings.emplace_back("sasl.oauthbearer.config", "principal=demo lifeSeconds=3600");
        } else {
          settings.emplace_back("sasl.username", "demo");
          settings.emplace_back("sasl.password", "demo-secret");
        }
      }
      fmt::print("kgroup-demo: members connect with security.protocol={}{} through {}\n", opt.security_protocol,
                 sasl ? " sasl.mechanism=" + opt.sasl_mechanism : std::string(), member_bootstrap);
    }

    return demo::tell_story(opt, cluster, member_bootstrap, log_dir, settings, steps);
  } catch (const std::exception& e) {
    return {e.what()};
  }
}

// The KIP-848 run against the classic (cooperative-sticky) run of the same story, step by step.
void print_comparison(const std::vector<demo::step_result>& kip848, const std::vector<demo::step_result>& classic) {
  fmt::print("\nComparison on the same mock cluster (librdkafka {}): consumer (KIP-848) against classic\n"
             "(cooperative-sticky); settled = from the step's action to the last ownership change; paused = the\n"
             "partitions another member stopped consuming that resumed within the step\n",
             kgroup::test::mock_cluster::librdkafka_version_string());
  fmt::print("  {:<44} {:>19}   {:>31}\n", "step", "settled (s)", "paused: count, part-s, longest");
  fmt::print("  {:<44} {:>9} {:>9}   {:>15} {:>15}\n", "", "consumer", "classic", "consumer", "classic");
  for (std::size_t i = 0; i < std::min(kip848.size(), classic.size()); ++i) {
    const auto& a = kip848[i];
    const auto& b = classic[i];
    // The runs pick different members for steps 3-5: "member-N" becomes "a member".
    std::string title = a.title.substr(0, a.title.find(" ("));
    for (auto at = title.find("member-"); at != std::string::npos; at = title.find("member-", at)) {
      auto end = at + 7;
      while (end < title.size() && title[end] >= '0' && title[end] <= '9') ++end;
      title.replace(at, end - at, "a member");
      at += 8;
    }
    if (title.size() > 44) title = title.substr(0, 41) + "...";
    fmt::print("  {:<44} {:>9.1f} {:>9.1f}   {:>15} {:>15}\n", title, a.settle_s, b.settle_s,
               fmt::format("{}, {:.1f}, {:.2f}", a.paused, a.paused_s, a.longest_s),
               fmt::format("{}, {:.1f}, {:.2f}", b.paused, b.paused_s, b.longest_s));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Hidden member mode: the parent runs this binary once per group member.
  if (argc > 1 && std::string_view(argv[1]) == "--member") {
    demo::member_options o;
    try {
      o = parse_member_options(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kgroup-demo --member: %s\n", e.what());
      return 2;
    }
    return demo::run_member(o);
  }

  demo::options opt;
  try {
    auto parsed = parse_options(argc, argv);
    if (!parsed) {
      usage(stdout);
      return 0;
    }
    opt = std::move(*parsed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgroup-demo: %s\n", e.what());
    usage(stderr);
    return 2;
  }

  std::signal(SIGPIPE, SIG_IGN);  // a member that died must not take the parent with it
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  char dir_template[] = "/tmp/kgroup-demo.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "kgroup-demo: cannot create a log directory under /tmp: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string log_dir = dir_template;

  std::vector<std::string> failures;
  std::vector<demo::step_result> steps;
  failures = opt.share ? demo::tell_share_story(opt, log_dir) : run_story(opt, log_dir, &steps);
  // --protocol consumer: the same story with the classic protocol afterwards, and the two compared.
  if (opt.protocol == "consumer" && opt.compare && failures.empty() && !opt.serve && !demo::g_interrupted) {
    fmt::print("\n==== The same story with group.protocol=classic (cooperative-sticky), for comparison\n\n");
    std::fflush(stdout);
    demo::options classic = opt;
    classic.protocol = "cooperative";
    std::vector<demo::step_result> classic_steps;
    const std::string classic_logs = log_dir + "/classic";
    std::filesystem::create_directories(classic_logs);
    const auto more = run_story(classic, classic_logs, &classic_steps);
    failures.insert(failures.end(), more.begin(), more.end());
    if (more.empty()) print_comparison(steps, classic_steps);
  }

  if (!failures.empty()) {
    std::fprintf(stderr, "\nkgroup-demo: the story did not run as scripted:\n");
    for (const auto& f : failures) std::fprintf(stderr, "  - %s\n", f.c_str());
    std::error_code ec;
    if (std::filesystem::is_empty(log_dir, ec) && !ec) {
      std::filesystem::remove(log_dir, ec);  // no member started (e.g. the wrong librdkafka)
    } else {
      std::fprintf(stderr, "member logs: %s\n", log_dir.c_str());
    }
    return 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(log_dir, ec);
  fmt::print("\nThe story ran as scripted.\n");
  return 0;
}
