// static_member: static group membership (group.instance.id, KIP-345, Kafka 2.3+).
//
// - A static member keeps its place in the group across restarts: close() sends no LeaveGroup,
//   and a restart with the same group.instance.id within session.timeout.ms gets the same
//   partitions back at once, with no rebalance: the other members go on undisturbed. A rolling
//   restart of N dynamic members costs about 2N rebalances; of static members, none.
// - The price: a static member that really goes away keeps its partitions, unread, until
//   session.timeout.ms passes. So set it longer than a restart takes (here 2 minutes; the broker's
//   group.max.session.timeout.ms must allow it) and shorter than the delay you can accept.
// - Every process needs its own id (a host name, a pod name): a second process with the same id
//   fences the first, whose poll() then throws kafka_errc::fenced_instance_id (fatal).
//
// Usage: static_member <bootstrap.servers> <topic> <group.instance.id> [--max-records N] [--idle-ms N]
//        [-X key=value]...
// Prints `event key=value...` lines (member, assigned, record, error, done); exits 0 after N
// records, or N ms (default 30000) without one.
#include <kgroup/consumer.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using steady = std::chrono::steady_clock;
const auto started = steady::now();

long long ms_since_start() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started).count();
}

struct Announce : kgroup::ConsumerRebalanceListener {
  explicit Announce(kgroup::Consumer& c) : consumer(c) {}
  kgroup::Consumer& consumer;
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& partitions) override {
    const auto member = consumer.group_metadata();
    std::cout << "member instance=" << member.group_instance_id.value_or("")
              << " member_id=" << member.member_id << " generation=" << member.generation_id
              << " after_ms=" << ms_since_start() << "\n";
    for (const auto& tp : partitions)
      std::cout << "assigned partition=" << tp.topic << '-' << tp.partition << "\n";
  }
};

int usage() {
  std::cerr
      << "usage: static_member <bootstrap.servers> <topic> <group.instance.id> [options], see the source\n";
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 4 || argc % 2 == 1) return usage();
  kgroup::Config config{{"bootstrap.servers", argv[1]},  {"group.id", "static-member"},
                        {"group.instance.id", argv[3]},  {"session.timeout.ms", "120000"},
                        {"enable.auto.commit", "false"}, {"auto.offset.reset", "earliest"}};
  long long max_records = -1;
  std::chrono::milliseconds idle(30000);
  for (int i = 4; i < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--max-records") {
      max_records = std::stoll(value);
    } else if (flag == "--idle-ms") {
      idle = std::chrono::milliseconds(std::stoll(value));
    } else if (flag == "-X" && value.find('=') != std::string::npos) {  // any key, e.g. group.id=G
      config.set(value.substr(0, value.find('=')), value.substr(value.find('=') + 1));
    } else {
      return usage();
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, into a pipe too

  kgroup::Consumer consumer(config);
  consumer.subscribe({argv[2]}, std::make_shared<Announce>(consumer));
  long long records = 0;
  for (auto last = steady::now();
       (max_records < 0 || records < max_records) && steady::now() - last < idle;) {
    try {
      const auto batch = consumer.poll(std::chrono::milliseconds(200));
      for (const auto& r : batch) {
        std::cout << "record partition=" << r.topic << '-' << r.partition << " offset=" << r.offset << "\n";
        ++records;
        last = steady::now();
      }
      if (!batch.empty()) consumer.commit_sync();
    } catch (const kgroup::Error& e) {
      std::cout << "error error=" << kgroup::error_name(e.code()) << " fatal=" << e.is_fatal() << "\n";
      if (e.is_fatal()) return 1;  // fenced_instance_id: another process runs with this id
    }
  }
  consumer.close();  // no LeaveGroup: the partitions wait session.timeout.ms for this member
  std::cout << "done records=" << records << "\n";
}
