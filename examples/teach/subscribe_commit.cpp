// subscribe_commit: the basic consumer loop. Join a group, process each batch, commit it, and shut
// down cleanly on Ctrl-C (SIGINT) or SIGTERM.
//
// - commit_async() after each batch keeps the loop fast (its callback runs later, on this thread,
//   inside poll() or commit_sync()); one commit_sync() at the end makes sure the last positions
//   land before the member leaves, so the next owner of each partition starts right after them.
// - No Consumer call is async-signal-safe, so no signal handler calls one. SIGINT and SIGTERM are
//   blocked before the Consumer starts its background thread (threads inherit the mask) and taken
//   by sigtimedwait() in a thread of our own, which calls wakeup(), the one Consumer call any
//   thread may make: the poll() blocked in the main thread then throws client_errc::woken_up.
// - close() leaves the group, so the partitions move to the other members at once.
// Usage: subscribe_commit <bootstrap.servers> <topic> [--max-records N] [-X key=value]...
// Prints `event key=value...` lines (record, commit_error, signal, committed, error, closed);
// exits 0 after a signal or N records.
#include <kgroup/consumer.hpp>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

int usage() {
  std::cerr << "usage: subscribe_commit <bootstrap.servers> <topic> [--max-records N] [-X key=value]...\n";
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) return usage();
  kgroup::Config config{{"bootstrap.servers", argv[1]},
                        {"group.id", "subscribe-commit"},
                        {"enable.auto.commit", "false"},  // this program commits itself
                        {"auto.offset.reset", "earliest"}};
  long long max_records = -1;  // -1: until a signal
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--max-records") {
      max_records = std::stoll(value);
    } else if (flag == "-X" && value.find('=') != std::string::npos) {  // any key, e.g. group.id=G
      config.set(value.substr(0, value.find('=')), value.substr(value.find('=') + 1));
    } else {
      return usage();
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, into a pipe too

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts

  kgroup::Consumer consumer(config);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 100'000'000};  // how soon `done` is noticed
    while (!done) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) return consumer.wakeup();
    }
  });

  long long processed = 0;
  int exit_code = 0;
  try {
    consumer.subscribe({argv[2]});
    while (max_records < 0 || processed < max_records) {
      const auto batch = consumer.poll(std::chrono::milliseconds(500));
      for (const auto& r : batch) {  // the processing: one line per record
        std::cout << "record partition=" << r.topic << '-' << r.partition << " offset=" << r.offset << "\n";
        ++processed;
      }
      if (batch.empty()) continue;
      consumer.commit_async([](const kgroup::OffsetMap&, std::error_code ec) {
        if (ec) std::cout << "commit_error error=" << kgroup::error_name(ec) << "\n";
      });
    }
  } catch (const kgroup::Error& e) {
    if (e.code() != kgroup::client_errc::woken_up) exit_code = 1;  // see manual_commit.cpp
    std::cout << (exit_code ? "error error=" + kgroup::error_name(e.code()) : "signal") << "\n";
  }
  done = true;
  watcher.join();
  try {
    consumer.commit_sync();  // what commit_async() had not finished
    for (const auto& [tp, at] : consumer.committed(consumer.assignment()))
      std::cout << "committed partition=" << tp.topic << '-' << tp.partition << " offset=" << at.offset
                << "\n";
  } catch (const kgroup::Error& e) {  // e.g. commit_failed: the group moved on meanwhile
    std::cout << "commit_error error=" << kgroup::error_name(e.code()) << "\n";
  }
  consumer.close();
  std::cout << "closed records=" << processed << "\n";
  return exit_code;
}
