// assign_seek: read a range of one partition without a consumer group, then stop.
//
// - assign() takes partitions directly: no group.id, no rebalances, no listener, no commits (they
//   need a group.id). The program decides where to read, with seek().
// - beginning_offsets() and end_offsets() ask the brokers what the log holds now: retention has
//   deleted what is below the beginning, and the end is the offset the next record will get.
// - offsets_for_times() finds the first offset whose record timestamp is at or after a time ("from
//   9:00 this morning"); it is empty when no record is that recent.
// - position() is the offset the next poll() reads from. Looping until it reaches the end seen at
//   the start stops even where offsets have gaps (compacted topics, transaction markers).
//
// Usage: assign_seek <bootstrap.servers> <topic> [--partition P] [--from-offset N | --from-time MS]
//        [--count N] [-X key=value]...
// Prints `event key=value...` lines (range, found, seek, record, error, done); exits 0 once it
// has read up to the end offset it saw at the start, or N records.
#include <kgroup/consumer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

int usage() {
  std::cerr << "usage: assign_seek <bootstrap.servers> <topic> [options], see the source\n";
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) return usage();
  kgroup::Config config{{"bootstrap.servers", argv[1]}};  // no group.id: nothing to join
  std::int32_t partition = 0;
  std::int64_t from_offset = -1, from_time = -1, count = -1;
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--partition") {
      partition = std::stoi(value);
    } else if (flag == "--from-offset" || flag == "--from-time" || flag == "--count") {
      (flag == "--count" ? count : flag == "--from-time" ? from_time : from_offset) = std::stoll(value);
    } else if (flag == "-X" && value.find('=') != std::string::npos) {
      config.set(value.substr(0, value.find('=')), value.substr(value.find('=') + 1));
    } else {
      return usage();
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, into a pipe too

  try {
    kgroup::Consumer consumer(config);
    const kgroup::TopicPartition tp{argv[2], partition};
    const std::string name = tp.topic + '-' + std::to_string(tp.partition);
    consumer.assign({tp});
    const std::int64_t begin = consumer.beginning_offsets({tp}).at(tp),
                       end = consumer.end_offsets({tp}).at(tp);
    std::cout << "range partition=" << name << " beginning=" << begin << " end=" << end << "\n";

    std::int64_t start = from_offset >= 0 ? std::clamp(from_offset, begin, end) : begin;
    if (from_time >= 0) {
      const auto found = consumer.offsets_for_times({{tp, from_time}}).at(tp);
      std::cout << "found partition=" << name << " timestamp=" << from_time
                << " offset=" << (found ? found->offset : -1) << "\n";  // -1: no record that recent
      start = found ? found->offset : end;
    }
    const std::int64_t stop = count >= 0 ? std::min(end, start + count) : end;
    consumer.seek(tp, start);
    std::cout << "seek partition=" << name << " offset=" << start << " stop=" << stop << "\n";

    long long records = 0;
    while (consumer.position(tp) < stop) {
      for (const auto& r : consumer.poll(std::chrono::milliseconds(200))) {
        if (r.offset >= stop) break;
        std::cout << "record partition=" << name << " offset=" << r.offset << " timestamp=" << r.timestamp
                  << "\n";
        ++records;
      }
    }
    consumer.close();
    std::cout << "done records=" << records << "\n";
  } catch (const kgroup::Error& e) {  // e.g. the topic does not exist: UNKNOWN_TOPIC_OR_PARTITION
    std::cout << "error error=" << kgroup::error_name(e.code()) << " message=" << e.what() << "\n";
    return 1;
  }
}
