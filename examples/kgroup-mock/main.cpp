// kgroup-mock: a librdkafka mock cluster on loopback for local development and scripted tests.
//
// It creates the brokers and topics, seeds records, prints "bootstrap.servers=..." as its first
// stdout line once everything is ready (with --security-protocol SSL or SASL_SSL followed by
// "ssl.ca.location=PATH": the brokers are then served through test/support/secure_front.hpp),
// then takes one command per stdin line and answers each
// with exactly one stdout line starting with "ok" or "error:" (so a script can wait for it).
// librdkafka's own logs go to stderr. SIGINT and SIGTERM shut the cluster down cleanly.
#include "../long_options.hpp"
#include "mock_cluster.hpp"
#include "secure_front.hpp"
#include "test_pki.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using kgroup::test::mock_cluster;

constexpr const char* usage_text =
    R"(usage: kgroup-mock [--brokers N] [--topic NAME:PARTITIONS[:RECORDS[:CODEC]]]... [--no-stdin]
                   [--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL]
                   [--sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER]
                   [--sasl-user USER --sasl-password PASSWORD]
                   [--share-offset-reset earliest|latest] [--share-lock-ms MS]
                   [--share-delivery-limit N] [--share-heartbeat-ms MS] [--share-session-timeout-ms MS]

Starts a librdkafka mock Kafka cluster on 127.0.0.1 for local development.

  --brokers N     number of brokers, ids 1..N (default 3)
  --topic SPEC    create topic NAME with PARTITIONS partitions and seed RECORDS records
                  (default 0) compressed with CODEC (none, gzip, snappy, lz4, zstd; default
                  none); repeatable
  --no-stdin      ignore stdin; run until SIGINT or SIGTERM
  --security-protocol P
                  serve the brokers through a test security front (default PLAINTEXT:
                  the mock brokers themselves): SSL terminates TLS with a certificate for
                  localhost and 127.0.0.1 from a CA generated at start-up; SASL_PLAINTEXT
                  and SASL_SSL also require SASL authentication
  --sasl-mechanism M
                  the mechanism the front enables (default PLAIN); OAUTHBEARER accepts
                  unsecured JWTs (alg none) with "sub" and a future "exp"
  --sasl-user U, --sasl-password P
                  the one user the front knows (default user "kgroup", password
                  "kgroup-secret")
  --share-offset-reset earliest|latest
                  where a new share group starts on each partition (KIP-932's
                  share.auto.offset.reset; the mock's default is latest: only records written
                  after the group started)
  --share-lock-ms MS
                  how long a share member holds a record it was given (the acquisition
                  lock; default 30000) before it goes to another member
  --share-delivery-limit N
                  deliveries of a record before it is archived instead of handed out again
                  (default 5; 0: no limit)
  --share-heartbeat-ms MS, --share-session-timeout-ms MS
                  the share groups' heartbeat interval and session timeout
                  The --share options need librdkafka 2.15's mock (share groups, KIP-932):
                  run with LD_LIBRARY_PATH=<librdkafka 2.15.1>/lib (.ci/rdkafka-2.15 builds it);
                  on an older librdkafka they are an error. They apply to every share group,
                  so they are set before the bootstrap line is printed. The mock drops every
                  share session of a broker when any connection to it closes: seed records with
                  --topic, or keep a producer connected, rather than producing while share
                  members read.
  --help          print this text

Once the topics are created and seeded it prints one line on stdout,
  bootstrap.servers=127.0.0.1:PORT,...
and, with SSL or SASL_SSL, a second line
  ssl.ca.location=PATH
naming the generated CA certificate (removed at exit), then reads commands from stdin until
"quit" or end of input (type "help" for the list).
Each command is answered by one stdout line starting with "ok" or "error:".
Seeded records have key "<topic>-<partition>-<n>" and a 100-byte value that starts with
"<key>:" (see test/support/mock_cluster.hpp). librdkafka logs go to stderr: errors only by
default; KGROUP_MOCK_LOG_LEVEL=0..7 sets the level and KGROUP_MOCK_DEBUG=CONTEXTS (e.g.
"broker,protocol" or "all") turns on librdkafka's debug contexts.

examples:
  kgroup-mock --brokers 3 --topic orders:12:10000 --topic audit:3:500:zstd
  kgroup-mock --topic orders:12:1000 --security-protocol SASL_SSL --sasl-mechanism SCRAM-SHA-256 \
      --sasl-user alice --sasl-password alice-secret
)";

constexpr const char* commands_text =
    R"(commands:
  produce TOPIC COUNT [CODEC]         seed COUNT records round-robin (CODEC: none gzip snappy lz4 zstd)
  create TOPIC PARTITIONS [RF]        create a topic
  watermarks TOPIC                    print low..high offsets of every partition
  share-members GROUP                 print the member ids of share group GROUP
  down BROKER | up BROKER             stop / restart a broker (-1 = all); the port is kept
  rtt BROKER MS                       delay the broker's responses by MS milliseconds (-1 = all)
  coordinator GROUP BROKER            make BROKER the coordinator of consumer group GROUP
  leader TOPIC PARTITION BROKER       move partition leadership (-1 = no leader)
  error APIKEY CODE [CODE...]         fail the next requests of APIKEY with these codes, in order
  clear APIKEY                        forget queued errors for APIKEY
  topic-error TOPIC CODE              report CODE for TOPIC in Metadata (0 clears)
  help                                this text
  quit                                shut down (so does end of input)
APIKEY is a number or a name (Produce Fetch ListOffsets Metadata OffsetCommit OffsetFetch
FindCoordinator JoinGroup Heartbeat LeaveGroup SyncGroup ApiVersions); CODE is a number or a
Kafka error name such as NOT_COORDINATOR (_TRANSPORT = close the connection).
)";

struct topic_spec {
  std::string name;
  int partitions = 0;
  std::int64_t records = 0;
  std::string codec = "none";
};

struct options {
  int brokers = 3;
  std::vector<topic_spec> topics;
  bool read_stdin = true;
  std::string security_protocol = "PLAINTEXT";
  std::string sasl_mechanism = "PLAIN";
  std::string sasl_user = "kgroup";
  std::string sasl_password = "kgroup-secret";
  mock_cluster::share_group_settings share;  // --share-*: applied when any is set
  bool share_set = false;
};

// Thrown for input the user can fix; main() prints it with a hint.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename Int>
Int parse_int(std::string_view text, std::string_view what) {
  Int value{};
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc{} || end != text.data() + text.size()) {
    throw usage_error(std::string(what) + " must be an integer, not \"" + std::string(text) + "\"");
  }
  return value;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string checked_codec(std::string_view codec) {
  static constexpr std::string_view codecs[] = {"none", "gzip", "snappy", "lz4", "zstd"};
  const std::string name = lower(codec);
  if (std::find(std::begin(codecs), std::end(codecs), name) == std::end(codecs)) {
    throw usage_error("unknown codec \"" + std::string(codec) + "\" (none, gzip, snappy, lz4, zstd)");
  }
  return name;
}

std::int16_t parse_api_key(std::string_view text) {
  struct named_key {
    std::string_view name;
    std::int16_t key;
  };
  static constexpr named_key keys[] = {
      {"produce", 0},      {"fetch", 1},       {"listoffsets", 2},      {"metadata", 3},
      {"offsetcommit", 8}, {"offsetfetch", 9}, {"findcoordinator", 10}, {"joingroup", 11},
      {"heartbeat", 12},   {"leavegroup", 13}, {"syncgroup", 14},       {"apiversions", 18},
  };
  const std::string name = lower(text);
  for (const named_key& k : keys) {
    if (k.name == name) return k.key;
  }
  if (!text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) != 0)) {
    return parse_int<std::int16_t>(text, "APIKEY");
  }
  throw usage_error("unknown api key \"" + std::string(text) + "\"");
}

// Accepts a number or librdkafka's name for the code (Kafka's name, or "_TRANSPORT" style for
// librdkafka's internal codes), case-insensitively.
std::int16_t parse_error_code(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || std::isdigit(static_cast<unsigned char>(text[0])) != 0)) {
    return parse_int<std::int16_t>(text, "CODE");
  }
  const rd_kafka_err_desc* descs = nullptr;
  std::size_t count = 0;
  rd_kafka_get_err_descs(&descs, &count);
  const std::string wanted = lower(text);
  for (std::size_t i = 0; i < count; ++i) {
    if (descs[i].name != nullptr && lower(descs[i].name) == wanted) {
      return static_cast<std::int16_t>(descs[i].code);
    }
  }
  throw usage_error("unknown error code \"" + std::string(text) + "\"");
}

topic_spec parse_topic_spec(std::string_view spec) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = spec.find(':', start);
    parts.push_back(spec.substr(start, colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 4 || parts[0].empty()) {
    throw usage_error("--topic wants NAME:PARTITIONS[:RECORDS[:CODEC]], not \"" + std::string(spec) + "\"");
  }
  topic_spec topic;
  topic.name = parts[0];
  topic.partitions = parse_int<int>(parts[1], "PARTITIONS");
  if (topic.partitions < 1) throw usage_error("PARTITIONS must be at least 1");
  if (parts.size() > 2) topic.records = parse_int<std::int64_t>(parts[2], "RECORDS");
  if (topic.records < 0) throw usage_error("RECORDS must not be negative");
  if (parts.size() > 3) topic.codec = checked_codec(parts[3]);
  return topic;
}

int positive(std::string_view option, const std::string& value) {
  const int v = parse_int<int>(value, option);
  if (v < 1) throw usage_error(std::string(option) + " must be at least 1");
  return v;
}

// Returns nothing when --help was given.
std::optional<options> parse_options(int argc, char** argv) {
  enum : int {
    brokers = 256,
    topic,
    no_stdin,
    security_protocol,
    sasl_mechanism,
    sasl_user,
    sasl_password,
    share_offset_reset,
    share_lock_ms,
    share_delivery_limit,
    share_heartbeat_ms,
    share_session_timeout_ms
  };
  static const ::option table[] = {
      {"help", no_argument, nullptr, 'h'},
      {"brokers", required_argument, nullptr, brokers},
      {"topic", required_argument, nullptr, topic},
      {"no-stdin", no_argument, nullptr, no_stdin},
      {"security-protocol", required_argument, nullptr, security_protocol},
      {"sasl-mechanism", required_argument, nullptr, sasl_mechanism},
      {"sasl-user", required_argument, nullptr, sasl_user},
      {"sasl-password", required_argument, nullptr, sasl_password},
      {"share-offset-reset", required_argument, nullptr, share_offset_reset},
      {"share-lock-ms", required_argument, nullptr, share_lock_ms},
      {"share-delivery-limit", required_argument, nullptr, share_delivery_limit},
      {"share-heartbeat-ms", required_argument, nullptr, share_heartbeat_ms},
      {"share-session-timeout-ms", required_argument, nullptr, share_session_timeout_ms},
      {nullptr, 0, nullptr, 0},
  };
  options opts;
  bool help = false;
  kgroup::examples::read_long_options(argc, argv, "h", table, [&](int code, const std::string& value) {
    switch (code) {
      case 'h':
        help = true;
        return false;
      case brokers:
        opts.brokers = parse_int<int>(value, "--brokers");
        if (opts.brokers < 1 || opts.brokers > 64) throw usage_error("--brokers must be 1..64");
        break;
      case topic:
        opts.topics.push_back(parse_topic_spec(value));
        break;
      case no_stdin:
        opts.read_stdin = false;
        break;
      case security_protocol:
        opts.security_protocol =
            kgroup::examples::one_of("--security-protocol", value, kgroup::examples::security_protocols);
        break;
      case sasl_mechanism:
        opts.sasl_mechanism =
            kgroup::examples::one_of("--sasl-mechanism", value, kgroup::examples::sasl_mechanisms);
        break;
      case sasl_user:
        opts.sasl_user = value;
        break;
      case sasl_password:
        opts.sasl_password = value;
        break;
      case share_offset_reset:
        opts.share.earliest =
            kgroup::examples::one_of("--share-offset-reset", value, {"earliest", "latest"}) == "earliest";
        opts.share_set = true;
        break;
      case share_lock_ms:
        opts.share.record_lock_duration_ms = positive("--share-lock-ms", value);
        opts.share_set = true;
        break;
      case share_delivery_limit:
        opts.share.max_delivery_attempts = parse_int<int>(value, "--share-delivery-limit");
        if (*opts.share.max_delivery_attempts < 0)
          throw usage_error("--share-delivery-limit must not be negative");
        opts.share_set = true;
        break;
      case share_heartbeat_ms:
        opts.share.heartbeat_interval_ms = positive("--share-heartbeat-ms", value);
        opts.share_set = true;
        break;
      case share_session_timeout_ms:
        opts.share.session_timeout_ms = positive("--share-session-timeout-ms", value);
        opts.share_set = true;
        break;
    }
    return true;
  });
  if (help) return std::nullopt;
  return opts;
}

std::string join(const std::vector<std::int64_t>& values) {
  std::string out;
  for (const std::int64_t v : values) {
    if (!out.empty()) out += ",";
    out += std::to_string(v);
  }
  return out;
}

void reply(const std::string& line) {
  std::cout << line << '\n' << std::flush;
}

// Runs one command line; returns false for quit.
bool run_command(mock_cluster& cluster, const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  if (words.empty() || words[0][0] == '#') return true;  // blank lines and comments

  const std::string command = lower(words[0]);
  const auto want = [&](std::size_t min, std::size_t max, const char* form) {
    if (words.size() - 1 < min || words.size() - 1 > max) {
      throw usage_error(std::string("usage: ") + form);
    }
  };
  const auto broker_arg = [&](std::size_t i) { return parse_int<std::int32_t>(words[i], "BROKER"); };

  if (command == "quit" || command == "exit") {
    reply("ok bye");
    return false;
  }
  if (command == "help") {
    std::cout << commands_text;
    reply("ok");
  } else if (command == "produce") {
    want(2, 3, "produce TOPIC COUNT [CODEC]");
    const auto count = parse_int<std::int64_t>(words[2], "COUNT");
    if (count < 0) throw usage_error("COUNT must not be negative");
    const std::string codec = words.size() > 3 ? checked_codec(words[3]) : "none";
    const auto written = cluster.produce(words[1], count, codec);
    reply("ok produced " + std::to_string(count) + " records to " + words[1] + " (" + codec +
          "; per partition " + join(written) + ")");
  } else if (command == "create") {
    want(2, 3, "create TOPIC PARTITIONS [RF]");
    const int partitions = parse_int<int>(words[2], "PARTITIONS");
    const int rf = words.size() > 3 ? parse_int<int>(words[3], "RF") : 1;
    cluster.create_topic(words[1], partitions, rf);
    reply("ok created " + words[1] + " with " + std::to_string(partitions) + " partitions");
  } else if (command == "watermarks") {
    want(1, 1, "watermarks TOPIC");
    std::string out;
    int p = 0;
    for (const auto& w : cluster.watermarks(words[1])) {
      out += " " + std::to_string(p++) + ":" + std::to_string(w.low) + ".." + std::to_string(w.high);
    }
    reply("ok " + words[1] + out);
  } else if (command == "share-members") {
    want(1, 1, "share-members GROUP");
    std::string out;
    for (const auto& id : cluster.share_group_member_ids(words[1])) out += " " + id;
    reply("ok " + words[1] + out);
  } else if (command == "down" || command == "up") {
    want(1, 1, "down BROKER | up BROKER");
    const auto id = broker_arg(1);
    if (command == "down") {
      cluster.broker_down(id);
    } else {
      cluster.broker_up(id);
    }
    reply("ok broker " + words[1] + " " + command);
  } else if (command == "rtt") {
    want(2, 2, "rtt BROKER MS");
    const auto id = broker_arg(1);
    const int ms = parse_int<int>(words[2], "MS");
    if (ms < 0) throw usage_error("MS must not be negative");
    cluster.set_rtt(id, ms);
    reply("ok broker " + words[1] + " rtt " + words[2] + " ms");
  } else if (command == "coordinator") {
    want(2, 2, "coordinator GROUP BROKER");
    cluster.set_coordinator(words[1], broker_arg(2));
    reply("ok coordinator of " + words[1] + " is broker " + words[2]);
  } else if (command == "leader") {
    want(3, 3, "leader TOPIC PARTITION BROKER");
    cluster.set_partition_leader(words[1], parse_int<std::int32_t>(words[2], "PARTITION"), broker_arg(3));
    reply("ok leader of " + words[1] + " [" + words[2] + "] is broker " + words[3]);
  } else if (command == "error") {
    if (words.size() < 3) throw usage_error("usage: error APIKEY CODE [CODE...]");
    const std::int16_t api_key = parse_api_key(words[1]);
    std::vector<std::int16_t> codes;
    for (std::size_t i = 2; i < words.size(); ++i) codes.push_back(parse_error_code(words[i]));
    cluster.push_request_errors(api_key, codes);
    reply("ok queued " + std::to_string(codes.size()) + " errors for api key " + std::to_string(api_key));
  } else if (command == "clear") {
    want(1, 1, "clear APIKEY");
    const std::int16_t api_key = parse_api_key(words[1]);
    cluster.clear_request_errors(api_key);
    reply("ok cleared errors for api key " + std::to_string(api_key));
  } else if (command == "topic-error") {
    want(2, 2, "topic-error TOPIC CODE");
    cluster.set_topic_error(words[1], parse_error_code(words[2]));
    reply("ok topic " + words[1] + " error " + words[2]);
  } else {
    throw usage_error("unknown command \"" + words[0] + "\"");
  }
  return true;
}

// Splits stdin into lines with read(), so the loop can also watch for signals with poll().
class line_reader {
 public:
  // Returns false at end of input (after the last, possibly unterminated, line).
  bool read_some(std::vector<std::string>& lines) {
    char chunk[4096];
    const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
      if (!pending_.empty()) lines.push_back(std::move(pending_));
      pending_.clear();
      return false;
    }
    pending_.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      std::string line = pending_.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      pending_.erase(0, nl + 1);
    }
    return true;
  }

 private:
  std::string pending_;
};

int serve(mock_cluster& cluster, bool read_stdin, int signal_fd) {
  line_reader reader;
  bool input_open = read_stdin;
  for (;;) {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    const int ready = ::poll(fds, input_open ? 2 : 1, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::perror("kgroup-mock: poll");
      return 1;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      if (::read(signal_fd, &info, sizeof info) < 0) std::perror("kgroup-mock: signalfd");
      std::cerr << "kgroup-mock: signal " << info.ssi_signo << ", shutting down\n";
      return 0;
    }
    if (!input_open || (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;

    std::vector<std::string> lines;
    const bool more = reader.read_some(lines);
    for (const std::string& line : lines) {
      try {
        if (!run_command(cluster, line)) return 0;
      } catch (const usage_error& e) {
        reply(std::string("error: ") + e.what() + " (type \"help\" for the commands)");
      } catch (const std::exception& e) {
        reply(std::string("error: ") + e.what());
      }
    }
    if (!more) return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<options> opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kgroup-mock: " << e.what() << "\n\n" << usage_text;
    return 2;
  }
  if (!opts) {
    std::cout << usage_text << "\n" << commands_text;
    return 0;
  }

  // Block the shutdown signals before librdkafka starts its threads (they inherit the mask), so
  // only the signalfd sees them and the cluster is always torn down by its destructor.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  if (::pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) {
    std::cerr << "kgroup-mock: cannot block signals\n";
    return 1;
  }
  const int signal_fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::perror("kgroup-mock: signalfd");
    return 1;
  }

  int status = 0;
  try {
    mock_cluster cluster(opts->brokers);
    // Before the bootstrap line: the session timeout and heartbeat apply only to groups created
    // afterwards (SHARE-GROUPS.md, M9).
    if (opts->share_set && !cluster.set_share_groups(opts->share)) {
      throw std::runtime_error(
          "the --share options need share groups (KIP-932), which librdkafka " +
          mock_cluster::librdkafka_version_string() +
          "'s mock does not have: run with librdkafka 2.15's "
          "(LD_LIBRARY_PATH=$HOME/.cache/kgroup/librdkafka-2.15.1/lib, built by .ci/rdkafka-2.15)");
    }
    for (const topic_spec& topic : opts->topics) {
      cluster.create_topic(topic.name, topic.partitions);
      if (topic.records > 0) cluster.produce(topic.name, topic.records, topic.codec);
      std::cerr << "kgroup-mock: topic " << topic.name << ": " << topic.partitions << " partitions, "
                << topic.records << " records (" << topic.codec << ")\n";
    }
    // The front (if any) is destroyed before the cluster: it relays to the cluster's brokers.
    std::unique_ptr<kgroup::test::secure_front> front;
    const std::string& protocol = opts->security_protocol;
    if (protocol != "PLAINTEXT") {
      kgroup::test::secure_front_options fo;
      fo.tls = protocol == "SSL" || protocol == "SASL_SSL";
      if (protocol.rfind("SASL_", 0) == 0) {
        fo.sasl_mechanisms = {opts->sasl_mechanism};
        fo.users = {{opts->sasl_user, opts->sasl_password}};
      }
      front = std::make_unique<kgroup::test::secure_front>(cluster, fo);
      std::cerr << "kgroup-mock: brokers served through a " << protocol << " front"
                << (fo.sasl_mechanisms.empty() ? std::string() : " (" + opts->sasl_mechanism + ", user " + opts->sasl_user + ")")
                << "; the mock brokers themselves are at " << cluster.bootstrap_servers() << '\n';
    }
    std::cout << "bootstrap.servers=" << (front ? front->bootstrap_servers() : cluster.bootstrap_servers()) << '\n';
    if (front && front->options().tls) std::cout << "ssl.ca.location=" << kgroup::test::test_pki::get().ca.cert_path << '\n';
    std::cout << std::flush;
    status = serve(cluster, opts->read_stdin, signal_fd);
  } catch (const std::exception& e) {
    std::cerr << "kgroup-mock: " << e.what() << '\n';
    status = 1;
  }
  ::close(signal_fd);
  return status;
}
