// manual_commit: at-least-once delivery with manual commits (enable.auto.commit=false), and the
// errors a poll loop handles.
//
// - Commit after processing: a committed record is not delivered to the group again. A crash
//   between processing and commit delivers the batch again (at least once); committing before
//   processing would lose it instead (at most once).
// - The next-offset rule: the offset to commit is that of the next record to read, the last
//   processed one + 1. batch.next_offsets() is exactly that for each partition the batch advanced,
//   with the leader epoch of the last record (the next reader validates it, KIP-320).
// - Errors (docs/errors.md): a retriable one (a timeout), or rebalance_in_progress (not retriable
//   in Kafka's table, but the commit can succeed after the next poll()) keeps the offsets to
//   commit; commit_failed means the group moved on: the partitions may have a new owner, so drop
//   those offsets (their records are delivered again there); a PartitionError names the
//   partition and offset to act on; anything else is fatal or a bug: stop.
//
// Usage: manual_commit <bootstrap.servers> <topic> [--max-records N] [--idle-ms N] [-X key=value]...
// Prints `event key=value...` lines (record, commit, error, done); exits 0 after N records, or
// after N ms (default 10000) without one.
#include <kgroup/consumer.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

using steady = std::chrono::steady_clock;

int usage() {
  std::cerr << "usage: manual_commit <bootstrap.servers> <topic> [--max-records N] [--idle-ms N] [-X "
               "key=value]...\n";
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) return usage();
  kgroup::Config config{{"bootstrap.servers", argv[1]},
                        {"group.id", "manual-commit"},
                        {"enable.auto.commit", "false"},
                        {"auto.offset.reset", "earliest"}};
  long long max_records = -1;
  std::chrono::milliseconds idle(10000);
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
  consumer.subscribe({argv[2]});
  kgroup::OffsetMap to_commit;  // processed, not committed yet
  const auto commit = [&] {
    consumer.commit_sync(to_commit);
    for (const auto& [tp, at] : to_commit)
      std::cout << "commit partition=" << tp.topic << '-' << tp.partition << " offset=" << at.offset << "\n";
    to_commit.clear();
  };
  long long processed = 0;
  auto last_record = steady::now();
  // Until N records are processed and committed, or nothing came for a while.
  while ((max_records < 0 || processed < max_records || !to_commit.empty()) &&
         steady::now() - last_record < idle) {
    try {
      const auto batch = consumer.poll(std::chrono::milliseconds(200));
      for (const auto& r : batch) {  // the processing: one line per record
        std::cout << "record partition=" << r.topic << '-' << r.partition << " offset=" << r.offset << "\n";
        ++processed;
        last_record = steady::now();
      }
      for (const auto& [tp, next] : batch.next_offsets()) to_commit[tp] = next;
      if (!to_commit.empty()) commit();
    } catch (const kgroup::PartitionError& e) {
      std::cout << "error error=" << kgroup::error_name(e.code()) << " partition=" << e.partition().topic
                << '-' << e.partition().partition << " offset=" << e.offset() << "\n";
      if (e.code() == kgroup::client_errc::offset_out_of_range)  // your reset policy
        consumer.seek_to_beginning({e.partition()});
      else if (e.code() == kgroup::client_errc::corrupt_record)  // skip it (and keep it somewhere)
        consumer.seek(e.partition(), e.offset() + 1);
    } catch (const kgroup::Error& e) {
      std::cout << "error error=" << kgroup::error_name(e.code()) << " retriable=" << e.is_retriable()
                << " fatal=" << e.is_fatal() << "\n";
      if (e.code() == kgroup::client_errc::commit_failed) {
        to_commit.clear();
      } else if (!e.is_retriable() && e.code() != kgroup::kafka_errc::rebalance_in_progress) {
        return 1;  // fatal, or a bug; the destructor closes the Consumer
      }            // else poll() again (it completes a rebalance), then commit what is still owned
    }
  }
  consumer.close();
  std::cout << "done records=" << processed << "\n";
}
