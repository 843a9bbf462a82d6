// kgroup-demo: starts an embedded mock Kafka cluster and shows what kgroup sees of it.
//
// For now (the foundation) it connects with the public describe_cluster() call: bootstrap, the
// API versions kgroup negotiates with every broker, and the cluster's topics and partitions. The
// scripted consumer-group story arrives with the membership issue.
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/core.h>

#include "kgroup/cluster.hpp"
#include "kgroup/error.hpp"
#include "mock_cluster.hpp"

namespace {

void usage() {
  std::puts(
      "usage: kgroup-demo [--brokers N] [--partitions P] [--records R]\n"
      "  Starts a mock Kafka cluster (librdkafka's) on loopback with topic 'orders',\n"
      "  then prints what kgroup negotiates with each broker and the cluster metadata.");
}

}  // namespace

int main(int argc, char** argv) {
  int brokers = 3;
  int partitions = 12;
  long records = 1200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--brokers" && (v = next())) {
      brokers = std::atoi(v);
    } else if (a == "--partitions" && (v = next())) {
      partitions = std::atoi(v);
    } else if (a == "--records" && (v = next())) {
      records = std::atol(v);
    } else {
      usage();
      return 2;
    }
  }
  if (brokers < 1 || partitions < 1 || records < 0) {
    usage();
    return 2;
  }
  try {
    fmt::print("Starting a mock Kafka cluster: {} brokers, topic 'orders' with {} partitions...\n", brokers,
               partitions);
    kgroup::test::mock_cluster cluster(brokers);
    cluster.create_topic("orders", partitions);
    if (records > 0) cluster.produce("orders", records, "lz4");
    fmt::print("bootstrap.servers={}\n\n", cluster.bootstrap_servers());

    kgroup::Config config{{"bootstrap.servers", cluster.bootstrap_servers()}, {"client.id", "kgroup-demo"}};
    const kgroup::ClusterInfo info = kgroup::describe_cluster(config, std::chrono::seconds(20));

    fmt::print("Cluster {} (controller {})\n", info.cluster_id.empty() ? "?" : info.cluster_id, info.controller_id);
    for (const auto& b : info.brokers) {
      fmt::print("\nBroker {} at {}:{}{} - {}\n", b.node_id, b.host, b.port, b.rack ? " rack " + *b.rack : "",
                 b.reachable ? "reachable" : "UNREACHABLE");
      if (b.api_versions.empty()) continue;
      fmt::print("  {:<22} {:>10} {:>10} {:>8}\n", "API", "broker", "kgroup", "chosen");
      for (const auto& v : b.api_versions) {
        std::string broker = v.broker_min < 0 ? "-" : fmt::format("{}-{}", v.broker_min, v.broker_max);
        std::string chosen = v.chosen < 0 ? "none" : fmt::format("v{}", v.chosen);
        fmt::print("  {:<22} {:>10} {:>10} {:>8}\n", v.name, broker, fmt::format("{}-{}", v.client_min, v.client_max),
                   chosen);
      }
    }
    fmt::print("\nTopics:\n");
    for (const auto& t : info.topics) {
      fmt::print("  {} ({} partitions{})\n", t.name, t.partitions.size(),
                 t.error_code ? ", error " + kgroup::kafka_error_name(t.error_code) : "");
      for (const auto& p : t.partitions) {
        fmt::print("    partition {:>3}  leader {}  replicas {}  isr {}\n", p.partition, p.leader, p.replicas.size(),
                   p.isr.size());
      }
    }
    fmt::print("\nDone.\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgroup-demo: %s\n", e.what());
    return 1;
  }
  return 0;
}
