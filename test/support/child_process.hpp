// A program under test in a child process (kgroup-consume, the teaching examples): started with
// default signal dispositions and an empty mask, as from a shell, its stdout read line by line as
// it arrives and its stdout and stderr kept for checks and failure messages.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kgroup::test {

class child_process {
 public:
  // Called on the stdout reader thread, with lock() held, for each line (without its '\n') as it
  // arrives, and once at the end of the output for a last line without a newline (`terminated`
  // false) if there is one.
  using line_handler = std::function<void(const std::string& line, bool terminated)>;

  // Starts `path` with `args` (argv[0] is `path`). Throws std::system_error if it cannot start.
  // `on_line` and what it writes must outlive the reader threads (the destructor joins them).
  child_process(const std::string& path, const std::vector<std::string>& args, line_handler on_line);
  // Kills the process (SIGKILL) if wait_exit() has not seen it end, then joins the readers.
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  void send(int sig);

  // The exit status (128 + signal if killed by one), or nullopt if it is still running after
  // `limit`. Waits for the end of its output too, so everything it wrote has been handled.
  std::optional<int> wait_exit(std::chrono::milliseconds limit);
  // How long it ran, once wait_exit() saw it end.
  std::chrono::steady_clock::duration run_time() const { return exited_ - started_; }

  // Waits until `done()` (called with lock() held) holds, the output ended or `limit` passed;
  // returns whether it held.
  template <class Pred>
  bool wait_for(Pred done, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return done() || output_done_; }) && done();
  }
  // The lock under which on_line runs: hold it to read what on_line writes.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }

  std::string stdout_text() const;
  std::string stderr_text() const;

 private:
  void read(int fd, bool is_stdout);

  line_handler on_line_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point started_{};
  std::chrono::steady_clock::time_point exited_{};
  std::optional<int> exit_code_;
  mutable std::mutex mutex_;  // the fields below, written by the reader threads
  std::condition_variable cv_;
  std::string stdout_text_;
  std::string stderr_text_;
  bool output_done_ = false;
  std::thread stdout_reader_;
  std::thread stderr_reader_;
};

}  // namespace kgroup::test
