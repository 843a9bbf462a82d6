// kgroup-consume: a command-line consumer-group member, for people and for our own checks.
//
// Every event goes to stdout as one JSON object per line (listener and error lines flushed one by
// one, record lines once per poll() batch), so a script or a test can follow the member's
// partitions and records as they happen; the library's logs go to stderr. The interface is kept
// stable on purpose: tests and scripts depend on it, so fields are only ever added. With
// kcat's -f the records are printed in the user's format instead and the events go to stderr, so
// stdout holds nothing but records.
//
// Signals: SIGINT and SIGTERM are blocked in every thread before the Consumer starts its
// background thread, and one dedicated thread takes them with sigwait(). That thread is an
// ordinary thread, not a signal handler, so it may call Consumer::wakeup() (which locks a mutex
// and is therefore not async-signal-safe) and notify a condition variable.
#include <getopt.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "kgroup/config.hpp"
#include "kgroup/consumer.hpp"
#include "kgroup/error.hpp"
#include "kgroup/log.hpp"
#include "kgroup/rebalance_listener.hpp"
#include "kgroup/share_consumer.hpp"
#include "kgroup/types.hpp"

// Boost.JSON writes every line; this program compiles its own copy (boost_json_impl.cpp), since a
// shared libkgroup keeps the library's copy to itself. Only public kgroup headers: the tool builds
// against an installed kgroup.
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <openssl/evp.h>

#include "json_text.hpp"

namespace {

constexpr const char* usage_text =
    R"(usage: kgroup-consume -b BOOTSTRAP -g GROUP [-F FILE] [-X key=value]... [-o START] [-e] [-f FORMAT]
                      [-q] [-c|--max-messages N] [--duration-ms N] [--process-ms N]
                      [--commit auto|sync|async|none] TOPIC...
       kgroup-consume -b BOOTSTRAP [-g GROUP] --partition TOPIC:N [--partition TOPIC:N]... [...]
       kgroup-consume --share [--ack TYPE[,TYPE...]] -b BOOTSTRAP -g GROUP [...] TOPIC...
       kgroup-consume -F FILE [...] TOPIC...   (bootstrap.servers and group.id from FILE)

Joins consumer group GROUP, subscribes to the TOPICs and prints what happens as JSON lines. With
--partition it consumes exactly the named partitions instead (manual assignment: no group is
joined, no rebalances); -g is then optional and only used for commits. The one-letter flags are
kcat's (-b -g -F -X -o -e -f -q -c).

  -b BOOTSTRAP        bootstrap.servers (host:port[,host:port...])
  -g GROUP            group.id
  --partition TOPIC:N consume partition N of TOPIC (repeatable); excludes TOPIC arguments.
                      Without -g, records are not committed (--commit none).
  -F FILE             consumer properties from a Java .properties file, applied first (-b, -g
                      and -X override it). Keys meant for other Kafka clients (serializers,
                      producer keys, ...) are skipped with one warning on stderr.
  -X key=value        any consumer property (repeatable; applied in order, after -F, -b and -g).
                      auto.offset.reset is earliest unless -F or -X sets it.
  -o START            where every assigned partition starts, instead of its committed offset:
                        beginning     the first offset
                        end           the end (only records written from now on)
                        OFFSET        that offset (outside the log: per auto.offset.reset)
                        -N            N records before the end (not before the first offset)
                        s@TIMESTAMP   the first record at or after TIMESTAMP (Unix epoch ms), or
                                      the end if there is none
                        stored        the committed offset (the same as no -o)
                      In a group it applies to every assignment (kcat does the same): committed
                      offsets are ignored for those partitions, and a partition that comes back
                      in a rebalance starts over at START. Needs
                      rebalance.listener.thread=poll (the default).
  -e                  exit once every assigned partition has reached its end (the high watermark,
                      or the last stable offset under read_committed), with an "eof" event for
                      each; closed reason "eof". It waits while nothing is assigned. With
                      --partition, a partition the cluster does not have is an error.
  -f FORMAT           print each record in FORMAT (raw bytes, no newline added) instead of JSON:
                        %t topic  %p partition  %o offset  %k key  %s value  %T timestamp (ms)
                        %h headers (k=v,k2=v2)  %K key length  %S value length  %% a %
                        \n \t \r \\ escapes
                      A null key or value prints as nothing and has length -1. stdout then
                      carries only the records: every other event goes to stderr as JSON.
  -q                  quiet: no informational lines on stderr (with -f: no events but "error"),
                      and the library logs errors only (so no warning about skipped -F keys)
  -c N, --max-messages N
                      exit after N records (N >= 1)
  --duration-ms N     exit after N milliseconds (N >= 1)
  --process-ms N      sleep N milliseconds after each record, as slow processing would
  --commit MODE       how processed records are committed (at-least-once in every mode but none):
                      auto   enable.auto.commit=true: the consumer commits in the background every
                             auto.commit.interval.ms, before giving partitions up and on close
                             (the default, unless -X enable.auto.commit=false, which means none)
                      sync   commit_sync() after each poll() batch is printed (waits for the
                             answer); if the last one failed, once more before closing
                      async  commit_async() after each batch (failures are printed as error events
                             when their answer arrives), and a last commit_sync() before closing
                      none   never commit; a restart in the same group starts over
                      sync, async and none set enable.auto.commit=false. Contradicting
                      -X enable.auto.commit is a usage error.
  --share             join GROUP as a share group member (KIP-932, "queues for Kafka"; brokers
                      with share groups, such as Kafka 4.2): the broker hands each record to one
                      member at a time, and the member acknowledges it. Record lines gain
                      "delivery_count" (1 the first time a record is handed out). Without --ack
                      each printed record is accepted (share.acknowledgement.mode=implicit).
                      Where a share group starts is the group's share.auto.offset.reset (a
                      broker setting), so -o, -e, --commit and --partition are refused, and so
                      are the consumer-group keys a share consumer refuses (auto.offset.reset,
                      enable.auto.commit, session.timeout.ms, ...). "assigned" and "revoked"
                      lines follow the member's assignment as poll() sees it change (other
                      members may share a partition); close() ends with "revoked".
  --ack TYPE[,TYPE...]
                      with --share: acknowledge each printed record in turn by this repeating
                      pattern of accept, release (available again, delivery count + 1) and
                      reject (never delivered again): --ack release hands every record back,
                      --ack accept,release releases every second one. Sets
                      share.acknowledgement.mode=explicit. A failed acknowledgement is an
                      error event and the member carries on.
  -h, --help          print this text

Without -c, --max-messages, --duration-ms or -e it runs until SIGINT or SIGTERM. Both signals make
it close the consumer cleanly (revoking its partitions and leaving the group) and exit 0. Records
that poll() returned but that were not printed when it stopped (the rest of a batch after
--max-messages, a signal or --duration-ms during --process-ms) are not committed: the next member
of the group reads them. With --share they are released, and the printed ones of the last batch
are acknowledged (accepted, or per --ack) before the member leaves.

Output: one JSON object per line on stdout (stderr with -f, see there), each with "ts_ms" (Unix
epoch milliseconds) and "event":
  {"ts_ms":..,"event":"assigned","partitions":[{"topic":"t","partition":0},...]}
  {"ts_ms":..,"event":"revoked","partitions":[...]}     (also "lost"; from the rebalance listener)
                      (with --partition: one "assigned" line with the named partitions at start)
  {"ts_ms":..,"event":"record","topic":"t","partition":0,"offset":42,"timestamp":1700000000000,
   "timestamp_type":"create_time","key":"k","value":"v","headers":[{"key":"h","value":"1"}]}
                      (with --share: ...,"headers":[...],"delivery_count":1})
  {"ts_ms":..,"event":"eof","topic":"t","partition":0,"offset":43}      (with -e)
  {"ts_ms":..,"event":"error","code":"NAME","message":".."}
  {"ts_ms":..,"event":"closed","reason":"max-messages|duration|eof|signal|error","records":N}
A key, value, header key or header value that is valid UTF-8 is a JSON string; other bytes are
written base64 under the name with "_b64" added ("value_b64":"AAEC"); null is null.
"timestamp_type" is create_time, log_append_time or none (then "timestamp" is -1).
"code" is Kafka's error name (e.g. REBALANCE_IN_PROGRESS) for broker errors, kgroup's client error
in upper case (e.g. INVALID_CONFIG) otherwise. A failed commit is an error event and the member
carries on (its records may be delivered again). "closed" is the last line once the consumer
closed. Record lines are written (and flushed) once per poll() batch, or one by one with
--process-ms. Library logs go to stderr.

Exit status: 0 after a clean close (limit reached, -e, or signal), 1 after a runtime error (an
error that ended the run, such as a fatal poll() error, a failed -o or -e offset query, or a
failed last commit; closed reason "error"), 2 for bad usage (message on stderr) or an invalid
configuration (an error event).
)";

// ---- JSON output -----------------------------------------------------------------------------

// RFC 4648 base64 with padding, by OpenSSL's encoder (libcrypto comes with kgroup's link line):
// the tool builds against an installed kgroup, so the library's internal encoder is out of reach.
std::string base64(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Listener callbacks may run on the background thread (-X rebalance.listener.thread=heartbeat)
// while the main thread prints records, so whole lines are written under one lock (stdout's and
// stderr's alike).
std::mutex stdout_mutex;

// Where event lines go. JSON mode: every line on stdout. With -f, stdout carries only the
// formatted records and the events go to stderr, where -q drops the informational ones (all but
// "error").
struct event_output {
  std::FILE* stream = stdout;
  bool quiet = false;
};
event_output events;

// One output line: {"ts_ms":..,"event":..,...}. The timestamp is taken when the line is started.
// Error messages may quote user input (a -X key) or broker text, so strings go in through
// json_text(): bytes that are not valid UTF-8 become U+FFFD and every line stays valid JSON.
class json_line {
 public:
  explicit json_line(std::string_view event) : error_(event == "error") {
    line_["ts_ms"] = now_ms();
    line_["event"] = kgroup_consume::json_text(event);
  }

  json_line& str(std::string_view key, std::string_view value) {
    line_[key] = kgroup_consume::json_text(value);
    return *this;
  }

  json_line& num(std::string_view key, std::int64_t value) {
    line_[key] = value;
    return *this;
  }

  json_line& partitions(const std::vector<kgroup::TopicPartition>& parts) {
    boost::json::array list;
    list.reserve(parts.size());
    for (const auto& tp : parts) {
      list.push_back(
          boost::json::object{{"topic", kgroup_consume::json_text(tp.topic)}, {"partition", tp.partition}});
    }
    line_["partitions"] = std::move(list);
    return *this;
  }

  // Writes the line and flushes, so a reader sees each event when it happens.
  void emit() {
    if (events.quiet && events.stream != stdout && !error_) return;
    std::string out = boost::json::serialize(line_);  // integers and strings only
    out += '\n';
    std::lock_guard lock(stdout_mutex);
    std::fwrite(out.data(), 1, out.size(), events.stream);
    std::fflush(events.stream);
  }

 private:
  boost::json::object line_;
  bool error_;
};

// -f FORMAT, parsed: literal text and kcat's tokens.
struct format_part {
  enum class kind { text, topic, partition, offset, key, value, timestamp, headers, key_length, value_length };
  kind what = kind::text;
  std::string text;  // for kind::text, escapes already resolved
};

const char* timestamp_type_name(kgroup::TimestampType t) {
  switch (t) {
    case kgroup::TimestampType::create_time: return "create_time";
    case kgroup::TimestampType::log_append_time: return "log_append_time";
    case kgroup::TimestampType::none: break;
  }
  return "none";
}

// Record lines, the hot path (benchmarked against a librdkafka program printing the same lines):
// the lines go into one reusable buffer, which goes out with one fwrite and one fflush per poll()
// batch (per line with --process-ms, so a reader sees a record before its processing time
// passes). With -f the records are written in that format instead (raw bytes, as kcat writes
// them).
class record_printer {
 public:
  explicit record_printer(const std::vector<format_part>* format) : format_(format) {}

  // The timestamp of the lines that follow; one per batch (or per record with --process-ms).
  void set_time(std::int64_t ts_ms) { ts_ms_ = ts_ms; }

  void add(const kgroup::ConsumerRecord& r) {
    if (format_ != nullptr) {
      add_formatted(r);
      return;
    }
    // The hot path (one line per record): the keys are fixed, so the line is written in order
    // and only its strings go through Boost.JSON's serializer (reused), which escapes them.
    // Building a json::object per record doubled the CPU this tool spends per record
    // (kgroup-bench-consume --cli); the output is the same. Literals as string_views (no strlen
    // per append), and printable ASCII data (most records) appended as it is (plain_json_text).
    using namespace std::string_view_literals;
    out_ += "{\"ts_ms\":"sv;
    number(ts_ms_);
    out_ += ",\"event\":\"record\",\"topic\":"sv;
    text(r.topic);
    out_ += ",\"partition\":"sv;
    number(r.partition);
    out_ += ",\"offset\":"sv;
    number(r.offset);
    out_ += ",\"timestamp\":"sv;
    number(r.timestamp);
    out_ += ",\"timestamp_type\":"sv;
    text(timestamp_type_name(r.timestamp_type));
    out_ += ',';
    bytes("key", r.key);
    out_ += ',';
    bytes("value", r.value);
    out_ += ",\"headers\":["sv;
    for (std::size_t i = 0; i < r.headers.size(); ++i) {
      out_ += i == 0 ? "{"sv : ",{"sv;
      bytes("key", r.headers[i].key);
      out_ += ',';
      bytes("value", r.headers[i].value);
      out_ += '}';
    }
    out_ += ']';
    if (r.delivery_count) {  // share group records only
      out_ += ",\"delivery_count\":"sv;
      number(*r.delivery_count);
    }
    out_ += "}\n"sv;
  }

  // Writes what was added since the last flush, under the lock listener lines take too.
  void flush() {
    if (out_.empty()) return;
    {
      std::lock_guard lock(stdout_mutex);
      std::fwrite(out_.data(), 1, out_.size(), stdout);
      std::fflush(stdout);
    }
    out_.clear();  // keeps the capacity
  }

 private:
  // A JSON string; bytes that are not valid UTF-8 become U+FFFD (json_text).
  void text(std::string_view s) {
    if (kgroup_consume::plain_json_text(s)) {
      quoted(s);
    } else if (kgroup_consume::valid_utf8(s)) {
      kgroup_consume::append_json_string(out_, serializer_, s);
    } else {
      kgroup_consume::append_json_string(out_, serializer_, kgroup_consume::json_text(s));
    }
  }

  // "name":<bytes> for record data: a JSON string when the bytes are valid UTF-8 (text),
  // "name_b64":"<base64>" when they are not (binary), "name":null for null. Both forms are
  // lossless. (`name` is one of ours: no escaping needed.)
  void bytes(std::string_view name, std::optional<std::string_view> b) {
    out_ += '"';
    out_ += name;
    if (!b) {
      out_ += "\":null";
    } else if (kgroup_consume::plain_json_text(*b)) {  // most record data: no escaping, no serializer
      out_ += "\":";
      quoted(*b);
    } else if (kgroup_consume::valid_utf8(*b)) {
      out_ += "\":";
      kgroup_consume::append_json_string(out_, serializer_, *b);
    } else {
      out_ += "_b64\":\"";
      out_ += base64(*b);
      out_ += '"';
    }
  }

  void quoted(std::string_view s) {
    out_ += '"';
    out_ += s;
    out_ += '"';
  }

  void number(std::int64_t v) {
    char buf[24];
    out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
  }

  // kcat's rules: null key or value print as nothing and have length -1; headers as k=v,k2=v2
  // (a null header value as k=).
  void add_formatted(const kgroup::ConsumerRecord& r) {
    using kind = format_part::kind;
    for (const auto& part : *format_) {
      switch (part.what) {
        case kind::text: out_ += part.text; break;
        case kind::topic: out_ += r.topic; break;
        case kind::partition: number(r.partition); break;
        case kind::offset: number(r.offset); break;
        case kind::key: out_ += r.key.value_or(std::string_view()); break;
        case kind::value: out_ += r.value.value_or(std::string_view()); break;
        case kind::timestamp: number(r.timestamp); break;
        case kind::key_length: number(r.key ? static_cast<std::int64_t>(r.key->size()) : -1); break;
        case kind::value_length: number(r.value ? static_cast<std::int64_t>(r.value->size()) : -1); break;
        case kind::headers:
          for (std::size_t i = 0; i < r.headers.size(); ++i) {
            if (i > 0) out_ += ',';
            out_ += r.headers[i].key;
            out_ += '=';
            out_ += r.headers[i].value.value_or(std::string_view());
          }
          break;
      }
    }
  }

  const std::vector<format_part>* format_;  // null: JSON lines
  std::string out_;
  std::int64_t ts_ms_ = 0;
  boost::json::serializer serializer_;
};

// ---- errors ----------------------------------------------------------------------------------

void emit_error(const std::exception& e) {
  if (const auto* ke = dynamic_cast<const kgroup::Error*>(&e)) {
    json_line("error").str("code", kgroup::error_name(ke->code())).str("message", ke->what()).emit();
  } else {
    json_line("error").str("code", "UNKNOWN").str("message", e.what()).emit();
  }
}

bool is_invalid_config(const kgroup::Error& e) {
  return e.code() == make_error_code(kgroup::client_errc::invalid_config);
}

// ---- command line ----------------------------------------------------------------------------

enum class commit_mode { auto_commit, sync, async, none };

// -o: where each assigned partition starts.
struct start_offset {
  enum class kind { beginning, end, absolute, from_end, time };
  kind what = kind::beginning;
  std::int64_t value = 0;  // the offset, N of -N, or the timestamp of s@
};

struct options {
  std::string bootstrap;
  std::string group;
  std::string config_file;                                      // -F
  std::vector<std::pair<std::string, std::string>> properties;  // -X, in command-line order
  std::optional<std::int64_t> max_messages;
  std::optional<std::int64_t> duration_ms;
  std::int64_t process_ms = 0;
  std::optional<commit_mode> commit;
  std::vector<std::string> topics;
  std::set<kgroup::TopicPartition> partitions;  // --partition: manual assignment
  std::optional<std::vector<format_part>> format;  // -f
  std::optional<start_offset> start;               // -o (absent: committed offset / auto.offset.reset)
  bool exit_at_end = false;                        // -e
  bool quiet = false;                              // -q
  bool start_given = false;                        // -o, even -o stored (refused with --share)
  bool share = false;                              // --share: a ShareConsumer
  std::vector<kgroup::AcknowledgeType> ack;        // --ack: the repeating pattern (explicit mode)
  bool help = false;
};

struct usage_error {
  std::string message;
};

// "TOPIC:N" (the topic may itself contain ':'; the partition is after the last one).
kgroup::TopicPartition parse_partition(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw usage_error{"--partition: '" + text + "' is not TOPIC:N"};
  }
  std::int32_t n = -1;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, n);
  if (ec != std::errc() || end != last || n < 0) {
    throw usage_error{"--partition: '" + text.substr(colon + 1) + "' is not a partition number >= 0"};
  }
  return {text.substr(0, colon), n};
}

std::int64_t parse_count(std::string_view option, std::string_view text, std::int64_t min) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < min) {
    throw usage_error{std::string(option) + ": '" + std::string(text) + "' is not an integer >= " + std::to_string(min)};
  }
  return v;
}

// -o VALUE, as kcat takes it. "stored" (kcat's default in a group) means no -o.
std::optional<start_offset> parse_start(const std::string& text) {
  using kind = start_offset::kind;
  if (text == "beginning") return start_offset{kind::beginning, 0};
  if (text == "end") return start_offset{kind::end, 0};
  if (text == "stored") return std::nullopt;
  if (text.starts_with("s@")) return start_offset{kind::time, parse_count("-o s@", std::string_view(text).substr(2), 0)};
  if (text.starts_with("-") && text.size() > 1) {
    return start_offset{kind::from_end, parse_count("-o -N", std::string_view(text).substr(1), 1)};
  }
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) {
    throw usage_error{"-o: '" + text + "' is not beginning, end, stored, OFFSET, -N or s@TIMESTAMP"};
  }
  return start_offset{kind::absolute, v};
}

// -f FORMAT: kcat's tokens and the escapes \n \t \r \\. Anything else after % or \ is a usage
// error rather than a silent difference from kcat.
std::vector<format_part> parse_format(std::string_view f) {
  using kind = format_part::kind;
  std::vector<format_part> parts;
  auto text = [&](char c) {
    if (parts.empty() || parts.back().what != kind::text) parts.push_back({kind::text, {}});
    parts.back().text += c;
  };
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c != '%' && c != '\\') {
      text(c);
      continue;
    }
    if (i + 1 == f.size()) throw usage_error{std::string("-f: '") + c + "' at the end of the format"};
    const char t = f[++i];
    if (c == '\\') {
      switch (t) {
        case 'n': text('\n'); break;
        case 't': text('\t'); break;
        case 'r': text('\r'); break;
        case '\\': text('\\'); break;
        default: throw usage_error{std::string("-f: unsupported escape '\\") + t + "' (\\n \\t \\r \\\\ are)"};
      }
      continue;
    }
    switch (t) {
      case '%': text('%'); break;
      case 't': parts.push_back({kind::topic, {}}); break;
      case 'p': parts.push_back({kind::partition, {}}); break;
      case 'o': parts.push_back({kind::offset, {}}); break;
      case 'k': parts.push_back({kind::key, {}}); break;
      case 's': parts.push_back({kind::value, {}}); break;
      case 'T': parts.push_back({kind::timestamp, {}}); break;
      case 'h': parts.push_back({kind::headers, {}}); break;
      case 'K': parts.push_back({kind::key_length, {}}); break;
      case 'S': parts.push_back({kind::value_length, {}}); break;
      default: throw usage_error{std::string("-f: unsupported token '%") + t + "' (%t %p %o %k %s %T %h %K %S %% are)"};
    }
  }
  return parts;
}

// --ack: "accept", "release", "reject", comma-separated, repeated in turn.
std::vector<kgroup::AcknowledgeType> parse_ack_pattern(std::string_view text) {
  std::vector<kgroup::AcknowledgeType> out;
  std::size_t pos = 0;
  for (;;) {
    const auto comma = text.find(',', pos);
    const auto word =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (word == "accept") {
      out.push_back(kgroup::AcknowledgeType::accept);
    } else if (word == "release") {
      out.push_back(kgroup::AcknowledgeType::release);
    } else if (word == "reject") {
      out.push_back(kgroup::AcknowledgeType::reject);
    } else {
      throw usage_error{"--ack: '" + std::string(word) +
                        "' is not accept, release or reject (a pattern: accept,release)"};
    }
    if (comma == std::string_view::npos) return out;
    pos = comma + 1;
  }
}

// The long options; those without a letter of their own get a code past any char's.
enum long_code : int {
  opt_partition = 256,
  opt_max_messages,
  opt_duration_ms,
  opt_process_ms,
  opt_commit,
  opt_share,
  opt_ack
};
const ::option long_options[] = {
    {"help", no_argument, nullptr, 'h'},
    {"partition", required_argument, nullptr, opt_partition},
    {"max-messages", required_argument, nullptr, opt_max_messages},
    {"duration-ms", required_argument, nullptr, opt_duration_ms},
    {"process-ms", required_argument, nullptr, opt_process_ms},
    {"commit", required_argument, nullptr, opt_commit},
    {"share", no_argument, nullptr, opt_share},
    {"ack", required_argument, nullptr, opt_ack},
    {nullptr, 0, nullptr, 0},
};

// An option as the messages name it: "-c", or a long one in full ("--max-messages" for --max);
// `as_long` picks the long name of an option that has a letter too (--help).
std::string option_name(int code, bool as_long = false) {
  for (const ::option* l = long_options; l->name != nullptr; ++l) {
    if (l->val == code && (as_long || code >= 256)) return std::string("--") + l->name;
  }
  return std::string("-") + static_cast<char>(code);
}

// What getopt_long refused in `arg` (the argument it was reading) when it returned '?'.
std::string refused_option(std::string_view arg, int optopt_code) {
  if (arg.starts_with("--")) {
    const std::string_view name = arg.substr(0, arg.find('='));
    // optopt names a known option only when it was given a value it does not take (--help=x).
    if (optopt_code != 0) return option_name(optopt_code, true) + " takes no value";
    std::string candidates;
    for (const ::option* l = long_options; l->name != nullptr; ++l) {
      if (std::string_view(l->name).starts_with(name.substr(2))) {
        candidates += (candidates.empty() ? "--" : ", --") + std::string(l->name);
      }
    }
    if (candidates.find(',') != std::string::npos) {
      return "option '" + std::string(name) + "' is ambiguous (" + candidates + ")";
    }
    return "unknown option '" + std::string(name) + "'";
  }
  const std::string letter = std::string("-") + static_cast<char>(optopt_code);
  if (arg.size() > 2) return "unknown option '" + letter + "' in '" + std::string(arg) + "'";
  return "unknown option '" + letter + "'";
}

void add_topic(options& o, std::string_view topic) {
  if (topic.empty()) throw usage_error{"empty topic name"};
  if (topic == "-") throw usage_error{"unknown option '-'"};
  o.topics.emplace_back(topic);
}

// getopt_long, as kcat uses getopt: short flags group (-eq, -qc5), a value is glued or the next
// argument, long options take any unambiguous prefix (--max=5), `--` ends the options.
options parse_args(int argc, char** argv) {
  options o;
  // "-": TOPICs come back in place as code 1, so they may stand before, between or after the
  // options even under POSIXLY_CORRECT (which stops a permuting getopt at the first one).
  // ":": a missing value is reported as ':', and with opterr = 0 getopt prints nothing: the
  // messages are ours.
  constexpr const char* short_options = "-:hb:g:F:X:c:f:o:eq";
  opterr = 0;
  // 0, not 1: glibc then starts over completely, including the rest of a group of flags that an
  // earlier parse left half-read.
  optind = 0;
  for (;;) {
    // The argument getopt reads next ("-" keeps argv in order), for the messages.
    const int at = std::max(optind, 1);
    const int code = ::getopt_long(argc, argv, short_options, long_options, nullptr);
    if (code == -1) break;
    const std::string value = optarg != nullptr ? optarg : "";
    switch (code) {
      case 1:
        add_topic(o, value);
        break;
      case 'h':
        o.help = true;
        break;
      case 'b':
        o.bootstrap = value;
        break;
      case 'g':
        o.group = value;
        break;
      case 'F':
        o.config_file = value;
        break;
      case 'X': {
        const auto eq = value.find('=');
        if (eq == std::string::npos || eq == 0) throw usage_error{"-X needs key=value, got '" + value + "'"};
        o.properties.emplace_back(value.substr(0, eq), value.substr(eq + 1));
        break;
      }
      case opt_partition:
        o.partitions.insert(parse_partition(value));
        break;
      case 'c':
      case opt_max_messages:
        o.max_messages = parse_count(option_name(code), value, 1);
        break;
      case 'f':
        o.format = parse_format(value);
        break;
      case 'o':
        o.start = parse_start(value);
        o.start_given = true;
        break;
      case 'e':
        o.exit_at_end = true;
        break;
      case 'q':
        o.quiet = true;
        break;
      case opt_duration_ms:
        o.duration_ms = parse_count(option_name(code), value, 1);
        break;
      case opt_process_ms:
        o.process_ms = parse_count(option_name(code), value, 0);
        break;
      case opt_commit:
        if (value == "auto") {
          o.commit = commit_mode::auto_commit;
        } else if (value == "sync") {
          o.commit = commit_mode::sync;
        } else if (value == "async") {
          o.commit = commit_mode::async;
        } else if (value == "none") {
          o.commit = commit_mode::none;
        } else {
          throw usage_error{"--commit: '" + value + "' is not one of auto, sync, async, none"};
        }
        break;
      case opt_share:
        o.share = true;
        break;
      case opt_ack:
        o.ack = parse_ack_pattern(value);
        break;
      case ':':
        throw usage_error{option_name(optopt) + " needs a value"};
      default:
        throw usage_error{refused_option(argv[at], optopt)};
    }
  }
  // After `--`: every argument is a TOPIC.
  for (int i = optind; i < argc; ++i) add_topic(o, argv[i]);
  if (o.help) return o;
  // With -F, bootstrap.servers and group.id may come from the file (checked in make_config()).
  const bool file = !o.config_file.empty();
  if (!o.ack.empty() && !o.share)
    throw usage_error{"--ack needs --share (it acknowledges share group records)"};
  if (o.share) {
    // What a share consumer has no use for, refused by name rather than ignored.
    if (o.start_given)
      throw usage_error{
          "-o cannot be used with --share: the share group's share.auto.offset.reset says where it starts"};
    if (o.exit_at_end)
      throw usage_error{"-e cannot be used with --share: a share member has no end of partition to reach"};
    if (o.commit)
      throw usage_error{
          "--commit cannot be used with --share: a share member acknowledges records (see --ack)"};
    if (!o.partitions.empty())
      throw usage_error{"--partition cannot be used with --share: the share group assigns partitions"};
  }
  if (o.bootstrap.empty() && !file) throw usage_error{"-b BOOTSTRAP is required (or -F FILE with bootstrap.servers)"};
  if (!o.partitions.empty()) {
    if (!o.topics.empty()) throw usage_error{"TOPIC arguments and --partition exclude each other"};
    return o;
  }
  if (o.group.empty() && !file) throw usage_error{"-g GROUP is required (or -F FILE with group.id)"};
  if (o.topics.empty()) throw usage_error{"at least one TOPIC is required"};
  return o;
}

// Throws kgroup::Error (invalid_config) from Config::load/set, or usage_error for a --commit that
// contradicts -X enable.auto.commit or a group missing from both -g and -F. Settles o.commit for
// --partition without a group (none).
kgroup::Config make_config(options& o) {
  kgroup::Config c;
  if (!o.config_file.empty()) c = kgroup::Config::load(o.config_file);
  // A tool that is mostly used to look at what a topic holds starts from the beginning; Kafka's
  // default (latest) would show nothing for a topic nobody writes to right now.
  // (Not for a share consumer, which refuses the key: its group's broker config decides.)
  if (!o.share && !c.is_set("auto.offset.reset")) c.set("auto.offset.reset", "earliest");
  if (!o.bootstrap.empty()) c.set("bootstrap.servers", o.bootstrap);
  if (!o.group.empty()) c.set("group.id", o.group);
  for (const auto& [key, value] : o.properties) c.set(key, value);
  if (!o.ack.empty()) {
    if (c.is_set("share.acknowledgement.mode") && c.get("share.acknowledgement.mode") != "explicit") {
      throw usage_error{"--ack contradicts -X share.acknowledgement.mode=" +
                        c.get("share.acknowledgement.mode")};
    }
    c.set("share.acknowledgement.mode", "explicit");
  }
  const bool has_group = !c.get("group.id").empty();
  if (o.partitions.empty() && !has_group) throw usage_error{"-g GROUP is required (no group.id in -F FILE)"};
  if (!o.partitions.empty() && !has_group) {
    if (o.commit && *o.commit != commit_mode::none) {
      throw usage_error{"--commit needs -g GROUP (commits are stored in a group)"};
    }
    o.commit = commit_mode::none;
  }
  // -o seeks inside on_partitions_assigned, which may call seek() and the offset queries only
  // when it runs on the polling thread.
  std::string listener_thread = c.get("rebalance.listener.thread");
  std::transform(listener_thread.begin(), listener_thread.end(), listener_thread.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (o.start && o.partitions.empty() && listener_thread == "heartbeat") {
    throw usage_error{"-o needs rebalance.listener.thread=poll (it seeks in on_partitions_assigned)"};
  }
  if (o.commit) {
    // auto leaves commits to the consumer; sync and async commit from the poll loop (run()), and
    // none never commits.
    const std::string want = *o.commit == commit_mode::auto_commit ? "true" : "false";
    if (c.is_set("enable.auto.commit") && c.get("enable.auto.commit") != want) {
      throw usage_error{"--commit contradicts -X enable.auto.commit=" + c.get("enable.auto.commit")};
    }
    c.set("enable.auto.commit", want);
  }
  return c;
}

// ---- stopping --------------------------------------------------------------------------------

// Set once by the signal thread; the main loop and the --process-ms sleep watch it.
class stop_request {
 public:
  void request() {
    {
      std::lock_guard lock(mutex_);
      requested_ = true;
    }
    cv_.notify_all();
  }
  bool requested() const {
    std::lock_guard lock(mutex_);
    return requested_;
  }
  // Sleeps for `d` unless a stop is requested first; returns whether one was.
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, d, [this] { return requested_; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool requested_ = false;
};

// Takes the signals in `set` (which must include SIGTERM and be blocked in every thread) with
// sigwait() on a thread of its own and runs `on_signal` there. The destructor ends the thread by
// raising `done_` and sending SIGTERM to that thread alone, so no outside signal is needed.
class signal_thread {
 public:
  signal_thread(const sigset_t& set, std::function<void(int)> on_signal)
      : set_(set), on_signal_(std::move(on_signal)), thread_([this] { run(); }) {}
  ~signal_thread() {
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }
  signal_thread(const signal_thread&) = delete;
  signal_thread& operator=(const signal_thread&) = delete;

 private:
  void run() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (done_) return;
      on_signal_(sig);
    }
  }

  sigset_t set_;
  std::function<void(int)> on_signal_;
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: starts after the fields it reads are initialised
};

// ---- the consumer ----------------------------------------------------------------------------

using partition_set = std::set<kgroup::TopicPartition>;

// -o: moves just-assigned partitions to their start before poll() returns any of their records.
// Runs inside on_partitions_assigned (group mode) or right after assign() (--partition). A failed
// offset query throws, and the run ends with an error.
void seek_to_start(kgroup::Consumer& c, const start_offset& s, const partition_set& parts) {
  using kind = start_offset::kind;
  // (A seek wins over the consumer's own start, committed offset or auto.offset.reset, even while
  // that is still being looked up.)
  switch (s.what) {
    case kind::beginning:
      c.seek_to_beginning(parts);
      break;
    case kind::end:
      c.seek_to_end(parts);
      break;
    case kind::absolute:
      // An offset outside the log is then reset per auto.offset.reset, as librdkafka does for kcat.
      for (const auto& tp : parts) c.seek(tp, s.value);
      break;
    case kind::from_end: {
      const auto first = c.beginning_offsets(parts);
      const auto end = c.end_offsets(parts);
      for (const auto& tp : parts) c.seek(tp, std::max(first.at(tp), end.at(tp) - s.value));
      break;
    }
    case kind::time: {
      std::map<kgroup::TopicPartition, std::int64_t> when;
      for (const auto& tp : parts) when[tp] = s.value;
      // No record that recent: the partition starts at its end (it waits for new records).
      partition_set none = parts;
      for (const auto& [tp, found] : c.offsets_for_times(when)) {
        if (!found) continue;
        c.seek(tp, found->offset);
        none.erase(tp);
      }
      if (!none.empty()) c.seek_to_end(none);
      break;
    }
  }
}

// --partition with -o or -e: a partition the cluster does not have would never get a position or
// an end offset, so it is an error at the start rather than a wait without end.
void check_partitions_exist(kgroup::Consumer& c, const partition_set& parts) {
  std::map<std::string, std::set<std::int32_t>> known;
  for (const auto& tp : parts) {
    auto [it, fresh] = known.try_emplace(tp.topic);
    if (fresh) {
      for (const auto& info : c.partitions_for(tp.topic)) it->second.insert(info.partition);
    }
    if (it->second.count(tp.partition) == 0) {
      throw kgroup::Error(make_error_code(kgroup::kafka_errc::unknown_topic_or_partition),
                          "--partition " + tp.topic + ":" + std::to_string(tp.partition) +
                              ": the cluster has no such partition");
    }
  }
}

class printing_listener : public kgroup::ConsumerRebalanceListener {
 public:
  // `on_assigned` (may be empty) runs after the "assigned" line, for the -o seeks.
  explicit printing_listener(std::function<void(const partition_set&)> on_assigned)
      : on_assigned_(std::move(on_assigned)) {}

  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& p) override {
    json_line("assigned").partitions(p).emit();
    if (on_assigned_ && !p.empty()) on_assigned_({p.begin(), p.end()});
  }
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& p) override {
    json_line("revoked").partitions(p).emit();
  }
  void on_partitions_lost(const std::vector<kgroup::TopicPartition>& p) override {
    json_line("lost").partitions(p).emit();
  }

 private:
  std::function<void(const partition_set&)> on_assigned_;
};

// -e: tells when every assigned partition has reached its end, printing an "eof" event for each
// as it does. A partition is at its end when its position is at or past its end offset (the high
// watermark, or the last stable offset under read_committed) as last asked; the end offsets are
// asked again only for partitions whose position reached the last known end, so a partition
// still being read costs no request. Once at its end a partition stays there (records that
// arrive later are still printed until the run ends), as kcat counts it; one that is revoked and
// assigned again starts over.
class end_watch {
 public:
  // True once every partition of a nonempty assignment has reached its end.
  bool all_at_end(kgroup::Consumer& c) {
    const auto assigned = c.assignment();
    std::erase_if(ends_, [&](const auto& e) { return assigned.count(e.first) == 0; });
    std::erase_if(reached_, [&](const auto& tp) { return assigned.count(tp) == 0; });
    if (assigned.empty()) return false;

    std::map<kgroup::TopicPartition, std::int64_t> due;  // position of each partition to check
    for (const auto& tp : assigned) {
      if (reached_.count(tp) != 0) continue;
      std::int64_t pos = 0;
      try {
        pos = c.position(tp, std::chrono::milliseconds(0));
      } catch (const kgroup::Error& e) {
        // Not known yet (committed offset or reset pending), or given up since assignment().
        if (e.code() == make_error_code(kgroup::client_errc::request_timed_out) ||
            e.code() == make_error_code(kgroup::client_errc::illegal_state)) {
          continue;
        }
        throw;
      }
      const auto known = ends_.find(tp);
      if (known == ends_.end() || pos >= known->second) due[tp] = pos;
    }
    if (!due.empty()) {
      partition_set ask;
      for (const auto& [tp, pos] : due) ask.insert(tp);
      for (const auto& [tp, end] : c.end_offsets(ask)) {
        ends_[tp] = end;
        const auto d = due.find(tp);
        if (d == due.end() || d->second < end) continue;
        reached_.insert(tp);
        json_line("eof").str("topic", tp.topic).num("partition", tp.partition).num("offset", d->second).emit();
      }
    }
    return std::all_of(assigned.begin(), assigned.end(), [&](const auto& tp) { return reached_.count(tp) != 0; });
  }

 private:
  std::map<kgroup::TopicPartition, std::int64_t> ends_;  // last end offset asked, per partition
  partition_set reached_;
};

// The batch was cut short after `printed` records: moves each partition with unprinted records
// back to its first unprinted offset, so commits (sync, async, and auto-commit's commit before
// revoking on close) cover exactly the printed records and the group's next member reads the
// rest. Records of one partition are in offset order, so its first one left is its lowest.
void rewind_unprinted(kgroup::Consumer& consumer, const kgroup::ConsumerRecords& batch, std::size_t printed) {
  std::set<kgroup::TopicPartition> rewound;
  for (std::size_t i = printed; i < batch.size(); ++i) {
    const auto& r = batch[i];
    kgroup::TopicPartition tp{std::string(r.topic), r.partition};
    if (rewound.insert(tp).second) consumer.seek(tp, r.offset);
  }
}

// Commits what was printed so far, per --commit. A failed commit is reported and the loop goes
// on: the records stay uncommitted and are delivered again (at least once). `last`: the loop
// ended; an async member then commits once synchronously, so the final positions are stored
// before close() gives up the partitions (as Java's commitAsync-in-the-loop, commitSync-at-the-end
// pattern does), and a sync member whose last commit (`last_failed`) failed tries once more.
// Callbacks of earlier async commits run inside poll() or close(). Returns false when the commit
// failed.
bool commit_processed(kgroup::Consumer& consumer, const options& o, bool last, bool last_failed = false) {
  if (!o.commit) return true;
  try {
    switch (*o.commit) {
      case commit_mode::sync:
        if (!last || last_failed) consumer.commit_sync();
        break;
      case commit_mode::async:
        if (last) {
          consumer.commit_sync();
        } else {
          consumer.commit_async([](const kgroup::OffsetMap&, std::error_code ec) {
            if (ec) {
              json_line("error").str("code", kgroup::error_name(ec)).str("message", "async commit failed: " + ec.message()).emit();
            }
          });
        }
        break;
      case commit_mode::auto_commit:
      case commit_mode::none:
        break;
    }
  } catch (const kgroup::Error& e) {
    emit_error(e);
    return false;
  }
  return true;
}

constexpr auto close_timeout = std::chrono::seconds(30);
// Without --duration-ms poll() still returns now and then; wakeup() ends it early on a signal,
// so this only bounds how often an idle loop turns.
constexpr auto idle_poll = std::chrono::milliseconds(1000);
// With -e an idle poll() usually means the partitions are at their end, so it is checked sooner.
constexpr auto idle_poll_at_end = std::chrono::milliseconds(200);

// "assigned" and "revoked" lines for what changed between two assignments (a share consumer has
// no rebalance listener: the lines follow what poll() sees).
void emit_assignment_change(const partition_set& before, const partition_set& after) {
  std::vector<kgroup::TopicPartition> gone;
  std::vector<kgroup::TopicPartition> added;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(gone));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(added));
  if (!gone.empty()) json_line("revoked").partitions(gone).emit();
  if (!added.empty()) json_line("assigned").partitions(added).emit();
}

// Failed acknowledgements as error events (the records go back to the group or were handled by
// another member; the run carries on). Runs on this thread, inside poll(), commit_sync(), close().
void emit_acknowledgement_errors(const kgroup::AcknowledgementResults& results) {
  for (const auto& [tp, res] : results) {
    if (!res.error || res.offsets.empty()) continue;
    json_line("error")
        .str("code", kgroup::error_name(res.error))
        .str("message", "acknowledgement of " + tp.topic + "-" + std::to_string(tp.partition) + " offsets " +
                            std::to_string(*res.offsets.begin()) + ".." +
                            std::to_string(*res.offsets.rbegin()) + " failed: " + res.error.message())
        .emit();
  }
}

// --share: the loop of run() with a ShareConsumer. Each printed record is acknowledged in turn by
// --ack's pattern (explicit mode), or accepted at the next poll() (implicit mode); records of a
// batch cut short are released, and the last acknowledgements are committed before close(), so
// exactly the printed records count as consumed.
int run_share(const options& o, const kgroup::Config& config, const sigset_t& signals) {
  std::unique_ptr<kgroup::ShareConsumer> consumer;
  try {
    consumer = std::make_unique<kgroup::ShareConsumer>(config);
  } catch (const kgroup::Error& e) {
    emit_error(e);
    return is_invalid_config(e) ? 2 : 1;
  } catch (const std::exception& e) {
    emit_error(e);
    return 1;
  }
  consumer->set_acknowledgement_commit_callback(emit_acknowledgement_errors);

  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (o.duration_ms) deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*o.duration_ms);

  stop_request stop;
  std::string reason = "error";
  std::int64_t records = 0;
  int exit_code = 0;
  partition_set assigned;
  {
    signal_thread sig_thread(signals, [&](int) {
      stop.request();
      consumer->wakeup();
    });
    try {
      kgroup::ShareConsumer& c = *consumer;
      c.subscribe(o.topics);
      record_printer printer(o.format ? &*o.format : nullptr);
      std::size_t acks = 0;  // records acknowledged by the pattern so far
      for (;;) {
        if (stop.requested()) {
          reason = "signal";
          break;
        }
        if (o.max_messages && records >= *o.max_messages) {
          reason = "max-messages";
          break;
        }
        auto timeout = idle_poll;
        if (deadline) {
          const auto now = std::chrono::steady_clock::now();
          if (now >= *deadline) {
            reason = "duration";
            break;
          }
          timeout = std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(*deadline - now));
        }
        kgroup::ConsumerRecords batch;
        try {
          batch = c.poll(timeout);
        } catch (const kgroup::Error& e) {
          if (e.code() == make_error_code(kgroup::client_errc::woken_up)) continue;
          throw;
        }
        const auto now_assigned = c.assignment();
        emit_assignment_change(assigned, now_assigned);
        assigned = now_assigned;
        if (batch.empty()) continue;

        const bool slow = o.process_ms > 0;
        if (!slow) printer.set_time(now_ms());
        std::size_t printed = 0;
        for (const auto& r : batch) {
          if (slow) printer.set_time(now_ms());
          printer.add(r);
          ++printed;
          ++records;
          if (!o.ack.empty()) c.acknowledge(r, o.ack[acks++ % o.ack.size()]);
          if (slow) {
            printer.flush();
            stop.wait_for(std::chrono::milliseconds(o.process_ms));
          }
          if (stop.requested() || (o.max_messages && records >= *o.max_messages) ||
              (slow && deadline && std::chrono::steady_clock::now() >= *deadline)) {
            break;
          }
        }
        printer.flush();
        // What was not printed goes back to the group for another member (or a later run).
        for (std::size_t i = printed; i < batch.size(); ++i)
          c.acknowledge(batch[i], kgroup::AcknowledgeType::release);
      }
      // close() would release the last batch in implicit mode (as Java's does): the printed
      // records are accepted here first, and every acknowledgement's outcome is known before
      // the member leaves.
      c.commit_sync(close_timeout);
    } catch (const kgroup::Error& e) {
      emit_error(e);
      exit_code = is_invalid_config(e) ? 2 : 1;
      reason = "error";
    } catch (const std::exception& e) {
      emit_error(e);
      exit_code = 1;
      reason = "error";
    }
  }

  try {
    consumer->close(close_timeout);
  } catch (const std::exception& e) {
    emit_error(e);
    exit_code = 1;
    reason = "error";
  }
  // The member left the group: whatever it had is given up.
  emit_assignment_change(assigned, {});
  json_line("closed").str("reason", reason).num("records", records).emit();
  return exit_code;
}

int run(options o) {
  if (o.format) events.stream = stderr;
  events.quiet = o.quiet;
  if (o.quiet) {
    // Errors only (from here on, so also none of Config::load's warnings); a stricter
    // KGROUP_LOG_LEVEL stays.
    if (kgroup::default_log_sink()->min_level() < kgroup::LogLevel::error) {
      kgroup::set_default_log_sink(kgroup::make_stderr_log_sink(kgroup::LogLevel::error));
    }
  }
  kgroup::Config config;
  try {
    config = make_config(o);
  } catch (const kgroup::Error& e) {
    emit_error(e);
    return 2;
  }

  // Blocked before the Consumer starts its background thread, which inherits the mask, so only
  // the signal thread ever receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (int rc = pthread_sigmask(SIG_BLOCK, &signals, nullptr); rc != 0) {
    std::fprintf(stderr, "kgroup-consume: pthread_sigmask: %s\n", std::strerror(rc));
    return 1;
  }

  if (o.share) return run_share(o, config, signals);

  std::unique_ptr<kgroup::Consumer> consumer;
  try {
    consumer = std::make_unique<kgroup::Consumer>(config);
  } catch (const kgroup::Error& e) {
    emit_error(e);
    return is_invalid_config(e) ? 2 : 1;
  } catch (const std::exception& e) {
    emit_error(e);
    return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (o.duration_ms) deadline = start + std::chrono::milliseconds(*o.duration_ms);

  stop_request stop;
  std::string reason = "error";
  std::int64_t records = 0;
  int exit_code = 0;
  {
    // Joined before close(), so wakeup() never races with the consumer's teardown.
    signal_thread sig_thread(signals, [&](int) {
      stop.request();
      consumer->wakeup();
    });

    bool commit_ok = true;
    try {
      kgroup::Consumer& c = *consumer;
      if (o.partitions.empty()) {
        std::function<void(const partition_set&)> on_assigned;
        if (o.start) on_assigned = [&c, start = *o.start](const partition_set& p) { seek_to_start(c, start, p); };
        c.subscribe(o.topics, std::make_shared<printing_listener>(std::move(on_assigned)));
      } else {
        if (o.start || o.exit_at_end) check_partitions_exist(c, o.partitions);
        c.assign(o.partitions);
        json_line("assigned").partitions({o.partitions.begin(), o.partitions.end()}).emit();
        if (o.start) seek_to_start(c, *o.start, o.partitions);
      }
      record_printer printer(o.format ? &*o.format : nullptr);
      end_watch at_end;
      for (;;) {
        if (stop.requested()) {
          reason = "signal";
          break;
        }
        if (o.max_messages && records >= *o.max_messages) {
          reason = "max-messages";
          break;
        }
        auto timeout = o.exit_at_end ? idle_poll_at_end : idle_poll;
        if (deadline) {
          const auto now = std::chrono::steady_clock::now();
          if (now >= *deadline) {
            reason = "duration";
            break;
          }
          timeout = std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(*deadline - now));
        }
        if (o.exit_at_end && at_end.all_at_end(c)) {
          reason = "eof";
          break;
        }

        kgroup::ConsumerRecords batch;
        try {
          batch = c.poll(timeout);
        } catch (const kgroup::Error& e) {
          // The signal thread's wakeup(): the loop head sees the stop request.
          if (e.code() == make_error_code(kgroup::client_errc::woken_up)) continue;
          throw;
        }
        if (batch.empty()) continue;

        // --process-ms: each line carries its own time and goes out before the sleep. Otherwise
        // the batch was handed over at one moment and is written at once.
        const bool slow = o.process_ms > 0;
        if (!slow) printer.set_time(now_ms());
        std::size_t printed = 0;
        for (const auto& r : batch) {
          if (slow) printer.set_time(now_ms());
          printer.add(r);
          ++printed;
          ++records;
          if (slow) {
            printer.flush();
            stop.wait_for(std::chrono::milliseconds(o.process_ms));
          }
          if (stop.requested() || (o.max_messages && records >= *o.max_messages) ||
              (slow && deadline && std::chrono::steady_clock::now() >= *deadline)) {
            break;
          }
        }
        printer.flush();
        // The loop stops after this batch; what it did not print must not count as consumed.
        if (printed < batch.size()) rewind_unprinted(c, batch, printed);
        commit_ok = commit_processed(c, o, /*last=*/false);
      }
      // The run ends with what it printed uncommitted: an error, though the loop ended cleanly.
      if (!commit_processed(c, o, /*last=*/true, /*last_failed=*/!commit_ok)) {
        exit_code = 1;
        reason = "error";
      }
    } catch (const kgroup::Error& e) {
      emit_error(e);
      exit_code = is_invalid_config(e) ? 2 : 1;
    } catch (const std::exception& e) {
      emit_error(e);
      exit_code = 1;
    }
  }

  try {
    consumer->close(close_timeout);
  } catch (const std::exception& e) {
    emit_error(e);
    exit_code = 1;
    reason = "error";
  }
  json_line("closed").str("reason", reason).num("records", records).emit();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse_args(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "kgroup-consume: %s\n(kgroup-consume --help shows the usage)\n", e.message.c_str());
    return 2;
  }
  if (o.help) {
    std::fputs(usage_text, stdout);
    return 0;
  }
  try {
    return run(o);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "kgroup-consume: %s\n(kgroup-consume --help shows the usage)\n", e.message.c_str());
    return 2;
  }
}
