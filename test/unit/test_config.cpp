// Config: strict keys in code (did-you-mean), case-insensitive booleans and enums, Java assignor
// class names, Java .properties files (syntax, keys of other clients skipped with one warning,
// unsupported security refused), and the redacted description logged at startup.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kgroup/config.hpp"
#include "kgroup/error.hpp"

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

TEST_CASE("config: a properties file of another Kafka client: its keys are skipped, typos and unsupported "
          "security are refused",
          "[config]") {
  std::vector<std::string> ignored;
  const Config c = Config::from_properties(
      "bootstrap.servers=localhost:9092\n"
      "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "value.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "client.dns.lookup=use_all_dns_ips\n"
      "acks=all\n"
      "security.protocol=PLAINTEXT\n"
      "ssl.truststore.location=/etc/kafka/truststore.jks\n"
      "group.protocol=classic\n"
      "enable.auto.commit=False\n",
      &ignored);
  CHECK(ignored == std::vector<std::string>{"key.deserializer", "value.deserializer", "client.dns.lookup", "acks",
                                            "ssl.truststore.location"});
  CHECK(c.get("group.protocol") == "classic");
  CHECK(c.get("enable.auto.commit") == "false");

  // A near miss of a kgroup key is a typo, not another client's key.
  const auto typo = error_of([] { Config::from_properties("bootstrap.servers=x:1\nsession.timout.ms=100\n"); });
  CHECK(typo.find("line 2") != std::string::npos);
  CHECK(typo.find("did you mean 'session.timeout.ms'") != std::string::npos);
  CHECK(error_of([] { Config::from_properties("no.such.key=1\n"); }).find("unknown configuration key") !=
        std::string::npos);
  // Security the file asks for is never dropped silently: Java's stores cannot be read, so a
  // secured file that names them is refused (naming the keys to use).
  const auto stores = error_of([] {
    Config::from_properties("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n"
                            "ssl.truststore.password=changeit\n");
  });
  CHECK(stores.find("line 2: ssl.truststore.location") != std::string::npos);
  CHECK(stores.find("ssl.ca.location") != std::string::npos);
  CHECK(stores.find("changeit") == std::string::npos);
  const Config secured = Config::from_properties(
      "security.protocol=sasl_ssl\nsasl.mechanism=PLAIN\n"
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" "
      "password=\"secret-line\";\n");
  CHECK(secured.get("security.protocol") == "SASL_SSL");
  CHECK(secured.to_string().find("secret-line") == std::string::npos);
  CHECK(error_of([] { Config::from_properties("auto.offset.reset=sometimes\n"); }).find("line 1") !=
        std::string::npos);
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
