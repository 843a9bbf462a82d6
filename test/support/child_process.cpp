#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

extern char** environ;

namespace kgroup::test {

using steady = std::chrono::steady_clock;

child_process::child_process(const std::string& path, const std::vector<std::string>& args,
                             line_handler on_line)
    : on_line_(std::move(on_line)) {
  int out[2];
  int err[2];
  // Close-on-exec, so a second child never inherits the first one's pipes (which would hide the
  // first one's end of output); posix_spawn's dup2 clears the flag on fds 1 and 2.
  if (pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw std::system_error(e, std::generic_category(), "pipe2");
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // Catch2 installs handlers for SIGTERM and SIGINT; the child gets default dispositions and an
  // empty mask, as from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_storage{path};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int rc = posix_spawn(&pid_, path.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::system_error(rc, std::generic_category(), "posix_spawn " + path);
  }
  started_ = steady::now();
  stdout_reader_ = std::thread([this, fd = out[0]] { read(fd, true); });
  stderr_reader_ = std::thread([this, fd = err[0]] { read(fd, false); });
}

child_process::~child_process() {
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_reader_.joinable()) stdout_reader_.join();
  if (stderr_reader_.joinable()) stderr_reader_.join();
}

void child_process::send(int sig) {
  ::kill(pid_, sig);
}

std::optional<int> child_process::wait_exit(std::chrono::milliseconds limit) {
  using namespace std::chrono_literals;
  const auto deadline = steady::now() + limit;
  while (!exit_code_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      exited_ = steady::now();
      break;
    }
    if (steady::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
  if (stdout_reader_.joinable()) stdout_reader_.join();
  if (stderr_reader_.joinable()) stderr_reader_.join();
  return exit_code_;
}

std::string child_process::stdout_text() const {
  std::lock_guard lock(mutex_);
  return stdout_text_;
}

std::string child_process::stderr_text() const {
  std::lock_guard lock(mutex_);
  return stderr_text_;
}

void child_process::read(int fd, bool is_stdout) {
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard lock(mutex_);
    if (!is_stdout) {
      stderr_text_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    stdout_text_.append(buf, static_cast<std::size_t>(n));
    pending.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      on_line_(pending.substr(0, nl), true);
      pending.erase(0, nl + 1);
    }
    cv_.notify_all();
  }
  ::close(fd);
  if (is_stdout) {
    std::lock_guard lock(mutex_);
    if (!pending.empty()) on_line_(pending, false);
    output_done_ = true;
    cv_.notify_all();
  }
}

}  // namespace kgroup::test
