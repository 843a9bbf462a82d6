// cooperative_listener: cooperative rebalancing (partition.assignment.strategy=cooperative-sticky,
// KIP-429) with a rebalance listener that commits on revoke.
//
// - Cooperative: a rebalance takes away only the partitions that move; the others are consumed
//   throughout. on_partitions_assigned() gets only the added partitions.
// - on_partitions_revoked(): a partition's new owner starts from its committed offset and gets it
//   only after this callback returns, so commit what was processed here: nothing is read twice.
// - on_partitions_lost(): the membership expired (session or poll timeout); another member may
//   own the partitions already. Do not commit: it could overwrite the new owner's progress.
// - The callbacks run on the polling thread inside poll() and close(), so they may use the
//   Consumer and the program's state without locks. close() revokes (so commits) the rest.
// Only the listener commits here; a real program also commits as it goes (manual_commit.cpp).
//
// Usage: cooperative_listener <bootstrap.servers> <topic> [--max-records N] [--idle-ms N] [-X key=value]...
// Prints `event key=value...` lines (assigned, revoked, lost, record, commit, done); exits 0 after
// N records, or N ms (default 30000) without one.
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

  void on_partitions_assigned(const std::vector<kgroup::TopicPartition>& partitions) override {
    for (const auto& tp : partitions)
      std::cout << "assigned partition=" << tp.topic << '-' << tp.partition << "\n";
  }
  void on_partitions_revoked(const std::vector<kgroup::TopicPartition>& partitions) override {
    kgroup::OffsetMap done;  // what was processed of them
    for (const auto& tp : partitions) {
      std::cout << "revoked partition=" << tp.topic << '-' << tp.partition << "\n";
      if (auto it = processed.find(tp); it != processed.end()) done.insert(processed.extract(it));
    }
    if (!done.empty()) consumer.commit_sync(done);  // if it throws, poll() or close() rethrows it
    for (const auto& [tp, at] : done)
      std::cout << "commit partition=" << tp.topic << '-' << tp.partition << " offset=" << at.offset << "\n";
  }
  void on_partitions_lost(const std::vector<kgroup::TopicPartition>& partitions) override {
    for (const auto& tp : partitions) {
      std::cout << "lost partition=" << tp.topic << '-' << tp.partition << "\n";
      processed.erase(tp);  // their records will be delivered again to the new owner
    }
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
  long long max_records = -1;
  std::chrono::milliseconds idle(30000);
  for (int i = 3; i < argc; i += 2) {
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
  auto listener = std::make_shared<CommitOnRevoke>(consumer);
  consumer.subscribe({argv[2]}, listener);
  long long records = 0;
  for (auto last = steady::now();
       (max_records < 0 || records < max_records) && steady::now() - last < idle;) {
    const auto batch = consumer.poll(std::chrono::milliseconds(200));
    for (const auto& r : batch) {
      std::cout << "record partition=" << r.topic << '-' << r.partition << " offset=" << r.offset << "\n";
      ++records;
      last = steady::now();
    }
    for (const auto& [tp, next] : batch.next_offsets()) listener->processed[tp] = next;
  }
  consumer.close();  // revokes what is left: on_partitions_revoked commits it
  std::cout << "done records=" << records << "\n";
}
