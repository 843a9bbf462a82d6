// cooperative_listener: cooperative rebalancing (partition.assignment.strategy=cooperative-sticky,
// KIP-429) with a rebalance listener that commits on revoke.
//
// - Cooperative: a rebalance takes away only the partitions that move; the others are consumed
//   throughout. on_partitions_assigned() gets only the added partitions.
// - on_partitions_revoked(): a partition's new owner starts from its committed offset and gets it
//   only after this callback returns, so commit what was processed here. If that commit fails
//   (the group may be rebalancing again), what came after the last commit is read again there.
// - on_partitions_lost(): the membership expired (session or poll timeout); another member may
//   own the partitions already. Do not commit: it could overwrite the new owner's progress.
// - The callbacks run on the polling thread inside poll() and close(), so they may use the
//   Consumer and the program's state without locks. close() revokes (so commits) the rest.
//
// Usage: cooperative_listener <bootstrap.servers> <topic> [--max-records N] [-X key=value]...
// Prints `event key=value...` lines; exits 0 after N records, or 30 s without one.
#include <kgroup/consumer.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using steady = std::chrono::steady_clock;

struct CommitOnRevoke : kgroup::ConsumerRebalanceListener {
  explicit CommitOnRevoke(kgroup::Consumer& c) : consumer(c) {}
  kgroup::Consumer& consumer;
  kgroup::OffsetMap processed;  // per partition: the offset after the last processed record
  static std::string name(const kgroup::TopicPartition& p) {
    return p.topic + "-" + std::to_string(p.partition);
  }
  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& partitions) override {
    for (const auto& tp : partitions) std::cout << "assigned partition=" << name(tp) << "\n";
  }
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& partitions) override {
    kgroup::OffsetMap done;  // what was processed of them
    for (const auto& tp : partitions) {
      std::cout << "revoked partition=" << name(tp) << "\n";
      if (auto it = processed.find(tp); it != processed.end()) done.insert(processed.extract(it));
    }
    try {  // uncaught, poll() or close() would rethrow it once the rebalance is done
      if (!done.empty()) consumer.commit_sync(done);
      for (const auto& [tp, at] : done)
        std::cout << "commit partition=" << name(tp) << " offset=" << at.offset << "\n";
    } catch (const kgroup::Error& e) {
      std::cout << "commit_error error=" << kgroup::error_name(e.code()) << "\n";
    }
  }
  void on_partitions_lost(const std::vector<kgroup::TopicPartition>& partitions) override {
    for (const auto& tp : partitions) std::cout << "lost partition=" << name(tp) << "\n";
    for (const auto& tp : partitions) processed.erase(tp);  // not committed: read again by the new owner
  }
};

int usage() {
  std::cerr << "usage: cooperative_listener <bootstrap.servers> <topic> [options], see the source\n";
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) return usage();
  kgroup::Config config{{"bootstrap.servers", argv[1]},
                        {"group.id", "cooperative-listener"},
                        {"partition.assignment.strategy", "cooperative-sticky"},
                        {"enable.auto.commit", "false"},
                        {"auto.offset.reset", "earliest"}};
  long long max = -1;  // records; -1: no limit
  const std::chrono::seconds idle(30);
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--max-records") {
      max = std::stoll(value);
    } else if (flag == "-X" && value.find('=') != std::string::npos) {  // any key, e.g. group.id=G
      config.set(value.substr(0, value.find('=')), value.substr(value.find('=') + 1));
    } else {
      return usage();
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, into a pipe too
  kgroup::Consumer consumer(config);
  auto listener = std::make_shared<CommitOnRevoke>(consumer);
  consumer.subscribe({argv[2]}, listener);
  long long records = 0;
  for (auto last = steady::now(); (max < 0 || records < max) && steady::now() - last < idle;) {
    const auto batch = consumer.poll(std::chrono::milliseconds(200));
    for (const auto& r : batch) {
      std::cout << "record partition=" << r.topic << '-' << r.partition << " offset=" << r.offset << "\n";
      ++records;
      last = steady::now();
    }
    for (const auto& [tp, next] : batch.next_offsets()) listener->processed[tp] = next;
    if (!batch.empty()) consumer.commit_async(batch.next_offsets());  // as it goes, between rebalances
  }
  consumer.close();  // revokes what is left: on_partitions_revoked commits it
  std::cout << "done records=" << records << "\n";
}
