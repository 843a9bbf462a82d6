// Config: strict keys in code (did-you-mean), case-insensitive booleans and enums, Java assignor
// class names, Java .properties files (syntax; keys kgroup does not load ignored with a warning
// each, as Java; librdkafka's spellings as aliases), and the redacted description logged at startup.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/iso_duration.hpp"
#include "kgroup/config.hpp"
#include "kgroup/error.hpp"
#include "log_capture.hpp"

using kgroup::Config;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kgroup::Error& e) {
    CHECK(e.code() == make_error_code(kgroup::client_errc::invalid_config));
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: keys in code are strict, with a did-you-mean for a near miss", "[config]") {
  Config c;
  CHECK(error_of([&] { c.set("sesion.timeout.ms", "1000"); }).find("did you mean 'session.timeout.ms'") !=
        std::string::npos);
  CHECK(error_of([&] { c.set("key.deserializer", "x"); }).find("unknown configuration key 'key.deserializer'") !=
        std::string::npos);
  CHECK(error_of([&] { c.set("session.timeout.ms", "abc"); }).find("not an integer") != std::string::npos);
}

TEST_CASE("config: booleans and enum values in any case; Java assignor class names map to the built-ins",
          "[config]") {
  Config c;
  c.set("enable.auto.commit", "FALSE");
  CHECK(c.get("enable.auto.commit") == "false");
  CHECK_FALSE(c.get_bool("enable.auto.commit"));
  c.set("auto.offset.reset", "Earliest");
  CHECK(c.get("auto.offset.reset") == "earliest");
  c.set("isolation.level", "READ_COMMITTED");
  CHECK(c.get("isolation.level") == "read_committed");
  CHECK_FALSE(error_of([&] { c.set("auto.offset.reset", "sometimes"); }).empty());
  c.set("partition.assignment.strategy",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, org.apache.kafka.clients.consumer.RangeAssignor");
  CHECK(c.get("partition.assignment.strategy") == "cooperative-sticky,range");
  c.set("partition.assignment.strategy", "RoundRobinAssignor,StickyAssignor,my-own");
  CHECK(c.get_list("partition.assignment.strategy") == std::vector<std::string>{"roundrobin", "sticky", "my-own"});
}

TEST_CASE("config: Java .properties syntax", "[config]") {
  const std::string text =
      "# a comment\n"
      "! another comment\n"
      "   \n"
      "bootstrap.servers=broker-1:9092,broker-2:9092\n"
      "group.id : orders \n"
      "client.id\tbilling\\\n"
      "    -eu\n"                              // continued: "billing-eu"
      "group.instance.id = a\\=b\\:c\\ d\\u00e9\r\n"  // escapes, CRLF
      "client.rack   \r"                       // a key without a value, CR line end
      "auto.offset.reset earliest";            // no final newline
  const Config c = Config::from_properties(text);
  CHECK(c.get("bootstrap.servers") == "broker-1:9092,broker-2:9092");
  CHECK(c.get("group.id") == "orders ");  // trailing blanks belong to the value, as in Java
  CHECK(c.get("client.id") == "billing-eu");
  CHECK(c.get("group.instance.id") == "a=b:c d\xc3\xa9");
  CHECK(c.is_set("client.rack"));
  CHECK(c.get("client.rack").empty());
  CHECK(c.get("auto.offset.reset") == "earliest");
}

TEST_CASE("config: a \\u surrogate pair in a properties file is one UTF-8 character; a lone half is an error",
          "[config]") {
  // U+1F600 is written \uD83D\uDE00 (UTF-16), as Java's native2ascii and Properties.store write it.
  CHECK(Config::from_properties("client.id=a\\uD83D\\uDE00b\n").get("client.id") ==
        std::string("a\xF0\x9F\x98\x80") + 'b');
  CHECK(Config::from_properties("client.id=\\udbff\\udfff\n").get("client.id") ==
        "\xF4\x8F\xBF\xBF");  // U+10FFFF
  CHECK(Config::from_properties("client.id=\\uD7FF\\uE000\n").get("client.id") == "\xED\x9F\xBF\xEE\x80\x80");
  CHECK(Config::from_properties("client.id=\\uD83D\\\n  \\uDE00\n").get("client.id") ==
        "\xF0\x9F\x98\x80");  // continued
  // A half without its partner has no UTF-8 form: refused, with the line.
  for (const char* text :
       {"client.id=\\uD83D\n", "client.id=\\uD83Dx\n", "client.id=\\uD83D\\u0041\n",
        "client.id=\\uD83D\\uD83D\\uDE00\n", "client.id=\\uDE00\n", "client.id=\\uDE00\\uD83D\n"}) {
    INFO(text);
    const std::string error = error_of([&] { Config::from_properties(std::string("# first\n") + text); });
    CHECK(error.find("line 2") != std::string::npos);
    CHECK(error.find("surrogate") != std::string::npos);
  }
}

TEST_CASE(
    "config: a properties file of another Kafka client: keys kgroup does not load are ignored with a "
    "warning each, as Java warns",
    "[config]") {
  kgroup::test::log_capture log;
  std::vector<std::string> ignored;
  const Config c = Config::from_properties(
      "bootstrap.servers=localhost:9092\n"
      "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "value.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "acks=all\n"
      "security.protocol=PLAINTEXT\n"
      "group.protocol=classic\n"
      "enable.auto.commit=False\n",
      &ignored);
  CHECK(ignored == std::vector<std::string>{"key.deserializer", "value.deserializer", "acks"});
  CHECK(c.get("group.protocol") == "classic");
  CHECK(c.get("enable.auto.commit") == "false");
  // The Java consumer's own keys that mean nothing in C++ are listed once at info; a key that is
  // not the consumer's gets a warning with its line.
  CHECK(log.has(kgroup::LogLevel::info, {"key.deserializer", "value.deserializer"}));
  CHECK_FALSE(log.has_warning({"key.deserializer"}));
  CHECK(log.has_warning({"line 4", "'acks'", "ignored"}));

  // As Java ("supplied but isn't a known config"), an unknown key is ignored with a warning; a
  // near miss of a kgroup key says which one was probably meant.
  log.clear();
  const Config typo =
      Config::from_properties("bootstrap.servers=x:1\nsession.timout.ms=100\nno.such.key=1\n");
  CHECK_FALSE(typo.is_set("session.timeout.ms"));
  CHECK(log.has_warning({"line 2", "'session.timout.ms'", "did you mean 'session.timeout.ms'"}));
  CHECK(log.has_warning({"line 3", "'no.such.key'"}));
  // A bad value of a key kgroup knows is still an error, with the line.
  CHECK(error_of([] { Config::from_properties("auto.offset.reset=sometimes\n"); }).find("line 1") !=
        std::string::npos);

  const Config secured = Config::from_properties(
      "security.protocol=sasl_ssl\nsasl.mechanism=PLAIN\n"
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" "
      "password=\"secret-line\";\n");
  CHECK(secured.get("security.protocol") == "SASL_SSL");
  CHECK(secured.to_string().find("secret-line") == std::string::npos);
}

namespace {

// Every line logged at any level, for "never logged" checks.
std::string everything(const kgroup::test::log_capture& log) {
  std::string out;
  for (const auto& [level, line] : log.lines()) out += line + "\n";
  return out;
}

std::size_t warnings(const kgroup::test::log_capture& log) {
  std::size_t n = 0;
  for (const auto& [level, line] : log.lines()) n += level >= kgroup::LogLevel::warn ? 1 : 0;
  return n;
}

}  // namespace

// Issue 35, item 7: the files users already have. This one is a Java 4.x consumer's, with the keys
// a team's shared file picks up from its producers and Streams apps.
TEST_CASE(
    "config: a Java 4.x consumer.properties loads; other clients' keys are warned about, 4.x keys kgroup "
    "does not act on yet are accepted and said so once",
    "[config]") {
  kgroup::test::log_capture log;
  const std::string file =
      "# see org.apache.kafka.clients.consumer.ConsumerConfig for more details\n"
      "bootstrap.servers=kafka-1:9092,kafka-2:9092\n"
      "group.id=orders-consumer\n"
      "client.id=orders-1\n"
      "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "value.deserializer=io.confluent.kafka.serializers.KafkaAvroDeserializer\n"
      "auto.offset.reset=earliest\n"
      "enable.auto.commit=false\n"
      "isolation.level=read_committed\n"
      "max.poll.records=200\n"
      "# Kafka 4.x\n"
      "metadata.recovery.strategy=rebootstrap\n"
      "metadata.recovery.rebootstrap.trigger.ms=300000\n"
      "enable.metrics.push=true\n"
      "client.dns.lookup=use_all_dns_ips\n"
      "connections.max.idle.ms=540000\n"
      "send.buffer.bytes=131072\n"
      "receive.buffer.bytes=-1\n"
      "socket.connection.setup.timeout.max.ms=30000\n"
      "metrics.recording.level=INFO\n"
      "# shared with the producers and the Streams app\n"
      "acks=all\n"
      "linger.ms=5\n"
      "application.id=orders-app\n"
      "processing.guarantee=exactly_once_v2\n"
      "schema.registry.url=http://registry:8081\n";
  std::vector<std::string> ignored;
  const Config c = Config::from_properties(file, &ignored);
  CHECK(c.get("group.id") == "orders-consumer");
  CHECK(c.get("auto.offset.reset") == "earliest");
  CHECK(c.get_int("max.poll.records") == 200);
  // The 4.x keys load, with their values (validated)...
  CHECK(c.get("metadata.recovery.strategy") == "rebootstrap");
  CHECK(c.get_int("metadata.recovery.rebootstrap.trigger.ms") == 300000);
  CHECK(c.get_bool("enable.metrics.push"));
  CHECK(c.get("client.dns.lookup") == "use_all_dns_ips");
  CHECK(c.get_int("connections.max.idle.ms") == 540000);
  CHECK(c.get_int("send.buffer.bytes") == 131072);
  CHECK(c.get_int("receive.buffer.bytes") == -1);
  CHECK(c.get_int("socket.connection.setup.timeout.max.ms") == 30000);
  // ... and one info line says which of them kgroup does not act on yet.
  CHECK(log.has(kgroup::LogLevel::info, {"not acted on", "socket.connection.setup.timeout.max.ms"}));
  // (Metadata recovery, client telemetry and the connection keys are acted on: issue 35, items 1-3.)
  CHECK_FALSE(log.has(kgroup::LogLevel::info, {"not acted on", "metadata.recovery"}));
  CHECK_FALSE(log.has(kgroup::LogLevel::info, {"not acted on", "enable.metrics.push"}));
  CHECK_FALSE(log.has(kgroup::LogLevel::info, {"not acted on", "connections.max.idle.ms"}));
  CHECK_FALSE(log.has(kgroup::LogLevel::info, {"not acted on", "send.buffer.bytes"}));
  CHECK_FALSE(log.has(kgroup::LogLevel::info, {"not acted on", "client.dns.lookup"}));
  // One warning per key that is not the consumer's, none for the consumer's own.
  CHECK(ignored == std::vector<std::string>{"key.deserializer", "value.deserializer",
                                            "metrics.recording.level", "acks", "linger.ms", "application.id",
                                            "processing.guarantee", "schema.registry.url"});
  INFO(log.problems());
  CHECK(warnings(log) == 5);
  for (const char* key :
       {"acks", "linger.ms", "application.id", "processing.guarantee", "schema.registry.url"}) {
    CHECK(log.has_warning({std::string("'") + key + "'"}));
  }
  CHECK(everything(log).find("registry:8081") == std::string::npos);
  CHECK_NOTHROW(c.validate());

  // The same keys in code: a Java 4.x key is accepted, another client's is refused, clearly.
  Config code;
  code.set("metadata.recovery.strategy", "NONE")
      .set("client.dns.lookup", "resolve_canonical_bootstrap_servers_only");
  CHECK(code.get("metadata.recovery.strategy") == "none");
  for (const char* key :
       {"acks", "linger.ms", "application.id", "processing.guarantee", "schema.registry.url"}) {
    INFO(key);
    CHECK(error_of([&] {
            code.set(key, "x");
          }).find(std::string("unknown configuration key '") + key + "'") != std::string::npos);
  }
  // Their values are checked as Java checks them.
  CHECK(error_of([] {
          Config::from_properties("metadata.recovery.strategy=sometimes\n");
        }).find("line 1: metadata.recovery.strategy") != std::string::npos);
  CHECK(error_of([] {
          Config::from_properties("\nsend.buffer.bytes=-2\n");
        }).find("line 2: send.buffer.bytes") != std::string::npos);
  CHECK(error_of([] {
          Config{{"connections.max.idle.ms", "soon"}};
        }).find("not an integer") != std::string::npos);
  CHECK(error_of([] {
          Config{{"client.dns.lookup", "default"}};
        }).find("use_all_dns_ips") != std::string::npos);
}

// The template Confluent Cloud's console gives Java clients, filled in.
TEST_CASE(
    "config: a Confluent Cloud Java client template loads; its Schema Registry and producer keys are warned "
    "about by name, never with their secret values",
    "[config]") {
  kgroup::test::log_capture log;
  const std::string file =
      "# Required connection configs for Kafka producer, consumer, and admin\n"
      "bootstrap.servers=pkc-abc12.eu-west-1.aws.confluent.cloud:9092\n"
      "security.protocol=SASL_SSL\n"
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
      "username='KAFKAKEY7' password='kafka-SECRET-1';\n"
      "sasl.mechanism=PLAIN\n"
      "# Required for correctness in Apache Kafka clients prior to 2.6\n"
      "client.dns.lookup=use_all_dns_ips\n"
      "\n"
      "# Best practice for higher availability in Apache Kafka clients prior to 3.0\n"
      "session.timeout.ms=45000\n"
      "\n"
      "# Best practice for Kafka producer to prevent data loss\n"
      "acks=all\n"
      "\n"
      "# Required connection configs for Confluent Cloud Schema Registry\n"
      "schema.registry.url=https://psrc-xyz.eu-west-1.aws.confluent.cloud\n"
      "basic.auth.credentials.source=USER_INFO\n"
      "basic.auth.user.info=SRKEY9:sr-SECRET-2\n"
      "schema.registry.basic.auth.user.info=SRKEY9:sr-SECRET-3\n";
  std::vector<std::string> ignored;
  const Config c = Config::from_properties(file, &ignored);
  CHECK(c.get("security.protocol") == "SASL_SSL");
  CHECK(c.get("sasl.mechanism") == "PLAIN");
  CHECK(c.get_int("session.timeout.ms") == 45000);
  CHECK(ignored == std::vector<std::string>{"acks", "schema.registry.url", "basic.auth.credentials.source",
                                            "basic.auth.user.info", "schema.registry.basic.auth.user.info"});
  INFO(log.problems());
  CHECK(warnings(log) == 5);
  CHECK(log.has_warning({"line 13", "'acks'"}));
  CHECK(log.has_warning({"line 18", "'basic.auth.user.info'"}));
  const std::string logged = everything(log) + c.to_string();
  for (const char* secret : {"kafka-SECRET-1", "sr-SECRET-2", "sr-SECRET-3", "SRKEY9", "psrc-xyz"}) {
    INFO(secret);
    CHECK(logged.find(secret) == std::string::npos);
  }
  CHECK_NOTHROW(c.validate());
  // In code the same keys are refused.
  Config code;
  for (const char* key : {"schema.registry.url", "basic.auth.credentials.source", "basic.auth.user.info"}) {
    INFO(key);
    CHECK(error_of([&] { code.set(key, "x"); }).find("unknown configuration key") != std::string::npos);
  }
}

TEST_CASE(
    "config: a line that is not a property (a value split from its key) is warned about without its text",
    "[config]") {
  // A JAAS line broken without a continuation backslash: the second half reads as a key.
  kgroup::test::log_capture log;
  std::vector<std::string> ignored;
  (void)Config::from_properties(
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" "
      "password=\n"
      "    \"hunter2\";\n",
      &ignored);
  CHECK(ignored == std::vector<std::string>{"(line 2)"});
  CHECK(log.has_warning({"line 2", "not a property name"}));
  CHECK(everything(log).find("hunter2") == std::string::npos);
}

// librdkafka's names for Java's keys, as its .conf files and the Confluent librdkafka template
// spell them.
TEST_CASE(
    "config: librdkafka's spellings are aliases of the Java keys, in files and in code; the last one set "
    "wins",
    "[config]") {
  kgroup::test::log_capture log;
  const std::string file =
      "# librdkafka consumer configuration\n"
      "bootstrap.servers=broker:9092\n"
      "group.id=g\n"
      "security.protocol=SASL_SSL\n"
      "sasl.mechanisms=SCRAM-SHA-512\n"
      "sasl.username=alice\n"
      "sasl.password=alice-SECRET\n"
      "fetch.wait.max.ms=250\n"
      "fetch.message.max.bytes=2097152\n"
      "enable.ssl.certificate.verification=false\n"
      "socket.keepalive.enable=true\n"
      "enable.partition.eof=true\n";
  std::vector<std::string> ignored;
  const Config c = Config::from_properties(file, &ignored);
  CHECK(c.get("sasl.mechanism") == "SCRAM-SHA-512");
  CHECK(c.get_int("fetch.max.wait.ms") == 250);
  CHECK(c.get_int("max.partition.fetch.bytes") == 2097152);
  CHECK_FALSE(c.get_bool("enable.ssl.certificate.verification"));
  CHECK(c.get_bool("socket.keepalive.enable"));
  // An alias reads and reports as the Java key it names.
  CHECK(c.get("fetch.wait.max.ms") == "250");
  CHECK(c.is_set("fetch.wait.max.ms"));
  CHECK(c.to_string().find("fetch.max.wait.ms=250") != std::string::npos);
  CHECK(c.to_string().find("fetch.wait.max.ms") == std::string::npos);
  CHECK(ignored == std::vector<std::string>{"enable.partition.eof"});
  INFO(log.problems());
  CHECK(warnings(log) == 1);
  CHECK(log.has_warning({"line 12", "'enable.partition.eof'"}));
  CHECK(everything(log).find("alice-SECRET") == std::string::npos);

  // In code as well; set in both spellings, the last one wins (as a key repeated in a file).
  Config code;
  code.set("fetch.max.wait.ms", "100").set("fetch.wait.max.ms", "200");
  CHECK(code.get_int("fetch.max.wait.ms") == 200);
  code.set("fetch.max.wait.ms", "300");
  CHECK(code.get_int("fetch.max.wait.ms") == 300);
  code.set("sasl.mechanisms", "plain");
  CHECK(code.get("sasl.mechanism") == "PLAIN");
  CHECK(error_of([&] { code.set("fetch.message.max.bytes", "-1"); }).find("max.partition.fetch.bytes") !=
        std::string::npos);

  // In a file, both spellings with different values: the later line wins, and a warning names both
  // keys (never a value).
  log.clear();
  const Config both = Config::from_properties(
      "fetch.wait.max.ms=250\nfetch.max.wait.ms=100\n"
      "sasl.password=one-SECRET\nsasl.password=two-SECRET\n");
  CHECK(both.get_int("fetch.max.wait.ms") == 100);
  CHECK(log.has_warning({"line 2", "fetch.max.wait.ms", "fetch.wait.max.ms", "line 1"}));
  CHECK(everything(log).find("SECRET") == std::string::npos);
}

TEST_CASE("config: load() reads a file, and names it when it cannot", "[config]") {
  const std::string path = "kgroup-test-config.properties";
  {
    std::ofstream out(path);
    out << "bootstrap.servers=localhost:9092\ngroup.id=from-file\n";
  }
  const Config c = Config::load(path);
  CHECK(c.get("group.id") == "from-file");
  std::remove(path.c_str());
  CHECK(error_of([&] { Config::load(path); }).find("cannot read the properties file 'kgroup-test-config.properties'") !=
        std::string::npos);
}

TEST_CASE("config: to_string() lists what was set, in key order", "[config]") {
  Config c{{"group.id", "g"}, {"bootstrap.servers", "h:1"}};
  CHECK(c.to_string() == "bootstrap.servers=h:1, group.id=g");
}

TEST_CASE(
    "config: group.protocol=consumer refuses the classic protocol's keys, saying why, and validates without them",
    "[config][kip848]") {
  const auto validated = [](std::initializer_list<std::pair<std::string, std::string>> extra) {
    return error_of([&] {
      Config c{{"bootstrap.servers", "localhost:9092"}, {"group.id", "g"}};
      for (const auto& [k, v] : extra) c.set(k, v);
      c.validate();
    });
  };
  // The values parse (any case, as Java), and a properties file with them loads.
  Config c;
  c.set("group.protocol", "CONSUMER");
  CHECK(c.get("group.protocol") == "consumer");
  CHECK(Config::from_properties("group.protocol=consumer\ngroup.remote.assignor=uniform\n")
            .get("group.remote.assignor") == "uniform");
  CHECK(error_of([&] { c.set("group.protocol", "streams"); }).find("classic,consumer") != std::string::npos);

  // Keys the broker owns under KIP-848 are refused, each with its reason.
  const auto session = validated({{"group.protocol", "consumer"}, {"session.timeout.ms", "10000"}});
  CHECK(session.find("session.timeout.ms cannot be set with group.protocol=consumer") != std::string::npos);
  CHECK(session.find("group.consumer.session.timeout.ms") != std::string::npos);
  const auto heartbeat = validated({{"group.protocol", "consumer"}, {"heartbeat.interval.ms", "1000"}});
  CHECK(heartbeat.find("heartbeat.interval.ms cannot be set") != std::string::npos);
  CHECK(heartbeat.find("group.consumer.heartbeat.interval.ms") != std::string::npos);
  const auto strategy =
      validated({{"group.protocol", "consumer"}, {"partition.assignment.strategy", "range"}});
  CHECK(strategy.find("partition.assignment.strategy cannot be set") != std::string::npos);
  CHECK(strategy.find("group.remote.assignor") != std::string::npos);

  // Without them, it validates, with or without a broker-side assignor.
  CHECK(validated({{"group.protocol", "consumer"}, {"group.remote.assignor", "uniform"}}).empty());
  CHECK(validated({{"group.protocol", "consumer"}}).empty());

  // group.remote.assignor means nothing to the classic protocol: refused there (as Java).
  const auto remote = validated({{"group.remote.assignor", "uniform"}});
  CHECK(remote.find("group.remote.assignor applies only with group.protocol=consumer") != std::string::npos);
  // The classic protocol, explicit or by default, validates as before.
  CHECK(validated({{"group.protocol", "classic"}, {"session.timeout.ms", "10000"}}).empty());
  CHECK(validated({}).empty());
}

TEST_CASE(
    "config: auto.offset.reset=by_duration:<ISO-8601 duration> (KIP-1106), checked as Java's Duration.parse "
    "reads it, no negative duration",
    "[config]") {
  using std::chrono::milliseconds;
  CHECK(kgroup::base::parse_iso8601_duration("PT1H") == milliseconds(3'600'000));
  CHECK(kgroup::base::parse_iso8601_duration("P1DT12H") == milliseconds(129'600'000));
  CHECK(kgroup::base::parse_iso8601_duration("p2d") == milliseconds(172'800'000));
  CHECK(kgroup::base::parse_iso8601_duration("PT1M30.25S") == milliseconds(90'250));
  CHECK(kgroup::base::parse_iso8601_duration("PT0,123456789S") == milliseconds(123));
  CHECK(kgroup::base::parse_iso8601_duration("PT0S") == milliseconds(0));
  for (const char* bad :
       {"", "P", "PT", "P1DT", "1H", "PT1H1H", "PT1M1H", "PT-1H", "-PT1H", "+PT1H", "PT1.5H", "P1W", "P1Y",
        "PT1.S", "PT0.1234567890S", "PT1", "PT1H ", "P99999999999999999999D"}) {
    INFO(bad);
    CHECK_FALSE(kgroup::base::parse_iso8601_duration(bad).has_value());
  }

  Config c;
  c.set("auto.offset.reset", "By_Duration:PT30M");
  CHECK(c.get("auto.offset.reset") == "by_duration:PT30M");
  const auto err = error_of([&] { c.set("auto.offset.reset", "by_duration:-PT1H"); });
  CHECK(err.find("non-negative ISO-8601 duration") != std::string::npos);
  CHECK_FALSE(error_of([&] { c.set("auto.offset.reset", "by_duration:"); }).empty());
  CHECK(c.get("auto.offset.reset") == "by_duration:PT30M");  // a refused value changes nothing
  const auto file = Config::from_properties("auto.offset.reset=by_duration:P1D\n");
  CHECK(file.get("auto.offset.reset") == "by_duration:P1D");
}
